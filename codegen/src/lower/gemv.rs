//! The GEMV main loop: each workgroup computes its tile of columns for every batch row, leaving
//! per-slice partial sums in LDS for the elementwise stage to add up in a fixed order.

use wavefuse_ir::{Buffer, GptqLayout, WeightFormat, ZeroPoint};

use crate::lowered::{Base, BinOp, Expr, ReduceKind, Reg, Special, Stmt, Ty, UnOp};

use super::LowerError;
use super::schedule::{Int4Dot, Int4Scaling, MmaDecode, NibbleDecode, Reduction};

/// The workgroup's K part of the activations in LDS, in B-fragment order: u32 `[B][words][4]`,
/// entry `(b, w)` = the FP16 pairs `(x0, x4), (x1, x5), (x2, x6), (x3, x7)` of batch row `b` at
/// K-word `begin + w`.
struct XStage {
    lds: crate::lowered::Lds,
    /// First K-word of the part (`part · words`).
    begin: Expr,
    /// K-words of the part.
    words: usize,
    /// Entries (16 bytes each) from one batch row to the next in the LDS: `words`, or, on the
    /// tensor-core path's phases, `words + 4` where `words` is a multiple of 8 (see
    /// `mma.rs` `stage_pitch`).
    pitch: usize,
}

/// A GPTQ GEMV lane's place: its column in the row of lanes, its K slice, its first column.
struct Lanes {
    col_l: Reg,
    slice: Reg,
    n0: Reg,
}

/// The workgroup's K part: units per group, the part's units `[begin, end)`, and its phases
/// (units per phase and the phase register) where the stage is filled in phases.
struct KPart {
    upg: usize,
    begin: Expr,
    end: Expr,
    phase: Option<(usize, Reg)>,
}

/// The dot2 path's zero-point registers per column word: `1024 + z` in both FP16 halves, and
/// (for [`MmaDecode::Fma`]) `−(64 + z)`.
#[derive(Copy, Clone)]
struct Dot2Zeros<'a> {
    pair: &'a [Reg],
    hi: &'a [Reg],
}

/// `2^23` as f32 bits: its ulp is 1, so OR-ing a 4-bit code into the mantissa adds it exactly.
const MAGIC_2P23: u32 = 0x4B00_0000;

/// K row word `row0 + kw` of a unit.
fn krow(row0: Reg, kw: usize) -> Expr {
    if kw == 0 {
        r(row0)
    } else {
        add(r(row0), u(kw))
    }
}
use super::build::*;
use super::lowering::{BufParams, Lowering};

mod mma;
mod q8;
mod serial;

pub(super) use mma::{MMA_MAX_BATCH, mma_takes};
pub(super) use q8::q8_lds_bytes;
use serial::SliceSums;

fn sched<T>(what: String) -> Result<T, LowerError> {
    Err(LowerError::Schedule(what))
}

/// The GPTQ tiling: `lanes_per_row` lanes read `v` adjacent column words each of one K-row;
/// `slices` such rows of lanes split the groups of K between them.
struct Gptq {
    l: GptqLayout,
    k: usize,
    n: usize,
    groups: usize,
    words_per_group: usize,
    /// K words per work unit (divides `words_per_group`).
    unit: usize,
    decode: NibbleDecode,
    scaling: Int4Scaling,
    /// [`Int4Dot::Dot2`]: FP16 pair dot products (per-unit scaling, zero points as FP16 pairs).
    dot2: bool,
    /// The dot2 path's nibble-pair decode ([`MmaDecode`]).
    pair_decode: MmaDecode,
    /// The dot2 path's activations staged in LDS as FP16 pairs (`Schedule::x_in_lds`).
    xs: Option<XStage>,
    v: usize,
    lanes_per_row: usize,
    slices: usize,
    accs: usize,
    /// Batch rows this pass computes: all of them, or one tile's ([`Schedule::batch_tile`]).
    ///
    /// [`Schedule::batch_tile`]: super::Schedule::batch_tile
    batch: usize,
    /// The pass's first batch row (`None`: row 0 of an untiled batch).
    row0: Option<Expr>,
    /// The activations `[B, K]` (`None`: a prologue computes them straight into the LDS stage).
    x: Option<Base>,
    weights: Vec<Buffer>,
}

impl Gptq {
    /// The activations, where the lanes read them (not from an LDS stage).
    fn xb(&self) -> Base {
        self.x.clone().expect("unstaged activations")
    }

    /// First accumulator of (weight `mi`, batch row `bi`, column word `j`).
    fn acc(&self, mi: usize, bi: usize, j: usize) -> usize {
        ((mi * self.batch + bi) * self.v + j) * self.accs
    }

    /// The first activation of the pass's batch row `bi` (its K rows follow).
    fn x_row(&self, bi: usize) -> Expr {
        match &self.row0 {
            None => u(bi * self.k),
            Some(r0) => add(mul(r0.clone(), u(self.k)), u(bi * self.k)),
        }
    }
}

/// Batch row `bi` of a pass whose first row is `row0` (`None`: row 0).
fn row_at(row0: Option<&Expr>, bi: usize) -> Expr {
    match row0 {
        None => u(bi),
        Some(r0) if bi == 0 => r0.clone(),
        Some(r0) => add(r0.clone(), u(bi)),
    }
}

impl Lowering<'_> {
    pub(super) fn gemv(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        if self.plan.prologue.is_some() {
            self.prologue(out)?;
        }
        let g = self.plan.gemv.as_ref().expect("called with a GEMV");
        if let Some(q8) = g.q8 {
            return match g.weight.format {
                WeightFormat::Gptq(l) => self.gemv_gptq_q8(l, q8, out),
                _ => Err(LowerError::Unsupported(
                    "gemv_q8 of a non-GPTQ weight".into(),
                )),
            };
        }
        let mma = self.s.int4_dot == Int4Dot::Mma;
        match g.weight.format {
            WeightFormat::Gptq(_) if mma && self.s.reduction == Reduction::Serial => sched(
                "reduction = serial is not lowered on the tensor-core path (int4_dot = mma)".into(),
            ),
            WeightFormat::Gptq(l) if mma => self.gemv_gptq_mma(l, out),
            WeightFormat::Gptq(l) => self.gemv_gptq(l, out),
            WeightFormat::F16 => self.gemv_f16(out),
            WeightFormat::Awq(_) => Err(LowerError::Unsupported("AWQ weights".into())),
        }
    }

    /// Zero-initialised f32 accumulators.
    fn zeros(&mut self, n: usize, hint: &'static str, out: &mut Vec<Stmt>) -> Vec<Reg> {
        (0..n)
            .map(|_| {
                let a = self.k.reg(Ty::F32, hint);
                out.push(assign(a, f(0.0)));
                a
            })
            .collect()
    }

    /// One LDS array `[t_red · B · C]` per GEMV for the cross-slice reduction (`[B · C]` with
    /// [`Reduction::Serial`]).
    fn reduction_arrays(&mut self, t_red: usize) {
        let len = match self.s.reduction {
            Reduction::Slices => t_red * self.plan.batch * self.cols,
            Reduction::Serial => self.plan.batch * self.cols,
        };
        let m = self.plan.gemv.as_ref().expect("a GEMV").gemvs.len();
        self.t_red = t_red;
        self.red = (0..m).map(|_| self.k.lds(Ty::F32, len)).collect();
    }

    /// Sum of the independent accumulators `acc[base .. base + a]`.
    fn sum_accs(accs: &[Reg]) -> Expr {
        accs.iter()
            .skip(1)
            .fold(r(accs[0]), |e, &a| Expr::add(e, r(a)))
    }

    /// The GEMV's `(K, N, group rows)`, when the GPTQ layout supports them.
    fn gptq_shape(&self, l: GptqLayout) -> Result<(usize, usize, usize), LowerError> {
        let g = self.plan.gemv.as_ref().expect("a GEMV");
        let (kdim, n) = (g.weight.k, g.weight.n);
        let group = l.group.rows(kdim);
        if kdim % 8 != 0 || group % 8 != 0 || kdim % group != 0 || n % 8 != 0 {
            return Err(LowerError::Unsupported(format!(
                "GPTQ shape K={kdim}, N={n}, group {group} (K must be whole groups of whole words, N whole zero-point words)"
            )));
        }
        Ok((kdim, n, group))
    }

    /// The GPTQ tiling of this kernel, checked against the schedule.
    fn gptq_tiling(&self, l: GptqLayout) -> Result<Gptq, LowerError> {
        let g = self.plan.gemv.as_ref().expect("a GEMV");
        let (kdim, n, group) = self.gptq_shape(l)?;
        let v = self.s.words_per_iteration as usize;
        let (c, wg) = (self.cols, self.wg());
        if c % v != 0 || n % v != 0 {
            return sched(format!(
                "{v} words per lane do not divide {c} columns per workgroup and N={n}"
            ));
        }
        let lanes_per_row = c / v;
        if wg % lanes_per_row != 0 || wg / lanes_per_row != self.s.threads_per_column as usize {
            return sched(format!(
                "INT4: {wg} lanes = threads per column ({}) x columns ({c}) / words per lane ({v}) does not hold",
                self.s.threads_per_column
            ));
        }
        let dot2 = self.s.int4_dot == Int4Dot::Dot2;
        if dot2 && !self.arch.has_dot2_f32_f16() {
            return sched(format!(
                "int4_dot = dot2: {} has no FP16 pair dot product into f32",
                self.arch
            ));
        }
        let unit = self.s.k_unit_words as usize;
        if unit == 0 || (group / 8) % unit != 0 {
            return sched(format!(
                "INT4: k_unit_words = {unit} does not divide the group's {} K-words",
                group / 8
            ));
        }
        Ok(Gptq {
            l,
            k: kdim,
            n,
            groups: kdim / group,
            words_per_group: group / 8,
            unit,
            decode: self.s.nibble_decode,
            // the dot2 path applies the scale per unit (its pair sums are unscaled)
            scaling: if dot2 {
                Int4Scaling::PerUnit
            } else {
                self.s.int4_scaling
            },
            dot2,
            pair_decode: self.s.mma_decode,
            xs: None,
            v,
            lanes_per_row,
            slices: wg / lanes_per_row,
            accs: self.s.accumulators as usize,
            batch: self.plan.batch,
            row0: None,
            x: self.activations(),
            weights: g.gemvs.iter().map(|&(_, w)| w).collect(),
        })
    }

    fn gemv_gptq(&mut self, l: GptqLayout, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let mut t = self.gptq_tiling(l)?;
        self.reduction_arrays(t.slices);
        let upg = t.words_per_group / t.unit;
        let (begin, end) = self.split_units(t.groups * upg)?;
        let phase = self.x_phase(&t, t.groups * upg / self.s.k_split.max(1) as usize)?;
        let tile = self.batch_tile(&t)?;
        // With phases the stage holds one phase of the part and is filled inside the phase loop
        // (below); otherwise the whole part, once, here (once per tile with batch tiles).
        let phase_reg = phase.map(|_| self.k.reg(Ty::U32, "phase"));
        if t.dot2 && self.s.x_in_lds {
            // The dot2 pairs (x_h, x_h+4) are the MMA path's B-fragment order.
            let (words, first) = match (phase, phase_reg) {
                (Some(units), Some(ph)) => (units * t.unit, r(ph)),
                // A stripe's whole-part stage is the whole K, from K-word 0 (`striped`).
                _ if self.striped() => (t.k / 8, u(0)),
                _ => (t.k / 8 / self.s.k_split as usize, begin.clone()),
            };
            let stage = XStage {
                lds: self.k.lds(Ty::U32, tile.unwrap_or(t.batch) * words * 4),
                begin: mul(first, u(t.unit)),
                words,
                pitch: words,
            };
            if phase.is_none() && tile.is_none() {
                self.stage_x(t.x.clone(), t.k, (t.batch, None), &stage, out)?;
            }
            t.xs = Some(stage);
        }
        out.push(comment(format!(
            "GPTQ INT4 GEMV: lane (local_id % {lpr}) reads {v} adjacent packed column word(s) of one K-row (coalesced); \
             K is cut into units of {unit} K-words ({upg} per group); K slice local_id / {lpr} of {s} takes units slice, slice + {s}, ...",
            lpr = t.lanes_per_row,
            v = t.v,
            unit = t.unit,
            s = t.slices
        )));
        let lanes = Lanes {
            col_l: self.k.reg(Ty::U32, "lane_col"),
            slice: self.k.reg(Ty::U32, "slice"),
            n0: self.k.reg(Ty::U32, "n0"),
        };
        out.push(assign(
            lanes.col_l,
            rem(sp(Special::LocalId), u(t.lanes_per_row)),
        ));
        out.push(assign(
            lanes.slice,
            div(sp(Special::LocalId), u(t.lanes_per_row)),
        ));
        out.push(assign(
            lanes.n0,
            add(r(self.tile0), mul(r(lanes.col_l), u(t.v))),
        ));
        let k_part = KPart {
            upg,
            begin,
            end,
            phase: phase.zip(phase_reg),
        };
        let Some(rows) = tile else {
            return self.gptq_rows(&t, &lanes, &k_part, out);
        };
        // Batch tiles (`Schedule::batch_tile`): the full tiles in a loop, then the rest.
        let (full, rest) = (t.batch / rows, t.batch % rows);
        out.push(comment(format!(
            "batch tiles (batch_tile = {rows}): rows [tile*{rows}, tile*{rows} + {rows}) of {b} per pass, each with its own accumulators over the whole K part (the weights read once per tile){}",
            if rest > 0 {
                format!(", then the last {rest} row(s)")
            } else {
                String::new()
            },
            b = t.batch
        )));
        self.k.weight_passes = (full + usize::from(rest > 0)) as u32;
        let tile_reg = self.k.reg(Ty::U32, "batch_tile");
        let mut body = Vec::new();
        let tiled = Gptq {
            batch: rows,
            row0: Some(mul(r(tile_reg), u(rows))),
            ..t
        };
        self.gptq_rows(&tiled, &lanes, &k_part, &mut body)?;
        out.push(for_loop(tile_reg, u(0), u(full), u(1), body));
        if rest > 0 {
            let last = Gptq {
                batch: rest,
                row0: Some(u(full * rows)),
                ..tiled
            };
            self.gptq_rows(&last, &lanes, &k_part, out)?;
        }
        Ok(())
    }

    /// Rows per batch tile of the GPTQ GEMV ([`Schedule::batch_tile`](super::Schedule::batch_tile)),
    /// `None` for one pass over every row; refused on the paths that do not lower it.
    fn batch_tile(&self, t: &Gptq) -> Result<Option<usize>, LowerError> {
        let rows = self.s.batch_tile as usize;
        if rows == 0 || rows >= t.batch {
            return Ok(None);
        }
        if !t.dot2 {
            return sched(format!(
                "batch_tile = {rows} is lowered on the dot2 and tensor-core paths only (int4_dot = dot2 or mma, not fma)"
            ));
        }
        if t.x.is_none() {
            return sched(format!(
                "batch_tile = {rows}: a GEMV prologue writes every batch row's activations at once (not lowered with batch tiles)"
            ));
        }
        Ok(Some(rows))
    }

    /// One pass of the GPTQ GEMV over `t.batch` rows from `t.row0`: its accumulators, the units
    /// of the workgroup's K part (in phases, or after staging the pass's rows when it is one
    /// tile of several), and its sums into the cross-slice reduction.
    fn gptq_rows(
        &mut self,
        t: &Gptq,
        lanes: &Lanes,
        kp: &KPart,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let (col_l, slice, n0, upg) = (lanes.col_l, lanes.slice, lanes.n0, kp.upg);
        let acc = self.zeros(t.weights.len() * t.batch * t.v * t.accs, "acc", out);

        // One unit per iteration: unit `un` covers K-words [un·unit, un·unit + unit) of group
        // un / upg (the K-word index of a unit never crosses a group: unit divides the group).
        let unit_reg = self.k.reg(Ty::U32, if upg == 1 { "group" } else { "unit" });
        let mut unit_body = Vec::new();
        let gi = if upg == 1 {
            unit_reg
        } else {
            let gi = self.k.reg(Ty::U32, "group");
            unit_body.push(assign(gi, div(r(unit_reg), u(upg))));
            gi
        };
        let (sf, zs, zhi) = self.gptq_group_constants(t, gi, n0, &mut unit_body);
        match t.scaling {
            Int4Scaling::PerWeight => {
                let kw = self.k.reg(Ty::U32, "kword");
                let word_body = self.gptq_word(t, unit_reg, kw, n0, &sf, &zs, &acc);
                unit_body.push(for_loop(kw, u(0), u(t.unit), u(1), word_body));
            }
            Int4Scaling::PerUnit if t.dot2 => {
                let zeros = Dot2Zeros {
                    pair: &zs,
                    hi: &zhi,
                };
                self.gptq_unit_dot2(t, unit_reg, n0, &sf, zeros, &acc, &mut unit_body)
            }
            Int4Scaling::PerUnit => {
                self.gptq_unit_factored(t, unit_reg, n0, &sf, &zs, &acc, &mut unit_body)
            }
        }
        let units_loop = match kp.phase {
            Some((units, ph)) => for_loop(
                unit_reg,
                add(r(ph), r(slice)),
                add(r(ph), u(units)),
                u(t.slices),
                unit_body,
            ),
            _ => for_loop(
                unit_reg,
                add(kp.begin.clone(), r(slice)),
                kp.end.clone(),
                u(t.slices),
                unit_body,
            ),
        };
        out.push(comment(match (t.scaling, t.decode) {
            _ if t.dot2 && t.pair_decode == MmaDecode::Fma => {
                "dot2: pairs 0, 2 of a packed word = ((word >> 8h) & 0x000F000F) | 0x64006400 (1024 + q) minus 1024 + z, pairs 1, 3 = ((word >> 8h) & 0x00F000F0) | 0x64006400 (1024 + 16q) times 1/16 minus 64 + z: \
                 q - z exact in FP16; a = dot2(pair, (x_h, x_h+4), a) with f32 accumulation over the unit, then acc = fma(s, a, acc)"
            }
            _ if t.dot2 => {
                "dot2: pair h of a packed word = ((word >> 4h) & 0x000F000F) | 0x64006400 (1024 + q of nibbles h, h + 4) minus 1024 + z: q - z exact in FP16; \
                 a = dot2(pair, (x_h, x_h+4), a) with f32 accumulation over the unit, then acc = fma(s, a, acc)"
            }
            (Int4Scaling::PerWeight, NibbleDecode::Convert) => {
                "dequantise: w = fma(f32(bfe(word, 4i, 4)), s, -z*s), which is (q - z)*s exactly in f32; acc = fma(w, f32(x), acc)"
            }
            (Int4Scaling::PerWeight, NibbleDecode::Magic) => {
                "dequantise: q = bitcast<f32>(((word >> 4i) & 15) | 0x4B000000) - 2^23 (exact), w = fma(q, s, -z*s) = (q - z)*s exactly; acc = fma(w, f32(x), acc)"
            }
            (Int4Scaling::PerUnit, _) => {
                "per unit: a = sum q*x and X = sum x over the unit's K rows (q exact in f32), then acc = fma(s, a - z*X, acc) = acc + sum (q - z)*s*x"
            }
        }));
        match (kp.phase, &t.xs) {
            (Some((units, ph)), Some(stage)) => {
                // The part in phases of `units` units (`Schedule::x_phase_units`): each phase's
                // activations are staged, then its units computed. Both workgroup barriers stay
                // outside the column mask (§5.8: uniform control flow; the phase bounds are the
                // workgroup's). The first keeps the previous phase's LDS reads before the
                // overwrite, the second (in `stage_x`) the stage's writes before any read (§5.2:
                // the stage is the workgroup's, every lane reads what all lanes wrote).
                let mut body = vec![
                    comment(format!(
                        "phase of {units} units: every lane is done reading the last phase's activations before they are overwritten"
                    )),
                    Stmt::WorkgroupBarrier,
                ];
                self.stage_x(
                    t.x.clone(),
                    t.k,
                    (t.batch, t.row0.as_ref()),
                    stage,
                    &mut body,
                )?;
                when(lt(r(n0), u(t.n)), vec![units_loop], &mut body);
                out.push(for_loop(
                    ph,
                    kp.begin.clone(),
                    kp.end.clone(),
                    u(units),
                    body,
                ));
            }
            (None, Some(stage)) if t.row0.is_some() => {
                // One tile of several: its rows' activations replace the last tile's in the
                // stage. The last tile's cross-slice sums ended with a workgroup barrier (§5.2),
                // after all its reads of the stage: no lane overwrites what another still reads.
                self.stage_x(t.x.clone(), t.k, (t.batch, t.row0.as_ref()), stage, out)?;
                when(lt(r(n0), u(t.n)), vec![units_loop], out);
            }
            _ => when(lt(r(n0), u(t.n)), vec![units_loop], out),
        }

        let sum = |mi: usize, bi: usize, j: usize| {
            let base = t.acc(mi, bi, 0) + j * t.accs;
            Self::sum_accs(&acc[base..base + t.accs])
        };
        self.slice_sums_to_lds(
            (t.weights.len(), t.batch, t.v),
            t.row0.as_ref(),
            slice,
            col_l,
            &sum,
            out,
        );
        Ok(())
    }

    /// The INT4 paths' cross-slice reduction, first half: each K slice's sums (`sum(gemv, batch
    /// row, column word)`, `v` words per lane) to `red[gemv]` at (slice, row, column), then the
    /// workgroup barrier after which they are added in slice order (§5.2: LDS is the
    /// workgroup's; §5.8: uniform control flow). [`Reduction::Serial`]: added in slice order
    /// into one `[B][C]` array (`gemv/serial.rs`). `batch` rows from `row0` (`None`: row 0).
    pub(super) fn slice_sums_to_lds(
        &mut self,
        (gemvs, batch, v): (usize, usize, usize),
        row0: Option<&Expr>,
        slice: Reg,
        col_l: Reg,
        sum: &dyn Fn(usize, usize, usize) -> Expr,
        out: &mut Vec<Stmt>,
    ) {
        if self.s.reduction == Reduction::Serial {
            let sums: Vec<SliceSums> = (0..gemvs)
                .flat_map(|mi| (0..batch).map(move |bi| (mi, bi)))
                .map(|(mi, bi)| SliceSums {
                    gemv: mi,
                    row: row_at(row0, bi),
                    col: mul(r(col_l), u(v)),
                    values: (0..v).map(|j| sum(mi, bi, j)).collect(),
                    guard: None,
                })
                .collect();
            return self.serial_slice_sums(r(slice), &sums, out);
        }
        out.push(comment(
            "cross-slice reduction: each slice's sums to LDS, added in slice order after the barrier",
        ));
        for mi in 0..gemvs {
            for bi in 0..batch {
                let vals = (0..v).map(|j| sum(mi, bi, j)).collect();
                // Rows of the whole batch (a pass may be one tile of them).
                let row = row_at(row0, bi);
                let idx = add(
                    mul(add(mul(r(slice), u(self.plan.batch)), row), u(self.cols)),
                    mul(r(col_l), u(v)),
                );
                out.push(store(self.lds_at(self.red[mi], idx), vals));
            }
        }
        out.push(Stmt::WorkgroupBarrier);
    }

    /// Once per unit (DESIGN.md §2): the scale `s` as f32 for every weight and column word, and
    /// the zero point's term: `−z·s` (per-weight scaling) or `z` itself (per-unit scaling), from
    /// `scales[g, n]` and nibble `n % 8` of `qzeros[g, n / 8]`.
    fn gptq_group_constants(
        &mut self,
        t: &Gptq,
        gi: Reg,
        n0: Reg,
        out: &mut Vec<Stmt>,
    ) -> (Vec<Reg>, Vec<Reg>, Vec<Reg>) {
        let (mut sf, mut zs, mut zhi) = (vec![], vec![], vec![]);
        if t.l.zero == ZeroPoint::V1 {
            out.push(comment(
                "GPTQ v1 zero points: the stored nibble is z - 1, so add 1",
            ));
        }
        for &w in &t.weights {
            let BufParams::Gptq { scales, qzeros, .. } = self.bufs[&w] else {
                unreachable!("a GPTQ weight")
            };
            let sh: Vec<Reg> = (0..t.v).map(|_| self.k.reg(Ty::F16, "scale_h")).collect();
            out.push(load(
                sh.clone(),
                at(Base::Param(scales), add(mul(r(gi), u(t.n)), r(n0))),
            ));
            let zw = qzeros.map(|zp| {
                let zw = self.k.reg(Ty::U32, "zero_word");
                out.push(load(
                    vec![zw],
                    at(
                        Base::Param(zp),
                        add(mul(r(gi), u(t.n / 8)), div(r(n0), u(8))),
                    ),
                ));
                zw
            });
            for (j, &h) in sh.iter().enumerate() {
                let s32 = self.k.reg(Ty::F32, "scale");
                out.push(assign(s32, cast(Ty::F32, r(h))));
                let z = match (t.l.zero, zw) {
                    (ZeroPoint::Symmetric, _) | (_, None) => f(8.0),
                    (zero, Some(zw)) => {
                        let nib = bfe(r(zw), mul(rem(add(r(n0), u(j)), u(8)), u(4)), 4);
                        let nib = if zero == ZeroPoint::V1 {
                            add(nib, u(1))
                        } else {
                            nib
                        };
                        cast(Ty::F32, nib)
                    }
                };
                let zr = match t.scaling {
                    Int4Scaling::PerUnit if t.dot2 && t.pair_decode == MmaDecode::Fma => {
                        // 1024 + z (as below) and −(64 + z) in both halves: 0xD400 is −64 and
                        // in [64, 128) the ulp is 1/16, so 16·z more in the mantissa is
                        // −(64 + z) exactly.
                        let (zi, zp, zh) = (
                            self.k.reg(Ty::U32, "zero_int"),
                            self.k.reg(Ty::U32, "zero_pair"),
                            self.k.reg(Ty::U32, "zero_hi"),
                        );
                        out.push(assign(zi, cast(Ty::U32, z)));
                        out.push(assign(zp, mul(add(r(zi), u(0x6400)), u(0x1_0001))));
                        let bits = add(mul(r(zi), u(16)), u(0xD400));
                        out.push(assign(zh, mul(bits, u(0x1_0001))));
                        zhi.push(zh);
                        zp
                    }
                    Int4Scaling::PerUnit if t.dot2 => {
                        // 1024 + z in both FP16 halves: 0x6400 + z is its pattern (ulp 1 in
                        // [1024, 2048)); z is the small integer the f32 `z` above holds.
                        let zp = self.k.reg(Ty::U32, "zero_pair");
                        let zi = cast(Ty::U32, z);
                        out.push(assign(zp, mul(add(zi, u(0x6400)), u(0x1_0001))));
                        zp
                    }
                    Int4Scaling::PerWeight => {
                        let nz = self.k.reg(Ty::F32, "neg_zs");
                        out.push(assign(nz, un(UnOp::Neg, Expr::mul(z, r(s32)))));
                        nz
                    }
                    Int4Scaling::PerUnit => {
                        let zf = self.k.reg(Ty::F32, "zero");
                        out.push(assign(zf, z));
                        zf
                    }
                };
                sf.push(s32);
                zs.push(zr);
            }
        }
        (sf, zs, zhi)
    }

    /// Nibble `i` of `word` as an exact f32 in [0, 15].
    fn nibble(decode: NibbleDecode, word: Reg, i: u32) -> Expr {
        match decode {
            NibbleDecode::Convert => cast(Ty::F32, bfe(r(word), Expr::u32(4 * i), 4)),
            NibbleDecode::Magic => {
                let shifted = if i == 0 {
                    r(word)
                } else {
                    bin(BinOp::Shr, r(word), Expr::u32(4 * i))
                };
                let bits = bin(
                    BinOp::Or,
                    bin(BinOp::And, shifted, Expr::u32(0xF)),
                    Expr::u32(MAGIC_2P23),
                );
                sub(Expr::bitcast(Ty::F32, bits), f(8_388_608.0))
            }
        }
    }

    /// One K-row word per weight and column: dequantise its 8 nibbles, then one FMA per nibble
    /// and batch row, alternating over the independent accumulators.
    #[allow(clippy::too_many_arguments)]
    fn gptq_word(
        &mut self,
        t: &Gptq,
        unit_reg: Reg,
        kw: Reg,
        n0: Reg,
        sf: &[Reg],
        nzs: &[Reg],
        acc: &[Reg],
    ) -> Vec<Stmt> {
        let row = self.k.reg(Ty::U32, "krow");
        let mut out = vec![assign(row, add(mul(r(unit_reg), u(t.unit)), r(kw)))];
        let mut wf = vec![]; // per (weight, column word, nibble)
        for (mi, &w) in t.weights.iter().enumerate() {
            let BufParams::Gptq { qweight, .. } = self.bufs[&w] else {
                unreachable!("a GPTQ weight")
            };
            let words: Vec<Reg> = (0..t.v).map(|_| self.k.reg(Ty::U32, "qword")).collect();
            out.push(load(
                words.clone(),
                at(Base::Param(qweight), add(mul(r(row), u(t.n)), r(n0))),
            ));
            for (j, &word) in words.iter().enumerate() {
                for i in 0..8u32 {
                    let wr = self.k.reg(Ty::F32, "w");
                    let q = Self::nibble(t.decode, word, i);
                    out.push(assign(
                        wr,
                        fma(q, r(sf[mi * t.v + j]), r(nzs[mi * t.v + j])),
                    ));
                    wf.push(wr);
                }
            }
        }
        for bi in 0..t.batch {
            let xh: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "x")).collect();
            out.push(load(
                xh.clone(),
                at(t.xb(), add(u(bi * t.k), mul(r(row), u(8)))),
            ));
            for (i, &xi) in xh.iter().enumerate() {
                for mi in 0..t.weights.len() {
                    for j in 0..t.v {
                        let a = acc[t.acc(mi, bi, j) + i % t.accs];
                        let w = wf[(mi * t.v + j) * 8 + i];
                        out.push(assign(a, fma(r(w), cast(Ty::F32, r(xi)), r(a))));
                    }
                }
            }
        }
        out
    }

    /// The first K row word of the unit (`krow0`) and every packed word of it, loaded up front
    /// (so `unit × v` loads per weight are in flight at once): `words[mi][kw][j]`.
    #[allow(clippy::type_complexity)]
    fn unit_words(
        &mut self,
        t: &Gptq,
        unit_reg: Reg,
        n0: Reg,
        out: &mut Vec<Stmt>,
    ) -> (Reg, Vec<Vec<Vec<Reg>>>) {
        let row0 = self.k.reg(Ty::U32, "krow0");
        out.push(assign(row0, mul(r(unit_reg), u(t.unit))));
        let mut words = vec![];
        for &w in &t.weights {
            let BufParams::Gptq { qweight, .. } = self.bufs[&w] else {
                unreachable!("a GPTQ weight")
            };
            let mut per_w = vec![];
            for kw in 0..t.unit {
                let row = krow(row0, kw);
                let ws: Vec<Reg> = (0..t.v).map(|_| self.k.reg(Ty::U32, "qword")).collect();
                out.push(load(
                    ws.clone(),
                    at(Base::Param(qweight), add(mul(row, u(t.n)), r(n0))),
                ));
                per_w.push(ws);
            }
            words.push(per_w);
        }
        (row0, words)
    }

    /// A whole unit with per-unit scaling, unrolled: first every packed word of the unit (so
    /// `unit × v` loads per weight are in flight at once), then per K row the activations, their
    /// running sum `X`, and one FMA `a = fma(q, x, a)` per nibble; at the end
    /// `acc = fma(s, fma(−z, X, a), acc)` per weight, batch row and column word.
    #[allow(clippy::too_many_arguments)]
    fn gptq_unit_factored(
        &mut self,
        t: &Gptq,
        unit_reg: Reg,
        n0: Reg,
        sf: &[Reg],
        zf: &[Reg],
        acc: &[Reg],
        out: &mut Vec<Stmt>,
    ) {
        let (row0, words) = self.unit_words(t, unit_reg, n0, out);
        let row = |kw: usize| krow(row0, kw);
        // Unit accumulators a[(mi, bi, j)][chain] and activation sums X[bi][chain].
        let ua = self.zeros(t.weights.len() * t.batch * t.v * t.accs, "unit_acc", out);
        let xs = self.zeros(t.batch * t.accs, "xsum", out);
        for kw in 0..t.unit {
            let mut q = vec![]; // [mi][j][i]
            for per_w in &words {
                for &word in &per_w[kw] {
                    for i in 0..8u32 {
                        let qr = self.k.reg(Ty::F32, "q");
                        out.push(assign(qr, Self::nibble(t.decode, word, i)));
                        q.push(qr);
                    }
                }
            }
            for bi in 0..t.batch {
                let xh: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "x")).collect();
                out.push(load(
                    xh.clone(),
                    at(t.xb(), add(u(bi * t.k), mul(row(kw), u(8)))),
                ));
                for (i, &xi) in xh.iter().enumerate() {
                    let xf = self.k.reg(Ty::F32, "xf");
                    out.push(assign(xf, cast(Ty::F32, r(xi))));
                    let c = (kw * 8 + i) % t.accs;
                    let xa = xs[bi * t.accs + c];
                    out.push(assign(xa, add(r(xa), r(xf))));
                    for mi in 0..t.weights.len() {
                        for j in 0..t.v {
                            let a = ua[t.acc(mi, bi, j) + c];
                            let qr = q[(mi * t.v + j) * 8 + i];
                            out.push(assign(a, fma(r(qr), r(xf), r(a))));
                        }
                    }
                }
            }
        }
        for mi in 0..t.weights.len() {
            for bi in 0..t.batch {
                let x_sum = Self::sum_accs(&xs[bi * t.accs..(bi + 1) * t.accs]);
                for j in 0..t.v {
                    let base = t.acc(mi, bi, j);
                    let a = Self::sum_accs(&ua[base..base + t.accs]);
                    let folded = fma(un(UnOp::Neg, r(zf[mi * t.v + j])), x_sum.clone(), a);
                    // The fold goes to the first chain of the kernel-wide accumulators.
                    let dst = acc[base];
                    out.push(assign(dst, fma(r(sf[mi * t.v + j]), folded, r(dst))));
                }
            }
        }
    }

    /// A whole unit with FP16 pair dot products ([`Int4Dot::Dot2`], gfx906 `v_dot2_f32_f16`):
    /// first every packed word of the unit (as [`Self::gptq_unit_factored`]), then a scheduling
    /// barrier so that hipcc issues them all before the arithmetic; then per K row word and
    /// column word four exact FP16 `q − z` pairs for the nibbles `(h, h + 4)`, by the schedule's
    /// [`MmaDecode`]: `Shift` takes `((word >> 4h) & 0x000F000F) | 0x64006400` (`1024 + q`)
    /// minus `1024 + z` (3 shifts, 4 AND-ORs, 4 pair subtractions per word); `Fma` takes pairs
    /// 0, 2 from `word` and `word >> 8` that way and pairs 1, 3 masked in place with
    /// `0x00F000F0` (`1024 + 16q`), then one `fma.f16x2` by 1/16 with `−(64 + z)` (1 shift,
    /// 4 AND-ORs, 2 subtractions, 2 FMAs). The activations of rows `h` and `h + 4` as one pair,
    /// packed per K row (shared by the lane's column words) or, with `x_in_lds`, read already
    /// packed from the workgroup's LDS stage (one 16-byte LDS read per K row and batch row);
    /// `a = dot2(pair, xpair, a)`, the products exact, f32 accumulation over the unit; at the end
    /// `acc = fma(s, a, acc)`. hipcc's hot loop for `gemv_int4` (gfx906, `tests/tests/hip.rs`):
    /// 4.5 VALU instructions per weight with `Shift`, one word per lane and per-lane activations;
    /// under 2 with `Fma`, 4 words per lane, the LDS stage and byte offsets.
    #[allow(clippy::too_many_arguments)]
    fn gptq_unit_dot2(
        &mut self,
        t: &Gptq,
        unit_reg: Reg,
        n0: Reg,
        sf: &[Reg],
        zeros: Dot2Zeros<'_>,
        acc: &[Reg],
        out: &mut Vec<Stmt>,
    ) {
        let (row0, words) = self.unit_words(t, unit_reg, n0, out);
        out.push(Stmt::SchedBarrier);
        let row = |kw: usize| krow(row0, kw);
        let ua = self.zeros(t.weights.len() * t.batch * t.v * t.accs, "unit_acc", out);
        for kw in 0..t.unit {
            let mut pairs = vec![]; // [mi][j][h]
            for (mi, per_w) in words.iter().enumerate() {
                for (j, &word) in per_w[kw].iter().enumerate() {
                    for h in 0..4u32 {
                        let pr = self.k.reg(Ty::U32, "qpair");
                        let dec = Self::dot2_pair(t.pair_decode, word, h, zeros, mi * t.v + j);
                        out.push(assign(pr, dec));
                        pairs.push(pr);
                    }
                }
            }
            for bi in 0..t.batch {
                let xps = self.dot2_x_pairs(t, unit_reg, kw, bi, row(kw), out);
                for (h, &xp) in xps.iter().enumerate() {
                    let c = (kw * 4 + h) % t.accs;
                    for mi in 0..t.weights.len() {
                        for j in 0..t.v {
                            let a = ua[t.acc(mi, bi, j) + c];
                            let pr = pairs[(mi * t.v + j) * 4 + h];
                            out.push(assign(
                                a,
                                Expr::Dot2F16(Box::new(r(pr)), Box::new(r(xp)), Box::new(r(a))),
                            ));
                        }
                    }
                }
            }
        }
        for mi in 0..t.weights.len() {
            for bi in 0..t.batch {
                for j in 0..t.v {
                    let base = t.acc(mi, bi, j);
                    let a = Self::sum_accs(&ua[base..base + t.accs]);
                    // The unit's sum goes to the first chain of the kernel-wide accumulators.
                    let dst = acc[base];
                    out.push(assign(dst, fma(r(sf[mi * t.v + j]), a, r(dst))));
                }
            }
        }
    }

    /// The FP16 pair `q − z` of nibbles `(h, h + 4)` of `word` (see [`Self::gptq_unit_dot2`]),
    /// with the zero-point registers of column word `zi`.
    fn dot2_pair(decode: MmaDecode, word: Reg, h: u32, zeros: Dot2Zeros<'_>, zi: usize) -> Expr {
        let (shift, mask, scaled) = match decode {
            MmaDecode::Shift => (4 * h, 0x000F_000F, false),
            MmaDecode::Fma => (8 * (h / 2), 0x000F_000F << (4 * (h % 2)), h % 2 == 1),
        };
        let shifted = if shift == 0 {
            r(word)
        } else {
            bin(BinOp::Shr, r(word), Expr::u32(shift))
        };
        let biased = bin(
            BinOp::Or,
            bin(BinOp::And, shifted, Expr::u32(mask)),
            Expr::u32(0x6400_6400),
        );
        if scaled {
            // 1024 + 16q times 1/16 (0x2C00 in both halves) is 64 + q; minus 64 + z: q − z.
            Expr::FmaHalf2(
                Box::new(biased),
                Box::new(Expr::u32(0x2C00_2C00)),
                Box::new(r(zeros.hi[zi])),
            )
        } else {
            Expr::SubHalf2(Box::new(biased), Box::new(r(zeros.pair[zi])))
        }
    }

    /// The four activation pairs `(x_h, x_h+4)` of batch row `bi` at the unit's K row word `kw`
    /// (absolute K row word `row`): from the LDS stage, or loaded and packed.
    fn dot2_x_pairs(
        &mut self,
        t: &Gptq,
        unit_reg: Reg,
        kw: usize,
        bi: usize,
        row: Expr,
        out: &mut Vec<Stmt>,
    ) -> Vec<Reg> {
        let xps: Vec<Reg> = (0..4).map(|_| self.k.reg(Ty::U32, "xpair")).collect();
        if let Some(xs) = &t.xs {
            let word = add(
                sub(mul(r(unit_reg), u(t.unit)), xs.begin.clone()),
                u(bi * xs.words + kw),
            );
            out.push(load(xps.clone(), self.lds_at(xs.lds, mul(word, u(4)))));
            return xps;
        }
        let xh: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "x")).collect();
        out.push(load(
            xh.clone(),
            at(t.xb(), add(t.x_row(bi), mul(row, u(8)))),
        ));
        for (h, &xp) in xps.iter().enumerate() {
            out.push(assign(
                xp,
                Expr::PackHalf2(Box::new(r(xh[h])), Box::new(r(xh[h + 4]))),
            ));
        }
        xps
    }

    /// Units per activation phase of the dot2 path (`Schedule::x_phase_units`), `None` when the
    /// whole K part is staged at once (0, or a phase of the whole part). A phase must divide the
    /// part, so that no phase stages past the part's end (a multiple of the K slices gives every
    /// slice the same units: the schedule's concern). A GEMV prologue writes its whole stage:
    /// no phases then.
    fn x_phase(&self, t: &Gptq, part_units: usize) -> Result<Option<usize>, LowerError> {
        let units = self.s.x_phase_units as usize;
        // A prologue (`t.x` is `None`) writes its whole stage at once.
        if units == 0 || units >= part_units || !t.dot2 || !self.s.x_in_lds || t.x.is_none() {
            return Ok(None);
        }
        if part_units % units != 0 {
            return Err(LowerError::Schedule(format!(
                "x_phase_units = {units} does not divide the K part's {part_units} units"
            )));
        }
        Ok(Some(units))
    }

    /// Stage this workgroup's K part of the activations in LDS (see [`XStage`]): lane `l` packs
    /// entries `l, l + wg, …` from one 16-byte load each, then a workgroup barrier. `x = None`:
    /// the GEMV prologue computes the entries instead ([`Lowering::prologue_stage`]).
    fn stage_x(
        &mut self,
        x: Option<Base>,
        kdim: usize,
        (batch, row0): (usize, Option<&Expr>),
        st: &XStage,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let Some(x) = x else {
            return self.prologue_stage(batch, st.lds, &st.begin, st.words, out);
        };
        out.push(comment(
            "activations of this K part to LDS once, in B-fragment order: entry (b, w) = (x0,x4), (x1,x5), (x2,x6), (x3,x7) of batch row b at the part's K-word w",
        ));
        let i = self.k.reg(Ty::U32, "xi");
        let xh: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "xh")).collect();
        let (row, word) = if batch == 1 {
            (u(0), r(i))
        } else {
            (div(r(i), u(st.words)), rem(r(i), u(st.words)))
        };
        // The stage holds the pass's rows; `row0` is the first's batch row (a tile's).
        let row = match (row0, batch) {
            (None, _) => row,
            (Some(r0), 1) => r0.clone(),
            (Some(r0), _) => add(r0.clone(), row),
        };
        let src = add(mul(row, u(kdim)), mul(add(st.begin.clone(), word), u(8)));
        let mut body = vec![load(xh.clone(), at(x, src))];
        let packs = (0..4)
            .map(|j| Expr::PackHalf2(Box::new(r(xh[j])), Box::new(r(xh[j + 4]))))
            .collect();
        let entry = if st.pitch == st.words {
            r(i)
        } else {
            add(
                mul(div(r(i), u(st.words)), u(st.pitch)),
                rem(r(i), u(st.words)),
            )
        };
        body.push(self.store_words(st.lds, mul(entry, u(4)), packs));
        out.push(for_loop(
            i,
            sp(Special::LocalId),
            u(batch * st.words),
            u(self.wg()),
            body,
        ));
        out.push(Stmt::WorkgroupBarrier);
        Ok(())
    }

    /// Whether a GPTQ weight comes without zero points (symmetric: z = 8).
    fn bufs_have_no_zeros(&self, w: &Buffer) -> bool {
        matches!(self.bufs[w], BufParams::Gptq { qzeros: None, .. })
    }

    fn gemv_f16(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let g = self.plan.gemv.as_ref().expect("a GEMV");
        let (kdim, n) = (g.weight.k, g.weight.n);
        let x = self.activations().expect("FP16 GEMVs stage no activations");
        let weights: Vec<_> = g.gemvs.iter().map(|&(_, w)| self.dense(w)).collect();
        let (c, wg, b, wave) = (self.cols, self.wg(), self.plan.batch, self.wave());
        let t = self.s.threads_per_column as usize;
        if t % wave != 0 || c * t != wg {
            return sched(format!(
                "FP16 GEMV: threads per column ({t}) must be a multiple of the wave ({wave}) and x {c} columns = {wg} lanes"
            ));
        }
        let vh = 2 * self.s.words_per_iteration as usize;
        if kdim % vh != 0 {
            return Err(LowerError::Unsupported(format!(
                "FP16 GEMV with K={kdim} not a multiple of {vh}"
            )));
        }
        let accs = self.s.accumulators as usize;
        self.reduction_arrays(t / wave);
        out.push(comment(format!(
            "FP16 GEMV, W stored [N, K]: {t} lanes per column read {vh} consecutive halves of one row each (coalesced), \
             reduce in the wave, then across the column's waves through LDS"
        )));
        let (cl, lk, nn) = (
            self.k.reg(Ty::U32, "col_l"),
            self.k.reg(Ty::U32, "lane_k"),
            self.k.reg(Ty::U32, "n"),
        );
        out.push(assign(cl, div(sp(Special::LocalId), u(t))));
        out.push(assign(lk, rem(sp(Special::LocalId), u(t))));
        out.push(assign(nn, add(r(self.tile0), r(cl))));
        let m = weights.len();
        let acc = self.zeros(m * b * accs, "acc", out);
        let kk = self.k.reg(Ty::U32, "k");
        let mut body = Vec::new();
        let mut wh_all = Vec::new();
        for &w in &weights {
            let wh: Vec<Reg> = (0..vh).map(|_| self.k.reg(Ty::F16, "w")).collect();
            body.push(load(
                wh.clone(),
                at(Base::Param(w), add(mul(r(nn), u(kdim)), r(kk))),
            ));
            wh_all.push(wh);
        }
        for bi in 0..b {
            let xh: Vec<Reg> = (0..vh).map(|_| self.k.reg(Ty::F16, "x")).collect();
            body.push(load(xh.clone(), at(x.clone(), add(u(bi * kdim), r(kk)))));
            for (i, &xi) in xh.iter().enumerate() {
                for (mi, wh) in wh_all.iter().enumerate() {
                    let a = acc[(mi * b + bi) * accs + i % accs];
                    let prod = fma(cast(Ty::F32, r(wh[i])), cast(Ty::F32, r(xi)), r(a));
                    body.push(assign(a, prod));
                }
            }
        }
        let k_loop = for_loop(kk, mul(r(lk), u(vh)), u(kdim), u(t * vh), body);
        when(lt(r(nn), u(n)), vec![k_loop], out);
        // Wave reductions run with every lane active (outside the column mask).
        let serial = self.s.reduction == Reduction::Serial;
        let mut sums = Vec::new();
        for mi in 0..m {
            for bi in 0..b {
                let base = (mi * b + bi) * accs;
                let sum = self.k.reg(Ty::F32, "wave_sum");
                out.push(Stmt::WaveReduce {
                    dst: sum,
                    op: ReduceKind::Sum,
                    value: Self::sum_accs(&acc[base..base + accs]),
                });
                let lane0 = eq(sp(Special::LaneId), u(0));
                if serial {
                    sums.push(SliceSums {
                        gemv: mi,
                        row: u(bi),
                        col: r(cl),
                        values: vec![r(sum)],
                        guard: Some(lane0),
                    });
                    continue;
                }
                let wave_in_col = div(r(lk), u(wave));
                let idx = add(mul(add(mul(wave_in_col, u(b)), u(bi)), u(c)), r(cl));
                let st = store(self.lds_at(self.red[mi], idx), vec![r(sum)]);
                when(lane0, vec![st], out);
            }
        }
        if serial {
            self.serial_slice_sums(div(r(lk), u(wave)), &sums, out);
            return Ok(());
        }
        out.push(Stmt::WorkgroupBarrier);
        Ok(())
    }
}
