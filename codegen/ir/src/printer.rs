//! The textual IR: stable, readable, and the first snapshot format.
//!
//! ```text
//! kernel gemv_int4_allreduce_rmsnorm(tp=4) {
//!     buf0 = input w : gptq<group=128, zero=v2, scale=f16>[k=4352, n=5120] row_parallel(tp=4) @global index=local
//!     v0 = load buf1                        ; f16[1, 4352] sharded
//!     v1 = gemv.row buf0, v0                ; f32[1, 5120] partial
//! }
//! ```
//! Types after `;` are inferred by the validator and printed only for a valid kernel. A kernel or
//! parameter name that is not a bare identifier (`[A-Za-z_][A-Za-z0-9_.]*`) is printed quoted, with
//! Rust's string escapes, so that [`parse`](crate::parse) reads every printed kernel back.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use crate::buffer::BufferData;
use crate::kernel::{Kernel, OpData};
use crate::parse::is_bare_name;
use crate::types::IndexSpace;
use crate::validate::{KernelInfo, validate};

/// Column at which type comments start.
const COMMENT_COLUMN: usize = 40;

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = validate(self).ok();
        writeln!(f, "kernel {}(tp={}) {{", name(&self.name), self.tp)?;
        for (b, data) in self.buffers.iter() {
            writeln!(f, "    {b} = {}", buffer_line(data))?;
        }
        for (_, op) in self.ops.iter() {
            writeln!(f, "    {}", op_line(op, info.as_ref()))?;
        }
        f.write_str("}\n")
    }
}

/// A name as the parser reads it back: bare if it is an identifier, else quoted.
fn name(s: &str) -> Cow<'_, str> {
    if is_bare_name(s) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("{s:?}"))
    }
}

fn buffer_line(d: &BufferData) -> String {
    let index = match d.index_space {
        IndexSpace::Local => "index=local",
        IndexSpace::Global => "index=global",
    };
    format!(
        "{} {} : {} {} @{} {index}",
        d.role.name(),
        name(&d.name),
        d.ty,
        d.sharding,
        d.space.name()
    )
}

fn op_line(op: &OpData, info: Option<&KernelInfo>) -> String {
    let mut line = String::new();
    if !op.results.is_empty() {
        let names: Vec<String> = op.results.iter().map(|v| v.to_string()).collect();
        let _ = write!(line, "{} = ", names.join(", "));
    }
    line.push_str(op.kind.mnemonic());
    let mut operands: Vec<String> = Vec::new();
    if let (Some(b), false) = (
        op.kind.buffer(),
        matches!(op.kind, crate::ops::OpKind::Store(_)),
    ) {
        operands.push(b.to_string());
    }
    operands.extend(op.kind.args().iter().map(|v| v.to_string()));
    if let crate::ops::OpKind::Store(s) = &op.kind {
        operands.push(s.buffer.to_string());
    }
    let attrs = op.kind.attributes();
    if !attrs.is_empty() {
        operands.push(attrs);
    }
    if !operands.is_empty() {
        let _ = write!(line, " {}", operands.join(", "));
    }
    if let Some(info) = info {
        let types: Vec<String> = op
            .results
            .iter()
            .map(|&v| info.value_type(v).to_string())
            .collect();
        if !types.is_empty() {
            let pad = COMMENT_COLUMN.saturating_sub(line.chars().count()).max(1);
            let _ = write!(line, "{:pad$}; {}", "", types.join(", "));
        }
    }
    line
}
