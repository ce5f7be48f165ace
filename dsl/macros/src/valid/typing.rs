//! Token-level typing: the IR's typing rules (element type, distribution over the TP group,
//! shape where the dimensions are literals or the same symbol) applied to the user's tokens, so
//! that a mistake is reported on the operand that carries it. The IR validator applies the same
//! rules again at run time to what cannot be decided here.

use proc_macro2::TokenStream;
use syn::{Error, Ident};

use crate::model::{BufType, Buffer, Dtype, Format, Sharding};
use crate::ops::{Mode, Op, Reduce};

use super::dims::{Dim, eval_float, eval_int, show};

/// How a value is distributed over the ranks of the TP group.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Dist {
    /// Every rank holds the whole value.
    Replicated,
    /// Rank r holds feature slice r.
    Sharded,
    /// Rank r holds partial sums.
    Partial,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Replicated => "replicated",
            Dist::Sharded => "sharded",
            Dist::Partial => "partial",
        }
    }
}

/// The token-level type of a value.
#[derive(Clone, Debug)]
pub struct Ty {
    /// Element type.
    pub dtype: Dtype,
    /// Distribution.
    pub dist: Dist,
    /// Per-rank shape.
    pub shape: Vec<Dim>,
}

impl Ty {
    fn features(&self) -> &Dim {
        self.shape.last().unwrap_or(&Dim::Unknown)
    }

    fn with_features(&self, f: Dim) -> Vec<Dim> {
        let mut shape = self.shape.clone();
        if let Some(last) = shape.last_mut() {
            *last = f;
        }
        shape
    }
}

/// What a value of a tensor buffer sharded `s` is.
pub fn dist_of(s: Sharding) -> Dist {
    match s {
        Sharding::Replicated => Dist::Replicated,
        Sharding::Col | Sharding::Row => Dist::Sharded,
        Sharding::Partial => Dist::Partial,
    }
}

/// The type of a tensor buffer's per-rank view (`None` for a weight).
pub fn buffer_ty(b: &Buffer) -> Option<Ty> {
    let BufType::Tensor { dtype, dims } = &b.ty else {
        return None;
    };
    let mut shape: Vec<Dim> = dims.iter().map(Dim::of).collect();
    if b.global_index && b.sharding == Sharding::Col {
        if let Some(last) = shape.last_mut() {
            *last = Dim::Unknown;
        }
    }
    Some(Ty {
        dtype: *dtype,
        dist: dist_of(b.sharding),
        shape,
    })
}

/// A weight operand of a GEMV.
pub struct Weight<'x> {
    /// Its name, as written at the use.
    pub name: &'x Ident,
    /// Its sharding.
    pub sharding: Sharding,
    /// Per-rank K.
    pub k: Dim,
    /// Per-rank N.
    pub n: Dim,
    /// Whether it is an INT4 format (GPTQ or AWQ).
    pub int4: bool,
}

/// The per-rank view of a weight buffer (`None` for a tensor).
pub fn weight_of<'x>(b: &Buffer, name: &'x Ident) -> Option<Weight<'x>> {
    let BufType::Weight { k, n, format } = &b.ty else {
        return None;
    };
    let int4 = !matches!(format, Format::F16);
    let global = b.global_index;
    let k = if global && b.sharding == Sharding::Row {
        Dim::Unknown
    } else {
        Dim::of(k)
    };
    let n = if global && b.sharding == Sharding::Col {
        Dim::Unknown
    } else {
        Dim::of(n)
    };
    Some(Weight {
        name,
        sharding: b.sharding,
        k,
        n,
        int4,
    })
}

/// A value operand: its type and its tokens.
pub struct Operand {
    /// The type.
    pub ty: Ty,
    /// Where it was written.
    pub tokens: TokenStream,
}

/// An op at its call site.
pub struct Site<'x> {
    /// The op.
    pub op: Op,
    /// The op's name tokens (`rmsnorm`, `gemv.row`, or the `+` of `a + b`).
    pub name: &'x TokenStream,
    /// The variant token of a family op (`row` in `gemv.row`).
    pub variant: Option<&'x Ident>,
    /// Attribute values, in the op table's order.
    pub attrs: &'x [&'x syn::Expr],
}

fn at(tokens: &TokenStream, msg: impl std::fmt::Display) -> Error {
    Error::new_spanned(tokens, msg)
}

/// The types of the op's results, or the first rule it breaks.
pub fn infer(site: &Site, weight: Option<&Weight>, x: &[Operand]) -> Result<Vec<Ty>, Error> {
    let one = |t: Ty| Ok(vec![t]);
    match site.op {
        Op::Gemv(mode) => match weight {
            Some(w) => one(gemv(site, mode, w, &x[0])?),
            None => Err(at(site.name, "gemv needs a weight")),
        },
        Op::GemvQ8(mode) => match weight {
            Some(w) => one(gemv_q8(site, mode, w, &x[0], &x[1])?),
            None => Err(at(site.name, "gemv_q8 needs a weight")),
        },
        Op::Add | Op::Mul => one(binary(site, &x[0], &x[1])?),
        Op::Silu => one(silu(&x[0])?),
        Op::RoundF16 => one(round_f16(&x[0])?),
        Op::Slice => one(slice(site, &x[0])?),
        Op::RmsNorm => one(rmsnorm(site, &x[0], &x[1])?),
        Op::Reduce(r) => one(reduce(site, r, &x[0])?),
        Op::AllReduce | Op::AllReduceInt8 => one(allreduce(site, &x[0])?),
        Op::QuantizeInt8 => quantize(site, &x[0]),
        Op::QuantizeRne => quantize_rne(site, &x[0]),
        Op::DequantizeInt8 => one(dequantize(site, &x[0], &x[1])?),
    }
}

fn float(x: &Operand, what: &str) -> Result<(), Error> {
    if x.ty.dtype.is_float() {
        return Ok(());
    }
    Err(at(
        &x.tokens,
        format!("{what} takes a float value, found {}", x.ty.dtype.name()),
    ))
}

fn gemv(site: &Site, mode: Mode, w: &Weight, x: &Operand) -> Result<Ty, Error> {
    let (wants, x_dist, y_dist) = match mode {
        Mode::Rep => (Sharding::Replicated, Dist::Replicated, Dist::Replicated),
        Mode::Col => (Sharding::Col, Dist::Replicated, Dist::Sharded),
        Mode::Row => (Sharding::Row, Dist::Sharded, Dist::Partial),
    };
    gemv_mode(site, wants, w)?;
    gemv_activation(w, x)?;
    if x.ty.dist != x_dist {
        let msg = match mode {
            Mode::Row => format!(
                "`gemv.row` reads this rank's K-shard of x (a `col_parallel` value), found a {} one",
                x.ty.dist.name()
            ),
            _ => format!(
                "`{}` reads a replicated x, found a {} one{}",
                site.op.name(),
                x.ty.dist.name(),
                if x.ty.dist == Dist::Partial {
                    ": allreduce it first"
                } else {
                    ""
                }
            ),
        };
        return Err(at(&x.tokens, msg));
    }
    let shape = vec![x.ty.shape[0].clone(), w.n.clone()];
    Ok(Ty {
        dtype: Dtype::F32,
        dist: y_dist,
        shape,
    })
}

/// The GEMV's mode must match the weight's declared sharding (DESIGN.md §5.6); reported on the
/// mode token.
fn gemv_mode(site: &Site, wants: Sharding, w: &Weight) -> Result<(), Error> {
    if w.sharding == wants {
        return Ok(());
    }
    let fix = match w.sharding {
        Sharding::Row => "use `gemv.row`, which yields partial sums to allreduce",
        Sharding::Col => "use `gemv.col`, which yields this rank's slice of the outputs",
        _ => "use `gemv.rep`",
    };
    let msg = format!(
        "`{}` needs a `{}` weight, but `{}` is declared `{}`: {fix}",
        site.op.name(),
        wants.name(),
        w.name,
        w.sharding.name()
    );
    let variant = site.variant.map(|v| quote::quote!(#v));
    Err(at(variant.as_ref().unwrap_or(site.name), msg))
}

/// An FP16 `[batch, K]` activation whose K is the weight's, where both are known.
fn gemv_activation(w: &Weight, x: &Operand) -> Result<(), Error> {
    if x.ty.dtype != Dtype::F16 {
        let hint = if x.ty.dtype == Dtype::F32 {
            ": insert `round_f16` (a rounding point)"
        } else {
            ""
        };
        let msg = format!(
            "GEMV activations are f16, found {}{hint}",
            x.ty.dtype.name()
        );
        return Err(at(&x.tokens, msg));
    }
    if x.ty.shape.len() != 2 {
        let msg = format!(
            "a GEMV reads a `[batch, K]` activation; found shape {}",
            show(&x.ty.shape)
        );
        return Err(at(&x.tokens, msg));
    }
    if x.ty.features().same(&w.k) == Some(false) {
        let (f, name, k) = (x.ty.features(), w.name, &w.k);
        let msg = format!("shape mismatch: x has {f} features but `{name}` has K = {k}");
        return Err(at(&x.tokens, msg));
    }
    Ok(())
}

fn same_shape(a: &[Dim], b: &[Dim]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y) != Some(false))
}

fn binary(site: &Site, a: &Operand, b: &Operand) -> Result<Ty, Error> {
    let sym = if site.op == Op::Add { "+" } else { "*" };
    float(a, &format!("`{sym}`"))?;
    float(b, &format!("`{sym}`"))?;
    if !same_shape(&a.ty.shape, &b.ty.shape) {
        let msg = format!(
            "`{sym}` needs operands of one shape: the left is {}, the right is {}",
            show(&a.ty.shape),
            show(&b.ty.shape)
        );
        return Err(at(&b.tokens, msg));
    }
    if site.op == Op::Mul && a.ty.dist == Dist::Partial {
        let msg = "a product of partial sums is not a partial sum: allreduce first";
        return Err(at(&a.tokens, msg));
    }
    if a.ty.dist != b.ty.dist {
        let hint = if a.ty.dist == Dist::Partial || b.ty.dist == Dist::Partial {
            ": allreduce the partial sums first"
        } else {
            ""
        };
        let msg = format!(
            "operands of `{sym}` must be distributed alike over the TP group: the left is {}, \
             the right is {}{hint}",
            a.ty.dist.name(),
            b.ty.dist.name()
        );
        return Err(at(&b.tokens, msg));
    }
    Ok(Ty {
        dtype: Dtype::F32,
        ..a.ty.clone()
    })
}

fn silu(x: &Operand) -> Result<Ty, Error> {
    float(x, "`silu`")?;
    if x.ty.dist == Dist::Partial {
        let msg =
            "silu of partial sums: a nonlinear function needs the summed value; allreduce first";
        return Err(at(&x.tokens, msg));
    }
    Ok(Ty {
        dtype: Dtype::F32,
        ..x.ty.clone()
    })
}

fn round_f16(x: &Operand) -> Result<Ty, Error> {
    match x.ty.dtype {
        Dtype::F32 => Ok(Ty {
            dtype: Dtype::F16,
            ..x.ty.clone()
        }),
        Dtype::F16 => Err(at(
            &x.tokens,
            "this value is already f16: `round_f16` rounds an unrounded f32 value, once",
        )),
        d => Err(at(
            &x.tokens,
            format!("`round_f16` takes an f32 value, found {}", d.name()),
        )),
    }
}

fn slice(site: &Site, x: &Operand) -> Result<Ty, Error> {
    let (start, len) = (site.attrs[0], site.attrs[1]);
    let f = x.ty.features().known();
    match (eval_int(start), eval_int(len)) {
        (_, Some(0)) => return Err(Error::new_spanned(len, "an empty slice (len = 0)")),
        (Some(s), Some(l)) if f.is_some_and(|f| s + l > f) => {
            let msg = format!(
                "columns {s}..{} are outside the {} features of x",
                s + l,
                f.unwrap_or_default()
            );
            return Err(at(site.name, msg));
        }
        _ => {}
    }
    Ok(Ty {
        shape: x.ty.with_features(Dim::of(len)),
        ..x.ty.clone()
    })
}

fn rmsnorm(site: &Site, x: &Operand, w: &Operand) -> Result<Ty, Error> {
    float(x, "`rmsnorm`")?;
    match x.ty.dist {
        Dist::Replicated => {}
        Dist::Partial => {
            return Err(at(
                &x.tokens,
                "rmsnorm of partial sums would normalise the wrong vector: allreduce first",
            ));
        }
        Dist::Sharded => {
            return Err(at(
                &x.tokens,
                "rmsnorm of a sharded value: the norm of one shard is not the norm of the vector",
            ));
        }
    }
    if w.ty.dtype != Dtype::F16 {
        let msg = format!("rmsnorm weights are f16, found {}", w.ty.dtype.name());
        return Err(at(&w.tokens, msg));
    }
    if w.ty.dist != Dist::Replicated {
        return Err(at(
            &w.tokens,
            "rmsnorm weights are replicated on every rank",
        ));
    }
    let expected = [x.ty.features().clone()];
    if !same_shape(&w.ty.shape, &expected) {
        let msg = format!(
            "rmsnorm weights are one per feature, {}; found {}",
            show(&expected),
            show(&w.ty.shape)
        );
        return Err(at(&w.tokens, msg));
    }
    let eps = site.attrs[0];
    if eval_float(eps).is_some_and(|e| !(e.is_finite() && e > 0.0)) {
        return Err(Error::new_spanned(eps, "eps must be positive and finite"));
    }
    Ok(Ty {
        dtype: Dtype::F32,
        ..x.ty.clone()
    })
}

fn reduce(site: &Site, r: Reduce, x: &Operand) -> Result<Ty, Error> {
    float(x, &format!("`{}`", site.op.name()))?;
    if x.ty.dist == Dist::Sharded || (x.ty.dist == Dist::Partial && r != Reduce::Sum) {
        let msg = format!(
            "`{}` of a {} value: reduce a replicated value (allreduce partial sums first)",
            site.op.name(),
            x.ty.dist.name()
        );
        return Err(at(&x.tokens, msg));
    }
    Ok(Ty {
        dtype: Dtype::F32,
        shape: x.ty.with_features(Dim::Known(1)),
        dist: x.ty.dist,
    })
}

/// A literal block size must be positive and divide the features.
fn block(site: &Site, features: &Dim) -> Result<Option<u128>, Error> {
    let expr = site.attrs[0];
    let Some(b) = eval_int(expr) else {
        return Ok(None);
    };
    match features.known() {
        _ if b == 0 => Err(Error::new_spanned(expr, "a block of zero features")),
        Some(f) if f % b != 0 => Err(Error::new_spanned(
            expr,
            format!("block size {b} does not divide the {f} features"),
        )),
        _ => Ok(Some(b)),
    }
}

fn allreduce(site: &Site, x: &Operand) -> Result<Ty, Error> {
    float(x, &format!("`{}`", site.op.name()))?;
    if x.ty.dist != Dist::Partial {
        let msg = format!(
            "`{}` sums partial values over the TP group, but this value is {}: only partial sums \
             (a `gemv.row` result or a `partial` input) need an allreduce",
            site.op.name(),
            x.ty.dist.name()
        );
        return Err(at(&x.tokens, msg));
    }
    if site.op == Op::AllReduceInt8 {
        block(site, x.ty.features())?;
    }
    Ok(Ty {
        dtype: Dtype::F32,
        dist: Dist::Replicated,
        shape: x.ty.shape.clone(),
    })
}

/// `gemv_q8.MODE(w, codes, scales, block = B)`: an INT4 weight, i8 codes `[batch, K]` distributed
/// as the mode's x, f32 scales `[batch, K/B]` alike.
fn gemv_q8(site: &Site, mode: Mode, w: &Weight, q: &Operand, s: &Operand) -> Result<Ty, Error> {
    if !w.int4 {
        let msg = format!(
            "`{}` multiplies INT4 weights, but `{}` is FP16: use `gemv` with f16 activations",
            site.op.name(),
            w.name
        );
        return Err(at(site.name, msg));
    }
    if q.ty.dtype != Dtype::I8 {
        let msg = format!(
            "q8 activation codes are i8 (from `quantize_int8.rne`), found {}",
            q.ty.dtype.name()
        );
        return Err(at(&q.tokens, msg));
    }
    let as_f16 = Operand {
        ty: Ty {
            dtype: Dtype::F16,
            ..q.ty.clone()
        },
        tokens: q.tokens.clone(),
    };
    let y = gemv(site, mode, w, &as_f16)?;
    if s.ty.dtype != Dtype::F32 {
        let msg = format!(
            "q8 activation scales are f32 (from `quantize_int8.rne`), found {}",
            s.ty.dtype.name()
        );
        return Err(at(&s.tokens, msg));
    }
    let b = block(site, &w.k)?;
    let expected = scale_shape(&q.ty, b);
    if !same_shape(&s.ty.shape, &expected) || s.ty.dist != q.ty.dist {
        let msg = format!(
            "scales of this block size are {} ({}, like the codes); found {} ({})",
            show(&expected),
            q.ty.dist.name(),
            show(&s.ty.shape),
            s.ty.dist.name()
        );
        return Err(at(&s.tokens, msg));
    }
    Ok(y)
}

fn quantize_rne(site: &Site, x: &Operand) -> Result<Vec<Ty>, Error> {
    if x.ty.dtype != Dtype::F16 {
        let msg = format!(
            "`quantize_int8.rne` takes an f16 value (its codes are exact only from FP16), found {}{}",
            x.ty.dtype.name(),
            if x.ty.dtype == Dtype::F32 {
                ": insert `round_f16`"
            } else {
                ""
            }
        );
        return Err(at(&x.tokens, msg));
    }
    if let Some(c) = eval_int(site.attrs[1]) {
        if !(1..=127).contains(&c) {
            let msg = format!("clamp {c} is not in 1..=127 (codes are signed 8-bit)");
            return Err(Error::new_spanned(site.attrs[1], msg));
        }
    }
    quantize(site, x)
}

fn scale_shape(x: &Ty, b: Option<u128>) -> Vec<Dim> {
    let f = match (x.features().known(), b) {
        (Some(f), Some(b)) => Dim::Known(f / b),
        _ => Dim::Unknown,
    };
    x.with_features(f)
}

fn quantize(site: &Site, x: &Operand) -> Result<Vec<Ty>, Error> {
    float(x, "`quantize_int8`")?;
    let b = block(site, x.ty.features())?;
    let codes = Ty {
        dtype: Dtype::I8,
        ..x.ty.clone()
    };
    let scales = Ty {
        dtype: Dtype::F32,
        shape: scale_shape(&x.ty, b),
        dist: x.ty.dist,
    };
    Ok(vec![codes, scales])
}

fn dequantize(site: &Site, q: &Operand, s: &Operand) -> Result<Ty, Error> {
    if q.ty.dtype != Dtype::I8 {
        let msg = format!(
            "codes are i8 (from `quantize_int8`), found {}",
            q.ty.dtype.name()
        );
        return Err(at(&q.tokens, msg));
    }
    if s.ty.dtype != Dtype::F32 {
        let msg = format!(
            "scales are f32 (from `quantize_int8`), found {}",
            s.ty.dtype.name()
        );
        return Err(at(&s.tokens, msg));
    }
    let b = block(site, q.ty.features())?;
    let expected = scale_shape(&q.ty, b);
    if !same_shape(&s.ty.shape, &expected) {
        let msg = format!(
            "scales of this block size are {}; found {}",
            show(&expected),
            show(&s.ty.shape)
        );
        return Err(at(&s.tokens, msg));
    }
    Ok(Ty {
        dtype: Dtype::F32,
        ..q.ty.clone()
    })
}

/// `buffer = value;`: element type, shape and distribution must match the output.
pub fn check_store(b: &Buffer, v: &Operand) -> Result<(), Error> {
    let Some(t) = buffer_ty(b) else { return Ok(()) };
    let name = b.name;
    if v.ty.dtype != t.dtype {
        let hint = if (t.dtype, v.ty.dtype) == (Dtype::F16, Dtype::F32) {
            ": insert `round_f16` (every FP16 store is a rounding point)"
        } else {
            ""
        };
        let msg = format!(
            "storing an {} value into {} output `{name}`{hint}",
            v.ty.dtype.name(),
            t.dtype.name()
        );
        return Err(at(&v.tokens, msg));
    }
    if !same_shape(&v.ty.shape, &t.shape) {
        let msg = format!(
            "output `{name}` is {} but the value is {}",
            show(&t.shape),
            show(&v.ty.shape)
        );
        return Err(at(&v.tokens, msg));
    }
    if v.ty.dist != t.dist {
        let msg = if v.ty.dist == Dist::Partial {
            format!(
                "output `{name}` is `{}` but the value is partial sums: allreduce it first",
                b.sharding.name()
            )
        } else {
            format!(
                "output `{name}` is `{}` but the value is {}",
                b.sharding.name(),
                v.ty.dist.name()
            )
        };
        return Err(at(&v.tokens, msg));
    }
    Ok(())
}
