#!/usr/bin/env bash
# Device call 3: k_split=1 + pf1 (+ xglobal) at TP 1 b1, pf1 under __launch_bounds__(128, 6) at the TP 4 rank (+ clus / xglobal),
# pf1 + xglobal + epi at batch 8 and at 17408 -> 5120; each shape twice (second pass reversed); ncu on the winners.
set -uo pipefail
cd "$(dirname "$0")"
R=/tmp/res; C=/tmp/cubin; mkdir -p $R $C $R/ncu $R/sass "$OUT"
exec > >(tee $R/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
t0=$(date +%s)
ls var/*.cu var2/*.cu var3/*.cu | xargs -P 16 -I{} sh -c 'b=$(basename {} .cu); nvcc -cubin -O3 -arch=sm_90 -Xptxas -v -o '$C'/$b.cubin {} > '$C'/$b.ptxas 2>&1 || echo "COMPILE FAIL $b"'
nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -o /tmp/gap_bench gap_bench.cu -lcuda || { echo HARNESS BUILD FAILED; exit 1; }
cp $C/*.ptxas $R/sass/
echo "compile: $(( $(date +%s) - t0 )) s"
SH="tp1b1 5120 17408 1 1088
tp1b8 5120 17408 8 1088
tp4b1 5120 4352 1 680
tp4b8 5120 4352 8 680
k17408 17408 5120 1 640"
for rep in 1 2; do
echo "$SH" | while read tag K N B G; do
  if [ $rep = 1 ]; then cp man3/$tag.txt $R/manifest-$tag.txt; else tac man3/$tag.txt > $R/manifest-$tag.txt; fi
  echo "=== $tag rep$rep ==="; /tmp/gap_bench $K $N $B $G $R/manifest-$tag.txt $R/$tag-rep$rep || echo "BENCH FAIL $tag"
done
done
echo "benches done: $(( $(date +%s) - t0 )) s"
NCU="ncu --clock-control none --launch-skip 20 --launch-count 1"
SEC="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats"
prof() { # tag K N B G label manifest-label
  local tag=$1 K=$2 N=$3 B=$4 G=$5 sym=$6 lab=$7
  timeout 120 $NCU $SEC --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' -k regex:"^${sym}\$" -o $R/ncu/$tag-$sym -f /tmp/gap_bench $K $N $B $G man3/$tag.txt /tmp/ncu-$tag ncu "$lab" > $R/ncu/$tag-$sym.log 2>&1 || echo "NCU FAIL $tag $sym"
  ncu --import $R/ncu/$tag-$sym.ncu-rep --page details > $R/ncu/$tag-$sym.txt 2>&1
  ncu --import $R/ncu/$tag-$sym.ncu-rep --page raw --csv > $R/ncu/$tag-$sym-raw.csv 2>&1
}
prof tp1b1 5120 17408 1 1088 gemv_int4_pf1 "ks1_pf1 (k_split=1)"
prof tp1b8 5120 17408 8 1088 gemv_int4_xglobal_lb9_epi xglobal_lb9_epi
prof tp4b1 5120 4352 1 680 gemv_int4_pf1_lb6_clus pf1_lb6_clus
echo "ncu done: $(( $(date +%s) - t0 )) s"
for b in tp1b1ks1_pf1 tp1b8_xglobal_lb9_epi tp4b1_pf1_lb6_clus tp4b8_xglobal_epi k17408_pf1; do cuobjdump -sass $C/$b.cubin > $R/sass/$b.sass 2>&1; done
gzip -f $R/sass/*.sass
cat $R/*-rep1.md $R/*-rep2.md > "$OUT/summary-3.md"
tar czf "$OUT/results-3.tgz" -C $R .
cp $R/log.txt "$OUT/log-3.txt"
date -u
