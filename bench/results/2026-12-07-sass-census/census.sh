#!/usr/bin/env bash
# The static SASS census of the issue-40 tensor-core GEMV (no GPU): each kernel emitted by the
# release binary, compiled by nvcc for sm_90 (the project's CUDA 13.0 wheels), disassembled by
# cuobjdump, and loops.py's count of its main loop (the innermost loop holding the most HMMA):
# instructions per HMMA, the work the SM issues per tensor-core instruction.
# Needs cuobjdump and nvdisasm on PATH (not in scripts/install-deps.sh: the PyPI wheels
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, unpacked) and, for Marlin's rows, carry/marlin.
# Usage, repository root: bash bench/results/2026-12-07-sass-census/census.sh > table.txt
set -euo pipefail
source .venv-cuda/wavefuse-env.sh
D=$(dirname "${BASH_SOURCE[0]}")
T=$(mktemp -d)
W=target/release/wavefuse
W128="columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,mma_scale=weight,k_unit_words=8,k_split=4"
row() { # name batch override
  WAVEFUSE_SCHEDULE_SM90="$3" $W emit gemv_int4 --target sm90 --tp 1 --batch "$2" > "$T/$1.cu"
  nvcc -cubin -arch=sm_90 -O3 "$T/$1.cu" -o "$T/$1.cubin" 2>/dev/null
  cuobjdump -sass "$T/$1.cubin" > "$T/$1.sass"
  printf '%-28s %s ' "$1" "$(sed -n 2p "$T/$1.cu" | grep -oE '[0-9]+ workgroups x [0-9]+ lanes')"
  python3 "$D/loops.py" "$T/$1.sass"
}
for b in 1 8 16 32 64; do row "default-b$b" $b ""; done
for ph in 1 2 4; do row "W128-b64-phases$ph" 64 "$W128,x_phase_units=$ph"; done
if [ -d carry/marlin ]; then
  mkdir -p "$T/marlin" && cp carry/marlin/marlin/marlin_cuda_kernel.cu "$T/marlin/"
  sed -i -e '/createpolicy\.fractional\.L2::evict_first/d' \
      -e 's/cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;/cp.async.cg.shared.global [%0], [%1], %2;/' \
      "$T/marlin/marlin_cuda_kernel.cu"
  nvcc -cubin -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I"$T/marlin" -o "$T/marlin.cubin" bench/torch/marlin_shim.cu
  cuobjdump -sass "$T/marlin.cubin" > "$T/marlin.sass"
  echo "Marlin $(cat carry/marlin/COMMIT), every instance (template <threads, m blocks, n blocks, k blocks, stages, group blocks>):"
  python3 "$D/loops.py" "$T/marlin.sass"
fi
rm -rf "$T"
