//! `mess review`: the requestor rates finished work, says why, and may ask for it again.

use crate::cli::{CliError, Context, message_of, output};
use crate::protocol::value::{Map, Value};

/// Arguments of `mess review`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReviewArgs {
    /// The request's ref, client id or `last`
    re: String,
    /// 1 to 5, accept or reject
    #[arg(long, value_name = "RATING")]
    rating: Option<String>,
    /// What was wrong or right
    #[arg(long, value_name = "TEXT")]
    feedback: Option<String>,
    /// Ask the same executor to do the work again (completed or partial work)
    #[arg(long)]
    redo: bool,
}

pub(crate) fn run(cx: &Context, args: ReviewArgs) -> Result<(), CliError> {
    let mut r = Map::new();
    r.insert("re", Value::str(&args.re));
    if let Some(rating) = args.rating {
        // Digits are a number of stars, as a message would write them.
        let value = match rating.trim().parse::<i64>() {
            Ok(n) => Value::Int(n),
            Err(_) => Value::str(rating.trim()),
        };
        r.insert("rating", value);
    }
    r.insert_opt("feedback", args.feedback.map(Value::String));
    if args.redo {
        r.insert("request_redo", Value::Bool(true));
    }
    let answer = cx.submit(message_of("review", "review", r)?)?;
    output::answer_lines(&answer);
    Ok(())
}
