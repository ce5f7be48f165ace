//! What differs between the HIP and the CUDA runtime API in the launcher: names, allocation
//! flavours and compiler flags. Everything else is written once, with the API prefix.

use crate::abi::{AbiPurpose, Memory};
use crate::target::{Arch, Vendor};

/// The host runtime API a launcher calls.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// The HIP runtime (`hip_runtime.h`, libamdhip64), for AMD targets.
    Hip,
    /// The CUDA runtime (`cuda_runtime.h`, cudart linked statically by nvcc), for NVIDIA targets.
    Cuda,
}

impl Host {
    /// The runtime of `arch`'s vendor.
    pub fn of(arch: Arch) -> Host {
        match arch.vendor() {
            Vendor::Amd => Host::Hip,
            Vendor::Nvidia => Host::Cuda,
        }
    }

    /// The prefix of every runtime name (`hipMalloc`, `cudaMalloc`).
    pub(super) fn api(self) -> &'static str {
        match self {
            Host::Hip => "hip",
            Host::Cuda => "cuda",
        }
    }

    pub(super) fn extension(self) -> &'static str {
        match self {
            Host::Hip => "hip",
            Host::Cuda => "cu",
        }
    }

    pub(super) fn include(self) -> &'static str {
        match self {
            Host::Hip => "hip/hip_runtime.h",
            Host::Cuda => "cuda_runtime.h",
        }
    }

    /// The struct a stream handle points to, so the header needs no runtime header:
    /// `hipStream_t` is `ihipStream_t*`, `cudaStream_t` is `CUstream_st*`.
    pub(super) fn stream_struct(self) -> &'static str {
        match self {
            Host::Hip => "ihipStream_t",
            Host::Cuda => "CUstream_st",
        }
    }

    /// The `hipDeviceAttribute_t` / `cudaDeviceAttr` of the CU / SM count.
    pub(super) fn cu_count_attr(self) -> &'static str {
        match self {
            Host::Hip => "hipDeviceAttributeMultiprocessorCount",
            Host::Cuda => "cudaDevAttrMultiProcessorCount",
        }
    }

    pub(super) fn pointer_attributes(self) -> &'static str {
        match self {
            Host::Hip => "hipPointerAttribute_t",
            Host::Cuda => "cudaPointerAttributes",
        }
    }

    pub(super) fn host_alloc(self) -> &'static str {
        match self {
            Host::Hip => "hipHostMalloc(host, bytes, hipHostMallocMapped)",
            Host::Cuda => "cudaHostAlloc(host, bytes, cudaHostAllocMapped)",
        }
    }

    pub(super) fn host_free(self) -> &'static str {
        match self {
            Host::Hip => "hipHostFree",
            Host::Cuda => "cudaFreeHost",
        }
    }

    /// The compiler's variable in the build script, the environment it runs in, and its flags
    /// for a shared library of `arch`.
    pub(super) fn compiler(self, arch: Arch) -> (&'static str, &'static str, String) {
        let target = match arch {
            Arch::Gfx906 => "--offload-arch=gfx906",
            Arch::Sm90 => "-arch=sm_90",
        };
        match self {
            // hipcc picks the CUDA platform when it finds nvcc on PATH; the kernel is AMD's.
            Host::Hip => (
                "HIPCC",
                "HIP_PLATFORM=amd HIP_COMPILER=clang ",
                format!("{target} -O3 -fPIC -shared"),
            ),
            Host::Cuda => ("NVCC", "", format!("{target} -O3 -Xcompiler -fPIC -shared")),
        }
    }

    /// How an owned array is allocated when a (hand-written) ABI does not say: as the runtime
    /// does (flags polled across devices uncached on AMD, §5.12; peer arrays coherent).
    pub(super) fn default_memory(self, purpose: AbiPurpose, tp: u32, peer: bool) -> Memory {
        match (self, purpose) {
            (Host::Hip, AbiPurpose::Flags) if peer || tp > 1 => Memory::Uncached,
            _ if peer => Memory::FineGrained,
            _ => Memory::Device,
        }
    }

    /// The allocation helper of `m` (named [`alloc_fn`]): `int f(void** dev, void** host, size_t
    /// bytes)` returning the runtime's error code; `host` is set for host-mapped memory only.
    pub(super) fn alloc_helper(self, m: Memory) -> String {
        let api = self.api();
        let (why, body) = match (self, m) {
            (_, Memory::Device) => ("", format!("(void)host;\n    return (int){api}Malloc(dev, bytes);")),
            (Host::Hip, Memory::FineGrained) => (
                "// Peers write it over PCIe / xGMI (§5.12): fine-grained memory, coherent at system scope.\n",
                "(void)host;\n    return (int)hipExtMallocWithFlags(dev, bytes, hipDeviceMallocFinegrained);".to_owned(),
            ),
            (Host::Hip, Memory::Uncached) => (
                "// Flags polled across devices (§5.12): uncached where the runtime knows the flag\n\
                 // (hipDeviceMallocUncached = 0x3, ROCm >= 5.3), else fine-grained (coherent at system\n\
                 // scope, which the kernel's fences and atomics assume).\n",
                "(void)host;\n    \
                 hipError_t rc = hipExtMallocWithFlags(dev, bytes, 0x3);\n    \
                 if (rc == hipErrorInvalidValue) {\n        \
                 (void)hipGetLastError();\n        \
                 rc = hipExtMallocWithFlags(dev, bytes, hipDeviceMallocFinegrained);\n    \
                 }\n    \
                 return (int)rc;".to_owned(),
            ),
            (Host::Cuda, Memory::FineGrained | Memory::Uncached) => (
                "// NVIDIA device memory is coherent for the kernel's system-scope atomics and fences once\n\
                 // peer access is enabled: fine-grained and uncached arrays are ordinary device memory.\n",
                "(void)host;\n    return (int)cudaMalloc(dev, bytes);".to_owned(),
            ),
            (_, Memory::HostMapped) => (
                "// Read by the host without a synchronisation (the error word): host memory the device maps.\n",
                format!(
                    "int rc = (int){};\n    \
                     if (rc == 0) rc = (int){api}HostGetDevicePointer(dev, *host, 0);\n    \
                     return rc;",
                    self.host_alloc()
                ),
            ),
        };
        format!(
            "{why}static int {}(void** dev, void** host, size_t bytes) {{\n    {body}\n}}\n\n",
            alloc_fn(m)
        )
    }
}

/// The allocation helper of `m`.
pub(super) fn alloc_fn(m: Memory) -> &'static str {
    match m {
        Memory::Device => "wfl_alloc_device",
        Memory::FineGrained => "wfl_alloc_fine_grained",
        Memory::Uncached => "wfl_alloc_uncached",
        Memory::HostMapped => "wfl_alloc_host_mapped",
    }
}
