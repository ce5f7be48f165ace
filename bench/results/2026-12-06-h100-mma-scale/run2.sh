#!/usr/bin/env bash
# Second call (same H100 kind, same session): (1) the two-weight GEMV (`gemv_int4_dual_silu`)
# past batch 32, whose default moved from the FMA path to the tensor cores with the scale on the
# weights: old binary (carry/wavefuse, 0ca432e) against new (carry/wavefuse-new, a6bb60b),
# alternating, two rounds; (2) `gemv_int4` with units of 8 K-words, the scale per unit against
# the scale on the weights, at both shapes and batch 16, 32, 64 (what the first call could not
# separate: its best b16-b32 override changed the unit and the scale at once).
# Usage, repository root: bash bench/results/2026-12-06-h100-mma-scale/run2.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log2.txt") 2>&1
date -u; nvidia-smi -L
C=bench/results/2026-12-03-h200-marlin
for round in 1 2; do
  for bin in old new; do
    B=carry/wavefuse; [ $bin = new ] && B=carry/wavefuse-new
    for sh in qwen27b-tp1-b33,qwen27b-tp1-b48,qwen27b-tp1-b64 qwen27b-tp4-b64; do
      tag="dual-r$round-$bin-${sh%%,*}"
      WAVEFUSE_COMMIT=$(cat carry/COMMIT$([ $bin = new ] && echo -new)) timeout 120 $B ab gemv_int4_dual_silu \
          --shapes $sh --timing graphs --iters 200 > "$OUT/$tag.txt" 2>&1
      echo "$tag: exit $? ($(el) s)" >> "$OUT/exits2.txt"
    done
  done
done
for round in 1 2; do
  for ov in "k_unit_words=8" "mma_scale=weight,k_unit_words=8"; do
    for shape in n17408 k17408; do
      cfg=(); [ $shape = k17408 ] && cfg=(--model-config $C/k17408-config.json)
      tag="ku8-r$round-${ov%%,*}-$shape"; tag=${tag//=/-}
      WAVEFUSE_SCHEDULE_SM90="$ov" timeout 90 carry/wavefuse-new ab gemv_int4 "${cfg[@]}" \
          --shapes qwen27b-tp1-b16,qwen27b-tp1-b32,qwen27b-tp1-b64 --timing graphs --iters 200 > "$OUT/$tag.txt" 2>&1
      echo "$tag [$ov]: exit $? ($(el) s)" >> "$OUT/exits2.txt"
    done
  done
done
{
  cat "$OUT/exits2.txt"
  for f in "$OUT"/dual-*.txt "$OUT"/ku8-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR" "$f" | cut -c1-170; done
} > "$OUT/summary2.txt"
cp "$OUT/summary2.txt" "$OUT/log2.txt" "$FINAL/"
tar czf "$FINAL/results2.tgz" -C "$OUT" --exclude=log2.txt .
