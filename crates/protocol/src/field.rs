//! A path-aware reader that takes typed fields out of a mapping and keeps the rest.
//!
//! Every protocol type is read through it, so every validation error names the field
//! (`MESS[1].status.progress_pct`) and unknown fields survive as `extra`.

use crate::error::ProtocolError;
use crate::time::{self, Duration, Timestamp};
use crate::value::{Map, Value};

pub(crate) type Result<T> = std::result::Result<T, ProtocolError>;

/// The fields of one mapping still to be read, and where the mapping sits.
pub(crate) struct Fields {
    path: String,
    map: Map,
}

impl Fields {
    /// Starts reading `value`, which must be a mapping; `what` names it for the error.
    pub(crate) fn new(value: Value, path: &str, what: &str) -> Result<Self> {
        match value {
            Value::Map(map) => Ok(Fields {
                path: path.to_owned(),
                map,
            }),
            other => Err(ProtocolError::invalid(
                path,
                format!("{what} must be a mapping, found {}", other.kind()),
            )),
        }
    }

    /// The path of `key` inside this mapping.
    pub(crate) fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`, left in place.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    /// True when `key` is present, even with a null value.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Removes `key`; a null value counts as absent.
    pub(crate) fn take(&mut self, key: &str) -> Option<Value> {
        match self.map.remove(key) {
            Some(Value::Null) | None => None,
            Some(v) => Some(v),
        }
    }

    pub(crate) fn req(&mut self, key: &str) -> Result<Value> {
        self.take(key)
            .ok_or_else(|| ProtocolError::invalid(self.at(key), "required field is missing"))
    }

    pub(crate) fn req_str(&mut self, key: &str) -> Result<String> {
        let v = self.req(key)?;
        text(v, &self.at(key))
    }

    pub(crate) fn opt_str(&mut self, key: &str) -> Result<Option<String>> {
        let path = self.at(key);
        self.take(key).map(|v| text(v, &path)).transpose()
    }

    /// Reads an identifier; integers are accepted and kept as their decimal text.
    pub(crate) fn opt_id(&mut self, key: &str) -> Result<Option<String>> {
        let path = self.at(key);
        self.take(key).map(|v| id_text(v, &path)).transpose()
    }

    pub(crate) fn opt_bool(&mut self, key: &str) -> Result<Option<bool>> {
        let path = self.at(key);
        self.take(key).map(|v| boolean(v, &path)).transpose()
    }

    pub(crate) fn opt_int(&mut self, key: &str) -> Result<Option<i64>> {
        let path = self.at(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(i)),
            Some(other) => Err(ProtocolError::invalid(
                path,
                format!("expected an integer, found {}", other.kind()),
            )),
        }
    }

    pub(crate) fn req_int(&mut self, key: &str) -> Result<i64> {
        let path = self.at(key);
        self.opt_int(key)?
            .ok_or_else(|| ProtocolError::invalid(path, "required field is missing"))
    }

    pub(crate) fn opt_number(&mut self, key: &str) -> Result<Option<f64>> {
        let path = self.at(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(i as f64)),
            Some(Value::Float(f)) if f.is_finite() => Ok(Some(f)),
            Some(Value::Float(f)) => Err(ProtocolError::invalid(
                path,
                format!("expected a finite number, found {f}"),
            )),
            Some(other) => Err(ProtocolError::invalid(
                path,
                format!("expected a number, found {}", other.kind()),
            )),
        }
    }

    pub(crate) fn opt_timestamp(&mut self, key: &str) -> Result<Option<Timestamp>> {
        let path = self.at(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => time::parse_timestamp(&s)
                .map(Some)
                .map_err(|e| ProtocolError::invalid(path, e)),
            Some(other) => Err(ProtocolError::invalid(
                path,
                format!("expected a timestamp, found {}", other.kind()),
            )),
        }
    }

    pub(crate) fn opt_iso_duration(&mut self, key: &str) -> Result<Option<Duration>> {
        let path = self.at(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => time::parse_iso_duration(&s)
                .map(Some)
                .map_err(|e| ProtocolError::invalid(path, e)),
            Some(other) => Err(ProtocolError::invalid(
                path,
                format!(
                    "expected an ISO 8601 duration such as PT45M, found {}",
                    other.kind()
                ),
            )),
        }
    }

    /// Reads a list; a single scalar is accepted as a one-element list.
    pub(crate) fn list<T>(
        &mut self,
        key: &str,
        mut item: impl FnMut(Value, &str) -> Result<T>,
    ) -> Result<Vec<T>> {
        let path = self.at(key);
        match self.take(key) {
            None => Ok(Vec::new()),
            Some(Value::Seq(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| item(v, &format!("{path}[{i}]")))
                .collect(),
            Some(Value::Map(m)) => Err(ProtocolError::invalid(
                path,
                format!("expected a list, found a mapping ({} keys)", m.len()),
            )),
            Some(single) => Ok(vec![item(single, &path)?]),
        }
    }

    /// Reads an optional nested mapping with `read`.
    pub(crate) fn nested<T>(
        &mut self,
        key: &str,
        read: impl FnOnce(Fields) -> Result<T>,
    ) -> Result<Option<T>> {
        let path = self.at(key);
        match self.take(key) {
            None => Ok(None),
            Some(v) => read(Fields::new(v, &path, key)?).map(Some),
        }
    }

    /// Returns the fields nobody read, to be kept as `extra`.
    pub(crate) fn rest(self) -> Map {
        self.map
    }
}

/// Reads a string scalar.
pub(crate) fn text(v: Value, path: &str) -> Result<String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(ProtocolError::invalid(
            path,
            format!("expected a string, found {}", other.kind()),
        )),
    }
}

/// Reads an identifier: a string, or an integer kept as its decimal text.
pub(crate) fn id_text(v: Value, path: &str) -> Result<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Ok(s),
        Value::String(_) => Err(ProtocolError::invalid(path, "must not be empty")),
        Value::Int(i) => Ok(i.to_string()),
        other => Err(ProtocolError::invalid(
            path,
            format!("expected an identifier (string), found {}", other.kind()),
        )),
    }
}

pub(crate) fn boolean(v: Value, path: &str) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(ProtocolError::invalid(
            path,
            format!("expected true or false, found {}", describe(&other)),
        )),
    }
}

/// Describes a value for an error message, quoting short scalars.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() <= 40 => format!("{s:?}"),
        other => other.kind().to_owned(),
    }
}

/// Helpers for building values back from typed fields.
pub(crate) fn put_str(map: &mut Map, key: &str, v: &Option<String>) {
    if let Some(s) = v {
        map.insert(key, Value::String(s.clone()));
    }
}

pub(crate) fn put_bool(map: &mut Map, key: &str, v: Option<bool>) {
    if let Some(b) = v {
        map.insert(key, Value::Bool(b));
    }
}

pub(crate) fn put_list<T>(map: &mut Map, key: &str, items: &[T], f: impl Fn(&T) -> Value) {
    if !items.is_empty() {
        map.insert(key, Value::Seq(items.iter().map(f).collect()));
    }
}
