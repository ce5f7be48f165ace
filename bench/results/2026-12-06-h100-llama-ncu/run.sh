#!/usr/bin/env bash
# Issue 37, one device call: Nsight Compute on path (c)'s four kernels at Llama-3.1-8B TP 1 batch 1
# (the decoder's shapes: QKV 4096 -> 6144, gate/up 4096 -> 2 x 14336, O 4096 -> 4096 and down
# 14336 -> 4096 with the residual and the RMSNorm), each launched once by `wavefuse run` (caches
# flushed before it, as ncu does by default: the weights come from DRAM, as in a decode step).
# Usage, repository root, carry/ holding the binary and COMMIT:
#   bash bench/results/2026-12-06-h100-llama-ncu/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
C=examples/decoder/wf_decoder/configs/llama31_8b.json
{ nvidia-smi -L; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__waves_per_multiprocessor,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed"
# The set's row-parallel kernel at the model's shapes is the down projection (k = intermediate /
# TP = 14336); O is the same kernel at k = 4096, written as .wfir from its IR.
"$W" emit gemv_int4_allreduce_rmsnorm --ir --tp 1 --model-config $C | sed 's/k=14336/k=4096/; s/f16\[1, 14336\]/f16[1, 4096]/' > "$OUT/o_proj.wfir"
for k in gemv_int4_qkv gemv_int4_dual_silu gemv_int4_allreduce_rmsnorm o_proj; do
  if [ $k = o_proj ]; then args="--kernel-file $OUT/o_proj.wfir"; re=gemv_int4_allreduce_rmsnorm; else args="$k --tp 1 --model-config $C"; re=$k; fi
  timeout 90 "$NCU" --clock-control none -k "regex:^$re" --launch-count 1 --metrics "$MET" --csv --page raw \
    "$W" run $args --device gpu > "$OUT/ncu-$k.csv" 2> "$OUT/ncu-$k.err"
  echo "$k: exit $? ($(el) s)" | tee -a "$OUT/summary.txt"
done
python3 - "$OUT" <<'PY' >> "$OUT/summary.txt"
import csv, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-*.csv"))):
    rows = list(csv.reader(l for l in open(f) if l.startswith('"')))
    if len(rows) < 3:
        print(os.path.basename(f), "no rows"); continue
    head, units = rows[0], rows[1]
    for r in rows[2:]:
        d = dict(zip(head, r))
        print(os.path.basename(f), d.get("Kernel Name", "")[:40])
        for k in head:
            if "__" in k:
                print(f"   {k} = {d[k]} {dict(zip(head, units)).get(k, '')}")
PY
cp "$OUT"/summary.txt "$OUT"/ncu-*.csv "$OUT"/o_proj.wfir "$FINAL"/ 2>/dev/null
