//! `mess cancel`: the requestor withdraws a request.

use crate::cli::{CliError, Context, message_of, output};
use crate::protocol::value::{Map, Value};

/// Arguments of `mess cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    /// The requests' refs, client ids, or `last` (one or more)
    #[arg(required = true)]
    re: Vec<String>,
    /// Why
    #[arg(long)]
    reason: Option<String>,
}

pub(crate) fn run(cx: &Context, args: CancelArgs) -> Result<(), CliError> {
    let mut c = Map::new();
    let re = match args.re.as_slice() {
        [one] => Value::str(one),
        many => Value::Seq(many.iter().map(Value::str).collect()),
    };
    c.insert("re", re);
    c.insert_opt("reason", args.reason.map(Value::String));
    let answer = cx.submit(message_of("cancel", "cancel", c)?)?;
    output::answer_lines(&answer);
    Ok(())
}
