//! Why a hand-written kernel could not be had.

use std::path::PathBuf;

use super::parametric;

/// Why a hand-written kernel's description or source could not be had.
#[derive(Debug, thiserror::Error)]
pub enum HandError {
    /// A file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The description is not valid TOML of the schema.
    #[error("{}: {source}", path.display())]
    Toml {
        /// The description.
        path: PathBuf,
        /// What the parser said.
        source: toml::de::Error,
    },
    /// A description of several launches gives a launch's fields at its top level too.
    #[error(
        "{}: {given} at the top level and [[launches]]: with several launches each launch gives \
         its own (symbol, workgroup_size, grid, [[launches.params]], [launches.model], dynamic_lds_bytes)",
        path.display()
    )]
    TopLevelWithLaunches {
        /// The description.
        path: PathBuf,
        /// The top-level fields given.
        given: String,
    },
    /// A parametric description does not instantiate at a kernel's shapes.
    #[error("{} (parametric) at the shapes of `{kernel}`: {source}", path.display())]
    Instantiate {
        /// The description.
        path: PathBuf,
        /// The kernel whose shapes it was instantiated at.
        kernel: String,
        /// Why.
        source: parametric::ParametricError,
    },
    /// A parametric description loaded without a kernel.
    #[error(
        "{} is parametric (`parametric = true`): it is instantiated for a kernel's shapes, so it \
         is loaded with the kernel (name the KERNEL, or give --kernel-file)",
        .0.display()
    )]
    ParametricAlone(PathBuf),
    /// No source named in the description or given.
    #[error("{}: no `source` field, and no source file given", .0.display())]
    NoSource(PathBuf),
    /// The description's `arch` is not a target.
    #[error("{}: unknown arch `{name}`", path.display())]
    UnknownArch {
        /// The description.
        path: PathBuf,
        /// The name it gives.
        name: String,
    },
    /// The kernel's batch is outside the batches the description covers.
    #[error(
        "{}: batch {batch} is outside the batch {covered} the description covers (its \
         `min_batch` / `max_batch`)",
        path.display()
    )]
    BatchOutside {
        /// The description.
        path: PathBuf,
        /// The kernel's batch.
        batch: i64,
        /// The covered batches, as the message gives them.
        covered: String,
    },
    /// Neither the description nor the source's extension says the target.
    #[error(
        "{}: cannot tell the target from the extension (.cu for sm90, .hip for gfx906); set \
         `arch` in the ABI file",
        .0.display()
    )]
    NoArch(PathBuf),
    /// An expression of the op-level shape with no kernel to take the shape from.
    #[error(
        "`{0}` is an expression of the op-level shape, and no kernel was given to take the shape \
         from"
    )]
    NoShape(String),
    /// An expression that does not evaluate at the shape.
    #[error(transparent)]
    Expr(#[from] parametric::ParametricError),
    /// The `[build]` defines are malformed.
    #[error("{}: {problem}", path.display())]
    Defines {
        /// The description.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// Where a caller still words errors as text.
impl From<HandError> for String {
    fn from(e: HandError) -> String {
        e.to_string()
    }
}
