//! Writing the files a command produces, never half of one (issue 21, defects 3, 5 and 11).
//!
//! [`atomic_write`] writes a temporary file in the destination's directory, syncs it and renames
//! it over the destination: a reader (or the next run) sees the old file or the new one, never a
//! truncated one; a failed write leaves the old file as it was and no temporary behind.
//! [`atomic_write_all`] does the same for files that belong together (a kernel's source and its
//! ABI): every temporary is written and synced before the first rename, so a write error (a full
//! disk) changes none of them, and the renames happen under an exclusive `flock` of each
//! destination directory, so concurrent writers of the same group (four `emit --out D` at once,
//! two `tune --json J --md M`) each rename their whole group in turn: the group left is one
//! writer's, never a mix. [`check_output`] runs before the work: the destination's
//! directory exists and is writable, the destination is not a directory, a device or any input.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Write `bytes` to `path` atomically (temporary in the same directory, fsync, rename).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    atomic_write_all(&[(path, bytes)])
}

/// Write every `(path, bytes)` atomically and together: all temporaries first, then the renames.
/// On a write error no destination changes and no temporary is left.
pub fn atomic_write_all(files: &[(&Path, &[u8])]) -> std::io::Result<()> {
    atomic_write_all_with(files, &mut |f, bytes| f.write_all(bytes))
}

/// [`atomic_write_all`] with the writer of each temporary given (fault injection in tests).
pub fn atomic_write_all_with(
    files: &[(&Path, &[u8])],
    write: &mut dyn FnMut(&mut File, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut temps: Vec<PathBuf> = Vec::new();
    let result: std::io::Result<()> = (|| {
        for (path, bytes) in files {
            let temp = temp_beside(path);
            temps.push(temp.clone());
            let mut f = File::create(&temp)?;
            write(&mut f, bytes)?;
            f.sync_all()?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        for t in &temps {
            let _ = std::fs::remove_file(t);
        }
        return Err(std::io::Error::new(
            e.kind(),
            format!("{e}; nothing was replaced"),
        ));
    }
    let locks = match lock_dirs(files.iter().map(|(p, _)| *p)) {
        Ok(l) => l,
        Err(e) => {
            for t in &temps {
                let _ = std::fs::remove_file(t);
            }
            return Err(e);
        }
    };
    for (i, ((path, _), temp)) in files.iter().zip(&temps).enumerate() {
        if let Err(e) = std::fs::rename(temp, path) {
            for t in &temps[i..] {
                let _ = std::fs::remove_file(t);
            }
            // Say exactly what changed: the files renamed before this one are the new ones.
            let done: Vec<String> = files[..i]
                .iter()
                .map(|(p, _)| p.display().to_string())
                .collect();
            let changed = if done.is_empty() {
                "nothing was replaced".to_owned()
            } else {
                format!("already replaced: {}", done.join(", "))
            };
            let what = format!("renaming into {}: {e}; {changed}", path.display());
            return Err(std::io::Error::new(e.kind(), what));
        }
    }
    // The renames themselves are durable once the directories are synced.
    for d in &locks {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The destination directories of `paths`, each opened once and locked exclusively (`flock`, in
/// a fixed order, so two writers of overlapping groups cannot deadlock); the locks are released
/// when the files are dropped. A directory that cannot be opened is an error; one that cannot be
/// locked is written without the lock.
fn lock_dirs<'a>(paths: impl Iterator<Item = &'a Path>) -> std::io::Result<Vec<File>> {
    let mut dirs: Vec<(u64, u64, File)> = Vec::new();
    for p in paths {
        let dir = File::open(parent(p).unwrap_or(Path::new(".")))?;
        let m = dir.metadata()?;
        if !dirs.iter().any(|(d, i, _)| (*d, *i) == (m.dev(), m.ino())) {
            dirs.push((m.dev(), m.ino(), dir));
        }
    }
    dirs.sort_by_key(|(d, i, _)| (*d, *i));
    for (_, _, f) in &dirs {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; it blocks until the lock is ours.
        while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            // A file system without locks (some network mounts) still gets the atomic renames.
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
    }
    Ok(dirs.into_iter().map(|(_, _, f)| f).collect())
}

/// `path`'s directory (`.` for a bare file name).
fn parent(path: &Path) -> Option<&Path> {
    match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Some(Path::new(".")),
        other => other,
    }
}

/// A temporary name beside `path`, unique in this process and across processes.
fn temp_beside(path: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let temp = format!(".{name}.tmp-{}-{n}", std::process::id());
    parent(path).unwrap_or(Path::new(".")).join(temp)
}

/// Check, before any work, that `output` can be written and names none of `inputs`: its
/// directory exists and takes a new file, it is not a directory or a device, it has the
/// extension `ext` (when given), and it is not — by path or through a link (same device and
/// inode) — any input.
pub fn check_output(output: &Path, inputs: &[&Path], ext: Option<&str>) -> Result<(), OutputError> {
    let bad = |problem| OutputError {
        flag: "--output".into(),
        path: output.to_owned(),
        problem,
    };
    if let Some(ext) = ext {
        if output.extension().and_then(|e| e.to_str()) != Some(ext) {
            return Err(bad(OutputProblem::Extension(ext.to_owned())));
        }
    }
    match std::fs::metadata(output) {
        Ok(m) if m.is_dir() => return Err(bad(OutputProblem::Directory)),
        Ok(m) if !m.is_file() => return Err(bad(OutputProblem::NotAFile)),
        Ok(m) => {
            if let Some(input) = inputs.iter().find(|input| same_file(&m, input)) {
                return Err(bad(OutputProblem::IsInput(input.to_path_buf())));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(OutputProblem::Metadata(e))),
    }
    let dir = parent(output).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(bad(OutputProblem::NoDirectory(dir.to_owned())));
    }
    // Writable: the same kind of temporary the final write uses.
    let probe = temp_beside(output);
    match File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(bad(OutputProblem::NotWritable {
            dir: dir.to_owned(),
            source,
        })),
    }
}

/// An output file (`--output`, or the report file of `flag`) that cannot be written as asked.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {}{problem}", path.display())]
pub struct OutputError {
    /// The flag that named it.
    pub flag: String,
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: OutputProblem,
}

/// What is wrong with an output file (worded to follow `FLAG PATH`).
#[derive(Debug, thiserror::Error)]
pub enum OutputProblem {
    /// The name does not have the extension the format needs.
    #[error(": the file name must end in .{0}")]
    Extension(String),
    /// It is a directory.
    #[error(" is a directory")]
    Directory,
    /// It is a device or a pipe.
    #[error(" is not a regular file (a device or pipe is never replaced)")]
    NotAFile,
    /// It is (by path or link) one of the inputs.
    #[error(" is the input {}: it would be overwritten", .0.display())]
    IsInput(PathBuf),
    /// Its metadata could not be read.
    #[error(": {0}")]
    Metadata(std::io::Error),
    /// Its directory does not exist.
    #[error(": the directory {} does not exist", .0.display())]
    NoDirectory(PathBuf),
    /// Its directory takes no new file.
    #[error(": cannot create a file in {}: {source}", dir.display())]
    NotWritable {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Whether `input` is the file `output` (metadata of an existing output): the same device and
/// inode, whatever the paths or links.
fn same_file(output: &std::fs::Metadata, input: &Path) -> bool {
    std::fs::metadata(input).is_ok_and(|i| i.dev() == output.dev() && i.ino() == output.ino())
}

/// [`check_output`] for a report file (`--json`, `--md`): writable, not a directory.
pub fn check_report_path(flag: &str, path: &Path) -> Result<(), OutputError> {
    check_output(path, &[], None).map_err(|e| OutputError {
        flag: flag.to_owned(),
        ..e
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let y = dir.path().join("y.npy");
        std::fs::write(&y, b"old contents").unwrap();
        // A full disk after 4 bytes.
        let err = atomic_write_all_with(&[(&y, b"new contents, longer")], &mut |f, b| {
            f.write_all(&b[..4])?;
            Err(std::io::Error::other("No space left on device"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("No space"));
        assert_eq!(std::fs::read(&y).unwrap(), b"old contents");
        assert_eq!(names(dir.path()), ["y.npy"]);
    }

    /// A rename failing after the first (the second destination is a directory) says which file
    /// was already replaced; the caller used to print "(neither changed)" whatever happened.
    #[test]
    fn a_rename_failing_mid_group_says_what_was_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (src, abi) = (dir.path().join("k.cu"), dir.path().join("k.abi.toml"));
        std::fs::create_dir(&abi).unwrap();
        std::fs::write(abi.join("occupied"), b"x").unwrap();
        let err = atomic_write_all(&[(&src, b"new source"), (&abi, b"new abi")]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("already replaced: "), "{text}");
        assert!(text.contains("k.cu"), "{text}");
        assert_eq!(std::fs::read(&src).unwrap(), b"new source");
        // No temporary left behind.
        assert_eq!(names(dir.path()), ["k.abi.toml", "k.cu"]);
        let err = atomic_write_all(&[(&abi, b"x"), (&src, b"y")]).unwrap_err();
        assert!(err.to_string().contains("nothing was replaced"), "{err}");
    }

    /// Writers of the same pair at once (threads here; `cli/tests/emit.rs` runs processes):
    /// whatever order their renames come in, the pair left is one writer's.
    #[test]
    fn concurrent_writers_of_a_pair_never_mix() {
        let dir = tempfile::tempdir().unwrap();
        let (src, abi) = (dir.path().join("k.cu"), dir.path().join("k.abi.toml"));
        for round in 0..100 {
            std::thread::scope(|s| {
                for w in 0..4 {
                    let (src, abi) = (&src, &abi);
                    s.spawn(move || {
                        let (a, b) = (format!("source {w}"), format!("abi {w}"));
                        atomic_write_all(&[(src, a.as_bytes()), (abi, b.as_bytes())]).unwrap();
                    });
                }
            });
            let (a, b) = (
                std::fs::read_to_string(&src).unwrap(),
                std::fs::read_to_string(&abi).unwrap(),
            );
            assert_eq!(
                a.strip_prefix("source "),
                b.strip_prefix("abi "),
                "round {round}"
            );
        }
        assert_eq!(names(dir.path()), ["k.abi.toml", "k.cu"]);
    }

    #[test]
    fn a_pair_is_written_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let (src, abi) = (dir.path().join("k.cu"), dir.path().join("k.abi.toml"));
        std::fs::write(&src, b"old source").unwrap();
        std::fs::write(&abi, b"old abi").unwrap();
        // The second file's write fails: neither changes.
        let mut calls = 0;
        let err =
            atomic_write_all_with(&[(&src, b"new source"), (&abi, b"new abi")], &mut |f, b| {
                calls += 1;
                if calls == 2 {
                    f.write_all(&b[..2])?;
                    return Err(std::io::Error::other("injected"));
                }
                f.write_all(b)
            });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&src).unwrap(), b"old source");
        assert_eq!(std::fs::read(&abi).unwrap(), b"old abi");
        assert_eq!(names(dir.path()), ["k.abi.toml", "k.cu"]);
        // Without a fault both are replaced.
        atomic_write_all(&[(&src, b"new source"), (&abi, b"new abi")]).unwrap();
        assert_eq!(std::fs::read(&src).unwrap(), b"new source");
        assert_eq!(std::fs::read(&abi).unwrap(), b"new abi");
        assert_eq!(names(dir.path()), ["k.abi.toml", "k.cu"]);
    }

    #[test]
    fn outputs_that_are_inputs_directories_devices_or_unwritable_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("x.npy");
        std::fs::write(&x, b"x").unwrap();
        let link = dir.path().join("link.npy");
        std::os::unix::fs::symlink(&x, &link).unwrap();
        let hard = dir.path().join("hard.npy");
        std::fs::hard_link(&x, &hard).unwrap();
        let inputs = [x.as_path()];
        for (out, why) in [
            (x.clone(), "is the input"),
            (link.clone(), "is the input"),
            (hard.clone(), "is the input"),
            (dir.path().join("y.txt"), "must end in .npy"),
            (dir.path().join("missing/y.npy"), "does not exist"),
        ] {
            let err = check_output(&out, &inputs, Some("npy"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{}: {err}", out.display());
        }
        let sub = dir.path().join("d.npy");
        std::fs::create_dir(&sub).unwrap();
        assert!(
            check_output(&sub, &inputs, Some("npy"))
                .unwrap_err()
                .to_string()
                .contains("directory")
        );
        assert!(
            check_output(Path::new("/dev/full"), &[], None)
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        check_output(&dir.path().join("y.npy"), &inputs, Some("npy")).unwrap();
        assert_eq!(
            names(dir.path()),
            ["d.npy", "hard.npy", "link.npy", "x.npy"]
        );
    }
}
