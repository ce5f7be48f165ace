//! Compiler processes that misbehave (issue 21, defects 7 and 12): one that hangs is stopped at
//! its timeout with its process group and its scratch directory removed; one that fails says how
//! it ended; a compiler variable naming a missing file says so. Fake compilers are shell scripts,
//! so no toolchain is needed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wavefuse_codegen::Arch;
use wavefuse_runtime::compile::{ChildError, Hipcc, Nvcc};
use wavefuse_runtime::{CompileError, CompileRequest, Compiler};

/// An executable script in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Answers `--version`; on a compile, records its last argument (the source, in the scratch
/// directory) in `$dir/seen` and its child's pid in `$dir/child`, then sleeps.
fn sleeper(dir: &Path) -> PathBuf {
    let seen = dir.join("seen");
    let child = dir.join("child");
    script(
        dir,
        "fake-compiler",
        &format!(
            r#"if [ "$1" = --version ]; then echo "fake 1.0"; exit 0; fi
for a in "$@"; do last=$a; done
echo "$last" > {seen}
sleep 60 &
echo $! > {child}
wait"#,
            seen = seen.display(),
            child = child.display()
        ),
    )
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn check_stopped(c: &dyn Compiler, dir: &Path, arch: Arch) {
    let req = CompileRequest::new("k", "// a kernel", arch);
    let t0 = Instant::now();
    let err = c.compile(&req).unwrap_err();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(15), "{}: took {took:?}", c.id());
    let text = err.to_string();
    assert!(
        matches!(
            &err,
            CompileError::Stopped {
                source: ChildError::TimedOut { .. },
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.starts_with(c.id().name())
            && text.contains("within 1 s")
            && text.contains("fake-compiler"),
        "the message names the compiler and the timeout: {text}"
    );
    let source = std::fs::read_to_string(dir.join("seen")).unwrap();
    let scratch = Path::new(source.trim()).parent().unwrap();
    assert!(
        !scratch.exists(),
        "scratch directory {} left behind",
        scratch.display()
    );
    let child = std::fs::read_to_string(dir.join("child")).unwrap();
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !alive(child.trim())
    });
    assert!(gone, "the compiler's child {} survived", child.trim());
}

#[test]
fn hanging_nvcc_is_stopped_at_its_timeout_and_its_scratch_removed() {
    let dir = tempfile::tempdir().unwrap();
    let nvcc = Nvcc::at(sleeper(dir.path())).with_timeout(Duration::from_secs(1));
    check_stopped(&nvcc, dir.path(), Arch::Sm90);
}

#[test]
fn hanging_hipcc_is_stopped_at_its_timeout_and_its_scratch_removed() {
    let dir = tempfile::tempdir().unwrap();
    let hipcc = Hipcc::at(sleeper(dir.path())).with_timeout(Duration::from_secs(1));
    check_stopped(&hipcc, dir.path(), Arch::Gfx906);
}

#[test]
fn hanging_version_query_is_stopped_too() {
    let dir = tempfile::tempdir().unwrap();
    let tool = script(dir.path(), "fake-compiler", "sleep 60");
    let err = Nvcc::at(tool)
        .with_timeout(Duration::from_secs(1))
        .version()
        .unwrap_err();
    assert!(matches!(err, CompileError::Stopped { .. }), "{err}");
}

#[test]
fn failing_compiler_reports_its_exit_status_and_empty_output() {
    // GNU `false --version` prints its version and still exits 1: both are reported.
    let err = Nvcc::at("/bin/false").version().unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/bin/false --version") && text.contains("exit status 1"),
        "{text}"
    );
    // A compile that fails: status and what it printed, in the log.
    let dir = tempfile::tempdir().unwrap();
    let tool = script(
        dir.path(),
        "fake-nvcc",
        r#"if [ "$1" = --version ]; then echo "fake 1.0"; exit 0; fi
exit 4"#,
    );
    let err = Nvcc::at(tool)
        .compile(&CompileRequest::new("k", "// k", Arch::Sm90))
        .unwrap_err();
    let CompileError::Failed { log, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(log, "exit status 4 and printed nothing");
}

/// The only test in this binary that reads or writes the compiler variables.
#[test]
fn compiler_variable_naming_a_missing_file_says_so() {
    for (var, make) in [
        (
            "WAVEFUSE_HIPCC",
            (|| Box::new(Hipcc::from_env())) as fn() -> Box<dyn Compiler>,
        ),
        ("WAVEFUSE_NVCC", || Box::new(Nvcc::from_env())),
    ] {
        // SAFETY: no other test of this binary reads these variables, and std serialises
        // environment access with process spawning.
        unsafe { std::env::set_var(var, "/nonexistent") };
        let err = make().version().unwrap_err();
        unsafe { std::env::remove_var(var) };
        let text = err.to_string();
        assert!(matches!(err, CompileError::Missing { .. }), "{text}");
        assert!(
            text.contains(&format!("${var} is /nonexistent, which does not exist"))
                && text.contains("PATH was not searched"),
            "{text}"
        );
    }
}
