#!/usr/bin/env bash
# Issues 36 and 37 on one GPU, one call: the wavefuse Python package's ops in one CUDA graph
# replayed 10,000 times (bench/python/graph_replay.py); the decoder A/B in tokens/s
# (examples/decoder, paths a/b/c) at Llama-3.1-8B and Qwen 3.5 27B dense shapes; and what the
# device epoch costs (`ab --timing graphs`, the binary before it vs after it).
# From the repository root on the device, with carry/ (wavefuse, wavefuse-base, _wavefuse.abi3.so).
set -uo pipefail
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
nvidia-smi -L | tee "$R/device.txt"
step() { local t=$1 name=$2; shift 2; echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$R/summary.txt"; tail -25 "$R/$name.log"; }
step 90 replay python3 bench/python/graph_replay.py --replays 10000 --json "$R/replay.json"
step 140 llama python3 -m wf_decoder.ab --config llama31_8b --device cuda --paths a,b,c --tp 1 --batch 1,8 --steps 50 --runs 3 --out "$R/llama31_8b"
step 130 qwen python3 -m wf_decoder.ab --config qwen27b_dense --device cuda --paths a,b,c --tp 1 --batch 1 --steps 50 --runs 3 --out "$R/qwen27b_dense"
for side in base new; do bin=carry/wavefuse; [ $side = base ] && bin=carry/wavefuse-base
  step 45 "ab-$side" "$bin" ab gemv_int4 gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp1 --timing graphs --iters 100 --json "$R/ab-$side-1.json" --md "$R/ab-$side-1.md"
done
python3 bench/results/2026-12-05-h100-engine/epoch_table.py "$R" > "$R/epoch-table.md" 2>&1; cat "$R/epoch-table.md"
tar -C "$R" -czf "$OUT/results.tgz" . ; cp "$R/summary.txt" "$OUT/"
