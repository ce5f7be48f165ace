//! `own-wavefuse`: the `wavefuse` commands with this crate's kernels by name
//! (`wavefuse_cli::Registry`) print what the library pipeline generates for them.

use std::process::Command;

use wavefuse::pipeline::{self, Target};

fn own_wavefuse(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_own-wavefuse"))
        .args(args)
        .output()
        .expect("own-wavefuse runs")
}

#[test]
fn a_registered_kernel_emits_what_the_pipeline_generates() {
    let model = own_kernels::model();
    for (tp, name, target) in [
        (1, "gemv_residual", Target::Gfx906),
        (2, "silu_mul_down", Target::Sm90),
    ] {
        let kernel = own_kernels::kernels(&model, tp, 1)
            .into_iter()
            .find(|k| k.name() == name)
            .expect("the crate's kernel");
        let tp_arg = tp.to_string();
        let o = own_wavefuse(&["--tp", &tp_arg, "emit", name, "--target", target.name()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let want = pipeline::generate(&kernel, target).expect("generates");
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            want.source.text,
            "{name} {target}"
        );
    }
    // The set's kernels are still there.
    let o = own_wavefuse(&["emit", "gemv_f16", "--ir"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn shapes_the_model_does_not_divide_are_refused() {
    let o = own_wavefuse(&["--tp", "3", "emit", "gemv_residual", "--target", "sm90"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("config.json at TP 3"), "{err}");
    assert!(o.stdout.is_empty());
}
