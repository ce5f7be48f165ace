#!/usr/bin/env bash
# Second device call of 2026-12-06-gpu-binding, from the repository root, with carry/ from
# scripts/build-gpu-binary.sh at the epoch-target barriers (carry/wavefuse, carry/COMMIT), the
# extension of the same commit (carry/_wavefuse.abi3.so) and the tickets' extension of c7a0c7f
# (carry/_wavefuse-tickets.abi3.so: grid barriers of flag kernels wait on a returned ticket).
#   1. cost: the two TP 4 kernels with a grid barrier and flags as torch ops, per call in a graph
#      (graph_replay.py's ab-alike timing), the tickets' and the new extension alternating, 3 rounds
#   2. replay: every kernel of the set + a .wfir kernel in one graph replayed 10,000 times; each
#      op's per-call time beside `ab --timing graphs` of the same kernel in the same call
#   3. compute-sanitizer memcheck and synccheck on the replayed graph (20 replays)
#   4. the package's GPU tests
#   5. the decoder A/B (issue 37's protocol: 3 runs x 50 steps, gate auto), Llama-3.1-8B TP 1 b 1, 8
set -uo pipefail
BUDGET=${BUDGET:-580}
T0=$(date +%s)
R=$(mktemp -d)
mkdir -p "$R/py-tickets" && cp -r python/wavefuse "$R/py-tickets/" && cp carry/_wavefuse-tickets.abi3.so "$R/py-tickets/wavefuse/_wavefuse.abi3.so"
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONUNBUFFERED=1 WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
NEW=$PWD/python:$PWD/examples/decoder; OLD=$R/py-tickets:$PWD/python/tests:$PWD/examples/decoder
export PYTHONPATH=$NEW
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__)'
  echo "wavefuse binary and extension $WAVEFUSE_COMMIT; tickets extension c7a0c7f"; } | tee "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then echo "$name: skipped (call budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -12 "$R/$name.log"; }
K2=gemv_int4_allreduce_rmsnorm,allreduce_residual_rmsnorm
i=0
for round in 1 2 3; do
  for side in tickets new new tickets; do
    i=$((i + 1)); [ $side = tickets ] && pp=$OLD || pp=$NEW
    PYTHONPATH=$pp step 40 "cost-$side-$i" python3 bench/python/graph_replay.py --replays 0 --samples 25 \
      --only $K2 --json "$R/cost-$side-$i.json"
  done
done
python3 - "$R" > "$OUT/cost.md" <<'PY'
import glob, json, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/cost-*.json")):
    side = f.rsplit("/", 1)[1].split("-")[1]
    for r in json.load(open(f))["kernels"]:
        t.setdefault((r["kernel"], side), []).append(r["per_call_us_in_graph"])
print("| kernel (TP 4, ranks on one GPU) | tickets µs (each process) | epoch target µs | median ratio |")
print("|---|---|---|---:|")
for k in sorted({k for k, _ in t}):
    a, b = t.get((k, "tickets"), []), t.get((k, "new"), [])
    if a and b:
        print(f"| `{k}` | {', '.join(f'{x:.2f}' for x in a)} | {', '.join(f'{x:.2f}' for x in b)} | "
              f"{statistics.median(b) / statistics.median(a):.3f} |")
PY
cat "$OUT/cost.md"
step 240 replay python3 bench/python/graph_replay.py --replays 10000 --ab carry/wavefuse --json "$OUT/replay.json"
cp "$R/replay.log" "$OUT/replay.txt"
for tool in memcheck synccheck; do
  step 100 "sanitizer-$tool" compute-sanitizer --tool $tool --error-exitcode 9 python3 bench/python/graph_replay.py --replays 20
  tail -4 "$R/sanitizer-$tool.log" > "$OUT/sanitizer-$tool.log"
done
(cd python && PYTHONPATH=$PWD:$PWD/../examples/decoder step 60 pytest python3 -m pytest -q -rs tests/test_gpu.py -k "not ipc")
cp "$R/pytest.log" "$OUT/pytest.txt" 2>/dev/null
step 240 llama python3 -m wf_decoder.ab --device cuda --paths a,b,c --steps 50 --runs 3 --profile 5 \
  --config llama31_8b --tp 1 --batch 1,8 --out "$R/llama31_8b_tp1"
cp "$R/llama31_8b_tp1/ab.md" "$OUT/decoder.md" 2>/dev/null; cp "$R/llama31_8b_tp1/ab.json" "$OUT/decoder.json" 2>/dev/null
tar -C "$R" --exclude=py-tickets -czf "$OUT/all.tgz" .
