//! Kernel instances: one lowered kernel bound to a rank group, with the synchronisation state the
//! runtime owns.
//!
//! A [`KernelInstance`] allocates, per rank, every array the kernel's parameters say the runtime
//! provides — grid-barrier counters, cross-rank flags, the error word, scratch — zero-filled once
//! (DESIGN.md §5.4: nothing is ever reset inside a kernel). A generated kernel counts nothing the
//! host passes: split-K arrivals and grid barriers are weighted tickets on the zeroed counters,
//! and a kernel with flags keeps its epoch on the device (its `epoch_state` counter array,
//! allocated and zeroed here like any counter), so one launch captured in a graph may be replayed
//! any number of times
//! ([`KernelInstance::replay_safe`]). A hand-written kernel whose ABI has an `epoch` scalar gets
//! `epoch` = 1, 2, 3, … on successive launches ([`Epochs`], which the instance also counts for
//! every kernel to keep ranks launched alone in step); the epoch arithmetic is wrap-safe, so the
//! counters simply wrap at 2³². After synchronising it reads every rank's error word and turns a non-zero
//! code into [`Error::BarrierTimeout`] (DESIGN.md §5.10). A timed-out launch leaves counters and
//! flags mid-protocol, so the instance then re-zeroes its state and restarts at epoch 1 before its
//! next launch (§5.11: a crashed launch must not poison the next one).
//!
//! Parameters are bound by purpose, from the lowered kernel's parameter list (the ABI order):
//! data arrays by op-level buffer name and part ([`KernelInstance::bind`]), `rank` and `epoch`
//! scalars by the runtime, peer arrays as tables built with
//! [`wavefuse_codegen::lowered::peer_slot`].

mod external;

pub use external::DataParam;

use wavefuse_codegen::abi::{Abi, AbiPurpose, AbiTy};
use wavefuse_codegen::lowered::{ParamData, ParamKind, Purpose};

use crate::compile::Artifact;
use crate::device::{Device, DeviceBuffer, MemKind};
use crate::error::{Error, Result};
use crate::launch::{CoResidency, KernelArg, LaunchSpec};
use crate::rank::{Placement, RankGroup, SameDeviceMode};

/// The epochs of successive launches on one set of counters and flags: 1, 2, 3, … (wrapping at
/// 2³², which the generated wrap-safe comparisons tolerate).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Epochs {
    last: u32,
}

impl Epochs {
    /// No launch yet.
    pub fn new() -> Epochs {
        Epochs::default()
    }

    /// The epoch of the next launch.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u32 {
        self.last = self.last.wrapping_add(1);
        self.last
    }

    /// The epoch of the last launch (0 before the first).
    pub fn last(&self) -> u32 {
        self.last
    }

    /// Back to "no launch yet", for freshly zeroed counters and flags.
    pub fn reset(&mut self) {
        self.last = 0;
    }
}

/// How a peer-table parameter is passed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PeerTableAbi {
    /// A device pointer to a table of `tp` pointers in the rank's device memory (`T* const*`).
    DeviceTable,
    /// The `tp` pointers by value (`struct { T* p[TP]; }`).
    ByValue,
}

/// What the runtime passes for one parameter.
enum Binding<D: Device> {
    /// A runtime-owned array per rank.
    Owned(Vec<D::Buffer>),
    /// A caller-bound array per rank (addresses), or nothing yet.
    Data(Option<Vec<u64>>),
    /// A peer table: the pointers, and the table uploaded to every rank's device.
    Peer {
        owned: Option<Vec<D::Buffer>>,
        table: Option<(Vec<u64>, Vec<D::Buffer>)>,
    },
    /// The executing rank.
    Rank,
    /// The launch's epoch.
    Epoch,
    /// A caller-bound scalar, or nothing yet.
    Scalar(Option<KernelArg>),
}

/// One lowered kernel on a rank group, with its synchronisation state.
pub struct KernelInstance<'g, D: Device> {
    group: &'g RankGroup<D>,
    name: String,
    params: Vec<ParamData>,
    bindings: Vec<Binding<D>>,
    kernels: Vec<D::Kernel>,
    spec: LaunchSpec,
    /// The ABI allows a programmatic dependent launch ([`KernelInstance::set_dependent_launch`]).
    dependent_allowed: bool,
    peer_abi: PeerTableAbi,
    /// The kernel's ranks entry ([`Abi::ranks_symbol`]) on a [`SameDeviceMode::FusedGrid`]
    /// group: every launch of all ranks is one launch of it.
    ranks_kernel: Option<D::Kernel>,
    epochs: Epochs,
    /// Per-rank epochs once a rank has been launched alone ([`KernelInstance::launch_alone`]):
    /// rank r's counters have then seen `alone[r]` launches, and the next launch of every rank
    /// continues from there when all agree, or from freshly zeroed state when they do not.
    alone: Option<Vec<Epochs>>,
    poisoned: bool,
}

impl<'g, D: Device> KernelInstance<'g, D> {
    /// Loads `artifact`'s kernel `abi.symbol` on every rank of `group` and allocates the
    /// runtime-owned arrays (zero-filled). A kernel is bound by its ABI description alone,
    /// generated ([`Abi::from_kernel`]) or hand-written alike.
    pub fn new(group: &'g RankGroup<D>, abi: &Abi, artifact: &Artifact) -> Result<Self> {
        if abi.tp != group.tp() {
            return Err(binding_err(
                &abi.symbol,
                format!(
                    "built for TP {} but the group has {} ranks",
                    abi.tp,
                    group.tp()
                ),
            ));
        }
        let params: Vec<ParamData> = abi
            .param_data()
            .map_err(|m| binding_err(&abi.symbol, format!("its ABI description: {m}")))?;
        let mut bindings: Vec<Binding<D>> = params
            .iter()
            .map(|p| Binding::new(group, p))
            .collect::<Result<_>>()?;
        // `value` scalars (a hand-written kernel's k, n, group size, strides, split counts):
        // the number the description gives, bound now.
        for (p, b) in abi.params.iter().zip(&mut bindings) {
            if p.purpose != AbiPurpose::Value {
                continue;
            }
            let v = p
                .value
                .as_deref()
                .and_then(|v| v.trim().parse::<i64>().ok());
            let arg = match (v, p.ty) {
                (Some(v), AbiTy::U32) if u32::try_from(v).is_ok() => KernelArg::U32(v as u32),
                (Some(v), AbiTy::I32) if i32::try_from(v).is_ok() => KernelArg::I32(v as i32),
                _ => {
                    return Err(binding_err(
                        &abi.symbol,
                        format!(
                            "value scalar `{}` ({:?}) has no integer `value` that fits it (`{}`)",
                            p.name,
                            p.ty,
                            p.value.as_deref().unwrap_or("none")
                        ),
                    ));
                }
            };
            *b = Binding::Scalar(Some(arg));
        }
        let spec = LaunchSpec {
            grid: abi.grid_dims.unwrap_or([abi.grid, 1, 1]),
            block: abi.block_dims.unwrap_or([abi.workgroup_size, 1, 1]),
            // Generated sm_90 kernels past 48 KiB of LDS declare it dynamic (the ABI says how
            // much); a hand-written kernel's description says its own (`dynamic_lds_bytes`).
            dynamic_lds: u32::try_from(abi.dynamic_lds_bytes)
                .map_err(|_| binding_err(&abi.symbol, "dynamic_lds_bytes past 4 GiB".into()))?,
            coresidency: if abi.synchronises() {
                CoResidency::Required
            } else {
                CoResidency::NotRequired
            },
            dependent: false,
        };
        // Ranks sharing a device on a fused-grid group launch as one grid where the kernel has
        // a ranks entry (one device: rank 0's module serves them all).
        let ranks_kernel = match (&abi.ranks_symbol, group.placement()) {
            (Some(sym), Placement::SameDevice(SameDeviceMode::FusedGrid)) if group.tp() > 1 => {
                Some(group.load(artifact, sym)?.swap_remove(0))
            }
            _ => None,
        };
        let mut inst = KernelInstance {
            group,
            name: abi.symbol.clone(),
            params,
            bindings,
            kernels: group.load(artifact, &abi.symbol)?,
            spec,
            dependent_allowed: abi.dependent_launch,
            peer_abi: PeerTableAbi::DeviceTable,
            ranks_kernel,
            epochs: Epochs::new(),
            alone: None,
            poisoned: false,
        };
        for i in 0..inst.params.len() {
            if let Binding::Peer {
                owned: Some(bufs), ..
            } = &inst.bindings[i]
            {
                let table = group.peer_table(bufs)?;
                inst.set_peer_table(i, table)?;
            }
        }
        Ok(inst)
    }

    /// Launch as a programmatic dependent of the previous kernel of each rank's stream
    /// ([`LaunchSpec::dependent`]) or, with `false` (the default), in plain stream order. Refused
    /// for a kernel whose ABI does not say it waits for its predecessor
    /// ([`Abi::dependent_launch`]): launched so, it could read what that kernel is still writing.
    pub fn set_dependent_launch(&mut self, on: bool) -> Result<()> {
        if on && !self.dependent_allowed {
            return Err(self.err(
                "its ABI does not allow a dependent launch (the kernel does not wait for the \
                 previous kernel of its stream)"
                    .into(),
            ));
        }
        self.spec.dependent = on;
        Ok(())
    }

    /// Whether launches are programmatic dependents ([`KernelInstance::set_dependent_launch`]).
    pub fn dependent_launch(&self) -> bool {
        self.spec.dependent
    }

    /// How peer tables are passed (default: [`PeerTableAbi::DeviceTable`]).
    pub fn with_peer_abi(mut self, abi: PeerTableAbi) -> Self {
        self.peer_abi = abi;
        self
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The geometry of one rank's launch.
    pub fn spec(&self) -> &LaunchSpec {
        &self.spec
    }

    /// The epoch of the last launch.
    pub fn last_epoch(&self) -> u32 {
        self.epochs.last()
    }

    /// Binds op-level buffer `buffer`'s array `part` (`data`, `qweight`, …): `per_rank[r]` is rank
    /// r's array. Every parameter with that purpose is bound (a peer-table parameter gets its
    /// table built here).
    pub fn bind(&mut self, buffer: &str, part: &str, per_rank: &[&D::Buffer]) -> Result<()> {
        if per_rank.len() != self.group.tp() as usize {
            return Err(self.err(format!(
                "`{buffer}.{part}`: {} buffers for {} ranks",
                per_rank.len(),
                self.group.tp()
            )));
        }
        let mut found = false;
        for i in 0..self.params.len() {
            let (need, is_peer) = match &self.params[i].kind {
                ParamKind::Array {
                    elem,
                    len,
                    purpose: Purpose::Data { buffer: b, part: p },
                    ..
                } if b == buffer && *p == part => (elem.bytes() * len, false),
                ParamKind::PeerArrays {
                    elem,
                    len,
                    purpose: Purpose::Data { buffer: b, part: p },
                    ..
                } if b == buffer && *p == part => (elem.bytes() * len, true),
                _ => continue,
            };
            found = true;
            if let Some((r, b)) = per_rank.iter().enumerate().find(|(_, b)| b.bytes() < need) {
                return Err(self.err(format!(
                    "`{buffer}.{part}` of rank {r} has {} bytes, the kernel reads {need}",
                    b.bytes()
                )));
            }
            let ptrs: Vec<u64> = per_rank.iter().map(|b| b.ptr()).collect();
            if is_peer {
                let table = self.group.peer_table(per_rank)?;
                self.set_peer_table(i, table)?;
            } else {
                self.bindings[i] = Binding::Data(Some(ptrs));
            }
        }
        if found {
            Ok(())
        } else {
            Err(self.err(format!(
                "no parameter is part `{part}` of buffer `{buffer}`"
            )))
        }
    }

    /// Binds a scalar parameter the runtime does not provide itself.
    pub fn bind_scalar(&mut self, name: &str, value: KernelArg) -> Result<()> {
        let i = self
            .params
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| self.err(format!("no parameter `{name}`")))?;
        match &mut self.bindings[i] {
            Binding::Scalar(slot) => *slot = Some(value),
            _ => return Err(self.err(format!("`{name}` is not a caller-provided scalar"))),
        }
        Ok(())
    }

    /// Rank `rank`'s runtime-owned array for parameter `name` (counters, flags, error word,
    /// scratch), e.g. to inspect it in a test.
    pub fn owned(&self, name: &str, rank: u32) -> Option<&D::Buffer> {
        let i = self.params.iter().position(|p| p.name == name)?;
        match &self.bindings[i] {
            Binding::Owned(bufs)
            | Binding::Peer {
                owned: Some(bufs), ..
            } => bufs.get(rank as usize),
            _ => None,
        }
    }

    fn set_peer_table(&mut self, i: usize, table: Vec<u64>) -> Result<()> {
        let uploaded = self.group.upload_table(&table)?;
        if let Binding::Peer { table: slot, .. } = &mut self.bindings[i] {
            *slot = Some((table, uploaded));
        }
        Ok(())
    }

    /// Rank `rank`'s arguments for a launch at `epoch`, in ABI order.
    pub fn args(&self, rank: u32, epoch: u32) -> Result<Vec<KernelArg>> {
        let r = rank as usize;
        self.params
            .iter()
            .zip(&self.bindings)
            .map(|(p, b)| match b {
                Binding::Owned(bufs) => Ok(KernelArg::Ptr(bufs[r].ptr())),
                Binding::Data(Some(ptrs)) => Ok(KernelArg::Ptr(ptrs[r])),
                Binding::Peer {
                    table: Some((table, uploaded)),
                    ..
                } => Ok(match self.peer_abi {
                    PeerTableAbi::DeviceTable => KernelArg::Ptr(uploaded[r].ptr()),
                    PeerTableAbi::ByValue => KernelArg::PtrArray(table.clone()),
                }),
                Binding::Rank => Ok(KernelArg::U32(rank)),
                Binding::Epoch => Ok(KernelArg::U32(epoch)),
                Binding::Scalar(Some(v)) => Ok(v.clone()),
                Binding::Data(None) | Binding::Peer { table: None, .. } | Binding::Scalar(None) => {
                    Err(self.err(format!("parameter `{}` is not bound", p.name)))
                }
            })
            .collect()
    }

    /// Enqueues one launch on every rank; returns its epoch. Does not wait: call
    /// [`KernelInstance::wait`] (or use [`KernelInstance::run`]).
    pub fn launch(&mut self) -> Result<u32> {
        if let Some(alone) = self.alone.take() {
            // Ranks launched alone since: every rank's state must be at the same epoch for a
            // launch of them all (their barriers and flags compare epochs, §5.4).
            if alone.windows(2).all(|w| w[0] == w[1]) {
                self.epochs = alone[0].clone();
            } else {
                self.poisoned = true;
            }
        }
        if self.poisoned {
            self.reset()?;
        }
        let epoch = self.epochs.next();
        let result = match self.group.placement() {
            _ if self.ranks_kernel.is_some() => self.launch_fused(epoch),
            _ => {
                let args = (0..self.group.tp())
                    .map(|r| self.args(r, epoch))
                    .collect::<Result<Vec<_>>>()?;
                // SAFETY: every argument comes from the kernel's own parameter list, in ABI order:
                // runtime-owned arrays of at least the declared length, caller-bound arrays checked
                // against it, peer tables of tp live pointers, and u32 scalars.
                unsafe { self.group.launch(&self.kernels, &self.spec, &args) }
            }
        };
        if result.is_err() {
            self.poisoned = true;
        }
        result.map(|()| epoch)
    }

    /// Enqueues one launch of rank `rank` alone (the others do not run): how a kernel that does not
    /// communicate is timed as deployed, one rank per device, without the other ranks sharing the
    /// device. Refused for a kernel with peer arrays (its rank would wait for peers that never
    /// arrive) and for a kernel a fused-grid group launches through its ranks entry (all ranks
    /// one grid). The rank's counters and flags advance on their own
    /// epoch; a later [`KernelInstance::launch`] of every rank continues from the ranks' common
    /// epoch, or re-zeroes all state first when they differ. Returns the rank's epoch; wait with
    /// [`KernelInstance::wait`].
    pub fn launch_alone(&mut self, rank: u32) -> Result<u32> {
        if rank >= self.group.tp() {
            return Err(self.err(format!(
                "rank {rank} launched alone, the group has {} ranks",
                self.group.tp()
            )));
        }
        if self.communicates() {
            return Err(self.err(
                "a kernel with peer arrays cannot run one rank alone: it waits for its peers"
                    .into(),
            ));
        }
        // A fused-grid group launches a kernel without a ranks entry one rank per stream, as
        // a streams group does, so one rank may run alone; through the ranks entry all ranks
        // are one grid.
        if self.launches_ranks_entry() {
            return Err(Error::RankGroup(
                "a FusedGrid group launches this kernel's ranks as one grid (its ranks entry)"
                    .into(),
            ));
        }
        if self.poisoned {
            self.reset()?;
        }
        let epochs = self
            .alone
            .get_or_insert_with(|| vec![self.epochs.clone(); self.group.tp() as usize]);
        let epoch = epochs[rank as usize].next();
        let args = self.args(rank, epoch)?;
        // SAFETY: as in `launch`: every argument comes from the kernel's own parameter list.
        let result = unsafe {
            self.group
                .launch_alone(rank, &self.kernels[rank as usize], &self.spec, &args)
        };
        if result.is_err() {
            self.poisoned = true;
        }
        result.map(|()| epoch)
    }

    /// Whether one launch, captured in a graph, may be replayed any number of times: the kernel
    /// takes no host-passed epoch (DESIGN.md §5.4). Generated kernels keep their epoch on the
    /// device; a hand-written kernel whose ABI has an `epoch` scalar is correct for one replay of
    /// a captured launch only.
    pub fn replay_safe(&self) -> bool {
        !self.bindings.iter().any(|b| matches!(b, Binding::Epoch))
    }

    /// Whether the kernel reads or writes peers' memory (it has a peer-table parameter).
    pub fn communicates(&self) -> bool {
        self.bindings
            .iter()
            .any(|b| matches!(b, Binding::Peer { .. }))
    }

    /// Whether launches of all ranks go through the kernel's ranks entry, one launch of
    /// `tp × grid` workgroups ([`SameDeviceMode::FusedGrid`], a kernel whose ABI has
    /// [`Abi::ranks_symbol`]).
    pub fn launches_ranks_entry(&self) -> bool {
        self.ranks_kernel.is_some()
    }

    /// The arguments of the ranks entry ([`Abi::ranks_symbol`]): each array parameter once per
    /// rank in rank order, no rank scalar, the rest (peer tables, scalars) once.
    pub(crate) fn ranks_args(&self, epoch: u32) -> Result<Vec<KernelArg>> {
        let per_rank = (0..self.group.tp())
            .map(|r| self.args(r, epoch))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::new();
        for (i, p) in self.params.iter().enumerate() {
            match &p.kind {
                ParamKind::Array { .. } => out.extend(per_rank.iter().map(|a| a[i].clone())),
                ParamKind::Scalar {
                    purpose: Purpose::Rank,
                    ..
                } => {}
                ParamKind::PeerArrays { .. } | ParamKind::Scalar { .. } => {
                    out.push(per_rank[0][i].clone())
                }
            }
        }
        Ok(out)
    }

    /// The fused-grid launch (see [`crate::rank`]) through the ranks entry.
    fn launch_fused(&mut self, epoch: u32) -> Result<()> {
        let args = self.ranks_args(epoch)?;
        let kernel = self.ranks_kernel.as_ref().expect("checked by the caller");
        // SAFETY: the arguments follow the ranks entry's ABI, built from the kernel's parameter
        // list as `args` builds each rank's.
        unsafe { self.group.launch_fused(kernel, &self.spec, &args) }
    }

    /// Waits for every rank, then checks every rank's error word.
    pub fn wait(&mut self) -> Result<()> {
        if let Err(e) = self.group.synchronize() {
            self.poisoned = true;
            return Err(e);
        }
        for rank in 0..self.group.tp() {
            let code = self.error_code(rank)?;
            if code != 0 {
                self.poisoned = true;
                return Err(Error::BarrierTimeout {
                    kernel: self.name.clone(),
                    epoch: self.epochs.last(),
                    rank,
                    code,
                });
            }
        }
        Ok(())
    }

    /// One launch on every rank, waited for and checked; returns its epoch.
    pub fn run(&mut self) -> Result<u32> {
        let epoch = self.launch()?;
        self.wait()?;
        Ok(epoch)
    }

    /// Rank `rank`'s error word (0 when the kernel has none or no wait timed out).
    pub fn error_code(&self, rank: u32) -> Result<u32> {
        let Some(i) = self
            .params
            .iter()
            .position(|p| is_purpose(p, &Purpose::ErrorWord))
        else {
            return Ok(0);
        };
        let Binding::Owned(bufs) = &self.bindings[i] else {
            return Ok(0);
        };
        let mut word = [0u8; 4];
        self.group
            .device(rank)
            .download(&bufs[rank as usize], 0, &mut word)?;
        Ok(u32::from_le_bytes(word))
    }

    /// Waits for every rank, re-zeroes every runtime-owned array and restarts at epoch 1.
    pub fn reset(&mut self) -> Result<()> {
        self.group.synchronize()?;
        for b in &self.bindings {
            if let Binding::Owned(bufs)
            | Binding::Peer {
                owned: Some(bufs), ..
            } = b
            {
                for buf in bufs {
                    let d = self.group.device(buf_rank(self.group, buf));
                    d.zero(buf)?;
                }
            }
        }
        self.epochs.reset();
        self.alone = None;
        self.poisoned = false;
        Ok(())
    }

    fn err(&self, message: String) -> Error {
        binding_err(&self.name, message)
    }
}

/// A rank whose device owns `buf` (any: same-device ranks share the device).
fn buf_rank<D: Device>(group: &RankGroup<D>, buf: &D::Buffer) -> u32 {
    (0..group.tp())
        .find(|&r| group.device(r).info().ordinal == buf.ordinal())
        .unwrap_or(0)
}

fn binding_err(kernel: &str, message: String) -> Error {
    Error::Binding {
        kernel: kernel.to_owned(),
        message,
    }
}

fn is_purpose(p: &ParamData, purpose: &Purpose) -> bool {
    match &p.kind {
        ParamKind::Array { purpose: q, .. }
        | ParamKind::PeerArrays { purpose: q, .. }
        | ParamKind::Scalar { purpose: q, .. } => q == purpose,
    }
}

impl<D: Device> Binding<D> {
    /// The binding of parameter `p`, allocating what the runtime owns.
    fn new(group: &RankGroup<D>, p: &ParamData) -> Result<Self> {
        Ok(match &p.kind {
            ParamKind::Array {
                purpose: Purpose::Data { .. },
                ..
            } => Binding::Data(None),
            ParamKind::Array {
                elem, len, purpose, ..
            } => {
                let kind = if *purpose == Purpose::Flags {
                    MemKind::Flags
                } else {
                    MemKind::Device
                };
                Binding::Owned(group.alloc_per_rank(elem.bytes() * len, kind)?)
            }
            ParamKind::PeerArrays {
                purpose: Purpose::Data { .. },
                ..
            } => Binding::Peer {
                owned: None,
                table: None,
            },
            // Peers write these over PCIe/NVLink and the owner polls or reads them after an
            // acquire: coherent (fine-grained / uncached) memory on AMD, DESIGN.md §5.12.
            ParamKind::PeerArrays { elem, len, .. } => Binding::Peer {
                owned: Some(group.alloc_per_rank(elem.bytes() * len, MemKind::Flags)?),
                table: None,
            },
            ParamKind::Scalar {
                purpose: Purpose::Rank,
                ..
            } => Binding::Rank,
            ParamKind::Scalar {
                purpose: Purpose::Epoch,
                ..
            } => Binding::Epoch,
            ParamKind::Scalar { .. } => Binding::Scalar(None),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_count_from_one_and_wrap() {
        let mut e = Epochs::new();
        assert_eq!((e.last(), e.next(), e.next(), e.next()), (0, 1, 2, 3));
        e.reset();
        assert_eq!(e.next(), 1);
        let mut e = Epochs { last: u32::MAX - 1 };
        assert_eq!((e.next(), e.next(), e.next()), (u32::MAX, 0, 1));
    }
}
