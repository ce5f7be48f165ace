//! `cargo run -p own-kernels -- DIR [--tp N] [--batch B]`: writes this crate's kernels, at the
//! shapes of its `config.json`, as textual IR (`DIR/<kernel>.wfir`) for the `wavefuse` commands:
//! `wavefuse emit|check|sim|run|ab|tune --kernel-file DIR/<kernel>.wfir`.
//!
//! `cargo run -p own-kernels -- launch [--tp N] [--batch B]`: `gemv_residual` at those shapes,
//! launched once on the NVIDIA GPU with its typed arguments (`GemvResidualArgs` over the crate's
//! own host buffers, `wavefuse::pipeline::launch`), every rank's output compared with the f64
//! oracle; exit 1 when one is outside relative L2 1e-3, 2 without a GPU.
//!
//! `cargo run -p own-kernels -- check [--tp N] [--batch B]`: both kernels, one launch each on the
//! NVIDIA GPU (every rank on it) on the synthetic workload, checked against the f64 oracle
//! (`wavefuse::pipeline::check`); exit 1 when an output is outside its tolerance, 2 without a GPU.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dir = None;
    let (mut tp, mut batch) = (1u32, 1usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tp" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => tp = v,
                None => return usage("--tp takes a TP size"),
            },
            "--batch" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => batch = v,
                None => return usage("--batch takes a batch size"),
            },
            _ if dir.is_none() && !a.starts_with('-') => dir = Some(std::path::PathBuf::from(a)),
            _ => return usage(&format!("unexpected argument `{a}`")),
        }
    }
    let Some(dir) = dir else {
        return usage("name the directory to write the kernels into");
    };
    let model = own_kernels::model();
    if let Err(e) = model.check_tp(tp) {
        eprintln!("error: config.json at TP {tp}: {e}");
        return ExitCode::from(2);
    }
    if dir.as_os_str() == "launch" {
        return launch(&model, tp, batch);
    }
    if dir.as_os_str() == "check" {
        return check(&model, tp, batch);
    }
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: creating {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for k in own_kernels::kernels(&model, tp, batch) {
        if let Err(e) = wavefuse::ir::validate(&k) {
            eprintln!("error: {}: {e}", k.name());
            return ExitCode::FAILURE;
        }
        let path = dir.join(format!("{}.wfir", k.name()));
        if let Err(e) = wavefuse_harness::outputs::atomic_write(&path, k.to_string().as_bytes()) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("{}", path.display());
    }
    ExitCode::SUCCESS
}

/// `own-kernels launch`: see the crate docs.
fn launch(model: &wavefuse_kernels::shapes::Model, tp: u32, batch: usize) -> ExitCode {
    use wavefuse::pipeline::{self, On, Target};

    let ir = own_kernels::kernels(model, tp, batch).remove(0);
    let inputs =
        wavefuse_kernels::Workload::new(wavefuse_kernels::Workload::DEFAULT_SEED).inputs(&ir);
    let reference = match wavefuse::ir::reference::evaluate(&ir, &inputs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: the reference: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut data: Vec<own_kernels::GemvResidualData> = match inputs
        .iter()
        .map(|i| own_kernels::GemvResidualData::from_inputs(&ir, i))
        .collect()
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut args: Vec<_> = data
        .iter_mut()
        .map(own_kernels::GemvResidualData::args)
        .collect();
    // Generate for every rank on the one GPU, compile (cached), bind the typed arguments, launch,
    // write the outputs back: one call.
    match pipeline::launch(&ir, Target::Sm90, On::Gpu, &mut args) {
        Ok(()) => {}
        Err(e @ pipeline::Error::NoDevice(_)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    drop(args);
    let y = wavefuse::host::buffer_named(&ir, "y").expect("the kernel's output");
    let mut ok = true;
    for (rank, d) in data.iter().enumerate() {
        let want = &reference[rank][&y].data;
        let got: Vec<f64> = d.y.iter().map(|v| v.to_f64()).collect();
        let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
        let den: f64 = want.iter().map(|b| b * b).sum();
        let e = (num / den).sqrt();
        let pass = e <= 1e-3;
        ok &= pass;
        println!(
            "gemv_residual tp={tp} batch={batch} rank {rank}: {} outputs, rel L2 vs the f64 oracle {e:.3e} (tol 1e-3): {}",
            got.len(),
            if pass { "ok" } else { "FAIL" }
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `own-kernels check`: see the crate docs.
fn check(model: &wavefuse_kernels::shapes::Model, tp: u32, batch: usize) -> ExitCode {
    use wavefuse::pipeline::{self, On, Target};

    let mut ok = true;
    for k in own_kernels::kernels(model, tp, batch) {
        match pipeline::check(&k, Target::Sm90, On::Gpu) {
            Ok(c) => {
                let pass = c.passed();
                ok &= pass;
                print!(
                    "{} tp={tp} batch={batch}: {}\n{c}",
                    k.name(),
                    if pass { "ok" } else { "FAIL" }
                );
            }
            Err(e @ pipeline::Error::NoDevice(_)) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("error: {}: {e}", k.name());
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("error: {why}\nusage: own-kernels DIR|launch|check [--tp N] [--batch B]");
    ExitCode::from(2)
}
