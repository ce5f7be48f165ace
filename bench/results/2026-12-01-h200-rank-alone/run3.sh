#!/usr/bin/env bash
# Third device call: K parts per tile (k_split) swept for gemv_int4 and gemv_int4_dual_silu at the
# rank-alone shapes, and gemv_int4 at qwen27b-tp1, in one run (the default is 2 for these).
set -uo pipefail
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-rank-alone
for ks in 2 4 5 8 10 20; do
  WAVEFUSE_SCHEDULE_SM90=k_split=$ks $W ab gemv_int4 gemv_int4_dual_silu --model-config $R/qwen27b-tp4-rank.json --tp 1 --json "$OUT/sweep-rank-k$ks.json" > "$OUT/sweep-rank-k$ks.txt" 2>&1
  WAVEFUSE_SCHEDULE_SM90=k_split=$ks $W ab gemv_int4 --tp 1 --json "$OUT/sweep-qwen-k$ks.json" > "$OUT/sweep-qwen-k$ks.txt" 2>&1
done
for ks in 2 4 5 8 10 20; do echo "k_split=$ks"; grep -hE "@.*generated +[0-9]" "$OUT/sweep-rank-k$ks.txt" "$OUT/sweep-qwen-k$ks.txt"; done > "$OUT/sweep-summary.txt"
# At most 8 files come back from the device: the reports travel as one archive.
tar -C "$OUT" -czf "$OUT/sweep.tgz" $(cd "$OUT" && ls sweep-*-k*.txt sweep-*-k*.json)
rm -f "$OUT"/sweep-*-k*.txt "$OUT"/sweep-*-k*.json
cat "$OUT/sweep-summary.txt"
