#!/usr/bin/env bash
# Session 5: at TP > 1 (ranks sharing the GPU), 5 parts (2 units per K warp, balanced) vs the
# default 4, alternating twice; TP 2 / 4 / 8 at batch 1, TP 4 at batch 8.
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
S=qwen27b-tp2,qwen27b-tp4,qwen27b-tp8,qwen27b-tp4-b8
for i in 1 2; do
  timeout 100 carry/wavefuse ab gemv_int4 gemv_int4_qkv --shapes $S --md $OUT/p4-$i.md > $OUT/p4-$i.txt 2>&1
  WAVEFUSE_SCHEDULE=k_split=5 timeout 100 carry/wavefuse ab gemv_int4 gemv_int4_qkv --shapes $S --md $OUT/p5-$i.md > $OUT/p5-$i.txt 2>&1
done
for f in p4-1 p5-1 p4-2 p5-2; do echo "$f: $(grep -E '^\| gemv' $OUT/$f.md | grep generated | awk -F'|' '{printf "%s %s %s %s; ", $2,$3,$5,$8}')"; done
tar czf $OUT/txt.tgz -C $OUT p4-1.txt p4-2.txt p5-1.txt p5-2.txt && rm $OUT/*.txt
