//! Running a compiler as a child process, bounded: it gets its own process group, its output is
//! captured, and when it runs past its timeout or the caller cancels (an interrupt), the whole
//! group is killed — nvcc and hipcc start `cicc`, `ptxas`, `clang` and `lld` below them, which a
//! kill of the driver alone would leave running. Every tool the runtime runs (hipcc, nvcc, their
//! `--version`, llvm-objdump) goes through [`run`].

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set once by [`interrupt_all`]: every bounded child, whatever its [`Bounds`], is stopped.
///
/// A process-wide flag, against the rule of no mutable statics in library crates, because a
/// signal is process-wide: the binary's signal handler cannot reach the [`Bounds`] of every
/// compile in flight on every thread.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Children of [`run`] still running (their groups not yet killed and reaped).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Stop every child [`run`] has running, now and from now on (for the binary's SIGINT/SIGTERM
/// handling): each kills its process group within ~50 ms and returns
/// [`ChildError::Interrupted`], so its caller's scratch directory is removed as it returns.
pub fn interrupt_all() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Loops that stop on their own at [`interrupted`] and report what they finished.
static COOPERATING: AtomicUsize = AtomicUsize::new(0);

/// Held by a loop that checks [`interrupted`] between steps and reports what it finished: the
/// binary's signal handling waits for every guard to be dropped before it exits.
#[derive(Debug)]
pub struct Cooperating(());

impl Drop for Cooperating {
    fn drop(&mut self) {
        COOPERATING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Register a cooperating loop (see [`Cooperating`]).
pub fn cooperate() -> Cooperating {
    COOPERATING.fetch_add(1, Ordering::SeqCst);
    Cooperating(())
}

/// How many [`Cooperating`] guards are held.
pub fn cooperating() -> usize {
    COOPERATING.load(Ordering::SeqCst)
}

/// Whether [`interrupt_all`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// How many children [`run`] has running (for a signal handler waiting for them to stop).
pub fn live_children() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// How long a compiler may run unless told otherwise: generous for the largest generated kernel
/// (seconds) on a loaded machine, short enough that a hung tool is noticed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a child may run, and what stops it early.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Wall-clock limit from the start of the process.
    pub timeout: Duration,
    /// Set (by the caller's signal handler, say) to stop the child now.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            timeout: DEFAULT_TIMEOUT,
            cancel: None,
        }
    }
}

impl Bounds {
    /// A limit of `timeout`, not cancellable.
    pub fn timeout(timeout: Duration) -> Self {
        Bounds {
            timeout,
            cancel: None,
        }
    }

    /// The same limit, stopped early once `flag` is set.
    pub fn with_cancel(self, flag: Arc<AtomicBool>) -> Self {
        Bounds {
            cancel: Some(flag),
            ..self
        }
    }

    fn cancelled(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
            || self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::SeqCst))
    }
}

/// A child that ran to its end.
#[derive(Clone, Debug)]
pub struct Finished {
    /// How it ended.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Finished {
    /// stdout then stderr, as a user at a terminal would have seen them.
    pub fn log(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// `exit status 1`, `killed by signal 9`, with what it printed or that it printed nothing.
    pub fn describe(&self) -> String {
        let log = self.log();
        let printed = if log.trim().is_empty() {
            "and printed nothing".to_owned()
        } else {
            format!("after printing:\n{}", log.trim_end())
        };
        format!("{} {printed}", describe_status(self.status))
    }
}

/// `exit status N` or `killed by signal N`.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => status.to_string(),
    }
}

/// Why a child did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The program could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error from the OS.
        source: std::io::Error,
    },
    /// It ran past its timeout and was killed, with its process group.
    #[error(
        "{program} did not finish within {} and was stopped (its process group killed); \
         the output so far:\n{output}",
        seconds(*after)
    )]
    TimedOut {
        /// The program.
        program: String,
        /// The timeout.
        after: Duration,
        /// What it had printed.
        output: String,
    },
    /// The caller cancelled it; it was killed, with its process group.
    #[error("{program} was interrupted and stopped (its process group killed)")]
    Interrupted {
        /// The program.
        program: String,
    },
    /// Waiting for it failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// The error from the OS.
        source: std::io::Error,
    },
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.3} s", d.as_secs_f64())
    }
}

/// Run `cmd` (stdin closed, stdout and stderr captured) in a new process group within `bounds`.
pub fn run(cmd: &mut Command, bounds: &Bounds) -> Result<Finished, ChildError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    if bounds.cancelled() {
        return Err(ChildError::Interrupted { program });
    }
    LIVE.fetch_add(1, Ordering::SeqCst);
    let result = run_counted(cmd, bounds, program);
    LIVE.fetch_sub(1, Ordering::SeqCst);
    result
}

fn run_counted(
    cmd: &mut Command,
    bounds: &Bounds,
    program: String,
) -> Result<Finished, ChildError> {
    let start = Instant::now();
    let deadline = start.checked_add(bounds.timeout);
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ChildError::Spawn {
            program: program.clone(),
            source,
        })?;
    let group = Group(child.id() as libc::pid_t);
    let (tx, rx) = mpsc::channel();
    let readers = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ];
    for (i, pipe) in readers.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let bytes = pipe.map(|p| read_bounded(p, KEEP_HEAD, KEEP_TAIL));
            let _ = tx.send((i, bytes.unwrap_or_default()));
        });
    }
    drop(tx);
    let mut pause = Duration::from_millis(2);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(source) => {
                group.kill();
                let _ = child.wait();
                return Err(ChildError::Wait { program, source });
            }
        }
        if bounds.cancelled() {
            group.kill();
            let _ = child.wait();
            return Err(ChildError::Interrupted { program });
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            group.kill();
            let _ = child.wait();
            let (stdout, stderr) = collect(&rx, Instant::now() + Duration::from_secs(2));
            return Err(ChildError::TimedOut {
                program,
                after: bounds.timeout,
                output: format!("{stdout}{stderr}"),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    // A process the tool left behind may still hold the pipes open: read until the deadline,
    // then stop the rest of the group.
    let until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
    let (stdout, stderr) = match collect_all(&rx, until) {
        Some(out) => out,
        None => {
            group.kill();
            collect(&rx, Instant::now() + Duration::from_secs(2))
        }
    };
    Ok(Finished {
        status,
        stdout,
        stderr,
    })
}

/// Bytes of a tool's output kept from its start and from its end (per pipe): everything a
/// compiler prints for a kernel of the set fits many times over; a tool that prints hundreds of
/// megabytes is neither held in memory nor printed whole.
pub const KEEP_HEAD: usize = 256 * 1024;
/// See [`KEEP_HEAD`].
pub const KEEP_TAIL: usize = 256 * 1024;

/// Read `pipe` to its end keeping the first `head` and the last `tail` bytes; what was cut in
/// between is replaced by a line saying how many bytes it was. Memory stays within
/// `head + 2 × tail` whatever the output.
pub fn read_bounded(mut pipe: impl Read, head: usize, tail: usize) -> Vec<u8> {
    let mut first = Vec::new();
    let mut last: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        total += n as u64;
        let mut chunk = &buf[..n];
        if first.len() < head {
            let take = chunk.len().min(head - first.len());
            first.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        last.extend_from_slice(chunk);
        if last.len() > 2 * tail.max(1) {
            last.drain(..last.len() - tail);
        }
    }
    if last.len() > tail {
        last.drain(..last.len() - tail);
    }
    let cut = total - first.len() as u64 - last.len() as u64;
    if cut > 0 {
        let note =
            format!("\n[… {cut} bytes of output cut; the first {head} and last {tail} kept …]\n");
        first.extend_from_slice(note.as_bytes());
    }
    first.extend_from_slice(&last);
    first
}

/// Both pipes' contents, or None when `until` passes first.
fn collect_all(rx: &mpsc::Receiver<(usize, Vec<u8>)>, until: Instant) -> Option<(String, String)> {
    let mut got: [Option<Vec<u8>>; 2] = [None, None];
    while got.iter().any(Option::is_none) {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, bytes)) => got[i] = Some(bytes),
            Err(mpsc::RecvTimeoutError::Timeout) => return None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let text =
        |b: &Option<Vec<u8>>| String::from_utf8_lossy(b.as_deref().unwrap_or(&[])).into_owned();
    Some((text(&got[0]), text(&got[1])))
}

/// Whatever the pipes delivered by `until`.
fn collect(rx: &mpsc::Receiver<(usize, Vec<u8>)>, until: Instant) -> (String, String) {
    collect_all(rx, until).unwrap_or_default()
}

/// A child's process group (its id is the child's pid: `process_group(0)`).
struct Group(libc::pid_t);

impl Group {
    fn kill(&self) {
        // SAFETY: killpg only sends a signal; the group id is our child's pid, and the child is
        // not yet reaped when this is called on a timeout or interrupt, so the id cannot have
        // been reused. Errors (ESRCH: the group is already gone) are of no interest.
        unsafe {
            libc::killpg(self.0, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_past_its_timeout_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        // The shell starts a grandchild that would outlive a kill of the shell alone.
        let script = format!(
            "sleep 30 & echo $! > {}; echo started; wait",
            pid_file.display()
        );
        let t0 = Instant::now();
        let err = run(
            Command::new("sh").args(["-c", &script]),
            &Bounds::timeout(Duration::from_millis(500)),
        )
        .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        let text = err.to_string();
        assert!(matches!(err, ChildError::TimedOut { .. }), "{text}");
        assert!(
            text.contains("within 0.500 s") && text.contains("started"),
            "{text}"
        );
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild is gone (after its parent init reaps it).
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        });
        assert!(gone, "sleep {pid} survived");
    }

    #[test]
    fn exit_status_and_empty_output_are_described() {
        let done = run(&mut Command::new("false"), &Bounds::default()).unwrap();
        assert!(!done.status.success());
        assert_eq!(done.describe(), "exit status 1 and printed nothing");
        let done = run(
            Command::new("sh").args(["-c", "echo oops >&2; exit 3"]),
            &Bounds::default(),
        )
        .unwrap();
        assert_eq!(done.describe(), "exit status 3 after printing:\noops");
    }

    #[test]
    fn a_cancelled_child_is_stopped() {
        let flag = Arc::new(AtomicBool::new(false));
        let setter = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            setter.store(true, Ordering::SeqCst);
        });
        let t0 = Instant::now();
        let err = run(
            Command::new("sleep").arg("30"),
            &Bounds::default().with_cancel(flag),
        )
        .unwrap_err();
        assert!(matches!(err, ChildError::Interrupted { .. }), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(10));
    }

    /// 8 MiB of output (a tool that prints without end) keeps its head and tail and says how
    /// much was cut between them; it used to be held and printed whole (400 MB in the probe).
    #[test]
    fn huge_output_is_cut_between_head_and_tail() {
        let done = run(
            Command::new("sh").args([
                "-c",
                "echo first-line; head -c 8388608 /dev/zero | tr '\\0' x; echo; echo last-line",
            ]),
            &Bounds::default(),
        )
        .unwrap();
        let out = &done.stdout;
        assert!(
            out.len() < KEEP_HEAD + KEEP_TAIL + 200,
            "{} bytes kept",
            out.len()
        );
        assert!(out.starts_with("first-line\n"), "{}", &out[..20]);
        assert!(out.trim_end().ends_with("last-line"));
        // "first-line\n", the x's, "\n", "last-line\n".
        let cut = 11 + 8_388_608 + 1 + 10 - KEEP_HEAD - KEEP_TAIL;
        assert!(
            out.contains(&format!("[… {cut} bytes of output cut")),
            "no cut note"
        );
        // Short output is untouched; a cut is marked between head and tail.
        assert_eq!(read_bounded(&b"abc"[..], 4, 4), b"abc");
        let cut = String::from_utf8(read_bounded(&b"abcdefgh"[..], 2, 3)).unwrap();
        assert!(cut.starts_with("ab\n[… 3 bytes of output cut"), "{cut}");
        assert!(cut.ends_with("…]\nfgh"), "{cut}");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = run(&mut Command::new("/nonexistent/tool"), &Bounds::default()).unwrap_err();
        assert!(matches!(err, ChildError::Spawn { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/tool"), "{err}");
    }
}
