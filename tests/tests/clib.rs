//! The C library of a generated kernel (`wavefuse_codegen::clib`, `wavefuse emit --lib`,
//! docs/clib.md): snapshots `{kernel}@{arch}_tp{N}.clib` of the header, launcher and build
//! script; the library built by its own build script with hipcc (gfx906) and nvcc (sm_90), with
//! warnings as errors, from the files `write_library` writes for a kernel without synchronisation
//! at TP 1 and a synchronising one at TP 2, both targets in one folder; every function the header
//! declares exported; and the library loaded through ctypes (without a GPU, creating a state
//! returns the runtime's error code). Without hipcc / nvcc / nm / python3: "skipped: … not
//! found", except under CI, where a missing tool fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::Abi;
use wavefuse_codegen::clib::{CLibrary, library};
use wavefuse_harness::generate::{Generated, generate, write_library};
use wavefuse_kernels::KernelId;
use wavefuse_runtime::compile::{Compiler, Hipcc, Nvcc};

/// The kernels of the tests: no synchronisation at TP 1, a grid barrier and flags at TP 2.
const CASES: [(KernelId, u32); 2] = [
    (KernelId::GemvInt4, 1),
    (KernelId::AllreduceResidualRmsnorm, 2),
];

fn generated(id: KernelId, arch: Arch, tp: u32) -> Generated {
    generate(id, arch, tp, 1).unwrap_or_else(|e| panic!("{e}"))
}

/// The library's files as one text, each after a `==> name <==` line.
fn library_text(g: &Generated) -> String {
    let lib = library(&g.abi).unwrap_or_else(|e| panic!("{e}"));
    lib.files
        .iter()
        .map(|f| format!("==> {} <==\n{}", f.name, f.text))
        .collect::<Vec<_>>()
        .join("\n")
}

fn snapshots(arch: Arch) {
    for (id, tp) in CASES {
        let g = generated(id, arch, tp);
        insta::assert_snapshot!(
            format!("{}@{}_tp{tp}.clib", id.name(), arch.name()),
            library_text(&g)
        );
    }
}

#[test]
fn clib_snapshots_gfx906() {
    snapshots(Arch::Gfx906);
}

#[test]
fn clib_snapshots_sm90() {
    snapshots(Arch::Sm90);
}

/// The functions the header declares (`int wf_…(` and `const char* wf_…(` lines).
fn declared(header: &str) -> Vec<String> {
    header
        .lines()
        .filter_map(|l| {
            let rest = l
                .strip_prefix("int ")
                .or_else(|| l.strip_prefix("const char* "))?;
            rest.starts_with("wf_")
                .then(|| rest.split('(').next().unwrap_or("").to_owned())
        })
        .collect()
}

#[test]
fn the_header_declares_the_documented_functions() {
    let g = generated(KernelId::AllreduceResidualRmsnorm, Arch::Sm90, 2);
    let lib = library(&g.abi).expect("a library");
    let header = lib
        .file("allreduce_residual_rmsnorm_sm90.h")
        .expect("the header");
    let p = "wf_allreduce_residual_rmsnorm";
    let want: Vec<String> = [
        "state_create",
        "set_rank",
        "peer_buffers",
        "set_peers",
        "launch",
        "error",
        "wait_site",
        "reset",
        "state_destroy",
    ]
    .iter()
    .map(|f| format!("{p}_{f}"))
    .collect();
    assert_eq!(declared(&header.text), want);
    // One field per data parameter, named as in the ABI; nothing the state owns.
    for name in ["partial", "residual", "norm_w", "residual_out", "normed"] {
        assert!(
            header.text.contains(&format!("void* {name}; // f16[5120]")),
            "{name}"
        );
    }
    for owned in ["epoch_state", "ar_flags", "error_word"] {
        assert!(!header.text.contains(&format!("void* {owned};")), "{owned}");
    }
    // A kernel without a rank or peers has no functions for them.
    let g = generated(KernelId::GemvInt4, Arch::Gfx906, 1);
    let lib = library(&g.abi).expect("a library");
    let names = declared(&lib.files[0].text);
    assert!(
        !names
            .iter()
            .any(|n| n.contains("rank") || n.contains("peer"))
    );
}

/// The kernel's parameter names in the generated source, in order.
fn source_params(source: &str, symbol: &str) -> Vec<String> {
    let start = source
        .find(&format!("\n{symbol}("))
        .unwrap_or_else(|| panic!("no `{symbol}(` in the source"));
    let end = start + source[start..].find("\n{").expect("a body");
    source[start + 1..end]
        .lines()
        .skip(1)
        .map(|l| {
            let decl = l.split("//").next().unwrap().trim();
            let decl = decl.trim_end_matches(',').trim_end_matches(')');
            decl.rsplit([' ', '*']).next().unwrap().to_owned()
        })
        .collect()
}

/// Every kernel of the set at every TP size and on both targets has a library, and its launcher
/// passes one argument per kernel parameter, in the kernel's order (the arguments go through a
/// `void*` array, which no compiler checks).
#[test]
fn every_launcher_passes_the_kernel_parameters_in_order() {
    for id in KernelId::ALL {
        for tp in wavefuse_kernels::shapes::TP_SIZES {
            for arch in Arch::ALL {
                let g = generated(id, arch, tp);
                let lib = library(&g.abi).unwrap_or_else(|e| panic!("{e}"));
                let launcher = &lib.files[1].text;
                // `<type> v<i> = <value>; // <name>`, one per parameter.
                let passed: Vec<String> = launcher
                    .lines()
                    .filter_map(|l| {
                        let (decl, name) = l.trim().split_once("; // ")?;
                        let var = decl.split_whitespace().nth(1)?;
                        let index = var.strip_prefix('v')?;
                        index.parse::<usize>().ok().map(|_| name.to_owned())
                    })
                    .collect();
                let declared = source_params(&g.source.text, &g.abi.symbol);
                assert_eq!(passed, declared, "{}@{} tp{tp}", id.name(), arch.name());
                let count = format!("void* args[{}] = {{", declared.len());
                assert!(
                    launcher.contains(&count),
                    "{}@{} tp{tp}",
                    id.name(),
                    arch.name()
                );
            }
        }
    }
}

/// Both targets of a kernel written into one folder: no file of one overwrites the other's.
#[test]
fn both_targets_share_a_folder() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (id, tp) = CASES[1];
    let mut written = Vec::new();
    for arch in Arch::ALL {
        let g = generated(id, arch, tp);
        written.extend(write_library(&g, dir.path()).unwrap_or_else(|e| panic!("{e}")));
    }
    let mut names: Vec<_> = written.iter().map(|p| p.file_name().unwrap()).collect();
    let all = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all, "{written:?}");
    for arch in Arch::ALL {
        let g = generated(id, arch, tp);
        let on_disk = std::fs::read_to_string(dir.path().join(g.source.file_name())).unwrap();
        assert_eq!(on_disk, g.source.text, "{}", arch.name());
        let abi = std::fs::read_to_string(dir.path().join(format!(
            "{}_{}.abi.toml",
            g.abi.symbol,
            arch.name()
        )))
        .unwrap();
        assert_eq!(Abi::from_toml(&abi).unwrap(), g.abi);
    }
}

/// A compiler for the build scripts: the variable they read, its path, the flags to add.
struct Tool {
    var: &'static str,
    path: PathBuf,
    flags: String,
}

/// Runs `lib`'s build script in `dir` with `tool`; the library it wrote.
fn run_script(dir: &Path, lib: &CLibrary, tool: &Tool) -> PathBuf {
    let script = dir.join(format!("build_{}.sh", lib.stem));
    let out = Command::new("sh")
        .arg(&script)
        .env(tool.var, &tool.path)
        .env(format!("{}_FLAGS", tool.var), &tool.flags)
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{} failed:\n{}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let so = dir.join(lib.library_name());
    assert!(so.is_file(), "{} was not written", so.display());
    so
}

/// Writes the cases' libraries for `arch` into one folder (`write_library`, as `emit --lib`) and
/// builds each; checks its exports and loads it through ctypes.
fn build_cases(arch: Arch, tool: &Tool) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (id, tp) in CASES {
        let g = generated(id, arch, tp);
        write_library(&g, dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let lib = library(&g.abi).expect("a library");
        let so = run_script(dir.path(), &lib, tool);
        exports(&so, &declared(&lib.files[0].text));
        ctypes_smoke(&so, &format!("wf_{}", g.abi.symbol));
    }
    example(dir.path(), arch);
}

/// docs/clib.md's example, `examples/clib/ctypes_allreduce.py`, on the TP 2 library: with a GPU
/// of the target it runs and checks the kernel (exit 0); without one it gets as far as the
/// runtime (exit 2, "no usable GPU" or no runtime library) — never a Python error.
fn example(dir: &Path, arch: Arch) {
    if !wavefuse_test_support::found("python3", Command::new("python3").arg("--version").output()) {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/clib/ctypes_allreduce.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir)
        .args(["--target", arch.name(), "--replays", "2"])
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => assert!(text.contains(", ok"), "{text}"),
        Some(2) => {
            assert!(
                text.contains("no usable GPU") || text.contains("runtime library"),
                "{text}"
            );
            eprintln!("skipped: no GPU for the ctypes example ({})", text.trim());
        }
        _ => panic!("the ctypes example failed:\n{text}"),
    }
}

/// A stub kernel with the parameters of codegen/tests/clib/hand.abi.toml.
fn hand_kernel(arch: Arch) -> String {
    let (include, half) = match arch {
        Arch::Gfx906 => ("#include <hip/hip_runtime.h>\n", "_Float16"),
        Arch::Sm90 => ("", "unsigned short"),
    };
    format!(
        "{include}extern \"C\" __global__ void hand(const float* class_, float scale, unsigned epoch,\n\
         \x20   {half}* const* payload, unsigned* err) {{\n\
         \x20   if (threadIdx.x == 0 && epoch == 0u) err[0] = (unsigned)(class_[0] * scale) + (payload[0] == 0);\n\
         }}\n"
    )
}

/// The launcher of a hand-written ABI (host-passed epoch, a caller's scalar, a TP 1 peer table,
/// an error word in device memory) compiles against a kernel with its parameters.
fn build_hand(arch: Arch, tool: &Tool) {
    let mut abi =
        Abi::from_toml(include_str!("../../codegen/tests/clib/hand.abi.toml")).expect("parses");
    abi.arch = arch.name().into();
    abi.language = wavefuse_codegen::cpp::language(arch).name().into();
    abi.source = format!("hand.{}", wavefuse_codegen::cpp::language(arch).extension());
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join(&abi.source), hand_kernel(arch)).unwrap();
    let lib = library(&abi).expect("a library");
    for f in &lib.files {
        std::fs::write(dir.path().join(&f.name), &f.text).unwrap();
    }
    let so = run_script(dir.path(), &lib, tool);
    exports(&so, &declared(&lib.files[0].text));
}

/// Every declared function is a dynamic symbol the library defines.
fn exports(so: &Path, functions: &[String]) {
    if !wavefuse_test_support::found("nm", Command::new("nm").arg("--version").output()) {
        return;
    }
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(so)
        .output()
        .expect("nm runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let defined: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" T "))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    for f in functions {
        assert!(defined.contains(&f.as_str()), "{} lacks {f}", so.display());
    }
}

/// Loads the library through ctypes (as docs/clib.md does) and creates a state on device 0:
/// 0 with a GPU of the target, the runtime's (positive) error code without one; a launch with
/// null arguments is WF_ERR_ARGUMENT.
fn ctypes_smoke(so: &Path, prefix: &str) {
    let python = Command::new("python3").arg("--version").output();
    if !wavefuse_test_support::found("python3", python) {
        return;
    }
    let script = format!(
        "import ctypes, sys\n\
         lib = ctypes.CDLL(sys.argv[1])\n\
         s = ctypes.c_void_p()\n\
         rc = lib.{prefix}_state_create(0, ctypes.byref(s))\n\
         assert lib.{prefix}_launch(None, None, None) == -1\n\
         if rc == 0:\n    assert lib.{prefix}_state_destroy(s) == 0\n\
         print(rc)\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .arg(so)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rc: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        rc >= 0,
        "state_create gave {rc}: a wavefuse error without a GPU call"
    );
    if rc > 0 {
        eprintln!(
            "{}: no usable GPU here (state_create gave the runtime's error {rc}); loaded and called",
            so.display()
        );
    }
}

#[test]
fn clib_builds_with_hipcc_gfx906() {
    let hipcc = Hipcc::from_env();
    if !wavefuse_test_support::found("hipcc", hipcc.version()) {
        return;
    }
    let tool = Tool {
        var: "HIPCC",
        path: hipcc.path().expect("found").to_owned(),
        flags: "-Werror -Wall".into(),
    };
    build_cases(Arch::Gfx906, &tool);
    build_hand(Arch::Gfx906, &tool);
}

#[test]
fn clib_builds_with_nvcc_sm90() {
    let nvcc = Nvcc::from_env();
    if !wavefuse_test_support::found("nvcc", nvcc.version()) {
        return;
    }
    let path = nvcc.path().expect("found").to_owned();
    let mut flags = std::env::var("WAVEFUSE_NVCC_FLAGS").unwrap_or_default();
    flags.push_str(" -Werror all-warnings");
    // nvcc from the pip wheels (scripts/install-deps.sh) keeps cudart beside bin/, in lib/.
    if let Some(lib) = path.parent().and_then(Path::parent).map(|d| d.join("lib")) {
        if lib.join("libcudart_static.a").is_file() {
            flags.push_str(&format!(" -L{}", lib.display()));
        }
    }
    let tool = Tool {
        var: "NVCC",
        path,
        flags,
    };
    build_cases(Arch::Sm90, &tool);
    build_hand(Arch::Sm90, &tool);
}
