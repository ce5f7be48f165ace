#!/usr/bin/env bash
# Issue 37, one device call: the decoder A/B after the glue change (RoPE + KV-cache writes in one
# compiled function, the mask once per step), every path: Llama-3.1-8B TP 1 batch 1 and 8 (a, b,
# c), TP 4 with the ranks on one GPU batch 1 (a, c, c2: c2's row kernel binds since the
# co-residency fit counts flags), qwen27b_dense TP 1 batch 1 and 8 (a, b, c); 3 runs x 50 steps,
# paths alternating, the profile of a step.
# Usage, repository root, carry/ holding the binary, COMMIT and the extension:
#   bash bench/results/2026-12-06-gpu-decoder-ab/run.sh
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
  grep -E "^\| [0-9]+ \| [0-9]+ \| (torch|wave)" "$R/$n/ab.md" | cut -c1-160 | tee -a "$OUT/summary.txt"
  tail -2 "$R/$n.log" >> "$OUT/summary.txt"
}
run llama-tp1 170 --config llama31_8b --tp 1 --batch 1,8 --paths a,b,c
run llama-tp4 120 --config llama31_8b --tp 4 --batch 1 --paths a,c,c2
run qwen-tp1 220 --config qwen27b_dense --tp 1 --batch 1,8 --paths a,b,c
tar -C "$R" -czf "$OUT/all.tgz" .
cp -r "$OUT"/. "$FINAL"/
