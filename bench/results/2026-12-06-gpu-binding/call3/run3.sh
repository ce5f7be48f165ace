#!/usr/bin/env bash
# Third device call of 2026-12-06-gpu-binding, from the repository root, with carry/ from
# scripts/build-gpu-binary.sh at the spin-kernel gate of `ab --timing graphs` (carry/wavefuse,
# carry/COMMIT) and the extension of the epoch-target barriers (carry/_wavefuse.abi3.so; the
# kernels are the same, the gate is ab's alone):
#   every kernel of the set + a .wfir kernel as torch ops in one graph replayed 10,000 times; each
#   op's per-call time in a graph beside `ab --timing graphs` of the same kernel, same call
set -uo pipefail
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
for i in 1 2; do
  timeout 240 python3 bench/python/graph_replay.py --replays 10000 --ab carry/wavefuse --json "$OUT/replay-$i.json" \
    2>&1 | tee "$OUT/replay-$i.txt"
  echo "replay $i: exit ${PIPESTATUS[0]}" | tee -a "$OUT/summary.txt"
done
