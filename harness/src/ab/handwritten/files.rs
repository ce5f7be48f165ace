//! Reading a hand-written kernel's files: its source (with the headers it includes spliced in),
//! its target from the file name, and its description, instantiated for a kernel's shapes.

use std::path::Path;

use wavefuse::ir::Kernel;
use wavefuse_codegen::Arch;

use super::{Dims, HandAbi, HandError, parametric};

pub(super) fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The target of a source file from its extension.
pub fn arch_of(path: &Path) -> Result<Arch, HandError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("cu") => Ok(Arch::Sm90),
        Some("hip") => Ok(Arch::Gfx906),
        _ => Err(HandError::NoArch(path.to_owned())),
    }
}

/// The source file at `path` as the compilers get it: every `#include "NAME"` of a file beside it
/// spliced in where it stands, between `#line` directives (the gfx906 INT4 references share their
/// hot loop through `gemv_int4_loop.h`). hipcc in a scratch directory, hiprtc and NVRTC then
/// compile one translation unit, and the compile cache's key, the text, covers the header. A file
/// without such an include is returned as it is.
pub fn read_source(path: &Path) -> Result<String, HandError> {
    splice_includes(path, 0)
}

/// [`read_source`] at include depth `depth` (a header may include another, up to 8 deep).
pub(super) fn splice_includes(path: &Path, depth: usize) -> Result<String, HandError> {
    let text = read(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let header = line
            .trim()
            .strip_prefix("#include")
            .and_then(|rest| rest.trim().strip_prefix('"'))
            .and_then(|rest| rest.split_once('"'))
            .map(|(name, _)| dir.join(name))
            .filter(|h| h.is_file() && depth < 8);
        let Some(header) = header else {
            out.push_str(line);
            continue;
        };
        out.push_str(&format!("#line 1 \"{}\"\n", file_name(&header)));
        out.push_str(&splice_includes(&header, depth + 1)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("#line {} \"{}\"\n", i + 2, file_name(path)));
    }
    Ok(out)
}

/// The text of `path`.
pub(super) fn read(path: &Path) -> Result<String, HandError> {
    std::fs::read_to_string(path).map_err(|source| HandError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The parametric description `text` (read from `path`) instantiated for `ir`'s shapes.
pub(super) fn instantiate(path: &Path, text: &str, ir: &Kernel) -> Result<String, HandError> {
    parametric::instantiate(text, &parametric::Bindings::of(ir)).map_err(|source| {
        HandError::Instantiate {
            path: path.to_owned(),
            kernel: ir.name().to_owned(),
            source,
        }
    })
}

/// The description `text` (read from `path`); with `[[launches]]`, the top level takes the first
/// launch's symbol, launch and parameters (what a one-kernel reader sees), and may not give its
/// own.
pub(super) fn parse(path: &Path, text: &str) -> Result<HandAbi, HandError> {
    let mut abi: HandAbi = toml::from_str(text).map_err(|source| HandError::Toml {
        path: path.to_owned(),
        source,
    })?;
    let Some(first) = abi.launches.first().cloned() else {
        return Ok(abi);
    };
    let given: Vec<&str> = [
        (!abi.symbol.is_empty(), "symbol"),
        (abi.grid != Dims::default(), "grid"),
        (abi.workgroup_size != Dims::default(), "workgroup_size"),
        (!abi.params.is_empty(), "[[params]]"),
        (abi.model.is_some(), "[model]"),
        (abi.dynamic_lds_bytes != 0, "dynamic_lds_bytes"),
    ]
    .into_iter()
    .filter_map(|(g, what)| g.then_some(what))
    .collect();
    if !given.is_empty() {
        return Err(HandError::TopLevelWithLaunches {
            path: path.to_owned(),
            given: given.join(", "),
        });
    }
    abi.symbol = first.symbol;
    abi.grid = first.grid;
    abi.workgroup_size = first.workgroup_size;
    abi.params = first.params;
    abi.model = first.model;
    abi.dynamic_lds_bytes = first.dynamic_lds_bytes;
    Ok(abi)
}
