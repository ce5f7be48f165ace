#!/usr/bin/env bash
# One device call (H200): the multi-stage kernels (GEMV stages behind grid barriers, issue 18)
# through the GPU suite (`gpu-suite --kernel-file`: checked against the f64 reference, and those
# at batch 1 run 10,000 times back to back, then once on fresh inputs), all ranks on the one GPU;
# then compute-sanitizer memcheck / racecheck / synccheck on the TP 1 two-stage kernel
# (`run --kernel-file … --device gpu`). Writes $OUT/results.tgz and $OUT/summary.txt.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-stages-suite
timeout 400 $W gpu-suite --deadline 300 --stress-launches 10000 \
    --kernel-file $R/gate_up_down.wfir --kernel-file $R/ffn_block_tp1.wfir \
    --kernel-file $R/ffn_block.wfir --kernel-file $R/o_proj_qkv.wfir \
    --kernel-file $R/decoder_layer.wfir --out "$OUT/suite.json" > "$OUT/suite.txt" 2>&1
echo "gpu-suite exit $?" >> "$OUT/suite.txt"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
    timeout 60 "$CS" --tool $tool --error-exitcode 86 --print-limit 20 \
        $W run --kernel-file $R/gate_up_down.wfir --device gpu > "$OUT/sanitizer-$tool.log" 2>&1
    echo "exit $?" >> "$OUT/sanitizer-$tool.log"
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
grep -E "^\| |cases:|exit" "$OUT/suite.txt" | tail -12
for tool in memcheck racecheck synccheck; do echo "== $tool"; grep -E "SUMMARY|PASS|FAIL|exit" "$OUT/sanitizer-$tool.log" | tail -3; done
