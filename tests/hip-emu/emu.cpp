// The scheduler of the host emulation (README.md): every lane of a workgroup is a fiber
// (ucontext) on one host thread. A lane runs until it reaches a synchronisation point; when no
// lane can run, the scheduler releases what the points allow (a whole wave at a wave-level
// exchange, the whole workgroup at a barrier) and reports anything else — lanes of one wave at
// different exchanges, lanes at different barriers, a lane that returned while others wait —
// instead of hanging, as the hardware might. The order in which released lanes run is shuffled
// from a seed, so a kernel that reads LDS another lane writes without a barrier in between sees
// the poison or a different interleaving rather than a lucky fixed order.
//
// Fibers instead of one thread per lane: a barrier costs two context switches per lane rather
// than a futex wake-up of every thread, which is what keeps a shape's run well under a second on
// two cores, and the run is reproducible from its seed.
#include "hip/hip_runtime.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

EmuDim threadIdx, blockIdx, blockDim, gridDim;
float emu_xchg_f32[EMU_MAX_LANES];
unsigned emu_xchg_u32[EMU_MAX_LANES];

// The LDS section (hip_runtime.h's __shared__); weak, so a kernel without LDS links too.
extern "C" unsigned char __start_wf_emu_lds[] __attribute__((weak));
extern "C" unsigned char __stop_wf_emu_lds[] __attribute__((weak));

namespace {

constexpr size_t LDS_LIMIT = 64 * 1024; // bytes of LDS one gfx906 workgroup may allocate
constexpr size_t STACK_BYTES = 256 * 1024; // per lane; the kernels' lanes need a few KB
constexpr int EXIT_EMULATION = 3;

enum class At { Running, Barrier, WaveSync, Done };

struct Lane {
    ucontext_t ctx;
    At at;
    int line; // source line of the barrier or exchange the lane waits at
};

Lane lanes[EMU_MAX_LANES];
unsigned order[EMU_MAX_LANES];
unsigned char* stacks; // EMU_MAX_LANES stacks, each above an inaccessible guard page
size_t page;
ucontext_t scheduler;
unsigned current, n_lanes;
void (*lane_body)(void*);
void* lane_ctx;
uint64_t rng_state = 0x243F6A8885A308D3ull;

uint64_t next_random() { // splitmix64
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// A fault is almost always a buffer overrun into emu_alloc's guard page (or a lane's stack
// guard): say so and end the run as an emulation error rather than a bare signal.
void on_fault(int sig, siginfo_t* info, void*) {
    char msg[200];
    const int n = snprintf(msg, sizeof msg,
                           "emulation: signal %d at address %p, lane %u of workgroup %u: an access past the end of a "
                           "buffer (each ends at an inaccessible page) or out of any buffer\n",
                           sig, info->si_addr, threadIdx.x, blockIdx.x);
    if (n > 0) (void)!write(1, msg, (size_t)n);
    _exit(EXIT_EMULATION);
}

__attribute__((constructor)) void install_fault_handler() {
    page = (size_t)sysconf(_SC_PAGESIZE);
    static unsigned char alt[64 * 1024]; // the faulting lane's stack may be the problem
    stack_t ss = {};
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, nullptr);
    struct sigaction sa = {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}

const char* where(At at) {
    switch (at) {
    case At::Running: return "running";
    case At::Barrier: return "a barrier";
    case At::WaveSync: return "a wave exchange (shuffle or readfirstlane)";
    case At::Done: return "the kernel's end";
    }
    return "?";
}

void lane_main() {
    lane_body(lane_ctx);
    lanes[current].at = At::Done; // returns to `scheduler` through uc_link
}

void yield(At at, int line) {
    Lane& l = lanes[current];
    l.at = at;
    l.line = line;
    swapcontext(&l.ctx, &scheduler);
}

void shuffle_order() {
    for (unsigned i = n_lanes; i > 1; --i) {
        const unsigned j = (unsigned)(next_random() % i);
        const unsigned t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

// Runs one workgroup (blockIdx set by the caller) to completion.
void run_workgroup() {
    const size_t lds = (size_t)(__stop_wf_emu_lds - __start_wf_emu_lds);
    if (lds > LDS_LIMIT) emu_die("the kernel's LDS is %zu bytes, more than gfx906's %zu per workgroup\n", lds, LDS_LIMIT);
    if (lds) memset(__start_wf_emu_lds, 0xFF, lds); // NaN in FP16 and FP32, 0xFF..FF as integers
    if (!stacks) {
        stacks = (unsigned char*)mmap(nullptr, EMU_MAX_LANES * (STACK_BYTES + page), PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (stacks == MAP_FAILED) emu_die("cannot map the lanes' stacks\n");
        for (unsigned t = 0; t < EMU_MAX_LANES; ++t) mprotect(stacks + t * (STACK_BYTES + page), page, PROT_NONE);
    }
    for (unsigned t = 0; t < n_lanes; ++t) {
        Lane& l = lanes[t];
        getcontext(&l.ctx);
        l.ctx.uc_stack.ss_sp = stacks + t * (STACK_BYTES + page) + page;
        l.ctx.uc_stack.ss_size = STACK_BYTES;
        l.ctx.uc_link = &scheduler;
        makecontext(&l.ctx, lane_main, 0);
        l.at = At::Running;
        order[t] = t;
    }
    for (;;) {
        shuffle_order();
        for (unsigned i = 0; i < n_lanes; ++i) {
            const unsigned t = order[i];
            if (lanes[t].at != At::Running) continue;
            current = t;
            threadIdx = EmuDim{t, 0, 0};
            swapcontext(&scheduler, &lanes[t].ctx);
        }
        bool polling = false; // a lane yielded in a poll loop (emu_sleep) and can run again
        for (unsigned t = 0; t < n_lanes; ++t) polling = polling || lanes[t].at == At::Running;
        if (polling) continue;
        // No lane can run. Release every wave whose lanes all wait at an exchange; a wave with
        // only some of its lanes there is divergent.
        bool done = true, released = false;
        for (unsigned w = 0; w < n_lanes / EMU_WAVE; ++w) {
            unsigned at_sync = 0, first = 0;
            for (unsigned t = w * EMU_WAVE; t < (w + 1) * EMU_WAVE; ++t)
                if (lanes[t].at == At::WaveSync && at_sync++ == 0) first = t;
            if (at_sync == EMU_WAVE) {
                for (unsigned t = w * EMU_WAVE; t < (w + 1) * EMU_WAVE; ++t) lanes[t].at = At::Running;
                released = true;
            } else if (at_sync > 0) {
                for (unsigned t = w * EMU_WAVE; t < (w + 1) * EMU_WAVE; ++t)
                    if (lanes[t].at != At::WaveSync)
                        emu_die("wave %u of workgroup %u diverges: lane %u waits at the exchange of line %d, lane %u is at %s "
                                "(line %d)\n",
                                w, blockIdx.x, first, lanes[first].line, t, where(lanes[t].at), lanes[t].line);
            }
        }
        if (released) continue;
        for (unsigned t = 0; t < n_lanes; ++t) done = done && lanes[t].at == At::Done;
        if (done) return;
        // Every lane is at a barrier or has returned; all must be at the same barrier (§5.8).
        for (unsigned t = 0; t < n_lanes; ++t) {
            const Lane& a = lanes[0];
            const Lane& b = lanes[t];
            if (b.at != At::Barrier || a.at != At::Barrier || a.line != b.line)
                emu_die("workgroup %u: lane 0 is at %s (line %d), lane %u at %s (line %d): a barrier not reached by every "
                        "lane, or different barriers (DESIGN.md §5.8)\n",
                        blockIdx.x, where(a.at), a.line, t, where(b.at), b.line);
        }
        for (unsigned t = 0; t < n_lanes; ++t) lanes[t].at = At::Running;
    }
}

void check_lanes(unsigned n) {
    if (n == 0 || n > EMU_MAX_LANES || n % EMU_WAVE != 0)
        emu_die("a workgroup of %u lanes: the emulation takes whole waves of %u, at most %u lanes\n", n, EMU_WAVE,
                EMU_MAX_LANES);
}

} // namespace

void emu_syncthreads(int line) { yield(At::Barrier, line); }
void emu_wave_sync(int line) { yield(At::WaveSync, line); }
void emu_sleep(unsigned) {
    yield(At::Running, 0);
    usleep(20);
}

void emu_die(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("emulation error: ");
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
    _exit(EXIT_EMULATION);
}

void emu_seed(uint64_t seed) { rng_state = seed ^ 0x243F6A8885A308D3ull; }

void emu_run(unsigned grid, unsigned n, void (*body)(void*), void* ctx) {
    check_lanes(n);
    n_lanes = n;
    lane_body = body;
    lane_ctx = ctx;
    gridDim = EmuDim{grid, 1, 1};
    blockDim = EmuDim{n, 1, 1};
    for (unsigned b = 0; b < grid; ++b) {
        blockIdx = EmuDim{b, 0, 0};
        run_workgroup();
    }
}

void emu_run_2d(unsigned gx, unsigned gy, unsigned n, void (*body)(void*), void* ctx) {
    check_lanes(n);
    n_lanes = n;
    lane_body = body;
    lane_ctx = ctx;
    gridDim = EmuDim{gx, gy, 1};
    blockDim = EmuDim{n, 1, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
            blockIdx = EmuDim{x, y, 0};
            run_workgroup();
        }
}

namespace {
void (*rank_body)(void*, unsigned);
unsigned rank_of_process;
void rank_trampoline(void* ctx) { rank_body(ctx, rank_of_process); }
} // namespace

void emu_run_ranks(unsigned ranks, unsigned grid, unsigned n, void (*body)(void*, unsigned), void* ctx) {
    check_lanes(n);
    fflush(stdout); // the children would print the parent's buffered output again
    const pid_t parent = getpid();
    pid_t kids[4096];
    if ((size_t)ranks * grid > sizeof kids / sizeof kids[0]) emu_die("%u × %u workgroups: too many processes\n", ranks, grid);
    for (unsigned r = 0; r < ranks; ++r)
        for (unsigned b = 0; b < grid; ++b) {
            const pid_t pid = fork();
            if (pid < 0) emu_die("fork failed\n");
            if (pid == 0) {
                // A child must not outlive a driver killed for hanging.
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent) _exit(EXIT_EMULATION);
                emu_seed(rng_state ^ ((uint64_t)r << 32 | b));
                rank_body = body;
                rank_of_process = r;
                n_lanes = n;
                lane_body = rank_trampoline;
                lane_ctx = ctx;
                gridDim = EmuDim{grid, 1, 1};
                blockDim = EmuDim{n, 1, 1};
                blockIdx = EmuDim{b, 0, 0};
                run_workgroup();
                fflush(stdout);
                _exit(0);
            }
            kids[r * grid + b] = pid;
        }
    bool failed = false;
    for (unsigned i = 0; i < ranks * grid; ++i) {
        int status = 0;
        waitpid(kids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("emulation error: rank %u workgroup %u ended with %s %d\n", i / grid, i % grid,
                   WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            failed = true;
        }
    }
    if (failed) emu_die("a workgroup process failed (above)\n");
}

void* emu_alloc_bytes(size_t bytes) {
    const size_t span = (bytes + page - 1) / page * page;
    unsigned char* base = (unsigned char*)mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) emu_die("cannot map %zu bytes\n", bytes);
    mprotect(base + span, page, PROT_NONE);
    // Fill with NaN bytes: what a kernel reads without anyone having written it is poison.
    memset(base, 0xFF, span);
    return (void*)((uintptr_t)(base + span - bytes) & ~(uintptr_t)15);
}
