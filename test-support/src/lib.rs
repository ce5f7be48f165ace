//! What the workspace's tests share. A test that needs an external tool (hipcc, nvcc, NVRTC,
//! LLVM) runs where the tool is found; without it the test says `skipped: … not found` and
//! passes — except under CI, where every tool the README's install step provides must be there
//! and a missing one fails the test.

use std::fmt::Display;

/// Whether the tests run under CI: `$CI` set, non-empty and not `false` or `0`.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether the tool `name` was found, given the result of looking for it: `true` when `lookup`
/// is `Ok`; otherwise, outside CI, `false` after printing `skipped: NAME not found`, and under CI
/// a panic naming the tool and why it was not found.
pub fn found<T, E: Display>(name: &str, lookup: Result<T, E>) -> bool {
    match lookup {
        Ok(_) => true,
        Err(e) if under_ci() => panic!("CI must have {name}: {e}"),
        Err(_) => {
            eprintln!("skipped: {name} not found");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_found_tool_is_found_and_a_missing_one_is_skipped_outside_ci() {
        assert!(found("x", Ok::<(), &str>(())));
        if !under_ci() {
            assert!(!found("x", Err::<(), _>("not on PATH")));
        }
    }
}
