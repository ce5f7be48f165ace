//! A kernel over an AutoAWQ INT4 weight through the library pipeline: the f64 reference and the
//! workload know the layout, the lowering does not yet, so `pipeline::check` refuses it with the
//! reason as a typed error — never a panic.

use wavefuse::pipeline::{self, Error, On, Target};

const AWQ: &str = "kernel gemv_awq(tp=1) {
    buf0 = input w : awq<group=128, scale=f16>[k=256, n=64] col_parallel(tp=1) @global index=local
    buf1 = input x : f16[1, 256] replicated @global index=local
    buf2 = output y : f16[1, 64] col_parallel(tp=1) @global index=local
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}
";

#[test]
fn an_awq_kernel_is_refused_with_the_reason_by_pipeline_check() {
    let kernel = wavefuse::ir::parse(AWQ).expect("parses");
    for target in [Target::Sm90, Target::Gfx906] {
        match pipeline::check(&kernel, target, On::Simulator { seed: 1 }) {
            Err(Error::Unsupported(why)) => assert!(why.contains("AWQ weight `w`"), "{why}"),
            other => panic!("{target:?}: {other:?}"),
        }
    }
    // The workload quantises it and the reference evaluates it: finite outputs.
    let inputs = wavefuse_kernels::Workload::new(7).inputs(&kernel);
    let out = wavefuse::ir::reference::evaluate(&kernel, &inputs).expect("evaluates");
    let y = out[0].values().next().expect("one output");
    assert_eq!(y.data.len(), 64);
    assert!(y.data.iter().all(|v| v.is_finite()) && y.data.iter().any(|&v| v != 0.0));
}
