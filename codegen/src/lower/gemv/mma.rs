//! The tensor-core GPTQ INT4 GEMV ([`Int4Dot::Mma`](super::super::schedule::Int4Dot::Mma),
//! sm_90): the INT4 → FP16 decode in registers feeding `mma.m16n8k16`, the scale per unit in f32.

use wavefuse_ir::{Buffer, GptqLayout, ZeroPoint};

use crate::lowered::{Base, BinOp, Expr, Reg, Special, Stmt, Ty};

use super::super::LowerError;
use super::super::build::*;
use super::super::lowering::{BufParams, Lowering};
use super::super::schedule::{MmaDecode, MmaScale};
use super::{XStage, sched};

/// The tensor-core tiling of one GPTQ GEMV kernel (see `gemv_gptq_mma`).
struct MmaTiling {
    l: GptqLayout,
    kdim: usize,
    n: usize,
    batch: usize,
    /// N tiles of the MMA: batch rows `8j .. 8j + 8` are tile `j`'s B columns and D columns.
    ntiles: usize,
    /// The pass's first batch row with batch tiles ([`Schedule::batch_tile`]; `batch` is then
    /// the tile's rows), `None` for one pass over every row.
    ///
    /// [`Schedule::batch_tile`]: super::super::Schedule::batch_tile
    row0: Option<Expr>,
    /// K words per unit (a multiple of 4) and units per group.
    unit: usize,
    upg: usize,
    /// MMA steps (4 K-words each) per unit.
    steps: usize,
    /// The activations (`None`: a prologue computes them straight into the LDS stage).
    x: Option<Base>,
    n0: Reg,
    quad: Reg,
    tq: Reg,
    weights: Vec<Buffer>,
    /// The activations staged in LDS ([`Schedule::x_in_lds`](super::super::Schedule::x_in_lds)).
    xs: Option<XStage>,
    /// The asynchronous weight ring ([`Schedule::async_stages`](super::super::Schedule::async_stages)).
    ring: Option<Ring>,
    /// The phased activation stage is a ring too (`async_stages` with `x_phase_units`): `xs`
    /// is a u32 array of `stages` phase buffers in B-fragment order (`batch · pitch` entries
    /// each), stored a phase after their loads, the buffer read the ring's slot (see
    /// `mma_phases_async`).
    x_async: bool,
    /// K warps: a warp's units are this many apart.
    kwarps: usize,
    /// The exclusive bound of the K part's units.
    end: Expr,
}

/// One weight's operands of a unit in global memory ([`Lowering::unit_sources`]).
struct UnitSources {
    scales: crate::lowered::MemRef,
    zero: Option<crate::lowered::MemRef>,
    words: Vec<crate::lowered::MemRef>,
}

/// The LDS ring of [`Schedule::async_stages`](super::super::Schedule::async_stages) unit
/// buffers per warp that asynchronous copies fill ahead of the unit a warp computes. Lane `l`
/// of warp `w` owns, in slot `s`, the 16 bytes of every step's packed words, its 4 scales and
/// its zero word at `((s · warps + w) · m + mi) ·` (entries per weight) `+ l ·` (entry width):
/// it copies them and it alone reads them back, so the lane's own `AsyncWait` orders its reads
/// after the copies (§5.2) and no barrier is needed.
struct Ring {
    stages: usize,
    warps: usize,
    kwarps: usize,
    /// `steps · 128` 32-bit words per weight and slot: a u32 array of its own, or the first
    /// weight's f32 cross-slice sums where they are large enough (`shared`: the sums are
    /// written only after the main loop, behind a workgroup barrier).
    words: crate::lowered::Lds,
    shared: bool,
    /// `128` F16 per weight and slot.
    scales: crate::lowered::Lds,
    /// `32` u32 per weight and slot (a weight with zero points).
    zeros: Option<crate::lowered::Lds>,
    /// The slot the warp reads next (its units' sequence number mod `stages`).
    slot: Reg,
    /// Scales and zero words copied once per quad (and quad pair) instead of by every lane:
    /// only where a workgroup barrier follows each wait (`MmaTiling::x_async`), so that the
    /// other lanes' reads of them are ordered after the copies (§5.2).
    by_quad: bool,
    /// The exclusive bound of the K part's units.
    end: Expr,
}

/// The registers one unit's loads fill: per weight the 4 scales, the zero word and
/// `[step][4]` packed words; per step and N tile the 8 activations (`xs[step · ntiles + j]`).
struct MmaBuf {
    scales: Vec<Vec<Reg>>,
    zero_words: Vec<Reg>,
    words: Vec<Vec<Vec<Reg>>>,
    xs: Vec<Vec<Reg>>,
}

impl Lowering<'_> {
    /// The tensor-core GPTQ GEMV ([`Int4Dot::Mma`](super::super::schedule::Int4Dot::Mma)).
    /// Warp `w` of the workgroup covers the columns `tile0 + 32·(w mod cw) ..+32` (`cw = C / 32`
    /// column warps) and K slice `w / cw`; lane `l` (quad `g = l / 4`, `t = l % 4`) loads the 4
    /// adjacent packed words of columns `n0 = … + 4g ..+4` at K-word `unit·U + 4·step + t` (one
    /// 16-byte load) and, per N tile `j`, the 8 activations of batch row `8j + g` at the same K
    /// rows. MMA `(p, h)` (column pair p, nibble half h) takes rows `g ↔ column n0 + 2p` and
    /// `g + 8 ↔ n0 + 2p + 1`; its k slots `(2t, 2t+1, 2t+8, 2t+9)` hold nibbles
    /// `(2h, 2h+4, 2h+1, 2h+5)` of the lane's word — any permutation of k is correct as long as A
    /// and B use the same one, and this one is what `(word >> 4i) & 0x000F000F` yields — and B
    /// holds the activations of those rows.
    ///
    /// The batch is the MMA's N in `ceil(batch / 8)` tiles (the GEMV → GEMM switch, issue 40):
    /// the A fragment is decoded once per unit and feeds every tile's MMA, so the decode (the
    /// ALU work per weight) does not grow with the batch; each tile has its own B fragments, unit
    /// sums and totals (D column `2t + i % 2` is batch row `8j + 2t + i % 2`). The f32
    /// accumulators, `8 · weights · tiles` totals per lane and as many unit sums with the scale per unit, bound the batch ([`mma_takes`]).
    pub(super) fn gemv_gptq_mma(
        &mut self,
        l: GptqLayout,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let (kdim, n, group) = self.gptq_shape(l)?;
        let g = self.plan.gemv.as_ref().expect("a GEMV");
        let batch = self.plan.batch;
        let (c, wg, wpg) = (self.cols, self.wg(), group / 8);
        let unit = self.s.k_unit_words as usize;
        if self.wave() != 32 {
            return sched(format!(
                "INT4 mma needs 32-lane waves ({} has {})",
                self.k.arch,
                self.wave()
            ));
        }
        // Name only the conditions that fail.
        let failed: Vec<String> = [
            (self.s.words_per_iteration != 4).then(|| {
                format!(
                    "words_per_iteration = 4 (not {})",
                    self.s.words_per_iteration
                )
            }),
            (c % 32 != 0).then(|| format!("columns_per_workgroup a multiple of 32 (not {c})")),
            (unit == 0 || unit % 4 != 0 || wpg % unit != 0).then(|| {
                format!(
                    "k_unit_words a multiple of 4 dividing the group's {wpg} K-words (not {unit})"
                )
            }),
            (batch > MMA_MAX_BATCH).then(|| {
                format!(
                    "batch <= {MMA_MAX_BATCH} (not {batch}; {MMA_MAX_BATCH} is 8 N tiles of 8 rows)"
                )
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !failed.is_empty() {
            return sched(format!("INT4 mma needs {}", failed.join(", ")));
        }
        let (cw, warps) = (c / 32, wg / 32);
        if warps % cw != 0 || (warps / cw) != self.s.threads_per_column as usize {
            return sched(format!(
                "INT4 mma: {wg} lanes = threads per column ({}) x columns ({c}) does not hold",
                self.s.threads_per_column
            ));
        }
        let kwarps = warps / cw;
        let x = self.activations();
        let weights: Vec<Buffer> = g.gemvs.iter().map(|&(_, w)| w).collect();
        let m = weights.len();
        // Batch tiles (`Schedule::batch_tile`): the rows in passes of `rows`, each with its own
        // accumulators (the registers of a batch of `rows`), the weights read once per pass.
        let tile_rows = match self.s.batch_tile as usize {
            rows if rows > 0 && rows < batch => Some(rows),
            _ => None,
        };
        if let Some(rows) = tile_rows {
            let failed: Vec<String> = [
                (rows % 8 != 0).then(|| format!("batch_tile a multiple of 8 (not {rows})")),
                self.s.x_in_lds.then(|| "x_in_lds = false".to_owned()),
                (self.s.x_phase_units > 0).then(|| "x_phase_units = 0".to_owned()),
                (self.s.async_stages > 0).then(|| "async_stages = 0".to_owned()),
                x.is_none()
                    .then(|| "activations loaded, not a GEMV prologue".to_owned()),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !failed.is_empty() {
                return sched(format!(
                    "INT4 mma with batch_tile = {rows} (each pass loads its rows' activations itself) needs {}",
                    failed.join(", ")
                ));
            }
        }
        let rows = tile_rows.unwrap_or(batch);
        let ntiles = rows.div_ceil(8);
        let accumulators = mma_accumulators(m, rows, self.s.mma_scale);
        if accumulators > MMA_MAX_ACCUMULATORS {
            return sched(format!(
                "INT4 mma at batch {batch} with {m} weights keeps {accumulators} f32 accumulators per lane \
                 (unit sums and totals of {ntiles} N tiles), more than the {MMA_MAX_ACCUMULATORS} of \
                 {}'s 255 registers per lane it may take",
                self.k.arch
            ));
        }
        self.reduction_arrays(kwarps);
        let (upg, steps) = (wpg / unit, unit / 4);
        let scaled = match self.s.mma_scale {
            MmaScale::Unit => "mma.m16n8k16 with f32 accumulation, the scale per unit in f32",
            MmaScale::Weight => {
                "times the scale in FP16 (one fma.f16x2, rounded once), mma.m16n8k16 with f32 accumulation straight into the totals"
            }
        };
        let xs_from = if self.s.x_in_lds {
            "takes batch row g's 8 activations there from LDS"
        } else {
            "loads batch row g's 8 activations there"
        };
        out.push(comment(format!(
            "GPTQ INT4 GEMV on the tensor cores: warp w covers 32 columns (column warp w % {cw}) and K slice w / {cw} of {kwarps}, \
             units of {unit} K-words round robin; lane quad g = lane / 4 loads 4 packed columns n0..n0+3 at K-word 4*step + lane % 4 \
             (16 bytes) and {xs_from}; q - z exact in FP16 (0x6400 | q is 1024 + q), {scaled}"
        )));
        if ntiles > 1 {
            out.push(comment(format!(
                "batch {batch} as {ntiles} N tiles of 8 rows: each A fragment (the decoded weights) feeds the MMA of every tile, \
                 tile j's B fragments hold batch rows 8j..8j+7 (past the batch: zero), its D fragments those rows' sums"
            )));
        }
        let [cwarp, kwarp, quad, tq, n0] =
            ["cwarp", "kwarp", "quad", "tq", "n0"].map(|h| self.k.reg(Ty::U32, h));
        out.push(assign(cwarp, rem(sp(Special::WaveId), u(cw))));
        out.push(assign(kwarp, div(sp(Special::WaveId), u(cw))));
        out.push(assign(quad, div(sp(Special::LaneId), u(4))));
        out.push(assign(tq, rem(sp(Special::LaneId), u(4))));
        out.push(assign(
            n0,
            add(r(self.tile0), add(mul(r(cwarp), u(32)), mul(r(quad), u(4)))),
        ));
        // totals[(mi · ntiles + j) · 8 + 4p + i]: D fragment slot i of column pair p, N tile j.
        // (Batch tiles zero their own per pass.)
        let totals = match tile_rows {
            None => self.zeros(m * 8 * ntiles, "acc", out),
            Some(_) => vec![],
        };
        let (begin, units) = self.split_units(kdim / group * upg)?;
        // The activations' staging; with two units in flight the first unit's weight loads
        // (which read no LDS) are issued before it, so their latency overlaps the staging's.
        // In phases (`x_phase_units`) the stage holds one phase's units and is filled in the
        // phase loop below instead.
        let part_units = kdim / group * upg / self.s.k_split.max(1) as usize;
        let phase = self.mma_phase(part_units, kwarps, x.is_some())?;
        let ph_reg = phase.map(|_| self.k.reg(Ty::U32, "phase"));
        let mut staging = vec![];
        // With the weight ring, a phased stage becomes a ring of phase buffers, loaded with
        // the weights' asynchronous groups (one per phase: a unit per K warp).
        let x_async = phase.is_some() && self.s.async_stages > 0;
        if let (true, Some(p)) = (x_async, phase)
            && p != kwarps
        {
            return sched(format!(
                "INT4 mma: async_stages = {} with x_phase_units = {p} needs one unit per K warp per phase (x_phase_units = {kwarps}): each phase is one asynchronous group of the stage and the weights' ring",
                self.s.async_stages
            ));
        }
        let mut stage_shared = false;
        let xs = if self.s.x_in_lds {
            let words = phase.unwrap_or(part_units) * unit;
            let pitch = if phase.is_some() {
                stage_pitch(words)
            } else {
                words
            };
            let lds = if x_async {
                let stages = self.s.async_stages as usize;
                self.k.lds(Ty::U32, stages * batch * pitch * 4)
            } else if let Some(sums) = phase.and(self.red.first().copied()).filter(|_| {
                self.k.lds_bytes() + batch * pitch * 16
                    > self.k.arch.max_static_lds_per_workgroup() as usize
            }) {
                // Where the two do not fit side by side, the phased stage in the first weight's
                // cross-slice sums (4-byte words both, the array as long as the longer): the
                // sums are written only after the phase loop, behind a workgroup barrier
                // (`stage_shared` below), so the LDS is the larger of the two, not their sum.
                // (Where they fit, the kernels stay as measured.)
                let len = &mut self.k.lds[sums].len;
                *len = (*len).max(batch * pitch * 4);
                stage_shared = true;
                sums
            } else {
                self.k.lds(Ty::U32, batch * pitch * 4)
            };
            let stage = XStage {
                lds,
                // A stripe's whole-part stage is the whole K (its segments' units are any of
                // the tile's), staged from K-word 0.
                begin: match ph_reg {
                    Some(ph) => mul(r(ph), u(unit)),
                    None if self.striped() => u(0),
                    None => mul(begin.clone(), u(unit)),
                },
                words,
                pitch,
            };
            if phase.is_none() {
                self.stage_x(x.clone(), kdim, (batch, None), &stage, &mut staging)?;
            }
            Some(stage)
        } else {
            None
        };
        let ring = match self.s.async_stages as usize {
            0 => None,
            stages => {
                if self.s.pipeline_depth != 1 {
                    return sched(format!(
                        "INT4 mma: async_stages = {stages} needs pipeline_depth = 1 (not {}): the ring is the pipeline",
                        self.s.pipeline_depth
                    ));
                }
                let per = stages * warps * m;
                let by_quad = x_async;
                let (scales_per, zeros_per) = if by_quad { (32, 4) } else { (128, 32) };
                let zeros = (l.zero != ZeroPoint::Symmetric
                    && !weights.iter().all(|w| self.bufs_have_no_zeros(w)))
                .then(|| self.k.lds(Ty::U32, per * zeros_per));
                let need = per * (unit / 4) * 128;
                let shared = self
                    .red
                    .first()
                    .copied()
                    .filter(|&l| !stage_shared && self.k.lds[l].len >= need);
                Some(Ring {
                    stages,
                    warps,
                    kwarps,
                    words: shared.unwrap_or_else(|| self.k.lds(Ty::U32, need)),
                    shared: shared.is_some(),
                    scales: self.k.lds(Ty::F16, per * scales_per),
                    zeros,
                    slot: self.k.reg(Ty::U32, "ring_slot"),
                    by_quad,
                    end: units.clone(),
                })
            }
        };
        let t = MmaTiling {
            l,
            kdim,
            n,
            batch: rows,
            ntiles,
            row0: None,
            unit,
            upg,
            steps,
            x,
            n0,
            quad,
            tq,
            weights,
            xs,
            ring,
            x_async,
            kwarps,
            end: units.clone(),
        };
        if self.s.l2_prefetch_units > 0 && t.ring.is_some() {
            return sched(format!(
                "INT4 mma: l2_prefetch_units = {} needs register loads (async_stages = 0, not {}): the ring copies its units ahead itself",
                self.s.l2_prefetch_units, self.s.async_stages
            ));
        }
        let un_reg = self.k.reg(Ty::U32, if upg == 1 { "group" } else { "unit" });
        if let Some(rows) = tile_rows {
            // Batch tiles: refused above with a stage, phases or the ring, so each pass is the
            // unstaged K loop of `rows` rows; its sums go to the cross-slice reduction's rows
            // of the pass (the reduction holds every row), added after the last pass.
            let (full, rest) = (batch / rows, batch % rows);
            out.push(comment(format!(
                "batch tiles (batch_tile = {rows}): rows [tile*{rows}, tile*{rows} + {rows}) of {batch} per pass, each with its own accumulators over the whole K part (the weights read once per pass){}",
                if rest > 0 {
                    format!(", then the last {rest} row(s)")
                } else {
                    String::new()
                }
            )));
            self.k.weight_passes = (full + usize::from(rest > 0)) as u32;
            let tile_reg = self.k.reg(Ty::U32, "batch_tile");
            let mut body = vec![];
            let pass = |me: &mut Self, t: &MmaTiling, out: &mut Vec<Stmt>| {
                let totals = me.zeros(m * 8 * t.ntiles, "acc", out);
                me.mma_unphased(
                    t,
                    kwarp,
                    (begin.clone(), units.clone()),
                    un_reg,
                    &totals,
                    out,
                    vec![],
                )?;
                me.mma_sums_to_lds((cwarp, kwarp, c, batch), t, &totals, out);
                Ok::<(), LowerError>(())
            };
            let tiled = MmaTiling {
                row0: Some(mul(r(tile_reg), u(rows))),
                ..t
            };
            pass(self, &tiled, &mut body)?;
            out.push(for_loop(tile_reg, u(0), u(full), u(1), body));
            if rest > 0 {
                let last = MmaTiling {
                    batch: rest,
                    ntiles: rest.div_ceil(8),
                    row0: Some(u(full * rows)),
                    ..tiled
                };
                pass(self, &last, out)?;
            }
            out.push(Stmt::WorkgroupBarrier);
            return Ok(());
        }
        match (self.s.pipeline_depth, phase.zip(ph_reg)) {
            (1, Some((p, ph))) if t.x_async => {
                self.mma_phases_async(&t, (p, ph, kwarp), (begin, units), un_reg, &totals, out);
            }
            (1, Some((p, ph))) => {
                // The part in phases of `p` units (`Schedule::x_phase_units`), `p / kwarps` per
                // K warp: each warp's first unit of the phase is loaded (no LDS read) before the
                // phase's activations are staged, so that load's latency overlaps the staging.
                // Both workgroup barriers are outside any lane condition (§5.8: the phase bounds
                // are the workgroup's, every K warp has the same units); the first keeps the last
                // phase's LDS reads before the overwrite, the second (in `stage_x`) the stage's
                // writes before any read (§5.2).
                out.push(comment(format!(
                    "the K part in phases of {p} units: each K warp's first unit of the phase is loaded, then the phase's activations staged in LDS"
                )));
                let buf = self.mma_buffers(&t);
                let first = self.k.reg(Ty::U32, "phase_unit");
                out.extend(self.ring_prologue(&t, add(begin.clone(), r(kwarp))));
                let mut body = vec![assign(first, add(r(ph), r(kwarp)))];
                body.extend(self.mma_unit_loads(&t, &buf, first));
                body.push(comment(
                    "every lane is done reading the last phase's activations before they are overwritten",
                ));
                body.push(Stmt::WorkgroupBarrier);
                let stage = t.xs.as_ref().expect("phases stage the activations");
                self.stage_x(t.x.clone(), kdim, (batch, None), stage, &mut body)?;
                body.extend(self.mma_compute(&t, &buf, first, &totals));
                if p > kwarps {
                    let mut rest = self.mma_unit_loads(&t, &buf, un_reg);
                    rest.extend(self.mma_compute(&t, &buf, un_reg, &totals));
                    body.push(for_loop(
                        un_reg,
                        add(r(first), u(kwarps)),
                        add(r(ph), u(p)),
                        u(kwarps),
                        rest,
                    ));
                }
                out.push(for_loop(ph, begin, units, u(p), body));
            }
            (2, _) if t.ring.is_some() => unreachable!("refused above"),
            (2, Some((p, ph))) => {
                let phases = part_units / p;
                if p != kwarps || phases % 2 != 0 {
                    return sched(format!(
                        "INT4 mma: x_phase_units = {p} at pipeline_depth = 2 needs one unit per K warp per phase (x_phase_units = {kwarps}) and an even count of phases (the part has {part_units} units: {phases})"
                    ));
                }
                self.mma_phases_pipelined(&t, (p, ph, kwarp), (begin, units), un_reg, &totals, out);
            }
            (d, Some(_)) => {
                return sched(format!(
                    "INT4 mma: x_phase_units = {} needs pipeline_depth = 1 or 2 (not {d})",
                    self.s.x_phase_units
                ));
            }
            (1 | 2, None) => {
                out.extend(self.ring_prologue(&t, add(begin.clone(), r(kwarp))));
                self.mma_unphased(&t, kwarp, (begin, units), un_reg, &totals, out, staging)?;
            }
            (d, None) => {
                return sched(format!("INT4 mma: pipeline depth {d} (1 or 2)"));
            }
        }

        if t.ring.as_ref().is_some_and(|ring| ring.shared) {
            out.push(comment(
                "§5.2: every warp is done reading its ring slots before the sums overwrite them (the ring shares their LDS)",
            ));
            out.push(Stmt::WorkgroupBarrier);
        } else if stage_shared {
            out.push(comment(
                "§5.2: every lane is done reading the last phase's activations before the sums overwrite them (the stage shares their LDS)",
            ));
            out.push(Stmt::WorkgroupBarrier);
        }
        self.mma_sums_to_lds((cwarp, kwarp, c, batch), &t, &totals, out);
        out.push(Stmt::WorkgroupBarrier);
        Ok(())
    }

    /// The K loop of a GEMV without a phased stage (`x_phase_units` 0): one unit per iteration
    /// at pipeline depth 1 (its loads, or the ring's copies ahead and its reads, then its
    /// MMAs), or two units in flight at depth 2; `staging` (the whole part's activations, if
    /// staged) before it. The ring's prologue, if any, is the caller's.
    #[allow(clippy::too_many_arguments)]
    fn mma_unphased(
        &mut self,
        t: &MmaTiling,
        kwarp: Reg,
        (begin, units): (Expr, Expr),
        un_reg: Reg,
        totals: &[Reg],
        out: &mut Vec<Stmt>,
        mut staging: Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let kwarps = t.kwarps;
        match self.s.pipeline_depth {
            1 => {
                // The ring's first copies are issued before the activations' staging, so their
                // latency overlaps it.
                out.append(&mut staging);
                let buf = self.mma_buffers(t);
                let mut body = self.mma_unit_loads(t, &buf, un_reg);
                body.extend(self.mma_compute(t, &buf, un_reg, totals));
                let start = add(begin, r(kwarp));
                out.push(for_loop(un_reg, start, units, u(kwarps), body));
            }
            2 => {
                // Software pipelining: unit u + kwarps's loads are in flight while unit u
                // computes. Every condition is warp-uniform (kwarp is), so the MMAs under them
                // run with the whole warp.
                out.push(comment(if t.xs.is_some() {
                    "pipelined: the next unit's loads are issued before this unit's MMAs, the first unit's before the activations' staging"
                } else {
                    "pipelined: the next unit's loads are issued before this unit's MMAs"
                }));
                let (b0, b1) = (self.mma_buffers(t), self.mma_buffers(t));
                let u1 = self.k.reg(Ty::U32, "next_unit");
                let u2 = self.k.reg(Ty::U32, "after_next");
                out.push(assign(u1, add(begin.clone(), r(kwarp))));
                let first = self.mma_loads(t, &b0, u1);
                when(lt(r(u1), units.clone()), first, out);
                out.append(&mut staging);
                let mut body = vec![assign(u1, add(r(un_reg), u(kwarps)))];
                let next = self.mma_loads(t, &b1, u1);
                when(lt(r(u1), units.clone()), next, &mut body);
                body.extend(self.mma_compute(t, &b0, un_reg, totals));
                body.push(assign(u2, add(r(un_reg), u(2 * kwarps))));
                let after = self.mma_loads(t, &b0, u2);
                when(lt(r(u2), units.clone()), after, &mut body);
                let second = self.mma_compute(t, &b1, u1, totals);
                when(lt(r(u1), units.clone()), second, &mut body);
                let start = add(begin, r(kwarp));
                out.push(for_loop(un_reg, start, units, u(2 * kwarps), body));
            }
            d => return sched(format!("INT4 mma: pipeline depth {d} (1 or 2)")),
        }
        Ok(())
    }

    /// The cross-slice reduction's stores: each K warp's D fragments (`totals`) to the LDS sums
    /// of its weight, batch rows `row0 + 8j + 2t + i % 2` of the pass (those inside it), at
    /// `(kwarp · batch + row) · c + column` (`batch` every row of the GEMV: the epilogue adds
    /// the K warps' sums of every row after the workgroup barrier that follows).
    fn mma_sums_to_lds(
        &mut self,
        (cwarp, kwarp, c, batch): (Reg, Reg, usize, usize),
        t: &MmaTiling,
        totals: &[Reg],
        out: &mut Vec<Stmt>,
    ) {
        let (tq, quad) = (t.tq, t.quad);
        out.push(comment("cross-slice reduction: each K slice's sums to LDS (batch rows 2t, 2t+1 of the D fragment), added in slice order after the barrier"));
        for mi in 0..t.weights.len() {
            for j in 0..t.ntiles {
                for p in 0..2 {
                    for i in 0..4 {
                        let row = add(mul(r(tq), u(2)), u(i % 2));
                        let b = if j == 0 { row } else { add(u(8 * j), row) };
                        let at_row = match &t.row0 {
                            Some(row0) => add(row0.clone(), b.clone()),
                            None => b.clone(),
                        };
                        let col = add(
                            mul(r(cwarp), u(32)),
                            add(mul(r(quad), u(4)), u(2 * p + i / 2)),
                        );
                        let idx = add(mul(add(mul(r(kwarp), u(batch)), at_row), u(c)), col);
                        let st = store(
                            self.lds_at(self.red[mi], idx),
                            vec![r(totals[(mi * t.ntiles + j) * 8 + p * 4 + i])],
                        );
                        when(lt(b, u(t.batch)), vec![st], out);
                    }
                }
            }
        }
    }

    /// The phased stage at pipeline depth 2 (`x_phase_units` = the K warps, an even count of
    /// phases): while a phase computes, the next phase's activations are loaded into registers
    /// and each K warp's unit of it into the other load buffer, so neither load's latency is
    /// waited for at the phase's barriers; two phases per loop iteration (the buffers alternate).
    /// The barriers are the phased stage's (§5.2: the last phase's reads done before the stage
    /// is overwritten, the stage written before it is read), unconditional: the phase count is
    /// even, so both phases of an iteration exist (§5.8); only the loads of the phase after are
    /// guarded, by a workgroup-uniform bound.
    fn mma_phases_pipelined(
        &mut self,
        t: &MmaTiling,
        (p, ph, kwarp): (usize, Reg, Reg),
        (begin, end): (Expr, Expr),
        un_reg: Reg,
        totals: &[Reg],
        out: &mut Vec<Stmt>,
    ) {
        let stage = t.xs.as_ref().expect("phases stage the activations");
        let (b0, b1) = (self.mma_buffers(t), self.mma_buffers(t));
        let x = t.x.clone().expect("a loaded activation");
        let entries = t.batch * stage.words;
        let per_lane = entries.div_ceil(self.wg());
        let xr: Vec<Vec<Reg>> = (0..per_lane)
            .map(|_| (0..8).map(|_| self.k.reg(Ty::F16, "xpre")).collect())
            .collect();
        out.push(comment(format!(
            "the K part in phases of {p} units, pipelined: the next phase's activations ({per_lane} x 16 bytes per lane) and each K warp's unit of it are loaded while this phase computes"
        )));
        let nu = self.k.reg(Ty::U32, "next_unit");
        out.push(assign(ph, begin.clone()));
        out.push(assign(nu, add(r(ph), r(kwarp))));
        out.extend(self.mma_loads(t, &b0, nu));
        out.extend(self.x_phase_load(&x, t, &xr, r(ph)));
        // `ph` is the phase being computed (the stage's first unit, `XStage::begin`); the loop
        // steps two phases at a time in `pair`.
        let pair = self.k.reg(Ty::U32, "phase_pair");
        let mut body = vec![];
        for (half, (cur, next)) in [(&b0, &b1), (&b1, &b0)].into_iter().enumerate() {
            body.push(assign(
                ph,
                if half == 0 {
                    r(pair)
                } else {
                    add(r(pair), u(p))
                },
            ));
            let this = r(ph);
            body.push(comment(
                "every lane is done reading the last phase's activations before they are overwritten",
            ));
            body.push(Stmt::WorkgroupBarrier);
            body.extend(self.x_phase_store(t, &xr, None));
            body.push(comment(
                "the phase's activations are in LDS before any lane reads them",
            ));
            body.push(Stmt::WorkgroupBarrier);
            let after = add(this.clone(), u(p));
            let mut pre = vec![assign(nu, add(after.clone(), r(kwarp)))];
            pre.extend(self.mma_loads(t, next, nu));
            pre.extend(self.x_phase_load(&x, t, &xr, after.clone()));
            when(lt(after, end.clone()), pre, &mut body);
            body.push(assign(un_reg, add(this, r(kwarp))));
            body.extend(self.mma_compute(t, cur, un_reg, totals));
        }
        out.push(for_loop(pair, begin, end, u(2 * p), body));
    }

    /// The phased stage and the weights both through rings of `stages` buffers (`async_stages`
    /// with `x_phase_units` = the K warps), `stages − 1` phases ahead: phase `i`'s weights (each
    /// lane its own operands, as [`Lowering::ring_copies`]) are one `cp.async` group into buffer
    /// `i mod stages`; its activations are loaded into registers with that group (every lane
    /// its share of the stage, 16 bytes each) and stored into buffer `i mod stages` in
    /// B-fragment order one phase later, at the top of the next phase (the loads' latency is
    /// covered by a phase's MMAs, and no lane packs pairs after its LDS reads). Per phase, one
    /// wait and one workgroup barrier (§5.2): the wait completes this lane's copies of the
    /// phase, the barrier makes every lane's copies and stores of it visible to all and keeps
    /// every lane's reads of the buffer the next copies overwrite (the previous phase's) before
    /// them. The stores at the top of phase `i` go to buffer `(i + stages − 2) mod stages`,
    /// last read in phase `i − 2` (before phase `i − 1`'s barrier) and next read in phase
    /// `i + stages − 2 ≥ i` (after its barrier); not the buffer phase `i − 1` may still be
    /// reading (`stages ≥ 2`). Both the wait and the barrier are outside any lane condition
    /// (§5.8: the phase bounds are the workgroup's); the copies past the part are skipped by a
    /// workgroup-uniform bound, their (empty) groups still committed so the count holds.
    fn mma_phases_async(
        &mut self,
        t: &MmaTiling,
        (p, ph, kwarp): (usize, Reg, Reg),
        (begin, end): (Expr, Expr),
        un_reg: Reg,
        totals: &[Reg],
        out: &mut Vec<Stmt>,
    ) {
        let ring = t.ring.as_ref().expect("the weights' ring");
        let (stages, slot) = (ring.stages, ring.slot);
        let buf = self.mma_buffers(t);
        let x = t.x.clone().expect("a loaded activation");
        let stage = t.xs.as_ref().expect("phases stage the activations");
        let per_lane = (t.batch * stage.words).div_ceil(self.wg());
        let xr: Vec<Vec<Reg>> = (0..per_lane)
            .map(|_| (0..8).map(|_| self.k.reg(Ty::F16, "xpre")).collect())
            .collect();
        let (copy_ph, copy_unit) = (
            self.k.reg(Ty::U32, "copy_phase"),
            self.k.reg(Ty::U32, "copy_unit"),
        );
        out.push(comment(format!(
            "the K part in phases of {p} units through rings of {stages} buffers, {} phases ahead: the weights by asynchronous copies (one group per phase), the activations loaded into registers ({per_lane} x 16 bytes per lane) and stored in B-fragment order a phase later; one wait and one barrier per phase",
            stages - 1
        )));
        out.push(assign(slot, u(0)));
        // The phase's weight copies (a group) and activation loads; in the prologue the loads
        // are stored at once (`store`: their buffer).
        let copies = |me: &mut Self, phase: Expr, dst: Expr, store: bool, out: &mut Vec<Stmt>| {
            out.push(assign(copy_ph, phase));
            let mut body = me.x_phase_load(&x, t, &xr, r(copy_ph));
            body.push(assign(copy_unit, add(r(copy_ph), r(kwarp))));
            let w = me.ring_copies(t, copy_unit, dst.clone());
            when(lt(r(t.n0), u(t.n)), w, &mut body);
            if store {
                body.extend(me.x_phase_store(t, &xr, Some(dst)));
            }
            when(lt(r(copy_ph), end.clone()), body, out);
            out.push(Stmt::AsyncCommit);
        };
        for s in 0..stages - 1 {
            copies(self, add(begin.clone(), u(s * p)), u(s), true, out);
        }
        // Phase `ph + back·p` was loaded a phase ago; its buffer is `(slot + back) mod stages`
        // (`slot` is phase `ph`'s), i.e. `slot − 2` modulo the ring.
        let back = stages - 2;
        let store_slot = if back == 0 {
            r(slot)
        } else {
            sel(lt(r(slot), u(2)), add(r(slot), u(back)), sub(r(slot), u(2)))
        };
        let mut body = vec![comment(format!(
            "the activations loaded a phase ago (phase + {back}) into their buffer, which no lane reads before this phase's barrier"
        ))];
        let stores = self.x_phase_store(t, &xr, Some(store_slot));
        when(
            and(
                ne(r(ph), begin.clone()),
                lt(add(r(ph), u(back * p)), end.clone()),
            ),
            stores,
            &mut body,
        );
        body.extend([
            comment(format!(
                "§5.2: this lane's copies of this phase (its group, {} groups ago) are complete",
                stages - 1
            )),
            Stmt::AsyncWait {
                pending: (stages - 2) as u32,
            },
            comment(
                "§5.2: every lane's copies and stores of this phase are visible to all, and every lane is done reading the buffer the next copies overwrite (the last phase's)",
            ),
            Stmt::WorkgroupBarrier,
        ]);
        let write = sel(eq(r(slot), u(0)), u(stages - 1), sub(r(slot), u(1)));
        copies(
            self,
            add(r(ph), u((stages - 1) * p)),
            write,
            false,
            &mut body,
        );
        body.push(assign(un_reg, add(r(ph), r(kwarp))));
        body.extend(self.ring_reads(t, &buf));
        body.extend(self.mma_compute(t, &buf, un_reg, totals));
        let next = add(r(slot), u(1));
        body.push(assign(slot, sel(eq(next.clone(), u(stages)), u(0), next)));
        out.push(for_loop(ph, begin, end, u(p), body));
    }

    /// One statement per entry of a phase's stage (batch row `i / words`, K-word `i mod words`):
    /// entry `i` is lane `i mod wg`'s `j`-th, `j = i / wg`, guarded where the last round of
    /// lanes runs past the entries.
    fn per_stage_entry(
        &mut self,
        t: &MmaTiling,
        mut stmt: impl FnMut(&mut Self, usize, Expr, Expr) -> Stmt,
    ) -> Vec<Stmt> {
        let words = t.xs.as_ref().expect("staged").words;
        let (entries, wg) = (t.batch * words, self.wg());
        let mut out = vec![];
        for j in 0..entries.div_ceil(wg) {
            let i = add(sp(Special::LocalId), u(j * wg));
            let (row, word) = (div(i.clone(), u(words)), rem(i.clone(), u(words)));
            let st = stmt(self, j, row, word);
            if (j + 1) * wg <= entries {
                out.push(st);
            } else {
                when(lt(i, u(entries)), vec![st], &mut out);
            }
        }
        out
    }

    /// The activations of the phase starting at unit `first` into `xr`: entry `i` (batch row
    /// `i / words`, the phase's K-word `i mod words`) of lane `l` is `l + j·wg` for `xr[j]`, one
    /// 16-byte load each (none past the entries).
    fn x_phase_load(&mut self, x: &Base, t: &MmaTiling, xr: &[Vec<Reg>], first: Expr) -> Vec<Stmt> {
        self.per_stage_entry(t, |_, j, row, word| {
            let kword = add(mul(first.clone(), u(t.unit)), word);
            load(
                xr[j].clone(),
                at(x.clone(), add(mul(row, u(t.kdim)), mul(kword, u(8)))),
            )
        })
    }

    /// `xr` into the stage in B-fragment order, as [`Lowering::stage_x`] writes it; into ring
    /// buffer `slot` of the phased ring (`MmaTiling::x_async`: `batch · pitch` entries each).
    fn x_phase_store(&mut self, t: &MmaTiling, xr: &[Vec<Reg>], slot: Option<Expr>) -> Vec<Stmt> {
        let stage = t.xs.as_ref().expect("staged");
        let (entries, wg) = (t.batch * stage.words, self.wg());
        let mut out = vec![];
        for (j, xh) in xr.iter().enumerate() {
            let i = add(sp(Special::LocalId), u(j * wg));
            let packs = (0..4)
                .map(|h| Expr::PackHalf2(Box::new(r(xh[h])), Box::new(r(xh[h + 4]))))
                .collect();
            let row = div(i.clone(), u(stage.words));
            let row = match &slot {
                Some(slot) => add(mul(slot.clone(), u(t.batch)), row),
                None => row,
            };
            let entry = add(mul(row, u(stage.pitch)), rem(i.clone(), u(stage.words)));
            let st = self.store_words(stage.lds, mul(entry, u(4)), packs);
            if (j + 1) * wg <= entries {
                out.push(st);
            } else {
                when(lt(i, u(entries)), vec![st], &mut out);
            }
        }
        out
    }

    /// Units per activation phase of the tensor-core path (`Schedule::x_phase_units`), `None`
    /// when the whole K part is staged at once (0, a phase of the whole part, no staging, or a
    /// GEMV prologue, which writes its whole stage). A phase divides the part (no phase stages
    /// past it) and is a multiple of the K warps (every warp the same units per phase, so the
    /// phase's barriers are reached by all).
    fn mma_phase(
        &self,
        part_units: usize,
        kwarps: usize,
        loaded_x: bool,
    ) -> Result<Option<usize>, LowerError> {
        let p = self.s.x_phase_units as usize;
        if p == 0 || p >= part_units || !self.s.x_in_lds || !loaded_x {
            return Ok(None);
        }
        if part_units % p != 0 || p % kwarps != 0 {
            return sched(format!(
                "INT4 mma: x_phase_units = {p} must divide the K part's {part_units} units and be a multiple of the {kwarps} K warps"
            ));
        }
        Ok(Some(p))
    }

    /// Where unit `unit`'s global operands are, per weight: the lane's 4 scales, its zero word
    /// (weights with zero points) and per MMA step its 4 packed words — what [`Lowering::mma_loads`]
    /// loads and [`Lowering::ring_copies`] copies. The group index goes into a register first.
    fn unit_sources(&mut self, t: &MmaTiling, unit: Reg, out: &mut Vec<Stmt>) -> Vec<UnitSources> {
        let gi = self.k.reg(Ty::U32, "group");
        out.push(assign(
            gi,
            if t.upg == 1 {
                r(unit)
            } else {
                div(r(unit), u(t.upg))
            },
        ));
        t.weights
            .iter()
            .map(|w| {
                let BufParams::Gptq {
                    scales,
                    qzeros,
                    qweight,
                } = self.bufs[w]
                else {
                    unreachable!("a GPTQ weight")
                };
                UnitSources {
                    scales: at(Base::Param(scales), add(mul(r(gi), u(t.n)), r(t.n0))),
                    zero: qzeros.map(|zp| {
                        at(
                            Base::Param(zp),
                            add(mul(r(gi), u(t.n / 8)), div(r(t.n0), u(8))),
                        )
                    }),
                    words: (0..t.steps)
                        .map(|st| {
                            let kword = add(mul(r(unit), u(t.unit)), add(u(4 * st), r(t.tq)));
                            at(Base::Param(qweight), add(mul(kword, u(t.n)), r(t.n0)))
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Unit `unit`'s operands into `b`: the loads of [`Lowering::mma_loads`], or with the
    /// asynchronous ring the copies of the unit `stages − 1` ahead, the wait for this unit's
    /// and its reads from the ring.
    fn mma_unit_loads(&mut self, t: &MmaTiling, b: &MmaBuf, unit: Reg) -> Vec<Stmt> {
        let Some(ring) = &t.ring else {
            return self.mma_loads(t, b, unit);
        };
        let (stages, kwarps, slot, end) = (ring.stages, ring.kwarps, ring.slot, ring.end.clone());
        let mut out = vec![];
        let ahead = self.k.reg(Ty::U32, "copy_unit");
        out.push(assign(ahead, add(r(unit), u((stages - 1) * kwarps))));
        // The slot written is the one read the iteration before: this lane's reads of it were
        // consumed (decoded) before this copy is issued, in program order.
        let write = sel(eq(r(slot), u(0)), u(stages - 1), sub(r(slot), u(1)));
        let copies = self.ring_copies(t, ahead, write);
        when(
            and(lt(r(ahead), end), lt(r(t.n0), u(t.n))),
            copies,
            &mut out,
        );
        out.push(Stmt::AsyncCommit);
        out.push(comment(format!(
            "§5.2: this lane's copies of this unit (its group, {} groups ago) are in LDS before it reads them; it reads only what it copied",
            stages - 1
        )));
        out.push(Stmt::AsyncWait {
            pending: (stages - 1) as u32,
        });
        out.extend(self.ring_reads(t, b));
        out.extend(self.mma_x_loads(t, b, unit));
        let next = add(r(slot), u(1));
        out.push(assign(slot, sel(eq(next.clone(), u(stages)), u(0), next)));
        out
    }

    /// The ring's first `stages − 1` units (the warp's units from `first`, `kwarps` apart), a
    /// group each (empty past the part), read from slot 0 on.
    fn ring_prologue(&mut self, t: &MmaTiling, first: Expr) -> Vec<Stmt> {
        let Some(ring) = &t.ring else {
            return vec![];
        };
        let (stages, kwarps, slot, end) = (ring.stages, ring.kwarps, ring.slot, ring.end.clone());
        let mut out = vec![comment(format!(
            "the weights through an LDS ring of {stages} unit buffers per warp, filled by asynchronous copies {} units ahead (each lane copies its own operands)",
            stages - 1
        ))];
        out.push(assign(slot, u(0)));
        let ahead = self.k.reg(Ty::U32, "copy_unit");
        for s in 0..stages - 1 {
            out.push(assign(ahead, add(first.clone(), u(s * kwarps))));
            let copies = self.ring_copies(t, ahead, u(s));
            when(
                and(lt(r(ahead), end.clone()), lt(r(t.n0), u(t.n))),
                copies,
                &mut out,
            );
            out.push(Stmt::AsyncCommit);
        }
        out
    }

    /// Index of lane `l`'s entry of weight `mi` in `slot` (`width` elements per lane, `per`
    /// elements per weight and slot).
    fn ring_entry(ring: &Ring, m: usize, mi: usize, slot: Expr, per: usize, width: usize) -> Expr {
        let owner = add(
            mul(add(mul(slot, u(ring.warps)), sp(Special::WaveId)), u(m)),
            u(mi),
        );
        add(mul(owner, u(per)), mul(sp(Special::LaneId), u(width)))
    }

    /// Where weight `mi`'s 4 scales of the lane are in `slot`: the lane's own entry, or its
    /// quad's ([`Ring::by_quad`]).
    fn ring_scales(t: &MmaTiling, ring: &Ring, mi: usize, slot: Expr) -> Expr {
        let m = t.weights.len();
        if !ring.by_quad {
            return Self::ring_entry(ring, m, mi, slot, 128, 4);
        }
        let owner = add(
            mul(add(mul(slot, u(ring.warps)), sp(Special::WaveId)), u(m)),
            u(mi),
        );
        add(mul(owner, u(32)), mul(r(t.quad), u(4)))
    }

    /// Where weight `mi`'s zero word of the lane is in `slot`: the lane's own entry, or its
    /// quad pair's ([`Ring::by_quad`]: columns `n0 .. n0 + 8` share it).
    fn ring_zero(t: &MmaTiling, ring: &Ring, mi: usize, slot: Expr) -> Expr {
        let m = t.weights.len();
        if !ring.by_quad {
            return Self::ring_entry(ring, m, mi, slot, 32, 1);
        }
        let owner = add(
            mul(add(mul(slot, u(ring.warps)), sp(Special::WaveId)), u(m)),
            u(mi),
        );
        add(mul(owner, u(4)), div(r(t.quad), u(2)))
    }

    /// The asynchronous copies of unit `unit`'s operands into ring slot `slot`.
    fn ring_copies(&mut self, t: &MmaTiling, unit: Reg, slot: Expr) -> Vec<Stmt> {
        let mut out = vec![];
        let sources = self.unit_sources(t, unit, &mut out);
        let ring = t.ring.as_ref().expect("a ring");
        let m = t.weights.len();
        // By quad: lane t = 0 of each quad copies the quad's scales, of an even quad also the
        // pair's zero word.
        let first = eq(r(t.tq), u(0));
        let pair_first = and(first.clone(), eq(rem(r(t.quad), u(2)), u(0)));
        for (mi, src) in sources.into_iter().enumerate() {
            let cp = Stmt::AsyncCopy {
                dst: self.lds_at(ring.scales, Self::ring_scales(t, ring, mi, slot.clone())),
                src: src.scales,
                words: 2,
            };
            if ring.by_quad {
                when(first.clone(), vec![cp], &mut out);
            } else {
                out.push(cp);
            }
            if let (Some(zero), Some(zl)) = (src.zero, ring.zeros) {
                let cp = Stmt::AsyncCopy {
                    dst: self.lds_at(zl, Self::ring_zero(t, ring, mi, slot.clone())),
                    src: zero,
                    words: 1,
                };
                if ring.by_quad {
                    when(pair_first.clone(), vec![cp], &mut out);
                } else {
                    out.push(cp);
                }
            }
            for (st, words) in src.words.into_iter().enumerate() {
                let entry = Self::ring_entry(ring, m, mi, slot.clone(), t.steps * 128, 4);
                out.push(Stmt::AsyncCopy {
                    dst: self.lds_at(ring.words, add(entry, u(st * 128))),
                    src: words,
                    words: 4,
                });
            }
        }
        out
    }

    /// This unit's weight operands from the ring's read slot into `b` (zero where masked), as
    /// [`Lowering::mma_loads`] loads them (unstaged activations are loaded as there).
    fn ring_reads(&mut self, t: &MmaTiling, b: &MmaBuf) -> Vec<Stmt> {
        let ring = t.ring.as_ref().expect("a ring");
        let m = t.weights.len();
        let mut out = vec![];
        let mut guarded = vec![];
        let slot = r(ring.slot);
        for mi in 0..m {
            b.scales[mi]
                .iter()
                .for_each(|&h| out.push(assign(h, Expr::Float(0.0, Ty::F16))));
            out.push(assign(b.zero_words[mi], u(0)));
            guarded.push(load(
                b.scales[mi].clone(),
                self.lds_at(ring.scales, Self::ring_scales(t, ring, mi, slot.clone())),
            ));
            let BufParams::Gptq { qzeros, .. } = self.bufs[&t.weights[mi]] else {
                unreachable!("a GPTQ weight")
            };
            if let (Some(_), Some(zl)) = (qzeros, ring.zeros) {
                guarded.push(load(
                    vec![b.zero_words[mi]],
                    self.lds_at(zl, Self::ring_zero(t, ring, mi, slot.clone())),
                ));
            }
            for st in 0..t.steps {
                b.words[mi][st]
                    .iter()
                    .for_each(|&q| out.push(assign(q, u(0))));
                let entry = Self::ring_entry(ring, m, mi, slot.clone(), t.steps * 128, 4);
                let at_words = self.lds_at(ring.words, add(entry, u(st * 128)));
                if ring.shared {
                    // The f32 array holds the copied bits: loaded as f32, reinterpreted.
                    let f: Vec<Reg> = (0..4).map(|_| self.k.reg(Ty::F32, "ring_bits")).collect();
                    guarded.push(load(f.clone(), at_words));
                    for (&q, &fr) in b.words[mi][st].iter().zip(&f) {
                        guarded.push(assign(q, Expr::bitcast(Ty::U32, r(fr))));
                    }
                } else {
                    guarded.push(load(b.words[mi][st].clone(), at_words));
                }
            }
        }
        when(lt(r(t.n0), u(t.n)), guarded, &mut out);
        out
    }

    /// The registers one unit's loads fill.
    fn mma_buffers(&mut self, t: &MmaTiling) -> MmaBuf {
        let m = t.weights.len();
        let scales = (0..m)
            .map(|_| (0..4).map(|_| self.k.reg(Ty::F16, "scale_h")).collect())
            .collect();
        let zero_words = (0..m).map(|_| self.k.reg(Ty::U32, "zero_word")).collect();
        let words = (0..m)
            .map(|_| {
                (0..t.steps)
                    .map(|_| (0..4).map(|_| self.k.reg(Ty::U32, "qword")).collect())
                    .collect()
            })
            .collect();
        // Staged activations come from LDS in the compute (`mma_bfrags_lds`): no registers here.
        let xs = match t.xs {
            Some(_) => vec![],
            None => (0..t.steps * t.ntiles)
                .map(|_| (0..8).map(|_| self.k.reg(Ty::F16, "x")).collect())
                .collect(),
        };
        MmaBuf {
            scales,
            zero_words,
            words,
            xs,
        }
    }

    /// Unit `unit`'s loads into `b`: every load of the unit at once (4·steps packed words per
    /// weight, 8·steps activations, the scales and zero words), zero where masked.
    fn mma_loads(&mut self, t: &MmaTiling, b: &MmaBuf, unit: Reg) -> Vec<Stmt> {
        let mut out = self.weights_prefetch(t, unit);
        let sources = self.unit_sources(t, unit, &mut out);
        let col_ok = lt(r(t.n0), u(t.n));
        let h0 = || Expr::Float(0.0, Ty::F16);
        let mut guarded = vec![];
        for (mi, src) in sources.into_iter().enumerate() {
            b.scales[mi].iter().for_each(|&h| out.push(assign(h, h0())));
            out.push(assign(b.zero_words[mi], u(0)));
            guarded.push(load(b.scales[mi].clone(), src.scales));
            if let Some(zero) = src.zero {
                guarded.push(load(vec![b.zero_words[mi]], zero));
            }
            for (st, words) in src.words.into_iter().enumerate() {
                b.words[mi][st]
                    .iter()
                    .for_each(|&q| out.push(assign(q, u(0))));
                guarded.push(load(b.words[mi][st].clone(), words));
            }
        }
        when(col_ok, guarded, &mut out);
        out.extend(self.mma_x_loads(t, b, unit));
        out
    }

    /// [`Schedule::l2_prefetch_units`](super::super::Schedule::l2_prefetch_units) `= D`: the
    /// warp's unit `D` of its units after `unit` (`unit + D · kwarps`), where it is in the K
    /// part, asked into L2 — per weight, lane `l` below the unit's K-words the 128-byte line of
    /// K-word `l` over the warp's 32 columns, lane 0 the lines of its group's scales and zero
    /// words. Nothing where the field is 0 or the target has no L2 prefetch. A hint: no value,
    /// no ordering, so nothing of §5 rests on it; the conditions only keep the addresses in
    /// the arrays and the requests useful (the bounds are the warp's: its part, its columns).
    fn weights_prefetch(&mut self, t: &MmaTiling, unit: Reg) -> Vec<Stmt> {
        let d = self.s.l2_prefetch_units as usize;
        if d == 0 || !self.k.arch.has_l2_prefetch() {
            return vec![];
        }
        let ahead = self.k.reg(Ty::U32, "prefetch_unit");
        let mut out = vec![assign(ahead, add(r(unit), u(d * t.kwarps)))];
        // The warp's first column: lane quad 0's n0.
        let c0 = sub(r(t.n0), mul(r(t.quad), u(4)));
        let lane = sp(Special::LaneId);
        let group = if t.upg == 1 {
            r(ahead)
        } else {
            div(r(ahead), u(t.upg))
        };
        let mut lines = vec![];
        for w in &t.weights {
            let BufParams::Gptq {
                scales,
                qzeros,
                qweight,
            } = self.bufs[w]
            else {
                unreachable!("a GPTQ weight")
            };
            for first in (0..t.unit).step_by(32) {
                let kword = add(mul(r(ahead), u(t.unit)), add(lane.clone(), u(first)));
                let words = vec![Stmt::PrefetchL2 {
                    mem: at(Base::Param(qweight), add(mul(kword, u(t.n)), c0.clone())),
                }];
                when(
                    lt(add(lane.clone(), u(first)), u(t.unit)),
                    words,
                    &mut lines,
                );
            }
            let mut by_lane0 = vec![Stmt::PrefetchL2 {
                mem: at(
                    Base::Param(scales),
                    add(mul(group.clone(), u(t.n)), c0.clone()),
                ),
            }];
            if let Some(zp) = qzeros {
                by_lane0.push(Stmt::PrefetchL2 {
                    mem: at(
                        Base::Param(zp),
                        add(mul(group.clone(), u(t.n / 8)), div(c0.clone(), u(8))),
                    ),
                });
            }
            when(eq(lane.clone(), u(0)), by_lane0, &mut lines);
        }
        out.push(comment(format!(
            "the warp's unit {d} of its units ahead into L2 (a hint: no value, no ordering), within its K part"
        )));
        when(
            and(lt(r(ahead), t.end.clone()), lt(c0, u(t.n))),
            lines,
            &mut out,
        );
        out
    }

    /// Unit `unit`'s activations into `b` where they are not staged (nothing where they are).
    fn mma_x_loads(&mut self, t: &MmaTiling, b: &MmaBuf, unit: Reg) -> Vec<Stmt> {
        let mut out = vec![];
        if t.xs.is_some() {
            return out;
        }
        let h0 = || Expr::Float(0.0, Ty::F16);
        for st in 0..t.steps {
            for j in 0..t.ntiles {
                let xs = &b.xs[st * t.ntiles + j];
                xs.iter().for_each(|&h| out.push(assign(h, h0())));
                let kword = add(mul(r(unit), u(t.unit)), add(u(4 * st), r(t.tq)));
                let ld = load(
                    xs.clone(),
                    at(
                        t.x.clone().expect("unstaged activations"),
                        add(mul(t.x_row(j), u(t.kdim)), mul(kword, u(8))),
                    ),
                );
                when(lt(r(t.quad), u(t.rows_in(j))), vec![ld], &mut out);
            }
        }
        out
    }

    /// The B fragments of step `st` of `unit`, N tile `j`, from the staged activations: batch
    /// row `8j + quad`'s entry at K-word `unit·U + 4·st + t` (zero for rows past the batch). The zeros are not
    /// needed for the result (B column n only reaches D column n, and D columns past the batch
    /// are never read), but without the selects ptxas schedules the loop differently: measured
    /// on the H200 (bench/results/2026-11-30-h200-decode/), dropping them saved 16 instructions
    /// per unit and cost the row-parallel GEMV of the unfused chain 1.9 µs (28.2 → 30.2 µs at TP
    /// 4 on one device); so they stay.
    fn mma_bfrags_lds(
        &mut self,
        t: &MmaTiling,
        xs: &XStage,
        unit: Reg,
        (st, j): (usize, usize),
    ) -> (Vec<Stmt>, Vec<Reg>) {
        let mut out = vec![];
        let word = add(
            sub(mul(r(unit), u(t.unit)), xs.begin.clone()),
            add(u(4 * st), r(t.tq)),
        );
        let rows = t.rows_in(j);
        let in_batch = lt(r(t.quad), u(rows));
        let row = match rows {
            1 => u(8 * j),
            8 => tile_row(t.quad, j),
            _ => sel(in_batch.clone(), tile_row(t.quad, j), u(8 * j)),
        };
        let bfrag: Vec<Reg> = (0..4).map(|_| self.k.reg(Ty::U32, "bfrag")).collect();
        if t.x_async {
            // The ring's buffers hold the activations in B-fragment order too, `batch · pitch`
            // entries per buffer (`x_phase_store`).
            let slot = r(t.ring.as_ref().expect("the ring").slot);
            let row = add(mul(slot, u(t.batch)), row);
            let idx = mul(add(mul(row, u(xs.pitch)), word), u(4));
            out.extend(self.load_words(bfrag.clone(), xs.lds, idx));
        } else {
            let idx = mul(add(mul(row, u(xs.pitch)), word), u(4));
            out.extend(self.load_words(bfrag.clone(), xs.lds, idx));
        }
        if rows < 8 {
            for &b in &bfrag {
                out.push(assign(b, sel(in_batch.clone(), r(b), u(0))));
            }
        }
        (out, bfrag)
    }

    /// One unit's MMAs on the registers of `b`, then `totals += s · unit sums`.
    fn mma_compute(&mut self, t: &MmaTiling, b: &MmaBuf, unit: Reg, totals: &[Reg]) -> Vec<Stmt> {
        let mut out = vec![];
        let m = t.weights.len();
        // MmaScale::Weight: column j's scale in both halves (an A register holds two K rows of
        // one column), for the fma.f16x2 that scales the decoded pairs; Unit: the f32 scale.
        let on_weights = self.s.mma_scale == MmaScale::Weight;
        let (mut sf, mut zp) = (vec![], vec![]);
        for mi in 0..m {
            for j in 0..4 {
                let h = r(b.scales[mi][j]);
                let s32 = if on_weights {
                    let pair = self.k.reg(Ty::U32, "scale_pair");
                    out.push(assign(
                        pair,
                        Expr::PackHalf2(Box::new(h.clone()), Box::new(h)),
                    ));
                    pair
                } else {
                    let s32 = self.k.reg(Ty::F32, "scale");
                    out.push(assign(s32, cast(Ty::F32, h)));
                    s32
                };
                let z = match t.l.zero {
                    ZeroPoint::Symmetric => u(8),
                    _ if self.bufs_have_no_zeros(&t.weights[mi]) => u(8),
                    zero => {
                        let nib = bfe(
                            r(b.zero_words[mi]),
                            mul(rem(add(r(t.n0), u(j)), u(8)), u(4)),
                            4,
                        );
                        if zero == ZeroPoint::V1 {
                            add(nib, u(1))
                        } else {
                            nib
                        }
                    }
                };
                // 1024 + z in both halves: 0x6400 + z is its FP16 pattern (ulp 1 in [1024, 2048)).
                let zr = self.k.reg(Ty::U32, "zero_pair");
                out.push(assign(zr, mul(add(z.clone(), u(0x6400)), u(0x1_0001))));
                // −(64 + z) in both halves: 0xD400 is −64, and in [64, 128) the ulp is 1/16, so
                // 16·z more in the mantissa is −(64 + z) exactly.
                let zh = (self.s.mma_decode == MmaDecode::Fma).then(|| {
                    let zh = self.k.reg(Ty::U32, "zero_hi");
                    out.push(assign(zh, mul(add(mul(z, u(16)), u(0xD400)), u(0x1_0001))));
                    zh
                });
                sf.push(s32);
                zp.push((zr, zh));
            }
        }
        let nt = t.ntiles;
        // unit_acc[(mi · ntiles + j) · 8 + 4p + i], as `totals`; with the scale on the weights
        // the MMAs accumulate into the totals themselves.
        let unit_acc: Vec<Reg> = if on_weights {
            totals.to_vec()
        } else {
            self.zeros(m * 8 * nt, "unit_acc", &mut out)
        };
        for st in 0..t.steps {
            // B fragments of every N tile: (x[2h], x[2h+4]) and (x[2h+1], x[2h+5]).
            let bfrags: Vec<Vec<Reg>> = (0..nt)
                .map(|j| self.mma_bfrags(t, b, unit, (st, j), &mut out))
                .collect();
            for mi in 0..m {
                let ws = &b.words[mi][st];
                for p in 0..2 {
                    for h in 0..2 {
                        let mut a = vec![];
                        // a[0..4]: (row g, k 2t..), (row g+8, k 2t..), (row g, k 2t+8..), (row g+8, k 2t+8..)
                        // = (column word 2p + cwi, nibble pair 2h + slot).
                        for (cwi, slot) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                            let wreg = ws[2 * p + cwi];
                            // Nibble pair (i, i + 4), i = 2h + slot (MmaDecode): Shift takes
                            // (word >> 4i) & 0x000F000F, 1024 + q after the OR, minus 1024 + z.
                            // Fma takes pairs 0, 2 from `word` and `word >> 8` the same way and
                            // leaves pairs 1, 3 in place (mask 0x00F000F0: 1024 + 16q); one FMA
                            // by 1/16 minus 64 + z gives q − z. Both exact in FP16.
                            let fma = self.s.mma_decode == MmaDecode::Fma;
                            let i = 2 * h + slot;
                            let shift = if fma { 8 * h } else { 4 * i };
                            let word = if shift == 0 {
                                r(wreg)
                            } else {
                                bin(BinOp::Shr, r(wreg), Expr::u32(shift as u32))
                            };
                            let mask = if fma && slot == 1 {
                                0x00F0_00F0
                            } else {
                                0x000F_000F
                            };
                            let pair = bin(
                                BinOp::Or,
                                bin(BinOp::And, word, Expr::u32(mask)),
                                Expr::u32(0x6400_6400),
                            );
                            let ar = self.k.reg(Ty::U32, "afrag");
                            let (zr, zh) = zp[mi * 4 + 2 * p + cwi];
                            let dec = if !fma || slot == 0 {
                                Expr::SubHalf2(Box::new(pair), Box::new(r(zr)))
                            } else {
                                // 1/16 in both halves is 0x2C00.
                                Expr::FmaHalf2(
                                    Box::new(pair),
                                    Box::new(Expr::u32(0x2C00_2C00)),
                                    Box::new(r(zh.expect("the FMA decode's -(64 + z)"))),
                                )
                            };
                            out.push(assign(ar, dec));
                            if on_weights {
                                // (q − z)·s, rounded once to FP16 (MmaScale::Weight).
                                let scaled = self.k.reg(Ty::U32, "afrag_s");
                                let s2 = sf[mi * 4 + 2 * p + cwi];
                                out.push(assign(
                                    scaled,
                                    Expr::FmaHalf2(
                                        Box::new(r(ar)),
                                        Box::new(r(s2)),
                                        Box::new(Expr::u32(0)),
                                    ),
                                ));
                                a.push(scaled);
                            } else {
                                a.push(ar);
                            }
                        }
                        // The A fragment, decoded once, feeds every N tile's MMA.
                        for (j, bfrag) in bfrags.iter().enumerate() {
                            let base = (mi * nt + j) * 8 + p * 4;
                            out.push(Stmt::MmaF16 {
                                acc: std::array::from_fn(|i| unit_acc[base + i]),
                                a: [a[0], a[1], a[2], a[3]],
                                b: [bfrag[2 * h], bfrag[2 * h + 1]],
                            });
                        }
                    }
                }
            }
        }
        if on_weights {
            return out;
        }
        // Scale per unit: D slots 0, 1 are column n0 + 2p, slots 2, 3 column n0 + 2p + 1.
        for mi in 0..m {
            for j in 0..nt {
                for p in 0..2 {
                    for i in 0..4 {
                        let slot = (mi * nt + j) * 8 + p * 4 + i;
                        let (tot, s) = (totals[slot], sf[mi * 4 + 2 * p + i / 2]);
                        out.push(assign(tot, fma(r(s), r(unit_acc[slot]), r(tot))));
                    }
                }
            }
        }
        out
    }

    /// N tile `j`'s B fragments of step `st`: from the LDS stage, or packed from the loaded
    /// activations `(x[2h], x[2h+4])`, `(x[2h+1], x[2h+5])`.
    fn mma_bfrags(
        &mut self,
        t: &MmaTiling,
        b: &MmaBuf,
        unit: Reg,
        (st, j): (usize, usize),
        out: &mut Vec<Stmt>,
    ) -> Vec<Reg> {
        if let Some(xs) = &t.xs {
            let (stmts, bfrag) = self.mma_bfrags_lds(t, xs, unit, (st, j));
            out.extend(stmts);
            return bfrag;
        }
        let xh = &b.xs[st * t.ntiles + j];
        let mut bfrag = vec![];
        for pair in [(0, 4), (1, 5), (2, 6), (3, 7)] {
            let br = self.k.reg(Ty::U32, "bfrag");
            out.push(assign(
                br,
                Expr::PackHalf2(Box::new(r(xh[pair.0])), Box::new(r(xh[pair.1]))),
            ));
            bfrag.push(br);
        }
        bfrag
    }
}

/// The LDS row pitch (16-byte entries) of a phase of `words` K-words: a B-fragment load has the 8
/// lanes of one access phase read rows `g` and `g + 1` at the same 4 entries (`tq`); with rows a
/// multiple of 128 bytes apart both land in the same 16 banks (a 2-way conflict on every load),
/// so a row of a multiple of 8 entries gets 4 more (64 bytes: row `g + 1` in the other 16 banks).
/// Only the phased stage is padded (the whole-part stage's kernels stay as measured).
fn stage_pitch(words: usize) -> usize {
    if words % 8 == 0 { words + 4 } else { words }
}

/// The largest batch the tensor-core GEMV takes: 8 N tiles of 8 rows.
pub(in crate::lower) const MMA_MAX_BATCH: usize = 64;

/// The f32 accumulators the tensor-core GEMV keeps per lane (a unit's sums and the totals, 8
/// each per weight and N tile) may take at most this many of sm_90's 255 registers per lane;
/// beyond it ptxas must spill (the packed words, fragments and addresses need the rest).
pub(in crate::lower) const MMA_MAX_ACCUMULATORS: usize = 128;

/// The f32 accumulators per lane of the tensor-core GEMV of `weights` weights at `batch`: 8 per
/// weight and N tile of totals, as many unit sums with the scale per unit.
fn mma_accumulators(weights: usize, batch: usize, scale: MmaScale) -> usize {
    let per = match scale {
        MmaScale::Unit => 2,
        MmaScale::Weight => 1,
    };
    per * 8 * weights * batch.div_ceil(8)
}

/// Whether the tensor-core GEMV takes `batch` rows with `weights` weights (the limits
/// [`MMA_MAX_BATCH`] and [`MMA_MAX_ACCUMULATORS`] `gemv_gptq_mma` refuses past): the default
/// schedule's GEMV → GEMM switch.
pub(in crate::lower) fn mma_takes(batch: usize, weights: usize, scale: MmaScale) -> bool {
    batch <= MMA_MAX_BATCH && mma_accumulators(weights, batch, scale) <= MMA_MAX_ACCUMULATORS
}

/// Batch row `8j + quad`: lane quad `quad`'s B column of N tile `j`.
fn tile_row(quad: Reg, j: usize) -> Expr {
    if j == 0 {
        r(quad)
    } else {
        add(r(quad), u(8 * j))
    }
}

impl MmaTiling {
    /// The batch row lane quad `quad` loads for N tile `j`: `row0 + 8j + quad`.
    fn x_row(&self, j: usize) -> Expr {
        match &self.row0 {
            Some(row0) => add(row0.clone(), tile_row(self.quad, j)),
            None => tile_row(self.quad, j),
        }
    }

    /// The batch rows N tile `j` holds (8, fewer in a last partial tile).
    fn rows_in(&self, j: usize) -> usize {
        (self.batch - 8 * j).min(8)
    }
}
