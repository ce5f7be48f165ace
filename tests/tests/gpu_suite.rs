//! The GPU suite (DESIGN.md §7) through the same entry point as `wavefuse gpu-suite`: ignored by
//! default; on a machine with an NVIDIA GPU, `cargo test -p wavefuse-tests --test gpu_suite --
//! --ignored --nocapture` runs the quick suite (`WAVEFUSE_SUITE_FULL=1`: the full one). Without a
//! GPU it says "skipped: no GPU". The one-command way on a GPU machine is scripts/gpu-suite.sh.

use wavefuse_harness::suite::{self, Status, SuiteError, SuiteOptions};

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_suite_sm90() {
    suite::locate_nvrtc();
    let full = std::env::var_os("WAVEFUSE_SUITE_FULL").is_some_and(|v| v == "1");
    let report = match suite::run_suite(&SuiteOptions::new(!full)) {
        Ok(r) => r,
        Err(SuiteError::NoGpu(why) | SuiteError::Placement(why)) => {
            return println!("skipped: no GPU ({why})");
        }
    };
    check(&report);
}

/// One rank per GPU: the communicating kernels at TP 2 (and 4 where 4 GPUs are visible), with a
/// launch skew. Fewer than 2 GPUs: "skipped: no GPU".
#[test]
#[ignore = "needs 2 or more NVIDIA GPUs"]
fn gpu_suite_per_device_sm90() {
    suite::locate_nvrtc();
    let visible = match <wavefuse_runtime::CudaDevice as wavefuse_runtime::Device>::count() {
        Ok(n) if n >= 2 => n,
        Ok(n) => return println!("skipped: no GPU (per-device needs 2 GPUs, {n} visible)"),
        Err(e) => return println!("skipped: no GPU ({e})"),
    };
    let mut o = SuiteOptions::new(true);
    o.placement = suite::SuitePlacement::PerDevice;
    o.kernels = suite::COMMUNICATING.to_vec();
    o.tps = suite::per_device_tps(visible);
    o.skew = suite::default_per_device_skew();
    let report = match suite::run_suite(&o) {
        Ok(r) => r,
        Err(SuiteError::NoGpu(why) | SuiteError::Placement(why)) => {
            return println!("skipped: no GPU ({why})");
        }
    };
    check(&report);
}

fn check(report: &suite::Report) {
    println!("{}", report.markdown());
    let failed: Vec<String> = report
        .cases
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| format!("{}: {}", c.spec.label(), c.detail))
        .collect();
    assert!(
        failed.is_empty(),
        "{} case(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(report.count(Status::Pass) > 0, "nothing ran");
}
