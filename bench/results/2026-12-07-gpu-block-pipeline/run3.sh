#!/usr/bin/env bash
# Issue 40, the third device call: version 3 of the probe, gemv_int4_pipe3.cu (64-row stages x 4;
# the 128-row description gemv_int4_pipe3-k128.abi.toml is not run: device time), Nsight Compute
# only when NCU_AFTER (seconds into the call) is not yet reached; otherwise as run.sh:
# the hand-written probe (the block-wide cp.async
# pipeline with a persistent striped grid, on the unpermuted GPTQ layout; see its header) beside
# the generated default in one `wavefuse ab --manual` per shape (both checked against the f64
# reference before timing), three descriptions (64-row stages: 4 buffers, two workgroups per SM up
# to batch 32, or 6 buffers, one per SM; 128-row stages, 3 buffers), batch 16/32/64 at 5120 -> 17408 and 17408 -> 5120, 32/64 at the TP 4 rank
# shapes; Marlin, tinygemm and cuBLAS FP16 at the same rows in the same call.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-block-pipeline/run3.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
P=bench/results/2026-12-07-gpu-block-pipeline
for shape in n17408 k17408; do
  run_manual "p4-$shape" $shape "16 32 64" $P/gemv_int4_pipe3.abi.toml
done
for shape in n4352 k4352; do
  run_manual "p4-$shape" $shape "32 64" $P/gemv_int4_pipe3.abi.toml
done
# The test fixture cli/tests/handwritten/gemv_int4_pipelined.cu (version 2 of the probe) as the
# ignored GPU test `gpu_checks_a_hand_written_kernel_in_dynamic_shared_memory` runs it.
timeout 100 $W ab gemv_int4 --shapes qwen27b-tp4-b16,qwen27b-tp4-b64 --manual cli/tests/handwritten/gemv_int4_pipelined.cu \
    --abi cli/tests/handwritten/gemv_int4_pipelined.cu.abi.toml --iters 20 > "$OUT/fixture.txt" 2>&1
echo "fixture: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
grep -E "correct|WRONG|error" "$OUT/fixture.txt" | cut -c1-150 >> "$FINAL/progress.txt"
run_others "16,32,64"
# Nsight Compute of the probe (4 stages) at 5120 -> 17408 batch 32 and 64: the stall census and
# pipe use beside ../2026-12-07-gpu-stall-census's Marlin and default rows (one launch inside the
# `ab` graphs after warm-up). Skipped when the call is short of time.
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum"
for b in 32 64; do
  [ "$(el)" -gt "${NCU_AFTER:-420}" ] && break
  timeout 100 "$NCU" --clock-control none -k "regex:^gemv_int4_pipe" --launch-skip 5 --launch-count 1 --metrics "$MET" --csv --page raw \
      $W ab gemv_int4 --shapes "qwen27b-tp1-b$b" --manual $P/gemv_int4_pipe3.cu --abi $P/gemv_int4_pipe3.abi.toml \
      --timing graphs --iters 20 > "$OUT/ncu-pipe-b$b.csv" 2> "$OUT/ncu-pipe-b$b.err"
  echo "ncu pipe b$b: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
done
python3 - "$OUT" <<'PY' > "$OUT/ncu-summary.txt"
import csv, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-*.csv"))):
    rows = [r for r in csv.reader(open(f)) if r]
    hdr = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    print("==", os.path.basename(f)[4:-4])
    if hdr is None: print("no data"); continue
    for k, v in zip(rows[hdr], rows[hdr + 2]):
        if "__" in k and not k.startswith(("device__", "profiler__", "numa__", "nvlink__")) and v not in ("", "0", "0.00"): print(f"  {k[:90]:90} {v}")
PY
cp "$OUT/ncu-summary.txt" "$FINAL/"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/p*-*.txt "$OUT"/k128-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated | hand-written |ERROR|refused|error|WRONG" "$f" | cut -c1-160
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
