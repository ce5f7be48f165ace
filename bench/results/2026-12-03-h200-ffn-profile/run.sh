#!/usr/bin/env bash
# One device call (H200), issue 18 (b): where the one-launch FFN block (TP 1) loses to the
# two-kernel chain. (1) `mgpu-bench --same-device` (CUDA graphs, 10 samples of 50 calls) of the
# block, the block with one part left out (no pre-norm; stage 2 shrunk to one tile; stage 1
# shrunk to K = 512), the chain, each chain kernel alone and the chain's first kernel with the
# pre-norm prologue, alternating twice. (2) Nsight Compute (--clock-control none, one launch
# each, caches flushed between passes) on the block, its two shrunk variants and the chain's
# kernels. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
P=bench/results/2026-12-03-h200-ffn-profile
R=bench/results/2026-12-01-h200-ffn-one-launch
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
T0=$(date +%s)
# name, schedule override (WAVEFUSE_SCHEDULE_SM90), then the kernel files
declare -A FILES=(
  [block]="$R/ffn_block_tp1.wfir"
  [block-noprenorm]="$P/block_noprenorm_tp1.wfir"
  [block-s1]="$P/block_s1_tp1.wfir"
  [block-s2]="$P/block_s2_tp1.wfir"
  [chain]="$R/chain1_gate_up_silu_tp1.wfir $R/chain2_down_allreduce_norm_tp1.wfir"
  [chain1]="$R/chain1_gate_up_silu_tp1.wfir"
  [chain1-prenorm]="$P/chain1_prenorm_tp1.wfir"
  [chain2]="$R/chain2_down_allreduce_norm_tp1.wfir"
)
declare -A OV=([block-s1]="max_grid=640")
ORDER="block block-noprenorm block-s1 block-s2 chain chain1 chain1-prenorm chain2"
for round in 1 2; do
  for n in $ORDER; do
    args=(); for f in ${FILES[$n]}; do args+=(--kernel-file "$f"); done
    WAVEFUSE_SCHEDULE_SM90=${OV[$n]:-} timeout 60 $W mgpu-bench --same-device --samples 10 --calls 50 \
        "${args[@]}" --json "$OUT/$n-$round.json" --md "$OUT/$n-$round.md" > "$OUT/$n-$round.txt" 2>&1
    echo "$n-$round: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECT="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
MET="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
prof() { # name, kernel regex, override, kernel file
  [ $(( $(date +%s) - T0 )) -gt 300 ] && { echo "ncu-$1: skipped (time)" >> "$OUT/exits.txt"; return; }
  WAVEFUSE_SCHEDULE_SM90=$3 timeout 75 "$NCU" --clock-control none --target-processes all -k "regex:^$2\$" --launch-count 1 \
      $SECT --metrics "$MET" --csv --page details $W run --kernel-file "$4" --device gpu > "$OUT/ncu-$1.csv" 2> "$OUT/ncu-$1.err"
  echo "ncu-$1: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
}
prof block ffn_block "" $R/ffn_block_tp1.wfir
prof chain1 gemv_int4_dual_silu "" $R/chain1_gate_up_silu_tp1.wfir
prof chain2 gemv_int4_allreduce_rmsnorm "" $R/chain2_down_allreduce_norm_tp1.wfir
prof block-s1 ffn_block "max_grid=640" $P/block_s1_tp1.wfir
prof block-s2 ffn_block "" $P/block_s2_tp1.wfir
prof chain1-prenorm gemv_int4_dual_silu "" $P/chain1_prenorm_tp1.wfir
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/gpu.csv" "$OUT/exits.txt"
for n in $ORDER; do for round in 1 2; do
  echo "== $n-$round $(head -1 "$OUT/$n-$round.txt" | cut -c1-150)"; grep -E "^\| " "$OUT/$n-$round.md" | tail -1
done; done
python3 - "$OUT" <<'PY'
import csv, glob, os, sys
keep = ["Duration", "DRAM Throughput", "Memory Throughput", "Achieved Occupancy", "Theoretical Occupancy",
        "Registers Per Thread", "Grid Size", "Block Limit Registers", "Block Limit Shared Mem",
        "Waves Per SM", "Warp Cycles Per Issued Instruction", "No Eligible", "Issued Warp Per Scheduler",
        "Active Warps Per Scheduler", "Eligible Warps Per Scheduler", "L2 Hit Rate", "Mem Busy", "Max Bandwidth"]
for f in sorted(glob.glob(sys.argv[1] + "/ncu-*.csv")):
    rows = [r for r in csv.reader(l for l in open(f) if l.startswith('"'))]
    if len(rows) < 2: print(os.path.basename(f), "no rows"); continue
    h = rows[0]; mi, ui, vi = h.index("Metric Name"), h.index("Metric Unit"), h.index("Metric Value")
    print("###", os.path.basename(f))
    stalls = []
    for r in rows[1:]:
        if r[mi] in keep: print(f"  {r[mi]}: {r[vi]} {r[ui]}")
        elif "issue_stalled" in r[mi]:
            try: stalls.append((float(r[vi].replace(',', '')), r[mi]))
            except ValueError: pass
        elif r[mi].startswith(("dram__bytes", "gpu__time", "sm__warps_active", "launch__occupancy_limit")): print(f"  {r[mi]}: {r[vi]} {r[ui]}")
    for v, m in sorted(stalls, reverse=True)[:7]:
        print(f"  stall {m.replace('smsp__average_warps_issue_stalled_', '').replace('_per_issue_active.ratio', '')}: {v:.2f}")
PY
