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

/// The synchronisation statements of a generated HIP source (workgroup barriers, atomics, fences,
/// bounded waits) and, of those, the ones not directly preceded by the `// §5.` comment naming
/// the DESIGN.md §5 invariant they uphold: `(statements, uncommented lines)`.
pub fn hip_syncs_without_invariant(source: &str) -> (usize, Vec<String>) {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let (mut syncs, mut bare) = (0, Vec::new());
    for (i, l) in lines.iter().enumerate() {
        let sync = l.starts_with("__syncthreads()")
            || (l.starts_with("__hip_atomic") && !l.contains("timed out"))
            || l.contains("= __hip_atomic")
            || l.starts_with("__builtin_amdgcn_fence")
            || l.starts_with("{ // wait site");
        if sync {
            syncs += 1;
            if i == 0 || !lines[i - 1].starts_with("// §5.") {
                bare.push((*l).to_owned());
            }
        }
    }
    (syncs, bare)
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

    #[test]
    fn a_sync_without_its_invariant_comment_is_named() {
        let src = "// §5.8: uniform\n__syncthreads();\nx = 1;\n__syncthreads();\n";
        assert_eq!(
            hip_syncs_without_invariant(src),
            (2, vec!["__syncthreads();".to_owned()])
        );
    }
}
