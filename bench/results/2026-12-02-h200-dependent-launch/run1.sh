#!/usr/bin/env bash
# One device call (H200): programmatic dependent launch (PDL) of the generated sm_90 kernels.
# (1) the runtime's GPU test that a dependent consumer without `griddepcontrol.wait` reads stale
#     data and with it never (carry/gpu-tests: `cargo test --release -p wavefuse-runtime --test gpu
#     --no-run`);
# (2) `ab` in graphs at TP 1 and TP 4 (batch 1) for five kernels, three ways alternating twice:
#     the binary before the stream-order prologue (carry/wavefuse-old, f965d56, stream order),
#     this binary in stream order, this binary with `--launch dependent`; the hand-written
#     references have no dependent launch, so they are the same kernels launched the same way in
#     all three: the control for drift;
# (3) the quick GPU suite with `--launch dependent` (1,000 back-to-back launches per synchronising
#     kernel, every launch after the first a dependent of the previous one).
source bench/device-prelude.sh
KERNELS="gemv_int4 gemv_int4_dual_silu gemv_int4_qkv allreduce_residual_rmsnorm gemv_int4_allreduce_rmsnorm"
timeout 120 carry/gpu-tests --ignored --exact a_dependent_launch_waits_for_its_producer_only_with_the_prologue_sm90 --nocapture > "$OUT/pdl-test.txt" 2>&1
echo "pdl test: exit $?" >> "$OUT/exits.txt"
for r in 1 2; do
    for v in old stream dependent; do
        case $v in
            old) bin=carry/wavefuse-old; extra="" ;;
            stream) bin=$W; extra="--launch stream" ;;
            dependent) bin=$W; extra="--launch dependent" ;;
        esac
        WAVEFUSE_COMMIT=$v timeout 100 $bin ab $KERNELS --shapes qwen27b-tp1,qwen27b-tp4 --timing graphs $extra \
            --json "$OUT/ab-$v-r$r.json" --md "$OUT/ab-$v-r$r.md" > "$OUT/ab-$v-r$r.txt" 2>&1
        echo "ab $v r$r: exit $?" >> "$OUT/exits.txt"
    done
done
timeout 200 $W gpu-suite --quick --launch dependent --deadline 170 --out "$OUT/suite-dependent.json" > "$OUT/suite-dependent.txt" 2>&1
echo "gpu-suite --quick --launch dependent: exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
grep -E "stale|test result" "$OUT/pdl-test.txt"
for f in "$OUT"/ab-*-r*.txt; do echo "== $(basename "$f")"; grep -E "generated|hand-written" "$f" | awk '{print $1, $2, $6}'; done
tail -3 "$OUT/suite-dependent.txt"
