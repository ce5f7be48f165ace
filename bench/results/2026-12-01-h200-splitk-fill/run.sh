#!/usr/bin/env bash
# One device call (H200): the split-K default that fills the device (codegen/src/lower/schedule.rs,
# FILL_PER_SM) against the previous default's K parts, alternating twice, in CUDA graphs, each
# kernel without an allreduce timed as one rank alone; then the tuned store re-run on the current
# kernels (scripts/tune-h200.sh). Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
G=bench/results/2026-12-01-h200-rank-alone-graphs
ab() { # $1 = name, $2 = k_split override ("" = the default), then flags
    local name=$1 ks=$2; shift 2
    if [ -n "$ks" ]; then
        WAVEFUSE_SCHEDULE_SM90=k_split=$ks timeout 120 $W ab "$@" --timing graphs --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    else
        timeout 120 $W ab "$@" --timing graphs --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    fi
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
for round in ${ROUNDS:-1 2}; do
    # ROUNDS and TUNE=0 split the run over two device calls (a call has 600 s).
    ab r$round-row17408-new "" --kernel-file $G/row17408.wfir
    ab r$round-row17408-old 2 --kernel-file $G/row17408.wfir
    ab r$round-o_proj_rank-new "" --kernel-file $G/o_proj_rank.wfir
    ab r$round-o_proj_rank-old 4 --kernel-file $G/o_proj_rank.wfir
    ab r$round-set-new "" gemv_int4 gemv_int4_qkv gemv_int4_dual_silu --shapes qwen27b-tp2,qwen27b-tp8
    ab r$round-set-old5 5 gemv_int4 gemv_int4_qkv --shapes qwen27b-tp2,qwen27b-tp8
    ab r$round-dual-old4 4 gemv_int4_dual_silu --shapes qwen27b-tp8
done
ab down_rank "" --kernel-file $G/down_rank.wfir
if [ "${TUNE:-1}" = 1 ]; then
    OUT="$OUT/tune" BUDGET_S=330 timeout 360 bash scripts/tune-h200.sh > "$OUT/tune-h200.txt" 2>&1
    echo "tune-h200: exit $?" >> "$OUT/exits.txt"
fi
tar czf "$FINAL/results.tgz" -C "$OUT" .
cp "$OUT/tune/tuned.toml" "$FINAL/tuned.toml" 2>/dev/null
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
for f in "$OUT"/r*.txt "$OUT/down_rank.txt"; do
    echo "== $(basename $f)"; grep -E "^[a-z_0-9]+@.* generated " "$f" | head -12
done
cat "$OUT/tune/summary.txt" 2>/dev/null
cat "$OUT/tune/ab-tuned.md" 2>/dev/null | head -30
