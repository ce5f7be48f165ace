//! Memory shared between processes (CUDA / HIP IPC): how ranks that live in different processes
//! (one process per GPU, under `torch.distributed`) reach each other's flags and payload buffers.
//! The owner exports a handle ([`Device::ipc_handle`](super::Device::ipc_handle)); every other
//! process maps it ([`Device::ipc_open`](super::Device::ipc_open)) into a [`PeerMapping`].

use super::DeviceBuffer;

/// Another process's allocation mapped into this one: a device address valid in this process,
/// unmapped when dropped. It never frees the memory: its owner does.
pub struct PeerMapping {
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
    pub(crate) ordinal: usize,
    /// Unmaps (cuIpcCloseMemHandle); run once, on drop.
    pub(crate) close: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl std::fmt::Debug for PeerMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerMapping")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("bytes", &self.bytes)
            .field("ordinal", &self.ordinal)
            .finish()
    }
}

impl DeviceBuffer for PeerMapping {
    fn ptr(&self) -> u64 {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
}

impl Drop for PeerMapping {
    fn drop(&mut self) {
        if let Some(close) = self.close.take() {
            close();
        }
    }
}
