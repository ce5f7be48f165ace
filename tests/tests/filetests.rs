//! Data-driven tests of the textual IR's front end and the lowering's refusals (in the manner of
//! cranelift's filetests): every `tests/filetests/*.wfir` is a kernel with a header of `;` lines:
//!
//! - `; stage: parse | validate | lower | ok` — the first stage that must refuse the kernel
//!   (`ok`: none; it parses, validates and generates for every target it names);
//! - `; error: TEXT` (repeatable) — words the refusal's message must contain: what a user needs to
//!   find the mistake (the buffer, the op, the limit);
//! - `; target: gfx906 | sm90` — the targets `lower` / `ok` generate for (default: both).
//!
//! A file that refuses at an earlier stage than it says, or passes the stage that should refuse
//! it, fails the test with the file's name. Add a case by adding a file; no Rust to write.

use std::path::{Path, PathBuf};

use wavefuse::ir::{parse, validate};
use wavefuse::pipeline::{Target, generate};

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/filetests")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wfir"))
        .collect();
    out.sort();
    out
}

/// Every value of `; KEY: …` in the header.
fn header<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    let prefix = format!("; {key}:");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .map(str::trim)
        .collect()
}

/// `Ok(())` when the file's refusal (or its absence) is as its header says.
fn check(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let stage = match header(&text, "stage")[..] {
        [s] => s,
        _ => return Err("needs exactly one `; stage:` line".into()),
    };
    let words = header(&text, "error");
    if (stage == "ok") != words.is_empty() {
        return Err("`; error:` lines go with a refusing stage, and only with one".into());
    }
    let targets: Vec<Target> = match header(&text, "target")[..] {
        [] => vec![Target::Gfx906, Target::Sm90],
        ref ts => ts
            .iter()
            .map(|t| t.parse().map_err(|e| format!("target: {e}")))
            .collect::<Result<_, _>>()?,
    };
    let refused = |at: &str, message: String| -> Result<(), String> {
        if at != stage {
            return Err(format!("refused at `{at}` (expected `{stage}`): {message}"));
        }
        match words.iter().find(|w| !message.contains(**w)) {
            Some(w) => Err(format!("the {at} error does not mention {w:?}: {message}")),
            None => Ok(()),
        }
    };
    let k = match parse(&text) {
        Ok(k) => k,
        Err(e) => return refused("parse", e.to_string()),
    };
    if let Err(e) = validate(&k) {
        return refused("validate", e.to_string());
    }
    for t in targets {
        if let Err(e) = generate(&k, t) {
            return refused("lower", format!("{t}: {e}"));
        }
    }
    match stage {
        "ok" => Ok(()),
        s => Err(format!(
            "expected a refusal at `{s}`, but every stage passed"
        )),
    }
}

#[test]
fn every_filetest_is_refused_where_and_as_it_says() {
    let files = files();
    assert!(files.len() >= 8, "{} files", files.len());
    let failed: Vec<String> = files
        .iter()
        .filter_map(|p| {
            check(p)
                .err()
                .map(|e| format!("{}: {e}", p.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The runner itself refuses what it must: a file whose header expects the wrong stage or a
/// word the message lacks fails (so a passing run means something).
#[test]
fn the_runner_catches_a_wrong_expectation() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let good = std::fs::read_to_string(
        files()
            .into_iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n == "validate-output-never-written.wfir")
            })
            .expect("the file"),
    )
    .expect("readable");
    for (from, to) in [
        ("; stage: validate", "; stage: parse"),
        ("; stage: validate", "; stage: ok"),
        ("; error: y2", "; error: y3"),
    ] {
        let p = dir.path().join("mutant.wfir");
        std::fs::write(&p, good.replace(from, to)).expect("writable");
        assert!(
            check(&p).is_err(),
            "{to}: the runner accepted a wrong header"
        );
    }
}
