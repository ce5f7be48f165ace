#!/usr/bin/env bash
# shellcheck disable=SC2317 # the functions run as steps are called through step "$@"
# For a machine with one or more AMD MI50/MI60 (gfx906): installs what it needs from ROCm, builds
# wavefuse, runs everything that can run there, and packs every result file into one archive to
# attach to an issue. Nothing here has run on an MI50 yet: the results are the first
# measurements, whatever they say. The steps, in order (each writes $OUT/<step>.txt; steps.txt
# holds every step's command and exit status):
#
#   install        hipcc, rocminfo and the HIP runtime (libamdhip64) when missing: Debian's own
#                  packages (hipcc rocm-device-libs rocminfo libamdhip64-dev, as install-deps.sh)
#                  through apt-get, as root or with sudo; otherwise it prints what to install and
#                  exits 2 (on a system that is not Debian or Ubuntu: the ROCm install guide)
#   machine.txt    date, commit, rocminfo's GPUs, hipcc, amdgpu's version, /dev/kfd (the driver)
#   build          cargo build --release of the CLI (needs cargo: https://rustup.rs)
#   check, check-tp1             hipcc resources vs budgets and the MI50 time model, TP 4 and TP 1
#   run-<kernel>-tp{1,4}         five kernels on the GPU against the f64 reference
#   gpu-suite      the quick GPU suite through HIP, with back-to-back stress launches
#   ab-no-gpu, ab, ab-graphs     the A/B table (model only; HIP events; HIP graphs): generated vs
#                                the hand-written HIP references
#   tune           a short timed `tune gemv_int4 --arch gfx906`
#   mgpu-same      mgpu-bench with TP 4 and TP 2 ranks on one GPU
#   decoder-ab     with PyTorch for ROCm (HIP devices are `cuda` to it): issue 37's decoder A/B in
#                  tokens/s (examples/decoder, `python3 -m wf_decoder.ab --device cuda`) at
#                  Llama-3.1-8B's config, TP 1 and TP 4 ranks on one GPU, batch 1 and 8; else
#                  steps.txt says "decoder-ab: skipped (...)". The 27B-shaped config does not fit
#                  one 32 GB card beside path (a)'s converted weights. PyTorch's INT4 kernel is
#                  not built for gfx906 (no MFMA): path (a) then falls back to dequantised FP16,
#                  and its row says so
#   with 2-4 gfx906 GPUs:
#   gpu-suite-per-device, mgpu   one rank per GPU: the per-device suite and mgpu-bench
#   rccl-tp{2,4}, rccl-compare   RCCL's side on the same GPUs: bench/torch/nccl_allreduce.py under
#                  torchrun (PyTorch for ROCm: RCCL is its "nccl" backend), then beside mgpu.json;
#   rccl-tests-build, rccl-tests-tp{2,4}   else, with git, network and RCCL: rccl-tests'
#                  all_reduce_perf, 10 KB and 32 KB FP16 sums, eager and in HIP graphs;
#                  else steps.txt says "rccl step: skipped (...)". TP 4 only with >= 4 GPUs.
#
# Never run on an MI50: every step above. What has run elsewhere: the CUDA equivalents of build,
# check, run, gpu-suite (also through `--runtime hip` on a test double of HIP), ab, tune,
# mgpu-same on one H200, the per-device suite, mgpu and nccl_allreduce.py on 2 x H200
# (scripts/multi-gpu.sh); nccl_allreduce.py at world size 1 on an H200 and this script's
# --check-only on it and on a machine without a GPU (bench/results/2026-12-02-h200-mi50-script),
# where the install step's apt-get ran only as a no-op (the packages there, hipcc hidden from
# PATH). Never run anywhere: an install that installs, the RCCL steps on ROCm, rccl-tests.
#
#   bash scripts/mi50.sh [--check-only] [OUT_DIR]     (default OUT_DIR: ./mi50-results)
#
# --check-only (or WAVEFUSE_MI50_DRY=1): print what it would install and which steps it would
# run, then exit 0, changing nothing (WAVEFUSE_MI50_GPUS=N there pretends N gfx906 GPUs).
# Exit status: 0 when every step exited 0; 1 when one did not; 2 when something it needs is
# missing and it could not install it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
DRY=${WAVEFUSE_MI50_DRY:-0}
if [ "${1:-}" = --check-only ]; then DRY=1; shift; fi
OUT=${1:-$PWD/mi50-results}
ROCM_GUIDE=https://rocm.docs.amd.com/projects/install-on-linux/en/latest/
RCCL_TESTS_URL=https://github.com/ROCm/rccl-tests
RCCL_TESTS_DIR=${TMPDIR:-/tmp}/wavefuse-rccl-tests
status=0

# ---- helpers -----------------------------------------------------------------------------------
say() { # a line on stdout and in steps.txt
    echo "$*"
    [ "$DRY" = 1 ] || echo "$*" >> "$OUT/steps.txt"
}
step() { # name, then the command: runs it into $OUT/name.txt; its exit status counts
    local name=$1; shift
    if [ "$DRY" = 1 ]; then echo "would run $name: $*"; return 0; fi
    echo "== $name: $*" | tee -a "$OUT/steps.txt"
    "$@" > "$OUT/$name.txt" 2>&1
    local rc=$?
    echo "   exit $rc" | tee -a "$OUT/steps.txt"
    [ $rc = 0 ] || status=1
}
ld_cache() { "$(command -v ldconfig || echo /sbin/ldconfig)" -p 2> /dev/null; }
hip_lib() { # where libamdhip64 is, as the runtime's dlopen finds it (ld.so's cache, LD_LIBRARY_PATH)
    local found d f
    found=$(ld_cache | grep -o '/[^ ]*/libamdhip64\.so[.0-9]*$')
    [ -n "$found" ] && { echo "${found%%$'\n'*}"; return 0; }
    local IFS=:
    for d in ${LD_LIBRARY_PATH:-}; do
        for f in "$d"/libamdhip64.so*; do [ -e "$f" ] && { echo "$f"; return 0; }; done
    done
    return 1
}
rocm_paths() { # an AMD ROCm install in /opt/rocm: on PATH and LD_LIBRARY_PATH for this run
    [ -d /opt/rocm/bin ] && case ":$PATH:" in *:/opt/rocm/bin:*) ;; *) export PATH=$PATH:/opt/rocm/bin ;; esac
    if ! hip_lib > /dev/null && compgen -G "/opt/rocm/lib/libamdhip64.so*" > /dev/null; then
        export LD_LIBRARY_PATH=/opt/rocm/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
}
missing_packages() { # the Debian packages for what is missing (install-deps.sh's names)
    command -v hipcc > /dev/null || echo hipcc rocm-device-libs
    command -v rocminfo > /dev/null || echo rocminfo
    hip_lib > /dev/null || echo libamdhip64-dev
}
rocm_found() { # what the install step looks for, and where it is
    echo "hipcc $(command -v hipcc || echo missing), rocminfo $(command -v rocminfo || echo missing), HIP runtime $(hip_lib || echo missing)"
}
debian_like() { # Debian or Ubuntu (or a derivative), with apt-get
    # shellcheck disable=SC1091 # the running system's file
    command -v apt-get > /dev/null && [ -r /etc/os-release ] &&
        (. /etc/os-release; case " ${ID:-} ${ID_LIKE:-} " in *" debian "* | *" ubuntu "*) exit 0 ;; esac; exit 1)
}
can_root() { [ "$(id -u)" = 0 ] || sudo -n true 2> /dev/null; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
install_rocm() { # the install step: returns 2 when something is missing that it cannot install
    local pkgs; read -ra pkgs <<< "$(missing_packages | tr '\n' ' ')"
    local cmd="apt-get update && apt-get install -y --no-install-recommends ${pkgs[*]}"
    if [ ${#pkgs[@]} = 0 ]; then
        echo "install: nothing to do: $(rocm_found)"
        return 0
    fi
    echo "install: found: $(rocm_found)"
    echo "install: missing, as Debian packages: ${pkgs[*]}"
    if ! debian_like; then
        echo "install: not Debian or Ubuntu: nothing installed. Install ROCm (hipcc, rocminfo, the HIP runtime): $ROCM_GUIDE"
        return 2
    fi
    if ! can_root; then echo "install: not root and no sudo: nothing installed. As root, run: $cmd"; return 2; fi
    if [ "$DRY" = 1 ]; then echo "install: would run, as root: $cmd"; return 0; fi
    echo "install: as root: $cmd"
    if ! { as_root apt-get update -q &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}"; }; then
        echo "install: apt-get failed: this release may not have them (Debian 12 and Ubuntu 23.04 on do); else install ROCm: $ROCM_GUIDE"
        return 2
    fi
    read -ra pkgs <<< "$(missing_packages | tr '\n' ' ')"
    [ ${#pkgs[@]} = 0 ] || { echo "install: still missing after apt-get: ${pkgs[*]}"; return 2; }
    echo "install: done: $(rocm_found)"
}
kfd_state() { # the amdgpu kernel driver, as the HIP runtime needs it
    if [ ! -e /dev/kfd ]; then echo "amdgpu kernel driver: /dev/kfd absent (amdgpu not loaded, or a container without --device=/dev/kfd): the GPU steps will fail"
    elif [ -r /dev/kfd ] && [ -w /dev/kfd ]; then echo "amdgpu kernel driver: /dev/kfd present, read-write for $(id -un)"
    else echo "amdgpu kernel driver: /dev/kfd present but not read-write for $(id -un) (join the render and video groups)"; fi
}
machine_info() {
    local info
    date -u +%Y-%m-%dT%H:%M:%SZ
    git rev-parse --short=12 HEAD 2>/dev/null
    if ! command -v rocminfo > /dev/null; then echo "rocminfo: not found"
    elif ! info=$(rocminfo 2>&1); then echo "rocminfo: failed: $(echo "$info" | grep -v '^libkmod' | tail -1 | sed 's/\x1b\[[0-9;]*m//g')"
    else echo "$info" | grep -E "Marketing Name|gfx" | sort -u; fi
    hipcc --version 2>/dev/null | head -2 || echo "hipcc: not found"
    cat /sys/module/amdgpu/version 2>/dev/null || echo "amdgpu version: unknown"
    kfd_state
}
gfx906_count() {
    if [ "$DRY" = 1 ] && [ -n "${WAVEFUSE_MI50_GPUS:-}" ]; then echo "$WAVEFUSE_MI50_GPUS"; return; fi
    rocminfo 2>/dev/null | grep -c "Name: *gfx906"
}
torch_rocm_one() { # PyTorch for ROCm seeing a GPU, with safetensors; else prints what python3 has
    python3 -c 'import torch, safetensors; assert torch.version.hip and torch.cuda.device_count() >= 1' 2>/dev/null && return 0
    python3 -c 'import torch; print("torch", torch.__version__, "hip", torch.version.hip, "devices", torch.cuda.device_count())' \
        2>/dev/null || echo "python3 has no torch"
    return 1
}
decoder_ab() { # issue 37's A/B in tokens/s on one gfx906 GPU (ranks of TP 4 on that GPU)
    PYTHONPATH=$PWD/examples/decoder timeout 1800 python3 -m wf_decoder.ab --config llama31_8b \
        --device cuda --paths a,b,c --tp 1,4 --batch 1,8 --steps 50 --runs 3 --out "$OUT/decoder-ab"
}
torch_rocm() { # PyTorch for ROCm seeing >= 2 GPUs; else prints what python3 has instead
    python3 -c 'import torch; assert torch.version.hip and torch.cuda.device_count() >= 2' 2>/dev/null && return 0
    python3 -c 'import torch; print("torch", torch.__version__, "hip", torch.version.hip, "devices", torch.cuda.device_count())' \
        2>/dev/null || echo "python3 has no torch"
    return 1
}
rocm_root() { local h; h=$(command -v hipcc) && dirname "$(dirname "$h")"; }
rccl_home() { # the prefix whose lib/ holds librccl.so (rccl-tests' NCCL_HOME)
    if compgen -G "/opt/rocm/lib/librccl.so*" > /dev/null; then echo /opt/rocm
    elif [[ $(ld_cache) == *librccl.so* ]]; then echo /usr
    else return 1; fi
}
rccl_tests_missing() { # what rccl-tests' build lacks here, or nothing
    command -v hipcc > /dev/null || echo "no hipcc"
    command -v hipify-perl > /dev/null || echo "no hipify-perl"
    rccl_home > /dev/null || echo "no librccl"
    if ! command -v git > /dev/null; then echo "no git"
    elif ! timeout 15 git ls-remote "$RCCL_TESTS_URL" HEAD > /dev/null 2>&1; then echo "no network to $RCCL_TESTS_URL"; fi
}
rccl_torch() { # N ranks: NCCL's benchmark script, which ROCm's PyTorch runs on RCCL
    timeout 600 python3 -m torch.distributed.run --standalone --nproc_per_node="$1" \
        bench/torch/nccl_allreduce.py --out "$OUT/rccl-tp$1.json"
}
build_rccl_tests() { # rccl-tests' Makefile build, without MPI, for gfx906 (ROCM_PATH/HIP_HOME: both spellings)
    local rocm; rocm=$(rocm_root)
    rm -rf "$RCCL_TESTS_DIR" && git clone --depth 1 "$RCCL_TESTS_URL" "$RCCL_TESTS_DIR" &&
        git -C "$RCCL_TESTS_DIR" log -1 --format='rccl-tests %H %cd' &&
        make -C "$RCCL_TESTS_DIR" -j"$(nproc)" MPI=0 ROCM_PATH="$rocm" HIP_HOME="$rocm" \
            NCCL_HOME="$(rccl_home)" GPU_TARGETS=gfx906
}
rccl_tests() { # N GPUs from one process: 10 KB and 32 KB FP16 sums, eager, then in HIP graphs
    local perf=$RCCL_TESTS_DIR/build/all_reduce_perf
    local args=(-b 10240 -e 32768 -i 22528 -d half -o sum -g "$1" -n 100 -w 20)
    timeout 300 "$perf" "${args[@]}" && timeout 300 "$perf" "${args[@]}" -G 10
}
rccl_side() { # after mgpu: RCCL on the same GPUs, through PyTorch, else rccl-tests, else said so
    local tps=$1 n torch why
    if torch=$(torch_rocm); then
        for n in $tps; do step "rccl-tp$n" rccl_torch "$n"; done
        step rccl-compare python3 bench/torch/summarize.py --wavefuse "$OUT/mgpu.json" --nccl "$OUT"/rccl-tp*.json
        return
    fi
    why=$(rccl_tests_missing | paste -sd, - | sed 's/,/, /g')
    if [ -z "$why" ]; then
        step rccl-tests-build build_rccl_tests
        for n in $tps; do step "rccl-tests-tp$n" rccl_tests "$n"; done
    else
        say "rccl step: skipped (no PyTorch for ROCm, no rccl-tests)"
        say "   PyTorch: $torch; rccl-tests: $why"
    fi
}

# ---- the steps ---------------------------------------------------------------------------------
[ "$DRY" = 1 ] && echo "check only (nothing is installed, built or run; OUT would be $OUT)"
[ "$DRY" = 1 ] || mkdir -p "$OUT" || exit 2
rocm_paths
if [ "$DRY" = 1 ]; then install_rocm; rc=$?; else install_rocm 2>&1 | tee "$OUT/install.txt"; rc=${PIPESTATUS[0]}; fi
say "== install: exit $rc$([ "$rc" != 0 ] && [ "$DRY" = 1 ] && echo ' (the real run stops here, exit 2)')"
[ "$rc" = 0 ] || [ "$DRY" = 1 ] || exit 2
if [ "$DRY" = 1 ]; then machine_info; else machine_info > "$OUT/machine.txt"; kfd_state; fi
if ! command -v cargo > /dev/null; then
    echo "error: cargo not found; install Rust (https://rustup.rs) first" >&2
    [ "$DRY" = 1 ] || exit 2
fi
step build cargo build --release -p wavefuse-cli --bin wavefuse
W=$PWD/target/release/wavefuse
[ "$DRY" = 1 ] || [ -x "$W" ] || { echo "error: the build failed (see $OUT/build.txt)" >&2; exit 1; }
WAVEFUSE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export WAVEFUSE_COMMIT
step check "$W" check --target gfx906 --tp 4
step check-tp1 "$W" check --target gfx906 --tp 1
for k in gemv_int4 gemv_int4_dual_silu gemv_int4_qkv gemv_int4_allreduce_rmsnorm allreduce_residual_rmsnorm; do
    for tp in 1 4; do
        step "run-$k-tp$tp" "$W" run "$k" --tp $tp --device gpu --target gfx906
    done
done
step gpu-suite "$W" gpu-suite --quick --runtime hip --out "$OUT/gpu-suite.json"
step ab-no-gpu "$W" ab --no-gpu --shapes qwen27b-tp4,qwen27b-tp1 --md "$OUT/ab-model.md"
step ab "$W" ab --runtime hip --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab.json" --md "$OUT/ab.md"
step ab-graphs "$W" ab --runtime hip --timing graphs --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab-graphs.json" --md "$OUT/ab-graphs.md"
step tune "$W" tune gemv_int4 --arch gfx906 --runtime hip --shapes qwen27b-tp1 --quick --no-cache-store --md "$OUT/tune.md"
step mgpu-same "$W" mgpu-bench --runtime hip --same-device --tp 4,2 --json "$OUT/mgpu-same.json"
if [ "$DRY" = 1 ] || torch_rocm_one > /dev/null; then
    step decoder-ab decoder_ab
else
    say "decoder-ab: skipped (no PyTorch for ROCm seeing a GPU here: $(torch_rocm_one)); on the MI50 machine: pip install torch for ROCm and safetensors, then rerun"
fi
gpus=$(gfx906_count)
if [ "${gpus:-0}" -ge 2 ]; then
    tps=2; [ "$gpus" -ge 4 ] && tps="2 4"
    step gpu-suite-per-device "$W" gpu-suite --runtime hip --placement per-device --out "$OUT/gpu-suite-per-device.json"
    step mgpu "$W" mgpu-bench --runtime hip --json "$OUT/mgpu.json" --md "$OUT/mgpu.md"
    rccl_side "$tps"
else
    say "== per-device suite, mgpu-bench and RCCL: skipped, ${gpus:-0} gfx906 GPU(s) found"
fi
if [ "$DRY" = 1 ]; then echo "check only: done, nothing run"; exit 0; fi
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
echo "results: $OUT.tgz (exit $status)"
exit $status
