#!/usr/bin/env bash
# Issue 37, one device call: path (c) with each RMSNorm moved into the GEMV that reads it
# (wavefuse_fused_prenorm, "c2": .wfir kernels, no grid barrier in a layer, every kernel a
# programmatic dependent) against (c) as before and (a), Llama-3.1-8B at TP 1 batch 1 and 8, then
# TP 4 (ranks on one GPU) batch 1, and qwen27b_dense TP 1 batch 1; 3 runs x 50 steps, paths
# alternating, the profile of a step (with its 20 heaviest kernels in ab.json).
# Usage, repository root, carry/ holding the binary, COMMIT and the extension:
#   bash bench/results/2026-12-06-gpu-prenorm/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
A="python3 -m wf_decoder.ab --device cuda --steps 50 --runs 3 --profile 5"
run() { # name, timeout, args...
  local n=$1 t=$2; shift 2
  timeout "$t" $A "$@" --out "$R/$n" > "$R/$n.log" 2>&1
  echo "$n: exit $? ($(el) s)" | tee -a "$OUT/summary.txt"
  cp "$R/$n/ab.md" "$OUT/$n.md" 2>/dev/null
  cp "$R/$n/ab.json" "$OUT/$n.json" 2>/dev/null
  grep -E "^\| [0-9]+ \| [0-9]+ \| (torch|wave)" "$R/$n/ab.md" | cut -c1-200 | tee -a "$OUT/summary.txt"
  tail -3 "$R/$n.log" >> "$OUT/summary.txt"
}
run llama-tp1 240 --config llama31_8b --tp 1 --batch 1,8 --paths a,c,c2
run llama-tp4 120 --config llama31_8b --tp 4 --batch 1 --paths a,c,c2
run qwen-tp1 180 --config qwen27b_dense --tp 1 --batch 1 --paths a,c,c2
tar -C "$R" -czf "$OUT/all.tgz" .
cp -r "$OUT"/. "$FINAL"/
