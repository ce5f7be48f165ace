//! Dependency direction (DESIGN.md §4): ir ← codegen ← runtime; ir ← dsl core ← the facade (whose
//! `pipeline` feature sits on top of the harness); the macro crate depends
//! on nothing internal and only on syn, quote and proc-macro2; the runtime never sees the DSL.

use std::collections::{BTreeMap, BTreeSet};

use cargo_metadata::{DependencyKind, MetadataCommand};

/// Internal crates each crate may depend on (normal and build dependencies).
fn allowed(krate: &str) -> Option<&'static [&'static str]> {
    Some(match krate {
        "wavefuse-ir" => &[],
        "wavefuse-codegen" => &["wavefuse-ir"],
        "wavefuse-macros" => &[],
        "wavefuse-dsl" => &["wavefuse-ir", "wavefuse-macros"],
        // The facade: the language always; the pipeline (codegen, runtime, harness) behind its
        // `pipeline` feature. Nothing below it may depend on it (the harness would close a cycle).
        "wavefuse" => &[
            "wavefuse-dsl",
            "wavefuse-codegen",
            "wavefuse-runtime",
            "wavefuse-harness",
        ],
        "wavefuse-runtime" => &["wavefuse-ir", "wavefuse-codegen"],
        "wavefuse-kernels" => &["wavefuse-dsl", "wavefuse-ir", "wavefuse-codegen"],
        "wavefuse-harness" => &[
            "wavefuse-dsl",
            "wavefuse-ir",
            "wavefuse-codegen",
            "wavefuse-runtime",
            "wavefuse-kernels",
        ],
        "wavefuse-cli" => &[
            "wavefuse",
            "wavefuse-ir",
            "wavefuse-codegen",
            "wavefuse-runtime",
            "wavefuse-harness",
        ],
        _ => return None,
    })
}

const MACRO_EXTERNALS: [&str; 3] = ["syn", "quote", "proc-macro2"];

/// Every forbidden edge among `(from, to, is_internal)` triples.
fn violations<'a>(edges: impl IntoIterator<Item = (&'a str, &'a str, bool)>) -> Vec<String> {
    let mut bad = Vec::new();
    for (from, to, internal) in edges {
        let ok = match (allowed(from), internal) {
            (Some(list), true) => list.contains(&to),
            (Some(_), false) if from == "wavefuse-macros" => MACRO_EXTERNALS.contains(&to),
            _ => true,
        };
        if !ok {
            bad.push(format!("{from} → {to}"));
        }
    }
    bad
}

#[test]
fn the_rule_table_rejects_backward_edges() {
    let bad = violations([
        ("wavefuse-runtime", "wavefuse", true),
        ("wavefuse-ir", "wavefuse-codegen", true),
        ("wavefuse-macros", "serde", false),
        ("wavefuse-codegen", "wavefuse-ir", true),
        ("wavefuse-harness", "wavefuse", true),
    ]);
    assert_eq!(
        bad,
        [
            "wavefuse-runtime → wavefuse",
            "wavefuse-ir → wavefuse-codegen",
            "wavefuse-macros → serde",
            "wavefuse-harness → wavefuse"
        ]
    );
}

#[test]
fn workspace_dependencies_point_one_way() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let meta = MetadataCommand::new()
        .manifest_path(root)
        .no_deps()
        .exec()
        .expect("cargo metadata");
    let internal: BTreeSet<&str> = meta
        .workspace_packages()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    for name in [
        "wavefuse-ir",
        "wavefuse-codegen",
        "wavefuse-macros",
        "wavefuse-dsl",
        "wavefuse",
        "wavefuse-runtime",
        "wavefuse-kernels",
        "wavefuse-harness",
        "wavefuse-cli",
    ] {
        assert!(internal.contains(name), "workspace lacks {name}");
    }
    let edges: Vec<(&str, &str, bool)> = meta
        .workspace_packages()
        .iter()
        .flat_map(|p| {
            p.dependencies
                .iter()
                .filter(|d| d.kind != DependencyKind::Development)
                .map(|d| {
                    (
                        p.name.as_str(),
                        d.name.as_str(),
                        internal.contains(d.name.as_str()),
                    )
                })
        })
        .collect();
    let bad = violations(edges);
    assert!(bad.is_empty(), "forbidden dependencies: {bad:?}");
}

/// The library crates' sources (the `cli` crate, tests, examples and benches are not libraries).
const LIBRARY_SOURCES: [&str; 7] = [
    "codegen/ir/src",
    "codegen/src",
    "dsl/macros/src",
    "dsl/src",
    "runtime/src",
    "harness/src",
    "kernels-gen/src",
];

/// The documented exceptions: `(file, what it reads or keeps)`. Configuration is parsed at the
/// CLI edge into values (DESIGN.md §4); these are the places that still read the environment or
/// keep process state, each for a reason:
/// - the compiler driver finds its compilers and their settings (`WAVEFUSE_NVCC`, `_HIPCC`,
///   `_LLVM_OBJDUMP`, `_NVRTC_LIB`, `_CUDA_INCLUDE`, `_NVCC_FLAGS`, `PATH`): a library user calling the runtime
///   directly gets the same lookup as the `wavefuse` command;
/// - the compile cache's default directory (`WAVEFUSE_CACHE_DIR`, `HOME`) for `Cache::from_env`
///   (`Cache::at` takes a path);
/// - the dynamically loaded HIP / HIPRTC / NVRTC libraries are loaded once per process
///   (`OnceLock`), and the cache's and the atomic writers' temporary names count up (`AtomicU64`);
/// - compiler subprocesses (`runtime/src/compile/child.rs`): a signal is process-wide, so the
///   interrupt flag and the counts of live children and cooperating loops are too;
/// - the log of lowerings (`codegen/src/lower/mod.rs`, a thread-local): a test instrument compiled
///   only with the `lowering-log` feature, which only the harness's tests turn on
///   (`harness/tests/lower_once.rs`: nothing lowers twice).
const ALLOWED: &[(&str, &str)] = &[
    ("runtime/src/exec/artifacts.rs", "std::env::var_os(v)"),
    (
        "runtime/src/exec/artifacts.rs",
        "std::env::var_os(\"WAVEFUSE_NVRTC_LIB\")",
    ),
    (
        "runtime/src/cache.rs",
        "std::env::var_os(\"WAVEFUSE_CACHE_DIR\")",
    ),
    ("runtime/src/cache.rs", "std::env::var_os(\"HOME\")"),
    ("runtime/src/cache.rs", "static COUNTER: AtomicU64"),
    ("runtime/src/device/hip/mod.rs", "std::env::var_os(\"CI\")"),
    ("runtime/src/device/hip/ffi.rs", "static API: OnceLock"),
    ("runtime/src/compile/process.rs", "std::env::var_os(env)"),
    (
        "runtime/src/compile/process.rs",
        "std::env::var_os(\"PATH\")",
    ),
    (
        "runtime/src/compile/nvrtc.rs",
        "std::env::var(\"WAVEFUSE_CUDA_INCLUDE\")",
    ),
    (
        "runtime/src/compile/nvrtc.rs",
        "std::env::var_os(\"WAVEFUSE_NVRTC_LIB\")",
    ),
    ("runtime/src/compile/nvrtc.rs", "static LOADED: OnceLock"),
    (
        "runtime/src/compile/nvcc.rs",
        "std::env::var(\"WAVEFUSE_NVCC_FLAGS\")",
    ),
    ("runtime/src/compile/hiprtc.rs", "static API: OnceLock"),
    (
        "runtime/src/compile/child.rs",
        "static INTERRUPTED: AtomicBool",
    ),
    ("runtime/src/compile/child.rs", "static LIVE: AtomicUsize"),
    (
        "runtime/src/compile/child.rs",
        "static COOPERATING: AtomicUsize",
    ),
    ("harness/src/outputs.rs", "static N: AtomicU64"),
    ("codegen/src/lower/mod.rs", "static LOWERED: RefCell"),
];

/// Every `std::env::var`/`var_os` call and every `static` holding mutable state (a lock, an
/// atomic, a once-cell, `static mut`) in `text`, as the matched text.
fn environment_and_statics(text: &str) -> Vec<String> {
    const STATEFUL: [&str; 6] = ["Mutex", "RwLock", "Atomic", "OnceLock", "OnceCell", "Cell<"];
    let mut found = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("std::env::var") {
            let call = &rest[i..];
            let end = call_end(call);
            found.push(call[..end].to_owned());
            rest = &call[end..];
        }
        let decl = line
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ");
        if let Some(d) = decl.strip_prefix("static ") {
            let stateful = d.starts_with("mut ") || STATEFUL.iter().any(|s| d.contains(s));
            if stateful {
                let upto = d.find('<').or_else(|| d.find('=')).unwrap_or(d.len());
                found.push(format!("static {}", d[..upto].trim()));
            }
        }
    }
    found
}

/// The length of `call` up to the parenthesis that closes its first one.
fn call_end(call: &str) -> usize {
    let mut depth = 0;
    for (i, c) in call.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 1 => return i + 1,
            ')' => depth -= 1,
            _ => {}
        }
    }
    call.len()
}

/// Every Rust file of [`LIBRARY_SOURCES`]: its path from the repository root and its text.
fn library_files() -> Vec<(String, String)> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut out = Vec::new();
    for dir in LIBRARY_SOURCES {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for f in files {
            let rel = f
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&f).expect("readable source")));
        }
    }
    out
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("a source directory")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_scanner_finds_environment_reads_and_mutable_statics() {
    let text = "let a = std::env::var(\"X\").ok(); f(std::env::var_os(t.env()));\n\
                // std::env::var(\"Y\")\n\
                static S: RwLock<Option<u32>> = RwLock::new(None);\nstatic T: &str = \"t\";\n\
                pub static mut U: u32 = 0;";
    assert_eq!(
        environment_and_statics(text),
        [
            "std::env::var(\"X\")",
            "std::env::var_os(t.env())",
            "static S: RwLock",
            "static mut U: u32"
        ]
    );
}

#[test]
fn library_crates_read_no_environment_and_keep_no_mutable_statics() {
    let mut found = Vec::new();
    for (rel, text) in library_files() {
        found.extend(
            environment_and_statics(&text)
                .into_iter()
                .map(|w| (rel.clone(), w)),
        );
    }
    let undocumented: Vec<_> = found
        .iter()
        .filter(|(f, w)| !ALLOWED.iter().any(|(af, aw)| af == f && w.starts_with(aw)))
        .collect();
    assert!(
        undocumented.is_empty(),
        "environment reads or mutable statics in library code outside the documented list \
         (parse configuration at the CLI edge and pass it as a value): {undocumented:?}"
    );
    let stale: Vec<_> = ALLOWED
        .iter()
        .filter(|(af, aw)| !found.iter().any(|(f, w)| af == f && w.starts_with(aw)))
        .collect();
    assert!(
        stale.is_empty(),
        "documented exceptions that no longer exist: {stale:?}"
    );
}

/// Library files that start processes outside the runtime's compiler driver
/// (`runtime/src/compile/`), each for a reason: `llvm-diff`'s report header asks git for the
/// commit.
const PROCESS_ALLOWED: &[&str] = &["harness/src/llvm_diff.rs"];

/// One compiler driver, in the runtime (issue 16): every compiler, `--version` probe and
/// disassembler run of the library crates goes through `runtime/src/compile/` (its bounds,
/// process groups and interrupt handling), so no other library file builds a `Command`.
#[test]
fn only_the_runtimes_compiler_driver_starts_processes() {
    let mut starts = Vec::new();
    for (rel, text) in library_files() {
        let mut code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
        if code.any(|l| l.contains("Command::new(")) {
            starts.push(rel);
        }
    }
    assert!(
        starts.iter().any(|f| f.starts_with("runtime/src/compile/")),
        "the scan found no process start in the driver itself: {starts:?}"
    );
    let elsewhere: Vec<_> = starts
        .iter()
        .filter(|f| {
            !f.starts_with("runtime/src/compile/") && !PROCESS_ALLOWED.contains(&f.as_str())
        })
        .collect();
    assert!(
        elsewhere.is_empty(),
        "library code starting processes outside runtime/src/compile/: {elsewhere:?}"
    );
}

/// The command front ends are the cli crate's (DESIGN.md §4: `cli` parses arguments, calls the
/// harness, prints): no library crate defines a command's arguments (`clap::Args`, `Parser`,
/// `Subcommand`; a value enum with a command-line spelling is data and may derive `ValueEnum`)
/// or decides an exit status.
#[test]
fn command_front_ends_live_in_the_cli_crate() {
    let front_end = |l: &str| {
        l.contains("ExitCode")
            || ["clap::Args", "clap::Parser", "clap::Subcommand"]
                .iter()
                .any(|d| l.contains(d))
            || (l.contains("derive(")
                && ["Args", "Parser", "Subcommand"]
                    .iter()
                    .any(|d| l.split(|c: char| !c.is_alphanumeric()).any(|w| w == *d)))
    };
    assert!(front_end("pub fn run(a: &X) -> ExitCode {"));
    assert!(front_end("#[derive(Clone, Debug, clap::Args)]"));
    assert!(front_end("#[derive(Parser)]"));
    assert!(!front_end("#[derive(Copy, Clone, clap::ValueEnum)]"));
    let found: Vec<_> = library_files()
        .into_iter()
        .flat_map(|(rel, text)| {
            text.lines()
                .filter(|l| !l.trim_start().starts_with("//") && front_end(l))
                .map(|l| format!("{rel}: {}", l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "command front ends outside cli/src (move them to cli/src/cmd/): {found:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The harness's modules import one way
// ---------------------------------------------------------------------------------------------

/// The harness's modules (`ab::cpu` for `harness/src/ab/cpu.rs`) and the modules each one's code
/// names through `crate::…` and `super::…` paths, outside comments and its `#[cfg(test)] mod
/// tests`; a module's own submodules and ancestors are not counted.
fn harness_imports() -> BTreeMap<String, BTreeSet<String>> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../harness/src"));
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let module = |f: &std::path::Path| {
        let rel = f.strip_prefix(root).unwrap().with_extension("");
        let rel = rel.to_string_lossy().replace('\\', "/");
        rel.strip_suffix("/mod").unwrap_or(&rel).replace('/', "::")
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module(f)).collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let m = module(f);
        if m == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("readable source");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let parent = m.rsplit_once("::").map(|(p, _)| p.to_owned());
        let mut to = BTreeSet::new();
        for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for path in paths(line) {
                let (base, rest) = match path.split_first() {
                    Some((&"crate", rest)) => (None, rest),
                    Some((&"super", rest)) => (parent.clone(), rest),
                    Some(_) => (Some(m.clone()), &path[..]),
                    None => continue,
                };
                let named = (0..=rest.len()).rev().find_map(|n| {
                    let mut p: Vec<&str> = base.iter().map(String::as_str).collect();
                    p.extend(&rest[..n]);
                    let p = p.join("::");
                    modules.contains(&p).then_some(p)
                });
                // A module and its own submodules are one unit: a parent dispatches to its
                // children, the children share the parent's items (`super::`).
                let nested = |a: &str, b: &str| b.starts_with(&format!("{a}::"));
                if let Some(t) = named.filter(|t| *t != m && !nested(t, &m) && !nested(&m, t)) {
                    to.insert(t);
                }
            }
        }
        graph.insert(m, to);
    }
    graph
}

/// The `a::b::c` paths in `line` (maximal runs of identifiers joined by `::`), as segments.
fn paths(line: &str) -> Vec<Vec<&str>> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|p| p.contains("::"))
        .map(|p| p.split("::").filter(|s| !s.is_empty()).collect())
        .collect()
}

/// The modules of `graph` that reach each other, in groups of more than one.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for t in graph.get(&m).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (m, r) in &reached {
        if !r.contains(*m) || out.iter().any(|c| c.contains(*m)) {
            continue;
        }
        out.push(
            r.iter()
                .filter(|t| reached.get(t).is_some_and(|back| back.contains(*m)))
                .cloned()
                .collect(),
        );
    }
    out
}

#[test]
fn the_harness_modules_import_one_way() {
    let graph = harness_imports();
    assert!(graph["pipeline"].contains("case") && graph["ab::cpu"].contains("suite"));
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "harness modules that import each other: {found:?}"
    );
}

#[test]
fn the_circle_finder_finds_circles() {
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(f, t)| (f.to_string(), BTreeSet::from([t.to_string()])))
        .collect();
    let want: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    assert_eq!(circles(&g), [want]);
    assert_eq!(
        paths("use crate::a::{b, c}; super::d::e(x)"),
        [vec!["crate", "a"], vec!["super", "d", "e"]]
    );
}

/// Codegen's modules that must not reach into the C++ writer: what the back ends share (the ABI
/// description, the namer, the vector access rule) lives in `codegen/src/back/`, so the LLVM back
/// end and the C library depend on it, not on `cpp`'s internals.
const NOT_IMPORTING_CPP: [&str; 3] = ["codegen/src/llvm", "codegen/src/back", "codegen/src/clib"];

/// The `cpp::…` paths `text`'s code names (comments aside), one line each.
fn cpp_paths(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| paths(l).iter().any(|p| p.contains(&"cpp")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_cpp_path_scanner_finds_imports() {
    assert_eq!(
        cpp_paths(
            "use crate::cpp::{self, vector_words};\n// crate::cpp::symbol\nlet x = crate::cpp::symbol(n);\nuse crate::back::symbol;"
        ),
        [
            "use crate::cpp::{self, vector_words};",
            "let x = crate::cpp::symbol(n);"
        ]
    );
}

#[test]
fn the_llvm_back_end_and_the_shared_back_modules_do_not_import_cpp() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut bad = Vec::new();
    for dir in NOT_IMPORTING_CPP {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        assert!(!files.is_empty(), "{dir} has no sources");
        for f in files {
            let text = std::fs::read_to_string(&f).expect("readable source");
            for line in cpp_paths(&text) {
                bad.push(format!("{}: {line}", f.display()));
            }
        }
    }
    assert!(bad.is_empty(), "imports of the C++ writer: {bad:#?}");
}
