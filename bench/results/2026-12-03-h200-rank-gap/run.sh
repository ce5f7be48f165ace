#!/usr/bin/env bash
# One device call (nvidia-h200), issue 20: the gap of two "one TP 4 rank alone" INT4 GEMVs at batch 1,
# 4352 -> 5120 (k4352) and 1536 -> 5120 (k1536), and the 5120 -> 4352 rank (tp4b1) as a control already
# measured in ../2026-12-03-h200-int4-gap/. Builds the variants' cubins (var/, from make_variants.py) and
# the gap folder's harness (../2026-12-03-h200-int4-gap/gap_bench.cu) with nvcc there; times every
# variant and the linear read of the same bytes, each shape twice (the second pass in reversed order,
# the shapes alternating); PyTorch INT4 + cuBLAS FP16 at the same shapes (torch_gap.py, a copy of the
# gap folder's with these shapes); Nsight Compute --set full on the two emitted kernels, sections on
# their fixed part (noloop). Time guard: everything under ~400 s.
# Usage, repository root: bash bench/results/2026-12-03-h200-rank-gap/run.sh
# Writes $OUT/results.tgz, $OUT/summary.md, $OUT/log.txt.
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
cd bench/results/2026-12-03-h200-rank-gap
G=../2026-12-03-h200-int4-gap
R=$OUT; C=/tmp/cubin; mkdir -p $R/ncu $R/sass $C
exec > >(tee $R/log.txt) 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
nvcc --version | tail -2; ncu --version | tail -1
ls var/*.cu | xargs -P 16 -I{} sh -c 'b=$(basename {} .cu); timeout 120 nvcc -cubin -O3 -arch=sm_90 -Xptxas -v -o '$C'/$b.cubin {} > '$C'/$b.ptxas 2>&1 || echo "COMPILE FAIL $b"'
timeout 120 nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -o /tmp/gap_bench $G/gap_bench.cu -lcuda || { echo HARNESS BUILD FAILED; }
cp $C/*.ptxas $R/sass/ 2>/dev/null
echo "compile: $(el) s"
# shapes: tag K N B grid (grids from gen/*.abi.toml)
SH="k4352 4352 5120 1 640
k1536 1536 5120 1 480
tp4b1 5120 4352 1 680"
for tag in k4352 k1536 tp4b1; do bash mk_manifest.sh $tag $C > $R/manifest-$tag.txt; tac $R/manifest-$tag.txt > $R/manifest-$tag-rev.txt; done
for rep in 1 2; do
  echo "$SH" | while read tag K N B G_; do
    m=$R/manifest-$tag.txt; [ $rep = 2 ] && m=$R/manifest-$tag-rev.txt
    echo "=== $tag rep$rep ($(el) s) ==="
    timeout 60 /tmp/gap_bench $K $N $B $G_ $m $R/$tag-rep$rep || echo "BENCH FAIL $tag rep$rep"
  done
done
echo "benches done: $(el) s"
PYTHONUNBUFFERED=1 timeout 120 python3 torch_gap.py $R/torch.md || echo "TORCH FAIL"
echo "torch done: $(el) s"
NCU="ncu --clock-control none --launch-skip 20 --launch-count 1"
SEC="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats"
prof() { # tag K N B G label set
  local tag=$1 K=$2 N=$3 B=$4 G_=$5 lab=$6 set=$7
  if [ $(el) -gt 330 ]; then echo "SKIP ncu $tag $lab (time guard, $(el) s)"; return; fi
  timeout 60 $NCU $set -k regex:"^gemv_int4_${lab}\$" -o $R/ncu/$tag-$lab -f /tmp/gap_bench $K $N $B $G_ $R/manifest-$tag.txt /tmp/ncu-$tag ncu $lab > $R/ncu/$tag-$lab.log 2>&1 || echo "NCU FAIL $tag $lab"
  ncu --import $R/ncu/$tag-$lab.ncu-rep --page details > $R/ncu/$tag-$lab.txt 2>&1
  ncu --import $R/ncu/$tag-$lab.ncu-rep --page raw --csv > $R/ncu/$tag-$lab-raw.csv 2>&1
  echo "ncu $tag $lab: $(el) s"
}
prof k4352 4352 5120 1 640 full "--set full"
prof k1536 1536 5120 1 480 full "--set full"
STALL="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
prof k1536 1536 5120 1 480 noloop "$SEC $STALL"
prof k4352 4352 5120 1 640 noloop "$SEC $STALL"
prof tp4b1 5120 4352 1 680 full "--set full"
echo "ncu done: $(el) s"
for b in k4352_full k1536_full tp4b1_full k4352_pf1early k1536_pf1early; do cuobjdump -sass $C/$b.cubin > $R/sass/$b.sass 2>&1; done
gzip -f $R/sass/*.sass
cat $R/k4352-rep1.md $R/k1536-rep1.md $R/tp4b1-rep1.md $R/k4352-rep2.md $R/k1536-rep2.md $R/tp4b1-rep2.md $R/torch.md > $FINAL/summary.md 2>/dev/null
echo "total $(el) s"; date -u
cp $R/log.txt $FINAL/
tar czf $FINAL/results.tgz -C $R --exclude=log.txt .
