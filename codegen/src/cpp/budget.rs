//! Resource budgets: limits on what the compiler reports for each generated kernel, read from a
//! committed TOML file (`kernels-gen/budgets.toml`) and enforced in CI and by `wavefuse check`.
//!
//! The file is a list of `[[budget]]` entries; every entry whose `target`, `kernel` (`"*"` for
//! all) and `tp` (absent for all) match a compiled kernel applies, and all its limits must hold.

use serde::Deserialize;

use crate::resources::ResourceUsage;
use crate::target::Arch;

/// A budget file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// The entries.
    #[serde(default)]
    pub budget: Vec<Limit>,
}

/// One entry: a selector and limits.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Target name (`gfx906`, `sm90`).
    pub target: String,
    /// Kernel name, or `*` for every kernel.
    pub kernel: String,
    /// TP sizes it applies to (all when absent).
    #[serde(default)]
    pub tp: Vec<u32>,
    /// Why the limit is what it is.
    #[serde(default)]
    pub why: Option<String>,
    /// Most VGPRs (AMD) or registers per thread (NVIDIA).
    pub max_vgprs: Option<u32>,
    /// Most SGPRs (AMD).
    pub max_sgprs: Option<u32>,
    /// Most spills.
    pub max_spills: Option<u32>,
    /// Most scratch / stack bytes per lane.
    pub max_scratch_bytes: Option<u32>,
    /// Most LDS bytes per workgroup.
    pub max_lds_bytes: Option<u32>,
    /// Fewest resident waves per SIMD (warps per sub-partition on NVIDIA).
    pub min_occupancy: Option<u32>,
    /// Most VALU instructions per weight in the hot loop of an INT4 GEMV's machine code
    /// (gfx906: [`crate::model::HotLoop::valu_per_weight`] on `llvm-objdump`'s disassembly).
    /// Not part of [`Budgets::check`] (which sees resources only): read with
    /// [`Budgets::valu_per_weight_ceiling`] where the disassembly is at hand.
    pub max_valu_per_weight: Option<f64>,
}

/// Why a budget file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// Not valid TOML for this schema.
    #[error("budget file: {0}")]
    Parse(#[from] toml::de::Error),
    /// An entry names a target or kernel that does not exist (a typo would silently check nothing).
    #[error("budget file: entry {index} names unknown {what} `{name}`")]
    Unknown {
        /// Entry number (0-based).
        index: usize,
        /// `target` or `kernel`.
        what: &'static str,
        /// The name.
        name: String,
    },
}

impl Budgets {
    /// Parse a budget file, checking that every entry names a known target and kernel.
    pub fn parse(text: &str, kernels: &[&str]) -> Result<Budgets, BudgetError> {
        let b: Budgets = toml::from_str(text)?;
        for (index, l) in b.budget.iter().enumerate() {
            if l.target.parse::<Arch>().is_err() {
                return Err(BudgetError::Unknown {
                    index,
                    what: "target",
                    name: l.target.clone(),
                });
            }
            if l.kernel != "*" && !kernels.contains(&l.kernel.as_str()) {
                return Err(BudgetError::Unknown {
                    index,
                    what: "kernel",
                    name: l.kernel.clone(),
                });
            }
        }
        Ok(b)
    }

    /// The lowest `max_valu_per_weight` of the entries that apply to `kernel` at `tp` on `arch`.
    pub fn valu_per_weight_ceiling(&self, arch: Arch, kernel: &str, tp: u32) -> Option<f64> {
        self.budget
            .iter()
            .filter(|l| {
                l.target.parse::<Arch>().ok() == Some(arch)
                    && (l.kernel == "*" || l.kernel == kernel)
                    && (l.tp.is_empty() || l.tp.contains(&tp))
            })
            .filter_map(|l| l.max_valu_per_weight)
            .reduce(f64::min)
    }

    /// The limits `r` breaks for `kernel` at `tp` on `arch`, launched in workgroups of
    /// `workgroup_size` lanes (NVIDIA's occupancy depends on it), and how many entries applied.
    pub fn check(
        &self,
        arch: Arch,
        kernel: &str,
        tp: u32,
        r: &ResourceUsage,
        workgroup_size: u32,
    ) -> Verdict {
        let occupancy = r.occupancy(workgroup_size);
        let mut v = Verdict::default();
        for l in &self.budget {
            let applies = l.target.parse::<Arch>().ok() == Some(arch)
                && (l.kernel == "*" || l.kernel == kernel)
                && (l.tp.is_empty() || l.tp.contains(&tp));
            if !applies {
                continue;
            }
            v.entries += 1;
            let mut max = |what: &str, got: Option<u32>, limit: Option<u32>| {
                if let (Some(got), Some(limit)) = (got, limit) {
                    if got > limit {
                        v.violations.push(format!("{what} {got} > {limit}"));
                    }
                }
            };
            max("VGPRs", Some(r.registers()), l.max_vgprs);
            max("SGPRs", r.sgprs(), l.max_sgprs);
            max("spills", Some(r.spilled()), l.max_spills);
            max(
                "scratch bytes",
                Some(r.scratch_bytes()),
                l.max_scratch_bytes,
            );
            max("LDS bytes", Some(r.lds_bytes()), l.max_lds_bytes);
            if let Some(min) = l.min_occupancy {
                if occupancy < min {
                    v.violations.push(format!("occupancy {occupancy} < {min}"));
                }
            }
        }
        v.violations.dedup();
        v
    }
}

/// The outcome of a budget check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Broken limits, in words.
    pub violations: Vec<String>,
    /// Entries that applied.
    pub entries: usize,
}

impl Verdict {
    /// Within budget (and at least one entry applied).
    pub fn ok(&self) -> bool {
        self.violations.is_empty() && self.entries > 0
    }

    /// `ok`, `no budget`, or the violations.
    pub fn describe(&self) -> String {
        if self.entries == 0 {
            "no budget".into()
        } else if self.violations.is_empty() {
            "ok".into()
        } else {
            format!("OVER: {}", self.violations.join(", "))
        }
    }
}
