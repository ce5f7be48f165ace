#!/usr/bin/env bash
# Issue 40, one device call: Nsight Compute's warp-stall census (every stall reason per issued
# instruction), pipe utilisation and instruction counts of the tensor-core GEMV at 5120 -> 17408:
# the batch-32 default (depth 1), the same at pipeline depth 2 and 3 (weights ahead, the form of
# ../2026-12-07-gpu-weight-pipeline, 35-60 % slower there), the batch-64 default, and Marlin's
# kernel at batch 32 and 64 (bench/torch/marlin_bench.py, one launch after warm-up).
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-stall-census/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sector_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_ldsm.sum"
prof() { # tag, then the command
  local tag=$1; shift
  timeout 90 "$NCU" --clock-control none -k "$KREGEX" --launch-skip "${SKIP:-0}" --launch-count 1 --metrics "$MET" --csv --page raw \
      "$@" > "$OUT/ncu-$tag.csv" 2> "$OUT/ncu-$tag.err"
  echo "ncu $tag: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
}
KREGEX="regex:^gemv_int4"
for d in 1 2 3; do
  WAVEFUSE_SCHEDULE_SM90="pipeline_depth=$d" prof "b32-d$d" $W run gemv_int4 --tp 1 --batch 32 --device gpu
done
prof "b64" $W run gemv_int4 --tp 1 --batch 64 --device gpu
wait "$MARLIN_BUILD"
KREGEX="regex:.*[Mm]arlin.*"; SKIP=20
for b in 32 64; do
  prof "marlin-b$b" python3 bench/torch/marlin_bench.py "$OUT/m$b.json" --lib /tmp/marlin/libmarlin.so \
      --marlin-dir carry/marlin --shapes 5120x17408 --batches $b
done
python3 - "$OUT" <<'PY' > "$OUT/ncu-summary.txt"
import csv, sys, glob, os
tabs = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-*.csv"))):
    rows = [r for r in csv.reader(open(f)) if r]
    hdr = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    tag = os.path.basename(f)[4:-4]
    if hdr is None: print(tag, "no data"); continue
    h, vals = rows[hdr], rows[hdr + 2]
    tabs[tag] = dict(zip(h, vals))
    tabs[tag]["Kernel Name"] = tabs[tag].get("Kernel Name", "")[:40]
keys = sorted({k for t in tabs.values() for k in t if ("__" in k and not k.endswith((".max", ".min", ".sum.pct_of_peak_sustained_elapsed"))) or k == "Kernel Name"})
tags = list(tabs)
print("metric".ljust(90), *[t.rjust(14) for t in tags])
for k in keys:
    vs = [tabs[t].get(k, "") for t in tags]
    if all(v in ("", "0", "0.00") for v in vs): continue
    print(k[:90].ljust(90), *[v[:14].rjust(14) for v in vs])
PY
cp "$OUT/ncu-summary.txt" "$FINAL/"
tar czf "$FINAL/ncu.tgz" -C "$OUT" $(cd "$OUT" && ls ncu-*)
