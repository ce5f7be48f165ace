#!/usr/bin/env bash
# Issue 40, one device call: the tensor-core GEMV past batch 8 with the group scale on the
# decoded FP16 weights (`mma_scale=weight`: half the f32 accumulators, no per-unit FMAs) and the
# tilings it frees registers for, against the default and Marlin in the same call.
# 1. `wavefuse ab --timing graphs --iters 200` of `gemv_int4` at 5120 -> 17408 (qwen27b-tp1) and
#    17408 -> 5120 (the k17408 model config) at batch 16, 32, 64, once per schedule override
#    (WAVEFUSE_SCHEDULE_SM90; each checked against the f64 reference first), in two rounds.
# 2. Marlin, tinygemm and cuBLAS FP16 at the same rows (bench/torch/marlin_bench.py).
# 3. Nsight Compute on the default and the best-guess override at 5120 -> 17408 batch 64.
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh plus carry/marlin:
#   bash bench/results/2026-12-06-h100-mma-scale/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
echo "wavefuse $WAVEFUSE_COMMIT; marlin $(cat carry/marlin/COMMIT)"
M=/tmp/marlin
mkdir -p $M
cp carry/marlin/marlin/marlin_cuda_kernel.cu $M/
sed -i -e '/createpolicy\.fractional\.L2::evict_first/d' \
    -e 's/cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;/cp.async.cg.shared.global [%0], [%1], %2;/' \
    $M/marlin_cuda_kernel.cu
(timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I$M \
    -o $M/libmarlin.so bench/torch/marlin_shim.cu > "$OUT/marlin-build.txt" 2>&1
    echo "nvcc exit $? at $(el) s" >> "$OUT/marlin-build.txt") &
BUILD=$!
C=bench/results/2026-12-03-h200-marlin
SH=qwen27b-tp1-b16,qwen27b-tp1-b32,qwen27b-tp1-b64
OVS=(
  ""
  "mma_scale=weight"
  "mma_scale=weight,k_unit_words=4"
  "mma_scale=weight,k_unit_words=8"
  "mma_scale=weight,columns_per_workgroup=128,threads_per_column=1"
  "mma_scale=weight,columns_per_workgroup=128,threads_per_column=1,k_split=4"
  "mma_scale=weight,columns_per_workgroup=64,threads_per_column=2,k_unit_words=4"
  "mma_scale=weight,k_unit_words=4,pipeline_depth=2"
  "mma_scale=weight,k_split=1"
)
for round in 1 2; do
  for i in "${!OVS[@]}"; do
    for shape in n17408 k17408; do
      cfg=(); [ $shape = k17408 ] && cfg=(--model-config $C/k17408-config.json)
      tag="r$round-c$i-$shape"
      WAVEFUSE_SCHEDULE_SM90="${OVS[$i]}" timeout 90 $W ab gemv_int4 "${cfg[@]}" --shapes $SH \
          --timing graphs --iters 200 --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
      echo "$tag [${OVS[$i]}]: exit $? ($(el) s)" >> "$OUT/exits.txt"
    done
  done
  [ $(el) -gt 330 ] && break
done
wait $BUILD
tail -1 "$OUT/marlin-build.txt"
timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120 --batches 16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active"
for p in "0:" "2:mma_scale=weight,k_unit_words=4"; do
  [ $(el) -gt 520 ] && break
  n=${p%%:*}; ov=${p#*:}
  WAVEFUSE_SCHEDULE_SM90="$ov" timeout 60 "$NCU" --clock-control none -k "regex:^gemv_int4" --launch-count 1 \
      --metrics "$MET" --csv --page raw $W run gemv_int4 --batch 64 --device gpu > "$OUT/ncu-c$n.csv" 2> "$OUT/ncu-c$n.err"
  echo "ncu-c$n: exit $? ($(el) s)" >> "$OUT/exits.txt"
done
{
  cat "$OUT/exits.txt"
  for f in "$OUT"/r*-c*.txt; do echo "== $(basename $f .txt)"; grep -E " generated " "$f" | cut -c1-160; done
  tail -12 "$OUT/others.txt"
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$OUT/others.txt" "$OUT/log.txt" "$FINAL/" 2>/dev/null
cp "$OUT"/ncu-c*.csv "$FINAL/" 2>/dev/null
tar czf "$FINAL/results.tgz" -C "$OUT" --exclude=log.txt .
