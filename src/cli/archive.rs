//! `mess archive`: moves old finished and canceled threads to `archive/YYYY-MM/`.

use crate::cli::{CliError, Context, Progress, output};
use crate::protocol::time;

/// Arguments of `mess archive`.
#[derive(Debug, clap::Args)]
pub(crate) struct ArchiveArgs {
    /// Archive threads last updated longer ago than this (e.g. 30d, 12h, P30D)
    #[arg(long, default_value = "30d", value_name = "DURATION")]
    older_than: String,
}

pub(crate) fn run(cx: &Context, args: ArchiveArgs) -> Result<(), CliError> {
    let age = time::parse_any_duration(&args.older_than)
        .map_err(|e| CliError::usage(format!("--older-than: {e}"), "e.g. --older-than 30d"))?;
    let mut progress = Progress::new("archiving");
    let report = cx
        .exchange
        .upkeep()
        .archive(age.length, &mut |d, t| progress.update(d, t));
    for (r, month) in &report.moved {
        output::line(&format!("{r} -> archive/{month}"));
    }
    output::line(&format!("archived {} thread(s)", report.moved.len()));
    if let Some(first) = report.errors.first() {
        return Err(CliError::with_hint(
            format!(
                "{} file(s) could not be archived, e.g. {first}",
                report.errors.len()
            ),
            "run `mess fsck` for details",
        ));
    }
    Ok(())
}
