#!/usr/bin/env bash
# SASS of the generated gemv_int4 kernels and of the prototype (needs nvcc and cuobjdump: the GPU machine).
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-.}
for f in gen_*.cu; do
  nvcc -cubin -O3 -arch=sm_90 -o /tmp/${f%.cu}.cubin $f -Xptxas -v 2>&1 | grep -i "registers" || true
  cuobjdump -sass /tmp/${f%.cu}.cubin > "$out/${f%.cu}.sass"
done
nvcc -cubin -O3 -std=c++17 -arch=sm_90 -o /tmp/proto.cubin ../int4_gemv_proto.cu
cuobjdump -sass /tmp/proto.cubin > "$out/proto.sass"
