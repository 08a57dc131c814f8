//! `mess archive`: moves old finished and canceled threads to `archive/YYYY-MM/`.

use crate::cli::{CliError, Context, Progress, output, when};

/// Arguments of `mess archive`.
#[derive(Debug, clap::Args)]
pub(crate) struct ArchiveArgs {
    /// Archive threads last updated longer ago than this: a duration (30d, 12h, P30D) or a time
    /// (2026-11-01, `3 weeks ago`)
    #[arg(long, default_value = "30d", value_name = "DURATION")]
    older_than: String,
    /// Print each thread moved (`REF -> archive/YYYY-MM`), not only the count per month
    #[arg(long)]
    list: bool,
}

pub(crate) fn run(cx: &Context, args: ArchiveArgs) -> Result<(), CliError> {
    let age = when::span(
        "--older-than",
        &args.older_than,
        cx.exchange.now().with_timezone(&chrono::Utc),
        when::Toward::Past,
    )?;
    let mut progress = Progress::new("archiving");
    let report = cx
        .exchange
        .upkeep()
        .archive(age.length, &mut |d, t| progress.update(d, t));
    let mut months = std::collections::BTreeMap::<&str, usize>::new();
    for (r, month) in &report.moved {
        if args.list {
            output::line(&format!("{r} -> archive/{month}"));
        }
        *months.entry(month.as_str()).or_default() += 1;
    }
    let per_month: Vec<String> = months
        .iter()
        .map(|(month, n)| format!("{n} in archive/{month}"))
        .collect();
    output::line(&format!(
        "archived {} thread(s){}",
        report.moved.len(),
        if per_month.is_empty() {
            String::new()
        } else {
            format!(": {}", per_month.join(", "))
        }
    ));
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
