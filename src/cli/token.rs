//! `mess token`: makes an API key for an agent, an executor or an operator (printed once,
//! stored hashed).

use crate::cli::{CliError, Context, output};
use crate::exchange::auth::Role;

/// Arguments of `mess token`.
#[derive(Debug, clap::Args)]
pub(crate) struct TokenArgs {
    #[command(subcommand)]
    kind: TokenKind,
}

#[derive(Debug, clap::Subcommand)]
enum TokenKind {
    /// A key for an agent (it sends requests, replies and cancels as ID)
    Agent {
        /// The agent id the key acts as
        id: String,
        /// Requests made with this key that name no callback of their own report every change
        /// to this URL (a signed POST, as a request's `callback`; held to dispatch.webhook.allow)
        #[arg(long, value_name = "URL")]
        callback: Option<String>,
    },
    /// A key for an executor (it claims and carries out requests as ID)
    Executor {
        /// The executor id the key acts as
        id: String,
    },
    /// A key for an operator: it reads GET /metrics and the dashboard's API, and nothing else
    Operator {
        /// A name for whoever holds it (it appears in the server's log)
        id: String,
    },
}

pub(crate) fn run(cx: &Context, args: TokenArgs) -> Result<(), CliError> {
    let (role, id, callback) = match args.kind {
        TokenKind::Agent { id, callback } => (Role::Agent, id, callback),
        TokenKind::Executor { id } => (Role::Executor, id, None),
        TokenKind::Operator { id } => {
            let key = cx.exchange.auth().issue_operator_key(&id)?;
            output::line(&key);
            output::warn("the key is shown only this once; the exchange keeps only its hash");
            return Ok(());
        }
    };
    if role == Role::Executor && cx.exchange.directory().executor(&id).is_none() {
        output::warn(&format!(
            "{id} is not a registered executor yet; the key works once it is (config.yaml or a config message)"
        ));
    }
    let key = cx
        .exchange
        .auth()
        .issue_key_with(role, &id, callback.as_deref())?;
    output::line(&key);
    output::warn("the key is shown only this once; the exchange keeps only its hash");
    Ok(())
}
