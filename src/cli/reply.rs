//! `mess reply`: the requestor answers questions, a confirmation request or a suggestion.

use crate::cli::{CliError, Context, message_of, output};
use crate::protocol::value::{Map, Value};

/// Arguments of `mess reply`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplyArgs {
    /// The request's ref, client id, `last`, or a suggestion id
    re: String,
    /// An answer, `field=value` (repeatable)
    #[arg(long = "answer", value_name = "FIELD=VALUE")]
    answers: Vec<String>,
    /// Confirm (true) or refuse (false) the action awaiting confirmation
    #[arg(long)]
    confirm: Option<bool>,
    /// Accept (true) or reject (false) a suggestion
    #[arg(long)]
    accept: Option<bool>,
    /// Why
    #[arg(long)]
    reason: Option<String>,
    /// Extra context (repeatable)
    #[arg(long = "context", value_name = "TEXT")]
    context: Vec<String>,
}

pub(crate) fn run(cx: &Context, args: ReplyArgs) -> Result<(), CliError> {
    let mut r = Map::new();
    r.insert("re", Value::str(&args.re));
    if !args.answers.is_empty() {
        let mut answers = Map::new();
        for a in &args.answers {
            let (k, v) = match a.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => (k.trim(), v.trim()),
                _ => {
                    return Err(CliError::usage(
                        format!("--answer {a:?} is not field=value"),
                        "write e.g. --answer location=both",
                    ));
                }
            };
            if answers.contains_key(k) {
                return Err(CliError::usage(
                    format!("--answer {k} is given twice"),
                    "give each field one answer",
                ));
            }
            answers.insert(k, Value::str(v));
        }
        r.insert("answers", Value::Map(answers));
    }
    r.insert_opt("confirm", args.confirm.map(Value::Bool));
    r.insert_opt("accept", args.accept.map(Value::Bool));
    r.insert_opt("reason", args.reason.map(Value::String));
    if !args.context.is_empty() {
        r.insert(
            "context",
            Value::Seq(args.context.into_iter().map(Value::String).collect()),
        );
    }
    let answer = cx.submit(message_of("reply", "reply", r)?)?;
    output::answer_lines(&answer);
    Ok(())
}
