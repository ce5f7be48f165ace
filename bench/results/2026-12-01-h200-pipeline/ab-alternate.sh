#!/usr/bin/env bash
# The A/B table (every kernel, TP 4 and TP 1) with the binary before the pipeline change
# (carry/wavefuse-old, main at 18452c7) and after it (carry/wavefuse), alternating old, new,
# old, new on the same H200, each with its own compile cache. Results in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ab-alt}
mkdir -p "$OUT"
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
rm -rf /tmp/cache-new /tmp/cache-old && cp -r carry/cache /tmp/cache-new && mkdir -p /tmp/cache-old
for round in 1 2; do
    for which in old new; do
        bin=carry/wavefuse; cache=/tmp/cache-new; commit=$(cat carry/COMMIT)
        if [ $which = old ]; then bin=carry/wavefuse-old; cache=/tmp/cache-old; commit=18452c7; fi
        WAVEFUSE_CACHE_DIR=$cache WAVEFUSE_COMMIT=$commit timeout 200 "$bin" ab \
            --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/$which-$round.json" --md "$OUT/$which-$round.md" \
            >"/tmp/$which-$round.txt" 2>&1
        echo "$which round $round: rc $?"
        grep -E '^\| (gemv|allreduce)' "$OUT/$which-$round.md" | head -20
    done
done
