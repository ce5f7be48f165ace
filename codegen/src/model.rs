//! The gfx906 time model: what an INT4 GEMV would take on an MI50, from the instruction counts
//! of hipcc's machine code and the bytes the kernel must move — until an MI50 is at hand, a time
//! on gfx906 is this model's, labelled "modelled (MI50)" and printed with its inputs
//! (DESIGN.md §8).
//!
//! ```text
//! modelled = max(1.18 · T_VALU + 10.6 µs,  bytes / 0.85 TB/s + 5 µs)
//! T_VALU   = VALU lane-instructions / 6.62e12 per s
//! ```
//!
//! Sources (DESIGN.md §6, public MI50 measurements with hipcc 5.2's instruction counts):
//! - VALU peak: 60 CUs × 64 lanes × 1.725 GHz = 6.62 T lane-instructions per second;
//! - hand-written INT4 GEMVs at 7.2–8.0 VALU instructions per weight took 38–48 µs at
//!   5120 → 4352/5120, fitting `T ≈ 1.18 · T_VALU + 10.6 µs` back to back (VALU-bound);
//! - a memory-bound kernel takes `bytes / 0.85 TB/s + ~5 µs` (streaming `global_load_dwordx4`
//!   reads reach ~870 GB/s on an MI50);
//! - the latency of HBM2 needs loads in flight: fewer than ~16 KB per CU at the compiled
//!   occupancy is flagged (the memory term then assumes bandwidth the kernel cannot draw).
//!
//! The VALU count is the hot loop's VALU instructions per weight × the weights (every weight is
//! handled by exactly one lane; the per-weight count includes the loop's address arithmetic and
//! every batch row's products). Instructions outside the hot loop (prologue, cross-slice
//! reduction, epilogue) are not counted: in a GEMV they are a few per output column, under 1 %
//! of the loop's at the Qwen shapes. The bytes are the data arrays' once and the scratch arrays'
//! (split-K partials, published partials) twice: written once, read once. Not modelled: cross-GPU communication (the fused kernel's
//! allreduce and flags), tail effects of a grid that does not fill the CUs evenly, the L2.
//! The hot loop is searched in one kernel's code when the symbol is known
//! ([`HotLoop::from_disassembly_of`]: a hand-written file may hold several kernels), and what was
//! counted is printed with the model ([`HotLoop::counted`]). docs/model.md describes the model
//! for users. Pure functions of explicit inputs: nothing here reads a device, a file or the
//! environment.

use std::fmt;

use serde::Serialize;

use crate::lowered::{LoweredKernel, ParamKind, Purpose};

/// MI50 VALU lane-instructions per second: 60 CUs × 64 lanes × 1.725 GHz (DESIGN.md §6).
pub const MI50_VALU_LANE_INSTRUCTIONS_PER_S: f64 = 60.0 * 64.0 * 1.725e9;
/// Slope of the VALU-bound fit `T ≈ 1.18 · T_VALU + 10.6 µs` (DESIGN.md §6).
pub const MI50_VALU_FIT_SLOPE: f64 = 1.18;
/// Offset of the VALU-bound fit, in µs (DESIGN.md §6).
pub const MI50_VALU_FIT_OFFSET_US: f64 = 10.6;
/// Streaming read bandwidth of a memory-bound kernel, bytes per second (DESIGN.md §6).
pub const MI50_MEMORY_BYTES_PER_S: f64 = 0.85e12;
/// Fixed cost of a memory-bound kernel, in µs (DESIGN.md §6).
pub const MI50_MEMORY_OFFSET_US: f64 = 5.0;
/// Bytes of loads in flight per CU below which the kernel is flagged as latency-bound.
pub const MI50_MIN_BYTES_IN_FLIGHT_PER_CU: f64 = 16.0 * 1024.0;
/// MI50 compute units.
pub const MI50_CUS: u32 = 60;
/// SIMDs per compute unit (each holds up to 10 waves).
pub const MI50_SIMDS_PER_CU: u32 = 4;
/// Lanes per wave on gfx906.
pub const MI50_WAVE: u32 = 64;

/// What the model needs, all explicit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelInputs {
    /// VALU instructions per weight in the hot loop (per lane, whole loop body: decode, products,
    /// address arithmetic, loop control).
    pub valu_per_weight: f64,
    /// Weights the kernel multiplies (K × N per GEMV; every one handled by one lane once).
    pub weights: f64,
    /// Further VALU lane-instructions outside the hot loop, where known (else 0).
    pub other_valu_lane_instructions: f64,
    /// Bytes the kernel must move (weights, scales, zero points, activations, outputs).
    pub bytes: f64,
    /// Bytes of loads one wave has in flight at most in the hot loop.
    pub bytes_in_flight_per_wave: f64,
    /// Waves resident per SIMD at the compiled occupancy (hipcc's report).
    pub occupancy: u32,
    /// Workgroups of one launch.
    pub grid: u32,
    /// Lanes per workgroup.
    pub workgroup_size: u32,
    /// What was counted: the kernel symbol and the address range of its hot loop in the code
    /// object ([`HotLoop::counted`]); empty when not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub counted: String,
}

/// Which term of the model is the larger.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// `1.18 · T_VALU + 10.6 µs`.
    Valu,
    /// `bytes / 0.85 TB/s + 5 µs`.
    Memory,
}

/// The model's prediction for one kernel, with its inputs: "modelled (MI50)".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Modelled {
    /// The inputs it was computed from.
    pub inputs: ModelInputs,
    /// VALU lane-instructions of the launch.
    pub valu_lane_instructions: f64,
    /// `VALU lane-instructions / 6.62e12 per s`, in µs.
    pub t_valu_us: f64,
    /// `1.18 · T_VALU + 10.6 µs`.
    pub valu_term_us: f64,
    /// `bytes / 0.85 TB/s + 5 µs`.
    pub memory_term_us: f64,
    /// The larger of the two terms: the modelled time.
    pub us: f64,
    /// Which term it is.
    pub bound: Bound,
    /// Bytes of loads in flight per CU: per wave × the waves resident per CU (the fewer of the
    /// occupancy's `4 · occupancy` and the grid's waves spread over the 60 CUs).
    pub bytes_in_flight_per_cu: f64,
    /// Set when `bytes_in_flight_per_cu` is under 16 KB: the memory term is then optimistic.
    pub few_loads_in_flight: bool,
}

impl Modelled {
    /// Bytes moved per modelled second, in GB/s.
    pub fn gb_per_s(&self) -> f64 {
        self.inputs.bytes / (self.us * 1e-6) / 1e9
    }
}

/// The model (see the module documentation).
pub fn model(inputs: &ModelInputs) -> Modelled {
    let valu = inputs.valu_per_weight * inputs.weights + inputs.other_valu_lane_instructions;
    let t_valu_us = valu / MI50_VALU_LANE_INSTRUCTIONS_PER_S * 1e6;
    let valu_term_us = MI50_VALU_FIT_SLOPE * t_valu_us + MI50_VALU_FIT_OFFSET_US;
    let memory_term_us = inputs.bytes / MI50_MEMORY_BYTES_PER_S * 1e6 + MI50_MEMORY_OFFSET_US;
    let (us, bound) = if valu_term_us > memory_term_us {
        (valu_term_us, Bound::Valu)
    } else {
        (memory_term_us, Bound::Memory)
    };
    let waves_per_wg = inputs.workgroup_size.div_ceil(MI50_WAVE) as f64;
    let grid_waves_per_cu = inputs.grid as f64 * waves_per_wg / MI50_CUS as f64;
    let resident = (inputs.occupancy * MI50_SIMDS_PER_CU) as f64;
    let bytes_in_flight_per_cu = inputs.bytes_in_flight_per_wave * resident.min(grid_waves_per_cu);
    Modelled {
        inputs: inputs.clone(),
        valu_lane_instructions: valu,
        t_valu_us,
        valu_term_us,
        memory_term_us,
        us,
        bound,
        bytes_in_flight_per_cu,
        few_loads_in_flight: bytes_in_flight_per_cu < MI50_MIN_BYTES_IN_FLIGHT_PER_CU,
    }
}

impl fmt::Display for Modelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inputs;
        write!(
            f,
            "modelled (MI50): {:.1} us ({}-bound, {:.0} GB/s) = max(1.18 x {:.1} + 10.6, {:.1} MB / 0.85 TB/s + 5) us; \
             inputs: {:.2} VALU/weight x {:.1} M weights, {:.2} MB, occupancy {}, {} x {} lanes, {:.1} KB loads in flight per CU{}",
            self.us,
            match self.bound {
                Bound::Valu => "VALU",
                Bound::Memory => "memory",
            },
            self.gb_per_s(),
            self.t_valu_us,
            i.bytes / 1e6,
            i.valu_per_weight,
            i.weights / 1e6,
            i.bytes / 1e6,
            i.occupancy,
            i.grid,
            i.workgroup_size,
            self.bytes_in_flight_per_cu / 1024.0,
            if self.few_loads_in_flight {
                " (FEWER THAN 16 KB: latency-bound, the memory term is optimistic)"
            } else {
                ""
            }
        )?;
        if !i.counted.is_empty() {
            write!(f, "; counted: {}", i.counted)?;
        }
        Ok(())
    }
}

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
    /// skip (a per-group reload): counted on every iteration all the same.
    pub skippable_valu: usize,
    /// VALU instructions of the searched code outside the loop (not counted).
    pub valu_outside: usize,
}

impl HotLoop {
    /// The hot loop of a disassembly (`llvm-objdump -d --mcpu=gfx906`): of the ranges from a
    /// backward branch's target to the branch, the one with the most products
    /// (`v_dot2_f32_f16`, `v_fma_mix_f32`), then the longest — so a long spin loop (a peer-flag
    /// wait) is not taken for the GEMV's. `None` without a backward branch.
    pub fn from_disassembly(disasm: &str) -> Option<HotLoop> {
        HotLoop::of_instructions(&instructions_with_targets(disasm))
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
        Some(hot)
    }

    /// What was counted, in words: `` loop 0x1a0..0x3f4 (212 instructions) of `sym` ``.
    pub fn counted(&self) -> String {
        let of = self
            .symbol
            .as_deref()
            .map_or("the whole code object".to_owned(), |s| format!("`{s}`"));
        let mut s = format!(
            "loop {:#x}..{:#x} ({} instructions) of {of}",
            self.first,
            self.last,
            self.mnemonics.len()
        );
        if self.skippable_valu > 0 {
            s.push_str(&format!(
                "; {} of its {} VALU are in blocks a branch may skip, counted on every iteration",
                self.skippable_valu, self.valu
            ));
        }
        if self.symbol.is_some() && self.valu_outside > 0 {
            s.push_str(&format!(
                "; {} VALU instructions outside the loop (in the code, not per execution), not counted",
                self.valu_outside
            ));
        }
        s
    }

    fn of_instructions(ins: &[(u64, String, Option<u64>)]) -> Option<HotLoop> {
        let products = |b: &[(u64, String, Option<u64>)]| {
            b.iter()
                .filter(|(_, m, _)| {
                    m.starts_with("v_dot2_f32_f16")
                        || m.starts_with("v_fma_mix_f32")
                        || m.starts_with("v_dot4_i32_i8")
                })
                .count()
        };
        let mut best: Option<&[(u64, String, Option<u64>)]> = None;
        for (i, (addr, m, target)) in ins.iter().enumerate() {
            // A loop closes with a backward conditional branch, or with an unconditional one
            // (`s_branch`) where the exit test is at the top.
            let Some(t) = target
                .filter(|t| t <= addr && (m.starts_with("s_cbranch") || m.as_str() == "s_branch"))
            else {
                continue;
            };
            let start = ins.iter().position(|(a, _, _)| *a >= t).unwrap_or(i);
            let cand = &ins[start..=i];
            if best.is_none_or(|b| (products(cand), cand.len()) > (products(b), b.len())) {
                best = Some(cand);
            }
        }
        let body = best?;
        let (first, last) = (body[0].0, body[body.len() - 1].0);
        // Blocks a forward conditional branch inside the loop jumps over.
        let mut skippable = vec![false; body.len()];
        for (i, (addr, m, target)) in body.iter().enumerate() {
            if let Some(t) =
                target.filter(|t| *t > *addr && *t <= last && m.starts_with("s_cbranch"))
            {
                for (j, (a, _, _)) in body.iter().enumerate().skip(i + 1) {
                    if *a >= t {
                        break;
                    }
                    skippable[j] = true;
                }
            }
        }
        let skippable_valu = body
            .iter()
            .zip(&skippable)
            .filter(|((_, m, _), s)| **s && m.starts_with("v_"))
            .count();
        let all_valu = ins.iter().filter(|(_, m, _)| m.starts_with("v_")).count();
        let loop_valu = body.iter().filter(|(_, m, _)| m.starts_with("v_")).count();
        let mnemonics: Vec<String> = body.iter().map(|(_, m, _)| m.clone()).collect();
        let count = |p: &str| mnemonics.iter().filter(|m| m.starts_with(p)).count();
        Some(HotLoop {
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
            valu_outside: all_valu - loop_valu,
        })
    }

    /// Weights one lane handles per loop iteration at `batch` rows: four per `v_dot4_i32_i8`
    /// and row on the q8 path, two per `v_dot2_f32_f16` and row on the dot2 path, else one per
    /// `v_fma_mix_f32` and row (the dot2 path's per-unit scale folds into a `v_fma_mix_f32` per
    /// column word, which is not a weight).
    pub fn weights(&self, batch: usize) -> f64 {
        match (self.dot4, self.dot2) {
            (0, 0) => self.fma_mix as f64 / batch as f64,
            (0, d) => 2.0 * d as f64 / batch as f64,
            (d, _) => 4.0 * d as f64 / batch as f64,
        }
    }

    /// VALU instructions per weight (`valu / weights`), or `None` without products.
    pub fn valu_per_weight(&self, batch: usize) -> Option<f64> {
        let w = self.weights(batch);
        (w > 0.0).then(|| self.valu as f64 / w)
    }
}

/// The inputs of the model for a lowered GPTQ kernel: the weights and bytes from its array
/// parameters (`qweight` words × 8 weights; every data array read or written once, every scratch
/// array — split-K partials, published allreduce partials, norm partials — written once and read
/// once, so counted twice), the rest from its hot loop and hipcc's occupancy. `None` without
/// INT4 weights or products.
pub fn inputs_for(
    k: &LoweredKernel,
    hot: &HotLoop,
    batch: usize,
    occupancy: u32,
) -> Option<ModelInputs> {
    let (mut weights, mut bytes) = (0.0, 0.0);
    for (_, p) in k.params.iter() {
        if let ParamKind::Array {
            elem,
            len,
            purpose: Purpose::Data { part, .. },
            ..
        } = &p.kind
        {
            bytes += (*len * elem.bytes()) as f64;
            if *part == "qweight" {
                weights += (*len * 8) as f64;
            }
        }
    }
    bytes += 2.0 * scratch_bytes(k);
    (weights > 0.0).then_some(())?;
    Some(ModelInputs {
        valu_per_weight: hot.valu_per_weight(batch)?,
        weights,
        other_valu_lane_instructions: 0.0,
        bytes,
        bytes_in_flight_per_wave: (hot.bytes_in_flight_per_lane * MI50_WAVE) as f64,
        occupancy,
        grid: k.grid,
        workgroup_size: k.workgroup_size,
        counted: hot.counted(),
    })
}

/// Bytes of the kernel's scratch arrays (split-K partials, published partials, norm partials):
/// each is written once and read once, so [`inputs_for`] counts them twice.
pub fn scratch_bytes(k: &LoweredKernel) -> f64 {
    k.params
        .iter()
        .map(|(_, p)| match &p.kind {
            ParamKind::Array {
                elem,
                len,
                purpose: Purpose::Scratch,
                ..
            } => (*len * elem.bytes()) as f64,
            _ => 0.0,
        })
        .sum()
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
fn in_flight(body: &[&str]) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(valu_per_weight: f64, weights: f64, bytes: f64) -> ModelInputs {
        ModelInputs {
            valu_per_weight,
            weights,
            other_valu_lane_instructions: 0.0,
            bytes,
            bytes_in_flight_per_wave: 8192.0,
            occupancy: 4,
            grid: 272,
            workgroup_size: 256,
            counted: String::new(),
        }
    }

    /// DESIGN.md §6's numbers: 8.0 VALU per weight at 5120 → 17408 is VALU-bound at ~138 µs;
    /// 2.0 is memory-bound at the 46.3 MB floor.
    #[test]
    fn the_fit_reproduces_the_design_numbers() {
        let w = 5120.0 * 17408.0;
        let fma = model(&inputs(8.0, w, 46.3e6));
        assert_eq!(fma.bound, Bound::Valu);
        let expect = 1.18 * (8.0 * w / 6.624e12 * 1e6) + 10.6;
        assert!((fma.us - expect).abs() < 1e-9, "{fma}");
        assert!((fma.us - 137.7).abs() < 0.5, "{fma}");
        let floor = model(&inputs(2.0, w, 46.3e6));
        assert_eq!(floor.bound, Bound::Memory);
        assert!((floor.us - (46.3e6 / 0.85e12 * 1e6 + 5.0)).abs() < 1e-9);
        assert!(
            floor
                .to_string()
                .starts_with("modelled (MI50): 59.5 us (memory-bound")
        );
    }

    /// Two kernels in one code object (tile variants of one file): the hotter loop is in `big`,
    /// but the model of `small` counts `small`'s loop only, and says which one it counted.
    #[test]
    fn the_hot_loop_of_a_symbol_is_searched_in_its_code_only() {
        let disasm = "\
0000000000001000 <small>:
\tv_add_u32_e32 v1, v2, v3 // 000000001000: 68020702
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001004: D3A30004
\ts_cbranch_scc1 65534 // 000000001008: BF85FFFE <small+0x4>
\ts_endpgm // 00000000100C: BF810000

0000000000002000 <big>:
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002000: D3A30004
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002004: D3A30004
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002008: D3A30004
\ts_cbranch_scc1 65532 // 00000000200C: BF85FFFC <big+0x0>
\ts_endpgm // 000000002010: BF810000
";
        let whole = HotLoop::from_disassembly(disasm).expect("a loop");
        assert_eq!((whole.dot2, whole.first, whole.last), (3, 0x2000, 0x200c));
        let small = HotLoop::from_disassembly_of(disasm, "small").expect("its loop");
        assert_eq!((small.dot2, small.valu), (1, 1));
        assert_eq!((small.first, small.last), (0x1004, 0x1008));
        assert_eq!(
            small.counted(),
            "loop 0x1004..0x1008 (2 instructions) of `small`; 1 VALU instructions outside the loop (in the code, not per execution), not counted"
        );
        assert!(HotLoop::from_disassembly_of(disasm, "absent").is_none());
        // `small`'s one VALU outside its loop is said, not counted.
        let big = HotLoop::from_disassembly_of(disasm, "big").expect("its loop");
        assert_eq!((big.valu_outside, big.skippable_valu), (0, 0));
        assert_eq!(small.valu_outside, 1);
    }

    /// A reload block a forward branch skips on most iterations is charged on every iteration;
    /// the count says how much of the loop that is.
    #[test]
    fn blocks_a_branch_skips_inside_the_loop_are_said() {
        let disasm = "\
0000000000001000 <k>:
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001000: D3A30004
\ts_cbranch_execz 2 // 000000001004: BF880002 <k+0x10>
\tv_mov_b32_e32 v7, v8 // 000000001008: 7E0E0308
\tv_mov_b32_e32 v9, v8 // 00000000100C: 7E120308
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001010: D3A30004
\ts_cbranch_scc1 65530 // 000000001014: BF85FFFA <k+0x0>
";
        let h = HotLoop::from_disassembly_of(disasm, "k").expect("a loop");
        assert_eq!((h.valu, h.skippable_valu, h.valu_outside), (4, 2, 0));
        assert!(
            h.counted().ends_with(
                "; 2 of its 4 VALU are in blocks a branch may skip, counted on every iteration"
            ),
            "{}",
            h.counted()
        );
    }

    #[test]
    fn few_loads_in_flight_are_flagged() {
        let mut i = inputs(2.0, 1e6, 1e6);
        i.bytes_in_flight_per_wave = 1024.0;
        i.grid = 60;
        // 4 waves per CU from the grid × 1 KB = 4 KB per CU
        let m = model(&i);
        assert!((m.bytes_in_flight_per_cu - 4096.0).abs() < 1e-9);
        assert!(m.few_loads_in_flight);
        i.grid = 600; // the occupancy caps it: 16 waves × 1 KB
        assert!(!model(&i).few_loads_in_flight);
    }

    #[test]
    fn in_flight_follows_vmcnt() {
        let body = [
            "global_load_dwordx4",
            "global_load_dwordx4",
            "global_load_dword",
            "s_waitcnt vmcnt(1)",
            "global_load_dwordx2",
            "s_waitcnt vmcnt(0)",
        ];
        assert_eq!(in_flight(&body), 36);
    }
}
