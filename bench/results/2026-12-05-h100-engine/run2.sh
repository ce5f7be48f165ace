#!/usr/bin/env bash
# The second call of this run (see run.sh): after the device epoch moved to one word per workgroup,
# and with the Python extension built by maturin (the first call's cargo-built one linked
# libpython3.11). Same steps, plus TP 4 (ranks on one GPU) and the package's GPU tests; each
# result is copied to $OUT as it is made.
# Two device calls (each under 600 s): `bash run2.sh kernels` (ab old/new, the 10,000-replay graph,
# compute-sanitizer) and `bash run2.sh decoder` (tokens/s of paths a, b, c; the GPU tests).
set -uo pipefail
PART=${1:-kernels}
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
nvidia-smi -L | tee "$R/device.txt" "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2; echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -12 "$R/$name.log"; }
if [ "$PART" = kernels ]; then
# The base binary (10541be) predates --placement: it puts TP 4's ranks on one GPU as the new
# binary's same-device placement does.
for side in base new; do bin=carry/wavefuse; place="--placement same-device"
  [ $side = base ] && bin=carry/wavefuse-base && place=""
  step 40 "ab-$side" "$bin" ab gemv_int4 gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp1,qwen27b-tp4 $place --timing graphs --iters 100 --json "$R/ab-$side-1.json" --md "$R/ab-$side-1.md"
done
python3 bench/results/2026-12-05-h100-engine/epoch_table.py "$R" > "$OUT/epoch.md" 2>&1; cat "$OUT/epoch.md"
step 80 replay python3 bench/python/graph_replay.py --replays 10000 --json "$OUT/replay.json"
# compute-sanitizer on a replayed graph (issue 36): memcheck and synccheck, 20 replays each.
for tool in memcheck synccheck; do
  step 120 "sanitizer-$tool" compute-sanitizer --tool $tool --error-exitcode 9 python3 bench/python/graph_replay.py --replays 20
  tail -3 "$R/sanitizer-$tool.log" >> "$OUT/summary.txt"
done
fi
if [ "$PART" = decoder ]; then
D="python3 -m wf_decoder.ab --device cuda --paths a,b,c --steps 50 --runs 3"
step 90 llama $D --config llama31_8b --tp 1 --batch 1,8 --out "$R/llama31_8b"; cp "$R/llama31_8b/ab.md" "$OUT/llama.md"
step 90 qwen $D --config qwen27b_dense --tp 1 --batch 1,8 --out "$R/qwen27b_dense"; cp "$R/qwen27b_dense/ab.md" "$OUT/qwen.md"
step 70 llama-tp4 $D --config llama31_8b --tp 4 --batch 1 --out "$R/llama31_8b_tp4"; cp "$R/llama31_8b_tp4/ab.md" "$OUT/llama-tp4.md"
(cd python && step 60 pytest python3 -m pytest -q -rs -x tests/test_gpu.py -k "not ipc"); cp "$R/pytest.log" "$OUT/pytest.txt" 2>/dev/null
fi
tar -C "$R" -czf "$OUT/all-$PART.tgz" .
