//! The HIP runtime entry points wavefuse uses, resolved from libamdhip64 with libloading.
//!
//! Signatures follow `hip_runtime_api.h` (ROCm 5.2, unchanged in later releases for these
//! functions). Enum values that are not in the library's exports are written down here once.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use crate::device::DeviceError;

pub(crate) type Module = *mut c_void;
pub(crate) type Function = *mut c_void;
pub(crate) type Stream = *mut c_void;
pub(crate) type Event = *mut c_void;
pub(crate) type Graph = *mut c_void;
pub(crate) type GraphExec = *mut c_void;
/// `hipStreamCallback_t`.
pub(crate) type StreamCallback = unsafe extern "C" fn(Stream, c_int, *mut c_void);

/// `hipSuccess`.
pub(crate) const SUCCESS: c_int = 0;
/// `hipErrorInvalidValue`: what an unknown `hipExtMallocWithFlags` flag returns.
pub(crate) const ERROR_INVALID_VALUE: c_int = 1;
/// `hipErrorPeerAccessAlreadyEnabled`.
pub(crate) const ERROR_PEER_ACCESS_ALREADY_ENABLED: c_int = 704;
/// `hipMemcpyHostToDevice`, `hipMemcpyDeviceToHost`.
pub(crate) const MEMCPY_HOST_TO_DEVICE: c_int = 1;
pub(crate) const MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `hipDeviceMallocFinegrained` (ROCm ≥ 4) and `hipDeviceMallocUncached` (ROCm ≥ 5.3).
pub(crate) const MALLOC_FINEGRAINED: c_uint = 0x1;
pub(crate) const MALLOC_UNCACHED: c_uint = 0x3;
/// `hipStreamNonBlocking`, `hipEventDefault`.
pub(crate) const STREAM_NON_BLOCKING: c_uint = 0x1;
pub(crate) const EVENT_DEFAULT: c_uint = 0x0;
/// `hipDeviceAttribute_t` values (the CUDA-compatible range, stable since ROCm 5.0, and the
/// AMD-specific `hipDeviceAttributeGcnArch`).
pub(crate) const ATTR_COOPERATIVE_LAUNCH: c_int = 10;
pub(crate) const ATTR_MULTIPROCESSOR_COUNT: c_int = 63;
pub(crate) const ATTR_L2_CACHE_SIZE: c_int = 19;
/// `hipIpcMemLazyEnablePeerAccess`: the owner may be another GPU of this host.
pub(crate) const IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;
/// `HIP_IPC_HANDLE_SIZE`: the bytes of a `hipIpcMemHandle_t`.
pub(crate) const IPC_HANDLE_SIZE: usize = 64;

/// `hipIpcMemHandle_t`, passed by value to `hipIpcOpenMemHandle`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct IpcMemHandle {
    pub reserved: [c_char; IPC_HANDLE_SIZE],
}

/// `hipStreamCaptureModeRelaxed`.
pub(crate) const CAPTURE_MODE_RELAXED: c_int = 2;
pub(crate) const ATTR_GCN_ARCH: c_int = 10003;

/// Names libamdhip64 may have, in preference order.
const LIBRARIES: [&str; 3] = ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"];

/// The resolved entry points. Loaded once per process and kept for its life.
pub(crate) struct Api {
    pub library: &'static str,
    pub init: unsafe extern "C" fn(c_uint) -> c_int,
    pub get_device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub set_device: unsafe extern "C" fn(c_int) -> c_int,
    pub get_error_name: unsafe extern "C" fn(c_int) -> *const c_char,
    pub get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    pub device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int,
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
    pub malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    pub ext_malloc_with_flags: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int,
    pub free: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
    pub memset: unsafe extern "C" fn(*mut c_void, c_int, usize) -> c_int,
    pub module_load_data: unsafe extern "C" fn(*mut Module, *const c_void) -> c_int,
    pub module_unload: unsafe extern "C" fn(Module) -> c_int,
    pub module_get_function: unsafe extern "C" fn(*mut Function, Module, *const c_char) -> c_int,
    #[allow(clippy::type_complexity)]
    pub module_launch_kernel: unsafe extern "C" fn(
        Function,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Stream,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> c_int,
    /// Absent before ROCm 6 (Debian 12's 5.2 lacks it): then co-residency rests on the capacity
    /// check alone.
    #[allow(clippy::type_complexity)]
    pub module_launch_cooperative_kernel: Option<
        unsafe extern "C" fn(
            Function,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            Stream,
            *mut *mut c_void,
        ) -> c_int,
    >,
    pub module_occupancy: unsafe extern "C" fn(*mut c_int, Function, c_int, usize) -> c_int,
    pub device_can_access_peer: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int,
    pub device_enable_peer_access: unsafe extern "C" fn(c_int, c_uint) -> c_int,
    pub device_synchronize: unsafe extern "C" fn() -> c_int,
    pub stream_create_with_flags: unsafe extern "C" fn(*mut Stream, c_uint) -> c_int,
    pub stream_destroy: unsafe extern "C" fn(Stream) -> c_int,
    pub stream_synchronize: unsafe extern "C" fn(Stream) -> c_int,
    pub event_create_with_flags: unsafe extern "C" fn(*mut Event, c_uint) -> c_int,
    pub event_record: unsafe extern "C" fn(Event, Stream) -> c_int,
    pub event_synchronize: unsafe extern "C" fn(Event) -> c_int,
    pub event_elapsed_time: unsafe extern "C" fn(*mut f32, Event, Event) -> c_int,
    pub event_destroy: unsafe extern "C" fn(Event) -> c_int,
    pub stream_wait_event: unsafe extern "C" fn(Stream, Event, c_uint) -> c_int,
    /// A callback blocks the stream's later work until it returns (hipLaunchHostFunc is absent
    /// from ROCm 5.2).
    pub stream_add_callback:
        unsafe extern "C" fn(Stream, StreamCallback, *mut c_void, c_uint) -> c_int,
    pub ipc_get_mem_handle: unsafe extern "C" fn(*mut IpcMemHandle, *mut c_void) -> c_int,
    pub ipc_open_mem_handle: unsafe extern "C" fn(*mut *mut c_void, IpcMemHandle, c_uint) -> c_int,
    pub ipc_close_mem_handle: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub memset_d8_async: unsafe extern "C" fn(*mut c_void, u8, usize, Stream) -> c_int,
    pub memcpy_dtod_async: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, Stream) -> c_int,
    pub stream_begin_capture: unsafe extern "C" fn(Stream, c_int) -> c_int,
    pub stream_end_capture: unsafe extern "C" fn(Stream, *mut Graph) -> c_int,
    pub graph_instantiate:
        unsafe extern "C" fn(*mut GraphExec, Graph, *mut *mut c_void, *mut c_char, usize) -> c_int,
    pub graph_launch: unsafe extern "C" fn(GraphExec, Stream) -> c_int,
    pub graph_exec_destroy: unsafe extern "C" fn(GraphExec) -> c_int,
    pub graph_destroy: unsafe extern "C" fn(Graph) -> c_int,
    /// Absent before ROCm 5.3 (Debian 12's 5.2 lacks it): a graph is then uploaded by its first
    /// launch.
    pub graph_upload: Option<unsafe extern "C" fn(GraphExec, Stream) -> c_int>,
    /// Exported only by the test double of HIP over the CUDA driver API
    /// (`tests/hip-double`): the NVIDIA arch whose images it loads (`sm_90`). Absent from every
    /// real HIP runtime.
    pub double_arch: Option<unsafe extern "C" fn() -> *const c_char>,
    _lib: libloading::Library,
}

// SAFETY: plain C function pointers into a library the table owns and never unloads; the HIP
// runtime is thread-safe.
unsafe impl Send for Api {}
// SAFETY: as above; the table is immutable after loading.
unsafe impl Sync for Api {}

pub(crate) const HINT: &str = "install the HIP runtime (Debian: `apt-get install libamdhip64-5`, or ROCm) and the amdgpu kernel driver";

impl Api {
    /// The process-wide table, loading the library on first use.
    pub(crate) fn get() -> Result<&'static Api, DeviceError> {
        static API: OnceLock<Result<Api, String>> = OnceLock::new();
        API.get_or_init(|| {
            let mut tried = Vec::new();
            for name in LIBRARIES {
                match Api::load(name) {
                    Ok(api) => return Ok(api),
                    Err(e) => tried.push(format!("{name}: {e}")),
                }
            }
            Err(tried.join("; "))
        })
        .as_ref()
        .map_err(|detail| DeviceError::NoDriver {
            vendor: "AMD",
            detail: detail.clone(),
            hint: HINT,
        })
    }

    fn load(name: &'static str) -> Result<Api, libloading::Error> {
        // SAFETY: loading the HIP runtime runs its initialisers, which have no preconditions (they
        // do not touch a GPU until hipInit).
        let lib = unsafe { libloading::Library::new(name) }?;
        // SAFETY: every symbol is resolved with the C signature hip_runtime_api.h declares for it,
        // and the pointers are used only while `lib` (owned by the table) stays loaded.
        unsafe {
            Ok(Api {
                library: name,
                init: *lib.get(b"hipInit\0")?,
                get_device_count: *lib.get(b"hipGetDeviceCount\0")?,
                set_device: *lib.get(b"hipSetDevice\0")?,
                get_error_name: *lib.get(b"hipGetErrorName\0")?,
                get_error_string: *lib.get(b"hipGetErrorString\0")?,
                device_get_attribute: *lib.get(b"hipDeviceGetAttribute\0")?,
                device_get_name: *lib.get(b"hipDeviceGetName\0")?,
                malloc: *lib.get(b"hipMalloc\0")?,
                ext_malloc_with_flags: *lib.get(b"hipExtMallocWithFlags\0")?,
                free: *lib.get(b"hipFree\0")?,
                memcpy: *lib.get(b"hipMemcpy\0")?,
                memset: *lib.get(b"hipMemset\0")?,
                module_load_data: *lib.get(b"hipModuleLoadData\0")?,
                module_unload: *lib.get(b"hipModuleUnload\0")?,
                module_get_function: *lib.get(b"hipModuleGetFunction\0")?,
                module_launch_kernel: *lib.get(b"hipModuleLaunchKernel\0")?,
                module_launch_cooperative_kernel: lib
                    .get(b"hipModuleLaunchCooperativeKernel\0")
                    .ok()
                    .map(|s| *s),
                module_occupancy: *lib
                    .get(b"hipModuleOccupancyMaxActiveBlocksPerMultiprocessor\0")?,
                device_can_access_peer: *lib.get(b"hipDeviceCanAccessPeer\0")?,
                device_enable_peer_access: *lib.get(b"hipDeviceEnablePeerAccess\0")?,
                device_synchronize: *lib.get(b"hipDeviceSynchronize\0")?,
                stream_create_with_flags: *lib.get(b"hipStreamCreateWithFlags\0")?,
                stream_destroy: *lib.get(b"hipStreamDestroy\0")?,
                stream_synchronize: *lib.get(b"hipStreamSynchronize\0")?,
                event_create_with_flags: *lib.get(b"hipEventCreateWithFlags\0")?,
                event_record: *lib.get(b"hipEventRecord\0")?,
                event_synchronize: *lib.get(b"hipEventSynchronize\0")?,
                event_elapsed_time: *lib.get(b"hipEventElapsedTime\0")?,
                event_destroy: *lib.get(b"hipEventDestroy\0")?,
                stream_wait_event: *lib.get(b"hipStreamWaitEvent\0")?,
                stream_add_callback: *lib.get(b"hipStreamAddCallback\0")?,
                ipc_get_mem_handle: *lib.get(b"hipIpcGetMemHandle\0")?,
                ipc_open_mem_handle: *lib.get(b"hipIpcOpenMemHandle\0")?,
                ipc_close_mem_handle: *lib.get(b"hipIpcCloseMemHandle\0")?,
                memset_d8_async: *lib.get(b"hipMemsetD8Async\0")?,
                memcpy_dtod_async: *lib.get(b"hipMemcpyDtoDAsync\0")?,
                stream_begin_capture: *lib.get(b"hipStreamBeginCapture\0")?,
                stream_end_capture: *lib.get(b"hipStreamEndCapture\0")?,
                graph_instantiate: *lib.get(b"hipGraphInstantiate\0")?,
                graph_launch: *lib.get(b"hipGraphLaunch\0")?,
                graph_exec_destroy: *lib.get(b"hipGraphExecDestroy\0")?,
                graph_destroy: *lib.get(b"hipGraphDestroy\0")?,
                graph_upload: lib.get(b"hipGraphUpload\0").ok().map(|s| *s),
                double_arch: lib.get(b"wavefuse_hip_double_arch\0").ok().map(|s| *s),
                _lib: lib,
            })
        }
    }

    /// `rc` as a typed error naming `api`, with HIP's own name and string for the code.
    pub(crate) fn check(&self, api: &'static str, rc: c_int) -> Result<(), DeviceError> {
        if rc == SUCCESS {
            return Ok(());
        }
        Err(DeviceError::Api {
            api,
            code: i64::from(rc),
            message: self.describe(rc),
        })
    }

    /// `hipErrorName: description` for a code.
    pub(crate) fn describe(&self, rc: c_int) -> String {
        // SAFETY: both functions accept any code and return static strings (or null).
        let (name, text) = unsafe { ((self.get_error_name)(rc), (self.get_error_string)(rc)) };
        let lossy = |p: *const c_char| {
            if p.is_null() {
                None
            } else {
                // SAFETY: non-null, NUL-terminated and static, per HIP's contract.
                Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            }
        };
        match (lossy(name), lossy(text)) {
            (Some(n), Some(t)) if n != t => format!("{n}: {t}"),
            (Some(n), _) | (None, Some(n)) => n,
            (None, None) => format!("HIP error {rc}"),
        }
    }
}
