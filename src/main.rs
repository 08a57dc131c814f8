//! The `mess` binary: hands over to the CLI and turns its outcome into an exit code.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    mess::cli::run()
}
