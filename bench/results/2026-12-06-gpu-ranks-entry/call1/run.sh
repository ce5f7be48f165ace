#!/usr/bin/env bash
# Issue 36, one device call: the ranks entry (ranks sharing one GPU launched as one grid of
# tp x grid workgroups, each rank's arrays by value) against the per-call fork/join it replaces.
# From the repository root, carry/ holding the release binary (carry/wavefuse, carry/COMMIT), the
# extension of the same commit (carry/_wavefuse.abi3.so), the package and extension of d290984
# (carry/py-old/wavefuse: the fork/join binding, same kernels) and the runtime's GPU test binary
# (carry/runtime-gpu-tests).
#   1. cost: the four TP 4 communicating kernels as torch ops, per call in a graph
#      (graph_replay.py's ab-alike timing), old and new package alternating, 2 rounds each
#   2. replay: every kernel of the set + a .wfir kernel in one graph replayed 10,000 times, the
#      oracle and error words after it; each op beside `ab --timing graphs` of the same kernel
#   3. compute-sanitizer memcheck and synccheck on the replayed graph (20 replays)
#   4. the runtime's GPU tests of same-device groups (handshake 1000x, streams and fused grid)
#   5. the package's GPU tests
#   6. the decoder at TP 4 on one GPU, paths a, c, c2, batch 1 (3 runs x 50 steps)
set -uo pipefail
BUDGET=${BUDGET:-585}
T0=$(date +%s)
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
# NVRTC for the runtime's test binary: the pip wheel's that PyTorch brought (as bench/device-prelude.sh).
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
    if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
  done
fi
export PYTHONUNBUFFERED=1 WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
NEW=$PWD/python:$PWD/examples/decoder; OLD=$PWD/carry/py-old:$PWD/python/tests
export PYTHONPATH=$NEW
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__)'
  echo "wavefuse binary and extension $WAVEFUSE_COMMIT; old package d290984"; } | tee "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then echo "$name: skipped (call budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -14 "$R/$name.log"; }
K=allreduce_residual,allreduce_residual_rmsnorm,gemv_int4_allreduce_rmsnorm,allreduce_int8
for round in 1 2; do
  for side in old new; do
    pp=$NEW; [ $side = old ] && pp=$OLD
    PYTHONPATH=$pp step 60 "cost-$side-$round" python3 bench/python/graph_replay.py --replays 0 --samples 25 \
      --only $K --json "$R/cost-$side-$round.json"
  done
done
python3 - "$R" <<'PY' | tee "$OUT/cost.md"
import json, sys, glob, os
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "cost-*.json"))):
    side = os.path.basename(f).split("-")[1]
    try:
        for r in json.load(open(f))["kernels"]:
            rows.setdefault(r["kernel"], {}).setdefault(side, []).append(r["per_call_us_in_graph"])
    except Exception as e:
        print(f"{f}: {e}")
print("| kernel, TP 4 on one GPU | old: fork/join per call (us) | new: ranks entry (us) | new / old |")
print("|---|---:|---:|---:|")
for k, v in rows.items():
    o, n = v.get("old", []), v.get("new", [])
    ratio = f"{(sum(n)/len(n))/(sum(o)/len(o)):.3f}" if o and n else "-"
    print(f"| `{k}` | {', '.join(f'{x:.2f}' for x in o)} | {', '.join(f'{x:.2f}' for x in n)} | {ratio} |")
PY
step 200 replay python3 bench/python/graph_replay.py --replays 10000 --ab carry/wavefuse --json "$OUT/replay.json"
cp "$R/replay.log" "$OUT/replay.txt"
for tool in memcheck synccheck; do
  step 100 "sanitizer-$tool" compute-sanitizer --tool $tool --error-exitcode 9 python3 bench/python/graph_replay.py --replays 20 --only $K
  tail -4 "$R/sanitizer-$tool.log" > "$OUT/sanitizer-$tool.log"
done
step 60 runtime-gpu carry/runtime-gpu-tests --ignored --test-threads 1 one_device
cp "$R/runtime-gpu.log" "$OUT/runtime-gpu.txt"
(cd python && PYTHONPATH=$PWD:$PWD/../examples/decoder step 60 pytest python3 -m pytest -q -rs tests/test_gpu.py -k "not ipc")
cp "$R/pytest.log" "$OUT/pytest.txt" 2>/dev/null
step 150 decoder-tp4 python3 -m wf_decoder.ab --device cuda --steps 50 --runs 3 --config llama31_8b --tp 4 \
  --batch 1 --paths a,c,c2 --out "$R/dec"
cp "$R/dec/ab.md" "$OUT/decoder-tp4.md" 2>/dev/null
echo "total $(( $(date +%s) - T0 )) s" | tee -a "$OUT/summary.txt"
