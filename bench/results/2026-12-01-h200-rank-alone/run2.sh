#!/usr/bin/env bash
# Second device call: what the ~10 µs fixed part of an `ab` window is. A 10 KB kernel
# (allreduce_residual at TP 1) gives the window's floor; gemv_int4 at the rank shapes with one and
# four K parts per tile (the default is two) tests the split-K epilogue. Writes under $OUT.
set -uo pipefail
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-rank-alone
$W ab allreduce_residual gemv_int4 --tp 1 --json "$OUT/floor.json" > "$OUT/floor.txt" 2>&1
for ks in 1 4; do
  WAVEFUSE_SCHEDULE_SM90=k_split=$ks $W ab gemv_int4 --model-config $R/qwen27b-tp4-rank.json --tp 1 --json "$OUT/rank-ksplit$ks.json" > "$OUT/rank-ksplit$ks.txt" 2>&1
done
$W ab gemv_int4 --model-config $R/qwen27b-tp4-rank.json --tp 1 --json "$OUT/rank-ksplit2.json" > "$OUT/rank-ksplit2.txt" 2>&1
grep -h "generated\|hand-written  " "$OUT"/floor.txt "$OUT"/rank-ksplit*.txt
