//! Tensor-parallel rank groups: `tp` ranks running the same kernel, each with its own buffers,
//! exchanging data through peer pointer tables.
//!
//! # Placement
//! - **One rank per device** ([`RankGroup::one_per_device`]): rank r runs on device r; peer access
//!   is enabled between every pair, so a kernel on rank r can read and write rank p's buffers.
//! - **All ranks on one device** ([`RankGroup::on_one_device`]): every rank has its own buffers on
//!   the same GPU and runs the same kernel and protocol. This is how TP = 2, 4, 8 runs on a single
//!   H200. It must be deadlock-free by construction: a rank that waits on another rank's flag
//!   needs that rank's workgroups to be running, so every workgroup of every rank must be
//!   resident at once. Two modes ([`SameDeviceMode`]):
//!   - [`SameDeviceMode::Streams`] (default; the ABI the writer emits today, `rank` a scalar
//!     parameter): one launch per rank, each on its own stream, allowed only when the device's
//!     co-resident capacity (occupancy × SMs) covers the workgroups of all ranks together and the
//!     ranks fit the device's concurrent hardware queues (8, CUDA's default
//!     `CUDA_DEVICE_MAX_CONNECTIONS`). With capacity for everyone, the block scheduler dispatches
//!     every rank's workgroups as soon as their launches arrive; nothing any workgroup waits for
//!     can be stuck behind a waiter. The programming model does not promise concurrency across
//!     streams, so the bounded waits (DESIGN.md §5.10) remain the backstop: a scheduler that
//!     serialised the launches would produce [`crate::Error::BarrierTimeout`], never a hang.
//!   - [`SameDeviceMode::FusedGrid`]: a kernel with a *ranks entry*
//!     ([`Abi::ranks_symbol`](wavefuse_codegen::abi::Abi::ranks_symbol), which the C++ writer
//!     emits for a kernel generated with its ranks on one device) launches all ranks as one grid
//!     of `tp × grid` workgroups, cooperative where the driver offers it (so co-residency of all
//!     ranks is the driver's guarantee): no fork and join of streams per launch. The entry
//!     derives the rank from the workgroup id (`rank = blockIdx.x / grid`, workgroup
//!     `blockIdx.x % grid`) and takes each per-rank array parameter `tp` times by value, in
//!     rank order; peer tables and the other scalars once; no `rank` scalar. A kernel without
//!     one (a hand-written kernel) launches as in `Streams`.
//!
//! # One rank per device
//! [`RankGroup::per_device`] opens devices `0..tp` (refusing, with the count it sees, when fewer
//! are visible) and enables peer access between every pair. Every runtime-owned array — flags,
//! scratch, grid-barrier counters, the error word — is allocated on its rank's own device
//! ([`RankGroup::alloc_per_rank`]); flags with [`MemKind::Flags`] (uncached on AMD, DESIGN.md
//! §5.12). Each rank's peer table is uploaded to that rank's device: the same pointers, in the
//! same slots, on every device. The epochs of [`crate::sync`] are the group's, never reset
//! between launches (§5.4).
//!
//! # Skew
//! A [`Skew`] delays rank r's launch by a multiple of a step before every launch
//! ([`Device::delay_stream`]): the flag protocol must give the same result whichever rank starts
//! first and however late (DESIGN.md §5.3, §5.10), so the GPU suite runs with skew on purpose.
//!
//! # Peer order
//! Peer tables are built with the one rule the generated code uses,
//! [`wavefuse_codegen::lowered::peer_slot`]: slot `peer_slot(p)` holds rank p's pointer, in every
//! rank's table (DESIGN.md §5.5).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use wavefuse_codegen::lowered::peer_slot;

use crate::device::{Device, DeviceBuffer, LoadedKernel, MemKind};
use crate::error::{Error, Result};
use crate::launch::{self, Capacity, CoResidency, KernelArg, LaunchSpec};

/// Concurrent hardware queues a same-device group may rely on (CUDA's default
/// `CUDA_DEVICE_MAX_CONNECTIONS`; HIP's default hardware queue count is 4 per device but it
/// round-robins more streams over them, so AMD groups are also held to this bound).
pub const MAX_CONCURRENT_RANKS: u32 = 8;

/// How the ranks of a same-device group are launched.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SameDeviceMode {
    /// One launch per rank on its own stream, after checking that all ranks' workgroups fit.
    Streams,
    /// One launch of `tp × grid` workgroups through the kernel's ranks entry, which derives the
    /// rank from the workgroup id; as `Streams` for a kernel without one.
    FusedGrid,
}

/// Where the ranks run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Rank r on device r.
    OnePerDevice,
    /// Every rank on one device.
    SameDevice(SameDeviceMode),
}

/// Which rank starts late, launch after launch.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum SkewPattern {
    /// Rank r waits r steps: rank 0 first, the last rank last.
    #[default]
    Ascending,
    /// Rank r waits `tp − 1 − r` steps: the last rank first, rank 0 last.
    Descending,
    /// Ascending on even launches, descending on odd ones: every rank is both early and late.
    Alternating,
}

/// A deliberate delay of each rank's launch: rank r's stream is held for `k(r) × step` before
/// the launch, `k` given by the pattern. Zero steps is no skew.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Skew {
    /// The delay of one step.
    pub step: Duration,
    /// Which ranks wait how many steps.
    pub pattern: SkewPattern,
}

impl Skew {
    /// No skew.
    pub fn none() -> Skew {
        Skew::default()
    }

    /// Whether any rank is ever delayed.
    pub fn is_none(&self) -> bool {
        self.step.is_zero()
    }

    /// Rank `rank`'s delay (of `tp` ranks) before the group's launch number `launch` (from 0).
    pub fn delay(&self, rank: u32, tp: u32, launch: u64) -> Duration {
        let up = rank;
        let down = tp.saturating_sub(1).saturating_sub(rank);
        let steps = match self.pattern {
            SkewPattern::Ascending => up,
            SkewPattern::Descending => down,
            SkewPattern::Alternating if launch % 2 == 0 => up,
            SkewPattern::Alternating => down,
        };
        self.step * steps
    }
}

impl fmt::Display for Skew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pattern = match self.pattern {
            SkewPattern::Ascending => "asc",
            SkewPattern::Descending => "desc",
            SkewPattern::Alternating => "alt",
        };
        write!(f, "{}:{pattern}", self.step.as_micros())
    }
}

/// `STEP_US[:asc|desc|alt]`, e.g. `50`, `20:alt`; `0` is no skew.
impl FromStr for Skew {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Skew, String> {
        let (step, pattern) = s.split_once(':').unwrap_or((s, "asc"));
        let us: u64 = step.trim().trim_end_matches("us").parse().map_err(|_| {
            format!("skew `{s}`: expected STEP_US[:asc|desc|alt], e.g. `50` or `20:alt`")
        })?;
        let pattern = match pattern {
            "asc" => SkewPattern::Ascending,
            "desc" => SkewPattern::Descending,
            "alt" => SkewPattern::Alternating,
            p => return Err(format!("skew pattern `{p}`: expected asc, desc or alt")),
        };
        Ok(Skew {
            step: Duration::from_micros(us),
            pattern,
        })
    }
}

/// The device ordinals of a one-rank-per-device group of `tp` ranks when `visible` devices are
/// visible: `0..tp`, or a clear refusal when there are too few.
pub fn per_device_ordinals(tp: u32, visible: usize) -> Result<Vec<usize>> {
    if tp == 0 {
        return Err(Error::RankGroup(
            "a rank group needs at least one rank".into(),
        ));
    }
    if tp as usize > visible {
        return Err(Error::RankGroup(format!(
            "TP {tp} with one rank per device needs {tp} devices, but {visible} are visible \
             (check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES, or use same-device placement)"
        )));
    }
    Ok((0..tp as usize).collect())
}

/// A TP group of ranks.
pub struct RankGroup<D: Device> {
    /// Rank r's device (the same one for every rank of a same-device group).
    devices: Vec<Arc<D>>,
    /// Rank r's stream.
    streams: Vec<D::Stream>,
    placement: Placement,
    /// The launch skew, applied by [`RankGroup::launch`].
    skew: Skew,
    /// Group launches so far (the skew pattern's launch number).
    launches: AtomicU64,
    /// Whether the streams are being captured into graphs (see [`RankGroup::set_capturing`]).
    capturing: AtomicBool,
}

impl<D: Device> RankGroup<D> {
    /// `tp` ranks on devices `0..tp` (one each), with peer access enabled between every pair.
    /// Refuses when fewer than `tp` devices are visible ([`per_device_ordinals`]).
    pub fn per_device(tp: u32) -> Result<Self> {
        let ordinals = per_device_ordinals(tp, D::count()?)?;
        let devices = ordinals
            .into_iter()
            .map(D::new)
            .collect::<Result<Vec<_>, _>>()?;
        RankGroup::one_per_device(devices)
    }

    /// Rank r on `devices[r]`, with peer access enabled between every pair. Fails when a pair
    /// cannot access each other's memory.
    pub fn one_per_device(devices: Vec<D>) -> Result<Self> {
        if devices.is_empty() {
            return Err(Error::RankGroup(
                "a rank group needs at least one device".into(),
            ));
        }
        for (a, da) in devices.iter().enumerate() {
            for (b, db) in devices.iter().enumerate() {
                if a == b {
                    continue;
                }
                if da.info().ordinal == db.info().ordinal {
                    return Err(Error::RankGroup(format!(
                        "ranks {a} and {b} are on the same device; use on_one_device"
                    )));
                }
                if !da.can_access_peer(db)? {
                    let (x, y) = (&da.info().name, &db.info().name);
                    return Err(Error::RankGroup(format!(
                        "device {a} ({x}) cannot access device {b} ({y}) as a peer"
                    )));
                }
                da.enable_peer_access(db)?;
            }
        }
        let devices: Vec<Arc<D>> = devices.into_iter().map(Arc::new).collect();
        let streams = devices
            .iter()
            .map(|d| d.new_stream())
            .collect::<Result<_, _>>()?;
        Ok(RankGroup::assemble(
            devices,
            streams,
            Placement::OnePerDevice,
        ))
    }

    /// `tp` ranks on one device.
    pub fn on_one_device(device: D, tp: u32, mode: SameDeviceMode) -> Result<Self> {
        if tp == 0 {
            return Err(Error::RankGroup(
                "a rank group needs at least one rank".into(),
            ));
        }
        if mode == SameDeviceMode::Streams && tp > MAX_CONCURRENT_RANKS {
            return Err(Error::RankGroup(format!(
                "{tp} ranks on one device exceed the {MAX_CONCURRENT_RANKS} concurrent hardware queues; use FusedGrid"
            )));
        }
        let device = Arc::new(device);
        let streams = (0..tp)
            .map(|_| device.new_stream())
            .collect::<Result<_, _>>()?;
        let devices = vec![device; tp as usize];
        Ok(RankGroup::assemble(
            devices,
            streams,
            Placement::SameDevice(mode),
        ))
    }

    fn assemble(devices: Vec<Arc<D>>, streams: Vec<D::Stream>, placement: Placement) -> Self {
        RankGroup {
            devices,
            streams,
            placement,
            skew: Skew::none(),
            launches: AtomicU64::new(0),
            capturing: AtomicBool::new(false),
        }
    }

    /// The same group, delaying every rank's launch by `skew` from now on.
    pub fn with_skew(mut self, skew: Skew) -> Self {
        self.skew = skew;
        self
    }

    /// The launch skew.
    pub fn skew(&self) -> Skew {
        self.skew
    }

    /// Marks the streams as being captured into graphs (or no longer). While capturing, a launch
    /// that must be co-resident is checked against the device's capacity and enqueued as a plain
    /// launch: DESIGN.md §5.9 allows either a cooperative launch or a grid no larger than the
    /// co-resident capacity, and the second is the one every driver records in a graph. No skew
    /// is applied while capturing (a graph replays back to back; skew belongs to the suite).
    pub fn set_capturing(&self, capturing: bool) {
        self.capturing.store(capturing, Ordering::Relaxed);
    }

    /// Whether the streams are being captured.
    pub fn capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    /// Ranks in the group.
    pub fn tp(&self) -> u32 {
        self.devices.len() as u32
    }

    /// Where the ranks run.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Rank `rank`'s device.
    pub fn device(&self, rank: u32) -> &D {
        &self.devices[rank as usize]
    }

    /// Rank `rank`'s stream.
    pub fn stream(&self, rank: u32) -> &D::Stream {
        &self.streams[rank as usize]
    }

    /// One zero-filled allocation per rank, each on its rank's device.
    pub fn alloc_per_rank(&self, bytes: usize, kind: MemKind) -> Result<Vec<D::Buffer>> {
        Ok(self
            .devices
            .iter()
            .map(|d| d.alloc(bytes, kind))
            .collect::<Result<_, _>>()?)
    }

    /// The peer table of one array per rank: slot `peer_slot(p)` holds rank p's pointer. Every
    /// rank's table is this same table.
    pub fn peer_table(&self, per_rank: &[impl DeviceBuffer]) -> Result<Vec<u64>> {
        self.check_per_rank(per_rank.len())?;
        let mut table = vec![0u64; per_rank.len()];
        for (p, buf) in per_rank.iter().enumerate() {
            table[peer_slot(p as u32)] = buf.ptr();
        }
        Ok(table)
    }

    /// A table of 64-bit words on every rank's device (for one device, one copy is enough, but a
    /// copy per rank keeps the ownership uniform).
    pub fn upload_table(&self, table: &[u64]) -> Result<Vec<D::Buffer>> {
        let bytes: Vec<u8> = table.iter().flat_map(|p| p.to_le_bytes()).collect();
        let mut out = Vec::with_capacity(self.devices.len());
        for d in &self.devices {
            let buf = d.alloc(bytes.len(), MemKind::Device)?;
            d.upload(&buf, 0, &bytes)?;
            out.push(buf);
        }
        Ok(out)
    }

    /// Loads kernel `name` for every rank (once per distinct device).
    pub fn load(&self, artifact: &crate::compile::Artifact, name: &str) -> Result<Vec<D::Kernel>> {
        let mut out: Vec<D::Kernel> = Vec::with_capacity(self.devices.len());
        for (r, d) in self.devices.iter().enumerate() {
            let shared = r > 0 && Arc::ptr_eq(d, &self.devices[r - 1]);
            out.push(if shared {
                out[r - 1].clone()
            } else {
                d.load(artifact, name)?
            });
        }
        Ok(out)
    }

    fn check_per_rank(&self, n: usize) -> Result<()> {
        if n == self.devices.len() {
            Ok(())
        } else {
            Err(Error::RankGroup(format!(
                "{n} per-rank values for {} ranks",
                self.devices.len()
            )))
        }
    }

    /// Launches rank r's `kernels[r]` with `args[r]`, each rank's grid given by `spec` (one rank's
    /// geometry). A one-per-device group checks each device's co-resident capacity for one grid;
    /// a same-device [`SameDeviceMode::Streams`] group checks that all ranks' workgroups fit
    /// together. Every rank's launch is enqueued before any is waited for.
    ///
    /// # Safety
    /// As [`Device::launch_raw`], for every rank's arguments.
    pub unsafe fn launch(
        &self,
        kernels: &[D::Kernel],
        spec: &LaunchSpec,
        args: &[Vec<KernelArg>],
    ) -> Result<()> {
        self.check_per_rank(kernels.len())?;
        self.check_per_rank(args.len())?;
        if matches!(self.placement, Placement::SameDevice(_)) && self.tp() > MAX_CONCURRENT_RANKS {
            return Err(Error::RankGroup(format!(
                "{} ranks on one device exceed the {MAX_CONCURRENT_RANKS} concurrent hardware \
                 queues, and `{}` has no ranks entry to launch them as one grid",
                self.tp(),
                kernels[0].name()
            )));
        }
        match self.placement {
            Placement::SameDevice(_) if spec.coresidency == CoResidency::Required => {
                let d = &self.devices[0];
                let cap = Capacity::of(d.as_ref(), &kernels[0], spec)?;
                cap.check(kernels[0].name(), spec.workgroups() * u64::from(self.tp()))?;
                self.apply_skew()?;
                for r in 0..self.devices.len() {
                    // SAFETY: the caller upholds the argument contract; the capacity of the device
                    // covers every rank's workgroups (checked above), so plain launches suffice.
                    unsafe { d.launch_raw(&kernels[r], spec, &args[r], &self.streams[r], false) }?;
                }
            }
            _ => {
                self.apply_skew()?;
                for r in 0..self.devices.len() {
                    let d = self.devices[r].as_ref();
                    if self.capturing() && spec.coresidency == CoResidency::Required {
                        let cap = Capacity::of(d, &kernels[r], spec)?;
                        cap.check(kernels[r].name(), spec.workgroups())?;
                        // SAFETY: the caller upholds the argument contract; the grid fits the
                        // device's co-resident capacity (checked above, §5.9).
                        unsafe {
                            d.launch_raw(&kernels[r], spec, &args[r], &self.streams[r], false)
                        }?;
                        continue;
                    }
                    // SAFETY: the caller upholds the argument contract; `launch` checks
                    // co-residency per device.
                    unsafe { launch::launch(d, &kernels[r], spec, &args[r], &self.streams[r]) }?;
                }
            }
        }
        Ok(())
    }

    /// Launches rank `rank`'s `kernel` with `args` on its stream, alone: the co-residency rule
    /// applies to its grid only (the other ranks do not run). No skew (one rank has no one to be
    /// skewed against).
    ///
    /// # Safety
    /// As [`Device::launch_raw`].
    pub unsafe fn launch_alone(
        &self,
        rank: u32,
        kernel: &D::Kernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
    ) -> Result<()> {
        let r = rank as usize;
        if r >= self.devices.len() {
            return Err(Error::RankGroup(format!(
                "rank {rank} of a group of {}",
                self.devices.len()
            )));
        }
        let d = self.devices[r].as_ref();
        if self.capturing() && spec.coresidency == CoResidency::Required {
            Capacity::of(d, kernel, spec)?.check(kernel.name(), spec.workgroups())?;
            // SAFETY: the caller upholds the argument contract; the grid fits the device's
            // co-resident capacity (checked above, §5.9).
            return Ok(unsafe { d.launch_raw(kernel, spec, args, &self.streams[r], false) }?);
        }
        // SAFETY: the caller upholds the argument contract; `launch` checks co-residency.
        unsafe { launch::launch(d, kernel, spec, args, &self.streams[r]) }
    }

    /// Holds each rank's stream for its skew delay before this launch (nothing without skew or
    /// while capturing).
    fn apply_skew(&self) -> Result<()> {
        let n = self.launches.fetch_add(1, Ordering::Relaxed);
        if self.skew.is_none() || self.capturing() {
            return Ok(());
        }
        for r in 0..self.tp() {
            let delay = self.skew.delay(r, self.tp(), n);
            if !delay.is_zero() {
                self.devices[r as usize].delay_stream(&self.streams[r as usize], delay)?;
            }
        }
        Ok(())
    }

    /// Launches a [`SameDeviceMode::FusedGrid`] group's ranks entry: one launch of
    /// `tp × spec.grid[0]` workgroups on rank 0's stream, with the co-residency rule applied to
    /// the whole grid.
    ///
    /// # Safety
    /// As [`Device::launch_raw`]; `args` follow the ranks entry's ABI described in the module docs.
    pub unsafe fn launch_fused(
        &self,
        kernel: &D::Kernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
    ) -> Result<()> {
        if self.placement != Placement::SameDevice(SameDeviceMode::FusedGrid) {
            return Err(Error::RankGroup(
                "launch_fused needs a FusedGrid group".into(),
            ));
        }
        let mut fused = spec.clone();
        fused.grid[0] = spec.grid[0]
            .checked_mul(self.tp())
            .ok_or_else(|| Error::RankGroup("grid overflows".into()))?;
        let d = self.devices[0].as_ref();
        if self.capturing() && fused.coresidency == CoResidency::Required {
            // A graph holds plain launches: the capacity covers every rank's workgroups.
            Capacity::of(d, kernel, &fused)?.check(kernel.name(), fused.workgroups())?;
            // SAFETY: the caller upholds the argument contract; the whole grid fits the
            // device's co-resident capacity (checked above, §5.9).
            return unsafe { d.launch_raw(kernel, &fused, args, &self.streams[0], false) }
                .map_err(Into::into);
        }
        // SAFETY: the caller upholds the argument contract; `launch` applies the co-residency rule
        // to all ranks' workgroups at once.
        unsafe { launch::launch(d, kernel, &fused, args, &self.streams[0]) }
    }

    /// Waits for every rank's work.
    pub fn synchronize(&self) -> Result<()> {
        for (r, d) in self.devices.iter().enumerate() {
            d.sync_stream(&self.streams[r])?;
        }
        Ok(())
    }
}
