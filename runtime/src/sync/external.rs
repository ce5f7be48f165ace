//! A bound kernel inside an engine: launched on the engine's streams (PyTorch's current stream)
//! with the engine's arrays (tensor data pointers), with no allocation, compile or host
//! synchronisation per launch. The synchronisation state stays the instance's own: it was
//! allocated and zeroed when the instance was built (DESIGN.md §5.4, §10).

use wavefuse_codegen::lowered::{ParamKind, Purpose};

use super::{Binding, KernelInstance};
use crate::device::Device;
use crate::error::Result;
use crate::launch::{Capacity, CoResidency};
use crate::rank::{Placement, SameDeviceMode};

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
        for p in &self.params {
            let (elem, len, buffer, part) = match &p.kind {
                ParamKind::Array {
                    elem,
                    len,
                    purpose: Purpose::Data { buffer, part },
                    ..
                }
                | ParamKind::PeerArrays {
                    elem,
                    len,
                    purpose: Purpose::Data { buffer, part },
                    ..
                } => (elem, len, buffer, *part),
                _ => continue,
            };
            if !out.iter().any(|d| d.buffer == *buffer && d.part == part) {
                out.push(DataParam {
                    buffer: buffer.clone(),
                    part,
                    elem_bytes: elem.bytes(),
                    len: *len,
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
        self.fused = None;
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
    /// rank sharing a device. Also refuses a fused-grid group, which launches all ranks as one
    /// grid.
    pub fn check_coresidency(&self) -> Result<()> {
        if let Placement::SameDevice(SameDeviceMode::FusedGrid) = self.group.placement() {
            return Err(self.err(
                "a FusedGrid group cannot launch on caller streams; use SameDeviceMode::Streams"
                    .into(),
            ));
        }
        if self.spec.coresidency != CoResidency::Required {
            return Ok(());
        }
        let sharing = match self.group.placement() {
            Placement::SameDevice(_) => u64::from(self.group.tp()),
            _ => 1,
        };
        for r in 0..self.group.tp() {
            let d = self.group.device(r);
            let cap = Capacity::of(d, &self.kernels[r as usize], &self.spec)?;
            cap.check(&self.name, self.spec.workgroups() * sharing)?;
        }
        Ok(())
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
}
