#!/usr/bin/env bash
# Issue 7, item 7 and the PyTorch baselines of items 1 and 3, on a machine with an NVIDIA H200
# (or any sm_90 GPU), from the repository root, with the release binaries built elsewhere by
# scripts/build-gpu-binary.sh (carry/qwen_ffn_block, carry/COMMIT, carry/cache). No cargo needed;
# Python with PyTorch for the baselines. Writes into $OUT (default ./ffn-out), 8 files:
#   torch.json, torch.md   bench/torch/int4_baselines.py: INT4 (_weight_int4pack_mm) and FP16
#                          GEMVs at the six shapes, the item-3 chain and the FFN block, CUDA graphs
#   ffn.json, ffn.md       examples/qwen_ffn_block: the block at TP = 4 on the one GPU, generated
#                          vs hand-written vs PyTorch, checked against the f64 reference
#   torch.log, ffn.log     their progress and errors
#   device.txt, summary.txt
# Stays under ~3 minutes: each step has a timeout. Exit status 0 when the example's generated
# chain ran and was correct (the PyTorch part records its own errors in torch.json).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT="${OUT:-$PWD/ffn-out}"
mkdir -p "$OUT"
BIN="$PWD/carry/qwen_ffn_block"
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

if [ ! -x "$BIN" ]; then
    echo "error: $BIN not found; build it with scripts/build-gpu-binary.sh and carry carry/" >&2
    exit 2
fi
export WAVEFUSE_COMMIT="${WAVEFUSE_COMMIT:-$(cat carry/COMMIT 2>/dev/null || echo unknown)}"
if [ -d carry/cache ]; then
    # A writable copy outside $OUT: prebuilt cubins, and where this NVRTC differs, its compiles.
    cache="${TMPDIR:-/tmp}/wavefuse-cache"
    rm -rf "$cache" && cp -r carry/cache "$cache" && export WAVEFUSE_CACHE_DIR="$cache"
fi
# NVRTC: the binary looks in $CUDA_HOME and /usr/local/cuda*; also try PyTorch's wheels.
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
{
    echo "commit $WAVEFUSE_COMMIT; binary $("$BIN" --version)"
    echo "WAVEFUSE_NVRTC_LIB=${WAVEFUSE_NVRTC_LIB:-} WAVEFUSE_CACHE_DIR=${WAVEFUSE_CACHE_DIR:-}"
    python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    cat /proc/driver/nvidia/version 2>/dev/null
    nvidia-smi 2>&1
} >"$OUT/device.txt"

# 1. PyTorch baselines (they write torch.json and torch.md themselves, even after a failure).
timeout 80 python3 bench/torch/int4_baselines.py "$OUT/torch.json" >/dev/null 2>"$OUT/torch.log"
rc=$?
note "torch baselines: exit $rc ($(elapsed) s)$([ $rc = 124 ] && echo ', TIMED OUT: see torch.log')"
if [ -f "$OUT/torch.md" ]; then cat "$OUT/torch.md" | tee -a "$SUMMARY"; fi

# 2. The FFN block, with the PyTorch block beside it.
timeout 90 "$BIN" --torch "$OUT/torch.json" --json "$OUT/ffn.json" >/dev/null 2>"$OUT/ffn.log"
status=$?
note "qwen_ffn_block: exit $status ($(elapsed) s)$([ $status = 124 ] && echo ', TIMED OUT: see ffn.log')"
if [ -f "$OUT/ffn.md" ]; then cat "$OUT/ffn.md" | tee -a "$SUMMARY"; else tail -5 "$OUT/ffn.log"; fi
note "total $(elapsed) s"
exit "$status"
