//! The hand-written gfx906 INT4 references (kernels-gen/reference/hip: `gemv_int4`,
//! `gemv_int4_qkv`, `gemv_int4_dual_silu`, `gemv_int4_allreduce_rmsnorm`) and the sm_90
//! `gemv_int4` and `gemv_int4_qkv` (kernels-gen/reference/cuda, through the CUDA shim
//! hip-emu/cuda/) run in the host
//! emulation of tests/hip-emu and match an f64 oracle computed from DESIGN.md §2 on fresh random
//! inputs. No AMD GPU is needed: the real `.hip` sources are compiled by a host clang++ against a
//! shim `hip/hip_runtime.h`, and every lane runs as written. tests/hip-emu/README.md says what
//! that proves and what it does not (wave64 hardware, the AMD memory model, timing, LDS banks, and
//! whether the GPU's instructions behave as their documented semantics, which the shim
//! implements).
//!
//! The shapes are compile-time defines, so every case is one build of its kernel's driver. They
//! keep the structure of the Qwen shapes of DESIGN.md §1 — three of them whole, the rest with the
//! reduction lengths 5120, 4352, 1536 and 17408 and the fused kernel's K-shards 17408 / TP, with
//! their rounds and phases, but fewer columns (columns are independent but for the tail tile;
//! the fused kernel needs a process per workgroup and rank) — and add the odd ones: K ending
//! inside a unit and inside a group, N tails, groups 32, 64 and per-channel (G = K, including an
//! odd number of packed rows per group), GPTQ v1 and v2 zero points, batch 1 to 8 (`gemv_int4`:
//! 1 to 64, whole tiles of 8 and a short last one), and the fused
//! kernel at TP 1, 2 and 4 over two launches, one of them across the 2^32 wrap of the epoch.
//! Seeds differ per case; `WAVEFUSE_EMU_SEED` moves them all (a failure prints its seed).
//!
//! The last test shows the comparison can fail: the same drivers built with a planted bug (the
//! oracle told the other zero-point convention, a shuffle that returns the lane's own value, a
//! launch that skips the last workgroup) must report a mismatch, at a shape the clean build passes.
//!
//! Measured on a 2-core machine under a load average of 5–6 from other builds: 28–54 s for the
//! whole file under nextest's default parallelism, 26–34 s one test at a time. A case is a ~0.5 s
//! compile and a run of 0.1–2 s.
//!
//! Without a host clang++ (hipcc's, /usr/lib/llvm-15/bin/clang++ on Debian 12, or clang++ on the
//! PATH; g++ lacks `ext_vector_type`, which the kernels use): "skipped: … not found", except
//! under CI (`CI` set), where it fails.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Host compilers tried in order; the first that builds the emulation's runtime is used.
const COMPILERS: [&str; 3] = ["/usr/lib/llvm-15/bin/clang++", "clang++-15", "clang++"];
/// A driver that runs longer than this is killed and fails (a hang, or waits that keep giving
/// up); its workgroup processes die with it.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(240);
/// `WF_SPIN_BUDGET` for the emulation: a poll sleeps 20–80 µs here, so a wait gives up after
/// about 20–80 s rather than the GPU's 2^26 polls — long enough for a peer process slowed by a
/// loaded CI machine, short enough that a hang ends as a reported error.
const SPIN_BUDGET: u32 = 1 << 20;
/// Seeds start here unless `WAVEFUSE_EMU_SEED` says otherwise.
const DEFAULT_SEED: u64 = 0x5EED_0906;

fn emu_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hip-emu")
}

fn reference(kernel: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Some(name) = kernel.strip_prefix("hand_") {
        // A user's hand-written kernel (cli/tests/handwritten, issue 38), driven by
        // hip-emu/hand_*.cpp as its ABI file launches it.
        return root.join(format!("../cli/tests/handwritten/gemv_int4_{name}.hip"));
    }
    match kernel.strip_prefix("cuda_") {
        // An sm_90 reference, driven by hip-emu/cuda_*.cpp through the shim hip-emu/cuda/.
        Some(name) => root.join(format!("../kernels-gen/reference/cuda/{name}.cu")),
        None => root.join(format!("../kernels-gen/reference/hip/{kernel}.hip")),
    }
}

fn base_seed() -> u64 {
    match std::env::var("WAVEFUSE_EMU_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("WAVEFUSE_EMU_SEED={s}: not a number")),
        Err(_) => DEFAULT_SEED,
    }
}

/// The emulation's runtime and oracle, built once per test into a temporary directory.
struct Emu {
    cxx: PathBuf,
    dir: tempfile::TempDir,
}

/// How a driver run ended: its exit code (None: killed by a signal or the timeout) and what it
/// printed.
struct Outcome {
    code: Option<i32>,
    output: String,
}

impl Emu {
    /// `None` (after "skipped: …") when no host compiler builds the runtime; panics under CI.
    fn new() -> Option<Emu> {
        let dir = tempfile::tempdir().expect("tempdir");
        let lookup = Self::find_compiler(dir.path());
        let name = "a host clang++ for the HIP emulation (hipcc's /usr/lib/llvm-15/bin/clang++)";
        if !wavefuse_test_support::found(name, lookup.as_ref()) {
            return None;
        }
        Some(Emu {
            cxx: lookup.expect("found"),
            dir,
        })
    }

    /// The first of COMPILERS that builds the runtime and the oracle into `out`, or why none did.
    fn find_compiler(out: &Path) -> Result<PathBuf, String> {
        let mut tried = Vec::new();
        for c in COMPILERS {
            let cxx = PathBuf::from(c);
            match Self::compile_objects(&cxx, out) {
                Ok(()) => return Ok(cxx),
                Err(e) => tried.push(e),
            }
        }
        Err(tried.join("\n"))
    }

    fn flags() -> Vec<String> {
        ["-std=c++20", "-O1", "-Wall", "-Wextra", "-ffp-contract=off"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("-I{}", emu_dir().display())])
            .collect()
    }

    /// emu.o and oracle.o: the runtime and the oracle, compiled apart from every kernel.
    fn compile_objects(cxx: &Path, out: &Path) -> Result<(), String> {
        for unit in ["emu", "oracle"] {
            let o = Command::new(cxx)
                .args(Self::flags())
                .arg("-c")
                .arg(emu_dir().join(format!("{unit}.cpp")))
                .arg("-o")
                .arg(out.join(format!("{unit}.o")))
                .output()
                .map_err(|e| format!("{}: {e}", cxx.display()))?;
            if !o.status.success() {
                return Err(format!(
                    "{} does not build {unit}.cpp:\n{}",
                    cxx.display(),
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
        }
        Ok(())
    }

    /// Builds `kernel`'s driver with the case's defines and any planted bug; panics with the
    /// compiler's output when it fails.
    fn build(&self, case: &Case, plant: Option<&str>) -> PathBuf {
        self.build_from(case, plant, &reference(case.kernel))
    }

    /// [`Emu::build`] with the kernel's source read from `source` (a mutated copy).
    fn build_from(&self, case: &Case, plant: Option<&str>, source: &Path) -> PathBuf {
        let exe = self
            .dir
            .path()
            .join(format!(
                "{}-{}",
                case.kernel,
                case.label().replace([' ', '='], "_")
            ))
            .with_extension(plant.unwrap_or("clean"));
        let o = Command::new(&self.cxx)
            .args(Self::flags())
            .arg(format!("-DWF_EMU_KERNEL=\"{}\"", source.display()))
            .arg(format!("-DWF_SPIN_BUDGET={SPIN_BUDGET}"))
            .args(case.defines.iter().map(|d| format!("-D{d}")))
            .args(plant.map(|p| format!("-D{p}")))
            .arg(emu_dir().join(format!("{}.cpp", case.kernel)))
            .arg(self.dir.path().join("emu.o"))
            .arg(self.dir.path().join("oracle.o"))
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.cxx.display()));
        assert!(
            o.status.success(),
            "{} {}: the driver does not build:\n{}",
            case.kernel,
            case.label(),
            String::from_utf8_lossy(&o.stderr)
        );
        exe
    }

    /// Runs a driver with its output in files (no pipe to fill), killing it after
    /// DRIVER_TIMEOUT.
    fn run(&self, exe: &Path, args: &[String]) -> Outcome {
        let log = exe.with_extension("log");
        let out = File::create(&log).expect("log file");
        let mut child = Command::new(exe)
            .args(args)
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break Some(s);
            }
            if start.elapsed() > DRIVER_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut output = std::fs::read_to_string(&log).unwrap_or_default();
        if status.is_none() {
            output.push_str(&format!("killed after {DRIVER_TIMEOUT:?}\n"));
        }
        Outcome {
            code: status.and_then(|s| s.code()),
            output,
        }
    }
}

/// One shape of one kernel: its [build] defines, and for the fused kernel the first epoch.
struct Case {
    kernel: &'static str,
    defines: Vec<String>,
    first_epoch: Option<u32>,
}

impl Case {
    fn label(&self) -> String {
        let mut l = self.defines.join(" ");
        if let Some(e) = self.first_epoch {
            l.push_str(&format!(" first_epoch={e:#x}"));
        }
        l
    }

    fn args(&self, seed: u64) -> Vec<String> {
        let mut a = vec![seed.to_string()];
        a.extend(self.first_epoch.map(|e| e.to_string()));
        a
    }
}

fn gemv(k: u32, n: u32, batch: u32, group: u32, zp_v1: bool) -> Case {
    Case {
        kernel: "gemv_int4",
        defines: vec![
            format!("WF_K={k}"),
            format!("WF_N={n}"),
            format!("WF_BATCH={batch}"),
            format!("WF_GROUP={group}"),
            format!("WF_ZP_V1={}", u8::from(zp_v1)),
        ],
        first_epoch: None,
    }
}

fn qkv(k: u32, nq: u32, nkv: u32, batch: u32, group: u32, zp_v1: bool) -> Case {
    Case {
        kernel: "gemv_int4_qkv",
        defines: vec![
            format!("WF_K={k}"),
            format!("WF_NQ={nq}"),
            format!("WF_NKV={nkv}"),
            format!("WF_BATCH={batch}"),
            format!("WF_GROUP={group}"),
            format!("WF_ZP_V1={}", u8::from(zp_v1)),
        ],
        first_epoch: None,
    }
}

fn dual(k: u32, n: u32, batch: u32, group: u32, zp_v1: bool) -> Case {
    Case {
        kernel: "gemv_int4_dual_silu",
        ..gemv(k, n, batch, group, zp_v1)
    }
}

/// The fused kernel at TP ranks, each holding a K-shard of `k_shard` rows.
fn fused(tp: u32, k_shard: u32, hidden: u32, batch: u32, group: u32, zp_v1: bool) -> Case {
    Case {
        kernel: "gemv_int4_allreduce_rmsnorm",
        defines: vec![
            format!("WF_TP={tp}"),
            format!("WF_BATCH={batch}"),
            format!("WF_K={k_shard}"),
            format!("WF_HIDDEN={hidden}"),
            format!("WF_GROUP={group}"),
            format!("WF_ZP_V1={}", u8::from(zp_v1)),
            "WF_RMS_EPS=1e-6".to_owned(),
        ],
        first_epoch: Some(1),
    }
}

/// Builds and runs every case (seeds `first_seed`, `first_seed + 1`, …) and fails listing every
/// case that did not pass, with its driver's output.
fn check_all(cases: &[Case], first_seed: u64) {
    let Some(emu) = Emu::new() else {
        return;
    };
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let seed = base_seed().wrapping_add(first_seed + i as u64);
        let exe = emu.build(case, None);
        let run = emu.run(&exe, &case.args(seed));
        print!("{}", run.output);
        if run.code != Some(0) {
            failures.push(format!(
                "{} {} seed {seed}: exit {:?}\n{}",
                case.kernel,
                case.label(),
                run.code,
                run.output
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed (exit 1: mismatch, 2: bad inputs, 3: emulation error; see \
         tests/hip-emu/README.md):\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn gemv_int4_matches_f64_oracle_gfx906() {
    check_all(
        &[
            // The DeltaNet in-projection's shape at TP 4 (FP16 in the model), whole: K = 5120
            // (160 units, 5 rounds, one phase), N = 4120 = 128·32 + 24 (a tail tile). Then the
            // Qwen reduction lengths with fewer columns: the TP = 1 FFN down 17408 (17 rounds,
            // 4 phases), 4352 (units uneven over the slices: the general last round), 1536 at
            // batch 8 (a phase per round).
            gemv(5120, 4120, 1, 128, true),
            gemv(17408, 64, 1, 128, true),
            gemv(4352, 64, 2, 128, false),
            gemv(1536, 96, 8, 128, true),
            // Ragged K (1000 = 7·128 + 104: a partial group, and a unit cut short), N = 40.
            gemv(1000, 40, 3, 128, false),
            // Groups 32 and 64, per-channel G = K (a round is not a whole number of groups), and
            // G = K = 136 (17 packed rows: units of one row), N = 8 (one partial tile).
            gemv(1024, 64, 5, 32, false),
            gemv(1536, 72, 1, 64, true),
            gemv(1280, 64, 1, 1280, true),
            gemv(136, 8, 7, 136, true),
        ],
        0,
    );
}

/// Batch 9 to 64 (issue 40): the rows in tiles of 8, each a pass over all of K with its own
/// staging, reduction and stores — a whole number of tiles (16, 32, 64) and a last short tile (20:
/// 8 + 8 + 4, 33: four tiles and one row) — at a ragged K with an N tail, a Qwen K over several
/// phases, groups 32 and per-channel, v1 and v2 zero points.
#[test]
fn gemv_int4_at_batch_9_to_64_matches_f64_oracle_gfx906() {
    check_all(
        &[
            gemv(1000, 72, 16, 128, false),
            gemv(1000, 40, 20, 128, true),
            gemv(1024, 64, 32, 32, false),
            gemv(1280, 40, 33, 1280, true),
            gemv(5120, 32, 64, 128, true),
            gemv(1000, 72, 64, 128, false),
        ],
        50,
    );
}

/// An sm_90 reference run in the same emulation ([`gemv_int4_matches_f64_oracle_sm90`]).
fn cuda(mut c: Case) -> Case {
    c.kernel = match c.kernel {
        "gemv_int4" => "cuda_gemv_int4",
        "gemv_int4_qkv" => "cuda_gemv_int4_qkv",
        other => panic!("no sm_90 driver for {other}"),
    };
    c
}

/// The sm_90 `gemv_int4` reference (kernels-gen/reference/cuda/gemv_int4.cu, through the shim
/// hip-emu/cuda/) against the same f64 oracle at the same tolerance: Qwen reduction lengths
/// (5120 over 40 chunks of 16 packed rows, 17408 over 136), ragged K (a short last chunk) with an
/// N tail, groups 32 and 64 (a chunk of 4 and 8 packed rows), v1 and v2 zero points; batch 1 to
/// 8 in one pass, and batch 9 to 64 in tiles of 8 (16, 32 and 64 whole tiles; 20 and 33 with a
/// last pass of 4 rows and of 1).
#[test]
fn gemv_int4_matches_f64_oracle_sm90() {
    check_all(
        &[
            cuda(gemv(5120, 136, 1, 128, true)),
            cuda(gemv(17408, 64, 2, 128, true)),
            cuda(gemv(1000, 40, 3, 128, false)),
            cuda(gemv(1024, 64, 5, 32, false)),
            cuda(gemv(1536, 72, 8, 64, true)),
            cuda(gemv(1000, 72, 16, 128, true)),
            cuda(gemv(1000, 40, 20, 128, false)),
            cuda(gemv(1024, 64, 32, 32, true)),
            cuda(gemv(1536, 40, 33, 64, false)),
            cuda(gemv(5120, 32, 64, 128, true)),
            cuda(gemv(1000, 72, 64, 128, false)),
        ],
        600,
    );
}

/// The sm_90 `gemv_int4_qkv` reference (three outputs by column range) against the same f64
/// oracle: Qwen's q + gate and k / v at TP 8 whole at batch 1, column ranges that cut tiles (q
/// ending inside tile 1, v in a tail tile), batch 3 and 8 in one pass, 20 and 64 in tiles of 8.
#[test]
fn gemv_int4_qkv_matches_f64_oracle_sm90() {
    check_all(
        &[
            cuda(qkv(5120, 1536, 256, 1, 128, true)),
            cuda(qkv(1000, 48, 16, 3, 128, false)),
            cuda(qkv(1536, 40, 24, 8, 64, true)),
            cuda(qkv(1000, 48, 16, 20, 128, true)),
            cuda(qkv(1536, 40, 24, 64, 64, false)),
        ],
        650,
    );
}

/// The sm_90 `gemv_int4` with the barrier between batch tiles removed (a copy of the source
/// without it): the slices of tile t + 1 store their sums into the LDS that warp 0 is still
/// adding for tile t (DESIGN.md §5.2), which the emulation's shuffled lane order turns into wrong
/// outputs — reported as a mismatch, at a shape the clean source passes
/// ([`gemv_int4_matches_f64_oracle_sm90`]). Its ZP-flip plant is a mismatch too.
#[test]
fn planted_bugs_are_reported_sm90() {
    let Some(emu) = Emu::new() else {
        return;
    };
    let seed = base_seed().wrapping_add(700);
    let case = cuda(gemv(1000, 40, 20, 128, false));
    let clean = emu.run(&emu.build(&case, None), &case.args(seed));
    assert_eq!(clean.code, Some(0), "clean build:\n{}", clean.output);
    let flip = emu.run(
        &emu.build(&case, Some("WF_EMU_PLANT_ZP_FLIP")),
        &case.args(seed),
    );
    assert!(
        flip.code == Some(1) && flip.output.contains("MISMATCH"),
        "ZP flip: exit {:?}:\n{}",
        flip.code,
        flip.output
    );

    let source = std::fs::read_to_string(reference(case.kernel)).expect("the source");
    let barrier = "    if (row0 > 0) {\n";
    let start = source.find(barrier).expect("the barrier between tiles");
    let end = start + source[start..].find("\n    }\n").expect("its block") + "\n    }\n".len();
    let cut = &source[start..end];
    assert!(cut.contains("__syncthreads();"), "{cut}");
    let mutant_path = emu.dir.path().join("gemv_int4_no_tile_barrier.cu");
    std::fs::write(
        &mutant_path,
        format!("{}{}", &source[..start], &source[end..]),
    )
    .expect("write");
    let mut mutant = cuda(gemv(1000, 40, 20, 128, false));
    mutant
        .defines
        .push("WF_EMU_MUTANT_NO_TILE_BARRIER=1".to_owned());
    let run = emu.run(
        &emu.build_from(&mutant, None, &mutant_path),
        &mutant.args(seed),
    );
    print!("no tile barrier: {}", run.output);
    assert!(
        run.code == Some(1) && run.output.contains("MISMATCH"),
        "without the tile barrier: expected exit 1 and a mismatch, got exit {:?}:\n{}",
        run.code,
        run.output
    );
}

#[test]
fn gemv_int4_qkv_matches_f64_oracle_gfx906() {
    check_all(
        &[
            // Qwen's q + gate and k / v at TP 8 (1536 + 256 + 256), whole.
            qkv(5120, 1536, 256, 1, 128, true),
            // The column ranges cut tiles: q ends inside tile 1, v ends in a tail tile.
            qkv(1000, 48, 16, 3, 128, false),
            qkv(1536, 40, 24, 8, 64, true),
        ],
        100,
    );
}

#[test]
fn gemv_int4_dual_silu_matches_f64_oracle_gfx906() {
    check_all(
        &[
            // Qwen's gate / up at TP 8, whole (5120 → 2176: 10 rounds of 16 slices), then K = 5120
            // at batch 8, and odd shapes with N tails.
            dual(5120, 2176, 1, 128, true),
            dual(5120, 64, 8, 128, true),
            dual(1000, 40, 3, 128, false),
            dual(1536, 72, 2, 64, true),
            dual(1280, 32, 1, 1280, false),
            dual(4352, 40, 5, 32, true),
        ],
        200,
    );
}

#[test]
fn gemv_int4_allreduce_rmsnorm_matches_f64_oracle_gfx906() {
    let mut wrap = fused(2, 1536, 72, 1, 128, true);
    wrap.first_epoch = Some(u32::MAX);
    check_all(
        &[
            // The Qwen FFN down projection's K-shards 17408 / TP at TP 1, 2 and 4 (34 rounds at
            // TP = 1; at TP = 4 the units do not divide evenly and the last round is general),
            // with fewer features and tail tiles (HIDDEN 200 = 3·64 + 8).
            fused(1, 17408, 128, 1, 128, true),
            fused(2, 8704, 136, 2, 128, true),
            fused(4, 4352, 200, 1, 128, true),
            // Odd shards and groups, v2 zero points, batch 3 and 8.
            fused(4, 1000, 136, 3, 64, false),
            fused(2, 1024, 64, 8, 32, false),
            // Epochs 2^32 − 1 and 0: flags and the grid counter wrap between the two launches.
            wrap,
        ],
        300,
    );
}

/// Each planted bug, built into a driver at a shape its clean build passes, is reported as a
/// mismatch (exit status 1), not as a pass and not as a crash.
#[test]
fn planted_bugs_are_reported_gfx906() {
    let Some(emu) = Emu::new() else {
        return;
    };
    let seed = base_seed().wrapping_add(400);
    let small = gemv(1000, 40, 3, 128, true);
    let shard = fused(2, 1024, 72, 2, 128, true);
    let planted: [(&Case, &str, &str); 4] = [
        // The oracle reads the zero points with the other convention (v2 against a v1 kernel):
        // every weight moves by one scale step.
        (&small, "WF_EMU_PLANT_ZP_FLIP", "MISMATCH"),
        // __shfl_xor returns the lane's own value: the butterfly over the K-slices adds nothing.
        (&small, "WF_EMU_PLANT_SHFL_SELF", "MISMATCH"),
        // The last workgroup never runs: its outputs (columns 32..39 of 3 rows) stay NaN, as
        // poisoned.
        (
            &small,
            "WF_EMU_PLANT_SKIP_LAST_WORKGROUP",
            "24 non-finite: MISMATCH",
        ),
        // The same through the fused kernel's processes and both launches.
        (&shard, "WF_EMU_PLANT_ZP_FLIP", "MISMATCH"),
    ];
    for case in [&small, &shard] {
        let run = emu.run(&emu.build(case, None), &case.args(seed));
        assert_eq!(
            run.code,
            Some(0),
            "clean build of {} {}:\n{}",
            case.kernel,
            case.label(),
            run.output
        );
    }
    for (case, plant, says) in planted {
        let run = emu.run(&emu.build(case, Some(plant)), &case.args(seed));
        print!("{plant}: {}", run.output);
        assert!(
            run.code == Some(1) && run.output.contains(says),
            "{} {} with {plant}: expected exit 1 and \"{says}\", got exit {:?}:\n{}",
            case.kernel,
            case.label(),
            run.code,
            run.output
        );
    }
}

/// A user's hand-written kernel of the issue-38 tests at K, N (batch 1, group 128, GPTQ v1).
fn hand(kernel: &'static str, k: u32, n: u32, extra: &[&str]) -> Case {
    let mut c = gemv(k, n, 1, 128, true);
    c.kernel = kernel;
    c.defines.extend(extra.iter().map(|d| d.to_string()));
    c
}

/// The hand-written kernels of several launches (issue 38), run as their ABI files launch them:
/// the split-K GEMV (a 2-D grid, 8 K splits) then its reduce launch on the shared partials, and
/// the W4A8 quantisation launch then the W4A8 GEMV — against the f64 oracle (the W4A8 kernel's
/// codes against the host rule, its arithmetic at the FP16 tolerance, its result at the W4A8
/// tolerance of docs/abi.md). The shapes: gemv_int4's at TP 4 with fewer columns, and an N tail.
#[test]
fn users_kernels_of_several_launches_match_f64_oracle_gfx906() {
    check_all(
        &[
            hand("hand_splitk2", 5120, 256, &["WF_SPLITS=8"]),
            hand("hand_splitk2", 4352, 200, &["WF_SPLITS=2"]),
            hand("hand_w4a8", 5120, 256, &[]),
            hand("hand_w4a8", 4352, 136, &[]),
        ],
        500,
    );
}
