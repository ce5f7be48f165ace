//! Disassembly of AMD code objects with `llvm-objdump` from the LLVM hipcc uses: what the gfx906
//! time model ([`wavefuse_codegen::model::HotLoop`]) and the ISA tests count instructions in.

use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;

use super::child::{self, Bounds, ChildError};
use super::{INSTALL_HINT, process};

/// Why a code object could not be disassembled.
#[derive(Debug, thiserror::Error)]
pub enum DisasmError {
    /// llvm-objdump is not installed.
    #[error("llvm-objdump not found: {0}; to install it, {INSTALL_HINT}")]
    Missing(String),
    /// Only AMD code objects are disassembled here.
    #[error("no disassembler for {}: only AMD code objects are disassembled", .0.name())]
    WrongTarget(Arch),
    /// Writing the image to a scratch file failed.
    #[error("llvm-objdump: {0}")]
    Io(String),
    /// llvm-objdump did not finish or could not be started.
    #[error("llvm-objdump: {0}")]
    Stopped(#[from] ChildError),
    /// llvm-objdump ran and failed.
    #[error("llvm-objdump failed: {0}")]
    Failed(String),
}

/// `llvm-objdump` from `$WAVEFUSE_LLVM_OBJDUMP`, else LLVM 15's (the one Debian's hipcc uses),
/// else `llvm-objdump` on `PATH`.
pub fn objdump() -> Result<std::path::PathBuf, DisasmError> {
    process::locate(
        "WAVEFUSE_LLVM_OBJDUMP",
        "llvm-objdump-15",
        &["/usr/lib/llvm-15/bin/llvm-objdump", "/usr/bin/llvm-objdump"],
    )
    .map_err(DisasmError::Missing)
}

/// The disassembly (`llvm-objdump -d --mcpu=ARCH`) of an AMD code object `image` (an
/// [`Artifact`](super::Artifact)'s image from hipcc or hiprtc), run within `bounds`.
pub fn disassemble(image: &[u8], arch: Arch, bounds: &Bounds) -> Result<String, DisasmError> {
    if arch.vendor() != Vendor::Amd {
        return Err(DisasmError::WrongTarget(arch));
    }
    let tool = objdump()?;
    let dir = tempfile::Builder::new()
        .prefix("wavefuse-objdump-")
        .tempdir()
        .map_err(|e| DisasmError::Io(format!("creating a temporary directory: {e}")))?;
    let path = dir.path().join("kernel.co");
    std::fs::write(&path, image)
        .map_err(|e| DisasmError::Io(format!("writing {}: {e}", path.display())))?;
    let mut cmd = Command::new(tool);
    cmd.arg("-d")
        .arg(format!("--mcpu={}", arch.name()))
        .arg(&path);
    let out = child::run(&mut cmd, bounds)?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(DisasmError::Failed(out.describe()))
    }
}
