#!/usr/bin/env bash
# Device call 1 (nvidia-h200): build the variants' cubins and the harness there, time every variant at
# every shape (graphs of 20, 120 replays), PyTorch's baselines, Nsight Compute on the full kernels.
# Usage (repository root): bash bench/results/2026-12-03-h200-int4-gap/run1.sh   ($OUT set by the device tool)
set -uo pipefail
cd "$(dirname "$0")"
R=/tmp/res; C=/tmp/cubin; mkdir -p $R $C $R/ncu $R/sass "$OUT"
exec > >(tee $R/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
nvcc --version | tail -2; ncu --version | tail -1
t0=$(date +%s)
ls var/*.cu | xargs -P 16 -I{} sh -c 'b=$(basename {} .cu); nvcc -cubin -O3 -arch=sm_90 -Xptxas -v -o '$C'/$b.cubin {} > '$C'/$b.ptxas 2>&1 || echo "COMPILE FAIL $b"'
nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -o /tmp/gap_bench gap_bench.cu -lcuda || { echo HARNESS BUILD FAILED; exit 1; }
cp $C/*.ptxas $R/sass/ 2>/dev/null
echo "compile: $(( $(date +%s) - t0 )) s"
# shapes: tag K N B grid
SH="tp1b1 5120 17408 1 1088
tp1b8 5120 17408 8 1088
tp4b1 5120 4352 1 680
tp4b8 5120 4352 8 680
k17408 17408 5120 1 640"
echo "$SH" | while read tag K N B G; do
  bash mk_manifest.sh $tag $C > $R/manifest-$tag.txt
  echo "=== $tag ==="; /tmp/gap_bench $K $N $B $G $R/manifest-$tag.txt $R/$tag-rep1 || echo "BENCH FAIL $tag"
done
# a second repeat of the two TP 1 shapes, manifest reversed (drift / spread)
for tag in tp1b1 tp1b8; do
  read K N B G <<<"$(echo "$SH" | awk -v t=$tag '$1==t {print $2, $3, $4, $5}')"
  tac $R/manifest-$tag.txt > $R/manifest-$tag-rev.txt
  echo "=== $tag rep2 (reversed) ==="; /tmp/gap_bench $K $N $B $G $R/manifest-$tag-rev.txt $R/$tag-rep2 || echo "BENCH FAIL $tag rep2"
done
echo "benches done: $(( $(date +%s) - t0 )) s"
PYTHONUNBUFFERED=1 timeout 240 python3 torch_gap.py $R/torch.md || echo "TORCH FAIL"
echo "torch done: $(( $(date +%s) - t0 )) s"
# Nsight Compute: the full kernels (--set full), and the batch-8 / rotated candidates (sections)
NCU="ncu --clock-control none --launch-skip 20 --launch-count 1"
prof() { # tag K N B G label set
  local tag=$1 K=$2 N=$3 B=$4 G=$5 lab=$6 set=$7
  timeout 150 $NCU $set -k regex:"^gemv_int4_${lab}\$" -o $R/ncu/$tag-$lab -f /tmp/gap_bench $K $N $B $G $R/manifest-$tag.txt /tmp/ncu-$tag ncu $lab > $R/ncu/$tag-$lab.log 2>&1 || echo "NCU FAIL $tag $lab"
  ncu --import $R/ncu/$tag-$lab.ncu-rep --page details > $R/ncu/$tag-$lab.txt 2>&1
  ncu --import $R/ncu/$tag-$lab.ncu-rep --page raw --csv > $R/ncu/$tag-$lab-raw.csv 2>&1
}
prof tp1b1 5120 17408 1 1088 full "--set full"
prof tp1b8 5120 17408 8 1088 full "--set full"
prof tp4b1 5120 4352 1 680 full "--set full"
SEC="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats"
prof tp1b1 5120 17408 1 1088 rot_lb9 "$SEC"
prof tp1b1 5120 17408 1 1088 xglobal_lb9 "$SEC"
prof tp1b8 5120 17408 8 1088 xglobal_lb9 "$SEC"
prof tp1b1 5120 17408 1 1088 noglobal_lb9 "$SEC"
echo "ncu done: $(( $(date +%s) - t0 )) s"
for b in tp1b1_full tp1b1_rot_lb9 tp1b1_xglobal_lb9 tp1b8_full tp1b8_xglobal_lb9 tp4b1_full k17408_full; do cuobjdump -sass $C/$b.cubin > $R/sass/$b.sass 2>&1; done
gzip -f $R/sass/*.sass
cat $R/*-rep*.md $R/torch.md > "$OUT/summary-1.md"
tar czf "$OUT/results-1.tgz" -C $R .
cp $R/log.txt "$OUT/log-1.txt"
date -u
