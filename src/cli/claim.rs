//! `mess claim`: an executor takes a pending request.

use crate::cli::{CliError, Context, message_of, output};
use crate::protocol::value::{Map, Value};

/// Arguments of `mess claim`.
#[derive(Debug, clap::Args)]
pub(crate) struct ClaimArgs {
    /// The request's ref
    re: String,
    /// Expected time to complete, ISO 8601 (PT30M, PT2H)
    #[arg(long)]
    estimate: Option<String>,
    /// When it will be done (a duration like 45m, or a time)
    #[arg(long)]
    eta: Option<String>,
    /// A note for the requestor
    #[arg(long)]
    message: Option<String>,
}

pub(crate) fn run(cx: &Context, args: ClaimArgs) -> Result<(), CliError> {
    let mut s = Map::new();
    s.insert("re", Value::str(args.re));
    s.insert("code", Value::str("claimed"));
    for (k, v) in [
        ("estimate", args.estimate),
        ("eta", args.eta),
        ("message", args.message),
    ] {
        if let Some(v) = v {
            s.insert(k, Value::str(v));
        }
    }
    let answer = cx.submit(message_of("claim", "status", s)?)?;
    output::answer_lines(&answer);
    Ok(())
}
