//! Simulated memory: every array instance with its values and per-element write stamps, and the
//! host's view of one rank's parameters.

use cranelift_entity::EntityRef;

use crate::lowered::{Access, LoweredKernel, Param, ParamKind, Purpose, Ty};

use super::clock::Stamp;
use super::eval;

/// One array instance: a parameter of one rank, or an LDS array of one workgroup.
#[derive(Debug)]
pub(super) struct Array {
    pub name: String,
    pub elem: Ty,
    pub read_only: bool,
    /// The rank whose memory this is.
    pub rank: u32,
    pub vals: Vec<u32>,
    pub stamps: Vec<Stamp>,
    /// LDS arrays and written data arrays (empty for the others: read-only inputs, flags,
    /// counters, the error word): per element, each lane's last read of it since its last
    /// write — what a write by another lane must be ordered after (write after read).
    pub reads: Vec<Vec<Stamp>>,
}

impl Array {
    fn new(name: String, elem: Ty, len: usize, read_only: bool, rank: u32) -> Self {
        Array {
            name,
            elem,
            read_only,
            rank,
            vals: vec![0; len],
            stamps: vec![Stamp::INITIAL; len],
            reads: Vec::new(),
        }
    }
}

/// The bits written into fresh LDS and poisoned outputs: NaN for floats, a marker for integers.
pub(super) fn poison(elem: Ty) -> u32 {
    match elem {
        Ty::F32 | Ty::F16 => f32::NAN.to_bits(),
        Ty::Bool => 0,
        _ => 0xDEAD_BEEF,
    }
}

/// All arrays of a TP group, and the per-rank scalars.
#[derive(Debug)]
pub(super) struct Memory {
    pub arrays: Vec<Array>,
    /// Per parameter (index), per rank: the array instance (empty for scalars).
    pub param_arrays: Vec<Vec<usize>>,
    /// First LDS array; workgroup slot `s`'s LDS array `l` is `lds_base + s · num_lds + l`.
    pub lds_base: usize,
    pub num_lds: usize,
    /// Per rank, per parameter index: scalar values.
    pub scalars: Vec<Vec<u32>>,
    /// Per rank, per table slot: whose array the host put there.
    pub peer_table: Vec<Vec<u32>>,
}

impl Memory {
    /// Allocate every array zeroed, or holding `preset`'s value where its name is there
    /// ([`super::SimOptions::preset`]), stamped as written before everything; LDS uninitialised.
    pub(super) fn new(
        k: &LoweredKernel,
        peer_table: Vec<Vec<u32>>,
        preset: &[(String, u32)],
    ) -> Self {
        let mut arrays = Vec::new();
        let mut param_arrays = Vec::with_capacity(k.params.len());
        for (p, d) in k.params.iter() {
            let mut per_rank = Vec::new();
            let (elem, len, access, purpose) = match &d.kind {
                ParamKind::Array {
                    elem,
                    len,
                    access,
                    purpose,
                    ..
                }
                | ParamKind::PeerArrays {
                    elem,
                    len,
                    access,
                    purpose,
                    ..
                } => (*elem, *len, *access, purpose),
                ParamKind::Scalar { .. } => {
                    param_arrays.push(per_rank);
                    continue;
                }
            };
            for r in 0..k.tp {
                per_rank.push(arrays.len());
                let name = format!("{p} `{}` of rank {r}", d.name);
                let mut a = Array::new(name, elem, len, access == Access::Read, r);
                // Written data (an output, published partials, a peer's exchange buffer): its
                // plain reads are kept for the write-after-read check too. Flags, counters and
                // the error word are synchronisation words, read and written concurrently by
                // design.
                if access != Access::Read
                    && matches!(purpose, Purpose::Data { .. } | Purpose::Scratch)
                {
                    a.reads = vec![Vec::new(); len];
                }
                if let Some((_, v)) = preset.iter().find(|(n, _)| *n == d.name) {
                    a.vals.fill(*v);
                }
                arrays.push(a);
            }
            param_arrays.push(per_rank);
        }
        let lds_base = arrays.len();
        for slot in 0..k.tp * k.grid {
            let (rank, wg) = (slot / k.grid, slot % k.grid);
            for (l, d) in k.lds.iter() {
                let mut a = Array::new(
                    format!("{l} of rank {rank} wg {wg}"),
                    d.elem,
                    d.len,
                    false,
                    rank,
                );
                a.stamps.fill(Stamp::UNINIT);
                a.reads = vec![Vec::new(); d.len];
                arrays.push(a);
            }
        }
        let scalars = vec![vec![0; k.params.len()]; k.tp as usize];
        Memory {
            arrays,
            param_arrays,
            lds_base,
            num_lds: k.lds.len(),
            scalars,
            peer_table,
        }
    }

    /// Reset workgroup slot `slot`'s LDS to undefined contents (a new launch).
    pub(super) fn reset_lds(&mut self, slot: usize) {
        let first = self.lds_base + slot * self.num_lds;
        for a in &mut self.arrays[first..first + self.num_lds] {
            let p = poison(a.elem);
            a.vals.fill(p);
            a.stamps.fill(Stamp::UNINIT);
            a.reads.iter_mut().for_each(Vec::clear);
        }
    }
}

/// The host's view of one rank's parameters between launches. Writes are stamped as the host's
/// (ordered before the rank's next launch by the stream, and before anything a lane of that launch
/// releases).
pub struct HostView<'a> {
    pub(super) mem: &'a mut Memory,
    pub(super) kernel: &'a LoweredKernel,
    pub(super) rank: u32,
    pub(super) stamp: Stamp,
}

impl HostView<'_> {
    /// The rank this view belongs to.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The kernel.
    pub fn kernel(&self) -> &LoweredKernel {
        self.kernel
    }

    fn array(&self, p: Param) -> usize {
        let per_rank = &self.mem.param_arrays[p.index()];
        assert!(!per_rank.is_empty(), "{p} is a scalar parameter");
        per_rank[self.rank as usize]
    }

    /// Element type of an array parameter.
    pub fn elem(&self, p: Param) -> Ty {
        self.mem.arrays[self.array(p)].elem
    }

    /// Length of this rank's instance of an array parameter.
    pub fn len(&self, p: Param) -> usize {
        self.mem.arrays[self.array(p)].vals.len()
    }

    /// Write a value, converted to the element type (f16 rounds to nearest even).
    pub fn write(&mut self, p: Param, index: usize, value: f64) {
        let i = self.array(p);
        let bits = eval::from_f64(self.mem.arrays[i].elem, value);
        self.write_bits(p, index, bits);
    }

    /// Write a raw 32-bit pattern (see the module docs of `sim` for the encoding).
    pub fn write_bits(&mut self, p: Param, index: usize, bits: u32) {
        let i = self.array(p);
        let a = &mut self.mem.arrays[i];
        a.vals[index] = bits;
        a.stamps[index] = self.stamp;
    }

    /// Fill with a raw pattern.
    pub fn fill_bits(&mut self, p: Param, bits: u32) {
        let i = self.array(p);
        let a = &mut self.mem.arrays[i];
        a.vals.fill(bits);
        a.stamps.fill(self.stamp);
    }

    /// Poison: NaN for float arrays, 0xDEADBEEF for integer arrays.
    pub fn poison(&mut self, p: Param) {
        let bits = poison(self.elem(p));
        self.fill_bits(p, bits);
    }

    /// Read a value as f64.
    pub fn read(&self, p: Param, index: usize) -> f64 {
        let a = &self.mem.arrays[self.array(p)];
        eval::to_f64(a.elem, a.vals[index])
    }

    /// Read a raw pattern.
    pub fn read_bits(&self, p: Param, index: usize) -> u32 {
        self.mem.arrays[self.array(p)].vals[index]
    }

    /// Set a scalar parameter for this rank (rank and epoch scalars are set by the simulator).
    pub fn set_scalar(&mut self, p: Param, bits: u32) {
        self.mem.scalars[self.rank as usize][p.index()] = bits;
    }
}
