//! Kernels of a user's crate, by name, for the `wavefuse` commands ([`crate::main_with`]).

use std::ffi::{OsStr, OsString};

use wavefuse::ir::Kernel;
use wavefuse_harness::KernelId;

/// The commands that take a kernel by name and also `--kernel-file`.
const KERNEL_COMMANDS: [&str; 6] = ["emit", "check", "sim", "run", "ab", "tune"];

/// Named kernels of one's own: validated, their names distinct from each other and from the
/// kernel set's.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    kernels: Vec<Kernel>,
}

impl Registry {
    /// No kernels: the `wavefuse` commands as they are.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// `kernel` added under its name (the IR's). An invalid kernel, a name of the set's or one
    /// already registered is an error naming it.
    pub fn with(mut self, kernel: Kernel) -> Result<Registry, String> {
        let name = kernel.name().to_owned();
        wavefuse::ir::validate(&kernel)
            .map_err(|e| wavefuse_harness::generate::invalid_kernel(&name, &e))?;
        if KernelId::ALL.iter().any(|id| id.name() == name) {
            return Err(format!(
                "`{name}` is a kernel of the set; give yours another name"
            ));
        }
        if self.kernels.iter().any(|k| k.name() == name) {
            return Err(format!("two kernels are named `{name}`"));
        }
        self.kernels.push(kernel);
        Ok(self)
    }

    /// The registered kernels, in the order they were added.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// `args` (program name first) with a registered kernel's name, where the subcommand takes a
    /// kernel, replaced by `--kernel-file` and a file holding its textual IR (in a temporary
    /// directory that lives as long as the result). A flag's value is never taken for a name.
    pub(crate) fn resolve(
        &self,
        args: Vec<OsString>,
        cli: &clap::Command,
    ) -> Result<Resolved, String> {
        let mut out = Resolved {
            args: Vec::with_capacity(args.len() + 1),
            _dir: None,
        };
        let mut it = args.into_iter();
        out.args.extend(it.next());
        let mut sub: Option<&clap::Command> = None;
        let mut takes_value = false;
        for a in it {
            if self.kernels.is_empty() {
                out.args.push(a);
                continue;
            }
            let text = a.to_string_lossy().into_owned();
            if std::mem::take(&mut takes_value) {
                out.args.push(a);
                continue;
            }
            if let Some(flag) = text.strip_prefix('-') {
                if !text.contains('=') {
                    let cmd = sub.unwrap_or(cli);
                    takes_value = cmd.get_arguments().any(|arg| {
                        let named = match flag.strip_prefix('-') {
                            Some(long) => arg.get_long() == Some(long),
                            None => flag.chars().next() == arg.get_short() && flag.len() == 1,
                        };
                        named && arg.get_action().takes_values()
                    });
                }
                out.args.push(a);
                continue;
            }
            let Some(cmd) = sub else {
                sub = cli.find_subcommand(OsStr::new(&text));
                out.args.push(a);
                continue;
            };
            let kernel = KERNEL_COMMANDS
                .contains(&cmd.get_name())
                .then(|| self.kernels.iter().find(|k| k.name() == text))
                .flatten();
            match kernel {
                Some(k) => {
                    let path = out.file_for(k)?;
                    out.args.push("--kernel-file".into());
                    out.args.push(path.into());
                }
                None => out.args.push(a),
            }
        }
        Ok(out)
    }
}

/// Arguments with registered kernels resolved to files (kept while this lives).
pub(crate) struct Resolved {
    args: Vec<OsString>,
    _dir: Option<tempfile::TempDir>,
}

impl Resolved {
    /// The arguments.
    pub(crate) fn args(&self) -> Vec<OsString> {
        self.args.clone()
    }

    fn file_for(&mut self, k: &Kernel) -> Result<std::path::PathBuf, String> {
        if self._dir.is_none() {
            let dir = tempfile::Builder::new()
                .prefix("wavefuse-kernels-")
                .tempdir()
                .map_err(|e| format!("a temporary directory for the registered kernels: {e}"))?;
            self._dir = Some(dir);
        }
        let dir = self._dir.as_ref().expect("just made").path();
        let path = dir.join(format!("{}.wfir", k.name()));
        std::fs::write(&path, k.to_string())
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    wavefuse::kernel! {
        pub fn double(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); }
    }

    fn resolve(r: &Registry, args: &[&str]) -> Vec<String> {
        let cli = <crate::Cli as clap::CommandFactory>::command();
        let args = args.iter().map(OsString::from).collect();
        let res = r.resolve(args, &cli).expect("resolves");
        res.args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_registered_name_becomes_its_ir_file_and_flag_values_stay() {
        let r = Registry::new().with(double(256)).expect("registers");
        let got = resolve(
            &r,
            &["w", "emit", "--out", "double", "double", "--target", "sm90"],
        );
        assert_eq!(got[..4], ["w", "emit", "--out", "double"], "{got:?}");
        assert_eq!(got[4], "--kernel-file");
        assert!(got[5].ends_with("double.wfir"), "{got:?}");
        assert_eq!(got[6..], ["--target", "sm90"]);
        // `--flag=value` takes no next token; a command without kernels keeps the name.
        let got = resolve(&r, &["w", "sim", "--schedules=4", "double"]);
        assert_eq!(got[3], "--kernel-file", "{got:?}");
        let got = resolve(&r, &["w", "list", "double"]);
        assert_eq!(got, ["w", "list", "double"]);
        // The set's names pass through untouched.
        let got = resolve(&r, &["w", "emit", "gemv_int4", "--target", "sm90"]);
        assert_eq!(got, ["w", "emit", "gemv_int4", "--target", "sm90"]);
    }

    #[test]
    fn the_file_holds_the_kernel_as_printed() {
        let r = Registry::new().with(double(256)).expect("registers");
        let cli = <crate::Cli as clap::CommandFactory>::command();
        let res = r
            .resolve(["w", "emit", "double"].map(OsString::from).to_vec(), &cli)
            .expect("resolves");
        let path = res.args()[3].clone();
        let text = std::fs::read_to_string(&path).expect("written");
        assert_eq!(wavefuse::ir::parse(&text).expect("parses"), double(256));
        drop(res);
        assert!(
            !std::path::Path::new(&path).exists(),
            "removed with the arguments"
        );
    }

    #[test]
    fn names_of_the_set_and_duplicates_are_refused() {
        use wavefuse_harness::suite::{CaseSpec, ShapeKind, op_kernel};
        let id = KernelId::ALL[0];
        let set_kernel = op_kernel(&CaseSpec::of(id, 1, 1, ShapeKind::Model))
            .expect("builds")
            .expect("model shapes");
        let e = Registry::new().with(set_kernel).unwrap_err();
        assert_eq!(
            e,
            format!(
                "`{}` is a kernel of the set; give yours another name",
                id.name()
            )
        );
        let e = Registry::new()
            .with(double(256))
            .and_then(|r| r.with(double(512)))
            .unwrap_err();
        assert_eq!(e, "two kernels are named `double`");
    }
}
