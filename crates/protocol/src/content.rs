//! Context and content entries (MESS v1.0 section 2, v1.1 section 3): the MIME-like list items
//! that carry text, media, files, structured data, confirmations and locations.

use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::value::{Map, Value};

/// One entry of a request's `context` or a response's `content` list.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentEntry {
    /// A bare string: plain text.
    Text(String),
    /// `text:`: explicit text (response content).
    ExplicitText(String),
    /// `image:`: a URL, data URI or `{uri, name?, mime?}`.
    Image(MediaRef),
    /// `audio:`: a URL, data URI or `{uri, name?, mime?}`.
    Audio(MediaRef),
    /// `video:`: a URL, data URI or `{uri, name?, mime?}`.
    Video(MediaRef),
    /// `file:`: a URI or `{uri, name?, mime?}`.
    File(MediaRef),
    /// `url:`: a web page reference.
    Url(String),
    /// `json:`: inline structured data.
    Json(Value),
    /// `ref:`: a cross-reference to another request or response.
    Ref(String),
    /// `embedding:`: a vector for semantic matching.
    Embedding(Vec<f64>),
    /// `confirmation:`: a yes/no result, short (`true`) or long (`{confirmed, details?}`).
    Confirmation(Confirmation),
    /// `structured:`: typed structured data.
    Structured(Value),
    /// `error:`: `{code, message, detail?}`.
    Error(ErrorContent),
    /// `location:` (v1.1 section 3.2): a described place.
    Location(Location),
    /// Any other single-key entry, kept as it came (for example `Note: text` written unquoted).
    Other {
        /// The entry's key.
        kind: String,
        /// The entry's value.
        value: Value,
    },
}

/// A media or file reference: a bare URI or the long form with a name and MIME type.
#[derive(Debug, Clone, PartialEq)]
pub enum MediaRef {
    /// `https://...`, `file://...` or `data:<mime>;base64,...`.
    Uri(String),
    /// `{uri, name?, mime?}` plus any other fields.
    Detailed {
        /// The URI or data URI.
        uri: String,
        /// A human-readable name.
        name: Option<String>,
        /// The MIME type.
        mime: Option<String>,
        /// Fields this version does not know, kept unchanged.
        extra: Map,
    },
}

/// A confirmation result.
#[derive(Debug, Clone, PartialEq)]
pub enum Confirmation {
    /// `confirmation: true`.
    Short(bool),
    /// `confirmation: {confirmed, details?, ...}`.
    Long {
        /// Whether the action was confirmed.
        confirmed: bool,
        /// Optional explanation.
        details: Option<String>,
        /// Other fields (v1.0 shows `units: 4`), kept unchanged.
        extra: Map,
    },
}

/// The `error` content entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorContent {
    /// A machine-readable code.
    pub code: String,
    /// A human-readable message.
    pub message: String,
    /// Optional detail, any shape.
    pub detail: Option<Value>,
    /// Other fields, kept unchanged.
    pub extra: Map,
}

/// A place (v1.1 section 3.2): coordinates and/or human descriptions.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    /// Latitude in degrees, -90..=90.
    pub lat: Option<f64>,
    /// Longitude in degrees, -180..=180.
    pub lng: Option<f64>,
    /// Accuracy in meters.
    pub accuracy: Option<f64>,
    /// Altitude in meters.
    pub altitude: Option<f64>,
    /// A casual or local name ("Kitchen").
    pub name: Option<String>,
    /// A formal postal address.
    pub address: Option<String>,
    /// Extra context ("by the back door").
    pub description: Option<String>,
    /// Other fields, kept unchanged.
    pub extra: Map,
}

impl ContentEntry {
    /// Reads one list entry; `path` names it in errors.
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        let map = match v {
            Value::String(s) => return Ok(ContentEntry::Text(s)),
            Value::Map(m) => m,
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                // An unquoted `- 42` or `- yes` in a context list is still text to a human.
                return Ok(ContentEntry::Text(v.scalar_text().unwrap_or_default()));
            }
            other => {
                return Err(ProtocolError::invalid(
                    path,
                    format!(
                        "a content entry must be text or a single-key mapping, found {}",
                        other.kind()
                    ),
                ));
            }
        };
        if map.len() != 1 {
            let keys: Vec<_> = map.keys().cloned().collect();
            return Err(ProtocolError::invalid(
                path,
                format!(
                    "a content entry must have exactly one key (like `image:`), found {}",
                    if keys.is_empty() {
                        "none".to_owned()
                    } else {
                        keys.join(", ")
                    }
                ),
            ));
        }
        let Some((kind, value)) = map.into_iter().next() else {
            return Err(ProtocolError::invalid(path, "empty content entry"));
        };
        let at = format!("{path}.{kind}");
        Ok(match kind.as_str() {
            "text" => ContentEntry::ExplicitText(field::text(value, &at)?),
            "image" => ContentEntry::Image(MediaRef::from_value(value, &at)?),
            "audio" => ContentEntry::Audio(MediaRef::from_value(value, &at)?),
            "video" => ContentEntry::Video(MediaRef::from_value(value, &at)?),
            "file" => ContentEntry::File(MediaRef::from_value(value, &at)?),
            "url" => ContentEntry::Url(field::text(value, &at)?),
            "json" => ContentEntry::Json(value),
            "ref" => ContentEntry::Ref(field::id_text(value, &at)?),
            "embedding" => ContentEntry::Embedding(embedding(value, &at)?),
            "confirmation" => ContentEntry::Confirmation(Confirmation::from_value(value, &at)?),
            "structured" => ContentEntry::Structured(value),
            "error" => ContentEntry::Error(ErrorContent::from_value(value, &at)?),
            "location" => {
                ContentEntry::Location(Location::from_fields(Fields::new(value, &at, "location")?)?)
            }
            _ => ContentEntry::Other { kind, value },
        })
    }

    /// Writes the entry back as a value.
    pub fn to_value(&self) -> Value {
        let single = |k: &str, v: Value| {
            let mut m = Map::new();
            m.insert(k, v);
            Value::Map(m)
        };
        match self {
            ContentEntry::Text(s) => Value::str(s),
            ContentEntry::ExplicitText(s) => single("text", Value::str(s)),
            ContentEntry::Image(m) => single("image", m.to_value()),
            ContentEntry::Audio(m) => single("audio", m.to_value()),
            ContentEntry::Video(m) => single("video", m.to_value()),
            ContentEntry::File(m) => single("file", m.to_value()),
            ContentEntry::Url(u) => single("url", Value::str(u)),
            ContentEntry::Json(v) => single("json", v.clone()),
            ContentEntry::Ref(r) => single("ref", Value::str(r)),
            ContentEntry::Embedding(e) => single(
                "embedding",
                Value::Seq(e.iter().map(|f| Value::Float(*f)).collect()),
            ),
            ContentEntry::Confirmation(c) => single("confirmation", c.to_value()),
            ContentEntry::Structured(v) => single("structured", v.clone()),
            ContentEntry::Error(e) => single("error", e.to_value()),
            ContentEntry::Location(l) => single("location", l.to_value()),
            ContentEntry::Other { kind, value } => single(kind, value.clone()),
        }
    }

    /// Returns the entry's text when it is plain or explicit text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentEntry::Text(s) | ContentEntry::ExplicitText(s) => Some(s),
            _ => None,
        }
    }
}

fn embedding(v: Value, path: &str) -> Result<Vec<f64>> {
    let Value::Seq(items) = v else {
        return Err(ProtocolError::invalid(
            path,
            format!("expected a list of numbers, found {}", v.kind()),
        ));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::Int(n) => Ok(n as f64),
            Value::Float(f) if f.is_finite() => Ok(f),
            other => Err(ProtocolError::invalid(
                format!("{path}[{i}]"),
                format!("expected a number, found {}", other.kind()),
            )),
        })
        .collect()
}

impl MediaRef {
    /// Reads a bare URI or the `{uri, name?, mime?}` form.
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        match v {
            Value::String(s) if !s.trim().is_empty() => Ok(MediaRef::Uri(s)),
            Value::String(_) => Err(ProtocolError::invalid(path, "the URI must not be empty")),
            Value::Map(_) => {
                let mut f = Fields::new(v, path, "a media reference")?;
                let uri = f.req_str("uri")?;
                let name = f.opt_str("name")?;
                let mime = f.opt_str("mime")?;
                Ok(MediaRef::Detailed {
                    uri,
                    name,
                    mime,
                    extra: f.rest(),
                })
            }
            other => Err(ProtocolError::invalid(
                path,
                format!(
                    "expected a URI or {{uri, name?, mime?}}, found {}",
                    other.kind()
                ),
            )),
        }
    }

    /// Writes the reference back as a value.
    pub fn to_value(&self) -> Value {
        match self {
            MediaRef::Uri(u) => Value::str(u),
            MediaRef::Detailed {
                uri,
                name,
                mime,
                extra,
            } => {
                let mut m = Map::new();
                m.insert("uri", Value::str(uri));
                field::put_str(&mut m, "name", name);
                field::put_str(&mut m, "mime", mime);
                m.extend_missing(extra.clone());
                Value::Map(m)
            }
        }
    }

    /// Returns the URI.
    pub fn uri(&self) -> &str {
        match self {
            MediaRef::Uri(u) | MediaRef::Detailed { uri: u, .. } => u,
        }
    }
}

impl Confirmation {
    /// Reads `true`/`false` or `{confirmed, details?}`.
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        match v {
            Value::Bool(b) => Ok(Confirmation::Short(b)),
            Value::Map(_) => {
                let mut f = Fields::new(v, path, "a confirmation")?;
                let at = f.at("confirmed");
                let confirmed = field::boolean(f.req("confirmed")?, &at)?;
                let details = f.opt_str("details")?;
                Ok(Confirmation::Long {
                    confirmed,
                    details,
                    extra: f.rest(),
                })
            }
            other => Err(ProtocolError::invalid(
                path,
                format!(
                    "expected true, false or {{confirmed, details?}}, found {}",
                    field::describe(&other)
                ),
            )),
        }
    }

    /// Writes the confirmation back as a value.
    pub fn to_value(&self) -> Value {
        match self {
            Confirmation::Short(b) => Value::Bool(*b),
            Confirmation::Long {
                confirmed,
                details,
                extra,
            } => {
                let mut m = Map::new();
                m.insert("confirmed", Value::Bool(*confirmed));
                field::put_str(&mut m, "details", details);
                m.extend_missing(extra.clone());
                Value::Map(m)
            }
        }
    }

    /// Returns whether the action was confirmed.
    pub fn confirmed(&self) -> bool {
        match self {
            Confirmation::Short(b) | Confirmation::Long { confirmed: b, .. } => *b,
        }
    }
}

impl ErrorContent {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "an error entry")?;
        let code = f.req("code")?;
        let code = code
            .scalar_text()
            .ok_or_else(|| ProtocolError::invalid(f.at("code"), "expected a code"))?;
        Ok(ErrorContent {
            code,
            message: f.req_str("message")?,
            detail: f.take("detail"),
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("code", Value::str(&self.code));
        m.insert("message", Value::str(&self.message));
        m.insert_opt("detail", self.detail.clone());
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Location {
    /// Reads a location mapping; coordinates are range-checked.
    pub(crate) fn from_fields(mut f: Fields) -> Result<Self> {
        let lat = f.opt_number("lat")?;
        let lng = f.opt_number("lng")?;
        if let Some(lat) = lat.filter(|l| !(-90.0..=90.0).contains(l)) {
            return Err(ProtocolError::invalid(
                f.at("lat"),
                format!("latitude {lat} is outside -90..90"),
            ));
        }
        if let Some(lng) = lng.filter(|l| !(-180.0..=180.0).contains(l)) {
            return Err(ProtocolError::invalid(
                f.at("lng"),
                format!("longitude {lng} is outside -180..180"),
            ));
        }
        Ok(Location {
            lat,
            lng,
            accuracy: f.opt_number("accuracy")?,
            altitude: f.opt_number("altitude")?,
            name: f.opt_str("name")?,
            address: f.opt_str("address")?,
            description: f.opt_str("description")?,
            extra: f.rest(),
        })
    }

    /// Writes the location back as a mapping.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        for (k, v) in [
            ("lat", self.lat),
            ("lng", self.lng),
            ("accuracy", self.accuracy),
            ("altitude", self.altitude),
        ] {
            m.insert_opt(k, v.map(number));
        }
        field::put_str(&mut m, "name", &self.name);
        field::put_str(&mut m, "address", &self.address);
        field::put_str(&mut m, "description", &self.description);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

/// Writes a number as an integer when it is whole, so `35` stays `35`.
pub(crate) fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        Value::Int(f as i64)
    } else {
        Value::Float(f)
    }
}

/// Guesses a MIME type from a file name's extension; `application/octet-stream` when unknown.
pub fn mime_for_name(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "svg" => "image/svg+xml",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "ogg" => "audio/ogg",
        "webm" => "video/webm",
        "mp4" => "video/mp4",
        "mov" => "video/quicktime",
        "pdf" => "application/pdf",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "txt" | "log" => "text/plain",
        "csv" => "text/csv",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "stl" => "model/stl",
        _ => "application/octet-stream",
    }
}

/// Builds a `data:<mime>;base64,<data>` URI (MESS v1.0 section 2.3).
pub fn data_uri(mime: &str, bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(mime.len() + 13 + bytes.len().div_ceil(3) * 4);
    out.push_str("data:");
    out.push_str(mime);
    out.push_str(";base64,");
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The response hints (v1.1 section 3.1) that `content` does not answer: `text` wants a bare or
/// explicit text entry, `image`/`video`/`audio`/`file`/`location`/`confirmation` an entry of that
/// type. Hints of other kinds are exchange-specific and not judged.
pub fn unmet_hints<'a>(
    hints: impl IntoIterator<Item = &'a str>,
    content: &[ContentEntry],
) -> Vec<String> {
    let answers = |hint: &str| {
        content.iter().any(|e| {
            matches!(
                (hint, e),
                (
                    "text",
                    ContentEntry::Text(_) | ContentEntry::ExplicitText(_)
                ) | ("image", ContentEntry::Image(_))
                    | ("video", ContentEntry::Video(_))
                    | ("audio", ContentEntry::Audio(_))
                    | ("file", ContentEntry::File(_))
                    | ("location", ContentEntry::Location(_))
                    | ("confirmation", ContentEntry::Confirmation(_))
            )
        })
    };
    const KNOWN: [&str; 7] = [
        "text",
        "image",
        "video",
        "audio",
        "file",
        "location",
        "confirmation",
    ];
    hints
        .into_iter()
        .filter(|h| KNOWN.contains(h) && !answers(h))
        .map(str::to_owned)
        .collect()
}
