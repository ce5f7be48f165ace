//! Parameter declarations: keywords (element types, weight formats, layouts, shardings, memory
//! and index spaces) resolved with "did you mean", and the checks a declaration allows on its own
//! tokens (tensor rank, zero dimensions, INT4 packing and group size where K and N are literals).

use proc_macro2::Span;
use syn::{Error, Ident};

use crate::ast::{Decl, GenericEntry, GenericValue, Generics, Role, TypeSpec};
use crate::model::{AwqLit, BufType, Buffer, DTYPES, Dtype, Format, GptqLit, Group, SHARDINGS};
use crate::model::{Sharding, Zero};
use crate::suggest::did_you_mean;

use super::TpGroup;
use super::dims::Dim;

const FORMATS: [&str; 4] = ["f16_nk", "gptq", "awq", "weight"];

/// Resolve one declaration of a kernel whose TP group is `group`.
pub fn resolve<'a>(
    decl: &'a Decl,
    group: &mut TpGroup,
    errors: &mut Vec<Error>,
) -> Option<Buffer<'a>> {
    let n_errors = errors.len();
    let sharding = sharding(decl, group, errors);
    let host = space(decl.space.as_ref(), errors);
    let global_index = index(decl.index.as_ref(), errors);
    let ty = buffer_type(&decl.ty, errors);
    let buffer = Buffer {
        name: &decl.name,
        role: decl.role,
        ty: ty?,
        sharding,
        host,
        global_index,
    };
    check_combination(decl, &buffer, errors);
    (errors.len() == n_errors).then_some(buffer)
}

fn sharding(decl: &Decl, group: &mut TpGroup, errors: &mut Vec<Error>) -> Sharding {
    let Some(kw) = &decl.sharding else {
        return Sharding::Replicated;
    };
    let word = kw.to_string();
    let Some((_, s)) = SHARDINGS.iter().find(|(n, _)| *n == word) else {
        let hint = did_you_mean(&word, SHARDINGS.iter().map(|(n, _)| *n));
        let msg = format!(
            "unknown sharding `{word}`: expected `replicated`, `col_parallel`, `row_parallel` or \
             `partial`{hint}"
        );
        errors.push(Error::new(kw.span(), msg));
        return Sharding::Replicated;
    };
    if *s != Sharding::Replicated {
        group.require(&quote::quote!(#kw), &format!("`{word}`"), errors);
    }
    *s
}

fn space(kw: Option<&Ident>, errors: &mut Vec<Error>) -> bool {
    let Some(kw) = kw else { return false };
    let word = kw.to_string();
    let msg = match word.as_str() {
        "global" => return false,
        "host" => return true,
        "lds" | "reg" | "register" | "shared" => format!(
            "a kernel parameter cannot live in `{word}`: registers and LDS are private to one \
             workgroup and never carry a value between workgroups; use `@global` or `@host`"
        ),
        "peer" => "peer memory is created by the allreduce lowering, not declared: use \
                   `@global` and an `allreduce`"
            .to_owned(),
        _ => format!(
            "unknown memory space `{word}`: expected `@global` or `@host`{}",
            did_you_mean(&word, ["global", "host"])
        ),
    };
    errors.push(Error::new(kw.span(), msg));
    false
}

fn index(kw: Option<&Ident>, errors: &mut Vec<Error>) -> bool {
    let Some(kw) = kw else { return false };
    match kw.to_string().as_str() {
        "local" => false,
        "global" => true,
        word => {
            let hint = did_you_mean(word, ["local", "global"]);
            let msg = format!("unknown index space `{word}`: expected `local` or `global`{hint}");
            errors.push(Error::new(kw.span(), msg));
            false
        }
    }
}

fn buffer_type<'a>(ty: &'a TypeSpec, errors: &mut Vec<Error>) -> Option<BufType<'a>> {
    let word = ty.keyword.to_string();
    if let Some((_, dtype)) = DTYPES.iter().find(|(n, _)| *n == word) {
        if ty.generics.is_some() || ty.arg.is_some() {
            let msg = format!("`{word}` is an element type: it takes no layout, only a shape");
            errors.push(Error::new(ty.keyword.span(), msg));
        }
        return tensor(*dtype, ty, errors);
    }
    if !FORMATS.contains(&word.as_str()) {
        let names = DTYPES.iter().map(|(n, _)| *n).chain(FORMATS);
        let msg = format!(
            "unknown type `{word}`: expected an element type (f16, bf16, f32, i8, i32, u32) or a \
             weight format (f16_nk, gptq, awq, weight){}",
            did_you_mean(&word, names)
        );
        errors.push(Error::new(ty.keyword.span(), msg));
        return None;
    }
    let format = format(&word, ty, errors)?;
    match ty.dims.as_slice() {
        [k, n] => Some(BufType::Weight { format, k, n }),
        _ => {
            let msg = format!(
                "a weight is written `{word}[K, N]` (reduction length, output length); found {} \
                 dimensions",
                ty.dims.len()
            );
            errors.push(Error::new(ty.dims_span, msg));
            None
        }
    }
}

fn tensor<'a>(dtype: Dtype, ty: &'a TypeSpec, errors: &mut Vec<Error>) -> Option<BufType<'a>> {
    if !(1..=2).contains(&ty.dims.len()) {
        let msg = format!(
            "a tensor is `{}[features]` or `{0}[batch, features]`; found {} dimensions",
            dtype.name(),
            ty.dims.len()
        );
        errors.push(Error::new(ty.dims_span, msg));
        return None;
    }
    for d in &ty.dims {
        if Dim::of(d) == Dim::Known(0) {
            errors.push(Error::new_spanned(d, "a dimension of length zero"));
        }
    }
    Some(BufType::Tensor {
        dtype,
        dims: &ty.dims,
    })
}

fn format<'a>(word: &str, ty: &'a TypeSpec, errors: &mut Vec<Error>) -> Option<Format<'a>> {
    let span = ty.keyword.span();
    match (word, &ty.generics, &ty.arg) {
        ("f16_nk", None, None) => Some(Format::F16),
        ("f16_nk", ..) => err(
            errors,
            span,
            "`f16_nk` (FP16, stored [N, K]) takes no layout",
        ),
        (_, Some(_), Some(_)) => err(
            errors,
            span,
            "give the layout either as `<…>` or as `(value)`, not both",
        ),
        ("gptq", Some(g), None) => gptq(g, span, errors).map(Format::GptqLit),
        ("gptq", None, Some(e)) => Some(Format::GptqExpr(e)),
        ("awq", Some(g), None) => awq(g, span, errors).map(Format::AwqLit),
        ("awq", None, Some(e)) => Some(Format::AwqExpr(e)),
        ("weight", None, Some(e)) => Some(Format::Any(e)),
        ("weight", ..) => err(
            errors,
            span,
            "`weight` takes its format as a value: `weight(format)[k, n]`",
        ),
        ("awq", ..) => err(
            errors,
            span,
            "`awq` needs its layout: `awq<group = 128>[k, n]` or `awq(layout)[k, n]`; the group \
             size must match the checkpoint, so it is never guessed",
        ),
        _ => err(
            errors,
            span,
            &format!(
                "`{word}` needs its layout: `{word}<group = 128, zero = v1>[k, n]` or \
                 `{word}(layout)[k, n]`; the group size and zero-point convention must match the \
                 checkpoint, so they are never guessed"
            ),
        ),
    }
}

fn err<T>(errors: &mut Vec<Error>, span: Span, msg: &str) -> Option<T> {
    errors.push(Error::new(span, msg));
    None
}

/// The entries of a literal layout, by key, each at most once.
struct Entries<'g> {
    found: Vec<&'g GenericEntry>,
}

impl<'g> Entries<'g> {
    fn new(g: &'g Generics, keys: &[&str], errors: &mut Vec<Error>) -> Self {
        let mut found: Vec<&GenericEntry> = Vec::new();
        for e in &g.entries {
            let key = e.key.to_string();
            if !keys.contains(&key.as_str()) {
                let expected = keys
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let hint = did_you_mean(&key, keys.iter().copied());
                let msg = format!("unknown layout key `{key}`: expected {expected}{hint}");
                errors.push(Error::new(e.key.span(), msg));
            } else if found.iter().any(|f| f.key == e.key) {
                errors.push(Error::new(e.key.span(), format!("`{key}` is given twice")));
            } else {
                found.push(e);
            }
        }
        Entries { found }
    }

    fn get(&self, key: &str) -> Option<&'g GenericEntry> {
        self.found.iter().copied().find(|e| e.key == key)
    }
}

fn gptq(g: &Generics, keyword: Span, errors: &mut Vec<Error>) -> Option<GptqLit> {
    let entries = Entries::new(g, &["group", "zero", "scale", "g_idx"], errors);
    let group = group(keyword, entries.get("group"), errors);
    let zero = zero(keyword, entries.get("zero"), errors);
    let scale = scale(entries.get("scale"), errors);
    let act_order = match entries.get("g_idx") {
        Some(GenericEntry {
            value: Some(_),
            key,
        }) => {
            err::<()>(errors, key.span(), "`g_idx` is a flag: write `g_idx` alone");
            true
        }
        Some(_) => true,
        None => false,
    };
    Some(GptqLit {
        group: group?,
        zero: zero?,
        scale: scale?,
        act_order,
    })
}

fn awq(g: &Generics, keyword: Span, errors: &mut Vec<Error>) -> Option<AwqLit> {
    let entries = Entries::new(g, &["group", "scale"], errors);
    let group = group(keyword, entries.get("group"), errors);
    let scale = scale(entries.get("scale"), errors);
    Some(AwqLit {
        group: group?,
        scale: scale?,
    })
}

fn group(span: Span, e: Option<&GenericEntry>, errors: &mut Vec<Error>) -> Option<Group> {
    match e.and_then(|e| e.value.as_ref()) {
        Some(GenericValue::Int(lit)) => match lit.base10_parse::<u32>() {
            Ok(g) if g > 0 => Some(Group::Rows(g)),
            _ => err(
                errors,
                lit.span(),
                "a group size is a positive number of rows of K",
            ),
        },
        Some(GenericValue::Ident(i)) if i == "per_channel" => Some(Group::PerChannel),
        Some(GenericValue::Ident(i)) => {
            let hint = did_you_mean(&i.to_string(), ["per_channel"]);
            err(
                errors,
                i.span(),
                &format!("a group size is a number of rows or `per_channel`{hint}"),
            )
        }
        None => err(
            errors,
            e.map_or(span, |e| e.key.span()),
            "give the group size: `group = 128` (or 32, 64, `per_channel`)",
        ),
    }
}

fn zero(span: Span, e: Option<&GenericEntry>, errors: &mut Vec<Error>) -> Option<Zero> {
    const ZEROS: [(&str, Zero); 3] = [("v1", Zero::V1), ("v2", Zero::V2), ("sym", Zero::Sym)];
    match e.and_then(|e| e.value.as_ref()) {
        Some(GenericValue::Ident(i)) => {
            let word = i.to_string();
            if let Some((_, z)) = ZEROS.iter().find(|(n, _)| *n == word) {
                return Some(*z);
            }
            let hint = did_you_mean(&word, ZEROS.iter().map(|(n, _)| *n));
            let msg = format!(
                "unknown zero-point convention `{word}`: expected `v1` (GPTQ v1, stores z − 1), \
                 `v2` (stores z) or `sym` (no qzeros, z = 8){hint}"
            );
            err(errors, i.span(), &msg)
        }
        Some(GenericValue::Int(lit)) => err(
            errors,
            lit.span(),
            "a zero-point convention is `v1`, `v2` or `sym`",
        ),
        None => err(
            errors,
            e.map_or(span, |e| e.key.span()),
            "say how zero points are stored: `zero = v1` (GPTQ v1, stores z − 1), `zero = v2` or \
             `zero = sym`; it must match the checkpoint, so it is never guessed",
        ),
    }
}

fn scale(e: Option<&GenericEntry>, errors: &mut Vec<Error>) -> Option<Dtype> {
    let Some(e) = e else { return Some(Dtype::F16) };
    match &e.value {
        Some(GenericValue::Ident(i)) => {
            let word = i.to_string();
            match DTYPES.iter().find(|(n, _)| *n == word) {
                Some((_, d)) if d.is_float() => Some(*d),
                _ => {
                    let hint = did_you_mean(&word, ["f16", "bf16", "f32"]);
                    err(
                        errors,
                        i.span(),
                        &format!("scales are `f16`, `bf16` or `f32`{hint}"),
                    )
                }
            }
        }
        _ => err(errors, e.key.span(), "write the scale type: `scale = f16`"),
    }
}

/// Rules that need the whole declaration: which sharding fits which buffer, and the packing and
/// grouping of a literal INT4 layout where K and N are literals.
fn check_combination(decl: &Decl, b: &Buffer, errors: &mut Vec<Error>) {
    let sharding_span = decl.sharding.as_ref().map_or(decl.name.span(), Ident::span);
    match (&b.ty, b.sharding) {
        (BufType::Tensor { .. }, Sharding::Row) => errors.push(Error::new(
            sharding_span,
            "`row_parallel` splits a weight's K axis; an activation split along its features is \
             `col_parallel`",
        )),
        (BufType::Weight { .. }, Sharding::Partial) => errors.push(Error::new(
            sharding_span,
            "a weight matrix is never `partial`: it is `replicated`, `col_parallel` or \
             `row_parallel`",
        )),
        _ => {}
    }
    if let (BufType::Weight { .. }, Role::Out) = (&b.ty, b.role) {
        let msg = "an output is a tensor (e.g. `f16[batch, n]`): a kernel never writes weights";
        errors.push(Error::new(decl.ty.keyword.span(), msg));
    }
    if let BufType::Weight { format, k, n } = &b.ty {
        let local_k = if b.global_index && b.sharding == Sharding::Row {
            Dim::Unknown
        } else {
            Dim::of(k)
        };
        let local_n = if b.global_index && b.sharding == Sharding::Col {
            Dim::Unknown
        } else {
            Dim::of(n)
        };
        let dims = WeightDims {
            k,
            n,
            local_k,
            local_n,
            row: b.sharding == Sharding::Row,
        };
        check_layout(decl, format, &dims, errors);
    }
}

struct WeightDims<'a> {
    k: &'a syn::Expr,
    n: &'a syn::Expr,
    local_k: Dim,
    local_n: Dim,
    row: bool,
}

fn check_layout(decl: &Decl, format: &Format, d: &WeightDims, errors: &mut Vec<Error>) {
    let (group, packed_n) = match format {
        Format::GptqLit(l) => {
            if let Some(k) = d.local_k.known().filter(|k| k % 8 != 0) {
                let msg =
                    format!("GPTQ packs 8 rows of K per word: K = {k} is not a multiple of 8");
                errors.push(Error::new_spanned(d.k, msg));
            }
            if l.act_order && d.row {
                let flag = decl
                    .ty
                    .generics
                    .as_ref()
                    .and_then(|g| g.entries.iter().find(|e| e.key == "g_idx"));
                let span = flag.map_or(decl.name.span(), |e| e.key.span());
                let msg = "an act-order (`g_idx`) weight cannot be split along K: rows of one \
                           group may land on different ranks";
                errors.push(Error::new(span, msg));
            }
            (l.group, l.zero != Zero::Sym)
        }
        Format::AwqLit(l) => (l.group, true),
        _ => return,
    };
    if let Some(n) = d.local_n.known().filter(|n| packed_n && n % 8 != 0) {
        let msg = format!("qzeros packs 8 columns of N per word: N = {n} is not a multiple of 8");
        errors.push(Error::new_spanned(d.n, msg));
    }
    if let (Group::Rows(g), Some(k)) = (group, d.local_k.known()) {
        if k % u128::from(g) != 0 {
            let hint = if d.row {
                " (each rank's K-shard must start and end on a group boundary)"
            } else {
                ""
            };
            let msg = format!("the group size {g} does not divide K = {k}{hint}");
            errors.push(Error::new_spanned(d.k, msg));
        }
    }
}
