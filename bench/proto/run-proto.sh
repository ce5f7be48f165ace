#!/usr/bin/env bash
# Build and run the INT4 GEMV prototype on an sm_90 GPU (the device machine: nvcc in PATH).
# bench/proto/gen/gemv_int4.cu is the baseline the prototype times: `wavefuse emit gemv_int4 --target sm90
# --tp 1 --out bench/proto/gen` at commit 5e6d796 (8 K warps per tile, no split-K), kept as it was.
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-.}
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/int4_gemv_proto int4_gemv_proto.cu -Xptxas -v 2> "$out/ptxas.txt" || { cat "$out/ptxas.txt"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$out/proto.md"
/tmp/int4_gemv_proto | tee -a "$out/proto.md"
