//! The HIP dialect for AMD GPUs (gfx906): wave64, `__hip_atomic_*` with explicit memory scopes,
//! `__builtin_amdgcn_fence`, `_Float16`.

use wavefuse_ir::{Ordering, Scope};

use super::dialect::{Atomics, Builtins, Fp16, KernelAttrs, Prelude, Rmw, WaveOps, special_1d};
use crate::back::Language;
use crate::lowered::Special;

/// HIP C++ for AMD GPUs, compiled by hipcc (clang) or hiprtc.
#[derive(Copy, Clone, Debug, Default)]
pub struct HipDialect;

impl Prelude for HipDialect {
    fn language(&self) -> Language {
        Language::Hip
    }

    fn includes(&self) -> &'static [&'static str] {
        // hipcc does not pre-include the runtime header (Debian's hipcc 5.2 needs it in the source).
        &["hip/hip_runtime.h"]
    }
}

impl KernelAttrs for HipDialect {
    fn launch_attributes(&self, workgroup_size: u32, _min_resident: u32) -> String {
        // Both spellings: without the flat size the backend assumes up to 1024 lanes and caps a
        // kernel at 64 VGPRs (DESIGN.md §6). No residency request: HIP's second bound means
        // waves per execution unit, and the gfx906 persistent grids stay at the occupancy any
        // kernel of at most 128 VGPRs keeps (`Schedule::min_resident_per_cu`).
        format!(
            "__launch_bounds__({workgroup_size}) \
             __attribute__((amdgpu_flat_work_group_size({workgroup_size}, {workgroup_size})))"
        )
    }

    fn max_static_lds_bytes(&self) -> usize {
        64 * 1024
    }
}

impl Builtins for HipDialect {
    fn special(&self, s: Special, wave_size: u32) -> String {
        match s {
            // Uniform per wave: readfirstlane lets the compiler keep it in an SGPR.
            Special::WaveId => {
                format!("(unsigned)__builtin_amdgcn_readfirstlane(threadIdx.x / {wave_size}u)")
            }
            _ => special_1d(s, wave_size),
        }
    }

    fn spin_pause(&self) -> &'static str {
        "__builtin_amdgcn_s_sleep(1);"
    }

    fn sched_barrier(&self) -> Option<&'static str> {
        // Mask 0: no instruction of any kind crosses it (LLVM's machine scheduler and the
        // post-RA scheduler both honour it); it emits no machine instruction.
        Some("__builtin_amdgcn_sched_barrier(0);")
    }
}

impl WaveOps for HipDialect {
    fn shuffle_xor(&self, value: &str, mask: u32, wave_size: u32) -> String {
        // ds_bpermute across the full wave64; the writer reduces only in wave-uniform control flow.
        format!("__shfl_xor({value}, {mask}, {wave_size})")
    }
}

impl Atomics for HipDialect {
    fn order(&self, o: Ordering) -> &'static str {
        // clang lowers the C11 orders through the AMDGPU memory model: on gfx906 a release at
        // agent/system scope waits for earlier stores (s_waitcnt vmcnt(0)) and an acquire
        // invalidates the L1 afterwards (buffer_wbinvl1_vol), so no stale line is read.
        match o {
            Ordering::Relaxed => "__ATOMIC_RELAXED",
            Ordering::Acquire => "__ATOMIC_ACQUIRE",
            Ordering::Release => "__ATOMIC_RELEASE",
            Ordering::AcqRel => "__ATOMIC_ACQ_REL",
            Ordering::SeqCst => "__ATOMIC_SEQ_CST",
        }
    }

    fn scope(&self, s: Scope) -> &'static str {
        // One to one: HIP has all four scopes. System scope is coherent with peers and the host
        // when the memory is fine-grained/uncached, which the ABI requires of flags (§5.12).
        match s {
            Scope::Wave => "__HIP_MEMORY_SCOPE_WAVEFRONT",
            Scope::Workgroup => "__HIP_MEMORY_SCOPE_WORKGROUP",
            Scope::Agent => "__HIP_MEMORY_SCOPE_AGENT",
            Scope::System => "__HIP_MEMORY_SCOPE_SYSTEM",
        }
    }

    fn atomic_load(&self, ptr: &str, o: Ordering, s: Scope) -> String {
        // The scoped builtin carries both ordering and scope into the LLVM atomic (no volatile hacks).
        format!(
            "__hip_atomic_load({ptr}, {}, {})",
            self.order(o),
            self.scope(s)
        )
    }

    fn atomic_store(&self, ptr: &str, value: &str, o: Ordering, s: Scope) -> String {
        // As atomic_load: the release (if any) is placed by the backend per the declared scope.
        format!(
            "__hip_atomic_store({ptr}, {value}, {}, {})",
            self.order(o),
            self.scope(s)
        )
    }

    fn atomic_rmw(&self, op: Rmw, ptr: &str, value: &str, o: Ordering, s: Scope) -> String {
        // gfx906 has no FP32 global atomic add: clang expands it into a CAS loop with the same
        // ordering and scope, which is still one atomic read-modify-write.
        let name = match op {
            Rmw::Add => "__hip_atomic_fetch_add",
            Rmw::Max => "__hip_atomic_fetch_max",
        };
        format!(
            "{name}({ptr}, {value}, {}, {})",
            self.order(o),
            self.scope(s)
        )
    }

    fn fence(&self, o: Ordering, s: Scope) -> String {
        // The AMDGPU sync-scope names; "" is the system scope in LLVM's AMDGPU memory model.
        let scope = match s {
            Scope::Wave => "wavefront",
            Scope::Workgroup => "workgroup",
            Scope::Agent => "agent",
            Scope::System => "",
        };
        format!("__builtin_amdgcn_fence({}, \"{scope}\")", self.order(o))
    }
}

impl Fp16 for HipDialect {
    fn f16_type(&self) -> &'static str {
        "_Float16"
    }

    fn f16_to_f32(&self, e: &str) -> String {
        format!("(float){e}")
    }

    fn f32_to_f16(&self, e: &str) -> String {
        // clang converts float → _Float16 with round-to-nearest-even (v_cvt_f16_f32).
        format!("(_Float16){e}")
    }

    fn f16_from_bits(&self, bits: &str) -> String {
        format!("__builtin_bit_cast(_Float16, (unsigned short){bits})")
    }

    fn f16_to_bits(&self, e: &str) -> String {
        format!("__builtin_bit_cast(unsigned short, {e})")
    }

    fn and_or_helper(&self) -> Option<(&'static str, &'static str)> {
        // v_and_or_b32 (VOP3): D = (S0 & S1) | S2. gfx9's VOP3 takes no literal operands, so
        // hipcc writes `(x & c1) | c2` with two 32-bit literals as v_and_b32 + v_or_b32 (VOP2,
        // one literal each); here c1 goes in an SGPR (one read of the constant bus) and c2 in a
        // VGPR set once outside the loop. Measured on the dot2 gemv_int4 at TP 4 (hipcc,
        // llvm-objdump, tests/tests/hip.rs): 5.0 → 4.5 VALU per weight in the hot loop, 29 → 26
        // VGPRs (bench/results/2026-11-30-gfx906-and-or/).
        Some((
            "wf_and_or",
            "static __device__ __forceinline__ unsigned wf_and_or(unsigned x, unsigned a, unsigned b) {\n    \
             unsigned d;\n    \
             asm(\"v_and_or_b32 %0, %1, %2, %3\" : \"=v\"(d) : \"v\"(x), \"s\"(a), \"v\"(b));\n    \
             return d;\n}",
        ))
    }

    fn dot2_f16_helper(&self) -> Option<(&'static str, &'static str)> {
        // v_dot2_f32_f16 (gfx906's dot2 instructions): a.lo·b.lo + a.hi·b.hi + c, no clamp.
        Some((
            "wf_dot2_f16",
            "static __device__ __forceinline__ float wf_dot2_f16(unsigned a, unsigned b, float c) {\n    \
             typedef _Float16 wf_half2 __attribute__((ext_vector_type(2)));\n    \
             return __builtin_amdgcn_fdot2(__builtin_bit_cast(wf_half2, a), __builtin_bit_cast(wf_half2, b), c, false);\n}",
        ))
    }

    fn fma_half2_helper(&self) -> Option<(&'static str, &'static str)> {
        // llvm.fma.v2f16 through the device library's declaration: one v_pk_fma_f16 (VOP3P,
        // full rate, one rounding) on gfx906.
        Some((
            "wf_fma_half2",
            "static __device__ __forceinline__ unsigned wf_fma_half2(unsigned a, unsigned b, unsigned c) {\n    \
             typedef _Float16 wf_half2 __attribute__((ext_vector_type(2)));\n    \
             return __builtin_bit_cast(unsigned, __ocml_fma_2f16(__builtin_bit_cast(wf_half2, a), __builtin_bit_cast(wf_half2, b), __builtin_bit_cast(wf_half2, c)));\n}",
        ))
    }

    fn dot4_i8_helper(&self) -> (&'static str, &'static str) {
        // v_dot4_i32_i8 (gfx906's dot instructions): four signed byte products plus c, no clamp.
        (
            "wf_dot4_i8",
            "static __device__ __forceinline__ int wf_dot4_i8(unsigned a, unsigned b, int c) {\n    \
             return __builtin_amdgcn_sdot4((int)a, (int)b, c, false);\n}",
        )
    }

    fn sub_half2_helper(&self) -> (&'static str, &'static str) {
        // A two-lane _Float16 vector subtraction: v_pk_add_f16 with a negated operand on gfx906.
        (
            "wf_sub_half2",
            "static __device__ __forceinline__ unsigned wf_sub_half2(unsigned a, unsigned b) {\n    \
             typedef _Float16 wf_half2 __attribute__((ext_vector_type(2)));\n    \
             return __builtin_bit_cast(unsigned, __builtin_bit_cast(wf_half2, a) - __builtin_bit_cast(wf_half2, b));\n}",
        )
    }
}
