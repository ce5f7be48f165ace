#!/usr/bin/env bash
# Issue 9 on a machine with 2 or more NVIDIA GPUs (run once, e.g. on a lent 4×H200), from the
# repository root, with the release binary built elsewhere by scripts/build-gpu-binary.sh
# (carry/wavefuse, carry/COMMIT, carry/cache) and Python with PyTorch + NCCL. No cargo needed.
#   1. the machine: nvidia-smi -L, nvidia-smi topo -m, driver;
#   2. `wavefuse gpu-suite --placement per-device --tp 2[,4]`: the communicating kernels, one rank
#      per GPU (TP 2 on GPUs 0,1), against the f64 reference, with launch skew, and 10,000
#      back-to-back launches of each at the model shape (the fused kernel included);
#   3. `wavefuse mgpu-bench`: CUDA-graph time per call of the generated allreduce (10 KB, 32 KB),
#      allreduce+RMSNorm, the fused kernel and the unfused wavefuse chain at TP 2[,4];
#   4. bench/torch/nccl_allreduce.py under torchrun at 2[ and 4] ranks: NCCL's side;
#   5. bench/torch/summarize.py: side by side, with issue 9's targets.
# TP 4 is skipped (and said so) when fewer than 4 GPUs are visible. Writes into $OUT (default
# ./mgpu-out) at most 8 files: summary.md, gpu-suite-per-device.{json,md}, mgpu-bench.{json,md},
# nccl-tp2.json, nccl-tp4.json, logs.tgz (every log and stdout). Stays within ~7 minutes: every
# step has a timeout and none starts past the budget. Exit 0 when every step was clean.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT="${OUT:-$PWD/mgpu-out}"
mkdir -p "$OUT"
LOGS="$(mktemp -d)"
BIN="$PWD/carry/wavefuse"
BUDGET_S=${BUDGET_S:-420}
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET_S - $(elapsed))); }
SUMMARY="$OUT/summary.md"
status=0
note() { echo "$*" | tee -a "$SUMMARY"; }
bundle() { tar -C "$LOGS" -czf "$OUT/logs.tgz" . 2>/dev/null; }
trap bundle EXIT

if [ ! -x "$BIN" ]; then
    echo "error: $BIN not found; build it with scripts/build-gpu-binary.sh and carry carry/" >&2
    exit 2
fi
export WAVEFUSE_COMMIT="${WAVEFUSE_COMMIT:-$(cat carry/COMMIT 2>/dev/null || echo unknown)}"
if [ -d carry/cache ]; then
    cache="${TMPDIR:-/tmp}/wavefuse-cache"
    rm -rf "$cache" && cp -r carry/cache "$cache" && export WAVEFUSE_CACHE_DIR="$cache"
fi
# NVRTC, for anything not prebuilt: $CUDA_HOME, /usr/local/cuda*, else PyTorch's wheels.
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi

# 1. The machine.
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    GPUS=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
fi
TPS="2"
[ "$GPUS" -ge 4 ] && TPS="2,4"
{
    echo "# issue 9: one rank per GPU"
    echo
    echo "- date (UTC): $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- commit: $WAVEFUSE_COMMIT; binary: $("$BIN" --version 2>&1)"
    echo "- GPUs visible: $GPUS; TP sizes run: $TPS"
    echo "- driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null)"
    echo "- WAVEFUSE_NVRTC_LIB=${WAVEFUSE_NVRTC_LIB:-} WAVEFUSE_CACHE_DIR=${WAVEFUSE_CACHE_DIR:-}"
    echo
    echo '```'
    nvidia-smi -L 2>&1
    echo
    nvidia-smi topo -m 2>&1
    echo '```'
    echo
} >"$SUMMARY"
nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi topo -m >"$LOGS/topo.txt" 2>&1
if [ "$GPUS" -lt 2 ]; then
    note "only $GPUS GPU(s) visible: one rank per device needs 2; nothing run"
    exit 2
fi
[ "$GPUS" -lt 4 ] && note "fewer than 4 GPUs: TP 4 skipped"

# 2. The per-device suite (full shapes, 10,000-launch stress runs, skew 20 µs alternating).
t=$(($(left) - 240)); [ $t -gt 200 ] && t=200
if [ $t -lt 60 ]; then t=60; fi
timeout $t "$BIN" gpu-suite --placement per-device --tp "$TPS" --skew 20:alt --deadline $((t - 45)) \
    --out "$OUT/gpu-suite-per-device.json" >"$LOGS/gpu-suite.stdout" 2>"$LOGS/gpu-suite.log"
rc=$?
note "- gpu-suite --placement per-device --tp $TPS: exit $rc ($(elapsed) s)$([ $rc = 124 ] && echo ', TIMED OUT')"
note "  $(tail -1 "$LOGS/gpu-suite.stdout" 2>/dev/null)"
[ $rc = 0 ] || status=1

# 3. wavefuse timing (CUDA graphs, one rank per GPU).
t=$(($(left) - 130)); [ $t -gt 120 ] && t=120
if [ $t -ge 30 ]; then
    timeout $t "$BIN" mgpu-bench --tp "$TPS" --json "$OUT/mgpu-bench.json" --md "$OUT/mgpu-bench.md" \
        >"$LOGS/mgpu-bench.stdout" 2>"$LOGS/mgpu-bench.log"
    rc=$?
    note "- mgpu-bench --tp $TPS: exit $rc ($(elapsed) s)$([ $rc = 124 ] && echo ', TIMED OUT')"
    [ $rc = 0 ] || status=1
else
    note "- mgpu-bench: skipped, time budget spent"; status=1
fi

# 4. NCCL via PyTorch, at 2 and 4 ranks.
for n in ${TPS//,/ }; do
    t=$(($(left) - 10)); [ $t -gt 75 ] && t=75
    if [ $t -lt 20 ]; then note "- NCCL TP $n: skipped, time budget spent"; status=1; continue; fi
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout $t python3 -m torch.distributed.run \
        --standalone --nproc_per_node="$n" bench/torch/nccl_allreduce.py --out "$OUT/nccl-tp$n.json" \
        >"$LOGS/nccl-tp$n.stdout" 2>"$LOGS/nccl-tp$n.log"
    rc=$?
    note "- NCCL (PyTorch) TP $n: exit $rc ($(elapsed) s)$([ $rc = 124 ] && echo ', TIMED OUT')"
    [ $rc = 0 ] || status=1
done

# 5. Side by side.
{
    echo
    [ -f "$OUT/gpu-suite-per-device.md" ] && cat "$OUT/gpu-suite-per-device.md" | tail -n 25
    echo
    [ -f "$OUT/mgpu-bench.md" ] && cat "$OUT/mgpu-bench.md"
    echo
} >>"$SUMMARY"
if [ -f "$OUT/mgpu-bench.json" ]; then
    python3 bench/torch/summarize.py --wavefuse "$OUT/mgpu-bench.json" \
        --nccl $(ls "$OUT"/nccl-tp*.json 2>/dev/null) >>"$SUMMARY" 2>"$LOGS/summarize.log" || status=1
fi
note ""
note "total $(elapsed) s; exit $status"
exit $status
