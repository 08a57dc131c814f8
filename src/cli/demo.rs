//! `mess demo seed`: fills the home with synthetic threads for the notebooks and the views.

use crate::cli::{CliError, Context, Progress, output};

/// Arguments of `mess demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    #[command(subcommand)]
    command: DemoCommand,
}

#[derive(Debug, clap::Subcommand)]
enum DemoCommand {
    /// Write synthetic threads (and demo executors, if config.yaml is missing)
    Seed {
        /// How many threads
        #[arg(long, default_value_t = 1000)]
        threads: usize,
        /// Spread their creation over this many past days
        #[arg(long, default_value_t = 14)]
        days: u32,
        /// Seed of the generator (the same seed gives the same threads)
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

pub(crate) fn run(cx: &Context, args: DemoArgs) -> Result<(), CliError> {
    let DemoCommand::Seed {
        threads,
        days,
        seed,
    } = args.command;
    let mut progress = Progress::new("seeding");
    let report = crate::exchange::demo::seed(&cx.exchange, threads, days, seed, &mut |d, t| {
        progress.update(d, t)
    })?;
    if report.wrote_config {
        output::line("wrote demo executors to config.yaml and capabilities.yaml");
    }
    output::line(&format!(
        "seeded {} threads over {days} days",
        report.threads
    ));
    Ok(())
}
