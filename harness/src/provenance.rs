//! Where a result was obtained: the one provenance header of every report.
//!
//! `ab`, `gpu-suite`, `mgpu-bench`, `tune`, `llvm-diff` and the examples write results that
//! must say on which device, driver, runtime and compiler, from which commit and when they were
//! obtained (DESIGN.md §8). [`Provenance`] is that header, built in one place
//! ([`Provenance::of_device`] on a GPU, [`Provenance::without_gpu`] without one), printed by one
//! function ([`Provenance::line`]) and serialised by serde under the same keys in every JSON
//! report ([`Provenance::json_with`]).

use serde::Serialize;
use serde_json::Value as Json;
use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;
use wavefuse_runtime::device::Device;
use wavefuse_runtime::exec;

use crate::pipeline::{Purpose, compiler};

/// The device, driver, runtime and compiler a result was obtained with, the commit of the binary
/// and the date.
///
/// Serialised (serde) as the top-level keys `device` (an object), `driver_version`,
/// `cuda_version`, `compiler`, `commit` and `date` of every report's JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Provenance {
    /// The GPU (or `none`).
    pub device: DeviceInfo,
    /// Kernel-module (driver) version: `/proc/driver/nvidia/version` (NVIDIA) or
    /// `/sys/module/amdgpu/version` (AMD); `none` without a GPU where neither exists.
    #[serde(rename = "driver_version")]
    pub driver: String,
    /// The CUDA version the driver supports (`cuDriverGetVersion`); through the HIP entry points
    /// on an NVIDIA GPU (the test double) followed by the HIP runtime library; on an AMD GPU
    /// `none (HIP: …)` with the HIP runtime library used; `none` without a GPU.
    #[serde(rename = "cuda_version")]
    pub cuda: String,
    /// The compiler (and its version) of the code the report is about.
    pub compiler: String,
    /// The commit the binary was built from (`-dirty` with uncommitted changes).
    pub commit: String,
    /// UTC date and time, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
}

/// The GPU part of a [`Provenance`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceInfo {
    /// Device name (`none` without a GPU).
    pub name: String,
    /// GPUs the run used (0 without a GPU).
    pub count: u32,
    /// SMs (NVIDIA) or CUs (AMD) of one GPU.
    pub sms: u32,
    /// L2 bytes of one GPU (0 without a GPU).
    pub l2_bytes: u64,
    /// Whether the GPU supports cooperative launch.
    pub cooperative_launch: bool,
}

impl Provenance {
    /// The header of a run on `dev` (one GPU; see [`Provenance::with_devices`]) of code compiled
    /// for `arch`, by a binary built from `commit`.
    pub fn of_device<D: Device>(
        dev: &D,
        arch: Arch,
        commit: &str,
    ) -> Result<Self, wavefuse_runtime::Error> {
        let info = dev.info();
        let (driver, cuda) = versions(dev);
        Ok(Provenance {
            device: DeviceInfo {
                name: info.name.clone(),
                count: 1,
                sms: info.compute_units,
                l2_bytes: wavefuse_runtime::timing::l2_bytes(dev)?,
                cooperative_launch: info.cooperative_launch,
            },
            driver,
            cuda,
            compiler: compiler_version(arch),
            commit: commit.to_owned(),
            date: utc_now(),
        })
    }

    /// The header of a run without a GPU: `compiler` is what compiled the code the report is
    /// about (several, for a report over both targets).
    pub fn without_gpu(compiler: String, commit: &str) -> Self {
        Provenance {
            device: DeviceInfo {
                name: "none".into(),
                ..DeviceInfo::default()
            },
            driver: nvidia_driver_version().unwrap_or_else(|| "none".into()),
            cuda: "none".into(),
            compiler,
            commit: commit.to_owned(),
            date: utc_now(),
        }
    }

    /// The same header for a run over `count` GPUs like the one it was read from.
    pub fn with_devices(mut self, count: u32) -> Self {
        self.device.count = count;
        self
    }

    /// The device as one phrase: `NAME (N SMs, L2 M MiB)`, `K × NAME (…)` for several GPUs,
    /// `none` without a GPU.
    pub fn device_phrase(&self) -> String {
        let d = &self.device;
        if d.count == 0 {
            return d.name.clone();
        }
        let many = if d.count > 1 {
            format!("{} × ", d.count)
        } else {
            String::new()
        };
        format!(
            "{many}{} ({} SMs, L2 {:.0} MiB)",
            d.name,
            d.sms,
            d.l2_bytes as f64 / f64::from(1 << 20)
        )
    }

    /// The device and toolchain as one line, the same in every report's terminal output and
    /// Markdown: `device …; driver …, CUDA …; compiler`.
    pub fn line(&self) -> String {
        format!(
            "{}; driver {}, CUDA {}; {}",
            self.device_phrase(),
            self.driver,
            self.cuda,
            self.compiler
        )
    }

    /// Where and when the binary came from: `commit …, date`.
    pub fn origin(&self) -> String {
        format!("commit {}, {}", self.commit, self.date)
    }

    /// A report's JSON: the provenance's keys, then `fields` (an object; its keys win, and a
    /// report never repeats a provenance key).
    pub fn json_with(&self, fields: Json) -> Json {
        let mut j = serde_json::to_value(self).expect("a provenance serialises");
        if let (Json::Object(out), Json::Object(more)) = (&mut j, fields) {
            out.extend(more);
        }
        j
    }
}

/// The compiler's version line for code of `arch` (`none (why)` when it is not installed).
pub fn compiler_version(arch: Arch) -> String {
    compiler(arch, Purpose::Run)
        .version()
        .map(|v| v.lines().next().unwrap_or("").to_owned())
        .unwrap_or_else(|e| format!("none ({e})"))
}

/// The driver and runtime versions of `dev`: (kernel module, CUDA version or `none (HIP: …)`).
fn versions<D: Device>(dev: &D) -> (String, String) {
    let runtime = dev.runtime();
    match dev.info().vendor {
        Vendor::Nvidia => {
            let cuda = exec::cuda_driver_version()
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_else(|e| format!("unknown ({e})"));
            let driver = nvidia_driver_version().unwrap_or_else(|| "unknown".into());
            // The HIP entry points driving an NVIDIA GPU (the test double): say so.
            if runtime.starts_with("HIP") {
                (driver, format!("{cuda}; {runtime}"))
            } else {
                (driver, cuda)
            }
        }
        Vendor::Amd => (
            amdgpu_driver_version().unwrap_or_else(|| "unknown".into()),
            format!("none ({runtime})"),
        ),
    }
}

/// The amdgpu kernel module's version from `/sys/module/amdgpu/version` (set by ROCm's DKMS
/// driver; absent with the upstream kernel's, then None).
pub fn amdgpu_driver_version() -> Option<String> {
    let v = std::fs::read_to_string("/sys/module/amdgpu/version").ok()?;
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_owned())
}

/// The kernel module's version from `/proc/driver/nvidia/version` (e.g. `580.65.06`).
pub fn nvidia_driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_nvidia_version(text.lines().next()?)
}

fn parse_nvidia_version(line: &str) -> Option<String> {
    let after = line.split("Module").nth(1)?;
    after
        .split_whitespace()
        .find(|t| t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_owned)
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_of(secs)
}

fn utc_of(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        // 2026-12-03 01:46:08 UTC, checked against `date -u -d @1796262368`.
        assert_eq!(utc_of(1_796_262_368), "2026-12-03T01:46:08Z");
    }

    #[test]
    fn the_nvidia_module_version_is_read_from_its_line() {
        let line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AM02-24-3)  Thu Aug 14 2025";
        assert_eq!(parse_nvidia_version(line).as_deref(), Some("580.159.04"));
        assert_eq!(parse_nvidia_version("no module here 1.2"), None);
    }

    fn sample() -> Provenance {
        Provenance {
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
            commit: "abc".into(),
            date: "2026-12-03T00:00:00Z".into(),
        }
    }

    /// Every report's JSON carries the same keys, where readers of earlier reports found them.
    #[test]
    fn every_report_gets_the_same_keys() {
        let j = sample().json_with(serde_json::json!({"schema": "x/1", "rows": []}));
        assert_eq!(j["device"]["name"], "NVIDIA H200");
        assert_eq!(j["device"]["l2_bytes"], 60u64 << 20);
        assert_eq!(j["device"]["sms"], 132);
        assert_eq!(j["driver_version"], "580.159.04");
        assert_eq!(j["cuda_version"], "13.0");
        assert_eq!(j["compiler"], "nvrtc 13.0");
        assert_eq!(j["commit"], "abc");
        assert_eq!(j["date"], "2026-12-03T00:00:00Z");
        assert_eq!(j["schema"], "x/1");
        assert!(j["rows"].is_array());
    }

    #[test]
    fn the_line_names_several_devices_and_none() {
        let p = sample().with_devices(4);
        assert_eq!(
            p.line(),
            "4 × NVIDIA H200 (132 SMs, L2 60 MiB); driver 580.159.04, CUDA 13.0; nvrtc 13.0"
        );
        assert_eq!(p.origin(), "commit abc, 2026-12-03T00:00:00Z");
        let none = Provenance::without_gpu("hipcc 5.2".into(), "abc");
        assert!(none.line().starts_with("none; driver "), "{}", none.line());
        assert_eq!(none.device.count, 0);
    }
}
