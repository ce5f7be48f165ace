#!/usr/bin/env bash
# Call 2 (issue 40): Nsight Compute's stall census of the ring form that call 1 timed at
# 1.3-1.8x the defaults (u8s3: units of 8, 3 buffers, 128 columns, one K warp), 5120 -> 17408
# b32 (k_split 2) and b64 (k_split 2), beside the b64 default, one launch each.
# Usage, repository root, carry/: bash bench/results/2026-12-07-gpu-ring-bfrag/run2.sh
source bench/device-prelude.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_ldgsts.sum,sm__cycles_active.avg"
F="workgroup_size=128,columns_per_workgroup=128,threads_per_column=1,x_in_lds=true,x_phase_units=1,pipeline_depth=1,mma_scale=weight,k_unit_words=8,async_stages=3,k_split=2"
prof() { # tag, then the command
  local tag=$1; shift
  timeout 120 "$NCU" --clock-control none -k "regex:^gemv_int4" --launch-count 1 --metrics "$MET" --csv --page raw \
      "$@" > "$OUT/ncu-$tag.csv" 2> "$OUT/ncu-$tag.err"
  echo "ncu $tag: exit $?" | tee -a "$FINAL/progress.txt"
}
for b in 32 64; do
  WAVEFUSE_SCHEDULE_SM90="$F" prof "ring-b$b" $W run gemv_int4 --tp 1 --batch $b --device gpu
done
prof "default-b64" $W run gemv_int4 --tp 1 --batch 64 --device gpu
python3 - "$OUT" <<'PY' > "$FINAL/ncu-summary.txt"
import csv, sys, glob, os
tabs = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-*.csv"))):
    rows = [r for r in csv.reader(open(f)) if r]
    hdr = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    tag = os.path.basename(f)[4:-4]
    if hdr is None: print(tag, "no data", open(f[:-4] + ".err").read()[-400:]); continue
    tabs[tag] = dict(zip(rows[hdr], rows[hdr + 2]))
keys = sorted({k for t in tabs.values() for k in t if "__" in k})
tags = list(tabs)
print("metric".ljust(80), *[t.rjust(13) for t in tags])
for k in keys:
    vs = [tabs[t].get(k, "") for t in tags]
    if all(v in ("", "0", "0.00") for v in vs): continue
    print(k[:80].ljust(80), *[v[:13].rjust(13) for v in vs])
PY
cat "$FINAL/ncu-summary.txt"
