#!/usr/bin/env bash
# SASS of generated gemv_int4 kernels (TP 1) and of the prototype, on the GPU machine (nvcc and
# cuobjdump there), from the repository root with carry/ (scripts/build-gpu-binary.sh):
#   OUT=$OUT bash bench/proto/sass/dump.sh
# Each line of SPECS is a $WAVEFUSE_SCHEDULE_SM90 override ("default": none).
set -euo pipefail
out=${OUT:-.}
SPECS=${SPECS:-"default
workgroup_size=128,threads_per_column=4,k_split=4,stream_weights=true,x_in_lds=false,mma_decode=shift"}
i=0
while IFS= read -r spec; do
  [ -z "$spec" ] && continue
  i=$((i + 1))
  if [ "$spec" = default ]; then spec=""; fi
  WAVEFUSE_SCHEDULE_SM90="$spec" carry/wavefuse emit gemv_int4 --target sm90 --tp 1 >"/tmp/gen_$i.cu"
  echo "gen_$i: ${spec:-default}" >>"$out/sass-index.txt"
  nvcc -cubin -O3 -arch=sm_90 -o "/tmp/gen_$i.cubin" "/tmp/gen_$i.cu" -Xptxas -v 2>&1 | grep -i registers || true
  cuobjdump -sass "/tmp/gen_$i.cubin" >"$out/gen_$i.sass"
done <<<"$SPECS"
nvcc -cubin -O3 -std=c++17 -arch=sm_90 -o /tmp/proto.cubin bench/proto/int4_gemv_proto.cu
cuobjdump -sass /tmp/proto.cubin >"$out/proto.sass"
