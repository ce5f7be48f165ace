#!/usr/bin/env bash
# Issue 40, one device call: the phased activation stage filled by cp.async in a ring of phase
# buffers, the weights in the same groups (`async_stages` with `x_phase_units`, one wait and one
# barrier per phase), against the defaults, with Marlin, tinygemm and cuBLAS FP16 in the same
# call. Every row is checked against the f64 reference before it is timed.
# (Run in the order B, C, A: a call cut short returns what ran.)
# A. The defaults at every row of the table: gemv_int4 at 5120 -> 17408, 17408 -> 5120
#    and the TP 4 rank shapes 5120 -> 4352, 4352 -> 5120, batch 1, 2, 4, 8, 16, 32, 64.
# B. Overrides at 5120 -> 17408 and 17408 -> 5120, batch 16, 32, 64 (`ab --timing graphs`).
# C. bench/torch/marlin_bench.py at the table's shapes and batches.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-06-gpu-async-stage/run.sh   (LEAN=1: see below)
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
# LEAN=2 (least device time): no Marlin (its build alone takes ~100 s), the forms only.
[ "${LEAN:-0}" = 2 ] || bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
W128="columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,x_phase_units=1,mma_scale=weight"
W256="columns_per_workgroup=256,threads_per_column=1,workgroup_size=256,x_in_lds=true,x_phase_units=1,mma_scale=weight"
# Where a form's LDS does not fit a batch, `ab` reports that row as an error and goes on.
OVS=(
  ""
  "$W128,k_unit_words=8"
  "$W128,k_unit_words=4,async_stages=3"
  "$W128,k_unit_words=8,async_stages=2"
  "$W256,k_unit_words=4,async_stages=4"
  "$W128,k_unit_words=4,async_stages=2"
)
# LEAN=1 (little device time left): the default and two forms, Marlin at their rows only.
MS=5120x17408,17408x5120,5120x4352,4352x5120; MB=1,2,4,8,16,32,64
if [ "${LEAN:-0}" = 1 ]; then
  OVS=("" "$W128,k_unit_words=4,async_stages=3" "$W128,k_unit_words=8,async_stages=2")
  MS=5120x17408,17408x5120; MB=16,32,64
fi
[ "${LEAN:-0}" = 2 ] && OVS=("" "$W128,k_unit_words=4,async_stages=3" "$W128,k_unit_words=8,async_stages=2" "$W256,k_unit_words=4,async_stages=4" "$W128,k_unit_words=8")
# K parts: 4 at 5120 -> 17408, 8 at 17408 -> 5120 (the batch-64 default's).
for i in "${!OVS[@]}"; do
  for shape in n17408 k17408; do
    ks=4; [ $shape = k17408 ] && ks=8
    [ $(el) -gt 150 ] && continue # leave the time for Marlin's rows
    ov="${OVS[$i]}"; [ -n "$ov" ] && ov="$ov,k_split=$ks"
    run_ab "b$i-$shape-ks$ks" $shape "16 32 64" "$ov"
  done
done
wait $BUILD
tail -1 "$OUT/marlin-build.txt"
[ "${LEAN:-0}" = 2 ] || timeout 130 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes $MS --batches $MB > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
tail -40 "$OUT/others.txt" > "$FINAL/others-tail.txt"
# The defaults' remaining rows, last (a call cut short still returns the above).
[ "${LEAN:-0}" != 0 ] || for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "1 2 4 8 16 32 64" ""; done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[ab]*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
  tail -40 "$OUT/others.txt"
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
