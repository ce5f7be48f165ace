//! A bound kernel inside an engine: launched on the engine's streams (PyTorch's current stream)
//! with the engine's arrays (tensor data pointers), with no allocation, compile or host
//! synchronisation per launch. The synchronisation state stays the instance's own: it was
//! allocated and zeroed when the instance was built (DESIGN.md §5.4, §10).

use wavefuse_codegen::lowered::{ParamKind, Purpose};

use super::{Binding, KernelInstance};
use crate::device::{Device, DeviceBuffer, PeerMapping};
use crate::error::Result;
use crate::launch::{Capacity, CoResidency};
use crate::rank::Placement;

/// One array a caller binds per launch: part `part` of op-level buffer `buffer`, `len` elements of
/// `elem_bytes` bytes each, whose base address must be a multiple of `align` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataParam {
    /// The op-level buffer.
    pub buffer: String,
    /// Which of its arrays (`data`, `qweight`, `scales`, `qzeros`, `g_idx`).
    pub part: &'static str,
    /// Bytes per element.
    pub elem_bytes: usize,
    /// Elements.
    pub len: usize,
}

impl<D: Device> KernelInstance<'_, D> {
    /// The arrays a caller binds ([`KernelInstance::bind`] or
    /// [`KernelInstance::bind_addresses`]), each once, in ABI order.
    pub fn data_params(&self) -> Vec<DataParam> {
        let mut out: Vec<DataParam> = Vec::new();
        for d in self.params.iter().filter_map(|p| p.data_array()) {
            if !out.iter().any(|o| o.buffer == d.buffer && o.part == d.part) {
                out.push(DataParam {
                    buffer: d.buffer.to_owned(),
                    part: d.part,
                    elem_bytes: d.elem.bytes(),
                    len: d.len,
                });
            }
        }
        out
    }

    /// Binds part `part` of buffer `buffer` to caller-owned device addresses, `per_rank[r]` on
    /// rank r's device (a tensor's `data_ptr()`). The caller guarantees each is a live array of
    /// at least the parameter's length, on that rank's device, until the launches that use it
    /// have completed. No allocation on the device: an array that peers read through a table
    /// (a peer `data` parameter) is refused, as its table would have to be uploaded.
    pub fn bind_addresses(&mut self, buffer: &str, part: &str, per_rank: &[u64]) -> Result<()> {
        if per_rank.len() != self.group.tp() as usize {
            return Err(self.err(format!(
                "`{buffer}.{part}`: {} addresses for {} ranks",
                per_rank.len(),
                self.group.tp()
            )));
        }
        let mut found = false;
        for i in 0..self.params.len() {
            match &self.params[i].kind {
                ParamKind::Array {
                    purpose: Purpose::Data { buffer: b, part: p },
                    ..
                } if b == buffer && *p == part => {
                    found = true;
                    match &mut self.bindings[i] {
                        Binding::Data(Some(v)) => v.copy_from_slice(per_rank),
                        slot => *slot = Binding::Data(Some(per_rank.to_vec())),
                    }
                }
                ParamKind::PeerArrays {
                    purpose: Purpose::Data { buffer: b, part: p },
                    ..
                } if b == buffer && *p == part => {
                    return Err(self.err(format!(
                        "`{buffer}.{part}` is read by peers through a table: bind it with \
                         `bind` (device buffers), not per launch"
                    )));
                }
                _ => {}
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

    /// Refuses, now rather than at a launch, a kernel with a grid barrier or cross-rank flags
    /// whose ranks' grids cannot all be resident on their device at once (DESIGN.md §5.9):
    /// launches on a caller's stream are plain launches, so the capacity must hold for every
    /// rank sharing a device (one grid of them all, through the ranks entry, or one grid per
    /// rank).
    pub fn check_coresidency(&self) -> Result<()> {
        if self.spec.coresidency != CoResidency::Required {
            return Ok(());
        }
        let sharing = match self.group.placement() {
            Placement::SameDevice(_) => u64::from(self.group.tp()),
            _ => 1,
        };
        if let Some(k) = &self.ranks_kernel {
            let cap = Capacity::of(self.group.device(0), k, &self.spec)?;
            return cap.check(&self.name, self.spec.workgroups() * sharing);
        }
        for r in 0..self.group.tp() {
            let d = self.group.device(r);
            let cap = Capacity::of(d, &self.kernels[r as usize], &self.spec)?;
            cap.check(&self.name, self.spec.workgroups() * sharing)?;
        }
        Ok(())
    }

    /// The IPC handles of rank `rank`'s runtime-owned peer arrays (cross-rank flags, allreduce
    /// payloads), by parameter index: what this process sends the other processes of a group of
    /// one process per rank, before any launch (DESIGN.md §10). Arrays are zeroed at allocation,
    /// so a peer that maps them sees them ready (§5.4).
    pub fn ipc_exports(&self, rank: u32) -> Result<Vec<(usize, Vec<u8>)>> {
        let mut out = Vec::new();
        for (i, b) in self.bindings.iter().enumerate() {
            if let Binding::Peer {
                owned: Some(bufs), ..
            } = b
            {
                let d = self.group.device(rank);
                out.push((i, d.ipc_handle(&bufs[rank as usize])?));
            }
        }
        Ok(out)
    }

    /// Points rank `rank`'s peer tables at the other processes' arrays: `exports[p]` is what
    /// process p's rank p sent ([`KernelInstance::ipc_exports`]); slot p of each table is its
    /// mapping (this rank's own array for p = `rank`), in the rule the kernel assumes (§5.5).
    /// Returns the mappings: keep them alive while the instance launches (drop them after it).
    /// Only rank `rank` may then be launched ([`KernelInstance::launch_rank_on_stream`]).
    pub fn import_peers(
        &mut self,
        rank: u32,
        exports: &[Vec<(usize, Vec<u8>)>],
    ) -> Result<Vec<PeerMapping>> {
        let tp = self.group.tp() as usize;
        if exports.len() != tp {
            return Err(self.err(format!("exports of {} ranks for {tp}", exports.len())));
        }
        let mine = self.ipc_exports(rank)?;
        let mut maps = Vec::new();
        for (i, _) in mine {
            let bytes = match &self.params[i].kind {
                ParamKind::PeerArrays { elem, len, .. } => elem.bytes() * len,
                _ => unreachable!("exports are peer arrays"),
            };
            let mut table = Vec::with_capacity(tp);
            for (p, theirs) in exports.iter().enumerate() {
                if p == rank as usize {
                    let Binding::Peer {
                        owned: Some(bufs), ..
                    } = &self.bindings[i]
                    else {
                        unreachable!("exported above")
                    };
                    table.push(bufs[p].ptr());
                    continue;
                }
                let handle = theirs
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, h)| h)
                    .ok_or_else(|| {
                        self.err(format!(
                            "rank {p} exported no `{}`: the ranks built different kernels",
                            self.params[i].name
                        ))
                    })?;
                let m = self.group.device(rank).ipc_open(handle, bytes)?;
                table.push(m.ptr());
                maps.push(m);
            }
            self.set_peer_table(i, table)?;
        }
        Ok(maps)
    }

    /// [`KernelInstance::check_coresidency`] for rank `rank` alone (the other ranks run in other
    /// processes, on other devices or interleaved with this one).
    pub fn check_coresidency_alone(&self, rank: u32) -> Result<()> {
        if self.spec.coresidency != CoResidency::Required {
            return Ok(());
        }
        let d = self.group.device(rank);
        let cap = Capacity::of(d, &self.kernels[rank as usize], &self.spec)?;
        cap.check(&self.name, self.spec.workgroups())
    }

    /// Enqueues one launch of rank `rank` alone on the caller's stream `stream`, with the
    /// addresses bound last: the launch of a process that drives one rank of a group of one
    /// process per rank ([`KernelInstance::import_peers`]). Returns its epoch.
    ///
    /// # Safety
    /// As [`KernelInstance::launch_on_streams`], for rank `rank`.
    pub unsafe fn launch_rank_on_stream(&mut self, rank: u32, stream: u64) -> Result<u32> {
        if rank >= self.group.tp() {
            return Err(self.err(format!("rank {rank} of a group of {}", self.group.tp())));
        }
        if self.poisoned {
            self.reset()?;
        }
        let epoch = self.epochs.next();
        let args = self.args(rank, epoch)?;
        let d = self.group.device(rank);
        // SAFETY: as in `launch_on_streams`, for one rank.
        let launched = unsafe {
            d.launch_on_raw_stream(&self.kernels[rank as usize], &self.spec, &args, stream)
        };
        if let Err(e) = launched {
            self.poisoned = true;
            return Err(e.into());
        }
        Ok(epoch)
    }

    /// Enqueues one launch of every rank, rank r on the caller's stream `streams[r]` (a raw
    /// `CUstream` / `hipStream_t`), with the addresses bound last ([`bind_addresses`]); returns
    /// the launch's epoch. Nothing is allocated, compiled or waited for, so the launch can be
    /// captured into the caller's graph. Ranks sharing a device must be given different streams
    /// (their grids wait for each other). Call [`KernelInstance::check_coresidency`] once first.
    ///
    /// # Safety
    /// Every bound address must be a live array of the parameter's length on its rank's device
    /// until the launch completes; `streams[r]` must be a live stream of rank r's device.
    ///
    /// [`bind_addresses`]: KernelInstance::bind_addresses
    pub unsafe fn launch_on_streams(&mut self, streams: &[u64]) -> Result<u32> {
        let tp = self.group.tp();
        if streams.len() != tp as usize {
            return Err(self.err(format!("{} streams for {tp} ranks", streams.len())));
        }
        if self.alone.is_some() || self.poisoned {
            self.reset()?;
        }
        let epoch = self.epochs.next();
        for r in 0..tp {
            let args = self.args(r, epoch)?;
            let d = self.group.device(r);
            // SAFETY: the arguments follow the kernel's parameter list in ABI order (runtime-owned
            // arrays, caller arrays the caller vouches for, peer tables, u32 scalars); the
            // caller vouches for the stream; co-residency was checked by `check_coresidency`.
            let launched = unsafe {
                d.launch_on_raw_stream(
                    &self.kernels[r as usize],
                    &self.spec,
                    &args,
                    streams[r as usize],
                )
            };
            if let Err(e) = launched {
                self.poisoned = true;
                return Err(e.into());
            }
        }
        Ok(epoch)
    }

    /// Enqueues one launch of all ranks through the kernel's ranks entry
    /// ([`KernelInstance::launches_ranks_entry`]: ranks sharing a device, one grid of
    /// `tp × grid` workgroups) on the caller's stream `stream`, with the addresses bound last;
    /// returns its epoch. No fork and join of streams: the ranks' workgroups run concurrently
    /// within the one launch (co-residency: [`KernelInstance::check_coresidency`], once first).
    ///
    /// # Safety
    /// As [`KernelInstance::launch_on_streams`]; `stream` a live stream of the group's device.
    pub unsafe fn launch_ranks_on_stream(&mut self, stream: u64) -> Result<u32> {
        if self.ranks_kernel.is_none() {
            return Err(self.err(
                "no ranks entry: the kernel was not generated for ranks on one device, or the \
                 group is not a fused-grid group"
                    .into(),
            ));
        }
        if self.alone.is_some() || self.poisoned {
            self.reset()?;
        }
        let epoch = self.epochs.next();
        let args = self.ranks_args(epoch)?;
        let mut spec = self.spec.clone();
        spec.grid[0] = spec.grid[0]
            .checked_mul(self.group.tp())
            .ok_or_else(|| self.err("the ranks' grid overflows".into()))?;
        let kernel = self.ranks_kernel.as_ref().expect("checked above");
        // SAFETY: the arguments follow the ranks entry's ABI (`ranks_args`); the caller vouches
        // for the addresses and the stream; co-residency was checked by `check_coresidency`.
        let launched = unsafe {
            self.group
                .device(0)
                .launch_on_raw_stream(kernel, &spec, &args, stream)
        };
        if let Err(e) = launched {
            self.poisoned = true;
            return Err(e.into());
        }
        Ok(epoch)
    }
}
