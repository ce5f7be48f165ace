//! `cargo run -p own-kernels -- DIR [--tp N] [--batch B]`: writes this crate's kernels, at the
//! shapes of its `config.json`, as textual IR (`DIR/<kernel>.wfir`) for the `wavefuse` commands:
//! `wavefuse emit|check|sim|run|ab|tune --kernel-file DIR/<kernel>.wfir`.

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
    if let Err(e) = model.check(tp, 128) {
        eprintln!("error: config.json at TP {tp}: {e}");
        return ExitCode::from(2);
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

fn usage(why: &str) -> ExitCode {
    eprintln!("error: {why}\nusage: own-kernels DIR [--tp N] [--batch B]");
    ExitCode::from(2)
}
