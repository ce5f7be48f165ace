/*
 * hip_double.c: a TEST DOUBLE of the HIP runtime (libamdhip64.so), implemented over the
 * NVIDIA CUDA driver API.
 *
 * THIS IS NOT A HIP IMPLEMENTATION. It exports exactly the HIP entry points wavefuse's Rust
 * runtime resolves from AMD's libamdhip64 (runtime/src/device/hip/ffi.rs), each one a thin
 * forward to the CUDA driver, so that wavefuse's whole HIP code path (HipDevice: symbol
 * resolution, devices, streams, events, graphs, launches, peer access, timing) can run end to
 * end on an NVIDIA GPU with the CUDA (PTX/CUBIN) build of the same kernels. It proves nothing
 * about AMD hardware: not wave64 code, not the AMD memory model, not fine-grained memory, not
 * PCIe timing. See README.md in this directory for the call mapping and every deviation.
 *
 * No CUDA header is used (CI has no toolkit): the few driver types are declared below and every
 * driver function is resolved once, lazily and thread-safely, from libcuda.so.1 with dlsym.
 * When libcuda.so.1 cannot be loaded, lacks a symbol, or cuInit fails, every entry point
 * returns 100 (hipErrorNoDevice) and hipGetErrorString(100) says why. It never crashes then.
 *
 * Error codes: the CUresult value is returned as the HIP error code (the two enums agree on the
 * codes wavefuse tests: 0 success, 1 invalid value, 100 no device, 101 invalid device, 704 peer
 * access already enabled).
 *
 * Build: tests/hip-double/build.sh OUTDIR. Marker symbol: wavefuse_hip_double_arch().
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA driver types, declared here (no cuda.h) ------------------------------------------ */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef void (*CUstreamCallback)(CUstream stream, CUresult status, void *user_data);
/* CUipcMemHandle and hipIpcMemHandle_t: 64 opaque bytes each, passed by value to Open. */
typedef struct {
    char reserved[64];
} CUipcMemHandle;
typedef struct {
    char reserved[64];
} hipIpcMemHandle_t;

/* HIP/CUDA codes used by the double itself. */
#define HIP_SUCCESS 0
#define HIP_ERROR_INVALID_VALUE 1        /* hipErrorInvalidValue == CUDA_ERROR_INVALID_VALUE */
#define HIP_ERROR_OUT_OF_MEMORY 2        /* hipErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY */
#define HIP_ERROR_NO_DEVICE 100          /* hipErrorNoDevice == CUDA_ERROR_NO_DEVICE */
#define HIP_ERROR_INVALID_DEVICE 101     /* hipErrorInvalidDevice == CUDA_ERROR_INVALID_DEVICE */

/* CUdevice_attribute values (cuda.h, stable since CUDA 9). */
#define CU_ATTR_MULTIPROCESSOR_COUNT 16
#define CU_ATTR_L2_CACHE_SIZE 38
#define CU_ATTR_COMPUTE_CAPABILITY_MAJOR 75
#define CU_ATTR_COMPUTE_CAPABILITY_MINOR 76
#define CU_ATTR_COOPERATIVE_LAUNCH 95

/* hipDeviceAttribute_t values wavefuse asks for. */
#define HIP_ATTR_COOPERATIVE_LAUNCH 10
#define HIP_ATTR_L2_CACHE_SIZE 19
#define HIP_ATTR_MULTIPROCESSOR_COUNT 63
#define HIP_ATTR_GCN_ARCH 10003

/* `extra` launch-array markers: HIP ends the array with 0x03, CUDA with 0x00. */
#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define HIP_LAUNCH_PARAM_END ((void *)0x03)
#define CU_LAUNCH_PARAM_END ((void *)0x00)

#define MAX_DEVICES 64

/* ---- The driver functions, resolved from libcuda.so.1 -------------------------------------- */
/* X(field, linked symbol name, parameter list); every one returns CUresult. The names are the
 * ones cuda.h (CUDA 12/13) #defines the plain API names to: _v2 where a _v2 ABI exists. */
#define CU_FUNCTIONS(X)                                                                         \
    X(cuInit, "cuInit", (unsigned))                                                             \
    X(cuGetErrorName, "cuGetErrorName", (CUresult, const char **))                              \
    X(cuGetErrorString, "cuGetErrorString", (CUresult, const char **))                          \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                                            \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                            \
    X(cuDeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                              \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, CUdevice))                     \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", (int *, CUdevice, CUdevice))              \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))            \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                          \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext *))                                        \
    X(cuCtxSynchronize, "cuCtxSynchronize", (void))                                             \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", (CUcontext, unsigned))                    \
    X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                     \
    X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                 \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t))                     \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *, CUdeviceptr, size_t))                           \
    X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", (CUdeviceptr, CUdeviceptr, size_t))                      \
    X(cuMemsetD8, "cuMemsetD8_v2", (CUdeviceptr, unsigned char, size_t))                        \
    X(cuMemsetD8Async, "cuMemsetD8Async", (CUdeviceptr, unsigned char, size_t, CUstream))       \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr, CUdeviceptr, size_t, CUstream))  \
    X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                         \
    X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                             \
    X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))       \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, int, int))                         \
    X(cuLaunchKernel, "cuLaunchKernel",                                                         \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,        \
       CUstream, void **, void **))                                                             \
    X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel",                                   \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,        \
       CUstream, void **))                                                                      \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", \
      (int *, CUfunction, int, size_t))                                                         \
    X(cuStreamCreate, "cuStreamCreate", (CUstream *, unsigned))                                 \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                        \
    X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                   \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream, CUevent, unsigned))                    \
    X(cuStreamAddCallback, "cuStreamAddCallback", (CUstream, CUstreamCallback, void *, unsigned)) \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream, int))                         \
    X(cuStreamEndCapture, "cuStreamEndCapture", (CUstream, CUgraph *))                          \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",                               \
      (CUgraphExec *, CUgraph, unsigned long long))                                             \
    X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                                  \
    X(cuGraphUpload, "cuGraphUpload", (CUgraphExec, CUstream))                                  \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                                  \
    X(cuGraphDestroy, "cuGraphDestroy", (CUgraph))                                              \
    X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                                    \
    X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                      \
    X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                                      \
    X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))                                          \
    X(cuIpcGetMemHandle, "cuIpcGetMemHandle", (CUipcMemHandle *, CUdeviceptr))                  \
    X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", (CUdeviceptr *, CUipcMemHandle, unsigned))   \
    X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", (CUdeviceptr))

#define DECLARE_POINTER(field, symbol, params) static CUresult (*p_##field) params;
CU_FUNCTIONS(DECLARE_POINTER)
#undef DECLARE_POINTER
/* cuEventElapsedTime_v2 (CUDA 12.8+) where the driver has it, else the original symbol; both
 * take (float *, CUevent, CUevent). Resolved separately because either name may be missing. */
static CUresult (*p_cuEventElapsedTime)(float *, CUevent, CUevent);

/* ---- Loading: once per process ------------------------------------------------------------- */
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static int g_status = HIP_ERROR_NO_DEVICE; /* 0 once libcuda is loaded and cuInit succeeded */
static char g_failure[512] = "wavefuse HIP test double: the CUDA driver was not loaded";

/* Resolves every driver symbol and runs cuInit(0); on any failure records why in g_failure. */
static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(g_failure, sizeof g_failure,
                 "wavefuse HIP test double: could not load libcuda.so.1 (the NVIDIA driver): %s",
                 why != NULL ? why : "unknown dlopen error");
        return;
    }
#define RESOLVE(field, symbol, params)                                                          \
    p_##field = (CUresult(*) params)dlsym(lib, symbol);                                         \
    if (p_##field == NULL) {                                                                    \
        snprintf(g_failure, sizeof g_failure,                                                   \
                 "wavefuse HIP test double: libcuda.so.1 has no symbol %s (driver too old?)",   \
                 symbol);                                                                       \
        return;                                                                                 \
    }
    CU_FUNCTIONS(RESOLVE)
#undef RESOLVE
    p_cuEventElapsedTime = (CUresult(*)(float *, CUevent, CUevent))dlsym(lib, "cuEventElapsedTime_v2");
    if (p_cuEventElapsedTime == NULL)
        p_cuEventElapsedTime = (CUresult(*)(float *, CUevent, CUevent))dlsym(lib, "cuEventElapsedTime");
    if (p_cuEventElapsedTime == NULL) {
        snprintf(g_failure, sizeof g_failure,
                 "wavefuse HIP test double: libcuda.so.1 has no symbol cuEventElapsedTime");
        return;
    }
    CUresult rc = p_cuInit(0);
    if (rc != 0) {
        const char *name = NULL, *text = NULL;
        if (p_cuGetErrorName(rc, &name) != 0 || name == NULL) name = "?";
        if (p_cuGetErrorString(rc, &text) != 0 || text == NULL) text = "?";
        snprintf(g_failure, sizeof g_failure,
                 "wavefuse HIP test double: libcuda.so.1 loaded but cuInit failed: %d %s: %s",
                 rc, name, text);
        return;
    }
    g_status = HIP_SUCCESS; /* published to every caller by pthread_once */
}

/* 0 when the driver is usable, else 100 (hipErrorNoDevice). */
static int driver(void) {
    pthread_once(&g_load_once, load_driver);
    return g_status;
}

/* ---- Primary contexts and HIP's per-thread current device ---------------------------------- */
static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_primary[MAX_DEVICES]; /* retained once each, kept for the process's life */

/* Device `ordinal`'s primary context: cuDeviceGet + cuDevicePrimaryCtxRetain (first use only). */
static int primary_context(int ordinal, CUcontext *out) {
    if (ordinal < 0 || ordinal >= MAX_DEVICES) return HIP_ERROR_INVALID_DEVICE;
    int rc = HIP_SUCCESS;
    pthread_mutex_lock(&g_ctx_lock);
    if (g_primary[ordinal] == NULL) {
        CUdevice dev = 0;
        CUcontext ctx = NULL;
        rc = p_cuDeviceGet(&dev, ordinal);
        if (rc == 0) rc = p_cuDevicePrimaryCtxRetain(&ctx, dev);
        if (rc == 0) g_primary[ordinal] = ctx;
    }
    *out = g_primary[ordinal];
    pthread_mutex_unlock(&g_ctx_lock);
    return rc;
}

/* Driver loaded, and this thread has a current context: device 0's primary one if it had none
 * (HIP's default device is 0). cuCtxGetCurrent, then cuCtxSetCurrent when that gives NULL. */
static int enter(void) {
    int rc = driver();
    if (rc != 0) return rc;
    CUcontext ctx = NULL;
    rc = p_cuCtxGetCurrent(&ctx);
    if (rc != 0 || ctx != NULL) return rc;
    rc = primary_context(0, &ctx);
    return rc != 0 ? rc : p_cuCtxSetCurrent(ctx);
}

#define ENTER()                                                                                 \
    do {                                                                                        \
        int enter_rc_ = enter();                                                                \
        if (enter_rc_ != 0) return enter_rc_;                                                   \
    } while (0)

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* ---- Initialisation, devices, errors ------------------------------------------------------- */

/* hipInit: cuInit(0) (run once, at load); a non-zero flag is hipErrorInvalidValue as in HIP. */
int hipInit(unsigned flags) {
    int rc = driver();
    if (rc != 0) return rc;
    return flags == 0 ? HIP_SUCCESS : HIP_ERROR_INVALID_VALUE;
}

/* hipGetDeviceCount: cuDeviceGetCount; *count = 0 when the driver is absent. */
int hipGetDeviceCount(int *count) {
    if (count == NULL) return HIP_ERROR_INVALID_VALUE;
    *count = 0;
    int rc = driver();
    if (rc != 0) return rc;
    rc = p_cuDeviceGetCount(count);
    if (rc == 0 && *count == 0) rc = HIP_ERROR_NO_DEVICE; /* as HIP: no device is an error */
    return rc;
}

/* hipSetDevice: cuDevicePrimaryCtxRetain (once per device) + cuCtxSetCurrent on this thread. */
int hipSetDevice(int device) {
    int rc = driver();
    if (rc != 0) return rc;
    int count = 0;
    rc = p_cuDeviceGetCount(&count);
    if (rc != 0) return rc;
    if (device < 0 || device >= count) return HIP_ERROR_INVALID_DEVICE;
    CUcontext ctx = NULL;
    rc = primary_context(device, &ctx);
    return rc != 0 ? rc : p_cuCtxSetCurrent(ctx);
}

/* hipGetErrorName: cuGetErrorName for codes the driver knows; never NULL. */
const char *hipGetErrorName(int err) {
    if (driver() != 0) {
        if (err == HIP_ERROR_NO_DEVICE) return "hipErrorNoDevice";
        return err == HIP_SUCCESS ? "hipSuccess" : "wavefuse_hip_double_unknown_error";
    }
    const char *name = NULL;
    if (p_cuGetErrorName(err, &name) == 0 && name != NULL) return name;
    return "wavefuse_hip_double_unknown_error";
}

/* hipGetErrorString: cuGetErrorString for codes the driver knows; never NULL. */
const char *hipGetErrorString(int err) {
    if (driver() != 0) {
        if (err == HIP_ERROR_NO_DEVICE) return g_failure; /* names dlopen's or cuInit's failure */
        return err == HIP_SUCCESS ? "no error" : "unknown error (wavefuse HIP test double)";
    }
    const char *text = NULL;
    if (p_cuGetErrorString(err, &text) == 0 && text != NULL) return text;
    return "unknown error (wavefuse HIP test double)";
}

/* hipDeviceGetAttribute: cuDeviceGetAttribute with the HIP attribute mapped to CUDA's; gcnArch
 * (AMD-only) and every unmapped attribute return hipErrorInvalidValue with *value = 0. */
int hipDeviceGetAttribute(int *value, int attr, int device) {
    if (value == NULL) return HIP_ERROR_INVALID_VALUE;
    *value = 0;
    int rc = driver();
    if (rc != 0) return rc;
    int cu_attr;
    switch (attr) {
    case HIP_ATTR_COOPERATIVE_LAUNCH: cu_attr = CU_ATTR_COOPERATIVE_LAUNCH; break;
    case HIP_ATTR_MULTIPROCESSOR_COUNT: cu_attr = CU_ATTR_MULTIPROCESSOR_COUNT; break;
    case HIP_ATTR_L2_CACHE_SIZE: cu_attr = CU_ATTR_L2_CACHE_SIZE; break;
    case HIP_ATTR_GCN_ARCH: /* fall through: there is no GCN architecture on an NVIDIA GPU */
    default: return HIP_ERROR_INVALID_VALUE;
    }
    CUdevice dev = 0;
    rc = p_cuDeviceGet(&dev, device);
    return rc != 0 ? rc : p_cuDeviceGetAttribute(value, cu_attr, dev);
}

/* hipDeviceGetName: cuDeviceGet + cuDeviceGetName. */
int hipDeviceGetName(char *name, int len, int device) {
    int rc = driver();
    if (rc != 0) return rc;
    CUdevice dev = 0;
    rc = p_cuDeviceGet(&dev, device);
    return rc != 0 ? rc : p_cuDeviceGetName(name, len, dev);
}

/* hipDeviceCanAccessPeer: cuDeviceCanAccessPeer on the two devices' handles. */
int hipDeviceCanAccessPeer(int *can, int device, int peer) {
    if (can == NULL) return HIP_ERROR_INVALID_VALUE;
    *can = 0;
    int rc = driver();
    if (rc != 0) return rc;
    CUdevice a = 0, b = 0;
    if ((rc = p_cuDeviceGet(&a, device)) != 0) return rc;
    if ((rc = p_cuDeviceGet(&b, peer)) != 0) return rc;
    return p_cuDeviceCanAccessPeer(can, a, b);
}

/* hipDeviceEnablePeerAccess: cuCtxEnablePeerAccess(peer's primary context, flags) from the
 * current context; 704 when already enabled, as in both APIs. */
int hipDeviceEnablePeerAccess(int peer, unsigned flags) {
    ENTER();
    CUcontext peer_ctx = NULL;
    int rc = primary_context(peer, &peer_ctx);
    return rc != 0 ? rc : p_cuCtxEnablePeerAccess(peer_ctx, flags);
}

/* hipDeviceSynchronize: cuCtxSynchronize on the current context. */
int hipDeviceSynchronize(void) {
    ENTER();
    return p_cuCtxSynchronize();
}

/* ---- Memory -------------------------------------------------------------------------------- */

/* hipMalloc: cuMemAlloc_v2; zero bytes gives NULL and success, as HIP does. */
int hipMalloc(void **ptr, size_t bytes) {
    if (ptr == NULL) return HIP_ERROR_INVALID_VALUE;
    *ptr = NULL;
    ENTER();
    if (bytes == 0) return HIP_SUCCESS;
    CUdeviceptr d = 0;
    int rc = p_cuMemAlloc(&d, bytes);
    if (rc == 0) *ptr = (void *)(uintptr_t)d;
    return rc;
}

/* hipExtMallocWithFlags: cuMemAlloc_v2; the flags (fine-grained, uncached) are IGNORED. */
int hipExtMallocWithFlags(void **ptr, size_t bytes, unsigned flags) {
    (void)flags; /* deviation: ordinary device memory whatever the flags ask for */
    return hipMalloc(ptr, bytes);
}

/* hipFree: cuMemFree_v2; NULL is a no-op success, as in HIP. */
int hipFree(void *ptr) {
    ENTER();
    return ptr == NULL ? HIP_SUCCESS : p_cuMemFree(DPTR(ptr));
}

/* hipIpcGetMemHandle: cuIpcGetMemHandle of the allocation's base (the handle bytes copied). */
int hipIpcGetMemHandle(hipIpcMemHandle_t *handle, void *ptr) {
    if (handle == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    CUipcMemHandle h;
    int rc = p_cuIpcGetMemHandle(&h, DPTR(ptr));
    if (rc == 0) memcpy(handle->reserved, h.reserved, sizeof h.reserved);
    return rc;
}

/* hipIpcOpenMemHandle: cuIpcOpenMemHandle_v2 in the current context; hipIpcMemLazyEnablePeerAccess
 * (1) is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (1). */
int hipIpcOpenMemHandle(void **ptr, hipIpcMemHandle_t handle, unsigned flags) {
    if (ptr == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    CUipcMemHandle h;
    memcpy(h.reserved, handle.reserved, sizeof h.reserved);
    CUdeviceptr d = 0;
    int rc = p_cuIpcOpenMemHandle(&d, h, flags);
    if (rc == 0) *ptr = (void *)(uintptr_t)d;
    return rc;
}

/* hipIpcCloseMemHandle: cuIpcCloseMemHandle. */
int hipIpcCloseMemHandle(void *ptr) {
    ENTER();
    return p_cuIpcCloseMemHandle(DPTR(ptr));
}

/* hipMemcpy: cuMemcpyHtoD_v2 / DtoH_v2 / DtoD_v2 by kind (1, 2, 3; others are invalid), then
 * cuStreamSynchronize(NULL stream) so the copy has completed on return, as HIP's does. */
int hipMemcpy(void *dst, const void *src, size_t bytes, int kind) {
    ENTER();
    if (bytes == 0) return HIP_SUCCESS;
    int rc;
    switch (kind) {
    case 1: rc = p_cuMemcpyHtoD(DPTR(dst), src, bytes); break;
    case 2: rc = p_cuMemcpyDtoH(dst, DPTR(src), bytes); break;
    case 3: rc = p_cuMemcpyDtoD(DPTR(dst), DPTR(src), bytes); break;
    default: return HIP_ERROR_INVALID_VALUE;
    }
    return rc != 0 ? rc : p_cuStreamSynchronize(NULL);
}

/* hipMemset: cuMemsetD8_v2 with (unsigned char)value, then cuStreamSynchronize(NULL stream). */
int hipMemset(void *dst, int value, size_t bytes) {
    ENTER();
    if (bytes == 0) return HIP_SUCCESS;
    int rc = p_cuMemsetD8(DPTR(dst), (unsigned char)value, bytes);
    return rc != 0 ? rc : p_cuStreamSynchronize(NULL);
}

/* hipMemsetD8Async: cuMemsetD8Async. */
int hipMemsetD8Async(void *dst, unsigned char value, size_t count, void *stream) {
    ENTER();
    return p_cuMemsetD8Async(DPTR(dst), value, count, stream);
}

/* hipMemcpyDtoDAsync: cuMemcpyDtoDAsync_v2. */
int hipMemcpyDtoDAsync(void *dst, void *src, size_t bytes, void *stream) {
    ENTER();
    return p_cuMemcpyDtoDAsync(DPTR(dst), DPTR(src), bytes, stream);
}

/* ---- Modules and launches ------------------------------------------------------------------ */

/* hipModuleLoadData: cuModuleLoadData (a CUBIN, a fatbin or NUL-terminated PTX). */
int hipModuleLoadData(void **module, const void *image) {
    if (module == NULL || image == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuModuleLoadData(module, image);
}

/* hipModuleUnload: cuModuleUnload. */
int hipModuleUnload(void *module) {
    ENTER();
    return p_cuModuleUnload(module);
}

/* hipModuleGetFunction: cuModuleGetFunction. */
int hipModuleGetFunction(void **function, void *module, const char *name) {
    if (function == NULL || name == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuModuleGetFunction(function, module, name);
}

/* The `extra` array rewritten for CUDA: the same BUFFER_POINTER/BUFFER_SIZE pairs, with HIP's
 * terminator (0x03) replaced by CUDA's (0x00). 1 (invalid value) on an unknown key or no END. */
static int translate_extra(void **extra, void **out, size_t capacity) {
    for (size_t i = 0; i + 1 < capacity; i += 2) {
        if (extra[i] == HIP_LAUNCH_PARAM_END) {
            out[i] = CU_LAUNCH_PARAM_END;
            return HIP_SUCCESS;
        }
        if (extra[i] != HIP_LAUNCH_PARAM_BUFFER_POINTER && extra[i] != HIP_LAUNCH_PARAM_BUFFER_SIZE)
            return HIP_ERROR_INVALID_VALUE;
        out[i] = extra[i]; /* the two keys have the same values in both APIs */
        out[i + 1] = extra[i + 1];
    }
    return HIP_ERROR_INVALID_VALUE;
}

/* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. */
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* HIP on AMD takes any dynamic LDS up to the device's limit with no opt-in; CUDA wants one above
 * 48 KiB (cuFuncSetAttribute). Deviation: the double opts in before a launch or occupancy query
 * that asks for more, so the same requests succeed. */
static int allow_dynamic_shared(void *f, size_t bytes) {
    if (bytes <= 48u * 1024u) return 0;
    return p_cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
}

/* hipModuleLaunchKernel: cuLaunchKernel; kernelParams pass through unchanged (same convention),
 * `extra` is translated (HIP_LAUNCH_PARAM_END differs). */
int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shared_bytes, void *stream,
                          void **params, void **extra) {
    ENTER();
    void *cu_extra[16];
    if (extra != NULL) {
        int rc = translate_extra(extra, cu_extra, sizeof cu_extra / sizeof cu_extra[0]);
        if (rc != 0) return rc;
    }
    int rc = allow_dynamic_shared(f, shared_bytes);
    if (rc != 0) return rc;
    return p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params,
                            extra != NULL ? cu_extra : NULL);
}

/* hipModuleLaunchCooperativeKernel: cuLaunchCooperativeKernel. */
int hipModuleLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, unsigned shared_bytes,
                                     void *stream, void **params) {
    ENTER();
    int rc = allow_dynamic_shared(f, shared_bytes);
    if (rc != 0) return rc;
    return p_cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params);
}

/* hipModuleOccupancyMaxActiveBlocksPerMultiprocessor: cuOccupancyMaxActiveBlocksPerMultiprocessor. */
int hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *f, int block_size,
                                                       size_t dynamic_shared_bytes) {
    ENTER();
    int rc = allow_dynamic_shared(f, dynamic_shared_bytes);
    if (rc != 0) return rc;
    return p_cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_size,
                                                         dynamic_shared_bytes);
}

/* ---- Streams, callbacks, capture, graphs --------------------------------------------------- */

/* hipStreamCreateWithFlags: cuStreamCreate; hipStreamNonBlocking (1) is CU_STREAM_NON_BLOCKING (1). */
int hipStreamCreateWithFlags(void **stream, unsigned flags) {
    if (stream == NULL || (flags & ~1u) != 0) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuStreamCreate(stream, flags);
}

/* hipStreamDestroy: cuStreamDestroy_v2. */
int hipStreamDestroy(void *stream) {
    ENTER();
    return p_cuStreamDestroy(stream);
}

/* hipStreamSynchronize: cuStreamSynchronize. */
int hipStreamSynchronize(void *stream) {
    ENTER();
    return p_cuStreamSynchronize(stream);
}

/* hipStreamWaitEvent: cuStreamWaitEvent. */
int hipStreamWaitEvent(void *stream, void *event, unsigned flags) {
    ENTER();
    return p_cuStreamWaitEvent(stream, event, flags);
}

typedef void (*hipStreamCallback_t)(void *stream, int status, void *user_data);

/* What a callback trampoline carries: the HIP callback and its argument (heap, freed once run). */
struct callback {
    hipStreamCallback_t cb;
    void *user_data;
};

/* The CUstreamCallback given to CUDA: calls the HIP callback with the same three values. */
static void callback_trampoline(CUstream stream, CUresult status, void *data) {
    struct callback c = *(struct callback *)data;
    free(data);
    c.cb(stream, status, c.user_data);
}

/* hipStreamAddCallback: cuStreamAddCallback with a trampoline that calls the HIP callback. */
int hipStreamAddCallback(void *stream, hipStreamCallback_t cb, void *user_data, unsigned flags) {
    if (cb == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    struct callback *c = malloc(sizeof *c);
    if (c == NULL) return HIP_ERROR_OUT_OF_MEMORY;
    c->cb = cb;
    c->user_data = user_data;
    int rc = p_cuStreamAddCallback(stream, callback_trampoline, c, flags);
    if (rc != 0) free(c);
    return rc;
}

/* hipStreamBeginCapture: cuStreamBeginCapture_v2; the mode values (0 global, 1 thread-local,
 * 2 relaxed) are the same in both APIs. */
int hipStreamBeginCapture(void *stream, int mode) {
    ENTER();
    return p_cuStreamBeginCapture(stream, mode);
}

/* hipStreamEndCapture: cuStreamEndCapture. */
int hipStreamEndCapture(void *stream, void **graph) {
    if (graph == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuStreamEndCapture(stream, graph);
}

/* hipGraphInstantiate: cuGraphInstantiateWithFlags(exec, graph, 0); no error node, empty log. */
int hipGraphInstantiate(void **exec, void *graph, void **error_node, char *log, size_t log_size) {
    if (error_node != NULL) *error_node = NULL;
    if (log != NULL && log_size > 0) log[0] = '\0';
    if (exec == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuGraphInstantiateWithFlags(exec, graph, 0);
}

/* hipGraphLaunch: cuGraphLaunch. */
int hipGraphLaunch(void *exec, void *stream) {
    ENTER();
    return p_cuGraphLaunch(exec, stream);
}

/* hipGraphUpload (ROCm >= 5.3): cuGraphUpload. */
int hipGraphUpload(void *exec, void *stream) {
    ENTER();
    return p_cuGraphUpload(exec, stream);
}

/* hipGraphExecDestroy: cuGraphExecDestroy. */
int hipGraphExecDestroy(void *exec) {
    ENTER();
    return p_cuGraphExecDestroy(exec);
}

/* hipGraphDestroy: cuGraphDestroy. */
int hipGraphDestroy(void *graph) {
    ENTER();
    return p_cuGraphDestroy(graph);
}

/* ---- Events -------------------------------------------------------------------------------- */

/* hipEventCreateWithFlags: cuEventCreate; HIP's flag bits (0 default, 1 blocking sync, 2
 * disable timing, 4 interprocess) are CUDA's. */
int hipEventCreateWithFlags(void **event, unsigned flags) {
    if (event == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuEventCreate(event, flags);
}

/* hipEventRecord: cuEventRecord. */
int hipEventRecord(void *event, void *stream) {
    ENTER();
    return p_cuEventRecord(event, stream);
}

/* hipEventSynchronize: cuEventSynchronize. */
int hipEventSynchronize(void *event) {
    ENTER();
    return p_cuEventSynchronize(event);
}

/* hipEventElapsedTime: cuEventElapsedTime_v2 (or cuEventElapsedTime on older drivers). */
int hipEventElapsedTime(float *ms, void *start, void *end) {
    if (ms == NULL) return HIP_ERROR_INVALID_VALUE;
    ENTER();
    return p_cuEventElapsedTime(ms, start, end);
}

/* hipEventDestroy: cuEventDestroy_v2. */
int hipEventDestroy(void *event) {
    ENTER();
    return p_cuEventDestroy(event);
}

/* ---- The double's own marker --------------------------------------------------------------- */
static pthread_once_t g_arch_once = PTHREAD_ONCE_INIT;
static char g_arch[32] = "";

/* Fills g_arch with "sm_<major><minor>" of device 0 (cuDeviceGetAttribute 75/76). */
static void read_arch(void) {
    if (driver() != 0) return;
    CUdevice dev = 0;
    int major = 0, minor = 0;
    if (p_cuDeviceGet(&dev, 0) != 0) return;
    if (p_cuDeviceGetAttribute(&major, CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev) != 0) return;
    if (p_cuDeviceGetAttribute(&minor, CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev) != 0) return;
    snprintf(g_arch, sizeof g_arch, "sm_%d%d", major, minor);
}

/* NOT a HIP symbol: marks this library as the test double. "sm_90" on an H200; "" without a
 * usable driver. */
const char *wavefuse_hip_double_arch(void) {
    pthread_once(&g_arch_once, read_arch);
    return g_arch;
}
