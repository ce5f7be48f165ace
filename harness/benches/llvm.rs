//! Compile time of the LLVM back end per kernel and target at TP = 4: lowered kernel → LLVM IR →
//! `default<O3>` → gfx906 code object or sm_90 PTX, all in process. hipcc's and NVRTC's times for
//! the same kernels are in `wavefuse llvm check` and `wavefuse llvm-diff` (a process, or a GPU
//! machine's NVRTC, does not belong in a criterion loop).

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use wavefuse_codegen::Arch;
use wavefuse_codegen::llvm;
use wavefuse_harness::KernelId;
use wavefuse_harness::generate::generate;

fn llvm_compile(c: &mut Criterion) {
    let mut g = c.benchmark_group("llvm");
    g.sample_size(10);
    for arch in Arch::ALL {
        for id in KernelId::ALL {
            let k = generate(id, arch, 4, 1)
                .expect("the set generates")
                .lowered
                .clone();
            g.bench_function(format!("{}@{arch}_tp4", id.name()), |b| {
                b.iter(|| black_box(llvm::compile(black_box(&k), false).expect("compiles")))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, llvm_compile);
criterion_main!(benches);
