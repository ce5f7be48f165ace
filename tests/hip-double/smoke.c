/*
 * smoke.c: smoke test of the wavefuse HIP TEST DOUBLE (libamdhip64.so over the CUDA driver).
 *
 * Usage: smoke PATH/TO/libamdhip64.so
 *
 * dlopens the library by path and resolves every symbol the double must export (failing on the
 * first missing one). Then:
 *  - without libcuda.so.1 on this machine: hipInit(0) must return 100 (hipErrorNoDevice), the
 *    error name/string must say so, and every other entry point must fail the same way without
 *    crashing;
 *  - with libcuda.so.1: hipInit(0) must succeed, at least one device must exist, the marker
 *    wavefuse_hip_double_arch() must be "sm_<cc>" ("sm_90" on an H200), and a tiny PTX kernel
 *    is driven through memory, module, launch (plain, `extra`, cooperative), stream, event,
 *    callback, capture/graph, occupancy and peer calls, checking the data each time.
 * Exits 0 on success, 1 with a message on failure.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const SYMBOLS[] = {
    "hipInit", "hipGetDeviceCount", "hipSetDevice", "hipGetErrorName", "hipGetErrorString",
    "hipDeviceGetAttribute", "hipDeviceGetName", "hipMalloc", "hipExtMallocWithFlags", "hipFree",
    "hipMemcpy", "hipMemset", "hipModuleLoadData", "hipModuleUnload", "hipModuleGetFunction",
    "hipModuleLaunchKernel", "hipModuleLaunchCooperativeKernel",
    "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", "hipDeviceCanAccessPeer",
    "hipDeviceEnablePeerAccess", "hipDeviceSynchronize", "hipStreamCreateWithFlags",
    "hipStreamDestroy", "hipStreamSynchronize", "hipStreamWaitEvent", "hipStreamAddCallback",
    "hipStreamBeginCapture", "hipStreamEndCapture", "hipGraphInstantiate", "hipGraphLaunch",
    "hipGraphUpload", "hipGraphExecDestroy", "hipGraphDestroy", "hipMemsetD8Async", "hipMemcpyDtoDAsync",
    "hipEventCreateWithFlags", "hipEventRecord", "hipEventSynchronize", "hipEventElapsedTime",
    "hipEventDestroy", "hipIpcGetMemHandle", "hipIpcOpenMemHandle", "hipIpcCloseMemHandle",
    "wavefuse_hip_double_arch",
};
#define NSYM (sizeof SYMBOLS / sizeof SYMBOLS[0])

typedef void (*hipStreamCallback_t)(void *, int, void *);
/* hipIpcMemHandle_t: 64 opaque bytes. */
struct ipc_handle {
    char reserved[64];
};
static struct {
    int (*Init)(unsigned);
    int (*GetDeviceCount)(int *);
    int (*SetDevice)(int);
    const char *(*GetErrorName)(int);
    const char *(*GetErrorString)(int);
    int (*DeviceGetAttribute)(int *, int, int);
    int (*DeviceGetName)(char *, int, int);
    int (*Malloc)(void **, size_t);
    int (*ExtMallocWithFlags)(void **, size_t, unsigned);
    int (*Free)(void *);
    int (*Memcpy)(void *, const void *, size_t, int);
    int (*Memset)(void *, int, size_t);
    int (*ModuleLoadData)(void **, const void *);
    int (*ModuleUnload)(void *);
    int (*ModuleGetFunction)(void **, void *, const char *);
    int (*ModuleLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, void *, void **, void **);
    int (*ModuleLaunchCooperativeKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, unsigned, unsigned, void *, void **);
    int (*Occupancy)(int *, void *, int, size_t);
    int (*DeviceCanAccessPeer)(int *, int, int);
    int (*DeviceEnablePeerAccess)(int, unsigned);
    int (*DeviceSynchronize)(void);
    int (*StreamCreateWithFlags)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamSynchronize)(void *);
    int (*StreamWaitEvent)(void *, void *, unsigned);
    int (*StreamAddCallback)(void *, hipStreamCallback_t, void *, unsigned);
    int (*StreamBeginCapture)(void *, int);
    int (*StreamEndCapture)(void *, void **);
    int (*GraphInstantiate)(void **, void *, void **, char *, size_t);
    int (*GraphLaunch)(void *, void *);
    int (*GraphUpload)(void *, void *);
    int (*GraphExecDestroy)(void *);
    int (*GraphDestroy)(void *);
    int (*MemsetD8Async)(void *, unsigned char, size_t, void *);
    int (*MemcpyDtoDAsync)(void *, void *, size_t, void *);
    int (*EventCreateWithFlags)(void **, unsigned);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventElapsedTime)(float *, void *, void *);
    int (*EventDestroy)(void *);
    int (*IpcGetMemHandle)(void *, void *);
    int (*IpcOpenMemHandle)(void **, struct ipc_handle, unsigned);
    int (*IpcCloseMemHandle)(void *);
    const char *(*Arch)(void);
} hip;

static void fail(const char *what) {
    fprintf(stderr, "hip-double smoke: FAIL: %s\n", what);
    exit(1);
}

/* Fails unless `rc` is `want`, naming the call and the double's description of the code. */
static void expect_rc(const char *call, int rc, int want) {
    if (rc == want) return;
    fprintf(stderr, "hip-double smoke: FAIL: %s returned %d (%s: %s), expected %d\n", call, rc,
            hip.GetErrorName(rc), hip.GetErrorString(rc), want);
    exit(1);
}
#define OK(call) expect_rc(#call, (call), 0)

/* add_one(unsigned *p, unsigned n): p[i] += 1 for every i < n. Plain PTX the driver JITs. */
static const char PTX[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry add_one(.param .u64 p, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %q;\n"
    "  .reg .b32 %r<7>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %q, %r5, %r1;\n"
    "  @%q bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mul.wide.u32 %rd3, %r5, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.u32 %r6, [%rd4];\n"
    "  add.s32 %r6, %r6, 1;\n"
    "  st.global.u32 [%rd4], %r6;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

#define N 4096u
#define BLOCK 256u

/* Copies `dev` back and fails unless every element is i + delta. */
static void check(void *dev, unsigned delta, const char *what) {
    static unsigned host[N];
    OK(hip.Memcpy(host, dev, sizeof host, 2));
    for (unsigned i = 0; i < N; i++) {
        if (host[i] != i + delta) {
            fprintf(stderr, "hip-double smoke: FAIL: %s: element %u is %u, expected %u\n", what, i,
                    host[i], i + delta);
            exit(1);
        }
    }
}

static void on_stream_done(void *stream, int status, void *user_data) {
    (void)stream;
    *(int *)user_data = status == 0 ? 1 : -1;
}

/* A thread that never calls hipSetDevice: its calls must land on device 0 (HIP's default). */
static void *default_device_thread(void *result) {
    void *p = NULL;
    int rc = hip.Malloc(&p, 4096);
    if (rc == 0) rc = hip.Memset(p, 0x5a, 4096);
    if (rc == 0) rc = hip.Free(p);
    *(int *)result = rc;
    return NULL;
}

/* Without a driver: every entry point must answer 100 and nothing may crash. */
static void no_driver(void) {
    int count = 7;
    void *p = (void *)1;
    expect_rc("hipInit(0)", hip.Init(0), 100);
    if (strcmp(hip.GetErrorName(100), "hipErrorNoDevice") != 0) fail("hipGetErrorName(100)");
    const char *s = hip.GetErrorString(100);
    if (s == NULL || strstr(s, "libcuda.so.1") == NULL) fail("hipGetErrorString(100) lacks libcuda.so.1");
    if (hip.GetErrorName(12345) == NULL || hip.GetErrorString(12345) == NULL) fail("NULL error text");
    expect_rc("hipGetDeviceCount", hip.GetDeviceCount(&count), 100);
    if (count != 0) fail("hipGetDeviceCount left count non-zero");
    expect_rc("hipSetDevice", hip.SetDevice(0), 100);
    expect_rc("hipMalloc", hip.Malloc(&p, 16), 100);
    expect_rc("hipFree", hip.Free(NULL), 100);
    expect_rc("hipMemcpy", hip.Memcpy(NULL, NULL, 16, 1), 100);
    expect_rc("hipStreamCreateWithFlags", hip.StreamCreateWithFlags(&p, 1), 100);
    expect_rc("hipModuleLaunchKernel",
              hip.ModuleLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), 100);
    expect_rc("hipEventCreateWithFlags", hip.EventCreateWithFlags(&p, 0), 100);
    expect_rc("hipDeviceSynchronize", hip.DeviceSynchronize(), 100);
    expect_rc("hipGraphLaunch", hip.GraphLaunch(NULL, NULL), 100);
    expect_rc("hipGraphUpload", hip.GraphUpload(NULL, NULL), 100);
    struct ipc_handle h;
    memset(&h, 0, sizeof h);
    expect_rc("hipIpcGetMemHandle", hip.IpcGetMemHandle(&h, NULL), 100);
    expect_rc("hipIpcOpenMemHandle", hip.IpcOpenMemHandle(&p, h, 1), 100);
    expect_rc("hipIpcCloseMemHandle", hip.IpcCloseMemHandle(NULL), 100);
    if (strcmp(hip.Arch(), "") != 0) fail("wavefuse_hip_double_arch() is not \"\" without a driver");
    printf("hip-double smoke: no libcuda.so.1 here; hipInit -> 100 hipErrorNoDevice (\"%s\"); OK\n", s);
}

/* With a driver: the calls wavefuse makes, end to end on device 0. */
static void with_driver(void) {
    int count = 0, value = -1;
    char name[256] = "";
    OK(hip.Init(0));
    OK(hip.GetDeviceCount(&count));
    if (count < 1) fail("hipGetDeviceCount < 1");
    OK(hip.DeviceGetName(name, sizeof name, 0));
    const char *arch = hip.Arch();
    printf("hip-double smoke: %d device(s); device 0 \"%s\", %s\n", count, name, arch);
    if (strncmp(arch, "sm_", 3) != 0) fail("wavefuse_hip_double_arch() is not sm_*");
    if (strstr(name, "H200") != NULL && strcmp(arch, "sm_90") != 0) fail("an H200 is not sm_90");
    expect_rc("hipSetDevice(count)", hip.SetDevice(count), 101);
    OK(hip.SetDevice(0));

    int sms = 0, l2 = 0, coop = 0;
    OK(hip.DeviceGetAttribute(&sms, 63, 0));
    OK(hip.DeviceGetAttribute(&l2, 19, 0));
    OK(hip.DeviceGetAttribute(&coop, 10, 0));
    if (sms < 1 || l2 < 1) fail("multiprocessor count or L2 size not positive");
    expect_rc("hipDeviceGetAttribute(gcnArch)", hip.DeviceGetAttribute(&value, 10003, 0), 1);
    if (value != 0) fail("gcnArch value not 0");
    expect_rc("hipDeviceGetAttribute(unknown)", hip.DeviceGetAttribute(&value, 4242, 0), 1);
    printf("hip-double smoke: %d SMs, L2 %d bytes, cooperative launch %d\n", sms, l2, coop);

    void *a = NULL, *b = NULL, *z = (void *)1;
    OK(hip.Malloc(&z, 0));
    if (z != NULL) fail("hipMalloc(0) not NULL");
    OK(hip.Free(NULL));
    OK(hip.Malloc(&a, N * 4));
    OK(hip.ExtMallocWithFlags(&b, N * 4, 0x1));
    static unsigned host[N];
    for (unsigned i = 0; i < N; i++) host[i] = i;
    OK(hip.Memcpy(a, host, sizeof host, 1));
    expect_rc("hipMemcpy(kind 4)", hip.Memcpy(b, a, sizeof host, 4), 1);
    OK(hip.Memset(b, 0, N * 4));

    void *module = NULL, *f = NULL;
    OK(hip.ModuleLoadData(&module, PTX));
    OK(hip.ModuleGetFunction(&f, module, "add_one"));
    void *ptr_arg = a;
    unsigned n_arg = N;
    void *params[] = {&ptr_arg, &n_arg};
    OK(hip.ModuleLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL));
    OK(hip.DeviceSynchronize());
    check(a, 1, "plain launch");

    struct kernel_args { void *p; unsigned n; } buf = {a, N};
    size_t buf_size = offsetof(struct kernel_args, n) + sizeof buf.n; /* 12: the kernel's parameter bytes */
    void *extra[] = {(void *)1, &buf, (void *)2, &buf_size, (void *)3};
    OK(hip.ModuleLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, NULL, extra));
    check(a, 2, "launch with extra (HIP_LAUNCH_PARAM_END = 3)");

    if (coop) {
        OK(hip.ModuleLaunchCooperativeKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params));
        check(a, 3, "cooperative launch");
    } else {
        OK(hip.ModuleLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL));
    }
    int blocks = 0;
    OK(hip.Occupancy(&blocks, f, BLOCK, 0));
    if (blocks < 1) fail("occupancy < 1");

    /* Streams, events, callback: a on the stream, timed; b zeroed behind an event wait. */
    void *stream = NULL, *other = NULL, *start = NULL, *end = NULL;
    OK(hip.StreamCreateWithFlags(&stream, 1));
    OK(hip.StreamCreateWithFlags(&other, 0));
    expect_rc("hipStreamCreateWithFlags(8)", hip.StreamCreateWithFlags(&other, 8), 1);
    OK(hip.EventCreateWithFlags(&start, 0));
    OK(hip.EventCreateWithFlags(&end, 0));
    OK(hip.EventRecord(start, stream));
    OK(hip.ModuleLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, stream, params, NULL));
    OK(hip.EventRecord(end, stream));
    OK(hip.StreamWaitEvent(other, end, 0));
    OK(hip.MemcpyDtoDAsync(b, a, N * 4, other));
    int called = 0;
    OK(hip.StreamAddCallback(other, on_stream_done, &called, 0));
    OK(hip.StreamSynchronize(other));
    OK(hip.EventSynchronize(end));
    float ms = -1.0f;
    OK(hip.EventElapsedTime(&ms, start, end));
    if (!(ms >= 0.0f)) fail("negative elapsed time");
    if (called != 1) fail("stream callback did not run (or saw an error) by hipStreamSynchronize");
    check(b, 4, "stream launch + event wait + DtoD async copy");

    /* Capture: b = 0 by memset, then b += 1 twice, into a graph launched twice. */
    void *graph = NULL, *exec = NULL, *error_node = (void *)1;
    char log[64] = "x";
    ptr_arg = b;
    OK(hip.StreamBeginCapture(stream, 0));
    OK(hip.MemsetD8Async(b, 0, N * 4, stream));
    OK(hip.MemcpyDtoDAsync(b, a, N * 4, stream));
    OK(hip.ModuleLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, stream, params, NULL));
    OK(hip.StreamEndCapture(stream, &graph));
    OK(hip.GraphInstantiate(&exec, graph, &error_node, log, sizeof log));
    if (error_node != NULL || log[0] != '\0') fail("hipGraphInstantiate left error node or log");
    OK(hip.GraphUpload(exec, stream));
    OK(hip.GraphLaunch(exec, stream));
    OK(hip.GraphLaunch(exec, stream));
    OK(hip.StreamSynchronize(stream));
    check(b, 5, "captured graph (memset, copy, launch), launched twice");

    /* Peers: a device is not its own peer; with two devices enabling twice gives 704. */
    int can = -1;
    OK(hip.DeviceCanAccessPeer(&can, 0, 0));
    if (can != 0) fail("device 0 reports itself as a peer");
    if (count >= 2) {
        OK(hip.DeviceCanAccessPeer(&can, 0, 1));
        if (can) {
            int rc = hip.DeviceEnablePeerAccess(1, 0);
            if (rc != 0 && rc != 704) expect_rc("hipDeviceEnablePeerAccess(1)", rc, 0);
            expect_rc("hipDeviceEnablePeerAccess(1) again", hip.DeviceEnablePeerAccess(1, 0), 704);
        }
        printf("hip-double smoke: device 0 -> 1 peer access %d\n", can);
        void *d1 = NULL;
        OK(hip.SetDevice(1));
        OK(hip.Malloc(&d1, 4096));
        OK(hip.Memset(d1, 1, 4096));
        OK(hip.Free(d1));
        OK(hip.SetDevice(0));
    }

    int thread_rc = -1;
    pthread_t t;
    if (pthread_create(&t, NULL, default_device_thread, &thread_rc) != 0) fail("pthread_create");
    pthread_join(t, NULL);
    expect_rc("hipMalloc/hipMemset/hipFree on a thread without hipSetDevice", thread_rc, 0);

    OK(hip.GraphExecDestroy(exec));
    OK(hip.GraphDestroy(graph));
    OK(hip.EventDestroy(start));
    OK(hip.EventDestroy(end));
    OK(hip.StreamDestroy(stream));
    OK(hip.StreamDestroy(other));
    OK(hip.ModuleUnload(module));
    OK(hip.Free(a));
    OK(hip.Free(b));
    printf("hip-double smoke: kernel %.3f ms; all HIP calls through the CUDA driver OK\n", (double)ms);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/TO/libamdhip64.so\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "hip-double smoke: FAIL: dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    void *sym[NSYM];
    for (size_t i = 0; i < NSYM; i++) {
        sym[i] = dlsym(lib, SYMBOLS[i]);
        if (sym[i] == NULL) {
            fprintf(stderr, "hip-double smoke: FAIL: %s does not export %s\n", argv[1], SYMBOLS[i]);
            return 1;
        }
    }
    /* The struct's members are in SYMBOLS' order, all function pointers of one size. */
    _Static_assert(sizeof hip == NSYM * sizeof(void (*)(void)), "table and symbol list differ");
    memcpy(&hip, sym, sizeof hip);
    printf("hip-double smoke: all %zu symbols resolved from %s\n", NSYM, argv[1]);

    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL) {
        no_driver();
    } else {
        dlclose(cuda);
        with_driver();
    }
    return 0;
}
