//! Weighted tickets: arrival counters that need no epoch (DESIGN.md §5.4).
//!
//! A split-K tile's counter and a grid barrier's counter take a *round* of `P` elected arrivals
//! per use (the tile's `P` K parts, the grid's `P` workgroups). Each arrival is an atomic add
//! that returns the counter before it (its *ticket*). The arrivals are weighted so that a round
//! advances the counter by exactly `Q = 2^⌈log₂ P⌉`: one designated arrival (K part 0,
//! workgroup 0) adds `Q − P + 1`, the others 1. Every weight is at least 1 and they sum to `Q`,
//! so a strict subset of a round sums to less than `Q`, and therefore
//! - every round starts and ends on a multiple of `Q` (on zeroed counters; `Q` divides 2³², so
//!   this survives the counter's wrap);
//! - the arrival whose ticket plus weight is a multiple of `Q` is the round's last, whatever the
//!   order of arrival ([`completes_round`]);
//! - a round's end is `(ticket & !(Q − 1)) + Q` for every ticket of the round ([`round_end`]):
//!   a grid barrier waits until the counter reaches it.
//!
//! Nothing here depends on how many launches came before: the same launch with the same
//! arguments, replayed (a captured CUDA/HIP graph), is correct, the counter is never reset, and
//! the kernel keeps no epoch state for it. A launch whose wait timed out still arrives everywhere
//! it would have (a timed-out wait sets the error word and falls through, §5.10), so it leaves
//! every counter on a round boundary for the next launch (§5.11).

use super::{BinOp, Expr, Reg};

/// The counter's advance per round of `arrivals`: the next power of two.
pub fn round_len(arrivals: u32) -> u32 {
    arrivals.max(1).next_power_of_two()
}

/// The value this arrival adds: `Q − P + 1` where `designated` (true for exactly one arrival of
/// the round), 1 elsewhere; a plain 1 when `P` is a power of two.
pub fn weight(arrivals: u32, designated: Expr) -> Expr {
    let extra = round_len(arrivals) - arrivals;
    if extra == 0 {
        Expr::u32(1)
    } else {
        Expr::Select(
            Box::new(designated),
            Box::new(Expr::u32(extra + 1)),
            Box::new(Expr::u32(1)),
        )
    }
}

/// [`weight`] for a round of `arrivals` arrivals known only when the kernel runs (a register),
/// at most `most`: the counter's round is `Q = round_len(most)` whatever `arrivals` is, so the
/// designated arrival adds `Q − arrivals + 1` (at least 1) and every round still sums to `Q`.
pub fn weight_of(most: u32, arrivals: Expr, designated: Expr) -> Expr {
    let q = round_len(most);
    Expr::Select(
        Box::new(designated),
        Box::new(Expr::bin(BinOp::Sub, Expr::u32(q + 1), arrivals)),
        Box::new(Expr::u32(1)),
    )
}

/// True for the round's last arrival: `ticket + weight` is a multiple of `Q`.
pub fn completes_round(ticket: Reg, weight: Expr, arrivals: u32) -> Expr {
    let after = Expr::add(Expr::Reg(ticket), weight);
    let within = Expr::bin(BinOp::And, after, Expr::u32(round_len(arrivals) - 1));
    Expr::bin(BinOp::Eq, within, Expr::u32(0))
}

/// The counter's value once the round of `ticket` is complete: `(ticket & !(Q − 1)) + Q`.
pub fn round_end(ticket: Reg, arrivals: u32) -> Expr {
    let q = round_len(arrivals);
    let start = Expr::bin(BinOp::And, Expr::Reg(ticket), Expr::u32(!(q - 1)));
    Expr::add(start, Expr::u32(q))
}

#[cfg(test)]
mod tests {
    use super::round_len;

    /// The arithmetic of the module docs on plain integers, for every round size to 70 and
    /// every arrival order of small rounds, across the 2³² wrap: exactly one arrival completes
    /// each round and every ticket's round end is where the round ends. (The expressions above
    /// are checked where they run: the simulator's replay tests, harness/tests/sim_replay.rs.)
    #[test]
    fn weighted_rounds_end_on_multiples_of_q_across_the_wrap() {
        for p in 1..=70u32 {
            let q = round_len(p);
            assert!(q >= p && q.is_power_of_two() && q / 2 < p.max(1));
            // Three rounds each side of the wrap, arrivals in a rotating order.
            let mut counter = 0u32.wrapping_sub(3 * q);
            for round in 0..6u32 {
                let start = counter;
                let mut last = 0;
                for i in 0..p {
                    let who = (i + round * 7) % p; // the arrival order
                    let w = if who == 0 { q - p + 1 } else { 1 };
                    let ticket = counter;
                    counter = counter.wrapping_add(w);
                    if ticket.wrapping_add(w) & (q - 1) == 0 {
                        last += 1;
                        assert_eq!(i, p - 1, "p {p}: only the last arrival completes the round");
                    }
                    assert_eq!((ticket & !(q - 1)).wrapping_add(q), start.wrapping_add(q));
                }
                assert_eq!(last, 1, "p {p} round {round}");
                assert_eq!(
                    counter,
                    start.wrapping_add(q),
                    "p {p}: a round advances by Q"
                );
            }
        }
    }
}
