#!/usr/bin/env bash
# Second device call (H200), after run.sh: the block with the two changes run.sh's numbers point
# at, as schedule overrides of the same binary (WAVEFUSE_SCHEDULE_SM90): the pre-norm
# materialised once behind a grid barrier instead of recomputed per tile part
# (materialise_prologue=true), the persistent grid at 6 workgroups per SM (max_grid=792, the
# register limit ncu reported), and both; the default block before and after. mgpu-bench
# --same-device, CUDA graphs, 10 samples of 50 calls. Writes $OUT/results2.tgz, $OUT/summary2.txt.
source bench/device-prelude.sh
R=bench/results/2026-12-01-h200-ffn-one-launch
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
i=0
for ov in "" "materialise_prologue=true" "max_grid=792" "materialise_prologue=true,max_grid=792" ""; do
    i=$((i + 1))
    WAVEFUSE_SCHEDULE_SM90=$ov timeout 15 $W mgpu-bench --same-device --samples 10 --calls 50 \
        --kernel-file $R/ffn_block_tp1.wfir --json "$OUT/v$i.json" --md "$OUT/v$i.md" > "$OUT/v$i.txt" 2>&1
    echo "v$i [$ov]: exit $?" >> "$OUT/exits.txt"
done
tar czf "$FINAL/results2.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary2.txt")
cat "$OUT/gpu.csv"
for i in 1 2 3 4 5; do grep "^v$i " "$OUT/exits.txt"; head -1 "$OUT/v$i.txt" | cut -c1-140; grep -E "^\| " "$OUT/v$i.md" | tail -1; tail -2 "$OUT/v$i.txt" | grep -iv wrote; done
