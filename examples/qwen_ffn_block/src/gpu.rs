//! On an NVIDIA GPU (sm_90): the block at the model shapes, all four ranks on the one device (one
//! stream per rank, as `wavefuse gpu-suite` and `wavefuse ab` run TP > 1), for the generated and
//! the hand-written kernels.
//!
//! # Chaining
//! Each kernel is bound through the runtime's [`OpKernel`] (its own arrays for every input, the
//! synchronisation state in its [`KernelInstance`](wavefuse_runtime::KernelInstance)); then one FP16 array per rank is bound as
//! both the first kernel's output `y` and the second kernel's input `x`. Rank r's stream runs
//! rank r's first kernel, then its second: the stream order is the only dependency the block
//! needs, as the second kernel's cross-rank exchange has its own flags (DESIGN.md §5.3).
//!
//! # Timing
//! Event timing behind a gate ([`GroupTimer`]): the window opens on rank 0's stream once the host
//! has enqueued everything, every other rank's stream waits for its start, and it closes when the
//! last rank has finished, so it holds device time only, not the host's enqueue latency. Two
//! measurements, each repeated:
//! - one block per window, weights and inputs rotating over copies totalling ≥ 4 × L2 (the
//!   rotation of `wavefuse ab`), median of many windows;
//! - [`LAYERS`] blocks back to back in one window (the FFN stream of one token), each block on
//!   the next copy of the weights, so no block finds its weights in L2.
//!
//! Not a CUDA graph (the kernels would replay correctly in one: their synchronisation counts on
//! the device, DESIGN.md §5.4): the gate gives the same thing a graph is used for here —
//! launches running back to back without host gaps.

use std::time::Instant;

use wavefuse::ir::reference::{HostTensor, RankOutputs};
use wavefuse::ir::{BufferType, Kernel, ScalarType};
use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::{Abi, AbiKind, AbiPurpose};
use wavefuse_codegen::lowered::Ty;
use wavefuse_harness::ab::gpu::Rotation;
use wavefuse_harness::ab::handwritten::{Found, find_reference, reference_dir};
use wavefuse_harness::ab::report::Stats;
use wavefuse_harness::provenance::Provenance;
use wavefuse_harness::suite::{
    CaseSpec, Generated, Purpose, ShapeKind, Worst, artifact, compiler, generate,
};
use wavefuse_kernels::KernelId;
use wavefuse_runtime::device::CudaBuffer;
use wavefuse_runtime::exec::{self, OpKernel, OutputMetrics};
use wavefuse_runtime::timing::{self, GroupTimer};
use wavefuse_runtime::{
    Artifact, Cache, CudaDevice, Device, DeviceBuffer, Error as RtError, MemKind, RankGroup,
};

use crate::block::{Block, BlockData, DOWN_IN, GATE_UP_OUT, LAYERS, TOLERANCE, TP};

/// The block's two kernels at the model shapes, generated for sm_90.
pub struct Generation {
    /// `gemv_int4_dual_silu`.
    pub gate_up: Generated,
    /// `gemv_int4_allreduce_rmsnorm`.
    pub down: Generated,
}

impl Generation {
    /// Build, validate, lower and write both (the suite's path: same sources, same cache keys).
    pub fn new() -> Result<Generation, String> {
        let gen_one = |id| {
            let c = CaseSpec::of(id, TP, 1, ShapeKind::Model);
            generate(
                &c,
                Arch::Sm90,
                &wavefuse_harness::policy::SchedulePolicy::default(),
                wavefuse_harness::policy::Placement::SameDevice,
            )
            .map_err(|e| format!("{}: {e}", c.label()))
        };
        Ok(Generation {
            gate_up: gen_one(KernelId::GemvInt4DualSilu)?,
            down: gen_one(KernelId::GemvInt4AllreduceRmsnorm)?,
        })
    }

    /// The op-level kernels.
    pub fn block(&self) -> Block {
        Block {
            gate_up: self.gate_up.ir.clone(),
            down: self.down.ir.clone(),
        }
    }
}

/// One kernel ready to bind: its ABI description and compiled artifact.
pub struct Compiled {
    /// How it is bound and launched (generated or hand-written alike).
    pub abi: Abi,
    /// The cubin (or PTX).
    pub artifact: Artifact,
}

/// One version of the chain: both kernels compiled.
pub struct Version {
    /// `generated` or `hand-written`.
    pub label: &'static str,
    /// Where each kernel comes from.
    pub origin: String,
    /// `gemv_int4_dual_silu`.
    pub gate_up: Compiled,
    /// `gemv_int4_allreduce_rmsnorm`.
    pub down: Compiled,
}

/// Compile the generated kernels (through the cache).
pub fn generated(g: &Generation, cache: &Cache) -> Result<Version, String> {
    let compile = |x: &Generated| {
        let (artifact, _) =
            artifact(cache, x).map_err(|e| format!("compiling {}: {e}", x.lowered.name))?;
        Ok::<_, String>(Compiled {
            abi: x.abi.clone(),
            artifact,
        })
    };
    Ok(Version {
        label: "generated",
        origin: "wavefuse (DSL → lowering → CUDA, NVRTC)".into(),
        gate_up: compile(&g.gate_up)?,
        down: compile(&g.down)?,
    })
}

/// Find, check and compile the hand-written reference kernels (`kernels-gen/reference/cuda`) at
/// the same shapes, as `wavefuse ab` does.
pub fn handwritten(g: &Generation, cache: &Cache) -> Result<Version, String> {
    let dir = reference_dir(None);
    let mut origins = Vec::new();
    let mut compile = |x: &Generated| {
        let h = match find_reference(dir.as_deref(), &x.lowered, &x.ir) {
            Found::Hand(h) => h,
            Found::Absent(why) => return Err(why),
        };
        let problems = h.check(&x.lowered);
        if !problems.is_empty() {
            return Err(format!(
                "{}: ABI mismatch: {}",
                h.origin(),
                problems.join("; ")
            ));
        }
        let abi = h.launch_abi(TP);
        let req = h.request()?;
        // The reference kernels are compiled as `wavefuse ab` compiles them.
        let nvrtc = compiler(Arch::Sm90, Purpose::Run);
        let (artifact, _) = exec::artifact_for(cache, nvrtc.as_ref(), &req)
            .map_err(|e| format!("compiling {}: {e}", h.origin()))?;
        origins.push(h.origin());
        Ok(Compiled { abi, artifact })
    };
    let gate_up = compile(&g.gate_up)?;
    let down = compile(&g.down)?;
    Ok(Version {
        label: "hand-written",
        origin: origins.join(" + "),
        gate_up,
        down,
    })
}

/// Compile every kernel this example runs into the cache (`$WAVEFUSE_CACHE_DIR`): no GPU needed.
pub fn prebuild() -> Result<Vec<String>, String> {
    let g = Generation::new()?;
    let cache = Cache::from_env();
    let mut done = Vec::new();
    for v in [generated(&g, &cache)?, handwritten(&g, &cache)?] {
        done.push(format!(
            "{}: {} + {} ({})",
            v.label, v.gate_up.abi.symbol, v.down.abi.symbol, v.origin
        ));
    }
    Ok(done)
}

/// The outcome of one check of the chain on the device.
#[derive(Clone, Debug)]
pub struct Check {
    /// The intermediate `y`, per rank.
    pub y: Vec<OutputMetrics>,
    /// `residual_out` and `normed`, per rank.
    pub out: Vec<OutputMetrics>,
}

impl Check {
    /// Every output of every rank within [`TOLERANCE`], finite, replicated outputs identical.
    pub fn passes(&self) -> bool {
        Worst::of(&self.y).passes(TOLERANCE) && Worst::of(&self.out).passes(TOLERANCE)
    }
}

/// One version's chain bound on the rank group.
pub struct Chain<'g> {
    group: &'g RankGroup<CudaDevice>,
    gate_up_ir: Kernel,
    down_ir: Kernel,
    gate_up: OpKernel<'g, CudaDevice>,
    down: OpKernel<'g, CudaDevice>,
    /// The intermediate, one FP16 array per rank.
    y: Vec<CudaBuffer>,
    y_shape: Vec<usize>,
    rotation: [Rotation<CudaDevice>; 2],
}

impl<'g> Chain<'g> {
    /// Binds both kernels, uploads `data`, links `y` to `x`, and allocates the rotation sets
    /// (≥ 4 × `l2` bytes per kernel).
    pub fn new(
        group: &'g RankGroup<CudaDevice>,
        block: &Block,
        v: &Version,
        data: &BlockData,
        l2: u64,
    ) -> Result<Chain<'g>, RtError> {
        let gate_up = OpKernel::new(group, &block.gate_up, &v.gate_up.abi, &v.gate_up.artifact)?;
        let down = OpKernel::new(group, &block.down, &v.down.abi, &v.down.artifact)?;
        gate_up.upload_inputs(&data.gate_up_inputs)?;
        down.upload_inputs(&data.down_inputs)?;
        let y_shape = f16_shape(&block.gate_up, GATE_UP_OUT)?;
        let bytes = 2 * y_shape.iter().product::<usize>();
        let y = group.alloc_per_rank(bytes, MemKind::Device)?;
        let rotation = [
            Rotation::new(
                group,
                &v.gate_up.abi,
                &block.gate_up,
                &data.gate_up_inputs,
                l2,
                false,
            )?,
            Rotation::new(
                group,
                &v.down.abi,
                &block.down,
                &data.down_inputs,
                l2,
                false,
            )?,
        ];
        let mut chain = Chain {
            group,
            gate_up_ir: block.gate_up.clone(),
            down_ir: block.down.clone(),
            gate_up,
            down,
            y,
            y_shape,
            rotation,
        };
        chain.link()?;
        Ok(chain)
    }

    /// Binds the intermediate as the first kernel's `y` and the second's `x`.
    fn link(&mut self) -> Result<(), RtError> {
        let refs: Vec<&CudaBuffer> = self.y.iter().collect();
        self.gate_up.instance().bind(GATE_UP_OUT, "data", &refs)?;
        self.down.instance().bind(DOWN_IN, "data", &refs)
    }

    /// Inputs of rotation set `i` for both kernels, then the link again (the rotation rebinds the
    /// second kernel's `x` to a copy of the reference `y`). Host bookkeeping only.
    fn bind_set(&mut self, i: usize) -> Result<(), RtError> {
        self.rotation[0].bind(&mut self.gate_up, i)?;
        self.rotation[1].bind(&mut self.down, i)?;
        self.link()
    }

    /// Enqueues one block on every rank: the first kernel, then the second, on each rank's
    /// stream.
    fn launch(&mut self) -> Result<(), RtError> {
        self.gate_up.instance().launch()?;
        self.down.instance().launch()?;
        Ok(())
    }

    /// Waits for every rank and checks both kernels' error words.
    fn wait(&mut self) -> Result<(), RtError> {
        self.gate_up.instance().wait()?;
        self.down.instance().wait()
    }

    /// Poisons `y` and the outputs, runs one block and compares with the chained reference.
    pub fn check(&mut self, data: &BlockData) -> Result<Check, RtError> {
        let nan = 0x7E00u16
            .to_le_bytes()
            .repeat(self.y_shape.iter().product());
        for (r, buf) in self.y.iter().enumerate() {
            self.group.device(r as u32).upload(buf, 0, &nan)?;
        }
        self.down.poison_outputs()?;
        self.launch()?;
        self.wait()?;
        self.compare(data)
    }

    /// The device's `y` and outputs against the reference (after a completed block).
    fn compare(&self, data: &BlockData) -> Result<Check, RtError> {
        let out = self.down.read_outputs()?;
        let y = self.read_y()?;
        Ok(Check {
            y: exec::compare(&self.gate_up_ir, &y, &data.gate_up_ref),
            out: exec::compare(&self.down_ir, &out, &data.down_ref),
        })
    }

    fn read_y(&self) -> Result<Vec<RankOutputs>, RtError> {
        let b = self
            .gate_up_ir
            .buffer_by_name(GATE_UP_OUT)
            .expect("checked in new");
        let mut out = Vec::with_capacity(self.y.len());
        for (r, buf) in self.y.iter().enumerate() {
            let mut bytes = vec![0u8; buf.bytes()];
            self.group.device(r as u32).download(buf, 0, &mut bytes)?;
            let t = HostTensor {
                dtype: ScalarType::F16,
                shape: self.y_shape.clone(),
                data: exec::decode(&bytes, Ty::F16),
            };
            out.push(RankOutputs::from([(b, t)]));
        }
        Ok(out)
    }

    /// Bytes of one block's inputs over all ranks (weights, scales, zero points, activations).
    pub fn bytes_per_block(&self) -> u64 {
        self.rotation.iter().map(|r| r.bytes / r.sets as u64).sum()
    }

    /// `warmup + iters` one-block windows, each on the next rotation set; the timed ones in ms.
    pub fn time_blocks(
        &mut self,
        timer: &GroupTimer<CudaDevice>,
        flush: &CudaBuffer,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>, RtError> {
        let mut samples = Vec::with_capacity(iters);
        let needs_flush = self.rotation.iter().any(|r| r.flush);
        for i in 0..warmup + iters {
            self.bind_set(i)?;
            if needs_flush {
                timing::fill(
                    self.group.device(0),
                    flush,
                    (i as u8) | 1,
                    self.group.stream(0),
                )?;
            }
            let gate = timer.start(self.group)?;
            let launched = self.launch();
            let stopped = timer.stop(self.group);
            drop(gate);
            launched?;
            stopped?;
            self.wait()?;
            let ms = timer.elapsed_ms(self.group)?;
            if i >= warmup {
                samples.push(ms);
            }
        }
        Ok(samples)
    }

    /// Whether the rotation may be rebound while a gate holds the stream: binding a peer-table
    /// parameter uploads the table, which waits for the device (and so for the gate).
    pub fn can_time_layers(&self, v: &Version) -> bool {
        let peer_data = |a: &Abi| {
            a.params
                .iter()
                .any(|p| p.kind == AbiKind::PeerArrays && p.purpose == AbiPurpose::Data)
        };
        !peer_data(&v.gate_up.abi) && !peer_data(&v.down.abi)
    }

    /// `windows` windows of [`LAYERS`] blocks back to back (after one untimed window), block l of
    /// a window on rotation set l; the timed windows in ms.
    pub fn time_layers(
        &mut self,
        timer: &GroupTimer<CudaDevice>,
        windows: usize,
    ) -> Result<Vec<f64>, RtError> {
        let mut samples = Vec::with_capacity(windows);
        for w in 0..=windows {
            let gate = timer.start(self.group)?;
            let mut launched = Ok(());
            for l in 0..LAYERS {
                launched = self.bind_set(l).and_then(|()| self.launch());
                if launched.is_err() {
                    break;
                }
            }
            let stopped = timer.stop(self.group);
            drop(gate);
            launched?;
            stopped?;
            self.wait()?;
            let ms = timer.elapsed_ms(self.group)?;
            if w > 0 {
                samples.push(ms);
            }
        }
        Ok(samples)
    }

    /// The chain's outputs against the reference after timing (every set holds the same data).
    pub fn check_after(&self, data: &BlockData) -> Result<Check, RtError> {
        self.compare(data)
    }
}

/// The shape of FP16 tensor `name` of `ir` (one rank's).
fn f16_shape(ir: &Kernel, name: &str) -> Result<Vec<usize>, RtError> {
    let err = |m: String| RtError::Binding {
        kernel: ir.name().to_owned(),
        message: m,
    };
    let b = ir
        .buffer_by_name(name)
        .ok_or_else(|| err(format!("no buffer `{name}`")))?;
    match ir.buffer(b).map(|d| d.local_type()) {
        Some(BufferType::Tensor(t)) if t.dtype == ScalarType::F16 => Ok(t.shape.clone()),
        _ => Err(err(format!("`{name}` is not an FP16 tensor"))),
    }
}

/// What one version measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// `generated` or `hand-written`.
    pub label: &'static str,
    /// Where its kernels come from.
    pub origin: String,
    /// The check before timing.
    pub check: Option<Check>,
    /// The check after timing (the last timed block's outputs).
    pub check_after: Option<Check>,
    /// One-block windows, per repeat.
    pub blocks: Vec<Stats>,
    /// [`LAYERS`]-block windows, per repeat, in µs per window.
    pub layers: Vec<Stats>,
    /// Bytes of one block's inputs, all ranks.
    pub bytes_per_block: u64,
    /// Rotation sets of each kernel.
    pub sets: [usize; 2],
    /// Why something did not run.
    pub error: Option<String>,
    /// A note (what was skipped and why).
    pub note: String,
}

impl Measured {
    fn new(label: &'static str, origin: String) -> Measured {
        Measured {
            label,
            origin,
            check: None,
            check_after: None,
            blocks: Vec::new(),
            layers: Vec::new(),
            bytes_per_block: 0,
            sets: [0, 0],
            error: None,
            note: String::new(),
        }
    }
}

/// How much to time.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Workload seed.
    pub seed: u64,
    /// Untimed one-block windows per repeat.
    pub warmup: usize,
    /// Timed one-block windows per repeat.
    pub iters: usize,
    /// Timed [`LAYERS`]-block windows per repeat.
    pub windows: usize,
    /// Repeats of the whole timing.
    pub repeats: usize,
    /// Skip the hand-written chain.
    pub no_hand: bool,
    /// The commit of the binary, for the report's header.
    pub commit: String,
}

/// Everything the GPU run found.
pub struct GpuReport {
    /// Device and toolchain.
    pub header: Provenance,
    /// Copy bandwidth per repeat, GB/s (read + write).
    pub copy_gbps: Vec<f64>,
    /// Per version.
    pub versions: Vec<Measured>,
    /// Wall time, s.
    pub seconds: f64,
}

/// A chain being timed: its timer, and whether the 64-block windows run.
type Timed<'g> = (Chain<'g>, GroupTimer<CudaDevice>, bool);

/// Runs the block on `dev`: setup, check, timing (repeats interleave the versions).
pub fn run(dev: CudaDevice, plan: &Plan) -> Result<GpuReport, String> {
    let start = Instant::now();
    let info = dev.info().clone();
    if info.arch != Some(Arch::Sm90) {
        return Err(format!(
            "{} is not an sm_90 GPU, the target of this example",
            info.name
        ));
    }
    let l2 = timing::l2_bytes(&dev).map_err(|e| e.to_string())?;
    let header =
        Provenance::of_device(&dev, Arch::Sm90, &plan.commit).map_err(|e| e.to_string())?;
    let g = Generation::new()?;
    let block = g.block();
    let t = Instant::now();
    let data = BlockData::new(&block, plan.seed)?;
    eprintln!(
        "inputs and f64 reference: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let cache = Cache::from_env();
    let mut versions: Vec<(Measured, Option<Version>)> = Vec::new();
    match generated(&g, &cache) {
        Ok(v) => versions.push((Measured::new(v.label, v.origin.clone()), Some(v))),
        Err(e) => {
            let mut m = Measured::new("generated", String::new());
            m.error = Some(e);
            versions.push((m, None));
        }
    }
    if !plan.no_hand {
        match handwritten(&g, &cache) {
            Ok(v) => versions.push((Measured::new(v.label, v.origin.clone()), Some(v))),
            Err(e) => {
                let mut m = Measured::new("hand-written", String::new());
                m.error = Some(e);
                versions.push((m, None));
            }
        }
    }
    // One group per version: each kernel instance owns its flags and epochs.
    let groups = versions
        .iter()
        .map(|_| {
            let d = CudaDevice::new(0).map_err(|e| e.to_string())?;
            RankGroup::on_one_device(d, TP, wavefuse_runtime::SameDeviceMode::Streams)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let flush = dev
        .alloc(2 * l2 as usize, MemKind::Device)
        .map_err(|e| e.to_string())?;
    let mut live: Vec<(Measured, Option<Timed<'_>>)> = Vec::new();
    for ((mut m, v), group) in versions.into_iter().zip(&groups) {
        let Some(v) = v else {
            live.push((m, None));
            continue;
        };
        let bound = Chain::new(group, &block, &v, &data, l2).and_then(|mut c| {
            let check = c.check(&data)?;
            Ok((c, check))
        });
        match bound {
            Ok((c, check)) => {
                let pass = check.passes();
                m.check = Some(check);
                m.bytes_per_block = c.bytes_per_block();
                m.sets = [c.rotation[0].sets, c.rotation[1].sets];
                if !pass {
                    m.note = "not timed: wrong result".into();
                    live.push((m, None));
                    continue;
                }
                let layers = c.can_time_layers(&v);
                if !layers {
                    m.note = format!(
                        "{LAYERS}-block windows not timed: a rotated input is a peer table, whose \
                         rebinding waits for the device"
                    );
                }
                match GroupTimer::new(group) {
                    Ok(t) => live.push((m, Some((c, t, layers)))),
                    Err(e) => {
                        m.error = Some(format!("events: {e}"));
                        live.push((m, None));
                    }
                }
            }
            Err(e) => {
                m.error = Some(format!("on the device: {e}"));
                live.push((m, None));
            }
        }
    }
    let mut copy_gbps = Vec::new();
    for rep in 0..plan.repeats {
        match timing::copy_bandwidth(&dev, 1 << 30, 20) {
            Ok(c) => copy_gbps.push(c.gbps),
            Err(e) => eprintln!("warning: copy bandwidth, repeat {}: {e}", rep + 1),
        }
        for (m, slot) in &mut live {
            let Some((c, timer, layers)) = slot else {
                continue;
            };
            let r = c
                .time_blocks(timer, &flush, plan.warmup, plan.iters)
                .and_then(|b| {
                    let l = if *layers {
                        c.time_layers(timer, plan.windows)?
                    } else {
                        Vec::new()
                    };
                    Ok((b, l))
                });
            match r {
                Ok((b, l)) => {
                    m.blocks.push(Stats::from_ms(&b));
                    if !l.is_empty() {
                        m.layers.push(Stats::from_ms(&l));
                    }
                }
                Err(e) => {
                    m.error = Some(format!("timing, repeat {}: {e}", rep + 1));
                    *slot = None;
                }
            }
        }
    }
    let mut out = Vec::new();
    for (mut m, slot) in live {
        if let Some((c, _, _)) = slot {
            match c.check_after(&data) {
                Ok(ch) => m.check_after = Some(ch),
                Err(e) => m.error = Some(format!("reading back after timing: {e}")),
            }
        }
        out.push(m);
    }
    Ok(GpuReport {
        header,
        copy_gbps,
        versions: out,
        seconds: start.elapsed().as_secs_f64(),
    })
}
