//! The MCP resources: the caller's pending requests, its history, one request's status, a whole
//! thread file, and the agent guide. `mess_fetch` reads the same URIs as a tool.

use crate::exchange::Exchange;
use crate::exchange::error::Error;
use crate::mcp::threads::{all_threads, open_threads, status_of};
use crate::protocol::emit;

/// The MIME type of the YAML resources: the reference design's `application/x-yaml`, which
/// older YAML tooling also expects (the HTTP API answers with RFC 9512's `application/yaml`).
pub(crate) const YAML: &str = "application/x-yaml";

/// The agent guide (`SKILL.md`), served as `mess://help`.
pub(crate) const HELP: &str = include_str!("../../SKILL.md");

/// The fixed resources: URI, name, description.
pub(crate) const FIXED: [(&str, &str, &str); 3] = [
    (
        "mess://pending",
        "pending",
        "your open requests (pending and in progress)",
    ),
    (
        "mess://history",
        "history",
        "all your requests, newest first",
    ),
    (
        "mess://help",
        "help",
        "how to use the mess tools (the agent guide)",
    ),
];

/// The resource templates: URI template, name, description.
pub(crate) const TEMPLATES: [(&str, &str, &str); 2] = [
    (
        "mess://request/{id}",
        "request",
        "one request: status, questions, response",
    ),
    (
        "thread://{ref}",
        "thread",
        "the whole thread file (MESSE-AF YAML)",
    ),
];

/// The text of resource `uri` for `who`, and its MIME type; `None` for a URI that names no
/// resource.
pub(crate) fn read(
    ex: &Exchange,
    who: &str,
    uri: &str,
) -> Result<Option<(String, &'static str)>, Error> {
    Ok(Some(match uri {
        "mess://pending" => (emit::to_yaml(&open_threads(ex, who)?), YAML),
        "mess://history" => (emit::to_yaml(&all_threads(ex, who)?), YAML),
        "mess://help" => (HELP.to_owned(), "text/markdown"),
        _ => {
            if let Some(id) = uri.strip_prefix("mess://request/") {
                (emit::to_yaml(&status_of(ex, who, id)?), YAML)
            } else if let Some(r) = uri.strip_prefix("thread://") {
                (ex.access().thread_for(r, who)?.text().to_owned(), YAML)
            } else {
                return Ok(None);
            }
        }
    }))
}
