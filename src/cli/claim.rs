//! `mess claim`: an executor takes a pending request.

use crate::cli::{CliError, Context, message_of, output, when};
use crate::protocol::value::{Map, Value};

/// Arguments of `mess claim`.
#[derive(Debug, clap::Args)]
pub(crate) struct ClaimArgs {
    /// The request's ref
    re: String,
    /// Expected time to complete: a duration (30m, PT2H) or the time it will take until
    #[arg(long, value_name = "DURATION")]
    estimate: Option<String>,
    /// When it will be done: a duration from now (45m) or a time (RFC 3339, `today 17:00`)
    #[arg(long, value_name = "TIME")]
    eta: Option<String>,
    /// A note for the requestor
    #[arg(long)]
    message: Option<String>,
}

pub(crate) fn run(cx: &Context, args: ClaimArgs) -> Result<(), CliError> {
    let now = cx.exchange.now().with_timezone(&chrono::Utc);
    let estimate = args
        .estimate
        .map(|e| when::span("--estimate", &e, now, when::Toward::Future))
        .transpose()?
        .map(|d| when::iso(&d));
    let eta = args
        .eta
        .map(|e| when::duration_or_time_text("--eta", &e, now))
        .transpose()?;
    let mut s = Map::new();
    s.insert("re", Value::str(args.re));
    s.insert("code", Value::str("claimed"));
    for (k, v) in [
        ("estimate", estimate),
        ("eta", eta),
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
