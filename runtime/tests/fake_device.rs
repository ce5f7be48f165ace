//! Rank groups and kernel instances on a fake device (host memory, recorded launches): peer-table
//! order, ABI-ordered arguments, epochs, the error word, co-residency refusals and the fused-grid
//! argument layout — everything above the driver, checked without a GPU.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::Abi;
use wavefuse_codegen::lowered::{
    Access, CoResidency, LoweredKernel, ParamKind, Purpose, Ty, peer_slot,
};
use wavefuse_codegen::target::Vendor;
use wavefuse_ir::MemorySpace;
use wavefuse_runtime::device::LoadedKernel;
use wavefuse_runtime::rank::{SameDeviceMode, Skew, SkewPattern, per_device_ordinals};
use wavefuse_runtime::{
    Artifact, ArtifactFormat, CompilerId, Device, DeviceBuffer, DeviceError, DeviceInfo, Error,
    KernelArg, KernelInstance, LaunchSpec, MemKind, RankGroup,
};

/// Host memory standing in for every fake device's memory, by address.
#[derive(Default)]
struct Memory {
    next: AtomicU64,
    bytes: Mutex<HashMap<u64, Vec<u8>>>,
}

impl Memory {
    fn write_u32(&self, addr: u64, value: u32) {
        let mut m = self.bytes.lock().unwrap();
        let (base, buf) = m
            .iter_mut()
            .find(|(b, v)| addr >= **b && addr < **b + v.len() as u64)
            .expect("valid address");
        let off = (addr - base) as usize;
        buf[off..off + 4].copy_from_slice(&value.to_le_bytes());
    }
    fn read_u64s(&self, addr: u64, n: usize) -> Vec<u64> {
        let m = self.bytes.lock().unwrap();
        m[&addr][..8 * n]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Launch {
    ordinal: usize,
    kernel: String,
    spec: LaunchSpec,
    args: Vec<KernelArg>,
    cooperative: bool,
    stream: usize,
}

/// Every `delay_stream` of a fake device: (device, stream, delay, launches recorded before it).
type DelayLog = Arc<Mutex<Vec<(usize, usize, Duration, usize)>>>;

struct Fake {
    info: DeviceInfo,
    mem: Arc<Memory>,
    launches: Arc<Mutex<Vec<Launch>>>,
    delays: DelayLog,
    blocks_per_cu: u32,
    streams: AtomicU64,
}

struct FakeBuffer {
    ptr: u64,
    bytes: usize,
    ordinal: usize,
    mem: Arc<Memory>,
}

impl DeviceBuffer for FakeBuffer {
    fn ptr(&self) -> u64 {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
}

impl Drop for FakeBuffer {
    fn drop(&mut self) {
        self.mem.bytes.lock().unwrap().remove(&self.ptr);
    }
}

#[derive(Clone)]
struct FakeKernel(String);

impl LoadedKernel for FakeKernel {
    fn name(&self) -> &str {
        &self.0
    }
}

impl Fake {
    fn new(ordinal: usize, mem: &Arc<Memory>, launches: &Arc<Mutex<Vec<Launch>>>) -> Fake {
        let info = DeviceInfo {
            vendor: Vendor::Nvidia,
            ordinal,
            name: format!("fake{ordinal}"),
            arch: Some(Arch::Sm90),
            compute_units: 4,
            cooperative_launch: true,
        };
        Fake {
            info,
            mem: mem.clone(),
            launches: launches.clone(),
            delays: Arc::default(),
            blocks_per_cu: 2,
            streams: AtomicU64::new(0),
        }
    }
}

impl Device for Fake {
    type Buffer = FakeBuffer;
    type Kernel = FakeKernel;
    type Stream = usize;
    type Event = ();
    type Graph = ();

    fn count() -> Result<usize, DeviceError> {
        Ok(8)
    }
    fn new(_: usize) -> Result<Self, DeviceError> {
        unreachable!("built with Fake::new")
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn alloc(&self, bytes: usize, _: MemKind) -> Result<FakeBuffer, DeviceError> {
        let ptr = 0x1000_0000 * (self.info.ordinal as u64 + 1)
            + self.mem.next.fetch_add(0x1_0000, Ordering::SeqCst);
        self.mem
            .bytes
            .lock()
            .unwrap()
            .insert(ptr, vec![0; bytes.max(1)]);
        Ok(FakeBuffer {
            ptr,
            bytes,
            ordinal: self.info.ordinal,
            mem: self.mem.clone(),
        })
    }
    fn upload(&self, dst: &FakeBuffer, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        self.mem.bytes.lock().unwrap().get_mut(&dst.ptr).unwrap()[offset..offset + src.len()]
            .copy_from_slice(src);
        Ok(())
    }
    fn download(&self, src: &FakeBuffer, offset: usize, dst: &mut [u8]) -> Result<(), DeviceError> {
        let len = dst.len();
        dst.copy_from_slice(&self.mem.bytes.lock().unwrap()[&src.ptr][offset..offset + len]);
        Ok(())
    }
    fn zero(&self, buf: &FakeBuffer) -> Result<(), DeviceError> {
        self.mem
            .bytes
            .lock()
            .unwrap()
            .get_mut(&buf.ptr)
            .unwrap()
            .fill(0);
        Ok(())
    }
    fn load(&self, artifact: &Artifact, name: &str) -> Result<FakeKernel, DeviceError> {
        assert_eq!(artifact.arch, Arch::Sm90);
        Ok(FakeKernel(name.to_owned()))
    }
    fn blocks_per_cu(&self, _: &FakeKernel, _: u32, _: u32) -> Result<u32, DeviceError> {
        Ok(self.blocks_per_cu)
    }
    fn new_stream(&self) -> Result<usize, DeviceError> {
        Ok(self.streams.fetch_add(1, Ordering::SeqCst) as usize)
    }
    unsafe fn launch_raw(
        &self,
        kernel: &FakeKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: &usize,
        cooperative: bool,
    ) -> Result<(), DeviceError> {
        // The "kernel": `times_out` sets its error word (last argument) at epoch 3.
        if kernel.0 == "times_out"
            && let (Some(KernelArg::U32(3)), Some(KernelArg::Ptr(err))) =
                (args.get(args.len() - 2), args.last())
        {
            self.mem.write_u32(*err, 0xB0);
        }
        chain_kernels(&self.mem, &kernel.0, args);
        let launch = Launch {
            ordinal: self.info.ordinal,
            kernel: kernel.0.clone(),
            spec: spec.clone(),
            args: args.to_vec(),
            cooperative,
            stream: *stream,
        };
        self.launches.lock().unwrap().push(launch);
        Ok(())
    }
    fn delay_stream(&self, stream: &usize, delay: Duration) -> Result<(), DeviceError> {
        let before = self.launches.lock().unwrap().len();
        let entry = (self.info.ordinal, *stream, delay, before);
        self.delays.lock().unwrap().push(entry);
        Ok(())
    }
    fn sync_stream(&self, _: &usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn can_access_peer(&self, _: &Fake) -> Result<bool, DeviceError> {
        Ok(true)
    }
    fn enable_peer_access(&self, _: &Fake) -> Result<(), DeviceError> {
        Ok(())
    }
    fn new_event(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn record(&self, _: &(), _: &usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn elapsed_ms(&self, _: &(), _: &()) -> Result<f32, DeviceError> {
        Ok(0.0)
    }
}

/// Two "kernels" of one op that run on the host memory (issue 38's several launches):
/// `chain_first` writes `2·x` (f16 array, argument 0) to an f32 scratch array (argument 1);
/// `chain_second` writes `scratch + 1` to the f16 output (argument 1). The second sees the
/// first's writes only if it runs after it on the same scratch.
fn chain_kernels(mem: &Memory, name: &str, args: &[KernelArg]) {
    let ptr = |i: usize| match args[i] {
        KernelArg::Ptr(p) => p,
        _ => panic!("argument {i} is an array"),
    };
    let mut m = mem.bytes.lock().unwrap();
    let (src, dst, f): (u64, u64, fn(f64) -> f64) = match name {
        "chain_first" => (ptr(0), ptr(1), |v| 2.0 * v),
        "chain_second" => (ptr(0), ptr(1), |v| v + 1.0),
        _ => return,
    };
    let (from, to) = if name == "chain_first" {
        (Ty::F16, Ty::F32)
    } else {
        (Ty::F32, Ty::F16)
    };
    let values = wavefuse_runtime::exec::decode(&m[&src], from);
    let out: Vec<u8> = values
        .iter()
        .flat_map(|&v| match to {
            Ty::F32 => (f(v) as f32).to_le_bytes().to_vec(),
            _ => half::f16::from_f64(f(v)).to_bits().to_le_bytes().to_vec(),
        })
        .collect();
    let dst = m.get_mut(&dst).expect("bound");
    dst[..out.len()].copy_from_slice(&out);
}

fn artifact() -> Artifact {
    Artifact {
        compiler: CompilerId::Nvrtc,
        compiler_version: "fake".into(),
        arch: Arch::Sm90,
        format: ArtifactFormat::Cubin,
        flags: vec![],
        usage: Default::default(),
        log: String::new(),
        image: vec![0x7f],
    }
}

/// An allreduce-shaped kernel: input, peer-published partials, flags, output, rank, epoch, error.
fn kernel(name: &str, tp: u32, grid: u32) -> LoweredKernel {
    let mut k = LoweredKernel::new(name, Arch::Sm90, tp, 256, grid);
    k.param("x", data("x", Access::Read));
    for (p, elem, len, purpose) in [
        ("partials", Ty::F32, 64, Purpose::Scratch),
        ("flags", Ty::U32, 1, Purpose::Flags),
    ] {
        k.param(
            p,
            ParamKind::PeerArrays {
                elem,
                len,
                access: Access::ReadWrite,
                purpose,
            },
        );
    }
    counter_output_and_scalars(&mut k);
    k.flag_rounds_per_launch = 1;
    k
}

/// A kernel that does not communicate: input, a grid-barrier counter, output, rank, epoch, error.
fn local_kernel(name: &str, tp: u32, grid: u32) -> LoweredKernel {
    let mut k = LoweredKernel::new(name, Arch::Sm90, tp, 256, grid);
    k.param("x", data("x", Access::Read));
    counter_output_and_scalars(&mut k);
    k.coresidency = Some(CoResidency { workgroups: grid });
    k
}

/// 64 FP16 of op-level buffer `buffer`.
fn data(buffer: &str, access: Access) -> ParamKind {
    ParamKind::Array {
        elem: Ty::F16,
        len: 64,
        space: MemorySpace::Global,
        access,
        purpose: Purpose::Data {
            buffer: buffer.to_owned(),
            part: "data",
        },
    }
}

/// The counter, the output `y`, the rank, the epoch and the error word.
fn counter_output_and_scalars(k: &mut LoweredKernel) {
    k.param(
        "counter",
        ParamKind::Array {
            elem: Ty::U32,
            len: 1,
            space: MemorySpace::Global,
            access: Access::ReadWrite,
            purpose: Purpose::Counter,
        },
    );
    k.param("y", data("y", Access::Write));
    k.param(
        "rank",
        ParamKind::Scalar {
            ty: Ty::U32,
            purpose: Purpose::Rank,
        },
    );
    k.epoch_param();
    k.error_param();
}

/// The description the runtime binds by, of a hand-built lowered kernel.
fn abi(k: LoweredKernel) -> Abi {
    Abi::from_kernel(&k)
}

struct Setup {
    mem: Arc<Memory>,
    launches: Arc<Mutex<Vec<Launch>>>,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            mem: Arc::default(),
            launches: Arc::default(),
        }
    }
    fn device(&self, ordinal: usize) -> Fake {
        Fake::new(ordinal, &self.mem, &self.launches)
    }
    fn take(&self) -> Vec<Launch> {
        std::mem::take(&mut *self.launches.lock().unwrap())
    }
}

fn bind_data<D: Device>(
    inst: &mut KernelInstance<'_, D>,
    group: &RankGroup<D>,
) -> (Vec<D::Buffer>, Vec<D::Buffer>) {
    let xs = group.alloc_per_rank(128, MemKind::Device).unwrap();
    let ys = group.alloc_per_rank(128, MemKind::Device).unwrap();
    inst.bind("x", "data", &xs.iter().collect::<Vec<_>>())
        .unwrap();
    inst.bind("y", "data", &ys.iter().collect::<Vec<_>>())
        .unwrap();
    (xs, ys)
}

#[test]
fn one_rank_per_device_args_follow_the_abi_and_peer_slot() {
    let s = Setup::new();
    let group = RankGroup::one_per_device((0..4).map(|o| s.device(o)).collect()).unwrap();
    let mut inst =
        KernelInstance::new(&group, &abi(kernel("allreduce", 4, 2)), &artifact()).unwrap();
    let (xs, ys) = bind_data(&mut inst, &group);
    for epoch in 1..=3 {
        assert_eq!(inst.run().unwrap(), epoch);
    }
    let launches = s.take();
    assert_eq!(launches.len(), 12);
    let flags: Vec<u64> = (0..4)
        .map(|r| inst.owned("flags", r).unwrap().ptr())
        .collect();
    for (i, l) in launches.iter().enumerate() {
        let (rank, epoch) = ((i % 4) as u32, (i / 4 + 1) as u32);
        assert_eq!(
            (l.ordinal, l.kernel.as_str(), l.spec.grid, l.spec.block),
            (rank as usize, "allreduce", [2, 1, 1], [256, 1, 1])
        );
        assert!(
            l.cooperative,
            "flags require co-residency: launched cooperatively where available"
        );
        let a = &l.args;
        assert_eq!(a.len(), 8);
        assert_eq!(a[0], KernelArg::Ptr(xs[rank as usize].ptr()));
        assert_eq!(a[4], KernelArg::Ptr(ys[rank as usize].ptr()));
        assert_eq!(
            a[3],
            KernelArg::Ptr(inst.owned("counter", rank).unwrap().ptr())
        );
        assert_eq!(
            (&a[5], &a[6]),
            (&KernelArg::U32(rank), &KernelArg::U32(epoch))
        );
        assert_eq!(
            a[7],
            KernelArg::Ptr(inst.owned("error_word", rank).unwrap().ptr())
        );
        // The flag table on every rank: slot peer_slot(p) is rank p's flag array.
        let KernelArg::Ptr(table) = a[2] else {
            panic!("device table expected")
        };
        let table = s.mem.read_u64s(table, 4);
        for p in 0..4u32 {
            assert_eq!(
                table[peer_slot(p)],
                flags[p as usize],
                "rank {rank}'s table, slot of peer {p}"
            );
        }
    }
}

#[test]
fn error_word_becomes_barrier_timeout_and_state_restarts() {
    let s = Setup::new();
    let group = RankGroup::on_one_device(s.device(0), 2, SameDeviceMode::Streams).unwrap();
    let mut inst =
        KernelInstance::new(&group, &abi(kernel("times_out", 2, 1)), &artifact()).unwrap();
    let _data = bind_data(&mut inst, &group);
    inst.run().unwrap();
    inst.run().unwrap();
    let err = inst.run().unwrap_err();
    assert!(
        matches!(
            &err,
            Error::BarrierTimeout {
                epoch: 3,
                rank: 0,
                code: 0xB0,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "barrier timeout in kernel times_out, epoch 3 (rank 0, error code 0xb0)"
    );
    // The next launch re-zeroes counters, flags and error words and starts again at epoch 1.
    assert_eq!(inst.run().unwrap(), 1);
    assert_eq!(inst.error_code(0).unwrap(), 0);
}

#[test]
fn same_device_streams_checks_all_ranks_fit_together() {
    let s = Setup::new();
    // Capacity 2 per CU x 4 CUs = 8 workgroups: 4 ranks x 2 fit, 4 ranks x 3 do not.
    let group = RankGroup::on_one_device(s.device(0), 4, SameDeviceMode::Streams).unwrap();
    let mut fits = KernelInstance::new(&group, &abi(kernel("k", 4, 2)), &artifact()).unwrap();
    let _a = bind_data(&mut fits, &group);
    fits.run().unwrap();
    let launches = s.take();
    assert_eq!(
        launches.iter().map(|l| l.stream).collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "one stream per rank"
    );
    assert!(
        launches
            .iter()
            .all(|l| !l.cooperative && l.spec.grid == [2, 1, 1])
    );

    let mut too_big = KernelInstance::new(&group, &abi(kernel("k", 4, 3)), &artifact()).unwrap();
    let _b = bind_data(&mut too_big, &group);
    let err = too_big.launch().unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotCoResident {
                workgroups: 12,
                capacity: 8,
                ..
            }
        ),
        "{err}"
    );
    assert!(s.take().is_empty(), "nothing launched");
}

#[test]
fn a_rank_alone_launches_by_itself_on_its_own_epochs() {
    let s = Setup::new();
    // Capacity 8 workgroups: 4 ranks x 3 do not fit at once, one rank's 3 do.
    let group = RankGroup::on_one_device(s.device(0), 4, SameDeviceMode::Streams).unwrap();
    let mut inst = KernelInstance::new(&group, &abi(local_kernel("k", 4, 3)), &artifact()).unwrap();
    assert!(!inst.communicates());
    let (xs, ys) = bind_data(&mut inst, &group);
    assert!(matches!(
        inst.launch().unwrap_err(),
        Error::NotCoResident {
            workgroups: 12,
            capacity: 8,
            ..
        }
    ));
    s.take();
    let epoch = |l: &Launch| l.args[4].clone();
    // Rank 2 alone, twice, then rank 0: each on its own stream with its own arrays and its
    // own epoch sequence (its counter has seen only its own launches).
    assert_eq!(inst.launch_alone(2).unwrap(), 1);
    assert_eq!(inst.launch_alone(2).unwrap(), 2);
    assert_eq!(inst.launch_alone(0).unwrap(), 1);
    inst.wait().unwrap();
    let l = s.take();
    assert_eq!(l.len(), 3, "one launch each, no other rank");
    assert_eq!(l.iter().map(|l| l.stream).collect::<Vec<_>>(), [2, 2, 0]);
    assert_eq!(
        l.iter().map(epoch).collect::<Vec<_>>(),
        [KernelArg::U32(1), KernelArg::U32(2), KernelArg::U32(1)]
    );
    assert_eq!(l[0].args[0], KernelArg::Ptr(xs[2].ptr()));
    assert_eq!(l[0].args[2], KernelArg::Ptr(ys[2].ptr()));
    assert_eq!(l[0].args[3], KernelArg::U32(2), "the rank scalar");
    assert!(l.iter().all(|l| l.spec.grid == [3, 1, 1]));
    assert!(inst.launch_alone(4).is_err(), "no rank 4 in a group of 4");

    // A launch of every rank after some ran alone: where the ranks' epochs differ, it starts
    // from freshly zeroed state at epoch 1; where they agree, it continues (a group of 2 whose
    // grids fit at once).
    let pair = RankGroup::on_one_device(s.device(0), 2, SameDeviceMode::Streams).unwrap();
    let mut two = KernelInstance::new(&pair, &abi(local_kernel("k", 2, 3)), &artifact()).unwrap();
    let _d = bind_data(&mut two, &pair);
    assert_eq!(two.launch_alone(0).unwrap(), 1);
    let counter = two.owned("counter", 0).unwrap().ptr();
    s.mem.write_u32(counter, 7);
    assert_eq!(two.launch().unwrap(), 1, "epochs 1 and 0 differ: restarted");
    let mut word = [0u8; 4];
    pair.device(0)
        .download(two.owned("counter", 0).unwrap(), 0, &mut word)
        .unwrap();
    assert_eq!(u32::from_le_bytes(word), 0, "the counter was re-zeroed");
    // Both ranks alone once: their epochs agree (2), so the next launch of both continues at 3.
    assert_eq!(two.launch_alone(0).unwrap(), 2);
    assert_eq!(two.launch_alone(1).unwrap(), 2);
    s.mem.write_u32(counter, 7);
    assert_eq!(two.launch().unwrap(), 3, "agreeing epochs continue");
    pair.device(0)
        .download(two.owned("counter", 0).unwrap(), 0, &mut word)
        .unwrap();
    assert_eq!(u32::from_le_bytes(word), 7, "nothing re-zeroed");

    // A kernel with peer arrays cannot run a rank alone: it would wait for its peers.
    let mut peers = KernelInstance::new(&pair, &abi(kernel("k", 2, 1)), &artifact()).unwrap();
    let _p = bind_data(&mut peers, &pair);
    assert!(peers.communicates());
    let err = peers.launch_alone(0).unwrap_err().to_string();
    assert!(err.contains("cannot run one rank alone"), "{err}");
}

#[test]
fn one_per_device_refuses_a_grid_beyond_one_device() {
    let s = Setup::new();
    let group = RankGroup::one_per_device(vec![s.device(0), s.device(1)]).unwrap();
    let mut inst = KernelInstance::new(&group, &abi(kernel("k", 2, 9)), &artifact()).unwrap();
    let _d = bind_data(&mut inst, &group);
    assert!(matches!(
        inst.launch(),
        Err(Error::NotCoResident {
            workgroups: 9,
            capacity: 8,
            ..
        })
    ));
}

#[test]
fn fused_grid_launches_the_ranks_entry_with_each_rank_s_arrays_by_value_and_no_rank() {
    let s = Setup::new();
    let group = RankGroup::on_one_device(s.device(0), 2, SameDeviceMode::FusedGrid).unwrap();
    let mut a = abi(kernel("fused", 2, 3));
    a.ranks_symbol = Some("fused_ranks".into());
    let mut inst = KernelInstance::new(&group, &a, &artifact()).unwrap();
    assert!(inst.launches_ranks_entry());
    let (xs, ys) = bind_data(&mut inst, &group);
    inst.run().unwrap();
    inst.run().unwrap();
    let launches = s.take();
    assert_eq!(launches.len(), 2, "one launch for all ranks");
    let l = &launches[1];
    assert_eq!(l.kernel, "fused_ranks");
    assert_eq!((l.spec.grid, l.cooperative), ([6, 1, 1], true));
    let ptr = |i: usize| match l.args[i] {
        KernelArg::Ptr(p) => p,
        ref a => panic!("argument {i}: {a:?}"),
    };
    // x by rank, the two peer tables once, counter by rank, y by rank, the epoch (no rank),
    // the error word by rank.
    assert_eq!(l.args.len(), 11, "{:?}", l.args);
    assert_eq!([ptr(0), ptr(1)], [xs[0].ptr(), xs[1].ptr()]);
    let own = |name: &str, r: u32| inst.owned(name, r).unwrap().ptr();
    assert_eq!([ptr(4), ptr(5)], [own("counter", 0), own("counter", 1)]);
    assert_eq!([ptr(6), ptr(7)], [ys[0].ptr(), ys[1].ptr()]);
    assert_eq!(l.args[8], KernelArg::U32(2), "epoch");
    assert_eq!(
        [ptr(9), ptr(10)],
        [own("error_word", 0), own("error_word", 1)]
    );
    // The peer tables hold every rank's array in its slot, as each rank's own table does.
    assert_eq!(
        s.mem.read_u64s(ptr(3), 2),
        [own("flags", 0), own("flags", 1)]
    );
}

#[test]
fn fused_grid_launches_a_kernel_without_ranks_entry_per_rank() {
    let s = Setup::new();
    let group = RankGroup::on_one_device(s.device(0), 2, SameDeviceMode::FusedGrid).unwrap();
    let mut inst = KernelInstance::new(&group, &abi(kernel("k", 2, 3)), &artifact()).unwrap();
    assert!(!inst.launches_ranks_entry());
    let _d = bind_data(&mut inst, &group);
    inst.run().unwrap();
    let launches = s.take();
    assert_eq!(launches.len(), 2, "one launch per rank");
    assert!(
        launches
            .iter()
            .all(|l| l.kernel == "k" && l.spec.grid == [3, 1, 1])
    );
    assert_ne!(
        launches[0].stream, launches[1].stream,
        "each rank on its own stream"
    );
}

/// `wavefuse ab` times a TP kernel that does not communicate as rank 0 alone on one GPU, in a
/// fused-grid group (found on an H100: every TP 4 row of `gemv_int4` failed with "a FusedGrid
/// group launches all ranks as one grid"). A kernel without a ranks entry launches per rank
/// there, so one rank runs alone; through a ranks entry it is refused.
#[test]
fn fused_grid_launches_a_rank_alone_unless_through_the_ranks_entry() {
    let s = Setup::new();
    let group = RankGroup::on_one_device(s.device(0), 4, SameDeviceMode::FusedGrid).unwrap();
    let mut inst = KernelInstance::new(&group, &abi(local_kernel("k", 4, 3)), &artifact()).unwrap();
    assert!(!inst.launches_ranks_entry());
    let _d = bind_data(&mut inst, &group);
    assert_eq!(inst.launch_alone(0).unwrap(), 1);
    inst.wait().unwrap();
    let l = s.take();
    assert_eq!(l.len(), 1, "rank 0 alone");
    assert_eq!((l[0].kernel.as_str(), l[0].spec.grid), ("k", [3, 1, 1]));
    assert_eq!(l[0].args[3], KernelArg::U32(0), "the rank scalar");

    let pair = RankGroup::on_one_device(s.device(0), 2, SameDeviceMode::FusedGrid).unwrap();
    let mut a = abi(local_kernel("fused", 2, 3));
    a.ranks_symbol = Some("fused_ranks".into());
    let mut fused = KernelInstance::new(&pair, &a, &artifact()).unwrap();
    assert!(fused.launches_ranks_entry());
    let _f = bind_data(&mut fused, &pair);
    let err = fused.launch_alone(0).unwrap_err().to_string();
    assert!(err.contains("as one grid"), "{err}");
    assert!(s.take().is_empty(), "nothing launched");
}

#[test]
fn invalid_bindings_are_typed_errors() {
    let s = Setup::new();
    let group = RankGroup::on_one_device(s.device(0), 2, SameDeviceMode::Streams).unwrap();
    let mut inst = KernelInstance::new(&group, &abi(kernel("k", 2, 1)), &artifact()).unwrap();
    let small = group.alloc_per_rank(16, MemKind::Device).unwrap();
    let err = inst.bind("x", "data", &[&small[0], &small[1]]).unwrap_err();
    assert!(
        err.to_string()
            .contains("has 16 bytes, the kernel reads 128"),
        "{err}"
    );
    let err = inst
        .bind("nope", "data", &[&small[0], &small[1]])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no parameter is part `data` of buffer `nope`"),
        "{err}"
    );
    let err = inst.launch().unwrap_err();
    assert!(
        err.to_string().contains("parameter `x` is not bound"),
        "{err}"
    );
    let err = KernelInstance::new(&group, &abi(kernel("k", 4, 1)), &artifact())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("built for TP 4 but the group has 2 ranks"),
        "{err}"
    );
    assert!(RankGroup::on_one_device(s.device(0), 9, SameDeviceMode::Streams).is_err());
}

#[test]
fn per_device_refuses_more_ranks_than_visible_devices() {
    assert_eq!(per_device_ordinals(2, 4).unwrap(), vec![0, 1]);
    assert_eq!(per_device_ordinals(4, 4).unwrap(), vec![0, 1, 2, 3]);
    let err = per_device_ordinals(4, 2).unwrap_err().to_string();
    assert!(
        err.contains("TP 4") && err.contains("needs 4 devices") && err.contains("2 are visible"),
        "{err}"
    );
    assert!(per_device_ordinals(0, 2).is_err());
    // The fake driver sees 8 devices: a 9-rank group is refused before any device is opened.
    assert!(matches!(
        RankGroup::<Fake>::per_device(9),
        Err(Error::RankGroup(m)) if m.contains("9 devices")
    ));
}

#[test]
fn one_per_device_state_lives_on_each_ranks_device() {
    let s = Setup::new();
    let group = RankGroup::one_per_device((0..4).map(|o| s.device(o)).collect()).unwrap();
    let inst = KernelInstance::new(&group, &abi(kernel("allreduce", 4, 2)), &artifact()).unwrap();
    for r in 0..4u32 {
        for name in ["flags", "partials", "counter", "error_word"] {
            let buf = inst.owned(name, r).unwrap();
            assert_eq!(buf.ordinal(), r as usize, "rank {r}'s `{name}`");
        }
    }
    // Rank r's copy of each peer table is on device r (the fake addresses encode the device).
    let on_device = |ptr: u64| (ptr / 0x1000_0000 - 1) as usize;
    let flags: Vec<u64> = (0..4)
        .map(|r| inst.owned("flags", r).unwrap().ptr())
        .collect();
    let mut inst = inst;
    let _d = bind_data(&mut inst, &group);
    for r in 0..4u32 {
        let KernelArg::Ptr(table) = inst.args(r, 1).unwrap()[2] else {
            panic!("device table expected")
        };
        assert_eq!(on_device(table), r as usize);
        let t = s.mem.read_u64s(table, 4);
        for p in 0..4u32 {
            assert_eq!(t[peer_slot(p)], flags[p as usize]);
            assert_eq!(
                on_device(t[peer_slot(p)]),
                p as usize,
                "peer {p}'s flags on device {p}"
            );
        }
    }
}

#[test]
fn skew_delays_each_rank_before_its_launch() {
    let alt: Skew = "10:alt".parse().unwrap();
    assert_eq!(alt.pattern, SkewPattern::Alternating);
    assert_eq!(alt.to_string(), "10:alt");
    assert_eq!(alt.delay(0, 3, 0), Duration::ZERO);
    assert_eq!(alt.delay(2, 3, 0), Duration::from_micros(20));
    assert_eq!(alt.delay(0, 3, 1), Duration::from_micros(20));
    assert_eq!(alt.delay(2, 3, 1), Duration::ZERO);
    let desc: Skew = "5:desc".parse().unwrap();
    assert_eq!(desc.delay(0, 4, 7), Duration::from_micros(15));
    assert!("0".parse::<Skew>().unwrap().is_none());
    assert!("x".parse::<Skew>().is_err());
    assert!("5:sideways".parse::<Skew>().is_err());

    let s = Setup::new();
    let devices: Vec<Fake> = (0..3).map(|o| s.device(o)).collect();
    let logs: Vec<_> = devices.iter().map(|d| d.delays.clone()).collect();
    let group = RankGroup::one_per_device(devices).unwrap().with_skew(alt);
    let mut inst =
        KernelInstance::new(&group, &abi(kernel("allreduce", 3, 2)), &artifact()).unwrap();
    let _d = bind_data(&mut inst, &group);
    inst.run().unwrap();
    inst.run().unwrap();
    let us = |r: usize| -> Vec<(u128, usize)> {
        let log = logs[r].lock().unwrap();
        log.iter()
            .map(|(_, _, d, before)| (d.as_micros(), *before))
            .collect()
    };
    // Launch 0 ascending (rank r waits r steps), launch 1 descending; no zero delays enqueued;
    // each delay is enqueued before that launch's first kernel.
    assert_eq!(us(0), vec![(20, 3)]);
    assert_eq!(us(1), vec![(10, 0), (10, 3)]);
    assert_eq!(us(2), vec![(20, 0)]);
    assert_eq!(s.take().len(), 6);
}

#[test]
fn capturing_launches_plainly_after_the_capacity_check_and_without_skew() {
    let s = Setup::new();
    let devices: Vec<Fake> = (0..2).map(|o| s.device(o)).collect();
    let logs: Vec<_> = devices.iter().map(|d| d.delays.clone()).collect();
    let group = RankGroup::one_per_device(devices)
        .unwrap()
        .with_skew("50".parse().unwrap());
    let mut inst =
        KernelInstance::new(&group, &abi(kernel("allreduce", 2, 8)), &artifact()).unwrap();
    let _d = bind_data(&mut inst, &group);
    group.set_capturing(true);
    inst.launch().unwrap();
    inst.launch().unwrap();
    group.set_capturing(false);
    let launches = s.take();
    assert_eq!(launches.len(), 4);
    assert!(
        launches.iter().all(|l| !l.cooperative),
        "graph-safe plain launches"
    );
    // Epochs still advance per launch: a graph holds each launch's own epoch.
    assert_eq!(launches[2].args[6], KernelArg::U32(2));
    assert!(
        logs.iter().all(|l| l.lock().unwrap().is_empty()),
        "no skew in a graph"
    );
    inst.launch().unwrap();
    assert!(s.take().iter().all(|l| l.cooperative));
    assert_eq!(
        logs[1].lock().unwrap().len(),
        1,
        "skew again outside capture"
    );

    // The capacity check still refuses a grid that cannot be resident (§5.9).
    let mut big = KernelInstance::new(&group, &abi(kernel("k", 2, 9)), &artifact()).unwrap();
    let _d2 = bind_data(&mut big, &group);
    group.set_capturing(true);
    assert!(matches!(big.launch(), Err(Error::NotCoResident { .. })));
    group.set_capturing(false);
}

/// A programmatic dependent launch only for a kernel whose ABI says it waits for its stream
/// predecessor; the spec each launch reaches the driver with says which.
#[test]
fn a_dependent_launch_needs_the_abis_consent() {
    let s = Setup::new();
    let group = RankGroup::on_one_device(s.device(0), 1, SameDeviceMode::Streams).unwrap();
    let plain = abi(local_kernel("k", 1, 3));
    assert!(!plain.dependent_launch);
    let mut inst = KernelInstance::new(&group, &plain, &artifact()).unwrap();
    bind_data(&mut inst, &group);
    let err = inst.set_dependent_launch(true).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not allow a dependent launch"),
        "{err}"
    );
    inst.launch().unwrap();
    inst.wait().unwrap();
    assert!(s.take().iter().all(|l| !l.spec.dependent));

    // A grid barrier needs co-residency: no prologue, so no dependent launch, on any target.
    let mut barrier = local_kernel("k", 1, 3);
    barrier.dependent_launch = true;
    assert!(!abi(barrier).dependent_launch);
    let coresident = LaunchSpec {
        dependent: true,
        ..LaunchSpec::linear(3, 256).coresident()
    };
    assert!(
        !coresident.programmatic(),
        "a co-resident launch stays in stream order"
    );

    let mut waits = local_kernel("k", 1, 3);
    waits.coresidency = None;
    waits.dependent_launch = true;
    let mut inst = KernelInstance::new(&group, &abi(waits), &artifact()).unwrap();
    bind_data(&mut inst, &group);
    inst.set_dependent_launch(true).unwrap();
    assert!(inst.dependent_launch());
    inst.launch().unwrap();
    inst.launch_alone(0).unwrap();
    inst.wait().unwrap();
    let l = s.take();
    assert_eq!(l.len(), 2);
    assert!(
        l.iter().all(|l| l.spec.dependent),
        "every launch is dependent"
    );
    inst.set_dependent_launch(false).unwrap();
    inst.launch().unwrap();
    inst.wait().unwrap();
    assert!(s.take().iter().all(|l| !l.spec.dependent));
}

/// A hand-written kernel's description (issue 38): `value` scalars are bound with their numbers
/// (u32 and i32), and a 2-D grid with a 2-D workgroup is launched as described.
#[test]
fn value_scalars_and_a_2d_launch_are_bound_as_described() {
    use wavefuse_codegen::abi::{AbiKind, AbiParam, AbiPurpose, AbiTy};
    let s = Setup::new();
    let group = RankGroup::one_per_device(vec![s.device(0)]).unwrap();
    let mut a = abi(local_kernel("splitk", 1, 4));
    a.coresidency = None;
    a.grid_dims = Some([2, 4, 1]);
    a.block_dims = Some([64, 2, 1]);
    let value = |name: &str, ty: AbiTy, v: &str| AbiParam {
        index: 0,
        name: name.into(),
        kind: AbiKind::Scalar,
        ty,
        purpose: AbiPurpose::Value,
        buffer: None,
        part: None,
        len: None,
        bytes: None,
        align: None,
        access: None,
        space: None,
        memory: None,
        init: None,
        value: Some(v.into()),
    };
    a.params.push(value("K", AbiTy::I32, "5120"));
    a.params.push(value("splits", AbiTy::U32, "4"));
    for (i, p) in a.params.iter_mut().enumerate() {
        p.index = i as u32;
    }
    let mut inst = KernelInstance::new(&group, &a, &artifact()).unwrap();
    let _bufs = bind_data(&mut inst, &group);
    inst.run().unwrap();
    let l = s.take().pop().unwrap();
    assert_eq!((l.spec.grid, l.spec.block), ([2, 4, 1], [64, 2, 1]));
    let n = l.args.len();
    assert_eq!(
        (&l.args[n - 2], &l.args[n - 1]),
        (&KernelArg::I32(5120), &KernelArg::U32(4))
    );

    // A value that does not fit its type is refused when the kernel is loaded.
    let mut bad = a.clone();
    let last = bad.params.len() - 1;
    bad.params[last].value = Some("-1".into());
    let e = KernelInstance::new(&group, &bad, &artifact())
        .err()
        .unwrap();
    assert!(e.to_string().contains("value scalar `splits`"), "{e}");
}

/// FP16 zero points (issue 38): a hand-written kernel's `qzeros` declared f16 `[K/G, N]` gets the
/// zero points decoded from the packed words under the weight's convention (v1: nibble + 1).
#[test]
fn fp16_zero_points_are_uploaded_decoded_from_the_packed_words() {
    use wavefuse_codegen::abi::{AbiKind, AbiParam, AbiPurpose, AbiTy};
    use wavefuse_ir::reference::{HostData, HostTensor, PackedInt4};
    use wavefuse_runtime::exec::OpKernel;
    let ir = wavefuse_ir::parse(
        "kernel g(tp=1) {
    buf0 = input w : gptq<group=8, zero=v1, scale=f16>[k=16, n=16] col_parallel(tp=1) @global index=local
    buf1 = input x : f16[1, 16] replicated @global index=local
    buf2 = output y : f16[1, 16] col_parallel(tp=1) @global index=local
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}",
    )
    .unwrap();
    let array = |name: &str, ty: AbiTy, part: &str, buffer: &str, len: u64| AbiParam {
        index: 0,
        name: name.into(),
        kind: AbiKind::Array,
        ty,
        purpose: AbiPurpose::Data,
        buffer: Some(buffer.into()),
        part: Some(part.into()),
        len: Some(len),
        bytes: None,
        align: None,
        access: None,
        space: None,
        memory: None,
        init: None,
        value: None,
    };
    let mut a = abi(LoweredKernel::new("g", Arch::Sm90, 1, 64, 1));
    a.params = vec![
        array("qweight", AbiTy::U32, "qweight", "w", 2 * 16),
        array("scales", AbiTy::F16, "scales", "w", 2 * 16),
        array("zeros", AbiTy::F16, "qzeros", "w", 2 * 16),
        array("x", AbiTy::F16, "data", "x", 16),
        array("y", AbiTy::F16, "data", "y", 16),
    ];
    for (i, p) in a.params.iter_mut().enumerate() {
        p.index = i as u32;
    }
    let s = Setup::new();
    let group = RankGroup::one_per_device(vec![s.device(0)]).unwrap();
    let k = OpKernel::new(&group, &ir, &a, &artifact()).unwrap();
    // Group 0: columns 0..16 store nibbles 0..15 (words 0x76543210, 0xFEDCBA98); group 1: all 2.
    let qzeros = vec![
        0x7654_3210u32 as i32,
        0xFEDC_BA98u32 as i32,
        0x2222_2222,
        0x2222_2222,
    ];
    let w = HostData::Int4(PackedInt4 {
        qweight: vec![0; 32],
        scales: vec![1.0; 32],
        qzeros,
        g_idx: None,
    });
    let x = HostData::Tensor(HostTensor {
        dtype: wavefuse_ir::ScalarType::F16,
        shape: vec![1, 16],
        data: vec![0.5; 16],
    });
    let mut inputs = std::collections::BTreeMap::new();
    inputs.insert(ir.buffer_by_name("w").unwrap(), w);
    inputs.insert(ir.buffer_by_name("x").unwrap(), x);
    let inputs = [inputs];
    k.upload_inputs(&inputs).unwrap();
    let buf = k.array("w", "qzeros").unwrap()[0].ptr();
    let bytes = s.mem.bytes.lock().unwrap()[&buf].clone();
    let zeros = wavefuse_runtime::exec::decode(&bytes, Ty::F16);
    let want: Vec<f64> = (1..=16)
        .map(f64::from)
        .chain(std::iter::repeat_n(3.0, 16))
        .collect();
    assert_eq!(zeros, want);
    // The bytes a timing rotation binds are the same (`ab`'s input sets are built from
    // `encoded_inputs`; built from the packed words instead, the H200 run of 2026-12-06 bound 16
    // bytes per 4 words where this kernel reads 64 and stopped: "`w.qzeros` ... has 87040 bytes,
    // the kernel reads 348160").
    let encoded = k.encoded_inputs(&inputs).unwrap();
    let z = encoded
        .iter()
        .find(|e| e.buffer == "w" && e.part == "qzeros")
        .expect("qzeros is an input array");
    assert_eq!(z.per_rank, vec![bytes]);
}

/// The op-level kernel of the issue-38 tests: y = W·x, 16 × 16.
fn gemv16() -> wavefuse_ir::Kernel {
    wavefuse_ir::parse(
        "kernel g(tp=1) {
    buf0 = input w : gptq<group=8, zero=v1, scale=f16>[k=16, n=16] col_parallel(tp=1) @global index=local
    buf1 = input x : f16[1, 16] replicated @global index=local
    buf2 = output y : f16[1, 16] col_parallel(tp=1) @global index=local
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}",
    )
    .unwrap()
}

fn array_param(
    name: &str,
    ty: wavefuse_codegen::abi::AbiTy,
    part: &str,
    buffer: &str,
    len: u64,
) -> wavefuse_codegen::abi::AbiParam {
    use wavefuse_codegen::abi::{AbiKind, AbiParam, AbiPurpose};
    AbiParam {
        index: 0,
        name: name.into(),
        kind: AbiKind::Array,
        ty,
        purpose: AbiPurpose::Data,
        buffer: Some(buffer.into()),
        part: Some(part.into()),
        len: Some(len),
        bytes: None,
        align: None,
        access: None,
        space: None,
        memory: None,
        init: None,
        value: None,
    }
}

fn x_inputs(ir: &wavefuse_ir::Kernel, x: Vec<f64>) -> Vec<wavefuse_ir::reference::RankInputs> {
    use wavefuse_ir::reference::{HostData, HostTensor};
    let mut inputs = std::collections::BTreeMap::new();
    inputs.insert(
        ir.buffer_by_name("x").unwrap(),
        HostData::Tensor(HostTensor {
            dtype: wavefuse_ir::ScalarType::F16,
            shape: vec![1, x.len()],
            data: x,
        }),
    );
    vec![inputs]
}

/// Several launches for one op (issue 38): `OpKernel::chain` binds the op's arrays to the
/// launches that take them and one shared scratch array to both, launches them in order on the
/// rank's one stream, and the second launch reads what the first wrote.
#[test]
fn an_op_of_two_launches_shares_its_scratch_and_runs_in_order_on_one_stream() {
    use wavefuse_codegen::abi::AbiTy;
    use wavefuse_runtime::exec::{OpKernel, SharedScratch};
    let ir = gemv16();
    let launch = |symbol: &str, params| {
        let mut a = abi(LoweredKernel::new(symbol, Arch::Sm90, 1, 64, 1));
        a.params = params;
        a
    };
    let first = launch(
        "chain_first",
        vec![
            array_param("x", AbiTy::F16, "data", "x", 16),
            array_param("partials", AbiTy::F32, "data", "partials", 16),
        ],
    );
    let mut second = launch(
        "chain_second",
        vec![
            array_param("partials", AbiTy::F32, "data", "partials", 16),
            array_param("y", AbiTy::F16, "data", "y", 16),
        ],
    );
    second.params[1].index = 1;
    let mut first = first;
    first.params[1].index = 1;
    let shared = [SharedScratch {
        name: "partials".into(),
        elem: Ty::F32,
        len: 16,
    }];
    let s = Setup::new();
    let group = RankGroup::one_per_device(vec![s.device(0)]).unwrap();
    let mut k = OpKernel::chain(
        &group,
        &ir,
        &[first.clone(), second.clone()],
        &artifact(),
        &shared,
    )
    .unwrap();
    assert_eq!(k.launches(), 2);
    let x: Vec<f64> = (0..16).map(|i| f64::from(i) / 4.0).collect();
    let out = k.run(&x_inputs(&ir, x.clone())).unwrap();
    let y = &out[0][&ir.buffer_by_name("y").unwrap()].data;
    let want: Vec<f64> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(
        y, &want,
        "the reduce launch read the partials the first wrote"
    );
    let launches = s.take();
    assert_eq!(
        launches
            .iter()
            .map(|l| l.kernel.as_str())
            .collect::<Vec<_>>(),
        ["chain_first", "chain_second"]
    );
    assert_eq!(launches[0].stream, launches[1].stream, "one stream");
    assert_eq!(
        launches[0].args[1], launches[1].args[0],
        "the same scratch array in both launches"
    );

    // An output no launch takes is refused, naming it.
    let e = OpKernel::chain(&group, &ir, &[first], &artifact(), &shared)
        .err()
        .unwrap();
    assert!(e.to_string().contains("output `y`"), "{e}");
    // Two launches that disagree on an array's length are refused.
    let mut short = second.clone();
    short.params[1].len = Some(8);
    let twice = launch(
        "chain_first",
        vec![
            array_param("x", AbiTy::F16, "data", "x", 16),
            array_param("y", AbiTy::F16, "data", "y", 16),
        ],
    );
    let e = OpKernel::chain(&group, &ir, &[twice, short], &artifact(), &shared)
        .err()
        .unwrap();
    assert!(e.to_string().contains("`y.data` disagree"), "{e}");
}

/// Pre-quantised activations (issue 38): an FP16 input bound to an `i8` `data` parameter is
/// uploaded as the per-token INT8 codes of `quantise_rows` (s = max|x| / 127, q = rne(x · 127 /
/// max|x|)), and part `qscale` as the scale.
#[test]
fn host_quantised_activations_are_uploaded_as_int8_codes_and_a_scale() {
    use wavefuse_codegen::abi::AbiTy;
    use wavefuse_runtime::exec::{OpKernel, quantise_rows};
    let ir = gemv16();
    let mut a = abi(LoweredKernel::new("w4a8", Arch::Sm90, 1, 64, 1));
    a.params = vec![
        array_param("xq", AbiTy::I8, "data", "x", 16),
        array_param("xs", AbiTy::F32, "qscale", "x", 1),
        array_param("y", AbiTy::F16, "data", "y", 16),
    ];
    for (i, p) in a.params.iter_mut().enumerate() {
        p.index = i as u32;
    }
    let s = Setup::new();
    let group = RankGroup::one_per_device(vec![s.device(0)]).unwrap();
    let k = OpKernel::new(&group, &ir, &a, &artifact()).unwrap();
    // max |x| = 2.5: s = 2.5 / 127, r = 127 / 2.5 = 50.8 rounded to f32 (50.79999924): 0.5 →
    // 25.4 → 25; -2.5 → -127; 1.25 → 63.4999990 → 63 (not a tie: r is just under 50.8).
    let mut x = vec![0.0; 16];
    x[..4].copy_from_slice(&[0.5, -2.5, 1.25, 0.0]);
    k.upload_inputs(&x_inputs(&ir, x.clone())).unwrap();
    let read = |part: &str, ty: Ty| {
        let ptr = k.array("x", part).unwrap()[0].ptr();
        let bytes = s.mem.bytes.lock().unwrap()[&ptr].clone();
        wavefuse_runtime::exec::decode(&bytes, ty)
    };
    let (codes, scale) = (read("data", Ty::I8), read("qscale", Ty::F32));
    assert_eq!(&codes[..4], &[25.0, -127.0, 63.0, 0.0]);
    assert_eq!(scale, [f64::from(2.5f32 / 127.0)]);
    let (q, sc) = quantise_rows(&x, 16);
    assert_eq!(q[..4], [25, -127, 63, 0]);
    assert_eq!(sc, scale);
}
