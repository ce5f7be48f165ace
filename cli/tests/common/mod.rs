//! Helpers shared by the CLI's integration tests.

use std::path::Path;
use std::process::{Command, Output};

/// The `wavefuse` binary of this build run with `args`, the schedule overrides of the environment
/// removed (a test sees the default policy whatever the shell exports).
pub fn wavefuse(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(args)
        .env_remove("WAVEFUSE_SCHEDULE")
        .env_remove("WAVEFUSE_SCHEDULE_SM90")
        .env_remove("WAVEFUSE_SCHEDULE_GFX906")
        .output()
        .expect("wavefuse runs")
}

/// [`wavefuse`] run in `dir`, with its cache (and the tuned store beside it) in `dir/cache`.
#[allow(dead_code)] // not every test binary that includes this module uses every helper
pub fn wavefuse_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(args)
        .current_dir(dir)
        .env("WAVEFUSE_CACHE_DIR", dir.join("cache"))
        .env_remove("WAVEFUSE_SCHEDULE")
        .env_remove("WAVEFUSE_SCHEDULE_SM90")
        .env_remove("WAVEFUSE_SCHEDULE_GFX906")
        .output()
        .expect("wavefuse runs")
}

/// A run's stdout and stderr as text.
#[allow(dead_code)]
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
