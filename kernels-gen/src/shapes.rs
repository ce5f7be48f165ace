//! The workload of DESIGN.md §1: a model's decode shapes per TP size — Qwen 3.5 27B by default
//! ([`Model::QWEN27B`]), or any model's dimensions ([`Model`], e.g. from a Hugging Face
//! `config.json` through the harness).

use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint};

/// Hidden size.
pub const HIDDEN: usize = 5120;
/// FFN intermediate size (gate and up each).
pub const FFN: usize = 17408;
/// Attention Q + output-gate width over all heads (24 heads × 256 × 2).
pub const Q_GATE: usize = 12288;
/// K (and V) width over all KV heads (4 heads × 256).
pub const KV: usize = 1024;
/// One attention head's width: KV heads are replicated, never split, when TP exceeds their count.
pub const HEAD_DIM: usize = 256;
/// RMSNorm epsilon.
pub const RMS_EPS: f64 = 1e-6;
/// Features per block of the INT8-compressed allreduce.
pub const INT8_BLOCK: usize = 128;
/// The largest model dimension (hidden size, FFN width, Q width, KV width, head width) the set is
/// built at: 2^20, 64× Qwen 3.5 27B's FFN width. It bounds what a `config.json` can ask for, so
/// that products of dimensions (a weight's `K · N`, at most 2^40) cannot wrap; whether a weight
/// then fits the generated code's 32-bit indices is the lowering's check
/// (`wavefuse_codegen::lower::MAX_INDEXED_ELEMENTS`).
pub const MAX_MODEL_DIM: usize = 1 << 20;
/// The TP sizes the kernel set is built for.
pub const TP_SIZES: [u32; 4] = [1, 2, 4, 8];
/// The most tokens decoded at once that the pipeline takes (`--batch`, `ab`'s shape sets, a
/// checkpoint's `[B, K]` activation): 64, the sm_90 tensor-core GEMV's 8 N tiles of 8 rows
/// (issue 40). Within it, a kernel the lowering cannot take at a batch on a target (its LDS, the
/// tensor-core path's accumulators) is refused by the lowering, with the reason.
pub const MAX_BATCH: usize = 64;

/// The dimensions of a model's decoder layer that the kernel set is built at.
#[derive(Copy, Clone, Debug)]
pub struct Model {
    /// Hidden size (the residual stream's features).
    pub hidden: usize,
    /// FFN intermediate size (gate and up each).
    pub ffn: usize,
    /// Attention Q width over all heads (with an output gate: twice the heads' width).
    pub q_gate: usize,
    /// K (and V) width over all KV heads.
    pub kv: usize,
    /// One attention head's width.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f64,
    /// The GPTQ layout of its quantised projections (a checkpoint's quantisation config; the
    /// default: groups of 128 rows, v1 zero points, FP16 scales, no act-order).
    pub gptq: GptqLayout,
}

impl PartialEq for Model {
    fn eq(&self, o: &Model) -> bool {
        self.key() == o.key()
    }
}

impl Eq for Model {}

impl std::hash::Hash for Model {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.key().hash(h)
    }
}

impl Model {
    /// Qwen 3.5 27B: the default workload.
    pub const QWEN27B: Model = Model {
        hidden: HIDDEN,
        ffn: FFN,
        q_gate: Q_GATE,
        kv: KV,
        head_dim: HEAD_DIM,
        rms_eps: RMS_EPS,
        gptq: GptqLayout {
            group: GroupSize::Rows(128),
            scale: wavefuse::ir::ScalarType::F16,
            zero: ZeroPoint::V1,
            act_order: false,
        },
    };

    fn key(&self) -> (usize, usize, usize, usize, usize, u64, String) {
        let m = self;
        (
            m.hidden,
            m.ffn,
            m.q_gate,
            m.kv,
            m.head_dim,
            m.rms_eps.to_bits(),
            format!("{:?}", m.gptq),
        )
    }

    /// The shape-set name's suffix for a GPTQ layout other than the default: `-g64`, `-gpc`
    /// (per-channel), `-sym`, `-v2`, `-act`.
    fn layout_suffix(&self) -> String {
        let (l, d) = (self.gptq, Model::QWEN27B.gptq);
        let mut s = String::new();
        match l.group {
            g if g == d.group => {}
            GroupSize::Rows(r) => s.push_str(&format!("-g{r}")),
            GroupSize::PerChannel => s.push_str("-gpc"),
        }
        match l.zero {
            ZeroPoint::V1 => {}
            ZeroPoint::V2 => s.push_str("-v2"),
            ZeroPoint::Symmetric => s.push_str("-sym"),
        }
        if l.act_order {
            s.push_str("-act");
        }
        if l.scale != d.scale {
            s.push_str(&format!("-s{}", l.scale));
        }
        s
    }

    /// A name for shape sets, reports and the tuned store: `qwen27b` for the default, else the
    /// dimensions (`h2048-f5632-q2048-kv256-d64`).
    pub fn name(&self) -> String {
        if *self == Model::QWEN27B {
            return "qwen27b".into();
        }
        format!(
            "h{}-f{}-q{}-kv{}-d{}{}",
            self.hidden,
            self.ffn,
            self.q_gate,
            self.kv,
            self.head_dim,
            self.layout_suffix()
        )
    }

    /// [`Model::check`] with the model's own GPTQ group (per-channel groups need no more than
    /// whole 8-row words).
    pub fn check_tp(&self, tp: u32) -> Result<(), String> {
        let group = match self.gptq.group {
            GroupSize::Rows(r) => r as usize,
            GroupSize::PerChannel => 8,
        };
        self.check(tp, group)
    }

    /// Whether the kernel set can be built at TP `tp` with GPTQ groups of `group` rows: every
    /// width divides into whole per-rank shards of whole 8-column words and whole groups.
    /// The error names the dimension.
    pub fn check(&self, tp: u32, group: usize) -> Result<(), String> {
        for (what, n) in [
            ("hidden_size", self.hidden),
            ("intermediate_size", self.ffn),
            ("the Q width", self.q_gate),
            ("the KV width", self.kv),
            ("head_dim", self.head_dim),
        ] {
            if n > MAX_MODEL_DIM {
                return Err(format!(
                    "{what} = {n} is more than {MAX_MODEL_DIM}, the largest dimension the set is built at"
                ));
            }
        }
        // Each dimension is at most 2^20 here, so the products fit.
        for (what, n) in [
            ("intermediate_size", self.ffn),
            ("the Q width", self.q_gate),
            ("the KV width", self.kv),
        ] {
            let elements = (self.hidden as u64) * (n as u64);
            if elements > wavefuse::ir::MAX_ELEMENTS {
                return Err(format!(
                    "a weight of hidden_size {} × {what} {n} has {elements} elements, more than {} (the most the textual IR takes for one buffer)",
                    self.hidden,
                    wavefuse::ir::MAX_ELEMENTS
                ));
            }
        }
        let tp = tp as usize;
        let whole = |what: &str, n: usize, by: usize, why: &str| {
            if n == 0 || n % by != 0 {
                Err(format!("{what} = {n} is not a multiple of {by} ({why})"))
            } else {
                Ok(())
            }
        };
        whole(
            "hidden_size",
            self.hidden,
            group.max(8),
            "whole GPTQ groups and 8-column words",
        )?;
        whole(
            "intermediate_size",
            self.ffn,
            tp * 8,
            "TP shards of whole 8-column words",
        )?;
        whole(
            "intermediate_size / TP",
            self.ffn / tp,
            group.max(8),
            "the down GEMV's K shard in whole GPTQ groups",
        )?;
        whole(
            "the Q width",
            self.q_gate,
            tp * 8,
            "TP shards of whole 8-column words",
        )?;
        whole("the KV width", self.kv, self.head_dim.max(1), "whole heads")?;
        whole("head_dim", self.head_dim, 8, "whole 8-column words")?;
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0) {
            return Err(format!(
                "rms_norm_eps = {} is not a positive number",
                self.rms_eps
            ));
        }
        Ok(())
    }
}

/// Per-rank shapes of one decode step at a given TP size and batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shapes {
    /// Ranks in the TP group.
    pub tp: u32,
    /// Tokens decoded at once.
    pub batch: usize,
    /// Quantised-weight layout of the FFN.
    pub gptq: GptqLayout,
    /// The model's dimensions.
    pub model: Model,
}

impl Shapes {
    /// The default workload: batch 1, GPTQ group 128, v1 zero points (AutoGPTQ's `gptq` format).
    pub fn qwen27b(tp: u32) -> Self {
        Shapes::of(Model::QWEN27B, tp)
    }

    /// `model` at TP `tp`, batch 1, in the model's GPTQ layout.
    pub fn of(model: Model, tp: u32) -> Self {
        Shapes {
            tp,
            batch: 1,
            gptq: model.gptq,
            model,
        }
    }

    fn split(&self, n: usize) -> usize {
        n / self.tp as usize
    }

    /// The hidden size.
    pub fn hidden(&self) -> usize {
        self.model.hidden
    }

    /// Per-rank FFN width (gate, up, and the K-shard of down).
    pub fn ffn_local(&self) -> usize {
        self.split(self.model.ffn)
    }

    /// Per-rank Q + gate width.
    pub fn q_local(&self) -> usize {
        self.split(self.model.q_gate)
    }

    /// Per-rank K (= V) width: whole heads, replicated once TP exceeds the KV-head count.
    pub fn kv_local(&self) -> usize {
        self.split(self.model.kv).max(self.model.head_dim)
    }
}

/// A TP size of the set from the command line: 1, 2, 4 or 8.
pub fn parse_tp(s: &str) -> Result<u32, String> {
    let tp: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a TP size; use one of 1, 2, 4, 8"))?;
    if TP_SIZES.contains(&tp) {
        Ok(tp)
    } else {
        Err(format!("TP = {tp} is not supported; use one of 1, 2, 4, 8"))
    }
}
