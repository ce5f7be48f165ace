//! The ABI-agnostic launch core: typed kernel arguments, launch geometry, and the co-residency
//! rule of DESIGN.md §5.9.
//!
//! A kernel with a grid barrier (or cross-rank flags between workgroups of one launch) deadlocks
//! when some of its workgroups wait for others that cannot be scheduled until the waiters exit.
//! [`launch`] therefore refuses such a kernel when its grid exceeds the co-resident capacity
//! (occupancy-derived workgroups per CU/SM × CU/SM count, from the driver's occupancy calculator),
//! and launches it cooperatively where the driver offers that for module kernels (CUDA always;
//! HIP where `hipModuleLaunchCooperativeKernel` exists), so the driver guarantees co-residency too.

use std::ffi::c_void;

use crate::device::{Device, DeviceBuffer, LoadedKernel};
use crate::error::{Error, Result};

/// One kernel argument, by value.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelArg {
    /// A device pointer (any pointee type).
    Ptr(u64),
    /// A table of device pointers passed by value (a `struct { T* p[N]; }` parameter).
    PtrArray(Vec<u64>),
    /// A 32-bit unsigned scalar.
    U32(u32),
    /// A 32-bit signed scalar.
    I32(i32),
    /// A 32-bit float scalar.
    F32(f32),
    /// A 64-bit unsigned scalar.
    U64(u64),
}

impl KernelArg {
    /// The device address of `buf`.
    pub fn buffer(buf: &impl DeviceBuffer) -> KernelArg {
        KernelArg::Ptr(buf.ptr())
    }

    /// The argument's bytes, as the kernel's parameter holds them (little-endian targets).
    fn bytes(&self) -> Vec<u8> {
        match self {
            KernelArg::Ptr(p) | KernelArg::U64(p) => p.to_le_bytes().to_vec(),
            KernelArg::PtrArray(ps) => ps.iter().flat_map(|p| p.to_le_bytes()).collect(),
            KernelArg::U32(v) => v.to_le_bytes().to_vec(),
            KernelArg::I32(v) => v.to_le_bytes().to_vec(),
            KernelArg::F32(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// Arguments laid out for `cuLaunchKernel` / `hipModuleLaunchKernel`: one pointer per parameter,
/// each to that parameter's bytes. The storage is 8-byte aligned and lives as long as this value.
pub(crate) struct Marshalled {
    _storage: Vec<Box<[u64]>>,
    pointers: Vec<*mut c_void>,
}

impl Marshalled {
    pub(crate) fn new(args: &[KernelArg]) -> Marshalled {
        let storage: Vec<Box<[u64]>> = args
            .iter()
            .map(|a| {
                let bytes = a.bytes();
                let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)].into_boxed_slice();
                for (i, b) in bytes.iter().enumerate() {
                    words[i / 8] |= u64::from(*b) << (8 * (i % 8));
                }
                words
            })
            .collect();
        let pointers = storage.iter().map(|w| w.as_ptr() as *mut c_void).collect();
        Marshalled {
            _storage: storage,
            pointers,
        }
    }

    /// The `void**` array the drivers take (they only read through it).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        self.pointers.as_mut_ptr()
    }

    pub(crate) fn pointers_mut(&mut self) -> &mut [*mut c_void] {
        &mut self.pointers
    }
}

/// Whether all workgroups of a launch must be resident at once: a launch mode, not the kernel's
/// requirement. The requirement (how many workgroups, why, and the fit that makes a grid meet
/// it) is codegen's one [`wavefuse_codegen::lower::CoResidency`], carried by the ABI; a launcher
/// turns it into this mode, and [`launch`] checks the driver's capacity for it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CoResidency {
    /// Workgroups never wait for each other.
    NotRequired,
    /// The kernel has a grid barrier or waits on flags set by other workgroups (DESIGN.md §5.9).
    Required,
}

/// The geometry of one launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchSpec {
    /// Workgroups in x, y, z.
    pub grid: [u32; 3],
    /// Lanes per workgroup in x, y, z.
    pub block: [u32; 3],
    /// Dynamic LDS / shared memory per workgroup, in bytes.
    pub dynamic_lds: u32,
    /// The co-residency requirement.
    pub coresidency: CoResidency,
    /// Launch as a programmatic dependent of the previous kernel of the stream (CUDA's
    /// programmatic stream serialization): the kernel's workgroups may be scheduled before that
    /// kernel has completed, so only a kernel that waits for it before touching memory may be
    /// launched so ([`Abi::dependent_launch`](wavefuse_codegen::abi::Abi::dependent_launch)).
    /// Ignored where the device has no such launch (HIP) and for a launch that needs
    /// co-residency (every device makes it in plain stream order: a dependent's early workgroups
    /// would hold the slots the capacity check counts on): the kernel then runs in stream order,
    /// where its wait returns at once. [`LaunchSpec::programmatic`] says which.
    pub dependent: bool,
}

impl LaunchSpec {
    /// A one-dimensional launch with no dynamic LDS and no co-residency requirement.
    pub fn linear(grid: u32, block: u32) -> LaunchSpec {
        LaunchSpec {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            dynamic_lds: 0,
            coresidency: CoResidency::NotRequired,
            dependent: false,
        }
    }

    /// The same launch, requiring co-residency.
    pub fn coresident(mut self) -> LaunchSpec {
        self.coresidency = CoResidency::Required;
        self
    }

    /// Whether the launch is made as a programmatic dependent: asked for, and the kernel does
    /// not need co-residency ([`LaunchSpec::dependent`]).
    pub fn programmatic(&self) -> bool {
        self.dependent && self.coresidency == CoResidency::NotRequired
    }

    /// Total workgroups.
    pub fn workgroups(&self) -> u64 {
        self.grid.iter().map(|&g| u64::from(g)).product()
    }

    /// Lanes per workgroup.
    pub fn block_threads(&self) -> u32 {
        self.block.iter().product()
    }
}

/// How many workgroups a device can hold at once for one kernel and geometry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Resident workgroups per CU/SM (occupancy).
    pub blocks_per_cu: u32,
    /// CUs/SMs of the device.
    pub compute_units: u32,
}

impl Capacity {
    /// Workgroups resident at once.
    pub fn total(&self) -> u64 {
        u64::from(self.blocks_per_cu) * u64::from(self.compute_units)
    }

    /// The capacity of `device` for `kernel` launched with `spec`'s block size and LDS.
    pub fn of<D: Device>(device: &D, kernel: &D::Kernel, spec: &LaunchSpec) -> Result<Capacity> {
        let blocks_per_cu = device.blocks_per_cu(kernel, spec.block_threads(), spec.dynamic_lds)?;
        Ok(Capacity {
            blocks_per_cu,
            compute_units: device.info().compute_units,
        })
    }

    /// Refuses `workgroups` co-resident workgroups of `kernel` when they do not fit.
    pub fn check(&self, kernel: &str, workgroups: u64) -> Result<()> {
        if workgroups <= self.total() {
            return Ok(());
        }
        Err(Error::NotCoResident {
            kernel: kernel.to_owned(),
            workgroups,
            capacity: self.total(),
            blocks_per_cu: self.blocks_per_cu,
            compute_units: self.compute_units,
        })
    }
}

/// Launches `kernel` with the co-residency rule: a kernel that requires co-residency is refused
/// when its grid exceeds the device's capacity, and launched cooperatively where the device
/// supports that.
///
/// # Safety
/// As [`Device::launch_raw`]: `args` must match the kernel's parameters and every pointer in them
/// must stay valid while the kernel runs.
pub unsafe fn launch<D: Device>(
    device: &D,
    kernel: &D::Kernel,
    spec: &LaunchSpec,
    args: &[KernelArg],
    stream: &D::Stream,
) -> Result<()> {
    let cooperative = match spec.coresidency {
        CoResidency::NotRequired => false,
        CoResidency::Required => {
            Capacity::of(device, kernel, spec)?.check(kernel.name(), spec.workgroups())?;
            device.info().cooperative_launch
        }
    };
    // SAFETY: the caller upholds the argument contract; co-residency was checked above.
    unsafe { device.launch_raw(kernel, spec, args, stream, cooperative) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marshalled_arguments_hold_their_bytes() {
        let args = [
            KernelArg::Ptr(0x1122_3344_5566_7788),
            KernelArg::U32(7),
            KernelArg::F32(1.5),
            KernelArg::PtrArray(vec![1, 2, 3]),
            KernelArg::I32(-2),
        ];
        let mut m = Marshalled::new(&args);
        let p = m.pointers_mut().to_vec();
        assert_eq!(p.len(), 5);
        // SAFETY: each pointer points at the storage of the corresponding argument, which `m` owns.
        unsafe {
            assert_eq!(*(p[0] as *const u64), 0x1122_3344_5566_7788);
            assert_eq!(*(p[1] as *const u32), 7);
            assert_eq!(*(p[2] as *const f32), 1.5);
            assert_eq!(
                std::slice::from_raw_parts(p[3] as *const u64, 3),
                &[1, 2, 3]
            );
            assert_eq!(*(p[4] as *const i32), -2);
        }
        for ptr in p {
            assert_eq!(ptr as usize % 8, 0);
        }
    }

    #[test]
    fn capacity_refuses_a_grid_that_cannot_be_resident() {
        let cap = Capacity {
            blocks_per_cu: 2,
            compute_units: 132,
        };
        assert!(cap.check("k", 264).is_ok());
        let err = cap.check("k", 265).unwrap_err();
        assert!(matches!(
            err,
            Error::NotCoResident {
                workgroups: 265,
                capacity: 264,
                ..
            }
        ));
        assert!(err.to_string().contains("would deadlock"), "{err}");
        assert!(
            Capacity {
                blocks_per_cu: 0,
                compute_units: 60
            }
            .check("k", 1)
            .is_err()
        );
    }

    #[test]
    fn launch_spec_counts() {
        let s = LaunchSpec {
            grid: [4, 3, 2],
            block: [64, 2, 1],
            ..LaunchSpec::linear(1, 1)
        }
        .coresident();
        assert_eq!(
            (s.workgroups(), s.block_threads(), s.coresidency),
            (24, 128, CoResidency::Required)
        );
    }
}
