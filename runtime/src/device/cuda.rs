//! NVIDIA GPUs through cudarc 0.19, with libcuda loaded at run time.
//!
//! cudarc panics when it cannot load libcuda, so [`CudaDevice::new`] and [`CudaDevice::count`]
//! first check `is_culib_present()` and return [`DeviceError::NoDriver`] instead. Memory is managed
//! here (raw `cuMemAlloc`/`cuMemFree` behind RAII [`CudaBuffer`]s) so that kernel arguments are
//! plain device addresses; contexts, modules, streams and events use cudarc's safe types.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::{self, sys};
use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;

use super::{
    Device, DeviceBuffer, DeviceError, DeviceInfo, LoadedKernel, MemKind, PeerMapping,
    check_artifact, check_bounds,
};
use crate::compile::{Artifact, ArtifactFormat};
use crate::launch::{KernelArg, LaunchSpec, Marshalled};

const HINT: &str =
    "install the NVIDIA driver (it provides libcuda.so.1); the CUDA toolkit is not needed to run";

/// Maps a driver error to a typed error naming the API, with the driver's own string.
/// `cuLaunchKernelEx` with programmatic stream serialization allowed: the kernel may be
/// scheduled before the previous kernel of `stream` completes (its `griddepcontrol.wait` holds it
/// until then; [`LaunchSpec::dependent`]).
///
/// # Safety
/// As `cuLaunchKernel`: live handles, one parameter pointer per kernel argument.
unsafe fn launch_dependent(
    f: sys::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<(), DriverError> {
    // SAFETY: an all-zero attribute value is a valid (padding) union value.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    value.programmaticStreamSerializationAllowed = 1;
    let mut attr = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value,
    };
    let config = sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: shared,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: `config` and its one attribute outlive the call; the caller upholds the rest.
    unsafe { sys::cuLaunchKernelEx(&config, f, params.as_mut_ptr(), std::ptr::null_mut()) }.result()
}

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

/// Fails with [`DeviceError::NoDriver`] unless libcuda can be loaded.
fn driver_present() -> Result<(), DeviceError> {
    // SAFETY: only attempts to dlopen libcuda under its known names; no driver function is called.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(DeviceError::NoDriver {
            vendor: "NVIDIA",
            detail: "libcuda.so could not be loaded".into(),
            hint: HINT,
        })
    }
}

/// `cuInit`; any failure (no GPU, driver/kernel-module mismatch) is [`DeviceError::NoDevice`].
fn init() -> Result<(), DeviceError> {
    driver_present()?;
    cu::init().map_err(|e| DeviceError::NoDevice {
        vendor: "NVIDIA",
        detail: api("cuInit")(e).to_string(),
    })
}

/// One NVIDIA GPU (its primary context).
#[derive(Debug)]
pub struct CudaDevice {
    ctx: Arc<driver::CudaContext>,
    info: DeviceInfo,
}

impl CudaDevice {
    /// The cudarc context, for code that needs more of the driver API.
    pub fn context(&self) -> &Arc<driver::CudaContext> {
        &self.ctx
    }

    /// [`Device::launch_raw`] on raw stream `s`.
    ///
    /// # Safety
    /// As [`Device::launch_raw`]; `s` is a live stream of this context.
    unsafe fn launch_on(
        &self,
        kernel: &CudaKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        s: sys::CUstream,
        cooperative: bool,
    ) -> Result<(), DeviceError> {
        self.bind()?;
        kernel.allow_dynamic_lds(spec.dynamic_lds)?;
        let mut params = Marshalled::new(args);
        let grid = (spec.grid[0], spec.grid[1], spec.grid[2]);
        let block = (spec.block[0], spec.block[1], spec.block[2]);
        let f = kernel.func.cu_function();
        // SAFETY: `f` and `s` are live handles of this context; `params` holds one pointer per
        // argument and outlives the call (the driver copies the values at launch); the caller
        // guarantees the arguments match the kernel.
        let result = unsafe {
            if cooperative {
                cu::launch_cooperative_kernel(
                    f,
                    grid,
                    block,
                    spec.dynamic_lds,
                    s,
                    params.pointers_mut(),
                )
            } else if spec.programmatic() {
                launch_dependent(f, grid, block, spec.dynamic_lds, s, params.pointers_mut())
            } else {
                cu::launch_kernel(f, grid, block, spec.dynamic_lds, s, params.pointers_mut())
            }
        };
        result.map_err(api(if cooperative {
            "cuLaunchCooperativeKernel"
        } else if spec.programmatic() {
            "cuLaunchKernelEx"
        } else {
            "cuLaunchKernel"
        }))
    }

    fn bind(&self) -> Result<(), DeviceError> {
        self.ctx.bind_to_thread().map_err(api("cuCtxSetCurrent"))
    }

    fn attribute(
        ctx: &driver::CudaContext,
        a: sys::CUdevice_attribute,
    ) -> Result<i32, DeviceError> {
        ctx.attribute(a).map_err(api("cuDeviceGetAttribute"))
    }
}

/// A device allocation on one NVIDIA GPU, freed on drop.
#[derive(Debug)]
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<driver::CudaContext>,
}

impl DeviceBuffer for CudaBuffer {
    fn ptr(&self) -> u64 {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        // A failure here (context torn down by a fatal kernel error) cannot be reported from drop;
        // the context records it and the next checked call surfaces it.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc in this context and is freed exactly once, here;
            // the context is synchronised first so no kernel still uses it.
            let _ = self
                .ctx
                .synchronize()
                .and_then(|()| unsafe { cu::free_sync(self.ptr) });
        }
    }
}

/// A kernel loaded on one NVIDIA GPU.
#[derive(Debug, Clone)]
pub struct CudaKernel {
    func: driver::CudaFunction,
    name: String,
}

impl LoadedKernel for CudaKernel {
    fn name(&self) -> &str {
        &self.name
    }
}

impl CudaKernel {
    /// The cudarc function.
    pub fn function(&self) -> &driver::CudaFunction {
        &self.func
    }

    /// Allows more than 48 KiB of dynamic shared memory when asked for.
    fn allow_dynamic_lds(&self, bytes: u32) -> Result<(), DeviceError> {
        if bytes <= 48 * 1024 {
            return Ok(());
        }
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        self.func
            .set_attribute(attr, bytes as i32)
            .map_err(api("cuFuncSetAttribute"))
    }
}

/// A non-blocking stream on one NVIDIA GPU.
#[derive(Debug)]
pub struct CudaStream(Arc<driver::CudaStream>);

impl CudaStream {
    /// The cudarc stream.
    pub fn inner(&self) -> &Arc<driver::CudaStream> {
        &self.0
    }
}

/// The longest stream delay honoured: a skew is microseconds to milliseconds; anything longer is a
/// mistake that would only slow a run down.
pub const MAX_STREAM_DELAY: Duration = Duration::from_millis(100);

/// The host function of [`Device::delay_stream`]: spins until the delay has passed (a sleep would
/// overshoot short delays by the scheduler's granularity). Makes no CUDA call, as host functions
/// must not.
unsafe extern "C" fn hold_stream(data: *mut c_void) {
    // SAFETY: `data` is the `Box<Duration>` leaked by `delay_stream`, handed to exactly this one
    // call by the driver; it is reclaimed here once.
    let delay = unsafe { Box::from_raw(data.cast::<Duration>()) };
    let start = Instant::now();
    while start.elapsed() < *delay {
        std::hint::spin_loop();
    }
}

/// The host function of [`Device::hold_stream`]: waits until its sender is dropped or the
/// timeout passes. Makes no CUDA call, as host functions must not.
unsafe extern "C" fn wait_for_release(data: *mut c_void) {
    // SAFETY: `data` is the `Box<(Receiver, Duration)>` leaked by `hold_stream`, handed to exactly
    // this one call by the driver; it is reclaimed here once.
    let held = unsafe { Box::from_raw(data.cast::<(Receiver<()>, Duration)>()) };
    let _ = held.0.recv_timeout(held.1);
}

/// A timing event on one NVIDIA GPU.
#[derive(Debug)]
pub struct CudaEvent(driver::CudaEvent);

impl CudaEvent {
    /// The cudarc event.
    pub fn inner(&self) -> &driver::CudaEvent {
        &self.0
    }
}

impl Device for CudaDevice {
    type Buffer = CudaBuffer;
    type Kernel = CudaKernel;
    type Stream = CudaStream;
    type Event = CudaEvent;
    type Graph = driver::CudaGraph;

    fn count() -> Result<usize, DeviceError> {
        init()?;
        let n = cu::device::get_count().map_err(api("cuDeviceGetCount"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn new(ordinal: usize) -> Result<Self, DeviceError> {
        let count = CudaDevice::count()?;
        if ordinal >= count {
            let detail = format!("device {ordinal} requested, the driver sees {count}");
            return Err(DeviceError::NoDevice {
                vendor: "NVIDIA",
                detail,
            });
        }
        let ctx = driver::CudaContext::new(ordinal).map_err(api("cuDevicePrimaryCtxRetain"))?;
        let name = ctx.name().map_err(api("cuDeviceGetName"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(api("cuDeviceGetAttribute"))?;
        use sys::CUdevice_attribute::*;
        let sms = CudaDevice::attribute(&ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let coop = CudaDevice::attribute(&ctx, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)?;
        let arch = match (major, minor) {
            (9, 0) => Some(Arch::Sm90),
            _ => None,
        };
        let info = DeviceInfo {
            vendor: Vendor::Nvidia,
            ordinal,
            name,
            arch,
            compute_units: sms as u32,
            cooperative_launch: coop != 0,
        };
        Ok(CudaDevice { ctx, info })
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn runtime(&self) -> String {
        match crate::exec::cuda_driver_version() {
            Ok((a, b)) => format!("CUDA driver API {a}.{b}"),
            Err(_) => "CUDA driver API".into(),
        }
    }

    fn alloc(&self, bytes: usize, _kind: MemKind) -> Result<CudaBuffer, DeviceError> {
        // MemKind::Flags needs nothing special on NVIDIA: device memory is coherent for
        // system-scope atomics and fences (DESIGN.md §5.12 concerns AMD's cached memory).
        self.bind()?;
        let size = bytes.max(1);
        // SAFETY: the context is current; the memory is zero-filled below before anyone reads it.
        let ptr = unsafe { cu::malloc_sync(size) }.map_err(api("cuMemAlloc"))?;
        let buf = CudaBuffer {
            ptr,
            bytes,
            ctx: self.ctx.clone(),
        };
        // SAFETY: `ptr` is a live allocation of `size` bytes.
        unsafe { cu::memset_d8_sync(ptr, 0, size) }.map_err(api("cuMemsetD8"))?;
        Ok(buf)
    }

    fn upload(&self, dst: &CudaBuffer, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        check_bounds(dst.bytes, offset, src.len())?;
        self.synchronize()?;
        // SAFETY: bounds checked above; the device is idle, so no kernel races with the copy.
        unsafe { cu::memcpy_htod_sync(dst.ptr + offset as u64, src) }.map_err(api("cuMemcpyHtoD"))
    }

    fn download(&self, src: &CudaBuffer, offset: usize, dst: &mut [u8]) -> Result<(), DeviceError> {
        check_bounds(src.bytes, offset, dst.len())?;
        self.synchronize()?;
        // SAFETY: bounds checked above; the device is idle, so the data is final.
        unsafe { cu::memcpy_dtoh_sync(dst, src.ptr + offset as u64) }.map_err(api("cuMemcpyDtoH"))
    }

    fn zero(&self, buf: &CudaBuffer) -> Result<(), DeviceError> {
        self.synchronize()?;
        // SAFETY: `buf` is a live allocation of at least `bytes` bytes; the device is idle.
        unsafe { cu::memset_d8_sync(buf.ptr, 0, buf.bytes) }.map_err(api("cuMemsetD8"))
    }

    fn load(&self, artifact: &Artifact, name: &str) -> Result<CudaKernel, DeviceError> {
        check_artifact(
            &self.info,
            artifact,
            &[ArtifactFormat::Cubin, ArtifactFormat::Ptx],
        )?;
        let image = match artifact.format {
            ArtifactFormat::Ptx => {
                let text = String::from_utf8(artifact.image.clone()).map_err(|_| {
                    DeviceError::Artifact {
                        ordinal: self.info.ordinal,
                        detail: "PTX is not UTF-8".into(),
                    }
                })?;
                cudarc::nvrtc::Ptx::from_src(text)
            }
            _ => cudarc::nvrtc::Ptx::from_binary(artifact.image.clone()),
        };
        let module = self
            .ctx
            .load_module(image)
            .map_err(api("cuModuleLoadData"))?;
        let func = module
            .load_function(name)
            .map_err(api("cuModuleGetFunction"))?;
        Ok(CudaKernel {
            func,
            name: name.to_owned(),
        })
    }

    fn blocks_per_cu(
        &self,
        kernel: &CudaKernel,
        block_threads: u32,
        dynamic_lds: u32,
    ) -> Result<u32, DeviceError> {
        self.bind()?;
        kernel.allow_dynamic_lds(dynamic_lds)?;
        kernel
            .func
            .occupancy_max_active_blocks_per_multiprocessor(
                block_threads,
                dynamic_lds as usize,
                None,
            )
            .map_err(api("cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    }

    fn new_stream(&self) -> Result<CudaStream, DeviceError> {
        self.ctx
            .new_stream()
            .map(CudaStream)
            .map_err(api("cuStreamCreate"))
    }

    unsafe fn launch_raw(
        &self,
        kernel: &CudaKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: &CudaStream,
        cooperative: bool,
    ) -> Result<(), DeviceError> {
        // SAFETY: the stream is a live stream of this context; the caller upholds the rest.
        unsafe { self.launch_on(kernel, spec, args, stream.0.cu_stream(), cooperative) }
    }

    unsafe fn launch_on_raw_stream(
        &self,
        kernel: &CudaKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: u64,
    ) -> Result<(), DeviceError> {
        // SAFETY: the caller guarantees `stream` is a live stream of this (primary) context and
        // upholds the argument contract.
        unsafe { self.launch_on(kernel, spec, args, stream as usize as sys::CUstream, false) }
    }

    fn ipc_handle(&self, buf: &CudaBuffer) -> Result<Vec<u8>, DeviceError> {
        self.bind()?;
        // SAFETY: an all-zero handle is a valid out-value; `buf.ptr` is the base of a live
        // cuMemAlloc allocation of this context (every CudaBuffer is one).
        let mut handle: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        unsafe { sys::cuIpcGetMemHandle(&mut handle, buf.ptr) }
            .result()
            .map_err(api("cuIpcGetMemHandle"))?;
        Ok(handle.reserved.iter().map(|&c| c as u8).collect())
    }

    fn ipc_open(&self, handle: &[u8], bytes: usize) -> Result<PeerMapping, DeviceError> {
        self.bind()?;
        // SAFETY: an all-zero handle is a valid value, filled from the exported bytes below.
        let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        if handle.len() != h.reserved.len() {
            return Err(DeviceError::Unsupported(format!(
                "an IPC handle of {} bytes; CUDA's are {}",
                handle.len(),
                h.reserved.len()
            )));
        }
        for (d, &b) in h.reserved.iter_mut().zip(handle) {
            *d = b as _;
        }
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the handle came from cuIpcGetMemHandle in another process.
        // LAZY_ENABLE_PEER_ACCESS: the owner may be another GPU of this host.
        unsafe {
            sys::cuIpcOpenMemHandle_v2(
                &mut ptr,
                h,
                sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
            )
        }
        .result()
        .map_err(api("cuIpcOpenMemHandle"))?;
        let ctx = self.ctx.clone();
        Ok(PeerMapping {
            ptr,
            bytes,
            ordinal: self.info.ordinal,
            close: Some(Box::new(move || {
                if ctx.bind_to_thread().is_ok() {
                    // SAFETY: `ptr` was mapped by cuIpcOpenMemHandle in this context and is
                    // unmapped exactly once, here, after the context's work has finished.
                    let _ = ctx
                        .synchronize()
                        .and_then(|()| unsafe { sys::cuIpcCloseMemHandle(ptr) }.result());
                }
            })),
        })
    }

    fn delay_stream(&self, stream: &CudaStream, delay: Duration) -> Result<(), DeviceError> {
        if delay.is_zero() {
            return Ok(());
        }
        if delay > MAX_STREAM_DELAY {
            return Err(DeviceError::Unsupported(format!(
                "a stream delay of {delay:?} exceeds the {MAX_STREAM_DELAY:?} a skew may use"
            )));
        }
        self.bind()?;
        let data = Box::into_raw(Box::new(delay));
        // SAFETY: the stream is live; the callback takes ownership of `data` and makes no CUDA
        // call; on failure the driver never calls it, so ownership comes back here.
        let rc = unsafe {
            cu::stream::launch_host_function(stream.0.cu_stream(), hold_stream, data.cast())
        };
        if let Err(e) = rc {
            // SAFETY: the launch failed, so the callback will never reclaim the box.
            drop(unsafe { Box::from_raw(data) });
            return Err(api("cuLaunchHostFunc")(e));
        }
        Ok(())
    }

    fn sync_stream(&self, stream: &CudaStream) -> Result<(), DeviceError> {
        stream.0.synchronize().map_err(api("cuStreamSynchronize"))
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        self.ctx.synchronize().map_err(api("cuCtxSynchronize"))
    }

    fn can_access_peer(&self, peer: &CudaDevice) -> Result<bool, DeviceError> {
        if peer.info.ordinal == self.info.ordinal {
            return Ok(true);
        }
        let mut can = 0;
        // SAFETY: both device handles are valid; `can` is a valid out-pointer.
        let rc = unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer.ctx.cu_device())
        };
        rc.result().map_err(api("cuDeviceCanAccessPeer"))?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, peer: &CudaDevice) -> Result<(), DeviceError> {
        if peer.info.ordinal == self.info.ordinal {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: this device's context is current and `peer`'s context is live.
        let rc = unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) };
        match rc {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                Ok(())
            }
            e => Err(api("cuCtxEnablePeerAccess")(DriverError(e))),
        }
    }

    fn new_event(&self) -> Result<CudaEvent, DeviceError> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        self.ctx
            .new_event(flags)
            .map(CudaEvent)
            .map_err(api("cuEventCreate"))
    }

    fn record(&self, event: &CudaEvent, stream: &CudaStream) -> Result<(), DeviceError> {
        event.0.record(&stream.0).map_err(api("cuEventRecord"))
    }

    fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f32, DeviceError> {
        start
            .0
            .elapsed_ms(&end.0)
            .map_err(api("cuEventElapsedTime"))
    }

    fn wait_event(&self, stream: &CudaStream, event: &CudaEvent) -> Result<(), DeviceError> {
        stream.0.wait(&event.0).map_err(api("cuStreamWaitEvent"))
    }

    fn hold_stream(
        &self,
        stream: &CudaStream,
        release: Receiver<()>,
        timeout: Duration,
    ) -> Result<(), DeviceError> {
        self.bind()?;
        let data = Box::into_raw(Box::new((release, timeout)));
        // SAFETY: the stream is live; the callback takes ownership of `data` and makes no CUDA
        // call; on failure the driver never calls it, so ownership comes back here.
        let rc = unsafe {
            cu::stream::launch_host_function(stream.0.cu_stream(), wait_for_release, data.cast())
        };
        if let Err(e) = rc {
            // SAFETY: the launch failed, so the callback will never reclaim the box.
            drop(unsafe { Box::from_raw(data) });
            return Err(api("cuLaunchHostFunc")(e));
        }
        Ok(())
    }

    fn fill_async(
        &self,
        buf: &CudaBuffer,
        byte: u8,
        stream: &CudaStream,
    ) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: `buf` is a live allocation of `bytes` bytes of this context.
        unsafe { cu::memset_d8_async(buf.ptr, byte, buf.bytes, stream.0.cu_stream()) }
            .map_err(api("cuMemsetD8Async"))
    }

    fn copy_async(
        &self,
        dst: &CudaBuffer,
        src: &CudaBuffer,
        bytes: usize,
        stream: &CudaStream,
    ) -> Result<(), DeviceError> {
        check_bounds(dst.bytes, 0, bytes)?;
        check_bounds(src.bytes, 0, bytes)?;
        self.bind()?;
        // SAFETY: both are live allocations of at least `bytes` bytes (checked above).
        unsafe { cu::memcpy_dtod_async(dst.ptr, src.ptr, bytes, stream.0.cu_stream()) }
            .map_err(api("cuMemcpyDtoDAsync"))
    }

    fn l2_bytes(&self) -> Result<u64, DeviceError> {
        let a = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
        let v = CudaDevice::attribute(&self.ctx, a)?;
        Ok(u64::try_from(v).unwrap_or(0))
    }

    fn begin_capture(&self, stream: &CudaStream) -> Result<(), DeviceError> {
        self.bind()?;
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        stream
            .0
            .begin_capture(mode)
            .map_err(api("cuStreamBeginCapture"))
    }

    fn end_capture(&self, stream: &CudaStream) -> Result<Option<driver::CudaGraph>, DeviceError> {
        let flags = sys::CUgraphInstantiate_flags(0);
        stream
            .0
            .end_capture(flags)
            .map_err(api("cuStreamEndCapture"))
    }

    fn upload_graph(&self, graph: &driver::CudaGraph) -> Result<(), DeviceError> {
        graph.upload().map_err(api("cuGraphUpload"))
    }

    fn launch_graph(&self, graph: &driver::CudaGraph) -> Result<(), DeviceError> {
        graph.launch().map_err(api("cuGraphLaunch"))
    }

    fn param_sizes(&self, kernel: &CudaKernel) -> Result<Vec<usize>, DeviceError> {
        // The entry point exists from CUDA 12.4 on; cudarc would panic looking it up in an older
        // driver.
        let (major, minor) = crate::exec::cuda_driver_version()?;
        if (major, minor) < (12, 4) {
            let why =
                format!("cuFuncGetParamInfo needs a CUDA 12.4 driver, this one is {major}.{minor}");
            return Err(DeviceError::Unsupported(why));
        }
        let f = kernel.func.cu_function();
        let mut sizes = Vec::new();
        loop {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: `f` is a live function of a loaded module; both out-pointers are valid.
            let rc = unsafe { sys::cuFuncGetParamInfo(f, sizes.len(), &mut offset, &mut size) };
            match rc {
                sys::CUresult::CUDA_SUCCESS => sizes.push(size),
                // Past the last parameter.
                sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(sizes),
                e => return Err(api("cuFuncGetParamInfo")(DriverError(e))),
            }
        }
    }
}
