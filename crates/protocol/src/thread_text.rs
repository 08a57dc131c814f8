//! The text of a MESSE-AF thread file as mess writes it: the envelope document, then the
//! message documents as they were written, then the new ones. Every exchange build (the native
//! one on disk or PostgreSQL, the Worker on R2) writes thread files through these functions,
//! so the same messages give the same bytes everywhere.

use crate::emit;
use crate::envelope::{Envelope, MessageDoc};
use crate::yaml;

/// Builds thread-file text: envelope, then `rest` (earlier documents, as they were), then
/// `appended`. The envelope ends with the [`MARK`] comment: how many bytes of messages follow
/// it as mess wrote them, so a reader can tell from the file's length alone whether someone
/// appended to it since (`cat >>`, as MESSE-AF's recipes do).
pub fn compose_text(envelope: &Envelope, rest: &str, appended: &[MessageDoc]) -> String {
    let mut tail = String::new();
    if !rest.is_empty() {
        if !rest.starts_with("---") {
            tail.push_str("---\n");
        }
        tail.push_str(rest);
        if !tail.ends_with('\n') {
            tail.push('\n');
        }
    }
    for doc in appended {
        tail.push_str("---\n");
        tail.push_str(&emit::to_yaml(&doc.to_value()));
    }
    let mut out = emit::to_yaml(&envelope.to_value());
    out.push_str(&format!("{MARK}{} bytes of messages follow\n", tail.len()));
    out.push_str(&tail);
    out
}

/// Renders the documents of a new thread.
pub fn new_thread_text(envelope: &Envelope, docs: &[MessageDoc]) -> String {
    compose_text(envelope, "", docs)
}

/// The text of `text`'s thread with a new envelope and `appended` documents added at the end;
/// every earlier message document keeps its bytes.
pub fn rewrite_text(text: &str, envelope: &Envelope, appended: &[MessageDoc]) -> String {
    let spans = yaml::split_documents(text);
    let rest = match spans.get(1) {
        Some(span) => &text[span.start..],
        None => "",
    };
    compose_text(envelope, rest, appended)
}

/// The comment that ends an envelope mess wrote (a comment, so no YAML reader sees it).
pub const MARK: &str = "# mess: ";

/// Whether a thread file's envelope accounts for every document after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The messages are the bytes mess wrote with this envelope.
    Current,
    /// The messages changed since mess wrote the envelope (a hand edit): rebuild it.
    Stale,
    /// No mark (another writer, or a person, wrote the envelope): only a replay can tell.
    Unknown,
}

/// Judges an envelope document's text against the length of the file after it.
pub fn freshness(envelope_text: &str, tail_len: usize) -> Freshness {
    let mark = envelope_text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(MARK))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<usize>().ok());
    match mark {
        Some(n) if n == tail_len => Freshness::Current,
        Some(_) => Freshness::Stale,
        None => Freshness::Unknown,
    }
}

/// True for a document with nothing but comments and whitespace (or a bare marker).
pub fn is_empty_doc(raw: &str) -> bool {
    raw.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
    })
}

/// Cuts a thread's text into its head (the envelope document, with anything before the first
/// message) and one piece per message document, each running to where the next starts, so
/// the pieces put back together are the text, byte for byte. The database keeps a thread so.
pub fn pieces(text: &str) -> (&str, Vec<&str>) {
    let spans = yaml::split_documents(text);
    let head_end = spans.get(1).map_or(text.len(), |s| s.start);
    let mut docs = Vec::with_capacity(spans.len().saturating_sub(1));
    for (i, span) in spans.iter().enumerate().skip(1) {
        let end = spans.get(i + 1).map_or(text.len(), |next| next.start);
        docs.push(&text[span.start..end]);
    }
    (&text[..head_end], docs)
}
