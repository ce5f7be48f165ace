//! The generator: one seeded, valid op-level kernel, built through the IR's [`Builder`].
//!
//! A kernel is drawn as a *skeleton* the lowering is meant to handle — a front (a group of GEMVs
//! sharing one activation, a partial-sum input, or plain inputs), elementwise ops with fresh
//! inputs, an optional allreduce (plain or INT8), a post-allreduce stage, an optional RMSNorm,
//! slices fanned out to several outputs — and, with small probabilities, *mutations* that step
//! outside what the lowering supports today (a computed GEMV activation, a second allreduce or
//! norm, a reduction, a quantise/dequantise pair, mixed column ranges, AWQ or act-order weights,
//! bf16 data …), so that every refusal path runs too. Every choice respects the validator's typing
//! rules (DESIGN.md §2, §5.6, §5.7), so every kernel validates; one that does not is a generator
//! bug, which [`super::fuzz`] counts separately.
//!
//! Shapes are small (features ≤ 160, ≤ 64 past batch 16; K ≤ 256; batch ≤ 64, mostly ≤ 8) so that one simulated run takes
//! milliseconds, and include odd widths, tails shorter than a tile, per-channel groups and
//! symmetric GPTQ weights with N not a multiple of 8 (which the IR allows and the lowering
//! refuses).

use std::collections::BTreeSet;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wavefuse::ir::ops::{OpKind, Parallelism, ReduceOp};
use wavefuse::ir::{
    AwqLayout, BufferDecl, Builder, Dist, GptqLayout, GroupSize, IndexSpace, Kernel, MemorySpace,
    ScalarType, Sharding, Tensor, Value, Weight, WeightFormat, ZeroPoint,
};

/// One generated kernel and the features it exercises (for coverage counts).
#[derive(Clone, Debug)]
pub struct GenKernel {
    /// The op-level kernel (valid by construction).
    pub kernel: Kernel,
    /// Tags of the skeleton parts and mutations drawn, sorted.
    pub tags: BTreeSet<&'static str>,
}

/// Generate the kernel of `seed`.
pub fn generate(seed: u64) -> GenKernel {
    let mut g = Gen::new(seed);
    g.kernel();
    g.ensure_output();
    GenKernel {
        kernel: g.b.finish(),
        tags: g.tags,
    }
}

/// A value with the type the validator will infer for it.
#[derive(Clone, Debug)]
struct Val {
    v: Value,
    dtype: ScalarType,
    shape: Vec<usize>,
    dist: Dist,
    /// An FP16 rounding lies upstream: the device's FP32 arithmetic before it may flip a rounding
    /// by one ulp, which an FP32 output's tolerance (1e-5) cannot absorb, so such values are only
    /// stored as FP16 (tolerance 1e-3, `sim::tolerance`).
    rounded: bool,
    /// Computed from loaded inputs only: the lowering gives it no column position of its own
    /// (`plan.rs`, `View::Free`), so a slice of it stored alone is a second root width.
    free: bool,
    /// Computed from a column slice (its columns are not the root's from 0).
    sliced: bool,
}

impl Val {
    /// A value with a column position of its own (a GEMV, allreduce or norm result).
    fn rooted(mut self) -> Val {
        self.free = false;
        self
    }

    fn features(&self) -> usize {
        *self.shape.last().expect("values have an axis")
    }
}

/// Names that are not plain identifiers or that collide with keywords of the IR or of C++: the
/// printer must quote what is not bare and the parser read it back.
const ODD_NAMES: [&str; 10] = [
    "float", "input", "kernel", "a b", "1st", "ünï", "__x", "_", "tp", "x\"y",
];

struct Gen {
    rng: ChaCha8Rng,
    b: Builder,
    tp: u32,
    batch: usize,
    names: BTreeSet<String>,
    counter: usize,
    stores: usize,
    tags: BTreeSet<&'static str>,
    /// Values computed so far (no slices): operands that several ops read (fan-out).
    pool: Vec<Val>,
}

impl Gen {
    fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let tp = [1, 1, 2, 2, 4, 4, 8][rng.random_range(0..7)];
        // Batch 1–64: mostly the decode batches 1–8, one in nine past 8 (speculative
        // verification and batched serving, issue #40), where a kernel's LDS may outgrow the
        // workgroup and the lowering refuses it (a refusal, not a finding), and where the dot2
        // path goes in batch tiles (`schedules.rs`). Past batch 16 the features are fewer
        // (`Gen::features`), so that a simulated run costs about what one at batch 8 does.
        let batch = match [1, 1, 1, 2, 3, 4, 5, 8, 0][rng.random_range(0..9)] {
            0 => rng.random_range(9..=64),
            b => b,
        };
        let name = if rng.random_bool(0.03) {
            ODD_NAMES[rng.random_range(0..ODD_NAMES.len())]
        } else {
            "fuzz"
        };
        Gen {
            rng,
            b: Builder::new(name, tp),
            tp,
            batch,
            names: BTreeSet::new(),
            counter: 0,
            stores: 0,
            tags: if batch > 8 {
                BTreeSet::from(["batch 9–64"])
            } else {
                BTreeSet::new()
            },
            pool: Vec::new(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.random_range(0..xs.len())]
    }

    /// A mutation with probability `p`, tagged when drawn.
    fn mutation(&mut self, p: f64, tag: &'static str) -> bool {
        let hit = self.chance(p);
        if hit {
            self.tags.insert(tag);
        }
        hit
    }

    fn fresh_name(&mut self, prefix: &str) -> String {
        self.counter += 1;
        let mut name = if self.rng.random_bool(0.03) {
            self.pick(&ODD_NAMES).to_owned()
        } else {
            format!("{prefix}{}", self.counter)
        };
        while self.names.contains(&name) {
            name = format!("{name}_{}", self.counter);
        }
        self.names.insert(name.clone());
        name
    }

    fn sharding(&self, dist: Dist) -> Sharding {
        match dist {
            Dist::Replicated => Sharding::Replicated,
            Dist::Sharded => Sharding::ColumnParallel { tp: self.tp },
            Dist::Partial => Sharding::Partial { tp: self.tp },
        }
    }

    /// A tensor declaration of per-rank `shape`; column-parallel ones sometimes in the global
    /// index space (the declared shape is then the whole vector).
    fn tensor_decl(
        &mut self,
        output: bool,
        dtype: ScalarType,
        shape: &[usize],
        dist: Dist,
    ) -> BufferDecl {
        let sharding = self.sharding(dist);
        let name = self.fresh_name(if output { "out" } else { "in" });
        let global = dist == Dist::Sharded && self.chance(0.2);
        let mut shape = shape.to_vec();
        if global {
            *shape.last_mut().expect("an axis") *= self.tp as usize;
        }
        let t = Tensor { dtype, shape };
        let d = if output {
            BufferDecl::output(&name, t, sharding)
        } else {
            BufferDecl::input(&name, t, sharding)
        };
        let d = if global {
            self.tags.insert("index=global");
            d.index_space(IndexSpace::Global)
        } else {
            d
        };
        if self.chance(0.05) {
            self.tags.insert("host-visible buffer");
            d.space(MemorySpace::HostVisible)
        } else {
            d
        }
    }

    /// Load a fresh input.
    fn input(&mut self, dtype: ScalarType, shape: Vec<usize>, dist: Dist) -> Val {
        let d = self.tensor_decl(false, dtype, &shape, dist);
        let buf = self.b.param(d);
        let x = Val {
            v: self.b.load(buf),
            dtype,
            shape,
            dist,
            rounded: false,
            free: true,
            sliced: false,
        };
        self.pool.push(x.clone());
        x
    }

    /// The other operand of a binary op on `x`: mostly a fresh input, sometimes an earlier value
    /// of the same type (a value with several consumers, possibly from an earlier phase), or a
    /// small computation on a fresh input.
    fn operand(&mut self, x: &Val, mul: bool) -> Val {
        let reusable: Vec<Val> = self
            .pool
            .iter()
            .filter(|p| {
                p.v != x.v
                    && p.shape == x.shape
                    && p.dist == x.dist
                    && !p.sliced
                    && !(mul && p.dist == Dist::Partial)
            })
            .cloned()
            .collect();
        if !reusable.is_empty() && self.chance(0.3) {
            self.tags.insert("value reused");
            return reusable[self.rng.random_range(0..reusable.len())].clone();
        }
        let y = self.like(x);
        if x.dist != Dist::Partial && self.chance(0.15) {
            self.tags.insert("computed operand");
            return self.silu(&y);
        }
        y
    }

    /// A fresh input shaped and distributed like `x` (FP16 mostly, sometimes FP32).
    fn like(&mut self, x: &Val) -> Val {
        let dtype = if self.chance(0.8) {
            ScalarType::F16
        } else {
            self.tags.insert("f32 input");
            ScalarType::F32
        };
        self.input(dtype, x.shape.clone(), x.dist)
    }

    fn derived(&self, v: Value, dtype: ScalarType, x: &Val, rounded: bool) -> Val {
        Val {
            v,
            dtype,
            shape: x.shape.clone(),
            dist: x.dist,
            rounded,
            free: x.free,
            sliced: x.sliced,
        }
    }

    fn round(&mut self, x: &Val) -> Val {
        if x.dtype == ScalarType::F16 {
            return x.clone();
        }
        let v = self.b.round_f16(x.v);
        let y = self.derived(v, ScalarType::F16, x, true);
        if !y.sliced {
            self.pool.push(y.clone());
        }
        y
    }

    fn silu(&mut self, x: &Val) -> Val {
        debug_assert_ne!(x.dist, Dist::Partial);
        let v = self.b.silu(x.v);
        self.derived(v, ScalarType::F32, x, x.rounded)
    }

    fn add(&mut self, a: &Val, b: &Val) -> Val {
        let v = self.b.add(a.v, b.v);
        let mut y = self.derived(v, ScalarType::F32, a, a.rounded || b.rounded);
        y.free = a.free && b.free;
        y.sliced = a.sliced || b.sliced;
        self.pool.push(y.clone());
        y
    }

    fn mul(&mut self, a: &Val, b: &Val) -> Val {
        debug_assert!(a.dist != Dist::Partial && b.dist != Dist::Partial);
        let v = self.b.mul(a.v, b.v);
        let mut y = self.derived(v, ScalarType::F32, a, a.rounded || b.rounded);
        y.free = a.free && b.free;
        y.sliced = a.sliced || b.sliced;
        self.pool.push(y.clone());
        y
    }

    fn slice(&mut self, x: &Val, start: usize, len: usize) -> Val {
        let v = self.b.slice(x.v, start, len);
        let mut s = x.clone();
        s.v = v;
        s.sliced = true;
        *s.shape.last_mut().expect("an axis") = len;
        s
    }

    /// Store `x` into a fresh output: FP16 (rounding first when needed) or, for an unrounded
    /// FP32 value, sometimes FP32.
    fn store(&mut self, x: &Val) {
        let x = if x.dtype == ScalarType::F32 && !x.rounded && self.chance(0.25) {
            self.tags.insert("f32 output");
            x.clone()
        } else {
            self.round(x)
        };
        let copies = if self.chance(0.05) {
            self.tags.insert("one value, two outputs");
            2
        } else {
            1
        };
        for _ in 0..copies {
            let d = self.tensor_decl(true, x.dtype, &x.shape, x.dist);
            let buf = self.b.param(d);
            self.b.store(x.v, buf);
            self.stores += 1;
        }
    }

    /// Up to `max` random elementwise ops on `x`, each with a fresh input where it needs one.
    fn chain(&mut self, mut x: Val, max: usize) -> Val {
        let n = self.rng.random_range(0..=max);
        for _ in 0..n {
            let partial = x.dist == Dist::Partial;
            x = match self.rng.random_range(0..5) {
                0 if !partial => {
                    self.tags.insert("silu");
                    self.silu(&x)
                }
                1 if !partial => {
                    self.tags.insert("mul");
                    let y = self.operand(&x, true);
                    self.mul(&x, &y)
                }
                2 if x.dtype == ScalarType::F32 => {
                    self.tags.insert("round_f16 mid-chain");
                    self.round(&x)
                }
                3 if !partial && self.chance(0.3) => {
                    self.tags.insert("square");
                    self.mul(&x, &x)
                }
                _ => {
                    self.tags.insert("add");
                    let y = self.operand(&x, false);
                    self.add(&x, &y)
                }
            };
        }
        x
    }

    /// Store some column slices of `x` (each possibly transformed): the Q/K/V pattern.
    fn fan_out(&mut self, x: &Val) {
        let f = x.features();
        // Slices of a free value are mostly refused (another root width): rarely.
        if f < 2 || (x.free && !self.chance(0.2)) {
            return;
        }
        self.tags.insert("slice fan-out");
        let parts = self.rng.random_range(2..=3.min(f));
        let mut cuts: Vec<usize> = (0..parts - 1)
            .map(|_| self.rng.random_range(1..f))
            .collect();
        cuts.push(0);
        cuts.push(f);
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            // Sometimes leave a range out: not every column needs a consumer.
            if self.chance(0.15) {
                continue;
            }
            let s = self.slice(x, w[0], w[1] - w[0]);
            let s = self.chain(s, 1);
            self.store(&s);
        }
    }

    /// Features of a value: up to 160, or up to 64 past batch 16 (each batch row is simulated).
    fn features(&mut self) -> usize {
        let (any, tiles) = if self.batch > 16 { (64, 2) } else { (160, 4) };
        if self.chance(0.5) {
            self.rng.random_range(1..=any)
        } else {
            32 * self.rng.random_range(1..=tiles)
        }
    }

    fn kernel(&mut self) {
        let main = match self.rng.random_range(0..100) {
            0..55 => self.gemv_front(),
            55..80 => self.partial_front(),
            80..92 => self.elementwise_front(),
            _ => {
                self.tags.insert("norm front");
                let n = self.features();
                self.input(ScalarType::F16, vec![self.batch, n], Dist::Replicated)
            }
        };
        let main = self.chain(main, 2);
        if self.chance(0.25) {
            self.store(&main);
        }
        if self.chance(0.15) {
            self.fan_out(&main);
        }
        let main = if main.dist == Dist::Partial {
            self.exchange(main)
        } else {
            Some(main)
        };
        let Some(main) = main else {
            self.finish_mutations(None);
            return;
        };
        let main = self.post(main);
        self.finish_mutations(Some(&main));
        self.store(&main);
    }

    /// Every kernel has an output (the validator's rule): without one, copy an input.
    fn ensure_output(&mut self) {
        if self.stores == 0 {
            let y = self.input(ScalarType::F16, vec![self.batch, 8], Dist::Replicated);
            self.store(&y);
        }
    }

    /// A group of GEMVs sharing one activation, combined into one value.
    fn gemv_front(&mut self) -> Val {
        let parallel = self.pick(&[
            Parallelism::Replicated,
            Parallelism::Column,
            Parallelism::Column,
            Parallelism::Row,
            Parallelism::Row,
        ]);
        let (format, k, n) = self.weight_shape(parallel);
        let x_dist = match parallel {
            Parallelism::Row => Dist::Sharded,
            _ => Dist::Replicated,
        };
        self.tags.insert(match parallel {
            Parallelism::Replicated => "gemv.rep",
            Parallelism::Column => "gemv.col",
            Parallelism::Row => "gemv.row",
        });
        let x = self.activation(k, x_dist);
        let m = self.pick(&[1, 1, 1, 2, 2, 3]);
        let ys: Vec<Val> = (0..m)
            .map(|_| self.gemv(format, k, n, parallel, &x))
            .collect();
        if m > 1 {
            self.tags.insert("multi-gemv");
        }
        let mut main = ys[0].clone();
        for y in &ys[1..] {
            main = if main.dist == Dist::Partial || self.chance(0.4) {
                self.add(&main, y)
            } else {
                self.tags.insert("silu(gate)*up");
                let s = self.silu(&main);
                self.mul(&s, y)
            };
        }
        if self.mutation(0.02, "gemvs with different activations") {
            let x2 = self.activation(k, x_dist);
            let y2 = self.gemv(format, k, n, parallel, &x2);
            main = self.add(&main, &y2);
        }
        if main.dist != Dist::Partial && self.chance(0.12) {
            main = self.second_stage(format, n, main);
        }
        main
    }

    /// A GEMV of the group's (rounded) result: a second GEMV stage behind a grid barrier
    /// (`codegen/src/lower/stages.rs`), with a weight of the same format, K = the first group's N.
    /// Left out (the value returned as is) where that format cannot have this K.
    fn second_stage(&mut self, format: WeightFormat, k: usize, x: Val) -> Val {
        let n = match format {
            WeightFormat::F16 => self.rng.random_range(1..=64),
            WeightFormat::Gptq(l) if k % 8 == 0 && k % l.group.rows(k).max(1) == 0 => {
                8 * self.rng.random_range(1..=12)
            }
            _ => return x,
        };
        let parallel = match x.dist {
            Dist::Sharded => Parallelism::Row,
            _ => self.pick(&[Parallelism::Replicated, Parallelism::Column]),
        };
        // Act-order weights cannot be row-parallel (the validator says why; `weight_shape`
        // keeps them off the first stage's row GEMVs): the second stage of a column-parallel
        // act-order group takes the same layout without `g_idx`.
        let format = match format {
            WeightFormat::Gptq(mut l) if l.act_order && parallel == Parallelism::Row => {
                l.act_order = false;
                WeightFormat::Gptq(l)
            }
            f => f,
        };
        self.tags.insert("second GEMV stage");
        let a = self.round(&x);
        self.gemv(format, k, n, parallel, &a)
    }

    /// The GEMV activation `[B, K]`: a loaded input, or (mutation: a prologue) computed.
    fn activation(&mut self, k: usize, dist: Dist) -> Val {
        if !self.mutation(0.05, "computed activation (prologue)") {
            return self.input(ScalarType::F16, vec![self.batch, k], dist);
        }
        let x = self.input(ScalarType::F16, vec![self.batch, k], dist);
        let y = if dist == Dist::Replicated && self.chance(0.5) {
            let w = self.input(ScalarType::F16, vec![k], Dist::Replicated);
            let v = self.b.rmsnorm(x.v, w.v, 1e-6);
            self.derived(v, ScalarType::F32, &x, false)
        } else {
            self.silu(&x)
        };
        self.round(&y)
    }

    /// A GEMV with a fresh weight.
    fn gemv(
        &mut self,
        format: WeightFormat,
        k: usize,
        n: usize,
        parallel: Parallelism,
        x: &Val,
    ) -> Val {
        let sharding = match parallel {
            Parallelism::Replicated => Sharding::Replicated,
            Parallelism::Column => Sharding::ColumnParallel { tp: self.tp },
            Parallelism::Row => Sharding::RowParallel { tp: self.tp },
        };
        let name = self.fresh_name("w");
        let global = parallel != Parallelism::Replicated && self.chance(0.2);
        let tp = self.tp as usize;
        let w = match (global, parallel) {
            (true, Parallelism::Column) => Weight {
                format,
                k,
                n: n * tp,
            },
            (true, _) => Weight {
                format,
                k: k * tp,
                n,
            },
            (false, _) => Weight { format, k, n },
        };
        let mut d = BufferDecl::input(&name, w, sharding);
        if global {
            self.tags.insert("index=global");
            d = d.index_space(IndexSpace::Global);
        }
        let buf = self.b.param(d);
        let v = self.b.gemv(buf, x.v, parallel);
        let (_, dist) = parallel.dists();
        let y = Val {
            v,
            dtype: ScalarType::F32,
            shape: vec![self.batch, n],
            dist,
            rounded: x.rounded,
            free: false,
            sliced: false,
        };
        self.pool.push(y.clone());
        y
    }

    /// A weight format and per-rank `(K, N)` the validator accepts.
    fn weight_shape(&mut self, parallel: Parallelism) -> (WeightFormat, usize, usize) {
        let r = self.rng.random_range(0..100);
        if r < 35 {
            self.tags.insert("f16 weight");
            let k = if self.chance(0.8) {
                self.pick(&[8, 16, 24, 32, 48, 64, 96, 128])
            } else {
                self.tags.insert("f16 odd K");
                self.pick(&[2, 4, 12, 20, 36, 100])
            };
            let n = self.rng.random_range(1..=64);
            return (WeightFormat::F16, k, n);
        }
        let group = self.pick(&[
            GroupSize::Rows(32),
            GroupSize::Rows(32),
            GroupSize::Rows(64),
            GroupSize::Rows(128),
            GroupSize::Rows(128),
            GroupSize::PerChannel,
        ]);
        let k = match group {
            GroupSize::Rows(g) => g as usize * self.pick(&[1, 1, 2]),
            GroupSize::PerChannel => {
                self.tags.insert("gptq per-channel");
                self.pick(&[16, 32, 64, 96, 136])
            }
        };
        let zero = self.pick(&[ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric]);
        let mut n: usize = 8 * self.rng.random_range(1..=12);
        if zero == ZeroPoint::Symmetric && self.mutation(0.15, "gptq sym N not a multiple of 8") {
            n += self.rng.random_range(1..8);
        }
        let mut layout = GptqLayout::new(group, zero);
        let format = match r {
            96..98 if parallel != Parallelism::Row => {
                // Act-order weights cannot be row-parallel (the validator says why).
                self.tags.insert("gptq act-order");
                layout.act_order = true;
                WeightFormat::Gptq(layout)
            }
            94..96 => {
                self.tags.insert("AWQ weight");
                n = n.next_multiple_of(8);
                WeightFormat::Awq(AwqLayout {
                    group,
                    scale: ScalarType::F16,
                })
            }
            0..98 => {
                self.tags.insert("gptq weight");
                WeightFormat::Gptq(layout)
            }
            98 => {
                self.tags.insert("gptq f32 scales");
                layout.scale = ScalarType::F32;
                WeightFormat::Gptq(layout)
            }
            _ => {
                self.tags.insert("gptq bf16 scales");
                layout.scale = ScalarType::Bf16;
                WeightFormat::Gptq(layout)
            }
        };
        (format, k, n)
    }

    /// Partial sums loaded from an input (the allreduce kernels' front).
    fn partial_front(&mut self) -> Val {
        self.tags.insert("partial input");
        let int8 = self.tp > 1 && self.chance(0.3);
        let n = if int8 {
            self.pick(&[64, 128, 192])
        } else {
            self.features()
        };
        let dtype = if self.chance(0.75) {
            ScalarType::F16
        } else {
            ScalarType::F32
        };
        let x = self.input(dtype, vec![self.batch, n], Dist::Partial);
        if self.chance(0.2) {
            self.tags.insert("partial + partial");
            let y = self.like(&x);
            return self.add(&x, &y);
        }
        x
    }

    /// Replicated or sharded inputs only.
    fn elementwise_front(&mut self) -> Val {
        self.tags.insert("elementwise only");
        let n = self.features();
        let dist = if self.chance(0.5) {
            Dist::Replicated
        } else {
            Dist::Sharded
        };
        let shape = if self.mutation(0.15, "1-D values") {
            vec![n]
        } else {
            vec![self.batch, n]
        };
        self.input(ScalarType::F16, shape, dist)
    }

    /// Allreduce a partial value (plain or INT8; sometimes rounded first), or keep it partial.
    fn exchange(&mut self, x: Val) -> Option<Val> {
        if self.chance(0.1) {
            self.tags.insert("partial output only");
            self.store(&x);
            return None;
        }
        let x = if self.chance(0.5) { self.round(&x) } else { x };
        let f = x.features();
        let blocks: Vec<usize> = [32, 64, 128]
            .into_iter()
            .filter(|b| f % b == 0 && f >= 64)
            .collect();
        let v = if !blocks.is_empty() && self.chance(0.35) {
            self.tags.insert("allreduce.int8");
            let block = self.pick(&blocks);
            self.b.allreduce_int8(x.v, block)
        } else {
            self.tags.insert("allreduce");
            self.b.allreduce(x.v)
        };
        let mut y = Val {
            v,
            dtype: ScalarType::F32,
            shape: x.shape.clone(),
            dist: Dist::Replicated,
            rounded: x.rounded,
            free: false,
            sliced: false,
        };
        self.pool.push(y.clone());
        if self.mutation(0.03, "second allreduce") {
            let p = self.input(ScalarType::F16, x.shape.clone(), Dist::Partial);
            let v = self.b.allreduce(p.v);
            let z = self.derived(v, ScalarType::F32, &y, false);
            y = self.add(&y, &z);
        }
        Some(y)
    }

    /// The post-allreduce stage: residual add, rounding, intermediate store, then an optional
    /// RMSNorm and what follows it.
    fn post(&mut self, x: Val) -> Val {
        let mut x = x;
        if self.chance(0.6) {
            self.tags.insert("residual add");
            let r = self.like(&x);
            x = self.add(&x, &r);
        }
        x = self.chain(x, 1);
        if self.chance(0.5) {
            x = self.round(&x);
        }
        let norm =
            x.dist == Dist::Replicated && (self.tags.contains("norm front") || self.chance(0.45));
        if !norm {
            return x;
        }
        if self.chance(0.6) {
            self.store(&x);
        }
        let x = if self.mutation(0.03, "rmsnorm over a slice") && x.features() > 1 {
            let len = self.rng.random_range(1..x.features());
            self.slice(&x, 0, len)
        } else {
            x
        };
        let y = self.rmsnorm(&x);
        let y = if self.mutation(0.03, "second rmsnorm") {
            self.rmsnorm(&y)
        } else {
            y
        };
        self.chain(y, 1)
    }

    fn rmsnorm(&mut self, x: &Val) -> Val {
        self.tags.insert("rmsnorm");
        let f = x.features();
        let w = if self.mutation(0.02, "computed rmsnorm weights") {
            let w = self.input(ScalarType::F16, vec![f], Dist::Replicated);
            let s = self.silu(&w);
            self.round(&s)
        } else {
            self.input(ScalarType::F16, vec![f], Dist::Replicated)
        };
        // Any positive finite eps; printed with `{:e}`, which the parser reads back exactly.
        let eps = 10f64.powf(self.rng.random_range(-7.0..-1.0));
        let v = self.b.rmsnorm(x.v, w.v, eps);
        let y = self.derived(v, ScalarType::F32, x, x.rounded).rooted();
        self.pool.push(y.clone());
        y
    }

    /// Mutations that add a side output: reductions, an INT8 round trip outside an allreduce,
    /// mixed column ranges, another root width, bf16 data, a batch that differs.
    fn finish_mutations(&mut self, main: Option<&Val>) {
        if let Some(x) = main.filter(|x| x.dist == Dist::Replicated) {
            if self.mutation(0.02, "reduce") {
                let op = self.pick(&[ReduceOp::Sum, ReduceOp::SumSquares, ReduceOp::AbsMax]);
                let v = self.b.reduce(op, x.v);
                let mut r = self.derived(v, ScalarType::F32, x, x.rounded);
                *r.shape.last_mut().expect("an axis") = 1;
                self.store(&r);
            }
            if self.mutation(0.02, "quantize_int8 outside an allreduce") {
                let f = x.features();
                let block = (1..=f).rev().find(|b| f % b == 0 && *b <= 32).unwrap_or(1);
                let (q, s) = self.b.quantize_int8(x.v, block);
                let v = self.b.dequantize_int8(q, s, block);
                let d = self.derived(v, ScalarType::F32, x, x.rounded);
                self.store(&d);
            }
        }
        if let Some(x) = main.filter(|x| x.features() >= 2) {
            if self.mutation(0.03, "mixed column ranges") {
                let h = x.features() / 2;
                let a = self.slice(x, 0, h);
                let b = self.slice(x, x.features() - h, h);
                let s = self.add(&a, &b);
                self.store(&s);
            }
        }
        if self.mutation(0.02, "a second root width") {
            let n = self.rng.random_range(1..=40) + 160;
            let y = self.input(ScalarType::F16, vec![self.batch, n], Dist::Replicated);
            self.store(&y);
        }
        if let Some(x) = main {
            if self.mutation(0.02, "bf16 input") {
                let y = self.input(ScalarType::Bf16, x.shape.clone(), x.dist);
                let s = self.add(x, &y);
                self.store(&s);
            }
        }
        if self.mutation(0.01, "a second batch size") {
            let y = self.input(ScalarType::F16, vec![self.batch + 1, 8], Dist::Replicated);
            self.store(&y);
        }
    }
}

/// Whether `k` holds an op of this kind (for coverage counts in tests).
pub fn has_op(k: &Kernel, pred: impl Fn(&OpKind) -> bool) -> bool {
    k.ops().any(|(_, o)| pred(&o.kind))
}
