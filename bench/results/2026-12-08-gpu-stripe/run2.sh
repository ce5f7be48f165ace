#!/usr/bin/env bash
# Issue 40, call 2: the stripe grid after its finish loads a tile's contributions together
# (the loop to the most contributors, each guarded, instead of to the tile's count: one round
# trip per point group instead of one per contribution), beside the defaults in the same call.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-08-gpu-stripe/run2.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
run_ab "default-n17408" n17408 "16 32 64" ""
run_ab "g660-n17408" n17408 "16 32" "stripe_workgroups=660"
run_ab "g396-n17408" n17408 "64" "stripe_workgroups=396"
run_ab "default-k17408" k17408 "32 64" ""
run_ab "g660-k17408" k17408 "32" "stripe_workgroups=660"
run_ab "g396-k17408" k17408 "64" "stripe_workgroups=396"
run_ab "default-n4352" n4352 "64" ""
run_ab "g396-n4352" n4352 "64" "stripe_workgroups=396"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/*-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error|WRONG" "$f" | cut -c1-160
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
