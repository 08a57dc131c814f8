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
    let answers = cx.exchange.submit_text(&text, &cx.sender()?)?;
    let values: Vec<_> = answers.iter().map(|m| m.to_value()).collect();
    output::raw(&emit::to_yaml_documents(&values));
    Ok(())
}

fn read_stdin() -> Result<String, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(format!("cannot read stdin: {e}")))?;
    Ok(text)
}
