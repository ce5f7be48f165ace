//! Happens-before bookkeeping: compressed vector clocks, write stamps and scoped release records.
//!
//! Time is kept per *slot* (one per workgroup instance of every rank, plus one per rank's host)
//! and per *agent* (a lane, or a rank's host). An agent's time is `(phase << 32) | seq`: the phase
//! is its slot's count of completed workgroup barriers and kernel boundaries, the sequence number
//! counts the agent's releases within the phase.
//!
//! A [`Clock`] is what one agent knows has happened before its next step:
//! - `full[slot] = P`: every write by every agent of the slot in a phase `< P` (a barrier made
//!   them visible to the whole workgroup, and that knowledge travelled here);
//! - `partial`: `(agent, t)` pairs, every write by that agent at time `≤ t` (what one elected lane
//!   released before the rest of its workgroup caught up).
//!
//! This is exact for the execution model (the only edges are program order, workgroup barriers,
//! kernel boundaries and release→acquire pairs) and stays small: `full` has one entry per slot
//! and `partial` holds a handful of elected lanes.

use wavefuse_ir::Scope;

/// `(phase << 32) | seq`.
pub(super) type Time = u64;

/// The phase of a time.
pub(super) fn phase(t: Time) -> u32 {
    (t >> 32) as u32
}

/// What an agent knows has happened before it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Clock {
    pub full: Vec<u32>,
    /// Sorted by agent: (agent, slot, time).
    pub partial: Vec<(u32, u32, Time)>,
}

impl Clock {
    pub(super) fn new(slots: usize) -> Self {
        Clock {
            full: vec![0; slots],
            partial: Vec::new(),
        }
    }

    /// Whether a write by `agent` of `slot` at time `t` happens before this clock's owner.
    #[inline]
    pub(super) fn covers(&self, agent: u32, slot: u32, t: Time) -> bool {
        if phase(t) < self.full[slot as usize] {
            return true;
        }
        match self.partial.binary_search_by_key(&agent, |e| e.0) {
            Ok(i) => t <= self.partial[i].2,
            Err(_) => false,
        }
    }

    /// Record that `agent`'s writes up to `t` happened before.
    pub(super) fn add_partial(&mut self, agent: u32, slot: u32, t: Time) {
        if phase(t) < self.full[slot as usize] {
            return;
        }
        match self.partial.binary_search_by_key(&agent, |e| e.0) {
            Ok(i) => self.partial[i].2 = self.partial[i].2.max(t),
            Err(i) => self.partial.insert(i, (agent, slot, t)),
        }
    }

    /// Pointwise maximum.
    pub(super) fn join(&mut self, other: &Clock) {
        let mut raised = false;
        for (a, b) in self.full.iter_mut().zip(&other.full) {
            if *b > *a {
                *a = *b;
                raised = true;
            }
        }
        if !other.partial.is_empty() {
            if self.partial.is_empty() {
                self.partial.extend_from_slice(&other.partial);
            } else if self.partial != other.partial {
                self.partial = merge(&self.partial, &other.partial);
            }
            raised = true;
        }
        if raised && !self.partial.is_empty() {
            self.prune();
        }
    }

    /// Whether joining `other` would change nothing.
    pub(super) fn includes(&self, other: &Clock) -> bool {
        self.full.iter().zip(&other.full).all(|(a, b)| a >= b)
            && other
                .partial
                .iter()
                .all(|&(agent, slot, t)| self.covers(agent, slot, t))
    }

    /// Drop partial entries the full entries already cover.
    pub(super) fn prune(&mut self) {
        let full = &self.full;
        self.partial
            .retain(|&(_, slot, t)| phase(t) >= full[slot as usize]);
    }
}

fn merge(a: &[(u32, u32, Time)], b: &[(u32, u32, Time)]) -> Vec<(u32, u32, Time)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push((a[i].0, a[i].1, a[i].2.max(b[j].2)));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Where an agent sits, for scope checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Place {
    pub rank: u32,
    pub slot: u32,
    pub wave: u32,
}

impl Place {
    /// Whether `self` and `other` are in one scope instance: the same wave, workgroup, device, or
    /// (system) anywhere.
    pub(super) fn shares(self, other: Place, scope: Scope) -> bool {
        match scope {
            Scope::Wave => self.slot == other.slot && self.wave == other.wave,
            Scope::Workgroup => self.slot == other.slot,
            Scope::Agent => self.rank == other.rank,
            Scope::System => true,
        }
    }
}

/// Scopes narrower than or equal to another: the scope both an acquire and a release reach.
pub(super) fn narrower(a: Scope, b: Scope) -> Scope {
    fn rank(s: Scope) -> u8 {
        match s {
            Scope::Wave => 0,
            Scope::Workgroup => 1,
            Scope::Agent => 2,
            Scope::System => 3,
        }
    }
    if rank(a) <= rank(b) { a } else { b }
}

/// A release published at a location: the releaser's clock, at the releaser's scope. Releases
/// from one place at one scope are merged (an RMW release sequence).
#[derive(Clone, Debug)]
pub(super) struct Release {
    pub scope: Scope,
    pub from: Place,
    pub clock: Clock,
}

/// Who last wrote an element, and how.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) struct Stamp {
    pub agent: u32,
    /// Slot of the agent; the top bit marks an atomic write.
    pub slot: u32,
    pub time: Time,
}

const ATOMIC_BIT: u32 = 1 << 31;

impl Stamp {
    /// Zeroed at allocation: happens before every launch.
    pub(super) const INITIAL: Stamp = Stamp {
        agent: u32::MAX,
        slot: 0,
        time: 0,
    };
    /// Never written (LDS at the start of a launch).
    pub(super) const UNINIT: Stamp = Stamp {
        agent: u32::MAX - 1,
        slot: 0,
        time: 0,
    };

    pub(super) fn new(agent: u32, slot: u32, time: Time, atomic: bool) -> Self {
        Stamp {
            agent,
            slot: slot | if atomic { ATOMIC_BIT } else { 0 },
            time,
        }
    }

    pub(super) fn is_initial(&self) -> bool {
        self.agent == u32::MAX
    }

    pub(super) fn is_uninit(&self) -> bool {
        self.agent == u32::MAX - 1
    }

    pub(super) fn atomic(&self) -> bool {
        self.slot & ATOMIC_BIT != 0
    }

    pub(super) fn slot(&self) -> u32 {
        self.slot & !ATOMIC_BIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_entries_cover_earlier_phases_and_partials_cover_one_agent() {
        let mut c = Clock::new(3);
        c.full[1] = 2;
        assert!(c.covers(7, 1, (1 << 32) | 5));
        assert!(!c.covers(7, 1, 2 << 32));
        c.add_partial(7, 1, (2 << 32) | 3);
        assert!(c.covers(7, 1, (2 << 32) | 3));
        assert!(!c.covers(7, 1, (2 << 32) | 4));
        assert!(!c.covers(8, 1, 2 << 32));
        let mut d = Clock::new(3);
        d.full[1] = 3;
        c.join(&d);
        assert!(
            c.partial.is_empty(),
            "the barrier-level entry subsumes the partial one"
        );
    }
}
