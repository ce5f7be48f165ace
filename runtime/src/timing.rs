//! Timing on any [`Device`] with device events (DESIGN.md §8), and the measurements that put a kernel's
//! time in context: the device's copy bandwidth and its L2 size.
//!
//! # What an event window holds
//! Events are recorded on a stream; the time between two is device time only when the device
//! reaches the first record and then runs straight through to the second. A launch enqueued on an
//! idle device does not: the start event completes at once and the window then also holds the
//! host's enqueue latency (several µs per launch, once per rank of a TP group, comparable to a
//! whole decode kernel). So every window here opens behind a [`Gate`]: a host function at the
//! front of the stream that blocks it until the host has enqueued the start event, the launches
//! and the end event, and then lets the device run them back to back.
//!
//! # One launch of a TP group
//! The ranks of a same-device group run on their own streams ([`RankGroup`]). [`GroupTimer`]
//! opens the window on rank 0's stream and makes every other rank's stream wait for its start
//! event, and closes it on rank 0's stream after waiting for an end event of every other rank:
//! the window runs from the moment any rank may start to the moment the last one has finished.
//! The same holds across devices (a stream may wait on another device's event).
//!
//! # Graphs of a multi-device group
//! [`GroupGraphs`] captures, per rank, one graph (a CUDA graph, or a HIP graph) of many back-to-back launches on that rank's
//! stream (on that rank's device), then replays all ranks' graphs once behind one gate per stream,
//! released together, with a start and end event on every rank's own stream: one call's time is
//! the slowest rank's window divided by the launches in it (per-call time = max over ranks).
//! Ranks sharing one device are captured as one graph instead (each rank's launches a branch
//! on its own stream), replayed with one window.
//! A captured launch holds its epoch as a fixed argument, so a graph may be replayed only once
//! (DESIGN.md §5.4: epochs never repeat): [`GroupGraphs::replay`] consumes it.

use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;

use crate::compile::{Artifact, CompileRequest};
use crate::device::{Device, DeviceBuffer};
use crate::error::Result;
use crate::launch::{KernelArg, LaunchSpec};
use crate::rank::RankGroup;

/// How long a gate holds its stream at most: a backstop for a host that never releases it (it
/// panicked between holding and releasing), so a stream is never blocked for good.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(10);

/// A host function at the front of a stream that blocks it until the gate is released (dropped).
pub struct Gate {
    _release: Sender<()>,
}

impl Gate {
    /// Blocks `stream` (of `dev`) from here on until the returned gate is dropped.
    pub fn hold<D: Device>(dev: &D, stream: &D::Stream) -> Result<Gate> {
        let (release, receiver) = channel::<()>();
        dev.hold_stream(stream, receiver, GATE_TIMEOUT)?;
        Ok(Gate { _release: release })
    }
}

/// The spin kernel's symbol ([`spin_request`]).
pub const SPIN_SYMBOL: &str = "wavefuse_spin";

/// CUDA: hold the stream for `ns` nanoseconds of the global timer, sleeping between reads; no
/// memory is touched.
const SPIN_CUDA: &str = r#"extern "C" __global__ void wavefuse_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"#;

/// HIP: hold the stream for `cycles` shader clock cycles, sleeping between reads; no memory is
/// touched.
const SPIN_HIP: &str = r#"#include <hip/hip_runtime.h>
extern "C" __global__ void wavefuse_spin(unsigned long long cycles) {
    unsigned long long start = clock64();
    while (clock64() - start < cycles) {
        __builtin_amdgcn_s_sleep(8);
    }
}
"#;

/// The source of the spin kernel for `arch`: the gate on the device of
/// [`GroupGraphs::replay_behind_spin`].
pub fn spin_request(arch: Arch) -> CompileRequest {
    let src = match arch.vendor() {
        Vendor::Nvidia => SPIN_CUDA,
        Vendor::Amd => SPIN_HIP,
    };
    CompileRequest::new(SPIN_SYMBOL, src, arch)
}

/// One block that keeps a stream busy without touching memory (no L2 traffic, unlike a fill),
/// for 0.5 ms on CUDA (its global timer) or 10⁶ shader cycles on HIP (0.5–1 ms): longer than
/// the host takes to enqueue every rank's wait, events and graph behind it.
pub struct Spin<D: Device> {
    kernel: D::Kernel,
    amount: u64,
}

impl<D: Device> Spin<D> {
    /// Loads the compiled [`spin_request`] on `dev`.
    pub fn load(dev: &D, artifact: &Artifact) -> Result<Spin<D>> {
        let amount = match artifact.arch.vendor() {
            Vendor::Nvidia => 500_000,
            Vendor::Amd => 1_000_000,
        };
        Ok(Spin {
            kernel: dev.load(artifact, SPIN_SYMBOL)?,
            amount,
        })
    }

    /// Enqueues the spin on `stream` of `dev` (the device it was loaded on).
    pub fn enqueue(&self, dev: &D, stream: &D::Stream) -> Result<()> {
        // SAFETY: `wavefuse_spin` takes one 64-bit scalar and touches no memory.
        unsafe {
            crate::launch::launch(
                dev,
                &self.kernel,
                &LaunchSpec::linear(1, 32),
                &[KernelArg::U64(self.amount)],
                stream,
            )
        }
    }
}

/// Times one launch of every rank of a same-device (or one-rank) group; see the module docs.
pub struct GroupTimer<D: Device> {
    start: D::Event,
    /// One per rank after the first: rank r's last work, waited for by rank 0's stream.
    ends: Vec<D::Event>,
    end: D::Event,
}

impl<D: Device> GroupTimer<D> {
    /// Events for `group`.
    pub fn new(group: &RankGroup<D>) -> Result<GroupTimer<D>> {
        let dev = group.device(0);
        Ok(GroupTimer {
            start: dev.new_event()?,
            // Rank r's end event belongs to rank r's device: an event is recorded only on a
            // stream of its own device (rank 0's stream may wait on it from another device).
            ends: (1..group.tp())
                .map(|r| group.device(r).new_event())
                .collect::<Result<_, _>>()?,
            end: dev.new_event()?,
        })
    }

    /// Holds rank 0's stream, records the start behind the gate and makes every other rank's
    /// stream wait for it. Enqueue the launch, call [`GroupTimer::stop`], then drop the gate.
    pub fn start(&self, group: &RankGroup<D>) -> Result<Gate> {
        let (dev, lead) = (group.device(0), group.stream(0));
        let gate = Gate::hold(dev, lead)?;
        dev.record(&self.start, lead)?;
        for r in 1..group.tp() {
            // Waits for the record just enqueued (behind the gate), not for an earlier one.
            group.device(r).wait_event(group.stream(r), &self.start)?;
        }
        Ok(gate)
    }

    /// Closes the window on rank 0's stream once every rank's enqueued work is done.
    pub fn stop(&self, group: &RankGroup<D>) -> Result<()> {
        let (dev, lead) = (group.device(0), group.stream(0));
        for (i, e) in self.ends.iter().enumerate() {
            let r = i as u32 + 1;
            group.device(r).record(e, group.stream(r))?;
            dev.wait_event(lead, e)?;
        }
        dev.record(&self.end, lead)?;
        Ok(())
    }

    /// [`GroupTimer::start`] for rank 0 launched alone: only rank 0's stream is held and timed.
    pub fn start_alone(&self, group: &RankGroup<D>) -> Result<Gate> {
        let (dev, lead) = (group.device(0), group.stream(0));
        let gate = Gate::hold(dev, lead)?;
        dev.record(&self.start, lead)?;
        Ok(gate)
    }

    /// [`GroupTimer::stop`] for rank 0 launched alone.
    pub fn stop_alone(&self, group: &RankGroup<D>) -> Result<()> {
        group.device(0).record(&self.end, group.stream(0))?;
        Ok(())
    }

    /// Milliseconds between start and end (waits for the end).
    pub fn elapsed_ms(&self, group: &RankGroup<D>) -> Result<f64> {
        let ms = group.device(0).elapsed_ms(&self.start, &self.end)?;
        Ok(f64::from(ms))
    }
}

/// One graph per rank, captured from the launches enqueued on a group's streams; see the
/// module docs.
pub struct GroupGraphs<D: Device> {
    graphs: Vec<D::Graph>,
    calls: u32,
}

/// One replay of a [`GroupGraphs`]: every rank's window.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// Per rank, milliseconds from the gate's release to the end of its graph.
    pub rank_ms: Vec<f64>,
    /// Launches per rank in the graph.
    pub calls: u32,
}

impl Replay {
    /// One call's time in microseconds: the slowest rank's window over the calls in it.
    pub fn per_call_us(&self) -> f64 {
        let max = self.rank_ms.iter().copied().fold(0.0, f64::max);
        max * 1e3 / f64::from(self.calls.max(1))
    }
}

impl<D: Device> GroupGraphs<D> {
    /// Captures what `body` enqueues on `group`'s streams (it makes `calls` launches per rank)
    /// into one graph per rank. While capturing, launches that need co-residency are plain
    /// launches after the capacity check ([`RankGroup::set_capturing`]). Every stream's capture
    /// is ended even when `body` fails.
    pub fn capture(
        group: &RankGroup<D>,
        calls: u32,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<GroupGraphs<D>> {
        GroupGraphs::capture_ranks(group, group.tp(), calls, body)
    }

    /// [`GroupGraphs::capture`] of the first `ranks` ranks' streams only (1: rank 0 launched
    /// alone, [`crate::KernelInstance::launch_alone`]); [`GroupGraphs::replay`] then replays
    /// those.
    pub fn capture_ranks(
        group: &RankGroup<D>,
        ranks: u32,
        calls: u32,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<GroupGraphs<D>> {
        let ranks = ranks.min(group.tp());
        if ranks > 1 && matches!(group.placement(), crate::rank::Placement::SameDevice(_)) {
            return GroupGraphs::capture_one_graph(group, ranks, calls, body);
        }
        let mut begun = 0;
        let mut result = Ok(());
        for r in 0..ranks {
            match group.device(r).begin_capture(group.stream(r)) {
                Ok(()) => begun += 1,
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
        }
        if result.is_ok() {
            group.set_capturing(true);
            result = body();
            group.set_capturing(false);
        }
        let mut graphs = Vec::with_capacity(begun);
        for r in 0..begun as u32 {
            match group.device(r).end_capture(group.stream(r)) {
                Ok(Some(g)) => graphs.push(g),
                Ok(None) => {
                    let e = crate::DeviceError::Unsupported(format!("rank {r}: an empty graph"));
                    result = result.and(Err(e.into()));
                }
                Err(e) => result = result.and(Err(e.into())),
            }
        }
        result.map(|()| GroupGraphs { graphs, calls })
    }

    /// Ranks sharing a device: one graph for all of them, captured on rank 0's stream, which
    /// the other ranks' streams join (they wait on an event of it) before `body` and rank 0's
    /// stream joins back after it. Each rank's launches stay on its own stream, back to back,
    /// as branches of the one graph; the replay's one window runs from the release to the end
    /// of the last rank. (Graphs captured per rank and launched on four streams of one H100
    /// read ~1.6 µs a call more than the same launches in one graph timed from PyTorch,
    /// bench/results/2026-12-06-gpu-binding.)
    fn capture_one_graph(
        group: &RankGroup<D>,
        ranks: u32,
        calls: u32,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<GroupGraphs<D>> {
        let (dev, lead) = (group.device(0), group.stream(0));
        let fork = dev.new_event()?;
        let joins = (1..ranks)
            .map(|_| dev.new_event())
            .collect::<Result<Vec<_>, _>>()?;
        dev.begin_capture(lead)?;
        let mut result = (|| -> Result<()> {
            dev.record(&fork, lead)?;
            for r in 1..ranks {
                group.device(r).wait_event(group.stream(r), &fork)?;
            }
            Ok(())
        })();
        if result.is_ok() {
            group.set_capturing(true);
            result = body();
            group.set_capturing(false);
        }
        // Every joined stream rejoins the lead before the capture ends, even after a failure
        // (a capture with an unjoined stream cannot end).
        for r in 1..ranks {
            let j = &joins[r as usize - 1];
            let joined = group
                .device(r)
                .record(j, group.stream(r))
                .and_then(|()| dev.wait_event(lead, j));
            result = result.and(joined.map_err(Into::into));
        }
        let graph = match dev.end_capture(lead) {
            Ok(Some(g)) => Some(g),
            Ok(None) => {
                let e = crate::DeviceError::Unsupported("an empty graph".into());
                result = result.and(Err(e.into()));
                None
            }
            Err(e) => {
                result = result.and(Err(e.into()));
                None
            }
        };
        result.map(|()| GroupGraphs {
            graphs: graph.into_iter().collect(),
            calls,
        })
    }

    /// [`GroupGraphs::replay`] behind a gate on the device instead of host functions: rank 0's
    /// stream runs `spin` (loaded on rank 0's device) and records an event behind it that every
    /// other rank's stream waits for; each stream's start event, graph and end event are
    /// enqueued while it spins. So the ranks are released by one event, with no host enqueue
    /// skew between them, and each graph's work is already submitted when the device reaches
    /// it; the spin touches no memory, so the graph starts on an L2 that holds no one's dirty
    /// lines. Behind a host-function gate the driver resolves the host function's dependents
    /// itself, which puts its submission of the graph inside the window (a graph of 20 launches
    /// of a 5 µs kernel read ~7 µs longer on the H100, bench/results/2026-12-06-gpu-binding),
    /// and graphs of programmatic dependent launches ([`crate::LaunchSpec::dependent`]) were
    /// seen held behind a host function until its timeout (driver 580, runtime/tests/gpu.rs).
    /// (Behind a 2 × L2 fill instead of the spin, tried first, the same graphs read 1–22 %
    /// longer than behind the host gate, in two calls on H100s whose op timings agreed to
    /// 0.5 %: presumably the fill's dirty lines written back while the graph runs.)
    pub fn replay_behind_spin(&self, group: &RankGroup<D>, spin: &Spin<D>) -> Result<Replay> {
        let dev0 = group.device(0);
        let go = dev0.new_event()?;
        self.replay_after(group, |dev, s, r| {
            if r == 0 {
                spin.enqueue(dev, s)?;
                dev.record(&go, s)?;
            } else {
                dev.wait_event(s, &go)?;
            }
            Ok(None)
        })
    }

    /// Replays every captured rank's graph once, all released together behind gates; waits for
    /// the end. A graph of kernels whose epoch lives on the device
    /// ([`crate::KernelInstance::replay_safe`]) may be replayed any number of times.
    pub fn replay(&self, group: &RankGroup<D>) -> Result<Replay> {
        self.replay_after(group, |dev, s, _| Ok(Some(Gate::hold(dev, s)?)))
    }

    /// Uploads every graph, then per rank (in rank order) enqueues `front` (a gate it returns is
    /// held until every rank is enqueued), the start event, the graph and the end event; the
    /// windows.
    fn replay_after(
        &self,
        group: &RankGroup<D>,
        front: impl Fn(&D, &D::Stream, u32) -> Result<Option<Gate>>,
    ) -> Result<Replay> {
        let tp = self.graphs.len() as u32;
        let starts = (0..tp)
            .map(|r| group.device(r).new_event())
            .collect::<Result<Vec<_>, _>>()?;
        let ends = (0..tp)
            .map(|r| group.device(r).new_event())
            .collect::<Result<Vec<_>, _>>()?;
        for (r, g) in self.graphs.iter().enumerate() {
            group.device(r as u32).upload_graph(g)?;
        }
        group.synchronize()?;
        let mut gates = Vec::with_capacity(tp as usize);
        for r in 0..tp {
            let (dev, s) = (group.device(r), group.stream(r));
            gates.extend(front(dev, s, r)?);
            dev.record(&starts[r as usize], s)?;
            dev.launch_graph(&self.graphs[r as usize])?;
            dev.record(&ends[r as usize], s)?;
        }
        // Every device starts as soon as its gate opens: the host releases them back to back.
        drop(gates);
        let rank_ms = (0..tp as usize)
            .map(|r| {
                let dev = group.device(r as u32);
                dev.elapsed_ms(&starts[r], &ends[r]).map(f64::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Replay {
            rank_ms,
            calls: self.calls,
        })
    }
}

/// The device-to-device copy bandwidth: what the memory system sustains for a plain stream of
/// reads and writes, the yardstick of a memory-bound kernel (DESIGN.md §8).
#[derive(Clone, Debug, PartialEq)]
pub struct CopyBandwidth {
    /// Bytes of one copy (each read once and written once).
    pub bytes: usize,
    /// Per timed copy, in milliseconds.
    pub samples_ms: Vec<f64>,
    /// Median of the samples.
    pub median_ms: f64,
    /// Read plus written bytes per second at the median, in GB/s (10⁹ bytes).
    pub gbps: f64,
}

/// Copies `bytes` bytes between two fresh device buffers `copies` times (after two untimed ones),
/// each copy timed behind a gate; the buffers are far larger than L2 when `bytes` is.
pub fn copy_bandwidth<D: Device>(dev: &D, bytes: usize, copies: usize) -> Result<CopyBandwidth> {
    let src = dev.alloc(bytes, crate::MemKind::Device)?;
    let dst = dev.alloc(bytes, crate::MemKind::Device)?;
    let stream = dev.new_stream()?;
    dev.fill_async(&src, 0x5A, &stream)?;
    let (start, end) = (dev.new_event()?, dev.new_event()?);
    let mut samples_ms = Vec::with_capacity(copies);
    for i in 0..copies + 2 {
        let gate = Gate::hold(dev, &stream)?;
        dev.record(&start, &stream)?;
        dev.copy_async(&dst, &src, bytes, &stream)?;
        dev.record(&end, &stream)?;
        drop(gate);
        let ms = f64::from(dev.elapsed_ms(&start, &end)?);
        if i >= 2 {
            samples_ms.push(ms);
        }
    }
    dev.sync_stream(&stream)?;
    let median_ms = median(&samples_ms);
    Ok(CopyBandwidth {
        bytes,
        gbps: 2.0 * bytes as f64 / (median_ms * 1e-3) / 1e9,
        samples_ms,
        median_ms,
    })
}

/// The median of `v` (NaN when empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// The device's L2 size in bytes.
pub fn l2_bytes<D: Device>(dev: &D) -> Result<u64> {
    Ok(dev.l2_bytes()?)
}

/// Enqueues a fill of `buf` with `byte` on `stream`: writing a buffer larger than L2 evicts what
/// L2 held (an L2 flush), without a device-wide synchronisation.
pub fn fill<D: Device>(dev: &D, buf: &D::Buffer, byte: u8, stream: &D::Stream) -> Result<()> {
    debug_assert_eq!(buf.ordinal(), dev.info().ordinal);
    Ok(dev.fill_async(buf, byte, stream)?)
}

/// The byte size of every parameter of a loaded kernel, in order, as the compiled image declares
/// them: checks a hand-written kernel's declared ABI against the kernel itself before any launch
/// (CUDA ≥ 12.4; [`crate::DeviceError::Unsupported`] elsewhere).
pub fn param_sizes<D: Device>(dev: &D, kernel: &D::Kernel) -> Result<Vec<usize>> {
    Ok(dev.param_sizes(kernel)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
