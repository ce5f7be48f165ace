#!/usr/bin/env bash
# Issue 40, one device call: the new defaults (`whole_rounds`) themselves, from the binary that
# has them, at all 28 rows of the issue's table, with Marlin, tinygemm and cuBLAS FP16 at the same
# rows in the same call — the check that the overrides timed in 2026-12-07-gpu-round-rules
# (byte-identical sources) are what the defaults run. Then Nsight Compute (metrics only, one
# launch) of the default at 5120 -> 17408 batch 1, 8, 16 and 32: the activations' L2 and L1
# traffic per weight byte, which grows with the batch for 32-column warps.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-new-defaults/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "1 2 4 8 16 32 64" ""; done
wait $BUILD
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
cp "$OUT/others.txt" "$FINAL/"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_hit_rate.pct,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
for b in 1 8 16 32; do
  [ $(el) -gt 520 ] && continue
  timeout 60 "$NCU" --clock-control none -k "regex:^gemv_int4" --launch-count 1 --metrics "$MET" --csv --page raw \
      $W run gemv_int4 --tp 1 --batch $b --device gpu > "$OUT/ncu-b$b.csv" 2> "$OUT/ncu-b$b.err"
  echo "ncu b$b: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
done
python3 - "$OUT" <<'PY' > "$OUT/ncu-summary.txt"
import csv, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-b*.csv"))):
    rows = [r for r in csv.reader(open(f)) if r]
    hdr = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if hdr is None: print(f, "no data"); continue
    h, units, vals = rows[hdr], rows[hdr + 1], rows[hdr + 2]
    print("==", os.path.basename(f))
    for k, u, v in zip(h, units, vals):
        if "__" in k or k.startswith("launch"): print(f"  {k} = {v} {u}")
PY
cp "$OUT/ncu-summary.txt" "$FINAL/"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/a-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
