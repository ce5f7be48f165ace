// gemv_int4_qkv_ref: hand-written reference for `gemv_int4_qkv` (DESIGN.md §3.4), sm_90, CUDA.
//
// One GPTQ INT4 GEMV over the fused [K, NQ + 2·NKV] weight, one launch, three outputs by column
// range (each a contiguous [BATCH, width] array):
//   qkv[b, n] = Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[b, k]
//   q[b, n] = round_f16(qkv[b, n]),  k[b, n] = round_f16(qkv[b, NQ + n]),  v[b, n] = round_f16(qkv[b, NQ + NKV + n])
//
// GPTQ INT4 (DESIGN.md §2): `qweight` u32 [K/8, N] packed along K (nibble i of word (kw, n) is the
// code of row 8·kw + i, least significant first); `scales` f16 [ceil(K/G), N]; `qzeros` u32
// [ceil(K/G), N/8] packed along N (nibble i of word j is column 8j + i). GPTQ v1 checkpoints store
// z − 1 (WF_ZP_V1=1 adds the 1 back), v2 stores z (WF_ZP_V1=0): the convention is a build define,
// never guessed.
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_qkv.tp<N>.abi.toml:
//   -DWF_K=… -DWF_NQ=… -DWF_NKV=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// Launch: ceil((NQ + 2·NKV) / 32) workgroups of exactly 256 lanes, arguments in signature order.
//
// Work split. Workgroup w owns the 32 columns [32w, 32w + 32). Lane t reads column 32w + t % 32, so
// a warp reads 32 adjacent words (128 contiguous bytes) of one packed K-row: the coalesced pattern
// of DESIGN.md §2. The 8 warps are 8 K-slices: slice s takes chunks s, s + 8, s + 16, … of 16
// packed rows (a chunk is one 128-row group at G = 128), loading the chunk's scale and zero point
// once. The next chunk's 16 loads are issued before the current chunk is consumed, so each lane has
// up to 32 weight loads in flight. Each lane accumulates its column in FP32; the 8 slices meet in
// LDS and are added in slice order (deterministic), then rounded once to FP16.
//
// Dequantisation, exact: 2^23 + q is built by OR-ing the nibble into the bits of 2^23 (no int→float
// convert), and subtracting the float 2^23 + z gives q − z exactly. (q − z)·x is exact in FP32 (a
// 5-bit integer times an 11-bit mantissa). The scale multiplies the chunk's sum once:
// Σ_k (q − z)·s·x = s · Σ_k (q − z)·x, equal up to FP32 rounding order.
//
// Batch > 8 (up to 64): as gemv_int4.cu, the rows go in tiles of TILE = 8, each a pass over all
// of K with its own accumulators, reduction and stores (the registers and LDS of batch 8; the
// weights read once per tile, the ABI's [model] weight_passes), a last pass compiled for the
// BATCH % TILE rows left, and a barrier before a tile's slices overwrite the reduction's LDS
// that the previous tile's sums were read from (§5.2).
//
// No CUDA header is needed (NVRTC compiles it as is): FP16 values are kept as their 16 bits and
// converted with one PTX instruction each (a host compiler, which the host emulation of
// tests/hip-emu uses, takes the plain C++ conversion instead).

#if !defined(WF_K) || !defined(WF_NQ) || !defined(WF_NKV) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_qkv_ref needs -DWF_K -DWF_NQ -DWF_NKV -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
#endif

typedef unsigned short f16; // an FP16 value, as its bits

static __device__ __forceinline__ float f16_to_f32(f16 h) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    return (float)__builtin_bit_cast(_Float16, h);
#endif
}

static __device__ __forceinline__ f16 f32_to_f16(float f) { // round to nearest even
#if defined(__CUDA_ARCH__)
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    return __builtin_bit_cast(f16, (_Float16)f);
#endif
}

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned NQ = WF_NQ;       // columns of q (query + output gate)
constexpr unsigned NKV = WF_NKV;     // columns of k, and of v
constexpr unsigned N = NQ + 2 * NKV; // columns of the fused weight
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned TILE = BATCH < 8 ? BATCH : 8;      // batch rows per pass (see "Batch > 8")
constexpr unsigned FULL = BATCH / TILE;               // passes of TILE rows
constexpr unsigned REST = BATCH % TILE;               // rows of the last, shorter pass (0: none)
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;

// ---- work split ----
constexpr unsigned WG = 256;                  // lanes per workgroup
constexpr unsigned COLS = 32;                 // columns per workgroup = lanes per K-slice
constexpr unsigned SLICES = WG / COLS;        // K-slices per workgroup (one warp each)
constexpr unsigned KW = K / 8;                // packed K-rows
constexpr unsigned WPG = GROUP / 8;           // packed K-rows per group
constexpr unsigned CHUNK = WPG < 16 ? WPG : 16; // packed K-rows fetched at once, all of one group
constexpr unsigned NCHUNK = (KW + CHUNK - 1) / CHUNK;
constexpr bool RAGGED = KW % CHUNK != 0;      // K ends inside a group: the last chunk is short

static_assert(BATCH >= 1 && BATCH <= 64, "batch 1..64");
static_assert(K % 8 == 0 && NQ % 8 == 0 && NKV % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG <= 16 || WPG % 16 == 0, "a chunk never straddles two groups");

// One chunk of a lane's column: CHUNK packed K-rows and the group's scale and zero point.
struct Chunk {
    unsigned q[CHUNK];
    float s;  // scale
    float zf; // 2^23 + z, as a float
};

static __device__ __forceinline__ void fetch(Chunk& ch, const unsigned* __restrict__ qweight,
                                             const f16* __restrict__ scales,
                                             const unsigned* __restrict__ qzeros, unsigned c,
                                             unsigned col) {
    const unsigned g = c * CHUNK / WPG;
    ch.s = f16_to_f32(scales[g * N + col]);
    const unsigned z = ((qzeros[g * (N / 8) + col / 8] >> (4 * (col % 8))) & 0xFu) + ZP_ADD;
    ch.zf = __uint_as_float(0x4B000000u | z);
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        const unsigned kw = c * CHUNK + i;
        ch.q[i] = (!RAGGED || kw < KW) ? qweight[kw * N + col] : 0u;
    }
}

// Rows row0 … row0 + ROWS − 1 of x: the chunk's products added to their accumulators.
template <unsigned ROWS>
static __device__ __forceinline__ void consume(const Chunk& ch, const f16* __restrict__ x,
                                               unsigned c, unsigned row0, float (&acc)[ROWS]) {
    float part[ROWS][2]; // two independent FMA chains per batch row
#pragma unroll
    for (unsigned b = 0; b < ROWS; ++b) part[b][0] = part[b][1] = 0.0f;
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        const unsigned kw = c * CHUNK + i;
        if (RAGGED && kw >= KW) break;
        float d[8]; // q − z of rows 8·kw … 8·kw + 7, exact
#pragma unroll
        for (unsigned j = 0; j < 8; ++j)
            d[j] = __uint_as_float(0x4B000000u | ((ch.q[i] >> (4 * j)) & 0xFu)) - ch.zf;
#pragma unroll
        for (unsigned b = 0; b < ROWS; ++b) {
            // the 8 activations of this packed row: one 16-byte load, the same address in every lane
            const uint4 xv = *reinterpret_cast<const uint4*>(x + (row0 + b) * K + kw * 8);
            const unsigned xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (unsigned j = 0; j < 8; ++j) {
                const float xf = f16_to_f32((f16)(xw[j / 2] >> (16 * (j % 2))));
                part[b][j % 2] = fmaf(d[j], xf, part[b][j % 2]);
            }
        }
    }
#pragma unroll
    for (unsigned b = 0; b < ROWS; ++b) acc[b] = fmaf(ch.s, part[b][0] + part[b][1], acc[b]);
}

// One pass over the weights for rows row0 … row0 + ROWS − 1 (ROWS ≤ TILE): the lane's column
// over its K-slice, then the slices' sums met in LDS and stored into q, k or v.
template <unsigned ROWS>
static __device__ __forceinline__ void tile_pass(float (&red)[SLICES][TILE][COLS],
                                                 const unsigned* __restrict__ w_qkv_qweight,
                                                 const f16* __restrict__ w_qkv_scales,
                                                 const unsigned* __restrict__ w_qkv_qzeros,
                                                 const f16* __restrict__ x, f16* __restrict__ q,
                                                 f16* __restrict__ k, f16* __restrict__ v, unsigned row0) {
    const unsigned lane_col = threadIdx.x % COLS;
    const unsigned slice = threadIdx.x / COLS; // the warp: uniform across its lanes
    const unsigned col = blockIdx.x * COLS + lane_col;

    float acc[ROWS];
#pragma unroll
    for (unsigned b = 0; b < ROWS; ++b) acc[b] = 0.0f;

    // Columns past N are masked, not returned from: every lane reaches the barriers below (§5.8).
    if (col < N && slice < NCHUNK) {
        unsigned c = slice;
        Chunk cur;
        fetch(cur, w_qkv_qweight, w_qkv_scales, w_qkv_qzeros, c, col);
        for (;;) {
            const unsigned next = c + SLICES;
            Chunk nxt;
            if (next < NCHUNK) fetch(nxt, w_qkv_qweight, w_qkv_scales, w_qkv_qzeros, next, col); // in flight while `cur` is used
            consume<ROWS>(cur, x, c, row0, acc);
            if (next >= NCHUNK) break;
            cur = nxt;
            c = next;
        }
    }

    if (row0 > 0) {
        // §5.2 (LDS reuse across tiles) and §5.8 (uniform control flow: row0 is the workgroup's):
        // the previous tile's sums have all been read before this tile's overwrite them.
        __syncthreads();
    }
#pragma unroll
    for (unsigned b = 0; b < ROWS; ++b) red[slice][b][lane_col] = acc[b];
    // §5.8: workgroup barrier in uniform control flow (tails were masked above)
    __syncthreads();

    // Lane t < COLS finishes column t of the tile for every row of the pass: slices added in order.
    if (threadIdx.x < COLS) {
        const unsigned n = blockIdx.x * COLS + threadIdx.x;
#pragma unroll
        for (unsigned b = 0; b < ROWS; ++b) {
            const unsigned row = row0 + b;
            float sum = red[0][b][threadIdx.x];
#pragma unroll
            for (unsigned s = 1; s < SLICES; ++s) sum += red[s][b][threadIdx.x];
            // the one FP16 rounding of each output; the column range picks the output
            if (n < NQ) q[row * NQ + n] = f32_to_f16(sum);
            else if (n < NQ + NKV) k[row * NKV + (n - NQ)] = f32_to_f16(sum);
            else if (n < N) v[row * NKV + (n - NQ - NKV)] = f32_to_f16(sum);
        }
    }
}

extern "C" __global__ void __launch_bounds__(WG)
gemv_int4_qkv_ref(
    const unsigned* __restrict__ w_qkv_qweight, // u32 [K/8, NQ + 2·NKV]
    const f16* __restrict__ w_qkv_scales,       // f16 [ceil(K/G), NQ + 2·NKV]
    const unsigned* __restrict__ w_qkv_qzeros,  // u32 [ceil(K/G), (NQ + 2·NKV)/8]
    const f16* __restrict__ x,                  // f16 [BATCH, K], 16-byte aligned
    f16* __restrict__ q,                        // f16 [BATCH, NQ]
    f16* __restrict__ k,                        // f16 [BATCH, NKV]
    f16* __restrict__ v)                        // f16 [BATCH, NKV]
{
    __shared__ float red[SLICES][TILE][COLS]; // per-slice column sums of one tile

#pragma unroll 1
    for (unsigned t = 0; t < FULL; ++t)
        tile_pass<TILE>(red, w_qkv_qweight, w_qkv_scales, w_qkv_qzeros, x, q, k, v, t * TILE);
    if (REST > 0)
        tile_pass<(REST > 0 ? REST : 1)>(red, w_qkv_qweight, w_qkv_scales, w_qkv_qzeros, x, q, k, v, FULL * TILE);
}
