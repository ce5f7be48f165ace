//! Scalar semantics of expressions on 32-bit patterns (see [`CExpr`]).
//!
//! Floats: `f32` arithmetic with one rounding per operation (`fma` fused); an `f16` operation is
//! computed in `f32` and rounded to binary16 (nearest even), which is what a device's f16 ALU
//! returns for add, mul, min, max and conversions. Integers wrap; shifts use the low five bits of
//! the count (as the hardware does); integer division by zero is a fault the engine reports.

use std::cell::Cell;

use crate::lowered::{BinOp, Special, Ty, UnOp};

use super::program::CExpr;

/// What an expression reads: the lane's registers, the rank's scalars, the hardware indices.
pub(super) struct Ctx<'a> {
    pub regs: &'a [u32],
    pub scalars: &'a [u32],
    /// local_id, wg_id, num_wgs, lane_id, wave_id.
    pub special: &'a [u32; 5],
    /// Set when an operation faults (integer division by zero).
    pub fault: &'a Cell<Option<&'static str>>,
}

pub(super) fn f16_round(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// A compiled expression: a tree of closures with the operator and types resolved, and the
/// common integer and f32 cases specialised.
pub(super) type Fx = Box<dyn Fn(&Ctx<'_>) -> u32>;

fn special_index(s: Special) -> usize {
    match s {
        Special::LocalId => 0,
        Special::WorkgroupId => 1,
        Special::NumWorkgroups => 2,
        Special::LaneId => 3,
        Special::WaveId => 4,
    }
}

/// Compile a typed expression.
pub(super) fn closure(e: CExpr) -> Fx {
    match e {
        CExpr::Const(c) => Box::new(move |_| c),
        CExpr::Reg(r) => {
            let r = r as usize;
            Box::new(move |cx| cx.regs[r])
        }
        CExpr::Scalar(p) => {
            let p = p as usize;
            Box::new(move |cx| cx.scalars[p])
        }
        CExpr::Special(s) => {
            let i = special_index(s);
            Box::new(move |cx| cx.special[i])
        }
        CExpr::Bin(op, ty, a, b) => bin_closure(op, ty, *a, *b),
        CExpr::Un(op, ty, a) => {
            let a = closure(*a);
            Box::new(move |cx| un(op, ty, a(cx)))
        }
        CExpr::Cast(from, to, a) => {
            let a = closure(*a);
            match (from, to) {
                (Ty::F16, Ty::F32) => a,
                (Ty::F32, Ty::F16) => Box::new(move |cx| f16_round(f(a(cx))).to_bits()),
                (Ty::U32, Ty::F32) => Box::new(move |cx| (a(cx) as f32).to_bits()),
                _ => Box::new(move |cx| cast(from, to, a(cx))),
            }
        }
        CExpr::Select(c, a, b) => {
            let (c, a, b) = (closure(*c), closure(*a), closure(*b));
            Box::new(move |cx| if c(cx) != 0 { a(cx) } else { b(cx) })
        }
        CExpr::Bfe(v, o, w) => {
            let mask = if w >= 32 { u32::MAX } else { (1u32 << w) - 1 };
            let v = closure(*v);
            match *o {
                CExpr::Const(o) => Box::new(move |cx| v(cx).wrapping_shr(o) & mask),
                o => {
                    let o = closure(o);
                    Box::new(move |cx| v(cx).wrapping_shr(o(cx)) & mask)
                }
            }
        }
        CExpr::Fma(a, b, c) => {
            let (a, b, c) = (closure(*a), closure(*b), closure(*c));
            Box::new(move |cx| f(a(cx)).mul_add(f(b(cx)), f(c(cx))).to_bits())
        }
        // F16 registers hold the f32 bits of their (FP16-exact) value; packed pairs hold the
        // real FP16 bits.
        CExpr::PackHalf2(a, b) => {
            let (a, b) = (closure(*a), closure(*b));
            Box::new(move |cx| half_bits(f(a(cx))) | (half_bits(f(b(cx))) << 16))
        }
        CExpr::SubHalf2(a, b) => {
            let (a, b) = (closure(*a), closure(*b));
            Box::new(move |cx| {
                let (x, y) = (unpack_half2(a(cx)), unpack_half2(b(cx)));
                half_bits(x[0] - y[0]) | (half_bits(x[1] - y[1]) << 16)
            })
        }
        CExpr::FmaHalf2(a, b, c) => {
            let (a, b, c) = (closure(*a), closure(*b), closure(*c));
            Box::new(move |cx| {
                let (x, y, z) = (
                    unpack_half2(a(cx)),
                    unpack_half2(b(cx)),
                    unpack_half2(c(cx)),
                );
                // One rounding, from the f64 value (exact for the decode's operands).
                let h = |i: usize| {
                    let v = f64::from(x[i]) * f64::from(y[i]) + f64::from(z[i]);
                    u32::from(half::f16::from_f64(v).to_bits())
                };
                h(0) | (h(1) << 16)
            })
        }
        CExpr::Dot4I8(a, b, c) => {
            let (a, b, c) = (closure(*a), closure(*b), closure(*c));
            Box::new(move |cx| {
                let (x, y) = (a(cx), b(cx));
                let byte = |w: u32, i: u32| i32::from((w >> (8 * i)) as u8 as i8);
                let dot: i32 = (0..4).map(|i| byte(x, i) * byte(y, i)).sum();
                (c(cx) as i32).wrapping_add(dot) as u32
            })
        }
        CExpr::Dot2F16(a, b, c) => {
            let (a, b, c) = (closure(*a), closure(*b), closure(*c));
            Box::new(move |cx| {
                let (x, y) = (unpack_half2(a(cx)), unpack_half2(b(cx)));
                // FP16 products are exact in f64; the sum and c rounded once to f32.
                let v = f64::from(x[0]) * f64::from(y[0])
                    + f64::from(x[1]) * f64::from(y[1])
                    + f64::from(f(c(cx)));
                (v as f32).to_bits()
            })
        }
    }
}

fn bin_closure(op: BinOp, ty: Ty, a: CExpr, b: CExpr) -> Fx {
    // A constant non-zero divisor cannot fault.
    let safe_div = matches!(b, CExpr::Const(c) if c != 0);
    let (a, b) = (closure(a), closure(b));
    macro_rules! u {
        ($e:expr) => {
            Box::new(move |cx| {
                let (x, y) = (a(cx), b(cx));
                $e(x, y)
            })
        };
    }
    macro_rules! fl {
        ($e:expr) => {
            Box::new(move |cx| {
                let (x, y) = (f(a(cx)), f(b(cx)));
                $e(x, y)
            })
        };
    }
    match (op, ty) {
        (BinOp::Add, Ty::U32 | Ty::I32) => u!(|x: u32, y: u32| x.wrapping_add(y)),
        (BinOp::Sub, Ty::U32 | Ty::I32) => u!(|x: u32, y: u32| x.wrapping_sub(y)),
        (BinOp::Mul, Ty::U32 | Ty::I32) => u!(|x: u32, y: u32| x.wrapping_mul(y)),
        (BinOp::Div, Ty::U32) if safe_div => u!(|x: u32, y: u32| x / y),
        (BinOp::Rem, Ty::U32) if safe_div => u!(|x: u32, y: u32| x % y),
        (BinOp::And, Ty::U32 | Ty::I32 | Ty::Bool) => u!(|x: u32, y: u32| x & y),
        (BinOp::Or, Ty::U32 | Ty::I32 | Ty::Bool) => u!(|x: u32, y: u32| x | y),
        (BinOp::Shl, Ty::U32 | Ty::I32) => u!(|x: u32, y: u32| x.wrapping_shl(y)),
        (BinOp::Shr, Ty::U32) => u!(|x: u32, y: u32| x.wrapping_shr(y)),
        (BinOp::Lt, Ty::U32) => u!(|x: u32, y: u32| (x < y) as u32),
        (BinOp::Le, Ty::U32) => u!(|x: u32, y: u32| (x <= y) as u32),
        (BinOp::Gt, Ty::U32) => u!(|x: u32, y: u32| (x > y) as u32),
        (BinOp::Ge, Ty::U32) => u!(|x: u32, y: u32| (x >= y) as u32),
        (BinOp::Eq, Ty::U32 | Ty::I32 | Ty::Bool) => u!(|x: u32, y: u32| (x == y) as u32),
        (BinOp::Ne, Ty::U32 | Ty::I32 | Ty::Bool) => u!(|x: u32, y: u32| (x != y) as u32),
        (BinOp::Min, Ty::U32) => u!(|x: u32, y: u32| x.min(y)),
        (BinOp::Max, Ty::U32) => u!(|x: u32, y: u32| x.max(y)),
        (BinOp::Add, Ty::F32) => fl!(|x: f32, y: f32| (x + y).to_bits()),
        (BinOp::Sub, Ty::F32) => fl!(|x: f32, y: f32| (x - y).to_bits()),
        (BinOp::Mul, Ty::F32) => fl!(|x: f32, y: f32| (x * y).to_bits()),
        (BinOp::Div, Ty::F32) => fl!(|x: f32, y: f32| (x / y).to_bits()),
        (BinOp::Max, Ty::F32) => fl!(|x: f32, y: f32| x.max(y).to_bits()),
        (BinOp::Min, Ty::F32) => fl!(|x: f32, y: f32| x.min(y).to_bits()),
        (BinOp::Lt, Ty::F32) => fl!(|x: f32, y: f32| (x < y) as u32),
        (BinOp::Gt, Ty::F32) => fl!(|x: f32, y: f32| (x > y) as u32),
        _ => Box::new(move |cx| bin(op, ty, a(cx), b(cx), cx.fault)),
    }
}

fn cmp<T: PartialOrd>(op: BinOp, a: T, b: T) -> Option<bool> {
    Some(match op {
        BinOp::Lt => a < b,
        BinOp::Le => a <= b,
        BinOp::Eq => a == b,
        BinOp::Ne => a != b,
        BinOp::Ge => a >= b,
        BinOp::Gt => a > b,
        _ => return None,
    })
}

/// A binary operation on operands of type `ty` (checked at compile time).
pub(super) fn bin(op: BinOp, ty: Ty, a: u32, b: u32, fault: &Cell<Option<&'static str>>) -> u32 {
    match ty {
        Ty::F32 | Ty::F16 => {
            let (x, y) = (f(a), f(b));
            if let Some(c) = cmp(op, x, y) {
                return c as u32;
            }
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::Rem => x % y,
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                _ => unreachable!("checked: no bit operations on floats"),
            };
            if ty == Ty::F16 {
                f16_round(r).to_bits()
            } else {
                r.to_bits()
            }
        }
        Ty::I32 | Ty::I8 => {
            let (x, y) = (a as i32, b as i32);
            if let Some(c) = cmp(op, x, y) {
                return c as u32;
            }
            let r = match op {
                BinOp::Div | BinOp::Rem if y == 0 => {
                    fault.set(Some("integer division by zero"));
                    0
                }
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                BinOp::Div => x.wrapping_div(y),
                BinOp::Rem => x.wrapping_rem(y),
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                BinOp::And => x & y,
                BinOp::Or => x | y,
                BinOp::Xor => x ^ y,
                BinOp::Shl => x.wrapping_shl(y as u32),
                BinOp::Shr => x.wrapping_shr(y as u32),
                _ => unreachable!(),
            };
            if ty == Ty::I8 {
                r as i8 as i32 as u32
            } else {
                r as u32
            }
        }
        Ty::U32 => {
            if let Some(c) = cmp(op, a, b) {
                return c as u32;
            }
            match op {
                BinOp::Div | BinOp::Rem if b == 0 => {
                    fault.set(Some("integer division by zero"));
                    0
                }
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => a / b,
                BinOp::Rem => a % b,
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                BinOp::Shl => a.wrapping_shl(b),
                BinOp::Shr => a.wrapping_shr(b),
                _ => unreachable!(),
            }
        }
        Ty::Bool => match op {
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
            BinOp::Eq => (a == b) as u32,
            BinOp::Ne => (a != b) as u32,
            _ => unreachable!("checked: no arithmetic on Bool"),
        },
    }
}

fn un(op: UnOp, ty: Ty, a: u32) -> u32 {
    if ty.is_float() {
        let x = f(a);
        let r = match op {
            UnOp::Neg => -x,
            UnOp::Abs => x.abs(),
            UnOp::Exp => x.exp(),
            UnOp::Rsqrt => 1.0 / x.sqrt(),
            UnOp::Not => unreachable!(),
        };
        return if ty == Ty::F16 {
            f16_round(r).to_bits()
        } else {
            r.to_bits()
        };
    }
    let r = match (op, ty) {
        (UnOp::Not, Ty::Bool) => a ^ 1,
        (UnOp::Not, _) => !a,
        (UnOp::Neg, _) => (a as i32).wrapping_neg() as u32,
        (UnOp::Abs, _) => (a as i32).wrapping_abs() as u32,
        _ => unreachable!(),
    };
    if ty == Ty::I8 {
        r as i8 as i32 as u32
    } else {
        r
    }
}

/// Numeric conversion (`Expr::Cast`): float → f16 rounds to nearest even, float → int truncates
/// (saturating, NaN → 0), int → int keeps the low bits.
pub(super) fn cast(from: Ty, to: Ty, a: u32) -> u32 {
    if from == to {
        return a;
    }
    let as_f64 = match from {
        Ty::Bool | Ty::U32 => f64::from(a),
        Ty::I8 | Ty::I32 => f64::from(a as i32),
        Ty::F16 | Ty::F32 => f64::from(f(a)),
    };
    match to {
        Ty::Bool => (as_f64 != 0.0) as u32,
        Ty::F32 => match from {
            Ty::F16 => a,
            _ => (as_f64 as f32).to_bits(),
        },
        Ty::F16 => half::f16::from_f64(as_f64).to_f32().to_bits(),
        Ty::U32 => match from {
            Ty::I8 | Ty::I32 | Ty::Bool => a,
            _ => as_f64 as u32,
        },
        Ty::I32 => match from {
            Ty::U32 | Ty::I8 | Ty::Bool => a,
            _ => as_f64 as i32 as u32,
        },
        Ty::I8 => match from {
            Ty::F16 | Ty::F32 => as_f64 as i32 as i8 as i32 as u32,
            _ => a as i8 as i32 as u32,
        },
    }
}

/// The value `x` of an `f64` as a pattern of type `ty` (host data into device memory).
pub(super) fn from_f64(ty: Ty, x: f64) -> u32 {
    match ty {
        Ty::F32 => (x as f32).to_bits(),
        Ty::F16 => half::f16::from_f64(x).to_f32().to_bits(),
        Ty::I32 | Ty::I8 => x as i32 as u32,
        Ty::U32 => x as u32,
        Ty::Bool => (x != 0.0) as u32,
    }
}

/// A pattern of type `ty` as an `f64` (device memory back to the host).
pub(super) fn to_f64(ty: Ty, bits: u32) -> f64 {
    match ty {
        Ty::F32 | Ty::F16 => f64::from(f(bits)),
        Ty::I32 | Ty::I8 => f64::from(bits as i32),
        Ty::U32 | Ty::Bool => f64::from(bits),
    }
}

/// The FP16 bits of `x` rounded to nearest even.
pub(super) fn half_bits(x: f32) -> u32 {
    u32::from(half::f16::from_f32(x).to_bits())
}

/// The two FP16 values of a packed pair, low half first.
pub(super) fn unpack_half2(v: u32) -> [f32; 2] {
    [
        half::f16::from_bits(v as u16).to_f32(),
        half::f16::from_bits((v >> 16) as u16).to_f32(),
    ]
}
