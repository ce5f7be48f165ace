#!/usr/bin/env bash
# The engine issues' GPU done-when (36 and 37) at 9971a4b, in one or two device calls from the repository
# root, with carry/ from scripts/build-gpu-binary.sh (carry/wavefuse), carry/wavefuse-base (the
# release binary of 10541be: the host-passed epoch) and carry/_wavefuse.abi3.so (the maturin wheel's
# extension; `maturin build --release -m python/Cargo.toml --compatibility linux`).
#   bash run.sh decoder   tokens/s of paths a, b, c (issue 37): Llama-3.1-8B and the Qwen 3.5 27B
#                         dense shapes, TP 1 batch 1 and 8, TP 4 (ranks on one GPU); the package's
#                         GPU tests
#   bash run.sh all       both, by priority, skipping what the call's budget does not cover
#   bash run.sh kernels   the device epoch's cost (ab, base and new binary alternating, two rounds);
#                         every kernel of the set in ab and as torch ops in one graph replayed
#                         10,000 times (per-call time against ab's); compute-sanitizer on a
#                         replayed graph (issue 36)
# Each step has a timeout and is skipped when the call's budget (BUDGET s) would not cover it;
# $OUT gets at most 6 files (summary.txt, decoder.md, epoch.md, replay.json, ab-all.md, all-PART.tgz).
set -uo pipefail
PART=${1:-decoder}
BUDGET=${BUDGET:-540}
T0=$(date +%s)
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv;
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } \
  | tee "$R/device.txt" "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then echo "$name: skipped (call budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -14 "$R/$name.log"; }
D="python3 -m wf_decoder.ab --device cuda --paths a,b,c --steps 50 --runs 3 --profile 5"
decoder_tp1() {
  step 100 llama-tp1 $D --config llama31_8b --tp 1 --batch 1,8 --out "$R/llama31_8b_tp1"
  step 100 qwen-tp1 $D --config qwen27b_dense --tp 1 --batch 1,8 --out "$R/qwen27b_dense_tp1"; }
decoder_tp4() {
  step 100 llama-tp4 $D --config llama31_8b --tp 4 --batch 1,8 --out "$R/llama31_8b_tp4"
  step 120 qwen-tp4 $D --config qwen27b_dense --tp 4 --batch 1,8 --out "$R/qwen27b_dense_tp4"; }
pytests() { (cd python && step 80 pytest python3 -m pytest -q -rs tests/test_gpu.py -k "not ipc"); }
kernels() {
  K2="gemv_int4 gemv_int4_allreduce_rmsnorm"
  for r in 1 2; do for side in base new; do bin=carry/wavefuse; place="--placement same-device"
    [ $side = base ] && bin=carry/wavefuse-base && place=""
    step 45 "ab-$side-$r" "$bin" ab $K2 --shapes qwen27b-tp1,qwen27b-tp4 $place --timing graphs --iters 100 \
      --json "$R/ab-$side-$r.json" --md "$R/ab-$side-$r.md"
  done; done
  python3 bench/results/2026-12-05-h100-engine/epoch_table.py "$R" > "$OUT/epoch.md" 2>&1; cat "$OUT/epoch.md"
  step 90 replay python3 bench/python/graph_replay.py --replays 10000 --json "$OUT/replay.json"
  step 70 ab-all carry/wavefuse ab gemv_f16 gemv_int4 gemv_int4_dual_silu gemv_int4_qkv allreduce_residual \
    allreduce_residual_rmsnorm gemv_int4_allreduce_rmsnorm allreduce_int8 --shapes qwen27b-tp1,qwen27b-tp4 \
    --placement same-device --timing graphs --iters 100 --json "$R/all.json" --md "$OUT/ab-all.md"; }
sanitizers() {
  for tool in memcheck synccheck; do
    step 110 "sanitizer-$tool" compute-sanitizer --tool $tool --error-exitcode 9 python3 bench/python/graph_replay.py --replays 20
    tail -3 "$R/sanitizer-$tool.log" >> "$OUT/summary.txt"
  done; }
case "$PART" in
  decoder) decoder_tp1; decoder_tp4; pytests ;;
  kernels) kernels; sanitizers ;;
  all) decoder_tp1; kernels; decoder_tp4; pytests; sanitizers ;; # by priority, within one call's budget
esac
for f in "$R"/*/ab.md; do [ -f "$f" ] && { echo "# $(basename "$(dirname "$f")")"; cat "$f"; echo; }; done > "$OUT/decoder.md"
cat "$OUT/decoder.md"
tar -C "$R" -czf "$OUT/all-$PART.tgz" .
