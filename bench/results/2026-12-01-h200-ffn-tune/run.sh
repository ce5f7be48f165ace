#!/usr/bin/env bash
# One device call (H200): `wavefuse tune` on the one-launch FFN block (a user kernel from its
# textual IR) at TP 1 and TP 4 (ranks on one GPU) — is there a schedule of the one launch that
# beats the two-kernel chain? Then the winners and the chain in CUDA graphs side by side
# (mgpu-bench --same-device), alternating twice. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
R=bench/results/2026-12-01-h200-ffn-one-launch
for k in ffn_block_tp1 ffn_block; do
    timeout 200 $W tune --kernel-file $R/$k.wfir --budget ${BUDGET:-120} --store "$OUT/tuned-$k.toml" \
        --json "$OUT/tune-$k.json" --md "$OUT/tune-$k.md" > "$OUT/tune-$k.txt" 2>&1
    echo "tune $k: exit $?" >> "$OUT/exits.txt"
done
bench() { # name, then mgpu-bench flags
    local name=$1; shift
    timeout 120 $W mgpu-bench --same-device --samples 10 --calls 50 "$@" \
        --json "$OUT/$name.json" --md "$OUT/$name.md" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
# The TP 1 winner as an explicit override (mgpu-bench takes the environment's overrides; the
# store keys it by the IR's kernel name, `ffn_block`).
SPEC=$(python3 - "$OUT/tuned-ffn_block_tp1.toml" ffn_block <<'PY'
import sys, tomllib
try:
    d = tomllib.load(open(sys.argv[1], 'rb'))
except OSError:
    d = {}
for e in d.get('entry', []):
    if e['kernel'] == sys.argv[2]:
        print(','.join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in e['schedule'].items()))
        break
PY
)
echo "winner override: ${SPEC:-none (the default stays)}" >> "$OUT/exits.txt"
for round in 1 2; do
    export WAVEFUSE_SCHEDULE_SM90=$SPEC
    bench tp1-tuned-$round --kernel-file $R/ffn_block_tp1.wfir
    unset WAVEFUSE_SCHEDULE_SM90
    bench tp1-chain-$round --kernel-file $R/chain1_gate_up_silu_tp1.wfir --kernel-file $R/chain2_down_allreduce_norm_tp1.wfir
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
cp "$OUT"/tuned-*.toml "$FINAL/" 2>/dev/null
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
for k in ffn_block_tp1 ffn_block; do grep -E "schedules enumerated|winner|no winner" "$OUT/tune-$k.txt"; done
for f in tp1-tuned-1 tp1-chain-1 tp1-tuned-2 tp1-chain-2; do
    echo "== $f"; grep -E "^\| |schedule:" "$OUT/$f.md" "$OUT/$f.txt" | tail -2
done
