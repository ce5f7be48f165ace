//! `cargo run -p own-kernels --bin own-wavefuse -- [--tp N] [--batch B] COMMAND …`: the `wavefuse`
//! commands with this crate's kernels by name (`gemv_residual`, `silu_mul_down`), built at the
//! shapes of its `config.json` at TP `N` and batch `B` (default 1 and 1):
//!
//! ```sh
//! own-wavefuse emit gemv_residual --target gfx906
//! own-wavefuse --tp 2 check silu_mul_down --target gfx906
//! own-wavefuse --tp 2 ab silu_mul_down --no-gpu
//! ```
//!
//! Every other command and kernel name is the `wavefuse` binary's.

use std::ffi::OsString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let (mut tp, mut batch) = (1u32, 1usize);
    // This binary's own flags, before the command.
    while args.len() > 2 {
        let value = args[2].to_string_lossy().into_owned();
        match args[1].to_str() {
            Some("--tp") => match value.parse() {
                Ok(v) => tp = v,
                Err(_) => return usage(&format!("--tp takes a TP size, not `{value}`")),
            },
            Some("--batch") => match value.parse() {
                Ok(v) => batch = v,
                Err(_) => return usage(&format!("--batch takes a batch size, not `{value}`")),
            },
            _ => break,
        }
        args.drain(1..3);
    }
    let model = own_kernels::model();
    if let Err(e) = model.check_tp(tp) {
        return usage(&format!("config.json at TP {tp}: {e}"));
    }
    let registry = own_kernels::kernels(&model, tp, batch)
        .into_iter()
        .try_fold(wavefuse_cli::Registry::new(), |r, k| r.with(k));
    match registry {
        Ok(r) => wavefuse_cli::run(&r, args),
        Err(e) => usage(&e),
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("error: {why}\nusage: own-wavefuse [--tp N] [--batch B] COMMAND …");
    ExitCode::from(2)
}
