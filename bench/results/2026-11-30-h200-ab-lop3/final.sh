#!/usr/bin/env bash
# Session 5 final A/B on the H200: the ab table at TP 4 / TP 1, the fused kernel vs the unfused
# chain in CUDA graphs with every rank on the GPU, the FFN block (scripts/ffn-h200.sh).
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/device.txt
timeout 240 carry/wavefuse ab --shapes qwen27b-tp4,qwen27b-tp1 --json $OUT/ab.json --md $OUT/ab.md > $OUT/ab.txt 2>&1; echo "ab rc $?" >> $OUT/ab.txt
timeout 100 carry/wavefuse mgpu-bench --same-device --tp 4,2 --md $OUT/samedev.md --json $OUT/samedev.json > $OUT/samedev.txt 2>&1
mkdir -p $OUT/ffn; OUT=$OUT/ffn timeout 200 bash scripts/ffn-h200.sh > $OUT/ffn.log 2>&1
tar czf $OUT/ffn.tgz -C $OUT ffn ffn.log samedev.txt samedev.json && rm -rf $OUT/ffn $OUT/ffn.log $OUT/samedev.txt $OUT/samedev.json
grep -E "^\| " $OUT/ab.md | grep generated | awk -F'|' '{print $2,$3,$8,$17}'; grep -E "fused|unfused" $OUT/samedev.md | awk -F'|' '{print $2,$3,$5}'
