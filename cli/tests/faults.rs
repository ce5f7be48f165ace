//! The `wavefuse` binary under bad input and faults (issue 21): each test names its defect and
//! failed before the fix.

use std::path::Path;
use std::process::{Command, Output};

fn wavefuse(args: &[&str], env: &[(&str, &str)], cache: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wavefuse"));
    cmd.args(args).env("WAVEFUSE_CACHE_DIR", cache);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const QUICK_TUNE: [&str; 6] = ["tune", "gemv_int4", "--quick", "--budget", "2", "--no-gpu"];

/// Defect 9: with no compiler every candidate fails; that is a non-zero exit with the reason.
#[test]
fn tune_where_every_candidate_fails_exits_non_zero_with_the_first_reason() {
    let dir = tempfile::tempdir().unwrap();
    let o = wavefuse(
        &QUICK_TUNE,
        &[("WAVEFUSE_NVRTC_LIB", "/nonexistent/libnvrtc.so")],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(
        !o.status.success(),
        "exit 0 with nothing compiled:\n{out}\n{err}"
    );
    assert!(
        err.contains("every candidate failed") && err.contains("nvrtc"),
        "{err}"
    );
}

/// Defect 9: a compile cache that cannot be written is a warning; the candidates still compile.
#[test]
fn tune_with_an_unwritable_cache_warns_and_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("cache-is-a-file");
    std::fs::write(&blocked, "x").unwrap();
    let o = wavefuse(&QUICK_TUNE, &[], &blocked);
    let (out, err) = text(&o);
    if err.contains("nvrtc not found") {
        println!("skipped: no NVRTC ({err})");
        return;
    }
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("warning: compile cache at") && err.contains("could not be written"),
        "{err}"
    );
    assert!(!err.contains("every candidate failed"), "{err}");
}

/// A fake nvcc in `dir`: answers `--version`; a compile records its source path (inside the
/// scratch directory) in `dir/seen` and its child's pid in `dir/child`, then hangs.
fn hanging_nvcc(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("nvcc");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\n\
         for a in \"$@\"; do last=$a; done\necho \"$last\" >> {seen}\n\
         sleep 60 &\necho $! >> {child}\nwait\n",
        seen = dir.join("seen").display(),
        child = dir.join("child").display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The scratch directories the fake compiler saw are gone, and so are its children.
fn assert_cleaned(dir: &Path) {
    let seen = std::fs::read_to_string(dir.join("seen")).unwrap_or_default();
    assert!(!seen.is_empty(), "the fake compiler never ran");
    for src in seen.lines() {
        // The runtime's driver writes the source at the top of its own scratch directory.
        let scratch = Path::new(src).parent().unwrap();
        let name = scratch.file_name().unwrap_or_default().to_string_lossy();
        assert!(
            name.starts_with("wavefuse-"),
            "{src} is not in a scratch directory of the driver"
        );
        assert!(
            !scratch.exists(),
            "scratch {} left behind",
            scratch.display()
        );
    }
    let children = std::fs::read_to_string(dir.join("child")).unwrap_or_default();
    for pid in children.lines() {
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
        };
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            !alive()
        });
        assert!(gone, "compiler child {pid} survived");
    }
}

/// Defect 7: `check` with a compiler that hangs stops it at `--compile-timeout` and says so.
#[test]
fn check_with_a_hanging_compiler_stops_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let nvcc = hanging_nvcc(dir.path());
    let t0 = std::time::Instant::now();
    let o = wavefuse(
        &[
            "check",
            "--target",
            "sm90",
            "--tp",
            "1",
            "--jobs",
            "2",
            "--compile-timeout",
            "1",
        ],
        &[("WAVEFUSE_NVCC", nvcc.to_str().unwrap())],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(t0.elapsed().as_secs() < 60, "took {:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("did not finish within 1 s"), "{out}");
    assert_cleaned(dir.path());
}

/// Defect 10: SIGINT stops the compilers (their process groups), removes their scratch and
/// exits 130.
#[test]
fn sigint_stops_the_compilers_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let nvcc = hanging_nvcc(dir.path());
    let child = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(["check", "--target", "sm90", "--tp", "1", "--jobs", "2"])
        .env("WAVEFUSE_NVCC", &nvcc)
        .env("WAVEFUSE_CACHE_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        dir.path().join("child").exists()
    });
    assert!(started, "the fake compiler never started");
    let t0 = std::time::Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert!(t0.elapsed().as_secs() < 15, "took {:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(err.contains("interrupted (SIGINT)"), "{err}");
    assert_cleaned(dir.path());
}

/// Defect 12: a compiler variable naming a missing file says so, not that PATH was searched.
#[test]
fn check_with_a_compiler_variable_naming_a_missing_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let o = wavefuse(
        &["check", "--target", "gfx906", "--tp", "1"],
        &[("WAVEFUSE_HIPCC", "/nonexistent")],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        err.contains("$WAVEFUSE_HIPCC is /nonexistent, which does not exist")
            && err.contains("PATH was not searched"),
        "{err}"
    );
}

/// Defect 11: `tune --json` into a missing directory fails before any work.
#[test]
fn tune_json_into_a_missing_directory_fails_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("missing").join("t.json");
    let mut args = QUICK_TUNE.to_vec();
    args.extend(["--json", json.to_str().unwrap()]);
    let o = wavefuse(&args, &[], dir.path());
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("--json") && err.contains("does not exist"),
        "{err}"
    );
    assert!(
        !out.contains("candidates"),
        "refused only after the search: {out}"
    );
}

/// Defect 13: a schedule override the chosen path does not read is a warning; one it reads is
/// not.
#[test]
fn schedule_overrides_without_effect_warn() {
    let dir = tempfile::tempdir().unwrap();
    for (kernel, target, spec, warned) in [
        (
            "gemv_f16",
            "sm90",
            "x_in_lds=true",
            Some("`x_in_lds` has no effect on gemv_f16"),
        ),
        (
            "allreduce_residual",
            "sm90",
            "accumulators=2",
            Some("ignored for allreduce_residual"),
        ),
        ("gemv_int4", "gfx906", "accumulators=2", None),
    ] {
        let o = wavefuse(
            &["emit", kernel, "--target", target],
            &[("WAVEFUSE_SCHEDULE", spec)],
            dir.path(),
        );
        let (_, err) = text(&o);
        assert!(o.status.success(), "{kernel} {spec}: {err}");
        match warned {
            Some(w) => assert!(
                err.contains("warning:") && err.contains(w),
                "{kernel} {spec}: {err}"
            ),
            None => assert!(!err.contains("warning:"), "{kernel} {spec}: {err}"),
        }
    }
}

/// Defect 13: `sim --schedules 0` (nothing would be checked) and a missing `--tuned-store`
/// file are errors, not a pass and an empty store.
#[test]
fn sim_with_no_schedules_and_a_missing_tuned_store_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = wavefuse(&["sim", "gemv_f16", "--schedules", "0"], &[], dir.path());
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("--schedules"), "{err}");
    let missing = dir.path().join("no-such-store.toml");
    let o = wavefuse(
        &[
            "emit",
            "gemv_int4",
            "--target",
            "sm90",
            "--schedule",
            "tuned",
            "--tuned-store",
            missing.to_str().unwrap(),
        ],
        &[],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(
        !o.status.success(),
        "a missing store was read as empty:\n{err}"
    );
    assert!(
        err.contains("no-such-store.toml") && err.contains("No such file"),
        "{err}\n{out}"
    );
}

/// Defect 13: `sim gemv_f16 --protocol push` warns instead of printing a protocol the kernel
/// does not have.
#[test]
fn sim_protocol_for_a_kernel_without_an_exchange_warns() {
    let dir = tempfile::tempdir().unwrap();
    let o = wavefuse(
        &["sim", "gemv_f16", "--schedules", "1", "--protocol", "push"],
        &[],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("warning: --protocol Push has no effect"),
        "{err}"
    );
    assert!(!out.contains("Push allreduce"), "{out}");
}

/// Defect 10: SIGINT during `sim` prints the schedules run so far with the verdict
/// "interrupted" and exits 130.
#[test]
fn sigint_during_sim_reports_what_was_finished() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args([
            "sim",
            "allreduce_residual",
            "--tp",
            "2",
            "--schedules",
            "1000000",
        ])
        .env("WAVEFUSE_CACHE_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(out.contains("verdict: interrupted after"), "{out}");
    assert!(out.contains("of 1000000 schedules"), "{out}");
}

/// Defect 12: `--tp -1` is a TP parse error naming the sizes, not clap's advice to write `-- -1`.
#[test]
fn negative_tp_is_a_tp_error_naming_the_sizes() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["emit", "gemv_f16", "--tp", "-1"][..],
        &["run", "gemv_f16", "--tp", "-1"][..],
        &["check", "--target", "sm90", "--tp", "-1"][..],
        &["sim", "gemv_f16", "--schedules", "1", "--tp", "-1"][..],
    ] {
        let o = wavefuse(args, &[], dir.path());
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}\n{err}");
        assert!(
            err.contains("use one of 1, 2, 4, 8") && !err.contains("-- -1"),
            "{args:?}: {err}"
        );
    }
}

/// Output into a pipe whose reader is gone (`wavefuse check … | head`) panicked in `println!`
/// ("failed printing to stdout: Broken pipe", exit 101); it ends the process by SIGPIPE, quietly.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .arg("list")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        o.status
    );
}

/// The real hipcc, or None (the test then says it was skipped).
fn real_hipcc() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("WAVEFUSE_HIPCC")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/hipcc".into());
    p.is_file().then_some(p)
}

/// A hipcc in `dir` that runs the real one for `--version` and the first two compiles, then
/// hangs (recording its child in `dir/child`), so a run can be interrupted mid-search.
fn hipcc_that_hangs_after_two(dir: &Path, real: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let calls = dir.join("calls");
    std::fs::create_dir_all(&calls).unwrap();
    let path = dir.join("hipcc");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *--version*) exec {real} \"$@\";; esac\n\
         n=$(ls {calls} | wc -l)\ntouch {calls}/$$\n\
         if [ \"$n\" -ge 2 ]; then sleep 60 & echo $! >> {child}; wait; fi\nexec {real} \"$@\"\n",
        real = real.display(),
        calls = calls.display(),
        child = dir.join("child").display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Issue 39, item 2: SIGTERM during `tune --arch gfx906` stores no winner (the cache's
/// `tuned.toml` is not written) and leaves the previous `--json`/`--md` as they were; the partial
/// report goes beside them, marked interrupted; exit 130. It used to pick a winner from the
/// candidates compiled, store it and overwrite the reports.
#[test]
fn interrupted_tune_stores_nothing_and_writes_its_report_beside() {
    let Some(real) = real_hipcc() else {
        eprintln!("skipped: no hipcc");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hipcc = hipcc_that_hangs_after_two(dir.path(), &real);
    let (json, md) = (dir.path().join("r.json"), dir.path().join("r.md"));
    std::fs::write(&json, "previous json").unwrap();
    std::fs::write(&md, "previous md").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args([
            "tune",
            "gemv_int4",
            "--arch",
            "gfx906",
            "--quick",
            "--budget",
            "6",
        ])
        .args(["--no-gpu", "--threads", "1", "--json"])
        .arg(&json)
        .arg("--md")
        .arg(&md)
        .env("WAVEFUSE_HIPCC", &hipcc)
        .env("WAVEFUSE_CACHE_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = (0..3000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        dir.path().join("child").exists()
    });
    assert!(started, "the third compile never started");
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(
        !dir.path().join("tuned.toml").exists(),
        "a winner was stored:\n{out}\n{err}"
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "previous json");
    assert_eq!(std::fs::read_to_string(&md).unwrap(), "previous md");
    let beside = std::fs::read_to_string(dir.path().join("r.interrupted.json")).unwrap();
    assert!(beside.contains("\"interrupted\": true"), "{beside}");
    let beside = std::fs::read_to_string(dir.path().join("r.interrupted.md")).unwrap();
    assert!(beside.contains("INTERRUPTED"), "{beside}");
    assert!(out.contains("INTERRUPTED"), "{out}");
}

/// Issue 39, item 6: four `emit --out D` of different TPs at once, several rounds: the `.cu` and
/// the `.abi.toml` left in D are always of the same TP (they mixed in about half the rounds).
#[test]
fn concurrent_emits_into_one_directory_never_mix_a_pair() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for round in 0..12 {
        let children: Vec<_> = ["1", "2", "4", "8"]
            .iter()
            .map(|tp| {
                Command::new(env!("CARGO_BIN_EXE_wavefuse"))
                    .args(["emit", "allreduce_residual", "--target", "sm90", "--tp", tp])
                    .arg("--out")
                    .arg(&out)
                    .env("WAVEFUSE_CACHE_DIR", dir.path())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let cu = std::fs::read_to_string(out.join("allreduce_residual.cu")).unwrap();
        let abi = std::fs::read_to_string(out.join("allreduce_residual.abi.toml")).unwrap();
        let tp_of_cu = cu.lines().next().unwrap().rsplit("TP = ").next().unwrap();
        let tp_of_abi = abi
            .lines()
            .find_map(|l| l.strip_prefix("tp = "))
            .unwrap_or("?");
        assert_eq!(
            tp_of_cu.trim_end_matches('.'),
            tp_of_abi,
            "round {round}: a .cu of one TP beside the .abi.toml of another"
        );
    }
}

/// Issue 39, item 9: a pair whose second rename fails (the `.abi.toml` is a directory) says the
/// source was already replaced, not "(neither changed)".
#[test]
fn a_half_written_pair_says_which_file_changed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let abi = out.join("allreduce_residual.abi.toml");
    std::fs::create_dir_all(abi.join("occupied")).unwrap();
    let o = wavefuse(
        &[
            "emit",
            "allreduce_residual",
            "--target",
            "sm90",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
        dir.path(),
    );
    let (stdout, err) = text(&o);
    assert!(!o.status.success(), "{stdout}{err}");
    assert!(!err.contains("neither changed"), "{err}");
    assert!(err.contains("already replaced: "), "{err}");
    assert!(err.contains("allreduce_residual.cu"), "{err}");
}

/// `check` with the hanging nvcc, started through `sh -c` with `prefix` (say `trap "" INT;`)
/// before the `exec`; returns once the fake compiler runs.
fn check_with_hanging_nvcc(dir: &Path, prefix: &str) -> std::process::Child {
    let nvcc = hanging_nvcc(dir);
    let script = format!("{prefix} exec \"$0\" check --target sm90 --tp 1 --jobs 2",);
    let child = Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_wavefuse")])
        .env("WAVEFUSE_NVCC", &nvcc)
        .env("WAVEFUSE_CACHE_DIR", dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        dir.join("child").exists()
    });
    assert!(started, "the fake compiler never started");
    child
}

fn signal(child: &std::process::Child, sig: &str) {
    let kill = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

/// Issue 39, item 7: SIGHUP (a closed terminal) is handled like SIGTERM: compilers stopped,
/// scratch removed, exit 130. It used to kill the process outright and leave both behind.
#[test]
fn sighup_stops_the_compilers_like_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let child = check_with_hanging_nvcc(dir.path(), "");
    signal(&child, "-HUP");
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(err.contains("interrupted (SIGHUP)"), "{err}");
    assert_cleaned(dir.path());
}

/// Issue 39, item 7: a SIGINT inherited as ignored (`trap "" INT`, a background job of a
/// non-interactive shell) is not acted on, as docs/errors.md says; SIGTERM still is.
#[test]
fn sigint_inherited_as_ignored_is_not_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = check_with_hanging_nvcc(dir.path(), "trap '' INT;");
    signal(&child, "-INT");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "an ignored SIGINT stopped the run"
    );
    signal(&child, "-TERM");
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(err.contains("interrupted (SIGTERM)"), "{err}");
    assert_cleaned(dir.path());
}

/// A gfx906 `check --kernel-file` of an INT4 kernel with `args` and the environment `env`;
/// None (skipped) without hipcc.
fn check_int4_gfx906(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Option<Output> {
    real_hipcc()?;
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/gemv_int4_q8.wfir");
    let mut all = vec![
        "check",
        "--kernel-file",
        file.to_str().unwrap(),
        "--target",
        "gfx906",
    ];
    all.extend(args);
    Some(wavefuse(&all, env, dir))
}

/// Issue 39, item 7: a missing llvm-objdump is said where the modelled line would be (it used to
/// be dropped silently).
#[test]
fn a_missing_llvm_objdump_is_said_not_silently_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("WAVEFUSE_LLVM_OBJDUMP", "/nonexistent/llvm-objdump")];
    let Some(o) = check_int4_gfx906(dir.path(), &[], &env) else {
        eprintln!("skipped: no hipcc");
        return;
    };
    let (out, err) = text(&o);
    assert!(
        out.contains("modelled (MI50): none: llvm-objdump not found"),
        "{out}\n{err}"
    );
}

/// Issue 39, item 7: `ab` without a GPU on gfx906 says why its modelled column is empty when
/// llvm-objdump is missing (it used to leave the column empty without a word).
#[test]
fn ab_says_why_a_model_is_missing() {
    if real_hipcc().is_none() {
        eprintln!("skipped: no hipcc");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let env = [("WAVEFUSE_LLVM_OBJDUMP", "/nonexistent/llvm-objdump")];
    let o = wavefuse(&["ab", "gemv_int4", "--no-gpu"], &env, dir.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("no MI50 model: llvm-objdump not found"),
        "{out}\n{err}"
    );
}

/// Issue 39, item 7: a hanging llvm-objdump is stopped at `--compile-timeout` like a compiler
/// (it used to be waited for 300 s whatever the flag said).
#[test]
fn a_hanging_llvm_objdump_is_stopped_at_the_compile_timeout() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("llvm-objdump");
    std::fs::write(&tool, "#!/bin/sh\nsleep 60\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t0 = std::time::Instant::now();
    let env = [("WAVEFUSE_LLVM_OBJDUMP", tool.to_str().unwrap())];
    // Long enough for hipcc itself on a loaded machine, far below the 60 s the tool sleeps.
    let Some(o) = check_int4_gfx906(dir.path(), &["--compile-timeout", "20"], &env) else {
        eprintln!("skipped: no hipcc");
        return;
    };
    let (out, err) = text(&o);
    assert!(t0.elapsed().as_secs() < 55, "took {:?}", t0.elapsed());
    assert!(out.contains("did not finish within 20 s"), "{out}\n{err}");
}

/// Issue 39, item 9: a negative number for a flag that takes none names the flag instead of
/// clap's tip to write `-- -5` (which makes it a stray positional argument).
#[test]
fn negative_numbers_name_the_flag_not_clap_s_tip() {
    let dir = tempfile::tempdir().unwrap();
    for (args, flag) in [
        (&["emit", "gemv_f16", "--batch", "-5"][..], "--batch -5"),
        (
            &["sim", "gemv_f16", "--schedules", "-1"][..],
            "--schedules -1",
        ),
        (&["fuzz", "--kernels", "-5"][..], "--kernels -5"),
        (&["tune", "gemv_int4", "--budget", "-2"][..], "--budget -2"),
    ] {
        let o = wavefuse(args, &[], dir.path());
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}\n{err}");
        assert!(
            err.contains(&format!("{flag}: a negative number")) && !err.contains("'--"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 39, item 9: `--tuned-store` with `--schedule default` (a store nothing reads) warns.
#[test]
fn a_tuned_store_with_the_default_schedule_warns() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.toml");
    std::fs::write(&store, "").unwrap();
    let o = wavefuse(
        &[
            "emit",
            "gemv_f16",
            "--target",
            "sm90",
            "--schedule",
            "default",
            "--tuned-store",
            store.to_str().unwrap(),
        ],
        &[],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        err.contains("--tuned-store") && err.contains("is ignored"),
        "{err}"
    );
}

/// Issue 39, item 2, for `ab`: an interrupted run leaves the previous `--json` as it was and
/// writes its partial report beside it, marked; exit 130.
#[test]
fn interrupted_ab_writes_its_report_beside_the_previous_one() {
    let Some(real) = real_hipcc() else {
        eprintln!("skipped: no hipcc");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hipcc = hipcc_that_hangs_after_two(dir.path(), &real);
    let json = dir.path().join("r.json");
    std::fs::write(&json, "previous json").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args([
            "ab",
            "gemv_int4",
            "allreduce_residual",
            "--no-gpu",
            "--json",
        ])
        .arg(&json)
        .env("WAVEFUSE_HIPCC", &hipcc)
        .env("WAVEFUSE_CACHE_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = (0..3000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        dir.path().join("child").exists()
    });
    assert!(started, "the third compile never started");
    signal(&child, "-TERM");
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "previous json");
    let beside = std::fs::read_to_string(dir.path().join("r.interrupted.json")).unwrap();
    assert!(beside.contains("\"interrupted\": true"), "{beside}");
}
