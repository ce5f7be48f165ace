#!/usr/bin/env bash
# Issues 36, 37, 38 — one device call from the repository root, with carry/ from
# scripts/build-gpu-binary.sh (carry/wavefuse) and carry/_wavefuse.abi3.so (the maturin wheel's
# extension; its commit in carry/SO_COMMIT).
#   1. every kernel of the set + a .wfir kernel as torch ops in one graph replayed 10,000 times,
#      then each op's per-call time in a graph timed as `ab --timing graphs` times it, beside
#      `ab --timing graphs` of the same kernel at the same shapes (bench/python/graph_replay.py --ab)
#   2. the two CUDA twins of issue 38 that failed on 2026-12-06-gpu-tickets (fixed in 117de27)
#   3. the package's GPU tests (the binding launches rank 0 on the current stream now)
#   4. the decoder's gate against the FP32 model (Llama-3.1-8B TP 1 batch 1, one run)
set -uo pipefail
BUDGET=${BUDGET:-570}
T0=$(date +%s)
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__)'
  echo "wavefuse binary $WAVEFUSE_COMMIT, extension $(cat carry/SO_COMMIT)"; } | tee "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then echo "$name: skipped (call budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -16 "$R/$name.log"; }
step 300 replay python3 bench/python/graph_replay.py --replays 10000 --ab carry/wavefuse --json "$OUT/replay.json"
cp "$R/replay.log" "$OUT/replay.txt"
for k in ${TWINS:-gemv_int4_fp16z gemv_int4_w4a8}; do
  shapes=qwen27b-tp1,qwen27b-tp4; [ $k = gemv_int4_fp16z ] && shapes=qwen27b-tp4
  step 45 "twin-$k" carry/wavefuse ab gemv_int4 --shapes $shapes --manual cli/tests/handwritten/$k.cu \
    --abi cli/tests/handwritten/$k.cu.abi.toml --timing graphs --iters 100 --json "$R/twin-$k.json" --md "$R/twin-$k.md"
done
for f in "$R"/twin-*.md; do [ -f "$f" ] && { echo "# $(basename "$f" .md)"; cat "$f"; echo; }; done > "$OUT/twins.md"
(cd python && step 60 pytest python3 -m pytest -q -rs tests/test_gpu.py -k "not ipc")
cp "$R/pytest.log" "$OUT/pytest.txt" 2>/dev/null
step 150 llama-gate python3 -m wf_decoder.ab --device cuda --paths a,b,c --steps 50 --runs 1 \
  --config llama31_8b --tp 1 --batch 1 --gate-ref auto --out "$R/llama31_8b_tp1"
cp "$R/llama31_8b_tp1/ab.md" "$OUT/decoder.md" 2>/dev/null
tar -C "$R" -czf "$OUT/all.tgz" .
