//! The writer: kernel signature, declarations, control flow, and assembly of the file.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use cranelift_entity::SecondaryMap;

use crate::lowered::{
    Access, Base, Block, Expr, Lds, LoweredInfo, LoweredKernel, MemRef, Param, ParamKind, Purpose,
    ReduceKind, Reg, Stmt, Ty,
};

use super::{Dialect, Error, Level, Names, expr_ty};

/// Writes one lowered kernel in dialect `D`.
pub struct Writer<'k, D> {
    pub(super) k: &'k LoweredKernel,
    /// The validator's facts about `k` (types, atomically accessed parameters).
    pub(super) info: &'k LoweredInfo,
    pub(super) d: D,
    pub(super) names: Names,
    /// Helper functions used by the body, by name (printed in this order).
    pub(super) helpers: std::cell::RefCell<BTreeMap<String, String>>,
    /// Induction variables declared in their `for` header (defined and used only there).
    loop_local: HashSet<Reg>,
    /// The LDS arrays that asynchronous copies fill, where the dialect addresses them by a
    /// 32-bit shared address declared once ([`Dialect::shared_address`]).
    pub(super) shared_addressed: Vec<Lds>,
    /// The body being written.
    pub(super) out: String,
    /// Writing the ranks entry ([`Writer::with_ranks_entry`]): the workgroup is `wf_wg`, the
    /// grid the kernel's own.
    pub(super) ranks_entry: bool,
    /// Whether the file also holds the ranks entry.
    want_ranks_entry: bool,
}

/// The workgroup within its rank's grid, in the ranks entry.
pub(super) const WF_WG: &str = "wf_wg";
/// The rank a workgroup of the ranks entry runs for.
const WF_RANK: &str = "wf_rank";

/// The symbol of `symbol`'s ranks entry ([`Writer::with_ranks_entry`]).
pub fn ranks_symbol(symbol: &str) -> String {
    format!("{symbol}_ranks")
}

/// The identifier of rank `r`'s copy of the per-rank array parameter `name` in the ranks entry.
fn rank_param(name: &str, r: u32) -> String {
    format!("wf_r{r}_{name}")
}

impl<'k, D: Dialect> Writer<'k, D> {
    /// A writer for `k`, whose facts are `info` ([`validate`](crate::lowered::validate::validate)'s
    /// result, or [`LoweredInfo::derive`]).
    pub fn new(k: &'k LoweredKernel, info: &'k LoweredInfo, d: D) -> Self {
        // Where the dialect has no asynchronous copy it declares no shared address either and
        // the copies fall back to synchronous ones (`Writer::async_copy`).
        let shared_addressed = async_copy_targets(&k.body);
        Writer {
            k,
            info,
            d,
            names: Names::new(k),
            helpers: Default::default(),
            loop_local: loop_local_regs(&k.body),
            shared_addressed,
            out: String::new(),
            ranks_entry: false,
            want_ranks_entry: false,
        }
    }

    /// The file also holds the kernel's *ranks entry*, `<symbol>_ranks` ([`ranks_symbol`]): the
    /// same body for the ranks of a TP group that share one device, launched once as a grid of
    /// `tp × grid` workgroups (the runtime's fused-grid launch): workgroup `b` runs workgroup
    /// `b mod grid` of rank `b / grid`. Each per-rank array parameter is passed `tp` times, in
    /// rank order (`wf_r<r>_<name>`), the rank scalar is not passed (it is `b / grid`), and peer
    /// tables and the other scalars are passed once, in ABI order: see
    /// [`Abi::ranks_symbol`](crate::abi::Abi::ranks_symbol). One launch instead of one per rank
    /// on its own stream: no fork and join of streams per call.
    pub fn with_ranks_entry(mut self, on: bool) -> Self {
        self.want_ranks_entry = on && self.k.tp > 1;
        self
    }

    /// The whole source file.
    pub fn write(mut self) -> Result<String, Error> {
        self.check_launch()?;
        let k = self.k;
        self.block(&k.body, Level::TOP.next())?;
        let body = std::mem::take(&mut self.out);
        let mut f = String::new();
        self.header(&mut f);
        for inc in self.d.includes() {
            let _ = writeln!(f, "#include <{inc}>");
        }
        if !self.d.includes().is_empty() {
            f.push('\n');
        }
        if !self.d.prelude().is_empty() {
            f.push_str(self.d.prelude());
            f.push('\n');
        }
        for def in self.helpers.borrow().values() {
            f.push_str(def);
            f.push('\n');
        }
        self.signature(&mut f)?;
        f.push_str("{\n");
        let (open, close) = self.stream_order()?;
        f.push_str(&open);
        self.declarations(&mut f)?;
        f.push_str(&body);
        f.push_str(&close);
        f.push_str("}\n");
        if self.want_ranks_entry {
            self.ranks_entry = true;
            self.block(&k.body, Level::TOP.next())?;
            let body = std::mem::take(&mut self.out);
            f.push('\n');
            self.ranks_signature(&mut f)?;
            f.push_str("{\n");
            f.push_str(&open);
            self.ranks_prologue(&mut f)?;
            self.declarations(&mut f)?;
            f.push_str(&body);
            f.push_str(&close);
            f.push_str("}\n");
        }
        Ok(f)
    }

    /// Whether parameter `p` is passed once per rank in the ranks entry (an array of the
    /// executing rank's), once (a peer table, a scalar), or not at all (the rank).
    fn ranks_copies(&self, p: Param) -> u32 {
        match &self.k.params[p].kind {
            ParamKind::Array { .. } => self.k.tp,
            ParamKind::Scalar {
                purpose: Purpose::Rank,
                ..
            } => 0,
            ParamKind::PeerArrays { .. } | ParamKind::Scalar { .. } => 1,
        }
    }

    /// The ranks entry's signature ([`Writer::with_ranks_entry`]).
    fn ranks_signature(&self, f: &mut String) -> Result<(), Error> {
        let _ = writeln!(
            f,
            "// The ranks entry: all {tp} ranks sharing one device in one launch of {tp} x {grid} \
             workgroups\n// (workgroup b runs workgroup b % {grid} of rank b / {grid}); each \
             per-rank array once per rank, in rank order.",
            tp = self.k.tp,
            grid = self.k.grid
        );
        let attrs = self
            .d
            .launch_attributes(self.k.workgroup_size, self.k.min_resident_per_cu);
        let _ = writeln!(f, "extern \"C\" __global__ void {attrs}");
        let _ = write!(f, "{}(", ranks_symbol(&self.names.symbol));
        let mut decls = Vec::new();
        for p in self.k.params.keys() {
            let decl = self.param_decl(p)?;
            let name = self.names.param(p);
            match self.ranks_copies(p) {
                0 => {}
                1 => decls.push(decl),
                n => {
                    // `decl` ends with the name: each rank's copy is renamed.
                    let stem = &decl[..decl.len() - name.len()];
                    decls.extend((0..n).map(|r| format!("{stem}{}", rank_param(name, r))));
                }
            }
        }
        if decls.is_empty() {
            f.push_str(")\n");
        }
        let n = decls.len();
        for (i, d) in decls.iter().enumerate() {
            let sep = if i + 1 == n { ")\n" } else { "," };
            let _ = write!(f, "\n    {d}{sep}");
        }
        Ok(())
    }

    /// The ranks entry's first statements: the rank and the workgroup within its grid, the rank
    /// scalar, and each per-rank array parameter as the executing rank's copy.
    fn ranks_prologue(&self, f: &mut String) -> Result<(), Error> {
        let lvl = Level::TOP.next();
        let grid = self.k.grid;
        let _ = writeln!(f, "{lvl}const unsigned {WF_RANK} = blockIdx.x / {grid}u;");
        let _ = writeln!(
            f,
            "{lvl}const unsigned {WF_WG} = blockIdx.x - {WF_RANK} * {grid}u;"
        );
        for p in self.k.params.keys() {
            let name = self.names.param(p);
            match self.ranks_copies(p) {
                0 => {
                    let _ = writeln!(f, "{lvl}{} = {WF_RANK};", self.param_decl(p)?);
                }
                1 => {}
                n => {
                    // A chain of selects on a uniform value: no indexing of the parameter space.
                    let mut pick = rank_param(name, n - 1);
                    for r in (0..n - 1).rev() {
                        pick = format!("{WF_RANK} == {r}u ? {} : ({pick})", rank_param(name, r));
                    }
                    let _ = writeln!(f, "{lvl}{} = {pick};", self.param_decl(p)?);
                }
            }
        }
        Ok(())
    }

    /// Launch shapes the dialect and the writer can express.
    fn check_launch(&self) -> Result<(), Error> {
        let (k, wave) = (self.k, self.k.wave_size());
        let max = k.arch.max_workgroup_size();
        if k.workgroup_size == 0 || k.workgroup_size > max || k.workgroup_size % wave != 0 {
            return Err(Error::Unsupported(format!(
                "{}: workgroup size {} (must be a multiple of the wave size {wave}, at most {max})",
                k.arch, k.workgroup_size
            )));
        }
        if k.grid == 0 {
            return Err(Error::Malformed("empty grid".into()));
        }
        let lds = k.lds_bytes();
        let max = if k.lds_is_dynamic() {
            k.arch.max_lds_per_workgroup() as usize
        } else {
            self.d.max_static_lds_bytes()
        };
        if lds > max {
            return Err(Error::Unsupported(format!(
                "{}: {lds} bytes of LDS (at most {max})",
                k.arch
            )));
        }
        Ok(())
    }

    fn header(&self, f: &mut String) {
        let k = self.k;
        let lang = self.d.language().name();
        let _ = writeln!(
            f,
            "// Generated by wavefuse: kernel `{}` for {} ({lang}), TP = {}.",
            k.name, k.arch, k.tp
        );
        let lds = match k.dynamic_lds_layout() {
            Some((_, bytes)) => format!("{bytes} bytes of dynamic LDS"),
            None => format!("{} bytes of static LDS", k.lds_bytes()),
        };
        let _ = writeln!(
            f,
            "// Launch per rank: {} workgroups x {} lanes (wave{}), {lds}.",
            k.grid,
            k.workgroup_size,
            k.wave_size(),
        );
        if let Some(c) = &k.coresidency {
            let _ = writeln!(
                f,
                "// All {} workgroups must be resident at once (grid barrier, DESIGN.md §5.9).",
                c.workgroups
            );
        }
        let _ = writeln!(
            f,
            "// Arguments, their binding and alignment: {}.abi.toml. Do not edit; regenerate.\n",
            self.names.symbol
        );
    }

    fn signature(&self, f: &mut String) -> Result<(), Error> {
        let attrs = self
            .d
            .launch_attributes(self.k.workgroup_size, self.k.min_resident_per_cu);
        let _ = writeln!(f, "extern \"C\" __global__ void {attrs}");
        let _ = write!(f, "{}(", self.names.symbol);
        let n = self.k.params.len();
        if n == 0 {
            f.push_str(")\n");
        }
        for (i, (p, d)) in self.k.params.iter().enumerate() {
            let sep = if i + 1 == n { ")" } else { "," };
            let _ = write!(
                f,
                "\n    {}{sep} // {}",
                self.param_decl(p)?,
                if self.k.epoch_state == Some(p) {
                    format!(
                        "u32[{}] read_write, device epoch: launches completed, one word per workgroup (zeroed once)",
                        self.k.grid
                    )
                } else {
                    param_note(&d.kind)
                }
            );
            if i + 1 == n {
                f.push('\n');
            }
        }
        Ok(())
    }

    /// `const T* __restrict__ name`, `T* const* __restrict__ name` or `const T name`.
    fn param_decl(&self, p: Param) -> Result<String, Error> {
        let name = self.names.param(p);
        // Parameters accessed atomically: never `const`, never `__restrict__`.
        let atomic = self.info.is_atomic(p);
        Ok(match &self.k.params[p].kind {
            ParamKind::Array { elem, access, .. } => {
                let c = if *access == Access::Read && !atomic {
                    "const "
                } else {
                    ""
                };
                let restrict = if atomic { "" } else { " __restrict__" };
                format!("{c}{}*{restrict} {name}", self.ty(*elem)?)
            }
            ParamKind::PeerArrays { elem, access, .. } => {
                // The table is read-only and unaliased; the arrays it points to are not
                // `__restrict__`: peers write them concurrently, read only after an acquire.
                let c = if *access == Access::Read && !atomic {
                    "const "
                } else {
                    ""
                };
                let restrict = if self.d.restrict_peer_tables() {
                    " __restrict__"
                } else {
                    ""
                };
                format!("{c}{}* const*{restrict} {name}", self.ty(*elem)?)
            }
            ParamKind::Scalar { ty, .. } => format!("const {} {name}", self.ty(*ty)?),
        })
    }

    /// The stream-order statements of a kernel that may be launched as a programmatic dependent
    /// ([`LoweredKernel::stream_order_prologue`](crate::lowered::LoweredKernel::stream_order_prologue)):
    /// the first ones (before any declaration initialises or any memory is touched) and the last
    /// ones (after every statement of the body: generated kernels never return early, §5.8).
    fn stream_order(&self) -> Result<(String, String), Error> {
        // With a `Stmt::StreamWait` in the body, the wait and the signal are there.
        if !self.k.stream_order_prologue()
            || self.k.body.iter().any(|s| matches!(s, Stmt::StreamWait))
        {
            return Ok((String::new(), String::new()));
        }
        let Some((open, close)) = self.d.stream_order() else {
            return Err(Error::Unsupported(format!(
                "{}: no programmatic dependent launch",
                self.k.arch
            )));
        };
        let lvl = Level::TOP.next();
        let indent = |text: &str| {
            text.lines()
                .map(|l| format!("{lvl}{l}\n"))
                .collect::<String>()
        };
        Ok((indent(open), indent(close)))
    }

    fn declarations(&self, f: &mut String) -> Result<(), Error> {
        let lvl = Level::TOP.next();
        if let Some((offsets, bytes)) = self.k.dynamic_lds_layout() {
            // Past the static limit (sm_90: 48 KiB) one dynamic allocation of `bytes` (the ABI's
            // `dynamic_lds_bytes`, passed at launch) holds every array at its offset.
            let _ = writeln!(
                f,
                "{lvl}// {bytes} bytes of dynamic shared memory (the launch passes them): the LDS arrays at 16-byte offsets."
            );
            let _ = writeln!(
                f,
                "{lvl}alignas(16) extern __shared__ unsigned char wf_lds[];"
            );
            for (l, off) in offsets {
                let ty = self.ty(self.k.lds[l].elem)?;
                let _ = writeln!(
                    f,
                    "{lvl}{ty}* const {} = reinterpret_cast<{ty}*>(wf_lds + {off});",
                    self.names.lds(l),
                );
            }
        } else {
            for (l, d) in self.k.lds.iter() {
                // 16-byte alignment for the widest vector access (uint4).
                let _ = writeln!(
                    f,
                    "{lvl}alignas(16) __shared__ {} {}[{}];",
                    self.ty(d.elem)?,
                    self.names.lds(l),
                    d.len
                );
            }
        }
        for &l in &self.shared_addressed {
            let name = self.names.lds(l);
            if let Some(text) = self.d.shared_address(&shared_address_var(name), name) {
                let _ = writeln!(f, "{lvl}{text}");
            }
        }
        for (r, d) in self.k.regs.iter() {
            if !self.loop_local.contains(&r) {
                let _ = writeln!(
                    f,
                    "{lvl}{} {} = {};",
                    self.ty(d.ty)?,
                    self.names.reg(r),
                    zero(d.ty)
                );
            }
        }
        Ok(())
    }

    /// The C++ type of a lowered type.
    pub(super) fn ty(&self, t: Ty) -> Result<String, Error> {
        Ok(match t {
            Ty::Bool => "bool",
            Ty::I8 => "signed char",
            Ty::I32 => "int",
            Ty::U32 => "unsigned",
            Ty::F16 => self.d.f16_type(),
            Ty::F32 => "float",
        }
        .to_owned())
    }

    pub(super) fn line(&mut self, lvl: Level, text: &str) {
        let _ = writeln!(self.out, "{lvl}{text}");
    }

    pub(super) fn block(&mut self, stmts: &Block, lvl: Level) -> Result<(), Error> {
        for s in stmts {
            self.stmt(s, lvl)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt, lvl: Level) -> Result<(), Error> {
        match s {
            Stmt::Assign { dst, value } => self.assign(*dst, value, lvl),
            Stmt::Load { dst, mem } => self.load(dst, mem, lvl),
            Stmt::Store { mem, values } => self.store(mem, values, lvl),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.for_loop(*var, [start, end, step], body, lvl),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.if_else(cond, then_body, else_body, lvl),
            Stmt::WorkgroupBarrier => self.workgroup_barrier(lvl),
            Stmt::Atomic {
                dst,
                op,
                mem,
                value,
                ordering,
                scope,
                why,
            } => self.atomic(
                *dst,
                *op,
                mem,
                value.as_ref(),
                (*ordering, *scope),
                *why,
                lvl,
            ),
            Stmt::Fence {
                ordering,
                scope,
                why,
            } => self.fence(*ordering, *scope, *why, lvl),
            Stmt::WaitGe { .. } => self.wait_ge(s, lvl),
            Stmt::WaveReduce { dst, op, value } => self.wave_reduce(*dst, *op, value, lvl),
            Stmt::MmaF16 { acc, a, b } => {
                let regs = |rs: &[Reg]| {
                    rs.iter()
                        .map(|r| self.names.reg(*r).to_owned())
                        .collect::<Vec<_>>()
                };
                let text = self
                    .d
                    .mma_f16(&regs(acc), &regs(a), &regs(b))
                    .ok_or_else(|| {
                        Error::Unsupported(format!("{}: FP16 mma (m16n8k16)", self.k.arch))
                    })?;
                self.line(lvl, &text);
                Ok(())
            }
            Stmt::GridBarrier { .. }
            | Stmt::PublishFlag { .. }
            | Stmt::WaitFlag { .. }
            | Stmt::WaitFlagPerLane { .. } => Err(Error::Malformed(
                "grid barrier or flag not expanded; run lowered::expand::expand_sync first".into(),
            )),
            Stmt::Comment(c) => {
                for l in c.lines() {
                    self.line(lvl, &format!("// {l}"));
                }
                Ok(())
            }
            Stmt::SchedBarrier => {
                if let Some(text) = self.d.sched_barrier() {
                    self.line(lvl, text);
                }
                Ok(())
            }
            Stmt::PrefetchL2 { mem } => self.prefetch_l2(mem, lvl),
            Stmt::AsyncCopy { dst, src, words } => self.async_copy(dst, src, *words, lvl),
            Stmt::AsyncCommit => {
                if let Some(text) = self.d.async_commit() {
                    self.line(lvl, text);
                }
                Ok(())
            }
            Stmt::AsyncWait { pending } => {
                if let Some(text) = self.d.async_wait(*pending) {
                    self.line(lvl, &text);
                }
                Ok(())
            }
            Stmt::StreamWait => {
                let Some(text) = self.d.stream_wait_then_signal() else {
                    return Err(Error::Unsupported(format!(
                        "{}: no programmatic dependent launch",
                        self.k.arch
                    )));
                };
                for l in text.lines() {
                    self.line(lvl, l);
                }
                Ok(())
            }
        }
    }

    fn assign(&mut self, dst: Reg, value: &Expr, lvl: Level) -> Result<(), Error> {
        self.check_reg_ty(dst, value)?;
        let text = format!("{} = {};", self.names.reg(dst), self.expr(value)?);
        self.line(lvl, &text);
        Ok(())
    }

    /// `value` must have `dst`'s type: C++ would otherwise convert silently.
    pub(super) fn check_reg_ty(&self, dst: Reg, value: &Expr) -> Result<(), Error> {
        let (want, got) = (self.k.regs[dst].ty, expr_ty(self.info, value)?);
        if want == got {
            Ok(())
        } else {
            Err(Error::Malformed(format!(
                "{dst} is {} but is assigned a {} value",
                want.name(),
                got.name()
            )))
        }
    }

    fn for_loop(
        &mut self,
        var: Reg,
        [start, end, step]: [&Expr; 3],
        body: &Block,
        lvl: Level,
    ) -> Result<(), Error> {
        let v = self.names.reg(var).to_owned();
        let decl = if self.loop_local.contains(&var) {
            format!("{} ", self.ty(self.k.regs[var].ty)?)
        } else {
            String::new()
        };
        let inc = match step {
            Expr::Int(1, _) => format!("++{v}"),
            _ => format!("{v} += {}", self.expr(step)?),
        };
        let head = format!(
            "for ({decl}{v} = {}; {v} < {}; {inc}) {{",
            self.expr(start)?,
            self.expr(end)?
        );
        self.line(lvl, &head);
        self.block(body, lvl.next())?;
        self.line(lvl, "}");
        Ok(())
    }

    fn if_else(
        &mut self,
        cond: &Expr,
        then_body: &Block,
        else_body: &Block,
        lvl: Level,
    ) -> Result<(), Error> {
        let head = format!("if ({}) {{", self.expr(cond)?);
        self.line(lvl, &head);
        self.block(then_body, lvl.next())?;
        if !else_body.is_empty() {
            self.line(lvl, "} else {");
            self.block(else_body, lvl.next())?;
        }
        self.line(lvl, "}");
        Ok(())
    }

    fn wave_reduce(
        &mut self,
        dst: Reg,
        op: ReduceKind,
        value: &Expr,
        lvl: Level,
    ) -> Result<(), Error> {
        self.check_reg_ty(dst, value)?;
        let ty = self.k.regs[dst].ty;
        let helper = self.wave_reduce_helper(op, ty)?;
        let text = format!("{} = {helper}({});", self.names.reg(dst), self.expr(value)?);
        self.line(lvl, &text);
        Ok(())
    }

    /// `wf_wave_{sum,max}_{ty}`: a butterfly of shuffles over the wave, every lane ends with the
    /// result (bit-identical on every lane: each step adds the same two values, commuted).
    fn wave_reduce_helper(&mut self, op: ReduceKind, ty: Ty) -> Result<String, Error> {
        if !matches!(ty, Ty::F32 | Ty::U32 | Ty::I32) {
            return Err(Error::Unsupported(format!(
                "{}: wave reduction of {}",
                self.k.arch,
                ty.name()
            )));
        }
        let opname = match op {
            ReduceKind::Sum => "sum",
            ReduceKind::Max => "max",
        };
        let name = format!("wf_wave_{opname}_{}", ty.name());
        if self.helpers.borrow().contains_key(&name) {
            return Ok(name);
        }
        let cty = self.ty(ty)?;
        let wave = self.k.wave_size();
        let mut def = format!("static __device__ __forceinline__ {cty} {name}({cty} v) {{\n");
        let mut mask = wave / 2;
        while mask > 0 {
            let other = self.d.shuffle_xor("v", mask, wave);
            let step = match (op, ty) {
                (ReduceKind::Sum, _) => format!("v += {other};"),
                (ReduceKind::Max, Ty::F32) => format!("v = fmaxf(v, {other});"),
                (ReduceKind::Max, _) => format!("v = max(v, {other});"),
            };
            let _ = writeln!(def, "{}{step}", Level::TOP.next());
            mask /= 2;
        }
        let _ = writeln!(def, "{}return v;\n}}", Level::TOP.next());
        self.helpers.borrow_mut().insert(name.clone(), def);
        Ok(name)
    }
}

/// The zero of a type, for register declarations.
fn zero(t: Ty) -> &'static str {
    match t {
        Ty::Bool => "false",
        Ty::I8 | Ty::I32 => "0",
        Ty::U32 => "0u",
        Ty::F32 => "0.0f",
        Ty::F16 => "{}",
    }
}

fn param_note(kind: &ParamKind) -> String {
    let purpose = |p: &Purpose| match p {
        Purpose::Data { buffer, part } => format!("{buffer}.{part}"),
        Purpose::Scratch => "scratch".into(),
        Purpose::Counter => "arrival counter (monotonic, zeroed once)".into(),
        Purpose::Flags => "epoch flags".into(),
        Purpose::ErrorWord => "error word".into(),
        Purpose::Rank => "rank".into(),
        Purpose::Epoch => "epoch".into(),
        Purpose::Value => "value".into(),
    };
    match kind {
        ParamKind::Array {
            elem,
            len,
            access,
            purpose: p,
            ..
        } => {
            format!(
                "{}[{len}] {}, {}",
                elem.name(),
                access_name(*access),
                purpose(p)
            )
        }
        ParamKind::PeerArrays {
            elem,
            len,
            access,
            purpose: p,
        } => {
            format!(
                "peer table: {}[{len}] per rank, slot = rank; {}, {}",
                elem.name(),
                access_name(*access),
                purpose(p)
            )
        }
        ParamKind::Scalar { ty, purpose: p } => format!("{} {}", ty.name(), purpose(p)),
    }
}

pub(super) fn access_name(a: Access) -> &'static str {
    match a {
        Access::Read => "read",
        Access::Write => "write",
        Access::ReadWrite => "read_write",
    }
}

/// The name of the 32-bit shared address of the LDS array `array` ([`Dialect::shared_address`]).
pub(super) fn shared_address_var(array: &str) -> String {
    format!("{array}_sa")
}

/// The LDS arrays some [`Stmt::AsyncCopy`] writes, in order of first appearance.
fn async_copy_targets(body: &Block) -> Vec<Lds> {
    fn walk(block: &Block, out: &mut Vec<Lds>) {
        for s in block {
            match s {
                Stmt::AsyncCopy { dst, .. } => {
                    if let Base::Lds(l) = dst.base
                        && !out.contains(&l)
                    {
                        out.push(l);
                    }
                }
                Stmt::For { body, .. } => walk(body, out),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                _ => {}
            }
        }
    }
    let mut out = vec![];
    walk(body, &mut out);
    out
}

/// Registers that are the induction variable of exactly one loop and are mentioned nowhere
/// outside its body: they are declared in the `for` header.
fn loop_local_regs(body: &Block) -> HashSet<Reg> {
    let mut total = SecondaryMap::<Reg, u32>::new();
    count_block(body, &mut total);
    let mut out = HashSet::new();
    let mut loops = Vec::new();
    collect_loops(body, &mut loops);
    for (var, inner) in loops {
        let mut inside = SecondaryMap::<Reg, u32>::new();
        count_block(inner, &mut inside);
        if total[var] == inside[var] + 1 {
            out.insert(var);
        }
    }
    out
}

fn collect_loops<'b>(block: &'b Block, out: &mut Vec<(Reg, &'b Block)>) {
    for s in block {
        match s {
            Stmt::For { var, body, .. } => {
                out.push((*var, body));
                collect_loops(body, out);
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect_loops(then_body, out);
                collect_loops(else_body, out);
            }
            _ => {}
        }
    }
}

/// Occurrences of each register (definitions and uses).
fn count_block(block: &Block, n: &mut SecondaryMap<Reg, u32>) {
    for s in block {
        let reg = |r: Reg, n: &mut SecondaryMap<Reg, u32>| n[r] += 1;
        match s {
            Stmt::Assign { dst, value } => {
                reg(*dst, n);
                count_expr(value, n);
            }
            Stmt::Load { dst, mem } => {
                dst.iter().for_each(|r| reg(*r, n));
                count_mem(mem, n);
            }
            Stmt::Store { mem, values } => {
                count_mem(mem, n);
                values.iter().for_each(|v| count_expr(v, n));
            }
            Stmt::PrefetchL2 { mem } => count_mem(mem, n),
            Stmt::AsyncCopy { dst, src, .. } => {
                count_mem(dst, n);
                count_mem(src, n);
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                reg(*var, n);
                [start, end, step]
                    .into_iter()
                    .for_each(|e| count_expr(e, n));
                count_block(body, n);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                count_expr(cond, n);
                count_block(then_body, n);
                count_block(else_body, n);
            }
            Stmt::Atomic {
                dst, mem, value, ..
            } => {
                dst.iter().for_each(|r| reg(*r, n));
                count_mem(mem, n);
                value.iter().for_each(|v| count_expr(v, n));
            }
            Stmt::WaitGe {
                mem, target, error, ..
            } => {
                count_mem(mem, n);
                count_expr(target, n);
                count_mem(error, n);
            }
            Stmt::WaveReduce { dst, value, .. } => {
                reg(*dst, n);
                count_expr(value, n);
            }
            Stmt::MmaF16 { acc, a, b } => {
                acc.iter().chain(a).chain(b).for_each(|r| reg(*r, n));
            }
            Stmt::GridBarrier { counter: m, .. }
            | Stmt::PublishFlag { flag: m, .. }
            | Stmt::WaitFlag { flag: m, .. } => count_mem(m, n),
            Stmt::WaitFlagPerLane { flag, cond, .. } => {
                count_mem(flag, n);
                count_expr(cond, n);
            }
            Stmt::WorkgroupBarrier
            | Stmt::Fence { .. }
            | Stmt::Comment(_)
            | Stmt::SchedBarrier
            | Stmt::StreamWait
            | Stmt::AsyncCommit
            | Stmt::AsyncWait { .. } => {}
        }
    }
}

fn count_mem(m: &MemRef, n: &mut SecondaryMap<Reg, u32>) {
    if let Base::Peer { rank, .. } = &m.base {
        count_expr(rank, n);
    }
    count_expr(&m.index, n);
}

fn count_expr(e: &Expr, n: &mut SecondaryMap<Reg, u32>) {
    match e {
        Expr::Reg(r) => n[*r] += 1,
        Expr::Int(..) | Expr::Float(..) | Expr::Param(_) | Expr::Special(_) => {}
        Expr::Bin(_, a, b) => {
            count_expr(a, n);
            count_expr(b, n);
        }
        Expr::Un(_, a) | Expr::Cast(_, a) | Expr::Bitcast(_, a) => count_expr(a, n),
        Expr::PackHalf2(a, b) | Expr::SubHalf2(a, b) => {
            count_expr(a, n);
            count_expr(b, n);
        }
        Expr::FmaHalf2(a, b, c) | Expr::Dot2F16(a, b, c) | Expr::Dot4I8(a, b, c) => {
            count_expr(a, n);
            count_expr(b, n);
            count_expr(c, n);
        }
        Expr::Select(a, b, c) | Expr::Fma(a, b, c) => {
            count_expr(a, n);
            count_expr(b, n);
            count_expr(c, n);
        }
        Expr::Bfe { value, offset, .. } => {
            count_expr(value, n);
            count_expr(offset, n);
        }
    }
}
