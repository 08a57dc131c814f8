//! The executors, routing rules and capability catalog in effect, read fresh from the store for
//! each use case so `config` messages and edits to config.yaml apply at once; plus eligibility
//! and the routing decision for a new request.

use crate::db::{ExecutorRow, RouteWanted, RoutingDirectory, RuleRow};
use crate::protocol::config::{ExecutorSpec, Prefer, RoutingRule};
use crate::protocol::request::{Precision, Request, Urgency};
use crate::protocol::value::Value;
use crate::store::Store;

/// Executors, rules and catalog as currently configured.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    /// Registered executors: config.yaml's, overridden by registrations with the same id.
    pub executors: Vec<ExecutorSpec>,
    /// Routing rules: routing.yaml's if a config message set them, else config.yaml's.
    pub rules: Vec<RoutingRule>,
    /// Each rule's 1-based position in its file's list (rules that cannot be read are left
    /// out of `rules` but keep their place, so positions match the `routing_rules` view).
    pub rule_positions: Vec<usize>,
    /// The capability catalog (capabilities.yaml).
    pub catalog: Vec<CatalogEntry>,
    /// The time zone of schedules whose executor names none (config.yaml's top-level
    /// `timezone:`; UTC without one).
    pub timezone: Option<String>,
    /// Where each executor was declared.
    pub origins: Vec<(String, Origin)>,
    /// Entries that could not be read or do not fit together, one line each.
    pub problems: Vec<String>,
    /// Of those, keys of config.yaml mess does not read (with the one likely meant) and values
    /// YAML read as another type: typos, which `mess fsck` counts as problems of the home.
    pub key_problems: Vec<String>,
}

/// Where an executor is declared, which decides who may change it.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// `config.yaml`: the owner's file; `config` messages do not change it.
    ConfigFile,
    /// `executors/<id>.yaml`, written by a `config` message from `by`.
    Registration {
        /// The sender of the registering message (absent in files from older versions).
        by: Option<String>,
        /// Whether it came with an API key (`registered_with: key`, and files that do not
        /// say), rather than from the operator on this machine: its webhooks are limited.
        by_key: bool,
    },
}

pub use crate::protocol::answer::CatalogEntry;

/// What routing looks at in a request.
#[derive(Debug, Clone, Default)]
pub struct RouteInput {
    /// Required capability ids.
    pub requires: Vec<String>,
    /// The required capabilities in the request's order, as routing takes them: an id, or the
    /// JSON text of `{id: metadata}` when the metadata is a mapping (which the executor's
    /// metadata must satisfy). Empty when the request was not read: `requires` stands then.
    pub entries: Vec<String>,
    /// The request's precision.
    pub precision: Option<Precision>,
    /// The request's urgency.
    pub urgency: Option<Urgency>,
    /// The request's `constraints.location`.
    pub location: Option<Value>,
    /// The request's `constraints.environment`.
    pub environment: Vec<String>,
}

impl RouteInput {
    /// The routing view of a request.
    pub fn of(request: &Request) -> RouteInput {
        let constraints = request.constraints.as_ref();
        RouteInput {
            requires: request.required_ids(),
            entries: request
                .requires
                .iter()
                .map(|c| match &c.meta {
                    Some(meta @ Value::Map(_)) => {
                        let mut entry = serde_json::Map::new();
                        entry.insert(c.id.clone(), json(meta));
                        serde_json::Value::Object(entry).to_string()
                    }
                    _ => c.id.clone(),
                })
                .collect(),
            precision: request.precision,
            urgency: constraints
                .and_then(|c| c.timing.as_ref())
                .and_then(|t| t.urgency),
            location: constraints.and_then(|c| c.location.clone()),
            environment: constraints
                .map(|c| c.environment.clone())
                .unwrap_or_default(),
        }
    }

    /// The request as `Db::route_batch` takes it, for thread `thread`.
    pub fn wanted(&self, thread: String) -> RouteWanted {
        RouteWanted {
            thread,
            requires: if self.entries.is_empty() {
                self.requires.clone()
            } else {
                self.entries.clone()
            },
            precision: self.precision.map(|p| p.as_str().to_owned()),
            urgency: self.urgency.map(|u| u.as_str().to_owned()),
            location: self.location.as_ref().map(json),
            environment: self.environment.clone(),
        }
    }
}

/// A protocol value as JSON (`Value` serialises as the JSON of its YAML).
fn json(value: &Value) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

impl Directory {
    /// Reads the directory from the store's registry files: config.yaml's time zone and
    /// executors, the registrations, the routing rules and the capability catalog; what is
    /// wrong in them becomes a problem (`mess status`, `mess fsck`), never a failure.
    pub fn load(store: &Store) -> Directory {
        let (files, errors) = store.registry();
        let mut dir = Directory {
            problems: errors.iter().map(ToString::to_string).collect(),
            ..Directory::default()
        };
        if let Some(raw) = &files.config {
            dir.key_problems = super::config_keys::problems(raw);
            dir.problems.extend(dir.key_problems.iter().cloned());
        }
        let config = files.config.as_ref().and_then(Value::as_map);
        if let Some(zone) = config.and_then(|c| c.get("timezone")) {
            dir.read_timezone(zone);
        }
        if let Some(execs) = config.and_then(|c| c.get("executors")) {
            dir.read_config_executors(execs);
        }
        for (path, value) in &files.registrations {
            dir.read_registration(path, value);
        }
        let rules = match &files.routing {
            Some(r) => Some((r, "routing.yaml")),
            None => config
                .and_then(|c| c.get("routing"))
                .map(|r| (r, "config.yaml: routing")),
        };
        if let Some((rules, origin)) = rules {
            dir.read_rules(rules, origin);
        }
        dir.check_rules();
        for doc in &files.capabilities {
            dir.read_capability(doc);
        }
        dir
    }

    /// config.yaml's `timezone`: the executors view reads the same text, so an unknown zone is
    /// one there too (a schedule read in it allows nothing).
    fn read_timezone(&mut self, zone: &Value) {
        self.timezone = zone.scalar_text();
        match &self.timezone {
            Some(name) => {
                if let Err(why) = crate::protocol::tz::check_timezone(name) {
                    self.problems.push(format!(
                        "config.yaml: timezone: {why}; executors with a schedule and no timezone of their own are never available"
                    ));
                }
            }
            None if zone.is_null() => {}
            None => self.problems.push(format!(
                "config.yaml: timezone must be a time zone name, found {}; executors with a schedule and no timezone of their own are never available",
                zone.kind()
            )),
        }
    }

    /// config.yaml's `executors`: a mapping by id, or a list of entries that hold their id.
    fn read_config_executors(&mut self, execs: &Value) {
        match execs {
            Value::Map(m) => {
                for (id, body) in m.iter() {
                    self.add(
                        ExecutorSpec::from_entry(
                            id,
                            body.clone(),
                            &format!("config.yaml: executors.{id}"),
                        ),
                        Origin::ConfigFile,
                    );
                }
            }
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    let id = item
                        .as_map()
                        .and_then(|m| m.get("id"))
                        .and_then(Value::scalar_text)
                        .unwrap_or_default();
                    self.add(
                        ExecutorSpec::from_entry(
                            &id,
                            item.clone(),
                            &format!("config.yaml: executors[{i}]"),
                        ),
                        Origin::ConfigFile,
                    );
                }
            }
            Value::Null => {}
            other => self.problems.push(format!(
                "config.yaml: executors must be a mapping, found {}",
                other.kind()
            )),
        }
    }

    /// One registration file: the executor, who registered it, and whether with a key.
    fn read_registration(&mut self, path: &std::path::Path, value: &Value) {
        let text = |key: &str| {
            value
                .as_map()
                .and_then(|m| m.get(key))
                .and_then(Value::scalar_text)
        };
        let id = text("id").unwrap_or_default();
        let by = text("registered_by");
        let by_key = text("registered_with").is_none_or(|w| w != "operator");
        self.add(
            ExecutorSpec::from_entry(&id, value.clone(), &path.display().to_string()),
            Origin::Registration { by, by_key },
        );
    }

    /// The routing rules (a list, or a mapping with `rules:`), each kept with its place; one
    /// that does not read is a problem and the others still route.
    fn read_rules(&mut self, rules: &Value, origin: &str) {
        let items = match rules {
            Value::Seq(items) => items.clone(),
            Value::Map(m) => m
                .get("rules")
                .and_then(Value::as_seq)
                .map(<[Value]>::to_vec)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        for (i, item) in items.into_iter().enumerate() {
            match RoutingRule::from_value(item, &format!("{origin}[{i}]")) {
                Ok(rule) => {
                    self.rules.push(rule);
                    self.rule_positions.push(i + 1);
                }
                Err(e) => self.problems.push(e.to_string()),
            }
        }
    }

    /// What the rules say that cannot work: a preferred executor nobody registered, a match
    /// on keys the router does not read.
    fn check_rules(&mut self) {
        let unknown: Vec<String> = self
            .rules
            .iter()
            .enumerate()
            .flat_map(|(i, rule)| match &rule.prefer {
                Prefer::Executors(ids) => ids
                    .iter()
                    .filter(|id| self.executor(id).is_none())
                    .map(|id| {
                        format!(
                            "routing rule {}: prefers {id}, which is not a registered executor",
                            i + 1
                        )
                    })
                    .collect(),
                Prefer::Strategy(_) => Vec::new(),
            })
            .collect();
        self.problems.extend(unknown);
        for (i, rule) in self.rules.iter().enumerate() {
            if let Some(m) = &rule.matcher
                && !m.extra.is_empty()
            {
                let keys: Vec<&str> = m.extra.keys().map(String::as_str).collect();
                self.problems.push(format!(
                    "routing rule {}: match on {} is not understood (capability, urgency, precision are); the rule never matches",
                    i + 1,
                    keys.join(", ")
                ));
            }
        }
    }

    /// One entry of capabilities.yaml.
    fn read_capability(&mut self, doc: &Value) {
        let Some(m) = doc.as_map() else { return };
        let Some(id) = m.get("id").and_then(Value::scalar_text) else {
            self.problems
                .push("capabilities.yaml: a capability without an id".into());
            return;
        };
        self.catalog.push(CatalogEntry {
            id,
            description: m.get("description").and_then(Value::scalar_text),
            tags: m
                .get("tags")
                .and_then(Value::as_seq)
                .map(|t| t.iter().filter_map(Value::scalar_text).collect())
                .unwrap_or_default(),
        });
    }

    fn add(
        &mut self,
        spec: Result<ExecutorSpec, crate::protocol::error::ProtocolError>,
        origin: Origin,
    ) {
        match spec {
            Ok(s) if s.id.is_empty() => self.problems.push("an executor without an id".into()),
            // Executor ids name files and mailboxes later, so they follow the rules of refs.
            Ok(s) if crate::protocol::ids::ThreadRef::parse(&s.id).is_err() => self.problems.push(format!(
                "executor {:?}: ids may hold only letters, digits, '.', '_', ':' and '-'; skipped",
                s.id
            )),
            Ok(s) => {
                // An entry routing could not evaluate (a capability id with quotes or braces,
                // a cron schedule with a zero step) is skipped and reported; the rest routes on.
                if let Err(e) = s.check(&format!("executor {}", s.id)) {
                    self.problems.push(format!("{e}; that executor is skipped"));
                    return;
                }
                if let Some(notify) = s.extra.get("notify") {
                    let (_, problems) = crate::notify::Channel::all_of(notify);
                    for p in problems {
                        self.problems
                            .push(format!("executor {}: {p}; that entry is skipped", s.id));
                    }
                }
                self.executors.retain(|e| e.id != s.id);
                self.origins.retain(|(id, _)| id != &s.id);
                self.origins.push((s.id.clone(), origin));
                self.executors.push(s);
            }
            Err(e) => self.problems.push(e.to_string()),
        }
    }

    /// The executors and rules routing decides over: only entries that passed their checks,
    /// so nothing in them can make the routing statement fail.
    pub fn routing(&self) -> RoutingDirectory {
        let executors = self
            .executors
            .iter()
            .map(|e| {
                // The metadata of each id's first entry, as the executors view keeps it.
                let mut capability_meta = serde_json::Map::new();
                let mut seen = Vec::new();
                for c in &e.capabilities {
                    if seen.contains(&c.id.as_str()) {
                        continue;
                    }
                    seen.push(c.id.as_str());
                    if let Some(meta) = &c.meta {
                        capability_meta.insert(c.id.clone(), json(meta));
                    }
                }
                ExecutorRow {
                    id: e.id.clone(),
                    capabilities: e.capability_ids().into_iter().map(str::to_owned).collect(),
                    availability: e
                        .availability
                        .clone()
                        .unwrap_or_else(|| "always".to_owned()),
                    schedule: e.schedule.clone(),
                    timezone: e
                        .timezone
                        .clone()
                        .or_else(|| self.timezone.clone())
                        .unwrap_or_else(|| "UTC".to_owned()),
                    capability_meta,
                    access: e.access.clone(),
                    location: e.location.as_ref().map(json),
                    environment: e.environment.clone(),
                }
            })
            .collect();
        let rules = self
            .rules
            .iter()
            .zip(&self.rule_positions)
            .map(|(rule, position)| {
                let (prefer, strategy) = match &rule.prefer {
                    Prefer::Executors(ids) => (ids.clone(), None),
                    Prefer::Strategy(word) => (Vec::new(), Some(word.clone())),
                };
                let matcher = rule.matcher.as_ref();
                RuleRow {
                    position: *position as i64,
                    is_default: matcher.is_none(),
                    match_capability: matcher.and_then(|m| m.capability.clone()),
                    match_urgency: matcher.and_then(|m| m.urgency.map(|u| u.as_str().to_owned())),
                    match_precision: matcher
                        .and_then(|m| m.precision.map(|p| p.as_str().to_owned())),
                    match_unsupported: matcher
                        .map(|m| {
                            m.extra
                                .iter()
                                .filter(|(_, v)| !v.is_null())
                                .map(|(k, _)| k.clone())
                                .collect()
                        })
                        .unwrap_or_default(),
                    prefer,
                    strategy,
                }
            })
            .collect();
        RoutingDirectory { executors, rules }
    }

    /// Where the executor `id` was declared.
    pub fn origin(&self, id: &str) -> Option<&Origin> {
        self.origins.iter().find(|(i, _)| i == id).map(|(_, o)| o)
    }

    /// The executor with this id.
    pub fn executor(&self, id: &str) -> Option<&ExecutorSpec> {
        self.executors.iter().find(|e| e.id == id)
    }

    /// The required capabilities `executor` lacks (empty when it is eligible).
    pub fn missing(&self, executor: &ExecutorSpec, requires: &[String]) -> Vec<String> {
        let offered = executor.capability_ids();
        requires
            .iter()
            .filter(|r| !offered.contains(&r.as_str()))
            .cloned()
            .collect()
    }
}

impl crate::protocol::access::Roster for Directory {
    fn is_executor(&self, id: &str) -> bool {
        self.executor(id).is_some()
    }

    fn missing(&self, id: &str, requires: &[String]) -> Vec<String> {
        match self.executor(id) {
            Some(spec) => Directory::missing(self, spec, requires),
            None => requires.to_vec(),
        }
    }
}

pub use crate::protocol::answer::executor_summary;
