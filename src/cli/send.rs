//! `mess send`: submits raw MESS YAML and prints the exchange's answers as YAML documents.

use std::io::Read;
use std::path::PathBuf;

use crate::cli::{CliError, Context, output};
use crate::protocol::emit;

/// Arguments of `mess send`.
#[derive(Debug, clap::Args)]
pub(crate) struct SendArgs {
    /// File with one or more MESS messages (YAML documents); `-` or nothing reads stdin
    file: Option<PathBuf>,
}

pub(crate) fn run(cx: &Context, args: SendArgs) -> Result<(), CliError> {
    let text = match args.file.as_deref() {
        None => read_stdin()?,
        Some(p) if p.as_os_str() == "-" => read_stdin()?,
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())))?,
    };
    let messages = cx.exchange.intake().parse_text(&text)?;
    let total = messages.len();
    // Answers are printed as each message is applied, so when a later message fails the
    // caller still learns the refs of the earlier ones.
    for (i, message) in messages.into_iter().enumerate() {
        match cx.submit(message) {
            Ok(answer) => {
                if i > 0 {
                    output::raw("---\n");
                }
                output::raw(&emit::to_yaml(&answer.to_value()));
            }
            Err(e) if total > 1 => {
                return Err(CliError::new(format!(
                    "document {} of {total}: {} (the documents before it were applied)",
                    i + 1,
                    e.message
                )));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_stdin() -> Result<String, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(format!("cannot read stdin: {e}")))?;
    Ok(text)
}
