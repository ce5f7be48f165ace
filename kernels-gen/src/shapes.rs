//! The workload of DESIGN.md §1: Qwen 3.5 27B decode shapes, per TP size.

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
/// The TP sizes the kernel set is built for.
pub const TP_SIZES: [u32; 4] = [1, 2, 4, 8];

/// Per-rank shapes of one decode step at a given TP size and batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shapes {
    /// Ranks in the TP group.
    pub tp: u32,
    /// Tokens decoded at once.
    pub batch: usize,
    /// Quantised-weight layout of the FFN.
    pub gptq: GptqLayout,
}

impl Shapes {
    /// The default workload: batch 1, GPTQ group 128, v1 zero points (AutoGPTQ's `gptq` format).
    pub fn qwen27b(tp: u32) -> Self {
        Shapes {
            tp,
            batch: 1,
            gptq: GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1),
        }
    }

    fn split(&self, n: usize) -> usize {
        n / self.tp as usize
    }

    /// Per-rank FFN width (gate, up, and the K-shard of down).
    pub fn ffn_local(&self) -> usize {
        self.split(FFN)
    }

    /// Per-rank Q + gate width.
    pub fn q_local(&self) -> usize {
        self.split(Q_GATE)
    }

    /// Per-rank K (= V) width: whole heads, replicated once TP exceeds the KV-head count.
    pub fn kv_local(&self) -> usize {
        self.split(KV).max(HEAD_DIM)
    }
}
