//! The `config` payload (MESS v1.0 section 6): an executor's registration (who it is, what it
//! can do, where and when) and routing rules (a match, or the default, and whom to prefer).
//! config.yaml's `executors:` entries are read by the same code, so a registration over the
//! wire and one in the file are checked alike.

use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::request::{Capability, Precision, Urgency};
use crate::value::{Map, Value};

/// `config`: register an executor or set routing rules.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigMsg {
    /// An executor registration.
    pub executor: Option<ExecutorSpec>,
    /// Routing rules.
    pub routing: Option<Vec<RoutingRule>>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// An executor: who it is, what it can do, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorSpec {
    /// The executor id (`teague-phone`).
    pub id: String,
    /// A human-readable name.
    pub name: Option<String>,
    /// The capabilities it claims, with optional metadata.
    pub capabilities: Vec<Capability>,
    /// `always`, `schedule` or `on_demand`.
    pub availability: Option<String>,
    /// A cron expression, when availability is `schedule`.
    pub schedule: Option<String>,
    /// The IANA time zone the schedule is read in (`Europe/Berlin`); without one, config.yaml's
    /// top-level `timezone:`, else UTC.
    pub timezone: Option<String>,
    /// The places it can reach, as paths (`home`, `home/kitchen`): a request whose
    /// `constraints.location` names a path is offered only to executors with that path or one
    /// above it (when they declare any).
    pub access: Vec<String>,
    /// Where it works: a place path (counted with `access`) or an area `{lat, lng, radius_km}`
    /// that a request's target area must overlap.
    pub location: Option<Value>,
    /// The conditions it works in (`indoor`, `daylight`): when declared, a request's
    /// `constraints.environment` must be among them.
    pub environment: Vec<String>,
    /// Other fields (`notify`, ...), kept unchanged.
    pub extra: Map,
}

/// One routing rule: a match (or the default) and who to prefer.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingRule {
    /// What the rule applies to; `None` for the `default` rule.
    pub matcher: Option<RuleMatch>,
    /// Executor ids, or a strategy word (`lower_latency`, `higher_precision`, `best_rated`).
    pub prefer: Prefer,
    /// Other fields, kept unchanged.
    pub extra: Map,
}

/// `match: {capability?, urgency?, precision?}`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleMatch {
    /// The request requires this capability.
    pub capability: Option<String>,
    /// The request has this urgency.
    pub urgency: Option<Urgency>,
    /// The request has this precision.
    pub precision: Option<Precision>,
    /// Other fields, kept unchanged.
    pub extra: Map,
}

/// `prefer: [executor-id] | lower_latency | higher_precision | best_rated`.
#[derive(Debug, Clone, PartialEq)]
pub enum Prefer {
    /// These executors, in order.
    Executors(Vec<String>),
    /// A strategy word.
    Strategy(String),
}

impl ConfigMsg {
    pub(crate) fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a config")?;
        let executor = f.nested("executor", ExecutorSpec::from_fields)?;
        let routing = f.nested("routing", |mut g| {
            let rules = g.list("rules", RoutingRule::from_value)?;
            Ok(rules)
        })?;
        if executor.is_none() && routing.is_none() {
            return Err(ProtocolError::invalid(
                path,
                "a config needs an executor registration or routing rules",
            ));
        }
        Ok(ConfigMsg {
            executor,
            routing,
            extra: f.rest(),
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert_opt(
            "executor",
            self.executor.as_ref().map(ExecutorSpec::to_value),
        );
        if let Some(rules) = &self.routing {
            let mut r = Map::new();
            r.insert(
                "rules",
                Value::Seq(rules.iter().map(RoutingRule::to_value).collect()),
            );
            m.insert("routing", Value::Map(r));
        }
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl ExecutorSpec {
    /// Reads an executor from a mapping that holds its `id`.
    pub(crate) fn from_fields(mut f: Fields) -> Result<Self> {
        let id_path = f.at("id");
        let id = field::id_text(f.req("id")?, &id_path)?;
        Self::rest_from_fields(id, f)
    }

    /// Reads an executor from `value`, the body of `executors: {<id>: ...}` in config.yaml.
    pub fn from_entry(id: &str, value: Value, path: &str) -> Result<Self> {
        let value = if value.is_null() {
            Value::Map(Map::new())
        } else {
            value
        };
        let mut f = Fields::new(value, path, "an executor")?;
        if let Some(inner) = f.opt_id("id")?
            && inner != id
        {
            return Err(ProtocolError::invalid(
                f.at("id"),
                format!("id {inner:?} differs from the entry's key {id:?}"),
            ));
        }
        Self::rest_from_fields(id.to_owned(), f)
    }

    fn rest_from_fields(id: String, mut f: Fields) -> Result<Self> {
        let capabilities = f.list("capabilities", Capability::from_value)?;
        let availability = f.opt_str("availability")?;
        if let Some(a) = &availability
            && !matches!(a.as_str(), "always" | "schedule" | "on_demand")
        {
            return Err(ProtocolError::invalid(
                f.at("availability"),
                format!("unknown availability {a:?} (expected always, schedule or on_demand)"),
            ));
        }
        let schedule = f.opt_str("schedule")?;
        Ok(ExecutorSpec {
            id,
            name: f.opt_str("name")?,
            capabilities,
            availability,
            schedule,
            timezone: f.opt_str("timezone")?,
            access: f.list("access", field::text)?,
            location: f.take("location").filter(|v| !v.is_null()),
            environment: f.list("environment", field::text)?,
            extra: f.rest(),
        })
    }

    /// Writes the executor back, including its `id`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("id", Value::str(&self.id));
        field::put_str(&mut m, "name", &self.name);
        field::put_list(
            &mut m,
            "capabilities",
            &self.capabilities,
            Capability::to_value,
        );
        field::put_str(&mut m, "availability", &self.availability);
        field::put_str(&mut m, "schedule", &self.schedule);
        field::put_str(&mut m, "timezone", &self.timezone);
        field::put_list(&mut m, "access", &self.access, |s| Value::str(s));
        m.insert_opt("location", self.location.clone());
        field::put_list(&mut m, "environment", &self.environment, |s| Value::str(s));
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }

    /// Checks what the exchange takes from a registration or config.yaml before it reaches
    /// routing: capability ids of the documented character set
    /// ([`crate::ids::check_capability_id`]), a cron schedule routing can evaluate
    /// ([`crate::cron::check_schedule`]) in a known time zone
    /// ([`crate::tz::check_timezone`]), a schedule wherever availability says
    /// `schedule`, and a `location` routing can compare (a place path, or an area with
    /// numeric `lat` in -90..90, `lng` in -180..180 and a `radius_km` of at least 0). `path`
    /// names the entry in the error.
    pub fn check(&self, path: &str) -> Result<()> {
        for (i, c) in self.capabilities.iter().enumerate() {
            crate::ids::check_capability_id(&c.id)
                .map_err(|why| ProtocolError::invalid(format!("{path}.capabilities[{i}]"), why))?;
        }
        if let Some(schedule) = &self.schedule {
            crate::cron::check_schedule(schedule)
                .map_err(|why| ProtocolError::invalid(format!("{path}.schedule"), why))?;
        }
        if let Some(zone) = &self.timezone {
            crate::tz::check_timezone(zone)
                .map_err(|why| ProtocolError::invalid(format!("{path}.timezone"), why))?;
        }
        if let Some(location) = &self.location {
            check_area(location)
                .map_err(|why| ProtocolError::invalid(format!("{path}.location"), why))?;
        }
        if self.availability.as_deref() == Some("schedule") && self.schedule.is_none() {
            return Err(ProtocolError::invalid(
                format!("{path}.availability"),
                "availability schedule needs a cron `schedule` (e.g. \"0 8-22 * * *\")",
            ));
        }
        Ok(())
    }

    /// The capability ids offered.
    pub fn capability_ids(&self) -> Vec<&str> {
        self.capabilities.iter().map(|c| c.id.as_str()).collect()
    }
}

/// Checks an executor's `location`: a place path (text) or an area `{lat, lng, radius_km?}`.
fn check_area(location: &Value) -> std::result::Result<(), String> {
    let area = match location {
        Value::String(s) if !s.trim().is_empty() => return Ok(()),
        Value::Map(m) => m,
        other => {
            return Err(format!(
                "expected a place (text) or an area {{lat, lng, radius_km}}, found {}",
                field::describe(other)
            ));
        }
    };
    let number = |key: &str| match area.get(key) {
        Some(Value::Int(n)) => Ok(Some(*n as f64)),
        Some(Value::Float(x)) if x.is_finite() => Ok(Some(*x)),
        None | Some(Value::Null) => Ok(None),
        Some(other) => Err(format!(
            "{key} must be a number, found {}",
            field::describe(other)
        )),
    };
    for (key, limit) in [("lat", 90.0), ("lng", 180.0)] {
        match number(key)? {
            Some(x) if x.abs() <= limit => {}
            Some(x) => return Err(format!("{key} {x} is outside -{limit}..{limit}")),
            None => return Err(format!("an area needs {key} (degrees)")),
        }
    }
    match number("radius_km")? {
        Some(r) if r < 0.0 => Err(format!("radius_km {r} is negative")),
        _ => Ok(()),
    }
}

impl RoutingRule {
    /// Reads a rule: `{match: {...}, prefer: ...}` or `{default: ..., prefer: ...}`, where the
    /// seed config writes `prefer` either beside `default:` or nested under it.
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a routing rule")?;
        let has_default = f.has("default");
        let default_body = f.take("default");
        let matcher = match f.take("match") {
            Some(m) => {
                let mut g = Fields::new(m, &f.at("match"), "match")?;
                Some(RuleMatch {
                    capability: g.opt_id("capability")?,
                    urgency: g
                        .take("urgency")
                        .map(|v| Urgency::read(v, &g.at("urgency")))
                        .transpose()?,
                    precision: g
                        .take("precision")
                        .map(|v| Precision::read(v, &g.at("precision")))
                        .transpose()?,
                    extra: g.rest(),
                })
            }
            None if has_default => None,
            None => {
                return Err(ProtocolError::invalid(
                    path,
                    "a routing rule needs `match: {capability?, urgency?, precision?}` or `default:`",
                ));
            }
        };
        let prefer_value = match f.take("prefer") {
            Some(p) => p,
            None => match default_body {
                Some(Value::Map(mut m)) if m.contains_key("prefer") => {
                    m.remove("prefer").unwrap_or(Value::Null)
                }
                _ => {
                    return Err(ProtocolError::invalid(
                        f.at("prefer"),
                        "required field is missing (executor ids or a strategy)",
                    ));
                }
            },
        };
        let prefer_path = f.at("prefer");
        let prefer = match prefer_value {
            Value::String(s)
                if !s.contains(' ')
                    && matches!(
                        s.as_str(),
                        "lower_latency" | "higher_precision" | "best_rated"
                    ) =>
            {
                Prefer::Strategy(s)
            }
            Value::String(s) => Prefer::Executors(vec![s]),
            Value::Seq(items) => Prefer::Executors(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| field::id_text(v, &format!("{prefer_path}[{i}]")))
                    .collect::<Result<Vec<_>>>()?,
            ),
            other => {
                return Err(ProtocolError::invalid(
                    prefer_path,
                    format!(
                        "expected executor ids or a strategy, found {}",
                        other.kind()
                    ),
                ));
            }
        };
        Ok(RoutingRule {
            matcher,
            prefer,
            extra: f.rest(),
        })
    }

    /// Writes the rule back in the `match`/`default` + `prefer` form.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        match &self.matcher {
            Some(rm) => {
                let mut mm = Map::new();
                field::put_str(&mut mm, "capability", &rm.capability);
                mm.insert_opt("urgency", rm.urgency.map(|u| Value::str(u.as_str())));
                mm.insert_opt("precision", rm.precision.map(|p| Value::str(p.as_str())));
                mm.extend_missing(rm.extra.clone());
                m.insert("match", Value::Map(mm));
            }
            None => m.insert("default", Value::Null),
        }
        m.insert(
            "prefer",
            match &self.prefer {
                Prefer::Executors(ids) => Value::Seq(ids.iter().map(Value::str).collect()),
                Prefer::Strategy(s) => Value::str(s),
            },
        );
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}
