#!/usr/bin/env bash
# One device call (H200): the facade's one-call pipeline on the GPU — `own-kernels check`
# (`wavefuse::pipeline::check`, On::Gpu: both of the example crate's kernels, every rank on the
# GPU, against the f64 oracle) and `own-kernels launch` (`pipeline::launch` with the typed
# arguments) at TP 1, 2 and 4; then the GPU suite and compute-sanitizer on the kernel set with
# the split-K default that fills the device (scripts/gpu-suite.sh). Writes $OUT/results.tgz and
# $OUT/summary.txt.
source bench/device-prelude.sh
for tp in 1 2 4; do
    for step in check launch; do
        timeout 120 carry/own-kernels $step --tp $tp > "$OUT/own-$step-tp$tp.txt" 2>&1
        echo "own-kernels $step --tp $tp: exit $?" >> "$OUT/exits.txt"
    done
done
OUT="$OUT/suite" BUDGET_S=${SUITE_BUDGET_S:-400} timeout 450 bash scripts/gpu-suite.sh > "$OUT/gpu-suite.txt" 2>&1
echo "gpu-suite.sh: exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
cat "$OUT"/own-check-tp*.txt "$OUT"/own-launch-tp*.txt
cat "$OUT/suite/summary.txt" 2>/dev/null
