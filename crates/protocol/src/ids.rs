//! Thread refs, the exchange-assigned identifiers that also name thread files, and `Re`, how a
//! payload refers to threads (a ref, a client id or `last`, one or a list).

use chrono::{Datelike, NaiveDate};

use crate::error::ProtocolError;
use crate::field::{self, Fields};
use crate::value::Value;

/// An exchange-assigned thread identifier, safe to use as a file name.
///
/// Refs this exchange assigns are `YYYY-MM-DD-NNN` (UTC date, per-day serial of at least three
/// digits). Files from other MESSE-AF writers may use other shapes (`shop:2026-01-31:042`, UUIDs),
/// so parsing accepts any name of letters, digits, `.`, `_`, `:` and `-` that is not a path trick.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadRef(String);

/// Longest ref accepted, in bytes.
const MAX_LEN: usize = 128;

impl ThreadRef {
    /// Validates `s` as a ref.
    pub fn parse(s: &str) -> Result<ThreadRef, ProtocolError> {
        let bad = |why: &str| ProtocolError::invalid("ref", format!("invalid ref {s:?}: {why}"));
        if s.is_empty() {
            return Err(bad("empty"));
        }
        if s.len() > MAX_LEN {
            return Err(bad("longer than 128 bytes"));
        }
        if s.starts_with(['.', '-']) {
            return Err(bad("must start with a letter or digit"));
        }
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
        {
            return Err(bad(
                "only letters, digits, '.', '_', ':' and '-' are allowed",
            ));
        }
        Ok(ThreadRef(s.to_owned()))
    }

    /// Builds the ref for serial `serial` on `date`.
    pub fn from_serial(date: NaiveDate, serial: u64) -> ThreadRef {
        ThreadRef(format!(
            "{:04}-{:02}-{:02}-{:03}",
            date.year(),
            date.month(),
            date.day(),
            serial
        ))
    }

    /// Splits a `YYYY-MM-DD-NNN` ref into its date and serial; `None` for other shapes.
    pub fn date_serial(&self) -> Option<(NaiveDate, u64)> {
        let s = &self.0;
        if s.len() < 14 || s.as_bytes()[10] != b'-' {
            return None;
        }
        let date = NaiveDate::parse_from_str(&s[..10], "%Y-%m-%d").ok()?;
        let serial = &s[11..];
        if serial.len() < 3 || !serial.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some((date, serial.parse().ok()?))
    }

    /// True when `s` has the shape of a ref this exchange assigns.
    pub fn looks_assigned(s: &str) -> bool {
        ThreadRef::parse(s).is_ok_and(|r| r.date_serial().is_some())
    }

    /// The ref as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ThreadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest capability id accepted, in bytes.
const MAX_CAPABILITY_LEN: usize = 128;

/// Checks a capability id against the character set the exchange accepts from principals:
/// ASCII letters and digits first, then letters, digits, `-`, `_`, `.`, `:`, `/` and `+`, at
/// most 128 bytes (the spec's kebab-case ids, `3d-print-fdm`, namespaced `home:kitchen/access`).
/// Ids reach SQL, file names and notifications, so anything else (quotes, braces, blanks,
/// control characters) is refused where it comes in; the `Err` says why.
pub fn check_capability_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("a capability id must not be empty".to_owned());
    }
    if id.len() > MAX_CAPABILITY_LEN {
        return Err(format!(
            "capability id {:?}… is longer than {MAX_CAPABILITY_LEN} bytes",
            id.chars().take(20).collect::<String>()
        ));
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "capability id {id:?} must start with a letter or digit"
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '+')))
    {
        return Err(format!(
            "capability id {id:?} holds {bad:?}; ids use letters, digits, '-', '_', '.', ':', '/' and '+'"
        ));
    }
    Ok(())
}

/// The `re:` of a payload: one reference or a list (`cancel: {re: [a, b]}`).
///
/// A reference is a ref, a client id, or `last`; the exchange resolves it.
#[derive(Debug, Clone, PartialEq)]
pub enum Re {
    /// A single reference.
    One(String),
    /// Several references.
    Many(Vec<String>),
}

impl Re {
    pub(crate) fn read(f: &mut Fields, required: bool) -> field::Result<Option<Re>> {
        let path = f.at("re");
        match f.take("re") {
            None if required => Err(ProtocolError::invalid(
                path,
                "required field is missing (a ref, a client id or `last`)",
            )),
            None => Ok(None),
            Some(Value::Seq(items)) => {
                if items.is_empty() {
                    return Err(ProtocolError::invalid(
                        path,
                        "the list of references is empty",
                    ));
                }
                let refs = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| field::id_text(v, &format!("{path}[{i}]")))
                    .collect::<field::Result<Vec<_>>>()?;
                Ok(Some(Re::Many(refs)))
            }
            Some(v) => Ok(Some(Re::One(field::id_text(v, &path)?))),
        }
    }

    /// Writes the reference back.
    pub fn to_value(&self) -> Value {
        match self {
            Re::One(s) => Value::str(s),
            Re::Many(v) => Value::Seq(v.iter().map(Value::str).collect()),
        }
    }

    /// The references as a list.
    pub fn items(&self) -> Vec<&str> {
        match self {
            Re::One(s) => vec![s.as_str()],
            Re::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}
