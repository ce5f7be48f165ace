//! A lockstep interpreter of lowered kernels, for numeric checks of the lowering against the f64
//! reference. Every lane of every workgroup of every rank executes each statement together (with
//! masks for `if` and `for`), memory is sequentially consistent, and a bounded wait that is not
//! already satisfied when reached is reported (in lockstep every publish that precedes a wait
//! in program order has happened, so an unsatisfied wait is a protocol bug). It checks values,
//! not visibility: the protocol simulator does that.

#![allow(dead_code)]

use wavefuse_codegen::lowered::*;

/// A lane's value.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum V {
    B(bool),
    I8(i8),
    I32(i32),
    U32(u32),
    /// An f32 exactly representable in FP16.
    F16(f32),
    F32(f32),
}

impl V {
    pub fn zero(t: Ty) -> V {
        match t {
            Ty::Bool => V::B(false),
            Ty::I8 => V::I8(0),
            Ty::I32 => V::I32(0),
            Ty::U32 => V::U32(0),
            Ty::F16 => V::F16(0.0),
            Ty::F32 => V::F32(0.0),
        }
    }

    pub fn poison(t: Ty) -> V {
        match t {
            Ty::F16 => V::F16(f32::NAN),
            Ty::F32 => V::F32(f32::NAN),
            other => V::zero(other),
        }
    }

    pub fn f(self) -> f64 {
        match self {
            V::F16(x) | V::F32(x) => f64::from(x),
            V::I8(x) => f64::from(x),
            V::I32(x) => f64::from(x),
            V::U32(x) => f64::from(x),
            V::B(b) => f64::from(u8::from(b)),
        }
    }

    fn u(self) -> u32 {
        match self {
            V::U32(x) => x,
            other => panic!("expected u32, found {other:?}"),
        }
    }

    fn b(self) -> bool {
        match self {
            V::B(x) => x,
            other => panic!("expected bool, found {other:?}"),
        }
    }

    fn int(self) -> i64 {
        match self {
            V::I8(x) => i64::from(x),
            V::I32(x) => i64::from(x),
            V::U32(x) => i64::from(x),
            V::B(b) => i64::from(b),
            other => panic!("expected an integer, found {other:?}"),
        }
    }
}

/// f32 → FP16 bits, round to nearest even.
pub fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let (q, rem, halfway) = (m >> shift, m & ((1 << shift) - 1), 1u32 << (shift - 1));
        let r = if rem > halfway || (rem == halfway && q & 1 == 1) {
            q + 1
        } else {
            q
        };
        return sign | r as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}

/// FP16 bits → f32.
pub fn f16_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0 => sign * man as f32 * 2f32.powi(-24),
        31 if man == 0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => f32::from_bits((u32::from(h & 0x8000) << 16) | ((exp + 112) << 23) | (man << 13)),
    }
}

pub fn round_f16(x: f32) -> f32 {
    f16_value(f16_bits(x))
}

/// The two FP16 values of a packed pair, low half first.
fn unpack(v: u32) -> [f32; 2] {
    [f16_value(v as u16), f16_value((v >> 16) as u16)]
}

fn bitcast(t: Ty, v: V) -> V {
    let bits = match v {
        V::U32(x) => x,
        V::I32(x) => x as u32,
        V::F32(x) => x.to_bits(),
        v => panic!("bitcast of {v:?}"),
    };
    match t {
        Ty::U32 => V::U32(bits),
        Ty::I32 => V::I32(bits as i32),
        Ty::F32 => V::F32(f32::from_bits(bits)),
        t => panic!("bitcast to {t:?}"),
    }
}

fn cast(t: Ty, v: V) -> V {
    let fl = match v {
        V::F16(x) | V::F32(x) => Some(x),
        _ => None,
    };
    match (t, fl) {
        (Ty::F32, Some(x)) => V::F32(x),
        (Ty::F16, Some(x)) => V::F16(round_f16(x)),
        (Ty::F32, None) => V::F32(v.int() as f32),
        (Ty::F16, None) => V::F16(round_f16(v.int() as f32)),
        (Ty::I32, Some(x)) => V::I32(x as i32),
        (Ty::U32, Some(x)) => V::U32(x as u32),
        (Ty::I8, Some(x)) => V::I8(x as i8),
        (Ty::I32, None) => V::I32(v.int() as i32),
        (Ty::U32, None) => V::U32(v.int() as u32),
        (Ty::I8, None) => V::I8(v.int() as i8),
        (Ty::Bool, _) => panic!("cast to bool"),
    }
}

fn bin(op: BinOp, a: V, b: V) -> V {
    use BinOp::*;
    match (a, b) {
        (V::U32(x), V::U32(y)) => match op {
            Add => V::U32(x.wrapping_add(y)),
            Sub => V::U32(x.wrapping_sub(y)),
            Mul => V::U32(x.wrapping_mul(y)),
            Div => V::U32(x / y),
            Rem => V::U32(x % y),
            Min => V::U32(x.min(y)),
            Max => V::U32(x.max(y)),
            And => V::U32(x & y),
            Or => V::U32(x | y),
            Xor => V::U32(x ^ y),
            Shl => V::U32(x.wrapping_shl(y)),
            Shr => V::U32(x.wrapping_shr(y)),
            Lt => V::B(x < y),
            Le => V::B(x <= y),
            Eq => V::B(x == y),
            Ne => V::B(x != y),
            Ge => V::B(x >= y),
            Gt => V::B(x > y),
        },
        (V::I32(x), V::I32(y)) => match op {
            Add => V::I32(x.wrapping_add(y)),
            Sub => V::I32(x.wrapping_sub(y)),
            Mul => V::I32(x.wrapping_mul(y)),
            Div => V::I32(x / y),
            Rem => V::I32(x % y),
            Min => V::I32(x.min(y)),
            Max => V::I32(x.max(y)),
            And => V::I32(x & y),
            Or => V::I32(x | y),
            Xor => V::I32(x ^ y),
            Shl => V::I32(x.wrapping_shl(y as u32)),
            Shr => V::I32(x.wrapping_shr(y as u32)),
            Lt => V::B(x < y),
            Le => V::B(x <= y),
            Eq => V::B(x == y),
            Ne => V::B(x != y),
            Ge => V::B(x >= y),
            Gt => V::B(x > y),
        },
        (V::B(x), V::B(y)) => match op {
            And => V::B(x && y),
            Or => V::B(x || y),
            Xor | Ne => V::B(x != y),
            Eq => V::B(x == y),
            _ => panic!("{op:?} on bools"),
        },
        (V::F32(x), V::F32(y)) => fbin(op, x, y, V::F32),
        (V::F16(x), V::F16(y)) => fbin(op, x, y, |r| V::F16(round_f16(r))),
        (a, b) => panic!("{op:?} on {a:?} and {b:?}"),
    }
}

fn fbin(op: BinOp, x: f32, y: f32, mk: impl Fn(f32) -> V) -> V {
    use BinOp::*;
    match op {
        Add => mk(x + y),
        Sub => mk(x - y),
        Mul => mk(x * y),
        Div => mk(x / y),
        Rem => mk(x % y),
        Min => mk(x.min(y)),
        Max => mk(x.max(y)),
        Lt => V::B(x < y),
        Le => V::B(x <= y),
        Eq => V::B(x == y),
        Ne => V::B(x != y),
        Ge => V::B(x >= y),
        Gt => V::B(x > y),
        _ => panic!("{op:?} on floats"),
    }
}

/// Per-rank memory: one array per parameter (empty for scalars), and scalar values.
pub struct RankMem {
    pub arrays: Vec<Vec<V>>,
    pub scalars: Vec<Option<V>>,
}

pub struct Machine<'k> {
    pub k: &'k LoweredKernel,
    pub ranks: Vec<RankMem>,
    lds: Vec<Vec<Vec<V>>>,
    regs: Vec<Vec<V>>,
    wg: usize,
    grid: usize,
    wave: usize,
}

/// Thread t → (rank, workgroup, lane).
fn split(t: usize, grid: usize, wg: usize) -> (usize, usize, usize) {
    (t / (grid * wg), (t / wg) % grid, t % wg)
}

impl<'k> Machine<'k> {
    /// Memory for `tp` ranks with every array zeroed (outputs poisoned with NaN).
    pub fn new(k: &'k LoweredKernel) -> Self {
        let tp = k.tp as usize;
        let ranks = (0..tp)
            .map(|_| RankMem {
                arrays: k
                    .params
                    .values()
                    .map(|d| match &d.kind {
                        ParamKind::Array {
                            elem,
                            len,
                            access: Access::Write,
                            ..
                        } => vec![V::poison(*elem); *len],
                        ParamKind::Array { elem, len, .. }
                        | ParamKind::PeerArrays { elem, len, .. } => vec![V::zero(*elem); *len],
                        ParamKind::Scalar { .. } => vec![],
                    })
                    .collect(),
                scalars: vec![None; k.params.len()],
            })
            .collect();
        let (wg, grid) = (k.workgroup_size as usize, k.grid as usize);
        Machine {
            k,
            ranks,
            lds: vec![],
            regs: vec![],
            wg,
            grid,
            wave: k.wave_size() as usize,
        }
    }

    fn threads(&self) -> usize {
        self.ranks.len() * self.grid * self.wg
    }

    /// Run one launch on every rank.
    pub fn launch(&mut self) -> Result<(), String> {
        let n = self.threads();
        self.regs = vec![vec![V::U32(0); self.k.regs.len()]; n];
        for (r, d) in self.k.regs.iter() {
            for t in 0..n {
                self.regs[t][r.as_u32() as usize] = V::zero(d.ty);
            }
        }
        self.lds = (0..self.ranks.len() * self.grid)
            .map(|_| {
                self.k
                    .lds
                    .values()
                    .map(|l| vec![V::F32(f32::NAN); l.len])
                    .collect()
            })
            .collect();
        let mask = vec![true; n];
        let body = self.k.body.clone();
        self.block(&body, &mask)
    }

    fn special(&self, s: Special, t: usize) -> u32 {
        let (_, w, l) = split(t, self.grid, self.wg);
        (match s {
            Special::LocalId => l,
            Special::WorkgroupId => w,
            Special::NumWorkgroups => self.grid,
            Special::LaneId => l % self.wave,
            Special::WaveId => l / self.wave,
        }) as u32
    }

    fn eval(&self, e: &Expr, t: usize) -> V {
        match e {
            Expr::Int(v, ty) => match ty {
                Ty::Bool => V::B(*v != 0),
                Ty::I8 => V::I8(*v as i8),
                Ty::I32 => V::I32(*v as i32),
                Ty::U32 => V::U32(*v as u32),
                _ => panic!("int constant of {ty:?}"),
            },
            Expr::Float(v, Ty::F16) => V::F16(round_f16(*v as f32)),
            Expr::Float(v, _) => V::F32(*v as f32),
            Expr::Reg(r) => self.regs[t][r.as_u32() as usize],
            Expr::Param(p) => {
                let (rank, _, _) = split(t, self.grid, self.wg);
                self.ranks[rank].scalars[p.as_u32() as usize]
                    .unwrap_or_else(|| panic!("scalar {p} not bound"))
            }
            Expr::Special(s) => V::U32(self.special(*s, t)),
            Expr::Bin(op, a, b) => bin(*op, self.eval(a, t), self.eval(b, t)),
            Expr::Un(op, a) => match (op, self.eval(a, t)) {
                (UnOp::Neg, V::F32(x)) => V::F32(-x),
                (UnOp::Neg, V::F16(x)) => V::F16(-x),
                (UnOp::Neg, V::I32(x)) => V::I32(x.wrapping_neg()),
                (UnOp::Abs, V::F32(x)) => V::F32(x.abs()),
                (UnOp::Abs, V::F16(x)) => V::F16(x.abs()),
                (UnOp::Abs, V::I32(x)) => V::I32(x.wrapping_abs()),
                (UnOp::Not, V::B(x)) => V::B(!x),
                (UnOp::Not, V::U32(x)) => V::U32(!x),
                (UnOp::Exp, V::F32(x)) => V::F32(x.exp()),
                (UnOp::Rsqrt, V::F32(x)) => V::F32(1.0 / x.sqrt()),
                (op, v) => panic!("{op:?} on {v:?}"),
            },
            Expr::Cast(ty, a) => cast(*ty, self.eval(a, t)),
            Expr::Bitcast(ty, a) => bitcast(*ty, self.eval(a, t)),
            Expr::Select(c, a, b) => {
                if self.eval(c, t).b() {
                    self.eval(a, t)
                } else {
                    self.eval(b, t)
                }
            }
            Expr::Bfe {
                value,
                offset,
                width,
            } => {
                let (v, o) = (self.eval(value, t).u(), self.eval(offset, t).u());
                let mask = if *width == 32 {
                    u32::MAX
                } else {
                    (1u32 << width) - 1
                };
                V::U32(v.wrapping_shr(o) & mask)
            }
            Expr::Fma(a, b, c) => match (self.eval(a, t), self.eval(b, t), self.eval(c, t)) {
                (V::F32(a), V::F32(b), V::F32(c)) => V::F32(a.mul_add(b, c)),
                other => panic!("fma on {other:?}"),
            },
            Expr::PackHalf2(a, b) => match (self.eval(a, t), self.eval(b, t)) {
                (V::F16(a), V::F16(b)) => {
                    V::U32(u32::from(f16_bits(a)) | (u32::from(f16_bits(b)) << 16))
                }
                other => panic!("pack_half2 on {other:?}"),
            },
            Expr::SubHalf2(a, b) => match (self.eval(a, t), self.eval(b, t)) {
                (V::U32(a), V::U32(b)) => {
                    let (x, y) = (unpack(a), unpack(b));
                    let d = |i: usize| u32::from(f16_bits(round_f16(x[i] - y[i])));
                    V::U32(d(0) | (d(1) << 16))
                }
                other => panic!("sub_half2 on {other:?}"),
            },
            Expr::FmaHalf2(a, b, c) => match (self.eval(a, t), self.eval(b, t), self.eval(c, t)) {
                (V::U32(a), V::U32(b), V::U32(c)) => {
                    let (x, y, z) = (unpack(a), unpack(b), unpack(c));
                    // a·b + c in f64, then one rounding to FP16 (through f32 only when exact:
                    // the decode's values are small integers and 1/16).
                    let d = |i: usize| {
                        let v = f64::from(x[i]) * f64::from(y[i]) + f64::from(z[i]);
                        assert_eq!(
                            v,
                            f64::from(v as f32),
                            "fma_half2 operands beyond the test's exact range"
                        );
                        u32::from(f16_bits(round_f16(v as f32)))
                    };
                    V::U32(d(0) | (d(1) << 16))
                }
                other => panic!("fma_half2 on {other:?}"),
            },
            Expr::Dot4I8(a, b, c) => match (self.eval(a, t), self.eval(b, t), self.eval(c, t)) {
                (V::U32(a), V::U32(b), V::I32(c)) => {
                    let byte = |w: u32, i: u32| i32::from((w >> (8 * i)) as u8 as i8);
                    let dot: i32 = (0..4).map(|i| byte(a, i) * byte(b, i)).sum();
                    V::I32(c.wrapping_add(dot))
                }
                other => panic!("dot4_i8 on {other:?}"),
            },
            Expr::Dot2F16(a, b, c) => match (self.eval(a, t), self.eval(b, t), self.eval(c, t)) {
                (V::U32(a), V::U32(b), V::F32(c)) => {
                    let (x, y) = (unpack(a), unpack(b));
                    // Two FP16 products (exact in f64) and c, one rounding to f32.
                    let v = f64::from(x[0]) * f64::from(y[0])
                        + f64::from(x[1]) * f64::from(y[1])
                        + f64::from(c);
                    V::F32(v as f32)
                }
                other => panic!("dot2_f16 on {other:?}"),
            },
        }
    }

    /// The array a reference reaches from thread t, and the element index.
    fn locate(&self, m: &MemRef, t: usize) -> (Loc, usize) {
        let (rank, w, _) = split(t, self.grid, self.wg);
        let index = self.eval(&m.index, t).u() as usize;
        let loc = match &m.base {
            Base::Param(p) => Loc::Global(rank, p.as_u32() as usize),
            Base::Peer { param, rank: r } => {
                Loc::Global(self.eval(r, t).u() as usize, param.as_u32() as usize)
            }
            Base::Lds(l) => Loc::Lds(rank * self.grid + w, l.as_u32() as usize),
        };
        (loc, index)
    }

    fn array(&mut self, loc: Loc) -> &mut Vec<V> {
        match loc {
            Loc::Global(r, p) => &mut self.ranks[r].arrays[p],
            Loc::Lds(g, l) => &mut self.lds[g][l],
        }
    }

    fn block(&mut self, block: &[Stmt], mask: &[bool]) -> Result<(), String> {
        for s in block {
            self.stmt(s, mask)?;
        }
        Ok(())
    }

    fn active(mask: &[bool]) -> impl Iterator<Item = usize> + '_ {
        mask.iter().enumerate().filter(|(_, m)| **m).map(|(t, _)| t)
    }

    fn stmt(&mut self, s: &Stmt, mask: &[bool]) -> Result<(), String> {
        match s {
            Stmt::Assign { dst, value } => {
                let vals: Vec<_> = Self::active(mask)
                    .map(|t| (t, self.eval(value, t)))
                    .collect();
                for (t, v) in vals {
                    self.regs[t][dst.as_u32() as usize] = v;
                }
            }
            Stmt::Load { dst, mem } => {
                for t in Self::active(mask).collect::<Vec<_>>() {
                    let (loc, i) = self.locate(mem, t);
                    let arr = self.array(loc);
                    if i + dst.len() > arr.len() {
                        return Err(format!(
                            "load out of bounds: {loc:?}[{i}..+{}] of {}",
                            dst.len(),
                            arr.len()
                        ));
                    }
                    let vals: Vec<V> = arr[i..i + dst.len()].to_vec();
                    for (d, v) in dst.iter().zip(vals) {
                        self.regs[t][d.as_u32() as usize] = v;
                    }
                }
            }
            Stmt::Store { mem, values } => {
                for t in Self::active(mask).collect::<Vec<_>>() {
                    let (loc, i) = self.locate(mem, t);
                    let vals: Vec<V> = values.iter().map(|e| self.eval(e, t)).collect();
                    let arr = self.array(loc);
                    if i + vals.len() > arr.len() {
                        return Err(format!(
                            "store out of bounds: {loc:?}[{i}..+{}] of {}",
                            vals.len(),
                            arr.len()
                        ));
                    }
                    arr[i..i + vals.len()].copy_from_slice(&vals);
                }
            }
            // Synchronously (one of the executions the statement allows); commit and wait
            // then have nothing to do.
            Stmt::AsyncCopy { dst, src, words } => {
                for t in Self::active(mask).collect::<Vec<_>>() {
                    let (from, i) = self.locate(src, t);
                    let (to, j) = self.locate(dst, t);
                    let arr = self.array(from);
                    let n = match arr.get(i) {
                        Some(V::F16(_)) => *words as usize * 2,
                        _ => *words as usize,
                    };
                    if i + n > arr.len() {
                        return Err(format!("copy out of bounds: {from:?}[{i}..+{n}]"));
                    }
                    let vals: Vec<V> = arr[i..i + n].to_vec();
                    let out = self.array(to);
                    if j + n > out.len() {
                        return Err(format!("copy out of bounds: {to:?}[{j}..+{n}]"));
                    }
                    out[j..j + n].copy_from_slice(&vals);
                }
            }
            Stmt::AsyncCommit | Stmt::AsyncWait { .. } => {}
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let v = var.as_u32() as usize;
                for t in Self::active(mask).collect::<Vec<_>>() {
                    self.regs[t][v] = self.eval(start, t);
                }
                loop {
                    let live: Vec<bool> = (0..mask.len())
                        .map(|t| mask[t] && self.regs[t][v].u() < self.eval(end, t).u())
                        .collect();
                    if !live.iter().any(|&l| l) {
                        break;
                    }
                    self.block(body, &live)?;
                    for t in Self::active(&live).collect::<Vec<_>>() {
                        let next = self.regs[t][v].u() + self.eval(step, t).u();
                        self.regs[t][v] = V::U32(next);
                    }
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let c: Vec<bool> = (0..mask.len())
                    .map(|t| mask[t] && self.eval(cond, t).b())
                    .collect();
                let e: Vec<bool> = (0..mask.len()).map(|t| mask[t] && !c[t]).collect();
                if c.iter().any(|&x| x) {
                    self.block(then_body, &c)?;
                }
                if e.iter().any(|&x| x) {
                    self.block(else_body, &e)?;
                }
            }
            Stmt::WorkgroupBarrier
            | Stmt::Fence { .. }
            | Stmt::Comment(_)
            | Stmt::SchedBarrier
            | Stmt::StreamWait
            | Stmt::PrefetchL2 { .. } => {}
            Stmt::Atomic {
                dst,
                op,
                mem,
                value,
                ..
            } => {
                for t in Self::active(mask).collect::<Vec<_>>() {
                    let (loc, i) = self.locate(mem, t);
                    let v = value.as_ref().map(|e| self.eval(e, t));
                    let arr = self.array(loc);
                    let old = arr[i];
                    arr[i] = match (op, v) {
                        (AtomicOp::Load, _) => old,
                        (AtomicOp::Store, Some(v)) => v,
                        (AtomicOp::Add, Some(v)) => bin(BinOp::Add, old, v),
                        (AtomicOp::Max, Some(v)) => bin(BinOp::Max, old, v),
                        _ => return Err("atomic without operand".into()),
                    };
                    if let Some(d) = dst {
                        self.regs[t][d.as_u32() as usize] = old;
                    }
                }
            }
            Stmt::WaitGe {
                mem, target, code, ..
            } => {
                for t in Self::active(mask).collect::<Vec<_>>() {
                    let (loc, i) = self.locate(mem, t);
                    let target = self.eval(target, t).u();
                    let v = self.array(loc)[i].u();
                    if (v.wrapping_sub(target) as i32) < 0 {
                        return Err(format!(
                            "wait {code} not satisfied in lockstep: {loc:?}[{i}] = {v} < {target} (thread {t})"
                        ));
                    }
                }
            }
            Stmt::MmaF16 { acc, a, b } => {
                // The PTX m16n8k16 fragment layout (see Stmt::MmaF16), written out independently
                // of the simulator's version.
                let n = mask.len();
                for w0 in (0..n).step_by(self.wave) {
                    let lanes: Vec<usize> = (w0..w0 + self.wave).filter(|&t| mask[t]).collect();
                    if lanes.is_empty() {
                        continue;
                    }
                    assert_eq!(lanes.len(), 32, "mma with a partial warp");
                    let word = |t: usize, r: Reg| match self.regs[t][r.as_u32() as usize] {
                        V::U32(x) => unpack(x),
                        v => panic!("mma operand {v:?}"),
                    };
                    let (mut am, mut bm) = ([[0f64; 16]; 16], [[0f64; 8]; 16]);
                    for (l, &t) in lanes.iter().enumerate() {
                        let (g, q) = (l / 4, l % 4);
                        let rows = [g, g + 8, g, g + 8];
                        let cols = [2 * q, 2 * q, 2 * q + 8, 2 * q + 8];
                        for i in 0..4 {
                            let p = word(t, a[i]);
                            am[rows[i]][cols[i]] = f64::from(p[0]);
                            am[rows[i]][cols[i] + 1] = f64::from(p[1]);
                        }
                        for (i, k) in [2 * q, 2 * q + 8].into_iter().enumerate() {
                            let p = word(t, b[i]);
                            bm[k][g] = f64::from(p[0]);
                            bm[k + 1][g] = f64::from(p[1]);
                        }
                    }
                    let mut out = vec![[0f32; 4]; 32];
                    for (l, &t) in lanes.iter().enumerate() {
                        let (g, q) = (l / 4, l % 4);
                        let at = [
                            (g, 2 * q),
                            (g, 2 * q + 1),
                            (g + 8, 2 * q),
                            (g + 8, 2 * q + 1),
                        ];
                        for (i, &(row, col)) in at.iter().enumerate() {
                            let dot: f64 = (0..16).map(|k| am[row][k] * bm[k][col]).sum();
                            let c = match self.regs[t][acc[i].as_u32() as usize] {
                                V::F32(c) => c,
                                v => panic!("mma accumulator {v:?}"),
                            };
                            out[l][i] = (f64::from(c) + dot) as f32;
                        }
                    }
                    for (l, &t) in lanes.iter().enumerate() {
                        for i in 0..4 {
                            self.regs[t][acc[i].as_u32() as usize] = V::F32(out[l][i]);
                        }
                    }
                }
            }
            Stmt::WaveReduce { dst, op, value } => {
                let n = mask.len();
                for w0 in (0..n).step_by(self.wave) {
                    let lanes: Vec<usize> = (w0..w0 + self.wave).filter(|&t| mask[t]).collect();
                    if lanes.is_empty() {
                        continue;
                    }
                    let vals: Vec<V> = lanes.iter().map(|&t| self.eval(value, t)).collect();
                    let r = vals[1..].iter().fold(vals[0], |acc, &v| match op {
                        ReduceKind::Sum => bin(BinOp::Add, acc, v),
                        ReduceKind::Max => bin(BinOp::Max, acc, v),
                    });
                    for &t in &lanes {
                        self.regs[t][dst.as_u32() as usize] = r;
                    }
                }
            }
            Stmt::GridBarrier { .. }
            | Stmt::PublishFlag { .. }
            | Stmt::WaitFlag { .. }
            | Stmt::WaitFlagPerLane { .. } => {
                return Err("unexpanded synchronisation object".into());
            }
        }
        Ok(())
    }
}

#[derive(Copy, Clone, Debug)]
enum Loc {
    Global(usize, usize),
    Lds(usize, usize),
}
