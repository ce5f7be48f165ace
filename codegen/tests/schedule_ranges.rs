//! Schedule overrides over every field's range (issue 21, defects 1 and 2): every field of
//! [`Schedule`] set to 0, 1, small values, its documented maximum and beyond, and `u32::MAX`, on
//! every kernel of the set and both targets, from several base schedules. Each combination either
//! lowers — and then, for the small shapes, matches the f64 oracle in the simulator — or is
//! refused with a [`LowerError::Schedule`] message (or, for split-K where the lowering has none
//! yet, a [`LowerError::Unsupported`] one naming `k_split`). No panic, no abort, and every lowering takes
//! bounded time (and so bounded memory).

mod lower_kernels;

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::reference::{HostData, HostTensor, PackedInt4, RankInputs};
use wavefuse_codegen::ir::{BufferType, Kernel, ScalarType, Sharding, WeightFormat, ZeroPoint};
use wavefuse_codegen::lower::{LowerError, Schedule, lower};
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::sim::{SimOptions, simulate};

use lower_kernels::{NAMES, Shapes, build};

/// The numeric fields and the values each is tried with: 0, 1, small, the documented limits
/// and one past them, and huge.
const NUMERIC: [&str; 9] = [
    "workgroup_size",
    "columns_per_workgroup",
    "threads_per_column",
    "k_split",
    "words_per_iteration",
    "accumulators",
    "k_unit_words",
    "pipeline_depth",
    "async_stages",
];
const VALUES: [u32; 22] = [
    0,
    1,
    2,
    3,
    4,
    5,
    8,
    16,
    17,
    32,
    64,
    100,
    1000,
    1024,
    1025,
    4096,
    16385,
    65536,
    100_000,
    1 << 31,
    u32::MAX - 1,
    u32::MAX,
];
/// The other fields, with every legal value and some illegal ones.
const OTHER: [(&str, &[&str]); 7] = [
    ("protocol", &["pull", "push", "bogus", "7"]),
    ("nibble_decode", &["convert", "magic", ""]),
    ("int4_scaling", &["per_weight", "per_unit", "per_lane"]),
    ("int4_dot", &["fma", "mma", "dot2", "true"]),
    ("stream_weights", &["true", "false", "1"]),
    ("x_in_lds", &["true", "false", "yes"]),
    ("mma_decode", &["shift", "fma", "FMA"]),
];
/// Overrides that are not numbers of the field's type.
const MALFORMED: [&str; 6] = [
    "accumulators=-1",
    "k_split=4294967296",
    "workgroup_size=1e3",
    "k_unit_words=",
    "columns_per_workgroup=0x20",
    "nonsense",
];

/// One lowering: the slowest the sweep accepts (in an optimised-dependency debug build the
/// largest schedules the checks admit lower in a few milliseconds).
const SLOWEST: Duration = Duration::from_secs(2);

/// Lanes per rank above which an accepted schedule is only lowered, not simulated (one column
/// per workgroup gives hundreds of workgroups: seconds per run).
const SIM_LANES: u64 = 8192;

fn small(tp: u32, batch: usize) -> Shapes {
    Shapes {
        hidden: 256,
        ffn: 512,
        q_gate: 384,
        kv: 128,
        head_dim: 32,
        ..Shapes::qwen27b(tp, batch)
    }
}

/// Base schedules the single-field overrides start from: the target's default, the other
/// target's default, and on gfx906 the dot2 path, on sm_90 the pipelined tensor-core path.
fn bases(arch: Arch, k: &Kernel) -> Vec<Schedule> {
    let other = match arch {
        Arch::Gfx906 => Arch::Sm90,
        Arch::Sm90 => Arch::Gfx906,
    };
    let d = Schedule::default_for(arch, k);
    let extra = match arch {
        Arch::Gfx906 => "int4_dot=dot2",
        Arch::Sm90 => "pipeline_depth=2",
    };
    vec![
        d.clone(),
        Schedule::default_for(other, k),
        d.with_overrides(extra).expect("a well-formed override"),
    ]
}

enum Outcome {
    Lowered(Box<LoweredKernel>),
    Refused,
}

/// Apply `spec` to `base` and lower; panics (failing the test) on anything but a lowered kernel
/// or a schedule refusal with a message.
fn attempt(k: &Kernel, arch: Arch, base: &Schedule, spec: &str) -> Outcome {
    let what = format!("{} tp={} @{arch} `{spec}`", k.name(), k.tp());
    let s = match base.clone().with_overrides(spec) {
        Ok(s) => s,
        Err(LowerError::Schedule(m)) if !m.is_empty() => return Outcome::Refused,
        Err(e) => panic!("{what}: override refused with a non-schedule error: {e:?}"),
    };
    let t0 = Instant::now();
    let got = catch_unwind(AssertUnwindSafe(|| lower(k, arch, &s)));
    let took = t0.elapsed();
    assert!(took < SLOWEST, "{what}: lowering took {took:?}");
    match got {
        Err(_) => panic!("{what}: the lowering panicked"),
        Ok(Ok(lk)) => Outcome::Lowered(Box::new(lk)),
        Ok(Err(LowerError::Schedule(m))) => {
            assert!(!m.is_empty(), "{what}: an empty schedule message");
            Outcome::Refused
        }
        // A schedule the lowering has no implementation for yet (split-K of an FP16 GEMV) is
        // `Unsupported`, by design (`lower.rs`), naming the field.
        Ok(Err(LowerError::Unsupported(m))) if NUMERIC.iter().any(|f| m.starts_with(f)) => {
            Outcome::Refused
        }
        // A schedule whose grid cannot be co-resident (one column per workgroup of a kernel
        // with a grid barrier) is refused with the numbers.
        Ok(Err(LowerError::NotCoResident(n))) => {
            assert!(
                n.workgroups > n.cus * n.per_cu,
                "{what}: refused as not co-resident, but {n}"
            );
            Outcome::Refused
        }
        Ok(Err(e)) => panic!("{what}: refused with a non-schedule error: {e}"),
    }
}

/// Seeded inputs for one rank of `k` (dense tensors, FP16 and GPTQ weights); replicated inputs
/// are the same on every rank.
fn inputs(k: &Kernel, seed: u64) -> Vec<RankInputs> {
    let mut rng = Lcg(seed);
    let mut ranks: Vec<RankInputs> = Vec::new();
    for rank in 0..k.tp() as usize {
        let mut one = RankInputs::new();
        for b in k.inputs() {
            let d = k.buffer(b).unwrap();
            if rank > 0 && d.sharding == Sharding::Replicated {
                one.insert(b, ranks[0][&b].clone());
                continue;
            }
            let data = match d.local_type() {
                BufferType::Tensor(t) => {
                    let mean = if t.shape.len() == 1 { 1.0 } else { 0.0 };
                    let vals: Vec<f64> = (0..t.len()).map(|_| mean + 0.5 * rng.signed()).collect();
                    HostData::Tensor(HostTensor::rounded(ScalarType::F16, t.shape.clone(), vals))
                }
                BufferType::Weight(w) => match w.format {
                    WeightFormat::F16 => {
                        let vals: Vec<f64> = (0..w.k * w.n).map(|_| 0.05 * rng.signed()).collect();
                        HostData::F16Weight(
                            HostTensor::rounded(ScalarType::F16, vec![w.n * w.k], vals).data,
                        )
                    }
                    WeightFormat::Gptq(l) => {
                        let groups = w.k / l.group.rows(w.k);
                        let scales: Vec<f64> = (0..groups * w.n)
                            .map(|_| 0.002 + 0.005 * (rng.signed() + 1.0))
                            .collect();
                        HostData::Int4(PackedInt4 {
                            qweight: (0..w.k / 8 * w.n).map(|_| rng.word()).collect(),
                            scales: HostTensor::rounded(
                                ScalarType::F16,
                                vec![groups * w.n],
                                scales,
                            )
                            .data,
                            qzeros: if l.zero == ZeroPoint::Symmetric {
                                vec![]
                            } else {
                                (0..groups * w.n / 8).map(|_| rng.word()).collect()
                            },
                            g_idx: None,
                        })
                    }
                    WeightFormat::Awq(_) => unreachable!("the set has no AWQ weights"),
                },
            };
            one.insert(b, data);
        }
        ranks.push(one);
    }
    ranks
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 11
    }
    fn word(&mut self) -> i32 {
        (self.next() >> 8) as u32 as i32
    }
    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 42) as f64 * 2.0 - 1.0
    }
}

/// Simulate `lk` for two launches and require it to be clean and within tolerance.
fn matches_oracle(k: &Kernel, arch: Arch, lk: &LoweredKernel, spec: &str) {
    let launches = vec![inputs(k, 1), inputs(k, 2)];
    let rep = simulate(lk, k, &launches, &SimOptions::new(7))
        .unwrap_or_else(|e| panic!("{} @{arch} `{spec}`: {e}", k.name()));
    assert!(
        rep.is_clean() && rep.errors.iter().all(|e| e.passes()),
        "{} tp={} @{arch} `{spec}`: {:?}; worst rel L2 {:e}",
        k.name(),
        k.tp(),
        rep.findings
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>(),
        rep.max_rel_l2()
    );
}

/// Every override of one kernel from every base; returns (lowered, refused, simulated).
fn sweep_kernel(k: &Kernel, arch: Arch, simulate_values: &[u32]) -> (usize, usize, usize) {
    let (mut lowered, mut refused, mut simulated) = (0, 0, 0);
    // A schedule is simulated once, however many overrides give it.
    let mut seen = HashSet::new();
    for (bi, base) in bases(arch, k).iter().enumerate() {
        let mut specs: Vec<(String, bool)> = Vec::new();
        for field in NUMERIC {
            for v in VALUES {
                // Simulate accepted small values from the target's own default.
                specs.push((
                    format!("{field}={v}"),
                    bi == 0 && simulate_values.contains(&v),
                ));
            }
        }
        for (field, values) in OTHER {
            for v in values {
                specs.push((
                    format!("{field}={v}"),
                    bi == 0 && !simulate_values.is_empty(),
                ));
            }
        }
        specs.extend(MALFORMED.iter().map(|m| (m.to_string(), false)));
        for (spec, sim) in specs {
            match attempt(k, arch, base, &spec) {
                Outcome::Lowered(lk) => {
                    lowered += 1;
                    let s = base.clone().with_overrides(&spec).expect("it lowered");
                    let lanes = u64::from(lk.grid) * u64::from(lk.workgroup_size);
                    if sim && lanes <= SIM_LANES && seen.insert(s) {
                        matches_oracle(k, arch, &lk, &spec);
                        simulated += 1;
                    }
                }
                Outcome::Refused => refused += 1,
            }
        }
    }
    (lowered, refused, simulated)
}

fn sweep(arch: Arch) {
    let t0 = Instant::now();
    let (mut lowered, mut refused, mut simulated) = (0, 0, 0);
    let configs: [(Shapes, &[u32]); 3] = [
        // Small shapes, two ranks: the accepted small values run in the simulator.
        (small(2, 1), &[1, 2, 4]),
        // The model's shapes: lowering only.
        (Shapes::qwen27b(1, 1), &[]),
        (Shapes::qwen27b(4, 8), &[]),
    ];
    for (shapes, sim_values) in configs {
        for name in NAMES {
            let k = build(name, &shapes);
            let (l, r, s) = sweep_kernel(&k, arch, sim_values);
            lowered += l;
            refused += r;
            simulated += s;
        }
    }
    eprintln!(
        "{arch}: {lowered} lowered ({simulated} simulated against the oracle), {refused} refused, in {:?}",
        t0.elapsed()
    );
    // The sweep must exercise both outcomes and the simulator.
    assert!(lowered > 100 && refused > 100 && simulated > 80);
}

#[test]
fn every_schedule_field_over_its_range_lowers_or_is_refused_gfx906() {
    sweep(Arch::Gfx906);
}

#[test]
fn every_schedule_field_over_its_range_lowers_or_is_refused_sm90() {
    sweep(Arch::Sm90);
}

/// The two reported cases, by name: `k_unit_words = 0` on the sm_90 tensor-core INT4 path, and
/// an accumulator count far past any useful one.
#[test]
fn invalid_k_unit_words_zero_and_huge_accumulators_are_schedule_errors() {
    for name in ["gemv_int4", "gemv_int4_dual_silu", "gemv_int4_qkv"] {
        let k = build(name, &Shapes::qwen27b(1, 1));
        let s = Schedule::default_for(Arch::Sm90, &k)
            .with_overrides("k_unit_words=0")
            .unwrap();
        let e = lower(&k, Arch::Sm90, &s).unwrap_err();
        assert!(
            matches!(&e, LowerError::Schedule(m) if m.contains("k_unit_words")),
            "{name}: {e}"
        );
    }
    let k = build("gemv_f16", &Shapes::qwen27b(1, 1));
    for n in [17, 1000, 100_000, u32::MAX] {
        let s = Schedule::default_for(Arch::Gfx906, &k)
            .with_overrides(&format!("accumulators={n}"))
            .unwrap();
        let e = lower(&k, Arch::Gfx906, &s).unwrap_err();
        assert!(
            matches!(&e, LowerError::Schedule(m) if m.contains("accumulators")),
            "accumulators={n}: {e}"
        );
    }
}

/// Defect 13: the fields a kernel's lowering does not read are named, so an override of one can
/// be warned about.
#[test]
fn ignored_fields_name_what_the_chosen_path_does_not_read() {
    let shapes = Shapes::qwen27b(1, 1);
    let f16 = build("gemv_f16", &shapes);
    let ignored = Schedule::default_for(Arch::Sm90, &f16).ignored_fields(&f16);
    assert!(ignored.contains(&"x_in_lds") && ignored.contains(&"protocol"));
    assert!(!ignored.contains(&"accumulators"), "the FP16 GEMV reads it");
    let int4 = build("gemv_int4", &shapes);
    let mma = Schedule::default_for(Arch::Sm90, &int4);
    assert!(mma.ignored_fields(&int4).contains(&"accumulators"));
    assert!(!mma.ignored_fields(&int4).contains(&"x_in_lds"));
    // The tensor-core path stages in phases too (issue 40), only what it stages.
    assert!(mma.x_in_lds && !mma.ignored_fields(&int4).contains(&"x_phase_units"));
    let unstaged = mma.clone().with_overrides("x_in_lds=false").unwrap();
    assert!(unstaged.ignored_fields(&int4).contains(&"x_phase_units"));
    let dot2 = Schedule::default_for(Arch::Gfx906, &int4);
    // The gfx906 floor path stages FP16 activation pairs in LDS and decodes pairs per
    // `mma_decode`: both are read there.
    assert!(!dot2.ignored_fields(&int4).contains(&"x_in_lds"));
    assert!(!dot2.ignored_fields(&int4).contains(&"mma_decode"));
    let fma = dot2.clone().with_overrides("int4_dot=fma").unwrap();
    assert!(fma.ignored_fields(&int4).contains(&"x_in_lds"));
    assert!(!fma.ignored_fields(&int4).contains(&"accumulators"));
    let ar = build("allreduce_residual", &Shapes::qwen27b(4, 1));
    let ignored = Schedule::default_for(Arch::Sm90, &ar).ignored_fields(&ar);
    assert!(ignored.contains(&"k_unit_words") && !ignored.contains(&"protocol"));
}

/// What `ignored_fields` names is really not read: for every kernel kind's default on both
/// targets (and the FMA path on gfx906), overriding each field it names with another valid value
/// leaves the generated source unchanged (whatever lowers; a value the field refuses is skipped).
/// The warning "`x_in_lds` has no effect" was printed for the gfx906 dot2 path, whose code it
/// changes.
#[test]
fn fields_named_ignored_do_not_change_the_generated_code() {
    let values: &[(&str, &[&str])] = &[
        ("threads_per_column", &["2", "4", "8"]),
        ("words_per_iteration", &["1", "2", "4"]),
        ("accumulators", &["1", "2"]),
        ("k_unit_words", &["1", "2", "4"]),
        ("nibble_decode", &["convert", "magic"]),
        ("int4_scaling", &["per_weight", "per_unit"]),
        ("int4_dot", &["fma", "dot2", "mma"]),
        ("pipeline_depth", &["1", "2"]),
        ("stream_weights", &["false", "true"]),
        ("x_in_lds", &["false", "true"]),
        ("mma_decode", &["shift", "fma"]),
        ("protocol", &["pull", "push"]),
        ("reduction", &["slices", "serial"]),
    ];
    let source = |k: &Kernel, arch: Arch, s: &Schedule| {
        wavefuse_codegen::compile(k, arch, s)
            .ok()
            .map(|g| g.source.text)
    };
    let mut checked = 0;
    for name in ["gemv_f16", "gemv_int4", "allreduce_residual"] {
        let k = build(name, &Shapes::qwen27b(4, 1));
        for arch in Arch::ALL {
            let default = Schedule::default_for(arch, &k);
            let mut bases = vec![default.clone()];
            if arch == Arch::Gfx906 && name == "gemv_int4" {
                bases.push(default.clone().with_overrides("int4_dot=fma").unwrap());
            }
            for base in bases {
                let Some(want) = source(&k, arch, &base) else {
                    continue;
                };
                for field in base.ignored_fields(&k) {
                    let Some((_, vs)) = values.iter().find(|(f, _)| *f == field) else {
                        continue;
                    };
                    for v in *vs {
                        let Ok(s) = base.clone().with_overrides(&format!("{field}={v}")) else {
                            continue;
                        };
                        if let Some(got) = source(&k, arch, &s) {
                            assert_eq!(
                                got, want,
                                "{name}@{arch}: `{field}={v}` changes the code but is named ignored"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} overrides compared");
}
