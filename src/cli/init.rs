//! `mess init`: creates the home layout and a commented example config.yaml.

use crate::cli::config::EXAMPLE_CONFIG;
use crate::cli::{CliError, Context, output};

/// Arguments of `mess init`.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {}

pub(crate) fn run(cx: &Context, _args: InitArgs) -> Result<(), CliError> {
    let wrote = cx.exchange.upkeep().init_home(Some(EXAMPLE_CONFIG))?;
    let home = cx.config.home.display();
    output::line(&format!("initialized exchange home {home}"));
    if wrote {
        output::line(&format!(
            "wrote example {home}/config.yaml (edit executors and routing there)"
        ));
    } else {
        output::line(&format!("kept existing {home}/config.yaml"));
    }
    Ok(())
}
