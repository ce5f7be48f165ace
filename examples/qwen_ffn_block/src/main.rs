//! One Qwen 3.5 27B decode FFN block, end to end, from the kernel set's generated kernels.
//!
//! At TP = 4 with all four ranks on one GPU (one stream per rank), per rank:
//! `gemv_int4_dual_silu` (5120 → 2 × 4352, `silu(gate) · up`), then
//! `gemv_int4_allreduce_rmsnorm` (4352 → 5120: the row-parallel down projection, the allreduce
//! of its partial sums, the residual add and the RMSNorm of the next layer's input). The example
//! checks the block's outputs (the new residual stream and the normalised activation, and the
//! intermediate `y`) against the chained f64 reference on fresh random inputs, times µs per block
//! next to the same chain built from the hand-written reference kernels (and, given the JSON of
//! `bench/torch/int4_baselines.py`, the PyTorch chain), and turns that into the FFN time of one
//! token over all 64 layers.
//!
//! Without an NVIDIA GPU it runs the chain at small shapes in the CPU protocol simulator instead,
//! says "timing skipped: no GPU", and exits 0 when the simulated chain is correct.
//!
//! Run: `cargo run --release -p qwen_ffn_block` (`--help` for the options).

mod block;
mod cpu;
mod gpu;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde_json::{Value as Json, json};
use wavefuse_harness::ab::report::Stats;
use wavefuse_harness::suite::{self, Worst};
use wavefuse_kernels::Workload;
use wavefuse_runtime::exec::OutputMetrics;

use block::{LAYERS, TOLERANCE, TOLERANCE_WHY, TP};

/// One Qwen 3.5 27B FFN block at TP = 4 on one GPU: generated vs hand-written vs PyTorch.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Run the CPU path (simulator at small shapes) even when a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Workload seed.
    #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
    seed: u64,
    /// Untimed one-block windows per repeat.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Timed one-block windows per repeat.
    #[arg(long, default_value_t = 200)]
    iters: usize,
    /// Timed 64-block windows per repeat.
    #[arg(long, default_value_t = 20)]
    windows: usize,
    /// Repeats of the whole timing.
    #[arg(long, default_value_t = 2)]
    repeats: usize,
    /// Simulated schedules per target on the CPU path.
    #[arg(long, default_value_t = 3)]
    schedules: u64,
    /// Skip the hand-written chain.
    #[arg(long)]
    no_hand: bool,
    /// The JSON written by `bench/torch/int4_baselines.py` on the same GPU: its FFN-block chain
    /// joins the table.
    #[arg(long)]
    torch: Option<PathBuf>,
    /// Write the results as JSON here (and the Markdown beside it, with `.md`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Compile the kernels this example runs into `$WAVEFUSE_CACHE_DIR` and exit (no GPU needed).
    #[arg(long)]
    prebuild: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = suite::locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    if args.prebuild {
        return match gpu::prebuild() {
            Ok(lines) => {
                lines.iter().for_each(|l| eprintln!("prebuilt {l}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: prebuilding: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let dev = if args.cpu {
        Err("--cpu".to_owned())
    } else {
        // open_cuda's hint names `wavefuse run`'s options; this example falls back by itself.
        suite::open_cuda().map_err(|e| match e {
            suite::GpuError::NoNvidia(e) => format!("no NVIDIA GPU/driver found: {e}"),
            e => e.to_string(),
        })
    };
    match dev {
        Ok(dev) => gpu_main(&args, dev),
        Err(why) => {
            println!(
                "no GPU run ({}): the CPU path",
                why.lines().next().unwrap_or("")
            );
            cpu_main(&args)
        }
    }
}

fn cpu_main(a: &Args) -> ExitCode {
    let runs = match cpu::check(a.seed, a.schedules) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "## Qwen 3.5 27B FFN block, TP = {TP}, CPU simulator (small shapes: hidden 128, FFN shard \
         128)\n"
    );
    println!("| target | schedule | findings | y rel L2 | residual_out, normed rel L2 (worst) | |");
    println!("|---|---:|---:|---:|---:|---|");
    for r in &runs {
        println!(
            "| {} | {} | {} | {:.2e} | {:.2e} | {} |",
            r.arch,
            r.schedule,
            r.findings.len(),
            r.y.rel_l2,
            r.out.rel_l2,
            if r.passes() { "pass" } else { "FAIL" }
        );
        for f in &r.findings {
            println!("  finding: {f}");
        }
    }
    println!("\ntolerance: relative L2 ≤ {TOLERANCE:.0e} per output and rank ({TOLERANCE_WHY})");
    println!("timing skipped: no GPU");
    if runs.iter().all(cpu::SimRun::passes) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn gpu_main(a: &Args, dev: wavefuse_runtime::CudaDevice) -> ExitCode {
    let plan = gpu::Plan {
        seed: a.seed,
        warmup: a.warmup,
        iters: a.iters,
        windows: a.windows,
        repeats: a.repeats.max(1),
        no_hand: a.no_hand,
        commit: std::env::var("WAVEFUSE_COMMIT").unwrap_or_else(|_| "unknown".into()),
    };
    let report = match gpu::run(dev, &plan) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let torch = a.torch.as_ref().map(|p| torch_block(p));
    let md = markdown(&report, torch.as_ref());
    print!("{md}");
    if let Some(path) = &a.json {
        let j = to_json(&report, &plan, torch.as_ref());
        let text = serde_json::to_string_pretty(&j).expect("JSON serialises");
        for (p, t) in [(path.clone(), text), (path.with_extension("md"), md)] {
            if let Err(e) = std::fs::write(&p, t) {
                eprintln!("error: writing {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
            eprintln!("wrote {}", p.display());
        }
    }
    let generated_ok = report
        .versions
        .first()
        .is_some_and(|m| m.error.is_none() && m.check.as_ref().is_some_and(gpu::Check::passes));
    if generated_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The PyTorch FFN block from the baselines' JSON: its stats, or why there are none.
#[derive(Clone, Debug)]
enum TorchBlock {
    Measured {
        median_us: f64,
        p10_us: f64,
        p90_us: f64,
        what: String,
    },
    Missing(String),
}

fn torch_block(path: &std::path::Path) -> TorchBlock {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return TorchBlock::Missing(format!("reading {}: {e}", path.display())),
    };
    let j: Json = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(e) => return TorchBlock::Missing(format!("{}: {e}", path.display())),
    };
    let b = &j["ffn_block_tp4"];
    if let Some(e) = b["error"].as_str() {
        return TorchBlock::Missing(format!("the PyTorch run failed: {e}"));
    }
    match (
        b["median_us"].as_f64(),
        b["p10_us"].as_f64(),
        b["p90_us"].as_f64(),
    ) {
        (Some(median_us), Some(p10_us), Some(p90_us)) => TorchBlock::Measured {
            median_us,
            p10_us,
            p90_us,
            what: b["what"].as_str().unwrap_or("").to_owned(),
        },
        _ => TorchBlock::Missing(format!("{}: no ffn_block_tp4 timing", path.display())),
    }
}

fn us(s: &Stats) -> String {
    format!("{:.1} ({:.1}–{:.1})", s.median_us, s.p10_us, s.p90_us)
}

/// The median over repeats of the per-repeat medians of one-block windows, in µs.
fn block_us(m: &gpu::Measured) -> Option<f64> {
    median(m.blocks.iter().map(|s| s.median_us))
}

/// Per block, from the 64-block windows (median over repeats), in µs.
fn layer_us(m: &gpu::Measured) -> Option<f64> {
    median(m.layers.iter().map(|s| s.median_us / LAYERS as f64))
}

fn median(it: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = it.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some(0.5 * (v[n / 2 - 1] + v[n / 2])),
    }
}

fn check_cell(c: Option<&gpu::Check>) -> String {
    match c {
        None => "–".into(),
        Some(c) => {
            let (y, o) = (Worst::of(&c.y), Worst::of(&c.out));
            format!(
                "{} (y {:.1e}, out {:.1e})",
                if c.passes() { "pass" } else { "FAIL" },
                y.rel_l2,
                o.rel_l2
            )
        }
    }
}

fn markdown(r: &gpu::GpuReport, torch: Option<&TorchBlock>) -> String {
    let copy = median(r.copy_gbps.iter().copied());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Qwen 3.5 27B FFN block, TP = {TP} on one GPU\n\n{}; {}; copy bandwidth {} (read + \
         write); {:.0} s\n",
        r.header.line(),
        r.header.origin(),
        copy.map_or("not measured".into(), |c| format!("{c:.0} GB/s")),
        r.seconds
    );
    let _ = writeln!(
        out,
        "Per rank: gemv_int4_dual_silu 5120 → 2 × 4352, then gemv_int4_allreduce_rmsnorm 4352 → \
         5120 (+ allreduce over the 4 ranks, residual, RMSNorm). Event timing behind a gate \
         (device time, no host enqueue in the window; not a CUDA graph). Weights rotate over copies ≥ 4 × L2.\n"
    );
    let _ = writeln!(
        out,
        "| chain | check (rel L2) | µs / block, median (p10–p90) per repeat | µs / block in {LAYERS}-block \
         windows | FFN per token (× {LAYERS}) | GB/s | % of copy bw |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
    for m in &r.versions {
        let blocks: Vec<String> = m.blocks.iter().map(us).collect();
        let per = layer_us(m).or(block_us(m));
        let gbps = block_us(m).map(|t| m.bytes_per_block as f64 / (t * 1e-6) / 1e9);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            m.label,
            check_cell(m.check.as_ref()),
            if blocks.is_empty() {
                "–".into()
            } else {
                blocks.join("; ")
            },
            layer_us(m).map_or("–".into(), |t| format!("{t:.1}")),
            per.map_or("–".into(), |t| format!(
                "{:.2} ms",
                t * LAYERS as f64 / 1e3
            )),
            gbps.map_or("–".into(), |g| format!("{g:.0}")),
            match (gbps, copy) {
                (Some(g), Some(c)) => format!("{:.0} %", 100.0 * g / c),
                _ => "–".into(),
            },
        );
    }
    match torch {
        Some(TorchBlock::Measured {
            median_us,
            p10_us,
            p90_us,
            ..
        }) => {
            let _ = writeln!(
                out,
                "| PyTorch (bench/torch/int4_baselines.py, CUDA graph) | its own check | \
                 {median_us:.1} ({p10_us:.1}–{p90_us:.1}) | – | {:.2} ms | – | – |",
                median_us * LAYERS as f64 / 1e3
            );
        }
        Some(TorchBlock::Missing(why)) => {
            let _ = writeln!(
                out,
                "| PyTorch | – | not available: {why} | – | – | – | – |"
            );
        }
        None => {}
    }
    let _ = writeln!(out);
    for m in &r.versions {
        let _ = writeln!(
            out,
            "- {}: {}; {} MB of inputs per block over all ranks; rotation sets {} + {}{}{}{}",
            m.label,
            if m.origin.is_empty() {
                "–"
            } else {
                &m.origin
            },
            m.bytes_per_block / 1_000_000,
            m.sets[0],
            m.sets[1],
            m.check_after
                .as_ref()
                .map(|c| format!("; after timing: {}", check_cell(Some(c))))
                .unwrap_or_default(),
            if m.note.is_empty() {
                String::new()
            } else {
                format!("; {}", m.note)
            },
            m.error
                .as_ref()
                .map(|e| format!("; ERROR: {e}"))
                .unwrap_or_default(),
        );
    }
    let _ = writeln!(
        out,
        "\nThe per-token figure is µs per block (from the {LAYERS}-block windows where they ran) × \
         {LAYERS} layers: the FFN part of one decoded token, all ranks on this one GPU. Tolerance: \
         relative L2 ≤ {TOLERANCE:.0e} per output and rank ({TOLERANCE_WHY})."
    );
    out
}

fn metrics_json(ms: &[OutputMetrics]) -> Json {
    ms.iter()
        .map(|m| {
            json!({
                "output": m.output, "rank": m.rank, "elements": m.elements,
                "rel_l2": finite(m.rel_l2), "max_abs": finite(m.max_abs),
                "non_finite": m.non_finite, "differs_from_rank0": m.differs_from_rank0,
            })
        })
        .collect()
}

fn finite(v: f64) -> Json {
    if v.is_finite() { json!(v) } else { Json::Null }
}

fn stats_json(s: &Stats) -> Json {
    json!({"samples": s.samples, "median_us": s.median_us, "p10_us": s.p10_us, "p90_us": s.p90_us})
}

fn to_json(r: &gpu::GpuReport, plan: &gpu::Plan, torch: Option<&TorchBlock>) -> Json {
    let check = |c: &Option<gpu::Check>| {
        c.as_ref().map(|c| {
            json!({"pass": c.passes(), "y": metrics_json(&c.y), "outputs": metrics_json(&c.out)})
        })
    };
    let versions: Vec<Json> = r
        .versions
        .iter()
        .map(|m| {
            let per = layer_us(m).or(block_us(m));
            json!({
                "chain": m.label,
                "origin": m.origin,
                "check": check(&m.check),
                "check_after_timing": check(&m.check_after),
                "block_us": m.blocks.iter().map(stats_json).collect::<Vec<_>>(),
                "layers_window_us": m.layers.iter().map(stats_json).collect::<Vec<_>>(),
                "us_per_block": block_us(m),
                "us_per_block_in_layer_windows": layer_us(m),
                "ffn_us_per_token": per.map(|t| t * LAYERS as f64),
                "bytes_per_block": m.bytes_per_block,
                "rotation_sets": m.sets,
                "note": m.note,
                "error": m.error,
            })
        })
        .collect();
    r.header.json_with(json!({
        "schema": "wavefuse-qwen-ffn-block/1",
        "tp": TP,
        "layers": LAYERS,
        "placement": "all ranks on one device, one stream per rank",
        "timing": "CUDA events behind a gate (device time); not a CUDA graph",
        "seed": plan.seed,
        "warmup": plan.warmup,
        "iters": plan.iters,
        "windows": plan.windows,
        "repeats": plan.repeats,
        "copy_gbps": r.copy_gbps,
        "tolerance": {"rel_l2": TOLERANCE, "why": TOLERANCE_WHY},
        "versions": versions,
        "torch": torch.map(|t| match t {
            TorchBlock::Measured { median_us, p10_us, p90_us, what } => json!({
                "median_us": median_us, "p10_us": p10_us, "p90_us": p90_us, "what": what,
                "ffn_us_per_token": median_us * LAYERS as f64,
            }),
            TorchBlock::Missing(why) => json!({"error": why}),
        }),
        "seconds": r.seconds,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CI check: the chain is correct in the simulator at small shapes on both targets.
    #[test]
    fn chain_is_correct_in_the_simulator() {
        let runs = cpu::check(Workload::DEFAULT_SEED, 2).expect("the chain simulates");
        assert_eq!(runs.len(), 4, "two schedules on each of two targets");
        for r in &runs {
            assert!(
                r.passes(),
                "{} schedule {}: findings {:?}, y {:.2e}, out {:.2e}",
                r.arch,
                r.schedule,
                r.findings,
                r.y.rel_l2,
                r.out.rel_l2
            );
        }
    }

    /// A wrong intermediate is caught: feeding the second kernel a zeroed `y` must fail the check.
    #[test]
    fn a_wrong_intermediate_fails() {
        use wavefuse_harness::sim::{SmallShapes, prepare};
        use wavefuse_kernels::KernelId;
        let p = |id| prepare(id, TP, wavefuse_codegen::Arch::Sm90, &SmallShapes::DEFAULT).unwrap();
        let b = block::Block {
            gate_up: p(KernelId::GemvInt4DualSilu).ir,
            down: p(KernelId::GemvInt4AllreduceRmsnorm).ir,
        };
        let data = block::BlockData::new(&b, 7).unwrap();
        let mut zero = data.gate_up_ref.clone();
        for r in &mut zero {
            r.values_mut()
                .for_each(|t| t.data.iter_mut().for_each(|v| *v = 0.0));
        }
        let inputs = block::feed(&b, data.down_inputs.clone(), &zero).unwrap();
        let got = wavefuse::ir::reference::evaluate(&b.down, &inputs).unwrap();
        let w = Worst::of(&wavefuse_runtime::exec::compare(
            &b.down,
            &got,
            &data.down_ref,
        ));
        assert!(!w.passes(TOLERANCE), "rel L2 {:.2e}", w.rel_l2);
    }
}
