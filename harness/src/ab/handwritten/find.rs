//! Finding the hand-written reference of a kernel among the descriptions of a directory.

use std::path::{Path, PathBuf};

use wavefuse::ir::Kernel;
use wavefuse_codegen::lowered::LoweredKernel;

use super::check::{data_arrays, stage_abis};
use super::files::file_name;
use super::{Hand, parametric};

/// Where hand-written reference kernels live: `--reference-dir`, else `kernels-gen/reference`
/// under the current directory (a checkout's root), else the one this binary was built from.
pub fn reference_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(d) = explicit {
        return Some(d.to_path_buf());
    }
    [
        PathBuf::from("kernels-gen/reference"),
        PathBuf::from(wavefuse_kernels::REFERENCE_DIR),
    ]
    .into_iter()
    .find(|d| d.is_dir())
}

/// What was found for one kernel, TP and target.
#[derive(Debug)]
pub enum Found {
    /// A usable description.
    Hand(Box<Hand>),
    /// None, and why (the row says so).
    Absent(String),
}

/// The hand-written reference for the generated kernel (`generated`, of op-level kernel `ir`) in
/// `dir`: every `*.abi.toml` under it (one level of subdirectories), a parametric one
/// instantiated at `ir`'s shapes, whose `kernel` (or file name up to the first dot) is the
/// kernel, for this TP (or any) and target, and whose data arrays have the generated kernel's
/// lengths (the same shape). Descriptions that cannot be read are reported, not skipped.
pub fn find_reference(dir: Option<&Path>, generated: &LoweredKernel, ir: &Kernel) -> Found {
    let Some(dir) = dir else {
        return Found::Absent(
            "no hand-written version (give one with --manual FILE --abi FILE.toml)".into(),
        );
    };
    let mut candidates = Vec::new();
    let mut unreadable = Vec::new();
    for path in abi_files(dir) {
        let stem = file_name(&path);
        let stem = stem.split('.').next().unwrap_or("");
        match Hand::load_for(&path, None, Some(ir)) {
            Ok(h) => {
                let kernel = h.abi.kernel.as_deref().unwrap_or(stem);
                let same_kernel = kernel == generated.name || stem == generated.name;
                if same_kernel
                    && h.arch == generated.arch
                    && h.abi.tp.is_none_or(|t| t == generated.tp)
                {
                    candidates.push(h);
                }
            }
            Err(e) if stem == generated.name => unreadable.push(e),
            Err(_) => {}
        }
    }
    if let Some(e) = unreadable.first().filter(|_| candidates.is_empty()) {
        return Found::Absent(format!("hand-written version unreadable: {e}"));
    }
    let batch = parametric::Bindings::of(ir).int("batch").unwrap_or(1);
    let limited: Vec<(u32, Option<u32>)> = candidates
        .iter()
        .map(|h| h.abi.batch_range())
        .filter(|&(min, max)| min > 1 || max.is_some())
        .collect();
    candidates.retain(|h| h.abi.covers(batch));
    if candidates.is_empty() && !limited.is_empty() {
        let spans: Vec<String> = limited
            .iter()
            .map(|&(min, max)| super::batch_span(min, max))
            .collect();
        return Found::Absent(format!(
            "no hand-written version at batch {batch} (the reference covers batch {}: its \
             `min_batch` / `max_batch`)",
            spans.join(", ")
        ));
    }
    let want = data_arrays(generated);
    let fits = |h: &Hand| {
        let stages = stage_abis(&h.abi);
        want.iter().all(|w| {
            stages.iter().flat_map(|s| &s.params).any(|p| {
                p.buffer.as_deref() == Some(w.buffer.as_str())
                    && p.part.as_deref() == Some(w.part)
                    && p.len == Some(w.len as u64)
            })
        })
    };
    match candidates.iter().position(fits) {
        Some(i) => Found::Hand(Box::new(candidates.swap_remove(i))),
        None if candidates.is_empty() => Found::Absent(format!(
            "no hand-written version for {} (no {}.abi.toml or {}.tp{}.abi.toml for {} in {})",
            generated.name,
            generated.name,
            generated.name,
            generated.tp,
            generated.arch,
            dir.display()
        )),
        None => Found::Absent(format!(
            "no hand-written version at this shape ({} description(s) of {} at TP {} for other shapes)",
            candidates.len(),
            generated.name,
            generated.tp
        )),
    }
}

/// `*.abi.toml` files in `dir` and its immediate subdirectories, sorted.
pub(super) fn abi_files(dir: &Path) -> Vec<PathBuf> {
    let list = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for p in list(dir) {
        if p.is_dir() {
            out.extend(list(&p));
        } else {
            out.push(p);
        }
    }
    out.retain(|p| p.is_file() && file_name(p).ends_with(".abi.toml"));
    out.sort();
    out
}
