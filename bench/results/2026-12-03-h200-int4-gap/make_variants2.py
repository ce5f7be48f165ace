#!/usr/bin/env python3
"""Second round (after run 1): the split-K epilogue, rewritten two ways, on any kernel text that
make_variants.py wrote (the emitted kernel or a same-function variant of it).

    python3 make_variants2.py IN.cu OUT.cu NEWNAME epi|clus

  epi   the last arriver's finish reads all its partials before it stores anything, and the
        (batch row, column) points of the tile are spread over all 128 lanes: one L2 round trip
        instead of one per batch row (at batch 8 the emitted finish is 8 dependent LDG -> STG rounds,
        SASS of tp1b8_full). The arrival (partials to global, MEMBAR.GPU + ATOM) is unchanged.
  clus  split-K inside a thread-block cluster of the P K-parts of one column tile
        (__cluster_dims__(P,1,1); tile = blockIdx.x / P, part = blockIdx.x % P): each part puts its
        sums in its own LDS slot, one cluster barrier (release/acquire), rank 0 reads the P slots
        through distributed shared memory (mapa + ld.shared::cluster) in part order and stores y,
        a second cluster barrier keeps the other parts' LDS alive until it has. No global partials,
        no device-scope atomic, no MEMBAR.GPU. The scratch/counter/epoch parameters stay (unused).
Both add the parts in the same order from 0.0f as the emitted finish: y must be bit-identical."""
import re
import sys

src_path, out_path, newname, mode = sys.argv[1:5]
s = open(src_path).read()
s = re.sub(r"\ngemv_int4(_\w+)?\(", f"\n{newname}(", s, count=1)

B = int(re.search(r"for (\d+) batch row\(s\)", s).group(1))
N = int(re.search(r"wf_f16\* __restrict__ y, // f16\[(\d+)\]", s).group(1)) // B
tiles = N // 32
mP = re.search(r"split-K: (\d+) workgroups per column tile", s)
assert mP, "no split-K in this kernel"
P = int(mP.group(1))

a = s.index("    // split-K: this part's sums to splitk_partials")
tail_start = s.index("    // Stream order (docs/synchronisation.md): this workgroup is done")
head, part_store, tail = s[:a], s[a:s.index("    // split-K arrival", a)], s[tail_start:]

points = B * 32
iters = (points + 127) // 128

if mode == "epi":
    mid = s[s.index("    // split-K arrival", a):]
    f = mid.index("    // the tile's last arriver only")
    last_var = re.search(r"    (last_\d+) = lds_0\[0u\];", mid).group(1)
    fin = f"""    // the tile's last arriver only (epi variant): all {P} x {iters} partial loads of a lane first, then the sums and stores
    if ({last_var} == 1u) {{
        float wf_p[{iters}][{P}];
#pragma unroll
        for (unsigned i = 0u; i < {iters}u; ++i) {{
            const unsigned p = threadIdx.x + i * 128u;
#pragma unroll
            for (unsigned kp = 0u; kp < {P}u; ++kp)
                wf_p[i][kp] = (p < {points}u) ? splitk_partials[(((kp * {B}u) + p / 32u) * {N}u) + tile0_0 + p % 32u] : 0.0f;
        }}
#pragma unroll
        for (unsigned i = 0u; i < {iters}u; ++i) {{
            const unsigned p = threadIdx.x + i * 128u;
            float d = 0.0f;
#pragma unroll
            for (unsigned kp = 0u; kp < {P}u; ++kp) d = d + wf_p[i][kp];
            if (p < {points}u) y[((p / 32u) * {N}u) + tile0_0 + p % 32u] = wf_f32_to_f16(d);
        }}
    }}
"""
    out = head + part_store + mid[:f] + fin + tail
elif mode == "clus":
    # part store -> own LDS slot
    slot_idx = None
    mb = re.search(r"for \(unsigned (b_\d+) = 0u; \1 < \d+u; \+\+\1\) \{", part_store)
    mc = re.search(r"(c_\d+) = threadIdx\.x;", part_store)
    slot_idx = f"({mb.group(1)} * 32u) + {mc.group(1)}" if mb else mc.group(1)
    part_store2, n = re.subn(r"splitk_partials\[.*\] = (dot_\d+);", rf"wf_slot[{slot_idx}] = \1;", part_store)
    assert n == 1
    fin = f"""    // cluster split-K: the {P} parts' slots added in part order by rank 0, through distributed shared memory
    wf_cluster_sync();
    if (kpart_2 == 0u) {{
        float wf_p[{iters}][{P}];
#pragma unroll
        for (unsigned i = 0u; i < {iters}u; ++i) {{
            const unsigned p = threadIdx.x + i * 128u;
#pragma unroll
            for (unsigned kp = 0u; kp < {P}u; ++kp) wf_p[i][kp] = (p < {points}u) ? wf_ld_cluster(&wf_slot[p], kp) : 0.0f;
        }}
#pragma unroll
        for (unsigned i = 0u; i < {iters}u; ++i) {{
            const unsigned p = threadIdx.x + i * 128u;
            float d = 0.0f;
#pragma unroll
            for (unsigned kp = 0u; kp < {P}u; ++kp) d = d + wf_p[i][kp];
            if (p < {points}u) y[((p / 32u) * {N}u) + tile0_0 + p % 32u] = wf_f32_to_f16(d);
        }}
    }}
    // the other parts' LDS stays alive until rank 0 has read it
    wf_cluster_sync();
"""
    head2 = head
    head2 = head2.replace(f"tile_1 = blockIdx.x % {tiles}u;", f"tile_1 = blockIdx.x / {P}u;")
    head2 = head2.replace(f"kpart_2 = blockIdx.x / {tiles}u;", f"kpart_2 = blockIdx.x % {P}u;")
    assert head2.count(f"blockIdx.x / {P}u") >= 1 and f"blockIdx.x % {P}u" in head2, "tile/part mapping not found"
    head2 = head2.replace('extern "C" __global__ void __launch_bounds__(', f'extern "C" __global__ void __cluster_dims__({P}, 1, 1) __launch_bounds__(', 1)
    helpers = """static __device__ __forceinline__ void wf_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
static __device__ __forceinline__ float wf_ld_cluster(const float* p, unsigned rank) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
    return v;
}
"""
    i = head2.index('extern "C"')
    head2 = head2[:i] + helpers + head2[i:]
    # the slot array next to the other LDS arrays
    j = head2.index("    alignas(16) __shared__ float lds_1")
    head2 = head2[:j] + f"    alignas(16) __shared__ float wf_slot[{points}];\n" + head2[j:]
    out = head2 + part_store2 + fin + tail
else:
    raise SystemExit("mode: epi|clus")
open(out_path, "w").write(out)
print(f"{out_path}: {mode}, P = {P}, B = {B}, N = {N}")
