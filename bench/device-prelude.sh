# Sourced (not run) by the device run scripts under bench/results/: the script's files go to a
# temporary folder and it packs them into $FINAL (the device's $OUT) at the end; the release
# binary and the compile cache travel in carry/ (see scripts/build-gpu-binary.sh). Scripts from
# 2026-12-03-h200-ffn-hoist on rely on it for NVRTC's library; earlier ones look it up themselves.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=${W:-carry/wavefuse} # a run may name another binary (a patched build) in W
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
WAVEFUSE_COMMIT=${WAVEFUSE_COMMIT:-$(cat carry/COMMIT)}
export WAVEFUSE_COMMIT
# NVRTC: the system CUDA's, else the pip wheel's that PyTorch brought (the lent machines have no
# /usr/local/cuda*/lib64/libnvrtc.so).
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.csv" 2>&1
