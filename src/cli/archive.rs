//! `mess archive`: moves old finished and canceled threads to `archive/YYYY-MM/`.

use crate::cli::{CliError, Context, Progress, output, when};

/// Arguments of `mess archive`.
#[derive(Debug, clap::Args)]
pub(crate) struct ArchiveArgs {
    /// Archive threads last updated longer ago than this: a duration (30d, 12h, P30D) or a time
    /// (2026-11-01, `3 weeks ago`)
    #[arg(long, default_value = "30d", value_name = "DURATION")]
    older_than: String,
}

pub(crate) fn run(cx: &Context, args: ArchiveArgs) -> Result<(), CliError> {
    let age = when::span(
        "--older-than",
        &args.older_than,
        chrono::Utc::now(),
        when::Toward::Past,
    )?;
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
