#!/usr/bin/env bash
# One device call (H200): the example crate's own kernels (examples/own_kernels, at its
# config.json's shapes; the .wfir files here are `cargo run -p own-kernels -- DIR [--tp 2]`)
# through `wavefuse ab/tune --kernel-file`, generated vs the crate's hand-written CUDA kernel,
# then the quick GPU suite. Writes $OUT/results.tgz (every file) and $OUT/summary.txt.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-own-kernels
H=examples/own_kernels/hand
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.csv"
ab_hand() { # $1 = name, then extra flags
    local name=$1; shift
    $W ab --kernel-file $R/tp1/gemv_residual.wfir --manual $H/gemv_residual.cu \
        --abi $H/gemv_residual.sm90.abi.toml --json "$OUT/$name.json" --md "$OUT/$name.md" "$@" \
        > "$OUT/$name.txt" 2>&1
}
ab_hand ab-gemv_residual --plot "$OUT/ab-gemv_residual.svg"
$W ab --kernel-file $R/tp1/silu_mul_down.wfir --json "$OUT/ab-silu_mul_down-tp1.json" > "$OUT/ab-silu_mul_down-tp1.txt" 2>&1
$W ab --kernel-file $R/tp2/silu_mul_down.wfir --json "$OUT/ab-silu_mul_down-tp2.json" > "$OUT/ab-silu_mul_down-tp2.txt" 2>&1
# Step 6 of the journey: tune, then what emit prints with the tuned schedule is what ab times.
$W tune --kernel-file $R/tp1/gemv_residual.wfir --quick --store "$OUT/tuned.toml" --no-cache-store \
    --json "$OUT/tune.json" --md "$OUT/tune.md" > "$OUT/tune.txt" 2>&1
$W emit --kernel-file $R/tp1/gemv_residual.wfir --target sm90 --placement same-device --schedule tuned \
    --tuned-store "$OUT/tuned.toml" > "$OUT/tuned.cu" 2> "$OUT/tuned-emit.txt"
ab_hand ab-tuned --schedule tuned --tuned-store "$OUT/tuned.toml"
# The A/B again after the tuner (drift check, default schedule).
ab_hand ab-gemv_residual-2
# NVRTC's own program cache (12.9+) must not hide the resource report: the same source compiled
# twice, each time into an empty wavefuse cache.
for i in 1 2; do
    WAVEFUSE_CACHE_DIR=$(mktemp -d) $W ab --kernel-file $R/tp1/silu_mul_down.wfir --iters 10 \
        > "$OUT/fresh-cache-$i.txt" 2>&1
done
# The typed arguments (GemvResidualArgs over the example's own host buffers) launched on the GPU
# through wavefuse_harness::launch, every rank's output against the f64 oracle.
for tp in 1 2; do
    for b in 1 4; do
        carry/own-kernels launch --tp $tp --batch $b >> "$OUT/launch.txt" 2>&1
        echo "exit $?" >> "$OUT/launch.txt"
    done
done
# Nothing broke on the GPU (the case refactor): the quick suite, the set's kernels at TP 1/2/4/8.
timeout 240 $W gpu-suite --quick --deadline 180 --out "$OUT/suite.json" > "$OUT/suite.txt" 2>&1
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
tail -4 "$OUT/suite.txt"
for f in ab-gemv_residual ab-tuned ab-gemv_residual-2 ab-silu_mul_down-tp1 ab-silu_mul_down-tp2; do
    echo "== $f"; grep -E "µs|verdict|@own|error" "$OUT/$f.txt" | head -12
done
grep -E "winner|schedules enumerated" "$OUT/tune.txt" | head; head -3 "$OUT/tuned-emit.txt"
grep -h "sm90 " "$OUT"/fresh-cache-*.txt
cat "$OUT/launch.txt"
