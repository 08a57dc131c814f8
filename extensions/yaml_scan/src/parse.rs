//! Reading one YAML file into documents, each parsed on its own so that a broken document does
//! not hide the others (`ignore_errors`), with errors that name the file and the line.

use std::cell::Cell;

use serde::de::DeserializeSeed;

use crate::node::{MAX_NODES, Node, Seed};

/// One document of a file.
#[derive(Debug, Clone)]
pub(crate) enum Doc {
    /// A parsed document (mapping, sequence or scalar).
    Value(Node),
    /// Only comments or whitespace.
    Empty,
    /// A document that does not parse, with the reason (line numbers are the file's).
    Broken(String),
}

/// The documents of one file.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParsedFile {
    /// Documents in file order; the position is the `document_index`.
    pub(crate) docs: Vec<Doc>,
    /// False when only the first document was parsed (`multi_document := 'first'`).
    pub(crate) complete: bool,
    /// Row types, computed once per parse and reused by every query over the file.
    pub(crate) types: std::sync::OnceLock<crate::types::FileTypes>,
}

/// Parses `text`; with `first_only`, stops after the first document.
pub(crate) fn parse_file(text: &str, first_only: bool) -> ParsedFile {
    let spans = split_documents(text);
    let total = spans.len();
    let mut docs = Vec::with_capacity(if first_only { 1 } else { total });
    for (start, end) in spans {
        let raw = &text[start..end];
        let first_line = text[..start].matches('\n').count();
        docs.push(parse_doc(raw, first_line));
        if first_only {
            break;
        }
    }
    ParsedFile {
        complete: !first_only || total <= 1,
        docs,
        types: std::sync::OnceLock::new(),
    }
}

fn parse_doc(raw: &str, first_line: usize) -> Doc {
    if raw.contains('\0') {
        return Doc::Broken(format!(
            "a NUL byte in the document starting at line {}",
            first_line + 1
        ));
    }
    let mut iter = serde_yaml::Deserializer::from_str(raw);
    let Some(doc) = iter.next() else {
        return Doc::Empty;
    };
    let budget = Cell::new(MAX_NODES);
    match (Seed {
        budget: &budget,
        depth: 0,
    })
    .deserialize(doc)
    {
        Ok(Node::Null) => Doc::Empty,
        Ok(node) => Doc::Value(node),
        Err(e) => Doc::Broken(shift_lines(&e, first_line)),
    }
}

/// serde_yaml counts lines from the start of the document; the file's count is what people see.
fn shift_lines(e: &serde_yaml::Error, first_line: usize) -> String {
    let text = e.to_string();
    match e.location() {
        Some(loc) => {
            let file_line = loc.line() + first_line;
            let marker = format!("at line {} column {}", loc.line(), loc.column());
            text.replace(
                &marker,
                &format!("at line {file_line} column {}", loc.column()),
            )
        }
        None => text,
    }
}

/// Splits a multi-document YAML text at `---` and `...` lines into byte ranges, without
/// parsing. Markers only count at the start of a line followed by a blank or the line end,
/// which YAML forbids inside scalars.
pub(crate) fn split_documents(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    let mut seen_content = false;
    while pos < text.len() {
        let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1);
        let line = &text[pos..line_end];
        if is_marker(line, "---") {
            if pos > start && (seen_content || !spans.is_empty()) {
                spans.push((start, pos));
            }
            start = pos;
            seen_content = true;
        } else if is_marker(line, "...") {
            spans.push((start, line_end));
            start = line_end;
            seen_content = false;
        } else if !seen_content {
            let t = line.trim_start();
            seen_content = !(t.is_empty() || t.starts_with('#') || t.starts_with('%'));
        }
        pos = line_end;
    }
    if start < text.len() && (seen_content || spans.is_empty()) {
        spans.push((start, text.len()));
    }
    spans
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\n', '\r']))
}
