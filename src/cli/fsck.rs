//! `mess fsck`: checks every thread file and reports (or with `--repair`, fixes) problems.

use crate::cli::{CliError, Context, Progress, output};

/// Arguments of `mess fsck`.
#[derive(Debug, clap::Args)]
pub(crate) struct FsckArgs {
    /// Fix what can be fixed: torn last documents, stale envelopes, misplaced and duplicate
    /// files, leftover temp files, indexes and ref counters
    #[arg(long)]
    repair: bool,
}

pub(crate) fn run(cx: &Context, args: FsckArgs) -> Result<(), CliError> {
    for problem in cx.exchange.config_problems() {
        output::warn(&format!("config: {problem}"));
    }
    let mut progress = Progress::new("checking");
    let report = cx
        .exchange
        .fsck(args.repair, &mut |d, t| progress.update(d, t))?;
    for f in &report.findings {
        let mark = if f.repaired { "repaired" } else { "problem" };
        output::line(&format!("{mark}: {}: {}", f.path.display(), f.problem));
    }
    output::line(&format!(
        "checked {} file(s) of {} thread(s): {} problem(s), {} repaired",
        report.files,
        report.threads,
        report.findings.len(),
        report.findings.len() - report.unrepaired()
    ));
    if report.unrepaired() > 0 {
        return Err(CliError::with_hint(
            format!("{} problem(s) remain", report.unrepaired()),
            if args.repair {
                "problems that remain need a person; see the lines above"
            } else {
                "run `mess fsck --repair` to fix them"
            },
        ));
    }
    Ok(())
}
