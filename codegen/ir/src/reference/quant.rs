//! Dequantisation of packed INT4 weights and block INT8 quantisation, in f64.

use crate::types::{AWQ_NIBBLE_ORDER, GptqLayout, GroupSize, ZeroPoint};

use super::data::PackedInt4;

/// Nibble `i` of a 32-bit word.
fn nibble(word: i32, i: usize) -> u32 {
    ((word as u32) >> (4 * i)) & 0xF
}

/// Group of row k.
fn group_of(k: usize, group: GroupSize, kdim: usize, g_idx: Option<&[i32]>) -> usize {
    match g_idx {
        Some(g) => g[k] as usize,
        None => k / group.rows(kdim),
    }
}

/// Row k of a GPTQ weight `[K, N]`, dequantised into `out` (length N).
pub fn gptq_row(l: &GptqLayout, kdim: usize, n: usize, w: &PackedInt4, k: usize, out: &mut [f64]) {
    let g = group_of(k, l.group, kdim, w.g_idx.as_deref());
    let words = &w.qweight[(k / 8) * n..(k / 8 + 1) * n];
    for (col, o) in out.iter_mut().enumerate() {
        let q = i64::from(nibble(words[col], k % 8));
        let z = match l.zero {
            ZeroPoint::Symmetric => 8,
            zp => zp.decode(nibble(w.qzeros[g * (n / 8) + col / 8], col % 8)),
        };
        *o = (q - z) as f64 * w.scales[g * n + col];
    }
}

/// Row k of an AWQ weight `[K, N]`, dequantised into `out` (length N).
pub fn awq_row(group: GroupSize, kdim: usize, n: usize, w: &PackedInt4, k: usize, out: &mut [f64]) {
    let g = k / group.rows(kdim);
    for (col, o) in out.iter_mut().enumerate() {
        let pos = AWQ_NIBBLE_ORDER
            .iter()
            .position(|&c| c == col % 8)
            .expect("a permutation");
        let q = i64::from(nibble(w.qweight[k * (n / 8) + col / 8], pos));
        let z = i64::from(nibble(w.qzeros[g * (n / 8) + col / 8], pos));
        *o = (q - z) as f64 * w.scales[g * n + col];
    }
}

/// Block-absmax INT8 round trip of one row: returns `q · s` per element, with `s = max|x|/127`
/// computed in f32 and `q = clamp(round_half_away(x / s), −127, 127)`.
pub fn int8_roundtrip(row: &[f64], block: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(row.len());
    for chunk in row.chunks(block) {
        let (codes, s) = int8_quantize(chunk);
        out.extend(codes.iter().map(|&q| q * s));
    }
    out
}

/// Codes and scale of one block.
pub fn int8_quantize(block: &[f64]) -> (Vec<f64>, f64) {
    let absmax = block.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let s = f64::from(absmax as f32 / 127.0f32);
    let codes = block
        .iter()
        .map(|&x| {
            if s == 0.0 {
                0.0
            } else {
                (x / s).round().clamp(-127.0, 127.0)
            }
        })
        .collect();
    (codes, s)
}

/// Codes and scale of one block of FP16 values under `quantize_int8.rne` with clamp `c`, as the
/// op documents (so a kernel matches bit for bit): `m = max|x|`, `s = m / c`, `r = c / m` (f32
/// divisions, 0 where m = 0), `q = clamp(rne(x · r), −c, c)` with the product exact (an FP16
/// times an f32 is exact in f64).
pub fn q8_rne_quantize(block: &[f64], clamp: usize) -> (Vec<f64>, f64) {
    let c = clamp as f32;
    // FP16 values are exact in f32.
    let m = block.iter().fold(0.0f32, |m, &x| m.max((x as f32).abs()));
    let (s, r) = if m > 0.0 { (m / c, c / m) } else { (0.0, 0.0) };
    let codes = block
        .iter()
        .map(|&x| {
            let c = f64::from(c);
            (f64::from(x as f32) * f64::from(r))
                .round_ties_even()
                .clamp(-c, c)
        })
        .collect();
    (codes, f64::from(s))
}
