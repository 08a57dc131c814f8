//! The `request` payload (MESS v1.0 section 3, v1.1 section 1): intent, capabilities, context,
//! constraints, hints, priority, and the v1.1 `needed_by` and `confirm_before`.

use crate::content::ContentEntry;
use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::time::{self, Duration, Timestamp};
use crate::value::{Map, Value};

/// A request for physical-world action.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// What the agent needs, in plain language. The only required field.
    pub intent: String,
    /// The client's own reference for this request.
    pub id: Option<String>,
    /// How closely the executor should follow the request.
    pub precision: Option<Precision>,
    /// Capabilities the executor must hold, all of them.
    pub requires: Vec<Capability>,
    /// Context entries.
    pub context: Vec<ContentEntry>,
    /// Location, timing, environment and dependencies.
    pub constraints: Option<Constraints>,
    /// What the response should contain.
    pub response_hint: Vec<ResponseHint>,
    /// Priority; `normal` when absent.
    pub priority: Option<Priority>,
    /// Compensation offered (v1.0: shells and a note).
    pub compensation: Option<Value>,
    /// v1.1: when the request becomes stale; takes precedence over `constraints.timing.expires`.
    pub needed_by: Option<Timestamp>,
    /// v1.1: the executor must get the requestor's confirmation before acting.
    pub confirm_before: Option<bool>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `precision: loose | guided | exact`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Precision {
    Loose,
    Guided,
    Exact,
}

/// `priority: background | normal | elevated | urgent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum Priority {
    Background,
    Normal,
    Elevated,
    Urgent,
}

/// `urgency: whenever | soon | now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Urgency {
    Whenever,
    Soon,
    Now,
}

macro_rules! word_enum {
    ($ty:ident, $what:literal, $($variant:ident => $word:literal),+) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The protocol word for this value.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $word),+ }
            }

            /// Parses the protocol word.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($word => Some($ty::$variant),)+ _ => None }
            }

            pub(crate) fn read(v: Value, path: &str) -> Result<Self> {
                let s = field::text(v, path)?;
                Self::parse(&s).ok_or_else(|| {
                    let words: Vec<&str> = Self::ALL.iter().map(|w| w.as_str()).collect();
                    ProtocolError::invalid(
                        path,
                        format!("unknown {} {:?} (expected one of: {})", $what, s, words.join(", ")),
                    )
                })
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(Precision, "precision", Loose => "loose", Guided => "guided", Exact => "exact");
word_enum!(Priority, "priority", Background => "background", Normal => "normal", Elevated => "elevated", Urgent => "urgent");
word_enum!(Urgency, "urgency", Whenever => "whenever", Soon => "soon", Now => "now");

/// A capability requirement or offer: an id, optionally with exchange-specific metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Capability {
    /// The capability id (`vacuum-floor`).
    pub id: String,
    /// Metadata such as `{variant: fdm}`; its meaning is up to the exchange.
    pub meta: Option<Value>,
}

impl Capability {
    /// Reads `- id` or `- id: metadata`.
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        match v {
            Value::String(s) if !s.trim().is_empty() => Ok(Capability { id: s, meta: None }),
            Value::Map(m) if m.len() == 1 => {
                let Some((id, meta)) = m.into_iter().next() else {
                    return Err(ProtocolError::invalid(path, "empty capability"));
                };
                Ok(Capability {
                    id,
                    meta: (!meta.is_null()).then_some(meta),
                })
            }
            other => Err(ProtocolError::invalid(
                path,
                format!(
                    "a capability must be an id or `id: metadata`, found {}",
                    field::describe(&other)
                ),
            )),
        }
    }

    /// Writes the capability back.
    pub fn to_value(&self) -> Value {
        match &self.meta {
            None => Value::str(&self.id),
            Some(meta) => {
                let mut m = Map::new();
                m.insert(self.id.clone(), meta.clone());
                Value::Map(m)
            }
        }
    }
}

/// A response hint: a content type, optionally with a spec (`- text: list proteins`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseHint {
    /// The content type asked for (`text`, `image`, `location`, ...).
    pub kind: String,
    /// What exactly to provide.
    pub spec: Option<Value>,
}

impl ResponseHint {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let c = Capability::from_value(v, path).map_err(|_| {
            ProtocolError::invalid(path, "a response hint must be a type or `type: spec`")
        })?;
        Ok(ResponseHint {
            kind: c.id,
            spec: c.meta,
        })
    }

    fn to_value(&self) -> Value {
        Capability {
            id: self.kind.clone(),
            meta: self.spec.clone(),
        }
        .to_value()
    }
}

/// `constraints:` of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraints {
    /// A place description or a target area `{lat, lng, radius_km}`.
    pub location: Option<Value>,
    /// Timing constraints.
    pub timing: Option<Timing>,
    /// Conditions such as `daylight` or `indoor`.
    pub environment: Vec<String>,
    /// Client ids or refs of requests that must complete first.
    pub depends_on: Vec<String>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `constraints.timing`.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Do not start before this instant.
    pub not_before: Option<Timestamp>,
    /// When the request expires: an instant, or a duration after creation.
    pub expires: Option<Expiry>,
    /// How soon it matters.
    pub urgency: Option<Urgency>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `expires: datetime | duration`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// An absolute instant.
    At(Timestamp),
    /// A duration counted from the request's creation (`2h`, `PT2H`).
    After(Duration),
}

impl Request {
    /// Reads a request payload; `path` is where it sits (`MESS[1].request`).
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a request")?;
        let intent = f.req_str("intent")?;
        if intent.trim().is_empty() {
            return Err(ProtocolError::invalid(f.at("intent"), "must not be empty"));
        }
        let id = f.opt_id("id")?;
        let precision = f
            .take("precision")
            .map(|v| Precision::read(v, &f.at("precision")))
            .transpose()?;
        let requires = f.list("requires", Capability::from_value)?;
        let context = f.list("context", ContentEntry::from_value)?;
        let constraints = f.nested("constraints", Constraints::from_fields)?;
        let response_hint = f.list("response_hint", ResponseHint::from_value)?;
        let priority = f
            .take("priority")
            .map(|v| Priority::read(v, &f.at("priority")))
            .transpose()?;
        let compensation = f.take("compensation");
        if let Some(c) = &compensation
            && let Some(m) = c.as_map()
            && let Some(shells) = m.get("shells")
            && !matches!(shells, Value::Int(n) if *n >= 0)
        {
            return Err(ProtocolError::invalid(
                f.at("compensation.shells"),
                format!(
                    "expected a whole number of shells, found {}",
                    field::describe(shells)
                ),
            ));
        }
        let needed_by = f.opt_timestamp("needed_by")?;
        let confirm_before = f.opt_bool("confirm_before")?;
        Ok(Request {
            intent,
            id,
            precision,
            requires,
            context,
            constraints,
            response_hint,
            priority,
            compensation,
            needed_by,
            confirm_before,
            extra: f.rest(),
        })
    }

    /// Writes the request back as a value.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        field::put_str(&mut m, "id", &self.id);
        m.insert("intent", Value::str(&self.intent));
        m.insert_opt("precision", self.precision.map(|p| Value::str(p.as_str())));
        field::put_list(&mut m, "requires", &self.requires, Capability::to_value);
        field::put_list(&mut m, "context", &self.context, ContentEntry::to_value);
        m.insert_opt(
            "constraints",
            self.constraints.as_ref().map(Constraints::to_value),
        );
        field::put_list(
            &mut m,
            "response_hint",
            &self.response_hint,
            ResponseHint::to_value,
        );
        m.insert_opt("priority", self.priority.map(|p| Value::str(p.as_str())));
        m.insert_opt("compensation", self.compensation.clone());
        m.insert_opt(
            "needed_by",
            self.needed_by.map(|t| Value::str(time::format_exact(&t))),
        );
        field::put_bool(&mut m, "confirm_before", self.confirm_before);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }

    /// Checks the required capability ids against the documented character set
    /// ([`crate::ids::check_capability_id`]); `path` names the request in the error.
    pub fn check_requires(&self, path: &str) -> Result<()> {
        for (i, c) in self.requires.iter().enumerate() {
            crate::ids::check_capability_id(&c.id)
                .map_err(|why| ProtocolError::invalid(format!("{path}.requires[{i}]"), why))?;
        }
        Ok(())
    }

    /// The capability ids the request requires, in order, without duplicates.
    pub fn required_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for c in &self.requires {
            if !ids.contains(&c.id) {
                ids.push(c.id.clone());
            }
        }
        ids
    }

    /// The effective expiry: `needed_by`, else `constraints.timing.expires` (a duration counts
    /// from `created`).
    pub fn expires_at(&self, created: Timestamp) -> Option<Timestamp> {
        if let Some(t) = self.needed_by {
            return Some(t);
        }
        match self
            .constraints
            .as_ref()?
            .timing
            .as_ref()?
            .expires
            .as_ref()?
        {
            Expiry::At(t) => Some(*t),
            Expiry::After(d) => created.checked_add_signed(d.length),
        }
    }

    /// The `depends_on` entries as written.
    pub fn depends_on(&self) -> &[String] {
        self.constraints
            .as_ref()
            .map(|c| c.depends_on.as_slice())
            .unwrap_or(&[])
    }
}

impl Constraints {
    fn from_fields(mut f: Fields) -> Result<Self> {
        let location = f.take("location");
        if let Some(loc) = &location {
            match loc {
                Value::String(_) => {}
                Value::Map(m) => {
                    for key in ["lat", "lng", "radius_km"] {
                        if let Some(v) = m.get(key)
                            && !matches!(v, Value::Int(_) | Value::Float(_))
                        {
                            return Err(ProtocolError::invalid(
                                f.at(&format!("location.{key}")),
                                format!("expected a number, found {}", v.kind()),
                            ));
                        }
                    }
                }
                other => {
                    return Err(ProtocolError::invalid(
                        f.at("location"),
                        format!(
                            "expected a place name or {{lat, lng, radius_km}}, found {}",
                            other.kind()
                        ),
                    ));
                }
            }
        }
        let timing = f.nested("timing", Timing::from_fields)?;
        let environment = f.list("environment", field::text)?;
        let depends_on = f.list("depends_on", field::id_text)?;
        Ok(Constraints {
            location,
            timing,
            environment,
            depends_on,
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert_opt("location", self.location.clone());
        m.insert_opt("timing", self.timing.as_ref().map(Timing::to_value));
        field::put_list(&mut m, "environment", &self.environment, |s| Value::str(s));
        field::put_list(&mut m, "depends_on", &self.depends_on, |s| Value::str(s));
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Timing {
    fn from_fields(mut f: Fields) -> Result<Self> {
        let not_before = f.opt_timestamp("not_before")?;
        let expires = match f.take("expires") {
            None => None,
            Some(Value::String(s)) => {
                Some(parse_expiry(&s).map_err(|e| ProtocolError::invalid(f.at("expires"), e))?)
            }
            Some(other) => {
                return Err(ProtocolError::invalid(
                    f.at("expires"),
                    format!("expected a timestamp or a duration, found {}", other.kind()),
                ));
            }
        };
        let urgency = f
            .take("urgency")
            .map(|v| Urgency::read(v, &f.at("urgency")))
            .transpose()?;
        Ok(Timing {
            not_before,
            expires,
            urgency,
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert_opt(
            "not_before",
            self.not_before.map(|t| Value::str(time::format_exact(&t))),
        );
        m.insert_opt(
            "expires",
            self.expires.as_ref().map(|e| match e {
                Expiry::At(t) => Value::str(time::format_exact(t)),
                Expiry::After(d) => Value::str(&d.text),
            }),
        );
        m.insert_opt("urgency", self.urgency.map(|u| Value::str(u.as_str())));
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

fn parse_expiry(s: &str) -> std::result::Result<Expiry, String> {
    if s.len() >= 10 && s.as_bytes()[4] == b'-' {
        return time::parse_timestamp(s).map(Expiry::At);
    }
    time::parse_any_duration(s).map(Expiry::After).map_err(|_| {
        format!("expected a timestamp with offset or a duration (2h, PT2H), found {s:?}")
    })
}
