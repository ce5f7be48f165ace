//! GPUs behind one [`Device`] trait: [`CudaDevice`] (cudarc, driver loaded at run time) and
//! [`HipDevice`] (a thin `libloading` wrapper of libamdhip64).
//!
//! The trait is deliberately small and ABI-agnostic: untyped device allocations ([`DeviceBuffer`],
//! freed on drop), byte copies, modules loaded from an [`Artifact`], streams, events, occupancy and
//! peer access, and a launch taking the [`KernelArg`] list of [`crate::launch`]. Typed binding
//! (which buffer goes to which parameter) lives above it, in [`crate::sync`].
//!
//! Copies are synchronous and ordered after all work previously launched on the device (they
//! synchronise the device first), so reading back a result is never a race with a kernel still
//! running on another stream.

mod cuda;
mod hip;
mod ipc;

use std::sync::mpsc::Receiver;
use std::time::Duration;

use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;

use crate::compile::{Artifact, ArtifactFormat};
use crate::launch::{KernelArg, LaunchSpec};

pub use cuda::{CudaBuffer, CudaDevice, CudaEvent, CudaKernel, CudaStream, MAX_STREAM_DELAY};
pub use hip::{
    HipBuffer, HipDevice, HipEvent, HipGraph, HipKernel, HipStream, hip_runtime_library,
};
pub use ipc::PeerMapping;

/// What a device allocation is for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemKind {
    /// Ordinary device memory (cached).
    Device,
    /// Memory for cross-device flags polled with system-scope atomics (DESIGN.md §5.12). On AMD
    /// this is uncached / fine-grained memory (`hipExtMallocWithFlags`), so a peer's store over
    /// PCIe is seen by a polling load; on NVIDIA plain device memory is coherent for system-scope
    /// atomics and fences, so it is ordinary device memory.
    Flags,
}

/// What the runtime knows about one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// AMD or NVIDIA.
    pub vendor: Vendor,
    /// The driver's ordinal.
    pub ordinal: usize,
    /// The marketing name (`NVIDIA H200`, `AMD Instinct MI50`).
    pub name: String,
    /// The wavefuse target it is, when it is one.
    pub arch: Option<Arch>,
    /// CUs (AMD) or SMs (NVIDIA).
    pub compute_units: u32,
    /// Whether cooperative launch is available for module-loaded kernels.
    pub cooperative_launch: bool,
}

/// A device failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The vendor's driver library is not installed.
    #[error("no {vendor} driver found: {detail}; {hint}")]
    NoDriver {
        /// `NVIDIA` or `AMD`.
        vendor: &'static str,
        /// What was looked for.
        detail: String,
        /// What to install.
        hint: &'static str,
    },
    /// The driver is there but there is no usable GPU (or it failed to initialise).
    #[error("no {vendor} GPU/driver found: {detail}")]
    NoDevice {
        /// `NVIDIA` or `AMD`.
        vendor: &'static str,
        /// The driver's answer.
        detail: String,
    },
    /// A driver call failed.
    #[error("{api} failed: {message} (error {code})")]
    Api {
        /// The function called.
        api: &'static str,
        /// Its error code.
        code: i64,
        /// The driver's error string for it.
        message: String,
    },
    /// An artifact of the wrong kind or arch for this device.
    #[error("device {ordinal} cannot load this artifact: {detail}")]
    Artifact {
        /// The device's ordinal.
        ordinal: usize,
        /// Why.
        detail: String,
    },
    /// A copy outside a buffer.
    #[error("copy of {len} bytes at offset {offset} is outside a buffer of {bytes} bytes")]
    OutOfBounds {
        /// The buffer's size.
        bytes: usize,
        /// Where the copy starts.
        offset: usize,
        /// How much it copies.
        len: usize,
    },
    /// The operation is not available on this device or driver.
    #[error("{0}")]
    Unsupported(String),
}

/// A device allocation, freed when dropped.
pub trait DeviceBuffer: Send + Sync {
    /// The device address, as a kernel argument takes it.
    fn ptr(&self) -> u64;
    /// Size in bytes.
    fn bytes(&self) -> usize;
    /// The owning device's ordinal.
    fn ordinal(&self) -> usize;
}

impl<B: DeviceBuffer + ?Sized> DeviceBuffer for &B {
    fn ptr(&self) -> u64 {
        (**self).ptr()
    }
    fn bytes(&self) -> usize {
        (**self).bytes()
    }
    fn ordinal(&self) -> usize {
        (**self).ordinal()
    }
}

/// A kernel loaded from a module (keeps the module loaded).
pub trait LoadedKernel: Send + Sync {
    /// The kernel's symbol name.
    fn name(&self) -> &str;
}

/// One GPU.
pub trait Device: Sized + Send + Sync {
    /// Its allocations.
    type Buffer: DeviceBuffer;
    /// Its loaded kernels.
    type Kernel: LoadedKernel + Clone;
    /// Its streams (work queues).
    type Stream: Send + Sync;
    /// Its timing events.
    type Event: Send + Sync;
    /// Its instantiated graphs, each bound to the stream it was captured from (used by one host
    /// thread at a time, as the drivers require).
    type Graph;

    /// Number of GPUs of this vendor; a missing driver is [`DeviceError::NoDriver`].
    fn count() -> Result<usize, DeviceError>;

    /// Opens GPU `ordinal`.
    fn new(ordinal: usize) -> Result<Self, DeviceError>;

    /// What it is.
    fn info(&self) -> &DeviceInfo;

    /// The runtime that drives it, for reports (`CUDA driver API`, `HIP (libamdhip64.so.5)`).
    fn runtime(&self) -> String {
        format!("{:?}", self.info().vendor)
    }

    /// A zero-filled allocation of `bytes` bytes.
    fn alloc(&self, bytes: usize, kind: MemKind) -> Result<Self::Buffer, DeviceError>;

    /// Copies `src` into `dst` at byte `offset`.
    fn upload(&self, dst: &Self::Buffer, offset: usize, src: &[u8]) -> Result<(), DeviceError>;

    /// Copies from `src` at byte `offset` into `dst`.
    fn download(
        &self,
        src: &Self::Buffer,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError>;

    /// Zero-fills `buf`.
    fn zero(&self, buf: &Self::Buffer) -> Result<(), DeviceError>;

    /// Loads kernel `name` from `artifact`.
    fn load(&self, artifact: &Artifact, name: &str) -> Result<Self::Kernel, DeviceError>;

    /// Resident workgroups per CU/SM for `kernel` at this block size and dynamic LDS (the
    /// driver's occupancy calculator).
    fn blocks_per_cu(
        &self,
        kernel: &Self::Kernel,
        block_threads: u32,
        dynamic_lds: u32,
    ) -> Result<u32, DeviceError>;

    /// A new stream that does not synchronise with other streams.
    fn new_stream(&self) -> Result<Self::Stream, DeviceError>;

    /// Enqueues `kernel` on `stream`; cooperatively when `cooperative` (the driver then guarantees
    /// co-residency or refuses).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and type, and every pointer in
    /// them must be valid for every access the kernel makes for as long as it runs.
    unsafe fn launch_raw(
        &self,
        kernel: &Self::Kernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: &Self::Stream,
        cooperative: bool,
    ) -> Result<(), DeviceError>;

    /// Enqueues `kernel` on a stream this runtime did not create, given by its raw driver handle
    /// (`CUstream` / `hipStream_t` as an integer, 0 for the legacy default stream): how a kernel
    /// runs inside an engine, on PyTorch's current stream, so that it is ordered with the
    /// engine's own kernels and is captured into the engine's CUDA/HIP graphs. Never cooperative:
    /// the caller checks co-residency first (DESIGN.md §5.9,
    /// [`crate::KernelInstance::check_coresidency`]). Devices that cannot answer
    /// [`DeviceError::Unsupported`].
    ///
    /// # Safety
    /// As [`Device::launch_raw`]; `stream` must be a live stream of this device's context.
    unsafe fn launch_on_raw_stream(
        &self,
        kernel: &Self::Kernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: u64,
    ) -> Result<(), DeviceError> {
        let _ = (kernel, spec, args, stream);
        Err(self.lacks("launching on a caller's stream"))
    }

    /// Holds `stream` for `delay` before the work enqueued after this call may start (a host
    /// function on the stream that waits), to skew ranks' launches deliberately: the cross-rank
    /// protocol must not depend on launch timing ([`crate::rank::Skew`]). Devices without host
    /// functions answer [`DeviceError::Unsupported`].
    fn delay_stream(&self, stream: &Self::Stream, delay: Duration) -> Result<(), DeviceError> {
        let _ = (stream, delay);
        Err(DeviceError::Unsupported(format!(
            "delaying a stream (launch skew) is not implemented for {}",
            self.info().name
        )))
    }

    /// Waits for everything enqueued on `stream`.
    fn sync_stream(&self, stream: &Self::Stream) -> Result<(), DeviceError>;

    /// Waits for everything enqueued on the device.
    fn synchronize(&self) -> Result<(), DeviceError>;

    /// Whether this device can map `peer`'s memory.
    fn can_access_peer(&self, peer: &Self) -> Result<bool, DeviceError>;

    /// Lets kernels on this device access `peer`'s memory (idempotent).
    fn enable_peer_access(&self, peer: &Self) -> Result<(), DeviceError>;

    /// A timing event.
    fn new_event(&self) -> Result<Self::Event, DeviceError>;

    /// Records `event` on `stream`.
    fn record(&self, event: &Self::Event, stream: &Self::Stream) -> Result<(), DeviceError>;

    /// Milliseconds between two recorded events (waits for both).
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f32, DeviceError>;

    /// Makes the work enqueued on `stream` after this call wait for the latest record of `event`
    /// (an event of this device or of a peer).
    fn wait_event(&self, stream: &Self::Stream, event: &Self::Event) -> Result<(), DeviceError> {
        let _ = (stream, event);
        Err(self.lacks("waiting on an event"))
    }

    /// Blocks `stream` from here on until `release` receives or is disconnected, or `timeout`
    /// passes (a host function on the stream that makes no driver call): the gate of
    /// [`crate::timing::Gate`].
    fn hold_stream(
        &self,
        stream: &Self::Stream,
        release: Receiver<()>,
        timeout: Duration,
    ) -> Result<(), DeviceError> {
        let _ = (stream, release, timeout);
        Err(self.lacks("holding a stream (a host function)"))
    }

    /// Enqueues a fill of all of `buf` with `byte` on `stream`.
    fn fill_async(
        &self,
        buf: &Self::Buffer,
        byte: u8,
        stream: &Self::Stream,
    ) -> Result<(), DeviceError> {
        let _ = (buf, byte, stream);
        Err(self.lacks("an asynchronous fill"))
    }

    /// Enqueues a copy of the first `bytes` bytes of `src` into `dst` on `stream`.
    fn copy_async(
        &self,
        dst: &Self::Buffer,
        src: &Self::Buffer,
        bytes: usize,
        stream: &Self::Stream,
    ) -> Result<(), DeviceError> {
        let _ = (dst, src, bytes, stream);
        Err(self.lacks("an asynchronous copy"))
    }

    /// The L2 cache's size in bytes (0 when the driver does not say).
    fn l2_bytes(&self) -> Result<u64, DeviceError> {
        Ok(0)
    }

    /// Starts capturing what is enqueued on `stream` into a graph (relaxed mode: other threads
    /// may keep calling the driver). Devices without graphs answer [`DeviceError::Unsupported`].
    fn begin_capture(&self, stream: &Self::Stream) -> Result<(), DeviceError> {
        let _ = stream;
        Err(self.lacks("graph capture"))
    }

    /// Ends the capture begun by [`Device::begin_capture`] and instantiates it (`None`: nothing
    /// was captured).
    fn end_capture(&self, stream: &Self::Stream) -> Result<Option<Self::Graph>, DeviceError> {
        let _ = stream;
        Err(self.lacks("graph capture"))
    }

    /// Makes `graph` resident on the device ahead of its launch, where the driver can.
    fn upload_graph(&self, graph: &Self::Graph) -> Result<(), DeviceError> {
        let _ = graph;
        Ok(())
    }

    /// Enqueues one replay of `graph` on the stream it was captured from.
    fn launch_graph(&self, graph: &Self::Graph) -> Result<(), DeviceError> {
        let _ = graph;
        Err(self.lacks("launching a graph"))
    }

    /// The byte size of every parameter of a loaded kernel, in order, as its image declares
    /// them, where the driver can say (CUDA ≥ 12.4); [`DeviceError::Unsupported`] otherwise.
    fn param_sizes(&self, kernel: &Self::Kernel) -> Result<Vec<usize>, DeviceError> {
        let _ = kernel;
        Err(self.lacks("reporting a kernel's parameter sizes"))
    }

    /// A handle by which another process maps `buf` ([`Device::ipc_open`]): how a rank in another
    /// process reaches this rank's flags and payload (one process per GPU, DESIGN.md §10). `buf`
    /// must be a whole allocation of this device. Devices without IPC answer
    /// [`DeviceError::Unsupported`].
    fn ipc_handle(&self, buf: &Self::Buffer) -> Result<Vec<u8>, DeviceError> {
        let _ = buf;
        Err(self.lacks("sharing memory between processes (IPC)"))
    }

    /// Maps the allocation of `bytes` bytes another process exported as `handle`
    /// ([`Device::ipc_handle`]) into this process, for kernels on this device (peer access is
    /// enabled as needed). Fails when this device cannot reach the owner's memory.
    fn ipc_open(&self, handle: &[u8], bytes: usize) -> Result<PeerMapping, DeviceError> {
        let _ = (handle, bytes);
        Err(self.lacks("sharing memory between processes (IPC)"))
    }

    /// The error of an operation this device does not implement.
    fn lacks(&self, what: &str) -> DeviceError {
        DeviceError::Unsupported(format!("{what} is not available for {}", self.info().name))
    }
}

/// Checks that a copy of `len` bytes at `offset` stays inside a buffer of `bytes` bytes.
pub(crate) fn check_bounds(bytes: usize, offset: usize, len: usize) -> Result<(), DeviceError> {
    match offset.checked_add(len) {
        Some(end) if end <= bytes => Ok(()),
        _ => Err(DeviceError::OutOfBounds { bytes, offset, len }),
    }
}

/// Checks that `artifact` is of one of `formats` and built for the device's arch.
pub(crate) fn check_artifact(
    info: &DeviceInfo,
    artifact: &Artifact,
    formats: &[ArtifactFormat],
) -> Result<(), DeviceError> {
    let detail = if !formats.contains(&artifact.format) {
        format!("it is {:?}, this device loads {formats:?}", artifact.format)
    } else if info.arch.is_some_and(|a| a != artifact.arch) {
        format!(
            "it targets {}, this device is {}",
            artifact.arch.name(),
            info.name
        )
    } else {
        return Ok(());
    };
    Err(DeviceError::Artifact {
        ordinal: info.ordinal,
        detail,
    })
}
