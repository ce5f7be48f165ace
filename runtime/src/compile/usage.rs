//! Resource usage as the compilers report it, and the parsers for those reports.
//!
//! - AMD: clang's `-Rpass-analysis=kernel-resource-usage` remarks (hipcc prints them on stderr).
//! - NVIDIA: ptxas's `-v` report (nvcc on stderr with `-Xptxas -v`, NVRTC in the program log with
//!   `--ptxas-options=-v`, where every continuation line is prefixed with `ptxas .`).

use std::collections::BTreeMap;

pub use wavefuse_codegen::resources::{AmdUsage, NvidiaUsage, ResourceUsage};

/// A compiler report that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// A kernel's report lacks a field.
    #[error("resource report for kernel `{kernel}` has no `{field}` line")]
    MissingField {
        /// The kernel.
        kernel: String,
        /// The missing field.
        field: &'static str,
    },
    /// A field's value is not a number.
    #[error("resource report line `{line}` has no number where one was expected")]
    BadNumber {
        /// The offending line.
        line: String,
    },
}

/// The clang remark keys, in report order, with the field each one sets.
const AMD_KEYS: [(&str, &str); 7] = [
    ("SGPRs", "SGPRs"),
    ("VGPRs", "VGPRs"),
    ("ScratchSize [bytes/lane]", "ScratchSize"),
    ("Occupancy [waves/SIMD]", "Occupancy"),
    ("SGPRs Spill", "SGPRs Spill"),
    ("VGPRs Spill", "VGPRs Spill"),
    ("LDS Size [bytes/block]", "LDS Size"),
];

/// Parses clang's kernel-resource-usage remarks: one `Function Name: K` remark per kernel followed
/// by `Key: value` remarks. Lines that are not remarks (source excerpts, carets) are skipped.
pub fn parse_amd_remarks(log: &str) -> Result<BTreeMap<String, AmdUsage>, ReportError> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, [Option<u32>; 7])> = None;
    for line in log.lines() {
        let Some(body) = remark_body(line) else {
            continue;
        };
        if let Some(name) = body.strip_prefix("Function Name:") {
            finish_amd(&mut out, current.take())?;
            current = Some((name.trim().to_owned(), [None; 7]));
            continue;
        }
        let Some((_, fields)) = current.as_mut() else {
            continue;
        };
        let Some((key, value)) = body.rsplit_once(':') else {
            continue;
        };
        if let Some(i) = AMD_KEYS.iter().position(|(k, _)| *k == key.trim()) {
            fields[i] = Some(number(value, line)?);
        }
    }
    finish_amd(&mut out, current)?;
    Ok(out)
}

/// The text of a `remark:` line without the trailing `[-Rpass-analysis=…]` tag.
fn remark_body(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("remark:")?;
    let rest = rest.split(" [-Rpass").next().unwrap_or(rest);
    Some(rest.trim())
}

fn finish_amd(
    out: &mut BTreeMap<String, AmdUsage>,
    current: Option<(String, [Option<u32>; 7])>,
) -> Result<(), ReportError> {
    let Some((kernel, fields)) = current else {
        return Ok(());
    };
    let get = |i: usize| {
        fields[i].ok_or_else(|| ReportError::MissingField {
            kernel: kernel.clone(),
            field: AMD_KEYS[i].1,
        })
    };
    let usage = AmdUsage {
        sgprs: get(0)?,
        vgprs: get(1)?,
        scratch_bytes_per_lane: get(2)?,
        occupancy_waves_per_simd: get(3)?,
        sgpr_spills: get(4)?,
        vgpr_spills: get(5)?,
        lds_bytes: get(6)?,
    };
    out.insert(kernel, usage);
    Ok(())
}

/// Parses ptxas's `-v` report, from nvcc's stderr or NVRTC's log. Only entry functions (kernels)
/// are reported; a non-inlined device function's own "Function properties" are skipped.
pub fn parse_ptxas(log: &str) -> Result<BTreeMap<String, NvidiaUsage>, ReportError> {
    let mut out = BTreeMap::new();
    let mut entry: Option<(String, NvidiaUsage, bool)> = None;
    let mut properties_of: Option<String> = None;
    for raw in log.lines() {
        let line = ptxas_body(raw);
        if let Some(rest) = line.strip_prefix("Compiling entry function '") {
            finish_ptxas(&mut out, entry.take())?;
            let name = rest.split('\'').next().unwrap_or(rest);
            entry = Some((name.to_owned(), NvidiaUsage::default(), false));
        } else if let Some(rest) = line.strip_prefix("Function properties for ") {
            properties_of = Some(rest.trim().to_owned());
        } else if line.contains("bytes stack frame") {
            if let Some((name, usage, _)) = entry.as_mut()
                && properties_of.as_deref() == Some(name.as_str())
            {
                for part in line.split(',') {
                    let n = leading_number(part, raw)?;
                    if part.contains("stack frame") {
                        usage.stack_frame_bytes = n;
                    } else if part.contains("spill stores") {
                        usage.spill_store_bytes = n;
                    } else if part.contains("spill loads") {
                        usage.spill_load_bytes = n;
                    }
                }
            }
        } else if let Some(rest) = line.strip_prefix("Used ") {
            let Some((_, usage, seen)) = entry.as_mut() else {
                continue;
            };
            *seen = true;
            for part in rest.split(',') {
                let part = part.trim().trim_start_matches("used ");
                if part.ends_with("registers") {
                    usage.registers = leading_number(part, raw)?;
                } else if part.ends_with("barriers") {
                    usage.barriers = leading_number(part, raw)?;
                } else if part.ends_with("bytes smem") {
                    usage.shared_bytes = leading_number(part, raw)?;
                }
            }
        }
    }
    finish_ptxas(&mut out, entry)?;
    Ok(out)
}

/// A ptxas line without its `ptxas info    :` / NVRTC's `ptxas         .` prefix.
fn ptxas_body(line: &str) -> &str {
    let line = line.trim();
    let Some(rest) = line.strip_prefix("ptxas") else {
        return line;
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("info").unwrap_or(rest).trim_start();
    rest.strip_prefix(':')
        .or_else(|| rest.strip_prefix('.'))
        .unwrap_or(rest)
        .trim()
}

fn finish_ptxas(
    out: &mut BTreeMap<String, NvidiaUsage>,
    entry: Option<(String, NvidiaUsage, bool)>,
) -> Result<(), ReportError> {
    let Some((kernel, usage, seen)) = entry else {
        return Ok(());
    };
    if !seen {
        return Err(ReportError::MissingField {
            kernel,
            field: "Used N registers",
        });
    }
    out.insert(kernel, usage);
    Ok(())
}

fn number(text: &str, line: &str) -> Result<u32, ReportError> {
    text.trim().parse().map_err(|_| ReportError::BadNumber {
        line: line.trim().to_owned(),
    })
}

fn leading_number(text: &str, line: &str) -> Result<u32, ReportError> {
    number(text.split_whitespace().next().unwrap_or(""), line)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from hipcc 5.2 (clang 15): `hipcc --offload-arch=gfx906 --genco -O3
    // -Rpass-analysis=kernel-resource-usage` on tests/data/usage.hip, once with the `spill` kernel
    // capped at 64 VGPRs by `__launch_bounds__(1024)`.
    const HIPCC: &str = include_str!("../../tests/data/hipcc-gfx906.stderr");
    const HIPCC_SPILL: &str = include_str!("../../tests/data/hipcc-gfx906-spill.stderr");
    // Captured from nvcc 13.0 (`-arch=sm_90 -cubin -Xptxas -v`) and NVRTC 13.0
    // (`-arch=sm_90 --ptxas-options=-v`) on tests/data/usage.cu and usage-spill.cu.
    const NVCC: &str = include_str!("../../tests/data/nvcc-sm90.stderr");
    const NVCC_SPILL: &str = include_str!("../../tests/data/nvcc-sm90-spill.stderr");
    const NVRTC: &str = include_str!("../../tests/data/nvrtc-sm90.log");

    #[test]
    fn hipcc_report_gfx906() {
        let u = parse_amd_remarks(HIPCC).unwrap();
        assert_eq!(u.len(), 2);
        let axpy = &u["axpy"];
        assert_eq!(
            *axpy,
            AmdUsage {
                sgprs: 18,
                vgprs: 6,
                sgpr_spills: 0,
                vgpr_spills: 0,
                scratch_bytes_per_lane: 0,
                lds_bytes: 1024,
                occupancy_waves_per_simd: 10,
            }
        );
        assert_eq!(u["spill"].vgprs, 101);
        assert_eq!(u["spill"].occupancy_waves_per_simd, 2);
        assert!(!ResourceUsage::Amd(u["spill"].clone()).spills());
    }

    #[test]
    fn hipcc_spill_report_gfx906() {
        let u = parse_amd_remarks(HIPCC_SPILL).unwrap();
        let s = &u["spill"];
        assert_eq!(
            (s.vgprs, s.vgpr_spills, s.scratch_bytes_per_lane),
            (64, 187, 328)
        );
        assert_eq!(s.occupancy_waves_per_simd, 4);
        assert!(ResourceUsage::Amd(s.clone()).spills());
    }

    #[test]
    fn invalid_amd_report_missing_field() {
        let log = "k.hip:1:1: remark: Function Name: k [-Rpass-analysis=kernel-resource-usage]\n\
                   k.hip:1:1: remark:     SGPRs: 8 [-Rpass-analysis=kernel-resource-usage]\n";
        let err = parse_amd_remarks(log).unwrap_err();
        assert_eq!(
            err,
            ReportError::MissingField {
                kernel: "k".into(),
                field: "VGPRs"
            }
        );
    }

    #[test]
    fn nvcc_report_sm90() {
        let u = parse_ptxas(NVCC).unwrap();
        assert_eq!(u.len(), 2);
        assert_eq!(
            u["axpy"],
            NvidiaUsage {
                registers: 10,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
                stack_frame_bytes: 0,
                shared_bytes: 1024,
                barriers: 1,
            }
        );
        let s = &u["spill"];
        assert_eq!(
            (s.registers, s.stack_frame_bytes, s.shared_bytes),
            (38, 384, 0)
        );
        // A stack frame with no spills is still local memory: a budget violation.
        assert!(ResourceUsage::Nvidia(s.clone()).spills());
    }

    #[test]
    fn nvcc_spill_report_sm90() {
        let s = &parse_ptxas(NVCC_SPILL).unwrap()["spill"];
        assert_eq!(
            (
                s.registers,
                s.spill_store_bytes,
                s.spill_load_bytes,
                s.stack_frame_bytes
            ),
            (32, 1948, 2608, 1224)
        );
    }

    #[test]
    fn nvrtc_report_sm90_matches_nvcc() {
        assert_eq!(parse_ptxas(NVRTC).unwrap(), parse_ptxas(NVCC).unwrap());
    }

    #[test]
    fn ptxas_skips_device_function_properties() {
        let log = "ptxas info    : Function properties for helper\n    \
                   16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n\
                   ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                   ptxas info    : Function properties for k\n    \
                   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
                   ptxas info    : Used 12 registers, used 0 barriers\n";
        let u = parse_ptxas(log).unwrap();
        assert_eq!(
            u["k"],
            NvidiaUsage {
                registers: 12,
                ..NvidiaUsage::default()
            }
        );
    }

    #[test]
    fn invalid_ptxas_report_without_register_line() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n";
        assert!(matches!(
            parse_ptxas(log),
            Err(ReportError::MissingField { .. })
        ));
    }
}
