//! The default schedule, decided in one place: the target's default for the kernel
//! ([`Schedule::default_for`]), the allreduce protocol for the placement, and the cost rule
//! between recomputing a GEMV prologue and materialising it ([`prologue_by_cost`]). What
//! `wavefuse emit`, the snapshots, `check`, `ab` and the suites start from before overrides and
//! the co-residency fit ([`super::fit()`]).

use wavefuse_ir::{Kernel, OpKind};

use super::fit::{Trials, fits_coresident};
use super::{AllreduceProtocol, Schedule, has_gemv_prologue};
use crate::target::Arch;

/// Whether `ir` has a GEMV (the kernels whose schedule fields an override can change).
pub fn has_gemv(ir: &Kernel) -> bool {
    ir.ops()
        .any(|(_, o)| matches!(o.kind, OpKind::Gemv(_) | OpKind::GemvQ8(_)))
}

/// The target's default for `ir` with `ranks_per_device` ranks sharing each device, before the
/// prologue's cost rule. With one rank per device a kernel that fuses a GEMV with an allreduce
/// uses the push protocol (each rank writes its slice into the peers' memory and polls only its
/// own flags): on 2 × H200 over NVLink the fused kernel took 18.2 µs with push against 19.6 µs
/// with pull (three alternating runs each, `bench/results/2026-11-30-push-per-device/`), while
/// with four ranks on one H200 push was 6 µs slower
/// (`bench/results/2026-11-30-fused-experiments/`).
pub fn for_placement(arch: Arch, ir: &Kernel, ranks_per_device: u32) -> Schedule {
    let s = Schedule::default_for(arch, ir);
    let allreduce = ir
        .ops()
        .any(|(_, o)| matches!(o.kind, OpKind::AllReduce(_)));
    if ranks_per_device == 1 && ir.tp() > 1 && has_gemv(ir) && allreduce {
        s.with_protocol(AllreduceProtocol::Push)
    } else {
        s
    }
}

/// The default schedule of `ir` on `arch` with `ranks_per_device` ranks sharing each device:
/// [`for_placement`], then [`prologue_by_cost`] (before the co-residency fit).
pub fn default_schedule(ir: &Kernel, arch: Arch, ranks_per_device: u32) -> Schedule {
    default_in(&mut Trials::new(ir, arch), ranks_per_device)
}

/// [`default_schedule`] over the fit's lowerings `t` (the prologue rule's lowerings are the
/// fit's first trials).
pub(super) fn default_in(t: &mut Trials<'_>, ranks_per_device: u32) -> Schedule {
    let s = for_placement(t.arch(), t.kernel(), ranks_per_device);
    cost_rule(t, s, ranks_per_device)
}

/// L2 bandwidth at which the workgroups of a recomputed GEMV prologue re-read its inputs, fitted
/// on the H200 (`bench/results/2026-12-02-h200-prologue-batch`: silu·mul before the INT4 down
/// GEMV 17408 → 5120, 640 workgroups, batch 1 and 2).
pub const PROLOGUE_REREAD_BYTES_PER_S: f64 = 10.9e12;
/// What materialising a prologue costs on the H200 when the GEMV stage keeps its grid: the stage
/// barrier and the activation's round trip through global memory (same fit).
pub const MATERIALISE_US: f64 = 2.6;
/// … and when the grid barrier makes the GEMV stage shrink its grid to be co-resident (RMSNorm
/// before gate/up 5120 → 2 × 17408: 2176 → 528 workgroups): recomputing won at batch 4 (111 MB
/// re-read, 0.91×), materialising at batch 8 (200 MB, 1.17×); the line between them.
pub const MATERIALISE_SHRUNK_US: f64 = 13.8;

/// The default's choice between recomputing a GEMV prologue in every workgroup and
/// materialising it once behind a grid barrier ([`Schedule::materialise_prologue`]), by cost, on
/// sm_90 (where it was measured): materialise when the recompute's re-reads (its grid × the
/// prologue's input bytes, at [`PROLOGUE_REREAD_BYTES_PER_S`]: each workgroup reads the inputs
/// whole once — a stage that loops over its tile parts computes the norm's `1/rms` once per
/// workgroup in front of the loop, and each part's packing of its K slice is what the GEMV
/// stages anyway) take longer than materialising
/// ([`MATERIALISE_US`], or [`MATERIALISE_SHRUNK_US`] when the barrier's co-residency shrinks the
/// grid). gfx906 keeps recomputing (not measured there); the fit still materialises where
/// recomputing does not lower ([`super::fit::lower_or_materialise`]). Tuned and explicit
/// schedules decide for themselves (an override `materialise_prologue=false` wins).
pub fn prologue_by_cost(ir: &Kernel, arch: Arch, s: Schedule, ranks_per_device: u32) -> Schedule {
    cost_rule(&mut Trials::new(ir, arch), s, ranks_per_device)
}

fn cost_rule(t: &mut Trials<'_>, s: Schedule, ranks_per_device: u32) -> Schedule {
    let (ir, arch) = (t.kernel(), t.arch());
    if arch != Arch::Sm90 || s.materialise_prologue || !has_gemv_prologue(ir) {
        return s;
    }
    let Ok(recompute) = t.lower(&s) else {
        return s;
    };
    let m = Schedule {
        materialise_prologue: true,
        ..s.clone()
    };
    let Ok(materialised) = t.lower(&m) else {
        return s;
    };
    let reread_us = f64::from(recompute.grid) * super::prologue_input_bytes(ir) as f64
        / PROLOGUE_REREAD_BYTES_PER_S
        * 1e6;
    let cost_us = if fits_coresident(&materialised, arch, ranks_per_device) {
        MATERIALISE_US
    } else {
        MATERIALISE_SHRUNK_US
    };
    if reread_us > cost_us { m } else { s }
}
