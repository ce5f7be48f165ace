#!/usr/bin/env bash
# The read-floor diagnostic of issue 7 (read_pattern.cu) on an sm_90 GPU (the device machine:
# nvcc and python3 in PATH), from any directory. The variants of the generated kernel are made
# here from the three generated kernels kept (gzipped) in gen-now/, gen-now8/ and gen-lop3/ (see
# bench/results/2026-11-30-h200-decode/RUN.txt for the commits they came from).
set -euo pipefail
cd "$(dirname "$0")"
for d in gen-now gen-now8 gen-lop3; do
    gzip -dc "$d/gemv_int4.cu.gz" >"$d/gemv_int4.cu"
done
python3 make_variants.py gen-now/gemv_int4.cu s16 >/dev/null
python3 make_variants.py gen-now8/gemv_int4.cu s8 >/dev/null
# the lop3 kernel renamed, without its prelude (read_pattern.cu defines wf_and_or)
sed -n '/^extern "C"/,$p' gen-lop3/gemv_int4.cu | sed '0,/^gemv_int4(/s//gemv_int4_lop3(/' >gen-now/v_lop3.cu
python3 make_offset.py gen-lop3/gemv_int4.cu gen-now/v_offset.cu gemv_int4_offset noprelude >/dev/null
python3 make_offset.py gen-lop3/gemv_int4.cu gen-now/v_offset12.cu gemv_int4_offset12 noprelude 12 >/dev/null
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/read_pattern read_pattern.cu 2>/dev/null
/tmp/read_pattern
