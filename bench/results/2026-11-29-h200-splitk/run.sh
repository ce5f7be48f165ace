#!/usr/bin/env bash
# Split-K, streamed weight loads and activations in LDS (issue 7): the sweep of
# ../2026-11-29-h200-int4-sweep/run.sh (scripts/sweep-int4.sh until issue 35) over
# these schedule overrides, for the GPTQ GEMV kernels at TP 1 and TP 4 (ranks on one device).
# On the GPU machine, from the repository root (carry/wavefuse from scripts/build-gpu-binary.sh):
#   OUT=$OUT bash bench/results/2026-11-29-h200-splitk/run.sh   (scripts/sweep-splitk.sh until issue 35)
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
exec bash "$(dirname "$0")/../2026-11-29-h200-int4-sweep/run.sh"
