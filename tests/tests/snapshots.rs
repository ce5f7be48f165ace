//! Snapshots of the textual IR of every kernel of the set at TP = 1, 2, 4, 8, named
//! `{kernel}@ir_tp{N}`. CI runs with `INSTA_UPDATE=no`: a stale snapshot fails.

use wavefuse::ir::validate;
use wavefuse_kernels::{KernelId, Shapes};

#[test]
fn ir_snapshots_of_the_kernel_set() {
    for tp in [1, 2, 4, 8] {
        for id in KernelId::ALL {
            let kernel = id.build(&Shapes::qwen27b(tp));
            validate(&kernel).unwrap_or_else(|e| panic!("{id}@tp{tp} is invalid: {e}"));
            insta::assert_snapshot!(format!("{}@ir_tp{tp}", id.name()), kernel.to_string());
        }
    }
}

#[test]
fn invalid_kernels_print_without_types() {
    // The printer must not hide an invalid kernel: it prints it, without inferred types.
    let mut b = wavefuse::ir::Builder::new("bad", 1);
    let x = b.input(
        "x",
        wavefuse::ir::Tensor::activation(wavefuse::ir::ScalarType::F16, 1, 8),
        wavefuse::ir::Sharding::Replicated,
    );
    let xv = b.load(x);
    b.store(xv, x);
    let text = b.finish().to_string();
    assert!(text.contains("store v0, buf0"), "{text}");
    assert!(
        !text.contains(';'),
        "types printed for an invalid kernel:\n{text}"
    );
}
