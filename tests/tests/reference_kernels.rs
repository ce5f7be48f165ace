//! The hand-written reference kernels (kernels-gen/reference, DESIGN.md §3): every kernel has a
//! gfx906 HIP and an sm_90 CUDA version and one parametric ABI description in the generator's
//! schema plus a `[build]` table of compile-time defines (see kernels-gen/reference/README.md),
//! instantiated here at every TP size for the generated kernel's shapes.
//!
//! Checked here:
//! - every ABI, instantiated, parses with the generator's own serde types (`wavefuse_codegen::abi::Abi`),
//!   names its source, symbol, target and shape consistently, and lists the parameters in the
//!   order of the kernel's signature;
//! - its data parameters are the generated kernel's (same names, op-level buffers and parts, types,
//!   lengths and access, in the same relative order), so a harness binds both the same way;
//! - its synchronisation parameters follow the runtime's conventions (zero-once flags and counters,
//!   the epoch scalar, the error word, slot p = rank p peer tables, co-residency exactly for grid
//!   barriers, one wait site per peer flag and grid barrier);
//! - every synchronisation point of the source carries a DESIGN.md §5 comment;
//! - at the TP = 4 and TP = 1 shapes of §1, every kernel compiles with hipcc for gfx906 and nvcc
//!   for sm_90 through the runtime's compiler drivers, with no spills, no sm_90 stack frame, the
//!   static LDS its ABI declares, and (for grid barriers) a grid that fits the co-resident capacity
//!   of one device. The resource table is printed.
//!
//! Without hipcc or nvcc: "skipped: …", except under CI (`CI` set), where it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::{Abi, AbiKind, AbiParam, AbiPurpose, AbiTy, Init, Memory};
use wavefuse_harness::ab::parametric;
use wavefuse_harness::generate::generate;
use wavefuse_kernels::KernelId;
use wavefuse_runtime::compile::{
    CompileError, CompileRequest, Compiler, Hipcc, Nvcc, ResourceUsage,
};

/// TP sizes each parametric ABI file is instantiated and checked at.
const ABI_TPS: [u32; 4] = [1, 2, 4, 8];
/// (TP, batch) compiled with the real compilers: the shapes of DESIGN.md §1 the issue names,
/// TP 4 at batch 8 (the static LDS grows with the batch), and TP 4 at batch 16, 32 and 64 for the
/// references whose `max_batch` reaches it (issue 40: batch tiles keep their registers and LDS
/// bounded).
const COMPILED: [(u32, usize); 6] = [(4, 1), (1, 1), (4, 8), (4, 16), (4, 32), (4, 64)];
/// Polls before a bounded wait gives up (WF_SPIN_BUDGET's default in every source).
const SPIN_BUDGET: u32 = 1 << 26;

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels-gen/reference")
}

/// One target's directory, source extension and compiler.
#[derive(Copy, Clone, Debug)]
struct Target {
    arch: Arch,
    dir: &'static str,
    ext: &'static str,
    language: &'static str,
}

const TARGETS: [Target; 2] = [
    Target {
        arch: Arch::Gfx906,
        dir: "hip",
        ext: "hip",
        language: "hip",
    },
    Target {
        arch: Arch::Sm90,
        dir: "cuda",
        ext: "cu",
        language: "cuda",
    },
];

/// A reference kernel's source and one of its ABI descriptions.
struct Reference {
    id: KernelId,
    target: Target,
    tp: u32,
    source_path: PathBuf,
    source: String,
    abi: Abi,
    defines: Vec<String>,
    /// The largest batch the source takes (`max_batch`, its static_assert), None: any.
    max_batch: Option<usize>,
}

impl Reference {
    fn label(&self) -> String {
        format!(
            "{}@{}_tp{}",
            self.id.name(),
            self.target.arch.name(),
            self.tp
        )
    }
}

fn load(id: KernelId, target: Target, tp: u32) -> Reference {
    load_at(id, target, tp, 1)
}

fn load_at(id: KernelId, target: Target, tp: u32, batch: usize) -> Reference {
    let dir = reference_dir().join(target.dir);
    let abi_path = dir.join(format!("{}.abi.toml", id.name()));
    let template = std::fs::read_to_string(&abi_path)
        .unwrap_or_else(|e| panic!("{}: {e}", abi_path.display()));
    assert!(
        parametric::is_parametric(&template),
        "{}: not parametric",
        abi_path.display()
    );
    // Instantiated at the generated kernel's shapes (the op-level kernel the harness looks the
    // reference up with).
    let generated = generate(id, target.arch, tp, batch).unwrap_or_else(|e| panic!("{e}"));
    let text = parametric::instantiate(&template, &parametric::Bindings::of(&generated.ir))
        .unwrap_or_else(|e| panic!("{} at TP {tp}: {e}", abi_path.display()));
    let abi = Abi::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", abi_path.display()));
    // The [build] table is not part of the generator's schema (Abi ignores it); read it as TOML.
    let table: toml::Table = text.parse().expect("parsed above");
    let defines: Vec<String> = table
        .get("build")
        .and_then(|b| b.get("defines"))
        .and_then(|d| d.as_array())
        .unwrap_or_else(|| panic!("{}: no [build] defines", abi_path.display()))
        .iter()
        .map(|d| d.as_str().expect("a define is a string").to_owned())
        .collect();
    let max_batch = table
        .get("max_batch")
        .map(|m| m.as_integer().expect("max_batch is an integer") as usize);
    let source_path = dir.join(&abi.source);
    // As the harness reads it: a header beside it spliced in (the HIP INT4 references').
    let source = wavefuse_harness::ab::handwritten::read_source(&source_path)
        .unwrap_or_else(|e| panic!("{}: {e}", source_path.display()));
    Reference {
        id,
        target,
        tp,
        source_path,
        source,
        abi,
        defines,
        max_batch,
    }
}

fn every_reference() -> Vec<Reference> {
    let mut out = Vec::new();
    for target in TARGETS {
        for id in KernelId::ALL {
            for tp in ABI_TPS {
                out.push(load(id, target, tp));
            }
        }
    }
    out
}

/// The parameter names of `symbol`'s signature, in order: one parameter per line, as every
/// reference kernel is written.
fn signature(source: &str, symbol: &str) -> Vec<String> {
    let start = source
        .find(&format!("\n{symbol}("))
        .unwrap_or_else(|| panic!("no definition of `{symbol}`"));
    let body = start + source[start..].find("\n{").expect("a function body");
    source[start..body]
        .lines()
        .skip(2)
        .map(|line| {
            let decl = line
                .split("//")
                .next()
                .unwrap()
                .trim()
                .trim_end_matches([',', ')']);
            decl.rsplit(|c: char| c.is_whitespace() || c == '*' || c == '&')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The files under kernels-gen/reference are exactly the kernel set's sources and ABIs, and the
/// README.
#[test]
fn reference_directory_holds_the_whole_kernel_set() {
    for target in TARGETS {
        let dir = reference_dir().join(target.dir);
        let mut found: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        found.sort();
        let mut expected: Vec<String> = KernelId::ALL
            .iter()
            .flat_map(|id| {
                [
                    format!("{}.{}", id.name(), target.ext),
                    format!("{}.abi.toml", id.name()),
                ]
            })
            .collect();
        if target.ext == "hip" {
            // The INT4 hot loop the four gfx906 INT4 references share (one copy).
            expected.push("gemv_int4_loop.h".into());
        }
        expected.sort();
        assert_eq!(found, expected, "{}", dir.display());
    }
    assert!(reference_dir().join("README.md").is_file());
}

#[test]
fn abi_descriptions_match_their_sources() {
    for r in every_reference() {
        let (abi, label) = (&r.abi, r.label());
        let name = r.id.name();
        assert_eq!(abi.schema, wavefuse_codegen::abi::ABI_SCHEMA, "{label}");
        assert_eq!(abi.kernel, name, "{label}");
        assert_eq!(abi.symbol, format!("{name}_ref"), "{label}");
        assert_eq!(abi.arch, r.target.arch.name(), "{label}");
        assert_eq!(abi.language, r.target.language, "{label}");
        assert_eq!(abi.source, format!("{name}.{}", r.target.ext), "{label}");
        assert_eq!(abi.tp, r.tp, "{label}");
        assert_eq!(abi.wave_size, r.target.arch.wave_size(), "{label}");
        assert_eq!(abi.workgroup_size, 256, "{label}");
        assert_eq!(abi.dynamic_lds_bytes, 0, "{label}");
        assert!(abi.grid >= 1, "{label}");

        // The source exports the symbol with the workgroup size the ABI states.
        let src = &r.source;
        assert!(
            src.contains("extern \"C\" __global__ void __launch_bounds__(WG"),
            "{label}"
        );
        assert!(
            src.contains("constexpr unsigned WG = 256"),
            "{label}: workgroup size"
        );
        if r.target.arch == Arch::Gfx906 {
            assert!(
                src.contains("amdgpu_flat_work_group_size(WG, WG)"),
                "{label}"
            );
            assert!(src.contains("#include <hip/hip_runtime.h>"), "{label}");
        } else {
            assert!(
                !src.contains("#include"),
                "{label}: needs no header (NVRTC compiles it as is)"
            );
        }

        // Parameters: in signature order, indexed by position.
        let declared = signature(src, &abi.symbol);
        let described: Vec<&str> = abi.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(declared, described, "{label}: signature and ABI disagree");
        for (i, p) in abi.params.iter().enumerate() {
            assert_eq!(p.index as usize, i, "{label}: {}", p.name);
        }

        // The build defines are the ones the source requires, each of the form NAME=VALUE.
        for d in &r.defines {
            let (key, value) = d
                .split_once('=')
                .unwrap_or_else(|| panic!("{label}: define `{d}`"));
            assert!(
                key.starts_with("WF_") && !value.is_empty(),
                "{label}: define `{d}`"
            );
            assert!(
                src.contains(&format!("defined({key})")),
                "{label}: the source does not require {key}"
            );
        }
        let required = src
            .lines()
            .find(|l| l.starts_with("#if !defined(WF_"))
            .expect("a define guard");
        for key in required
            .split("defined(")
            .skip(1)
            .map(|s| s.split(')').next().unwrap())
        {
            assert!(
                r.defines.iter().any(|d| d.split('=').next() == Some(key)),
                "{label}: [build] lacks {key}"
            );
        }
    }
}

/// The fields a harness binds a data parameter by.
#[derive(Debug, PartialEq)]
struct DataKey {
    name: String,
    kind: AbiKind,
    ty: AbiTy,
    buffer: Option<String>,
    part: Option<String>,
    len: Option<u64>,
    access: Option<String>,
    space: Option<String>,
    memory: Option<Memory>,
}

fn data_key(p: &AbiParam) -> DataKey {
    DataKey {
        name: p.name.clone(),
        kind: p.kind,
        ty: p.ty,
        buffer: p.buffer.clone(),
        part: p.part.clone(),
        len: p.len,
        access: p.access.clone(),
        space: p.space.clone(),
        memory: p.memory,
    }
}

#[test]
fn data_parameters_are_the_generated_kernels() {
    for r in every_reference() {
        let label = r.label();
        let generated =
            generate(r.id, r.target.arch, r.tp, 1).unwrap_or_else(|e| panic!("{label}: {e}"));
        let data = |abi: &Abi| -> Vec<_> {
            abi.params
                .iter()
                .filter(|p| p.purpose == AbiPurpose::Data)
                .map(data_key)
                .collect()
        };
        assert_eq!(
            data(&r.abi),
            data(&generated.abi),
            "{label}: data parameters differ from the generated kernel's"
        );
        for p in r.abi.params.iter().filter(|p| p.kind != AbiKind::Scalar) {
            let len = p
                .len
                .unwrap_or_else(|| panic!("{label}: {} has no len", p.name));
            assert_eq!(
                p.bytes,
                Some(len * p.ty.bytes()),
                "{label}: {} bytes",
                p.name
            );
            let align = p
                .align
                .unwrap_or_else(|| panic!("{label}: {} has no align", p.name));
            assert!(
                align.is_power_of_two() && align >= p.ty.bytes(),
                "{label}: {} align",
                p.name
            );
        }
    }
}

fn param<'a>(abi: &'a Abi, name: &str) -> Option<&'a AbiParam> {
    abi.params.iter().find(|p| p.name == name)
}

#[test]
fn synchronisation_follows_the_runtime_conventions() {
    for r in every_reference() {
        let (abi, label) = (&r.abi, r.label());
        for p in &abi.params {
            let want_init = match p.purpose {
                AbiPurpose::Counter | AbiPurpose::Flags => Some(Init::ZeroOnce),
                AbiPurpose::ErrorWord => Some(Init::ZeroBeforeLaunch),
                _ => None,
            };
            assert_eq!(p.init, want_init, "{label}: {} init", p.name);
            match p.purpose {
                AbiPurpose::Rank | AbiPurpose::Epoch => {
                    assert_eq!(
                        (p.kind, p.ty),
                        (AbiKind::Scalar, AbiTy::U32),
                        "{label}: {}",
                        p.name
                    )
                }
                AbiPurpose::ErrorWord => {
                    assert_eq!(
                        (p.kind, p.len, p.memory),
                        (AbiKind::Array, Some(1), Some(Memory::HostMapped)),
                        "{label}"
                    )
                }
                AbiPurpose::Flags => {
                    assert_eq!(
                        p.kind,
                        AbiKind::PeerArrays,
                        "{label}: flags are polled by peers"
                    );
                    assert_eq!(
                        p.len,
                        Some(abi.grid as u64),
                        "{label}: one flag per workgroup"
                    );
                    let mem = if r.target.arch == Arch::Gfx906 {
                        Memory::Uncached
                    } else {
                        Memory::FineGrained
                    };
                    assert_eq!(p.memory, Some(mem), "{label}: flags memory (§5.12)");
                }
                AbiPurpose::Scratch if p.kind == AbiKind::PeerArrays => {
                    assert_eq!(p.memory, Some(Memory::FineGrained), "{label}: {}", p.name)
                }
                _ => {}
            }
        }
        // Named scalars and the error word.
        let named = |field: &Option<String>, purpose: AbiPurpose| match field {
            Some(n) => assert_eq!(
                param(abi, n).map(|p| p.purpose),
                Some(purpose),
                "{label}: {n}"
            ),
            None => assert!(
                !abi.params.iter().any(|p| p.purpose == purpose),
                "{label}: unnamed {purpose:?}"
            ),
        };
        named(&abi.epoch_param, AbiPurpose::Epoch);
        named(&abi.rank_param, AbiPurpose::Rank);
        named(&abi.error_word_param, AbiPurpose::ErrorWord);

        // Peer tables: slot p holds rank p (§5.5).
        let peers = abi.params.iter().any(|p| p.kind == AbiKind::PeerArrays);
        assert_eq!(abi.peer_table.is_some(), peers, "{label}: peer_table");
        if let Some(t) = &abi.peer_table {
            assert_eq!(t.entries, r.tp, "{label}");
            assert_eq!(
                t.slots,
                (0..r.tp).collect::<Vec<_>>(),
                "{label}: slot p = rank p"
            );
        }
        if peers {
            assert!(
                abi.rank_param.is_some() && abi.epoch_param.is_some(),
                "{label}: peers need rank and epoch"
            );
        }

        // Grid barriers need co-residency (§5.9); the barrier counter is `grid_counter`.
        assert_eq!(
            abi.coresidency.is_some(),
            abi.barriers_per_launch > 0,
            "{label}: co-residency"
        );
        if let Some(c) = &abi.coresidency {
            assert_eq!(c.workgroups, abi.grid, "{label}");
            assert_eq!(
                param(abi, "grid_counter").map(|p| p.purpose),
                Some(AbiPurpose::Counter),
                "{label}"
            );
        }
        // Any other counter is a last-arriver counter (split-K): it needs the epoch, not residency.
        for c in abi
            .params
            .iter()
            .filter(|p| p.purpose == AbiPurpose::Counter && p.name != "grid_counter")
        {
            assert!(
                abi.epoch_param.is_some(),
                "{label}: {} needs the epoch",
                c.name
            );
        }

        // Flag rounds: one per launch when ranks exchange data; every wait is bounded and listed.
        let exchanges = r.tp > 1 && abi.params.iter().any(|p| p.purpose == AbiPurpose::Flags);
        assert_eq!(
            abi.flag_rounds_per_launch,
            u32::from(exchanges),
            "{label}: flag rounds"
        );
        let mut want: Vec<(u32, &str, &str, &str)> = Vec::new();
        if exchanges {
            want.extend((0..r.tp).map(|p| (p + 1, "ar_flags", "peer_flag", "system")));
        }
        if abi.barriers_per_launch > 0 {
            want.push((r.tp + 1, "grid_counter", "grid_barrier", "agent"));
        }
        let got: Vec<(u32, &str, &str, &str)> = abi
            .wait_sites
            .iter()
            .map(|w| (w.code, w.polls.as_str(), w.what.as_str(), w.scope.as_str()))
            .collect();
        assert_eq!(got, want, "{label}: wait sites");
        for w in &abi.wait_sites {
            assert_eq!(w.budget, SPIN_BUDGET, "{label}");
        }
        if !abi.wait_sites.is_empty() {
            assert!(
                abi.error_word_param.is_some(),
                "{label}: bounded waits need an error word"
            );
            assert!(
                r.source.contains(&format!(
                    "#define WF_SPIN_BUDGET (1u << {})",
                    SPIN_BUDGET.trailing_zeros()
                )),
                "{label}"
            );
        }
    }
}

/// Every workgroup barrier, LDS barrier and atomic (other than the error-word store) is directly
/// below a comment naming the DESIGN.md §5 invariant it upholds.
#[test]
fn synchronisation_points_carry_invariant_comments() {
    for target in TARGETS {
        for id in KernelId::ALL {
            let path =
                reference_dir()
                    .join(target.dir)
                    .join(format!("{}.{}", id.name(), target.ext));
            // With the headers it includes spliced in: their synchronisation points too.
            let src = wavefuse_harness::ab::handwritten::read_source(&path).unwrap();
            let lines: Vec<&str> = src.lines().map(str::trim).collect();
            for (i, l) in lines.iter().enumerate() {
                let atomic = ["__nv_atomic_", "__hip_atomic_"]
                    .iter()
                    .any(|a| l.contains(a));
                let sync = l.starts_with("__syncthreads()")
                    || l.starts_with("lds_barrier();")
                    || (atomic && !l.contains("error_word"));
                if !sync {
                    continue;
                }
                let comments = lines[..i].iter().rev().take_while(|c| c.starts_with("//"));
                assert!(
                    comments.into_iter().any(|c| c.contains("§5.")),
                    "{}:{}: `{l}` without a §5 comment above it",
                    path.display(),
                    i + 1
                );
            }
        }
    }
}

fn under_ci() -> bool {
    wavefuse_test_support::under_ci()
}

/// The compiler for a target, or None (after printing why) when it is not installed.
fn compiler(arch: Arch) -> Option<Box<dyn Compiler>> {
    let c: Box<dyn Compiler> = match arch {
        Arch::Gfx906 => Box::new(Hipcc::from_env()),
        Arch::Sm90 => Box::new(Nvcc::from_env()),
    };
    match c.version() {
        Ok(_) => Some(c),
        Err(e @ CompileError::Missing { .. }) if !under_ci() => {
            println!("skipped: {e}");
            None
        }
        Err(e) => panic!(
            "{} must be usable{}: {e}",
            c.id(),
            if under_ci() { " under CI" } else { "" }
        ),
    }
}

/// Workgroups of 256 lanes one CU/SM holds at once, from the compiler's report.
fn workgroups_per_cu(arch: Arch, usage: &ResourceUsage) -> u32 {
    match usage {
        // 256 lanes = 4 waves = one per SIMD: waves per SIMD is workgroups per CU (the remark
        // accounts for VGPRs, SGPRs and LDS).
        ResourceUsage::Amd(u) => u.occupancy_waves_per_simd,
        ResourceUsage::Nvidia(u) => {
            let regs = u.registers.max(1).div_ceil(8) * 8; // allocation granularity
            let by_regs = 65536 / (regs * 256);
            let by_smem = arch.lds_bytes_per_cu() / (u.shared_bytes + 1024); // 1 KB reserved per block
            let by_threads = 2048 / 256;
            by_regs.min(by_smem).min(by_threads)
        }
    }
}

fn describe(usage: &ResourceUsage) -> String {
    match usage {
        ResourceUsage::Amd(u) => format!(
            "VGPR {:>3}  SGPR {:>3}  LDS {:>5}  occupancy {:>2} waves/SIMD  spills {}/{}  scratch {}",
            u.vgprs,
            u.sgprs,
            u.lds_bytes,
            u.occupancy_waves_per_simd,
            u.vgpr_spills,
            u.sgpr_spills,
            u.scratch_bytes_per_lane
        ),
        ResourceUsage::Nvidia(u) => format!(
            "regs {:>3}  smem {:>5}  spills {}/{} B  stack {} B",
            u.registers,
            u.shared_bytes,
            u.spill_store_bytes,
            u.spill_load_bytes,
            u.stack_frame_bytes
        ),
    }
}

/// Every reference kernel at the TP = 4 and TP = 1 shapes compiles with the real compiler, within
/// the budget of DESIGN.md §7 (no spills, no stack frame), with the LDS its ABI declares, and a
/// grid barrier's grid fits one device's co-resident capacity. One test per target, so each
/// compiler runs in its own test thread.
fn compile_target(arch: Arch) {
    let Some(cc) = compiler(arch) else { return };
    let target = TARGETS.into_iter().find(|t| t.arch == arch).unwrap();
    let mut table = BTreeMap::new();
    let mut failures = Vec::new();
    for (tp, batch) in COMPILED {
        for id in KernelId::ALL {
            let r = load_at(id, target, tp, batch);
            if r.max_batch.is_some_and(|m| batch > m) {
                continue;
            }
            let label = format!("{}_b{batch}", r.label());
            let mut req = CompileRequest::new(&label, r.source.clone(), arch);
            req.extra_flags = r.defines.iter().map(|d| format!("-D{d}")).collect();
            let artifact = match cc.compile(&req) {
                Ok(a) => a,
                Err(e) => {
                    failures.push(format!("{label} ({}): {e}", r.source_path.display()));
                    continue;
                }
            };
            let Some(usage) = artifact.usage_of(&r.abi.symbol) else {
                failures.push(format!(
                    "{label}: no resource report for `{}`",
                    r.abi.symbol
                ));
                continue;
            };
            table.insert((tp, batch, id), describe(usage));
            if usage.spills() {
                failures.push(format!(
                    "{label}: spills or a stack frame: {}",
                    describe(usage)
                ));
            }
            if u64::from(usage.lds_bytes()) != r.abi.static_lds_bytes {
                failures.push(format!(
                    "{label}: the ABI declares {} bytes of static LDS, the compiler reports {}",
                    r.abi.static_lds_bytes,
                    usage.lds_bytes()
                ));
            }
            if let Some(c) = &r.abi.coresidency {
                let capacity = workgroups_per_cu(arch, usage) * arch.compute_units();
                if c.workgroups > capacity {
                    failures.push(format!(
                        "{label}: grid {} exceeds the co-resident capacity {capacity} of one {} (§5.9)",
                        c.workgroups,
                        arch.name()
                    ));
                }
            }
        }
    }
    println!(
        "reference kernels on {} ({}):",
        arch.name(),
        cc.version()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or("")
    );
    for ((tp, batch, id), row) in &table {
        println!("  {:<28} tp{tp} b{batch}  {row}", id.name());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // gemv_int4 goes to batch 64 on both targets (its `max_batch`): compiled there, not skipped.
    assert!(
        table.contains_key(&(4, 64, KernelId::GemvInt4)),
        "gemv_int4 was not compiled at batch 64"
    );
}

#[test]
fn hipcc_compiles_the_reference_kernels_gfx906() {
    compile_target(Arch::Gfx906);
}

#[test]
fn nvcc_compiles_the_reference_kernels_sm90() {
    compile_target(Arch::Sm90);
}

/// The harness's own lookup (`find_reference`, what `ab` and `tune` use) finds each kernel's
/// reference at every TP size and batch of the suite's model shapes: the parametric description,
/// instantiated at the generated kernel's shapes, binds every one of its data arrays (same
/// op-level buffer, part and length) and passes the ABI checks against it. Past a reference's
/// `max_batch` it is absent, with that reason; `gemv_int4`'s reaches 64 on both targets.
#[test]
fn the_reference_is_found_for_every_generated_kernel_at_every_shape() {
    use wavefuse_harness::ab::handwritten::{Found, find_reference};
    for target in TARGETS {
        for id in KernelId::ALL {
            let max_batch = load(id, target, 1).max_batch.unwrap_or(usize::MAX);
            if id == KernelId::GemvInt4 {
                assert_eq!(max_batch, 64, "gemv_int4@{}", target.arch.name());
            }
            for tp in ABI_TPS {
                // Past batch 8 at TP 1, 2 and 4 (those `sim_batch.rs` lowers at batch 1-64; at
                // TP 8 the sm_90 fused kernel's LDS stops at batch 41).
                let batches: &[usize] = if tp <= 4 {
                    &[1, 3, 8, 16, 33, 64]
                } else {
                    &[1, 3, 8]
                };
                for &batch in batches {
                    let label = format!("{}@{}_tp{tp}_b{batch}", id.name(), target.arch.name());
                    let g = generate(id, target.arch, tp, batch)
                        .unwrap_or_else(|e| panic!("{label}: {e}"));
                    let found = find_reference(Some(&reference_dir()), &g.lowered, &g.ir);
                    if batch > max_batch {
                        match found {
                            Found::Absent(why) => {
                                assert!(why.contains("max_batch"), "{label}: {why}")
                            }
                            Found::Hand(_) => {
                                panic!("{label}: found past its max_batch {max_batch}")
                            }
                        }
                        continue;
                    }
                    match found {
                        Found::Hand(h) => {
                            let problems = h.check(&g.lowered);
                            assert!(problems.is_empty(), "{label}: {problems:?}");
                            assert_eq!(h.abi.tp, Some(tp), "{label}");
                        }
                        Found::Absent(why) => panic!("{label}: {why}"),
                    }
                }
            }
        }
    }
}
