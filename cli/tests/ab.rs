//! `wavefuse ab`: the no-GPU path end to end (reports written, exit 0, the "no timing" line), the
//! reports rendered from a hand-built result set, the ABI checks of a hand-written kernel (an
//! error before any launch), and, ignored by default, the timed run on a GPU.

use std::path::Path;

use serde_json::Value as Json;
use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::Abi;
use wavefuse_harness::KernelId;
use wavefuse_harness::ab::handwritten::{
    self, Found, Hand, check_against_generated, check_signature,
};
use wavefuse_harness::ab::report::{
    AbReport, Check, CopyBw, Header, Manual, Mode, NO_TIMING, Resources, Row, Stats, Timing,
    TimingMode, Usage, Version,
};
use wavefuse_harness::ab::{plot, signature};
use wavefuse_harness::provenance::{DeviceInfo, Provenance};
use wavefuse_harness::suite::{self, CaseSpec, ShapeKind};
use wavefuse_runtime::Device;

mod common;

use common::{text, wavefuse};

fn spec(id: KernelId, tp: u32) -> CaseSpec {
    CaseSpec {
        kernel: id.into(),
        tp,
        batch: 1,
        shape: ShapeKind::Model,
    }
}

fn read_json(p: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(p).expect("written")).expect("valid JSON")
}

// ---------------------------------------------------------------------------------------------
// The no-GPU path, end to end
// ---------------------------------------------------------------------------------------------

#[test]
fn no_gpu_run_checks_in_the_simulator_writes_reports_and_says_no_timing() {
    let dir = tempfile::tempdir().unwrap();
    let (json, md, svg) = (
        dir.path().join("ab.json"),
        dir.path().join("ab.md"),
        dir.path().join("ab.svg"),
    );
    let o = wavefuse(&[
        "ab",
        "gemv_int4",
        "allreduce_residual_rmsnorm",
        "--shapes",
        "qwen27b-tp4",
        "--no-gpu",
        "--commit",
        "test-commit",
        "--json",
        json.to_str().unwrap(),
        "--md",
        md.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains(NO_TIMING), "{out}");
    assert_eq!(out.lines().last(), Some(NO_TIMING), "said last, plainly");
    for label in [
        "gemv_int4@qwen27b-tp4: ",
        "allreduce_residual_rmsnorm@qwen27b-tp4: ",
    ] {
        let verdict = out
            .lines()
            .find(|l| l.starts_with(label))
            .expect("a verdict line per row");
        assert!(
            verdict.contains("generated correct on the simulator"),
            "{verdict}"
        );
        assert!(verdict.ends_with("no timing"), "{verdict}");
    }

    let j = read_json(&json);
    assert_eq!(j["schema"], "wavefuse-ab/1");
    assert_eq!(j["mode"], "no-gpu");
    assert_eq!(j["timing"], NO_TIMING);
    assert_eq!(j["commit"], "test-commit");
    assert_eq!(j["failures"], 0);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        let g = &r["generated"];
        assert_eq!(g["check"]["ran"], true, "{r}");
        assert_eq!(g["check"]["pass"], true, "{r}");
        assert!(g["check"]["rel_l2"].as_f64().unwrap() <= 1e-3);
        assert!(g["timing"].is_null(), "nothing is timed without a GPU");
        assert_eq!(
            g["resources"].as_array().unwrap().len(),
            2,
            "sm90 and gfx906"
        );
        assert!(r["bytes_per_rank"].as_u64().unwrap() > 0);
        assert_eq!(
            r["bytes_per_group"].as_u64().unwrap(),
            4 * r["bytes_per_rank"].as_u64().unwrap()
        );
        // A hand-written version is either described and not run, or said to be absent.
        match r["manual"]["absent"].as_str() {
            Some(why) => assert!(why.contains("no hand-written version"), "{why}"),
            None => assert_eq!(r["manual"]["check"]["ran"], false),
        }
    }
    // gemv_int4 at TP 4: every input read once and the output written once, per rank.
    let want = 5120 * 4352 / 2 + 40 * 4352 * 2 + 40 * 4352 / 2 + 5120 * 2 + 4352 * 2;
    assert_eq!(rows[0]["bytes_per_rank"].as_u64().unwrap(), want as u64);

    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("| gemv_int4 | qwen27b-tp4 | generated |"),
        "{md}"
    );
    assert!(md.contains(NO_TIMING), "{md}");
    assert!(!svg.exists(), "no chart without timing");
    assert!(err.contains("no chart written"), "{err}");
}

/// Without an AMD GPU, `ab` gives the gfx906 INT4 kernels — generated and hand-written — the MI50
/// time model's prediction from their compiled code, labelled as modelled; never below the
/// model's memory floor for the bytes the row says the kernel moves (bytes / 0.85 TB/s + 5 µs),
/// and only on gfx906.
#[test]
fn no_gpu_ab_models_the_gfx906_int4_kernels_on_the_mi50() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ab.json");
    let o = wavefuse(&[
        "ab",
        "gemv_int4",
        "--tp",
        "4",
        "--no-gpu",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("modelled (MI50)") && out.contains("not measured"),
        "{out}"
    );
    let j = read_json(&json);
    let row = &j["rows"][0];
    let floor_us = row["bytes_per_rank"].as_f64().unwrap() / 0.85e12 * 1e6 + 5.0;
    let versions = [&row["generated"], &row["manual"]];
    for v in versions {
        let res = v["resources"].as_array().unwrap_or_else(|| panic!("{row}"));
        for r in res {
            let m = &r["modelled_mi50"];
            if r["arch"] == "gfx906" {
                let us = m["us"].as_f64().unwrap_or_else(|| panic!("{r}"));
                // The model counts the ABI's data arrays; the row the op-level buffers: within 1 %.
                assert!(
                    us >= 0.99 * floor_us && us < 10.0 * floor_us,
                    "{us} vs floor {floor_us}: {r}"
                );
                assert_eq!(m["label"], "modelled (MI50), not measured");
            } else {
                assert!(m.is_null(), "{r}");
            }
        }
    }
}

#[test]
fn without_a_driver_the_command_falls_back_by_itself() {
    if wavefuse_runtime::CudaDevice::count().is_ok_and(|n| n > 0) {
        println!("skipped: this machine has a GPU");
        return;
    }
    let o = wavefuse(&["ab", "allreduce_residual", "--tp", "2"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.starts_with(NO_TIMING), "{out}");
    assert!(
        !out.contains("--device"),
        "no hint meant for `wavefuse run`: {out}"
    );
}

#[test]
fn a_missing_hand_written_version_is_said_not_faked() {
    let empty = tempfile::tempdir().unwrap();
    let json = empty.path().join("ab.json");
    let o = wavefuse(&[
        "ab",
        "allreduce_int8",
        "--tp",
        "2",
        "--no-gpu",
        "--reference-dir",
        empty.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("no hand-written version"), "{out}");
    let j = read_json(&json);
    let why = j["rows"][0]["manual"]["absent"].as_str().unwrap();
    assert!(why.contains("no hand-written version"), "{why}");
}

/// A parametric `--abi` (here the reference's own, as a user would write one) is instantiated
/// at every case's shapes: the hand-written side is compiled at TP 1 and at TP 4 batch 8 and 64
/// with that shape's defines (its static LDS grows 8× to batch 8, then stays: past 8 the rows go
/// in tiles of 8 that reuse it), and a description without its KERNEL named,
/// or for another kernel, is refused before anything runs.
#[test]
fn a_parametric_manual_abi_is_instantiated_at_every_shape() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels-gen/reference/cuda");
    let (src, abi) = (dir.join("gemv_int4.cu"), dir.join("gemv_int4.abi.toml"));
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("ab.json");
    let args = |kernel: Option<&str>| {
        let mut v: Vec<String> = kernel.into_iter().map(str::to_owned).collect();
        v.extend(
            [
                "--shapes",
                "qwen27b-tp1,qwen27b-tp4-b8,qwen27b-tp4-b64",
                "--manual",
                src.to_str().unwrap(),
                "--abi",
                abi.to_str().unwrap(),
                "--no-gpu",
                "--json",
                json.to_str().unwrap(),
            ]
            .map(str::to_owned),
        );
        v
    };
    let run = |kernel: Option<&str>| {
        let mut a = vec!["ab".to_owned()];
        a.extend(args(kernel));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        wavefuse(&refs)
    };
    let o = run(Some("gemv_int4"));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let j = read_json(&json);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    let lds: Vec<u64> = rows
        .iter()
        .map(|r| {
            let res = r["manual"]["resources"].as_array().unwrap();
            let sm90 = res.iter().find(|x| x["arch"] == "sm90").unwrap();
            sm90["usage"]["lds_bytes"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(lds, [1024, 8192, 8192], "{out}");
    let o = run(None);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("name the one KERNEL"), "{}", text(&o).1);
    let o = run(Some("gemv_f16"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("unknown variable `w.group`"),
        "{}",
        text(&o).1
    );
}

#[test]
fn shape_sets_parse_and_bad_ones_are_refused() {
    use wavefuse_harness::ab::{ShapeSet, parse_shape};
    assert_eq!(
        parse_shape("qwen27b-tp4").unwrap(),
        ShapeSet { tp: 4, batch: 1 }
    );
    assert_eq!(
        parse_shape("qwen27b-tp1-b8").unwrap(),
        ShapeSet { tp: 1, batch: 8 }
    );
    assert_eq!(ShapeSet { tp: 2, batch: 3 }.name(), "qwen27b-tp2-b3");
    assert_eq!(
        parse_shape("qwen27b-tp4-b64").unwrap(),
        ShapeSet { tp: 4, batch: 64 }
    );
    for bad in [
        "qwen27b-tp3",
        "qwen27b-tp4-b65",
        "qwen27b-tp4-b0",
        "llama-tp4",
        "qwen27b-tp",
    ] {
        assert!(parse_shape(bad).is_err(), "{bad}");
    }
    let o = wavefuse(&["ab", "--shapes", "qwen27b-tp3"]);
    assert!(!o.status.success());
}

// ---------------------------------------------------------------------------------------------
// Reports from a hand-built result set
// ---------------------------------------------------------------------------------------------

fn check(pass: bool) -> Check {
    Check {
        on: "NVIDIA H200, model shapes".into(),
        ran: true,
        pass,
        rel_l2: if pass { 2.5e-5 } else { 0.31 },
        max_abs: 1e-3,
        cosine: if pass { 0.99999 } else { 0.9 },
        non_finite: 0,
        detail: if pass {
            String::new()
        } else {
            "rank 0 `y`: rel L2 3.100e-1 (tol 1e-3)".into()
        },
    }
}

fn timed(median_us: f64, second_us: f64) -> Timing {
    let series = |m: f64| Stats {
        samples: 100,
        median_us: m,
        p10_us: m * 0.97,
        p90_us: m * 1.05,
    };
    Timing {
        repeats: vec![series(median_us), series(second_us)],
        sets: 6,
        rotation_bytes: 6 * 46_000_000,
        flushed: false,
    }
}

fn version(origin: &str, pass: bool, timing: Option<Timing>) -> Version {
    Version {
        origin: origin.into(),
        symbol: "k".into(),
        check: check(pass),
        note: if timing.is_some() {
            String::new()
        } else {
            "not timed: wrong result".into()
        },
        timing,
        resources: vec![Resources {
            arch: "sm90".into(),
            compiler: "nvrtc 13.0".into(),
            usage: Ok(Usage {
                registers: 30,
                spills: 0,
                lds_bytes: 1024,
                occupancy: 16,
            }),
            modelled: None,
        }],
        error: None,
    }
}

fn row(kernel: &str, generated: Version, manual: Manual) -> Row {
    Row {
        kernel: kernel.into(),
        shape: "qwen27b-tp4".into(),
        tp: 4,
        batch: 1,
        dims: "5120→4352".into(),
        bytes_per_rank: 11_600_000,
        bytes_per_group: 46_400_000,
        alone: false,
        tolerance: 1e-3,
        generated,
        manual,
    }
}

fn synthetic() -> AbReport {
    let header = Header {
        mode: Mode::Gpu,
        provenance: Provenance {
            device: DeviceInfo {
                name: "NVIDIA H200".into(),
                count: 1,
                sms: 132,
                l2_bytes: 60 << 20,
                cooperative_launch: true,
            },
            driver: "580.159.04".into(),
            cuda: "13.0".into(),
            compiler: "nvrtc 13.0".into(),
            commit: "abc123".into(),
            date: "2026-11-29T18:00:00Z".into(),
        },
        seed: 7,
        warmup: 10,
        iters: 100,
        timing: TimingMode::Events,
        launch: wavefuse_harness::ab::LaunchMode::Stream,
        copy: vec![
            CopyBw {
                bytes: 1 << 30,
                median_ms: 0.55,
                gbps: 3900.0,
            },
            CopyBw {
                bytes: 1 << 30,
                median_ms: 0.56,
                gbps: 3850.0,
            },
        ],
    };
    let rows = vec![
        row(
            "gemv_int4",
            version("generated (sm90)", true, Some(timed(10.0, 10.2))),
            Manual::Present(Box::new(version(
                "kernels-gen/reference/cuda/gemv_int4.cu",
                true,
                Some(timed(10.7, 10.6)),
            ))),
        ),
        row(
            "gemv_int4_qkv",
            version("generated (sm90)", true, Some(timed(20.0, 20.0))),
            Manual::Present(Box::new(version("mine.cu", false, None))),
        ),
        row(
            "allreduce_int8",
            version("generated (sm90)", true, Some(timed(23.2, 23.0))),
            Manual::Absent("no hand-written version".into()),
        ),
    ];
    AbReport {
        header,
        rows,
        seconds: 12.0,
    }
}

#[test]
fn reports_render_from_a_synthetic_result_set() {
    let r = synthetic();
    let term = r.terminal();
    println!("{term}");
    let verdicts: Vec<&str> = term
        .lines()
        .filter(|l| l.contains("@qwen27b-tp4: "))
        .collect();
    assert_eq!(
        verdicts,
        [
            "gemv_int4@qwen27b-tp4: correct; generated 1.07× faster than hand-written",
            "gemv_int4_qkv@qwen27b-tp4: WRONG: hand-written: rank 0 `y`: rel L2 3.100e-1 (tol 1e-3)",
            "allreduce_int8@qwen27b-tp4: correct; no hand-written version; generated 2000 GB/s, 51 % of copy bandwidth",
        ],
        "{term}"
    );
    assert!(
        term.contains("repeat 1: 3900 GB/s, repeat 2: 3850 GB/s"),
        "{term}"
    );
    assert!(!term.contains(NO_TIMING));
    // gemv_int4: 46.4 MB in 10 µs = 4640 GB/s, 119 % of the copy bandwidth; spread 2 %.
    let line = term.lines().find(|l| l.starts_with("gemv_int4@")).unwrap();
    for cell in [
        "10.00", "9.70", "10.50", "10.20", "2.0%", "4640", "119%", "0.93",
    ] {
        assert!(line.contains(cell), "`{cell}` in {line}");
    }
    assert_eq!(r.failures(), 1);

    let md = r.markdown();
    assert!(
        md.contains("| gemv_int4 | qwen27b-tp4 | generated | 2.50e-5 |"),
        "{md}"
    );
    assert!(
        md.contains("| allreduce_int8 | qwen27b-tp4 | hand-written | no hand-written version |"),
        "{md}"
    );
    assert!(md.contains("6 × 46 MB"), "{md}");
    assert!(
        md.contains("- `gemv_int4@qwen27b-tp4`: correct; generated 1.07× faster than hand-written")
    );

    let j = r.to_json();
    assert_eq!(j["mode"], "gpu");
    assert_eq!(j["copy_bandwidth"][0]["gbps"], 3900.0);
    let g = &j["rows"][0]["generated"]["timing"];
    assert_eq!(g["repeats"].as_array().unwrap().len(), 2);
    assert!((g["gbps"].as_f64().unwrap() - 4640.0).abs() < 1e-6);
    assert!((g["fraction_of_copy_bandwidth"].as_f64().unwrap() - 4640.0 / 3900.0).abs() < 1e-9);
    assert!((g["spread"].as_f64().unwrap() - 0.02).abs() < 1e-9);
    assert!(
        (j["rows"][0]["generated_over_manual_time"].as_f64().unwrap() - 10.0 / 10.7).abs() < 1e-9
    );
    assert_eq!(j["rows"][1]["failed"], true);
    assert_eq!(j["rows"][2]["manual"]["absent"], "no hand-written version");

    let svg = plot::svg(&r).unwrap();
    std::fs::write(std::env::temp_dir().join("wavefuse-ab-test.svg"), &svg).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for needle in [
        "generated",
        "hand-written",
        "copy bandwidth, same run: 3900 GB/s",
        "gemv_int4@qwen27b-tp4",
        "allreduce_int8@qwen27b-tp4",
        "\n4640\n",
        "\nnone\n",
        "\nnot timed\n",
    ] {
        assert!(svg.contains(needle), "`{needle}` not in the chart");
    }
    let none = AbReport {
        rows: Vec::new(),
        ..synthetic()
    };
    assert!(plot::svg(&none).is_err(), "nothing timed: no chart");
}

#[test]
fn a_rank_timed_alone_is_said_and_its_bandwidth_is_its_own_bytes() {
    let mut r = synthetic();
    r.rows[0].alone = true;
    // Rank 0 alone: 11.6 MB in 10 µs = 1160 GB/s (not the group's 46.4 MB).
    let g = r.rows[0].gbps(&r.rows[0].generated).unwrap();
    assert!((g - 1160.0).abs() < 1e-6, "{g}");
    let term = r.terminal();
    // The bytes table says what each timed launch ran.
    let line = |label: &str| {
        term.lines()
            .filter(|l| l.starts_with(label))
            .find(|l| l.contains("ranks at once") || l.contains("rank 0 alone"))
            .unwrap_or_else(|| panic!("no bytes line for {label} in {term}"))
            .to_owned()
    };
    assert!(line("gemv_int4@").contains("rank 0 alone"));
    assert!(line("allreduce_int8@").contains("4 ranks at once"));
    let j = r.to_json();
    assert_eq!(j["rows"][0]["timed_ranks"], "rank 0 alone");
    assert_eq!(j["rows"][2]["timed_ranks"], "4 ranks at once");
    assert!(r.markdown().contains("| rank 0 alone |"));
}

#[test]
fn only_kernels_that_do_not_communicate_are_timed_alone() {
    use wavefuse_harness::policy::{Placement, Ranks};
    for (id, tp, alone) in [
        (KernelId::GemvInt4, 4, true),
        (KernelId::GemvInt4DualSilu, 4, true),
        (KernelId::GemvInt4, 1, false),
        (KernelId::GemvInt4AllreduceRmsnorm, 4, false),
        (KernelId::AllreduceInt8, 4, false),
    ] {
        let c = spec(id, tp);
        let want = if alone {
            Placement::PerDevice
        } else {
            Placement::SameDevice
        };
        assert_eq!(Ranks::Alone.placement(&c), want, "{}", c.label());
        assert_eq!(Ranks::All.placement(&c), Placement::SameDevice);
    }
}

#[test]
fn the_no_gpu_report_says_so_in_every_rendering() {
    let mut r = synthetic();
    r.header.mode = Mode::NoGpu {
        reason: "no NVIDIA driver found".into(),
        placement: wavefuse_harness::policy::Placement::PerDevice,
    };
    r.header.copy.clear();
    for row in &mut r.rows {
        row.generated.timing = None;
        row.generated.check.on = "simulator sm90+gfx906, small shapes".into();
    }
    r.rows[1].manual = Manual::Absent("no hand-written version".into());
    let term = r.terminal();
    assert!(
        term.starts_with(&format!("{NO_TIMING} (no NVIDIA driver found)")),
        "{term}"
    );
    assert!(term.contains("gemv_int4@qwen27b-tp4: generated correct on the simulator sm90+gfx906, small shapes; hand-written not run (it needs a GPU); no timing"), "{term}");
    assert!(r.markdown().contains(NO_TIMING));
    assert_eq!(r.to_json()["timing"], NO_TIMING);
}

// ---------------------------------------------------------------------------------------------
// Hand-written kernels: the ABI checks
// ---------------------------------------------------------------------------------------------

/// The generated kernel of `id` at TP `tp` for `arch` with its ranks on one device, as `ab` runs
/// it; None where the compile refuses it as not co-resident (the fused kernel on gfx906 at TP 4:
/// four ranks' grids do not fit on one MI50, `suite::every_suite_case_generates_…`).
fn same_device(id: KernelId, tp: u32, arch: Arch) -> Option<suite::Generated> {
    match suite::generate(
        &spec(id, tp),
        arch,
        &wavefuse_harness::policy::SchedulePolicy::default(),
        wavefuse_harness::policy::Placement::SameDevice,
    ) {
        Ok(g) => Some(g),
        Err(suite::PrepError::NotCoResident(_)) if arch == Arch::Gfx906 => None,
        Err(e) => panic!("{id}@{arch} tp {tp}: {e}"),
    }
}

/// The generated kernel of `id` at TP `tp` for `arch`, written into `dir` as if it were a
/// hand-written kernel: its source and its own ABI description.
fn as_hand_written(dir: &Path, id: KernelId, tp: u32, arch: Arch) -> (suite::Generated, String) {
    let g = same_device(id, tp, arch).expect("generated");
    let ext = if arch == Arch::Sm90 { "cu" } else { "hip" };
    std::fs::write(dir.join(format!("mine.{ext}")), &g.source.text).unwrap();
    let abi = Abi::from_kernel(&g.lowered).to_toml().unwrap();
    (g, abi)
}

fn load(dir: &Path, abi: &str, ext: &str) -> Hand {
    let p = dir.join("mine.abi.toml");
    std::fs::write(&p, abi).unwrap();
    Hand::load(&p, Some(&dir.join(format!("mine.{ext}")))).unwrap()
}

#[test]
fn every_generated_kernel_passes_the_checks_as_its_own_hand_written_version() {
    let dir = tempfile::tempdir().unwrap();
    for arch in [Arch::Sm90, Arch::Gfx906] {
        let ext = if arch == Arch::Sm90 { "cu" } else { "hip" };
        for id in KernelId::ALL {
            for tp in [1, 4] {
                if same_device(id, tp, arch).is_none() {
                    continue;
                }
                let (g, abi) = as_hand_written(dir.path(), id, tp, arch);
                let hand = load(dir.path(), &abi, ext);
                assert_eq!(
                    hand.check(&g.lowered),
                    Vec::<String>::new(),
                    "{id}@{arch} tp {tp}"
                );
                // The runtime binds the hand-written kernel by its description exactly as it
                // binds the generated one by its own.
                let bound = hand.launch_abi(tp);
                assert_eq!(
                    bound.param_data().unwrap(),
                    g.abi.param_data().unwrap(),
                    "{id}@{arch} tp {tp}: the parameters the runtime binds"
                );
                assert_eq!(
                    (bound.grid, bound.workgroup_size, bound.synchronises()),
                    (
                        g.lowered.grid,
                        g.lowered.workgroup_size,
                        suite::synchronises(&g.lowered)
                    ),
                    "{id}@{arch} tp {tp}: the launch the runtime makes"
                );
            }
        }
    }
}

/// The generated gemv_int4 ABI (TP 4) with `edit` applied to its TOML text.
fn mismatch(edit: impl Fn(&str) -> String) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (g, abi) = as_hand_written(dir.path(), KernelId::GemvInt4, 4, Arch::Sm90);
    load(dir.path(), &edit(&abi), "cu").check(&g.lowered)
}

/// A hand-written kernel may take dynamic LDS (Marlin-style kernels do): the description's
/// `dynamic_lds_bytes` reaches the launch the runtime makes, and past what one workgroup may have
/// on the target it is refused with the limit named.
#[test]
fn a_hand_written_kernel_takes_dynamic_lds_up_to_the_targets_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (g, abi) = as_hand_written(dir.path(), KernelId::GemvInt4, 4, Arch::Sm90);
    assert!(abi.contains("dynamic_lds_bytes = 0"), "{abi}");
    let with = |bytes: u32| {
        abi.replace(
            "dynamic_lds_bytes = 0",
            &format!("dynamic_lds_bytes = {bytes}"),
        )
    };
    let h = load(dir.path(), &with(96 * 1024), "cu");
    assert_eq!(h.check(&g.lowered), Vec::<String>::new());
    assert_eq!(h.launch_abi(4).dynamic_lds_bytes, 96 * 1024);
    let past = load(dir.path(), &with(227 * 1024 + 1), "cu").check(&g.lowered);
    assert_eq!(
        past,
        [
            "dynamic_lds_bytes = 232449 is past the 232448 bytes of LDS one workgroup may have on sm90"
        ],
    );
}

fn without_param(abi: &str, name: &str) -> String {
    abi.split("[[params]]")
        .filter(|b| !b.contains(&format!("name = \"{name}\"")))
        .collect::<Vec<_>>()
        .join("[[params]]")
}

#[test]
fn abi_mismatches_are_named() {
    let missing = mismatch(|a| without_param(a, "w_qzeros"));
    assert!(
        missing.iter().any(|p| p.starts_with("missing: `w.qzeros`")),
        "{missing:?}"
    );
    assert!(
        missing
            .iter()
            .any(|p| p.starts_with("wrong count: the kernel takes ") && p.contains("w_qzeros")),
        "{missing:?}"
    );

    let mistyped = mismatch(|a| a.replacen("ty = \"f16\"", "ty = \"f32\"", 1));
    assert!(
        mistyped
            .iter()
            .any(|p| p.contains("mistyped: parameter `w_scales` (`w.scales`) is f32")),
        "{mistyped:?}"
    );
    assert!(
        mistyped.iter().any(
            |p| p.contains("mistyped: parameter 1 `w_scales` is a pointer to `unsigned short`")
        ),
        "{mistyped:?}"
    );

    // One parameter past the kernel's last (gemv_int4 at TP 4 on sm_90 takes 7 with split-K: its
    // arrivals are weighted tickets, no epoch state).
    let extra = mismatch(|a| {
        format!(
            "{a}\n[[params]]\nindex = 7\nname = \"bias\"\nkind = \"array\"\nty = \"f16\"\npurpose = \"data\"\nbuffer = \"bias\"\npart = \"data\"\nlen = 4352\n"
        )
    });
    assert!(
        extra
            .iter()
            .any(|p| p.starts_with("extra: parameter `bias`")),
        "{extra:?}"
    );
    assert!(
        extra.iter().any(
            |p| p.contains("the kernel takes 7 parameters") && p.contains("the ABI declares 8")
        ),
        "{extra:?}"
    );

    let short = mismatch(|a| a.replace("len = 5120\n", "len = 4096\n"));
    assert!(
        short.iter().any(|p| p.contains("declares 4096 elements")),
        "{short:?}"
    );

    let swapped = mismatch(|a| {
        a.replace("name = \"w_scales\"", "name = \"TMP\"")
            .replace("name = \"w_qzeros\"", "name = \"w_scales\"")
            .replace("name = \"TMP\"", "name = \"w_qzeros\"")
    });
    assert!(
        swapped
            .iter()
            .any(|p| p
                .contains("parameter 1 is `w_scales` in the kernel, the ABI declares `w_qzeros`")),
        "{swapped:?}"
    );
}

#[test]
fn peer_ordering_and_epochs_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (g, abi) = as_hand_written(
        dir.path(),
        KernelId::AllreduceResidualRmsnorm,
        4,
        Arch::Sm90,
    );
    let reversed = abi.replace("slots = [0, 1, 2, 3]", "slots = [3, 2, 1, 0]");
    assert_ne!(reversed, abi, "the generated ABI states the peer ordering");
    let p = load(dir.path(), &reversed, "cu").check(&g.lowered);
    assert!(
        p.iter()
            .any(|x| x.starts_with("peer ordering: slots [3, 2, 1, 0]")),
        "{p:?}"
    );

    let a: Abi = Abi::from_toml(&abi).unwrap();
    let hand: handwritten::HandAbi = toml::from_str(&abi).unwrap();
    // The generated kernel keeps its epoch on the device (no `epoch` scalar): its own ABI, bound
    // as a hand-written one, has nothing to report (DESIGN.md §5.4).
    assert!(a.epoch_param.is_none());
    let p = check_against_generated(&hand, &g.lowered);
    assert!(p.is_empty(), "{p:?}");
    assert!(a.peer_table.is_some());
}

#[test]
fn the_source_signature_is_read_like_the_compiler_would() {
    let src = r#"
        typedef unsigned short f16;
        extern "C" __global__ void __launch_bounds__(256)
        k(const unsigned* __restrict__ q, // comment, with a comma
          const f16* x, /* block
          comment */ f16* const* peers, const unsigned rank) {}
    "#;
    let params = signature::parse(src, "k").unwrap();
    let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["q", "x", "peers", "rank"]);
    assert_eq!(params[2].pointers, 2);
    let dir = tempfile::tempdir().unwrap();
    let (_, abi) = as_hand_written(dir.path(), KernelId::GemvInt4, 4, Arch::Sm90);
    let declared = toml::from_str::<handwritten::HandAbi>(&abi).unwrap().params;
    let p = check_signature(&declared, &params);
    assert!(p.iter().any(|x| x.starts_with("wrong count")), "{p:?}");
}

#[test]
fn a_manual_abi_mismatch_stops_the_command_before_any_launch() {
    let dir = tempfile::tempdir().unwrap();
    let (_, abi) = as_hand_written(dir.path(), KernelId::GemvInt4, 4, Arch::Sm90);
    let bad = dir.path().join("bad.abi.toml");
    std::fs::write(&bad, without_param(&abi, "w_qzeros")).unwrap();
    let src = dir.path().join("mine.cu");
    let o = wavefuse(&[
        "ab",
        "gemv_int4",
        "--tp",
        "4",
        "--manual",
        src.to_str().unwrap(),
        "--abi",
        bad.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("ABI mismatch"), "{err}");
    assert!(err.contains("nothing was launched"), "{err}");
    assert!(err.contains("missing: `w.qzeros` (u32[21760])"), "{err}");
    assert!(out.is_empty(), "no table: nothing ran\n{out}");

    // The same kernel with its own description is accepted and A/B-tested (without a GPU here:
    // checked, compiled, not run).
    let good = dir.path().join("good.abi.toml");
    std::fs::write(&good, &abi).unwrap();
    let o = wavefuse(&[
        "ab",
        "gemv_int4",
        "--tp",
        "4",
        "--no-gpu",
        "--manual",
        src.to_str().unwrap(),
        "--abi",
        good.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("hand-written not run (it needs a GPU)"),
        "{out}"
    );
}

#[test]
fn the_reference_kernels_descriptions_agree_with_the_generated_kernels() {
    let Some(dir) = handwritten::reference_dir(None) else {
        println!("skipped: no kernels-gen/reference directory");
        return;
    };
    let mut seen = 0;
    for id in KernelId::ALL {
        for tp in [1, 4] {
            for arch in [Arch::Sm90, Arch::Gfx906] {
                let Some(g) = same_device(id, tp, arch) else {
                    continue;
                };
                if let Found::Hand(h) = handwritten::find_reference(Some(&dir), &g.lowered, &g.ir) {
                    assert_eq!(
                        h.check(&g.lowered),
                        Vec::<String>::new(),
                        "{}",
                        h.abi_path.display()
                    );
                    seen += 1;
                }
            }
        }
    }
    println!("{seen} reference descriptions checked");
}

// ---------------------------------------------------------------------------------------------
// On a GPU
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs an NVIDIA sm_90 GPU; run with --ignored where there is one"]
fn gpu_times_generated_and_hand_written_against_the_copy_bandwidth() {
    if !wavefuse_runtime::CudaDevice::count().is_ok_and(|n| n > 0) {
        println!("skipped: no GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ab.json");
    let o = wavefuse(&[
        "ab",
        "gemv_int4",
        "allreduce_residual_rmsnorm",
        "--shapes",
        "qwen27b-tp4",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let j = read_json(&json);
    assert_eq!(j["mode"], "gpu");
    assert_eq!(j["copy_bandwidth"].as_array().unwrap().len(), 2);
    assert!(j["copy_bandwidth"][0]["gbps"].as_f64().unwrap() > 100.0);
    for r in j["rows"].as_array().unwrap() {
        assert!(r["verdict"].as_str().unwrap().starts_with("correct"), "{r}");
        let t = &r["generated"]["timing"];
        assert_eq!(t["repeats"][0]["samples"], 100);
        assert_eq!(t["repeats"].as_array().unwrap().len(), 2);
        assert!(
            t["rotation_bytes"].as_u64().unwrap() >= 4 * j["device"]["l2_bytes"].as_u64().unwrap()
                || t["l2_flushed"] == true
        );
    }
}

/// A generated kernel whose LDS is dynamic (sm_90 past 48 KiB: the tensor-core GEMV's ring at a
/// 256-lane, 128-column tile, 65 KB at batch 32) launches with its `dynamic_lds_bytes` and is
/// correct against the f64 reference on the GPU (without the runtime passing the size, the
/// launch fails or the arrays overlap past the first 48 KiB).
#[test]
#[ignore = "needs an NVIDIA sm_90 GPU; run with --ignored where there is one"]
fn gpu_checks_a_kernel_in_dynamic_shared_memory() {
    if !wavefuse_runtime::CudaDevice::count().is_ok_and(|n| n > 0) {
        println!("skipped: no GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ab.json");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args([
            "ab",
            "gemv_int4",
            "--shapes",
            "qwen27b-tp1-b32",
            "--json",
            json.to_str().unwrap(),
        ])
        .env_remove("WAVEFUSE_SCHEDULE")
        .env_remove("WAVEFUSE_SCHEDULE_GFX906")
        .env(
            "WAVEFUSE_SCHEDULE_SM90",
            "mma_scale=weight,x_in_lds=true,workgroup_size=256,columns_per_workgroup=128,\
             threads_per_column=2,k_unit_words=8,x_phase_units=2,async_stages=3",
        )
        .output()
        .expect("wavefuse runs");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let j = read_json(&json);
    for r in j["rows"].as_array().unwrap() {
        assert!(r["verdict"].as_str().unwrap().starts_with("correct"), "{r}");
    }
}

/// The Marlin-style hand-written kernel of `no_gpu_ab_binds_a_pipelined_kernel_in_dynamic_lds`
/// on the GPU: launched with its description's dynamic LDS (44-70 KB, past the 48 KiB a kernel
/// gets without the opt-in) and correct against the f64 reference at batch 16 and 64; replayed
/// in the timing graphs (it zeroes its own partials and counters for the next launch).
#[test]
#[ignore = "needs an NVIDIA sm_90 GPU; run with --ignored where there is one"]
fn gpu_checks_a_hand_written_kernel_in_dynamic_shared_memory() {
    if !wavefuse_runtime::CudaDevice::count().is_ok_and(|n| n > 0) {
        println!("skipped: no GPU");
        return;
    }
    let (src, abi) = user_kernel("gemv_int4_pipelined", "cu");
    let select = [
        "--shapes",
        "qwen27b-tp4-b16,qwen27b-tp4-b64",
        "--iters",
        "20",
    ];
    let (j, _) = ab_manual("b16 and b64", &select, false, &src, &abi);
    for r in j["rows"].as_array().unwrap() {
        assert!(r["verdict"].as_str().unwrap().starts_with("correct"), "{r}");
        assert_eq!(r["manual"]["check"]["pass"], true, "{r}");
    }
}

// ---------------------------------------------------------------------------------------------
// Placement without a GPU (issue 34)
// ---------------------------------------------------------------------------------------------

/// The main job's kernel: without a GPU the ranks are placed one per device (as TP is deployed,
/// as `wavefuse emit` prints it), so the fused TP 4 kernel, whose four ranks' grids do not fit
/// on one MI50 together, is generated for gfx906 and checked in the simulator. With
/// `--placement same-device` the same kernel is "not checked" with the numbers — never an error
/// or a WRONG of the kernel.
#[test]
fn no_gpu_ab_checks_the_fused_tp4_kernel_one_rank_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ab.json");
    let args = |placement: Option<&'static str>| {
        let mut a = vec![
            "ab",
            "gemv_int4_allreduce_rmsnorm",
            "--shapes",
            "qwen27b-tp4",
            "--no-gpu",
            "--json",
            json.to_str().unwrap(),
        ];
        if let Some(p) = placement {
            a.extend(["--placement", p]);
        }
        a
    };
    for placement in [None, Some("per-device")] {
        let o = wavefuse(&args(placement));
        let (out, err) = text(&o);
        assert!(o.status.success(), "{placement:?}: {out}\n{err}");
        let verdict = out
            .lines()
            .find(|l| l.starts_with("gemv_int4_allreduce_rmsnorm@qwen27b-tp4: "))
            .expect("a verdict line");
        assert!(
            verdict.contains("generated correct on the simulator"),
            "{verdict}"
        );
        assert!(out.contains("placement: one rank per device"), "{out}");
        let j = read_json(&json);
        assert_eq!(j["placement"], "per-device");
        assert_eq!(j["failures"], 0);
        let g = &j["rows"][0]["generated"];
        assert_eq!(g["check"]["pass"], true, "{g}");
        assert!(g["error"].is_null(), "{g}");
    }
    let o = wavefuse(&args(Some("same-device")));
    let (out, err) = text(&o);
    assert!(
        o.status.success(),
        "not a failure of the kernel: {out}\n{err}"
    );
    let verdict = out
        .lines()
        .find(|l| l.starts_with("gemv_int4_allreduce_rmsnorm@qwen27b-tp4: "))
        .expect("a verdict line");
    assert!(
        verdict.contains("not checked") && verdict.contains("do not fit on one device together"),
        "{verdict}"
    );
    assert!(
        !verdict.contains("WRONG") && !verdict.contains("ERROR"),
        "{verdict}"
    );
    assert_eq!(read_json(&json)["placement"], "same-device");
}

/// A user's kernel at a model's shapes (`examples/gemv_int4_q8.wfir`: INT4 × q8 GEMV, 5120 →
/// 17408, batch 8; and the same at Llama-3.1-8B's 4096 → 14336) without a GPU: checked in the
/// simulator on a scaled-down instance (the same kernel and schedule, fewer columns), within
/// seconds — not WRONG because the full grid would exceed the simulator's step budget (what `ab`
/// reported before).
#[test]
fn no_gpu_ab_checks_a_kernel_file_at_5120_to_17408_scaled_down_in_bounded_time() {
    let example = include_str!("../../examples/gemv_int4_q8.wfir");
    let dir = tempfile::tempdir().unwrap();
    for (k, n) in [(5120, 17408), (4096, 14336)] {
        let file = dir.path().join(format!("q8-{k}-{n}.wfir"));
        let kernel = example
            .replace("5120", &k.to_string())
            .replace("17408", &n.to_string());
        std::fs::write(&file, kernel).unwrap();
        let start = std::time::Instant::now();
        let o = wavefuse(&["ab", "--kernel-file", file.to_str().unwrap(), "--no-gpu"]);
        let seconds = start.elapsed().as_secs_f64();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}\n{err}");
        let verdict = out
            .lines()
            .find(|l| l.starts_with("gemv_int4_q8@own-tp1-b8: "))
            .expect("a verdict line");
        assert!(
            verdict.contains("generated correct on the simulator")
                && verdict.contains("scaled down"),
            "{verdict}"
        );
        assert!(verdict.contains(&format!("N {n} → ")), "{verdict}");
        assert!(!out.contains("WRONG"), "{out}");
        // Compiling the two sources with hipcc and NVRTC (uncached) takes most of it.
        assert!(seconds < 300.0, "took {seconds:.0} s");
        eprintln!("ab --kernel-file at {k} → {n}: {seconds:.1} s");
    }
}

// ---- issue 38: hand-written kernels as users write them ----

/// The hand-written kernels of `cli/tests/handwritten/` (written for issue 38).
fn handwritten_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/handwritten")
}

/// `name.EXT` and its description `name.EXT.abi.toml`; `name.VARIANT` is `name.EXT` described
/// by `name.VARIANT.abi.toml` (`gemv_int4_w4a8.host`: the same source, the host quantising).
fn user_kernel(name: &str, ext: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let d = handwritten_dir();
    match name.split_once('.') {
        Some((source, _)) => (
            d.join(format!("{source}.{ext}")),
            d.join(format!("{name}.abi.toml")),
        ),
        None => (
            d.join(format!("{name}.{ext}")),
            d.join(format!("{name}.{ext}.abi.toml")),
        ),
    }
}

/// `wavefuse ab gemv_int4 SELECT... [--no-gpu] --manual SRC --abi ABI --json J`: asserts it
/// succeeded (the message names `what` and gives the output) and returns its JSON report and
/// standard output.
fn ab_manual(what: &str, select: &[&str], no_gpu: bool, src: &Path, abi: &Path) -> (Json, String) {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("ab.json");
    let mut args = vec!["ab", "gemv_int4"];
    args.extend_from_slice(select);
    if no_gpu {
        args.push("--no-gpu");
    }
    args.extend_from_slice(&[
        "--manual",
        src.to_str().unwrap(),
        "--abi",
        abi.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let o = wavefuse(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{what}\n{out}\n{err}");
    (read_json(&json), out)
}

/// The compiler of a source's target is installed (else "skipped", a failure under CI).
fn compiler_of(ext: &str) -> bool {
    match ext {
        "hip" => wavefuse_test_support::found(
            "hipcc",
            suite::compiler(Arch::Gfx906, suite::Purpose::Run).version(),
        ),
        _ => wavefuse_test_support::found(
            "NVRTC",
            suite::compiler(Arch::Sm90, suite::Purpose::Run).version(),
        ),
    }
}

/// The values, the launch and the FP16 zero points of a user's kernel are bound as described:
/// `K`, `N`, `group_size` from the op-level shape, the grid `n / 128`, the 2-D split-K grid
/// `[n / 64, 4]`, the symbol picked among two kernels of one file.
#[test]
fn a_users_int_shapes_2d_grid_and_fp16_zeros_are_bound_from_the_shape() {
    for ext in ["hip", "cu"] {
        let arch = if ext == "hip" {
            Arch::Gfx906
        } else {
            Arch::Sm90
        };
        let g = suite::generate(
            &spec(KernelId::GemvInt4, 4),
            arch,
            &Default::default(),
            wavefuse_harness::policy::Placement::PerDevice,
        )
        .unwrap();
        let (src, abi) = user_kernel("gemv_int4_fp16z", ext);
        let h = Hand::load_for(&abi, Some(&src), Some(&g.ir)).unwrap();
        assert_eq!(h.check(&g.lowered), Vec::<String>::new(), "{ext}");
        let bound = h.launch_abi(4);
        assert_eq!((bound.grid, bound.workgroup_size), (4352 / 128, 128));
        assert_eq!((bound.grid_dims, bound.block_dims), (None, None));
        let values: Vec<_> = bound
            .params
            .iter()
            .filter_map(|p| p.value.clone().map(|v| (p.name.as_str(), v)))
            .collect();
        assert_eq!(
            values,
            [
                ("K", "5120".into()),
                ("N", "4352".into()),
                ("group_size", "128".into())
            ]
        );
        // The runtime takes the description as it takes a generated one.
        let data = bound.param_data().unwrap();
        assert_eq!(data.len(), 8);

        let (src, abi) = user_kernel("gemv_int4_splitk", ext);
        let h = Hand::load_for(&abi, Some(&src), Some(&g.ir)).unwrap();
        assert_eq!(h.check(&g.lowered), Vec::<String>::new(), "{ext}");
        let bound = h.launch_abi(4);
        assert_eq!(bound.grid_dims, Some([4352 / 64, 4, 1]));
        assert_eq!((bound.grid, bound.workgroup_size), (4352 / 64 * 4, 64));
        let splits = bound.params.iter().find(|p| p.name == "splits").unwrap();
        assert_eq!(splits.value.as_deref(), Some("4"));
    }
}

/// The FP16 zero points the runtime binds (`encode_zeros`: element 8·w + i is nibble i of packed
/// word w, decoded under the weight's convention) give the f64 oracle's result: the GEMV
/// computed with them, `[K/G, N]` indexed as the hand-written kernel indexes them, against the
/// reference of the seeded workload.
#[test]
fn fp16_zero_points_bound_for_a_hand_written_kernel_agree_with_the_oracle() {
    use wavefuse::ir::reference::HostData;
    use wavefuse::ir::{BufferType, WeightFormat};
    use wavefuse_codegen::lowered::Ty;
    use wavefuse_harness::suite::Data;
    let c = spec(KernelId::GemvInt4, 1).small();
    let ir = suite::op_kernel(&c).unwrap().unwrap();
    let d = Data::new(&ir, 7).unwrap();
    let (w, x, y) = (
        ir.buffer_by_name("w").unwrap(),
        ir.buffer_by_name("x").unwrap(),
        ir.buffer_by_name("y").unwrap(),
    );
    let BufferType::Weight(wt) = ir.buffer(w).unwrap().local_type() else {
        panic!("w is a weight")
    };
    let WeightFormat::Gptq(layout) = wt.format else {
        panic!("GPTQ")
    };
    let (k, n, group) = (wt.k, wt.n, layout.group.rows(wt.k));
    let HostData::Int4(p) = &d.inputs[0][&w] else {
        panic!("packed")
    };
    let HostData::Tensor(xs) = &d.inputs[0][&x] else {
        panic!("tensor")
    };
    let bytes =
        wavefuse_runtime::exec::encode_zeros(&p.qzeros, layout.zero, Ty::F16, k / group * n)
            .unwrap();
    let zeros: Vec<f64> = bytes
        .chunks(2)
        .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64())
        .collect();
    assert_eq!(zeros.len(), k / group * n);
    let want = &d.reference[0][&y].data;
    let mut worst = 0.0f64;
    for col in 0..n {
        let mut acc = 0.0;
        for row in 0..k {
            let word = p.qweight[(row / 8) * n + col] as u32;
            let q = f64::from((word >> (4 * (row % 8))) & 15);
            let g = row / group;
            acc += (q - zeros[g * n + col]) * p.scales[g * n + col] * xs.data[row];
        }
        worst = worst.max((acc - want[col]).abs() / want[col].abs().max(1.0));
    }
    assert!(worst < 1e-3, "worst relative error {worst}");
    // A length that does not match the packed words is refused, not truncated.
    let e = wavefuse_runtime::exec::encode_zeros(&p.qzeros, layout.zero, Ty::F16, 8).unwrap_err();
    assert!(e.contains("zero points"), "{e}");
}

/// Each hand-written kernel, in HIP and in CUDA, A/B-tested against the generated `gemv_int4`
/// on the no-GPU path: the generated kernel checked in the simulator against the f64 oracle,
/// the hand-written description checked against it and the source, the source compiled, and on
/// gfx906 the model of its own symbol.
#[test]
fn no_gpu_ab_binds_and_compiles_the_users_hand_written_kernels() {
    for (name, ext) in [
        ("gemv_int4_fp16z", "hip"),
        ("gemv_int4_fp16z", "cu"),
        ("gemv_int4_splitk", "hip"),
        ("gemv_int4_splitk", "cu"),
        ("gemv_int4_reload", "hip"),
        ("gemv_int4_splitk2", "hip"),
        ("gemv_int4_splitk2", "cu"),
        ("gemv_int4_w4a8", "hip"),
        ("gemv_int4_w4a8", "cu"),
        ("gemv_int4_w4a8.host", "hip"),
    ] {
        let (src, abi) = user_kernel(name, ext);
        let (j, out) = ab_manual(&format!("{name}.{ext}"), &["--tp", "4"], true, &src, &abi);
        let row = &j["rows"][0];
        assert_eq!(row["generated"]["check"]["pass"], true, "{out}");
        let manual = &row["manual"];
        assert!(
            manual["error"].is_null(),
            "{name}.{ext}: {}",
            manual["error"]
        );
        if !compiler_of(ext) {
            continue;
        }
        let arch = if ext == "hip" { "gfx906" } else { "sm90" };
        let res = manual["resources"].as_array().unwrap();
        let r = res.iter().find(|r| r["arch"] == arch).unwrap();
        assert!(r["usage"]["registers"].as_u64().unwrap() > 0, "{r}");
        if ext == "hip" {
            let symbol = match name {
                "gemv_int4_splitk" => "gemv_splitk",
                "gemv_int4_reload" => "gemv_reload",
                // Of two launches, the model counts the loop of the one with the weights.
                "gemv_int4_splitk2" => "gemv_splitk_partial",
                "gemv_int4_w4a8" | "gemv_int4_w4a8.host" => "gemv_w4a8",
                _ => "gemv_tile128",
            };
            let counted = r["modelled_mi50"]["inputs"]["counted"]
                .as_str()
                .unwrap_or("");
            assert!(counted.contains(&format!("of `{symbol}`")), "{r}");
            // Every one says how many weights a trip handles: 8, from its ABI's `[model]`.
            assert!(counted.contains("8 weights per trip (the ABI's"), "{r}");
        }
    }
}

/// A user's Marlin-style kernel (`gemv_int4_pipelined.cu`: a block-wide `cp.async` pipeline in
/// dynamic shared memory on a persistent grid): its parametric description sizes the dynamic LDS
/// and the grid from the batch and checks clean against the generated kernel at batch 16 and 64
/// of the TP 4 rank (5120 -> 4352: 17 tiles of 256 columns x 80 stages of 64 K rows), and NVRTC
/// compiles it without spills (`ab --no-gpu`).
#[test]
fn no_gpu_ab_binds_a_pipelined_kernel_in_dynamic_lds() {
    let (src, abi) = user_kernel("gemv_int4_pipelined", "cu");
    for batch in [16usize, 64] {
        let case = CaseSpec {
            batch,
            ..spec(KernelId::GemvInt4, 4)
        };
        let g = suite::generate(
            &case,
            Arch::Sm90,
            &Default::default(),
            wavefuse_harness::policy::Placement::PerDevice,
        )
        .unwrap();
        let h = Hand::load_for(&abi, Some(&src), Some(&g.ir)).unwrap();
        assert_eq!(h.check(&g.lowered), Vec::<String>::new(), "b{batch}");
        let bound = h.launch_abi(4);
        // Per stage: 8 padded rows of 256 packed words, the batch's 64 activations per row,
        // 256 scales and 32 zero words; 4 stages.
        let stage = 8 * (256 * 4 + 32) + batch as u64 * 64 * 2 + 256 * 2 + 32 * 4;
        assert_eq!(bound.dynamic_lds_bytes, 4 * stage, "b{batch}");
        let per_sm = if batch <= 32 { 2 } else { 1 };
        assert_eq!(bound.grid, 132 * per_sm, "b{batch}");
        assert_eq!(bound.workgroup_size, 256);

        let shape = format!("qwen27b-tp4-b{batch}");
        let (j, _) = ab_manual(&shape, &["--shapes", &shape], true, &src, &abi);
        let manual = &j["rows"][0]["manual"];
        assert!(manual["error"].is_null(), "b{batch}: {}", manual["error"]);
        if !compiler_of("cu") {
            continue;
        }
        let r = &manual["resources"][0];
        assert_eq!(r["arch"], "sm90", "{r}");
        assert!(r["usage"]["registers"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["usage"]["spills"], 0, "{r}");
        // The report counts the dynamic LDS with the compiler's static figure.
        let lds = r["usage"]["lds_bytes"].as_u64().unwrap();
        assert!((4 * stage..4 * stage + 1024).contains(&lds), "{r}");
    }
}

/// A user's kernel outside the batches its description covers (`min_batch` / `max_batch`: the
/// pipelined fixture tiles the batch in MMA columns of 8 and `static_assert`s it) is reported
/// absent at those rows, with the range, not compiled into an error; the rows inside it are
/// bound as usual, in the same `ab`.
#[test]
fn a_user_kernel_below_its_min_batch_is_absent_not_an_error() {
    let (src, abi) = user_kernel("gemv_int4_pipelined", "cu");
    let shapes = ["--shapes", "qwen27b-tp4-b1,qwen27b-tp4-b16"];
    let (j, _) = ab_manual("b1 and b16", &shapes, true, &src, &abi);
    let why = j["rows"][0]["manual"]["absent"]
        .as_str()
        .unwrap_or_else(|| panic!("{j}"));
    assert!(
        why.contains("batch 1 is outside the batch 8-64 the description covers"),
        "{why}"
    );
    assert!(
        j["rows"][1]["manual"]["absent"].is_null(),
        "{}",
        j["rows"][1]
    );
    assert!(
        j["rows"][1]["manual"]["error"].is_null(),
        "{}",
        j["rows"][1]
    );
}

/// `check --manual` compiles the named symbol of a file of two kernels, prints its resources and
/// values, and (gfx906) the model of that symbol with the loop it counted.
#[test]
fn check_manual_prints_the_named_symbols_model() {
    let (src, abi) = user_kernel("gemv_int4_fp16z", "hip");
    if !compiler_of("hip") {
        return;
    }
    let o = wavefuse(&[
        "check",
        "--manual",
        src.to_str().unwrap(),
        "--abi",
        abi.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("`gemv_tile128`"), "{out}");
    assert!(out.contains("grid [34, 1, 1] x block [128, 1, 1]"), "{out}");
    assert!(
        out.contains("K = 5120, N = 4352, group_size = 128"),
        "{out}"
    );
    assert!(out.contains("modelled (MI50)"), "{out}");
    assert!(out.contains("of `gemv_tile128`"), "{out}");
    // The other kernel of the file is not what was counted.
    assert!(!out.contains("gemv_tile64"), "{out}");

    let (src, abi) = user_kernel("gemv_int4_splitk", "hip");
    let o = wavefuse(&[
        "check",
        "--manual",
        src.to_str().unwrap(),
        "--abi",
        abi.to_str().unwrap(),
        "--tp",
        "4",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("grid [68, 4, 1] x block [64, 1, 1]"), "{out}");
    assert!(out.contains("splits = 4, zp_add = 1"), "{out}");
}

/// The MI50 model of a user's kernel counts its executed path (issue 38): `gemv_reload`
/// (`cli/tests/handwritten/gemv_int4_reload.hip`) reloads its group's scale and zero point in a
/// block hipcc places after the loop's inner back edge. Hand count of hipcc 5.2's code: 38 VALU
/// on every trip, 33 in the reload, run once per group of 128 rows = 16 trips of one word:
/// 38 + 33 / 16 = 40.06 VALU per trip, 5.01 per weight (charged on every trip: 71 / 8 = 8.88).
/// One column per lane at 5120 → 4352 leaves one dword and eight shorts in flight per lane and
/// 68 waves on 60 CUs: latency-bound, and said.
#[test]
fn check_manual_models_a_reload_kernel_on_its_executed_path_gfx906() {
    let (src, abi) = user_kernel("gemv_int4_reload", "hip");
    if !compiler_of("hip") {
        return;
    }
    let o = wavefuse(&[
        "check",
        "--manual",
        src.to_str().unwrap(),
        "--abi",
        abi.to_str().unwrap(),
        "--tp",
        "4",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("grid [68, 1, 1] x block [64, 1, 1]"), "{out}");
    assert!(
        out.contains("K = 5120, N = 4352, group_size = 128, zp_add = 1"),
        "{out}"
    );
    assert!(
        out.contains(
            "of `gemv_reload`: 40.06 VALU per trip (33 of its 71 in blocks a branch skips, \
             charged once per 16 trips), 8 weights per trip (the ABI's)"
        ),
        "{out}"
    );
    assert!(out.contains("inputs: 5.01 VALU/weight"), "{out}");
    assert!(out.contains("(latency-bound"), "{out}");
    assert!(out.contains("FEWER THAN 16 KB: latency-bound"), "{out}");
}

/// What the ABI cannot describe is refused by name, and a bad value or launch is named.
#[test]
fn unsupported_and_bad_descriptions_of_users_kernels_are_named() {
    let g = suite::generate(
        &spec(KernelId::GemvInt4, 4),
        Arch::Gfx906,
        &Default::default(),
        wavefuse_harness::policy::Placement::PerDevice,
    )
    .unwrap();
    let (src, abi) = user_kernel("gemv_int4_splitk", "hip");
    let text0 = std::fs::read_to_string(&abi).unwrap();
    let problems = |edit: &dyn Fn(&str) -> String| {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("edited.abi.toml");
        std::fs::write(&p, edit(&text0)).unwrap();
        Hand::load_for(&p, Some(&src), Some(&g.ir))
            .unwrap()
            .check(&g.lowered)
    };
    // [[launches]] beside a top-level kernel is refused when the description is read.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("edited.abi.toml");
    std::fs::write(
        &p,
        format!("{text0}\n[[launches]]\nsymbol = \"reduce\"\ngrid = \"n / 64\"\nblock = 64\n"),
    )
    .unwrap();
    let e = Hand::load_for(&p, Some(&src), Some(&g.ir))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "symbol, grid, workgroup_size, [[params]], [model] at the top level and [[launches]]"
        ),
        "{e}"
    );
    let i8x = problems(&|t| {
        t.replacen(
            "name = \"x\"\nkind = \"array\"\nty = \"f16\"",
            "name = \"x\"\nkind = \"array\"\nty = \"i8\"",
            1,
        )
    });
    assert!(
        i8x.iter()
            .any(|p| p.starts_with("parameter `x` (`x.data`) is i8")
                && p.contains("needs `[quantise] input = \"x\"`")),
        "{i8x:?}"
    );
    let zero = problems(&|t| {
        t.replacen(
            "weight_words_per_trip = 1",
            "weight_words_per_trip = 0\nbranch_every = \"m / 8\"",
            1,
        )
    });
    assert!(
        zero.iter()
            .any(|p| p == "[model] weight_words_per_trip = 0: must be positive")
            && zero
                .iter()
                .any(|p| p.starts_with("[model] branch_every:")
                    && p.contains("unknown variable `m`")),
        "{zero:?}"
    );
    let unknown = problems(&|t| t.replacen("value = \"4\"", "value = \"m / 2\"", 1));
    assert!(
        unknown
            .iter()
            .any(|p| p.starts_with("parameter `splits` (value = \"m / 2\")")
                && p.contains("unknown variable `m`")),
        "{unknown:?}"
    );
    let ragged = problems(&|t| t.replacen("grid = [\"n / 64\", 4]", "grid = [\"n / 3\", 4]", 1));
    assert!(
        ragged.iter().any(|p| p.starts_with("grid.x:")),
        "{ragged:?}"
    );
    let big = problems(&|t| t.replacen("workgroup_size = 64", "workgroup_size = [64, 32]", 1));
    assert!(
        big.iter().any(|p| p.contains("workgroup of 2048 lanes")),
        "{big:?}"
    );
    // Expressions need the shape: a description loaded without a kernel says so.
    let (src_a, abi_a) = user_kernel("gemv_int4_fp16z", "hip");
    let e = Hand::load(&abi_a, Some(&src_a))
        .unwrap()
        .launch()
        .unwrap_err();
    assert!(
        e.iter()
            .any(|p| p.starts_with("grid.x: `n / 128` is an expression of the op-level shape")),
        "{e:?}"
    );
    let novalue = problems(&|t| t.replacen("value = \"1\"\n", "", 1));
    assert!(
        novalue
            .iter()
            .any(|p| p.starts_with("parameter `zp_add` (value) has no `value`")),
        "{novalue:?}"
    );
}

// ---- issue 38: several launches for one op, pre-quantised (W4A8) inputs ----

fn gemv_int4_tp4(arch: Arch) -> suite::Generated {
    suite::generate(
        &spec(KernelId::GemvInt4, 4),
        arch,
        &Default::default(),
        wavefuse_harness::policy::Placement::PerDevice,
    )
    .unwrap()
}

/// An op of two launches (`gemv_int4_splitk2`: a 2-D split-K GEMV writing FP32 partials to a
/// shared scratch array, then a reduce launch) is bound as described, in HIP and CUDA: each
/// launch's symbol, grid and values, the scratch sized from the shape and passed to both.
#[test]
fn a_split_k_op_of_two_launches_is_bound_per_launch_with_shared_scratch() {
    for (ext, arch) in [("hip", Arch::Gfx906), ("cu", Arch::Sm90)] {
        let g = gemv_int4_tp4(arch);
        let (src, abi) = user_kernel("gemv_int4_splitk2", ext);
        let h = Hand::load_for(&abi, Some(&src), Some(&g.ir)).unwrap();
        assert_eq!(h.check(&g.lowered), Vec::<String>::new(), "{ext}");
        assert_eq!(h.symbols(), "gemv_splitk_partial + splitk_reduce");
        assert_eq!(h.main_stage().abi.symbol, "gemv_splitk_partial");
        let abis = h.launch_abis(4);
        assert_eq!(abis.len(), 2);
        assert_eq!(abis[0].grid_dims, Some([4352 / 64, 8, 1]));
        assert_eq!((abis[1].grid, abis[1].workgroup_size), (4352 / 64, 64));
        let shared = h.shared_scratch().unwrap();
        assert_eq!(shared.len(), 1);
        assert_eq!(
            (shared[0].name.as_str(), shared[0].len),
            ("partials", 8 * 4352)
        );
        for a in &abis {
            let p = a.params.iter().find(|p| p.name == "partials").unwrap();
            assert_eq!(
                (p.buffer.as_deref(), p.part.as_deref(), p.len),
                (Some("partials"), Some("data"), Some(8 * 4352)),
                "the runtime binds the shared array to both launches"
            );
            // The runtime takes each description as it takes a generated one.
            a.param_data().unwrap();
        }
        let splits: Vec<_> = abis
            .iter()
            .map(|a| {
                a.params
                    .iter()
                    .find(|p| p.name == "splits")
                    .unwrap()
                    .value
                    .clone()
            })
            .collect();
        assert_eq!(splits, [Some("8".into()), Some("8".into())]);
    }
}

/// What can go wrong in a description of several launches or of pre-quantised inputs is named,
/// with the launch and the ABI file's parameter names.
#[test]
fn several_launch_and_quantise_mismatches_are_named() {
    let g = gemv_int4_tp4(Arch::Gfx906);
    let check = |name: &str, edit: &dyn Fn(&str) -> String| {
        let (src, abi) = user_kernel(name, "hip");
        let text = std::fs::read_to_string(&abi).unwrap();
        let edited = edit(&text);
        assert_ne!(edited, text, "the edit applies");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("edited.abi.toml");
        std::fs::write(&p, edited).unwrap();
        Hand::load_for(&p, Some(&src), Some(&g.ir))
            .unwrap()
            .check(&g.lowered)
    };
    let has = |problems: &[String], want: &[&str]| {
        assert!(
            problems.iter().any(|p| want.iter().all(|w| p.contains(w))),
            "{want:?} in {problems:?}"
        );
    };
    // An unknown symbol: the launch, and the kernels the file has.
    let p = check("gemv_int4_splitk2", &|t| {
        t.replacen("symbol = \"splitk_reduce\"", "symbol = \"splitk_sum\"", 1)
    });
    has(
        &p,
        &[
            "launch 2 `splitk_sum`: ",
            "no `__global__` function `splitk_sum`",
            "gemv_splitk_partial, splitk_reduce",
        ],
    );
    // The scratch's size: the parameter's `len` against the declaration at this shape.
    let p = check("gemv_int4_splitk2", &|t| {
        t.replacen("len = \"= 8 * w.n\"", "len = \"= 4 * w.n\"", 1)
    });
    has(
        &p,
        &[
            "launch 1 `gemv_splitk_partial`: scratch size: parameter `partials` declares 17408 \
             elements, [[scratch]] `partials` has 34816 at this shape (len = \"8 * n\")",
        ],
    );
    // The argument count of one launch.
    let p = check("gemv_int4_splitk2", &|t| {
        let cut = t.rfind("[[launches.params]]\nindex = 3").unwrap();
        t[..cut].to_owned()
    });
    has(
        &p,
        &[
            "launch 2 `splitk_reduce`: wrong count: the kernel takes 4 parameters (partials, y, N, \
             splits), the ABI declares 3 (partials, y, N)",
        ],
    );
    // A scratch array nobody declared, and a declared one nobody takes.
    let p = check("gemv_int4_splitk2", &|t| {
        t.replace("buffer = \"partials\"", "buffer = \"sums\"")
    });
    has(
        &p,
        &["parameter `partials`: scratch `sums` is not declared ([[scratch]] has: partials)"],
    );
    has(&p, &["[[scratch]] `partials` is taken by no launch"]);
    // An op-level array no launch takes.
    let p = check("gemv_int4_splitk2", &|t| {
        t.replacen(
            "buffer = \"y\"\npart = \"data\"",
            "buffer = \"x\"\npart = \"data\"",
            1,
        )
    });
    has(&p, &["missing: `y.data`", "of any launch"]);
    // The quantisation launch: unknown, or after the GEMV.
    let p = check("gemv_int4_w4a8", &|t| {
        t.replacen("kernel = \"quantise_x_int8\"", "kernel = \"quantise\"", 1)
    });
    has(
        &p,
        &[
            "[quantise] kernel = `quantise`: no launch has that symbol (launches: quantise_x_int8, gemv_w4a8)",
        ],
    );
    // Host quantisation: the codes must be i8, and the scales need the declaration.
    let p = check("gemv_int4_w4a8.host", &|t| {
        t.replacen(
            "name = \"xq\"\nkind = \"array\"\nty = \"i8\"",
            "name = \"xq\"\nkind = \"array\"\nty = \"f16\"",
            1,
        )
    });
    has(
        &p,
        &["parameter `xq` (`x.data`) is f16", "binds the INT8 codes"],
    );
    let p = check("gemv_int4_w4a8.host", &|t| {
        t.replacen("[quantise]\ninput = \"x\"\nby = \"host\"\n", "", 1)
    });
    has(
        &p,
        &[
            "parameter `xq` (`x.data`) is i8",
            "needs `[quantise] input = \"x\"`",
        ],
    );
    has(
        &p,
        &[
            "parameter `xs` takes `x.qscale`",
            "no `[quantise] input = \"x\"`",
        ],
    );
}

/// The tolerance of a W4A8 A/B (docs/abi.md): the f64 GEMV on the host-quantised activations of
/// the seeded workload (what a W4A8 kernel computes, before its FP32 and FP16 roundings) against
/// the f64 oracle on the FP16 activations, at the gemv_int4 shapes of TP 1 and 4: within
/// `quantised_tolerance`, and outside the FP16 tolerance (so the allowance is needed, and the
/// check could fail).
#[test]
fn the_w4a8_tolerance_covers_the_activation_quantisation_and_is_needed() {
    use wavefuse::ir::reference::HostData;
    use wavefuse::ir::{BufferType, WeightFormat};
    use wavefuse_harness::ab::handwritten::quantised_tolerance;
    use wavefuse_harness::suite::Data;
    for tp in [1, 4] {
        let ir = suite::op_kernel(&spec(KernelId::GemvInt4, tp))
            .unwrap()
            .unwrap();
        let d = Data::new(&ir, 11).unwrap();
        let (w, x, y) = (
            ir.buffer_by_name("w").unwrap(),
            ir.buffer_by_name("x").unwrap(),
            ir.buffer_by_name("y").unwrap(),
        );
        let BufferType::Weight(wt) = ir.buffer(w).unwrap().local_type() else {
            panic!("w is a weight")
        };
        let WeightFormat::Gptq(layout) = wt.format else {
            panic!("GPTQ")
        };
        let (k, n, group) = (wt.k, wt.n, layout.group.rows(wt.k));
        let HostData::Int4(p) = &d.inputs[0][&w] else {
            panic!("packed")
        };
        let HostData::Tensor(xs) = &d.inputs[0][&x] else {
            panic!("tensor")
        };
        let (codes, scales) = wavefuse_runtime::exec::quantise_rows(&xs.data, k);
        let zeros = wavefuse_runtime::exec::zeros_of(&p.qzeros, layout.zero);
        let want = &d.reference[0][&y].data;
        let (mut err2, mut ref2) = (0.0f64, 0.0f64);
        for col in 0..n {
            let mut acc = 0.0;
            for (row, &code) in codes.iter().enumerate() {
                let word = p.qweight[(row / 8) * n + col] as u32;
                let q = f64::from((word >> (4 * (row % 8))) & 15);
                let g = row / group;
                acc += (q - zeros[g * n + col]) * p.scales[g * n + col] * f64::from(code);
            }
            let got = acc * scales[0];
            err2 += (got - want[col]).powi(2);
            ref2 += want[col].powi(2);
        }
        let rel = (err2 / ref2).sqrt();
        let tol = quantised_tolerance(1e-3, &xs.data, k);
        println!("TP {tp}: W4A8 rel L2 {rel:.2e}, tolerance {tol:.2e}");
        assert!(rel < tol, "TP {tp}: {rel} over {tol}");
        assert!(rel > 1e-3, "TP {tp}: {rel}: the FP16 tolerance would do");
        // The estimate the tolerance is 3x of: s / (sqrt(12) rms), within a factor 2 of what
        // the quantisation does.
        let est = (tol - 1e-3) / 3.0;
        assert!(
            rel > est / 2.0 && rel < 2.0 * est,
            "{rel} vs estimate {est}"
        );
    }
}

/// `check --manual` of an op of several launches prints each launch (its grid, resources and
/// values), the shared scratch, and on gfx906 each launch's modelled time and their sum: the
/// weight loop's launch counted as one kernel, every other launch a streaming launch (its bytes
/// / 0.85 TB/s + 5 us launch gap).
#[test]
fn check_manual_prints_each_launch_and_the_modelled_sum_gfx906() {
    if !compiler_of("hip") {
        return;
    }
    for (name, first, second) in [
        ("gemv_int4_splitk2", "gemv_splitk_partial", "splitk_reduce"),
        ("gemv_int4_w4a8", "quantise_x_int8", "gemv_w4a8"),
    ] {
        let (src, abi) = user_kernel(name, "hip");
        let o = wavefuse(&[
            "check",
            "--manual",
            src.to_str().unwrap(),
            "--abi",
            abi.to_str().unwrap(),
            "--tp",
            "4",
        ]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}\n{err}");
        assert!(out.contains("2 launches of"), "{out}");
        assert!(out.contains(&format!("launch 1 `{first}`: grid")), "{out}");
        assert!(out.contains(&format!("launch 2 `{second}`: grid")), "{out}");
        let us = |prefix: &str| -> f64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix} in {out}"));
            line[prefix.len()..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let (main, other) = if name == "gemv_int4_w4a8" {
            ("gemv_w4a8", "quantise_x_int8")
        } else {
            ("gemv_splitk_partial", "splitk_reduce")
        };
        let gemv = us(&format!("launch `{main}` (the weight loop): "));
        let aux = us(&format!("launch `{other}`: "));
        let sum = us("sum of 2 launches: ");
        assert!(
            (gemv + aux - sum).abs() < 0.11,
            "{gemv} + {aux} != {sum}\n{out}"
        );
        // The other launch moves little: about its launch gap.
        assert!((5.0..6.0).contains(&aux), "{aux}\n{out}");
        assert!(out.contains(&format!("of `{main}`")), "{out}");
        if name == "gemv_int4_splitk2" {
            assert!(
                out.contains("scratch `partials`: 34816 x f32 = 139264 bytes per rank"),
                "{out}"
            );
            assert!(out.contains("values: K = 5120, N = 4352, group_size = 128, splits = 8"));
        } else {
            assert!(out.contains("quantised: `x` to INT8 per token"), "{out}");
        }
    }
}

/// On a GPU, the ops of several launches and the W4A8 kernels (the CUDA twins) are bound, run
/// in order and checked against the oracle — the W4A8 ones at the activation-quantisation
/// tolerance — then timed.
#[test]
#[ignore = "needs an NVIDIA sm_90 GPU; run with --ignored where there is one"]
fn gpu_ab_runs_the_users_split_k_and_w4a8_kernels_of_several_launches() {
    if !wavefuse_runtime::CudaDevice::count().is_ok_and(|n| n > 0) {
        println!("skipped: no GPU");
        return;
    }
    for name in ["gemv_int4_splitk2", "gemv_int4_w4a8", "gemv_int4_w4a8.host"] {
        let (src, abi) = user_kernel(name, "cu");
        let (j, _) = ab_manual(name, &["--tp", "4"], false, &src, &abi);
        let m = &j["rows"][0]["manual"];
        assert!(m["error"].is_null(), "{name}: {m}");
        assert_eq!(m["check"]["pass"], true, "{name}: {m}");
        assert!(m["timing"].is_object(), "{name}: {m}");
    }
}

/// A project reference past its `max_batch` (the source's own limit, batch 1-8 here) is reported
/// absent with that reason, not compiled into an ERROR row and exit 1 (the 2026-12-05 H200
/// batch-64 run exited 1 at every batch above 8 for this reason); the generated kernel is still
/// checked.
#[test]
fn a_reference_past_its_max_batch_is_absent_not_an_error() {
    let o = wavefuse(&[
        "ab",
        "gemv_int4_dual_silu",
        "--shapes",
        "qwen27b-tp1-b16",
        "--no-gpu",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("no hand-written version at batch 16 (the reference covers batch 1-8"),
        "{out}"
    );
    assert!(out.contains("generated correct on the simulator"), "{out}");
    assert!(!out.contains("ERROR"), "{out}");
}
