#!/usr/bin/env bash
# Installs the external toolchains wavefuse tests against, on Debian 12 (root, no GPU needed):
#   - hipcc 5.2 (clang 15) for gfx906, from Debian's packages;
#   - CUDA 13.0 nvcc/ptxas/NVRTC for sm_90, from PyPI wheels, into $REPO/.venv-cuda;
#   - with WAVEFUSE_PY=1 (scripts/test.sh sets it): PyTorch, numpy, pytest and maturin, pinned,
#     from PyPI into $REPO/.venv-py, for the Python package's tests (python/).
# Then writes $REPO/.venv-cuda/wavefuse-env.sh (source it) and checks nvcc, NVRTC and hipcc on a
# trivial kernel. Idempotent: when everything is present and already verified it only checks and
# exits. Set WAVEFUSE_REVERIFY=1 to force the compile check.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv-cuda"
ENV_FILE="$VENV/wavefuse-env.sh"

# CUDA 13.0 Update 2 component versions (all 13.0.x; cudart and cccl have their own numbering).
CUDA_PINS=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-cccl==13.0.85
    nvidia-cuda-nvrtc==13.0.88
)
# g++ is nvcc's host preprocessor; Rust needs a C linker anyway, so it is normally there already.
APT_PKGS=(hipcc libamdhip64-dev rocm-device-libs g++)
# The LLVM back end (cargo feature `llvm`): LLVM 16 for inkwell/llvm-sys. Installed when
# WAVEFUSE_LLVM=1 (scripts/test.sh sets it: CI builds and tests the feature).
if [[ -n "${WAVEFUSE_LLVM:-}" ]]; then
    APT_PKGS+=(llvm-16-dev libpolly-16-dev libzstd-dev)
fi

log() { printf '[install-deps] %s\n' "$*"; }
die() { printf '[install-deps] ERROR: %s\n' "$*" >&2; exit 1; }
timed() { # timed LABEL CMD... : runs CMD, prints how long it took
    local label=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    log "$label took $((SECONDS - t0))s"
    return "$rc"
}
installed_something=0

# ---- 1. Debian packages ------------------------------------------------------------------------
need_python_venv() { ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; }
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ! -x "$VENV/bin/python" ]] && need_python_venv; then missing+=(python3 python3-venv); fi
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    log "apt: installing ${missing[*]}"
    apt_log=$(mktemp /tmp/wavefuse-apt.XXXXXX.log)
    timed "apt-get update" apt-get update -q >>"$apt_log" 2>&1 ||
        { tail -n 30 "$apt_log" >&2; die "apt-get update failed (log: $apt_log)"; }
    timed "apt-get install" apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$apt_log" 2>&1 ||
        { tail -n 30 "$apt_log" >&2; die "apt-get install failed (log: $apt_log)"; }
    log "apt: $(grep -c '^Setting up' "$apt_log") packages set up (log: $apt_log)"
    installed_something=1
else
    log "apt: ${APT_PKGS[*]} already installed"
fi

HIPCC="$(command -v hipcc || true)"
[[ -n "$HIPCC" ]] || HIPCC=/usr/bin/hipcc
[[ -x "$HIPCC" ]] || die "hipcc not found after installing the hipcc package"

# llvm-objdump that knows AMDGPU: the LLVM that hipcc's clang comes from (llvm-15 on Debian 12).
LLVM_OBJDUMP=""
for c in /usr/lib/llvm-15/bin/llvm-objdump /usr/bin/llvm-objdump-15 "$(command -v llvm-objdump || true)"; do
    if [[ -n "$c" && -x "$c" ]] && "$c" --version 2>/dev/null | grep -qi amdgcn; then
        LLVM_OBJDUMP="$c"
        break
    fi
done
[[ -n "$LLVM_OBJDUMP" ]] || die "no llvm-objdump with the AMDGPU target found (expected /usr/lib/llvm-15/bin/llvm-objdump)"

# ---- 2. CUDA 13.0 wheels -----------------------------------------------------------------------
have_pins() {
    local site pin name ver
    site=$(compgen -G "$VENV/lib/python3*/site-packages" | head -n1) || return 1
    for pin in "${CUDA_PINS[@]}"; do
        name=${pin%%==*}
        ver=${pin##*==}
        [[ -d "$site/${name//-/_}-$ver.dist-info" ]] || return 1
    done
}
if have_pins; then
    log "pip: CUDA wheels already at the pinned versions in $VENV"
else
    if [[ ! -x "$VENV/bin/python" ]]; then
        timed "python3 -m venv" python3 -m venv "$VENV"
    fi
    log "pip: installing ${CUDA_PINS[*]}"
    timed "pip install (CUDA wheels)" "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        --no-deps "${CUDA_PINS[@]}"
    installed_something=1
fi

CUDA_ROOT=$(compgen -G "$VENV/lib/python3*/site-packages/nvidia/cu13" | head -n1) ||
    die "nvidia/cu13 not found in $VENV"
NVCC="$CUDA_ROOT/bin/nvcc"
NVRTC_LIB="$CUDA_ROOT/lib/libnvrtc.so.13"
[[ -x "$NVCC" ]] || die "nvcc missing at $NVCC"
[[ -f "$NVRTC_LIB" ]] || die "libnvrtc.so.13 missing at $NVRTC_LIB"
# All six wheels unpack into one toolkit-shaped tree (nvidia/cu13/{bin,include,lib,nvvm}), so the
# wheel's own bin/nvcc.profile already adds -I cu13/include and -isystem cu13/include/cccl and
# finds cicc: nvcc needs no extra flags (host compiler: gcc/g++ from PATH). NVRTC is different:
# it dlopens libnvrtc-builtins.so.13.0 by bare name (no RUNPATH), so cu13/lib must be on
# LD_LIBRARY_PATH, and it needs -I for every include dir (WAVEFUSE_CUDA_INCLUDE, ':'-separated).
CUDA_INCLUDE="$CUDA_ROOT/include:$CUDA_ROOT/include/cccl"
NVCC_FLAGS=""

# ---- 2b. the Python package's venv (WAVEFUSE_PY=1) -------------------------------------------
# torch from PyPI brings its CUDA wheels (it also runs on machines without a GPU: the package's
# tests use the simulator device there). Checked by version, so an up-to-date venv costs nothing.
PY_VENV="$REPO/.venv-py"
# safetensors: the decoder example's GPTQ checkpoints (examples/decoder).
PY_PINS=(torch==2.11.0 numpy==2.4.6 pytest==9.2.0 maturin==1.16.0 safetensors==0.8.0)
have_py_pins() {
    [[ -x "$PY_VENV/bin/python" ]] || return 1
    "$PY_VENV/bin/python" - "${PY_PINS[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
PY
}
if [[ -n "${WAVEFUSE_PY:-}" ]]; then
    if have_py_pins; then
        log "pip: ${PY_PINS[*]} already in $PY_VENV"
    else
        [[ -x "$PY_VENV/bin/python" ]] || timed "python3 -m venv (.venv-py)" python3 -m venv "$PY_VENV"
        log "pip: installing ${PY_PINS[*]} into $PY_VENV"
        timed "pip install (Python package deps)" "$PY_VENV/bin/python" -m pip install -q \
            --disable-pip-version-check "${PY_PINS[@]}"
    fi
fi

# ---- 3. env file -------------------------------------------------------------------------------
env_text=$(cat <<EOF
# Written by scripts/install-deps.sh; source it.
export WAVEFUSE_NVCC='$NVCC'
export WAVEFUSE_NVCC_FLAGS='$NVCC_FLAGS'
export WAVEFUSE_NVRTC_LIB='$NVRTC_LIB'
export WAVEFUSE_CUDA_INCLUDE='$CUDA_INCLUDE'
export WAVEFUSE_HIPCC='$HIPCC'
export WAVEFUSE_LLVM_OBJDUMP='$LLVM_OBJDUMP'
export LLVM_SYS_160_PREFIX='/usr/lib/llvm-16'
case ":\$PATH:" in *":$CUDA_ROOT/bin:"*) ;; *) export PATH='$CUDA_ROOT/bin':"\$PATH" ;; esac
case ":\${LD_LIBRARY_PATH:-}:" in *":$CUDA_ROOT/lib:"*) ;; *) export LD_LIBRARY_PATH='$CUDA_ROOT/lib'"\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" ;; esac
EOF
)
if [[ -f "$ENV_FILE" && "$(cat "$ENV_FILE")" == "$env_text" && $installed_something == 0 && -z "${WAVEFUSE_REVERIFY:-}" ]]; then
    log "env file $ENV_FILE up to date; toolchains verified earlier (WAVEFUSE_REVERIFY=1 to recheck)"
    log "llvm-objdump: $LLVM_OBJDUMP"
    exit 0
fi

# ---- 4. verify the three compilers on a trivial kernel --------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
KERNEL='extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.f; }'
printf '%s\n' "$KERNEL" >"$tmp/k.cu"
printf '#include <hip/hip_runtime.h>\n%s\n' "$KERNEL" >"$tmp/k.hip" # hipcc does not pre-include it

log "nvcc: $("$NVCC" --version | grep -m1 release)"
# shellcheck disable=SC2086 # NVCC_FLAGS is a flag list
timed "nvcc sm_90 check" "$NVCC" $NVCC_FLAGS -arch=sm_90 -cubin -Xptxas -v -o "$tmp/k.cubin" "$tmp/k.cu" \
    >"$tmp/nvcc.log" 2>&1 || { cat "$tmp/nvcc.log" >&2; die "nvcc failed"; }
grep -q 'registers' "$tmp/nvcc.log" || { cat "$tmp/nvcc.log" >&2; die "nvcc gave no register report"; }
log "nvcc: $(grep -m1 'registers' "$tmp/nvcc.log" | sed 's/^ptxas info *: *//')"

LD_LIBRARY_PATH="$CUDA_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$VENV/bin/python" - "$NVRTC_LIB" "$CUDA_INCLUDE" <<'PY' || die "NVRTC check failed"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
src = b'#include <cuda_fp16.h>\nextern "C" __global__ void k(__half* p) { p[threadIdx.x] = __float2half(1.f); }'
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
opts = [b"-arch=sm_90"] + [b"-I" + d.encode() for d in sys.argv[2].split(":")]
rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
buf = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, buf)
size = ctypes.c_size_t(); lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
if rc != 0 or size.value == 0:
    sys.exit(f"nvrtcCompileProgram returned {rc}: {buf.value.decode()}")
print(f"[install-deps] nvrtc: sm_90 cubin of {size.value} bytes")
PY

log "hipcc: $("$HIPCC" --version 2>&1 | grep -m1 'HIP version' || true)"
timed "hipcc gfx906 check" "$HIPCC" --offload-arch=gfx906 --genco --no-gpu-bundle-output -O3 \
    -Rpass-analysis=kernel-resource-usage -o "$tmp/k.hsaco" "$tmp/k.hip" >"$tmp/hipcc.log" 2>&1 ||
    { cat "$tmp/hipcc.log" >&2; die "hipcc failed"; }
grep -q 'VGPRs:' "$tmp/hipcc.log" || { cat "$tmp/hipcc.log" >&2; die "hipcc gave no VGPR report"; }
log "hipcc: $(grep -E '(SGPRs|VGPRs|Occupancy).*:' "$tmp/hipcc.log" | sed 's/.*remark: *//; s/ \[-Rpass.*//' | paste -sd, -)"
"$LLVM_OBJDUMP" -d --mcpu=gfx906 "$tmp/k.hsaco" | grep -q 's_endpgm' ||
    die "$LLVM_OBJDUMP could not disassemble the gfx906 code object"
log "llvm-objdump: $LLVM_OBJDUMP disassembles gfx906 code objects"

printf '%s\n' "$env_text" >"$ENV_FILE"
log "wrote $ENV_FILE"
