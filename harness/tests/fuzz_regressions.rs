//! Every finding of `wavefuse fuzz` as a regression test: `tests/fuzz_regressions/*.wfir`, each a
//! kernel in the textual IR with a header of `; fuzz key=value` comment lines (written by
//! `wavefuse fuzz --findings DIR`, see `FuzzFinding::wfir`):
//!
//! - `; fuzz target=gfx906|sm90`: the target it was found on (none: both);
//! - `; fuzz schedule=SPEC`: the schedule as overrides of the target's default (empty: the
//!   default; none: the default and the simulator's small schedule);
//! - `; fuzz sim=SEED,INDEX`: simulate interleaving INDEX of `sim::sweep` from SEED (none: two
//!   interleavings from 0);
//! - `; fuzz open=REASON`: not fixed yet — only [`open_findings_reproduce`] (ignored) runs it.
//!
//! A fixed file must parse, validate, round-trip, compile within the time limit for its target
//! and schedule (a refusal is fine only if the file says `; fuzz refused=yes`), and simulate clean.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use wavefuse::ir::{Kernel, parse, validate};
use wavefuse_codegen::lower::Schedule;
use wavefuse_codegen::sim::PeerTable;
use wavefuse_codegen::{Arch, compile};
use wavefuse_harness::sim::{Prepared, small_schedule, sweep};

/// Longest a file may take (the namer bug made `compile` never return).
const LIMIT: Duration = Duration::from_secs(60);

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fuzz_regressions")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wfir"))
        .collect();
    out.sort();
    out
}

/// The value of `; fuzz KEY=…` in `text`.
fn header<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let prefix = format!("; fuzz {key}=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .map(str::trim)
}

/// Check one file; `Err` says what failed.
fn check(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let k = parse(&text).map_err(|e| format!("does not parse: {e}"))?;
    validate(&k).map_err(|e| format!("does not validate: {e}"))?;
    let printed = k.to_string();
    let again = parse(&printed).map_err(|e| format!("the printed kernel does not parse: {e}"))?;
    if again != k || again.to_string() != printed {
        return Err("print ∘ parse is not the identity".into());
    }
    let targets: Vec<Arch> = match header(&text, "target") {
        Some(t) => vec![t.parse().map_err(|e| format!("target: {e}"))?],
        None => vec![Arch::Gfx906, Arch::Sm90],
    };
    let refused_ok = header(&text, "refused") == Some("yes");
    let (sim_seed, first, count) = match header(&text, "sim") {
        Some(s) => {
            let (a, b) = s.split_once(',').ok_or("sim=SEED,INDEX")?;
            let n = |x: &str| x.trim().parse::<u64>().map_err(|e| format!("sim: {e}"));
            (n(a)?, n(b)?, 1)
        }
        None => (0, 0, 2),
    };
    for arch in targets {
        for s in schedules(arch, &k, header(&text, "schedule"))? {
            let g = match compile(&k, arch, &s) {
                Ok(g) => g,
                Err(e) if refused_ok && e.is_unsupported() => continue,
                Err(e) => return Err(format!("{arch}: {e}")),
            };
            let p = Prepared {
                ir: k.clone(),
                lowered: g.lowered,
                shapes: None,
                peer_table: PeerTable::Shared,
            };
            let r = sweep(&p, sim_seed, first, count, |_, _| {}).map_err(|e| e.to_string())?;
            if let Some(f) = r.findings.first() {
                return Err(format!("{arch}: {} (interleaving {})", f.first, f.schedule));
            }
        }
    }
    Ok(())
}

fn schedules(arch: Arch, k: &Kernel, spec: Option<&str>) -> Result<Vec<Schedule>, String> {
    let default = Schedule::default_for(arch, k);
    Ok(match spec {
        Some(spec) => vec![default.with_overrides(spec).map_err(|e| e.to_string())?],
        None => vec![default, small_schedule(arch, k)],
    })
}

/// [`check`] on a thread, failing after [`LIMIT`] (the thread is left behind; the test fails).
fn check_within_limit(path: &Path) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(check(&p));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("did not finish within {LIMIT:?}")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked".into()),
    }
}

fn run(open: bool) {
    let mut failed = Vec::new();
    let mut ran = 0;
    for path in files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        if header(&text, "open").is_some() != open {
            continue;
        }
        ran += 1;
        if let Err(e) = check_within_limit(&path) {
            failed.push(format!("{}: {e}", path.display()));
        }
    }
    eprintln!("{ran} regression files checked");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn fixed_findings_stay_fixed() {
    run(false);
}

/// The findings not fixed yet (`; fuzz open=REASON`): fails while they reproduce.
#[test]
#[ignore = "open fuzz findings (see `; fuzz open=` in tests/fuzz_regressions/); run with --ignored"]
fn open_findings_reproduce() {
    run(true);
}
