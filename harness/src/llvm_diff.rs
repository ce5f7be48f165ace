//! The LLVM back end's differential run on a GPU, split so the GPU machine needs neither cargo
//! nor LLVM:
//!
//! - here (`wavefuse llvm ptx --out DIR`, feature `llvm`): the LLVM-built sm_90 PTX of every
//!   kernel of the set at TP 1 and 4 (model shapes, batch 1), and `manifest.json` with LLVM's
//!   compile time per kernel and a hash of the C++ source of the same lowering;
//! - there (`wavefuse llvm-diff --ptx DIR`, any build): per kernel, the C++ path (NVRTC, timed
//!   there) and the LLVM path (the PTX, loaded through the CUDA driver by the same device trait),
//!   each on the same inputs against the f64 reference; JSON and Markdown with both verdicts and
//!   the compile times of both paths.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value as Json, json};
use wavefuse_codegen::Arch;
use wavefuse_runtime::compile::{Artifact, ArtifactFormat, CompilerId};
use wavefuse_runtime::exec::{self, OpKernel};
use wavefuse_runtime::{Cache, RankGroup, SameDeviceMode};

use crate::KernelId;
use crate::pipeline::{self, Purpose};
use crate::provenance::{Provenance, compiler_version};
use crate::suite::{self, CaseSpec, ShapeKind, Worst};

/// The manifest's file name in the PTX folder.
pub const MANIFEST: &str = "manifest.json";

/// TP sizes of the differential set.
pub const DIFF_TPS: [u32; 2] = [1, 4];

/// The cases of the differential set.
pub fn cases() -> Vec<CaseSpec> {
    DIFF_TPS
        .iter()
        .flat_map(|&tp| {
            KernelId::ALL.iter().map(move |&id| CaseSpec {
                kernel: id.into(),
                tp,
                batch: 1,
                shape: ShapeKind::Model,
            })
        })
        .collect()
}

/// The PTX file of a case.
pub fn ptx_file(c: &CaseSpec) -> String {
    format!("{}@tp{}.ptx", c.kernel.name(), c.tp)
}

/// FNV-1a (64-bit) of a text: identifies the lowering the PTX was built from (not a security
/// hash; both sides run the same deterministic lowering).
pub fn fingerprint(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// One kernel of the differential set: both paths' verdicts and compile times.
#[derive(Debug)]
pub struct DiffRow {
    /// `kernel@shape`.
    pub label: String,
    /// The kernel's tolerance on relative L2 error.
    pub tol: f64,
    /// The C++ path (NVRTC here) against the f64 reference.
    pub cpp: Result<Worst, RowError>,
    /// The LLVM path (the manifest's PTX) against the f64 reference.
    pub llvm: Result<Worst, RowError>,
    /// NVRTC's compile time here (none when the artifact came from the cache).
    pub nvrtc_ms: Option<f64>,
    /// LLVM's compile time where the PTX was built (from the manifest).
    pub llvm_ms: f64,
}

impl DiffRow {
    /// Both paths within tolerance.
    pub fn passes(&self) -> bool {
        passes(&self.cpp, self.tol) && passes(&self.llvm, self.tol)
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        format!(
            "{:<40} C++: {:<24} LLVM: {:<24} NVRTC {} ms, LLVM {:.1} ms",
            self.label,
            verdict(&self.cpp, self.tol),
            verdict(&self.llvm, self.tol),
            self.nvrtc_ms.map_or("-".into(), |m| format!("{m:.1}")),
            self.llvm_ms
        )
    }
}

/// What `wavefuse llvm-diff` found.
#[derive(Debug)]
pub struct DiffReport {
    /// The provenance header plus the LLVM version, where the PTX was built and the seed.
    pub header: Json,
    /// Every kernel of the set at [`DIFF_TPS`].
    pub rows: Vec<DiffRow>,
}

impl DiffReport {
    /// Every kernel within tolerance on both paths.
    pub fn passes(&self) -> bool {
        self.rows.iter().all(DiffRow::passes)
    }

    /// The JSON results file.
    pub fn to_json(&self) -> Json {
        json!({"header": self.header, "rows": self.rows.iter().map(row_json).collect::<Vec<_>>()})
    }

    /// The Markdown table.
    pub fn markdown(&self) -> String {
        markdown(&self.header, &self.rows)
    }
}

/// Why the differential run could not run.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// No NVIDIA GPU or driver.
    #[error(transparent)]
    NoGpu(#[from] suite::GpuError),
    /// The PTX folder or its manifest is unusable.
    #[error(transparent)]
    Input(#[from] ManifestError),
}

/// Why the PTX folder's manifest is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// It could not be read.
    #[error("{}: {source} (write it with `wavefuse llvm ptx --out`)", path.display())]
    Read {
        /// The manifest.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not JSON.
    #[error("{}: {source}", path.display())]
    Json {
        /// The manifest.
        path: std::path::PathBuf,
        /// What the parser said.
        source: serde_json::Error,
    },
    /// A kernel of the set has no entry.
    #[error("{0} is not in the manifest")]
    Missing(String),
}

/// Why one path of a kernel has no verdict.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// Nothing ran (yet).
    #[error("not run")]
    NotRun,
    /// The case did not generate.
    #[error(transparent)]
    Prepare(#[from] suite::PrepError),
    /// The manifest's PTX comes from another lowering.
    #[error("the PTX was built from a different lowering (rebuild both)")]
    Stale,
    /// The PTX file could not be read.
    #[error("{file}: {source}")]
    Ptx {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// No GPU.
    #[error(transparent)]
    Gpu(#[from] suite::GpuError),
    /// Compiling, binding or running failed.
    #[error(transparent)]
    Runtime(#[from] wavefuse_runtime::Error),
}

/// The differential run over the PTX folder `ptx` (written by `wavefuse llvm ptx --out`) on
/// the workload of `seed`; `on_row` sees each kernel as it finishes.
pub fn diff(
    ptx: &Path,
    seed: u64,
    commit: &str,
    on_row: &mut dyn FnMut(&DiffRow),
) -> Result<DiffReport, DiffError> {
    let manifest = read_manifest(ptx)?;
    let dev = suite::open_cuda()?;
    let provenance = Provenance::of_device(&dev, Arch::Sm90, commit)
        .unwrap_or_else(|_| Provenance::without_gpu(compiler_version(Arch::Sm90), commit));
    drop(dev);
    let mut rows = Vec::new();
    for c in cases() {
        let entry = manifest["entries"]
            .as_array()
            .and_then(|es| es.iter().find(|e| e["file"] == ptx_file(&c)))
            .ok_or_else(|| ManifestError::Missing(ptx_file(&c)))?;
        let row = diff_case(&c, entry, ptx, seed);
        on_row(&row);
        rows.push(row);
    }
    let header = provenance.json_with(json!({
        "llvm": manifest["llvm"],
        "llvm_built_at": manifest["commit"],
        "seed": seed,
    }));
    Ok(DiffReport { header, rows })
}

fn read_manifest(dir: &Path) -> Result<Json, ManifestError> {
    let path = dir.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(ManifestError::Read { path, source }),
    };
    serde_json::from_str(&text).map_err(|source| ManifestError::Json { path, source })
}

fn passes(r: &Result<Worst, RowError>, tol: f64) -> bool {
    r.as_ref().is_ok_and(|w| w.passes(tol))
}

fn verdict(r: &Result<Worst, RowError>, tol: f64) -> String {
    match r {
        Ok(w) if w.passes(tol) => format!("ok (rel L2 {:.1e})", w.rel_l2),
        Ok(w) => format!("FAIL (rel L2 {:.1e})", w.rel_l2),
        Err(e) => format!("ERROR: {}", e.to_string().lines().next().unwrap_or("")),
    }
}

fn diff_case(c: &CaseSpec, entry: &Json, dir: &Path, seed: u64) -> DiffRow {
    let (tol, _) = c.kernel.tolerance();
    let mut row = DiffRow {
        label: c.label(),
        tol,
        cpp: Err(RowError::NotRun),
        llvm: Err(RowError::NotRun),
        nvrtc_ms: None,
        llvm_ms: entry["llvm_ms"]["total"].as_f64().unwrap_or(f64::NAN),
    };
    let p = match suite::prepare(
        c,
        Arch::Sm90,
        &crate::policy::SchedulePolicy::default(),
        crate::policy::Placement::SameDevice,
        seed,
        false,
    ) {
        Ok(p) => p,
        Err(e) => {
            row.cpp = Err(e.clone().into());
            row.llvm = Err(e.into());
            return row;
        }
    };
    if entry["cpp_fingerprint"].as_str() != Some(fingerprint(&p.g.source.text).as_str()) {
        row.llvm = Err(RowError::Stale);
    }
    // C++ path: NVRTC here, timed (uncached), or the carried prebuilt cubin without NVRTC.
    let req = pipeline::request(&p.g);
    let compiler = pipeline::compiler(Arch::Sm90, Purpose::Run);
    let t = Instant::now();
    let cpp_artifact = match compiler.compile(&req) {
        Ok(a) => {
            row.nvrtc_ms = Some(t.elapsed().as_secs_f64() * 1e3);
            Ok(a)
        }
        Err(_) => exec::artifact_for(&Cache::from_env(), compiler.as_ref(), &req)
            .map(|(a, _)| a)
            .map_err(RowError::from),
    };
    row.cpp = cpp_artifact.and_then(|a| run(&p, &a));
    if row.llvm.is_ok() || matches!(&row.llvm, Err(RowError::NotRun)) {
        row.llvm = std::fs::read(dir.join(ptx_file(c)))
            .map_err(|source| RowError::Ptx {
                file: ptx_file(c),
                source,
            })
            .and_then(|image| {
                let a = Artifact {
                    compiler: CompilerId::LlvmNvptx,
                    compiler_version: format!("LLVM {}", entry["llvm"].as_str().unwrap_or("?")),
                    arch: Arch::Sm90,
                    format: ArtifactFormat::Ptx,
                    flags: Vec::new(),
                    usage: Default::default(),
                    log: String::new(),
                    image,
                };
                run(&p, &a)
            });
    }
    row
}

/// Bind, upload, poison, launch once, read back, compare with the f64 reference.
fn run(p: &suite::Prepared, a: &Artifact) -> Result<Worst, RowError> {
    let dev = suite::open_cuda()?;
    let group = RankGroup::on_one_device(dev, p.g.lowered.tp, SameDeviceMode::Streams)?;
    // The ABI is the C++ writer's; the LLVM back end's PTX has no stream-order prologue, so it
    // must never be launched as a programmatic dependent; it has no ranks entry either.
    let abi = wavefuse_codegen::abi::Abi {
        dependent_launch: false,
        ranks_symbol: None,
        ..p.g.abi.clone()
    };
    let mut k = OpKernel::new(&group, &p.g.ir, &abi, a)?;
    let out = k.run(&p.data.inputs)?;
    Ok(Worst::of(&exec::compare(&p.g.ir, &out, &p.data.reference)))
}

fn worst_json(r: &Result<Worst, RowError>, tol: f64) -> Json {
    match r {
        Ok(w) => json!({"pass": w.passes(tol), "rel_l2": w.rel_l2, "max_abs": w.max_abs,
                        "non_finite": w.non_finite, "rank_diffs": w.rank_diffs}),
        Err(e) => json!({"pass": false, "error": e.to_string()}),
    }
}

fn row_json(r: &DiffRow) -> Json {
    json!({
        "case": r.label, "tolerance": r.tol,
        "cpp": worst_json(&r.cpp, r.tol), "llvm": worst_json(&r.llvm, r.tol),
        "nvrtc_ms": r.nvrtc_ms, "llvm_ms": r.llvm_ms,
    })
}

fn markdown(header: &Json, rows: &[DiffRow]) -> String {
    let mut s = format!(
        "# LLVM back end vs C++ path on {}\n\n{} · driver {} · LLVM {} (PTX built at {}) · seed {}\n\n",
        header["device"]["name"].as_str().unwrap_or("?"),
        header["date"].as_str().unwrap_or("?"),
        header["driver_version"].as_str().unwrap_or("?"),
        header["llvm"].as_str().unwrap_or("?"),
        header["llvm_built_at"].as_str().unwrap_or("?"),
        header["seed"]
    );
    s += "| case | tolerance | C++ (NVRTC) rel L2 | LLVM (PTX) rel L2 | NVRTC ms | LLVM ms |\n";
    s += "|---|---:|---|---|---:|---:|\n";
    for r in rows {
        s += &format!(
            "| {} | {:.0e} | {} | {} | {} | {:.1} |\n",
            r.label,
            r.tol,
            verdict(&r.cpp, r.tol),
            verdict(&r.llvm, r.tol),
            r.nvrtc_ms.map_or("-".into(), |m| format!("{m:.1}")),
            r.llvm_ms
        );
    }
    s
}

/// `wavefuse llvm ptx --out DIR`: the PTX of the differential set and its manifest.
#[cfg(feature = "llvm")]
pub fn write_ptx_set(out: &Path) -> Result<usize, PtxSetError> {
    use wavefuse_codegen::llvm;
    std::fs::create_dir_all(out).map_err(|source| PtxSetError::Write {
        what: out.display().to_string(),
        source,
    })?;
    let mut entries = Vec::new();
    for c in cases() {
        let g = suite::generate(
            &c,
            Arch::Sm90,
            &crate::policy::SchedulePolicy::default(),
            crate::policy::Placement::SameDevice,
        )
        .map_err(|e| PtxSetError::Kernel {
            case: c.label(),
            problem: e.to_string(),
        })?;
        let compiled = llvm::compile(&g.lowered, false).map_err(|e| PtxSetError::Kernel {
            case: c.label(),
            problem: e.to_string(),
        })?;
        std::fs::write(out.join(ptx_file(&c)), &compiled.image).map_err(|source| {
            PtxSetError::Write {
                what: ptx_file(&c),
                source,
            }
        })?;
        entries.push(json!({
            "file": ptx_file(&c), "kernel": c.kernel.name(), "tp": c.tp, "symbol": compiled.symbol,
            "cpp_fingerprint": fingerprint(&g.source.text),
            "llvm": llvm_version_string(),
            "llvm_ms": {"build": compiled.build_ms, "opt": compiled.opt_ms,
                        "codegen": compiled.codegen_ms, "total": compiled.total_ms()},
        }));
        println!("{}: {:.1} ms", ptx_file(&c), compiled.total_ms());
    }
    let n = entries.len();
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let m = json!({"llvm": llvm_version_string(), "commit": commit, "date": crate::provenance::utc_now(),
                   "entries": entries});
    std::fs::write(
        out.join(MANIFEST),
        serde_json::to_string_pretty(&m).unwrap_or_default(),
    )
    .map_err(|source| PtxSetError::Write {
        what: MANIFEST.to_owned(),
        source,
    })?;
    Ok(n)
}

/// Why `wavefuse llvm ptx --out` did not write the PTX set.
#[cfg(feature = "llvm")]
#[derive(Debug, thiserror::Error)]
pub enum PtxSetError {
    /// A kernel did not generate or compile through LLVM.
    #[error("{case}: {problem}")]
    Kernel {
        /// The case.
        case: String,
        /// Why.
        problem: String,
    },
    /// A file or the folder could not be written.
    #[error("{what}: {source}")]
    Write {
        /// The file or folder.
        what: String,
        /// Why.
        source: std::io::Error,
    },
}

/// `16.0.6`.
#[cfg(feature = "llvm")]
pub fn llvm_version_string() -> String {
    let (a, b, c) = wavefuse_codegen::llvm::llvm_version();
    format!("{a}.{b}.{c}")
}
