//! Choosing without a clock: the instruction-count model of `wavefuse tune --arch gfx906`
//! (nothing can be timed on gfx906 here), and the simulator check that keeps a wrong schedule from
//! winning. The ranking itself is by the MI50 time model of each compiled candidate
//! (`wavefuse_codegen::model`, hipcc's code counted) when every candidate has one; this count
//! breaks its ties and ranks alone when the time model cannot read a candidate's hot loop.
//!
//! # The model
//! For INT4 GEMVs only: an estimate of the VALU and memory instructions one lane issues per
//! weight, from the schedule (`v` words per load, `B` batch rows, `ku` words per work unit, `t`
//! K slices, `K` rows):
//!
//! | part | instructions per weight |
//! |---|---|
//! | packed word load | `1 / (8 v)` |
//! | nibble decode | convert: 2 (`v_bfe_u32`, `v_cvt_f32_u32`); magic: 3 (shift, `v_and_or_b32`, sub) |
//! | scaling | per weight: `1 + B` FMAs; per unit: `B` FMAs, `B / v` for `Σ x` and `2 B / (8 ku)` to fold |
//! | scale and zero point | `4 / (8 ku)` (load, unpack, `−z·s`) |
//! | activations | `9 B / (8 v)` (a 16-byte load and 8 conversions per K word, shared by the lane's `v` words) |
//! | cross-slice reduction | `3 t B / K` |
//!
//! The dot2 path ([`Int4Dot::Dot2`]): load `1 / (8 v)`, pair decode `15 / 8` (3 shifts, 4 ANDs,
//! 4 ORs, 4 packed subtractions per word), `B / 2` dot2, activation pairs `B / v`, scale
//! `2 B / (8 ku)`, zero points and reduction as above.
//!
//! The hipcc ISA says the counts are low by about the address arithmetic of the loads (hot loop
//! of `gemv_int4` at TP 4, `tests/tests/hip.rs::dot2_gemv_issues_fewer_valu_instructions_per_weight_gfx906`:
//! default 8.0 VALU per weight vs the model's 5.3; dot2 with 2-word units 4.5 vs 3.9, with
//! 2-word loads too 3.3 vs 3.3, since the decode's AND-ORs are one `v_and_or_b32` each): good enough to rank, not to predict time.
//!
//! On gfx906 both halves of the convert decode are full-rate, so the magic decode costs more
//! there (on sm_90, where I2F is quarter-rate, it is the other way round — which is why sm_90 is
//! timed, not modelled). Accumulators do not change the count; they hide latency, which a count
//! cannot see. Ties go to fewer VGPRs, then to the earlier candidate (closer to the default).
//! Candidates must also pass the resource filter (no spills, occupancy ≥ the hand-written
//! kernel's) and the simulator check; a schedule that does not lower at the simulator's small
//! shapes cannot be checked and so cannot win.

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Int4Dot, Int4Scaling, NibbleDecode, Schedule, lower};
use wavefuse_codegen::sim::{Case, SimOptions, simulate_case};
use wavefuse_runtime::exec;

use super::space::Family;
use crate::ab::check_of;
use crate::suite::{self, CaseSpec, Data};

/// The model's instructions per weight and lane (None: the model does not cover the family).
pub fn cost(s: &Schedule, family: Family, batch: usize, k: usize) -> Option<f64> {
    let Family::Int4 { .. } = family else {
        return None;
    };
    let (v, b, ku, t) = (
        f64::from(s.words_per_iteration),
        batch as f64,
        f64::from(s.k_unit_words),
        f64::from(s.threads_per_column),
    );
    let load = 1.0 / (8.0 * v);
    let scale_zero = 4.0 / (8.0 * ku);
    let reduction = 3.0 * t * b / k.max(1) as f64;
    if s.int4_dot == Int4Dot::Dot2 {
        // Per packed word: 3 shifts, 4 ANDs and 4 ORs (two literals: no single v_and_or_b32
        // on gfx906), 4 packed subtractions; per pair and batch row one v_dot2; the
        // activations paired once per K word and batch row (2 per pair), shared by the `v`
        // words; the scale once per unit.
        let decode = 15.0 / 8.0;
        let dot = b / 2.0;
        let x = b / v;
        let scaling = 2.0 * b / (8.0 * ku);
        return Some(load + decode + dot + x + scaling + scale_zero + reduction);
    }
    let decode = match s.nibble_decode {
        NibbleDecode::Convert => 2.0,
        NibbleDecode::Magic => 3.0,
    };
    let scaling = match s.int4_scaling {
        Int4Scaling::PerWeight => 1.0 + b,
        Int4Scaling::PerUnit => b + b / v + 2.0 * b / (8.0 * ku),
    };
    let x = 9.0 * b / (8.0 * v);
    Some(load + decode + scaling + scale_zero + x + reduction)
}

/// Lowers `schedule` for the simulator's small version of `spec`'s kernel and runs it once in the
/// CPU protocol simulator against the f64 reference: `Some(pass)`, or None (with why) when the
/// schedule does not apply at the small shapes.
pub fn sim_check(
    spec: &CaseSpec,
    arch: Arch,
    schedule: &Schedule,
    seed: u64,
) -> (Option<bool>, String) {
    let small = spec.small();
    let ir = match suite::op_kernel(&small) {
        Ok(Some(k)) => k,
        Ok(None) => return (None, "no small shapes for this kernel".into()),
        Err(e) => return (None, format!("small kernel: {e}")),
    };
    let lowered = match lower(&ir, arch, schedule) {
        Ok(k) => k,
        Err(e) => return (None, format!("not checkable at the small shapes: {e}")),
    };
    let data = match Data::new(&ir, seed) {
        Ok(d) => d,
        Err(e) => return (None, format!("reference: {e}")),
    };
    let case = Case {
        inputs: vec![data.inputs.clone()],
        reference: vec![data.reference.clone()],
    };
    let report = match simulate_case(&lowered, &ir, &case, &SimOptions::new(seed)) {
        Ok(r) => r,
        Err(e) => return (None, format!("simulator: {e}")),
    };
    if let Some(f) = report.findings.first() {
        return (Some(false), format!("simulator finding: {f}"));
    }
    let outputs = report.outputs.first().cloned().unwrap_or_default();
    let on = format!("simulator {arch}, small shapes");
    let check = check_of(
        &on,
        &exec::compare(&ir, &outputs, &data.reference),
        spec.kernel.tolerance().0,
    );
    let detail = if check.pass { on } else { check.detail };
    (Some(check.pass), detail)
}
