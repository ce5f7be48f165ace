//! `wavefuse emit --kernel-file`: a kernel written by hand in the textual IR goes through the same
//! pipeline as the set's (the policy's schedule, then `wavefuse_codegen::compile`) on both targets;
//! a malformed file is an error with the file, line, column and token, exit 2, and no output.

use std::path::Path;
mod common;

use common::{text, wavefuse, wavefuse_in};

use wavefuse_codegen::Arch;
use wavefuse_harness::policy::{Placement, SchedulePolicy};

/// Written by hand (not printed by wavefuse): a TP 2 allreduce of partial sums, a residual add and
/// an RMSNorm at batch 2 and hidden size 2048, with comments and no type annotations.
const KERNEL: &str = "\
; A residual add and RMSNorm over a TP group of 2, batch 2, hidden 2048.
kernel allreduce_add_norm(tp=2) {
    buf0 = input partial : f16[2, 2048] partial(tp=2) @global index=local
    buf1 = input residual : f16[2, 2048] replicated @global index=local
    buf2 = input gamma : f16[2048] replicated @global index=local
    buf3 = output hidden : f16[2, 2048] replicated @global index=local
    buf4 = output normed : f16[2, 2048] replicated @global index=local
    v0 = load buf0
    v1 = allreduce v0, tp=2
    v2 = load buf1
    v3 = add v1, v2
    v4 = round_f16 v3
    store v4, buf3
    v5 = load buf2
    v6 = rmsnorm v4, v5, eps=1e-5
    v7 = round_f16 v6
    store v7, buf4
}
";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("writes");
    p.to_string_lossy().into_owned()
}

#[test]
fn emit_kernel_file_matches_the_library_pipeline_on_both_targets() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(dir.path(), "k.wfir", KERNEL);
    let kernel = wavefuse::ir::parse(KERNEL).expect("parses");
    for arch in Arch::ALL {
        let o = wavefuse(&["emit", "--kernel-file", &file, "--target", arch.name()]);
        assert!(
            o.status.success(),
            "{arch}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let want = SchedulePolicy::default()
            .resolve_kernel(&kernel, arch, Placement::PerDevice, None)
            .expect("generates")
            .code;
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            want.source.text,
            "{arch}"
        );
        assert!(want.source.text.contains("allreduce_add_norm"));
    }
    let o = wavefuse(&["emit", "--kernel-file", &file, "--ir"]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), kernel.to_string());
    let out = dir.path().join("gen");
    let o = wavefuse(&[
        "emit",
        "--kernel-file",
        &file,
        "--target",
        "gfx906",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("allreduce_add_norm.hip").is_file());
    assert!(out.join("allreduce_add_norm.abi.toml").is_file());
    // The C library of the user's kernel (docs/clib.md), both targets in one folder.
    let lib = dir.path().join("lib");
    for target in ["gfx906", "sm90"] {
        let o = wavefuse(&[
            "emit",
            "--kernel-file",
            &file,
            "--target",
            target,
            "--lib",
            lib.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let mut names: Vec<String> = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "allreduce_add_norm.cu",
            "allreduce_add_norm.hip",
            "allreduce_add_norm_gfx906.abi.toml",
            "allreduce_add_norm_gfx906.h",
            "allreduce_add_norm_gfx906_launch.hip",
            "allreduce_add_norm_sm90.abi.toml",
            "allreduce_add_norm_sm90.h",
            "allreduce_add_norm_sm90_launch.cu",
            "build_allreduce_add_norm_gfx906.sh",
            "build_allreduce_add_norm_sm90.sh",
        ]
    );
}

#[test]
fn invalid_kernel_file_is_an_error_with_its_position_and_no_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = KERNEL.replace("allreduce v0, tp=2", "allreduse v0, tp=2");
    let file = write(dir.path(), "bad.wfir", &bad);
    let out = dir.path().join("gen");
    let o = wavefuse(&[
        "emit",
        "--kernel-file",
        &file,
        "--target",
        "sm90",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{file}:9:10:")) && err.contains("did you mean `allreduce`"),
        "{err}"
    );
    assert!(o.stdout.is_empty() && !out.exists());
    // A file that parses but does not validate: the rmsnorm weight's length does not match.
    let invalid = KERNEL.replace("gamma : f16[2048]", "gamma : f16[1024]");
    let file = write(dir.path(), "invalid.wfir", &invalid);
    let o = wavefuse(&["emit", "--kernel-file", &file, "--target", "sm90"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not valid"), "{err}");
    // The message points at the offending op's line and column in the file (the rmsnorm).
    let line = invalid.lines().position(|l| l.contains("rmsnorm")).unwrap() + 1;
    let column = invalid
        .lines()
        .nth(line - 1)
        .unwrap()
        .find("rmsnorm")
        .unwrap()
        + 1;
    assert!(err.contains(&format!("{file}:{line}:{column}: ")), "{err}");
    // The set's shape flags do not apply to a file's kernel.
    let o = wavefuse(&[
        "emit",
        "--kernel-file",
        &file,
        "--target",
        "sm90",
        "--tp",
        "4",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn sim_kernel_file_runs_the_protocol_simulator_against_the_reference() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(dir.path(), "k.wfir", KERNEL);
    for arch in Arch::ALL {
        let o = wavefuse(&[
            "sim",
            "--kernel-file",
            &file,
            "--schedules",
            "20",
            "--target",
            arch.name(),
        ]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{arch}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains("simulating allreduce_add_norm@") && out.contains("tp=2"),
            "{out}"
        );
        assert!(
            out.contains("20 schedules in") && out.contains(" 0 with findings"),
            "{out}"
        );
    }
    let bad = write(
        dir.path(),
        "bad.wfir",
        &KERNEL.replace("v3 = add", "v3 = ad"),
    );
    let o = wavefuse(&["sim", "--kernel-file", &bad, "--schedules", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.wfir:11:10:"));
}

/// An FP16 row GEMV + allreduce + residual + RMSNorm at batch 4 over `n` features, TP 4
/// (`codegen/tests/fixtures/f16_row_norm.wfir`): one wave per column (`n / 4` workgroups of 256
/// lanes) behind the norm's grid barrier.
fn f16_row_norm(n: usize) -> String {
    include_str!("../../codegen/tests/fixtures/f16_row_norm.wfir")
        .replace("=N]", &format!("={n}]"))
        .replace(", N]", &format!(", {n}]"))
        .replace("[N]", &format!("[{n}]"))
}

/// Co-residency is decided at compile time, never first at launch (DESIGN.md §5.9): `emit` and
/// `check` refuse a grid the device cannot hold with the numbers and print no kernel; `check`
/// compiles one that fits at the hardware's most waves with hipcc and judges it at the
/// occupancy hipcc reports.
#[test]
fn grids_that_cannot_be_coresident_are_refused_at_compile_time() {
    let dir = tempfile::tempdir().unwrap();
    let big = write(dir.path(), "big.wfir", &f16_row_norm(5120));
    for cmd in [
        &["emit", "--kernel-file", &big, "--target", "gfx906"][..],
        &["check", "--kernel-file", &big, "--target", "gfx906"][..],
    ] {
        let o = wavefuse(cmd);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(o.stdout.is_empty(), "{cmd:?} printed {:?}", o.stdout);
        assert!(
            err.contains("1280 workgroups of 256 lanes must be resident at once")
                && err.contains("gfx906 holds at most 600 (60 CUs x 10)"),
            "{cmd:?}: {err}"
        );
    }
    // Four ranks on one H200: 4 × 640 workgroups; one rank per device fits.
    let o = wavefuse(&[
        "emit",
        "--kernel-file",
        &big,
        "--target",
        "sm90",
        "--placement",
        "same-device",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("2560 (4 ranks x 640) workgroups"),
        "{err}"
    );
    assert!(
        wavefuse(&["emit", "--kernel-file", &big, "--target", "sm90"])
            .status
            .success()
    );

    if std::env::var_os("WAVEFUSE_HIPCC").is_none() {
        eprintln!("skipped the hipcc half: WAVEFUSE_HIPCC is not set (scripts/install-deps.sh)");
        return;
    }
    // 1536 columns: 384 workgroups, within the 600 of any register count; hipcc's occupancy
    // decides, and the verdict must agree with 60 CUs × (waves per SIMD) workgroups.
    let small = write(dir.path(), "small.wfir", &f16_row_norm(1536));
    let o = wavefuse(&["check", "--kernel-file", &small, "--target", "gfx906"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("grid 384 x 256 lanes"), "{out}{err}");
    let occupancy: u32 = out
        .split("occupancy ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no occupancy in {out}"));
    let fits = 60 * occupancy.min(10) >= 384;
    assert_eq!(
        o.status.success(),
        fits,
        "occupancy {occupancy}: {out}{err}"
    );
    if fits {
        assert!(
            out.contains("co-resident: 1 grid(s) of 384 workgroups"),
            "{out}"
        );
    } else {
        assert!(err.contains("must be resident at once"), "{err}");
    }
}

/// Written by hand: an INT4 GEMV (2048 → 2048, batch 2) with a residual added before its one FP16
/// rounding, TP 1: a kernel the set does not have, with a GEMV for `tune` to search.
const GEMV_RESIDUAL: &str = "\
kernel gemv_residual(tp=1) {
    buf0 = input w : gptq<group=128, zero=v1, scale=f16>[k=2048, n=2048] col_parallel(tp=1) @global index=local
    buf1 = input x : f16[2, 2048] replicated @global index=local
    buf2 = input r : f16[2, 2048] col_parallel(tp=1) @global index=local
    buf3 = output y : f16[2, 2048] col_parallel(tp=1) @global index=local
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = load buf2
    v3 = add v1, v2
    v4 = round_f16 v3
    store v4, buf3
}
";

/// A user's kernel is a first-class citizen: `ab`, `run` and `tune` take `--kernel-file` where
/// they take a kernel of the set, at the shapes the file is written with, through the same
/// pipeline (`emit`'s source is what `ab` checks; `tune`'s winner is what `emit --schedule tuned`
/// prints). No GPU here: `ab` simulates and compiles, `run` simulates, `tune` models gfx906.
#[test]
fn ab_run_and_tune_take_a_kernel_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = write(d, "gemv_residual.wfir", GEMV_RESIDUAL);

    // ab: checked in the simulator against the f64 reference at its own shapes, no hand-written side.
    let json = d.join("ab.json");
    let o = wavefuse_in(
        d,
        &[
            "ab",
            "--kernel-file",
            &file,
            "--no-gpu",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("at the shapes the kernel is written with"),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = &j["rows"][0];
    assert_eq!(j["rows"].as_array().unwrap().len(), 1);
    assert_eq!(
        (row["kernel"].as_str(), row["shape"].as_str()),
        (Some("gemv_residual"), Some("own-tp1-b2"))
    );
    let check = &row["generated"]["check"];
    assert_eq!(
        (check["ran"].as_bool(), check["pass"].as_bool()),
        (Some(true), Some(true)),
        "{row}"
    );
    assert!(check["rel_l2"].as_f64().unwrap() < 1e-3, "{row}");
    assert!(
        row["manual"]["absent"]
            .as_str()
            .unwrap()
            .contains("--manual"),
        "{row}"
    );

    // ab with a hand-written side bound by its ABI (here the emitted kernel and its description,
    // standing in for one's own); a description that does not match stops before anything runs.
    let emitted = d.join("gen");
    let o = wavefuse_in(
        d,
        &[
            "emit",
            "--kernel-file",
            &file,
            "--target",
            "sm90",
            "--out",
            emitted.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let (src, abi) = (
        emitted.join("gemv_residual.cu"),
        emitted.join("gemv_residual.abi.toml"),
    );
    let ab_manual = |abi: &Path| {
        wavefuse_in(
            d,
            &[
                "ab",
                "--kernel-file",
                &file,
                "--no-gpu",
                "--manual",
                src.to_str().unwrap(),
                "--abi",
                abi.to_str().unwrap(),
            ],
        )
    };
    let o = ab_manual(&abi);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("hand-written not run (it needs a GPU)"),
        "{out}"
    );
    let bad = d.join("bad.abi.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&abi)
            .unwrap()
            .replace("len = 4096\n", "len = 2048\n"),
    )
    .unwrap();
    let o = ab_manual(&bad);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("ABI mismatch") && err.contains("nothing was launched"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    // The set's kernel names and shape flags do not apply to a file's kernel.
    for extra in [
        &["gemv_int4"][..],
        &["--tp", "4"],
        &["--model-config", "c.json"],
    ] {
        let mut args = vec!["ab", "--kernel-file", &file, "--no-gpu"];
        args.extend(extra);
        assert_eq!(wavefuse_in(d, &args).status.code(), Some(2), "{extra:?}");
    }

    // run: the simulator at its own shapes against the f64 reference.
    let o = wavefuse_in(d, &["run", "--kernel-file", &file, "--device", "sim"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("wavefuse run gemv_residual: tp=1, batch=2, own shapes")
            && out.contains("PASS"),
        "{out}"
    );
    assert!(
        !err.contains("--small"),
        "no set-only hint for a file's kernel: {err}"
    );

    // tune (gfx906, the static model): the winner is stored for this kernel's text, and
    // `emit --schedule tuned` reads it back; a kernel of other shapes gets the default.
    let store = d.join("store.toml");
    let o = wavefuse_in(
        d,
        &[
            "tune",
            "--kernel-file",
            &file,
            "--arch",
            "gfx906",
            "--quick",
            "--budget",
            "2",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let stored = std::fs::read_to_string(&store).unwrap();
    assert!(
        stored.contains("kernel = \"gemv_residual\"") && stored.contains("shape = \"ir-"),
        "{stored}"
    );
    let emit_tuned = |file: &str| {
        let o = wavefuse_in(
            d,
            &[
                "emit",
                "--kernel-file",
                file,
                "--target",
                "gfx906",
                "--schedule",
                "tuned",
                "--tuned-store",
                store.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", text(&o).1);
        text(&o).1
    };
    assert!(emit_tuned(&file).contains("schedule: tuned for gemv_residual@ir-"));
    // Comments and spacing are not the kernel: the same printed IR, the same entry.
    let commented = write(
        d,
        "commented.wfir",
        &format!(
            "; mine\n{}",
            GEMV_RESIDUAL.replace("v4 = round_f16 v3", "v4 = round_f16   v3 ; once")
        ),
    );
    assert!(emit_tuned(&commented).contains("schedule: tuned for gemv_residual@ir-"));
    let other = write(
        d,
        "other.wfir",
        &GEMV_RESIDUAL.replace("f16[2, 2048]", "f16[1, 2048]"),
    );
    assert!(emit_tuned(&other).contains("schedule: default for gemv_residual"));
}

/// A chain `load → silu × (depth − 3) → round_f16 → store` of `depth` dependent ops.
fn chain(depth: usize) -> String {
    let mut text = String::from(
        "kernel chain(tp=1) {
    buf0 = input x : f32[1, 64] replicated @global index=local
    buf1 = output y : f16[1, 64] replicated @global index=local
    v0 = load buf0
",
    );
    for i in 1..depth - 2 {
        text.push_str(&format!("    v{i} = silu v{}\n", i - 1));
    }
    let last = depth - 2;
    text.push_str(&format!(
        "    v{last} = round_f16 v{}\n    store v{last}, buf1\n}}\n",
        last - 1
    ));
    text
}

/// Issue 39 item 4: a kernel file of a 10,000-op chain made `emit`, `sim` and `check` die of a
/// stack overflow (SIGABRT). They now refuse it, exit 1, with the file, line and value where the
/// chain passes the lowering's limit; the textual IR and the f64 reference (which walk ops in
/// order) still take it; a chain at the limit is emitted and simulated.
#[test]
fn invalid_10000_op_chain_is_refused_by_every_command_not_a_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let deep = write(dir.path(), "deep.wfir", &chain(10_000));
    let says = "deep.wfir:260:12: the op of v256 ends a chain of 257 dependent ops";
    for args in [
        &["emit", "--kernel-file", &deep, "--target", "sm90"][..],
        &["emit", "--kernel-file", &deep, "--target", "gfx906"],
        &["sim", "--kernel-file", &deep, "--schedules", "1"],
        &["run", "--kernel-file", &deep, "--device", "sim"],
    ] {
        let o = wavefuse(&args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    for args in [
        &["emit", "--kernel-file", &deep, "--ir"][..],
        &["run", "--kernel-file", &deep, "--device", "cpu-ref"],
    ] {
        let o = wavefuse(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o).1);
    }
    let at_limit = write(dir.path(), "limit.wfir", &chain(256));
    for args in [
        &["emit", "--kernel-file", &at_limit, "--target", "sm90"][..],
        &["sim", "--kernel-file", &at_limit, "--schedules", "2"],
    ] {
        let o = wavefuse(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o).1);
    }
}
