#!/usr/bin/env bash
# Issue 37's tokens-per-second A/B on one GPU: the decoder example (examples/decoder) at the
# Qwen 3.5 27B dense shapes and at Llama-3.1-8B's config, paths (a) torch_best, (b) wavefuse
# unfused, (c) wavefuse fused, TP 1 and 4 (ranks in one process), batch 1 and 8, random weights
# made on the device. A path whose package is missing is skipped and the results say so.
#
#   bash scripts/decoder-ab.sh [OUT_DIR] [extra args for python -m wf_decoder.ab]
#
# OUT_DIR defaults to bench/results/<date>-decoder-ab; each config writes OUT_DIR/<config>/ab.{json,md,png}.
# PYTHON (default python3) must have torch with CUDA or ROCm (HIP devices are `cuda` in PyTorch),
# safetensors, and for (b)/(c) the wavefuse package. Exit status 1 if a correctness gate failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${1:-bench/results/$(date -u +%Y-%m-%d)-decoder-ab}
shift || true
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD/examples/decoder${PYTHONPATH:+:$PYTHONPATH}
status=0
for config in qwen27b_dense llama31_8b; do
    "$PY" -m wf_decoder.ab --config "$config" --device cuda --paths a,b,c --tp 1,4 --batch 1,8 \
        --steps 50 --runs 3 --out "$OUT/$config" "$@" || status=1
done
exit $status
