#!/usr/bin/env bash
# One device call (H200): a GEMV prologue recomputed by every workgroup (the default) vs
# materialised once behind a grid barrier (`materialise_prologue=true`): RMSNorm + INT4 gate/up +
# silu·mul, 5120 → 2 × 17408, TP 1, batch 1 and 8, `ab --timing graphs`, alternating twice.
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-01-h200-prologue-materialise
ab() { # name, kernel file, override
    local name=$1 file=$2 ov=$3
    WAVEFUSE_SCHEDULE_SM90=$ov timeout 120 $W ab --kernel-file "$file" --timing graphs \
        --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
for round in 1 2; do
    for b in 1 8; do
        ab r$round-b$b-recompute $D/norm_gate_up_b$b.wfir ""
        ab r$round-b$b-materialise $D/norm_gate_up_b$b.wfir materialise_prologue=true
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
for f in "$OUT"/r*.txt; do
    echo "== $(basename "$f")"; grep -E "generated |schedule:" "$f" | head -3
done
