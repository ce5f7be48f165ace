//! The lowering driver: parameters, the tile, and the order of the stages.

use std::collections::HashMap;

use wavefuse_ir::ops::Compression;
use wavefuse_ir::{
    Buffer, BufferType, Kernel, MemorySpace, Role, ScalarType, WeightFormat, ZeroPoint,
};

use crate::lowered::{
    Access, Base, Expr, Lds, LoweredKernel, Param, ParamKind, Purpose, Reg, Special, Stmt, Ty,
};
use crate::target::Arch;

use super::build::*;
use super::plan::{Phase, Plan};
use super::{LowerError, Schedule};

/// The device arrays of one op-level buffer.
#[derive(Clone)]
pub(super) enum BufParams {
    /// A dense tensor (or FP16 `[N, K]` weight): one array.
    Dense(Param),
    /// A GPTQ weight: packed codes, scales, and zero points unless symmetric.
    Gptq {
        qweight: Param,
        scales: Param,
        qzeros: Option<Param>,
    },
}

/// The allreduce's scratch and flags.
pub(super) struct Exchange {
    /// Payload arrays (one for plain payloads; codes then scales for INT8), with the length of
    /// one epoch-parity half of each.
    pub payload: Vec<(Param, usize)>,
    /// Flags, one per workgroup slice (pull) or per sender and slice (push).
    pub flags: Param,
    /// `epoch & 1`: which half of the double-buffered scratch this launch uses.
    pub parity: Reg,
}

/// The RMSNorm's workgroup-local arrays and grid-wide scratch.
pub(super) struct NormArrays {
    /// The normalised input of every point of the tile, f32 `[B · C]`.
    pub xs: Lds,
    /// One partial per wave and batch row, f32 `[waves · B]`.
    pub waves: Lds,
    /// `1 / rms` per batch row, f32 `[B]` (batch > 1).
    pub inv: Option<Lds>,
    /// `1 / rms` in every lane's register (batch 1: every wave computes it, no LDS).
    pub inv_reg: Option<crate::lowered::Reg>,
    /// f32 `[tiles · B]` in global memory: every tile's sum of squares per batch row.
    pub partials: Option<Param>,
}

pub(super) struct Lowering<'a> {
    pub plan: Plan<'a>,
    pub arch: Arch,
    pub s: Schedule,
    pub k: LoweredKernel,
    pub bufs: HashMap<Buffer, BufParams>,
    /// Columns per workgroup (the tile width).
    pub cols: usize,
    /// Workgroups per rank (`tiles · k_split`).
    pub grid: usize,
    /// Column tiles: `ceil(N / cols)`.
    pub tiles: usize,
    /// Split-K across workgroups, when the schedule asks for it.
    pub split: Option<super::splitk::SplitK>,
    /// The workgroup's id as its tiles and K parts see it: `wg_id`, or the virtual id of a GEMV
    /// stage that loops over its tile parts (`stages.rs`).
    pub wg: Expr,
    /// This workgroup's column tile: `wg`, or `wg mod tiles` with split-K. Flags and norm
    /// partials are indexed by tile (with split-K only the tile's last arriver writes them).
    pub tile: Expr,
    /// `tile · cols`: the tile's first root column.
    pub tile0: Reg,
    /// Per GEMV: the per-slice results `[t_red][B][C]` f32.
    pub red: Vec<Lds>,
    /// Partial results per column to add up in `red`.
    pub t_red: usize,
    pub rank: Option<Param>,
    pub exchange: Option<Exchange>,
    pub norm: Option<NormArrays>,
    /// The GEMV prologue's activation `[B, K]` FP16 in LDS, when the GEMV reads it per lane (not
    /// from its own LDS stage).
    pub prologue_lds: Option<Lds>,
    /// The GEMV prologue norm's `1/rms` per batch row, in every lane.
    pub prologue_inv: Vec<Reg>,
    /// `Some`: the GEMV prologue's statements that depend on no tile and no K part (the norm's
    /// `1/rms`; a whole `[B, K]` activation array) are collected here instead of the body, for a
    /// GEMV stage to run once per workgroup in front of its loop over tile parts (`stages.rs`).
    /// `None` (a kernel of one stage: one part per workgroup): they stay in the body.
    pub part_invariant: Option<Vec<Stmt>>,
    /// The grid barriers' one monotonic counter (§5.4), declared at the first barrier; every
    /// barrier of the launch (the RMSNorm's, those between GEMV stages) arrives on it.
    pub grid_counter: Option<Param>,
    /// Index of the next grid barrier of the launch (the epoch arithmetic of `expand_sync`).
    pub next_barrier: u32,
}

/// What one GEMV stage's lowering hands to the next (`stages.rs`): the kernel built so far and
/// the parameters every stage shares.
pub(super) struct Carry {
    pub k: LoweredKernel,
    pub bufs: HashMap<Buffer, BufParams>,
    pub rank: Option<Param>,
    pub grid_counter: Option<Param>,
    pub next_barrier: u32,
}

pub(super) fn ty_of(dtype: ScalarType, what: &str) -> Result<Ty, LowerError> {
    match dtype {
        ScalarType::F16 => Ok(Ty::F16),
        ScalarType::F32 => Ok(Ty::F32),
        ScalarType::I8 => Ok(Ty::I8),
        ScalarType::I32 => Ok(Ty::I32),
        ScalarType::U32 => Ok(Ty::U32),
        ScalarType::Bf16 => Err(LowerError::Unsupported(format!("bf16 data in {what}"))),
    }
}

impl<'a> Lowering<'a> {
    pub fn new(plan: Plan<'a>, arch: Arch, mut s: Schedule) -> Result<Self, LowerError> {
        s.check(arch)?;
        // A stripe grid splits K itself (`Schedule::stripe_workgroups`: `k_split` ignored).
        if stripe_applies(&plan, &s) {
            s.k_split = 1;
        }
        let cols = s.columns_per_workgroup as usize;
        let tiles = plan.n.div_ceil(cols);
        let grid = match stripe_applies(&plan, &s) {
            true => s.stripe_workgroups as usize,
            false => tiles * s.k_split as usize,
        };
        let grid32 =
            u32::try_from(grid).map_err(|_| LowerError::Schedule("grid too large".into()))?;
        let mut k = LoweredKernel::new(
            plan.kernel.name(),
            arch,
            plan.kernel.tp(),
            s.workgroup_size,
            grid32,
        );
        k.stream_weights = s.stream_weights;
        k.byte_offsets = s.byte_offsets;
        k.min_resident_per_cu = s.min_resident_per_cu;
        // An sm_90 kernel whose workgroups do not wait for each other opens with the wait for
        // its stream predecessor, so the runtime may launch it as a programmatic dependent
        // (docs/synchronisation.md; `LoweredKernel::stream_order_prologue`).
        k.dependent_launch = arch.has_dependent_launch();
        let carry = Carry {
            k,
            bufs: HashMap::new(),
            rank: None,
            grid_counter: None,
            next_barrier: 0,
        };
        Self::resume(plan, arch, s, carry)
    }

    /// The lowering of a later GEMV stage (`stages.rs`), continuing the kernel in `carry`.
    pub fn resume(
        plan: Plan<'a>,
        arch: Arch,
        s: Schedule,
        carry: Carry,
    ) -> Result<Self, LowerError> {
        s.check(arch)?;
        let cols = s.columns_per_workgroup as usize;
        let tiles = plan.n.div_ceil(cols);
        let grid = match stripe_applies(&plan, &s) {
            true => s.stripe_workgroups as usize,
            false => tiles * s.k_split as usize,
        };
        let Carry {
            mut k,
            bufs,
            rank,
            grid_counter,
            next_barrier,
        } = carry;
        let tile0 = k.reg(Ty::U32, "tile0");
        Ok(Lowering {
            plan,
            arch,
            s,
            k,
            bufs,
            cols,
            grid,
            tiles,
            split: None,
            wg: sp(Special::WorkgroupId),
            tile: sp(Special::WorkgroupId),
            tile0,
            red: Vec::new(),
            t_red: 0,
            rank,
            exchange: None,
            norm: None,
            prologue_lds: None,
            prologue_inv: Vec::new(),
            part_invariant: None,
            grid_counter,
            next_barrier,
        })
    }

    /// What the next GEMV stage continues from.
    pub fn into_carry(self) -> Carry {
        Carry {
            k: self.k,
            bufs: self.bufs,
            rank: self.rank,
            grid_counter: self.grid_counter,
            next_barrier: self.next_barrier,
        }
    }

    /// Take tiles and K parts by `id` (a stage loop's register) instead of `wg_id`; before
    /// [`Lowering::body`].
    pub fn set_virtual_wg(&mut self, id: Reg) {
        self.wg = r(id);
        self.tile = r(id);
    }

    pub fn wg(&self) -> usize {
        self.s.workgroup_size as usize
    }

    pub fn wave(&self) -> usize {
        self.arch.wave_size() as usize
    }

    pub fn tp(&self) -> u32 {
        self.plan.kernel.tp()
    }

    /// Whether the allreduce is the identity (one rank, no compression): no exchange at all.
    pub fn allreduce_is_identity(&self) -> bool {
        self.plan
            .allreduce
            .as_ref()
            .is_some_and(|a| self.tp() == 1 && a.compression == Compression::None)
    }

    /// One rank with an INT8-compressed allreduce: the quantise → dequantise round trip of the
    /// IR stays in each lane's registers (the sum over one rank is the rank's own term, and the
    /// lane that quantises a point is the lane that finishes it), so there is no scratch, no flag
    /// and no barrier; the post-allreduce stage runs at each point right after its quantisation.
    pub fn allreduce_in_registers(&self) -> bool {
        self.plan
            .allreduce
            .as_ref()
            .is_some_and(|a| self.tp() == 1 && matches!(a.compression, Compression::Int8 { .. }))
    }

    /// The phase a value is computed in: with an identity allreduce, post-allreduce values are
    /// computed with the others.
    pub fn stage(&self, phase: Phase) -> Phase {
        if phase == Phase::Post && self.allreduce_is_identity() {
            Phase::Pre
        } else {
            phase
        }
    }

    /// The executing rank, as an expression (the constant 0 on one rank).
    pub fn rank_expr(&self) -> Expr {
        match self.rank {
            Some(p) => Expr::Param(p),
            None => Expr::u32(0),
        }
    }

    /// Declare the parameters of the op-level buffers, in declaration order.
    pub fn declare_buffers(&mut self) -> Result<(), LowerError> {
        let kernel = self.plan.kernel;
        self.declare_buffers_of(kernel, &|_, d| Some(d.role))
    }

    /// Declare the parameters of `kernel`'s buffers, in declaration order, with the role
    /// `role(b, d)` gives (the whole kernel's, for a GEMV stage's kernel); `None` is a stage's
    /// materialised activation (`stages.rs`): global scratch, written before and read after the
    /// grid barrier of one launch (§5.2, §5.11).
    pub fn declare_buffers_of(
        &mut self,
        kernel: &Kernel,
        role: &dyn Fn(Buffer, &wavefuse_ir::BufferData) -> Option<Role>,
    ) -> Result<(), LowerError> {
        for (b, d) in kernel.buffers() {
            let Some(role) = role(b, d) else {
                let BufferType::Tensor(t) = d.local_type() else {
                    unreachable!("a stage's activation is a tensor")
                };
                let elem = ty_of(t.dtype, &d.name)?;
                let p = self.global_array(&d.name, elem, t.len(), Purpose::Scratch);
                self.bufs.insert(b, BufParams::Dense(p));
                continue;
            };
            let access = if role == Role::Input {
                Access::Read
            } else {
                Access::Write
            };
            let space = d.space;
            let data = |part: &'static str| Purpose::Data {
                buffer: d.name.clone(),
                part,
            };
            let array = |elem, len, purpose| ParamKind::Array {
                elem,
                len,
                space,
                access,
                purpose,
            };
            let params = match d.local_type() {
                BufferType::Tensor(t) => {
                    let elem = ty_of(t.dtype, &d.name)?;
                    BufParams::Dense(self.k.param(&d.name, array(elem, t.len(), data("data"))))
                }
                BufferType::Weight(w) => match w.format {
                    WeightFormat::F16 => BufParams::Dense(
                        self.k
                            .param(&d.name, array(Ty::F16, w.k * w.n, data("data"))),
                    ),
                    WeightFormat::Gptq(l) => {
                        let groups = w.k / l.group.rows(w.k).max(1);
                        let qweight = self.k.param(
                            &format!("{}_qweight", d.name),
                            array(Ty::U32, w.k / 8 * w.n, data("qweight")),
                        );
                        let scales = self.k.param(
                            &format!("{}_scales", d.name),
                            array(Ty::F16, groups * w.n, data("scales")),
                        );
                        let qzeros = (l.zero != ZeroPoint::Symmetric).then(|| {
                            self.k.param(
                                &format!("{}_qzeros", d.name),
                                array(Ty::U32, groups * w.n / 8, data("qzeros")),
                            )
                        });
                        BufParams::Gptq {
                            qweight,
                            scales,
                            qzeros,
                        }
                    }
                    WeightFormat::Awq(_) => {
                        return Err(LowerError::Unsupported(format!("AWQ weight `{}`", d.name)));
                    }
                },
            };
            self.bufs.insert(b, params);
        }
        Ok(())
    }

    pub fn dense(&self, b: Buffer) -> Param {
        match self.bufs[&b] {
            BufParams::Dense(p) => p,
            BufParams::Gptq { .. } => unreachable!("dense access to a packed weight"),
        }
    }

    /// A scratch/flag array of the executing rank in global memory.
    pub fn global_array(&mut self, name: &str, elem: Ty, len: usize, purpose: Purpose) -> Param {
        let kind = ParamKind::Array {
            elem,
            len,
            space: MemorySpace::Global,
            access: Access::ReadWrite,
            purpose,
        };
        self.k.param(name, kind)
    }

    /// Build the whole kernel.
    pub fn run(mut self) -> Result<LoweredKernel, LowerError> {
        self.declare_buffers()?;
        self.k.body = self.body()?;
        self.check_lds()?;
        Ok(self.k)
    }

    /// Build the body: the stages of the module docs of [`super`], in order.
    pub fn body(&mut self) -> Result<Vec<Stmt>, LowerError> {
        let mut body = vec![comment(format!(
            "{}: {} workgroups x {} lanes, each owning root columns [wg_id*{c}, wg_id*{c} + {c}) of {} for {} batch row(s)",
            self.plan.kernel.name(),
            self.grid,
            self.wg(),
            self.plan.n,
            self.plan.batch,
            c = self.cols,
        ))];
        if let Some(plan) = self.stripe_plan()? {
            self.stripe_body(plan, &mut body)?;
            return Ok(body);
        }
        if self.s.k_split > 1 {
            let tile = self.k.reg(Ty::U32, "tile");
            body.push(assign(tile, rem(self.wg.clone(), u(self.tiles))));
            self.tile = r(tile);
        }
        body.push(assign(self.tile0, mul(self.tile.clone(), u(self.cols))));
        self.declare_split(None, &mut body)?;
        self.declare_sync(&mut body)?;
        if self.plan.gemv.is_some() {
            self.gemv(&mut body)?;
        }
        // With split-K only each tile's last arriver goes on (`split_finish`); the grid barrier
        // of an RMSNorm is still passed by every workgroup (it counts the whole grid).
        let last = match self.split.is_some() {
            true => Some(self.split_finish(&mut body)?),
            false => None,
        };
        let mut tail = Vec::new();
        let staged = if last.is_some() { &mut tail } else { &mut body };
        self.phase_loop(Phase::Pre, staged)?;
        if self.plan.allreduce.is_some()
            && !self.allreduce_is_identity()
            && !self.allreduce_in_registers()
        {
            self.exchange(staged)?;
            self.phase_loop(Phase::Post, staged)?;
        }
        if self.plan.norm.is_some() {
            self.tile_sum_of_squares(staged)?;
        }
        if let Some(last) = last {
            let parts = self.s.k_split;
            let what = format!(
                "the {parts} parts' sums added in part order, then the stages up to the grid barrier"
            );
            self.finisher_only(last, &what, tail, &mut body);
        }
        if self.plan.norm.is_some() {
            self.grid_barrier(&mut body);
            let mut norm = Vec::new();
            self.grid_inv_rms(&mut norm)?;
            self.phase_loop(Phase::Norm, &mut norm)?;
            match last {
                Some(last) => {
                    self.finisher_only(last, "the tile's normalised values", norm, &mut body)
                }
                None => body.extend(norm),
            }
        }
        Ok(body)
    }

    /// Refuse, with the numbers, a kernel (so far) whose LDS does not fit one workgroup.
    pub fn check_lds(&self) -> Result<(), LowerError> {
        if self.plan.prologue.is_some() {
            self.check_prologue_lds()?;
        }
        // The hardware's limit: past the static one (sm_90: 48 KiB) the C++ writer carves the
        // arrays out of dynamic shared memory (`LoweredKernel::dynamic_lds_layout`) and the
        // launch passes its size, so a kernel lowers up to what one workgroup can hold (sm_90:
        // 227 KiB); the defaults and the tuner's space keep to the static limit.
        let lds = self.k.lds_bytes();
        let max = self.arch.max_lds_per_workgroup() as usize;
        if lds > max {
            return Err(LowerError::Schedule(format!(
                "{lds} bytes of LDS exceed the {max} one {} workgroup can hold{}",
                self.arch,
                self.batch_that_fits(lds, max)
            )));
        }
        Ok(())
    }
}

impl Lowering<'_> {
    /// What a refusal for LDS adds at batch > 1: the kernel, its batch and the largest batch
    /// that fits at this schedule. The LDS arrays (staged activations, cross-slice sums, norm
    /// partials) grow with the batch, some parts do not, so `lds / batch` bytes per row
    /// overstates the per-row cost and the batch named is one that lowers (or a smaller one).
    fn batch_that_fits(&self, lds: usize, max: usize) -> String {
        let batch = self.plan.batch;
        if batch <= 1 {
            return String::new();
        }
        let per_row = lds.div_ceil(batch);
        format!(
            " (kernel `{}` at batch {batch}, {per_row} bytes per batch row); at this schedule it fits up to batch {}",
            self.k.name,
            max / per_row
        )
    }

    /// `base[index]` for an LDS array.
    pub fn lds_at(&self, l: Lds, index: Expr) -> crate::lowered::MemRef {
        at(Base::Lds(l), index)
    }

    /// A store of 32-bit `values` (u32) into LDS array `l` at `index`: reinterpreted as f32
    /// where `l` is an f32 array another use shares (a stage in the cross-slice sums).
    pub fn store_words(&self, l: Lds, index: Expr, values: Vec<Expr>) -> Stmt {
        let values = if self.k.lds[l].elem == Ty::F32 {
            values
                .into_iter()
                .map(|v| Expr::Bitcast(Ty::F32, Box::new(v)))
                .collect()
        } else {
            values
        };
        store(self.lds_at(l, index), values)
    }

    /// A load of u32 registers `dst` from LDS array `l` at `index`, through f32 registers and
    /// reinterpreted where `l` is an f32 array (see [`Lowering::store_words`]).
    pub fn load_words(&mut self, dst: Vec<Reg>, l: Lds, index: Expr) -> Vec<Stmt> {
        if self.k.lds[l].elem != Ty::F32 {
            return vec![load(dst, self.lds_at(l, index))];
        }
        let f: Vec<Reg> = dst
            .iter()
            .map(|_| self.k.reg(Ty::F32, "lds_bits"))
            .collect();
        let mut out = vec![load(f.clone(), self.lds_at(l, index))];
        for (&d, &fr) in dst.iter().zip(&f) {
            out.push(assign(d, Expr::Bitcast(Ty::U32, Box::new(r(fr)))));
        }
        out
    }
}

/// Whether [`Schedule::stripe_workgroups`] shapes this kernel's grid: asked for, and the kernel
/// has a GPTQ INT4 GEMV off the q8 path (elsewhere the field is ignored,
/// [`Schedule::ignored_fields`]).
pub(super) fn stripe_applies(plan: &Plan<'_>, s: &Schedule) -> bool {
    s.stripe_workgroups > 0
        && plan
            .gemv
            .as_ref()
            .is_some_and(|g| g.q8.is_none() && matches!(g.weight.format, WeightFormat::Gptq(_)))
}
