//! YAML text in and out of [`Value`] trees: the only module that uses `serde_yaml`.
//!
//! Parsing is bounded (depth, node count after alias expansion, NUL bytes) so hostile input gets a
//! clear error instead of exhausting memory. Writing is done by `emit`, not by `serde_yaml`, so the
//! layout of thread files is ours to fix.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

use crate::value::{Map, Value};

/// Bounds applied while parsing untrusted YAML.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest nesting of mappings and sequences accepted.
    pub max_depth: usize,
    /// Most nodes accepted in one text (all its documents), counted after aliases are expanded.
    pub max_nodes: usize,
    /// Whether to refuse, before parsing, a text that may hold more than `max_nodes` values:
    /// the YAML parser buffers every event of a document before the tree is built, so only a
    /// check ahead of it keeps the parser's own memory in bounds.
    pub estimate_first: bool,
}

/// Values any message may hold, whatever its size.
pub const MESSAGE_BASE_NODES: usize = 16_384;
/// Bytes of YAML per value beyond [`MESSAGE_BASE_NODES`]: parsing costs about 190 bytes per
/// value (the parser's buffered event and the tree node), so one value per 24 bytes keeps a
/// message's parsing memory under 8 times its size plus about 3 MiB.
pub const YAML_BYTES_PER_NODE: usize = 24;
/// Bytes of JSON per value beyond [`MESSAGE_BASE_NODES`]: JSON is read without buffering, at
/// about 64 bytes per value, so denser data fits in the same memory.
pub const JSON_BYTES_PER_NODE: usize = 8;

impl Limits {
    /// Limits for thread files, config and the exchange's own text: 64 levels, 4 million
    /// nodes.
    pub const DEFAULT: Limits = Limits {
        max_depth: 64,
        max_nodes: 4_000_000,
        estimate_first: false,
    };

    /// Limits for a YAML message of `len` bytes from a principal: values in proportion to its
    /// size ([`MESSAGE_BASE_NODES`] plus one per [`YAML_BYTES_PER_NODE`] bytes), checked before
    /// the parser runs.
    pub fn message(len: usize) -> Limits {
        Limits {
            max_depth: 64,
            max_nodes: MESSAGE_BASE_NODES + len / YAML_BYTES_PER_NODE,
            estimate_first: true,
        }
    }

    /// Limits for a JSON message of `len` bytes (one value per [`JSON_BYTES_PER_NODE`] bytes
    /// beyond the base).
    pub fn json_message(len: usize) -> Limits {
        Limits {
            max_depth: 64,
            max_nodes: MESSAGE_BASE_NODES + len / JSON_BYTES_PER_NODE,
            estimate_first: false,
        }
    }
}

/// A YAML document that could not be parsed, with the position when the parser knows it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    /// One line describing the problem, including line and column when known.
    pub message: String,
}

/// Parses one YAML document; empty input gives `Value::Null`.
pub fn parse_document(text: &str, limits: &Limits) -> Result<Value, YamlError> {
    let mut docs = parse_documents(text, limits)?;
    match docs.len() {
        0 => Ok(Value::Null),
        1 => Ok(docs.remove(0)),
        n => Err(YamlError {
            message: format!("expected one YAML document, found {n}"),
        }),
    }
}

/// Parses every document of a multi-document YAML stream, in order; empty documents give `Null`.
pub fn parse_documents(text: &str, limits: &Limits) -> Result<Vec<Value>, YamlError> {
    if let Some(pos) = text.find('\0') {
        let line = text[..pos].matches('\n').count() + 1;
        return Err(YamlError {
            message: format!("YAML contains a NUL byte at line {line}"),
        });
    }
    check_flow_depth(text)?;
    if limits.estimate_first {
        let most = estimate_events(text);
        if most > limits.max_nodes {
            return Err(YamlError {
                message: format!(
                    "too many values for a message of {} bytes (up to {most}; at most {} here: {MESSAGE_BASE_NODES} plus one per {YAML_BYTES_PER_NODE} bytes); send bulk data as a file (a data URI) or as JSON",
                    text.len(),
                    limits.max_nodes
                ),
            });
        }
    }
    let mut out = Vec::new();
    // One budget for the whole text: many small documents cost what one large one does.
    let budget = Cell::new(limits.max_nodes);
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let seed = Node {
            budget: &budget,
            depth: 0,
            limits,
        };
        let value = seed.deserialize(doc).map_err(|e| YamlError {
            message: describe(&e, index),
        })?;
        out.push(value);
    }
    Ok(out)
}

/// Builds a [`Value`] from any serde deserializer (the API reads JSON bodies with serde_json
/// through this), under the same limits as YAML: depth and node count, duplicate keys refused.
pub fn value_from<'de, D: de::Deserializer<'de>>(d: D, limits: &Limits) -> Result<Value, D::Error> {
    let budget = Cell::new(limits.max_nodes);
    Node {
        budget: &budget,
        depth: 0,
        limits,
    }
    .deserialize(d)
}

/// Deepest `[`/`{` nesting looked at before parsing. The parser's own cost grows with the square
/// of flow nesting, so absurd depths are refused up front; the real limit (`Limits::max_depth`)
/// is applied while building the tree. Brackets in plain text can only raise the count, so the
/// bound is generous.
const FLOW_DEPTH_GUARD: usize = 1000;

fn check_flow_depth(text: &str) -> Result<(), YamlError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut prev = '\n';
    for (line_no, line) in text.lines().enumerate() {
        for c in line.chars() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' if matches!(prev, ' ' | '[' | '{' | ',' | ':' | '\n') => {
                        quote = Some(c)
                    }
                    '#' if prev == ' ' || prev == '\n' => break,
                    '[' | '{' => {
                        depth += 1;
                        if depth > FLOW_DEPTH_GUARD {
                            return Err(YamlError {
                                message: format!(
                                    "invalid YAML: nesting deeper than {FLOW_DEPTH_GUARD} brackets at line {}",
                                    line_no + 1
                                ),
                            });
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                },
            }
            prev = c;
        }
        prev = '\n';
    }
    Ok(())
}

/// An upper bound on the parser events of `text` (and so on its values), found without
/// parsing. Every event begins at the start of a line or right after an indicator (`:`, `-`,
/// `?`, `,`, `[`, `{`, `*`), and each of these is counted for the most events it can begin (a
/// `{` opens a mapping, closes it, and may hold a key with an implicit null value; a `:` may
/// open a block mapping, end it, and carry a value). Quotes and comments are not tracked, so
/// text that is not YAML structure can only raise the count: the bound holds whatever the text
/// says. Words of one plain scalar and the characters of a data URI count nothing, so prose and
/// attachments stay cheap while `[1,1,1,...]` counts every item.
pub fn estimate_events(text: &str) -> usize {
    // The parser breaks lines at `\r`, `\n`, NEL, LS and PS, and takes each of them as a
    // blank after an indicator: so must the count.
    let is_break = |c: char| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
    let is_blank = |c: Option<&char>| c.is_none_or(|&c| c == ' ' || c == '\t' || is_break(c));
    // Stream and document starts and ends.
    let mut count = 8usize;
    let mut line_start = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if is_break(c) {
            line_start = true;
            continue;
        }
        if c == ' ' || c == '\t' {
            continue;
        }
        if line_start {
            line_start = false;
            // `---` and `...` begin with a `-` or `.`; the extra two cover the document events.
            count += if c == '-' || c == '.' { 3 } else { 1 };
        }
        count += match c {
            '{' => 4,
            '[' | ':' => 3,
            ',' => 2,
            '-' | '?' if is_blank(chars.peek()) => 2,
            '*' => 1,
            _ => 0,
        };
    }
    count
}

fn describe(e: &serde_yaml::Error, index: usize) -> String {
    let text = e.to_string();
    let text = if text.starts_with("repetition limit exceeded") {
        "too many alias expansions (*alias references); is this an alias bomb?".to_owned()
    } else if text.starts_with("recursion limit exceeded") {
        text.replacen("recursion limit exceeded", "nesting too deep", 1)
    } else {
        text
    };
    // serde_yaml names the full path, which for deep input is longer than any reader wants.
    let text = if text.chars().count() > 300 {
        let head: String = text.chars().take(140).collect();
        let tail: String = text
            .chars()
            .rev()
            .take(140)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{head} … {tail}")
    } else {
        text
    };
    if index == 0 {
        format!("invalid YAML: {text}")
    } else {
        format!("invalid YAML in document {}: {text}", index + 1)
    }
}

/// One node of the tree being built; carries the shared node budget and the current depth.
struct Node<'a> {
    budget: &'a Cell<usize>,
    depth: usize,
    limits: &'a Limits,
}

impl<'a> Node<'a> {
    fn spend<E: de::Error>(&self) -> Result<(), E> {
        let left = self.budget.get();
        if left == 0 {
            return Err(E::custom(format!(
                "document has more than {} nodes after expanding aliases",
                self.limits.max_nodes
            )));
        }
        self.budget.set(left - 1);
        Ok(())
    }

    fn child<E: de::Error>(&self) -> Result<Node<'a>, E> {
        if self.depth + 1 > self.limits.max_depth {
            return Err(E::custom(format!(
                "nesting deeper than {} levels",
                self.limits.max_depth
            )));
        }
        Ok(Node {
            budget: self.budget,
            depth: self.depth + 1,
            limits: self.limits,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend()?;
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        self.spend()?;
        // Beyond 64 bits a number is kept as a float, as JSON readers would.
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        self.spend()?;
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child()?)? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut map = Map::new();
        while let Some(key) = access.next_key_seed(self.child()?)? {
            let key = match key {
                Value::Null => "null".to_owned(),
                other => other
                    .scalar_text()
                    .ok_or_else(|| de::Error::custom("mapping keys must be scalars"))?,
            };
            if map.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = access.next_value_seed(self.child()?)?;
            map.insert(key, value);
        }
        Ok(Value::Map(map))
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A custom tag (`!thing value`) arrives as an enum; the tag carries no meaning in MESS,
        // so the tagged value is kept and the tag dropped.
        let (_tag, variant): (String, _) = data.variant()?;
        variant.newtype_variant_seed(self)
    }
}

/// Byte range of one document inside a multi-document YAML text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocSpan {
    /// Offset of the document's first byte (its `---` marker line, when it has one).
    pub start: usize,
    /// Offset just past the document's last byte.
    pub end: usize,
}

/// Splits a multi-document YAML text at its `---` and `...` markers without parsing it.
///
/// A marker counts only at the start of a line and followed by a space, tab or line end, which
/// YAML forbids inside scalars, so the split is exact for well-formed files. Spans that hold only
/// comments or whitespace are kept; callers decide whether an empty document matters.
pub fn split_documents(text: &str) -> Vec<DocSpan> {
    let mut spans = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    let mut seen_content = false;
    let bytes = text.as_bytes();
    while pos < bytes.len() {
        let line_end = text[pos..].find('\n').map_or(bytes.len(), |i| pos + i + 1);
        let line = &text[pos..line_end];
        if is_marker(line, "---") {
            if pos > start && (seen_content || !spans.is_empty()) {
                spans.push(DocSpan { start, end: pos });
            }
            start = pos;
            seen_content = true;
        } else if is_marker(line, "...") {
            spans.push(DocSpan {
                start,
                end: line_end,
            });
            start = line_end;
            seen_content = false;
        } else if !seen_content && !is_blank_or_comment(line) {
            seen_content = true;
        }
        pos = line_end;
    }
    if start < bytes.len() && (seen_content || spans.is_empty()) {
        spans.push(DocSpan {
            start,
            end: bytes.len(),
        });
    }
    spans
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\n', '\r']))
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#') || t.starts_with('%')
}

/// The parser events of every document of `text` that parses (for tests of
/// [`estimate_events`]): one per scalar, two per collection, two per document, two for the
/// stream; `None` when the text does not parse. Duplicate keys are counted, not refused.
#[cfg(test)]
pub(crate) fn count_events(text: &str) -> Option<usize> {
    struct Count<'a>(&'a Cell<usize>);
    impl<'de> DeserializeSeed<'de> for Count<'_> {
        type Value = ();
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Count<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("anything")
        }
        fn visit_unit<E: de::Error>(self) -> Result<(), E> {
            self.0.set(self.0.get() + 1);
            Ok(())
        }
        fn visit_none<E: de::Error>(self) -> Result<(), E> {
            self.visit_unit()
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
            self.visit_unit()
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
            self.visit_unit()
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
            self.visit_unit()
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
            self.visit_unit()
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
            self.visit_unit()
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            self.0.set(self.0.get() + 2);
            while seq.next_element_seed(Count(self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            self.0.set(self.0.get() + 2);
            while map.next_key_seed(Count(self.0))?.is_some() {
                map.next_value_seed(Count(self.0))?;
            }
            Ok(())
        }
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
            let (_tag, variant): (String, _) = data.variant()?;
            variant.newtype_variant_seed(self)
        }
    }
    let events = Cell::new(2);
    for doc in serde_yaml::Deserializer::from_str(text) {
        events.set(events.get() + 2);
        Count(&events).deserialize(doc).ok()?;
    }
    Some(events.get())
}
