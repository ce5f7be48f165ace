//! Real GPTQ weights end to end. A packer written here, straight from DESIGN.md §2 (not
//! kernels-gen's `pack_gptq`), quantises random weights and writes a safetensors checkpoint with
//! its config; `wavefuse_harness::checkpoint` loads it and the f64 reference evaluates
//! `gemv_int4`; the result must match a naive dequantise-then-multiply written here, from the
//! packer's own integer codes, zero points and scales. Negative tests check that every bad file
//! or setting is refused with an error naming the tensor or the field.

use std::path::{Path, PathBuf};
use std::process::Command;

use half::f16;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use serde_json::json;
use wavefuse::ir::reference::evaluate;
use wavefuse::ir::{GroupSize, ZeroPoint};
use wavefuse_harness::checkpoint::{self, CheckpointError, QuantOverrides};

const K: usize = 256;
const N: usize = 64;
const LAYER: &str = "model.layers.3.mlp.up_proj";

/// How the packer stores zero points.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Stored {
    /// `qzeros` holds z − 1 (GPTQ v1).
    MinusOne,
    /// `qzeros` holds z (GPTQ v2).
    AsIs,
    /// No `qzeros` tensor (symmetric, z = 8).
    None,
}

/// A quantised `[K, N]` weight, before packing: what the naive reference reads.
struct Quantised {
    /// Codes `[K][N]`, 0..=15.
    q: Vec<u8>,
    /// Zero points `[groups][N]`.
    z: Vec<i64>,
    /// Scales `[groups][N]`, exactly FP16.
    s: Vec<f64>,
    /// Group of each row of K.
    group_of: Vec<usize>,
    groups: usize,
}

/// Quantise random weights ~ U(−0.05, 0.05) in groups of `g` rows (per column), symmetric
/// (z = 8) or with a min/max zero point in 1..=15 (so v1's z − 1 is a nibble); with act-order the
/// rows of a group are a random subset of K.
fn quantise(seed: u64, g: usize, symmetric: bool, act_order: bool) -> Quantised {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let w: Vec<f64> = (0..K * N).map(|_| rng.random_range(-0.05..0.05)).collect();
    let groups = K / g;
    let mut order: Vec<usize> = (0..K).collect();
    if act_order {
        for i in (1..K).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
    }
    let mut group_of = vec![0; K];
    for (pos, &row) in order.iter().enumerate() {
        group_of[row] = pos / g;
    }
    let (mut z, mut s) = (vec![8i64; groups * N], vec![0.0; groups * N]);
    for gi in 0..groups {
        for col in 0..N {
            let vals: Vec<f64> = (0..K)
                .filter(|&r| group_of[r] == gi)
                .map(|r| w[r * N + col])
                .collect();
            let (lo, hi) = vals
                .iter()
                .fold((0.0f64, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
            let (scale, zero) = if symmetric {
                (lo.abs().max(hi) / 7.5, 8)
            } else {
                let sc = (hi - lo) / 15.0;
                (sc, ((-lo / sc).round() as i64).clamp(1, 15))
            };
            s[gi * N + col] = f16::from_f64(scale).to_f64();
            z[gi * N + col] = zero;
        }
    }
    let q = (0..K * N)
        .map(|i| {
            let (row, col) = (i / N, i % N);
            let at = group_of[row] * N + col;
            ((w[i] / s[at]).round() as i64 + z[at]).clamp(0, 15) as u8
        })
        .collect();
    Quantised {
        q,
        z,
        s,
        group_of,
        groups,
    }
}

/// A tensor to write: name, dtype, shape, little-endian bytes.
type Entry = (String, Dtype, Vec<usize>, Vec<u8>);

fn i32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Pack per DESIGN.md §2: qweight i32 [K/8, N], nibble i of word (kg, n) = row 8·kg + i; qzeros
/// i32 [K/G, N/8], nibble i of word (g, j) = column 8j + i; scales f16 [K/G, N].
fn pack(qt: &Quantised, stored: Stored, with_g_idx: bool) -> Vec<Entry> {
    let mut qweight = vec![0u32; K / 8 * N];
    for row in 0..K {
        for col in 0..N {
            qweight[(row / 8) * N + col] |= u32::from(qt.q[row * N + col]) << (4 * (row % 8));
        }
    }
    let scales: Vec<u8> =
        qt.s.iter()
            .flat_map(|&x| f16::from_f64(x).to_le_bytes())
            .collect();
    let name = |s: &str| format!("{LAYER}.{s}");
    let mut out = vec![
        (
            name("qweight"),
            Dtype::I32,
            vec![K / 8, N],
            i32_bytes(&qweight),
        ),
        (name("scales"), Dtype::F16, vec![qt.groups, N], scales),
    ];
    if stored != Stored::None {
        let mut qzeros = vec![0u32; qt.groups * N / 8];
        for gi in 0..qt.groups {
            for col in 0..N {
                let z = qt.z[gi * N + col] - i64::from(stored == Stored::MinusOne);
                qzeros[gi * (N / 8) + col / 8] |= (z as u32 & 0xF) << (4 * (col % 8));
            }
        }
        out.push((
            name("qzeros"),
            Dtype::I32,
            vec![qt.groups, N / 8],
            i32_bytes(&qzeros),
        ));
    }
    if with_g_idx {
        let g: Vec<u32> = qt.group_of.iter().map(|&x| x as u32).collect();
        out.push((name("g_idx"), Dtype::I32, vec![K], i32_bytes(&g)));
    }
    // Another layer and an FP16 tensor, as a real checkpoint has: they must not disturb loading.
    out.push((
        "model.layers.3.mlp.down_proj.qweight".into(),
        Dtype::I32,
        vec![N / 8, 16],
        vec![0x11; N / 8 * 16 * 4],
    ));
    out.push((
        "model.norm.weight".into(),
        Dtype::F16,
        vec![N],
        vec![0x3c; N * 2],
    ));
    out
}

fn write_safetensors(path: &Path, tensors: &[Entry]) {
    let views = tensors.iter().map(|(n, d, s, b)| {
        (
            n.clone(),
            TensorView::new(*d, s.clone(), b).expect("consistent view"),
        )
    });
    safetensors::serialize_to_file(views, None, path).expect("write safetensors");
}

/// A `.npy` writer of its own (format 1.0, header padded to 64 bytes).
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[f64]) {
    let dims = shape.iter().map(|d| format!("{d},")).collect::<String>();
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    for &x in data {
        match descr {
            "<f4" => b.extend((x as f32).to_le_bytes()),
            "<f2" => b.extend(f16::from_f64(x).to_le_bytes()),
            _ => unreachable!("test writes f2 and f4"),
        }
    }
    std::fs::write(path, b).expect("write npy");
}

/// Read back an FP16 `.npy` written by wavefuse: (shape, values).
fn read_npy_f16(path: &Path) -> (Vec<usize>, Vec<f64>) {
    let b = std::fs::read(path).expect("output exists");
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
    let len = usize::from(u16::from_le_bytes([b[8], b[9]]));
    let header = std::str::from_utf8(&b[10..10 + len]).expect("text");
    assert!(header.contains("'descr': '<f2'"), "{header}");
    let dims = header
        .split('(')
        .nth(1)
        .and_then(|t| t.split(')').next())
        .expect("shape tuple");
    let shape = dims
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim().parse().expect("dim"))
        .collect();
    let data = b[10 + len..]
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64())
        .collect();
    (shape, data)
}

/// Activations ~ U(−2, 2), as FP16 values (the file may hold them as f32).
fn activations(seed: u64, batch: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xA11CE);
    (0..batch * K)
        .map(|_| f16::from_f64(rng.random_range(-2.0..2.0)).to_f64())
        .collect()
}

/// y[b][n] = fp16(Σ_k (q − z)·s · x[b][k]), dequantised from the packer's own arrays.
fn naive(qt: &Quantised, x: &[f64], batch: usize) -> Vec<f64> {
    let mut y = vec![0.0; batch * N];
    for b in 0..batch {
        for col in 0..N {
            let mut acc = 0.0;
            for row in 0..K {
                let at = qt.group_of[row] * N + col;
                let w = (i64::from(qt.q[row * N + col]) - qt.z[at]) as f64 * qt.s[at];
                acc += w * x[b * K + row];
            }
            y[b * N + col] = f16::from_f64(acc).to_f64();
        }
    }
    y
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    assert!(got.iter().all(|v| v.is_finite()), "non-finite output");
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b).powi(2)).sum();
    let den: f64 = want.iter().map(|b| b * b).sum();
    assert!(
        den > 0.0,
        "reference is all zeros: the test would prove nothing"
    );
    (num / den).sqrt()
}

/// One checkpoint on disk.
struct Case {
    dir: tempfile::TempDir,
    qt: Quantised,
    x: Vec<f64>,
    batch: usize,
}

impl Case {
    fn weights(&self) -> PathBuf {
        self.dir.path().join("model.safetensors")
    }

    fn input(&self) -> PathBuf {
        self.dir.path().join("x.npy")
    }

    fn write_config(&self, file: &str, value: serde_json::Value) {
        std::fs::write(self.dir.path().join(file), value.to_string()).expect("write config");
    }

    fn reference(&self, over: &QuantOverrides) -> Result<Vec<f64>, CheckpointError> {
        let y = checkpoint::run_reference(&self.weights(), LAYER, &self.input(), over)?;
        let want_shape = if self.batch == 0 {
            vec![N]
        } else {
            vec![self.batch, N]
        };
        assert_eq!(y.shape, want_shape);
        Ok(y.data)
    }

    fn expected(&self) -> Vec<f64> {
        naive(&self.qt, &self.x, self.batch.max(1))
    }
}

/// A checkpoint with `gptq_config` as quantize_config.json; `batch` 0 writes x as a `[K]` vector.
fn case(seed: u64, g: usize, stored: Stored, act_order: bool, batch: usize) -> Case {
    let dir = tempfile::tempdir().expect("tempdir");
    let qt = quantise(seed, g, stored == Stored::None, act_order);
    write_safetensors(
        &dir.path().join("model.safetensors"),
        &pack(&qt, stored, act_order),
    );
    let x = activations(seed, batch.max(1));
    let shape = if batch == 0 { vec![K] } else { vec![batch, K] };
    let descr = if batch <= 1 { "<f4" } else { "<f2" };
    write_npy(&dir.path().join("x.npy"), descr, &shape, &x);
    Case { dir, qt, x, batch }
}

fn gptq_config(group: i64, sym: bool, desc_act: bool, format: Option<&str>) -> serde_json::Value {
    let mut c = json!({ "bits": 4, "group_size": group, "sym": sym, "desc_act": desc_act,
                        "damp_percent": 0.01, "true_sequential": true, "quant_method": "gptq" });
    if let Some(f) = format {
        c["checkpoint_format"] = json!(f);
    }
    c
}

const TOL: f64 = 1e-3;

fn assert_matches(c: &Case, over: &QuantOverrides, what: &str) {
    let got = c.reference(over).unwrap_or_else(|e| panic!("{what}: {e}"));
    let err = rel_l2(&got, &c.expected());
    assert!(
        err <= TOL,
        "{what}: relative L2 error {err:.2e} > {TOL:.0e}"
    );
}

#[test]
fn gptq_v1_group128_matches_naive_dequantise_then_multiply() {
    let c = case(1, 128, Stored::MinusOne, false, 0);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    assert_matches(&c, &QuantOverrides::default(), "v1, G=128, [K] f32 input");
}

#[test]
fn gptq_v2_from_config_json_with_a_batch_matches() {
    let c = case(2, 128, Stored::AsIs, false, 3);
    c.write_config("config.json", json!({ "hidden_size": 5120, "quantization_config": gptq_config(128, false, false, Some("gptq_v2")) }));
    assert_matches(
        &c,
        &QuantOverrides::default(),
        "v2, G=128, [3, K] f16 input",
    );
}

#[test]
fn per_channel_v1_matches() {
    let c = case(3, K, Stored::MinusOne, false, 1);
    c.write_config(
        "quantize_config.json",
        gptq_config(-1, false, false, Some("gptq")),
    );
    assert_matches(&c, &QuantOverrides::default(), "v1, per-channel");
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert_eq!(w.info.layout.group, GroupSize::PerChannel);
}

#[test]
fn symmetric_without_qzeros_needs_no_checkpoint_format() {
    let c = case(4, 128, Stored::None, false, 2);
    c.write_config("quantize_config.json", gptq_config(128, true, false, None));
    assert_matches(&c, &QuantOverrides::default(), "symmetric, no qzeros");
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert_eq!(w.info.layout.zero, ZeroPoint::Symmetric);
}

#[test]
fn symmetric_with_stored_v1_zeros_honours_them() {
    // sym = true with qzeros present (what AutoGPTQ writes): z = 8 stored as 7 under v1.
    let c = case(5, 128, Stored::None, false, 1);
    write_safetensors(&c.weights(), &pack(&c.qt, Stored::MinusOne, false));
    c.write_config(
        "quantize_config.json",
        gptq_config(128, true, false, Some("gptq")),
    );
    assert_matches(&c, &QuantOverrides::default(), "symmetric, stored v1 zeros");
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert_eq!(w.info.layout.zero, ZeroPoint::V1);
    assert!(
        !w.info.notes.iter().any(|n| n.contains("warning")),
        "{:?}",
        w.info.notes
    );
    // Mislabelled as gptq_v2: the zeros decode to 7 ≠ 8, the loader says so, and the result is
    // visibly wrong (this comparison can fail).
    c.write_config(
        "quantize_config.json",
        gptq_config(128, true, false, Some("gptq_v2")),
    );
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert!(
        w.info
            .notes
            .iter()
            .any(|n| n.contains("sym = true") && n.contains("z ≠ 8")),
        "{:?}",
        w.info.notes
    );
    let got = c.reference(&QuantOverrides::default()).unwrap();
    assert!(
        rel_l2(&got, &c.expected()) > 1e-2,
        "a wrong zero-point convention must show"
    );
}

#[test]
fn act_order_g_idx_is_honoured() {
    let c = case(6, 64, Stored::AsIs, true, 2);
    c.write_config(
        "quantize_config.json",
        gptq_config(64, false, true, Some("gptq_v2")),
    );
    assert_matches(&c, &QuantOverrides::default(), "act-order, G=64, v2");
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert!(w.info.layout.act_order && w.packed.g_idx.is_some());
}

#[test]
fn identity_g_idx_is_not_act_order() {
    let c = case(7, 32, Stored::MinusOne, false, 1);
    write_safetensors(&c.weights(), &pack(&c.qt, Stored::MinusOne, true));
    c.write_config(
        "quantize_config.json",
        gptq_config(32, false, false, Some("gptq")),
    );
    assert_matches(&c, &QuantOverrides::default(), "identity g_idx, G=32");
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert!(!w.info.layout.act_order && w.packed.g_idx.is_none());
}

#[test]
fn explicit_overrides_replace_a_missing_config() {
    let c = case(8, 128, Stored::MinusOne, false, 1);
    let over = QuantOverrides {
        bits: Some(4),
        group_size: Some(GroupSize::Rows(128)),
        zero: Some(ZeroPoint::V1),
        act_order: None,
    };
    assert_matches(&c, &over, "no config, flags only");
    // The flag wins over the file; the wrong convention is visibly wrong.
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let v2 = QuantOverrides {
        zero: Some(ZeroPoint::V2),
        ..QuantOverrides::default()
    };
    let got = c.reference(&v2).unwrap();
    assert!(
        rel_l2(&got, &c.expected()) > 1e-2,
        "v1 data read as v2 must not pass"
    );
}

/// Defect 12: with no config and no flags, every missing setting is reported at once (was one
/// per run: bits, then group_size, then checkpoint_format).
#[test]
fn invalid_missing_settings_are_reported_all_at_once() {
    let c = case(8, 128, Stored::MinusOne, false, 1);
    let msg = c
        .reference(&QuantOverrides::default())
        .unwrap_err()
        .to_string();
    assert_mentions(
        &msg,
        &[
            "3 quantisation settings are not known",
            "`bits`",
            "--bits 4",
            "`group_size`",
            "--group-size",
            "`checkpoint_format`",
            "--checkpoint-format gptq",
        ],
    );
    // Two missing: both named, the given one not.
    let over = QuantOverrides {
        bits: Some(4),
        ..QuantOverrides::default()
    };
    let msg = c.reference(&over).unwrap_err().to_string();
    assert_mentions(
        &msg,
        &[
            "2 quantisation settings",
            "`group_size`",
            "`checkpoint_format`",
        ],
    );
    assert!(!msg.contains("`bits`"), "{msg}");
    // One missing: the single-setting message, as before.
    let over = QuantOverrides {
        bits: Some(4),
        group_size: Some(GroupSize::Rows(128)),
        ..QuantOverrides::default()
    };
    let msg = c.reference(&over).unwrap_err().to_string();
    assert_mentions(
        &msg,
        &[
            "quantisation setting `checkpoint_format` is not known",
            "--checkpoint-format",
        ],
    );
}

#[test]
fn column_parallel_tp2_equals_tp1() {
    let c = case(9, 128, Stored::AsIs, false, 2);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq_v2")),
    );
    let over = QuantOverrides::default();
    let case2 = checkpoint::prepare_gemv(2, &c.weights(), LAYER, &c.input(), &over).unwrap();
    assert_eq!(case2.kernel.tp(), 2);
    let y = case2
        .gather(&evaluate(&case2.kernel, &case2.inputs).unwrap())
        .unwrap();
    assert_eq!(y.shape, vec![2, N]);
    assert!(rel_l2(&y.data, &c.expected()) <= TOL);
}

#[test]
fn gemv_inputs_binds_a_kernel_built_for_the_file_and_rejects_the_set_shape() {
    let c = case(10, 128, Stored::MinusOne, false, 1);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let over = QuantOverrides::default();
    let w = checkpoint::load_layer(&c.weights(), LAYER, &over).unwrap();
    let kernel = checkpoint::gemv_int4_kernel(1, 1, K, N, w.info.layout);
    let inputs = checkpoint::gemv_inputs(&kernel, &c.weights(), LAYER, &c.input(), &over).unwrap();
    let y = evaluate(&kernel, &inputs).unwrap();
    let y = &y[0][&kernel.buffer_by_name("y").unwrap()];
    assert!(rel_l2(&y.data, &c.expected()) <= TOL);
    // The kernel set's gemv_int4 has K = 5120: binding this layer to it is refused, clearly.
    let set = wavefuse_kernels::KernelId::GemvInt4.build(&wavefuse_kernels::Shapes::qwen27b(1));
    let e = checkpoint::gemv_inputs(&set, &c.weights(), LAYER, &c.input(), &over)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gemv_int4_kernel") && e.contains(&format!("[{K}, {N}]")),
        "{e}"
    );
}

#[test]
fn output_npy_round_trips() {
    let c = case(11, 128, Stored::MinusOne, false, 0);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let y = checkpoint::run_reference(&c.weights(), LAYER, &c.input(), &QuantOverrides::default())
        .unwrap();
    let out = c.dir.path().join("y.npy");
    checkpoint::write_output_npy(&out, &y).unwrap();
    assert_eq!(read_npy_f16(&out), (vec![N], y.data));
}

/// The built `wavefuse` binary beside this test's executable, if cargo built it.
fn wavefuse_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe
        .parent()?
        .parent()?
        .join(format!("wavefuse{}", std::env::consts::EXE_SUFFIX));
    bin.is_file().then_some(bin)
}

#[test]
fn wavefuse_run_with_weights_matches_naive_reference() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo test --workspace builds it)");
        return;
    };
    let help = Command::new(&bin)
        .args(["run", "--help"])
        .output()
        .expect("wavefuse runs");
    if !String::from_utf8_lossy(&help.stdout).contains("--weights") {
        eprintln!("skipped: `wavefuse run` has no --weights flag yet");
        return;
    }
    for (seed, stored, format, batch) in [
        (12, Stored::MinusOne, "gptq", 0),
        (13, Stored::AsIs, "gptq_v2", 2),
    ] {
        let c = case(seed, 128, stored, false, batch);
        c.write_config(
            "quantize_config.json",
            gptq_config(128, false, false, Some(format)),
        );
        let out = c.dir.path().join("y.npy");
        let o = Command::new(&bin)
            .args([
                "run",
                "gemv_int4",
                "--tp",
                "1",
                "--device",
                "cpu-ref",
                "--layer",
                LAYER,
            ])
            .arg("--weights")
            .arg(c.weights())
            .arg("--input")
            .arg(c.input())
            .arg("--output")
            .arg(&out)
            .output()
            .expect("wavefuse runs");
        assert!(
            o.status.success(),
            "wavefuse run failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let (shape, y) = read_npy_f16(&out);
        assert_eq!(shape, if batch == 0 { vec![N] } else { vec![batch, N] });
        let err = rel_l2(&y, &c.expected());
        assert!(err <= TOL, "{format}: relative L2 error {err:.2e}");
    }
}

// ---- Refusals: each error names the tensor or the field. ----

/// A v1 G=128 checkpoint with a correct config, then `edit` applied to its tensors.
fn broken(edit: impl FnOnce(&mut Vec<Entry>)) -> Case {
    let c = case(20, 128, Stored::MinusOne, false, 1);
    let mut t = pack(&c.qt, Stored::MinusOne, false);
    edit(&mut t);
    write_safetensors(&c.weights(), &t);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    c
}

fn refusal(c: &Case) -> String {
    match c.reference(&QuantOverrides::default()) {
        Ok(_) => panic!("a broken checkpoint was accepted"),
        Err(e) => {
            eprintln!("refused: {e}");
            e.to_string()
        }
    }
}

fn assert_mentions(msg: &str, words: &[&str]) {
    for w in words {
        assert!(msg.contains(w), "error does not mention {w:?}: {msg}");
    }
}

/// Defect 14: all-zero scales are loaded (legal) with a warning.
#[test]
fn plausibility_all_zero_scales_warn() {
    let c = broken(|t| {
        let sc = t.iter_mut().find(|e| e.0.ends_with(".scales")).unwrap();
        sc.3.iter_mut().for_each(|b| *b = 0);
    });
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert!(
        w.info
            .notes
            .iter()
            .any(|n| n.starts_with("warning:") && n.contains("scales") && n.contains("is zero")),
        "{:?}",
        w.info.notes
    );
    // A normal checkpoint has neither warning.
    let c = broken(|_| {});
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert!(
        !w.info.notes.iter().any(|n| n.contains("warning")),
        "{:?}",
        w.info.notes
    );
}

/// Defect 14: a symmetric checkpoint (z = 8 stored as 8) declared v1 without `sym`: every zero
/// point decodes to 9; loaded as declared, with a warning.
#[test]
fn plausibility_v1_zeros_all_nine_warn() {
    let c = case(21, 128, Stored::None, false, 1);
    write_safetensors(&c.weights(), &pack(&c.qt, Stored::AsIs, false));
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert_eq!(w.info.layout.zero, ZeroPoint::V1, "never guessed");
    assert!(
        w.info.notes.iter().any(|n| n.starts_with("warning:")
            && n.contains("decodes to z = 9")
            && n.contains("symmetric")),
        "{:?}",
        w.info.notes
    );
    // The same zeros declared v2 (z = 8): no warning.
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq_v2")),
    );
    let w = checkpoint::load_layer(&c.weights(), LAYER, &QuantOverrides::default()).unwrap();
    assert!(
        !w.info.notes.iter().any(|n| n.contains("warning")),
        "{:?}",
        w.info.notes
    );
}

#[test]
fn invalid_missing_tensor_is_named() {
    let c = broken(|t| t.retain(|e| !e.0.ends_with(".scales")));
    assert_mentions(
        &refusal(&c),
        &[
            &format!("`{LAYER}.scales` not found"),
            &format!("`{LAYER}.qweight`"),
        ],
    );
}

#[test]
fn invalid_layer_name_lists_the_gptq_layers() {
    let c = broken(|_| {});
    let e = checkpoint::run_reference(
        &c.weights(),
        "model.layers.9.mlp.up_proj",
        &c.input(),
        &QuantOverrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert_mentions(
        &e,
        &["`model.layers.9.mlp.up_proj.qweight` not found", LAYER],
    );
}

#[test]
fn invalid_dtype_is_named() {
    let c = broken(|t| {
        let s = t.iter_mut().find(|e| e.0.ends_with(".scales")).unwrap();
        s.1 = Dtype::I16;
    });
    assert_mentions(
        &refusal(&c),
        &[
            &format!("`{LAYER}.scales`"),
            "expected dtype F16",
            "found I16",
        ],
    );
    let c = broken(|t| t[0].1 = Dtype::F32);
    assert_mentions(
        &refusal(&c),
        &[
            &format!("`{LAYER}.qweight`"),
            "expected dtype I32",
            "found F32",
        ],
    );
}

#[test]
fn invalid_shape_is_named_with_expected_and_found() {
    let c = broken(|t| {
        let s = t.iter_mut().find(|e| e.0.ends_with(".scales")).unwrap();
        s.2 = vec![1, 2 * N];
    });
    assert_mentions(
        &refusal(&c),
        &[
            &format!("`{LAYER}.scales`"),
            &format!("N={N}"),
            &format!("[1, {}]", 2 * N),
        ],
    );
    let c = broken(|t| {
        let z = t.iter_mut().find(|e| e.0.ends_with(".qzeros")).unwrap();
        z.2 = vec![N / 8, 2];
    });
    assert_mentions(
        &refusal(&c),
        &[
            &format!("`{LAYER}.qzeros`"),
            &format!("[K/G=2, N/8={}]", N / 8),
        ],
    );
}

#[test]
fn invalid_truncated_file_names_a_tensor() {
    let c = broken(|_| {});
    let bytes = std::fs::read(c.weights()).unwrap();
    std::fs::write(c.weights(), &bytes[..bytes.len() - 100]).unwrap();
    let e = refusal(&c);
    assert_mentions(&e, &["truncated", "tensor `"]);
    let named = e.split('`').nth(1).unwrap_or_default();
    assert!(
        pack(&c.qt, Stored::MinusOne, false)
            .iter()
            .any(|t| t.0 == named),
        "{e}"
    );
    std::fs::write(c.weights(), &bytes[..20]).unwrap();
    assert_mentions(&refusal(&c), &["model.safetensors", "truncated"]);
}

#[test]
fn invalid_config_without_checkpoint_format_asks_for_the_flag() {
    let c = broken(|_| {});
    c.write_config("quantize_config.json", gptq_config(128, false, false, None));
    assert_mentions(
        &refusal(&c),
        &[
            "checkpoint_format",
            "--checkpoint-format gptq",
            &format!("{LAYER}.qzeros"),
        ],
    );
}

#[test]
fn invalid_bits_8_is_refused() {
    let c = broken(|_| {});
    let mut cfg = gptq_config(128, false, false, Some("gptq"));
    cfg["bits"] = json!(8);
    c.write_config("quantize_config.json", cfg);
    assert_mentions(&refusal(&c), &["bits = 8", "quantize_config.json"]);
}

#[test]
fn invalid_awq_config_is_refused() {
    let c = broken(|_| {});
    std::fs::remove_file(c.dir.path().join("quantize_config.json")).unwrap();
    let awq = json!({ "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm" });
    c.write_config("config.json", json!({ "quantization_config": awq }));
    assert_mentions(&refusal(&c), &["AWQ", "quant_method", "config.json"]);
}

#[test]
fn invalid_group_size_and_act_order_settings_are_refused() {
    let c = broken(|_| {});
    c.write_config(
        "quantize_config.json",
        gptq_config(256, false, false, Some("gptq")),
    );
    assert_mentions(&refusal(&c), &["group_size = 256"]);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, true, Some("gptq")),
    );
    assert_mentions(
        &refusal(&c),
        &[&format!("`{LAYER}.g_idx` not found"), "act-order"],
    );
    // desc_act with a g_idx that is not a group map (group 0 gets every row).
    let c = broken(|t| {
        t.push((
            format!("{LAYER}.g_idx"),
            Dtype::I32,
            vec![K],
            vec![0; K * 4],
        ))
    });
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, true, Some("gptq")),
    );
    assert_mentions(
        &refusal(&c),
        &[&format!("`{LAYER}.g_idx`"), "not a valid group map"],
    );
}

#[test]
fn invalid_activation_shape_names_the_file_and_k() {
    let c = broken(|_| {});
    write_npy(&c.input(), "<f4", &[2, K + 8], &vec![0.5; 2 * (K + 8)]);
    assert_mentions(
        &refusal(&c),
        &["x.npy", &format!("[B, K={K}]"), &format!("[2, {}]", K + 8)],
    );
}

/// Defect 12: a `[1000, K]` activation is refused on the input, naming the batch limit of 64
/// (was "LDS exceeded" from the lowering); on the binary too, before any kernel is lowered.
/// B = 64 is accepted, B = 65 refused.
#[test]
fn invalid_activation_batch_above_64_names_the_batch_limit() {
    let c = broken(|_| {});
    write_npy(&c.input(), "<f2", &[1000, K], &vec![0.5; 1000 * K]);
    let msg = refusal(&c);
    assert_mentions(&msg, &["x.npy", "B = 1000", "batch limit of 64"]);
    assert!(!msg.contains("LDS"), "{msg}");
    write_npy(&c.input(), "<f2", &[64, K], &vec![0.5; 64 * K]);
    checkpoint::run_reference(&c.weights(), LAYER, &c.input(), &QuantOverrides::default())
        .expect("B = 64 is accepted");
    write_npy(&c.input(), "<f2", &[65, K], &vec![0.5; 65 * K]);
    assert_mentions(&refusal(&c), &["B = 65", "batch limit of 64"]);
    let Some(bin) = wavefuse_binary() else {
        eprintln!("binary part skipped: the wavefuse binary is not built");
        return;
    };
    write_npy(&c.input(), "<f2", &[1000, K], &vec![0.5; 1000 * K]);
    for device in ["sim", "cpu-ref"] {
        let o = Command::new(&bin)
            .args([
                "run",
                "gemv_int4",
                "--tp",
                "1",
                "--device",
                device,
                "--weights",
            ])
            .arg(c.weights())
            .args(["--layer", LAYER, "--input"])
            .arg(c.input())
            .output()
            .expect("wavefuse runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{device}: {err}");
        assert!(
            err.contains("batch limit of 64") && !err.contains("LDS"),
            "{device}: {err}"
        );
    }
}

/// A `[K, n]` GPTQ layer of constant codes (G = 128), v1 zeros stored when `zeros`, and a
/// config saying so; x = `[K]` of 0.5.
fn layer_of_width(n: usize, zeros: bool) -> Case {
    let c = broken(|_| {});
    let name = |s: &str| format!("{LAYER}.{s}");
    let mut t: Vec<Entry> = vec![
        (
            name("qweight"),
            Dtype::I32,
            vec![K / 8, n],
            vec![0x99; K / 8 * n * 4],
        ),
        (
            name("scales"),
            Dtype::F16,
            vec![K / 128, n],
            [0x00, 0x3c].repeat(K / 128 * n),
        ),
    ];
    if zeros {
        t.push((
            name("qzeros"),
            Dtype::I32,
            vec![K / 128, n / 8],
            vec![0x77; K / 128 * n / 8 * 4],
        ));
    }
    write_safetensors(&c.weights(), &t);
    c.write_config(
        "quantize_config.json",
        gptq_config(128, !zeros, false, zeros.then_some("gptq")),
    );
    write_npy(&c.input(), "<f4", &[K], &vec![0.5; K]);
    c
}

/// Defect 12: a layer whose N does not fit the TP (N = 72 at --tp's default 4) says which TP
/// sizes would.
#[test]
fn invalid_tp_for_the_layer_width_names_the_tp_sizes_that_fit() {
    let over = QuantOverrides::default();
    // N = 72 with v1 zeros: 72 / 4 = 18 columns per rank, not a multiple of 8; only TP 1 fits.
    let c = layer_of_width(72, true);
    let msg = checkpoint::prepare_gemv(4, &c.weights(), LAYER, &c.input(), &over)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert_mentions(
        &msg,
        &[
            "tp = 4",
            "TP sizes that divide this shape: 1 ",
            "--tp 1",
            "default",
        ],
    );
    checkpoint::prepare_gemv(1, &c.weights(), LAYER, &c.input(), &over).expect("TP 1 fits");
    // N = 60, symmetric: 60 does not split over 8; 1, 2 and 4 do.
    let c = layer_of_width(60, false);
    let msg = checkpoint::prepare_gemv(8, &c.weights(), LAYER, &c.input(), &over)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert_mentions(
        &msg,
        &[
            "do not split evenly over tp = 8",
            "TP sizes that divide this shape: 1, 2, 4",
            "--tp 4",
        ],
    );
    let Some(bin) = wavefuse_binary() else {
        eprintln!("binary part skipped: the wavefuse binary is not built");
        return;
    };
    let c = layer_of_width(72, true);
    let o = Command::new(&bin)
        .args(["run", "gemv_int4", "--device", "cpu-ref", "--weights"])
        .arg(c.weights())
        .args(["--layer", LAYER, "--input"])
        .arg(c.input())
        .output()
        .expect("wavefuse runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert_mentions(
        &err,
        &[
            "TP sizes that divide this shape: 1 ",
            "--tp 1",
            "4 is --tp's default",
        ],
    );
}

#[test]
fn sharded_checkpoint_through_its_index_and_a_directory() {
    let c = case(14, 128, Stored::MinusOne, false, 1);
    std::fs::remove_file(c.weights()).unwrap();
    let tensors = pack(&c.qt, Stored::MinusOne, false);
    let (a, b) = tensors.split_at(2);
    let shards = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ];
    write_safetensors(&c.dir.path().join(shards[0]), a);
    write_safetensors(&c.dir.path().join(shards[1]), b);
    let map: serde_json::Map<String, serde_json::Value> = a
        .iter()
        .map(|t| (t.0.clone(), json!(shards[0])))
        .chain(b.iter().map(|t| (t.0.clone(), json!(shards[1]))))
        .collect();
    let index = c.dir.path().join("model.safetensors.index.json");
    std::fs::write(
        &index,
        json!({ "metadata": { "total_size": 0 }, "weight_map": map }).to_string(),
    )
    .unwrap();
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let over = QuantOverrides::default();
    for weights in [index.as_path(), c.dir.path()] {
        let y = checkpoint::run_reference(weights, LAYER, &c.input(), &over).unwrap();
        assert!(
            rel_l2(&y.data, &c.expected()) <= TOL,
            "{}",
            weights.display()
        );
    }
}

/// Defect 12: an index mapping a tensor to a shard that does not hold it names the shard the
/// index names and the shard that holds it (or that none does); was "not found" listing the
/// tensor among the checkpoint's names.
#[test]
fn invalid_index_naming_the_wrong_shard_says_which_shard_holds_the_tensor() {
    let c = case(22, 128, Stored::MinusOne, false, 1);
    std::fs::remove_file(c.weights()).unwrap();
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let tensors = pack(&c.qt, Stored::MinusOne, false);
    let shards = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ];
    let scales = format!("{LAYER}.scales");
    let index = c.dir.path().join("model.safetensors.index.json");
    for (drop_scales, holder) in [(false, Some(shards[0])), (true, None)] {
        let (a, b) = tensors.split_at(2);
        let a: Vec<Entry> = a
            .iter()
            .filter(|t| !(drop_scales && t.0 == scales))
            .cloned()
            .collect();
        write_safetensors(&c.dir.path().join(shards[0]), &a);
        write_safetensors(&c.dir.path().join(shards[1]), b);
        // Every tensor mapped right except the scales, mapped to the second shard.
        let map: serde_json::Map<String, serde_json::Value> = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let shard = if i < 2 && t.0 != scales {
                    shards[0]
                } else {
                    shards[1]
                };
                (t.0.clone(), json!(shard))
            })
            .collect();
        std::fs::write(&index, json!({ "weight_map": map }).to_string()).unwrap();
        let msg = checkpoint::run_reference(&index, LAYER, &c.input(), &QuantOverrides::default())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        let named = format!(
            "maps tensor `{scales}` to shard `{}`, but that shard does not hold it",
            shards[1]
        );
        match holder {
            Some(h) => assert_mentions(&msg, &[&named, &format!("it is in `{h}`")]),
            None => assert_mentions(&msg, &[&named, "no shard the index names holds it"]),
        }
        assert!(!msg.contains("not found"), "{msg}");
    }
}

/// The generated kernel, not only the reference: `gemv_int4` built for the file's K and N is
/// lowered for each target and run in the CPU simulator on the checkpoint's own arrays; its
/// output must match the naive reference too (no GPU needed).
#[test]
fn generated_gemv_int4_on_checkpoint_weights_matches_naive_in_the_simulator() {
    use wavefuse_codegen::Arch;
    use wavefuse_codegen::lower::{Schedule, lower};
    use wavefuse_codegen::sim::{Granularity, SimOptions, simulate};

    for (seed, stored, format, arch) in [
        (15, Stored::MinusOne, Some("gptq"), Arch::Sm90),
        (16, Stored::None, None, Arch::Gfx906),
    ] {
        let c = case(seed, 128, stored, false, 2);
        c.write_config(
            "quantize_config.json",
            gptq_config(128, stored == Stored::None, false, format),
        );
        let over = QuantOverrides::default();
        let prepared = checkpoint::prepare_gemv(1, &c.weights(), LAYER, &c.input(), &over).unwrap();
        let kernel = &prepared.kernel;
        let lowered = lower(kernel, arch, &Schedule::default_for(arch, kernel))
            .unwrap_or_else(|e| panic!("{arch:?}: gemv_int4 at K={K}, N={N} does not lower: {e}"));
        let mut opts = SimOptions::new(seed);
        opts.granularity = Granularity::Wave;
        let report = simulate(
            &lowered,
            kernel,
            std::slice::from_ref(&prepared.inputs),
            &opts,
        )
        .unwrap();
        assert!(report.is_clean(), "{arch:?}: {:?}", report.findings);
        let y = prepared.gather(&report.outputs[0]).unwrap();
        let err = rel_l2(&y.data, &c.expected());
        assert!(
            err <= TOL,
            "{arch:?}: generated kernel vs naive: relative L2 {err:.2e}"
        );
    }
}

// ---- The command line under bad output paths and overflow (issue 21) ----

/// `wavefuse run gemv_int4 --tp 1 --weights W --layer L --input X [--output Y] extra…` on `c`.
fn run_checkpoint(
    bin: &Path,
    c: &Case,
    out: Option<&Path>,
    extra: &[&str],
) -> std::process::Output {
    c.write_config(
        "quantize_config.json",
        gptq_config(128, false, false, Some("gptq")),
    );
    let mut cmd = Command::new(bin);
    cmd.args(["run", "gemv_int4", "--tp", "1", "--layer", LAYER])
        .arg("--weights")
        .arg(c.weights())
        .arg("--input")
        .arg(c.input())
        .args(extra);
    if let Some(out) = out {
        cmd.arg("--output").arg(out);
    }
    cmd.output().expect("wavefuse runs")
}

fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Defect 3: `--output` naming the checkpoint, the input, or a link to either is refused, and
/// both stay as they were; a name without `.npy` is refused.
#[test]
fn invalid_output_naming_an_input_is_refused_and_the_input_kept() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo build -p wavefuse-cli)");
        return;
    };
    let c = case(30, 128, Stored::MinusOne, false, 1);
    let link = c.dir.path().join("link.npy");
    std::os::unix::fs::symlink(c.weights(), &link).unwrap();
    let before = (
        std::fs::read(c.weights()).unwrap(),
        std::fs::read(c.input()).unwrap(),
    );
    for (out, why) in [
        (c.weights(), "must end in .npy"),
        (c.input(), "is the input"),
        (link.clone(), "is the input"),
        (c.dir.path().join("y.bin"), "must end in .npy"),
    ] {
        let o = run_checkpoint(&bin, &c, Some(&out), &["--device", "cpu-ref"]);
        let text = said(&o);
        assert!(!o.status.success(), "{}: accepted\n{text}", out.display());
        assert!(text.contains(why), "{}: {text}", out.display());
        assert_eq!(
            (
                std::fs::read(c.weights()).unwrap(),
                std::fs::read(c.input()).unwrap()
            ),
            before,
            "{}: an input changed",
            out.display()
        );
    }
}

/// Defect 11: an output into a missing directory, onto a directory or a device is refused
/// before any work (the layer is never loaded).
#[test]
fn invalid_output_path_is_refused_before_the_work() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo build -p wavefuse-cli)");
        return;
    };
    let c = case(31, 128, Stored::MinusOne, false, 1);
    let sub = c.dir.path().join("sub.npy");
    std::fs::create_dir(&sub).unwrap();
    for (out, why) in [
        (c.dir.path().join("missing/y.npy"), "does not exist"),
        (sub, "is a directory"),
        (PathBuf::from("/dev/full"), "must end in .npy"),
    ] {
        let o = run_checkpoint(&bin, &c, Some(&out), &["--device", "cpu-ref"]);
        let text = said(&o);
        assert_eq!(o.status.code(), Some(2), "{}: {text}", out.display());
        assert!(text.contains(why), "{}: {text}", out.display());
        assert!(
            !text.contains("wavefuse run gemv_int4 on"),
            "{}: refused only after loading the layer: {text}",
            out.display()
        );
    }
}

/// Defect 4: legal FP16 scales of 60000 overflow the FP16 output of the f64 reference itself:
/// an error saying so, exit 1, no output written.
#[test]
fn invalid_overflowing_reference_is_an_error_and_writes_nothing() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo build -p wavefuse-cli)");
        return;
    };
    let mut c = case(32, 128, Stored::MinusOne, false, 1);
    c.qt.s.iter_mut().for_each(|s| *s = 60000.0);
    write_safetensors(&c.weights(), &pack(&c.qt, Stored::MinusOne, false));
    let out = c.dir.path().join("y.npy");
    let o = run_checkpoint(&bin, &c, Some(&out), &["--device", "cpu-ref"]);
    let text = said(&o);
    assert!(
        !o.status.success(),
        "exit 0 with non-finite outputs:\n{text}"
    );
    assert!(
        text.contains("of the f64 reference are not finite") && text.contains("overflows FP16"),
        "{text}"
    );
    assert!(!out.exists(), "an output was written");
}

/// Defect 8: `--device gpu --target gfx906` on a checkpoint opens the HIP device, not CUDA.
#[test]
fn checkpoint_on_gpu_for_gfx906_opens_hip() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo build -p wavefuse-cli)");
        return;
    };
    let c = case(33, 128, Stored::MinusOne, false, 1);
    let o = run_checkpoint(&bin, &c, None, &["--device", "gpu", "--target", "gfx906"]);
    let text = said(&o);
    if o.status.success() {
        println!("an AMD GPU ran it: {text}");
        return;
    }
    assert!(
        !text.contains("NVIDIA") && !text.contains("CUDA") && !text.contains("NVRTC"),
        "gfx906 opened the NVIDIA stack: {text}"
    );
    assert!(
        text.to_lowercase().contains("hip") || text.contains("AMD"),
        "{text}"
    );
}

/// Defect 12: a sharded index naming a file outside the checkpoint's directory is refused
/// before anything is opened.
#[test]
fn invalid_index_naming_a_path_outside_the_checkpoint_is_refused() {
    for target in [
        "/etc/passwd",
        "../model.safetensors",
        "sub/../../x.safetensors",
    ] {
        let c = case(34, 128, Stored::MinusOne, false, 1);
        let map: serde_json::Map<String, serde_json::Value> = pack(&c.qt, Stored::MinusOne, false)
            .iter()
            .map(|t| (t.0.clone(), json!(target)))
            .collect();
        let index = c.dir.path().join("model.safetensors.index.json");
        std::fs::write(&index, json!({ "weight_map": map }).to_string()).unwrap();
        c.write_config(
            "quantize_config.json",
            gptq_config(128, false, false, Some("gptq")),
        );
        let err = checkpoint::run_reference(&index, LAYER, &c.input(), &QuantOverrides::default())
            .unwrap_err()
            .to_string();
        assert_mentions(
            &err,
            &[target, "plain file names in the checkpoint's directory"],
        );
    }
}

/// Defect 12: a missing layer lists the checkpoint's layers nearest to the name asked for first.
#[test]
fn invalid_layer_name_lists_the_nearest_layers_first() {
    let c = broken(|t| {
        for i in 0..12 {
            t.push((
                format!("model.layers.{i}.mlp.gate_proj.qweight"),
                Dtype::I32,
                vec![N / 8, 16],
                vec![0x11; N / 8 * 16 * 4],
            ));
        }
    });
    let e = checkpoint::run_reference(
        &c.weights(),
        "model.layers.9.mlp.gate_prj",
        &c.input(),
        &QuantOverrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert_mentions(&e, &["nearest first: `model.layers.9.mlp.gate_proj`"]);
}

/// Issue 39, item 9: re-running with the same `--output` beside the checkpoint replaces it; the
/// previous output used to be counted among the checkpoint's files and refused as an input.
#[test]
fn rerun_with_the_previous_output_beside_the_checkpoint_replaces_it() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo build -p wavefuse-cli)");
        return;
    };
    let c = case(33, 128, Stored::MinusOne, false, 1);
    let out = c.dir.path().join("y.npy");
    for run in 0..2 {
        let o = run_checkpoint(&bin, &c, Some(&out), &["--device", "cpu-ref"]);
        assert!(o.status.success(), "run {run}: {}", said(&o));
    }
    assert!(out.is_file());
}

/// Issue 39, item 9: a layer whose f64 reference overflows FP16 is said to overflow under
/// `--device sim` too, before the simulator runs (it was reported as simulator findings: the
/// kernel blamed for the input's overflow).
#[test]
fn a_reference_overflowing_fp16_is_not_blamed_on_the_simulated_kernel() {
    let Some(bin) = wavefuse_binary() else {
        eprintln!("skipped: the wavefuse binary is not built (cargo build -p wavefuse-cli)");
        return;
    };
    let mut c = case(34, 128, Stored::MinusOne, false, 1);
    c.qt.s.iter_mut().for_each(|s| *s = 60000.0);
    write_safetensors(&c.weights(), &pack(&c.qt, Stored::MinusOne, false));
    let o = run_checkpoint(&bin, &c, None, &["--device", "sim"]);
    let text = said(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("the layer overflows FP16"), "{text}");
    assert!(!text.contains("finding"), "the kernel was blamed: {text}");
}
