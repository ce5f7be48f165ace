//! GPU tests (NVIDIA, sm_90): ignored by default; run where a GPU is present with
//! `cargo test -p wavefuse-runtime --release --test gpu -- --ignored --test-threads=1`.
//! A test that finds no driver or GPU prints "skipped: no GPU (…)" and returns.
//!
//! Kernels here are written by hand in CUDA (no headers, so NVRTC needs no include directory on
//! the GPU machine); system-scope release/acquire are spelled in PTX.

use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::Abi;
use wavefuse_codegen::lowered::{Access, LoweredKernel, ParamKind, Purpose, Ty};
use wavefuse_ir::MemorySpace;
use wavefuse_runtime::compile::Nvrtc;
use wavefuse_runtime::launch::{self, Capacity};
use wavefuse_runtime::rank::SameDeviceMode;
use wavefuse_runtime::{
    Artifact, CompileRequest, Compiler, CudaDevice, Device, DeviceBuffer, DeviceError, Error,
    KernelArg, KernelInstance, LaunchSpec, MemKind, RankGroup,
};

/// Spins of a bounded wait before it reports a timeout (≈ 0.1–1 s of system-scope loads).
const SOURCE: &str = r#"
#define BUDGET (1u << 20)

__device__ __forceinline__ void st_release_sys(unsigned* p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

extern "C" __global__ void __launch_bounds__(256) scale(float* y, const float* x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

// Two ranks: publish a payload into my mailbox slot (epoch parity), release my flag = epoch, wait
// (bounded) for the peer's flag to reach the epoch, read the peer's payload. Rank 1 skips
// publishing at `skip_epoch` (0 = never) so a test can provoke a timeout.
__device__ void handshake_body(unsigned* const* flags, unsigned* const* mailbox, unsigned* out,
                               unsigned rank, unsigned epoch, unsigned skip_epoch, unsigned* error_word) {
    if (threadIdx.x != 0) return;
    unsigned peer = rank ^ 1u;
    if (!(rank == 1u && epoch == skip_epoch)) {
        mailbox[rank][epoch & 1u] = rank * 1000000u + epoch;
        st_release_sys(flags[rank], epoch);
    }
    unsigned spins = 0;
    while ((int)(ld_acquire_sys(flags[peer]) - epoch) < 0) {
        if (++spins == BUDGET) { atomicExch(error_word, 0xB0u); return; }
    }
    out[epoch - 1u] = mailbox[peer][epoch & 1u];
}

extern "C" __global__ void __launch_bounds__(32) handshake(
    unsigned* const* flags, unsigned* const* mailbox, unsigned* out, unsigned rank, unsigned epoch,
    unsigned skip_epoch, unsigned* error_word) {
    handshake_body(flags, mailbox, out, rank, epoch, skip_epoch, error_word);
}

// The ranks entry of `handshake` (Abi::ranks_symbol): rank = blockIdx.x / grid (grid = 1 here),
// each per-rank array once per rank by value, the peer tables and scalars once, no rank parameter.
extern "C" __global__ void __launch_bounds__(32) handshake_ranks(
    unsigned* const* flags, unsigned* const* mailbox, unsigned* out0, unsigned* out1,
    unsigned epoch, unsigned skip_epoch, unsigned* error_word0, unsigned* error_word1) {
    unsigned rank = blockIdx.x;
    handshake_body(flags, mailbox, rank ? out1 : out0, rank, epoch, skip_epoch,
                   rank ? error_word1 : error_word0);
}

// A grid barrier over all workgroups of one launch (one arrival per workgroup, bounded wait).
extern "C" __global__ void __launch_bounds__(256) grid_barrier(unsigned* counter, unsigned epoch,
                                                             unsigned* out, unsigned* error_word) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned target = epoch * gridDim.x;
        __threadfence();
        atomicAdd(counter, 1u);
        unsigned spins = 0;
        while ((int)(ld_acquire_sys(counter) - target) < 0) {
            if (++spins == BUDGET) { atomicExch(error_word, 0xBA7u); break; }
        }
        out[blockIdx.x] = epoch;
    }
}

// Programmatic dependent launch. A slow producer: lets its stream successor be scheduled at
// once, then every lane waits `ticks` cycles before writing `v` to its element.
extern "C" __global__ void __launch_bounds__(256) slow_fill(unsigned* buf, unsigned n, unsigned v,
                                                          unsigned long long ticks) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    long long t0 = clock64();
    while ((unsigned long long)(clock64() - t0) < ticks) {}
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = v;
}

// The consumer as the generator writes it: the stream-order wait before any memory access.
extern "C" __global__ void __launch_bounds__(256) copy_after_wait(const unsigned* buf, unsigned* out,
                                                                unsigned n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[i];
}

// The generator's prologue in full, then a copy.
extern "C" __global__ void __launch_bounds__(256) copy_with_prologue(const unsigned* buf, unsigned* out,
                                                                   unsigned n) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[i] + 1u;
}

// The same without the wait: launched as a dependent, it may read before the producer wrote.
extern "C" __global__ void __launch_bounds__(256) copy_without_wait(const unsigned* buf, unsigned* out,
                                                                  unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[i];
}
"#;

/// The device, or `None` after printing why the test is skipped.
fn gpu() -> Option<CudaDevice> {
    match CudaDevice::new(0) {
        Ok(d) => {
            println!(
                "device: {} ({} SMs, cooperative launch: {})",
                d.info().name,
                d.info().compute_units,
                d.info().cooperative_launch
            );
            Some(d)
        }
        Err(e @ (DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. })) => {
            println!("skipped: no GPU ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn compile() -> Artifact {
    let req = CompileRequest::new("runtime_gpu_tests", SOURCE, Arch::Sm90);
    Nvrtc::from_env()
        .compile(&req)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn read_u32s<D: Device>(dev: &D, buf: &D::Buffer) -> Vec<u32> {
    let mut bytes = vec![0u8; buf.bytes()];
    dev.download(buf, 0, &mut bytes).unwrap();
    u32s(&bytes)
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn alloc_copy_compile_launch_read_back_sm90() {
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let kernel = dev.load(&artifact, "scale").unwrap();
    let n = 100_000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let xb = dev.alloc(bytes.len(), MemKind::Device).unwrap();
    let yb = dev.alloc(bytes.len(), MemKind::Device).unwrap();
    assert!(
        read_u32s(&dev, &yb).iter().all(|&w| w == 0),
        "allocations start zeroed"
    );
    dev.upload(&xb, 0, &bytes).unwrap();
    let stream = dev.new_stream().unwrap();
    let spec = LaunchSpec::linear(n.div_ceil(256), 256);
    let args = [
        KernelArg::buffer(&yb),
        KernelArg::buffer(&xb),
        KernelArg::F32(3.0),
        KernelArg::U32(n),
    ];
    let (start, end) = (dev.new_event().unwrap(), dev.new_event().unwrap());
    dev.record(&start, &stream).unwrap();
    // SAFETY: the arguments match `scale`'s parameters; both buffers hold n floats.
    unsafe { launch::launch(&dev, &kernel, &spec, &args, &stream) }.unwrap();
    dev.record(&end, &stream).unwrap();
    dev.sync_stream(&stream).unwrap();
    let ms = dev.elapsed_ms(&start, &end).unwrap();
    assert!(ms > 0.0 && ms < 1000.0, "{ms} ms");
    let mut out = vec![0u8; bytes.len()];
    dev.download(&yb, 0, &mut out).unwrap();
    for (i, c) in out.chunks_exact(4).enumerate() {
        assert_eq!(
            f32::from_le_bytes(c.try_into().unwrap()),
            3.0 * x[i],
            "element {i}"
        );
    }
    let mut small = [0u8; 8];
    assert!(matches!(
        dev.download(&yb, bytes.len() - 4, &mut small),
        Err(DeviceError::OutOfBounds { .. })
    ));
}

/// The handshake kernel's parameters, as the lowering would describe them.
fn handshake_kernel(name: &str, launches: usize) -> LoweredKernel {
    let mut k = LoweredKernel::new(name, Arch::Sm90, 2, 32, 1);
    let data = |buffer: &str| Purpose::Data {
        buffer: buffer.to_owned(),
        part: "data",
    };
    k.param(
        "flags",
        ParamKind::PeerArrays {
            elem: Ty::U32,
            len: 1,
            access: Access::ReadWrite,
            purpose: Purpose::Flags,
        },
    );
    k.param(
        "mailbox",
        ParamKind::PeerArrays {
            elem: Ty::U32,
            len: 2,
            access: Access::ReadWrite,
            purpose: Purpose::Scratch,
        },
    );
    let out = ParamKind::Array {
        elem: Ty::U32,
        len: launches,
        space: MemorySpace::Global,
        access: Access::Write,
        purpose: data("out"),
    };
    k.param("out", out);
    k.param(
        "rank",
        ParamKind::Scalar {
            ty: Ty::U32,
            purpose: Purpose::Rank,
        },
    );
    k.param(
        "epoch",
        ParamKind::Scalar {
            ty: Ty::U32,
            purpose: Purpose::Epoch,
        },
    );
    k.param(
        "skip_epoch",
        ParamKind::Scalar {
            ty: Ty::U32,
            purpose: data("skip_epoch"),
        },
    );
    k.error_param();
    k.flag_rounds_per_launch = 1;
    k
}

/// Runs `launches` handshakes back to back on a two-rank group on one device, then checks that
/// every rank saw every one of the peer's payloads, in order.
fn handshake_on_one_device(mode: SameDeviceMode, ranks_entry: Option<&str>) {
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let launches = 1000usize;
    let group = RankGroup::on_one_device(dev, 2, mode).unwrap();
    let outs = group.alloc_per_rank(4 * launches, MemKind::Device).unwrap();
    let mut abi = Abi::from_kernel(&handshake_kernel("handshake", launches));
    abi.ranks_symbol = ranks_entry.map(str::to_owned);
    let mut inst = KernelInstance::new(&group, &abi, &artifact).unwrap();
    assert_eq!(inst.launches_ranks_entry(), ranks_entry.is_some());
    inst.bind("out", "data", &[&outs[0], &outs[1]]).unwrap();
    inst.bind_scalar("skip_epoch", KernelArg::U32(0)).unwrap();
    for e in 1..=launches as u32 {
        assert_eq!(inst.launch().unwrap(), e);
    }
    inst.wait().unwrap();
    for (rank, out) in outs.iter().enumerate() {
        let peer = rank as u32 ^ 1;
        let seen = read_u32s(group.device(0), out);
        for (i, &v) in seen.iter().enumerate() {
            assert_eq!(
                v,
                peer * 1_000_000 + i as u32 + 1,
                "rank {rank}, epoch {}",
                i + 1
            );
        }
        let flag = read_u32s(group.device(0), inst.owned("flags", rank as u32).unwrap());
        assert_eq!(
            flag,
            [launches as u32],
            "rank {rank}'s flag holds the last epoch"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn two_ranks_one_device_streams_handshake_1000_sm90() {
    handshake_on_one_device(SameDeviceMode::Streams, None);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn two_ranks_one_device_fused_grid_handshake_1000_sm90() {
    handshake_on_one_device(SameDeviceMode::FusedGrid, Some("handshake_ranks"));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn timed_out_wait_is_reported_then_recovered_sm90() {
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let group = RankGroup::on_one_device(dev, 2, SameDeviceMode::Streams).unwrap();
    let outs = group.alloc_per_rank(4 * 8, MemKind::Device).unwrap();
    let mut inst = KernelInstance::new(
        &group,
        &Abi::from_kernel(&handshake_kernel("handshake", 8)),
        &artifact,
    )
    .unwrap();
    inst.bind("out", "data", &[&outs[0], &outs[1]]).unwrap();
    inst.bind_scalar("skip_epoch", KernelArg::U32(3)).unwrap();
    assert_eq!(inst.run().unwrap(), 1);
    assert_eq!(inst.run().unwrap(), 2);
    let err = inst.run().unwrap_err();
    assert!(
        matches!(&err, Error::BarrierTimeout { kernel, epoch: 3, rank: 0, code: 0xB0 } if kernel == "handshake"),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("barrier timeout in kernel handshake, epoch 3"),
        "{err}"
    );
    // The next launch starts over from zeroed state at epoch 1 and succeeds.
    inst.bind_scalar("skip_epoch", KernelArg::U32(0)).unwrap();
    assert_eq!(inst.run().unwrap(), 1);
    assert_eq!(inst.error_code(0).unwrap(), 0);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn coresidency_capacity_is_exact_sm90() {
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let kernel = dev.load(&artifact, "grid_barrier").unwrap();
    let stream = dev.new_stream().unwrap();
    let spec = LaunchSpec::linear(1, 256).coresident();
    let cap = Capacity::of(&dev, &kernel, &spec).unwrap();
    println!(
        "grid_barrier: {} blocks/SM x {} SMs",
        cap.blocks_per_cu, cap.compute_units
    );
    let full = u32::try_from(cap.total()).unwrap();
    let counter = dev.alloc(4, MemKind::Device).unwrap();
    let error = dev.alloc(4, MemKind::Device).unwrap();
    let out = dev.alloc(4 * (full as usize + 1), MemKind::Device).unwrap();
    let args = |epoch| {
        [
            KernelArg::buffer(&counter),
            KernelArg::U32(epoch),
            KernelArg::buffer(&out),
            KernelArg::buffer(&error),
        ]
    };
    // One workgroup too many is refused before anything is launched.
    let too_big = LaunchSpec::linear(full + 1, 256).coresident();
    // SAFETY: the arguments match `grid_barrier`; `out` holds full + 1 words.
    let err = unsafe { launch::launch(&dev, &kernel, &too_big, &args(1), &stream) }.unwrap_err();
    assert!(matches!(err, Error::NotCoResident { .. }), "{err}");
    // Exactly the capacity runs to completion, 100 times, without a timeout.
    let spec = LaunchSpec::linear(full, 256).coresident();
    for epoch in 1..=100 {
        // SAFETY: as above.
        unsafe { launch::launch(&dev, &kernel, &spec, &args(epoch), &stream) }.unwrap();
    }
    dev.sync_stream(&stream).unwrap();
    assert_eq!(read_u32s(&dev, &error), [0], "a grid barrier timed out");
    assert_eq!(read_u32s(&dev, &counter), [100 * full]);
    assert!(
        read_u32s(&dev, &out)[..full as usize]
            .iter()
            .all(|&e| e == 100)
    );
}

#[test]
#[ignore = "needs two NVIDIA GPUs"]
fn two_ranks_two_devices_handshake_sm90() {
    let count = match CudaDevice::count() {
        Ok(n) => n,
        Err(e) => return println!("skipped: no GPU ({e})"),
    };
    if count < 2 {
        return println!("skipped: needs 2 GPUs, found {count}");
    }
    let artifact = compile();
    let group = RankGroup::one_per_device(vec![
        CudaDevice::new(0).unwrap(),
        CudaDevice::new(1).unwrap(),
    ])
    .unwrap();
    let launches = 1000usize;
    let outs = group.alloc_per_rank(4 * launches, MemKind::Device).unwrap();
    let mut inst = KernelInstance::new(
        &group,
        &Abi::from_kernel(&handshake_kernel("handshake", launches)),
        &artifact,
    )
    .unwrap();
    inst.bind("out", "data", &[&outs[0], &outs[1]]).unwrap();
    inst.bind_scalar("skip_epoch", KernelArg::U32(0)).unwrap();
    for _ in 0..launches {
        inst.launch().unwrap();
    }
    inst.wait().unwrap();
    for (rank, out) in outs.iter().enumerate() {
        let seen = read_u32s(group.device(rank as u32), out);
        let peer = rank as u32 ^ 1;
        assert!(
            seen.iter()
                .enumerate()
                .all(|(i, &v)| v == peer * 1_000_000 + i as u32 + 1),
            "rank {rank}"
        );
    }
}

/// Not ignored: the hand-written kernels above compile for sm_90 here, so the GPU run cannot fail
/// on a typo.
#[test]
fn gpu_test_kernels_compile_sm90() {
    let nvrtc = Nvrtc::from_env();
    if let Err(e) = nvrtc.version() {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "CI must have NVRTC: {e}"
        );
        return println!("skipped: {e}");
    }
    let artifact = compile();
    for k in ["scale", "handshake", "handshake_ranks", "grid_barrier"] {
        let usage = artifact
            .usage_of(k)
            .unwrap_or_else(|| panic!("no report for {k}:\n{}", artifact.log));
        assert!(!usage.spills(), "{k}: {usage:?}");
    }
}

/// Runs `slow_fill(v)` then `consumer` (as a programmatic dependent when `dependent`) on one
/// stream and returns how many of the consumer's elements are not `v` (stale).
fn stale_after(
    dev: &CudaDevice,
    artifact: &Artifact,
    consumer: &str,
    dependent: bool,
    v: u32,
) -> usize {
    // One 256-lane workgroup per SM each: both grids fit on the device at once.
    let grid = dev.info().compute_units;
    let n = grid * 256;
    let fill = dev.load(artifact, "slow_fill").unwrap();
    let copy = dev.load(artifact, consumer).unwrap();
    let stream = dev.new_stream().unwrap();
    let buf = dev.alloc(4 * n as usize, MemKind::Device).unwrap();
    let out = dev.alloc(4 * n as usize, MemKind::Device).unwrap();
    // ~1 ms at the H200's clock: far longer than a launch takes to reach the GPU.
    let ticks = 2_000_000u64;
    let spec = LaunchSpec::linear(grid, 256);
    // SAFETY: the arguments match the kernels' parameters; the buffers outlive the launches
    // (synchronised below).
    unsafe {
        launch::launch(
            dev,
            &fill,
            &spec,
            &[
                KernelArg::buffer(&buf),
                KernelArg::U32(n),
                KernelArg::U32(v),
                KernelArg::U64(ticks),
            ],
            &stream,
        )
        .unwrap();
        let spec = LaunchSpec {
            dependent,
            ..spec.clone()
        };
        launch::launch(
            dev,
            &copy,
            &spec,
            &[
                KernelArg::buffer(&buf),
                KernelArg::buffer(&out),
                KernelArg::U32(n),
            ],
            &stream,
        )
        .unwrap();
    }
    dev.sync_stream(&stream).unwrap();
    read_u32s(dev, &out).iter().filter(|&&x| x != v).count()
}

/// The stream-order prologue a generated sm_90 kernel without cross-workgroup waits opens with makes a
/// programmatic dependent launch safe: a consumer launched so, without `griddepcontrol.wait`,
/// reads its producer's output before it is written (the launch really overlaps: the test fails
/// if it never does); with the wait, or launched in plain stream order, it never does.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_dependent_launch_waits_for_its_producer_only_with_the_prologue_sm90() {
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let mut stale_without = 0;
    for v in 1..=5u32 {
        assert_eq!(
            stale_after(&dev, &artifact, "copy_after_wait", true, v),
            0,
            "with the wait"
        );
        assert_eq!(
            stale_after(&dev, &artifact, "copy_without_wait", false, v),
            0,
            "stream order"
        );
        stale_without += stale_after(&dev, &artifact, "copy_without_wait", true, v);
    }
    println!("without the wait, dependent: {stale_without} stale elements over 5 launches");
    assert!(
        stale_without > 0,
        "a dependent launch never overlapped its producer: the test proves nothing"
    );
}

/// What the timing code relies on: a launch enqueued behind a host-function gate returns to the
/// host at once. Plain launches do (asserted). The host time of a dependent launch behind the
/// gate is printed, not asserted: driver 580 on the H200 was seen to hold graphs of dependent
/// launches there until the gate's timeout, one reason `ab --timing graphs` replays its graphs
/// behind a kernel on the device instead
/// ([`wavefuse_runtime::timing::GroupGraphs::replay_behind_spin`]); behind device work (here a
/// fill) a dependent launch returns at once (asserted).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn launches_behind_a_held_or_busy_stream_return_at_once_sm90() {
    use std::time::Instant;
    use wavefuse_runtime::timing::{Gate, fill};
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let copy = dev.load(&artifact, "copy_after_wait").unwrap();
    let stream = dev.new_stream().unwrap();
    let n = 1u32 << 20;
    let buf = dev.alloc(4 * n as usize, MemKind::Device).unwrap();
    let out = dev.alloc(4 * n as usize, MemKind::Device).unwrap();
    let busy = dev.alloc(256 << 20, MemKind::Device).unwrap();
    let args = [
        KernelArg::buffer(&buf),
        KernelArg::buffer(&out),
        KernelArg::U32(n),
    ];
    let plain = LaunchSpec::linear(n / 256, 256);
    let dependent = LaunchSpec {
        dependent: true,
        ..plain.clone()
    };
    let launch_s = |spec: &LaunchSpec| {
        let t = Instant::now();
        // SAFETY: the arguments match `copy_after_wait`; the buffers outlive the launch.
        unsafe { launch::launch(&dev, &copy, spec, &args, &stream) }.unwrap();
        t.elapsed().as_secs_f64()
    };
    let gate = Gate::hold(&dev, &stream).unwrap();
    let held_plain = launch_s(&plain);
    drop(gate);
    dev.sync_stream(&stream).unwrap();
    let gate = Gate::hold(&dev, &stream).unwrap();
    let held_dependent = launch_s(&dependent);
    drop(gate);
    dev.sync_stream(&stream).unwrap();
    fill(&dev, &busy, 1, &stream).unwrap();
    let busy_dependent = launch_s(&dependent);
    dev.sync_stream(&stream).unwrap();
    println!(
        "host time of the launch call: plain behind a gate {:.1} us, dependent behind a gate \
         {:.1} us, dependent behind a fill {:.1} us",
        held_plain * 1e6,
        held_dependent * 1e6,
        busy_dependent * 1e6
    );
    assert!(
        held_plain < 1.0,
        "a plain launch behind a gate blocked {held_plain} s"
    );
    assert!(
        busy_dependent < 1.0,
        "a dependent launch behind a fill blocked {busy_dependent} s"
    );
}

/// A CUDA graph captured from 20 dependent launches (each reads what the previous one wrote and
/// adds one) replays to completion with the right result. Prints how long each step takes.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_graph_of_dependent_launches_replays_sm90() {
    use std::time::Instant;
    let Some(dev) = gpu() else { return };
    let artifact = compile();
    let k = dev.load(&artifact, "copy_with_prologue").unwrap();
    let stream = dev.new_stream().unwrap();
    let n = 132 * 256u32;
    let a = dev.alloc(4 * n as usize, MemKind::Device).unwrap();
    let b = dev.alloc(4 * n as usize, MemKind::Device).unwrap();
    let spec = LaunchSpec {
        dependent: true,
        ..LaunchSpec::linear(n / 256, 256)
    };
    let t = Instant::now();
    let step = |what: &str| eprintln!("{what}: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    dev.begin_capture(&stream).unwrap();
    step("capture begun");
    for i in 0..20 {
        let (src, dst) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        // SAFETY: the arguments match `copy_with_prologue`; the buffers outlive the graph.
        unsafe {
            launch::launch(
                &dev,
                &k,
                &spec,
                &[
                    KernelArg::buffer(src),
                    KernelArg::buffer(dst),
                    KernelArg::U32(n),
                ],
                &stream,
            )
        }
        .unwrap();
    }
    step("20 launches captured");
    let graph = dev.end_capture(&stream).unwrap().expect("a graph");
    step("capture ended");
    dev.upload_graph(&graph).unwrap();
    step("uploaded");
    dev.launch_graph(&graph).unwrap();
    step("launched");
    dev.sync_stream(&stream).unwrap();
    step("replayed");
    // a starts at 0 (fresh allocations are zeroed), each launch adds one: after 20, a = 20.
    let got = read_u32s(&dev, &a);
    assert!(got.iter().all(|&x| x == 20), "{:?}", &got[..4]);
}
