//! `--model-config config.json`: the kernel set at a model's own dimensions. What `emit` prints at
//! those shapes is what the pipeline generates for `ab`; a config that misses a field or does not
//! divide is an error naming it, exit 2, no output.

use std::process::Command;

mod common;

use common::wavefuse;

use wavefuse_codegen::Arch;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::policy::{Placement, SchedulePolicy};
use wavefuse_harness::suite::{self, CaseSpec, ShapeKind};
use wavefuse_kernels::KernelId;

/// A Llama-style small model (TinyLlama's dimensions): 2048 hidden, 5632 intermediate, 32 heads of
/// 64, 4 KV heads.
const LLAMA: &str = r#"{"hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
  "num_key_value_heads": 4, "rms_norm_eps": 1e-5, "num_hidden_layers": 22}"#;

#[test]
fn emit_at_a_models_config_is_the_pipelines_kernel_on_both_targets() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, LLAMA).unwrap();
    let cfg = cfg.to_str().unwrap();
    let shape = model_shapes(Some(std::path::Path::new(cfg)), &[2]).unwrap();
    let ShapeKind::Of(m) = shape else {
        panic!("not a model of its own: {shape:?}")
    };
    assert_eq!((m.hidden, m.ffn, m.q_gate, m.kv), (2048, 5632, 2048, 256));
    for arch in Arch::ALL {
        for id in KernelId::ALL {
            let o = wavefuse(&[
                "emit",
                id.name(),
                "--target",
                arch.name(),
                "--tp",
                "2",
                "--model-config",
                cfg,
            ]);
            assert!(
                o.status.success(),
                "{id}@{arch}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let c = CaseSpec {
                kernel: id.into(),
                tp: 2,
                batch: 1,
                shape,
            };
            let g = suite::generate(&c, arch, &SchedulePolicy::default(), Placement::PerDevice)
                .unwrap_or_else(|e| panic!("{id}@{arch}: {e}"));
            assert_eq!(
                String::from_utf8(o.stdout).unwrap(),
                g.source.text,
                "{id}@{arch}"
            );
            // The model's dimensions, not Qwen's: every hidden-sized buffer is 2048 wide.
            let hidden = g.ir.buffer_by_name(match id {
                KernelId::GemvF16
                | KernelId::GemvInt4
                | KernelId::GemvInt4DualSilu
                | KernelId::GemvInt4Qkv => "x",
                KernelId::AllreduceResidual
                | KernelId::AllreduceResidualRmsnorm
                | KernelId::GemvInt4AllreduceRmsnorm => "residual",
                KernelId::AllreduceInt8 => "partial",
            });
            let d = g.ir.buffer(hidden.expect("the buffer")).unwrap();
            let wavefuse_codegen::ir::BufferType::Tensor(t) = d.local_type() else {
                panic!("a tensor")
            };
            assert_eq!(t.shape.last(), Some(&2048), "{id}");
        }
    }
    // The IR too, with the config's epsilon.
    let o = wavefuse(&[
        "emit",
        "allreduce_residual_rmsnorm",
        "--ir",
        "--tp",
        "2",
        "--model-config",
        cfg,
    ]);
    let ir = String::from_utf8(o.stdout).unwrap();
    assert!(
        ir.contains("f16[1, 2048]") && ir.contains("eps=1e-5"),
        "{ir}"
    );
}

/// `LLAMA` with a GPTQ `quantization_config` (groups of 64, symmetric), written as
/// `dir/config.json`.
fn quantised_config(dir: &std::path::Path) -> std::path::PathBuf {
    let cfg = dir.join("config.json");
    let quantised = LLAMA.replace(
        "\"num_hidden_layers\": 22}",
        "\"num_hidden_layers\": 22, \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 64, \"sym\": true}}",
    );
    std::fs::write(&cfg, quantised).unwrap();
    cfg
}

/// A GPTQ checkpoint's config sets the set's weight layout: `emit` at a config whose
/// `quantization_config` says groups of 64, symmetric, prints the kernel in that layout, and its
/// CUDA is the pipeline's for it.
#[test]
fn a_checkpoints_quantization_config_sets_the_weight_layout() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = quantised_config(dir.path());
    let cfg = cfg.to_str().unwrap();
    let o = wavefuse(&[
        "emit",
        "gemv_int4",
        "--tp",
        "2",
        "--model-config",
        cfg,
        "--ir",
    ]);
    let ir = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(ir.contains("gptq<group=64, zero=sym"), "{ir}");
    let o = wavefuse(&[
        "emit",
        "gemv_int4",
        "--tp",
        "2",
        "--model-config",
        cfg,
        "--target",
        "sm90",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shape = model_shapes(Some(std::path::Path::new(cfg)), &[2]).unwrap();
    let g = suite::generate(
        &CaseSpec::of(KernelId::GemvInt4, 2, 1, shape),
        Arch::Sm90,
        &SchedulePolicy::default(),
        Placement::PerDevice,
    )
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), g.source.text);
}

#[test]
fn bad_model_configs_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, args, says) in [
        (
            "missing.json",
            r#"{"hidden_size": 2048}"#,
            &["--tp", "2"][..],
            "no `intermediate_size`",
        ),
        (
            "indivisible.json",
            LLAMA,
            &["--tp", "8"][..],
            "at TP 8: intermediate_size / TP = 704 is not a multiple of 128",
        ),
        ("broken.json", "{", &["--tp", "2"][..], "not JSON"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let mut a = vec!["emit", "gemv_int4", "--target", "sm90", "--model-config"];
        a.push(p.to_str().unwrap());
        a.extend_from_slice(args);
        let o = wavefuse(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(o.stdout.is_empty(), "{name}: printed a kernel");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
    }
}

/// `tune --model-config` compiles the candidates at the model's shapes and names the shape set
/// after its dimensions (the tuned store's key; no GPU here: nothing is timed or stored).
#[test]
fn tune_at_a_models_config_names_the_shape_set_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, LLAMA).unwrap();
    let json = dir.path().join("t.json");
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(["tune", "gemv_int4", "--quick", "--budget", "3", "--no-gpu"])
        .args([
            "--shapes",
            "qwen27b-tp2",
            "--model-config",
            cfg.to_str().unwrap(),
        ])
        .args(["--json", json.to_str().unwrap()])
        .env("WAVEFUSE_CACHE_DIR", dir.path())
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        j["cases"][0]["shape"], "h2048-f5632-q2048-kv256-d64-tp2",
        "{j:#}"
    );
}

/// `run --device cpu-ref --model-config`: the f64 reference at the model's shapes.
#[test]
fn run_at_a_models_config_evaluates_the_reference_at_its_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, LLAMA).unwrap();
    let o = wavefuse(&[
        "run",
        "gemv_int4_allreduce_rmsnorm",
        "--device",
        "cpu-ref",
        "--tp",
        "2",
        "--model-config",
        cfg.to_str().unwrap(),
    ]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    // The down GEMV's K shard is 5632 / 2 = 2816 and its output the 2048 hidden features.
    assert!(out.contains("2816") && out.contains("2048"), "{out}");
}

/// `sim --model-config`: the kernel built at the model's dimensions and GPTQ layout (groups of
/// 64, symmetric), shrunk to the simulator's small shapes, runs clean against the f64 reference;
/// what it simulated says the model's layout.
#[test]
fn sim_at_a_models_config_simulates_its_weight_layout() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = quantised_config(dir.path());
    let o = wavefuse(&[
        "sim",
        "gemv_int4_allreduce_rmsnorm",
        "--tp",
        "2",
        "--model-config",
        cfg.to_str().unwrap(),
        "--schedules",
        "2",
        "--target",
        "sm90",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("(model: 2048, 2816,"), "{out}");
    assert!(out.contains("GPTQ group 64 sym"), "{out}");
    assert!(out.contains("0 with findings"), "{out}");
}

/// Issue 39 items 1, 3 and 5 through the CLI. (a) hidden 65536, 512 heads of 256: the Q
/// projection's FP16 weight is 65536 × 131072 = 2^33 elements (16 GiB); `emit` exited 0 with
/// 32-bit indices that wrap, and now refuses, exit 1, naming the buffer, its elements and the
/// limit, printing no code. (b) Dimensions past the bound (`hidden_size` 2^63 panicked, products
/// wrapped) are config errors, exit 2. (c) `run --device cpu-ref` at 2^17 × 2^17 weights (2^34
/// elements, ~400 GB) is refused by the host memory budget, exit 1, before allocating.
#[test]
fn invalid_sizes_are_refused_naming_the_buffer_or_field_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let wide = write(
        "wide.json",
        r#"{"hidden_size": 65536, "intermediate_size": 65536, "num_attention_heads": 512,
            "head_dim": 256, "num_key_value_heads": 8}"#,
    );
    for arch in ["sm90", "gfx906"] {
        let o = wavefuse(&[
            "emit",
            "gemv_f16",
            "--target",
            arch,
            "--tp",
            "1",
            "--model-config",
            &wide,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{arch}: {err}");
        assert!(o.stdout.is_empty(), "{arch}: printed code");
        assert!(
            err.contains("8589934592 elements per rank") && err.contains("4294967295"),
            "{arch}: {err}"
        );
    }
    let huge = write(
        "huge.json",
        r#"{"hidden_size": 9223372036854775808, "intermediate_size": 17408, "num_attention_heads": 24}"#,
    );
    let kv = write(
        "kv.json",
        r#"{"hidden_size": 5120, "intermediate_size": 17408, "num_attention_heads": 24,
            "num_key_value_heads": 65536, "head_dim": 256}"#,
    );
    for (cfg, says) in [
        (
            &huge,
            "`hidden_size` is 9223372036854775808, more than 1048576",
        ),
        (
            &kv,
            "the KV width (num_key_value_heads 65536 × head_dim 256) is 16777216, more than 1048576",
        ),
    ] {
        for cmd in [
            &["emit", "gemv_int4", "--target", "sm90"][..],
            &["run", "gemv_int4", "--device", "cpu-ref"],
        ] {
            let mut a = cmd.to_vec();
            a.extend(["--tp", "1", "--model-config", cfg]);
            let o = wavefuse(&a);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {cfg}: {err}");
            assert!(err.contains(says), "{cmd:?} {cfg}: {err}");
        }
    }
    let vast = write(
        "vast.json",
        r#"{"hidden_size": 131072, "intermediate_size": 131072, "num_attention_heads": 8,
            "head_dim": 128}"#,
    );
    let o = wavefuse(&[
        "run",
        "gemv_int4",
        "--device",
        "cpu-ref",
        "--tp",
        "1",
        "--model-config",
        &vast,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("more than the 17179869184-byte budget")
            && err.contains("17179869184 elements"),
        "{err}"
    );
}
