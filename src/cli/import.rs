//! `mess import DIR`: copies a home of MESSE-AF files (tier 0) into a tier-1 database.

use std::path::PathBuf;

use crate::cli::{CliError, Context, Progress, db, output};
use crate::mail::Mail;
use crate::store::Store;

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
    let source = Store::open(&args.from);
    // A home from elsewhere is trusted no more than a key holder: its keys and registrations
    // are checked first, and one bad record refuses the whole import.
    let refused = cx.exchange.upkeep().check_import(&source);
    let source_mail = Mail::open(&args.from);
    let mail_problems = source_mail.check_copy()?;
    if !refused.is_empty() || !mail_problems.is_empty() {
        for why in &refused {
            output::warn(&format!("refused: {why}"));
        }
        for why in &mail_problems {
            output::warn(&format!("refused: mail: {why}"));
        }
        return Err(refusal(refused.len() + mail_problems.len(), &args));
    }
    let mut progress = Progress::new("importing");
    let report = db.import(&source, &mut |d, t| progress.update(d, t))?;
    if !report.committed {
        for (path, why) in &report.refused {
            if path.as_os_str().is_empty() {
                output::warn(&format!("refused: {why}"));
            } else {
                output::warn(&format!("refused: {}: {why}", path.display()));
            }
        }
        return Err(refusal(report.refused.len(), &args));
    }
    let mail = source_mail.copy_to(&cx.exchange.mail())?;
    output::line(&format!(
        "imported {} thread(s) ({} already there), {} index entries, {} key(s), {} registration(s) \
         and routing rule(s), {} ledger movement(s) in one transaction, and {} mail message(s) \
         ({} already there)",
        report.imported,
        report.present,
        report.index_entries,
        report.shared.keys,
        report.shared.registry,
        report.shared.movements,
        mail.copied,
        mail.present,
    ));
    Ok(())
}

/// The error of an import that was refused: nothing was written.
fn refusal(problems: usize, args: &ImportArgs) -> CliError {
    CliError::with_hint(
        format!(
            "nothing was imported: {problems} record(s) refused (an import is one transaction, all or nothing)"
        ),
        format!(
            "fix or remove what is listed above in {} (`mess fsck --repair` mends thread files) and import again",
            args.from.display()
        ),
    )
}
