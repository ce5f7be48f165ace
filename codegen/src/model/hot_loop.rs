//! The counts of the model's inputs in hipcc's machine code: the hot loop of a kernel's
//! disassembly, its VALU and products per trip, what a branch skips, the loads in flight.

use super::{DOT2_PRODUCTS, LoopFacts};

/// The counts of a kernel's hot loop in hipcc's machine code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotLoop {
    /// Mnemonics of the loop body, in order.
    pub mnemonics: Vec<String>,
    /// Vector ALU instructions (`v_*`).
    pub valu: usize,
    /// `v_dot2_f32_f16` (two weights of one batch row each).
    pub dot2: usize,
    /// `v_fma_mix_f32` (the FMA path's one per weight and batch row).
    pub fma_mix: usize,
    /// `v_dot4_i32_i8` (the q8 path's four weights of one batch row each).
    pub dot4: usize,
    /// Bytes per lane of vector-memory loads the loop has in flight at most: loads add their
    /// width, `s_waitcnt vmcnt(n)` leaves the newest `n` outstanding.
    pub bytes_in_flight_per_lane: u32,
    /// The kernel symbol whose code was searched ([`HotLoop::from_disassembly_of`]); `None`:
    /// the whole code object.
    pub symbol: Option<String>,
    /// Address of the loop's first instruction (the backward branch's target).
    pub first: u64,
    /// Address of the loop's last instruction (the backward branch).
    pub last: u64,
    /// VALU instructions of the loop in blocks a forward conditional branch inside the loop may
    /// skip (a per-group reload): charged once per [`LoopFacts::branch_period`] trips.
    pub skippable_valu: usize,
    /// VALU instructions of the searched code outside the loop (a static count).
    pub valu_outside: usize,
    /// Of those, the ones on the path every wave runs: not in a block a forward branch outside
    /// the loop skips, unless that block holds the loop (a guard such as `if (n < N)`); other
    /// loops' bodies once.
    pub valu_outside_path: usize,
    /// The loop around the counted one that holds no products of its own, counted as a loop of
    /// weight passes (batch tiles), as `(first, last)` addresses; `None` without one. Set on
    /// [`HotLoop::inner`] only.
    pub enclosing: Option<(u64, u64)>,
    /// Of [`HotLoop::valu_outside_path`], the ones inside [`HotLoop::enclosing`]: run once per
    /// trip of that loop — once per weight pass ([`ModelInputs::weight_passes`]).
    ///
    /// [`ModelInputs::weight_passes`]: super::ModelInputs::weight_passes
    pub valu_enclosing_path: usize,
    /// The innermost loop of as many products inside this one, with this one's nearest loop
    /// around it as [`HotLoop::enclosing`]: what a kernel of several weight passes counts
    /// ([`HotLoop::for_passes`]). `None` where no loop of as many products is nested inside.
    pub inner: Option<Box<HotLoop>>,
}

impl HotLoop {
    /// The hot loop of a disassembly (`llvm-objdump -d --mcpu=gfx906`): of the ranges from a
    /// backward branch's target to the branch, the one with the most products
    /// (`v_dot2_f32_f16`, `v_fma_mix_f32`), then the longest — so a long spin loop (a peer-flag
    /// wait) is not taken for the GEMV's. Where a loop of as many products is nested inside it,
    /// that one is [`HotLoop::inner`] ([`HotLoop::for_passes`]). `None` without a backward
    /// branch.
    pub fn from_disassembly(disasm: &str) -> Option<HotLoop> {
        HotLoop::of_instructions(&instructions_with_targets(disasm))
    }

    /// The loop a kernel that reads its weights `passes` times counts: past one pass, the
    /// innermost loop of the products ([`HotLoop::inner`]), its loop around it a loop of passes
    /// (batch tiles: each trip stages, multiplies and reduces one tile of rows, so the tile
    /// loop's own work runs once per pass, not once per K trip); else this loop — a loop around
    /// the innermost one may then be a K loop around a word loop, whose own work (a unit's
    /// scale load and fold) runs on every trip.
    pub fn for_passes(&self, passes: f64) -> &HotLoop {
        match &self.inner {
            Some(inner) if passes > 1.0 => inner,
            _ => self,
        }
    }

    /// [`HotLoop::from_disassembly`] within the code of kernel `symbol` only (a code object may
    /// hold several kernels: tile variants of one file): the lines from `<symbol>:` to the next
    /// symbol. `None` when the symbol is not in the disassembly or has no loop.
    pub fn from_disassembly_of(disasm: &str, symbol: &str) -> Option<HotLoop> {
        let header = format!("<{symbol}>:");
        let mut text = String::new();
        let mut inside = false;
        for l in disasm.lines() {
            if l.ends_with(">:") {
                inside = l.trim_end().ends_with(&header);
            }
            if inside {
                text.push_str(l);
                text.push('\n');
            }
        }
        let mut hot = HotLoop::of_instructions(&instructions_with_targets(&text))?;
        hot.symbol = Some(symbol.to_owned());
        if let Some(inner) = &mut hot.inner {
            inner.symbol = Some(symbol.to_owned());
        }
        Some(hot)
    }

    /// What was counted, in words, without facts from an ABI at batch 1
    /// ([`HotLoop::counted_with`]).
    pub fn counted(&self) -> String {
        self.counted_with(1, &LoopFacts::default())
    }

    /// What was counted, in words: `` loop 0x1a0..0x3f4 (212 instructions) of `sym`: 90.5 VALU
    /// per trip (…), 16 weights per trip (…); 40 VALU outside the loop … ``.
    pub fn counted_with(&self, batch: usize, facts: &LoopFacts) -> String {
        let of = self
            .symbol
            .as_deref()
            .map_or("the whole code object".to_owned(), |s| format!("`{s}`"));
        let mut s = format!(
            "loop {:#x}..{:#x} ({} instructions) of {of}: {} VALU per trip",
            self.first,
            self.last,
            self.mnemonics.len(),
            trim(self.valu_per_trip(facts)),
        );
        if self.skippable_valu > 0 {
            s.push_str(&match facts.branch_period {
                Some(p) => format!(
                    " ({} of its {} in blocks a branch skips, charged once per {} trips)",
                    self.skippable_valu,
                    self.valu,
                    trim(p)
                ),
                None => format!(
                    " ({} of its {} in blocks a branch may skip, charged on every trip: the ABI gives no period)",
                    self.skippable_valu, self.valu
                ),
            });
        }
        let products = self.weights(batch);
        s.push_str(&match facts.weights_per_trip {
            Some(w) if (w - products).abs() > 1e-9 => format!(
                ", {} weights per trip (the ABI's; the products say {})",
                trim(w),
                trim(products)
            ),
            Some(w) => format!(", {} weights per trip (the ABI's)", trim(w)),
            None => format!(", {} weights per trip (the products')", trim(products)),
        });
        if self.valu_outside > 0 {
            s.push_str(&format!(
                "; {} VALU outside the loop on every wave's path, counted once per wave",
                self.valu_outside_path
            ));
            if let Some((first, last)) = self.enclosing {
                s.push_str(&format!(
                    " ({} of them in the loop {first:#x}..{last:#x} around it, once per weight pass)",
                    self.valu_enclosing_path
                ));
            }
            if self.valu_outside > self.valu_outside_path {
                s.push_str(&format!(
                    ", {} in blocks a branch may skip, not counted",
                    self.valu_outside - self.valu_outside_path
                ));
            }
        }
        s
    }

    fn of_instructions(ins: &[(u64, String, Option<u64>)]) -> Option<HotLoop> {
        let hot = hottest_loops(ins)?;
        let mut outer = HotLoop::of_range(ins, hot.longest, None);
        if hot.innermost != hot.longest {
            outer.inner = Some(Box::new(HotLoop::of_range(ins, hot.innermost, hot.around)));
        }
        Some(outer)
    }

    /// The counts of the loop `(start, end)` (instruction indices) of `ins`, with `around` the
    /// loop around it whose own VALU count once per weight pass.
    fn of_range(
        ins: &[(u64, String, Option<u64>)],
        (start, end): (usize, usize),
        around: Option<(usize, usize)>,
    ) -> HotLoop {
        let body = &ins[start..=end];
        let (first, last) = (body[0].0, body[body.len() - 1].0);
        let skippable = skipped_within(body, first, last);
        let skippable_valu = body
            .iter()
            .zip(&skippable)
            .filter(|((_, m, _), s)| **s && m.starts_with("v_"))
            .count();
        let outside_skipped = skipped_outside(ins, (start, end));
        let is_valu_outside = |i: usize| (i < start || i > end) && ins[i].1.starts_with("v_");
        let valu_outside = (0..ins.len()).filter(|&i| is_valu_outside(i)).count();
        let on_path = |i: &usize| is_valu_outside(*i) && !outside_skipped[*i];
        let valu_outside_path = (0..ins.len()).filter(on_path).count();
        let valu_enclosing_path = around.map_or(0, |(s, e)| (s..=e).filter(on_path).count());
        let mnemonics: Vec<String> = body.iter().map(|(_, m, _)| m.clone()).collect();
        let count = |p: &str| mnemonics.iter().filter(|m| m.starts_with(p)).count();
        HotLoop {
            valu: count("v_"),
            dot2: count("v_dot2_f32_f16"),
            fma_mix: count("v_fma_mix_f32"),
            dot4: count("v_dot4_i32_i8"),
            bytes_in_flight_per_lane: in_flight(
                &body.iter().map(|b| b.1.as_str()).collect::<Vec<_>>(),
            ),
            mnemonics,
            symbol: None,
            first,
            last,
            skippable_valu,
            valu_outside,
            valu_outside_path,
            enclosing: around.map(|(s, e)| (ins[s].0, ins[e].0)),
            valu_enclosing_path,
            inner: None,
        }
    }

    /// Weights one lane handles per loop iteration at `batch` rows, from the products: four per
    /// `v_dot4_i32_i8` and row on the q8 path, two per `v_dot2_f32_f16` and row on the dot2
    /// path, else one per `v_fma_mix_f32` and row (the dot2 path's per-unit scale folds into a
    /// `v_fma_mix_f32` per column word, which is not a weight). A generated loop holds only
    /// these; a hand-written one may not ([`LoopFacts::weights_per_trip`]).
    pub fn weights(&self, batch: usize) -> f64 {
        match (self.dot4, self.dot2) {
            (0, 0) => self.fma_mix as f64 / batch as f64,
            (0, d) => 2.0 * d as f64 / batch as f64,
            (d, _) => 4.0 * d as f64 / batch as f64,
        }
    }

    /// Products (weight × activation pairs) one product instruction of the loop makes: 4 on the
    /// q8 path (`v_dot4_i32_i8`), 2 on the dot2 path, else 1 (`v_fma_mix_f32`, the FMA path).
    pub fn products_per_instruction(&self) -> f64 {
        match (self.dot4, self.dot2) {
            (0, 0) => 1.0,
            (0, _) => DOT2_PRODUCTS,
            _ => 2.0 * DOT2_PRODUCTS,
        }
    }

    /// The share of the loop's VALU that is weight products (`v_dot2_f32_f16`, `v_dot4_i32_i8`,
    /// `v_fma_mix_f32` on the FMA path), 0 to 1.
    pub fn dot_share(&self) -> f64 {
        let products = match (self.dot4, self.dot2) {
            (0, 0) => self.fma_mix,
            (0, d) => d,
            (d, _) => d,
        };
        if self.valu == 0 {
            0.0
        } else {
            products as f64 / self.valu as f64
        }
    }

    /// VALU instructions of one trip on the executed path: the blocks a branch inside the loop
    /// skips at 1/[`LoopFacts::branch_period`] (every trip where the period is not known).
    pub fn valu_per_trip(&self, facts: &LoopFacts) -> f64 {
        let period = facts.branch_period.unwrap_or(1.0).max(1.0);
        (self.valu - self.skippable_valu) as f64 + self.skippable_valu as f64 / period
    }

    /// VALU instructions per weight with nothing known from an ABI (the products' weights, every
    /// VALU of the loop on every trip), or `None` without products.
    pub fn valu_per_weight(&self, batch: usize) -> Option<f64> {
        self.valu_per_weight_with(batch, &LoopFacts::default())
    }

    /// VALU instructions per weight on the executed path of a trip: [`HotLoop::valu_per_trip`]
    /// over the ABI's weights per trip (else the products'), or `None` without weights.
    pub fn valu_per_weight_with(&self, batch: usize, facts: &LoopFacts) -> Option<f64> {
        let w = facts
            .weights_per_trip
            .unwrap_or_else(|| self.weights(batch));
        (w > 0.0).then(|| self.valu_per_trip(facts) / w)
    }
}

/// A weight product: `v_dot2_f32_f16`, `v_fma_mix_f32` or `v_dot4_i32_i8`.
fn is_product(m: &str) -> bool {
    m.starts_with("v_dot2_f32_f16")
        || m.starts_with("v_fma_mix_f32")
        || m.starts_with("v_dot4_i32_i8")
}

/// `x` with at most two decimals and no trailing zeros (`16`, `0.5`, `90.06`).
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The loops of [`hottest_loops`] (instruction indices `(first, last)` of the range from a
/// backward branch's target to the branch).
struct HotLoops {
    /// The loop with the most products, then the most instructions (the first of equals).
    longest: (usize, usize),
    /// Of the loops with as many products, the innermost: none of them inside it with a later
    /// head (two back edges to one head are one loop: the longer range, item 3's reload tail).
    /// [`HotLoops::longest`] where nothing of as many products is nested inside it.
    innermost: (usize, usize),
    /// The nearest loop of as many products around [`HotLoops::innermost`] (the latest head,
    /// then the longest), if any.
    around: Option<(usize, usize)>,
}

fn hottest_loops(ins: &[(u64, String, Option<u64>)]) -> Option<HotLoops> {
    let products =
        |(s, e): (usize, usize)| ins[s..=e].iter().filter(|(_, m, _)| is_product(m)).count();
    let mut loops = Vec::new();
    for (i, (addr, m, target)) in ins.iter().enumerate() {
        // A loop closes with a backward conditional branch, or with an unconditional one
        // (`s_branch`) where the exit test is at the top.
        let Some(t) = target
            .filter(|t| t <= addr && (m.starts_with("s_cbranch") || m.as_str() == "s_branch"))
        else {
            continue;
        };
        let start = ins.iter().position(|(a, _, _)| *a >= t).unwrap_or(i);
        loops.push((start, i));
    }
    let most = loops.iter().map(|&l| products(l)).max()?;
    let hot: Vec<(usize, usize)> = loops.into_iter().filter(|&l| products(l) == most).collect();
    // The first of the longest, as `max_by_key` takes the last of equals.
    let longest = *hot.iter().rev().max_by_key(|&&(s, e)| e - s)?;
    // `a` around `b`: `b`'s head later, `b` inside `a`.
    let around = |a: (usize, usize), b: (usize, usize)| a.0 < b.0 && b.1 <= a.1;
    // Within the longest loop only: a disjoint loop of as many products elsewhere is not its
    // inner loop.
    let within = |a: (usize, usize)| longest.0 <= a.0 && a.1 <= longest.1;
    let innermost = *hot
        .iter()
        .rev()
        .filter(|&&a| within(a) && !hot.iter().any(|&b| around(a, b)))
        .max_by_key(|&&(s, e)| e - s)?;
    let nearest = hot
        .iter()
        .filter(|&&a| around(a, innermost))
        .max_by_key(|&&(s, e)| (s, e))
        .copied();
    Some(HotLoops {
        longest,
        innermost,
        around: nearest,
    })
}

/// Which instructions of a loop body (`first`..=`last`) a branch inside it jumps over on most
/// trips: a block a forward conditional branch skips, and the tail after a second back edge to
/// the loop's own first instruction when the tail holds no products (hipcc places a reload
/// block there: that branch goes back while the group lasts, the tail runs when it ends and
/// then jumps back itself; a tail with the products is the trip's work after a staging loop
/// that shares the head). A nested loop's back edge (to its own, later, first instruction)
/// skips nothing.
fn skipped_within(body: &[(u64, String, Option<u64>)], first: u64, last: u64) -> Vec<bool> {
    let mut skipped = vec![false; body.len()];
    for (i, (addr, m, target)) in body.iter().enumerate() {
        let Some(t) = target.filter(|t| *t <= last && m.starts_with("s_cbranch")) else {
            continue;
        };
        if t == first {
            if !body[i + 1..].iter().any(|(_, m, _)| is_product(m)) {
                for s in skipped.iter_mut().skip(i + 1) {
                    *s = true;
                }
            }
            continue;
        }
        if t <= *addr {
            continue;
        }
        for (j, (a, _, _)) in body.iter().enumerate().skip(i + 1) {
            if *a >= t {
                break;
            }
            skipped[j] = true;
        }
    }
    skipped
}

/// Which instructions outside the loop `(start, end)` a forward branch outside it jumps over,
/// where the skipped range does not hold the loop (a guard around the whole work is the path
/// taken).
fn skipped_outside(ins: &[(u64, String, Option<u64>)], (start, end): (usize, usize)) -> Vec<bool> {
    let mut skipped = vec![false; ins.len()];
    for (i, (addr, m, target)) in ins.iter().enumerate() {
        if (start..=end).contains(&i) {
            continue;
        }
        let Some(t) = target
            .filter(|t| *t > *addr && (m.starts_with("s_cbranch") || m.as_str() == "s_branch"))
        else {
            continue;
        };
        let to = ins
            .iter()
            .position(|(a, _, _)| *a >= t)
            .unwrap_or(ins.len());
        if i < start && to > end {
            continue;
        }
        for s in skipped.iter_mut().take(to).skip(i + 1) {
            *s = true;
        }
    }
    skipped
}

/// `(address, mnemonic, backward-or-forward branch target)` of every instruction line of
/// llvm-objdump's disassembly (`s_waitcnt` keeps its operands in the mnemonic slot).
pub fn instructions_with_targets(disasm: &str) -> Vec<(u64, String, Option<u64>)> {
    // Each instruction line ends with `// <address>: <encoding>`; branches add `<sym+0xOFF>`.
    let mut ins = Vec::new();
    let mut base = None;
    for l in disasm.lines() {
        if l.ends_with(">:") {
            base = u64::from_str_radix(l.split_whitespace().next().unwrap_or(""), 16).ok();
            continue;
        }
        let Some((code, comment)) = l.split_once("//") else {
            continue;
        };
        let Some(addr) = comment
            .trim()
            .split(':')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        else {
            continue;
        };
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        let target = comment
            .split('<')
            .nth(1)
            .and_then(|t| t.split("+0x").nth(1))
            .and_then(|o| u64::from_str_radix(o.trim_end_matches('>'), 16).ok())
            .zip(base)
            .map(|(off, b)| b + off);
        let m = code.split_whitespace().next().unwrap_or("").to_owned();
        let full = code.to_owned();
        // keep the operands of waits (vmcnt) in the mnemonic slot for `in_flight`
        let m = if m == "s_waitcnt" { full } else { m };
        ins.push((addr, m, target));
    }
    ins
}

/// Bytes of a vector-memory load mnemonic, or `None` for other instructions.
fn load_bytes(m: &str) -> Option<u32> {
    let rest = m
        .strip_prefix("global_load_")
        .or_else(|| m.strip_prefix("buffer_load_"))
        .or_else(|| m.strip_prefix("flat_load_"))?;
    Some(match rest {
        "dwordx4" => 16,
        "dwordx3" => 12,
        "dwordx2" => 8,
        "dword" => 4,
        "ushort" | "sshort" | "short_d16" | "short_d16_hi" => 2,
        _ => 1,
    })
}

/// The most bytes per lane of loads outstanding at once in `body` (one pass, in order).
pub(super) fn in_flight(body: &[&str]) -> u32 {
    let mut outstanding: Vec<u32> = Vec::new();
    let mut most = 0;
    for m in body {
        if let Some(b) = load_bytes(m) {
            outstanding.push(b);
            most = most.max(outstanding.iter().sum());
        } else if let Some(n) = m
            .split("vmcnt(")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|n| n.parse::<usize>().ok())
        {
            let keep = outstanding.len().saturating_sub(n);
            outstanding.drain(..keep);
        }
    }
    most
}
