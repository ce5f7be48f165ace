#!/usr/bin/env bash
# Fifth device call of 2026-12-06-gpu-binding, carry/ from scripts/build-gpu-binary.sh at the
# one-graph capture of ranks sharing a device (carry/wavefuse), the extension of 2771ae6 (same
# kernels): the TP 4 ops beside `ab --timing graphs` again (graph_replay.py --rank-streams --ab),
# twice; then `mgpu-bench --same-device` (the other user of the capture) once, short.
set -uo pipefail
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
K=allreduce_residual,allreduce_residual_rmsnorm,gemv_int4_allreduce_rmsnorm,allreduce_int8
for i in 1 2; do
  timeout 200 python3 bench/python/graph_replay.py --replays 100 --only $K --rank-streams --ab carry/wavefuse \
    --json "$OUT/rank-streams-$i.json" 2>&1 | tee "$OUT/rank-streams-$i.txt"
  echo "run $i: exit ${PIPESTATUS[0]}" | tee -a "$OUT/summary.txt"
done
timeout 120 carry/wavefuse mgpu-bench --same-device --tp 4 --samples 5 --md "$OUT/mgpu.md" > "$OUT/mgpu.txt" 2>&1
echo "mgpu-bench: exit $?" | tee -a "$OUT/summary.txt"; tail -12 "$OUT/mgpu.txt"
