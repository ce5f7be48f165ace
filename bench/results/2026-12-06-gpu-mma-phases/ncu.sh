#!/usr/bin/env bash
# Issue 40, a second short call on the same H100: Nsight Compute of gemv_int4 5120 -> 17408
# batch 64 (TP 1) at the default (c0), the phased 128-column tile (c1) and it at depth 2 (c2):
# L2 traffic, LDS bank conflicts, registers, occupancy, stall reasons.
#   bash bench/results/2026-12-06-gpu-mma-phases/ncu.sh
source bench/device-prelude.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
W128="columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,k_split=4"
for p in "c0:" "c1:$W128,k_unit_words=8,x_phase_units=1,mma_scale=weight" "c2:$W128,k_unit_words=8,x_phase_units=1,mma_scale=weight,pipeline_depth=2"; do
  n=${p%%:*}; ov=${p#*:}
  WAVEFUSE_SCHEDULE_SM90="$ov" timeout 60 "$NCU" --clock-control none -k "regex:^gemv_int4" --launch-count 1 \
      --metrics "$MET" --csv --page raw $W run gemv_int4 --tp 1 --batch 64 --device gpu > "$FINAL/ncu-$n.csv" 2> "$FINAL/ncu-$n.err"
  echo "ncu-$n: exit $?"
done
python3 - "$FINAL" <<'PY'
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
