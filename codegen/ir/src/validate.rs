//! The validator: the one gate between building a kernel and using it.
//!
//! [`validate`] checks references, element types, shapes, sharding, buffer roles and quantised
//! layouts, infers every value's type, and returns the facts later stages need as side tables in a
//! [`KernelInfo`]. Back ends assume a validated kernel and never re-check.

use cranelift_entity::{EntityRef, SecondaryMap, packed_option::PackedOption};

use crate::buffer::{BufferData, BufferType, Role, Weight};
use crate::entities::{Buffer, Op, Value};
use crate::error::{BufferError, KernelError, OpError, ValidationError};
use crate::kernel::Kernel;
use crate::ops::{OpKind, TypeCtx};
use crate::types::{IndexSpace, MemorySpace, ScalarType, Sharding, WeightFormat, ZeroPoint};
use crate::value::ValueType;

/// Facts about a valid kernel, in side tables keyed by entity.
#[derive(Clone, Debug)]
pub struct KernelInfo {
    types: SecondaryMap<Value, Option<ValueType>>,
    uses: SecondaryMap<Value, u32>,
    writer: SecondaryMap<Buffer, PackedOption<Op>>,
}

impl KernelInfo {
    /// The inferred type of a value of the validated kernel.
    pub fn value_type(&self, v: Value) -> &ValueType {
        self.types[v]
            .as_ref()
            .expect("validated kernels type every value")
    }

    /// How many ops read a value.
    pub fn uses(&self, v: Value) -> u32 {
        self.uses[v]
    }

    /// The store that writes an output buffer.
    pub fn writer(&self, b: Buffer) -> Option<Op> {
        self.writer[b].expand()
    }
}

/// Validate a kernel. See the module docs.
pub fn validate(kernel: &Kernel) -> Result<KernelInfo, ValidationError> {
    Validator::new(kernel).run()
}

/// Walks a kernel once, in program order.
struct Validator<'a> {
    kernel: &'a Kernel,
    info: KernelInfo,
    current: Op,
}

impl TypeCtx for Validator<'_> {
    fn value(&self, v: Value) -> Result<&ValueType, OpError> {
        let def = self
            .kernel
            .values
            .get(v)
            .ok_or(OpError::UndefinedValue(v))?;
        if def.op >= self.current {
            return Err(OpError::UseBeforeDef(v));
        }
        Ok(self.info.types[v].as_ref().expect("earlier ops were typed"))
    }

    fn buffer(&self, b: Buffer) -> Result<&BufferData, OpError> {
        self.kernel
            .buffers
            .get(b)
            .ok_or(OpError::UndefinedBuffer(b))
    }

    fn tp(&self) -> u32 {
        self.kernel.tp
    }
}

impl<'a> Validator<'a> {
    fn new(kernel: &'a Kernel) -> Self {
        let info = KernelInfo {
            types: SecondaryMap::with_capacity(kernel.values.len()),
            uses: SecondaryMap::with_capacity(kernel.values.len()),
            writer: SecondaryMap::with_capacity(kernel.buffers.len()),
        };
        Validator {
            kernel,
            info,
            current: Op::new(0),
        }
    }

    fn run(mut self) -> Result<KernelInfo, ValidationError> {
        if self.kernel.tp == 0 {
            return Err(self.kernel_error(KernelError::EmptyTpGroup));
        }
        for (b, data) in self.kernel.buffers.iter() {
            self.check_buffer(b, data)
                .map_err(|source| ValidationError::Buffer {
                    kernel: self.kernel.name.clone(),
                    buffer: b,
                    name: data.name.clone(),
                    source,
                })?;
        }
        for (op, data) in self.kernel.ops.iter() {
            self.current = op;
            let mnemonic = data.kind.mnemonic();
            self.check_op(op, &data.kind, &data.results)
                .map_err(|source| ValidationError::Op {
                    kernel: self.kernel.name.clone(),
                    op,
                    mnemonic,
                    at: data.loc.clone(),
                    source,
                })?;
        }
        self.check_outputs()?;
        Ok(self.info)
    }

    fn kernel_error(&self, source: KernelError) -> ValidationError {
        ValidationError::Kernel {
            kernel: self.kernel.name.clone(),
            source,
        }
    }

    fn check_op(&mut self, op: Op, kind: &OpKind, results: &[Value]) -> Result<(), OpError> {
        let types = kind.infer(self)?;
        debug_assert_eq!(types.len(), results.len());
        for (&v, ty) in results.iter().zip(types) {
            self.info.types[v] = Some(ty);
        }
        for v in kind.args() {
            self.info.uses[v] += 1;
        }
        if let OpKind::Store(s) = kind {
            if let Some(first) = self.info.writer[s.buffer].expand() {
                let name = self.kernel.buffers[s.buffer].name.clone();
                return Err(OpError::SecondWrite { name, first });
            }
            self.info.writer[s.buffer] = op.into();
        }
        Ok(())
    }

    fn check_outputs(&self) -> Result<(), ValidationError> {
        let mut outputs = self.kernel.outputs().peekable();
        if outputs.peek().is_none() {
            return Err(self.kernel_error(KernelError::NoOutputs));
        }
        for b in outputs {
            if self.info.writer[b].is_none() {
                let name = self.kernel.buffers[b].name.clone();
                return Err(self.kernel_error(KernelError::OutputNotWritten { buffer: b, name }));
            }
        }
        Ok(())
    }

    fn check_buffer(&self, b: Buffer, data: &BufferData) -> Result<(), BufferError> {
        if let Some((first, _)) = self
            .kernel
            .buffers
            .iter()
            .find(|(_, d)| d.name == data.name)
        {
            if first != b {
                return Err(BufferError::DuplicateName { first });
            }
        }
        check_space(data.space)?;
        if data.role == Role::Output && matches!(data.ty, BufferType::Weight(_)) {
            return Err(BufferError::WeightOutput);
        }
        check_dims(&data.ty)?;
        self.check_sharding(data)?;
        match data.local_type() {
            BufferType::Weight(w) => check_weight_layout(&w, data.sharding),
            BufferType::Tensor(_) => Ok(()),
        }
    }

    fn check_sharding(&self, data: &BufferData) -> Result<(), BufferError> {
        let s = data.sharding;
        let what = match (&data.ty, s) {
            (_, Sharding::Replicated) => return Ok(()),
            (BufferType::Tensor(_), Sharding::RowParallel { .. }) => Some(
                "a tensor: row_parallel splits a weight's K axis; a K-sharded activation is col_parallel",
            ),
            (BufferType::Weight(_), Sharding::Partial { .. }) => Some("a weight matrix"),
            _ => None,
        };
        if let Some(what) = what {
            return Err(BufferError::ShardingKind { sharding: s, what });
        }
        if s.tp() != self.kernel.tp {
            return Err(BufferError::TpMismatch {
                expected: self.kernel.tp,
                found: s.tp(),
            });
        }
        if data.index_space == IndexSpace::Global {
            check_divisible(&data.ty, s)?;
        }
        Ok(())
    }
}

fn check_space(space: MemorySpace) -> Result<(), BufferError> {
    match space {
        MemorySpace::Global | MemorySpace::HostVisible => Ok(()),
        MemorySpace::Register | MemorySpace::Lds | MemorySpace::PeerGlobal => {
            Err(BufferError::MemorySpace {
                space: space.name(),
            })
        }
    }
}

fn check_dims(ty: &BufferType) -> Result<(), BufferError> {
    let (dims, names): (Vec<usize>, [&'static str; 2]) = match ty {
        BufferType::Tensor(t) => {
            if !(1..=2).contains(&t.shape.len()) {
                return Err(BufferError::Rank {
                    rank: t.shape.len(),
                });
            }
            let names = if t.shape.len() == 1 {
                ["the length", ""]
            } else {
                ["the batch", "the feature axis"]
            };
            (t.shape.clone(), names)
        }
        BufferType::Weight(w) => (vec![w.k, w.n], ["K", "N"]),
    };
    match dims.iter().position(|&d| d == 0) {
        Some(axis) => Err(BufferError::EmptyDim {
            axis,
            name: names[axis],
        }),
        None => Ok(()),
    }
}

fn check_divisible(ty: &BufferType, s: Sharding) -> Result<(), BufferError> {
    let tp = s.tp();
    let (axis, len) = match (ty, s) {
        (BufferType::Weight(w), Sharding::RowParallel { .. }) => ("K", w.k),
        (BufferType::Weight(w), _) => ("N", w.n),
        (BufferType::Tensor(t), Sharding::ColumnParallel { .. }) => {
            ("the feature axis", *t.shape.last().expect("rank checked"))
        }
        (BufferType::Tensor(_), _) => return Ok(()),
    };
    if len % tp as usize != 0 {
        return Err(BufferError::ShardNotDivisible { axis, len, tp });
    }
    Ok(())
}

/// INT4 packing and grouping of the per-rank weight (DESIGN.md §2).
fn check_weight_layout(w: &Weight, sharding: Sharding) -> Result<(), BufferError> {
    let (group, scale) = match w.format {
        WeightFormat::F16 => return Ok(()),
        WeightFormat::Gptq(l) => {
            if w.k % 8 != 0 {
                return Err(packing(format!(
                    "GPTQ packs 8 rows of K per word; the per-rank K = {} is not a multiple of 8",
                    w.k
                )));
            }
            if l.zero != ZeroPoint::Symmetric && w.n % 8 != 0 {
                return Err(packing(format!(
                    "qzeros packs 8 columns per word; the per-rank N = {} is not a multiple of 8",
                    w.n
                )));
            }
            if l.act_order && matches!(sharding, Sharding::RowParallel { .. }) {
                return Err(packing("act-order (g_idx) weights cannot be split along K: rows of one group may land on different ranks".into()));
            }
            (l.group, l.scale)
        }
        WeightFormat::Awq(l) => {
            if w.n % 8 != 0 {
                return Err(packing(format!(
                    "AWQ packs 8 columns per word; the per-rank N = {} is not a multiple of 8",
                    w.n
                )));
            }
            (l.group, l.scale)
        }
    };
    if !matches!(scale, ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32) {
        return Err(BufferError::ScaleType(scale));
    }
    let g = group.rows(w.k);
    if g == 0 || w.k % g != 0 {
        let hint = match sharding {
            Sharding::RowParallel { .. } => {
                " (each rank's K-shard must start and end on a group boundary)"
            }
            _ => "",
        };
        return Err(BufferError::GroupSize {
            group: g,
            k: w.k,
            hint,
        });
    }
    Ok(())
}

fn packing(msg: String) -> BufferError {
    BufferError::Packing(msg)
}

impl Role {
    /// The textual-IR name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
        }
    }
}
