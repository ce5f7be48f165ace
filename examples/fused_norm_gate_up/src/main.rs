//! A new fused kernel in the wavefuse DSL: RMSNorm of the residual stream, then the FFN's gate and
//! up INT4 GEMVs sharing one read of the normalised activation, then `silu(gate) · up`, in one
//! launch per rank (column-parallel over TP = 4).
//!
//! The example prints the kernel's IR, evaluates it with the f64 reference semantics on the
//! default synthetic workload, checks it against the unfused pipeline (a norm-only kernel followed
//! by the kernel set's `gemv_int4_dual_silu`), lowers it for gfx906 (HIP) and sm_90 (CUDA) with
//! each target's default schedule (the normalised activation is a GEMV prologue, recomputed by
//! every workgroup into LDS) and binds one rank's arguments through the typed host API. The
//! crate's tests run the lowered kernel in the protocol simulator against the f64 reference,
//! compile it with hipcc and nvcc and snapshot its source.
//!
//! Run: `cargo run -p fused-norm-gate-up`.

use std::error::Error;
use std::time::Instant;

use wavefuse::host::{ColParallel, Gptq, Input, Output, Replicated, f16};
use wavefuse::ir::reference::{HostData, HostTensor, RankInputs, RankOutputs, evaluate};
use wavefuse::ir::{Kernel, validate};
use wavefuse_codegen::{Arch, compile, lower::Schedule};
use wavefuse_kernels::{KernelId, Shapes, Workload};

use fused_norm_gate_up::{RmsnormGateUpSiluArgs, rmsnorm_gate_up_silu, rmsnorm_only};

fn main() -> Result<(), Box<dyn Error>> {
    let s = Shapes::qwen27b(4);
    let fused = rmsnorm_gate_up_silu(s.tp, s.batch, s.ffn_local(), s.gptq);
    validate(&fused)?;
    print!("{fused}");

    let t = Instant::now();
    let inputs = Workload::new(Workload::DEFAULT_SEED).inputs(&fused);
    let generated = t.elapsed();
    let t = Instant::now();
    let outputs = evaluate(&fused, &inputs)?;
    let evaluated = t.elapsed();
    println!(
        "\nreference evaluation at tp={}, batch {}: inputs {:.0} ms, evaluation {:.0} ms",
        s.tp,
        s.batch,
        generated.as_secs_f64() * 1e3,
        evaluated.as_secs_f64() * 1e3
    );
    let y = fused.buffer_by_name("y").ok_or("no output y")?;
    for (rank, out) in outputs.iter().enumerate() {
        let (rms, max, bad) = summary(&out[&y].data);
        println!(
            "  rank {rank}: y f16[1, {}]  rms {rms:.4}  max|y| {max:.3}  non-finite {bad}",
            s.ffn_local()
        );
    }

    let diff = compare_with_unfused(&s, &fused, &inputs, &outputs)?;
    println!("fused vs rmsnorm_only + gemv_int4_dual_silu: max |Δy| = {diff:e} over all ranks");
    if diff != 0.0 {
        return Err("the fused kernel disagrees with the unfused pipeline".into());
    }

    lower_both(&fused)?;
    bind_rank0(&s, &fused, &inputs[0])
}

/// Lower and write the kernel for both targets with their default schedules, and say what came
/// out.
fn lower_both(fused: &Kernel) -> Result<(), Box<dyn Error>> {
    for arch in [Arch::Gfx906, Arch::Sm90] {
        let schedule = Schedule::default_for(arch, fused);
        let g = compile(fused, arch, &schedule)?;
        println!(
            "lowered for {arch}: {} workgroups x {} lanes, {} bytes of LDS per workgroup (the prologue's activation included), {} lines of {}",
            g.lowered.grid,
            g.lowered.workgroup_size,
            g.lowered.lds_bytes(),
            g.source.text.lines().count(),
            if arch == Arch::Gfx906 { "HIP" } else { "CUDA" },
        );
    }
    Ok(())
}

/// RMS, max |v| and the number of non-finite values.
fn summary(data: &[f64]) -> (f64, f64, usize) {
    let finite: Vec<f64> = data.iter().copied().filter(|v| v.is_finite()).collect();
    let rms = (finite.iter().map(|v| v * v).sum::<f64>() / finite.len().max(1) as f64).sqrt();
    let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    (rms, max, data.len() - finite.len())
}

/// Run the same data through the unfused pipeline; the rounding points are the same, so the
/// outputs must agree exactly.
fn compare_with_unfused(
    s: &Shapes,
    fused: &Kernel,
    inputs: &[RankInputs],
    outputs: &[RankOutputs],
) -> Result<f64, Box<dyn Error>> {
    let norm = rmsnorm_only(s.batch);
    let dual = KernelId::GemvInt4DualSilu.build(s);
    let find = |k: &Kernel, name: &str| k.buffer_by_name(name).ok_or(format!("no `{name}`"));
    let mut dual_inputs = Vec::new();
    for inp in inputs {
        // The norm runs on one rank (its data is replicated); the GEMVs on this rank's shards.
        let mut norm_in = RankInputs::new();
        for n in ["x", "norm_w"] {
            norm_in.insert(find(&norm, n)?, inp[&find(fused, n)?].clone());
        }
        let h = evaluate(&norm, &[norm_in])?
            .remove(0)
            .remove(&find(&norm, "h")?)
            .ok_or("no h")?;
        let mut dual_in = RankInputs::new();
        for n in ["w_gate", "w_up"] {
            dual_in.insert(find(&dual, n)?, inp[&find(fused, n)?].clone());
        }
        dual_in.insert(find(&dual, "x")?, HostData::Tensor(h));
        dual_inputs.push(dual_in);
    }
    let unfused = evaluate(&dual, &dual_inputs)?;
    let (fy, uy) = (find(fused, "y")?, find(&dual, "y")?);
    let mut max_diff = 0.0f64;
    for (f, u) in outputs.iter().zip(&unfused) {
        for (a, b) in f[&fy].data.iter().zip(&u[&uy].data) {
            max_diff = max_diff.max((a - b).abs());
        }
    }
    Ok(max_diff)
}

fn f16s(t: &HostTensor) -> Vec<f16> {
    t.data.iter().map(|&v| f16::from_f64(v)).collect()
}

/// Bind rank 0's workload through the typed host API and check it against the kernel, then
/// against the TP = 2 kernel, which it does not fit.
fn bind_rank0(s: &Shapes, fused: &Kernel, inputs: &RankInputs) -> Result<(), Box<dyn Error>> {
    let tensor = |name: &str| match fused.buffer_by_name(name).map(|b| &inputs[&b]) {
        Some(HostData::Tensor(t)) => Ok(f16s(t)),
        _ => Err(format!("no tensor `{name}`")),
    };
    let packed = |name: &str| match fused.buffer_by_name(name).map(|b| &inputs[&b]) {
        Some(HostData::Int4(p)) => {
            let scales: Vec<f16> = p.scales.iter().map(|&v| f16::from_f64(v)).collect();
            Ok((p.qweight.clone(), scales, p.qzeros.clone()))
        }
        _ => Err(format!("no INT4 weight `{name}`")),
    };
    let (x, norm_w) = (tensor("x")?, tensor("norm_w")?);
    let (gq, gs, gz) = packed("w_gate")?;
    let (uq, us, uz) = packed("w_up")?;
    let mut y = vec![f16::ZERO; s.batch * s.ffn_local()];
    let args = RmsnormGateUpSiluArgs {
        x: Input::<f16, Replicated>::new(&x),
        norm_w: Input::new(&norm_w),
        w_gate: Gptq::<ColParallel>::new(s.gptq, &gq, &gs, &gz, None),
        w_up: Gptq::<ColParallel>::new(s.gptq, &uq, &us, &uz, None),
        y: Output::new(&mut y),
    };
    args.check(fused)?;
    println!(
        "rank 0's arguments bind: {} parameters checked",
        fused.buffers().len()
    );
    let tp2 = Shapes::qwen27b(2);
    let other = rmsnorm_gate_up_silu(tp2.tp, tp2.batch, tp2.ffn_local(), tp2.gptq);
    match args.check(&other) {
        Err(e) => println!("the same arguments against the tp=2 kernel: {e}"),
        Ok(()) => return Err("a TP = 4 shard was accepted by the TP = 2 kernel".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use wavefuse::ir::parse;

    use super::*;

    /// print ∘ parse is the identity on this example's kernels too (docs/ir-format.md).
    fn assert_round_trip(kernel: &Kernel) {
        let text = kernel.to_string();
        let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"));
        assert_eq!(parsed.to_string(), text);
        assert_eq!(&parsed, kernel);
        assert_eq!(validate(&parsed).err(), validate(kernel).err());
    }

    #[test]
    fn kernels_round_trip_through_the_textual_ir() {
        for tp in [1, 2, 4, 8] {
            for batch in [1, 3] {
                let s = Shapes {
                    batch,
                    ..Shapes::qwen27b(tp)
                };
                let fused = rmsnorm_gate_up_silu(s.tp, s.batch, s.ffn_local(), s.gptq);
                validate(&fused).expect("the fused kernel validates");
                assert_round_trip(&fused);
                assert_round_trip(&rmsnorm_only(batch));
            }
        }
    }
}
