#!/usr/bin/env bash
# Split-K, streamed weight loads and activations in LDS (issue 7): `scripts/sweep-int4.sh` over
# these schedule overrides, for the GPTQ GEMV kernels at TP 1 and TP 4 (ranks on one device).
# On the GPU machine: OUT=$OUT bash scripts/sweep-splitk.sh (carry/wavefuse from build-gpu-binary.sh).
export KERNELS=${KERNELS:-"gemv_int4 gemv_int4_dual_silu gemv_int4_qkv"}
w128="workgroup_size=128,threads_per_column=4"
export SPECS=${SPECS:-"default
x_in_lds=true,stream_weights=true
x_in_lds=true,stream_weights=true,$w128,k_split=4
x_in_lds=true,stream_weights=true,$w128,k_split=2
x_in_lds=true,stream_weights=true,$w128,k_split=8
x_in_lds=true,stream_weights=true,$w128,k_split=4,pipeline_depth=2
x_in_lds=true,$w128,k_split=4
x_in_lds=true,stream_weights=true,workgroup_size=64,threads_per_column=2,k_split=8"}
exec bash "$(dirname "$0")/sweep-int4.sh"
