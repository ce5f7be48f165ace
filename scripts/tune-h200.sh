#!/usr/bin/env bash
# `wavefuse tune` on the lent H200, with the release binary built elsewhere (no cargo there).
#
# Here, first (builds carry/ and compiles every candidate of the searches below into
# carry/cache, so a GPU machine without NVRTC uses them prebuilt):
#   bash scripts/build-gpu-binary.sh && bash scripts/tune-h200.sh --prebuild
# Then on the GPU machine, from the repository root (results in $OUT, default ./tune-out):
#   bash scripts/tune-h200.sh
# Writes at most 8 files:
#   tuned.toml                        the winners (commit it as kernels-gen/tuned/tuned.toml)
#   tune-gemv_int4.{json,md}          gemv_int4 at qwen27b-tp1 and qwen27b-tp4
#   tune-fused.{json,md}              gemv_int4_dual_silu and gemv_int4_allreduce_rmsnorm at tp4
#   ab-tuned.md                       `wavefuse ab --schedule tuned` on the tuned kernels
#   summary.txt                       what ran, exit codes, times
#   logs.tgz                          stderr of every step, device.txt
# Stays within ~4 minutes of GPU time: every step has a timeout and no step starts past the
# budget. Exit status: 0 when every step that ran exited 0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The searches (the same arguments here and there, so the prebuilt candidates match). The
# occupancy floor is 4 warps per sub-partition instead of the default schedule's: candidates with
# more registers than the default (tensor-core pipeline depth 2: 128 registers, occupancy 4) are
# then timed, and on the GPU the clock, not occupancy, decides. MIN_OCC=0 times everything that
# does not spill; an empty MIN_OCC is not allowed (use a number).
COMMON=(--budget "${TUNE_BUDGET:-200}" --min-occupancy "${MIN_OCC:-4}")
INT4=(tune gemv_int4 --shapes qwen27b-tp1,qwen27b-tp4 "${COMMON[@]}")
FUSED=(tune gemv_int4_dual_silu gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp4 "${COMMON[@]}")
BIN="$PWD/carry/wavefuse"
if [ ! -x "$BIN" ]; then
    echo "error: $BIN not found; build it with scripts/build-gpu-binary.sh and carry carry/" >&2
    exit 2
fi

if [ "${1:-}" = "--prebuild" ]; then
    if [ -f .venv-cuda/wavefuse-env.sh ]; then
        # shellcheck source=/dev/null
        source .venv-cuda/wavefuse-env.sh
    fi
    export WAVEFUSE_CACHE_DIR="$PWD/carry/cache"
    start=$(date +%s)
    for args in INT4 FUSED; do
        declare -n a=$args
        "$BIN" "${a[@]}" --no-gpu --no-cache-store 2>>carry/prebuild.log | grep -E "enumerated|no timing" || exit 1
    done
    echo "prebuilt the candidates into carry/cache in $(($(date +%s) - start)) s; carry/ holds $(du -sh carry | cut -f1) (limit 64 MiB)"
    exit 0
fi

OUT="${OUT:-$PWD/tune-out}"
mkdir -p "$OUT"
LOGS="$OUT/logs"
mkdir -p "$LOGS"
BUDGET_S=${BUDGET_S:-240}
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET_S - $(elapsed))); }
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
status=0

export WAVEFUSE_COMMIT="${WAVEFUSE_COMMIT:-$(cat carry/COMMIT 2>/dev/null || echo unknown)}"
cache="${TMPDIR:-/tmp}/wavefuse-cache"
rm -rf "$cache" && mkdir -p "$cache"
[ -d carry/cache ] && cp -r carry/cache/. "$cache"
export WAVEFUSE_CACHE_DIR="$cache"
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
{
    echo "commit $WAVEFUSE_COMMIT; binary $("$BIN" --version)"
    echo "WAVEFUSE_NVRTC_LIB=${WAVEFUSE_NVRTC_LIB:-} WAVEFUSE_CACHE_DIR=$WAVEFUSE_CACHE_DIR"
    cat /proc/driver/nvidia/version 2>/dev/null
    nvidia-smi 2>&1
} >"$LOGS/device.txt"

step() { # name limit_s args...
    local name=$1 limit=$2
    shift 2
    if [ "$limit" -lt 20 ]; then
        note "$name: skipped, time budget spent ($(elapsed) s)"
        return
    fi
    # A tune step stops timing new candidates 25 s before its limit and still writes its results.
    local extra=()
    [ "$1" = tune ] && extra=(--deadline $((limit - 25)))
    timeout "$limit" "$BIN" "$@" "${extra[@]}" >"$LOGS/$name.stdout" 2>"$LOGS/$name.stderr"
    local rc=$?
    grep -E "winner|no winner|enumerated|candidates/s|no timing|schedule: " "$LOGS/$name.stdout" "$LOGS/$name.stderr" 2>/dev/null |
        sed 's/^[^:]*://' | head -20 >>"$SUMMARY"
    note "$name: exit $rc ($(elapsed) s)$([ $rc = 124 ] && echo ', TIMED OUT')"
    [ $rc = 0 ] || status=1
    if [ $rc = 2 ] || grep -q "no NVIDIA GPU" "$LOGS/$name.stdout" 2>/dev/null; then
        cat "$LOGS/$name.stderr" >&2
    fi
}

# 1. gemv_int4 at TP 1 and TP 4 (the headline).
step tune-gemv_int4 "$(($(left) < 150 ? $(left) : 150))" "${INT4[@]}" \
    --store "$OUT/tuned.toml" --json "$OUT/tune-gemv_int4.json" --md "$OUT/tune-gemv_int4.md"
# 2. The fused INT4 kernels at TP 4, with what is left but 30 s.
step tune-fused "$(($(left) - 30))" "${FUSED[@]}" \
    --store "$OUT/tuned.toml" --json "$OUT/tune-fused.json" --md "$OUT/tune-fused.md"
# 3. The tuned schedules through `wavefuse ab` (the path CI-built binaries take).
step ab-tuned "$(($(left) < 60 ? $(left) : 60))" ab gemv_int4 gemv_int4_dual_silu \
    gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp4,qwen27b-tp1 --schedule tuned \
    --tuned-store "$OUT/tuned.toml" --md "$OUT/ab-tuned.md"
note "total $(elapsed) s; exit $status"
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
exit "$status"
