#!/usr/bin/env bash
# Issue 37, one device call: does tuning the fused path's own kernels move the decoder's tokens/s?
# 1. the decoder builds path (c)'s kernels for Llama-3.1-8B TP 1 batch 1 and writes each as .wfir
#    (--dump-ir); 2. `wavefuse tune --kernel-file` each (--quick, 40 s deadline), winners into the
#    cache directory's store (and $OUT/tuned.toml); 3. the A/B protocol (3 runs x 50 steps, paths a
#    and c, gate against the FP32 model) with --schedule default, then --schedule tuned: (a) is the
#    control between the two processes.
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh and the extension:
#   bash bench/results/2026-12-06-h100-decoder-tuned/run.sh
set -uo pipefail
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
A="python3 -m wf_decoder.ab --device cuda --config llama31_8b --tp 1 --batch 1"
timeout 120 $A --paths c --steps 2 --runs 1 --warmup-steps 1 --gate-ref a --dump-ir "$R/ir" --out "$R/dump" > "$R/dump.log" 2>&1
echo "dump: exit $? ($(el) s): $(ls "$R/ir" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
for f in "$R"/ir/*.wfir; do
  n=$(basename "$f" .wfir)
  timeout 80 carry/wavefuse tune --kernel-file "$f" --quick --deadline 40 --store "$OUT/tuned.toml" \
    --md "$R/tune-$n.md" > "$R/tune-$n.txt" 2>&1
  echo "tune $n: exit $? ($(el) s): $(grep -m1 -E 'winner|no winner' "$R/tune-$n.txt")" | tee -a "$OUT/summary.txt"
done
for s in default tuned; do
  timeout 150 $A --paths a,c --steps 50 --runs 3 --schedule $s --out "$R/ab-$s" > "$R/ab-$s.log" 2>&1
  echo "ab $s: exit $? ($(el) s)" | tee -a "$OUT/summary.txt"
  cp "$R/ab-$s/ab.md" "$OUT/decoder-$s.md" 2>/dev/null
  grep -E "^\| 1 \| 1 \|" "$R/ab-$s/ab.md" | head -2
done
grep -h "schedule:" "$R/ab-tuned.log" | sort | uniq -c | head -12
cat "$R"/tune-*.md > "$OUT/tune.md" 2>/dev/null
tar -C "$R" -czf "$OUT/all.tgz" .
