//! Real GPTQ weights: one layer of a safetensors checkpoint, activations from `.npy`, and the
//! `gemv_int4` kernel bound to them (`wavefuse run gemv_int4 --weights … --layer … --input …`).
//!
//! # Tensors
//!
//! For a layer `L` (`L.qweight` is accepted too): `L.qweight` i32 `[K/8, N]`, `L.scales`
//! f16 (bf16 and f32 are read too) `[K/G, N]`, `L.qzeros` i32 `[K/G, N/8]` (optional: see
//! below), `L.g_idx` i32 `[K]` (optional). The layout is DESIGN.md §2 exactly. Only these
//! tensors are read from the file (see [`store`]); every dtype and shape is checked against the
//! others and against the settings, and every error names the tensor with what was expected and
//! what was found.
//!
//! # Settings, and where they come from
//!
//! Each setting is taken from an explicit override ([`QuantOverrides`], filled from the command
//! line) if given, else from the checkpoint's config beside the weights file
//! (`quantize_config.json` and/or `quantization_config` in `config.json`; both are read and must
//! agree). Nothing is defaulted:
//!
//! - `bits` must be 4; `group_size` must be 32, 64, 128 or −1 (per-channel), must divide K, and
//!   must match the rows of `scales`. Missing: an error naming the flag to pass.
//! - Zero points are never guessed. With `qzeros` stored, `checkpoint_format = "gptq"` means
//!   [`ZeroPoint::V1`] (stored z − 1) and `"gptq_v2"` [`ZeroPoint::V2`] (stored z); a config
//!   without `checkpoint_format` is an error that says which flag to pass. `sym = true` with
//!   `qzeros` stored: the stored zeros are honoured under `checkpoint_format` (a note is added if
//!   they do not all decode to 8, the symmetric zero point: a sign of a mislabelled format).
//!   No `qzeros` tensor: [`ZeroPoint::Symmetric`] (z = 8), unless the config says `sym = false`,
//!   which is an error. An explicit override wins over the file; overriding to symmetric ignores
//!   stored zeros (and says so in the notes).
//! - Act-order: a `g_idx` is never ignored. It must be a valid group map (length K, every group
//!   holding exactly G rows). The identity map `k / G` (which many non-act-order checkpoints
//!   store) is dropped as equivalent; any other map becomes an act-order layout, and is an error
//!   if `desc_act = false`. `desc_act = true` without a `g_idx` tensor is an error. (The f64
//!   reference evaluates act-order weights; code generation rejects them for now.)
//! - AWQ checkpoints (`quant_method = "awq"`, AutoAWQ's `w_bit` / `q_group_size` /
//!   `zero_point`, or `scales` eight times wider than `qweight`), other `quant_method`s and other
//!   `checkpoint_format`s (marlin, bitblas, …) are rejected.
//!
//! # Kernels
//!
//! [`gemv_int4_kernel`] builds the kernel for the file's own K and N with the IR builder: the
//! same IR as `set::gemv_int4` (whose K is fixed at the model's hidden size 5120), with K free
//! (a unit test checks the two are identical at K = 5120). At TP > 1 the weight is split by
//! columns, as `gemv_int4` declares it.

mod config;
mod gemv;
mod layer;
mod settings;
pub mod store;

use std::path::PathBuf;

use wavefuse::ir::reference::EvalError;
use wavefuse::ir::{GroupSize, ZeroPoint};

use crate::npy::NpyError;
pub use config::{QuantConfig, read_config};
pub use gemv::{
    Activation, GemvCase, gemv_inputs, gemv_int4_kernel, load_activation, prepare_gemv,
    run_reference, write_output_npy,
};
pub use layer::{GptqWeight, LayerInfo, load_layer};

/// Why a checkpoint, an activation file or an output could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file that is not a valid safetensors file (or index).
    #[error("{}: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A safetensors file shorter than its header declares.
    #[error(
        "{} is truncated: tensor `{tensor}` occupies data bytes {}..{} but the file holds only {present} data bytes (needs {needed})",
        path.display(), range.0, range.1
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The tensor cut off (the one asked for, if it is).
        tensor: String,
        /// Data bytes the header declares up to the end of that tensor.
        needed: u64,
        /// Data bytes present.
        present: u64,
        /// The tensor's data range.
        range: (u64, u64),
    },
    /// A tensor the layer needs is not in the checkpoint.
    #[error("tensor `{tensor}` not found in {file}{hint}")]
    MissingTensor {
        /// The full tensor name.
        tensor: String,
        /// The checkpoint.
        file: String,
        /// What the checkpoint has instead, or why the tensor is needed.
        hint: String,
    },
    /// A tensor of the wrong element type.
    #[error("tensor `{tensor}`: expected dtype {expected}, found {found}")]
    Dtype {
        /// The tensor.
        tensor: String,
        /// Accepted dtypes.
        expected: String,
        /// The dtype in the file.
        found: String,
    },
    /// A tensor of the wrong shape.
    #[error("tensor `{tensor}`: expected shape {expected}, found {found:?}{why}")]
    Shape {
        /// The tensor.
        tensor: String,
        /// The expected shape, with where each extent comes from.
        expected: String,
        /// The shape in the file.
        found: Vec<usize>,
        /// Further explanation (may be empty).
        why: String,
    },
    /// A tensor with invalid values.
    #[error("tensor `{tensor}`: {what}")]
    Values {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        what: String,
    },
    /// A config file field of the wrong type, or two configs that disagree.
    #[error("{origin}: field `{field}`: {what}")]
    Config {
        /// The config file(s).
        origin: String,
        /// The field.
        field: String,
        /// What is wrong.
        what: String,
    },
    /// A setting neither the config nor an override gives.
    #[error("quantisation setting `{field}` is not known: {what}")]
    MissingSetting {
        /// The config field.
        field: &'static str,
        /// Why it is needed and how to give it.
        what: String,
    },
    /// Several settings neither the config nor an override gives: all of them, at once.
    #[error("{} quantisation settings are not known: {list}", fields.len())]
    MissingSettings {
        /// The config fields, in the order they are decided.
        fields: Vec<&'static str>,
        /// Each field with why it is needed and how to give it.
        list: String,
    },
    /// A setting wavefuse does not support.
    #[error("unsupported {field} = {found} (from {origin}): {supported}")]
    Unsupported {
        /// The config field.
        field: &'static str,
        /// Its value.
        found: String,
        /// The config file, or the override flag.
        origin: String,
        /// What is supported.
        supported: String,
    },
    /// An AWQ checkpoint.
    #[error(
        "{origin}: field `{field}` marks an AWQ checkpoint (packed along N, interleaved nibbles); \
         wavefuse loads GPTQ checkpoints only"
    )]
    Awq {
        /// The config file.
        origin: String,
        /// The field that says so.
        field: String,
    },
    /// An unreadable `.npy` file.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// An activation whose shape or values do not fit the layer.
    #[error("{}: {what}", path.display())]
    Input {
        /// The `.npy` file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A kernel the checkpoint cannot be bound to.
    #[error("kernel `{kernel}`: {what}")]
    Kernel {
        /// The kernel.
        kernel: String,
        /// What does not fit.
        what: String,
    },
    /// The f64 reference refused the inputs.
    #[error("reference evaluation: {0}")]
    Eval(#[from] EvalError),
}

/// Settings given explicitly (command-line flags); each one, when `Some`, replaces the
/// checkpoint's config.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct QuantOverrides {
    /// `--bits` (only 4 is supported).
    pub bits: Option<u32>,
    /// `--group-size` (32, 64, 128, or −1 / per-channel).
    pub group_size: Option<GroupSize>,
    /// `--checkpoint-format gptq|gptq_v2|sym`: the zero-point convention.
    pub zero: Option<ZeroPoint>,
    /// `--act-order true|false`: overrides `desc_act`.
    pub act_order: Option<bool>,
}

/// Parse `--checkpoint-format`: `gptq` (v1 zero points, stored z − 1), `gptq_v2` (stored z), or
/// `sym` (ignore any qzeros; z = 8).
pub fn parse_checkpoint_format(s: &str) -> Result<ZeroPoint, FlagError> {
    match s {
        "gptq" | "v1" => Ok(ZeroPoint::V1),
        "gptq_v2" | "v2" => Ok(ZeroPoint::V2),
        "sym" | "symmetric" => Ok(ZeroPoint::Symmetric),
        _ => Err(FlagError::Format(s.to_owned())),
    }
}

/// A `--checkpoint-format` or `--group-size` value that is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// Not a checkpoint format.
    #[error("`{0}` is not a checkpoint format; use gptq (v1 zero points), gptq_v2, or sym")]
    Format(String),
    /// A group size the kernels do not support.
    #[error("group size {0} is not supported; use 32, 64, 128 or -1")]
    UnsupportedGroup(i64),
    /// Not a group size.
    #[error("`{0}` is not a group size; use 32, 64, 128 or -1 (per-channel)")]
    NotAGroupSize(String),
}

/// Parse `--group-size`: 32, 64, 128, or −1 / `per-channel`.
pub fn parse_group_size(s: &str) -> Result<GroupSize, FlagError> {
    match s {
        "-1" | "per-channel" | "per_channel" => Ok(GroupSize::PerChannel),
        _ => match s.parse::<i64>() {
            Ok(g) => group_size(g).ok_or(FlagError::UnsupportedGroup(g)),
            Err(_) => Err(FlagError::NotAGroupSize(s.to_owned())),
        },
    }
}

fn group_size(g: i64) -> Option<GroupSize> {
    match g {
        -1 => Some(GroupSize::PerChannel),
        32 | 64 | 128 => Some(GroupSize::Rows(g as u32)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_reject_clearly() {
        assert_eq!(parse_checkpoint_format("gptq"), Ok(ZeroPoint::V1));
        assert_eq!(parse_checkpoint_format("gptq_v2"), Ok(ZeroPoint::V2));
        assert!(
            parse_checkpoint_format("awq")
                .unwrap_err()
                .to_string()
                .contains("gptq_v2")
        );
        assert_eq!(parse_group_size("-1"), Ok(GroupSize::PerChannel));
        assert_eq!(parse_group_size("64"), Ok(GroupSize::Rows(64)));
        assert!(
            parse_group_size("256")
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
    }
}
