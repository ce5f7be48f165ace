//! The CUDA dialect for NVIDIA GPUs (sm_90): warp 32, the scoped `__nv_atomic_*` builtins of
//! CUDA ≥ 12.8 (no header needed, accepted by nvcc and NVRTC alike), FP16 as raw bits with PTX
//! conversions.

use wavefuse_ir::{Ordering, Scope};

use super::dialect::{Atomics, Builtins, Fp16, KernelAttrs, Prelude, Rmw, WaveOps};
use crate::back::Language;

/// CUDA C++ for NVIDIA GPUs, compiled by nvcc or NVRTC.
#[derive(Copy, Clone, Debug, Default)]
pub struct CudaDialect;

const PRELUDE: &str = "\
// FP16 values are kept as their 16 bits and only converted, one PTX instruction each, so this
// source needs no CUDA header and compiles with NVRTC without include paths.
typedef unsigned short wf_f16;
static __device__ __forceinline__ float wf_f16_to_f32(wf_f16 h) {
    float f;
    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));
    return f;
}
static __device__ __forceinline__ wf_f16 wf_f32_to_f16(float f) {
    wf_f16 h;
    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));
    return h;
}
";

impl Prelude for CudaDialect {
    fn language(&self) -> Language {
        Language::Cuda
    }

    fn prelude(&self) -> &'static str {
        PRELUDE
    }
}

impl KernelAttrs for CudaDialect {
    fn max_static_lds_bytes(&self) -> usize {
        // More than 48 KiB of shared memory needs dynamic allocation and an opt-in attribute.
        48 * 1024
    }

    fn restrict_peer_tables(&self) -> bool {
        // ptxas keeps hoisted peer pointers in uniform registers; at TP = 8 the INT8 allreduce's
        // 2 x 8 pointers overflowed them into a local-memory stack frame (measured). Unrestricted,
        // entries are reloaded where used (L1 hits) and nothing spills.
        false
    }

    /// PTX `griddepcontrol` (sm_90): both are no-ops unless the kernel was launched with the
    /// programmatic stream serialization attribute. The signal comes last: given at the start
    /// (measured, bench/results/2026-12-02-h200-dependent-launch), the successors' waiting
    /// workgroups piled up in the SM slots the kernel itself needed (2–14 % slower in graphs).
    fn stream_order(&self) -> Option<(&'static str, &'static str)> {
        Some((
            "// §5.7 across launches: no access to memory before the previous kernel of this stream has completed.\n\
             asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n",
            "// Stream order (docs/synchronisation.md): this workgroup is done; the next kernel of the stream may be scheduled.\n\
             asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n",
        ))
    }

    fn stream_wait_then_signal(&self) -> Option<&'static str> {
        Some(Self::STREAM_WAIT_THEN_SIGNAL)
    }
}

impl CudaDialect {
    /// [`Dialect::stream_wait_then_signal`]'s text.
    const STREAM_WAIT_THEN_SIGNAL: &'static str = "// §5.7 across launches: the L2 prefetches above read no value; nothing is read or written before the previous kernel of this stream has completed.\n\
         asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n\
         // Stream order (docs/synchronisation.md): the next kernel of the stream may be scheduled now; its workgroups that find a free slot prefetch their weights while this one runs.\n\
         asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n";
}

impl Builtins for CudaDialect {
    fn spin_pause(&self) -> &'static str {
        "__nanosleep(64);"
    }

    /// `ld.global.nc.L1::no_allocate.L2::256B`: through the non-coherent (read-only) path, no L1
    /// allocation, and L2 fetches 256 bytes. Each GEMV tile reads 128 bytes of a K-row and its
    /// neighbour tile, running at the same time, the next 128: the 256-byte fetch halves the DRAM
    /// requests of a row pair (H200 prototype, bench/results/2026-11-29-h200-int4-proto/: 6-12 %
    /// faster at the four Qwen shapes).
    fn prefetch_l2(&self, addr: &str) -> Option<String> {
        // Normal eviction priority: an `evict_last` line would outlive the launch and crowd out
        // the next launches' weights, which are never re-read either.
        Some(format!(
            "asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"({addr}));"
        ))
    }

    fn shared_address(&self, var: &str, array: &str) -> Option<String> {
        // Not volatile: a pure conversion of a fixed address, computed once. (Converted inside
        // each copy's asm instead, ptxas rebuilt the generic shared window, S2R of SR_SWINHI
        // and SR_CgaCtaId, for every copy in the loop: +43 % instructions in the main loop of
        // the weights' ring at batch 1, SASS of nvcc 13.0.)
        Some(format!(
            "unsigned {var}; asm(\"{{ .reg .u64 wf_g; cvta.to.shared.u64 wf_g, %1; cvt.u32.u64 %0, wf_g; }}\" : \"=r\"({var}) : \"l\"({array}));"
        ))
    }

    fn async_copy(&self, dst: &str, src: &str, bytes: u32) -> Option<String> {
        // `.cg` (L2 only) for 16 bytes: the weights are read once per launch; `.ca` is the
        // only form for 4 and 8. `dst` is a 32-bit shared address (`shared_address`), so no
        // intrinsic header is needed (NVRTC and nvcc alike). The "memory" clobber keeps the
        // compiler from moving LDS accesses across it.
        let cache = if bytes == 16 { "cg" } else { "ca" };
        Some(format!(
            "asm volatile(\"cp.async.{cache}.shared.global [%0], [%1], {bytes};\" :: \"r\"({dst}), \"l\"({src}) : \"memory\");"
        ))
    }

    fn async_commit(&self) -> Option<&'static str> {
        Some("asm volatile(\"cp.async.commit_group;\" ::: \"memory\");")
    }

    fn async_wait(&self, pending: u32) -> Option<String> {
        Some(format!(
            "asm volatile(\"cp.async.wait_group {pending};\" ::: \"memory\");"
        ))
    }

    fn streaming_load_v4(&self, var: &str, addr: &str) -> Option<String> {
        Some(format!(
            "uint4 {var}; asm(\"ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {{%0, %1, %2, %3}}, [%4];\" : \"=r\"({var}.x), \"=r\"({var}.y), \"=r\"({var}.z), \"=r\"({var}.w) : \"l\"({addr}));"
        ))
    }
}

impl WaveOps for CudaDialect {
    fn shuffle_xor(&self, value: &str, mask: u32, wave_size: u32) -> String {
        // Full-warp mask: the writer reduces only in warp-uniform control flow, so all 32 lanes
        // execute the shuffle (required by the _sync variants).
        format!("__shfl_xor_sync(0xffffffffu, {value}, {mask}, {wave_size})")
    }
}

impl Atomics for CudaDialect {
    fn order(&self, o: Ordering) -> &'static str {
        // nvcc/NVRTC emit these as PTX ld.acquire / st.release / atom.<order>, whose semantics
        // are the PTX memory model's acquire/release, a refinement of the C++ orders.
        match o {
            Ordering::Relaxed => "__NV_ATOMIC_RELAXED",
            Ordering::Acquire => "__NV_ATOMIC_ACQUIRE",
            Ordering::Release => "__NV_ATOMIC_RELEASE",
            Ordering::AcqRel => "__NV_ATOMIC_ACQ_REL",
            Ordering::SeqCst => "__NV_ATOMIC_SEQ_CST",
        }
    }

    fn scope(&self, s: Scope) -> &'static str {
        // PTX has no warp scope: .cta contains the warp, so block scope is at least as strong.
        // Agent = .gpu, system = .sys (coherent across GPUs over NVLink/PCIe and with the host).
        match s {
            Scope::Wave | Scope::Workgroup => "__NV_THREAD_SCOPE_BLOCK",
            Scope::Agent => "__NV_THREAD_SCOPE_DEVICE",
            Scope::System => "__NV_THREAD_SCOPE_SYSTEM",
        }
    }

    fn atomic_load(&self, ptr: &str, o: Ordering, s: Scope) -> String {
        // ld.<order>.<scope>: a morally strong load, never served from a non-coherent cache.
        format!(
            "__nv_atomic_load_n({ptr}, {}, {})",
            self.order(o),
            self.scope(s)
        )
    }

    fn atomic_store(&self, ptr: &str, value: &str, o: Ordering, s: Scope) -> String {
        // st.<order>.<scope>: a release store makes this thread's earlier writes (and those it
        // observed, PTX release is cumulative) visible to an acquirer at that scope.
        format!(
            "__nv_atomic_store_n({ptr}, {value}, {}, {})",
            self.order(o),
            self.scope(s)
        )
    }

    fn atomic_rmw(&self, op: Rmw, ptr: &str, value: &str, o: Ordering, s: Scope) -> String {
        // atom.<op>.<order>.<scope>: one instruction; FP32 add is native on sm_90.
        let name = match op {
            Rmw::Add => "__nv_atomic_fetch_add",
            Rmw::Max => "__nv_atomic_fetch_max",
        };
        format!(
            "{name}({ptr}, {value}, {}, {})",
            self.order(o),
            self.scope(s)
        )
    }

    fn fence(&self, o: Ordering, s: Scope) -> String {
        // PTX has only fence.acq_rel and fence.sc: an acquire or release fence becomes one of
        // them at the same scope, which is at least as strong and therefore correct.
        format!(
            "__nv_atomic_thread_fence({}, {})",
            self.order(o),
            self.scope(s)
        )
    }
}

impl Fp16 for CudaDialect {
    fn f16_type(&self) -> &'static str {
        "wf_f16"
    }

    fn f16_to_f32(&self, e: &str) -> String {
        format!("wf_f16_to_f32({e})")
    }

    fn f32_to_f16(&self, e: &str) -> String {
        // cvt.rn: round to nearest even, the rounding every FP16 store of the IR performs.
        format!("wf_f32_to_f16({e})")
    }

    fn f16_from_bits(&self, bits: &str) -> String {
        format!("(wf_f16){bits}")
    }

    fn f16_to_bits(&self, e: &str) -> String {
        format!("(unsigned short){e}")
    }

    fn dot4_i8_helper(&self) -> (&'static str, &'static str) {
        // dp4a.s32.s32: four signed byte products plus c (sm_61 and later).
        (
            "wf_dot4_i8",
            "static __device__ __forceinline__ int wf_dot4_i8(unsigned a, unsigned b, int c) {\n    \
             return __dp4a((int)a, (int)b, c);\n}",
        )
    }

    fn sub_half2_helper(&self) -> (&'static str, &'static str) {
        (
            "wf_sub_half2",
            "static __device__ __forceinline__ unsigned wf_sub_half2(unsigned a, unsigned b) {\n    \
             unsigned d;\n    \
             asm(\"sub.rn.f16x2 %0, %1, %2;\" : \"=r\"(d) : \"r\"(a), \"r\"(b));\n    \
             return d;\n}",
        )
    }

    fn fma_half2_helper(&self) -> Option<(&'static str, &'static str)> {
        Some((
            "wf_fma_half2",
            "static __device__ __forceinline__ unsigned wf_fma_half2(unsigned a, unsigned b, unsigned c) {\n    \
             unsigned d;\n    \
             asm(\"fma.rn.f16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(c));\n    \
             return d;\n}",
        ))
    }

    fn and_or_helper(&self) -> Option<(&'static str, &'static str)> {
        // PTX lop3.b32 with the truth table of (a & b) | c: 0xF0 & 0xCC | 0xAA = 0xEA. The
        // constants as register operands: ptxas keeps them in registers set once outside the
        // loop, where `(x & c1) | c2` in C++ became two LOP3s, each with its one immediate
        // (nvdisasm: 320 → 257 SASS instructions per unit of the sm_90 gemv_int4 loop; H200:
        // 4 – 8 % faster INT4 kernels at TP 1, bench/results/2026-11-30-h200-decode/).
        Some((
            "wf_and_or",
            "static __device__ __forceinline__ unsigned wf_and_or(unsigned x, unsigned a, unsigned b) {\n    \
             unsigned d;\n    \
             asm(\"lop3.b32 %0, %1, %2, %3, 0xea;\" : \"=r\"(d) : \"r\"(x), \"r\"(a), \"r\"(b));\n    \
             return d;\n}",
        ))
    }

    fn mma_f16(&self, acc: &[String], a: &[String], b: &[String]) -> Option<String> {
        // PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type": the layout
        // Stmt::MmaF16 documents. D = C (in place).
        Some(format!(
            "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
             {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\" \
             : \"+f\"({}), \"+f\"({}), \"+f\"({}), \"+f\"({}) \
             : \"r\"({}), \"r\"({}), \"r\"({}), \"r\"({}), \"r\"({}), \"r\"({}));",
            acc[0], acc[1], acc[2], acc[3], a[0], a[1], a[2], a[3], b[0], b[1]
        ))
    }
}
