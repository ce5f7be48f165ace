#!/usr/bin/env bash
# Issue 40, a second call on an H100: Nsight Compute of gemv_int4 5120 -> 17408 (TP 1) at batch 1
# and 64: the default (c0), units of 8 with the scale on the weights (c2) and the same with the
# asynchronous ring of 2 (c1): instructions, registers, occupancy, stall reasons.
#   bash bench/results/2026-12-06-gpu-async-ring/ncu.sh
source bench/device-prelude.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
R="k_unit_words=8,mma_scale=weight,k_split=4"
for b in 1 64; do for p in "c0:" "c1:$R,async_stages=2" "c2:$R"; do
  n=${p%%:*}; ov=${p#*:}
  WAVEFUSE_SCHEDULE_SM90="$ov" timeout 60 "$NCU" --clock-control none -k "regex:^gemv_int4" --launch-count 1 \
      --metrics "$MET" --csv --page raw $W run gemv_int4 --tp 1 --batch $b --device gpu > "$FINAL/ncu-$n-b$b.csv" 2> "$FINAL/ncu-$n-b$b.err"
  echo "ncu-$n-b$b: exit $?"
done; done
python3 - "$FINAL" <<'PY' | tee "$FINAL/ncu-summary.txt"
import csv, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-c*.csv"))):
    rows = [r for r in csv.reader(open(f)) if r]
    hdr = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if hdr is None: print(f, "no data"); continue
    h, units, vals = rows[hdr], rows[hdr + 1], rows[hdr + 2]
    print("==", os.path.basename(f))
    for k, u, v in zip(h, units, vals):
        if "__" in k or k.startswith("launch"): print(f"  {k} = {v} {u}")
PY
# The device returns few files: the raw CSVs go into one tarball.
tar czf "$FINAL/ncu.tgz" -C "$FINAL" $(cd "$FINAL" && ls ncu-c*) && rm -f "$FINAL"/ncu-c*
