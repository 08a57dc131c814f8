//! `mess shells`: grant shells to an agent or executor, and show balances.

use crate::cli::{CliError, Context, output};

/// Arguments of `mess shells`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShellsArgs {
    #[command(subcommand)]
    action: ShellsAction,
}

#[derive(Debug, clap::Subcommand)]
enum ShellsAction {
    /// Grant shells from the operator to an agent or executor
    Grant {
        /// The agent or executor id
        id: String,
        /// How many shells
        shells: i64,
        /// Why, recorded with the grant
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Show the balance of one account, or of every account
    Balance {
        /// The agent or executor id (every account when left out)
        id: Option<String>,
    },
}

pub(crate) fn run(cx: &Context, args: ShellsArgs) -> Result<(), CliError> {
    match args.action {
        ShellsAction::Grant { id, shells, note } => {
            let m = cx
                .exchange
                .marketplace()
                .grant_shells(&id, shells, note.as_deref())?;
            let balance = cx
                .exchange
                .marketplace()
                .shell_balances()?
                .get(&m.to)
                .copied()
                .unwrap_or_default();
            output::line(&format!(
                "granted {} shells to {}; balance {balance}",
                m.shells, m.to
            ));
        }
        ShellsAction::Balance { id: Some(id) } => {
            let balances = cx.exchange.marketplace().shell_balances()?;
            output::line(&format!(
                "{}",
                balances.get(id.trim()).copied().unwrap_or_default()
            ));
        }
        ShellsAction::Balance { id: None } => {
            let balances = cx.exchange.marketplace().shell_balances()?;
            let width = balances.keys().map(String::len).max().unwrap_or(7).max(7);
            output::line(&format!("{:<width$}  BALANCE", "ACCOUNT"));
            for (account, balance) in &balances {
                output::line(&format!("{account:<width$}  {balance}"));
            }
        }
    }
    Ok(())
}
