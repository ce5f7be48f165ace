#!/usr/bin/env bash
# Issue 40: the tensor-core GEMV's phased activation ring with its activations stored in
# B-fragment order (loaded into registers with each phase's weight group, stored a phase later),
# 128-column tiles of one K warp, K parts chosen to fill the H100's SMs at the form's occupancy;
# beside the generated default and the hand-written block-pipeline probe (version 3) in the same
# call. Batch 64 at the four shapes, batch 32 at the two TP 1 shapes; Marlin, tinygemm and cuBLAS
# FP16 at the same rows in the same call (so a ring row that wins can become a default whose
# kernel is byte-identical to the override timed here).
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-ring-bfrag/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
P=bench/results/2026-12-07-gpu-block-pipeline
F="workgroup_size=128,columns_per_workgroup=128,threads_per_column=1,x_in_lds=true,x_phase_units=1,pipeline_depth=1,mma_scale=weight"
# The ring forms (the most likely default first, then the probe beside the default): units of 8
# and 3 buffers (70.6 KB, 3 workgroups per SM), units of 16 and 3 buffers (95.2 KB, 2 per SM),
# units of 8 and 4 buffers (83.2 KB, 2 per SM); K parts per shape so the grid fits one round.
run_ab "u8s3-n17408" n17408 "32 64" "$F,k_unit_words=8,async_stages=3,k_split=2"
run_ab "u8s3-k17408" k17408 "32 64" "$F,k_unit_words=8,async_stages=3,k_split=8"
run_ab "u8s3-n4352" n4352 "64" "$F,k_unit_words=8,async_stages=3,k_split=10"
run_ab "u8s3-k4352" k4352 "64" "$F,k_unit_words=8,async_stages=3,k_split=4"
# The probe beside the default (one `ab` per shape).
run_manual "p3-n17408" n17408 "32 64" $P/gemv_int4_pipe3.abi.toml
run_manual "p3-k17408" k17408 "32 64" $P/gemv_int4_pipe3.abi.toml
run_manual "p3-n4352" n4352 "64" $P/gemv_int4_pipe3.abi.toml
run_manual "p3-k4352" k4352 "64" $P/gemv_int4_pipe3.abi.toml
run_ab "u16s3-n17408" n17408 "64" "$F,k_unit_words=16,async_stages=3,k_split=1"
run_ab "u16s3-k17408" k17408 "64" "$F,k_unit_words=16,async_stages=3,k_split=4"
run_ab "u16s3-n4352" n4352 "64" "$F,k_unit_words=16,async_stages=3,k_split=5"
run_ab "u16s3-k4352" k4352 "64" "$F,k_unit_words=16,async_stages=3,k_split=2"
run_ab "u8s4-n17408" n17408 "64" "$F,k_unit_words=8,async_stages=4,k_split=1"
run_ab "u8s4-k17408" k17408 "64" "$F,k_unit_words=8,async_stages=4,k_split=4"
run_ab "u8s4-n4352" n4352 "64" "$F,k_unit_words=8,async_stages=4,k_split=5"
run_ab "u8s4-k4352" k4352 "64" "$F,k_unit_words=8,async_stages=4,k_split=4"
run_others "32,64"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/*-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated | hand-written |ERROR|refused|error|WRONG" "$f" | cut -c1-160
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
