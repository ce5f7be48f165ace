//! Without a GPU: the block at the simulator's small shapes (`wavefuse sim`'s, hidden 128, FFN
//! shard 128), both kernels lowered for sm_90 and gfx906 and run by the CPU protocol simulator
//! under seeded schedules, chained (the first kernel's simulated output feeds the second), and
//! compared with the chained f64 reference.

use wavefuse_codegen::Arch;
use wavefuse_codegen::sim::{SimOptions, simulate};
use wavefuse_harness::sim::{self, SmallShapes};
use wavefuse_harness::suite::Worst;
use wavefuse_kernels::KernelId;
use wavefuse_runtime::exec::compare;

use crate::block::{Block, BlockData, TOLERANCE, TP, feed};

/// One simulated schedule of the chain.
#[derive(Clone, Debug)]
pub struct SimRun {
    /// Target whose lowering ran.
    pub arch: Arch,
    /// Schedule index (lane / wave granularity and skew vary with it).
    pub schedule: u64,
    /// Simulator findings (stale reads, deadlocks, races …) of both kernels, as text.
    pub findings: Vec<String>,
    /// The intermediate `y` against its reference.
    pub y: Worst,
    /// The block's outputs against the chained reference.
    pub out: Worst,
}

impl SimRun {
    /// No findings and every output within [`TOLERANCE`].
    pub fn passes(&self) -> bool {
        self.findings.is_empty() && self.y.passes(TOLERANCE) && self.out.passes(TOLERANCE)
    }
}

/// The chain at small shapes under `schedules` schedules per target.
pub fn check(seed: u64, schedules: u64) -> Result<Vec<SimRun>, String> {
    let mut runs = Vec::new();
    for arch in [Arch::Sm90, Arch::Gfx906] {
        let prep = |id| {
            sim::prepare(id, TP, arch, &SmallShapes::DEFAULT)
                .map_err(|e| format!("{id} at small shapes for {arch}: {e}"))
        };
        let (a, b) = (
            prep(KernelId::GemvInt4DualSilu)?,
            prep(KernelId::GemvInt4AllreduceRmsnorm)?,
        );
        let block = Block {
            gate_up: a.ir.clone(),
            down: b.ir.clone(),
        };
        let data = BlockData::new(&block, seed)?;
        for schedule in 0..schedules {
            let opts = SimOptions::sweep(seed, schedule);
            let ra = simulate(
                &a.lowered,
                &a.ir,
                std::slice::from_ref(&data.gate_up_inputs),
                &opts,
            )
            .map_err(|e| format!("simulating {}: {e}", a.ir.name()))?;
            let y = ra
                .outputs
                .first()
                .ok_or_else(|| format!("{}: the launch did not complete", a.ir.name()))?;
            let inputs_b = feed(&block, data.down_inputs.clone(), y)?;
            let rb = simulate(&b.lowered, &b.ir, &[inputs_b], &opts)
                .map_err(|e| format!("simulating {}: {e}", b.ir.name()))?;
            let out = rb
                .outputs
                .first()
                .ok_or_else(|| format!("{}: the launch did not complete", b.ir.name()))?;
            let findings = ra
                .findings
                .iter()
                .chain(&rb.findings)
                .map(|f| f.to_string())
                .collect();
            runs.push(SimRun {
                arch,
                schedule,
                findings,
                y: Worst::of(&compare(&a.ir, y, &data.gate_up_ref)),
                out: Worst::of(&compare(&b.ir, out, &data.down_ref)),
            });
        }
    }
    Ok(runs)
}
