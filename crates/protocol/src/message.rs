//! A MESS message (`MESS:` list of typed payloads, MESS v1.0 sections 1, 5, 6 and 7) and every
//! payload type other than `request` and `status`, which have their own modules.

use crate::config::ConfigMsg;
use crate::content::ContentEntry;
use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::ids::Re;
use crate::request::Request;
use crate::status::{self, Status, StatusMsg};
use crate::time::{self, Timestamp};
use crate::value::{Map, Value};

/// A whole MESS message: the ordered list of payloads under `MESS:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The payloads, in order.
    pub payloads: Vec<Payload>,
    /// Top-level keys other than `MESS`, kept unchanged.
    pub extra: Map,
}

/// One item of the `MESS:` list.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Payload {
    /// `- v: 1.0.0`: the protocol version the sender speaks.
    Version(String),
    Request(Request),
    Reply(Reply),
    Cancel(Cancel),
    Query(Query),
    Config(ConfigMsg),
    Ack(Ack),
    Status(StatusMsg),
    Response(Response),
    Suggestion(Suggestion),
    /// v2: the requestor's review of finished work.
    Review(crate::review::Review),
    /// A payload type this version does not know (a v2 `review`, say), kept unchanged.
    Unknown {
        kind: String,
        body: Value,
    },
}

/// `reply`: the requestor answers questions, confirms an action or accepts a suggestion.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The thread (or suggestion id) replied to.
    pub re: Re,
    /// Answers to `needs_input` questions, keyed by question `field`.
    pub answers: Option<Map>,
    /// Answer to `needs_confirmation`.
    pub confirm: Option<bool>,
    /// Answer to a `suggestion`.
    pub accept: Option<bool>,
    /// Why.
    pub reason: Option<String>,
    /// Extra context entries.
    pub context: Vec<ContentEntry>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `cancel`: the requestor withdraws one or more requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancel {
    /// The threads to cancel.
    pub re: Re,
    /// Why.
    pub reason: Option<String>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `query`: ask the exchange about requests, capabilities or executors.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// What is asked about; `status` when absent.
    pub kind: QueryKind,
    /// Narrowing conditions.
    pub filter: QueryFilter,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `query.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum QueryKind {
    Status,
    Capabilities,
    Executors,
}

impl QueryKind {
    /// The protocol word.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryKind::Status => "status",
            QueryKind::Capabilities => "capabilities",
            QueryKind::Executors => "executors",
        }
    }
}

/// `query.filter`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryFilter {
    /// One thread (or several).
    pub re: Option<Re>,
    /// Only threads with one of these statuses.
    pub status: Vec<Status>,
    /// Only threads of this executor.
    pub executor: Option<String>,
    /// Only threads updated at or after this instant.
    pub since: Option<Timestamp>,
    /// Only capabilities with one of these tags.
    pub tags: Vec<String>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `ack`: the exchange confirms receipt and names the refs it assigned.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// The client id acknowledged, or `last`.
    pub re: Option<String>,
    /// The ref assigned (single request).
    pub thread_ref: Option<String>,
    /// Client id to ref mapping (several requests in one message).
    pub requests: Vec<AckEntry>,
    /// When the exchange received the message.
    pub received_at: Option<Timestamp>,
    /// Position in the queue.
    pub queue_position: Option<i64>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// One line of a multi-request ack.
#[derive(Debug, Clone, PartialEq)]
pub struct AckEntry {
    /// The client's id for the request, if it gave one.
    pub id: Option<String>,
    /// The exchange's ref.
    pub thread_ref: String,
}

/// `response`: the executor delivers the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The thread answered.
    pub re: Re,
    /// Content entries.
    pub content: Vec<ContentEntry>,
    /// Who answers.
    pub executor: Option<String>,
    /// When the work was done.
    pub completed_at: Option<Timestamp>,
    /// Free-form notes.
    pub notes: Option<String>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `suggestion`: an executor proposes a protocol action.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// Id for replies (`sug:merge-grocery`).
    pub id: Option<String>,
    /// `merge`, `split`, `delegate`, `alternative` or `defer`.
    pub kind: String,
    /// The related requests.
    pub re: Re,
    /// The proposal.
    pub proposed: Option<Value>,
    /// Why.
    pub reason: Option<String>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

const SUGGESTION_KINDS: [&str; 5] = ["merge", "split", "delegate", "alternative", "defer"];

/// Highest protocol major version understood.
const MAJOR_VERSION: u64 = 1;

/// The newest protocol version this exchange speaks, named in its own messages.
pub const SPOKEN_VERSION: &str = "1.1.0";

impl Message {
    /// A message of one payload of `kind` with `body`, validated like any parsed message
    /// (adapters build their messages this way).
    pub fn single(kind: &str, body: Map) -> Result<Message> {
        let mut payload = Map::new();
        payload.insert(kind, Value::Map(body));
        let mut top = Map::new();
        top.insert("MESS", Value::Seq(vec![Value::Map(payload)]));
        Message::from_value(Value::Map(top))
    }

    /// Reads a message: `{MESS: [...]}`, or the bare list as in the JSON mapping.
    pub fn from_value(v: Value) -> Result<Message> {
        let (items, extra) = match v {
            Value::Map(mut m) => {
                let Some(items) = m.remove("MESS") else {
                    let keys: Vec<_> = m.keys().cloned().collect();
                    return Err(ProtocolError::invalid(
                        "MESS",
                        format!(
                            "required field is missing (a MESS message is `MESS: [...]`; found {})",
                            if keys.is_empty() {
                                "an empty mapping".into()
                            } else {
                                format!("keys {}", keys.join(", "))
                            }
                        ),
                    ));
                };
                (items, m)
            }
            Value::Seq(items) => (Value::Seq(items), Map::new()),
            Value::Null => {
                return Err(ProtocolError::invalid("MESS", "the message is empty"));
            }
            other => {
                return Err(ProtocolError::invalid(
                    "MESS",
                    format!(
                        "a MESS message must be a mapping with a MESS list, found {}",
                        other.kind()
                    ),
                ));
            }
        };
        let items = match items {
            Value::Seq(items) => items,
            // `MESS: {request: ...}` is a common slip; one payload is unambiguous.
            Value::Map(m) if m.len() == 1 => vec![Value::Map(m)],
            other => {
                return Err(ProtocolError::invalid(
                    "MESS",
                    format!("expected a list of payloads, found {}", other.kind()),
                ));
            }
        };
        if items.is_empty() {
            return Err(ProtocolError::invalid(
                "MESS",
                "the list of payloads is empty",
            ));
        }
        let payloads = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| Payload::from_value(item, &format!("MESS[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Message { payloads, extra })
    }

    /// Writes the message back as `{MESS: [...]}`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "MESS",
            Value::Seq(self.payloads.iter().map(Payload::to_value).collect()),
        );
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }

    /// Builds a message from payloads.
    pub fn new(payloads: Vec<Payload>) -> Message {
        Message {
            payloads,
            extra: Map::new(),
        }
    }

    /// A message the exchange sends: its payloads after `v:` naming `version` (the version of
    /// the message it answers) or, without one, the newest version this exchange speaks.
    pub fn from_exchange(payloads: Vec<Payload>, version: Option<&str>) -> Message {
        let mut all = Vec::with_capacity(payloads.len() + 1);
        all.push(Payload::Version(
            version.unwrap_or(SPOKEN_VERSION).to_owned(),
        ));
        all.extend(payloads);
        Message::new(all)
    }

    /// The payloads other than `v:`.
    pub fn content(&self) -> impl Iterator<Item = &Payload> {
        self.payloads
            .iter()
            .filter(|p| !matches!(p, Payload::Version(_)))
    }

    /// The protocol version the message names, if any.
    pub fn version(&self) -> Option<&str> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Version(v) => Some(v.as_str()),
            _ => None,
        })
    }
}

impl Payload {
    /// Reads one `MESS:` item; `path` is `MESS[i]`.
    pub fn from_value(v: Value, path: &str) -> Result<Payload> {
        let Value::Map(map) = v else {
            return Err(ProtocolError::invalid(
                path,
                format!(
                    "a payload must be a single-key mapping like `request: {{...}}`, found {}",
                    v.kind()
                ),
            ));
        };
        if map.len() != 1 {
            let keys: Vec<_> = map.keys().cloned().collect();
            return Err(ProtocolError::invalid(
                path,
                format!(
                    "a payload must have exactly one key (its type), found {}",
                    if keys.is_empty() {
                        "none".into()
                    } else {
                        keys.join(", ")
                    }
                ),
            ));
        }
        let Some((kind, body)) = map.into_iter().next() else {
            return Err(ProtocolError::invalid(path, "empty payload"));
        };
        let at = format!("{path}.{kind}");
        Ok(match kind.as_str() {
            "v" => Payload::Version(version(body, &at)?),
            "request" => Payload::Request(Request::from_value(body, &at)?),
            "reply" => Payload::Reply(Reply::from_value(body, &at)?),
            "cancel" => Payload::Cancel(Cancel::from_value(body, &at)?),
            "query" => Payload::Query(Query::from_value(body, &at)?),
            "config" => Payload::Config(ConfigMsg::from_value(body, &at)?),
            "ack" => Payload::Ack(Ack::from_value(body, &at)?),
            "status" => Payload::Status(StatusMsg::from_value(body, &at)?),
            "response" => Payload::Response(Response::from_value(body, &at)?),
            "suggestion" => Payload::Suggestion(Suggestion::from_value(body, &at)?),
            "review" => Payload::Review(crate::review::Review::from_value(body, &at)?),
            _ => Payload::Unknown { kind, body },
        })
    }

    /// Writes the payload back as a single-key mapping.
    pub fn to_value(&self) -> Value {
        let (kind, body) = match self {
            Payload::Version(v) => ("v", Value::str(v)),
            Payload::Request(r) => ("request", r.to_value()),
            Payload::Reply(r) => ("reply", r.to_value()),
            Payload::Cancel(c) => ("cancel", c.to_value()),
            Payload::Query(q) => ("query", q.to_value()),
            Payload::Config(c) => ("config", c.to_value()),
            Payload::Ack(a) => ("ack", a.to_value()),
            Payload::Status(s) => ("status", s.to_value()),
            Payload::Response(r) => ("response", r.to_value()),
            Payload::Suggestion(s) => ("suggestion", s.to_value()),
            Payload::Review(r) => ("review", r.to_value()),
            Payload::Unknown { kind, body } => (kind.as_str(), body.clone()),
        };
        let mut m = Map::new();
        m.insert(kind, body);
        Value::Map(m)
    }

    /// The payload's type word.
    pub fn kind(&self) -> &str {
        match self {
            Payload::Unknown { kind, .. } => kind,
            known => known.known_kind().unwrap_or_default(),
        }
    }

    /// The payload's type word when the protocol defines the type (`None` for a type a sender
    /// made up, whose name is theirs: metrics label those apart).
    pub fn known_kind(&self) -> Option<&'static str> {
        Some(match self {
            Payload::Version(_) => "v",
            Payload::Request(_) => "request",
            Payload::Reply(_) => "reply",
            Payload::Cancel(_) => "cancel",
            Payload::Query(_) => "query",
            Payload::Config(_) => "config",
            Payload::Ack(_) => "ack",
            Payload::Status(_) => "status",
            Payload::Response(_) => "response",
            Payload::Suggestion(_) => "suggestion",
            Payload::Review(_) => "review",
            Payload::Unknown { .. } => return None,
        })
    }
}

fn version(v: Value, path: &str) -> Result<String> {
    let text = match v {
        Value::String(s) => s,
        // `v: 1.1` parses as a number; it still names a version.
        Value::Float(_) | Value::Int(_) => v.scalar_text().unwrap_or_default(),
        other => {
            return Err(ProtocolError::invalid(
                path,
                format!("expected a version such as 1.1.0, found {}", other.kind()),
            ));
        }
    };
    let major = text.split('.').next().and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(m) if m <= MAJOR_VERSION && m > 0 => Ok(text),
        Some(_) => Err(ProtocolError::invalid(
            path,
            format!("unsupported protocol version {text} (this exchange speaks MESS 1.0 and 1.1)"),
        )),
        None => Err(ProtocolError::invalid(
            path,
            format!("invalid version {text:?} (expected e.g. 1.1.0)"),
        )),
    }
}

impl Reply {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a reply")?;
        let re = Re::read(&mut f, true)?.unwrap_or(Re::One(String::new()));
        let answers = match f.take("answers") {
            None => None,
            Some(Value::Map(m)) => {
                // An answer says something: null, empty or blank text answers nothing, and an
                // executor waiting on it would act on nothing.
                for (field, answer) in m.iter() {
                    let blank = match answer {
                        Value::Null => true,
                        Value::String(s) => s.trim().is_empty(),
                        Value::Seq(items) => items.is_empty(),
                        Value::Map(inner) => inner.is_empty(),
                        _ => false,
                    };
                    if blank {
                        return Err(ProtocolError::invalid(
                            format!("{}.{field}", f.at("answers")),
                            "the answer is empty; answer the question, or reply with a reason instead",
                        ));
                    }
                }
                if m.is_empty() {
                    return Err(ProtocolError::invalid(
                        f.at("answers"),
                        "no answer given; name each question's field with its answer",
                    ));
                }
                Some(m)
            }
            Some(other) => {
                return Err(ProtocolError::invalid(
                    f.at("answers"),
                    format!(
                        "expected a mapping of field: answer, found {}",
                        other.kind()
                    ),
                ));
            }
        };
        let reply = Reply {
            re,
            answers,
            confirm: f.opt_bool("confirm")?,
            accept: f.opt_bool("accept")?,
            reason: f.opt_str("reason")?,
            context: f.list("context", ContentEntry::from_value)?,
            extra: f.rest(),
        };
        if reply.answers.is_none()
            && reply.confirm.is_none()
            && reply.accept.is_none()
            && reply.context.is_empty()
            && reply.reason.is_none()
        {
            return Err(ProtocolError::invalid(
                path,
                "a reply needs answers, confirm, accept, reason or context",
            ));
        }
        Ok(reply)
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("re", self.re.to_value());
        m.insert_opt("answers", self.answers.clone().map(Value::Map));
        field::put_bool(&mut m, "confirm", self.confirm);
        field::put_bool(&mut m, "accept", self.accept);
        field::put_str(&mut m, "reason", &self.reason);
        field::put_list(&mut m, "context", &self.context, ContentEntry::to_value);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Cancel {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a cancel")?;
        let re = Re::read(&mut f, true)?.unwrap_or(Re::One(String::new()));
        Ok(Cancel {
            re,
            reason: f.opt_str("reason")?,
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("re", self.re.to_value());
        field::put_str(&mut m, "reason", &self.reason);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Query {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a query")?;
        let kind = match f.opt_str("type")?.as_deref() {
            None | Some("status") => QueryKind::Status,
            Some("capabilities") => QueryKind::Capabilities,
            Some("executors") => QueryKind::Executors,
            Some(other) => {
                return Err(ProtocolError::invalid(
                    f.at("type"),
                    format!(
                        "unknown query type {other:?} (expected status, capabilities or executors)"
                    ),
                ));
            }
        };
        let filter = f
            .nested("filter", |mut g| {
                Ok(QueryFilter {
                    re: Re::read(&mut g, false)?,
                    status: g.list("status", status::read_status)?,
                    executor: g.opt_id("executor")?,
                    since: g.opt_timestamp("since")?,
                    tags: g.list("tags", field::text)?,
                    extra: g.rest(),
                })
            })?
            .unwrap_or_default();
        Ok(Query {
            kind,
            filter,
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("type", Value::str(self.kind.as_str()));
        let fl = &self.filter;
        let mut fm = Map::new();
        fm.insert_opt("re", fl.re.as_ref().map(Re::to_value));
        field::put_list(&mut fm, "status", &fl.status, |s| Value::str(s.code()));
        field::put_str(&mut fm, "executor", &fl.executor);
        fm.insert_opt(
            "since",
            fl.since.map(|t| Value::str(time::format_exact(&t))),
        );
        field::put_list(&mut fm, "tags", &fl.tags, |s| Value::str(s));
        fm.extend_missing(fl.extra.clone());
        if !fm.is_empty() {
            m.insert("filter", Value::Map(fm));
        }
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Ack {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "an ack")?;
        let re = f.opt_id("re")?;
        let thread_ref = f.opt_id("ref")?;
        let requests = f.list("requests", |v, p| {
            let mut g = Fields::new(v, p, "an ack entry")?;
            let ref_path = g.at("ref");
            Ok(AckEntry {
                id: g.opt_id("id")?,
                thread_ref: field::id_text(g.req("ref")?, &ref_path)?,
            })
        })?;
        let received_at = match f.take("received_at") {
            None => None,
            Some(Value::String(s)) => Some(
                time::parse_timestamp_lenient(&s)
                    .map_err(|e| ProtocolError::invalid(f.at("received_at"), e))?,
            ),
            Some(other) => {
                return Err(ProtocolError::invalid(
                    f.at("received_at"),
                    format!("expected a timestamp, found {}", other.kind()),
                ));
            }
        };
        Ok(Ack {
            re,
            thread_ref,
            requests,
            received_at,
            queue_position: f.opt_int("queue_position")?,
            extra: f.rest(),
        })
    }

    /// Writes the ack back.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        field::put_str(&mut m, "re", &self.re);
        field::put_str(&mut m, "ref", &self.thread_ref);
        field::put_list(&mut m, "requests", &self.requests, |e| {
            let mut em = Map::new();
            field::put_str(&mut em, "id", &e.id);
            em.insert("ref", Value::str(&e.thread_ref));
            Value::Map(em)
        });
        m.insert_opt(
            "received_at",
            self.received_at
                .map(|t| Value::str(time::format_timestamp(&t))),
        );
        m.insert_opt("queue_position", self.queue_position.map(Value::Int));
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Response {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a response")?;
        let re = Re::read(&mut f, true)?.unwrap_or(Re::One(String::new()));
        Ok(Response {
            re,
            content: f.list("content", ContentEntry::from_value)?,
            executor: f.opt_id("executor")?,
            completed_at: f.opt_timestamp("completed_at")?,
            notes: f.opt_str("notes")?,
            extra: f.rest(),
        })
    }

    /// Writes the response back.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("re", self.re.to_value());
        field::put_list(&mut m, "content", &self.content, ContentEntry::to_value);
        field::put_str(&mut m, "executor", &self.executor);
        m.insert_opt(
            "completed_at",
            self.completed_at
                .map(|t| Value::str(time::format_exact(&t))),
        );
        field::put_str(&mut m, "notes", &self.notes);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl Suggestion {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a suggestion")?;
        let id = f.opt_id("id")?;
        let type_path = f.at("type");
        let kind = field::text(f.req("type")?, &type_path)?;
        if !SUGGESTION_KINDS.contains(&kind.as_str()) {
            return Err(ProtocolError::invalid(
                type_path,
                format!(
                    "unknown suggestion type {kind:?} (expected one of: {})",
                    SUGGESTION_KINDS.join(", ")
                ),
            ));
        }
        let re = Re::read(&mut f, true)?.unwrap_or(Re::One(String::new()));
        let proposed = f.take("proposed");
        // A split's `ordered` is a yes or no: anything else would silently run the parts at
        // once.
        if let Some(ordered) = proposed
            .as_ref()
            .and_then(Value::as_map)
            .and_then(|m| m.get("ordered"))
            && !matches!(ordered, Value::Bool(_) | Value::Null)
        {
            return Err(ProtocolError::invalid(
                format!("{}.ordered", f.at("proposed")),
                format!("{} is not one of: true, false", field::describe(ordered)),
            ));
        }
        Ok(Suggestion {
            id,
            kind,
            re,
            proposed,
            reason: f.opt_str("reason")?,
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        field::put_str(&mut m, "id", &self.id);
        m.insert("type", Value::str(&self.kind));
        m.insert("re", self.re.to_value());
        m.insert_opt("proposed", self.proposed.clone());
        field::put_str(&mut m, "reason", &self.reason);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}
