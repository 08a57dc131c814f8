//! `mess export DIR`: writes a tier-1 database out as a home of MESSE-AF files (tier 0).

use std::path::PathBuf;

use crate::cli::{CliError, Context, Progress, db, output};
use crate::mail::Mail;

/// Arguments of `mess export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The folder to write the home into (new, or holding no threads yet)
    #[arg(value_name = "DIR")]
    to: PathBuf,
}

pub(crate) fn run(cx: &Context, args: ExportArgs) -> Result<(), CliError> {
    let db = db::database(cx, "mess export")?;
    let mut progress = Progress::new("exporting");
    let report = db.export(&args.to, &mut |d, t| progress.update(d, t))?;
    let mail = cx.exchange.mail().copy_to(&Mail::open(&args.to))?;
    output::line(&format!(
        "exported {} thread(s), {} index entries, {} key(s), {} registration(s) and routing \
         rule(s), {} ledger movement(s) and {} mail message(s) into {}",
        report.threads,
        report.index_entries,
        report.shared.keys,
        report.shared.registry,
        report.shared.movements,
        mail.copied,
        args.to.display()
    ));
    Ok(())
}
