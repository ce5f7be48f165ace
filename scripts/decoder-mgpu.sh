#!/usr/bin/env bash
# Issue 41: the decoder A/B (examples/decoder; paths a = PyTorch + NCCL, b = wavefuse unfused,
# c = wavefuse fused) with one process per GPU under torchrun, TP 2 and 4 (as far as the visible
# GPUs allow), batch 1 and 8, at Llama-3.1-8B's config and the Qwen 3.5 27B dense shapes; then the
# same models with every rank in one process on one GPU (the single-GPU rows, for reference).
# Needs PyTorch with CUDA (or ROCm) and NCCL, safetensors, and the wavefuse package
# (`pip install ./python`, or the built extension copied into python/wavefuse/). Writes
# OUT_DIR/<config>-tp<N>/ab.{json,md,png} and OUT_DIR/topology.txt (`nvidia-smi topo -m`).
#
#   bash scripts/decoder-mgpu.sh [OUT_DIR]
#
# Not yet run on several GPUs (no multi-GPU machine was lent when it was written); its logic is
# tested on the CPU: examples/decoder/tests (one process per rank over gloo, the wavefuse paths on
# the package's simulator device).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${1:-bench/results/$(date -u +%Y-%m-%d)-decoder-mgpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD/examples/decoder:$PWD/python${PYTHONPATH:+:$PYTHONPATH}
# NVLink multicast stays off (the lent machines require it; harmless elsewhere).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
nvidia-smi topo -m > "$OUT/topology.txt" 2>&1 || echo "no nvidia-smi" > "$OUT/topology.txt"
status=0
for config in llama31_8b qwen27b_dense; do
    for tp in 2 4; do
        if [ "$gpus" -lt "$tp" ]; then
            echo "TP $tp: skipped, $gpus GPU(s) visible" | tee -a "$OUT/summary.txt"
            continue
        fi
        "$PY" -m torch.distributed.run --standalone --nproc_per_node "$tp" -m wf_decoder.ab \
            --config "$config" --device cuda --paths a,b,c --tp "$tp" --batch 1,8 --steps 50 \
            --runs 3 --out "$OUT/$config-tp$tp" || status=1
    done
    "$PY" -m wf_decoder.ab --config "$config" --device cuda --paths a,b,c --tp 1,4 --batch 1,8 \
        --steps 50 --runs 3 --out "$OUT/$config-one-gpu" || status=1
done
exit $status
