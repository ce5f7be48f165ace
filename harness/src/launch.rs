//! One launch with the typed arguments of a kernel's declaration: the `…Args` structs of
//! `wavefuse::kernel!` ([`KernelArgs`]) bound to a device — or to the CPU protocol simulator, where
//! there is none — the generated kernel run once, the outputs written back into the slices the
//! arguments bound.
//!
//! The arguments are checked against the kernel first (names, shardings, element types, weight
//! layouts, per-rank lengths: [`wavefuse::host::ArgError`]); nothing runs on a mismatch. The
//! exchange buffers of a kernel with an allreduce are the rank group's own (the runtime allocates
//! and orders them), so the arguments' `peers` are not used here: they are for an engine that
//! manages its own buffers and launches the generated source itself.

use std::fmt;

use wavefuse::host::{ArgError, KernelArgs};
use wavefuse::ir::Kernel;
use wavefuse::ir::reference::{RankInputs, RankOutputs, evaluate};
use wavefuse_codegen::Generated;
use wavefuse_codegen::sim::{Case, SimOptions, simulate_case};
use wavefuse_runtime::exec::OpKernel;
use wavefuse_runtime::{Cache, Device, RankGroup};

/// Why a launch did not happen or did not finish.
#[derive(Debug)]
pub enum LaunchError {
    /// Rank `rank`'s arguments do not fit the kernel (nothing was launched).
    Args {
        /// The rank.
        rank: usize,
        /// The mismatch.
        error: ArgError,
    },
    /// One set of arguments per rank of the kernel's TP group is needed.
    Ranks {
        /// The kernel's TP size.
        tp: u32,
        /// Argument sets given.
        given: usize,
    },
    /// Compiling, binding or running on the device failed.
    Device(String),
    /// The simulator found a protocol defect or could not run the kernel.
    Simulator(String),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Args { rank, error } => {
                write!(f, "rank {rank}: {error} (nothing was launched)")
            }
            LaunchError::Ranks { tp, given } => write!(
                f,
                "the kernel's TP group has {tp} ranks: one set of arguments each, {given} given"
            ),
            LaunchError::Device(e) => write!(f, "device: {e}"),
            LaunchError::Simulator(e) => write!(f, "simulator: {e}"),
        }
    }
}

impl std::error::Error for LaunchError {}

/// Every rank's inputs, checked.
fn gather<A: KernelArgs>(ir: &Kernel, ranks: &[A]) -> Result<Vec<RankInputs>, LaunchError> {
    if ranks.len() != ir.tp() as usize {
        return Err(LaunchError::Ranks {
            tp: ir.tp(),
            given: ranks.len(),
        });
    }
    ranks
        .iter()
        .enumerate()
        .map(|(rank, a)| {
            a.inputs(ir)
                .map_err(|error| LaunchError::Args { rank, error })
        })
        .collect()
}

fn scatter<A: KernelArgs>(
    ir: &Kernel,
    ranks: &mut [A],
    outputs: &[RankOutputs],
) -> Result<(), LaunchError> {
    for (rank, (a, o)) in ranks.iter_mut().zip(outputs).enumerate() {
        a.write_outputs(ir, o)
            .map_err(|error| LaunchError::Args { rank, error })?;
    }
    Ok(())
}

/// Launch `g` (generated from `ir`, e.g. by [`crate::pipeline::generate`] or
/// [`wavefuse_codegen::compile`]) once on `group` with `ranks[r]` as rank r's arguments; compiled
/// through `cache` with the target's compiler. The outputs are written into the arguments.
pub fn launch<A: KernelArgs, D: Device>(
    group: &RankGroup<D>,
    cache: &Cache,
    ir: &Kernel,
    g: &Generated,
    ranks: &mut [A],
) -> Result<(), LaunchError> {
    let inputs = gather(ir, ranks)?;
    let (artifact, _) =
        crate::pipeline::artifact(cache, g).map_err(|e| LaunchError::Device(e.to_string()))?;
    let mut k = OpKernel::new(group, ir, &g.abi, &artifact)
        .map_err(|e| LaunchError::Device(e.to_string()))?;
    let outputs = k
        .run(&inputs)
        .map_err(|e| LaunchError::Device(e.to_string()))?;
    scatter(ir, ranks, &outputs)
}

/// [`launch`] in the CPU protocol simulator instead of a device (one seeded interleaving of the
/// workgroups, `seed`): the lowered kernel's every lane executed, the outputs written into the
/// arguments. A protocol defect the simulator sees is an error.
pub fn simulate<A: KernelArgs>(
    ir: &Kernel,
    g: &Generated,
    ranks: &mut [A],
    seed: u64,
) -> Result<(), LaunchError> {
    let inputs = gather(ir, ranks)?;
    let reference = evaluate(ir, &inputs).map_err(|e| LaunchError::Simulator(e.to_string()))?;
    let case = Case {
        inputs: vec![inputs],
        reference: vec![reference],
    };
    let report = simulate_case(&g.lowered, ir, &case, &SimOptions::new(seed))
        .map_err(|e| LaunchError::Simulator(e.to_string()))?;
    if let Some(f) = report.findings.first() {
        return Err(LaunchError::Simulator(f.to_string()));
    }
    let outputs = report
        .outputs
        .first()
        .ok_or_else(|| LaunchError::Simulator("the launch did not complete".into()))?;
    scatter(ir, ranks, outputs)
}
