#!/usr/bin/env bash
# Issue 36 after the weighted tickets (091af57), one device call from the repository root, with
# carry/ from scripts/build-gpu-binary.sh (carry/wavefuse: tickets), carry/wavefuse-devepoch (the
# 00264bb release binary: per-workgroup device epoch), carry/wavefuse-base (10541be: host-passed
# epoch) and carry/_wavefuse.abi3.so (maturin wheel's extension, same commit as carry/wavefuse).
#   bash run.sh kernels   what the synchronisation state costs: ab, the three binaries alternating
#                         (base, tickets, devepoch, tickets, base); every kernel of the set + a
#                         .wfir kernel as torch ops in one graph replayed 10,000 times; compute-
#                         sanitizer memcheck and synccheck on a replayed graph
#   bash run.sh engine    the decoder's paths a/b/c with --f32-logits (Llama-3.1-8B, TP 1, b 1 and
#                         8; 3 runs x 50 steps), the CUDA twins of issue 38's hand-written kernels
#                         in ab, and the package's GPU tests
#   bash run.sh all       by priority in one call: cost (4 rounds), replay, memcheck, the decoder's
#                         --f32-logits at Llama-3.1-8B TP 1 b 1 (one run), synccheck
# Each step has a timeout and is skipped when the call's budget (BUDGET s) would not cover it.
set -uo pipefail
PART=${1:-kernels}
BUDGET=${BUDGET:-560}
T0=$(date +%s)
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } \
  | tee "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then echo "$name: skipped (call budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -14 "$R/$name.log"; }
cost() { # ab rounds, alternating: base tickets devepoch tickets base (the first $1)
  K2="gemv_int4 gemv_int4_allreduce_rmsnorm"
  r=0
  for side in $(echo base tickets devepoch tickets base | cut -d" " -f1-"$1"); do r=$((r + 1))
    bin=carry/wavefuse; place="--placement same-device"
    [ $side = base ] && bin=carry/wavefuse-base && place=""
    [ $side = devepoch ] && bin=carry/wavefuse-devepoch
    step 45 "ab-$side-$r" "$bin" ab $K2 --shapes qwen27b-tp1,qwen27b-tp4 $place --timing graphs --iters 100 \
      --json "$R/ab-$side-$r.json" --md "$R/ab-$side-$r.md"
  done
  python3 bench/results/2026-12-06-gpu-tickets/table.py "$R" > "$OUT/cost.md" 2>&1; cat "$OUT/cost.md"; }
sanitize() {
  step 120 "sanitizer-$1" compute-sanitizer --tool $1 --error-exitcode 9 python3 bench/python/graph_replay.py --replays 20
  tail -4 "$R/sanitizer-$1.log" >> "$OUT/summary.txt"; }
kernels() {
  cost 5
  step 90 replay python3 bench/python/graph_replay.py --replays 10000 --json "$OUT/replay.json"
  sanitize memcheck; sanitize synccheck; }
twins() {
  # Issue 38: the CUDA twins of the hand-written kernels in the styles users write, A/B on the GPU.
  for k in ${TWINS:-gemv_int4_fp16z gemv_int4_splitk gemv_int4_splitk2 gemv_int4_w4a8}; do
    shapes=qwen27b-tp1,qwen27b-tp4; [ $k = gemv_int4_fp16z ] && shapes=qwen27b-tp4
    step 40 "twin-$k" carry/wavefuse ab gemv_int4 --shapes $shapes --manual cli/tests/handwritten/$k.cu \
      --abi cli/tests/handwritten/$k.cu.abi.toml --timing graphs --iters 100 --json "$R/twin-$k.json" --md "$R/twin-$k.md"
  done
  for f in "$R"/twin-*.md; do [ -f "$f" ] && { echo "# $(basename "$f" .md)"; cat "$f"; echo; }; done > "$OUT/twins.md"; }
engine() {
  step 200 llama-f32 python3 -m wf_decoder.ab --device cuda --paths a,b,c --steps 50 --runs 3 --profile 5 \
    --f32-logits --config llama31_8b --tp 1 --batch 1,8 --out "$R/llama31_8b_tp1"
  # Issue 38: the CUDA twins of the hand-written kernels in the styles users write, A/B on the GPU.
  for k in ${TWINS:-gemv_int4_fp16z gemv_int4_splitk gemv_int4_splitk2 gemv_int4_w4a8}; do
    shapes=qwen27b-tp1,qwen27b-tp4; [ $k = gemv_int4_fp16z ] && shapes=qwen27b-tp4
    step 40 "twin-$k" carry/wavefuse ab gemv_int4 --shapes $shapes --manual cli/tests/handwritten/$k.cu \
      --abi cli/tests/handwritten/$k.cu.abi.toml --timing graphs --iters 100 --json "$R/twin-$k.json" --md "$R/twin-$k.md"
  done
  for f in "$R"/twin-*.md; do [ -f "$f" ] && { echo "# $(basename "$f" .md)"; cat "$f"; echo; }; done > "$OUT/twins.md"
  (cd python && step 60 pytest python3 -m pytest -q -rs tests/test_gpu.py -k "not ipc")
  cp "$R/pytest.log" "$OUT/pytest.txt" 2>/dev/null
  for f in "$R"/*/ab.md; do [ -f "$f" ] && { echo "# $(basename "$(dirname "$f")")"; cat "$f"; echo; }; done > "$OUT/decoder.md"
  cat "$OUT/decoder.md"; }
all() { # by priority, within one call's budget
  cost 4; step 90 replay python3 bench/python/graph_replay.py --replays 10000 --json "$OUT/replay.json"
  sanitize memcheck
  step 120 llama-f32 python3 -m wf_decoder.ab --device cuda --paths a,b,c --steps 50 --runs 1 \
    --f32-logits --config llama31_8b --tp 1 --batch 1 --out "$R/llama31_8b_tp1"
  for f in "$R"/*/ab.md; do [ -f "$f" ] && { echo "# $(basename "$(dirname "$f")")"; cat "$f"; echo; }; done > "$OUT/decoder.md"
  sanitize synccheck; }
case "$PART" in
  kernels) kernels ;;
  engine) engine ;;
  all) all ;;
  twins) twins; [ -n "${TWINS:-}" ] || { (cd python && step 60 pytest python3 -m pytest -q -rs tests/test_gpu.py -k "not ipc"); cp "$R/pytest.log" "$OUT/pytest.txt"; } ;;
esac
tar -C "$R" -czf "$OUT/all-$PART.tgz" .
