#!/usr/bin/env bash
# Session 5: the balanced K split (default now P = 2 for K = 5120) vs the previous P = 4
# (WAVEFUSE_SCHEDULE=k_split=4), alternating twice, batch 1 and 8, TP 1 and 4.
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
S=qwen27b-tp1,qwen27b-tp4,qwen27b-tp1-b8,qwen27b-tp4-b8
for i in 1 2; do
  timeout 100 carry/wavefuse ab gemv_int4 gemv_int4_qkv --shapes $S --md $OUT/new-$i.md > $OUT/new-$i.txt 2>&1
  WAVEFUSE_SCHEDULE=k_split=4 timeout 100 carry/wavefuse ab gemv_int4 gemv_int4_qkv --shapes $S --md $OUT/p4-$i.md > $OUT/p4-$i.txt 2>&1
done
for f in new-1 p4-1 new-2 p4-2; do echo "$f: $(grep -E '^\| gemv' $OUT/$f.md | grep generated | awk -F'|' '{printf "%s %s %s %s; ", $2,$3,$5,$8}')"; done
tar czf $OUT/txt.tgz -C $OUT new-1.txt new-2.txt p4-1.txt p4-2.txt && rm $OUT/*.txt
