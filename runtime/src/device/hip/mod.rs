//! AMD GPUs through a thin libloading wrapper of libamdhip64 (the HIP module API).
//!
//! HIP's current device is per host thread, so every call that depends on it selects the device
//! first (`hipSetDevice`, a cheap thread-local store).

mod ffi;

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;

use super::{
    Device, DeviceBuffer, DeviceError, DeviceInfo, LoadedKernel, MemKind, PeerMapping,
    check_artifact, check_bounds,
};
use crate::compile::{Artifact, ArtifactFormat};
use crate::launch::{KernelArg, LaunchSpec, Marshalled};
use ffi::Api;

/// The HIP runtime library this process loaded, after resolving every symbol the runtime uses
/// (fails with [`DeviceError::NoDriver`] when it is not installed). Needs no GPU.
pub fn hip_runtime_library() -> Result<&'static str, DeviceError> {
    Api::get().map(|api| api.library)
}

/// Initialises HIP; any failure or zero devices is "no AMD GPU/driver found".
fn init(api: &Api) -> Result<usize, DeviceError> {
    let no_gpu = |detail: String| DeviceError::NoDevice {
        vendor: "AMD",
        detail,
    };
    // SAFETY: hipInit takes flags (must be 0) and has no other preconditions.
    let rc = unsafe { (api.init)(0) };
    if rc != ffi::SUCCESS {
        return Err(no_gpu(format!(
            "hipInit: {} ({rc}); {}",
            api.describe(rc),
            ffi::HINT
        )));
    }
    let mut count: c_int = 0;
    // SAFETY: valid out-pointer.
    let rc = unsafe { (api.get_device_count)(&mut count) };
    if rc != ffi::SUCCESS {
        return Err(no_gpu(format!(
            "hipGetDeviceCount: {} ({rc})",
            api.describe(rc)
        )));
    }
    if count <= 0 {
        return Err(no_gpu("hipGetDeviceCount reports 0 devices".into()));
    }
    Ok(count as usize)
}

/// One AMD GPU (or, through the test double of `tests/hip-double`, an NVIDIA GPU driven through
/// the HIP entry points).
#[derive(Debug)]
pub struct HipDevice {
    api: &'static Api,
    ordinal: c_int,
    info: DeviceInfo,
    /// The image formats it loads: AMD code objects, or, for the test double, what the CUDA
    /// driver loads.
    formats: &'static [ArtifactFormat],
}

/// The NVIDIA arch the test double of HIP over the CUDA driver API says it runs
/// (`wavefuse_hip_double_arch`), `None` for a real HIP runtime.
fn double_arch(api: &Api) -> Option<Arch> {
    let f = api.double_arch?;
    // SAFETY: the double's function returns a static NUL-terminated string (or null).
    let p = unsafe { f() };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated, per the double's contract.
    let name = unsafe { CStr::from_ptr(p) }.to_string_lossy();
    name.parse::<Arch>().ok()
}

/// The host function behind [`Device::hold_stream`] (a stream callback): waits until its sender
/// is dropped or the timeout passes. Makes no HIP call, as callbacks must not.
unsafe extern "C" fn wait_for_release(_: ffi::Stream, _: c_int, data: *mut c_void) {
    // SAFETY: `data` is the `Box<(Receiver, Duration)>` leaked by `hold_stream`, handed to exactly
    // this one call by the runtime; it is reclaimed here once.
    let held = unsafe { Box::from_raw(data.cast::<(Receiver<()>, Duration)>()) };
    let _ = held.0.recv_timeout(held.1);
}

/// The stream callback behind [`Device::delay_stream`]: spins until the delay has passed.
unsafe extern "C" fn spin_for(_: ffi::Stream, _: c_int, data: *mut c_void) {
    // SAFETY: the `Box<Duration>` leaked by `delay_stream`, reclaimed here once.
    let delay = unsafe { Box::from_raw(data.cast::<Duration>()) };
    let start = Instant::now();
    while start.elapsed() < *delay {
        std::hint::spin_loop();
    }
}

/// An instantiated graph of one AMD GPU, with the stream it was captured from.
#[derive(Debug)]
pub struct HipGraph {
    exec: ffi::GraphExec,
    graph: ffi::Graph,
    stream: Arc<RawStream>,
    api: &'static Api,
}

impl Drop for HipGraph {
    fn drop(&mut self) {
        // SAFETY: both were created by hipStreamEndCapture / hipGraphInstantiate and are
        // destroyed once, here.
        unsafe {
            (self.api.graph_exec_destroy)(self.exec);
            (self.api.graph_destroy)(self.graph);
        }
    }
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipApi")
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

impl HipDevice {
    /// [`Device::launch_raw`] on raw stream `s`.
    ///
    /// # Safety
    /// As [`Device::launch_raw`]; `s` is a live stream of this device.
    unsafe fn launch_on(
        &self,
        kernel: &HipKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        s: ffi::Stream,
        cooperative: bool,
    ) -> Result<(), DeviceError> {
        self.select()?;
        let mut params = Marshalled::new(args);
        let [gx, gy, gz] = spec.grid;
        let [bx, by, bz] = spec.block;
        let (f, lds) = (kernel.func, spec.dynamic_lds);
        let (name, rc) = match (cooperative, self.api.module_launch_cooperative_kernel) {
            // SAFETY: live handles; `params` holds one pointer per argument and outlives the call;
            // the caller guarantees the arguments match the kernel.
            (true, Some(coop)) => ("hipModuleLaunchCooperativeKernel", unsafe {
                coop(f, gx, gy, gz, bx, by, bz, lds, s, params.as_mut_ptr())
            }),
            // SAFETY: as above; `extra` is null because parameters go through `kernelParams`.
            _ => ("hipModuleLaunchKernel", unsafe {
                (self.api.module_launch_kernel)(
                    f,
                    gx,
                    gy,
                    gz,
                    bx,
                    by,
                    bz,
                    lds,
                    s,
                    params.as_mut_ptr(),
                    ptr::null_mut(),
                )
            }),
        };
        self.api.check(name, rc)
    }

    fn select(&self) -> Result<(), DeviceError> {
        select(self.api, self.ordinal)
    }

    fn attribute(&self, attr: c_int) -> Result<c_int, DeviceError> {
        let mut v: c_int = 0;
        // SAFETY: valid out-pointer; the ordinal was checked against the device count.
        let rc = unsafe { (self.api.device_get_attribute)(&mut v, attr, self.ordinal) };
        self.api.check("hipDeviceGetAttribute", rc)?;
        Ok(v)
    }

    fn name(api: &Api, ordinal: c_int) -> Result<String, DeviceError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: `buf` holds 256 bytes, the length passed.
        let rc = unsafe { (api.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, ordinal) };
        api.check("hipDeviceGetName", rc)?;
        let bytes: Vec<u8> = buf
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn malloc(&self, bytes: usize, kind: MemKind) -> Result<*mut c_void, DeviceError> {
        let mut p: *mut c_void = ptr::null_mut();
        let api = self.api;
        // SAFETY (all three calls): valid out-pointer; the device is selected.
        let rc = match kind {
            MemKind::Device => unsafe { (api.malloc)(&mut p, bytes) },
            // Flags must be seen by a peer's polling loads over PCIe (DESIGN.md §5.12): uncached
            // where the runtime knows the flag (ROCm ≥ 5.3), else fine-grained (coherent at
            // system scope, which is what the generated fences and atomics assume).
            MemKind::Flags => {
                match unsafe { (api.ext_malloc_with_flags)(&mut p, bytes, ffi::MALLOC_UNCACHED) } {
                    ffi::ERROR_INVALID_VALUE => unsafe {
                        (api.ext_malloc_with_flags)(&mut p, bytes, ffi::MALLOC_FINEGRAINED)
                    },
                    rc => rc,
                }
            }
        };
        let name = if kind == MemKind::Device {
            "hipMalloc"
        } else {
            "hipExtMallocWithFlags"
        };
        api.check(name, rc)?;
        Ok(p)
    }
}

fn select(api: &Api, ordinal: c_int) -> Result<(), DeviceError> {
    // SAFETY: the ordinal was checked against the device count when the device was opened.
    api.check("hipSetDevice", unsafe { (api.set_device)(ordinal) })
}

/// A device allocation on one AMD GPU, freed on drop.
#[derive(Debug)]
pub struct HipBuffer {
    ptr: *mut c_void,
    bytes: usize,
    ordinal: c_int,
    api: &'static Api,
}

// SAFETY: a device address is not tied to a host thread; HIP's allocator is thread-safe.
unsafe impl Send for HipBuffer {}
// SAFETY: shared references only read the address and size.
unsafe impl Sync for HipBuffer {}

impl DeviceBuffer for HipBuffer {
    fn ptr(&self) -> u64 {
        self.ptr as u64
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn ordinal(&self) -> usize {
        self.ordinal as usize
    }
}

impl Drop for HipBuffer {
    fn drop(&mut self) {
        if select(self.api, self.ordinal).is_ok() {
            // SAFETY: `ptr` came from hipMalloc/hipExtMallocWithFlags on this device and is freed
            // exactly once, here; the device is synchronised first so no kernel still uses it.
            unsafe {
                (self.api.device_synchronize)();
                (self.api.free)(self.ptr);
            }
        }
    }
}

/// A loaded module, unloaded when the last kernel from it is dropped.
#[derive(Debug)]
struct HipModule {
    module: ffi::Module,
    ordinal: c_int,
    api: &'static Api,
}

// SAFETY: module handles are process-wide; HIP's module API is thread-safe.
unsafe impl Send for HipModule {}
// SAFETY: as above.
unsafe impl Sync for HipModule {}

impl Drop for HipModule {
    fn drop(&mut self) {
        if select(self.api, self.ordinal).is_ok() {
            // SAFETY: the module came from hipModuleLoadData and is unloaded once, here, after
            // every kernel from it (each holds an Arc to it) is gone.
            unsafe { (self.api.module_unload)(self.module) };
        }
    }
}

/// A kernel loaded on one AMD GPU.
#[derive(Debug, Clone)]
pub struct HipKernel {
    func: ffi::Function,
    name: String,
    _module: Arc<HipModule>,
}

// SAFETY: function handles are process-wide and immutable.
unsafe impl Send for HipKernel {}
// SAFETY: as above.
unsafe impl Sync for HipKernel {}

impl LoadedKernel for HipKernel {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A non-blocking stream on one AMD GPU.
#[derive(Debug)]
pub struct HipStream(Arc<RawStream>);

impl HipStream {
    fn raw(&self) -> ffi::Stream {
        self.0.stream
    }
}

/// The stream handle, destroyed when its last owner (the stream, or a graph captured from it)
/// is dropped.
#[derive(Debug)]
struct RawStream {
    stream: ffi::Stream,
    api: &'static Api,
}

// SAFETY: stream handles may be used from any host thread.
unsafe impl Send for RawStream {}
// SAFETY: as above.
unsafe impl Sync for RawStream {}

impl Drop for RawStream {
    fn drop(&mut self) {
        // SAFETY: created by hipStreamCreateWithFlags, destroyed once, here.
        unsafe { (self.api.stream_destroy)(self.stream) };
    }
}

/// A timing event on one AMD GPU.
#[derive(Debug)]
pub struct HipEvent {
    event: ffi::Event,
    api: &'static Api,
}

// SAFETY: event handles may be used from any host thread.
unsafe impl Send for HipEvent {}
// SAFETY: as above.
unsafe impl Sync for HipEvent {}

impl Drop for HipEvent {
    fn drop(&mut self) {
        // SAFETY: created by hipEventCreateWithFlags, destroyed once, here.
        unsafe { (self.api.event_destroy)(self.event) };
    }
}

impl Device for HipDevice {
    type Buffer = HipBuffer;
    type Kernel = HipKernel;
    type Stream = HipStream;
    type Event = HipEvent;
    type Graph = HipGraph;

    fn count() -> Result<usize, DeviceError> {
        init(Api::get()?)
    }

    fn new(ordinal: usize) -> Result<Self, DeviceError> {
        let api = Api::get()?;
        let count = init(api)?;
        if ordinal >= count {
            let detail = format!("device {ordinal} requested, HIP sees {count}");
            return Err(DeviceError::NoDevice {
                vendor: "AMD",
                detail,
            });
        }
        let ordinal = ordinal as c_int;
        select(api, ordinal)?;
        let name = HipDevice::name(api, ordinal)?;
        let mut dev = HipDevice {
            api,
            ordinal,
            info: DeviceInfo {
                vendor: Vendor::Amd,
                ordinal: ordinal as usize,
                name,
                arch: None,
                compute_units: 0,
                cooperative_launch: false,
            },
            formats: &[ArtifactFormat::AmdCodeObject],
        };
        dev.info.compute_units = dev.attribute(ffi::ATTR_MULTIPROCESSOR_COUNT)? as u32;
        dev.info.cooperative_launch = api.module_launch_cooperative_kernel.is_some()
            && dev.attribute(ffi::ATTR_COOPERATIVE_LAUNCH)? != 0;
        // gcnArch is an AMD-specific attribute; a runtime without it leaves the arch unknown
        // (loading then skips the arch check).
        dev.info.arch = match dev.attribute(ffi::ATTR_GCN_ARCH) {
            Ok(906) => Some(Arch::Gfx906),
            _ => None,
        };
        if let Some(arch) = double_arch(api) {
            // The test double: the HIP entry points over the CUDA driver, loading CUDA images.
            dev.info.arch = Some(arch);
            dev.info.vendor = Vendor::Nvidia;
            dev.formats = &[ArtifactFormat::Cubin, ArtifactFormat::Ptx];
        }
        Ok(dev)
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn runtime(&self) -> String {
        if self.api.double_arch.is_some() {
            format!(
                "HIP through the test double over the CUDA driver ({})",
                self.api.library
            )
        } else {
            format!("HIP ({})", self.api.library)
        }
    }

    fn alloc(&self, bytes: usize, kind: MemKind) -> Result<HipBuffer, DeviceError> {
        self.select()?;
        let size = bytes.max(1);
        let ptr = self.malloc(size, kind)?;
        let buf = HipBuffer {
            ptr,
            bytes,
            ordinal: self.ordinal,
            api: self.api,
        };
        // SAFETY: `ptr` is a live allocation of `size` bytes on the selected device.
        self.api
            .check("hipMemset", unsafe { (self.api.memset)(ptr, 0, size) })?;
        Ok(buf)
    }

    fn upload(&self, dst: &HipBuffer, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        check_bounds(dst.bytes, offset, src.len())?;
        self.synchronize()?;
        // SAFETY: bounds checked; the device is idle, so no kernel races with the copy.
        let rc = unsafe {
            (self.api.memcpy)(
                dst.ptr.cast::<u8>().add(offset).cast(),
                src.as_ptr().cast(),
                src.len(),
                ffi::MEMCPY_HOST_TO_DEVICE,
            )
        };
        self.api.check("hipMemcpy", rc)
    }

    fn download(&self, src: &HipBuffer, offset: usize, dst: &mut [u8]) -> Result<(), DeviceError> {
        check_bounds(src.bytes, offset, dst.len())?;
        self.synchronize()?;
        // SAFETY: bounds checked; the device is idle, so the data is final.
        let rc = unsafe {
            (self.api.memcpy)(
                dst.as_mut_ptr().cast(),
                src.ptr.cast::<u8>().add(offset).cast(),
                dst.len(),
                ffi::MEMCPY_DEVICE_TO_HOST,
            )
        };
        self.api.check("hipMemcpy", rc)
    }

    fn zero(&self, buf: &HipBuffer) -> Result<(), DeviceError> {
        self.synchronize()?;
        // SAFETY: a live allocation of at least `bytes` bytes; the device is idle.
        self.api.check("hipMemset", unsafe {
            (self.api.memset)(buf.ptr, 0, buf.bytes)
        })
    }

    fn load(&self, artifact: &Artifact, name: &str) -> Result<HipKernel, DeviceError> {
        check_artifact(&self.info, artifact, self.formats)?;
        self.select()?;
        let mut module: ffi::Module = ptr::null_mut();
        // SAFETY: the image is a complete code object in host memory, alive for the call.
        let rc =
            unsafe { (self.api.module_load_data)(&mut module, artifact.image.as_ptr().cast()) };
        self.api.check("hipModuleLoadData", rc)?;
        let module = Arc::new(HipModule {
            module,
            ordinal: self.ordinal,
            api: self.api,
        });
        let cname = CString::new(name).map_err(|_| DeviceError::Artifact {
            ordinal: self.info.ordinal,
            detail: format!("kernel name {name:?} contains NUL"),
        })?;
        let mut func: ffi::Function = ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, valid out-pointer.
        let rc =
            unsafe { (self.api.module_get_function)(&mut func, module.module, cname.as_ptr()) };
        self.api.check("hipModuleGetFunction", rc)?;
        Ok(HipKernel {
            func,
            name: name.to_owned(),
            _module: module,
        })
    }

    fn blocks_per_cu(
        &self,
        kernel: &HipKernel,
        block_threads: u32,
        dynamic_lds: u32,
    ) -> Result<u32, DeviceError> {
        self.select()?;
        let mut n: c_int = 0;
        // SAFETY: live function handle, valid out-pointer.
        let rc = unsafe {
            (self.api.module_occupancy)(
                &mut n,
                kernel.func,
                block_threads as c_int,
                dynamic_lds as usize,
            )
        };
        self.api
            .check("hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", rc)?;
        Ok(n.max(0) as u32)
    }

    fn new_stream(&self) -> Result<HipStream, DeviceError> {
        self.select()?;
        let mut stream: ffi::Stream = ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc =
            unsafe { (self.api.stream_create_with_flags)(&mut stream, ffi::STREAM_NON_BLOCKING) };
        self.api.check("hipStreamCreateWithFlags", rc)?;
        Ok(HipStream(Arc::new(RawStream {
            stream,
            api: self.api,
        })))
    }

    unsafe fn launch_raw(
        &self,
        kernel: &HipKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: &HipStream,
        cooperative: bool,
    ) -> Result<(), DeviceError> {
        // SAFETY: the stream is live; the caller upholds the rest.
        unsafe { self.launch_on(kernel, spec, args, stream.raw(), cooperative) }
    }

    unsafe fn launch_on_raw_stream(
        &self,
        kernel: &HipKernel,
        spec: &LaunchSpec,
        args: &[KernelArg],
        stream: u64,
    ) -> Result<(), DeviceError> {
        // SAFETY: the caller guarantees `stream` is a live stream of this device (PyTorch's ROCm
        // build hands out `hipStream_t`s) and upholds the argument contract.
        unsafe { self.launch_on(kernel, spec, args, stream as usize as ffi::Stream, false) }
    }

    fn sync_stream(&self, stream: &HipStream) -> Result<(), DeviceError> {
        // SAFETY: live stream.
        self.api.check("hipStreamSynchronize", unsafe {
            (self.api.stream_synchronize)(stream.raw())
        })
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        self.select()?;
        // SAFETY: no preconditions beyond a selected device.
        self.api.check("hipDeviceSynchronize", unsafe {
            (self.api.device_synchronize)()
        })
    }

    fn can_access_peer(&self, peer: &HipDevice) -> Result<bool, DeviceError> {
        if peer.ordinal == self.ordinal {
            return Ok(true);
        }
        let mut can: c_int = 0;
        // SAFETY: valid out-pointer; both ordinals were checked when opened.
        let rc = unsafe { (self.api.device_can_access_peer)(&mut can, self.ordinal, peer.ordinal) };
        self.api.check("hipDeviceCanAccessPeer", rc)?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, peer: &HipDevice) -> Result<(), DeviceError> {
        if peer.ordinal == self.ordinal {
            return Ok(());
        }
        self.select()?;
        // SAFETY: this device is selected; flags must be 0.
        match unsafe { (self.api.device_enable_peer_access)(peer.ordinal, 0) } {
            ffi::ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            rc => self.api.check("hipDeviceEnablePeerAccess", rc),
        }
    }

    fn ipc_handle(&self, buf: &HipBuffer) -> Result<Vec<u8>, DeviceError> {
        select(self.api, buf.ordinal)?;
        let mut handle = ffi::IpcMemHandle {
            reserved: [0; ffi::IPC_HANDLE_SIZE],
        };
        // SAFETY: valid out-pointer; `buf.ptr` is the base of a live hipMalloc /
        // hipExtMallocWithFlags allocation of its device (every HipBuffer is one).
        let rc = unsafe { (self.api.ipc_get_mem_handle)(&mut handle, buf.ptr) };
        self.api.check("hipIpcGetMemHandle", rc)?;
        Ok(handle.reserved.iter().map(|&c| c as u8).collect())
    }

    fn ipc_open(&self, handle: &[u8], bytes: usize) -> Result<PeerMapping, DeviceError> {
        if handle.len() != ffi::IPC_HANDLE_SIZE {
            return Err(DeviceError::Unsupported(format!(
                "an IPC handle of {} bytes; HIP's are {}",
                handle.len(),
                ffi::IPC_HANDLE_SIZE
            )));
        }
        let mut h = ffi::IpcMemHandle {
            reserved: [0; ffi::IPC_HANDLE_SIZE],
        };
        for (d, &b) in h.reserved.iter_mut().zip(handle) {
            *d = b as c_char;
        }
        self.select()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the handle came from hipIpcGetMemHandle in another process.
        // Lazy peer access: the owner may be another GPU of this host.
        let rc = unsafe {
            (self.api.ipc_open_mem_handle)(&mut ptr, h, ffi::IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        };
        self.api.check("hipIpcOpenMemHandle", rc)?;
        let (api, ordinal) = (self.api, self.ordinal);
        let addr = ptr as u64;
        Ok(PeerMapping {
            ptr: addr,
            bytes,
            ordinal: ordinal as usize,
            close: Some(Box::new(move || {
                if select(api, ordinal).is_ok() {
                    // SAFETY: `addr` was mapped by hipIpcOpenMemHandle on this device and is
                    // unmapped exactly once, here, after the device's work has finished.
                    unsafe {
                        (api.device_synchronize)();
                        (api.ipc_close_mem_handle)(addr as *mut c_void);
                    }
                }
            })),
        })
    }

    fn new_event(&self) -> Result<HipEvent, DeviceError> {
        self.select()?;
        let mut event: ffi::Event = ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc = unsafe { (self.api.event_create_with_flags)(&mut event, ffi::EVENT_DEFAULT) };
        self.api.check("hipEventCreateWithFlags", rc)?;
        Ok(HipEvent {
            event,
            api: self.api,
        })
    }

    fn record(&self, event: &HipEvent, stream: &HipStream) -> Result<(), DeviceError> {
        // SAFETY: live event and stream of this device.
        self.api.check("hipEventRecord", unsafe {
            (self.api.event_record)(event.event, stream.raw())
        })
    }

    fn elapsed_ms(&self, start: &HipEvent, end: &HipEvent) -> Result<f32, DeviceError> {
        // SAFETY: live events.
        unsafe {
            self.api.check(
                "hipEventSynchronize",
                (self.api.event_synchronize)(start.event),
            )?;
            self.api.check(
                "hipEventSynchronize",
                (self.api.event_synchronize)(end.event),
            )?;
        }
        let mut ms = 0f32;
        // SAFETY: valid out-pointer, completed events.
        let rc = unsafe { (self.api.event_elapsed_time)(&mut ms, start.event, end.event) };
        self.api.check("hipEventElapsedTime", rc)?;
        Ok(ms)
    }

    fn delay_stream(&self, stream: &HipStream, delay: Duration) -> Result<(), DeviceError> {
        if delay.is_zero() {
            return Ok(());
        }
        if delay > crate::device::MAX_STREAM_DELAY {
            return Err(DeviceError::Unsupported(format!(
                "a stream delay of {delay:?} exceeds the {:?} a skew may use",
                crate::device::MAX_STREAM_DELAY
            )));
        }
        self.select()?;
        let data = Box::into_raw(Box::new(delay));
        // SAFETY: live stream; the callback takes ownership of `data` and makes no HIP call; on
        // failure it is never called, so ownership comes back here.
        let rc = unsafe { (self.api.stream_add_callback)(stream.raw(), spin_for, data.cast(), 0) };
        if rc != ffi::SUCCESS {
            // SAFETY: the callback will never run, so the box is reclaimed once, here.
            drop(unsafe { Box::from_raw(data) });
        }
        self.api.check("hipStreamAddCallback", rc)
    }

    fn wait_event(&self, stream: &HipStream, event: &HipEvent) -> Result<(), DeviceError> {
        // SAFETY: live stream and event; flags must be 0.
        self.api.check("hipStreamWaitEvent", unsafe {
            (self.api.stream_wait_event)(stream.raw(), event.event, 0)
        })
    }

    fn hold_stream(
        &self,
        stream: &HipStream,
        release: Receiver<()>,
        timeout: Duration,
    ) -> Result<(), DeviceError> {
        self.select()?;
        let data = Box::into_raw(Box::new((release, timeout)));
        // SAFETY: live stream; the callback takes ownership of `data` and makes no HIP call; on
        // failure it is never called, so ownership comes back here.
        let rc = unsafe {
            (self.api.stream_add_callback)(stream.raw(), wait_for_release, data.cast(), 0)
        };
        if rc != ffi::SUCCESS {
            // SAFETY: the callback will never run, so the box is reclaimed once, here.
            drop(unsafe { Box::from_raw(data) });
        }
        self.api.check("hipStreamAddCallback", rc)
    }

    fn fill_async(&self, buf: &HipBuffer, byte: u8, stream: &HipStream) -> Result<(), DeviceError> {
        self.select()?;
        // SAFETY: a live allocation of `bytes` bytes of this device.
        self.api.check("hipMemsetD8Async", unsafe {
            (self.api.memset_d8_async)(buf.ptr, byte, buf.bytes, stream.raw())
        })
    }

    fn copy_async(
        &self,
        dst: &HipBuffer,
        src: &HipBuffer,
        bytes: usize,
        stream: &HipStream,
    ) -> Result<(), DeviceError> {
        check_bounds(dst.bytes, 0, bytes)?;
        check_bounds(src.bytes, 0, bytes)?;
        self.select()?;
        // SAFETY: both are live allocations of at least `bytes` bytes (checked above).
        self.api.check("hipMemcpyDtoDAsync", unsafe {
            (self.api.memcpy_dtod_async)(dst.ptr, src.ptr, bytes, stream.raw())
        })
    }

    fn l2_bytes(&self) -> Result<u64, DeviceError> {
        Ok(u64::try_from(self.attribute(ffi::ATTR_L2_CACHE_SIZE)?).unwrap_or(0))
    }

    fn begin_capture(&self, stream: &HipStream) -> Result<(), DeviceError> {
        self.select()?;
        // SAFETY: live stream, a valid capture mode.
        self.api.check("hipStreamBeginCapture", unsafe {
            (self.api.stream_begin_capture)(stream.raw(), ffi::CAPTURE_MODE_RELAXED)
        })
    }

    fn end_capture(&self, stream: &HipStream) -> Result<Option<HipGraph>, DeviceError> {
        self.select()?;
        let mut graph: ffi::Graph = ptr::null_mut();
        // SAFETY: live stream being captured; valid out-pointer.
        let rc = unsafe { (self.api.stream_end_capture)(stream.raw(), &mut graph) };
        self.api.check("hipStreamEndCapture", rc)?;
        if graph.is_null() {
            return Ok(None);
        }
        let mut exec: ffi::GraphExec = ptr::null_mut();
        // SAFETY: a live graph; no error node or log buffer is asked for.
        let rc = unsafe {
            (self.api.graph_instantiate)(&mut exec, graph, ptr::null_mut(), ptr::null_mut(), 0)
        };
        if rc != ffi::SUCCESS {
            // SAFETY: the graph is destroyed once, here, as no HipGraph owns it.
            unsafe { (self.api.graph_destroy)(graph) };
        }
        self.api.check("hipGraphInstantiate", rc)?;
        Ok(Some(HipGraph {
            exec,
            graph,
            stream: stream.0.clone(),
            api: self.api,
        }))
    }

    fn upload_graph(&self, graph: &HipGraph) -> Result<(), DeviceError> {
        let Some(upload) = self.api.graph_upload else {
            return Ok(());
        };
        self.select()?;
        // SAFETY: a live instantiated graph and the stream it was captured from (kept alive by
        // the graph).
        self.api.check("hipGraphUpload", unsafe {
            upload(graph.exec, graph.stream.stream)
        })
    }

    fn launch_graph(&self, graph: &HipGraph) -> Result<(), DeviceError> {
        self.select()?;
        // SAFETY: a live instantiated graph and the stream it was captured from (kept alive by
        // the graph).
        self.api.check("hipGraphLaunch", unsafe {
            (self.api.graph_launch)(graph.exec, graph.stream.stream)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hip_symbols_resolve_where_the_runtime_is_installed() {
        match hip_runtime_library() {
            Ok(lib) => assert!(lib.starts_with("libamdhip64")),
            Err(e @ DeviceError::NoDriver { .. }) => {
                assert!(
                    std::env::var_os("CI").is_none_or(|v| v.is_empty()),
                    "CI must have libamdhip64: {e}"
                );
                println!("skipped: {e}");
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}
