//! The HIP runtime path through the test double of `tests/hip-double` (libamdhip64 over the CUDA
//! driver API): built with the system C compiler, put on the library path of a child process
//! (the HIP library is loaded once per process), which then opens the runtime's HIP device.
//!
//! - Everywhere (CI): the double exports every entry point the runtime resolves (a missing one
//!   fails `hip_runtime_library`), and without libcuda the device's error is the typed
//!   "no AMD GPU/driver" one, naming what the double could not load.
//! - With an NVIDIA driver (the lent H200): the double opens the GPU as a HIP device that loads
//!   CUDA images (arch sm_90), and says it is the double.

use std::path::{Path, PathBuf};
use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_runtime::device::hip_runtime_library;
use wavefuse_runtime::{Device, DeviceError, HipDevice};

/// Set in the child: the library path holds the double.
const CHILD: &str = "WAVEFUSE_TEST_HIP_DOUBLE_CHILD";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builds the double into `dir` with `tests/hip-double/build.sh`.
fn build_double(dir: &Path) -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("tests/hip-double/build.sh"))
        .arg(dir)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "building the double failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("libamdhip64.so")
}

/// What the child reports: one line per fact, read by the parent.
fn child_report() -> String {
    let mut lines = Vec::new();
    match hip_runtime_library() {
        Ok(lib) => lines.push(format!("library {lib}")),
        Err(e) => lines.push(format!("library-error {e}")),
    }
    match HipDevice::new(0) {
        Ok(dev) => {
            lines.push(format!("device {}", dev.info().name));
            lines.push(format!("arch {:?}", dev.info().arch));
            lines.push(format!("runtime {}", dev.runtime()));
            lines.push(format!("l2 {}", dev.l2_bytes().map_or(0, |b| b)));
        }
        Err(e @ DeviceError::NoDevice { .. }) => lines.push(format!("no-device {e}")),
        Err(e) => lines.push(format!("other-error {e}")),
    }
    lines.join("\n")
}

#[test]
#[ignore = "the child process of the_hip_runtime_path_runs_through_the_double, started by it"]
fn the_double_child() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "run by the_hip_runtime_path_runs_through_the_double, with the double on the library path"
    );
    println!("REPORT-BEGIN\n{}\nREPORT-END", child_report());
}

#[test]
fn the_hip_runtime_path_runs_through_the_double() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lib = build_double(dir.path());
    assert!(lib.is_file());
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "the_double_child", "--ignored", "--nocapture"])
        .env(CHILD, "1")
        .env("LD_LIBRARY_PATH", dir.path())
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    let report = stdout
        .split("REPORT-BEGIN\n")
        .nth(1)
        .and_then(|r| r.split("\nREPORT-END").next())
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    // Every symbol the runtime resolves is exported by the double (it was loaded, not a system
    // libamdhip64: the library path is searched first).
    assert!(
        report.lines().any(|l| l == "library libamdhip64.so"),
        "the double did not resolve: {report}"
    );
    if let Some(l) = report.lines().find(|l| l.starts_with("no-device ")) {
        // No NVIDIA driver: the typed error, naming what the double could not load.
        assert!(l.contains("AMD"), "{l}");
        assert!(l.contains("libcuda.so.1"), "{l}");
        println!("skipped: no GPU (the double has no CUDA driver to drive): {l}");
        return;
    }
    // An NVIDIA GPU through the HIP entry points.
    assert!(
        report
            .lines()
            .any(|l| l == format!("arch {:?}", Some(Arch::Sm90))),
        "{report}"
    );
    assert!(report.contains("test double"), "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.strip_prefix("l2 ").is_some_and(|v| v != "0")),
        "{report}"
    );
}

#[test]
fn the_double_passes_its_smoke_test() {
    // Every entry point exported (by name), the no-driver answers, and with a driver a kernel,
    // streams, events and a captured graph on the GPU; also under ASan/UBSan.
    let out = Command::new("bash")
        .arg(repo().join("tests/hip-double/smoke.sh"))
        .output()
        .expect("bash runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("smoke.sh: OK"), "{text}");
}

/// Set in the children of `memory_is_shared_between_processes_through_the_double`: `export` or
/// `import` (the latter with the handle in [`HANDLE`]).
const IPC_ROLE: &str = "WAVEFUSE_TEST_HIP_DOUBLE_IPC";
const HANDLE: &str = "WAVEFUSE_TEST_HIP_DOUBLE_HANDLE";

#[test]
#[ignore = "a child process of memory_is_shared_between_processes_through_the_double"]
fn the_ipc_child() {
    use std::io::Read;
    use wavefuse_runtime::{DeviceBuffer, MemKind};
    let role = std::env::var(IPC_ROLE).expect("started by the IPC test");
    let dev = match HipDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            println!("IPC no-device {e}");
            return;
        }
    };
    if role == "export" {
        let buf = dev.alloc(4096, MemKind::Flags).expect("alloc");
        dev.upload(&buf, 0, &[0xA5; 4096]).expect("upload");
        let h = dev.ipc_handle(&buf).expect("hipIpcGetMemHandle");
        let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
        println!("IPC handle {hex}");
        // Keep the allocation alive until the parent closes stdin (the importer is done).
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    } else {
        let hex = std::env::var(HANDLE).expect("the handle");
        let h: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        assert!(
            dev.ipc_open(&h[..10], 4096).is_err(),
            "a short handle is refused"
        );
        let m = dev.ipc_open(&h, 4096).expect("hipIpcOpenMemHandle");
        assert!(m.ptr() != 0 && m.bytes() == 4096);
        drop(m); // hipIpcCloseMemHandle
        println!("IPC mapped");
    }
}

/// Memory shared between processes through the HIP path (`hipIpc*`, over `cuIpc*` in the
/// double): one child exports a buffer's handle and keeps it alive, another maps and unmaps it.
/// Without an NVIDIA driver both children report no device, and the test says "skipped".
#[test]
fn memory_is_shared_between_processes_through_the_double() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().expect("a temporary directory");
    build_double(dir.path());
    let child = |role: &str| {
        let mut c = Command::new(std::env::current_exe().expect("the test binary"));
        c.args(["--exact", "the_ipc_child", "--ignored", "--nocapture"])
            .env(IPC_ROLE, role)
            .env("LD_LIBRARY_PATH", dir.path());
        c
    };
    let mut exporter = child("export")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the exporter runs");
    let mut handle = None;
    for line in BufReader::new(exporter.stdout.take().expect("stdout")).lines() {
        let line = line.expect("utf-8");
        if let Some(h) = line.strip_prefix("IPC handle ") {
            handle = Some(h.to_owned());
            break;
        }
        if let Some(e) = line.strip_prefix("IPC no-device ") {
            assert!(e.contains("AMD"), "{e}");
            println!("skipped: no GPU (the double has no CUDA driver to drive): {e}");
            let _ = exporter.wait();
            return;
        }
    }
    let handle = handle.expect("the exporter printed its handle");
    assert_eq!(handle.len(), 128, "a 64-byte hipIpcMemHandle_t");
    let out = child("import")
        .env(HANDLE, &handle)
        .output()
        .expect("the importer runs");
    drop(exporter.stdin.take()); // the exporter may free its buffer now
    assert!(exporter.wait().expect("exporter exits").success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("IPC mapped"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
