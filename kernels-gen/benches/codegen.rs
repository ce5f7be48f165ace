//! Code-generation speed of the kernel set on the CPU: build (DSL → IR), validate, lower, and
//! write HIP for gfx906 and CUDA for sm_90, per kernel at TP = 4. This is the part of the
//! autotuner's and the A/B loop's cost that wavefuse itself controls (the C++ compilers' time is in
//! the runtime's compile reports).
//!
//! Generated vs hand-written timing needs a GPU and lives in `wavefuse ab` (event-timed, rotating
//! inputs, copy bandwidth in the same run); this bench says so instead of timing anything there.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use wavefuse::ir::validate;
use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp;
use wavefuse_codegen::lower::{Schedule, lower};
use wavefuse_kernels::{KernelId, Shapes};

fn codegen(c: &mut Criterion) {
    let shapes = Shapes::qwen27b(4);
    for id in KernelId::ALL {
        for arch in Arch::ALL {
            c.bench_function(&format!("codegen/{}@{arch}_tp4", id.name()), |b| {
                b.iter(|| {
                    let ir = id.build(black_box(&shapes));
                    validate(&ir).expect("the set validates");
                    let lowered =
                        lower(&ir, arch, &Schedule::default_for(arch, &ir)).expect("lowers");
                    black_box(cpp::emit(&lowered).expect("writes"))
                })
            });
        }
    }
}

fn gpu_note(_: &mut Criterion) {
    eprintln!(
        "generated vs hand-written: skipped here (no GPU timing in cargo bench); run `wavefuse ab` \
         on a GPU machine for event-timed A/B with rotating inputs"
    );
}

criterion_group!(benches, codegen, gpu_note);
criterion_main!(benches);
