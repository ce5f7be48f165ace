//! The `wavefuse` binary: [`wavefuse_cli::main`].

fn main() -> std::process::ExitCode {
    wavefuse_cli::main()
}
