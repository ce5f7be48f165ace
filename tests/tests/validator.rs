//! Validator tests on hand-built IR (DESIGN.md §5, §7; STYLE.md "Tests").
//!
//! Each `invalid_*` test builds a small kernel that is valid except for one mistake, checks that
//! [`validate`] rejects it with exactly the expected (nested) error and that the message names
//! what a user needs to find the mistake, and, as a control, that the same kernel without the
//! mistake validates, so the rule under test is what fails it. The `kernel_set_*` tests check
//! that every kernel of the set validates at every TP size and batch.

use wavefuse::ir::ops::{AllReduce, Compression, ReduceOp};
use wavefuse::ir::{
    AwqLayout, Buffer, BufferDecl, BufferError, BufferType, Builder, Dist, GptqLayout, GroupSize,
    IndexSpace, Kernel, KernelError, KernelInfo, MemorySpace, Op, OpError, OpKind, Parallelism,
    ScalarType, Sharding, Tensor, ValidationError, Value, Weight, WeightFormat, ZeroPoint,
    validate,
};
use wavefuse_kernels::{KernelId, Shapes};

/// Validates `kernel`, expects an error matching `pattern`, checks that its message contains every
/// word, and evaluates to the error.
macro_rules! assert_invalid {
    ($kernel:expr, $pattern:pat $(if $guard:expr)?, [$($word:expr),+ $(,)?]) => {{
        let kernel: &Kernel = &$kernel;
        let err = match validate(kernel) {
            Ok(_) => panic!("`{}` should be invalid, but it validates:\n{kernel}", kernel.name()),
            Err(err) => err,
        };
        assert!(
            matches!(&err, $pattern $(if $guard)?),
            "wrong error for kernel `{}`: {err:?}\n  message: {err}",
            kernel.name()
        );
        let message = err.to_string();
        let words: &[&str] = &[$($word),+];
        for word in words {
            assert!(message.contains(word), "the message does not mention {word:?}: {message}");
        }
        err
    }};
}

/// The control: the same kernel without the mistake validates.
fn assert_valid(kernel: &Kernel) -> KernelInfo {
    validate(kernel)
        .unwrap_or_else(|e| panic!("kernel `{}` should validate: {e}\n{kernel}", kernel.name()))
}

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

fn f16(batch: usize, features: usize) -> Tensor {
    Tensor::activation(ScalarType::F16, batch, features)
}

fn weight(format: WeightFormat, k: usize, n: usize) -> Weight {
    Weight { format, k, n }
}

fn tensor(dtype: ScalarType, shape: &[usize]) -> Tensor {
    Tensor {
        dtype,
        shape: shape.to_vec(),
    }
}

fn col(tp: u32) -> Sharding {
    Sharding::ColumnParallel { tp }
}

fn row(tp: u32) -> Sharding {
    Sharding::RowParallel { tp }
}

fn partial(tp: u32) -> Sharding {
    Sharding::Partial { tp }
}

fn gptq(group: GroupSize, zero: ZeroPoint) -> WeightFormat {
    WeightFormat::Gptq(GptqLayout::new(group, zero))
}

fn gptq128() -> WeightFormat {
    gptq(GroupSize::Rows(128), ZeroPoint::V2)
}

fn awq(group: GroupSize, scale: ScalarType) -> WeightFormat {
    WeightFormat::Awq(AwqLayout { group, scale })
}

/// The GEMV mode that fits a weight sharding.
fn mode_for(s: Sharding) -> Parallelism {
    match s {
        Sharding::RowParallel { .. } => Parallelism::Row,
        Sharding::ColumnParallel { .. } => Parallelism::Column,
        _ => Parallelism::Replicated,
    }
}

/// `y = round_f16(gemv(w, x))` (with an allreduce after a row-parallel GEMV), where w is declared
/// `[k, n]` in `index_space` with `sharding`, and x and y are shaped to fit. Only `w` can be wrong.
fn gemv_kernel(
    format: WeightFormat,
    k: usize,
    n: usize,
    sharding: Sharding,
    index_space: IndexSpace,
) -> Kernel {
    let tp = sharding.tp();
    let (mut k_local, mut n_local) = (k, n);
    if index_space == IndexSpace::Global {
        match sharding {
            Sharding::RowParallel { .. } => k_local /= tp as usize,
            Sharding::ColumnParallel { .. } => n_local /= tp as usize,
            _ => {}
        }
    }
    let mode = mode_for(sharding);
    let (x_sharding, y_sharding) = match mode {
        Parallelism::Row => (col(tp), Sharding::Replicated),
        Parallelism::Column => (Sharding::Replicated, col(tp)),
        Parallelism::Replicated => (Sharding::Replicated, Sharding::Replicated),
    };
    let mut b = Builder::new("gemv", tp);
    let decl = BufferDecl::input("w", weight(format, k, n), sharding);
    let w = b.param(decl.index_space(index_space));
    let x = b.input("x", f16(1, k_local), x_sharding);
    let y = b.output("y", f16(1, n_local), y_sharding);
    let xv = b.load(x);
    let mut acc = b.gemv(w, xv, mode);
    if mode == Parallelism::Row {
        acc = b.allreduce(acc);
    }
    let out = b.round_f16(acc);
    b.store(out, y);
    b.finish()
}

/// `gemv_kernel` with the shape given per rank.
fn local_gemv(format: WeightFormat, k: usize, n: usize, sharding: Sharding) -> Kernel {
    gemv_kernel(format, k, n, sharding, IndexSpace::Local)
}

/// `y = load x` (f16 `[1, 8]`), where `x` is declared by `decl`; `y` is replicated. Plus `extra`,
/// an unused input declared only to be checked.
fn copy_kernel(tp: u32, x: BufferDecl, extra: Option<BufferDecl>) -> Kernel {
    let mut b = Builder::new("copy", tp);
    let x = b.param(x);
    if let Some(extra) = extra {
        b.param(extra);
    }
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let v = b.load(x);
    b.store(v, y);
    b.finish()
}

fn x_decl() -> BufferDecl {
    BufferDecl::input("x", f16(1, 8), Sharding::Replicated)
}

/// A kernel with one replicated f16 output `y` of shape `[1, features]`; `body` declares the
/// inputs and builds the f16 value stored into `y`.
fn kernel_into_y(
    name: &str,
    tp: u32,
    features: usize,
    body: impl FnOnce(&mut Builder) -> Value,
) -> Kernel {
    let mut b = Builder::new(name, tp);
    let y = b.output("y", f16(1, features), Sharding::Replicated);
    let v = body(&mut b);
    b.store(v, y);
    b.finish()
}

/// The ops of a kernel that store into `buffer`, in program order.
fn stores_into(kernel: &Kernel, buffer: Buffer) -> Vec<Op> {
    kernel
        .ops()
        .filter(|(_, d)| matches!(&d.kind, OpKind::Store(s) if s.buffer == buffer))
        .map(|(op, _)| op)
        .collect()
}

/// `count` value handles from a throwaway kernel: handles that belong to no other kernel.
fn foreign_values(count: usize) -> Vec<Value> {
    let mut b = Builder::new("other", 1);
    let x = b.input("x", f16(1, 8), Sharding::Replicated);
    (0..count).map(|_| b.load(x)).collect()
}

/// `count` buffer handles from a throwaway kernel.
fn foreign_buffers(count: usize) -> Vec<Buffer> {
    let mut b = Builder::new("other", 1);
    (0..count)
        .map(|i| b.input(&format!("b{i}"), f16(1, 8), Sharding::Replicated))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Kernel-wide rules
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_empty_tp_group() {
    assert_invalid!(
        copy_kernel(0, x_decl(), None),
        ValidationError::Kernel { kernel, source: KernelError::EmptyTpGroup } if kernel == "copy",
        ["`copy`", "TP group", "at least 1"]
    );
    assert_valid(&copy_kernel(1, x_decl(), None));
}

#[test]
fn invalid_no_outputs() {
    let build = |with_output: bool| {
        let mut b = Builder::new("sink", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let v = b.load(x);
        if with_output {
            let y = b.output("y", f16(1, 8), Sharding::Replicated);
            b.store(v, y);
        }
        b.finish()
    };
    assert_invalid!(
        build(false),
        ValidationError::Kernel { kernel, source: KernelError::NoOutputs } if kernel == "sink",
        ["`sink`", "no outputs"]
    );
    assert_valid(&build(true));
    // Nothing at all is no better.
    assert_invalid!(
        Builder::new("empty", 1).finish(),
        ValidationError::Kernel {
            source: KernelError::NoOutputs,
            ..
        },
        ["`empty`", "no outputs"]
    );
}

#[test]
fn invalid_output_never_written() {
    let build = |store_both: bool| {
        let mut b = Builder::new("two_outputs", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let z = b.output("z", f16(1, 8), Sharding::Replicated);
        let v = b.load(x);
        b.store(v, y);
        if store_both {
            b.store(v, z);
        }
        (b.finish(), z)
    };
    let (kernel, z) = build(false);
    assert_invalid!(
        kernel,
        ValidationError::Kernel {
            source: KernelError::OutputNotWritten { buffer, name },
            ..
        } if *buffer == z && name == "z",
        ["`z`", "never written", "exactly once"]
    );
    assert_valid(&build(true).0);
}

// ---------------------------------------------------------------------------------------------
// Buffer declarations
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_duplicate_parameter_name() {
    let extra = |name: &str| Some(BufferDecl::input(name, f16(1, 8), Sharding::Replicated));
    let kernel = copy_kernel(1, x_decl(), extra("x"));
    let first = kernel.buffer_by_name("x").expect("declared");
    assert_invalid!(
        kernel,
        ValidationError::Buffer { buffer, name, source: BufferError::DuplicateName { first: f }, .. }
            if name == "x" && *f == first && *buffer != first,
        ["`x`", "duplicate parameter name", &first.to_string()]
    );
    assert_valid(&copy_kernel(1, x_decl(), extra("r")));
    // Inputs and outputs share one namespace.
    let mut b = Builder::new("same_name", 1);
    let x = b.input("y", f16(1, 8), Sharding::Replicated);
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let v = b.load(x);
    b.store(v, y);
    assert_invalid!(
        b.finish(),
        ValidationError::Buffer { buffer, source: BufferError::DuplicateName { .. }, .. }
            if *buffer == y,
        ["`y`", "duplicate"]
    );
}

/// DESIGN.md §5.2: registers and LDS never carry a value between workgroups, so no kernel
/// parameter lives there; peer memory belongs to the allreduce lowering.
#[test]
fn invalid_parameter_memory_space() {
    let cases = [
        (MemorySpace::Lds, "lds"),
        (MemorySpace::Register, "reg"),
        (MemorySpace::PeerGlobal, "peer"),
    ];
    for (space, word) in cases {
        assert_invalid!(
            copy_kernel(1, x_decl().space(space), None),
            ValidationError::Buffer { name, source: BufferError::MemorySpace { space: s }, .. }
                if name == "x" && *s == word,
            ["`x`", word, "§5.2", "global or host-visible"]
        );
        // An output is a parameter too.
        let mut b = Builder::new("out_space", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let y = b.param(BufferDecl::output("y", f16(1, 8), Sharding::Replicated).space(space));
        let v = b.load(x);
        b.store(v, y);
        assert_invalid!(
            b.finish(),
            ValidationError::Buffer { name, source: BufferError::MemorySpace { .. }, .. }
                if name == "y",
            ["`y`", word]
        );
    }
    for space in [MemorySpace::Global, MemorySpace::HostVisible] {
        assert_valid(&copy_kernel(1, x_decl().space(space), None));
    }
}

#[test]
fn invalid_zero_dimension() {
    let norm_w = |len| {
        Some(BufferDecl::input(
            "norm_w",
            Tensor::vector(ScalarType::F16, len),
            Sharding::Replicated,
        ))
    };
    assert_invalid!(
        copy_kernel(1, x_decl(), norm_w(0)),
        ValidationError::Buffer { name, source: BufferError::EmptyDim { axis: 0, .. }, .. }
            if name == "norm_w",
        ["`norm_w`", "the length is zero"]
    );
    assert_valid(&copy_kernel(1, x_decl(), norm_w(8)));
    let batch0 = Some(BufferDecl::input("r", f16(0, 8), Sharding::Replicated));
    assert_invalid!(
        copy_kernel(1, x_decl(), batch0),
        ValidationError::Buffer { name, source: BufferError::EmptyDim { axis: 0, .. }, .. }
            if name == "r",
        ["`r`", "zero"]
    );
    // A weight's N.
    assert_invalid!(
        local_gemv(WeightFormat::F16, 64, 0, Sharding::Replicated),
        ValidationError::Buffer { name, source: BufferError::EmptyDim { axis: 1, .. }, .. }
            if name == "w",
        ["`w`", "N is zero"]
    );
    // A weight's K, reported before the quantised layout (which K = 0 would trivially satisfy).
    assert_invalid!(
        local_gemv(gptq128(), 0, 64, Sharding::Replicated),
        ValidationError::Buffer { name, source: BufferError::EmptyDim { axis: 0, .. }, .. }
            if name == "w",
        ["`w`", "zero"]
    );
    assert_valid(&local_gemv(gptq128(), 128, 64, Sharding::Replicated));
}

#[test]
fn invalid_tensor_rank() {
    let extra = |shape: &[usize]| {
        Some(BufferDecl::input(
            "r",
            tensor(ScalarType::F16, shape),
            Sharding::Replicated,
        ))
    };
    assert_invalid!(
        copy_kernel(1, x_decl(), extra(&[2, 4, 8])),
        ValidationError::Buffer { name, source: BufferError::Rank { rank: 3 }, .. } if name == "r",
        ["`r`", "rank 3", "[batch, features]"]
    );
    assert_invalid!(
        copy_kernel(1, x_decl(), extra(&[])),
        ValidationError::Buffer { name, source: BufferError::Rank { rank: 0 }, .. } if name == "r",
        ["`r`", "rank 0"]
    );
    assert_valid(&copy_kernel(1, x_decl(), extra(&[4, 8])));
    assert_valid(&copy_kernel(1, x_decl(), extra(&[8])));
}

#[test]
fn invalid_buffer_tp_differs_from_kernel() {
    let build = |x_tp: u32| {
        let mut b = Builder::new("shard_copy", 4);
        let x = b.input("x", f16(1, 8), col(x_tp));
        let y = b.output("y", f16(1, 8), col(4));
        let v = b.load(x);
        b.store(v, y);
        b.finish()
    };
    assert_invalid!(
        build(2),
        ValidationError::Buffer {
            name,
            source: BufferError::TpMismatch { expected: 4, found: 2 },
            ..
        } if name == "x",
        ["`x`", "tp=2", "4 ranks"]
    );
    assert_valid(&build(4));
    // The same for a weight.
    let mut b = Builder::new("gemv", 2);
    let wb = b.input("w", weight(WeightFormat::F16, 64, 64), col(1));
    let x = b.input("x", f16(1, 64), Sharding::Replicated);
    let y = b.output("y", f16(1, 64), col(2));
    let xv = b.load(x);
    let acc = b.gemv(wb, xv, Parallelism::Column);
    let out = b.round_f16(acc);
    b.store(out, y);
    assert_invalid!(
        b.finish(),
        ValidationError::Buffer {
            name,
            source: BufferError::TpMismatch { expected: 2, found: 1 },
            ..
        }
            if name == "w",
        ["`w`", "tp=1"]
    );
}

#[test]
fn invalid_global_shard_not_divisible() {
    // A weight whose global N does not split over the group.
    let weight = |n| gemv_kernel(WeightFormat::F16, 64, n, col(8), IndexSpace::Global);
    assert_invalid!(
        weight(100),
        ValidationError::Buffer {
            name,
            source: BufferError::ShardNotDivisible { axis: "N", len: 100, tp: 8 },
            ..
        } if name == "w",
        ["`w`", "N has length 100", "tp=8"]
    );
    assert_valid(&weight(104));
    // A row-parallel weight's global K.
    let weight = |k| gemv_kernel(WeightFormat::F16, k, 64, row(4), IndexSpace::Global);
    assert_invalid!(
        weight(66),
        ValidationError::Buffer {
            source: BufferError::ShardNotDivisible {
                axis: "K",
                len: 66,
                tp: 4
            },
            ..
        },
        ["`w`", "K has length 66", "tp=4"]
    );
    assert_valid(&weight(64));
    // A column-sharded activation's global feature axis.
    let act = |features| {
        let mut b = Builder::new("shard_copy", 4);
        let x = b.param(
            BufferDecl::input("x", f16(1, features), col(4)).index_space(IndexSpace::Global),
        );
        let y = b.output("y", f16(1, features / 4), col(4));
        let v = b.load(x);
        b.store(v, y);
        b.finish()
    };
    assert_invalid!(
        act(10),
        ValidationError::Buffer {
            name,
            source: BufferError::ShardNotDivisible { len: 10, tp: 4, .. },
            ..
        } if name == "x",
        ["`x`", "10", "tp=4"]
    );
    assert_valid(&act(12));
}

#[test]
fn invalid_row_parallel_tensor() {
    let build = |x_sharding| {
        let mut b = Builder::new("shard_copy", 2);
        let x = b.input("x", f16(1, 8), x_sharding);
        let y = b.output("y", f16(1, 8), col(2));
        let v = b.load(x);
        b.store(v, y);
        b.finish()
    };
    assert_invalid!(
        build(row(2)),
        ValidationError::Buffer {
            name,
            source: BufferError::ShardingKind { sharding: Sharding::RowParallel { tp: 2 }, .. },
            ..
        } if name == "x",
        ["`x`", "row_parallel(tp=2)", "tensor", "col_parallel"]
    );
    assert_valid(&build(col(2)));
}

#[test]
fn invalid_partial_weight() {
    let build = |w_sharding| {
        let mut b = Builder::new("gemv", 2);
        let w = b.input("w", weight(WeightFormat::F16, 64, 32), w_sharding);
        let x = b.input("x", f16(1, 64), Sharding::Replicated);
        let y = b.output("y", f16(1, 32), col(2));
        let xv = b.load(x);
        let acc = b.gemv(w, xv, Parallelism::Column);
        let out = b.round_f16(acc);
        b.store(out, y);
        b.finish()
    };
    assert_invalid!(
        build(partial(2)),
        ValidationError::Buffer {
            name,
            source: BufferError::ShardingKind { sharding: Sharding::Partial { tp: 2 }, .. },
            ..
        } if name == "w",
        ["`w`", "partial(tp=2)", "weight"]
    );
    assert_valid(&build(col(2)));
}

// DESIGN.md §2: qweight is i32 [K/8, N], packed along K.
#[test]
fn invalid_gptq_k_not_multiple_of_8() {
    let build = |k| {
        local_gemv(
            gptq(GroupSize::PerChannel, ZeroPoint::Symmetric),
            k,
            64,
            Sharding::Replicated,
        )
    };
    assert_invalid!(
        build(132),
        ValidationError::Buffer { name, source: BufferError::Packing(msg), .. }
            if name == "w" && msg.contains("8 rows of K"),
        ["`w`", "K = 132", "multiple of 8"]
    );
    assert_valid(&build(136));
}

// DESIGN.md §2: qzeros is i32 [K/G, N/8], packed along N; symmetric weights have none.
#[test]
fn invalid_gptq_qzeros_n_not_multiple_of_8() {
    for zero in [ZeroPoint::V1, ZeroPoint::V2] {
        assert_invalid!(
            local_gemv(gptq(GroupSize::Rows(128), zero), 256, 100, Sharding::Replicated),
            ValidationError::Buffer { name, source: BufferError::Packing(msg), .. }
                if name == "w" && msg.contains("qzeros"),
            ["`w`", "qzeros", "N = 100"]
        );
        assert_valid(&local_gemv(
            gptq(GroupSize::Rows(128), zero),
            256,
            104,
            Sharding::Replicated,
        ));
    }
    // The same N is fine without zero points.
    assert_valid(&local_gemv(
        gptq(GroupSize::Rows(128), ZeroPoint::Symmetric),
        256,
        100,
        Sharding::Replicated,
    ));
    // N is the per-rank N: 2 × 100 split over 2 ranks leaves 100 columns per rank.
    assert_invalid!(
        gemv_kernel(gptq128(), 256, 200, col(2), IndexSpace::Global),
        ValidationError::Buffer {
            source: BufferError::Packing(_),
            ..
        },
        ["`w`", "per-rank N = 100"]
    );
}

#[test]
fn invalid_awq_n_not_multiple_of_8() {
    let build = |n| {
        local_gemv(
            awq(GroupSize::Rows(128), ScalarType::F16),
            256,
            n,
            Sharding::Replicated,
        )
    };
    assert_invalid!(
        build(100),
        ValidationError::Buffer { name, source: BufferError::Packing(msg), .. }
            if name == "w" && msg.contains("AWQ"),
        ["`w`", "AWQ", "N = 100", "multiple of 8"]
    );
    assert_valid(&build(104));
    // AWQ packs along N, so K needs no multiple of 8.
    assert_valid(&local_gemv(
        awq(GroupSize::PerChannel, ScalarType::F16),
        100,
        64,
        Sharding::Replicated,
    ));
}

// DESIGN.md §2: g_idx is either supported or rejected with a clear error, never ignored.
#[test]
fn invalid_act_order_row_parallel() {
    let act_order = WeightFormat::Gptq(GptqLayout {
        act_order: true,
        ..GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V2)
    });
    assert_invalid!(
        local_gemv(act_order, 256, 64, row(2)),
        ValidationError::Buffer { name, source: BufferError::Packing(msg), .. }
            if name == "w" && msg.contains("act-order"),
        ["`w`", "act-order", "g_idx", "split along K"]
    );
    assert_valid(&local_gemv(act_order, 256, 64, col(2)));
    assert_valid(&local_gemv(gptq128(), 256, 64, row(2)));
}

#[test]
fn invalid_group_size_not_dividing_k() {
    let build = |group| local_gemv(gptq(GroupSize::Rows(group), ZeroPoint::V2), 192, 64, col(2));
    let err = assert_invalid!(
        build(128),
        ValidationError::Buffer {
            name,
            source: BufferError::GroupSize { group: 128, k: 192, hint: "" },
            ..
        } if name == "w",
        ["`w`", "group size 128", "K = 192"]
    );
    assert!(
        !err.to_string().contains("K-shard"),
        "no row-parallel hint for a column-parallel weight: {err}"
    );
    assert_valid(&build(64));
    // A zero group size divides nothing.
    assert_invalid!(
        build(0),
        ValidationError::Buffer {
            source: BufferError::GroupSize { group: 0, .. },
            ..
        },
        ["`w`", "must be positive"]
    );
}

/// Row-parallel: each rank's K-shard must hold whole groups; 512 rows over 8 ranks leaves 64.
#[test]
fn invalid_group_size_row_parallel_shard() {
    let build = |tp| gemv_kernel(gptq128(), 512, 64, row(tp), IndexSpace::Global);
    assert_invalid!(
        build(8),
        ValidationError::Buffer {
            name,
            source: BufferError::GroupSize { group: 128, k: 64, hint },
            ..
        } if name == "w" && !hint.is_empty(),
        ["`w`", "group size 128", "per-rank K = 64", "K-shard", "group boundary"]
    );
    assert_valid(&build(4));
}

#[test]
fn invalid_scale_type() {
    let gptq_scale = |scale| {
        WeightFormat::Gptq(GptqLayout {
            scale,
            ..GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V2)
        })
    };
    for scale in [ScalarType::I32, ScalarType::I8, ScalarType::U32] {
        assert_invalid!(
            local_gemv(gptq_scale(scale), 256, 64, Sharding::Replicated),
            ValidationError::Buffer { name, source: BufferError::ScaleType(s), .. }
                if name == "w" && *s == scale,
            ["`w`", "scales", scale.name()]
        );
        assert_invalid!(
            local_gemv(
                awq(GroupSize::Rows(128), scale),
                256,
                64,
                Sharding::Replicated
            ),
            ValidationError::Buffer {
                source: BufferError::ScaleType(_),
                ..
            },
            ["`w`", "f16, bf16 or f32"]
        );
    }
    for scale in [ScalarType::F16, ScalarType::Bf16, ScalarType::F32] {
        assert_valid(&local_gemv(
            gptq_scale(scale),
            256,
            64,
            Sharding::Replicated,
        ));
        assert_valid(&local_gemv(
            awq(GroupSize::Rows(128), scale),
            256,
            64,
            Sharding::Replicated,
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_value_from_another_kernel() {
    let foreign = *foreign_values(5).last().expect("five values");
    let build = |use_foreign: bool| {
        let mut b = Builder::new("copy", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let v = b.load(x);
        b.store(if use_foreign { foreign } else { v }, y);
        b.finish()
    };
    assert_invalid!(
        build(true),
        ValidationError::Op { mnemonic: "store", source: OpError::UndefinedValue(v), .. }
            if *v == foreign,
        [&foreign.to_string(), "not defined in this kernel"]
    );
    assert_valid(&build(false));
}

#[test]
fn invalid_use_before_def() {
    // A handle to v1 taken from another kernel. Here v1 is the add's own result: an op that reads
    // the value it defines.
    let later = foreign_values(2)[1];
    let build = |mistake: bool| {
        let mut b = Builder::new("reorder", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let v0 = b.load(x);
        // With the mistake the add reads its own result, v1.
        let v1 = b.add(if mistake { later } else { v0 }, v0);
        let out = b.round_f16(v1);
        b.store(out, y);
        b.finish()
    };
    assert_invalid!(
        build(true),
        ValidationError::Op { mnemonic: "add", source: OpError::UseBeforeDef(v), .. }
            if *v == later,
        [&later.to_string(), "used before it is defined"]
    );
    assert_valid(&build(false));
    // A read of a value that a later op defines.
    let mut b = Builder::new("forward", 1);
    let x = b.input("x", f16(1, 8), Sharding::Replicated);
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let v0 = b.round_f16(later); // reads v1, defined by op1
    let _v1 = b.load(x);
    b.store(v0, y);
    let kernel = b.finish();
    let err = assert_invalid!(
        kernel,
        ValidationError::Op { mnemonic: "round_f16", source: OpError::UseBeforeDef(v), .. }
            if *v == later,
        ["op0", "used before it is defined"]
    );
    let ValidationError::Op { op, .. } = err else {
        unreachable!()
    };
    assert_eq!(
        kernel.ops().next().map(|(o, _)| o),
        Some(op),
        "the error names the reading op"
    );
}

#[test]
fn invalid_buffer_from_another_kernel() {
    let foreign = *foreign_buffers(5).last().expect("five buffers");
    let build = |use_foreign: bool| {
        let mut b = Builder::new("gemv", 1);
        let x = b.input("x", f16(1, 64), Sharding::Replicated);
        let y = b.output("y", f16(1, 32), Sharding::Replicated);
        let own = b.input("w", weight(WeightFormat::F16, 64, 32), Sharding::Replicated);
        let xv = b.load(x);
        let acc = b.gemv(
            if use_foreign { foreign } else { own },
            xv,
            Parallelism::Replicated,
        );
        let out = b.round_f16(acc);
        b.store(out, y);
        b.finish()
    };
    assert_invalid!(
        build(true),
        ValidationError::Op { mnemonic: "gemv.rep", source: OpError::UndefinedBuffer(buf), .. }
            if *buf == foreign,
        [&foreign.to_string(), "not defined in this kernel"]
    );
    assert_valid(&build(false));
    // Loads and stores check their buffer too.
    let mut b = Builder::new("copy", 1);
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let v = b.load(foreign);
    b.store(v, y);
    assert_invalid!(
        b.finish(),
        ValidationError::Op {
            mnemonic: "load",
            source: OpError::UndefinedBuffer(_),
            ..
        },
        ["not defined"]
    );
    let mut b = Builder::new("copy", 1);
    let x = b.input("x", f16(1, 8), Sharding::Replicated);
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let v = b.load(x);
    b.store(v, y);
    b.store(v, foreign);
    assert_invalid!(
        b.finish(),
        ValidationError::Op {
            mnemonic: "store",
            source: OpError::UndefinedBuffer(_),
            ..
        },
        ["not defined"]
    );
}

// ---------------------------------------------------------------------------------------------
// GEMV
// ---------------------------------------------------------------------------------------------

/// `y = round_f16(gemv.MODE(w, x))` with free choice of every part, for the GEMV rules.
struct GemvCase {
    tp: u32,
    w: BufferType,
    w_sharding: Sharding,
    x: Tensor,
    x_sharding: Sharding,
    mode: Parallelism,
    y: Tensor,
    y_sharding: Sharding,
}

impl GemvCase {
    /// A valid column-parallel INT4 GEMV at tp = 2: w [256, 2 × 64], x [1, 256].
    fn col() -> Self {
        GemvCase {
            tp: 2,
            w: weight(gptq128(), 256, 64).into(),
            w_sharding: col(2),
            x: f16(1, 256),
            x_sharding: Sharding::Replicated,
            mode: Parallelism::Column,
            y: f16(1, 64),
            y_sharding: col(2),
        }
    }

    /// A valid row-parallel INT4 GEMV at tp = 2 (w [2 × 128, 64], x [1, 128] sharded), with an
    /// allreduce and a replicated output.
    fn row() -> Self {
        GemvCase {
            tp: 2,
            w: weight(gptq128(), 128, 64).into(),
            w_sharding: row(2),
            x: f16(1, 128),
            x_sharding: col(2),
            mode: Parallelism::Row,
            y: f16(1, 64),
            y_sharding: Sharding::Replicated,
        }
    }

    fn build(self) -> Kernel {
        let mut b = Builder::new("gemv", self.tp);
        let w = b.input("w", self.w, self.w_sharding);
        let x = b.input("x", self.x, self.x_sharding);
        let y = b.output("y", self.y, self.y_sharding);
        let xv = b.load(x);
        let mut acc = b.gemv(w, xv, self.mode);
        if self.mode == Parallelism::Row {
            acc = b.allreduce(acc);
        }
        let out = b.round_f16(acc);
        b.store(out, y);
        b.finish()
    }
}

#[test]
fn gemv_controls_validate() {
    assert_valid(&GemvCase::col().build());
    assert_valid(&GemvCase::row().build());
}

#[test]
fn invalid_gemv_x_not_f16() {
    for dtype in [ScalarType::F32, ScalarType::Bf16] {
        let case = GemvCase {
            x: tensor(dtype, &[1, 256]),
            ..GemvCase::col()
        };
        assert_invalid!(
            case.build(),
            ValidationError::Op {
                mnemonic: "gemv.col",
                source: OpError::Dtype { operand: "x", found, .. },
                ..
            } if *found == dtype,
            ["x", "expected f16", dtype.name(), "round_f16"]
        );
    }
    // An unrounded GEMV result fed straight into the next GEMV.
    let build = |round: bool| {
        let mut b = Builder::new("two_gemvs", 1);
        let w1 = b.input(
            "w1",
            weight(WeightFormat::F16, 64, 64),
            Sharding::Replicated,
        );
        let w2 = b.input(
            "w2",
            weight(WeightFormat::F16, 64, 32),
            Sharding::Replicated,
        );
        let x = b.input("x", f16(1, 64), Sharding::Replicated);
        let y = b.output("y", f16(1, 32), Sharding::Replicated);
        let xv = b.load(x);
        let h = b.gemv(w1, xv, Parallelism::Replicated);
        let h = if round { b.round_f16(h) } else { h };
        let acc = b.gemv(w2, h, Parallelism::Replicated);
        let out = b.round_f16(acc);
        b.store(out, y);
        b.finish()
    };
    assert_invalid!(
        build(false),
        ValidationError::Op {
            source: OpError::Dtype {
                operand: "x",
                found: ScalarType::F32,
                ..
            },
            ..
        },
        ["round_f16"]
    );
    assert_valid(&build(true));
}

#[test]
fn invalid_gemv_x_shape_mismatch() {
    let case = GemvCase {
        x: f16(1, 128),
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            mnemonic: "gemv.col",
            source: OpError::Shape { operand: "x", expected, found },
            ..
        } if *expected == [1, 256] && *found == [1, 128],
        ["x", "[1, 256]", "[1, 128]"]
    );
    // A row-parallel GEMV reads the K-shard: the global K is wrong there.
    let case = GemvCase {
        x: f16(1, 256),
        ..GemvCase::row()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op { source: OpError::Shape { operand: "x", expected, .. }, .. }
            if *expected == [1, 128],
        ["[1, 128]", "[1, 256]"]
    );
    // A one-dimensional x.
    let case = GemvCase {
        x: Tensor::vector(ScalarType::F16, 256),
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op { source: OpError::Shape { operand: "x", found, .. }, .. }
            if *found == [256],
        ["x", "[256]"]
    );
}

// DESIGN.md §5.6: sharding is part of the weight's type.
#[test]
fn invalid_gemv_row_with_col_parallel_weight() {
    let case = GemvCase {
        w_sharding: col(2),
        ..GemvCase::row()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            mnemonic: "gemv.row",
            source: OpError::WeightSharding {
                parallel: "row",
                name,
                found: Sharding::ColumnParallel { tp: 2 },
                ..
            },
            ..
        } if name == "w",
        ["gemv.row", "row_parallel", "`w`", "col_parallel(tp=2)"]
    );
}

#[test]
fn invalid_gemv_col_with_row_parallel_weight() {
    let case = GemvCase {
        w_sharding: row(2),
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            mnemonic: "gemv.col",
            source: OpError::WeightSharding {
                parallel: "col",
                name,
                found: Sharding::RowParallel { tp: 2 },
                ..
            },
            ..
        } if name == "w",
        ["gemv.col", "col_parallel weight", "`w`", "row_parallel(tp=2)"]
    );
    // A replicated weight is not column-parallel either, and gemv.rep does not take a sharded one.
    let case = GemvCase {
        w_sharding: Sharding::Replicated,
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            source: OpError::WeightSharding {
                found: Sharding::Replicated,
                ..
            },
            ..
        },
        ["`w`", "replicated"]
    );
    let case = GemvCase {
        mode: Parallelism::Replicated,
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            mnemonic: "gemv.rep",
            source: OpError::WeightSharding {
                parallel: "rep",
                ..
            },
            ..
        },
        ["gemv.rep", "`w`", "col_parallel(tp=2)"]
    );
}

#[test]
fn invalid_gemv_row_with_replicated_x() {
    let case = GemvCase {
        x_sharding: Sharding::Replicated,
        ..GemvCase::row()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            mnemonic: "gemv.row",
            source: OpError::Dist {
                operand: "x",
                expected: "sharded",
                found: Dist::Replicated,
                ..
            },
            ..
        },
        ["x", "sharded", "replicated", "K-shard"]
    );
    // And gemv.col reads the whole, replicated x.
    let case = GemvCase {
        x_sharding: col(2),
        x: f16(1, 256),
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op {
            mnemonic: "gemv.col",
            source: OpError::Dist {
                operand: "x",
                found: Dist::Sharded,
                ..
            },
            ..
        },
        ["replicated", "sharded"]
    );
}

#[test]
fn invalid_gemv_on_tensor() {
    let case = GemvCase {
        w: f16(256, 64).into(),
        w_sharding: Sharding::Replicated,
        mode: Parallelism::Replicated,
        y_sharding: Sharding::Replicated,
        ..GemvCase::col()
    };
    assert_invalid!(
        case.build(),
        ValidationError::Op { mnemonic: "gemv.rep", source: OpError::NotAWeight { name }, .. }
            if name == "w",
        ["`w`", "not a weight"]
    );
    let case = GemvCase {
        w_sharding: Sharding::Replicated,
        mode: Parallelism::Replicated,
        y_sharding: Sharding::Replicated,
        ..GemvCase::col()
    };
    assert_valid(&case.build());
}

// ---------------------------------------------------------------------------------------------
// Loads and stores (DESIGN.md §5.7)
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_load_of_weight() {
    let build = |load_weight: bool| {
        let mut b = Builder::new("peek", 1);
        let w = b.input("w", weight(WeightFormat::F16, 8, 8), Sharding::Replicated);
        let x = b.input("x", f16(8, 8), Sharding::Replicated);
        let y = b.output("y", f16(8, 8), Sharding::Replicated);
        let v = b.load(if load_weight { w } else { x });
        b.store(v, y);
        b.finish()
    };
    assert_invalid!(
        build(true),
        ValidationError::Op { mnemonic: "load", source: OpError::WeightLoaded { name }, .. }
            if name == "w",
        ["`w`", "weight matrix", "only gemv"]
    );
    assert_valid(&build(false));
}

#[test]
fn invalid_store_into_input() {
    let build = |into_input: bool| {
        let mut b = Builder::new("overwrite", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let r = b.input("r", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let v = b.load(x);
        b.store(v, y);
        if into_input {
            b.store(v, r);
        }
        b.finish()
    };
    assert_invalid!(
        build(true),
        ValidationError::Op { mnemonic: "store", source: OpError::WriteInput { name }, .. }
            if name == "r",
        ["`r`", "input", "never writes its inputs"]
    );
    assert_valid(&build(false));
}

/// DESIGN.md §5.7: another workgroup or rank may still be writing an output during the launch.
#[test]
fn invalid_load_of_output() {
    let build = |read_back: bool| {
        let mut b = Builder::new("read_back", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let z = b.output("z", f16(1, 8), Sharding::Replicated);
        let v = b.load(x);
        b.store(v, y);
        let again = if read_back { b.load(y) } else { v };
        let doubled = b.add(again, again);
        let out = b.round_f16(doubled);
        b.store(out, z);
        b.finish()
    };
    assert_invalid!(
        build(true),
        ValidationError::Op { mnemonic: "load", source: OpError::ReadOutput { name }, .. }
            if name == "y",
        ["`y`", "output of this launch", "§5.7", "value that was stored"]
    );
    assert_valid(&build(false));
}

#[test]
fn invalid_second_store_into_output() {
    let build = |twice: bool| {
        let mut b = Builder::new("double_write", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let v = b.load(x);
        b.store(v, y);
        if twice {
            let s = b.add(v, v);
            let s16 = b.round_f16(s);
            b.store(s16, y);
        }
        (b.finish(), y)
    };
    let (kernel, y) = build(true);
    let stores = stores_into(&kernel, y);
    assert_eq!(stores.len(), 2);
    assert_invalid!(
        kernel,
        ValidationError::Op {
            op,
            mnemonic: "store",
            source: OpError::SecondWrite { name, first },
            ..
        } if name == "y" && *first == stores[0] && *op == stores[1],
        ["`y`", &stores[0].to_string(), &stores[1].to_string(), "exactly one producer"]
    );
    assert_valid(&build(false).0);
}

/// DESIGN.md §2: an FP16 write is a rounding point and must be visible in the IR.
#[test]
fn invalid_store_f32_into_f16() {
    let build = |round: bool| {
        let mut b = Builder::new("sum", 1);
        let x = b.input("x", f16(1, 8), Sharding::Replicated);
        let r = b.input("r", f16(1, 8), Sharding::Replicated);
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let (xv, rv) = (b.load(x), b.load(r));
        let s = b.add(xv, rv);
        let s = if round { b.round_f16(s) } else { s };
        b.store(s, y);
        b.finish()
    };
    assert_invalid!(
        build(false),
        ValidationError::Op {
            mnemonic: "store",
            source: OpError::StoreType { name, expected: ScalarType::F16, found: ScalarType::F32 },
            ..
        } if name == "y",
        ["`y`", "f32", "f16", "round_f16"]
    );
    assert_valid(&build(true));
    // An f16 value into an f32 buffer: also a type error, and no rounding advice.
    let mut b = Builder::new("widen", 1);
    let x = b.input("x", f16(1, 8), Sharding::Replicated);
    let y = b.output("y", tensor(ScalarType::F32, &[1, 8]), Sharding::Replicated);
    let v = b.load(x);
    b.store(v, y);
    let err = assert_invalid!(
        b.finish(),
        ValidationError::Op {
            source: OpError::StoreType {
                expected: ScalarType::F32,
                found: ScalarType::F16,
                ..
            },
            ..
        },
        ["`y`"]
    );
    assert!(!err.to_string().contains("round_f16"), "{err}");
}

#[test]
fn invalid_store_shape_mismatch() {
    let build = |features| {
        let mut b = Builder::new("copy", 1);
        let x = b.input("x", f16(2, features), Sharding::Replicated);
        let y = b.output("y", f16(2, 8), Sharding::Replicated);
        let v = b.load(x);
        b.store(v, y);
        b.finish()
    };
    assert_invalid!(
        build(16),
        ValidationError::Op {
            mnemonic: "store",
            source: OpError::Shape { operand: "stored value", expected, found },
            ..
        } if *expected == [2, 8] && *found == [2, 16],
        ["stored value", "[2, 8]", "[2, 16]"]
    );
    assert_valid(&build(8));
}

#[test]
fn invalid_store_partial_into_replicated() {
    let build = |reduce: bool| {
        let mut b = Builder::new("publish", 2);
        let p = b.input("p", f16(1, 8), partial(2));
        let y = b.output("y", f16(1, 8), Sharding::Replicated);
        let v = b.load(p);
        let v = if reduce {
            let s = b.allreduce(v);
            b.round_f16(s)
        } else {
            v
        };
        b.store(v, y);
        b.finish()
    };
    assert_invalid!(
        build(false),
        ValidationError::Op {
            mnemonic: "store",
            source: OpError::Dist {
                operand: "stored value",
                expected: "replicated",
                found: Dist::Partial,
                ..
            },
            ..
        },
        ["stored value", "replicated", "partial", "allreduce"]
    );
    assert_valid(&build(true));
    // A sharded value into a replicated output.
    let mut b = Builder::new("gather", 2);
    let x = b.input("x", f16(1, 8), col(2));
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let v = b.load(x);
    b.store(v, y);
    assert_invalid!(
        b.finish(),
        ValidationError::Op {
            source: OpError::Dist {
                found: Dist::Sharded,
                ..
            },
            ..
        },
        ["replicated", "sharded"]
    );
}

/// A weight can be declared as an output, but no op can produce one.
#[test]
fn invalid_store_into_weight() {
    let mut b = Builder::new("write_weight", 1);
    let x = b.input("x", f16(8, 8), Sharding::Replicated);
    let w = b.output("w", weight(WeightFormat::F16, 8, 8), Sharding::Replicated);
    let v = b.load(x);
    b.store(v, w);
    assert_invalid!(
        b.finish(),
        ValidationError::Buffer { name, source: BufferError::WeightOutput, .. }
            if name == "w",
        ["`w`", "weight matrix cannot be an output"]
    );
}

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_add_shape_mismatch() {
    let build = |r_features| {
        kernel_into_y("residual_add", 1, 8, |b| {
            let x = b.input("x", f16(1, 8), Sharding::Replicated);
            let r = b.input("r", f16(1, r_features), Sharding::Replicated);
            let (xv, rv) = (b.load(x), b.load(r));
            let s = b.add(xv, rv);
            b.round_f16(s)
        })
    };
    assert_invalid!(
        build(16),
        ValidationError::Op {
            mnemonic: "add",
            source: OpError::Shape { operand: "rhs", expected, found },
            ..
        } if *expected == [1, 8] && *found == [1, 16],
        ["rhs", "[1, 8]", "[1, 16]"]
    );
    assert_valid(&build(8));
}

#[test]
fn invalid_add_partial_plus_replicated() {
    let build = |reduce: bool| {
        kernel_into_y("residual_add", 2, 8, |b| {
            let p = b.input("p", f16(1, 8), partial(2));
            let r = b.input("r", f16(1, 8), Sharding::Replicated);
            let pv = b.load(p);
            let pv = if reduce { b.allreduce(pv) } else { pv };
            let rv = b.load(r);
            let s = b.add(pv, rv);
            b.round_f16(s)
        })
    };
    assert_invalid!(
        build(false),
        ValidationError::Op {
            mnemonic: "add",
            source: OpError::Dist {
                operand: "rhs",
                expected: "partial",
                found: Dist::Replicated,
                ..
            },
            ..
        },
        ["rhs", "partial", "replicated", "distributed the same way"]
    );
    assert_valid(&build(true));
    // partial + partial is still a partial sum.
    let mut b = Builder::new("partials", 2);
    let p = b.input("p", f16(1, 8), partial(2));
    let q = b.input("q", f16(1, 8), partial(2));
    let y = b.output("y", f16(1, 8), partial(2));
    let (pv, qv) = (b.load(p), b.load(q));
    let s = b.add(pv, qv);
    let s16 = b.round_f16(s);
    b.store(s16, y);
    assert_valid(&b.finish());
}

#[test]
fn invalid_mul_of_partials() {
    let build = |reduce: bool| {
        kernel_into_y("gate", 2, 8, |b| {
            let p = b.input("p", f16(1, 8), partial(2));
            let q = b.input("q", f16(1, 8), partial(2));
            let (mut pv, mut qv) = (b.load(p), b.load(q));
            if reduce {
                pv = b.allreduce(pv);
                qv = b.allreduce(qv);
            }
            let m = b.mul(pv, qv);
            b.round_f16(m)
        })
    };
    assert_invalid!(
        build(false),
        ValidationError::Op {
            mnemonic: "mul",
            source: OpError::Dist {
                found: Dist::Partial,
                ..
            },
            ..
        },
        ["partial", "product involving partial sums"]
    );
    assert_valid(&build(true));
}

#[test]
fn invalid_binary_non_float() {
    let build = |quantise: bool| {
        kernel_into_y("int_add", 1, 8, |b| {
            let x = b.input("x", f16(1, 8), Sharding::Replicated);
            let xv = b.load(x);
            let a = if quantise {
                b.quantize_int8(xv, 8).0
            } else {
                xv
            };
            let s = b.add(a, xv);
            b.round_f16(s)
        })
    };
    assert_invalid!(
        build(true),
        ValidationError::Op {
            mnemonic: "add",
            source: OpError::Dtype {
                operand: "lhs",
                found: ScalarType::I8,
                ..
            },
            ..
        },
        ["lhs", "float", "i8"]
    );
    assert_valid(&build(false));
}

#[test]
fn invalid_silu_of_partial() {
    let build = |reduce: bool| {
        kernel_into_y("act", 2, 8, |b| {
            let p = b.input("p", f16(1, 8), partial(2));
            let pv = b.load(p);
            let pv = if reduce { b.allreduce(pv) } else { pv };
            let a = b.silu(pv);
            b.round_f16(a)
        })
    };
    assert_invalid!(
        build(false),
        ValidationError::Op {
            mnemonic: "silu",
            source: OpError::Dist {
                operand: "x",
                found: Dist::Partial,
                ..
            },
            ..
        },
        ["x", "partial", "nonlinear", "allreduce first"]
    );
    assert_valid(&build(true));
}

#[test]
fn invalid_round_f16_of_f16() {
    let build = |twice: bool| {
        kernel_into_y("double_round", 1, 8, |b| {
            let x = b.input("x", f16(1, 8), Sharding::Replicated);
            let xv = b.load(x);
            let s = b.add(xv, xv);
            let r = b.round_f16(s);
            if twice { b.round_f16(r) } else { r }
        })
    };
    assert_invalid!(
        build(true),
        ValidationError::Op {
            mnemonic: "round_f16",
            source: OpError::Dtype {
                operand: "x",
                found: ScalarType::F16,
                ..
            },
            ..
        },
        ["expected f32", "found f16", "unrounded"]
    );
    assert_valid(&build(false));
}

#[test]
fn invalid_slice_range() {
    let build = |start, len| {
        kernel_into_y("split", 1, 4, |b| {
            let x = b.input("x", f16(1, 8), Sharding::Replicated);
            let xv = b.load(x);
            b.slice(xv, start, len)
        })
    };
    for (start, len) in [(6, 4), (8, 4), (usize::MAX, 4)] {
        assert_invalid!(
            build(start, len),
            ValidationError::Op {
                mnemonic: "slice",
                source: OpError::Attribute { operand: "range", what },
                ..
            } if what.contains(&start.to_string()),
            ["range", "8 features"]
        );
    }
    assert_valid(&build(4, 4));
    assert_valid(&build(0, 4));
}

#[test]
fn invalid_slice_empty() {
    // The slice is unused, so an empty result trips nothing but the slice rule.
    let build = |len| {
        kernel_into_y("split", 1, 8, |b| {
            let x = b.input("x", f16(1, 8), Sharding::Replicated);
            let xv = b.load(x);
            b.slice(xv, 2, len);
            xv
        })
    };
    assert_invalid!(
        build(0),
        ValidationError::Op {
            mnemonic: "slice",
            source: OpError::Attribute {
                operand: "range",
                ..
            },
            ..
        },
        ["0 column(s) from column 2", "non-empty"]
    );
    assert_valid(&build(1));
}

// ---------------------------------------------------------------------------------------------
// RMSNorm and reductions
// ---------------------------------------------------------------------------------------------

/// `y = round_f16(rmsnorm(load x, load w, eps))`, `x` `[1, 8]`.
fn rmsnorm_kernel(tp: u32, x: Sharding, w: Tensor, eps: f64) -> Kernel {
    kernel_into_y("norm", tp, 8, |b| {
        let xb = b.input("x", f16(1, 8), x);
        let wb = b.input("norm_w", w, Sharding::Replicated);
        let (xv, wv) = (b.load(xb), b.load(wb));
        let n = b.rmsnorm(xv, wv, eps);
        b.round_f16(n)
    })
}

fn norm_w(len: usize) -> Tensor {
    Tensor::vector(ScalarType::F16, len)
}

#[test]
fn rmsnorm_control_validates() {
    assert_valid(&rmsnorm_kernel(2, Sharding::Replicated, norm_w(8), 1e-6));
}

#[test]
fn invalid_rmsnorm_of_partial() {
    assert_invalid!(
        rmsnorm_kernel(2, partial(2), norm_w(8), 1e-6),
        ValidationError::Op {
            mnemonic: "rmsnorm",
            source: OpError::Dist {
                operand: "x",
                expected: "replicated",
                found: Dist::Partial,
                ..
            },
            ..
        },
        ["x", "partial", "allreduce the partial sums"]
    );
    // The fix the message suggests.
    let fixed = kernel_into_y("norm", 2, 8, |b| {
        let p = b.input("x", f16(1, 8), partial(2));
        let wb = b.input("norm_w", norm_w(8), Sharding::Replicated);
        let pv = b.load(p);
        let s = b.allreduce(pv);
        let wv = b.load(wb);
        let n = b.rmsnorm(s, wv, 1e-6);
        b.round_f16(n)
    });
    assert_valid(&fixed);
}

#[test]
fn invalid_rmsnorm_of_sharded() {
    let kernel = kernel_into_y("norm", 2, 8, |b| {
        let xb = b.input("x", f16(1, 8), col(2));
        let wb = b.input("norm_w", norm_w(8), Sharding::Replicated);
        let (xv, wv) = (b.load(xb), b.load(wb));
        let n = b.rmsnorm(xv, wv, 1e-6);
        b.round_f16(n)
    });
    assert_invalid!(
        kernel,
        ValidationError::Op {
            mnemonic: "rmsnorm",
            source: OpError::Dist {
                operand: "x",
                found: Dist::Sharded,
                ..
            },
            ..
        },
        ["sharded", "wrong vector"]
    );
}

#[test]
fn invalid_rmsnorm_weight_shape() {
    for shape in [&[9][..], &[1, 8], &[4]] {
        assert_invalid!(
            rmsnorm_kernel(1, Sharding::Replicated, tensor(ScalarType::F16, shape), 1e-6),
            ValidationError::Op {
                mnemonic: "rmsnorm",
                source: OpError::Shape { operand: "weight", expected, found },
                ..
            } if *expected == [8] && found == shape,
            ["weight", "[8]"]
        );
    }
}

#[test]
fn invalid_rmsnorm_weight_not_f16() {
    for dtype in [ScalarType::F32, ScalarType::Bf16] {
        assert_invalid!(
            rmsnorm_kernel(1, Sharding::Replicated, tensor(dtype, &[8]), 1e-6),
            ValidationError::Op {
                mnemonic: "rmsnorm",
                source: OpError::Dtype { operand: "weight", found, .. },
                ..
            } if *found == dtype,
            ["weight", "f16", dtype.name()]
        );
    }
}

#[test]
fn invalid_rmsnorm_weight_not_replicated() {
    let kernel = kernel_into_y("norm", 2, 8, |b| {
        let xb = b.input("x", f16(1, 8), Sharding::Replicated);
        let wb = b.input("norm_w", norm_w(8), col(2));
        let (xv, wv) = (b.load(xb), b.load(wb));
        let n = b.rmsnorm(xv, wv, 1e-6);
        b.round_f16(n)
    });
    assert_invalid!(
        kernel,
        ValidationError::Op {
            source: OpError::Dist {
                operand: "weight",
                found: Dist::Sharded,
                ..
            },
            ..
        },
        ["weight", "sharded"]
    );
}

#[test]
fn invalid_rmsnorm_eps() {
    for eps in [0.0, -0.0, -1e-6, f64::NAN, f64::INFINITY] {
        assert_invalid!(
            rmsnorm_kernel(1, Sharding::Replicated, norm_w(8), eps),
            ValidationError::Op {
                mnemonic: "rmsnorm",
                source: OpError::Attribute { operand: "eps", .. },
                ..
            },
            ["eps", "positive", &format!("{eps}")]
        );
    }
    assert_valid(&rmsnorm_kernel(
        1,
        Sharding::Replicated,
        norm_w(8),
        f64::MIN_POSITIVE,
    ));
}

/// `y = round_f16(allreduce(reduce.OP(load p)))`, `p` partial over 2 ranks.
fn reduce_partial_kernel(op: ReduceOp) -> Kernel {
    kernel_into_y("reduce", 2, 1, |b| {
        let p = b.input("p", f16(1, 8), partial(2));
        let pv = b.load(p);
        let r = b.reduce(op, pv);
        let s = b.allreduce(r);
        b.round_f16(s)
    })
}

#[test]
fn invalid_reduce_absmax_of_partial() {
    for (op, mnemonic) in [
        (ReduceOp::AbsMax, "reduce.absmax"),
        (ReduceOp::SumSquares, "reduce.sumsq"),
    ] {
        assert_invalid!(
            reduce_partial_kernel(op),
            ValidationError::Op {
                mnemonic: m,
                source: OpError::Dist {
                    operand: "x",
                    expected: "replicated",
                    found: Dist::Partial,
                    ..
                },
                ..
            } if *m == mnemonic,
            [mnemonic, "partial", "allreduce first"]
        );
    }
    // A sum is linear: the sum of a partial value is a partial value.
    assert_valid(&reduce_partial_kernel(ReduceOp::Sum));
}

#[test]
fn invalid_reduce_of_sharded() {
    let kernel = kernel_into_y("reduce", 2, 1, |b| {
        let x = b.input("x", f16(1, 8), col(2));
        let xv = b.load(x);
        let r = b.reduce(ReduceOp::AbsMax, xv);
        b.round_f16(r)
    });
    assert_invalid!(
        kernel,
        ValidationError::Op {
            source: OpError::Dist {
                found: Dist::Sharded,
                ..
            },
            ..
        },
        ["sharded"]
    );
}

// ---------------------------------------------------------------------------------------------
// Collectives
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_allreduce_of_replicated() {
    let build = |p_sharding| {
        kernel_into_y("allreduce", 2, 8, |b| {
            let p = b.input("p", f16(1, 8), p_sharding);
            let pv = b.load(p);
            let s = b.allreduce(pv);
            b.round_f16(s)
        })
    };
    assert_invalid!(
        build(Sharding::Replicated),
        ValidationError::Op {
            mnemonic: "allreduce",
            source: OpError::Dist {
                operand: "x",
                expected: "partial",
                found: Dist::Replicated,
                ..
            },
            ..
        },
        ["partial", "replicated", "row-parallel GEMV"]
    );
    assert_valid(&build(partial(2)));
    // A sharded value is not a sum either.
    let p_sharded = kernel_into_y("allreduce", 2, 8, |b| {
        let p = b.input("p", f16(1, 16), col(2));
        let pv = b.load(p);
        let s = b.allreduce(pv);
        let s = b.slice(s, 0, 8);
        b.round_f16(s)
    });
    assert_invalid!(
        p_sharded,
        ValidationError::Op {
            source: OpError::Dist {
                found: Dist::Sharded,
                ..
            },
            ..
        },
        ["sharded"]
    );
}

#[test]
fn invalid_allreduce_tp_mismatch() {
    let build = |op_tp: u32| {
        kernel_into_y("allreduce", 4, 8, |b| {
            let p = b.input("p", f16(1, 8), partial(4));
            let pv = b.load(p);
            let x = pv;
            let s = b.op(OpKind::AllReduce(AllReduce {
                x,
                tp: op_tp,
                compression: Compression::None,
            }))[0];
            b.round_f16(s)
        })
    };
    for op_tp in [2, 8, 1] {
        assert_invalid!(
            build(op_tp),
            ValidationError::Op {
                mnemonic: "allreduce",
                source: OpError::TpMismatch { expected: 4, found },
                ..
            } if *found == op_tp,
            [&format!("tp={op_tp}"), "4 ranks"]
        );
    }
    assert_valid(&build(4));
}

#[test]
fn invalid_allreduce_int8_block() {
    let build = |block| {
        kernel_into_y("allreduce_int8", 2, 128, |b| {
            let p = b.input("p", f16(1, 128), partial(2));
            let pv = b.load(p);
            let s = b.allreduce_int8(pv, block);
            b.round_f16(s)
        })
    };
    for block in [100, 0, 256] {
        assert_invalid!(
            build(block),
            ValidationError::Op {
                mnemonic: "allreduce.int8",
                source: OpError::Attribute { operand: "block", what },
                ..
            } if what.contains(&format!("{block} does not divide")),
            ["block", "128 features"]
        );
    }
    for block in [1, 32, 128] {
        assert_valid(&build(block));
    }
}

// ---------------------------------------------------------------------------------------------
// INT8 quantisation
// ---------------------------------------------------------------------------------------------

/// `y = round_f16(dequantize_int8(quantize_int8(load x, qblock), dblock))`, `x` `[1, 128]`.
fn int8_roundtrip(x: Tensor, qblock: usize, dblock: usize) -> Kernel {
    kernel_into_y("int8_roundtrip", 1, 128, |b| {
        let xb = b.input("x", x, Sharding::Replicated);
        let xv = b.load(xb);
        let (codes, scales) = b.quantize_int8(xv, qblock);
        let y = b.dequantize_int8(codes, scales, dblock);
        b.round_f16(y)
    })
}

#[test]
fn int8_roundtrip_control_validates() {
    for dtype in [ScalarType::F16, ScalarType::F32, ScalarType::Bf16] {
        assert_valid(&int8_roundtrip(tensor(dtype, &[1, 128]), 32, 32));
    }
}

#[test]
fn invalid_quantize_int8_dtype() {
    for dtype in [ScalarType::I32, ScalarType::I8] {
        assert_invalid!(
            int8_roundtrip(tensor(dtype, &[1, 128]), 32, 32),
            ValidationError::Op {
                mnemonic: "quantize_int8",
                source: OpError::Dtype { operand: "x", found, .. },
                ..
            } if *found == dtype,
            ["x", "float", dtype.name()]
        );
    }
}

#[test]
fn invalid_quantize_int8_block() {
    for block in [0, 48, 256] {
        assert_invalid!(
            int8_roundtrip(f16(1, 128), block, 32),
            ValidationError::Op {
                mnemonic: "quantize_int8",
                source: OpError::Attribute {
                    operand: "block",
                    ..
                },
                ..
            },
            [&format!("{block} does not divide"), "128 features"]
        );
    }
}

#[test]
fn invalid_dequantize_int8_block() {
    assert_invalid!(
        int8_roundtrip(f16(1, 128), 32, 48),
        ValidationError::Op {
            mnemonic: "dequantize_int8",
            source: OpError::Attribute {
                operand: "block",
                ..
            },
            ..
        },
        ["48 does not divide", "128 features"]
    );
}

#[test]
fn invalid_dequantize_int8_scales_shape() {
    // Scales of 32-feature blocks read as 64-feature blocks: [1, 4] where [1, 2] is expected.
    assert_invalid!(
        int8_roundtrip(f16(1, 128), 32, 64),
        ValidationError::Op {
            mnemonic: "dequantize_int8",
            source: OpError::Shape { operand: "scales", expected, found },
            ..
        } if *expected == [1, 2] && *found == [1, 4],
        ["scales", "[1, 2]", "[1, 4]"]
    );
}

/// Codes and scales swapped, or an f16 value as either operand.
#[test]
fn invalid_dequantize_int8_dtype() {
    let build = |swap: bool, f16_scales: bool| {
        kernel_into_y("dequant", 1, 128, |b| {
            let xb = b.input("x", f16(1, 128), Sharding::Replicated);
            let sb = b.input("s16", f16(1, 4), Sharding::Replicated);
            let xv = b.load(xb);
            let (codes, mut scales) = b.quantize_int8(xv, 32);
            if f16_scales {
                scales = b.load(sb);
            }
            let (c, s) = if swap {
                (scales, codes)
            } else {
                (codes, scales)
            };
            let y = b.dequantize_int8(c, s, 32);
            b.round_f16(y)
        })
    };
    assert_invalid!(
        build(true, false),
        ValidationError::Op {
            mnemonic: "dequantize_int8",
            source: OpError::Dtype {
                operand: "codes",
                found: ScalarType::F32,
                ..
            },
            ..
        },
        ["codes", "expected i8", "f32"]
    );
    assert_invalid!(
        build(false, true),
        ValidationError::Op {
            mnemonic: "dequantize_int8",
            source: OpError::Dtype {
                operand: "scales",
                found: ScalarType::F16,
                ..
            },
            ..
        },
        ["scales", "expected f32", "f16"]
    );
    assert_valid(&build(false, false));
}

/// Codes of a replicated value with the scales of a partial one: each rank computes `q · s_r`,
/// which differs by rank, yet the result is typed replicated and may be stored as such.
#[test]
fn invalid_dequantize_int8_mixed_distributions() {
    let build = |mixed: bool| {
        kernel_into_y("dequant_mixed", 2, 128, |b| {
            let xb = b.input("x", f16(1, 128), Sharding::Replicated);
            let pb = b.input("p", f16(1, 128), partial(2));
            let (xv, pv) = (b.load(xb), b.load(pb));
            let (codes, x_scales) = b.quantize_int8(xv, 128);
            let (_, p_scales) = b.quantize_int8(pv, 128);
            let y = b.dequantize_int8(codes, if mixed { p_scales } else { x_scales }, 128);
            b.round_f16(y)
        })
    };
    assert_valid(&build(false));
    assert_invalid!(
        build(true),
        ValidationError::Op {
            mnemonic: "dequantize_int8",
            source: OpError::Dist {
                operand: "scales",
                ..
            },
            ..
        },
        ["scales", "partial", "replicated"]
    );
}

// ---------------------------------------------------------------------------------------------
// The kernel set
// ---------------------------------------------------------------------------------------------

/// Validates one kernel of the set and checks the side tables: every output has one store that
/// writes it with a value of its local type, and no input has a writer.
fn check_set_kernel(id: KernelId, s: &Shapes) {
    let kernel = id.build(s);
    let what = format!("{id} at tp={} batch={}", s.tp, s.batch);
    let info =
        validate(&kernel).unwrap_or_else(|e| panic!("{what} does not validate: {e}\n{kernel}"));
    assert_eq!(kernel.name(), id.name(), "{what}");
    assert_eq!(kernel.tp(), s.tp, "{what}");
    let mut outputs = 0;
    for b in kernel.outputs() {
        outputs += 1;
        let data = kernel.buffer(b).expect("own buffer");
        let op = info
            .writer(b)
            .unwrap_or_else(|| panic!("{what}: no writer for output `{}`", data.name));
        let OpKind::Store(store) = &kernel.op(op).expect("own op").kind else {
            panic!("{what}: the writer of `{}` is not a store", data.name);
        };
        assert_eq!(
            store.buffer, b,
            "{what}: the writer of `{}` stores elsewhere",
            data.name
        );
        assert_eq!(
            stores_into(&kernel, b),
            [op],
            "{what}: `{}` has one store",
            data.name
        );
        let BufferType::Tensor(t) = data.local_type() else {
            panic!("{what}: output `{}` is a weight", data.name);
        };
        let stored = info.value_type(store.value);
        assert_eq!(
            (stored.dtype, &stored.shape),
            (t.dtype, &t.shape),
            "{what}: `{}`",
            data.name
        );
        assert_eq!(
            stored.shape[0], s.batch,
            "{what}: `{}` has one row per token",
            data.name
        );
    }
    assert!(outputs > 0, "{what} has no outputs");
    for b in kernel.inputs() {
        assert_eq!(info.writer(b), None, "{what}: an input has a writer");
    }
    // The set has no dead values: every result is read by a later op.
    for (op, data) in kernel.ops() {
        for &v in &data.results {
            assert!(
                info.uses(v) > 0,
                "{what}: {v} (defined by {op}, {}) is never read",
                info.value_type(v)
            );
        }
    }
}

#[test]
fn kernel_set_validates_at_every_tp() {
    for tp in [1, 2, 4, 8] {
        for id in KernelId::ALL {
            check_set_kernel(id, &Shapes::qwen27b(tp));
        }
    }
}

#[test]
fn kernel_set_validates_for_batch_1_to_8() {
    for tp in [1, 4] {
        for batch in 1..=8 {
            for id in KernelId::ALL {
                check_set_kernel(
                    id,
                    &Shapes {
                        batch,
                        ..Shapes::qwen27b(tp)
                    },
                );
            }
        }
    }
}

/// The fused kernel's types follow DESIGN.md §5.6: row-parallel GEMV → partial, allreduce →
/// replicated, and its two outputs are written by two different stores (§5.7).
#[test]
fn kernel_set_fused_kernel_types() {
    let s = Shapes::qwen27b(4);
    let kernel = KernelId::GemvInt4AllreduceRmsnorm.build(&s);
    let info = assert_valid(&kernel);
    let dist_of = |mnemonic: &str| {
        let (_, data) = kernel
            .ops()
            .find(|(_, d)| d.kind.mnemonic() == mnemonic)
            .expect(mnemonic);
        info.value_type(data.results[0]).dist
    };
    assert_eq!(dist_of("load"), Dist::Sharded);
    assert_eq!(dist_of("gemv.row"), Dist::Partial);
    assert_eq!(dist_of("allreduce"), Dist::Replicated);
    assert_eq!(dist_of("rmsnorm"), Dist::Replicated);
    let writers: Vec<Op> = kernel
        .outputs()
        .map(|b| info.writer(b).expect("written"))
        .collect();
    assert_eq!(writers.len(), 2);
    assert_ne!(writers[0], writers[1]);
}
