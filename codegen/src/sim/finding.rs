//! What the simulator reports.

use std::collections::HashMap;
use std::fmt;

/// The kinds of findings. Every finding is a defect of the kernel (or of the host binding it was
/// run with); a correct kernel produces none on any schedule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// A plain read of an element whose last write does not happen before the read (no
    /// release→acquire chain at a sufficient scope, no barrier): the value may not be visible.
    StaleRead,
    /// A plain write to an element whose last write does not happen before it.
    WriteRace,
    /// A read of LDS that this workgroup never wrote in this launch (LDS is workgroup-local,
    /// DESIGN.md §5.2, and starts undefined).
    UninitRead,
    /// A workgroup barrier (or a wave reduction) reached by only part of the workgroup (wave):
    /// some lanes finished or wait at a different barrier (DESIGN.md §5.8).
    PartialBarrier,
    /// No lane can run and not all have finished.
    Deadlock,
    /// A bounded wait ran out of budget and wrote its code into the error word (DESIGN.md §5.10).
    Timeout,
    /// The host found a non-zero error word after a launch.
    ErrorWord,
    /// An access outside its array (or a peer rank outside the group).
    OutOfBounds,
    /// An output differs from the f64 reference beyond its tolerance, or holds NaN/Inf.
    Mismatch,
    /// A replicated output differs between ranks.
    RanksDisagree,
    /// A read-modify-write atomic on another rank's memory (DESIGN.md §5.12).
    PeerRmw,
    /// A write to an array the kernel declares read-only.
    ReadOnlyWrite,
    /// An arithmetic fault (integer division by zero).
    Arithmetic,
}

impl FindingKind {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::StaleRead => "stale read",
            FindingKind::WriteRace => "write race",
            FindingKind::UninitRead => "uninitialised read",
            FindingKind::PartialBarrier => "barrier reached by part of a workgroup",
            FindingKind::Deadlock => "deadlock",
            FindingKind::Timeout => "wait timeout",
            FindingKind::ErrorWord => "error word set",
            FindingKind::OutOfBounds => "out of bounds",
            FindingKind::Mismatch => "mismatch",
            FindingKind::RanksDisagree => "ranks disagree",
            FindingKind::PeerRmw => "RMW on peer memory",
            FindingKind::ReadOnlyWrite => "write to read-only memory",
            FindingKind::Arithmetic => "arithmetic fault",
        }
    }
}

/// One defect, with a message that says where and why, and how many times it occurred
/// (occurrences at the same statement are merged).
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// What kind of defect.
    pub kind: FindingKind,
    /// Where, in a form that is the same for the same defect on any schedule (a statement, an
    /// output); findings are merged by kind and site.
    pub site: String,
    /// Where and why (the first occurrence).
    pub message: String,
    /// Occurrences merged into this finding.
    pub count: u64,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)?;
        if self.count > 1 {
            write!(f, " (×{})", self.count)?;
        }
        Ok(())
    }
}

/// Findings of one run, merged by (kind, site key).
#[derive(Debug, Default)]
pub(super) struct Findings {
    list: Vec<Finding>,
    index: HashMap<(FindingKind, String), usize>,
}

impl Findings {
    /// Record a finding at `site` (merged with earlier ones of the same kind and site); `message`
    /// is built only for the first occurrence.
    pub(super) fn add(
        &mut self,
        kind: FindingKind,
        site: impl Into<String>,
        message: impl FnOnce() -> String,
    ) {
        let key = (kind, site.into());
        if let Some(&i) = self.index.get(&key) {
            self.list[i].count += 1;
            return;
        }
        self.index.insert(key.clone(), self.list.len());
        self.list.push(Finding {
            kind,
            site: key.1,
            message: message(),
            count: 1,
        });
    }

    pub(super) fn into_vec(self) -> Vec<Finding> {
        self.list
    }
}
