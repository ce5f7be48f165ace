#!/usr/bin/env bash
# Fourth device call of 2026-12-06-gpu-binding (same carry/ as call3/run3.sh): why the TP 4 ops
# (ranks on one GPU) time 4-13 % under `ab --timing graphs`. The op forks and joins its ranks'
# side streams at every call; ab captures each rank's calls back to back on its own stream.
# graph_replay.py --rank-streams times the op both ways, beside ab, twice.
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
