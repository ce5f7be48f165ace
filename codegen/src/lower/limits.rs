//! Limits checked at the lowering's entry, before anything is lowered: the index width of the
//! generated code against every buffer, and the depth of the op graph against the recursion that
//! lowers it.
//!
//! Every index the lowering writes is a 32-bit `unsigned` (`Ty::U32`): `w[(n * K) + k]`. An array
//! of more than [`MAX_INDEXED_ELEMENTS`] elements would have indices that wrap, and the kernel
//! would read and write the wrong elements without any error — so such a kernel is refused here,
//! at the lowering's entry, which every path (`emit`, `check`, `sim`, `ab`, the Python package)
//! goes through, naming the buffer, the device array, its element count per rank and the limit.
//! Byte offsets (`Schedule::byte_offsets`) need no check of their own: the writer uses them only
//! for arrays whose bytes fit in 32 bits and indexes the others by element.

use cranelift_entity::SecondaryMap;
use wavefuse_ir::{BufferData, BufferType, Kernel, Value, WeightFormat, ZeroPoint};

use crate::lowered::{LoweredKernel, ParamKind, Purpose};

use super::LowerError;

/// The most elements one device array of a rank may have: its indices are `u32`, and the last
/// element's index, `len − 1`, must fit.
pub const MAX_INDEXED_ELEMENTS: u64 = u32::MAX as u64;

/// Refuse a kernel with a device array (per rank) of more than [`MAX_INDEXED_ELEMENTS`]
/// elements. `kernel` must be valid (its shardings divide its shapes).
pub(super) fn check_index_width(kernel: &Kernel) -> Result<(), LowerError> {
    for (_, d) in kernel.buffers() {
        for (array, elements) in device_arrays(d) {
            if elements.is_none_or(|e| e > u128::from(MAX_INDEXED_ELEMENTS)) {
                return Err(LowerError::IndexWidth {
                    buffer: d.name.clone(),
                    array,
                    elements: elements.map_or_else(|| "more than 2^128".into(), |e| e.to_string()),
                    limit: MAX_INDEXED_ELEMENTS,
                });
            }
        }
    }
    Ok(())
}

/// Refuse a lowered kernel with an array parameter the lowering added (scratch, counters, flags:
/// an allreduce's double-buffered payload is twice its operand) beyond [`MAX_INDEXED_ELEMENTS`].
/// The buffers' own arrays were checked by [`check_index_width`] before lowering.
pub(super) fn check_lowered_arrays(k: &LoweredKernel) -> Result<(), LowerError> {
    for (_, d) in k.params.iter() {
        let (ParamKind::Array { len, purpose, .. } | ParamKind::PeerArrays { len, purpose, .. }) =
            &d.kind
        else {
            continue;
        };
        if *len as u64 > MAX_INDEXED_ELEMENTS {
            let (buffer, array) = match purpose {
                Purpose::Data { buffer, part } => (buffer.clone(), *part),
                _ => (d.name.clone(), "scratch"),
            };
            return Err(LowerError::IndexWidth {
                buffer,
                array,
                elements: len.to_string(),
                limit: MAX_INDEXED_ELEMENTS,
            });
        }
    }
    Ok(())
}

/// The device arrays of one rank's share of `d` and their element counts (`None`: beyond
/// `u128`), as the lowering declares them.
fn device_arrays(d: &BufferData) -> Vec<(&'static str, Option<u128>)> {
    let mul = |a: Option<u128>, b: usize| a?.checked_mul(b as u128);
    match d.local_type() {
        BufferType::Tensor(t) => {
            vec![("data", t.shape.iter().fold(Some(1), |acc, &x| mul(acc, x)))]
        }
        BufferType::Weight(w) => {
            let (k, n) = (w.k as u128, w.n);
            match w.format {
                WeightFormat::F16 => vec![("data", mul(Some(k), n))],
                WeightFormat::Gptq(l) => {
                    let groups = k / l.group.rows(w.k).max(1) as u128;
                    let mut arrays = vec![
                        ("qweight", mul(Some(k / 8), n)),
                        ("scales", mul(Some(groups), n)),
                    ];
                    if l.zero != ZeroPoint::Symmetric {
                        arrays.push(("qzeros", mul(Some(groups), n).map(|e| e / 8)));
                    }
                    if l.act_order {
                        arrays.push(("g_idx", Some(k)));
                    }
                    arrays
                }
                WeightFormat::Awq(l) => {
                    let groups = k / l.group.rows(w.k).max(1) as u128;
                    vec![
                        ("qweight", mul(Some(k), n).map(|e| e / 8)),
                        ("scales", mul(Some(groups), n)),
                        ("qzeros", mul(Some(groups), n).map(|e| e / 8)),
                    ]
                }
            }
        }
    }
}

/// The longest chain of ops, each reading the previous one's result, that the lowering accepts.
///
/// The lowering evaluates a value at a point by recursion over its operands and builds one
/// expression tree per stage, which the lowered validator, the simulator and the C++ writer then
/// walk recursively too: a chain of ~10,000 ops overflowed the stack (SIGABRT in `emit`, `sim`,
/// `check`; a segfault in `tune`). Real kernels are a few dozen ops deep; 256 leaves room for
/// generated ones and stays far below the depth that exhausts a 2 MiB thread stack (the test
/// `a_chain_at_the_depth_limit_lowers_and_writes_on_a_small_stack` checks it).
pub const MAX_OP_DEPTH: usize = 256;

/// Refuse a kernel whose longest dependency chain has more than [`MAX_OP_DEPTH`] ops, naming the
/// op that ends it. One pass in program order (operands are defined before their uses in a
/// valid kernel), no recursion.
pub(super) fn check_depth(kernel: &Kernel) -> Result<(), LowerError> {
    let mut depth: SecondaryMap<Value, usize> = SecondaryMap::new();
    for (op, data) in kernel.ops() {
        let d = 1 + data
            .kind
            .args()
            .iter()
            .map(|&v| depth[v])
            .max()
            .unwrap_or(0);
        if d > MAX_OP_DEPTH {
            let what = data
                .results
                .first()
                .map_or(op.to_string(), |v| format!("the op of {v}"));
            let at = kernel.loc(op).map(|l| format!("{l}: ")).unwrap_or_default();
            return Err(LowerError::TooDeep {
                op: format!("{at}{what}"),
                depth: d,
                limit: MAX_OP_DEPTH,
            });
        }
        for &v in &data.results {
            depth[v] = d;
        }
    }
    Ok(())
}
