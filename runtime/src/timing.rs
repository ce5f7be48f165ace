//! Timing on NVIDIA GPUs with device events (DESIGN.md §8), and the measurements that put a kernel's
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
//! # CUDA graphs of a multi-device group
//! [`GroupGraphs`] captures, per rank, one graph of many back-to-back launches on that rank's
//! stream (on that rank's device), then replays all ranks' graphs once behind one gate per stream,
//! released together, with a start and end event on every rank's own stream: one call's time is
//! the slowest rank's window divided by the launches in it (per-call time = max over ranks).
//! A captured launch holds its epoch as a fixed argument, so a graph may be replayed only once
//! (DESIGN.md §5.4: epochs never repeat): [`GroupGraphs::replay`] consumes it.

use std::ffi::c_void;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::{self, sys};

use crate::DeviceError;
use crate::device::{CudaBuffer, CudaDevice, CudaKernel, CudaStream, Device, DeviceBuffer};
use crate::error::Result;
use crate::rank::RankGroup;

/// How long a gate holds its stream at most: a backstop for a host that never releases it (it
/// panicked between holding and releasing), so a stream is never blocked for good.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(10);

fn api(name: &'static str) -> impl Fn(DriverError) -> DeviceError {
    move |e| DeviceError::Api {
        api: name,
        code: e.0 as i64,
        message: e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0)),
    }
}

/// A host function at the front of a stream that blocks it until the gate is released (dropped).
pub struct Gate {
    _release: Sender<()>,
}

/// The gate's host function: waits until its sender is dropped (or [`GATE_TIMEOUT`]). Makes no
/// CUDA call, as host functions must not.
unsafe extern "C" fn wait_for_release(data: *mut c_void) {
    // SAFETY: `data` is the `Box<Receiver<()>>` leaked by `Gate::hold`, handed to exactly this one
    // call by the driver; it is reclaimed here once.
    let receiver = unsafe { Box::from_raw(data.cast::<Receiver<()>>()) };
    let _ = receiver.recv_timeout(GATE_TIMEOUT);
}

impl Gate {
    /// Blocks `stream` from here on until the returned gate is dropped.
    pub fn hold(stream: &CudaStream) -> Result<Gate, DeviceError> {
        let (release, receiver) = channel::<()>();
        let receiver = Box::into_raw(Box::new(receiver));
        let s = stream.inner();
        s.context()
            .bind_to_thread()
            .map_err(api("cuCtxSetCurrent"))?;
        // SAFETY: the stream is live; the callback takes ownership of `receiver` and makes no CUDA
        // call; on failure the driver never calls it, so ownership comes back here.
        let rc = unsafe {
            cu::stream::launch_host_function(s.cu_stream(), wait_for_release, receiver.cast())
        };
        if let Err(e) = rc {
            // SAFETY: the launch failed, so the callback will never reclaim the box.
            drop(unsafe { Box::from_raw(receiver) });
            return Err(api("cuLaunchHostFunc")(e));
        }
        Ok(Gate { _release: release })
    }
}

/// A timing event of a CUDA context.
fn event(dev: &CudaDevice) -> Result<driver::CudaEvent, DeviceError> {
    dev.context()
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(api("cuEventCreate"))
}

/// Times one launch of every rank of a same-device (or one-rank) group; see the module docs.
pub struct GroupTimer {
    start: driver::CudaEvent,
    /// One per rank after the first: rank r's last work, waited for by rank 0's stream.
    ends: Vec<driver::CudaEvent>,
    end: driver::CudaEvent,
}

impl GroupTimer {
    /// Events for `group`.
    pub fn new(group: &RankGroup<CudaDevice>) -> Result<GroupTimer> {
        let dev = group.device(0);
        Ok(GroupTimer {
            start: event(dev)?,
            // Rank r's end event belongs to rank r's device: an event is recorded only on a
            // stream of its own context (rank 0's stream may wait on it from another device).
            ends: (1..group.tp())
                .map(|r| event(group.device(r)))
                .collect::<Result<_, _>>()?,
            end: event(dev)?,
        })
    }

    /// Holds rank 0's stream, records the start behind the gate and makes every other rank's
    /// stream wait for it. Enqueue the launch, call [`GroupTimer::stop`], then drop the gate.
    pub fn start(&self, group: &RankGroup<CudaDevice>) -> Result<Gate> {
        let lead = group.stream(0).inner();
        let gate = Gate::hold(group.stream(0))?;
        self.start.record(lead).map_err(api("cuEventRecord"))?;
        for r in 1..group.tp() {
            // Waits for the record just enqueued (behind the gate), not for an earlier one.
            let s = group.stream(r).inner();
            s.wait(&self.start).map_err(api("cuStreamWaitEvent"))?;
        }
        Ok(gate)
    }

    /// Closes the window on rank 0's stream once every rank's enqueued work is done.
    pub fn stop(&self, group: &RankGroup<CudaDevice>) -> Result<()> {
        let lead = group.stream(0).inner();
        for (i, e) in self.ends.iter().enumerate() {
            e.record(group.stream(i as u32 + 1).inner())
                .map_err(api("cuEventRecord"))?;
            lead.wait(e).map_err(api("cuStreamWaitEvent"))?;
        }
        self.end.record(lead).map_err(api("cuEventRecord"))?;
        Ok(())
    }

    /// [`GroupTimer::start`] for rank 0 launched alone: only rank 0's stream is held and timed.
    pub fn start_alone(&self, group: &RankGroup<CudaDevice>) -> Result<Gate> {
        let gate = Gate::hold(group.stream(0))?;
        self.start
            .record(group.stream(0).inner())
            .map_err(api("cuEventRecord"))?;
        Ok(gate)
    }

    /// [`GroupTimer::stop`] for rank 0 launched alone.
    pub fn stop_alone(&self, group: &RankGroup<CudaDevice>) -> Result<()> {
        self.end
            .record(group.stream(0).inner())
            .map_err(api("cuEventRecord"))?;
        Ok(())
    }

    /// Milliseconds between start and end (waits for the end).
    pub fn elapsed_ms(&self) -> Result<f64> {
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(api("cuEventElapsedTime"))?;
        Ok(f64::from(ms))
    }
}

/// One CUDA graph per rank, captured from the launches enqueued on a group's streams; see the
/// module docs.
pub struct GroupGraphs {
    graphs: Vec<driver::CudaGraph>,
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

impl GroupGraphs {
    /// Captures what `body` enqueues on `group`'s streams (it makes `calls` launches per rank)
    /// into one graph per rank. While capturing, launches that need co-residency are plain
    /// launches after the capacity check ([`RankGroup::set_capturing`]). Every stream's capture
    /// is ended even when `body` fails.
    pub fn capture(
        group: &RankGroup<CudaDevice>,
        calls: u32,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<GroupGraphs> {
        GroupGraphs::capture_ranks(group, group.tp(), calls, body)
    }

    /// [`GroupGraphs::capture`] of the first `ranks` ranks' streams only (1: rank 0 launched
    /// alone, [`crate::KernelInstance::launch_alone`]); [`GroupGraphs::replay`] then replays
    /// those.
    pub fn capture_ranks(
        group: &RankGroup<CudaDevice>,
        ranks: u32,
        calls: u32,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<GroupGraphs> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        let mut begun = 0;
        let mut result = Ok(());
        for r in 0..ranks.min(group.tp()) {
            match group.stream(r).inner().begin_capture(mode) {
                Ok(()) => begun += 1,
                Err(e) => {
                    result = Err(api("cuStreamBeginCapture")(e).into());
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
            let flags = sys::CUgraphInstantiate_flags(0);
            match group.stream(r).inner().end_capture(flags) {
                Ok(Some(g)) => graphs.push(g),
                Ok(None) => {
                    let e = DeviceError::Unsupported(format!("rank {r}: an empty graph"));
                    result = result.and(Err(e.into()));
                }
                Err(e) => result = result.and(Err(api("cuStreamEndCapture")(e).into())),
            }
        }
        result.map(|()| GroupGraphs { graphs, calls })
    }

    /// Replays every captured rank's graph once, all released together behind gates; waits for
    /// the end.
    pub fn replay(self, group: &RankGroup<CudaDevice>) -> Result<Replay> {
        let tp = self.graphs.len() as u32;
        let starts = (0..tp)
            .map(|r| event(group.device(r)))
            .collect::<Result<Vec<_>, _>>()?;
        let ends = (0..tp)
            .map(|r| event(group.device(r)))
            .collect::<Result<Vec<_>, _>>()?;
        for g in &self.graphs {
            g.upload().map_err(api("cuGraphUpload"))?;
        }
        group.synchronize()?;
        let mut gates = Vec::with_capacity(tp as usize);
        for r in 0..tp {
            let s = group.stream(r);
            gates.push(Gate::hold(s)?);
            starts[r as usize]
                .record(s.inner())
                .map_err(api("cuEventRecord"))?;
            self.graphs[r as usize]
                .launch()
                .map_err(api("cuGraphLaunch"))?;
            ends[r as usize]
                .record(s.inner())
                .map_err(api("cuEventRecord"))?;
        }
        // Every device starts as soon as its gate opens: the host releases them back to back.
        drop(gates);
        let rank_ms = starts
            .iter()
            .zip(&ends)
            .map(|(s, e)| s.elapsed_ms(e).map(f64::from))
            .collect::<Result<Vec<_>, _>>()
            .map_err(api("cuEventElapsedTime"))?;
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
pub fn copy_bandwidth(dev: &CudaDevice, bytes: usize, copies: usize) -> Result<CopyBandwidth> {
    let src = dev.alloc(bytes, crate::MemKind::Device)?;
    let dst = dev.alloc(bytes, crate::MemKind::Device)?;
    let stream = dev.new_stream()?;
    fill(&src, 0x5A, &stream)?;
    let (start, end) = (event(dev)?, event(dev)?);
    let mut samples_ms = Vec::with_capacity(copies);
    for i in 0..copies + 2 {
        let gate = Gate::hold(&stream)?;
        start.record(stream.inner()).map_err(api("cuEventRecord"))?;
        // SAFETY: both are live allocations of `bytes` bytes of this context; nothing else uses
        // them.
        unsafe { cu::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, stream.inner().cu_stream()) }
            .map_err(api("cuMemcpyDtoDAsync"))?;
        end.record(stream.inner()).map_err(api("cuEventRecord"))?;
        drop(gate);
        let ms = f64::from(start.elapsed_ms(&end).map_err(api("cuEventElapsedTime"))?);
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

/// The device's L2 size in bytes (`CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE`).
pub fn l2_bytes(dev: &CudaDevice) -> Result<u64> {
    let a = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
    let v = dev
        .context()
        .attribute(a)
        .map_err(api("cuDeviceGetAttribute"))?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// Enqueues a fill of `buf` with `byte` on `stream`: writing a buffer larger than L2 evicts what
/// L2 held (an L2 flush), without a device-wide synchronisation.
pub fn fill(buf: &CudaBuffer, byte: u8, stream: &CudaStream) -> Result<()> {
    stream
        .inner()
        .context()
        .bind_to_thread()
        .map_err(api("cuCtxSetCurrent"))?;
    // SAFETY: `buf` is a live allocation of `bytes()` bytes of this stream's context.
    unsafe { cu::memset_d8_async(buf.ptr(), byte, buf.bytes(), stream.inner().cu_stream()) }
        .map_err(api("cuMemsetD8Async"))?;
    Ok(())
}

/// The byte size of every parameter of a loaded kernel, in order, as the compiled image declares
/// them (`cuFuncGetParamInfo`): checks a hand-written kernel's declared ABI against the kernel
/// itself before any launch.
pub fn param_sizes(kernel: &CudaKernel) -> Result<Vec<usize>> {
    // The entry point exists from CUDA 12.4 on; cudarc would panic looking it up in an older driver.
    let (major, minor) = crate::exec::cuda_driver_version()?;
    if (major, minor) < (12, 4) {
        let why =
            format!("cuFuncGetParamInfo needs a CUDA 12.4 driver, this one is {major}.{minor}");
        return Err(DeviceError::Unsupported(why).into());
    }
    let f = kernel.function().cu_function();
    let mut sizes = Vec::new();
    loop {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `f` is a live function of a loaded module; both out-pointers are valid.
        let rc = unsafe { sys::cuFuncGetParamInfo(f, sizes.len(), &mut offset, &mut size) };
        match rc {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size),
            // Past the last parameter.
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(sizes),
            e => return Err(api("cuFuncGetParamInfo")(DriverError(e)).into()),
        }
    }
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
