//! Parsed YAML documents in a compact form: scalars typed the way `read_yaml_auto` types them
//! (YAML 1.2 core schema, plus dates and timestamps recognised in plain text), keys interned.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime};
use serde::de::{self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// A mapping key, shared between all documents that use it.
pub(crate) type Key = Arc<str>;

/// One parsed YAML value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since the epoch, UTC (the text had an offset or `Z`).
    TimestampTz(i64),
    /// Microseconds since the epoch of a timestamp without offset.
    Timestamp(i64),
    List(Box<[Node]>),
    Map(Box<[(Key, Node)]>),
}

impl Node {
    /// The value of `key` in a mapping.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| &**k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Writes the value as JSON (for text columns that hold mixed or structured values).
    pub(crate) fn write_json(&self, out: &mut String) {
        match self {
            Node::Null => out.push_str("null"),
            Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Node::Int(i) => out.push_str(&i.to_string()),
            Node::Float(f) if f.is_finite() => out.push_str(&format!("{f:?}")),
            Node::Float(_) => out.push_str("null"),
            Node::Str(s) => json_string(out, s),
            Node::Date(_) | Node::TimestampTz(_) | Node::Timestamp(_) => {
                json_string(out, &self.to_text())
            }
            Node::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Node::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_string(out, k);
                    out.push(':');
                    v.write_json(out);
                }
                out.push('}');
            }
        }
    }

    /// The value as text: scalars as written, collections as JSON.
    pub(crate) fn to_text(&self) -> String {
        match self {
            Node::Str(s) => s.to_string(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            // `1.0` stays `1.0` (Display would print `1`).
            Node::Float(f) => format!("{f:?}"),
            Node::Null => "null".to_owned(),
            Node::Date(d) => date_text(*d),
            Node::TimestampTz(us) => DateTime::from_timestamp_micros(*us)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                .unwrap_or_default(),
            Node::Timestamp(us) => DateTime::from_timestamp_micros(*us)
                .map(|t| t.naive_utc().format("%Y-%m-%d %H:%M:%S%.f").to_string())
                .unwrap_or_default(),
            Node::List(_) | Node::Map(_) => {
                let mut s = String::new();
                self.write_json(&mut s);
                s
            }
        }
    }
}

fn date_text(days: i32) -> String {
    NaiveDate::from_num_days_from_ce_opt(days + EPOCH_DAYS_FROM_CE)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// Days from 0001-01-01 to 1970-01-01.
const EPOCH_DAYS_FROM_CE: i32 = 719_163;

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Above this many distinct keys the key interner starts over (documents with generated keys
/// must not grow it for the life of the process).
const MAX_INTERNED_KEYS: usize = 100_000;

/// Interns mapping keys process-wide: thread files repeat the same few dozen keys.
pub(crate) fn intern(key: &str) -> Key {
    static KEYS: OnceLock<Mutex<HashSet<Key>>> = OnceLock::new();
    let set = KEYS.get_or_init(|| Mutex::new(HashSet::new()));
    let mut guard = match set.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(k) = guard.get(key) {
        return k.clone();
    }
    if guard.len() >= MAX_INTERNED_KEYS {
        // Keys already handed out stay valid; only their sharing starts over.
        guard.clear();
    }
    let k: Key = Arc::from(key);
    guard.insert(k.clone());
    k
}

/// Types a plain or quoted string: `YYYY-MM-DD` is a date, an ISO timestamp with an offset is
/// TIMESTAMPTZ, one without is TIMESTAMP; everything else stays text.
fn typed_string(s: String) -> Node {
    let b = s.as_bytes();
    if b.len() >= 10 && b[4] == b'-' && b[7] == b'-' && b[..4].iter().all(u8::is_ascii_digit) {
        if b.len() == 10 {
            if let Ok(d) = NaiveDate::parse_from_str(&s, "%Y-%m-%d") {
                return Node::Date(d.num_days_from_ce() - EPOCH_DAYS_FROM_CE);
            }
        } else if let Some(node) = timestamp(&s) {
            return node;
        }
    }
    Node::Str(s.into_boxed_str())
}

fn timestamp(s: &str) -> Option<Node> {
    let date = NaiveDate::parse_from_str(s.get(..10)?, "%Y-%m-%d").ok()?;
    let rest = &s[10..];
    let rest = rest
        .strip_prefix(['T', 't'])
        .or_else(|| rest.strip_prefix(' '))?;
    let end = rest.find(['Z', 'z', '+', '-', ' ']).unwrap_or(rest.len());
    let time = NaiveTime::parse_from_str(&rest[..end], "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(&rest[..end], "%H:%M:%S"))
        .ok()?;
    let naive = NaiveDateTime::new(date, time);
    let offset = rest[end..].trim_start();
    if offset.is_empty() {
        return Some(Node::Timestamp(naive.and_utc().timestamp_micros()));
    }
    let secs = if offset.eq_ignore_ascii_case("z") {
        0
    } else {
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let digits: String = offset.get(1..)?.chars().filter(|c| *c != ':').collect();
        if !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let (h, m) = match digits.len() {
            1 | 2 => (digits.parse::<i64>().ok()?, 0),
            4 => (
                digits[..2].parse::<i64>().ok()?,
                digits[2..].parse::<i64>().ok()?,
            ),
            _ => return None,
        };
        sign * (h * 3600 + m * 60)
    };
    Some(Node::TimestampTz(
        naive.and_utc().timestamp_micros() - secs * 1_000_000,
    ))
}

/// Bounds on one document, against hostile input.
pub(crate) const MAX_DEPTH: usize = 128;
pub(crate) const MAX_NODES: usize = 10_000_000;

/// Builds [`Node`]s straight from serde_yaml's events, counting nodes after alias expansion.
pub(crate) struct Seed<'a> {
    pub(crate) budget: &'a std::cell::Cell<usize>,
    pub(crate) depth: usize,
}

impl Seed<'_> {
    fn spend<E: de::Error>(&self) -> Result<(), E> {
        let left = self.budget.get();
        if left == 0 {
            return Err(E::custom(
                "document has too many nodes after expanding aliases",
            ));
        }
        self.budget.set(left - 1);
        Ok(())
    }

    fn child<E: de::Error>(&self) -> Result<Seed<'_>, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(Seed {
            budget: self.budget,
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Node;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Node;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        self.spend()?;
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        self.spend()?;
        Ok(Node::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        self.spend()?;
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        self.spend()?;
        Ok(Node::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        self.spend()?;
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        self.spend()?;
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        self.spend()?;
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        self.spend()?;
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        self.spend()?;
        Ok(typed_string(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        self.spend()?;
        Ok(typed_string(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        self.spend()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child()?)? {
            items.push(item);
        }
        Ok(Node::List(items.into_boxed_slice()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Node, A::Error> {
        self.spend()?;
        let mut entries: Vec<(Key, Node)> = Vec::new();
        let mut seen: HashSet<Key> = HashSet::new();
        while let Some(key) = access.next_key_seed(self.child()?)? {
            let key = match key {
                Node::Null => "null".to_owned(),
                Node::List(_) | Node::Map(_) => {
                    return Err(de::Error::custom("mapping keys must be scalars"));
                }
                other => other.to_text(),
            };
            // A linear check is fastest for the usual handful of keys; a set keeps a mapping
            // with a million keys from costing a trillion comparisons.
            let duplicate = if entries.len() < 16 {
                entries.iter().any(|(k, _)| **k == *key)
            } else {
                if seen.is_empty() {
                    seen.extend(entries.iter().map(|(k, _)| k.clone()));
                }
                !seen.insert(Key::from(key.as_str()))
            };
            if duplicate {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = access.next_value_seed(self.child()?)?;
            entries.push((intern(&key), value));
        }
        Ok(Node::Map(entries.into_boxed_slice()))
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Node, A::Error> {
        // A custom tag (`!thing value`) has no meaning for SQL; the tagged value is kept.
        let (_tag, variant): (String, _) = data.variant()?;
        variant.newtype_variant_seed(self)
    }
}
