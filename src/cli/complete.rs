//! `mess complete`: an executor finishes a request with a response (text, files, images).

use std::path::PathBuf;

use crate::cli::{CliError, Context, message_of, output};
use crate::protocol::content;
use crate::protocol::message::Message;
use crate::protocol::value::{Map, Value};

/// Arguments of `mess complete`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompleteArgs {
    /// The request's ref
    re: String,
    /// A text entry of the response (repeatable)
    #[arg(long = "text", value_name = "TEXT")]
    texts: Vec<String>,
    /// A file to attach inline as a data URI; images, audio and video get their own entry type
    /// (repeatable)
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
    /// Notes for the requestor
    #[arg(long)]
    notes: Option<String>,
    /// Report `partial` instead of `completed`
    #[arg(long)]
    partial: bool,
}

pub(crate) fn run(cx: &Context, args: CompleteArgs) -> Result<(), CliError> {
    let mut entries: Vec<Value> = args.texts.into_iter().map(Value::String).collect();
    for path in &args.files {
        let bytes = std::fs::read(path)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mime = content::mime_for_name(&name);
        let mut media = Map::new();
        media.insert("uri", Value::str(content::data_uri(mime, &bytes)));
        if !name.is_empty() {
            media.insert("name", Value::str(&name));
        }
        media.insert("mime", Value::str(mime));
        let kind = match mime.split('/').next() {
            Some("image") => "image",
            Some("audio") => "audio",
            Some("video") => "video",
            _ => "file",
        };
        let mut entry = Map::new();
        entry.insert(kind, Value::Map(media));
        entries.push(Value::Map(entry));
    }
    let mut status = Map::new();
    status.insert("re", Value::str(&args.re));
    status.insert(
        "code",
        Value::str(if args.partial { "partial" } else { "completed" }),
    );
    let mut response = Map::new();
    response.insert("re", Value::str(&args.re));
    response.insert("content", Value::Seq(entries));
    response.insert_opt("notes", args.notes.map(Value::String));
    let mut payloads = message_of("complete", "status", status)?.payloads;
    payloads.extend(message_of("complete", "response", response)?.payloads);
    let answer = cx.submit(Message::new(payloads))?;
    output::answer_lines(&answer);
    Ok(())
}
