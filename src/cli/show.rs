//! `mess show`: prints a thread file exactly as stored.

use crate::cli::{CliError, Context, output};

/// Arguments of `mess show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// A ref, one of your client ids, or `last`
    re: String,
}

pub(crate) fn run(cx: &Context, args: ShowArgs) -> Result<(), CliError> {
    let thread = cx.thread(&args.re)?;
    output::raw(thread.text());
    Ok(())
}
