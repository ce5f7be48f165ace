//! hiprtc, ROCm's runtime compiler, loaded with libloading (libhiprtc on ROCm ≥ 5.3; inside
//! libamdhip64 on ROCm 5.2, which is what Debian 12 ships).
//!
//! hiprtc gives no resource report: artifacts from it have an empty [`Artifact::usage`]. Use
//! [`super::Hipcc`] where the report matters (budgets, occupancy checks).

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr;
use std::sync::OnceLock;

use super::process::file_stem;
use super::{
    Artifact, ArtifactFormat, CompileError, CompileRequest, Compiler, CompilerId, amd_target,
};

const ID: CompilerId = CompilerId::Hiprtc;

/// Libraries that may export hiprtc, in preference order.
const LIBRARIES: [&str; 6] = [
    "libhiprtc.so",
    "libhiprtc.so.6",
    "libhiprtc.so.5",
    "libamdhip64.so",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

type Prog = *mut std::ffi::c_void;

/// The hiprtc entry points wavefuse uses.
struct Api {
    library: String,
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    code_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    code: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Prog) -> c_int,
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    _lib: libloading::Library,
}

// SAFETY: the table holds plain C function pointers into a library that stays loaded as long as
// the table (it owns the Library); hiprtc's functions are thread-safe per program.
unsafe impl Send for Api {}
// SAFETY: as above; the table is never mutated after loading.
unsafe impl Sync for Api {}

impl Api {
    fn load() -> Result<&'static Api, CompileError> {
        static API: OnceLock<Result<Api, String>> = OnceLock::new();
        API.get_or_init(|| {
            let mut tried = Vec::new();
            for name in LIBRARIES {
                match Api::from_library(name) {
                    Ok(api) => return Ok(api),
                    Err(e) => tried.push(format!("{name}: {e}")),
                }
            }
            Err(format!(
                "no library exporting hiprtc was found ({})",
                tried.join("; ")
            ))
        })
        .as_ref()
        .map_err(|detail| CompileError::Missing {
            compiler: ID,
            detail: detail.clone(),
        })
    }

    fn from_library(name: &str) -> Result<Api, libloading::Error> {
        // SAFETY: loading the HIP runtime runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new(name) }?;
        // SAFETY: each symbol is looked up with the C signature hiprtc.h declares for it.
        unsafe {
            Ok(Api {
                library: name.to_owned(),
                create: *lib.get(b"hiprtcCreateProgram\0")?,
                compile: *lib.get(b"hiprtcCompileProgram\0")?,
                log_size: *lib.get(b"hiprtcGetProgramLogSize\0")?,
                log: *lib.get(b"hiprtcGetProgramLog\0")?,
                code_size: *lib.get(b"hiprtcGetCodeSize\0")?,
                code: *lib.get(b"hiprtcGetCode\0")?,
                destroy: *lib.get(b"hiprtcDestroyProgram\0")?,
                version: *lib.get(b"hiprtcVersion\0")?,
                error_string: *lib.get(b"hiprtcGetErrorString\0")?,
                _lib: lib,
            })
        }
    }

    /// `call` turned into a typed error naming the API and hiprtc's own error string.
    fn check(&self, api: &str, rc: c_int) -> Result<(), String> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: hiprtcGetErrorString returns a static string (or null) for any code.
        let msg = unsafe { (self.error_string)(rc) };
        let text = if msg.is_null() {
            "unknown error".to_owned()
        } else {
            // SAFETY: non-null, NUL-terminated and static, per hiprtc's contract.
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        };
        Err(format!("{api} failed: {text} ({rc})"))
    }
}

/// hiprtc compiling a HIP translation unit into a gfx906 code object.
#[derive(Debug, Default)]
pub struct Hiprtc {
    version: OnceLock<String>,
}

impl Hiprtc {
    /// hiprtc from the first of libhiprtc.so(.6/.5) and libamdhip64.so(.6/.5) that exports it.
    pub fn new() -> Self {
        Hiprtc::default()
    }
}

/// A hiprtc program, destroyed on drop.
struct Program<'a>(&'a Api, Prog);

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: the program came from hiprtcCreateProgram and is destroyed once, here.
        unsafe { (self.0.destroy)(&mut self.1) };
    }
}

impl Program<'_> {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: live program, valid out-pointer.
        if unsafe { (self.0.log_size)(self.1, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has the size hiprtc reported.
        unsafe { (self.0.log)(self.1, buf.as_mut_ptr().cast()) };
        String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .to_owned()
    }

    fn code(&self) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: live, compiled program; valid out-pointer.
        self.0.check("hiprtcGetCodeSize", unsafe {
            (self.0.code_size)(self.1, &mut size)
        })?;
        let mut code = vec![0u8; size];
        // SAFETY: `code` has the size hiprtc reported.
        self.0.check("hiprtcGetCode", unsafe {
            (self.0.code)(self.1, code.as_mut_ptr().cast())
        })?;
        Ok(code)
    }
}

impl Compiler for Hiprtc {
    fn id(&self) -> CompilerId {
        ID
    }

    fn version(&self) -> Result<String, CompileError> {
        if let Some(v) = self.version.get() {
            return Ok(v.clone());
        }
        let api = Api::load()?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: valid out-pointers.
        let rc = unsafe { (api.version)(&mut major, &mut minor) };
        api.check("hiprtcVersion", rc)
            .map_err(|detail| CompileError::Tool {
                compiler: ID,
                detail,
            })?;
        Ok(self
            .version
            .get_or_init(|| format!("hiprtc {major}.{minor} ({})", api.library))
            .clone())
    }

    fn flags(&self, req: &CompileRequest) -> Result<Vec<String>, CompileError> {
        let target = amd_target(ID, req.arch)?;
        let mut flags = vec![format!("--offload-arch={target}"), "-O3".to_owned()];
        flags.extend(req.extra_flags.iter().cloned());
        Ok(flags)
    }

    fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError> {
        let flags = self.flags(req)?;
        let version = self.version()?;
        let api = Api::load()?;
        let tool_err = |detail: String| CompileError::Tool {
            compiler: ID,
            detail,
        };
        let src = CString::new(req.source.as_str())
            .map_err(|_| tool_err("the source contains a NUL byte".to_owned()))?;
        let name =
            CString::new(format!("{}.hip", file_stem(&req.name))).expect("file_stem has no NUL");
        let mut raw: Prog = ptr::null_mut();
        // SAFETY: valid out-pointer and NUL-terminated strings; no headers are passed.
        let rc = unsafe {
            (api.create)(
                &mut raw,
                src.as_ptr(),
                name.as_ptr(),
                0,
                ptr::null(),
                ptr::null(),
            )
        };
        api.check("hiprtcCreateProgram", rc).map_err(tool_err)?;
        let prog = Program(api, raw);
        let c_flags: Vec<CString> = flags
            .iter()
            .map(|f| CString::new(f.as_str()).expect("flag has no NUL"))
            .collect();
        let ptrs: Vec<*const c_char> = c_flags.iter().map(|f| f.as_ptr()).collect();
        // SAFETY: live program; `ptrs` holds `ptrs.len()` NUL-terminated strings that outlive the call.
        let rc = unsafe { (api.compile)(prog.1, ptrs.len() as c_int, ptrs.as_ptr()) };
        let log = prog.log();
        if let Err(e) = api.check("hiprtcCompileProgram", rc) {
            return Err(CompileError::Failed {
                compiler: ID,
                name: req.name.clone(),
                arch: req.arch,
                log: format!("{e}\n{log}"),
                source_text: req.source.clone(),
            });
        }
        Ok(Artifact {
            compiler: ID,
            compiler_version: version,
            arch: req.arch,
            format: ArtifactFormat::AmdCodeObject,
            flags,
            usage: Default::default(),
            log,
            image: prog.code().map_err(tool_err)?,
        })
    }
}
