//! `wavefuse cache`: the on-disk compile cache.

use std::process::ExitCode;

/// `wavefuse cache`: where the compile cache is, or clear it.
pub fn run(clear: bool) -> ExitCode {
    let cache = wavefuse_runtime::Cache::from_env();
    if !clear {
        println!("compile cache: {}", cache.dir().display());
        return ExitCode::SUCCESS;
    }
    match cache.clear() {
        Ok(n) => {
            println!(
                "removed {n} cached artifact(s) from {}",
                cache.dir().display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: clearing {}: {e}", cache.dir().display());
            ExitCode::FAILURE
        }
    }
}
