//! # wavefuse
//!
//! A kernel-generating compiler for LLM decode. You describe a fused decode operator — INT4 GEMV,
//! tensor-parallel (TP) allreduce, residual add, RMSNorm, SiLU·mul — in the [`kernel!`] language;
//! you get an IR kernel ([`ir`]) that the code generators lower to HIP (gfx906) and CUDA (sm_90)
//! with the synchronisation the operator needs, and a typed argument struct ([`host`]) for
//! launching it. You write *what* is computed and across which TP group; where workgroups and GPUs
//! must synchronise is the compiler's business.
//!
//! This crate is the facade: the macro, the IR and its builder (re-exported as [`ir`]), the typed
//! host API, and the one peer-order rule ([`peer_order`]). With the cargo feature `pipeline`,
// The module exists only with the feature: linked to with it, named without it (so that
// `cargo doc -p wavefuse`, without the feature, has no dangling link).
#![cfg_attr(feature = "pipeline", doc = "[`pipeline`](crate::pipeline)")]
#![cfg_attr(not(feature = "pipeline"), doc = "the `pipeline` module")]
//! takes a kernel through the rest in one call per step — generate the HIP or CUDA
//! source and ABI, compile it with the real compiler (resources, co-residency, the MI50 time
//! model), simulate it, check it against the f64 oracle in the simulator or on a GPU, launch it
//! with its typed arguments, A/B it against a hand-written kernel. Without the feature the crate
//! needs no code generator, runtime or GPU library.
//!
//! ## A first kernel: GEMV + allreduce + residual + RMSNorm
//!
//! The FFN down projection of a TP-sharded model: each rank holds a K-shard of a GPTQ INT4 weight
//! and its slice of the activation, computes partial sums of all 5120 outputs, sums them over the
//! TP group, adds the residual stream, and normalises. Two outputs: the new residual stream and
//! its normalised copy for the next layer.
//!
//! ```
//! use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint};
//!
//! wavefuse::kernel! {
//!     /// Row-parallel INT4 GEMV, TP allreduce, residual add and RMSNorm: one launch per rank.
//!     pub fn gemv_int4_allreduce_rmsnorm(tp: u32, batch: usize, k: usize, layout: GptqLayout)
//!     across tp {
//!         in w_down: gptq(layout)[k, 5120] row_parallel;
//!         in x: f16[batch, k] col_parallel;
//!         in residual: f16[batch, 5120];
//!         in norm_w: f16[5120];
//!         out residual_out: f16[batch, 5120];
//!         out normed: f16[batch, 5120];
//!
//!         let partial = round_f16(gemv.row(w_down, x));
//!         residual_out = round_f16(allreduce(partial) + residual);
//!         normed = round_f16(rmsnorm(residual_out, norm_w, eps = 1e-6));
//!     }
//! }
//!
//! // One declaration, every TP size: the parameters are ordinary Rust values.
//! let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
//! for tp in [1, 2, 4, 8] {
//!     let kernel = gemv_int4_allreduce_rmsnorm(tp, 1, 17408 / tp as usize, layout);
//!     wavefuse::ir::validate(&kernel)?;
//! }
//!
//! let kernel = gemv_int4_allreduce_rmsnorm(4, 1, 4352, layout);
//! let ir = kernel.to_string();
//! assert!(ir.contains("v1 = gemv.row buf0, v0                  ; f32[1, 5120] partial"));
//! assert!(ir.contains("v3 = allreduce v2, tp=4                 ; f32[1, 5120] replicated"));
//! # Ok::<(), wavefuse::ir::ValidationError>(())
//! ```
//!
//! Its textual IR at TP = 4 (`print!("{kernel}")`):
//!
//! ```text
//! kernel gemv_int4_allreduce_rmsnorm(tp=4) {
//!     buf0 = input w_down : gptq<group=128, zero=v1, scale=f16>[k=4352, n=5120] row_parallel(tp=4) @global index=local
//!     buf1 = input x : f16[1, 4352] col_parallel(tp=4) @global index=local
//!     buf2 = input residual : f16[1, 5120] replicated @global index=local
//!     buf3 = input norm_w : f16[5120] replicated @global index=local
//!     buf4 = output residual_out : f16[1, 5120] replicated @global index=local
//!     buf5 = output normed : f16[1, 5120] replicated @global index=local
//!     v0 = load buf1                          ; f16[1, 4352] sharded
//!     v1 = gemv.row buf0, v0                  ; f32[1, 5120] partial
//!     v2 = round_f16 v1                       ; f16[1, 5120] partial
//!     v3 = allreduce v2, tp=4                 ; f32[1, 5120] replicated
//!     v4 = load buf2                          ; f16[1, 5120] replicated
//!     v5 = add v3, v4                         ; f32[1, 5120] replicated
//!     v6 = round_f16 v5                       ; f16[1, 5120] replicated
//!     store v6, buf4
//!     v7 = load buf3                          ; f16[5120] replicated
//!     v8 = rmsnorm v6, v7, eps=1e-6           ; f32[1, 5120] replicated
//!     v9 = round_f16 v8                       ; f16[1, 5120] replicated
//!     store v9, buf5
//! }
//! ```
//!
//! ## Reading the kernel, line by line
//!
//! **The header** is a Rust function signature: `pub fn gemv_int4_allreduce_rmsnorm(tp: u32,
//! batch: usize, k: usize, layout: GptqLayout)`. Its parameters are *compile-time* parameters of
//! the kernel: every shape, layout and attribute in the body is a Rust expression over them,
//! evaluated when the generated function runs. The function returns the [`ir::Kernel`]; it does
//! not validate it ([`ir::validate`] is the one gate, and every consumer of a kernel runs it).
//! Write no return type. Attributes and doc comments go on the generated function.
//!
//! **`across tp`** declares the TP group: the kernel runs once per rank of a group of `tp` ranks
//! (any `u32` expression). A kernel without `across` runs on one rank: a sharded parameter or an
//! allreduce in it is an error.
//!
//! **Declarations** come first, one per kernel parameter, in ABI order:
//!
//! ```text
//! in  NAME: TYPE[DIMS] [SHARDING] [@SPACE] [index = local | global];
//! out NAME: TYPE[DIMS] [SHARDING] [@SPACE] [index = local | global];
//! ```
//!
//! | type | meaning |
//! | --- | --- |
//! | `f16`, `bf16`, `f32`, `i8`, `i32`, `u32` | a dense tensor, `[features]` or `[batch, features]` |
//! | `f16_nk[K, N]` | an FP16 weight stored `[N, K]` row-major (PyTorch `Linear`) |
//! | `gptq<group = G, zero = Z[, scale = S][, g_idx]>[K, N]` | a GPTQ INT4 weight with a literal layout: `G` a number of rows or `per_channel`; `Z` = `v1` (stores z − 1), `v2` (stores z) or `sym` (no qzeros, z = 8) — never defaulted, since it must match the checkpoint; `S` the scale type (default `f16`); `g_idx` for act-order |
//! | `gptq(layout)[K, N]` | the same with a [`ir::GptqLayout`] value |
//! | `awq<group = G[, scale = S]>[K, N]`, `awq(layout)[K, N]` | an AutoAWQ "GEMM" INT4 weight |
//! | `weight(format)[K, N]` | a weight whose [`ir::WeightFormat`] is a run-time value |
//!
//! Weights are always written `[K, N]` (reduction length, output length) whatever their storage.
//! Dimensions are `usize` expressions; by default (`index = local`) they are the rank's shard,
//! with `index = global` the whole tensor, split by the IR per the sharding.
//!
//! | sharding | tensor | weight |
//! | --- | --- | --- |
//! | `replicated` (default) | every rank holds the whole tensor | every rank holds the whole matrix |
//! | `col_parallel` | rank r holds feature slice r | split along N |
//! | `row_parallel` | — (a K-sharded activation is `col_parallel`) | split along K |
//! | `partial` | rank r holds partial sums; the value is their sum | — |
//!
//! Memory space: `@global` (default) or `@host` (host memory mapped into the device). Registers
//! and LDS cannot hold a parameter: they are private to one workgroup.
//!
//! **Statements** follow, in program order:
//!
//! - `let name = EXPR;` binds a value (one name per value: no shadowing; an unused value is an
//!   error). `let (codes, scales) = quantize_int8(x, block = 128);` binds an op's two results.
//! - `output = EXPR;` writes an output, exactly once. Afterwards `output` names the value stored
//!   (above, `rmsnorm(residual_out, …)` reads the rounded sum, not memory): an output is never
//!   loaded, because other workgroups or ranks may still be writing it.
//! - An input is loaded where its name is first used, once. Inputs are never written.
//!
//! **Expressions** are names, op calls and `a + b` / `a * b`. Operands are values; attributes
//! are named and are Rust expressions (`eps = 1e-6`, `block = INT8_BLOCK`, `len = nq`).
//! Evaluation is left to right, innermost first, so the IR's program order is the order in which
//! ops appear in the source.
//!
//! ## Precision
//!
//! Arithmetic results are `f32` and unrounded (at least FP32 on a device; f64 in the reference
//! semantics). A value becomes `f16` only by `round_f16` or by loading FP16 memory, and storing into
//! an FP16 output needs an `f16` value, so every FP16 rounding — including a partial sum that is
//! published to peers in FP16 — is written in the kernel and visible in the IR. GEMV activations
//! are FP16; accumulation is FP32; one rounding per output.
//!
//! ## The ops
//!
//! Names are the textual IR's mnemonics. `[B, F]` is a batch of `B` rows of `F` features (per
//! rank); "dist" is how a value is distributed over the TP group: replicated, sharded (rank r
//! holds feature slice r) or partial (rank r holds `x_r`; the value is `Σ_r x_r`).
//!
//! | op | operands → result | semantics |
//! | --- | --- | --- |
//! | `gemv.col(w, x)` | `col_parallel` weight `[K, N/tp]`, replicated f16 `[B, K]` → sharded f32 `[B, N/tp]` | `y[b, n] = Σ_k W[k, n] · x[b, k]`, W dequantised as its format says (`w = (q − z) · s` for INT4), products and sums in at least FP32, no rounding |
//! | `gemv.row(w, x)` | `row_parallel` weight `[K/tp, N]`, sharded f16 `[B, K/tp]` → partial f32 `[B, N]` | the same over the rank's K-shard: partial sums of all N outputs |
//! | `gemv.rep(w, x)` | replicated weight, replicated f16 `[B, K]` → replicated f32 `[B, N]` | the same, not split |
//! | `a + b`, `add(a, b)` | same shape and dist → f32 | elementwise sum |
//! | `a * b`, `mul(a, b)` | same shape and dist, not partial → f32 | elementwise product (a product of partial sums is not a partial sum) |
//! | `silu(x)` | float, not partial → f32 | `x / (1 + e^(−x))` |
//! | `round_f16(x)` | f32 → f16 | round to nearest FP16, ties to even: the rounding point |
//! | `slice(x, start = S, len = L)` | `[B, F]` → `[B, L]` | feature columns `S .. S + L` (same dtype and dist) |
//! | `rmsnorm(x, w, eps = E)` | replicated float `[B, F]`, replicated f16 `[F]` → f32 | `y[b, i] = x[b, i] · w[i] / sqrt(mean_j x[b, j]² + E)`, E > 0; weights as given (Gemma's `1 + w` folded in at load) |
//! | `reduce.sum(x)`, `reduce.sumsq(x)`, `reduce.absmax(x)` | float `[B, F]` → f32 `[B, 1]` | `Σ x`, `Σ x²`, `max |x|` per row (only `sum` accepts a partial value) |
//! | `allreduce(x)` | partial float → replicated f32 | `Σ_r x_r` on every rank, summed in at least FP32; the lowering picks the protocol and owes the synchronisation (a peer's buffer is read only after the flag that publishes it) |
//! | `allreduce.int8(x, block = B)` | partial float → replicated f32 | compressed: each rank sends its partial as per-block absmax INT8 (`s = max|x_r| / 127`, `q = clamp(round(x_r / s), −127, 127)`); `y = Σ_r q_r · s_r` |
//! | `let (q, s) = quantize_int8(x, block = B)` | float `[B, F]` → i8 `[B, F]`, f32 `[B, F/B]` | the per-block absmax INT8 codes and scales above |
//! | `dequantize_int8(q, s, block = B)` | i8, f32 → f32 | `q · s` |
//! | `let (q, s) = quantize_int8.rne(x, block = B, clamp = C)` | f16 `[B, F]` → i8 `[B, F]`, f32 `[B, F/B]` | q8 activations, the rounding point spelled out: per block `m = max|x|`, `s = m / C` and `r = C / m` in f32, `q = clamp(rne(x · r), −C, C)` (the exact product, rounded half to even; 0 where `m = 0`); `C` in `1..=127` |
//! | `gemv_q8.col(w, q, s, block = B)` / `.row` / `.rep` | INT4 weight, i8 codes `[B, K]`, f32 scales `[B, K/B]` (dist as `gemv`'s x) → f32 | `y[b, n] = Σ_k W[k, n] · q[b, k] · s[b, k / B]`: the opted-in INT8-activation GEMV (`v_dot4_i32_i8` / `dp4a`) |
//!
//! ## What is checked, and where
//!
//! The macro reports, on the offending token and all at once: unknown ops, keywords and names
//! (with "did you mean"), wrong operand counts, missing or unknown attributes, duplicate
//! parameters, writing an input, reading an output before it is written, an output written twice
//! or never, a value used before its `let` or never used, and the IR's typing rules wherever the
//! tokens decide them: element types (a missing `round_f16`), distributions (a nonlinear op or a
//! store of partial sums without an allreduce, a `row_parallel` weight used by `gemv.col`, a norm
//! over one shard), literal shapes (an activation whose features are not the weight's K), literal
//! layouts (a group size or packing that does not divide a literal K or N, act-order with
//! `row_parallel`), and anything that needs a TP group in a kernel without `across`. Shapes and
//! attributes with the wrong Rust type are ordinary Rust type errors on your expression. What
//! depends on run-time values (a symbolic K against a group size, divisibility by `tp`) is caught
//! by [`ir::validate`].
//!
//! ## What a declaration generates
//!
//! - `fn NAME(params…) -> wavefuse::ir::Kernel`: builds the kernel through [`ir::Builder`] (which
//!   stays public for IR built by hand).
//! - `struct NameArgs<'a>`: one rank's arguments, one field per parameter, typed by element type,
//!   weight format and sharding, plus `peers` when the kernel has an allreduce; its
//!   `check(&kernel)` catches what only the built kernel knows. It implements
//!   [`host::KernelArgs`], which `wavefuse_harness::launch` takes to bind the arguments to a
//!   device (or the simulator), launch the generated kernel and write the outputs back. See
//!   [`host`].
//!
//! ```
//! # use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint};
//! # wavefuse::kernel! {
//! #     pub fn gemv_int4_allreduce_rmsnorm(tp: u32, batch: usize, k: usize, layout: GptqLayout)
//! #     across tp {
//! #         in w_down: gptq(layout)[k, 5120] row_parallel;
//! #         in x: f16[batch, k] col_parallel;
//! #         in residual: f16[batch, 5120];
//! #         in norm_w: f16[5120];
//! #         out residual_out: f16[batch, 5120];
//! #         out normed: f16[batch, 5120];
//! #         let partial = round_f16(gemv.row(w_down, x));
//! #         residual_out = round_f16(allreduce(partial) + residual);
//! #         normed = round_f16(rmsnorm(residual_out, norm_w, eps = 1e-6));
//! #     }
//! # }
//! use wavefuse::host::{ArgError, Gptq, Input, Output, Peers, RowParallel, f16};
//!
//! let (tp, rank, k) = (4, 1, 4352);
//! let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
//! let kernel = gemv_int4_allreduce_rmsnorm(tp, 1, k, layout);
//!
//! // This rank's shard of W_down, as the loader cut it (row-parallel: a K-shard).
//! let (qweight, scales, qzeros) =
//!     (vec![0i32; k / 8 * 5120], vec![f16::ZERO; k / 128 * 5120], vec![0i32; k / 128 * 640]);
//! let w_down = Gptq::<RowParallel>::new(layout, &qweight, &scales, &qzeros, None);
//! let (x, residual, norm_w) = (vec![f16::ZERO; k], vec![f16::ZERO; 5120], vec![f16::ONE; 5120]);
//! let (mut residual_out, mut normed) = (vec![f16::ZERO; 5120], vec![f16::ZERO; 5120]);
//!
//! let args = GemvInt4AllreduceRmsnormArgs {
//!     w_down,
//!     x: Input::new(&x),
//!     residual: Input::new(&residual),
//!     norm_w: Input::new(&norm_w),
//!     residual_out: Output::new(&mut residual_out),
//!     normed: Output::new(&mut normed),
//!     // Every rank's exchange buffer, indexed by rank; `Peers` orders them by the one rule.
//!     peers: Peers::new(rank, &[0x1000, 0x2000, 0x3000, 0x4000])?,
//! };
//! args.check(&kernel)?;
//! // Slot p holds rank p's buffer on every rank (`wavefuse::ir::peer_slot`).
//! assert_eq!(args.peers.slots(), [0x1000, 0x2000, 0x3000, 0x4000]);
//!
//! // The same arguments for the TP = 2 kernel: its K-shard is twice as long, and its group has
//! // two ranks. Caught before launch, not read out of bounds.
//! let tp2 = gemv_int4_allreduce_rmsnorm(2, 1, 2 * k, layout);
//! let err = args.check(&tp2).unwrap_err();
//! assert!(matches!(err, ArgError::Length { array: "qweight", .. }), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Binding a column-parallel shard (`Gptq<ColParallel>`) to `w_down`, or `f32` data to `x`, does
//! not compile.

#![deny(missing_docs)]

pub use wavefuse_dsl::{host, ir, kernel, peer_order};

#[doc(hidden)]
pub use wavefuse_dsl::__private;

#[cfg(feature = "pipeline")]
pub mod pipeline;
