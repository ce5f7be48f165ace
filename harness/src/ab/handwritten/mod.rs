//! Hand-written kernels: the reference kernels of `kernels-gen/reference/` and a user's own
//! (`wavefuse ab --manual FILE --abi FILE.toml`), described in the generator's ABI format
//! ([`wavefuse_codegen::abi`]) so the harness binds and launches them exactly as it does generated
//! code.
//!
//! # The description
//! A TOML file with the fields of a generated `*.abi.toml`; those the harness needs:
//! - `symbol`: the `extern "C" __global__` function;
//! - `workgroup_size` (alias `block`) and `grid`: the block size and the workgroups per rank,
//!   each a number, an expression of the op-level shape (`grid = "n / 64"`), or a list of one to
//!   three of them for a 2-D or 3-D launch (x, y, z: `grid = ["n / 64", 4]`, `blockIdx.y` a K
//!   split); the runtime launches exactly that;
//! - `[[params]]` in argument order, each with `name` (the kernel's own parameter name), `kind`
//!   (`array`, `peer_arrays`, `scalar`), `ty`, `purpose` (`data` with `buffer` and `part` naming
//!   the op-level buffer and array it is bound to; `scratch`, `counter`, `flags`, `error_word` for
//!   arrays the runtime owns; `rank` and `epoch` for the scalars it passes; `value` for a scalar
//!   passed by value whose `value` is an expression of the op-level shape or a literal: `value =
//!   "k"`, `"n"`, `"group_size"`, `"k / 8"`, `"4"`) and `len` for arrays. A GPTQ `qzeros` part
//!   may be declared `f16` (or `f32`) with `[K/G, N]` elements: the zero points themselves, which
//!   the runtime decodes from the packed words when binding
//!   ([`wavefuse_runtime::exec::encode_zeros`]);
//! - `[peer_table]` with `slots` (slot of rank p's array) when a parameter is a peer table;
//! - `symbol` names one `__global__` function of the source; the file may hold several (tile
//!   variants): the signature is read, the resources reported and the model counted for that one;
//! - optional: `kernel`, `tp`, `arch`, `source` (file name beside the TOML), `coresidency`,
//!   `flag_rounds_per_launch`, `dependent_launch` (the kernel waits for its stream predecessor
//!   before touching memory, so it may be launched as a programmatic dependent), and `[build]`
//!   with `defines` (a table `NAME = value`, or a list of `NAME=value` strings) that the source
//!   is compiled with, and `[model]` ([`ModelHints`]) with what the MI50 model cannot read from
//!   the machine code: the weight words one lane reads per trip of the counted loop and the
//!   trips per run of a reload block (docs/model.md).
//!
//! # Checks before any launch
//! The description against the generated kernel at the same shape (every op-level array bound
//! once, with the same element type and length; nothing bound that the kernel does not have; the
//! runtime-owned arrays and scalars well formed; the peer ordering the runtime fills), and against
//! the source (the symbol exists; the same number of parameters, the same names in the same
//! order, each a value / pointer / pointer table of a compatible type). On a GPU, the loaded
//! kernel's parameter sizes are checked too ([`wavefuse_runtime::timing::param_sizes`]).
//!
//! Expressions (`value`, `grid`, `workgroup_size`) use the language of [`super::parametric`]
//! over the variables of [`parametric::Bindings::shape_of`]: `tp`, `batch`, per buffer `W.k`,
//! `W.n`, `W.group`, `T.rows`, `T.cols`, and with one weight the plain `k`, `n`, `group_size`.
//!
//! Several launches for one op (`[[launches]]`, each with its `symbol`, `workgroup_size`, `grid`,
//! `[[launches.params]]` and `[launches.model]`, in stream order: a split-K GEMV then its reduce;
//! an activation quantiser then a W4A8 GEMV): each launch is checked as a one-kernel description
//! (its problems prefixed ``launch I `SYMBOL`: ``), every op-level array must be taken by some
//! launch, and `[[scratch]]` declares the arrays the launches share (`purpose = "scratch"`,
//! `buffer = NAME`; a `len` given there must equal the declaration's at the shape). The runtime
//! binds them with [`wavefuse_runtime::exec::OpKernel::chain`]; the MI50 model counts the launch
//! with the weight loop and adds each other launch as a streaming launch.
//!
//! Pre-quantised inputs (`[quantise]`: `input`, `by = "host"` or `by = "kernel"` with the
//! quantising launch's `kernel`): with the host quantising, the input's `data` parameter is `i8`
//! (the per-token codes) and a `qscale` part carries the scales
//! ([`wavefuse_runtime::exec::quantise_rows`]); the A/B compares at [`quantised_tolerance`].
//!
//! The defines are written at the top of the source (followed by a `#line 1` directive so the
//! compiler's messages keep the file's own line numbers), not passed as flags: the compile cache's
//! prebuilt-artifact key covers the source, not the flags, and two shapes must never share one.
//! For the same reason a header the source includes by a quoted name (`#include "NAME"`, a file
//! beside it, as the gfx906 INT4 references share `gemv_int4_loop.h`) is spliced into the text
//! when the source is read ([`read_source`]), between `#line` directives: every compiler gets one
//! translation unit, whatever its working directory, and a changed header is a new cache key.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::{ABI_SCHEMA, Abi, AbiParam, AbiPurpose, AbiTy};
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::model::LoopFacts;
use wavefuse_runtime::CompileRequest;
use wavefuse_runtime::exec::SharedScratch;

use super::parametric;
use super::signature;
use wavefuse::ir::Kernel;

mod check;
mod error;
mod files;
mod find;

pub use check::{check_against_generated, check_signature, quantised_tolerance, stage_abis};
pub use error::HandError;
pub use files::{arch_of, read_source};

use check::ty;
use files::{file_name, instantiate, parse, read};
pub use find::{Found, find_reference, reference_dir};

/// A hand-written kernel's description, as read from TOML. Fields of the generator's schema that
/// the harness does not need are accepted and ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct HandAbi {
    /// The `extern "C"` symbol (with `[[launches]]`: the first launch's, filled in at load).
    #[serde(default)]
    pub symbol: String,
    /// The kernel of the set it implements.
    #[serde(default)]
    pub kernel: Option<String>,
    /// `sm90` or `gfx906`.
    #[serde(default)]
    pub arch: Option<String>,
    /// The source file, relative to the description.
    #[serde(default)]
    pub source: Option<String>,
    /// Ranks in the TP group.
    #[serde(default)]
    pub tp: Option<u32>,
    /// The largest batch the kernel supports (its source's limit); above it `ab` reports the
    /// kernel absent with this reason instead of compiling it into an error. None: any batch.
    #[serde(default)]
    pub max_batch: Option<u32>,
    /// The smallest batch the kernel supports (a source that tiles the batch in MMA columns of
    /// 8, say); below it `ab` reports the kernel absent with this reason. None: from batch 1.
    #[serde(default)]
    pub min_batch: Option<u32>,
    /// Lanes per workgroup: a number, an expression, or `[x, y, z]`.
    #[serde(alias = "block", default)]
    pub workgroup_size: Dims,
    /// Workgroups per rank: a number, an expression, or `[x, y, z]`.
    #[serde(default)]
    pub grid: Dims,
    /// Several launches for one op, in stream order (a split-K GEMV then its reduce; an
    /// activation quantiser then a W4A8 GEMV); empty for one kernel described at the top level.
    #[serde(default)]
    pub launches: Vec<LaunchDecl>,
    /// Arrays the runtime owns that several launches share (`[[scratch]]`).
    #[serde(default)]
    pub scratch: Vec<ScratchDecl>,
    /// An input the kernel takes quantised to INT8 (`[quantise]`).
    #[serde(default)]
    pub quantise: Option<Quantise>,
    /// Dynamic LDS per workgroup, in bytes: the `extern __shared__` allocation the runtime gives
    /// every workgroup at launch (CUDA: past 48 KiB it also sets the kernel's opt-in attribute).
    /// At most the target's LDS per workgroup (227 KiB on sm_90, 64 KiB on gfx906) less the
    /// kernel's static LDS; 0 (absent): none.
    #[serde(default)]
    pub dynamic_lds_bytes: u64,
    /// Flag rounds per launch.
    #[serde(default)]
    pub flag_rounds_per_launch: u32,
    /// Grid barriers per launch.
    #[serde(default)]
    pub barriers_per_launch: u32,
    /// Set when all workgroups must be resident at once.
    #[serde(default)]
    pub coresidency: Option<wavefuse_codegen::abi::CoResidency>,
    /// Set when a parameter is a peer table.
    #[serde(default)]
    pub peer_table: Option<wavefuse_codegen::abi::PeerTable>,
    /// Parameters in argument order.
    #[serde(default)]
    pub params: Vec<AbiParam>,
    /// How the source is built.
    #[serde(default)]
    pub build: Option<toml::Table>,
    /// What the machine code does not show about the loop the MI50 model counts.
    #[serde(default)]
    pub model: Option<ModelHints>,
    /// Set when the kernel waits for the previous kernel of its stream before touching memory
    /// (CUDA: `cudaGridDependencySynchronize()` / `griddepcontrol.wait` first): it may then be
    /// launched as a programmatic dependent (`ab --launch dependent`). Default: plain stream
    /// order.
    #[serde(default)]
    pub dependent_launch: bool,
}

impl HandAbi {
    /// The batches the description covers: `min_batch`..=`max_batch` (absent: 1 and any).
    pub fn batch_range(&self) -> (u32, Option<u32>) {
        (self.min_batch.unwrap_or(1), self.max_batch)
    }

    /// Whether `batch` lies in [`HandAbi::batch_range`].
    pub fn covers(&self, batch: i64) -> bool {
        let (min, max) = self.batch_range();
        batch >= i64::from(min) && max.is_none_or(|m| batch <= i64::from(m))
    }

    /// `Err` when `ir`'s batch is outside [`HandAbi::batch_range`].
    fn covers_batch(&self, path: &Path, ir: &Kernel) -> Result<(), HandError> {
        let batch = parametric::Bindings::of(ir).int("batch").unwrap_or(1);
        if !self.covers(batch) {
            let (min, max) = self.batch_range();
            return Err(HandError::BatchOutside {
                path: path.to_owned(),
                batch,
                covered: batch_span(min, max),
            });
        }
        Ok(())
    }
}

/// `min-max` (or `min and up`) for a message.
fn batch_span(min: u32, max: Option<u32>) -> String {
    match max {
        Some(m) => format!("{min}-{m}"),
        None => format!("{min} and up"),
    }
}

/// `[[launches]]`: one launch of an op made of several, in stream order. Its fields are a
/// one-kernel description's (`symbol`, `workgroup_size`, `grid`, `[[launches.params]]`,
/// `[launches.model]`); the rest of the description (source, build, TP, `[[scratch]]`) is shared.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchDecl {
    /// The `extern "C" __global__` function of the source.
    pub symbol: String,
    /// Lanes per workgroup.
    #[serde(alias = "block")]
    pub workgroup_size: Dims,
    /// Workgroups per rank.
    pub grid: Dims,
    /// Parameters in argument order.
    #[serde(default)]
    pub params: Vec<AbiParam>,
    /// What the MI50 model cannot read from this launch's loop.
    #[serde(default)]
    pub model: Option<ModelHints>,
    /// Dynamic LDS of this launch, in bytes (as the top-level field of a one-launch description).
    #[serde(default)]
    pub dynamic_lds_bytes: u64,
}

/// `[[scratch]]`: an array the runtime allocates once per rank (zeroed once, never reset) and
/// passes to every launch whose parameter names it (`purpose = "scratch"`, `buffer = NAME`): a
/// split-K GEMV's FP32 partials that its reduce launch reads, a quantiser's INT8 codes and
/// scales that the GEMV reads.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScratchDecl {
    /// The name parameters give as their `buffer`.
    pub name: String,
    /// Element type.
    pub ty: AbiTy,
    /// Elements per rank: a number or an expression of the shape (`"4 * n"`).
    pub len: Extent,
}

/// `[quantise]`: the kernel takes op-level input `input` (an FP16 activation `[batch, K]`)
/// quantised to INT8 per token, `s = max|x| / 127`, `q = clamp(rne(x · 127 / max|x|), ±127)`
/// ([`wavefuse_runtime::exec::quantise_rows`]); the A/B's tolerance then accounts for it
/// ([`quantised_tolerance`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantise {
    /// The op-level input buffer (`"x"`).
    pub input: String,
    /// Who quantises it.
    pub by: QuantiseBy,
    /// With `by = "kernel"`: the symbol of the launch that quantises it (it takes `input` and
    /// writes the codes and scales to `[[scratch]]` arrays; it runs before the GEMV).
    #[serde(default)]
    pub kernel: Option<String>,
}

/// Who quantises a `[quantise]` input.
#[derive(Copy, Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum QuantiseBy {
    /// The runtime, when it binds: the kernel's `data` parameter of the input is `i8` (the
    /// codes), its `qscale` parameter (`f32` or `f16`, one per token) the scales.
    Host,
    /// A launch of the same file (`kernel`), before the GEMV.
    Kernel,
}

/// `[model]`: what the MI50 model ([`wavefuse_codegen::model`]) cannot read from the machine
/// code of the counted loop, each a number or an expression of the op-level shape.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelHints {
    /// Words of the weight buffer (`qweight`: u32, 8 INT4 weights each) one lane reads per trip
    /// of the counted loop (`counted:` names it; hipcc may unroll a source loop). Without it the
    /// weights per trip are the products' (`v_dot2_f32_f16`, `v_fma_mix_f32`, `v_dot4_i32_i8`).
    #[serde(default)]
    pub weight_words_per_trip: Option<Extent>,
    /// Trips of the counted loop per execution of the blocks a branch inside it skips (a
    /// per-group scale/zero reload: `"group_size / 8"` at one K word per trip). Without it such
    /// a block is charged on every trip.
    #[serde(default)]
    pub branch_every: Option<Extent>,
    /// Times the kernel reads its packed weights (`qweight`, scales, zero points) per launch: a
    /// kernel that takes the batch rows in tiles and reads the weights once per tile
    /// (`"(batch + 7) / 8"`). Without it, once.
    #[serde(default)]
    pub weight_passes: Option<Extent>,
}

/// One extent of a launch: a number or an expression of the op-level shape.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Extent {
    /// A literal.
    Int(i64),
    /// An expression (`"n / 64"`).
    Expr(String),
}

/// A launch's grid or workgroup: one extent (x), or a list of one to three (x, y, z).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Dims {
    /// x only.
    One(Extent),
    /// x, y, z.
    Many(Vec<Extent>),
}

impl Default for Dims {
    /// None given: an error when evaluated ("has 0 extents").
    fn default() -> Self {
        Dims::Many(Vec::new())
    }
}

/// A description's launch and values, evaluated at a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Workgroups along x, y, z.
    pub grid: [u32; 3],
    /// Lanes along x, y, z.
    pub block: [u32; 3],
    /// Per parameter: the number of a `value` scalar.
    pub values: Vec<Option<i64>>,
}

impl Launch {
    /// Workgroups in all.
    pub fn workgroups(&self) -> u32 {
        self.grid.iter().product()
    }

    /// Lanes per workgroup.
    pub fn lanes(&self) -> u32 {
        self.block.iter().product()
    }
}

/// A hand-written kernel ready to check and compile: its description, source and where they are.
#[derive(Clone, Debug)]
pub struct Hand {
    /// The description.
    pub abi: HandAbi,
    /// The description's path.
    pub abi_path: PathBuf,
    /// The source's path.
    pub source_path: PathBuf,
    /// The source text.
    pub source: String,
    /// The target.
    pub arch: Arch,
    /// The description's text when it is parametric: [`Hand::for_kernel`] instantiates it again
    /// at another kernel's shapes.
    template: Option<String>,
    /// The op-level shape the expressions are evaluated at (set when loaded with, or
    /// instantiated for, a kernel).
    shape: Option<parametric::Bindings>,
}

impl Hand {
    /// Reads a description and its source. `source` overrides the description's `source` field
    /// (`--manual FILE`); the target comes from the description's `arch`, else the source's
    /// extension (`.cu` → sm90, `.hip` → gfx906).
    pub fn load(abi_path: &Path, source: Option<&Path>) -> Result<Hand, HandError> {
        Hand::load_for(abi_path, source, None)
    }

    /// [`Hand::load`] of a description that may be parametric ([`super::parametric`]),
    /// instantiated for `ir`'s shapes; a parametric description without `ir` is an error.
    pub fn load_for(
        abi_path: &Path,
        source: Option<&Path>,
        ir: Option<&Kernel>,
    ) -> Result<Hand, HandError> {
        let text = read(abi_path)?;
        let template = parametric::is_parametric(&text).then(|| text.clone());
        let text = match (template.is_some(), ir) {
            (false, _) => text,
            (true, Some(ir)) => instantiate(abi_path, &text, ir)?,
            (true, None) => return Err(HandError::ParametricAlone(abi_path.to_owned())),
        };
        let abi = parse(abi_path, &text)?;
        let source_path = match (source, &abi.source) {
            (Some(p), _) => p.to_path_buf(),
            (None, Some(s)) => abi_path.parent().unwrap_or(Path::new(".")).join(s),
            (None, None) => return Err(HandError::NoSource(abi_path.to_owned())),
        };
        let arch = match abi.arch.as_deref() {
            Some(name) => Arch::ALL
                .into_iter()
                .find(|a| a.name() == name)
                .ok_or_else(|| HandError::UnknownArch {
                    path: abi_path.to_owned(),
                    name: name.to_owned(),
                })?,
            None => arch_of(&source_path)?,
        };
        let source = read_source(&source_path)?;
        Ok(Hand {
            abi,
            abi_path: abi_path.to_path_buf(),
            source_path,
            source,
            arch,
            template,
            shape: ir.map(parametric::Bindings::shape_of),
        })
    }

    /// This kernel at the shapes of `ir`: a parametric description instantiated again, any other
    /// as it is.
    /// A kernel whose batch is outside the description's `min_batch`..`max_batch` is an error
    /// ([`HandError::BatchOutside`]) that `ab` reports as the hand-written side's absence.
    pub fn for_kernel(&self, ir: &Kernel) -> Result<Hand, HandError> {
        let shape = Some(parametric::Bindings::shape_of(ir));
        let hand = match &self.template {
            None => Hand {
                shape,
                ..self.clone()
            },
            Some(template) => {
                let text = instantiate(&self.abi_path, template, ir)?;
                Hand {
                    abi: parse(&self.abi_path, &text)?,
                    shape,
                    ..self.clone()
                }
            }
        };
        hand.abi.covers_batch(&self.abi_path, ir)?;
        Ok(hand)
    }

    /// The launch and the `value` scalars at the shape the description was loaded for; `Err`
    /// names every expression that cannot be evaluated or gives an invalid launch.
    pub fn launch(&self) -> Result<Launch, Vec<String>> {
        let mut problems = Vec::new();
        let grid = self.dims("grid", &self.abi.grid, &mut problems);
        let block = self.dims("workgroup_size", &self.abi.workgroup_size, &mut problems);
        let lanes: u64 = block.iter().map(|&b| u64::from(b)).product();
        if lanes > 1024 {
            problems.push(format!(
                "workgroup of {lanes} lanes ({block:?}): at most 1024"
            ));
        }
        let mut values = Vec::new();
        for p in &self.abi.params {
            let v = match (p.purpose, &p.value) {
                (AbiPurpose::Value, Some(text)) => {
                    let e = match text.trim().parse::<i64>() {
                        Ok(i) => Extent::Int(i),
                        Err(_) => Extent::Expr(text.clone()),
                    };
                    let what = format!("parameter `{}` (value = \"{text}\")", p.name);
                    match self.eval(&e) {
                        Ok(v) => {
                            let fits = match p.ty {
                                AbiTy::U32 => u32::try_from(v).is_ok(),
                                _ => i32::try_from(v).is_ok(),
                            };
                            if !fits {
                                problems
                                    .push(format!("{what} = {v} does not fit its type {:?}", p.ty));
                            }
                            fits.then_some(v)
                        }
                        Err(m) => {
                            problems.push(format!("{what}: {m}"));
                            None
                        }
                    }
                }
                _ => None,
            };
            values.push(v);
        }
        if problems.is_empty() {
            Ok(Launch {
                grid,
                block,
                values,
            })
        } else {
            Err(problems)
        }
    }

    /// The value of one extent at the description's shape.
    fn eval(&self, e: &Extent) -> Result<i64, HandError> {
        match (e, &self.shape) {
            (Extent::Int(i), _) => Ok(*i),
            (Extent::Expr(x), Some(b)) => Ok(parametric::eval_expr(x.trim_start_matches('='), b)?),
            (Extent::Expr(x), None) => Err(HandError::NoShape(x.clone())),
        }
    }

    /// A grid or workgroup as `[x, y, z]`; problems pushed onto `problems`.
    fn dims(&self, what: &str, d: &Dims, problems: &mut Vec<String>) -> [u32; 3] {
        let list: Vec<&Extent> = match d {
            Dims::One(e) => vec![e],
            Dims::Many(v) => v.iter().collect(),
        };
        let mut out = [1u32; 3];
        if list.is_empty() || list.len() > 3 {
            problems.push(format!(
                "{what} has {} extents: give one to three (x, y, z)",
                list.len()
            ));
            return out;
        }
        for (i, e) in list.into_iter().enumerate() {
            let axis = ["x", "y", "z"][i];
            match self.eval(e) {
                Ok(v) if v >= 1 && v <= i64::from(u32::MAX) => out[i] = v as u32,
                Ok(v) => problems.push(format!("{what}.{axis} = {v}: must be positive")),
                Err(m) => {
                    out[i] = 0;
                    problems.push(format!("{what}.{axis}: {m}"));
                }
            }
        }
        out
    }

    /// The `[model]` facts at this shape; `Err` names an expression that does not evaluate or a
    /// value that is not positive.
    pub fn loop_facts(&self) -> Result<LoopFacts, Vec<String>> {
        let Some(m) = &self.abi.model else {
            return Ok(LoopFacts::default());
        };
        let mut problems = Vec::new();
        let mut get = |what: &str, e: &Option<Extent>| {
            let e = e.as_ref()?;
            match self.eval(e) {
                Ok(v) if v >= 1 => Some(v as f64),
                Ok(v) => {
                    problems.push(format!("[model] {what} = {v}: must be positive"));
                    None
                }
                Err(m) => {
                    problems.push(format!("[model] {what}: {m}"));
                    None
                }
            }
        };
        let facts = LoopFacts {
            weights_per_trip: get("weight_words_per_trip", &m.weight_words_per_trip)
                .map(|w| 8.0 * w),
            branch_period: get("branch_every", &m.branch_every),
            weight_passes: get("weight_passes", &m.weight_passes),
        };
        if problems.is_empty() {
            Ok(facts)
        } else {
            Err(problems)
        }
    }

    /// How the kernel runs at this shape, for the MI50 model of its symbol: its launch, its
    /// `[model]` facts, its own scratch bytes, grid barriers and flag rounds.
    pub fn symbol_launch(&self) -> crate::generate::SymbolLaunch {
        if self.abi.launches.is_empty() {
            return self.one_symbol_launch();
        }
        let (i, main) = self.main_stage_at();
        let mut l = main.one_symbol_launch();
        l.bytes = Some(main.stage_bytes());
        l.other_launches = self
            .stages()
            .into_iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, s)| (s.abi.symbol.clone(), s.stage_bytes()))
            .collect();
        l
    }

    /// [`Hand::symbol_launch`] of one launch.
    fn one_symbol_launch(&self) -> crate::generate::SymbolLaunch {
        let launch = self.launch().ok();
        let scratch_bytes = self
            .abi
            .params
            .iter()
            .filter(|p| p.purpose == AbiPurpose::Scratch)
            .map(|p| (p.len.unwrap_or(0) * p.ty.bytes()) as f64)
            .sum();
        crate::generate::SymbolLaunch {
            grid: launch.as_ref().map_or(0, |l| l.workgroups()),
            workgroup_size: launch.as_ref().map_or(0, |l| l.lanes()),
            facts: self.loop_facts().unwrap_or_default(),
            scratch_bytes,
            grid_barriers: self.abi.barriers_per_launch,
            flag_rounds: self.abi.flag_rounds_per_launch,
            // The compiler's report, where the caller has it.
            lds_bytes: 0,
            bytes: None,
            other_launches: Vec::new(),
        }
    }

    /// Lanes per workgroup at this shape (0 when the description's launch does not evaluate).
    pub fn workgroup_size(&self) -> u32 {
        self.launch().map_or(0, |l| l.lanes())
    }

    /// The defines of `[build]`, as `(NAME, value)`.
    pub fn defines(&self) -> Result<Vec<(String, String)>, HandError> {
        let Some(build) = &self.abi.build else {
            return Ok(Vec::new());
        };
        let Some(defines) = build.get("defines") else {
            return Ok(Vec::new());
        };
        let value = |v: &toml::Value| match v {
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Float(f) => Ok(format!("{f:?}")),
            toml::Value::Boolean(b) => Ok(u8::from(*b).to_string()),
            toml::Value::String(s) => Ok(s.clone()),
            other => Err(format!(
                "[build] define value {other} is not a number or string"
            )),
        };
        match defines {
            toml::Value::Table(t) => t.iter().map(|(k, v)| Ok((k.clone(), value(v)?))).collect(),
            toml::Value::Array(a) => a
                .iter()
                .map(|v| {
                    let s = v.as_str().ok_or("[build] defines must be strings")?;
                    let s = s.strip_prefix("-D").unwrap_or(s);
                    let (k, v) = s.split_once('=').unwrap_or((s, "1"));
                    Ok((k.to_owned(), v.to_owned()))
                })
                .collect(),
            _ => Err("[build] defines must be a table or a list".into()),
        }
        .map_err(|problem: String| HandError::Defines {
            path: self.abi_path.clone(),
            problem,
        })
    }

    /// The source with the defines written at its top.
    pub fn build_source(&self) -> Result<String, HandError> {
        let defines = self.defines()?;
        if defines.is_empty() {
            return Ok(self.source.clone());
        }
        let mut out = format!("// [build] defines of {}\n", file_name(&self.abi_path));
        for (k, v) in defines {
            out.push_str(&format!("#define {k} {v}\n"));
        }
        out.push_str(&format!("#line 1 \"{}\"\n", file_name(&self.source_path)));
        out.push_str(&self.source);
        Ok(out)
    }

    /// The compile request (the defines in the source; see the module docs).
    pub fn request(&self) -> Result<CompileRequest, HandError> {
        Ok(CompileRequest::new(
            &self.abi.symbol,
            self.build_source()?,
            self.arch,
        ))
    }

    /// Every disagreement between the description, the generated kernel `generated` (same kernel,
    /// TP and shapes) and the source's signature; empty when they agree. With `[[launches]]`,
    /// each launch's problems say which launch (``launch 2 `splitk_reduce`: …``).
    pub fn check(&self, generated: &LoweredKernel) -> Vec<String> {
        let mut problems = check_against_generated(&self.abi, generated);
        let multi = !self.abi.launches.is_empty();
        for (i, st) in self.stages().iter().enumerate() {
            let mut p = Vec::new();
            if let Err(e) = st.launch() {
                p.extend(e);
            }
            if let Err(e) = st.loop_facts() {
                p.extend(e);
            }
            match signature::parse(&self.source, &st.abi.symbol) {
                Ok(params) => p.extend(check_signature(&st.abi.params, &params)),
                Err(e) => p.push(format!("{}: {e}", self.source_path.display())),
            }
            p.extend(st.check_shared_scratch());
            let max_lds = self.arch.max_lds_per_workgroup();
            if st.abi.dynamic_lds_bytes > u64::from(max_lds) {
                p.push(format!(
                    "dynamic_lds_bytes = {} is past the {} bytes of LDS one workgroup may have on {}",
                    st.abi.dynamic_lds_bytes,
                    max_lds,
                    self.arch.name()
                ));
            }
            let prefix = if multi {
                format!("launch {} `{}`: ", i + 1, st.abi.symbol)
            } else {
                String::new()
            };
            problems.extend(p.into_iter().map(|m| format!("{prefix}{m}")));
        }
        for d in &self.abi.scratch {
            let used = stage_abis(&self.abi).iter().any(|s| {
                s.params
                    .iter()
                    .any(|p| p.purpose == AbiPurpose::Scratch && p.buffer.as_ref() == Some(&d.name))
            });
            if !used {
                problems.push(format!("[[scratch]] `{}` is taken by no launch", d.name));
            }
        }
        if let Err(e) = self.shared_scratch() {
            problems.extend(e);
        }
        problems
    }

    /// This description's launches, each as a one-launch description (a one-kernel
    /// description: itself).
    pub fn stages(&self) -> Vec<Hand> {
        stage_abis(&self.abi)
            .into_iter()
            .map(|abi| Hand {
                abi,
                ..self.clone()
            })
            .collect()
    }

    /// The launch with the weight loop (the one that takes a `qweight`), else the first: the
    /// launch the MI50 model counts a loop of.
    pub fn main_stage(&self) -> Hand {
        self.main_stage_at().1
    }

    /// [`Hand::main_stage`] and its position among the launches.
    fn main_stage_at(&self) -> (usize, Hand) {
        let stages = self.stages();
        let i = stages
            .iter()
            .position(|s| {
                s.abi
                    .params
                    .iter()
                    .any(|p| p.purpose == AbiPurpose::Data && p.part.as_deref() == Some("qweight"))
            })
            .unwrap_or(0);
        (i, stages.into_iter().nth(i).expect("one launch at least"))
    }

    /// The launches' symbols in order, ` + `-joined (`gemv_partial + splitk_reduce`).
    pub fn symbols(&self) -> String {
        stage_abis(&self.abi)
            .iter()
            .map(|s| s.symbol.as_str())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// The `[[scratch]]` arrays at this shape, as the runtime allocates them; `Err` names a
    /// length that does not evaluate or is not positive.
    pub fn shared_scratch(&self) -> Result<Vec<SharedScratch>, Vec<String>> {
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for d in &self.abi.scratch {
            match self.eval(&d.len) {
                Ok(n) if n >= 1 => out.push(SharedScratch {
                    name: d.name.clone(),
                    elem: ty(d.ty),
                    len: n as usize,
                }),
                Ok(n) => problems.push(format!(
                    "[[scratch]] `{}`: len = {n}: must be positive",
                    d.name
                )),
                Err(m) => problems.push(format!("[[scratch]] `{}`: len: {m}", d.name)),
            }
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(problems)
        }
    }

    /// This launch's parameters that name a `[[scratch]]` array, against its declaration: the
    /// same element type, and a `len`, where given, equal to the declared length at this shape.
    fn check_shared_scratch(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.abi.params {
            let (AbiPurpose::Scratch, Some(name)) = (p.purpose, &p.buffer) else {
                continue;
            };
            let Some(d) = self.abi.scratch.iter().find(|d| d.name == *name) else {
                continue;
            };
            if p.ty != d.ty {
                out.push(format!(
                    "mistyped: parameter `{}` is {}, [[scratch]] `{name}` is {}",
                    p.name,
                    ty(p.ty).name(),
                    ty(d.ty).name()
                ));
            }
            if let (Some(len), Ok(n)) = (p.len, self.eval(&d.len))
                && len as i64 != n
            {
                out.push(format!(
                    "scratch size: parameter `{}` declares {len} elements, [[scratch]] `{name}` \
                     has {n} at this shape (len = {})",
                    p.name,
                    match &d.len {
                        Extent::Int(i) => i.to_string(),
                        Extent::Expr(e) => format!("\"{e}\""),
                    }
                ));
            }
        }
        out
    }

    /// The bytes one launch moves, from its description: each array it takes once (data, a
    /// `[[scratch]]` array, its own scratch twice: written and read in the launch).
    fn stage_bytes(&self) -> f64 {
        let shared = self.shared_scratch().unwrap_or_default();
        self.abi
            .params
            .iter()
            .map(|p| {
                let elems = match (p.purpose, &p.buffer) {
                    (AbiPurpose::Data, _) => p.len.unwrap_or(0) as f64,
                    (AbiPurpose::Scratch, Some(name)) => shared
                        .iter()
                        .find(|s| s.name == *name)
                        .map_or(0.0, |s| s.len as f64),
                    (AbiPurpose::Scratch, None) => 2.0 * p.len.unwrap_or(0) as f64,
                    _ => 0.0,
                };
                elems * p.ty.bytes() as f64
            })
            .sum()
    }

    /// Every launch's description as the runtime binds it ([`Hand::launch_abi`] per launch; a
    /// parameter naming a `[[scratch]]` array becomes a `data` parameter of that name, which
    /// [`wavefuse_runtime::exec::OpKernel::chain`] binds to the shared array).
    pub fn launch_abis(&self, tp: u32) -> Vec<Abi> {
        let shared = self.shared_scratch().unwrap_or_default();
        self.stages()
            .iter()
            .map(|st| {
                let mut abi = st.launch_abi(tp);
                for p in &mut abi.params {
                    if let (AbiPurpose::Scratch, Some(name)) = (p.purpose, p.buffer.clone()) {
                        p.purpose = AbiPurpose::Data;
                        p.part = Some("data".into());
                        p.len = shared
                            .iter()
                            .find(|s| s.name == name)
                            .map(|s| s.len as u64)
                            .or(p.len);
                    }
                }
                abi
            })
            .collect()
    }

    /// The description as the runtime binds it ([`wavefuse_runtime::exec::OpKernel`] takes the
    /// same [`Abi`] a generated kernel has): its symbol, launch and parameters at TP `tp`, with
    /// the fields the TOML may leave out filled in. Call after [`Hand::check`] found nothing.
    pub fn launch_abi(&self, tp: u32) -> Abi {
        let a = &self.abi;
        let launch = self.launch().unwrap_or(Launch {
            grid: [0, 1, 1],
            block: [0, 1, 1],
            values: Vec::new(),
        });
        let multi = |d: [u32; 3]| (d[1] != 1 || d[2] != 1).then_some(d);
        let mut params = a.params.clone();
        for (p, v) in params.iter_mut().zip(&launch.values) {
            if let Some(v) = v {
                p.value = Some(v.to_string());
            }
        }
        let named = |purpose: AbiPurpose| {
            a.params
                .iter()
                .find(|p| p.purpose == purpose)
                .map(|p| p.name.clone())
        };
        Abi {
            schema: ABI_SCHEMA,
            symbol: a.symbol.clone(),
            kernel: a.kernel.clone().unwrap_or_else(|| a.symbol.clone()),
            arch: self.arch.name().to_owned(),
            language: wavefuse_codegen::cpp::language(self.arch).name().to_owned(),
            source: file_name(&self.source_path),
            tp,
            wave_size: self.arch.wave_size(),
            workgroup_size: launch.lanes(),
            grid: launch.workgroups(),
            static_lds_bytes: 0,
            dynamic_lds_bytes: a.dynamic_lds_bytes,
            barriers_per_launch: a.barriers_per_launch,
            flag_rounds_per_launch: a.flag_rounds_per_launch,
            epoch_param: named(AbiPurpose::Epoch),
            error_word_param: named(AbiPurpose::ErrorWord),
            rank_param: named(AbiPurpose::Rank),
            ranks_symbol: None,
            coresidency: a.coresidency.clone(),
            peer_table: a.peer_table.clone(),
            params,
            wait_sites: Vec::new(),
            dependent_launch: a.dependent_launch,
            grid_dims: multi(launch.grid),
            block_dims: multi(launch.block),
        }
    }

    /// The A/B's tolerance for this kernel where it differs from the op's `base` by design: a
    /// `[quantise]` input makes it [`quantised_tolerance`] of the inputs `data` (the worst
    /// rank); `None` otherwise.
    pub fn tolerance(&self, base: f64, ir: &Kernel, data: &crate::suite::Data) -> Option<f64> {
        let q = self.abi.quantise.as_ref()?;
        let b = ir.buffer_by_name(&q.input)?;
        data.inputs
            .iter()
            .filter_map(|r| match r.get(&b) {
                Some(wavefuse::ir::reference::HostData::Tensor(t)) => {
                    let cols = *t.shape.last()?;
                    Some(quantised_tolerance(base, &t.data, cols))
                }
                _ => None,
            })
            .reduce(f64::max)
    }

    /// `path/to/file.cu` relative to the current directory when it is below it.
    pub fn origin(&self) -> String {
        let cwd = std::env::current_dir().unwrap_or_default();
        let p = self
            .source_path
            .strip_prefix(&cwd)
            .unwrap_or(&self.source_path);
        p.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header included by a quoted name beside the source is spliced in between `#line`
    /// directives (the compilers keep both files' line numbers); an include of a file that is not
    /// there, or of a system header, is left to the compiler; a source without one is unchanged.
    #[test]
    fn read_source_splices_a_header_beside_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("k.hip");
        std::fs::write(dir.path().join("loop.h"), "int shared;").unwrap();
        std::fs::write(
            &src,
            "#include <hip/hip_runtime.h>\n#include \"loop.h\"\n#include \"absent.h\"\nint k;\n",
        )
        .unwrap();
        assert_eq!(
            read_source(&src).unwrap(),
            "#include <hip/hip_runtime.h>\n#line 1 \"loop.h\"\nint shared;\n#line 3 \"k.hip\"\n\
             #include \"absent.h\"\nint k;\n"
        );
        let plain = dir.path().join("plain.cu");
        std::fs::write(&plain, "int k;").unwrap();
        assert_eq!(read_source(&plain).unwrap(), "int k;");
    }
}
