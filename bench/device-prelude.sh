# Sourced (not run) by the device run scripts under bench/results/: the script's files go to a
# temporary folder and it packs them into $FINAL (the device's $OUT) at the end; the release
# binary and the compile cache travel in carry/ (see scripts/build-gpu-binary.sh).
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=${W:-carry/wavefuse} # a run may name another binary (a patched build) in W
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
WAVEFUSE_COMMIT=${WAVEFUSE_COMMIT:-$(cat carry/COMMIT)}
export WAVEFUSE_COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.csv" 2>&1
