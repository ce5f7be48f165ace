//! Helpers shared by the CLI's integration tests.

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
