#!/usr/bin/env bash
# Issue 37, the second half of one device call (after 2026-12-06-gpu-mma-phases): the decoder A/B
# of paths (a), (b), (c) at TP 1, batch 1 and 8, Llama-3.1-8B and the Qwen 3.5 27B dense shapes
# (64 layers), and Llama at TP 4 (ranks on one GPU) batch 1; 3 runs x 50 steps, paths
# alternating, a profile of 5 steps; the
# gate against the FP32 model (auto: (a) is BF16 on CUDA), which for qwen27b_dense now
# dequantises per call where its float32 weights do not fit (51483e1; first GPU run).
# Usage, repository root, carry/ holding the binary, COMMIT and the extension (the call ran both):
#   mkdir -p $OUT/mma $OUT/dec
#   OUT=$OUT/mma bash bench/results/2026-12-06-gpu-mma-phases/run.sh
#   OUT=$OUT/dec bash bench/results/2026-12-06-gpu-decoder-final/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
A="python3 -m wf_decoder.ab --device cuda --steps 50 --runs 3 --profile 5 --paths a,b,c --batch 1,8"
run() { # name, timeout, args...
  local n=$1 t=$2; shift 2
  timeout "$t" $A "$@" --out "$R/$n" > "$R/$n.log" 2>&1
  echo "$n: exit $? ($(el) s)" | tee -a "$OUT/summary.txt"
  cp "$R/$n/ab.md" "$OUT/$n.md" 2>/dev/null
  cp "$R/$n/ab.png" "$OUT/$n.png" 2>/dev/null
  grep -E "^\| [0-9]+ \| [0-9]+ \| (torch|wave)" "$R/$n/ab.md" | cut -c1-200 | tee -a "$OUT/summary.txt"
  tail -3 "$R/$n.log" >> "$OUT/summary.txt"
  cp -r "$OUT"/. "$FINAL"/ # kept even if a later run hits the call's limit
}
run llama-tp1 90 --config llama31_8b --tp 1
run qwen-tp1 160 --config qwen27b_dense --tp 1
run llama-tp4 80 --config llama31_8b --tp 4 --batch 1
tar -C "$R" -czf "$OUT/all.tgz" .
cp -r "$OUT"/. "$FINAL"/
