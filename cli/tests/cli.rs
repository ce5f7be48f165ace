//! The `wavefuse` binary: listing, emitting IR, and clear errors with a non-zero exit.

use std::process::{Command, Output};

fn wavefuse(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(args)
        .output()
        .expect("runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn list_prints_the_eight_kernels() {
    let o = wavefuse(&["list"]);
    assert!(o.status.success());
    let names: Vec<String> = stdout(&o)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "gemv_f16",
            "gemv_int4",
            "gemv_int4_dual_silu",
            "gemv_int4_qkv",
            "allreduce_residual",
            "allreduce_residual_rmsnorm",
            "gemv_int4_allreduce_rmsnorm",
            "allreduce_int8"
        ]
    );
}

#[test]
fn emit_ir_prints_the_fused_kernel() {
    let o = wavefuse(&["emit", "gemv_int4_allreduce_rmsnorm", "--ir", "--tp", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("kernel gemv_int4_allreduce_rmsnorm(tp=4) {"),
        "{text}"
    );
    assert!(
        text.contains("[k=4352, n=5120] row_parallel(tp=4)"),
        "{text}"
    );
    assert!(text.contains("allreduce v2, tp=4"), "{text}");
}

#[test]
fn emit_batch_changes_shapes() {
    let o = wavefuse(&["emit", "gemv_int4", "--ir", "--tp", "2", "--batch", "8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("f16[8, 5120]"));
}

/// Above batch 8 the limit is the lowering's: the default lowers the INT4 GEMVs at batch 16 and
/// 64 on both targets — on sm_90 as the tensor-core GEMM (issue 40; two weights at 64 with the
/// scale on the FP16 weights, which the code says), on gfx906 at 64 with the serial cross-slice
/// reduction (`reduction = serial`, which the code says); a schedule asked for whose LDS does not
/// fit one workgroup (every slice's sums, or 4 K warps' on the tensor cores, at batch 64) is
/// refused with the kernel, the batch, the limit and the largest batch that fits, as every
/// lowering refusal is (exit 1).
#[test]
fn emit_batch_above_8_lowers_or_is_refused_with_the_reason() {
    let o = wavefuse(&["emit", "gemv_int4", "--target", "sm90", "--batch", "64"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // gfx906: the serial reduction fits the sums (an override of every slice's sums does not);
    // sm_90: the two-weight GEMV on the tensor cores with the scale on the FP16 weights and 2 K
    // warps (4 K warps' sums do not fit the static LDS the defaults keep to; 16 K warps' do not
    // fit the 227 KiB an override may take in dynamic shared memory).
    for (target, refused, says, spec) in [
        (
            "gfx906",
            "gemv_int4",
            "(reduction = serial)",
            "reduction=slices",
        ),
        (
            "sm90",
            "gemv_int4_dual_silu",
            "times the scale in FP16",
            "threads_per_column=16,workgroup_size=512",
        ),
    ] {
        let o = wavefuse(&["emit", "gemv_int4", "--target", target, "--batch", "16"]);
        assert!(o.status.success(), "{target}: {}", stderr(&o));
        let o = wavefuse(&["emit", refused, "--target", target, "--batch", "64"]);
        assert!(o.status.success(), "{target}: {}", stderr(&o));
        assert!(
            stdout(&o).contains(says),
            "{target}: `{says}` not in the code"
        );
        let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
            .args(["emit", refused, "--target", target, "--batch", "64"])
            .env("WAVEFUSE_SCHEDULE", spec)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(1), "{target}: {}", stderr(&o));
        let e = stderr(&o);
        for needle in [
            refused,
            "at batch 64",
            "bytes of LDS exceed",
            "fits up to batch",
        ] {
            assert!(e.contains(needle), "{target}: `{needle}` not in {e}");
        }
    }
}

#[test]
fn bad_arguments_fail_clearly() {
    for (args, needle) in [
        (
            &["emit", "gemv_int5", "--ir"][..],
            "unknown kernel `gemv_int5`",
        ),
        (
            &["emit", "gemv_int4", "--ir", "--tp", "3"][..],
            "TP = 3 is not supported",
        ),
        (
            &["emit", "gemv_int4", "--ir", "--tp", "four"][..],
            "not a TP size",
        ),
        (
            &["emit", "gemv_int4", "--ir", "--batch", "65"][..],
            "65 is not in 1..=64",
        ),
        (&["emit", "gemv_int4"][..], "pass --ir"),
        (
            &[
                "emit",
                "gemv_int4",
                "--target",
                "sm90",
                "--out",
                "a",
                "--lib",
                "b",
            ][..],
            "cannot be used with",
        ),
        (&["emit", "gemv_int4", "--lib", "b"][..], "--target"),
        (&["report", "--tp", "16"][..], "TP = 16 is not supported"),
    ] {
        let o = wavefuse(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn cache_clear_empties_the_cache_dir() {
    let dir = std::env::temp_dir().join(format!("wavefuse-cache-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wavefuse"))
            .args(args)
            .env("WAVEFUSE_CACHE_DIR", &dir)
            .output()
            .unwrap()
    };
    // The command's wiring: it reports and clears $WAVEFUSE_CACHE_DIR. Clearing real entries
    // (and the count) is tested on `Cache::clear` in runtime/tests.
    let o = run(&["cache"]);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains(&dir.display().to_string()),
        "{}",
        stdout(&o)
    );
    let o = run(&["cache", "--clear"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("removed 0 cached artifact(s)"),
        "{}",
        stdout(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn fuzz_runs_a_few_kernels_and_prints_the_refusal_table() {
    let o = wavefuse(&["fuzz", "--seed", "5", "--kernels", "12", "--ci"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("12 kernels from seed 0x5"), "{out}");
    assert!(out.contains("| kind | reason (normalised) |"), "{out}");
    assert!(out.contains("verdict: clean"), "{out}");
    let o = wavefuse(&["fuzz", "--kernels", "0"]);
    assert!(!o.status.success());
}

/// `--findings` is checked before any kernel is generated: a path that is a file is refused
/// (exit 2) with nothing fuzzed (it used to be found only after the whole run).
#[test]
fn fuzz_findings_dir_is_checked_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let o = wavefuse(&[
        "fuzz",
        "--kernels",
        "5",
        "--ci",
        "--findings",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("--findings"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("kernels from seed"), "{}", stdout(&o));
}

/// An interrupted fuzz exits 130 and its verdict says it was interrupted, never "clean" (the
/// kernels it did not reach were not checked).
#[test]
fn interrupted_fuzz_is_not_clean() {
    use std::io::{BufRead, BufReader, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(["fuzz", "--seed", "3", "--kernels", "100000", "--ci"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("fuzzing kernels"), "{first}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: sends a signal to our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(!rest.contains("verdict: clean"), "{rest}");
    assert!(rest.contains("verdict: interrupted after"), "{rest}");
}

/// `llvm-diff` without its PTX folder says how to write it (exit 1); with a folder but no NVIDIA
/// GPU it says so (exit 2) and writes nothing.
#[test]
fn llvm_diff_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let o = wavefuse(&["llvm-diff", "--ptx", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("wavefuse llvm ptx --out"),
        "{}",
        stderr(&o)
    );
    if std::path::Path::new("/proc/driver/nvidia/version").exists() {
        eprintln!("skipped the no-GPU half: an NVIDIA driver is present");
        return;
    }
    let ptx = dir.path().join("ptx");
    std::fs::create_dir(&ptx).unwrap();
    std::fs::write(
        ptx.join("manifest.json"),
        r#"{"llvm": "16", "entries": []}"#,
    )
    .unwrap();
    let json = dir.path().join("out.json");
    let o = wavefuse(&[
        "llvm-diff",
        "--ptx",
        ptx.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no NVIDIA GPU"), "{}", stderr(&o));
    assert!(!json.exists());
}

/// `mgpu-bench` refuses empty series before looking for GPUs, and without a GPU exits 2 with
/// the driver's answer, writing nothing.
#[test]
fn mgpu_bench_refuses_what_cannot_run() {
    let o = wavefuse(&["mgpu-bench", "--samples", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--samples and --calls must be at least 1"),
        "{}",
        stderr(&o)
    );
    if std::path::Path::new("/proc/driver/nvidia/version").exists()
        || std::path::Path::new("/dev/kfd").exists()
    {
        eprintln!("skipped the no-GPU half: a GPU driver is present");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mgpu.json");
    let o = wavefuse(&["mgpu-bench", "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    assert!(!json.exists());
}

/// `ab --prebuild` compiles both sides of every case for sm_90 into the cache (no GPU needed),
/// and the spin kernel graph timing replays behind, and says how many, one line per source.
#[test]
fn ab_prebuild_fills_the_cache_with_both_sides() {
    use wavefuse_runtime::compile::{Compiler, Nvrtc};
    if !wavefuse_test_support::found("NVRTC", Nvrtc::with_includes(Vec::new()).version()) {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(["ab", "gemv_int4", "--shapes", "qwen27b-tp4", "--prebuild"])
        .env("WAVEFUSE_CACHE_DIR", cache.path())
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("generated     ok"), "{err}");
    assert!(err.contains("hand-written  ok"), "{err}");
    assert!(err.contains("spin kernel   ok"), "{err}");
    assert!(err.contains("3 sources for sm90"), "{err}");
    assert!(
        std::fs::read_dir(cache.path()).unwrap().next().is_some(),
        "nothing written into the cache"
    );
}
