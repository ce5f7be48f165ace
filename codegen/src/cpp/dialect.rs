//! What differs between the C++ dialects, as small traits. A [`Dialect`] is any type implementing
//! all of them; [`HipDialect`](super::HipDialect) and [`CudaDialect`](super::CudaDialect) override
//! only what differs from the defaults here. Every method that touches memory ordering is
//! implemented per dialect with a comment saying why the spelling is correct on that target.

use wavefuse_ir::{Ordering, Scope};

use crate::back::Language;
use crate::lowered::{Special, Ty};

/// Read-modify-write atomics the writer emits.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rmw {
    /// Fetch-and-add.
    Add,
    /// Fetch-and-max.
    Max,
}

/// Includes and file-scope definitions.
pub trait Prelude {
    /// The source language.
    fn language(&self) -> Language;

    /// Headers the generated source includes, in order.
    fn includes(&self) -> &'static [&'static str] {
        &[]
    }

    /// File-scope definitions every kernel of the dialect may use (type aliases, conversions).
    fn prelude(&self) -> &'static str {
        ""
    }
}

/// Kernel attributes and per-kernel limits.
pub trait KernelAttrs {
    /// Attributes between `void` and the kernel's name. The workgroup size is exact, so the
    /// compiler budgets registers for it instead of for 1024 lanes; with `min_resident` > 0 it
    /// also keeps that many workgroups resident per SM (CUDA's minimum blocks per
    /// multiprocessor: the registers per lane are capped to fit them).
    fn launch_attributes(&self, workgroup_size: u32, min_resident: u32) -> String {
        if min_resident > 0 {
            format!("__launch_bounds__({workgroup_size}, {min_resident})")
        } else {
            format!("__launch_bounds__({workgroup_size})")
        }
    }

    /// Most bytes of statically declared workgroup memory one kernel may use.
    fn max_static_lds_bytes(&self) -> usize;

    /// Whether a peer table parameter is declared `__restrict__` (which lets the compiler load
    /// every table entry once, early, and keep the pointers in registers).
    fn restrict_peer_tables(&self) -> bool {
        true
    }

    /// The statements opening and closing a kernel that may be launched as a programmatic
    /// dependent of the previous kernel of its stream
    /// ([`LoweredKernel::stream_order_prologue`](crate::lowered::LoweredKernel::stream_order_prologue)):
    /// first the wait for the previous kernel to complete, last the signal that the next one may
    /// be scheduled. `None` where the target has no such launch.
    fn stream_order(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// [`Stmt::StreamWait`](crate::lowered::Stmt::StreamWait): the wait for the previous kernel
    /// of the stream, then at once the signal that the next one may be scheduled. `None` where
    /// the target has no such launch.
    fn stream_wait_then_signal(&self) -> Option<&'static str> {
        None
    }
}

/// Hardware indices, the workgroup barrier, and the pause inside a spin loop.
pub trait Builtins {
    /// A hardware index (u32), binding at least as tightly as a C cast. Waves are formed from
    /// consecutive lanes of a 1-D workgroup.
    fn special(&self, s: Special, wave_size: u32) -> String {
        special_1d(s, wave_size)
    }

    /// The workgroup barrier: every lane waits, and LDS and global accesses of the workgroup are
    /// ordered at workgroup scope (a release/acquire fence pair around the barrier, on both targets).
    fn workgroup_barrier(&self) -> &'static str {
        "__syncthreads();"
    }

    /// A short pause between polls of a spin loop, so polling does not saturate the memory system.
    fn spin_pause(&self) -> &'static str;

    /// The statement for [`Stmt::SchedBarrier`](crate::lowered::Stmt::SchedBarrier), or `None`
    /// where the compiler has none (nothing is written).
    fn sched_barrier(&self) -> Option<&'static str> {
        None
    }

    /// Statements declaring `const uint4 {var}` loaded from `addr` (a 16-byte aligned pointer into
    /// an array the kernel never writes) as a streamed read: read once per launch, so not worth
    /// an L1 line, with a wider L2 fetch. `None`: the target has no such load (a plain one is
    /// emitted). A cache hint only: the loaded value is the same.
    fn streaming_load_v4(&self, var: &str, addr: &str) -> Option<String> {
        let _ = (var, addr);
        None
    }

    /// The statement for [`Stmt::PrefetchL2`](crate::lowered::Stmt::PrefetchL2) of the line
    /// holding `addr` (a pointer into a global array), or `None` where the target has no L2
    /// prefetch (nothing is written: it is a hint).
    fn prefetch_l2(&self, addr: &str) -> Option<String> {
        let _ = addr;
        None
    }

    /// The declaration of `var`, the 32-bit shared-window address of the `__shared__` array
    /// `array`, for the [`Stmt::AsyncCopy`](crate::lowered::Stmt::AsyncCopy)s into it; `None`
    /// where the target has no asynchronous copy. Declared once with the arrays, so no copy in
    /// a loop converts a generic address again.
    fn shared_address(&self, var: &str, array: &str) -> Option<String> {
        let _ = (var, array);
        None
    }

    /// The statement for [`Stmt::AsyncCopy`](crate::lowered::Stmt::AsyncCopy) of `bytes` (4, 8
    /// or 16) from `src` (a pointer into a global array) to `dst` (a 32-bit shared-window
    /// address: [`Builtins::shared_address`] plus the byte offset), or `None` where the target
    /// has no asynchronous copy: the writer then copies synchronously, which completes before
    /// any wait.
    fn async_copy(&self, dst: &str, src: &str, bytes: u32) -> Option<String> {
        let _ = (dst, src, bytes);
        None
    }

    /// The statements for [`Stmt::AsyncCommit`](crate::lowered::Stmt::AsyncCommit) and
    /// [`Stmt::AsyncWait`](crate::lowered::Stmt::AsyncWait), or `None` where copies are
    /// synchronous (nothing is written).
    fn async_commit(&self) -> Option<&'static str> {
        None
    }

    /// See [`Builtins::async_commit`].
    fn async_wait(&self, pending: u32) -> Option<String> {
        let _ = pending;
        None
    }

    /// Unsigned bitfield extract of `width` bits at `offset` (both operands already printed).
    fn bfe(&self, value: &str, offset: &str, width: u32) -> String {
        if width >= 32 {
            format!("({value} >> {offset})")
        } else {
            format!("(({value} >> {offset}) & {:#x}u)", (1u64 << width) - 1)
        }
    }
}

/// Cross-lane operations within a wave.
pub trait WaveOps {
    /// `value` as held by lane `lane_id ^ mask` of the same wave. Every lane of the wave executes it.
    fn shuffle_xor(&self, value: &str, mask: u32, wave_size: u32) -> String;
}

/// Atomic accesses and fences with an explicit ordering and scope.
pub trait Atomics {
    /// The spelling of an atomic access's ordering.
    fn order(&self, o: Ordering) -> &'static str;

    /// The spelling of an atomic access's scope.
    fn scope(&self, s: Scope) -> &'static str;

    /// An atomic load of `*ptr`.
    fn atomic_load(&self, ptr: &str, o: Ordering, s: Scope) -> String;

    /// An atomic store of `value` to `*ptr` (a statement without the `;`).
    fn atomic_store(&self, ptr: &str, value: &str, o: Ordering, s: Scope) -> String;

    /// A fetch-and-op on `*ptr`, evaluating to the old value.
    fn atomic_rmw(&self, op: Rmw, ptr: &str, value: &str, o: Ordering, s: Scope) -> String;

    /// Whether `op` on `ty` has a correct lowering (a native instruction or a compiler CAS loop
    /// with the same semantics).
    fn rmw_supported(&self, op: Rmw, ty: Ty) -> bool {
        matches!(
            (op, ty),
            (Rmw::Add, Ty::U32 | Ty::I32 | Ty::F32) | (Rmw::Max, Ty::U32 | Ty::I32)
        )
    }

    /// A fence (a statement without the `;`); `o` is never relaxed.
    fn fence(&self, o: Ordering, s: Scope) -> String;
}

/// IEEE binary16 values: their type and conversions.
pub trait Fp16 {
    /// The C++ type of an FP16 register or array element.
    fn f16_type(&self) -> &'static str;

    /// f16 → f32 (exact).
    fn f16_to_f32(&self, e: &str) -> String;

    /// f32 → f16, rounding to nearest even.
    fn f32_to_f16(&self, e: &str) -> String;

    /// An f16 from its 16 bits (an `unsigned short` expression).
    fn f16_from_bits(&self, bits: &str) -> String;

    /// The 16 bits of an f16, as an `unsigned short`.
    fn f16_to_bits(&self, e: &str) -> String;

    /// The name and definition of `unsigned name(unsigned a, unsigned b)`: lane-wise FP16
    /// subtraction of two packed pairs, rounding to nearest even.
    fn sub_half2_helper(&self) -> (&'static str, &'static str);

    /// The helper for [`Expr::FmaHalf2`](crate::lowered::Expr::FmaHalf2) (name, definition), or
    /// `None` where the writer has no single-rounding FP16 pair FMA to offer (the lowering only
    /// uses it on the tensor-core path).
    fn fma_half2_helper(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// The name and definition of `unsigned name(unsigned x, unsigned a, unsigned b)` =
    /// `(x & a) | b` in one instruction, or `None` where C++'s two operators are as good. The
    /// writer uses it for `(x & c1) | c2` with constant `c1`, `c2`, whose two constants the
    /// compiler would otherwise encode as two instructions (one immediate each).
    fn and_or_helper(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// The helper for [`Expr::Dot4I8`](crate::lowered::Expr::Dot4I8) (name, definition): every
    /// target has a signed 8-bit dot product into i32 (gfx906 `v_dot4_i32_i8`, sm_61+ `dp4a`).
    fn dot4_i8_helper(&self) -> (&'static str, &'static str);

    /// The helper for [`Expr::Dot2F16`](crate::lowered::Expr::Dot2F16) (name, definition), or
    /// `None` where the target has no FP16 pair dot product into f32 with one rounding (sm_90:
    /// the lowering only uses it where [`Arch::has_dot2_f32_f16`](crate::Arch::has_dot2_f32_f16)).
    fn dot2_f16_helper(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// One statement `acc += A·B` for the FP16 m16n8k16 MMA with f32 accumulation over the
    /// named fragment registers, or `None` where the target has no such instruction.
    fn mma_f16(&self, acc: &[String], a: &[String], b: &[String]) -> Option<String> {
        let _ = (acc, a, b);
        None
    }
}

/// The hardware indices of a 1-D workgroup, spelled the same in HIP and CUDA.
pub fn special_1d(s: Special, wave_size: u32) -> String {
    match s {
        Special::LocalId => "threadIdx.x".into(),
        Special::WorkgroupId => "blockIdx.x".into(),
        Special::NumWorkgroups => "gridDim.x".into(),
        Special::LaneId => format!("(threadIdx.x & {}u)", wave_size - 1),
        Special::WaveId => format!("(threadIdx.x / {wave_size}u)"),
    }
}

/// A C++ dialect: everything the writer needs to know about one target's language.
pub trait Dialect: Prelude + KernelAttrs + Builtins + WaveOps + Atomics + Fp16 {}

impl<T: Prelude + KernelAttrs + Builtins + WaveOps + Atomics + Fp16> Dialect for T {}
