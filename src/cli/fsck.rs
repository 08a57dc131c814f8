//! `mess fsck`: checks every thread file and reports (or with `--repair`, fixes) problems;
//! reports the outbox's unreadable records and its jobs given up or retrying, by kind.

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
    // A typo in config.yaml (an unknown key) is a problem of the home, which --repair cannot
    // fix; the rest of what `mess config check` reports (a channel without its token) is
    // said, as `mess serve` says it, without failing the check of the files.
    let config_problems = cx.exchange.directory().key_problems.clone();
    for problem in cx.exchange.config_problems() {
        if config_problems.contains(&problem) {
            output::line(&format!("problem: config: {problem}"));
        } else {
            output::warn(&format!("config: {problem}"));
        }
    }
    let mut progress = Progress::new("checking");
    let report = cx
        .exchange
        .upkeep()
        .fsck(args.repair, &mut |d, t| progress.update(d, t))?;
    for f in &report.findings {
        let mark = if f.repaired { "repaired" } else { "problem" };
        output::line(&format!("{mark}: {}: {}", f.path.display(), f.problem));
    }
    // The outbox: records that cannot be read are problems (a person must look at them);
    // jobs given up or retrying are reported by kind, as `mess status --jobs` shows them.
    let jobs = cx.exchange.outbox().jobs();
    for unreadable in &jobs.unreadable {
        output::line(&format!(
            "problem: outbox: {unreadable} (the worker skips it: look at it, then remove it)"
        ));
    }
    for (kind, counts) in &jobs.kinds {
        if counts.failed > 0 || counts.retrying > 0 {
            output::line(&format!(
                "outbox: {kind}: {} given up, {} retrying{}",
                counts.failed,
                counts.retrying,
                counts
                    .last_error
                    .as_ref()
                    .map(|(_, e)| format!(" (last error: {})", output::clip(e, 120)))
                    .unwrap_or_default()
            ));
        }
    }
    output::line(&format!(
        "checked {} file(s) of {} thread(s): {} problem(s), {} repaired",
        report.files,
        report.threads,
        report.findings.len() + jobs.unreadable.len() + config_problems.len(),
        report.findings.len() - report.unrepaired()
    ));
    let remaining = report.unrepaired() + jobs.unreadable.len() + config_problems.len();
    if remaining > 0 {
        return Err(CliError::with_hint(
            format!("{remaining} problem(s) remain"),
            if args.repair || remaining == config_problems.len() {
                "problems that remain need a person; see the lines above (config problems name their fix)"
            } else {
                "run `mess fsck --repair` to fix them"
            },
        ));
    }
    Ok(())
}
