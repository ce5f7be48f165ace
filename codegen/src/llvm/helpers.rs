//! The per-target helper library, as textual LLVM IR: every ordered atomic, fence, barrier,
//! hardware index, wave shuffle and transcendental the kernel body calls, one small `alwaysinline`
//! function each, named after what it does (`@wf.atomic.load.u32.acquire.agent`).
//!
//! Why text: LLVM 16's C API (what inkwell wraps) cannot set an atomic's or a fence's sync scope
//! (`LLVMBuildAtomicRMW` and friends only take a single-thread flag; the scoped builders arrived in
//! LLVM 20), and the scope is the whole point of DESIGN.md §5. Parsed by LLVM's own IR parser, the
//! helpers carry real `syncscope("agent")` atomics on AMDGPU. On NVPTX, LLVM 16's instruction
//! selector cannot select ordered atomics or fences at all (measured with llc 16: "Cannot select:
//! AtomicStore release" and "Cannot select: AtomicFence"), so the NVPTX helpers are the PTX
//! instructions nvcc emits for the same ordering and scope (`ld.acquire.gpu.global.u32`), as inline
//! assembly with a memory clobber. The kernel body is the same on both targets; only this library
//! differs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use wavefuse_ir::{Ordering, Scope};

use super::Flavor;
use crate::lowered::AtomicOp;

/// Value types of helper signatures.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum HTy {
    /// No value.
    Void,
    /// i32 (u32 or i32 in the lowered IR).
    I32,
    /// float.
    F32,
    /// A global pointer.
    Ptr,
}

impl HTy {
    fn text(self) -> &'static str {
        match self {
            HTy::Void => "void",
            HTy::I32 => "i32",
            HTy::F32 => "float",
            HTy::Ptr => "ptr addrspace(1)",
        }
    }
}

/// A helper's signature and definition.
#[derive(Clone, Debug)]
pub(super) struct Helper {
    pub ret: HTy,
    pub args: Vec<HTy>,
    /// The `define` text (and nothing else).
    pub define: String,
    /// Intrinsic declarations it needs (`declare …` lines).
    pub declares: Vec<&'static str>,
}

/// LLVM's name of an ordering.
pub(super) fn order_name(o: Ordering) -> &'static str {
    match o {
        Ordering::Relaxed => "monotonic",
        Ordering::Acquire => "acquire",
        Ordering::Release => "release",
        Ordering::AcqRel => "acq_rel",
        Ordering::SeqCst => "seq_cst",
    }
}

/// The scope as it appears in helper names and the sync metadata.
pub(super) fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::Wave => "wavefront",
        Scope::Workgroup => "workgroup",
        Scope::Agent => "agent",
        Scope::System => "system",
    }
}

/// The AMDGPU `syncscope(…)` clause: one to one with the lowered scopes, and no clause at all for
/// the system scope (LLVM's default scope is the AMDGPU memory model's system scope).
fn amd_syncscope(s: Scope) -> String {
    match s {
        Scope::System => String::new(),
        s => format!(" syncscope(\"{}\")", scope_name(s)),
    }
}

/// PTX scope of a lowered scope: PTX has no warp scope, `.cta` contains the warp (stronger, so
/// correct); agent is `.gpu`, system is `.sys`.
fn ptx_scope(s: Scope) -> &'static str {
    match s {
        Scope::Wave | Scope::Workgroup => "cta",
        Scope::Agent => "gpu",
        Scope::System => "sys",
    }
}

/// The element type suffix of an atomic helper.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum AtomTy {
    /// Unsigned 32-bit.
    U32,
    /// Signed 32-bit.
    I32,
    /// IEEE binary32.
    F32,
}

impl AtomTy {
    fn name(self) -> &'static str {
        match self {
            AtomTy::U32 => "u32",
            AtomTy::I32 => "i32",
            AtomTy::F32 => "f32",
        }
    }

    fn hty(self) -> HTy {
        match self {
            AtomTy::F32 => HTy::F32,
            _ => HTy::I32,
        }
    }
}

/// The name of the helper for an atomic access.
pub(super) fn atomic_name(op: AtomicOp, ty: AtomTy, o: Ordering, s: Scope) -> String {
    let op = match op {
        AtomicOp::Load => "load",
        AtomicOp::Store => "store",
        AtomicOp::Add => "add",
        AtomicOp::Max => "max",
    };
    format!(
        "wf.atomic.{op}.{}.{}.{}",
        ty.name(),
        order_name(o),
        scope_name(s)
    )
}

/// The name of the helper for a fence.
pub(super) fn fence_name(o: Ordering, s: Scope) -> String {
    format!("wf.fence.{}.{}", order_name(o), scope_name(s))
}

const ATTRS: &str = "#0";

/// The helper library of one kernel: the helpers it asked for, by name.
pub(super) struct Library {
    flavor: Flavor,
    workgroup_size: u32,
    pub used: BTreeMap<String, Helper>,
}

impl Library {
    pub fn new(flavor: Flavor, workgroup_size: u32) -> Self {
        Library {
            flavor,
            workgroup_size,
            used: BTreeMap::new(),
        }
    }

    /// The target flavor.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The whole library as one textual module (definitions in name order).
    pub fn text(&self, triple: &str, data_layout: &str) -> String {
        let mut t = format!(
            "; wavefuse helper library ({})\ntarget datalayout = \"{data_layout}\"\ntarget triple = \"{triple}\"\n\n",
            self.flavor.name()
        );
        let mut declares: Vec<&str> = self
            .used
            .values()
            .flat_map(|h| h.declares.clone())
            .collect();
        declares.sort_unstable();
        declares.dedup();
        for h in self.used.values() {
            t.push_str(&h.define);
            t.push('\n');
        }
        for d in declares {
            let _ = writeln!(t, "{d}");
        }
        let _ = writeln!(t, "\nattributes {ATTRS} = {{ alwaysinline nounwind }}");
        t
    }

    /// Registers helper `name` (built by `make` on first use) and returns its signature.
    fn get(&mut self, name: &str, make: impl FnOnce(&Self) -> Helper) -> (HTy, Vec<HTy>) {
        if !self.used.contains_key(name) {
            let h = make(self);
            self.used.insert(name.to_owned(), h);
        }
        let h = &self.used[name];
        (h.ret, h.args.clone())
    }

    /// An atomic access helper. `Err` when the target has no such atomic.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        ty: AtomTy,
        o: Ordering,
        s: Scope,
    ) -> Result<(String, HTy, Vec<HTy>), String> {
        let name = atomic_name(op, ty, o, s);
        let body = match self.flavor {
            Flavor::Amdgpu => amd_atomic(op, ty, o, s)?,
            Flavor::Nvptx => ptx_atomic(op, ty, o, s)?,
        };
        let vt = ty.hty();
        let (ret, args) = match op {
            AtomicOp::Load => (vt, vec![HTy::Ptr]),
            AtomicOp::Store => (HTy::Void, vec![HTy::Ptr, vt]),
            AtomicOp::Add | AtomicOp::Max => (vt, vec![HTy::Ptr, vt]),
        };
        let (ret, args) = self.get(&name, |_| helper(&name, ret, &args, &body, vec![]));
        Ok((name, ret, args))
    }

    /// A fence helper.
    pub fn fence(&mut self, o: Ordering, s: Scope) -> Result<String, String> {
        if o == Ordering::Relaxed {
            return Err("a relaxed fence orders nothing".into());
        }
        let name = fence_name(o, s);
        let body = match self.flavor {
            Flavor::Amdgpu => format!(
                "  fence{} {}\n  ret void\n",
                amd_syncscope(s),
                order_name(o)
            ),
            Flavor::Nvptx => {
                // PTX has only fence.acq_rel and fence.sc: acquire or release becomes acq_rel at
                // the same scope, which is at least as strong.
                let sem = if o == Ordering::SeqCst {
                    "sc"
                } else {
                    "acq_rel"
                };
                format!(
                    "  call void asm sideeffect \"fence.{sem}.{};\", \"~{{memory}}\"()\n  ret void\n",
                    ptx_scope(s)
                )
            }
        };
        self.get(&name, |_| helper(&name, HTy::Void, &[], &body, vec![]));
        Ok(name)
    }

    /// The workgroup barrier: every lane waits; LDS and global accesses of the workgroup are
    /// ordered at workgroup scope.
    pub fn barrier(&mut self) -> String {
        let name = "wf.barrier.workgroup".to_owned();
        let (body, decl) = match self.flavor {
            // What clang emits for __syncthreads() on AMDGPU: a release fence, s_barrier, an
            // acquire fence, all at workgroup scope.
            Flavor::Amdgpu => (
                "  fence syncscope(\"workgroup\") release\n  call void @llvm.amdgcn.s.barrier()\n  fence syncscope(\"workgroup\") acquire\n  ret void\n",
                "declare void @llvm.amdgcn.s.barrier()",
            ),
            // bar.sync 0: waits for the CTA and orders its memory accesses (membar.cta semantics).
            Flavor::Nvptx => (
                "  call void @llvm.nvvm.barrier0()\n  ret void\n",
                "declare void @llvm.nvvm.barrier0()",
            ),
        };
        self.get(&name, |_| helper(&name, HTy::Void, &[], body, vec![decl]));
        name
    }

    /// A short pause between polls of a spin loop.
    pub fn pause(&mut self) -> String {
        let name = "wf.pause".to_owned();
        let (body, decls) = match self.flavor {
            Flavor::Amdgpu => (
                "  call void @llvm.amdgcn.s.sleep(i32 1)\n  ret void\n",
                vec!["declare void @llvm.amdgcn.s.sleep(i32)"],
            ),
            Flavor::Nvptx => (
                "  call void asm sideeffect \"nanosleep.u32 64;\", \"\"()\n  ret void\n",
                vec![],
            ),
        };
        self.get(&name, |_| helper(&name, HTy::Void, &[], body, decls));
        name
    }

    /// A hardware index: `local_id`, `workgroup_id`, `num_workgroups` or `wave_id` (i32).
    pub fn special(&mut self, which: &'static str, wave: u32) -> Result<String, String> {
        let name = format!("wf.{which}");
        let wg = self.workgroup_size;
        let (body, decls): (String, Vec<&'static str>) = match (self.flavor, which) {
            (Flavor::Amdgpu, "local_id") => (
                format!(
                    "  %v = call i32 @llvm.amdgcn.workitem.id.x(), !range !{{i32 0, i32 {wg}}}\n  ret i32 %v\n"
                ),
                vec!["declare i32 @llvm.amdgcn.workitem.id.x()"],
            ),
            (Flavor::Amdgpu, "workgroup_id") => (
                "  %v = call i32 @llvm.amdgcn.workgroup.id.x()\n  ret i32 %v\n".into(),
                vec!["declare i32 @llvm.amdgcn.workgroup.id.x()"],
            ),
            // The dispatch packet's grid size (work-items, offset 12) over the exact workgroup size.
            (Flavor::Amdgpu, "num_workgroups") => (
                format!(
                    "  %d = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()\n  %g = getelementptr inbounds i8, ptr addrspace(4) %d, i64 12\n  %n = load i32, ptr addrspace(4) %g, align 4, !invariant.load !{{}}\n  %v = udiv i32 %n, {wg}\n  ret i32 %v\n"
                ),
                vec!["declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()"],
            ),
            // Uniform per wave: readfirstlane keeps it in an SGPR (as the HIP dialect does).
            (Flavor::Amdgpu, "wave_id") => (
                format!(
                    "  %t = call i32 @llvm.amdgcn.workitem.id.x(), !range !{{i32 0, i32 {wg}}}\n  %w = udiv i32 %t, {wave}\n  %v = call i32 @llvm.amdgcn.readfirstlane(i32 %w)\n  ret i32 %v\n"
                ),
                vec![
                    "declare i32 @llvm.amdgcn.workitem.id.x()",
                    "declare i32 @llvm.amdgcn.readfirstlane(i32)",
                ],
            ),
            (Flavor::Nvptx, "local_id") => (
                "  %v = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  ret i32 %v\n".into(),
                vec!["declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()"],
            ),
            (Flavor::Nvptx, "workgroup_id") => (
                "  %v = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n  ret i32 %v\n".into(),
                vec!["declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()"],
            ),
            (Flavor::Nvptx, "num_workgroups") => (
                "  %v = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()\n  ret i32 %v\n".into(),
                vec!["declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()"],
            ),
            (Flavor::Nvptx, "wave_id") => (
                format!(
                    "  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  %v = udiv i32 %t, {wave}\n  ret i32 %v\n"
                ),
                vec!["declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()"],
            ),
            _ => return Err(format!("no hardware index `{which}`")),
        };
        self.get(&name, |_| helper(&name, HTy::I32, &[], &body, decls));
        Ok(name)
    }

    /// `value` as held by lane `lane ^ mask` of the same wave (every lane of the wave executes it).
    pub fn shuffle_xor(&mut self) -> String {
        let name = "wf.shfl.xor".to_owned();
        let (body, decls) = match self.flavor {
            // ds_bpermute over the full wave64, as HIP's __shfl_xor(v, mask, 64).
            Flavor::Amdgpu => (
                "  %lo = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)\n  %lane = call i32 @llvm.amdgcn.mbcnt.hi(i32 -1, i32 %lo)\n  %src = xor i32 %lane, %mask\n  %addr = shl i32 %src, 2\n  %r = call i32 @llvm.amdgcn.ds.bpermute(i32 %addr, i32 %v)\n  ret i32 %r\n",
                vec![
                    "declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)",
                    "declare i32 @llvm.amdgcn.mbcnt.hi(i32, i32)",
                    "declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)",
                ],
            ),
            // shfl.sync.bfly with the full-warp mask (reductions run in warp-uniform control flow).
            Flavor::Nvptx => (
                "  %r = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %v, i32 %mask, i32 31)\n  ret i32 %r\n",
                vec!["declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)"],
            ),
        };
        let args = [HTy::I32, HTy::I32];
        self.get(&name, |_| {
            let mut h = helper(&name, HTy::I32, &args, body, decls);
            h.define = h
                .define
                .replace("(i32 %a0, i32 %a1)", "(i32 %v, i32 %mask)");
            h
        });
        name
    }

    /// An f32 math function: `exp`, `rsqrt`, `fma`, `min`, `max`, `abs`.
    pub fn math(&mut self, which: &'static str) -> Result<(String, usize), String> {
        let name = format!("wf.{which}.f32");
        let (arity, body, decls): (usize, &str, Vec<&'static str>) = match (self.flavor, which) {
            // e^x = 2^(x·log2 e): v_exp_f32 / ex2.approx.f32, as HIP's and CUDA's fast expf. The
            // relative error grows with |x| (≈ |x|·2^-23), far below the FP16 outputs' 1e-3.
            (Flavor::Amdgpu, "exp") => (
                1,
                "  %y = fmul float %a0, 0x3FF7154760000000\n  %r = call float @llvm.exp2.f32(float %y)\n  ret float %r\n",
                vec!["declare float @llvm.exp2.f32(float)"],
            ),
            (Flavor::Nvptx, "exp") => (
                1,
                "  %y = fmul float %a0, 0x3FF7154760000000\n  %r = call float @llvm.nvvm.ex2.approx.f(float %y)\n  ret float %r\n",
                vec!["declare float @llvm.nvvm.ex2.approx.f(float)"],
            ),
            // v_rsq_f32 / rsqrt.approx.f32: what HIP's and CUDA's rsqrtf compile to.
            (Flavor::Amdgpu, "rsqrt") => (
                1,
                "  %r = call float @llvm.amdgcn.rsq.f32(float %a0)\n  ret float %r\n",
                vec!["declare float @llvm.amdgcn.rsq.f32(float)"],
            ),
            (Flavor::Nvptx, "rsqrt") => (
                1,
                "  %r = call float @llvm.nvvm.rsqrt.approx.f(float %a0)\n  ret float %r\n",
                vec!["declare float @llvm.nvvm.rsqrt.approx.f(float)"],
            ),
            (_, "fma") => (
                3,
                "  %r = call float @llvm.fma.f32(float %a0, float %a1, float %a2)\n  ret float %r\n",
                vec!["declare float @llvm.fma.f32(float, float, float)"],
            ),
            (_, "min") => (
                2,
                "  %r = call float @llvm.minnum.f32(float %a0, float %a1)\n  ret float %r\n",
                vec!["declare float @llvm.minnum.f32(float, float)"],
            ),
            (_, "max") => (
                2,
                "  %r = call float @llvm.maxnum.f32(float %a0, float %a1)\n  ret float %r\n",
                vec!["declare float @llvm.maxnum.f32(float, float)"],
            ),
            (_, "abs") => (
                1,
                "  %r = call float @llvm.fabs.f32(float %a0)\n  ret float %r\n",
                vec!["declare float @llvm.fabs.f32(float)"],
            ),
            _ => return Err(format!("no f32 math function `{which}`")),
        };
        let args = vec![HTy::F32; arity];
        self.get(&name, |_| helper(&name, HTy::F32, &args, body, decls));
        Ok((name, arity))
    }
}

fn helper(name: &str, ret: HTy, args: &[HTy], body: &str, declares: Vec<&'static str>) -> Helper {
    let params: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{} %a{i}", a.text()))
        .collect();
    let define = format!(
        "define {} @{name}({}) {ATTRS} {{\n{body}}}\n",
        ret.text(),
        params.join(", ")
    );
    Helper {
        ret,
        args: args.to_vec(),
        define,
        declares,
    }
}

fn llvm_ty(ty: AtomTy) -> &'static str {
    match ty {
        AtomTy::F32 => "float",
        _ => "i32",
    }
}

/// An AMDGPU atomic: the LLVM instruction with the ordering and sync scope, which the AMDGPU
/// memory model lowers (on gfx906, a release at agent/system scope waits for earlier stores and an
/// acquire invalidates the L1 afterwards).
fn amd_atomic(op: AtomicOp, ty: AtomTy, o: Ordering, s: Scope) -> Result<String, String> {
    let (t, ss, ord) = (llvm_ty(ty), amd_syncscope(s), order_name(o));
    Ok(match op {
        AtomicOp::Load => {
            check_load(o)?;
            format!(
                "  %v = load atomic {t}, ptr addrspace(1) %a0{ss} {ord}, align 4\n  ret {t} %v\n"
            )
        }
        AtomicOp::Store => {
            check_store(o)?;
            format!("  store atomic {t} %a1, ptr addrspace(1) %a0{ss} {ord}, align 4\n  ret void\n")
        }
        AtomicOp::Add | AtomicOp::Max => {
            // gfx906 has no FP32 global atomic add: AtomicExpand turns `fadd` into a CAS loop with
            // the same ordering and scope.
            let rmw = match (op, ty) {
                (AtomicOp::Add, AtomTy::F32) => "fadd",
                (AtomicOp::Add, _) => "add",
                (AtomicOp::Max, AtomTy::U32) => "umax",
                (AtomicOp::Max, AtomTy::I32) => "max",
                (AtomicOp::Max, AtomTy::F32) => return Err("atomic max on f32".into()),
                _ => unreachable!("loads and stores handled above"),
            };
            format!(
                "  %v = atomicrmw {rmw} ptr addrspace(1) %a0, {t} %a1{ss} {ord}, align 4\n  ret {t} %v\n"
            )
        }
    })
}

/// An NVPTX atomic: the PTX instruction nvcc emits for the C++ ordering and scope.
fn ptx_atomic(op: AtomicOp, ty: AtomTy, o: Ordering, s: Scope) -> Result<String, String> {
    let sc = ptx_scope(s);
    // seq_cst = fence.sc then the acquire/release form (the PTX memory model's mapping).
    let pre = if o == Ordering::SeqCst {
        format!("fence.sc.{sc}; ")
    } else {
        String::new()
    };
    let addr = "  %p = ptrtoint ptr addrspace(1) %a0 to i64\n";
    Ok(match op {
        AtomicOp::Load => {
            check_load(o)?;
            let sem = if o == Ordering::Relaxed {
                "relaxed"
            } else {
                "acquire"
            };
            let (t, c, pt) = reg(ty);
            format!(
                "{addr}  %v = call {t} asm sideeffect \"{pre}ld.{sem}.{sc}.global.{pt} $0, [$1];\", \"={c},l,~{{memory}}\"(i64 %p)\n  ret {t} %v\n"
            )
        }
        AtomicOp::Store => {
            check_store(o)?;
            let sem = if o == Ordering::Relaxed {
                "relaxed"
            } else {
                "release"
            };
            let (t, c, pt) = reg(ty);
            format!(
                "{addr}  call void asm sideeffect \"{pre}st.{sem}.{sc}.global.{pt} [$0], $1;\", \"l,{c},~{{memory}}\"(i64 %p, {t} %a1)\n  ret void\n"
            )
        }
        AtomicOp::Add | AtomicOp::Max => {
            let sem = match o {
                Ordering::Relaxed => "relaxed",
                Ordering::Acquire => "acquire",
                Ordering::Release => "release",
                Ordering::AcqRel | Ordering::SeqCst => "acq_rel",
            };
            let (t, c, _) = reg(ty);
            let what = match (op, ty) {
                (AtomicOp::Add, AtomTy::F32) => "add.f32",
                (AtomicOp::Add, _) => "add.u32",
                (AtomicOp::Max, AtomTy::U32) => "max.u32",
                (AtomicOp::Max, AtomTy::I32) => "max.s32",
                (AtomicOp::Max, AtomTy::F32) => return Err("atomic max on f32".into()),
                _ => unreachable!("loads and stores handled above"),
            };
            format!(
                "{addr}  %v = call {t} asm sideeffect \"{pre}atom.{sem}.{sc}.global.{what} $0, [$1], $2;\", \"={c},l,{c},~{{memory}}\"(i64 %p, {t} %a1)\n  ret {t} %v\n"
            )
        }
    })
}

/// LLVM type, inline-asm constraint and PTX type of an atomic's value.
fn reg(ty: AtomTy) -> (&'static str, &'static str, &'static str) {
    match ty {
        AtomTy::F32 => ("float", "f", "f32"),
        AtomTy::U32 => ("i32", "r", "u32"),
        AtomTy::I32 => ("i32", "r", "s32"),
    }
}

fn check_load(o: Ordering) -> Result<(), String> {
    match o {
        Ordering::Release | Ordering::AcqRel => {
            Err(format!("an atomic load cannot have ordering {o:?}"))
        }
        _ => Ok(()),
    }
}

fn check_store(o: Ordering) -> Result<(), String> {
    match o {
        Ordering::Acquire | Ordering::AcqRel => {
            Err(format!("an atomic store cannot have ordering {o:?}"))
        }
        _ => Ok(()),
    }
}
