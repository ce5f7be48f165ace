//! The checks of a description before any launch: against the generated kernel at the same shape
//! and against the source's signature.

use wavefuse_codegen::abi::{AbiKind, AbiParam, AbiPurpose, AbiTy};
use wavefuse_codegen::lowered::{LoweredKernel, Ty, peer_slot};

use super::{HandAbi, QuantiseBy};
use crate::ab::signature::{CParam, CType};

pub(super) fn ty(t: AbiTy) -> Ty {
    Ty::from(t)
}

/// One op-level array a lowered kernel binds.
pub(super) struct DataArray {
    pub(super) buffer: String,
    pub(super) part: &'static str,
    pub(super) elem: Ty,
    pub(super) len: usize,
}

/// The data arrays of a lowered kernel.
pub(super) fn data_arrays(k: &LoweredKernel) -> Vec<DataArray> {
    k.params
        .values()
        .filter_map(|p| p.data_array())
        .map(|d| DataArray {
            buffer: d.buffer.to_owned(),
            part: d.part,
            elem: d.elem,
            len: d.len,
        })
        .collect()
}

/// Whether element types `a` (declared) and `b` (the kernel's) hold the same bits: equal, or a
/// packed 32-bit word either signed or not.
pub(super) fn same_bits(a: Ty, b: Ty) -> bool {
    a == b || matches!((a, b), (Ty::I32, Ty::U32) | (Ty::U32, Ty::I32))
}

/// The description against the generated kernel at the same shape: with `[[launches]]`, each
/// launch's parameters (problems prefixed ``launch I `SYMBOL`: ``), every op-level array bound
/// by some launch.
pub fn check_against_generated(a: &HandAbi, g: &LoweredKernel) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(k) = a.kernel.as_deref().filter(|k| *k != g.name) {
        out.push(format!(
            "describes kernel `{k}`, compared with `{}`",
            g.name
        ));
    }
    if let Some(tp) = a.tp.filter(|&tp| tp != g.tp) {
        out.push(format!(
            "declared for TP {tp}, the kernel runs at TP {}",
            g.tp
        ));
    }
    let want = data_arrays(g);
    let mut seen: Vec<(String, String)> = Vec::new();
    for (i, stage) in stage_abis(a).iter().enumerate() {
        let prefix = if a.launches.is_empty() {
            String::new()
        } else {
            format!("launch {} `{}`: ", i + 1, stage.symbol)
        };
        let mut p = Vec::new();
        if stage.symbol.is_empty()
            || !stage
                .symbol
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            p.push(format!("symbol `{}` is not a C identifier", stage.symbol));
        }
        p.extend(check_indices_and_names(&stage.params));
        let mut here: Vec<(String, String)> = Vec::new();
        for param in &stage.params {
            p.extend(check_param(param, g, &want, &mut here, a));
        }
        p.extend(check_sync_params(stage, g.tp));
        out.extend(p.into_iter().map(|m| format!("{prefix}{m}")));
        for x in here {
            if !seen.contains(&x) {
                seen.push(x);
            }
        }
    }
    for DataArray {
        buffer,
        part,
        elem,
        len,
    } in &want
    {
        if !seen.iter().any(|(b, p)| b == buffer && p == part) {
            out.push(format!(
                "missing: `{buffer}.{part}` ({}[{len}]) of `{}` is bound to no parameter{}",
                elem.name(),
                g.name,
                if a.launches.is_empty() {
                    ""
                } else {
                    " of any launch"
                }
            ));
        }
    }
    out.extend(check_quantise(a));
    out
}

/// One description per launch: the top level's, or each `[[launches]]` entry with the top
/// level's other fields.
pub fn stage_abis(a: &HandAbi) -> Vec<HandAbi> {
    if a.launches.is_empty() {
        return vec![a.clone()];
    }
    a.launches
        .iter()
        .map(|l| HandAbi {
            symbol: l.symbol.clone(),
            workgroup_size: l.workgroup_size.clone(),
            grid: l.grid.clone(),
            params: l.params.clone(),
            model: l.model.clone(),
            dynamic_lds_bytes: l.dynamic_lds_bytes,
            launches: Vec::new(),
            ..a.clone()
        })
        .collect()
}

/// `[quantise]`: who quantises, and where.
pub(super) fn check_quantise(a: &HandAbi) -> Vec<String> {
    let Some(q) = &a.quantise else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let stages = stage_abis(a);
    let binds = |s: &HandAbi, part: &str| {
        s.params.iter().any(|p| {
            p.purpose == AbiPurpose::Data
                && p.buffer.as_deref() == Some(q.input.as_str())
                && p.part.as_deref() == Some(part)
        })
    };
    match (q.by, q.kernel.as_deref()) {
        (QuantiseBy::Host, Some(k)) => out.push(format!(
            "[quantise] by = \"host\" names a kernel (`{k}`): the host quantises; give \
             by = \"kernel\" for a quantisation launch"
        )),
        (QuantiseBy::Host, None) => {
            if !stages.iter().any(|s| binds(s, "qscale")) {
                out.push(format!(
                    "[quantise] by = \"host\": no parameter takes the scales of `{0}` \
                     (`buffer = \"{0}\"`, `part = \"qscale\"`, f32 or f16, one per token)",
                    q.input
                ));
            }
        }
        (QuantiseBy::Kernel, None) => out.push(
            "[quantise] by = \"kernel\" needs `kernel`: the symbol of the launch that quantises"
                .into(),
        ),
        (QuantiseBy::Kernel, Some(k)) => {
            let symbols: Vec<&str> = stages.iter().map(|s| s.symbol.as_str()).collect();
            let gemv = stages.iter().position(|s| {
                s.params
                    .iter()
                    .any(|p| p.purpose == AbiPurpose::Data && p.part.as_deref() == Some("qweight"))
            });
            match symbols.iter().position(|s| *s == k) {
                None => out.push(format!(
                    "[quantise] kernel = `{k}`: no launch has that symbol (launches: {})",
                    symbols.join(", ")
                )),
                Some(i) => {
                    if !binds(&stages[i], "data") {
                        out.push(format!(
                            "[quantise] kernel = `{k}` does not take `{}.data`, the input it \
                             quantises",
                            q.input
                        ));
                    }
                    if gemv.is_some_and(|g| g < i) {
                        out.push(format!(
                            "[quantise] kernel = `{k}` is launch {}, after the GEMV (launch {}) \
                             that reads what it writes",
                            i + 1,
                            gemv.unwrap_or(0) + 1
                        ));
                    }
                }
            }
        }
    }
    out
}

pub(super) fn check_indices_and_names(params: &[AbiParam]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, p) in params.iter().enumerate() {
        if p.index as usize != i {
            out.push(format!(
                "parameter `{}` is number {i} in the list but declares index {}",
                p.name, p.index
            ));
        }
        if params[..i].iter().any(|q| q.name == p.name) {
            out.push(format!("parameter name `{}` appears twice", p.name));
        }
    }
    out
}

/// One parameter: its kind, type and length against what the kernel binds.
pub(super) fn check_param(
    p: &AbiParam,
    g: &LoweredKernel,
    want: &[DataArray],
    seen: &mut Vec<(String, String)>,
    a: &HandAbi,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(e) = p.lowered_purpose() {
        out.push(e);
        return out;
    }
    let is_array = matches!(p.kind, AbiKind::Array | AbiKind::PeerArrays);
    match p.purpose {
        AbiPurpose::Data => {
            let (b, part) = (
                p.buffer.clone().unwrap_or_default(),
                p.part.clone().unwrap_or_default(),
            );
            if !is_array {
                out.push(format!(
                    "parameter `{}`: a scalar bound to `{b}.{part}`; data is passed as arrays",
                    p.name
                ));
            }
            if seen.iter().any(|(x, y)| *x == b && *y == part) {
                out.push(format!(
                    "`{b}.{part}` is bound twice (again by `{}`)",
                    p.name
                ));
            }
            seen.push((b.clone(), part.clone()));
            let host_quantised = a
                .quantise
                .as_ref()
                .is_some_and(|q| q.by == QuantiseBy::Host && q.input == b);
            if part == "qscale" {
                if !host_quantised {
                    out.push(format!(
                        "parameter `{}` takes `{b}.qscale`, the scales of an input quantised on \
                         the host, and the description has no `[quantise] input = \"{b}\"` with \
                         by = \"host\"",
                        p.name
                    ));
                } else if !is_array || !matches!(p.ty, AbiTy::F32 | AbiTy::F16) {
                    out.push(format!(
                        "parameter `{}` (`{b}.qscale`): the per-token scales are an f32 or f16 array",
                        p.name
                    ));
                }
                return out;
            }
            match want.iter().find(|w| w.buffer == b && w.part == part) {
                None => out.push(format!(
                    "extra: parameter `{}` is bound to `{b}.{part}`, which `{}` does not have",
                    p.name, g.name
                )),
                Some(DataArray { elem, len, .. }) => {
                    // FP16 / FP32 zero points: [K/G, N], decoded from the packed words.
                    let float_zeros = part == "qzeros"
                        && matches!(p.ty, AbiTy::F16 | AbiTy::F32)
                        && matches!(elem, Ty::U32 | Ty::I32);
                    let (elem, len) = if float_zeros {
                        (&ty(p.ty), &(*len * 8))
                    } else {
                        (elem, len)
                    };
                    if p.ty == AbiTy::I8 && part == "data" && *elem != Ty::I8 {
                        if !host_quantised {
                            out.push(format!(
                                "parameter `{}` (`{b}.{part}`) is i8, the op's array is {}: an \
                                 input taken quantised needs `[quantise] input = \"{b}\"` \
                                 (by = \"host\"; or a quantisation launch, by = \"kernel\")",
                                p.name,
                                elem.name()
                            ));
                        }
                    } else if host_quantised && part == "data" {
                        out.push(format!(
                            "parameter `{}` (`{b}.data`) is {}: `[quantise] input = \"{b}\"` \
                             by = \"host\" binds the INT8 codes (declare it i8)",
                            p.name,
                            ty(p.ty).name()
                        ));
                    } else if !same_bits(ty(p.ty), *elem) {
                        out.push(format!(
                            "mistyped: parameter `{}` (`{b}.{part}`) is {}, the kernel's array is {}",
                            p.name,
                            ty(p.ty).name(),
                            elem.name()
                        ));
                    }
                    if p.len.is_some_and(|l| l as usize != *len) || p.len.is_none() {
                        out.push(format!(
                            "parameter `{}` (`{b}.{part}`) declares {} elements, the kernel's array has {len} at this shape",
                            p.name,
                            p.len.map_or("no".to_owned(), |l| l.to_string())
                        ));
                    }
                }
            }
        }
        AbiPurpose::Value => {
            if p.kind != AbiKind::Scalar || !matches!(p.ty, AbiTy::U32 | AbiTy::I32) {
                out.push(format!(
                    "parameter `{}` (value) must be a 32-bit integer scalar (u32 or i32)",
                    p.name
                ));
            }
            if p.value.is_none() {
                out.push(format!(
                    "parameter `{}` (value) has no `value` (an expression of the shape such as \
                     \"k\", \"n / 64\", \"group_size\", or a literal)",
                    p.name
                ));
            }
        }
        AbiPurpose::Rank | AbiPurpose::Epoch => {
            if p.kind != AbiKind::Scalar || !matches!(p.ty, AbiTy::U32 | AbiTy::I32) {
                out.push(format!(
                    "parameter `{}` ({:?}) must be a 32-bit integer scalar",
                    p.name, p.purpose
                ));
            }
        }
        AbiPurpose::Counter | AbiPurpose::Flags | AbiPurpose::ErrorWord => {
            if !is_array || !matches!(p.ty, AbiTy::U32 | AbiTy::I32) || p.len.is_none_or(|l| l == 0)
            {
                out.push(format!(
                    "parameter `{}` ({:?}) must be an array of 32-bit words with a positive `len`",
                    p.name, p.purpose
                ));
            }
        }
        AbiPurpose::Scratch => {
            // A shared `[[scratch]]` array (`buffer`): its length is the declaration's
            // (checked at the shape by `Hand::check`).
            let shared = p.buffer.is_some();
            if !is_array || (!shared && p.len.is_none_or(|l| l == 0)) {
                out.push(format!(
                    "parameter `{}` (scratch) must be an array with a positive `len`, or name a \
                     [[scratch]] array (`buffer`)",
                    p.name
                ));
            }
            if let Some(name) = &p.buffer
                && !a.scratch.iter().any(|d| d.name == *name)
            {
                out.push(format!(
                    "parameter `{}`: scratch `{name}` is not declared ([[scratch]] has: {})",
                    p.name,
                    list_or_none(a.scratch.iter().map(|d| d.name.as_str()))
                ));
            }
        }
    }
    out
}

/// The relative-L2 tolerance of an A/B whose hand-written kernel takes activation `x` (rows of
/// `cols`, one per token) quantised to INT8 per token (`[quantise]`), against the f64 oracle of
/// the op with FP16 activations, whose own tolerance is `base`:
///
/// `base + 3 · max over tokens t of  m_t / (127 · √12 · rms_t)`, `m_t = max|x_t|`.
///
/// Derivation: the codes round `x_k / s` to an integer, `s = m / 127`, so the error `e_k` of the
/// dequantised activation is within `s / 2` and, rounding being uniform over codes, of variance
/// `s² / 12`, independent of the weights. The output error `Δy = W e` then has
/// `E‖Δy‖² = ‖W‖²_F · s² / 12 / K` per token while `‖y‖² ≈ ‖W‖²_F · rms(x)² / K` for weights
/// uncorrelated with `x` (the workload's N(0, 0.02) weights): relative L2 ≈ `s / (√12 ·
/// rms(x))`. The factor 3 covers the spread of that estimate over the finite sums (a 3σ
/// margin) and the worst token sets the bound. At N(0, 1) activations with K = 5120
/// (`m ≈ 4`): ≈ 0.0091 expected, 0.027 allowed, plus the FP16 output's `base`.
pub fn quantised_tolerance(base: f64, x: &[f64], cols: usize) -> f64 {
    let worst = x
        .chunks(cols.max(1))
        .map(|row| {
            let m = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let rms = (row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64).sqrt();
            if rms > 0.0 {
                m / (127.0 * 12f64.sqrt() * rms)
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max);
    base + 3.0 * worst
}

/// `a, b, c`, or `none`.
pub(super) fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Error word and peer ordering.
pub(super) fn check_sync_params(a: &HandAbi, tp: u32) -> Vec<String> {
    let mut out = Vec::new();
    // Counters or flags count by epoch (DESIGN.md §5.4): a kernel takes it as an `epoch` scalar
    // (the runtime passes 1, 2, 3, …; one replay per captured graph) or keeps it on the device in
    // a counter array of its own (as the generated kernels do); both are valid.
    let peers = a.params.iter().any(|p| p.kind == AbiKind::PeerArrays);
    match (&a.peer_table, peers) {
        (None, true) => out.push(
            "peer tables but no [peer_table]: state the peer ordering (`slots`, slot of rank p's array)"
                .into(),
        ),
        (Some(t), true) => {
            let runtime: Vec<u32> = (0..tp).map(|p| peer_slot(p) as u32).collect();
            if t.slots != runtime {
                out.push(format!(
                    "peer ordering: slots {:?}, but the runtime fills slot {runtime:?} with rank \
                     0, 1, … (the one rule of DESIGN.md §5.5)",
                    t.slots
                ));
            }
        }
        _ => {}
    }
    out
}

/// Whether a source type holds the declared ABI type.
pub(super) fn compatible(declared: AbiTy, c: CType) -> bool {
    matches!(
        (declared, c),
        (AbiTy::F16, CType::Half)
            | (AbiTy::F32, CType::F32)
            | (AbiTy::U32 | AbiTy::I32, CType::Int32)
            | (AbiTy::I8, CType::Int8)
            | (AbiTy::Bool, CType::Bool | CType::Int8)
    )
}

/// The description's parameter list against the source's.
pub fn check_signature(declared: &[AbiParam], source: &[CParam]) -> Vec<String> {
    let mut out = Vec::new();
    if declared.len() != source.len() {
        out.push(format!(
            "wrong count: the kernel takes {} parameters ({}), the ABI declares {} ({})",
            source.len(),
            source
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            declared.len(),
            declared
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    for (i, (d, s)) in declared.iter().zip(source).enumerate() {
        if d.name != s.name {
            out.push(format!(
                "parameter {i} is `{}` in the kernel, the ABI declares `{}`",
                s.name, d.name
            ));
        }
        let pointers = match d.kind {
            AbiKind::Scalar => 0,
            AbiKind::Array => 1,
            AbiKind::PeerArrays => 2,
        };
        if s.pointers != pointers || !compatible(d.ty, s.ty) {
            out.push(format!(
                "mistyped: parameter {i} `{}` is {} in the kernel, the ABI declares {}",
                s.name,
                shape_of(s.pointers, &format!("`{}`", s.spelled)),
                shape_of(pointers, ty(d.ty).name()),
            ));
        }
    }
    out
}

/// `a pointer to f16`, `a u32 value`, `a table of pointers to f16`.
pub(super) fn shape_of(pointers: u32, ty: &str) -> String {
    match pointers {
        0 => format!("a {ty} value"),
        1 => format!("a pointer to {ty}"),
        2 => format!("a table of pointers to {ty}"),
        n => format!("a {n}-level pointer to {ty}"),
    }
}
