#!/usr/bin/env bash
# Issue 40, one device call. Every row is checked against the f64 reference before it is timed.
# B1. Batch 1-8 with the activations unstaged (x_in_lds=false) against the default (staged at
#     batch 1-4 where the stage fits; batch 8 is unstaged by default), at the four shapes.
# B2. The 128-column phased tiles (synchronous stage, and the cp.async ring) at more K parts than
#     the batch-64 rule's (2x; with FULL=1 also 4x and a ring of 3), batch 16, 32, 64, at 5120 -> 17408 and 17408 -> 5120.
# B3. The synchronous phased stage aliased into the sums' LDS: phases of 2 and 4 units at b32/64.
# C.  bench/torch/marlin_bench.py (Marlin, tinygemm, cuBLAS FP16) at the four shapes, batch 1-64.
# A.  The defaults at every row of the table (four shapes, batch 1, 2, 4, 8, 16, 32, 64).
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-parts-and-stage/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
# MINI=1 (the device budget's last ~150 s): no Marlin, the defaults only at the rows B1 and B3 ran.
[ "${MINI:-0}" = 1 ] || bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
for shape in n17408 k17408 n4352 k4352; do run_ab "b1-$shape-unstaged" $shape "1 2 4 8" "x_in_lds=false"; done
W128="columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,x_phase_units=1,mma_scale=weight"
# B3. The synchronous phased stage in the sums' LDS (max of the two, not the sum): phases of 2
#     and 4 units now fit at batch 64; batch 32 and 64, the batch-64 rule's K parts.
for shape in n17408 k17408; do
  ks=4; [ $shape = k17408 ] && ks=8
  for ph in 2 4; do run_ab "b3-$shape-sync8-ph$ph" $shape "32 64" "$W128,k_unit_words=8,x_phase_units=$ph,k_split=$ks"; done
done
if [ "${MINI:-0}" = 1 ]; then
  for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "1 2 4 8" ""; done
  for shape in n17408 k17408; do run_ab "a-$shape-b32-64" $shape "32 64" ""; done
  exit 0
fi
for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "1 2 4 8 16 32 64" ""; done
wait $BUILD
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
tail -60 "$OUT/others.txt" > "$FINAL/others-tail.txt"; cp "$OUT/others.txt" "$OUT/others.json" "$FINAL/ab/" 2>/dev/null
for shape in n17408 k17408; do
  [ $(el) -gt 200 ] && continue # the device budget
  if [ $shape = n17408 ]; then P2=8 P4=16; else P2=16 P4=34; fi
  run_ab "b2-$shape-sync8-ks$P2" $shape "16 32 64" "$W128,k_unit_words=8,k_split=$P2"
  run_ab "b2-$shape-ring2u8-ks$P2" $shape "16 32 64" "$W128,k_unit_words=8,async_stages=2,k_split=$P2"
  [ "${FULL:-0}" = 1 ] || continue # the device budget: two forms only
  run_ab "b2-$shape-ring2u8-ks$P4" $shape "16 32 64" "$W128,k_unit_words=8,async_stages=2,k_split=$P4"
  run_ab "b2-$shape-ring3u4-ks$P2" $shape "16 32 64" "$W128,k_unit_words=4,async_stages=3,k_split=$P2"
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[ab]*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
  tail -60 "$OUT/others.txt"
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
mkdir -p "$FINAL/ab"; cp "$OUT"/[ab]*.txt "$OUT"/others.* "$OUT/log.txt" "$FINAL/ab/" 2>/dev/null
