//! `mess import DIR`: copies a home of MESSE-AF files (tier 0) into a tier-1 database.

use std::path::PathBuf;

use crate::cli::{CliError, Context, Progress, db, output};
use crate::mail::Mail;
use crate::store::FileStore;

/// Arguments of `mess import`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// The home to copy threads from (it is only read)
    #[arg(value_name = "DIR")]
    from: PathBuf,
}

pub(crate) fn run(cx: &Context, args: ImportArgs) -> Result<(), CliError> {
    let db = db::database(cx, "mess import")?;
    if !args.from.is_dir() {
        return Err(CliError::usage(
            format!("{} is not a folder", args.from.display()),
            "name the home to import, e.g. ~/.mess",
        ));
    }
    let mut progress = Progress::new("importing");
    let source = FileStore::open(&args.from);
    let report = db.import(&source, &mut |d, t| progress.update(d, t))?;
    let mail = Mail::open(&args.from).copy_to(&cx.exchange.mail())?;
    for problem in &mail.problems {
        output::warn(&format!("mail not imported: {problem}"));
    }
    for (path, why) in &report.refused {
        output::warn(&format!("not imported: {}: {why}", path.display()));
    }
    output::line(&format!(
        "imported {} thread(s) ({} already there), {} index entries, {} key(s), {} registration(s) \
         and routing rule(s), {} ledger movement(s) and {} mail message(s) ({} already there); \
         {} file(s) refused",
        report.imported,
        report.present,
        report.index_entries,
        report.shared.keys,
        report.shared.registry,
        report.shared.movements,
        mail.copied,
        mail.present,
        report.refused.len() + mail.problems.len()
    ));
    if !report.refused.is_empty() || !mail.problems.is_empty() {
        return Err(CliError::with_hint(
            format!(
                "{} file(s) were not imported",
                report.refused.len() + mail.problems.len()
            ),
            format!(
                "run `mess fsck --repair --home {}` and import again (threads already imported are skipped)",
                args.from.display()
            ),
        ));
    }
    Ok(())
}
