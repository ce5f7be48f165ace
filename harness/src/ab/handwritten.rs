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
use wavefuse_codegen::abi::{ABI_SCHEMA, Abi, AbiKind, AbiParam, AbiPurpose, AbiTy};
use wavefuse_codegen::lowered::{LoweredKernel, Ty, peer_slot};
use wavefuse_codegen::model::LoopFacts;
use wavefuse_runtime::CompileRequest;
use wavefuse_runtime::exec::SharedScratch;

use super::parametric;
use super::signature::{self, CParam, CType};
use wavefuse::ir::Kernel;

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
    /// The largest batch the kernel supports (its source's limit); a project reference above it
    /// is reported absent with this reason, not compiled into an error. None: any batch.
    #[serde(default)]
    pub max_batch: Option<u32>,
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
    /// Dynamic LDS per workgroup (the runtime launches with none).
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
    pub fn for_kernel(&self, ir: &Kernel) -> Result<Hand, HandError> {
        let shape = Some(parametric::Bindings::shape_of(ir));
        let Some(template) = &self.template else {
            return Ok(Hand {
                shape,
                ..self.clone()
            });
        };
        let text = instantiate(&self.abi_path, template, ir)?;
        let abi = parse(&self.abi_path, &text)?;
        Ok(Hand {
            abi,
            shape,
            ..self.clone()
        })
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

fn file_name(p: &Path) -> String {
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
fn splice_includes(path: &Path, depth: usize) -> Result<String, HandError> {
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
fn read(path: &Path) -> Result<String, HandError> {
    std::fs::read_to_string(path).map_err(|source| HandError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The parametric description `text` (read from `path`) instantiated for `ir`'s shapes.
fn instantiate(path: &Path, text: &str, ir: &Kernel) -> Result<String, HandError> {
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
fn parse(path: &Path, text: &str) -> Result<HandAbi, HandError> {
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
    Ok(abi)
}

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
         its own (symbol, workgroup_size, grid, [[launches.params]], [launches.model])",
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

fn ty(t: AbiTy) -> Ty {
    Ty::from(t)
}

/// One op-level array a lowered kernel binds.
struct DataArray {
    buffer: String,
    part: &'static str,
    elem: Ty,
    len: usize,
}

/// The data arrays of a lowered kernel.
fn data_arrays(k: &LoweredKernel) -> Vec<DataArray> {
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
fn same_bits(a: Ty, b: Ty) -> bool {
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
    if a.dynamic_lds_bytes > 0 {
        out.push(format!(
            "dynamic_lds_bytes = {}: the runtime launches without dynamic LDS; declare it static",
            a.dynamic_lds_bytes
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
            launches: Vec::new(),
            ..a.clone()
        })
        .collect()
}

/// `[quantise]`: who quantises, and where.
fn check_quantise(a: &HandAbi) -> Vec<String> {
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

fn check_indices_and_names(params: &[AbiParam]) -> Vec<String> {
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
fn check_param(
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
fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Error word and peer ordering.
fn check_sync_params(a: &HandAbi, tp: u32) -> Vec<String> {
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
fn compatible(declared: AbiTy, c: CType) -> bool {
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
fn shape_of(pointers: u32, ty: &str) -> String {
    match pointers {
        0 => format!("a {ty} value"),
        1 => format!("a pointer to {ty}"),
        2 => format!("a table of pointers to {ty}"),
        n => format!("a {n}-level pointer to {ty}"),
    }
}

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
    let limits: Vec<u32> = candidates.iter().filter_map(|h| h.abi.max_batch).collect();
    candidates.retain(|h| h.abi.max_batch.is_none_or(|m| batch <= i64::from(m)));
    if candidates.is_empty()
        && let Some(m) = limits.iter().max()
    {
        return Found::Absent(format!(
            "no hand-written version at batch {batch} (the reference covers batch 1-{m}: its \
             `max_batch`)"
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
fn abi_files(dir: &Path) -> Vec<PathBuf> {
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
