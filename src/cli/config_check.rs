//! `mess config check`: reads config.yaml (and the registrations, routing rules and capability
//! catalog beside it) as the exchange will, prints every problem with its fix (an unknown key
//! with the key it most likely meant, a value that cannot be used, a channel without its
//! token), and exits non-zero when there is one, so a deploy script can stop on a typo.

use crate::cli::{CliError, Context, output};

/// Arguments of `mess config`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    action: ConfigAction,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigAction {
    /// Check config.yaml and the registry files; exit 1 on any problem
    Check,
}

pub(crate) fn run(cx: &Context, args: ConfigArgs) -> Result<(), CliError> {
    match args.action {
        ConfigAction::Check => check(cx),
    }
}

fn check(cx: &Context) -> Result<(), CliError> {
    // Values that cannot be used at all stop every command while the settings are read, before
    // this runs; what is left are keys and entries the exchange passes over.
    let problems = cx.exchange.config_problems();
    for problem in &problems {
        output::line(&format!("problem: {problem}"));
    }
    let directory = cx.exchange.directory();
    let path = cx.config.home.join("config.yaml");
    if problems.is_empty() {
        output::line(&format!(
            "{}: ok ({} executor(s), {} routing rule(s))",
            path.display(),
            directory.executors.len(),
            directory.rules.len()
        ));
        return Ok(());
    }
    Err(CliError::with_hint(
        format!("{} problem(s) in the configuration", problems.len()),
        "each line above names what to change; `mess config check` again when done",
    ))
}
