//! Status codes (MESS v1.0 section 4), their code-specific fields, and the MESSE-AF mapping from
//! status to `state=` folder.

use crate::content::number;
use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::ids::Re;
use crate::time::{self, Duration, Timestamp};
use crate::value::{Map, Value};

/// The status of a thread (envelope `status`) or the `code` of a status message.
///
/// `Pending` is written `pending` in envelopes and `received` in status messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum Status {
    Pending,
    Claimed,
    InProgress,
    Waiting,
    Held,
    Retrying,
    NeedsInput,
    NeedsConfirmation,
    Completed,
    Partial,
    Failed,
    Declined,
    Expired,
    Cancelled,
    Superseded,
    Delegated,
}

/// The four MESSE-AF status folders (`state=<name>/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum State {
    Received,
    Executing,
    Finished,
    Canceled,
}

impl State {
    /// Every folder, in lifecycle order.
    pub const ALL: [State; 4] = [
        State::Received,
        State::Executing,
        State::Finished,
        State::Canceled,
    ];

    /// The folder's partition value (`received` for `state=received/`).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Received => "received",
            State::Executing => "executing",
            State::Finished => "finished",
            State::Canceled => "canceled",
        }
    }

    /// Parses a partition value.
    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Status {
    /// Every status, in lifecycle order.
    pub const ALL: [Status; 16] = [
        Status::Pending,
        Status::Claimed,
        Status::InProgress,
        Status::Waiting,
        Status::Held,
        Status::Retrying,
        Status::NeedsInput,
        Status::NeedsConfirmation,
        Status::Completed,
        Status::Partial,
        Status::Failed,
        Status::Declined,
        Status::Expired,
        Status::Cancelled,
        Status::Superseded,
        Status::Delegated,
    ];

    /// The envelope word (`pending`, `in_progress`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Claimed => "claimed",
            Status::InProgress => "in_progress",
            Status::Waiting => "waiting",
            Status::Held => "held",
            Status::Retrying => "retrying",
            Status::NeedsInput => "needs_input",
            Status::NeedsConfirmation => "needs_confirmation",
            Status::Completed => "completed",
            Status::Partial => "partial",
            Status::Failed => "failed",
            Status::Declined => "declined",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
            Status::Superseded => "superseded",
            Status::Delegated => "delegated",
        }
    }

    /// The status-message code (`received` for `Pending`).
    pub fn code(self) -> &'static str {
        match self {
            Status::Pending => "received",
            other => other.as_str(),
        }
    }

    /// Parses an envelope status or a message code; `received` and `pending` both mean pending,
    /// and the British `canceled` is read as `cancelled`.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "received" => Some(Status::Pending),
            "canceled" => Some(Status::Cancelled),
            _ => Status::ALL.into_iter().find(|st| st.as_str() == s),
        }
    }

    /// The folder a thread with this status lives in (MESSE-AF "Folder Mapping").
    pub fn state(self) -> State {
        match self {
            Status::Pending => State::Received,
            Status::Claimed
            | Status::InProgress
            | Status::Waiting
            | Status::Held
            | Status::Retrying
            | Status::NeedsInput
            | Status::NeedsConfirmation => State::Executing,
            Status::Completed | Status::Partial => State::Finished,
            Status::Failed
            | Status::Declined
            | Status::Expired
            | Status::Cancelled
            | Status::Superseded
            | Status::Delegated => State::Canceled,
        }
    }

    /// True for final statuses; `partial` is not final because it may still become `completed`.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Completed
                | Status::Failed
                | Status::Declined
                | Status::Expired
                | Status::Cancelled
                | Status::Superseded
                | Status::Delegated
        )
    }

    /// True for the statuses an executor may report on a thread nobody holds, claiming it
    /// with the same message: work and its outcomes, not `declined` or `failed` (they would
    /// end the request for every executor without anyone having taken it).
    pub fn implies_claim(self) -> bool {
        matches!(
            self,
            Status::InProgress
                | Status::Waiting
                | Status::Held
                | Status::Retrying
                | Status::NeedsInput
                | Status::NeedsConfirmation
                | Status::Completed
                | Status::Partial
        )
    }

    /// True for the statuses of a claimed thread that is still being worked on.
    pub fn is_active(self) -> bool {
        self.state() == State::Executing
    }

    /// True when a dependent of a thread in this status can never run: every final status but
    /// `completed` (the documented lifecycle names failed, declined, expired and cancelled; superseded and
    /// delegated threads never complete either).
    pub fn fails_dependents(self) -> bool {
        self.is_terminal() && self != Status::Completed
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn status_list() -> String {
    Status::ALL
        .iter()
        .map(|s| s.code())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a status word from a value (used for codes, envelope statuses and filters).
pub(crate) fn read_status(v: Value, path: &str) -> Result<Status> {
    let s = field::text(v, path)?;
    Status::parse(&s).ok_or_else(|| {
        ProtocolError::invalid(
            path,
            format!("unknown status {s:?} (expected one of: {})", status_list()),
        )
    })
}

/// A `status` payload: an executor (or the exchange) reporting a thread's state.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusMsg {
    /// The thread it is about.
    pub re: Re,
    /// The new status.
    pub code: Status,
    /// Who reports it (may be anonymized).
    pub executor: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// The fields specific to `code`.
    pub details: StatusDetails,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// Code-specific status fields (MESS v1.0 section 4.2, v1.1 section 2.1).
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum StatusDetails {
    Received {
        queue_position: Option<i64>,
        exchange_id: Option<String>,
    },
    Claimed {
        /// v1.0: when it will be done (a duration like `45m` or a time).
        eta: Option<String>,
        /// v1.1: expected time to complete, ISO 8601 (`PT45M`).
        estimate: Option<Duration>,
    },
    InProgress {
        /// 0 to 100.
        progress_pct: Option<f64>,
        eta: Option<String>,
        partial: Option<Value>,
        /// v1.1: an updated estimate.
        estimate: Option<Duration>,
    },
    Waiting {
        waiting_for: WaitingFor,
    },
    Held {
        reason: Option<Value>,
        resume_eta: Option<String>,
    },
    Retrying {
        attempt: i64,
        max_attempts: i64,
        next_attempt: String,
    },
    NeedsInput {
        questions: Vec<Question>,
    },
    NeedsConfirmation {
        action: String,
        consequences: Option<String>,
        reversible: Option<bool>,
    },
    Completed,
    Partial {
        completed: Vec<Value>,
        remaining: Vec<Value>,
        reason: Option<Value>,
    },
    Failed {
        /// Text or `{type, detail, ...}`.
        reason: Value,
        recoverable: Option<bool>,
        suggestion: Option<String>,
    },
    Declined {
        reason: Value,
    },
    Expired {
        expired_at: Timestamp,
        stage: Option<String>,
    },
    Cancelled {
        reason: Option<Value>,
    },
    Superseded {
        superseded_by: String,
        /// `merge`, `split` or `replace`.
        reason: String,
    },
    Delegated {
        delegated_to: String,
        reason: Option<Value>,
    },
}

/// A question of a `needs_input` status.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The answer key the reply should use.
    pub field: String,
    /// The question text.
    pub question: String,
    /// Suggested answers.
    pub options: Vec<Value>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `waiting_for` of a `waiting` status.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingFor {
    /// `dependency`, `condition`, `resource`, `access` or `schedule`.
    pub kind: WaitingKind,
    /// The type-specific fields (`ref`, `condition`, `eta`, `resource`, `note`, `location`,
    /// `available_at`), kept as written.
    pub fields: Map,
}

/// What a `waiting` thread is blocked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WaitingKind {
    Dependency,
    Condition,
    Resource,
    Access,
    Schedule,
}

impl WaitingKind {
    /// Every kind, in the protocol's order.
    pub const ALL: [WaitingKind; 5] = [
        WaitingKind::Dependency,
        WaitingKind::Condition,
        WaitingKind::Resource,
        WaitingKind::Access,
        WaitingKind::Schedule,
    ];

    /// The protocol word.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingKind::Dependency => "dependency",
            WaitingKind::Condition => "condition",
            WaitingKind::Resource => "resource",
            WaitingKind::Access => "access",
            WaitingKind::Schedule => "schedule",
        }
    }

    /// Parses the protocol word.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

fn reason_value(v: Value, path: &str) -> Result<Value> {
    match v {
        Value::String(_) | Value::Map(_) => Ok(v),
        other => Err(ProtocolError::invalid(
            path,
            format!("expected text or {{type, detail}}, found {}", other.kind()),
        )),
    }
}

fn opt_reason(f: &mut Fields) -> Result<Option<Value>> {
    let path = f.at("reason");
    f.take("reason").map(|v| reason_value(v, &path)).transpose()
}

fn req_reason(f: &mut Fields, code: &str) -> Result<Value> {
    let path = f.at("reason");
    let v = f.take("reason").ok_or_else(|| {
        ProtocolError::invalid(&path, format!("a `{code}` status requires a reason"))
    })?;
    reason_value(v, &path)
}

/// True for what an `eta` may be: a duration (`45m`, `PT45M`), an instant with offset, or a
/// time of day (`17:30`, `17:30:00`).
fn is_eta(s: &str) -> bool {
    time::parse_any_duration(s).is_ok()
        || time::parse_timestamp(s).is_ok()
        || chrono::NaiveTime::parse_from_str(s, "%H:%M:%S").is_ok()
        || chrono::NaiveTime::parse_from_str(s, "%H:%M").is_ok()
}

fn eta(f: &mut Fields, key: &str) -> Result<Option<String>> {
    let path = f.at(key);
    match f.take(key) {
        None => Ok(None),
        Some(Value::String(s)) if is_eta(s.trim()) => Ok(Some(s)),
        Some(other) => Err(ProtocolError::invalid(
            path,
            format!(
                "expected a duration (45m, PT45M) or a time, found {}",
                field::describe(&other)
            ),
        )),
    }
}

impl StatusMsg {
    /// Reads a status payload; `path` is where it sits (`MESS[0].status`).
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a status")?;
        let re = Re::read(&mut f, true)?.unwrap_or(Re::One(String::new()));
        let code_path = f.at("code");
        let code = read_status(f.req("code")?, &code_path)?;
        let executor = f.opt_id("executor")?;
        let message = f.opt_str("message")?;
        let details = StatusDetails::read(code, &mut f)?;
        Ok(StatusMsg {
            re,
            code,
            executor,
            message,
            details,
            extra: f.rest(),
        })
    }

    /// Writes the status back as a value.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("re", self.re.to_value());
        m.insert("code", Value::str(self.code.code()));
        field::put_str(&mut m, "executor", &self.executor);
        field::put_str(&mut m, "message", &self.message);
        self.details.write(&mut m);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }

    /// Builds a status message with no optional fields.
    pub fn new(re: impl Into<String>, details: StatusDetails) -> Self {
        StatusMsg {
            re: Re::One(re.into()),
            code: details.code(),
            executor: None,
            message: None,
            details,
            extra: Map::new(),
        }
    }

    /// The v1.1 estimate carried by a `claimed` or `in_progress` status.
    pub fn estimate(&self) -> Option<&Duration> {
        match &self.details {
            StatusDetails::Claimed { estimate, .. }
            | StatusDetails::InProgress { estimate, .. } => estimate.as_ref(),
            _ => None,
        }
    }
}

impl StatusDetails {
    /// The status these fields belong to.
    pub fn code(&self) -> Status {
        match self {
            StatusDetails::Received { .. } => Status::Pending,
            StatusDetails::Claimed { .. } => Status::Claimed,
            StatusDetails::InProgress { .. } => Status::InProgress,
            StatusDetails::Waiting { .. } => Status::Waiting,
            StatusDetails::Held { .. } => Status::Held,
            StatusDetails::Retrying { .. } => Status::Retrying,
            StatusDetails::NeedsInput { .. } => Status::NeedsInput,
            StatusDetails::NeedsConfirmation { .. } => Status::NeedsConfirmation,
            StatusDetails::Completed => Status::Completed,
            StatusDetails::Partial { .. } => Status::Partial,
            StatusDetails::Failed { .. } => Status::Failed,
            StatusDetails::Declined { .. } => Status::Declined,
            StatusDetails::Expired { .. } => Status::Expired,
            StatusDetails::Cancelled { .. } => Status::Cancelled,
            StatusDetails::Superseded { .. } => Status::Superseded,
            StatusDetails::Delegated { .. } => Status::Delegated,
        }
    }

    fn read(code: Status, f: &mut Fields) -> Result<Self> {
        Ok(match code {
            Status::Pending => StatusDetails::Received {
                queue_position: f.opt_int("queue_position")?,
                exchange_id: f.opt_id("exchange_id")?,
            },
            Status::Claimed => StatusDetails::Claimed {
                eta: eta(f, "eta")?,
                estimate: f.opt_iso_duration("estimate")?,
            },
            Status::InProgress => {
                let progress_pct = f.opt_number("progress_pct")?;
                if let Some(p) = progress_pct.filter(|p| !(0.0..=100.0).contains(p)) {
                    return Err(ProtocolError::invalid(
                        f.at("progress_pct"),
                        format!("{p} is outside 0..100"),
                    ));
                }
                StatusDetails::InProgress {
                    progress_pct,
                    eta: eta(f, "eta")?,
                    partial: f.take("partial"),
                    estimate: f.opt_iso_duration("estimate")?,
                }
            }
            Status::Waiting => {
                let path = f.at("waiting_for");
                let v = f.take("waiting_for").ok_or_else(|| {
                    ProtocolError::invalid(
                        &path,
                        "a `waiting` status requires waiting_for: {type, ...}",
                    )
                })?;
                StatusDetails::Waiting {
                    waiting_for: WaitingFor::from_value(v, &path)?,
                }
            }
            Status::Held => StatusDetails::Held {
                reason: opt_reason(f)?,
                resume_eta: eta(f, "resume_eta")?,
            },
            Status::Retrying => {
                let attempt = f.req_int("attempt")?;
                let max_attempts = f.req_int("max_attempts")?;
                if attempt < 1 || max_attempts < 1 || attempt > max_attempts {
                    return Err(ProtocolError::invalid(
                        f.at("attempt"),
                        format!(
                            "attempt {attempt} of {max_attempts}: attempts count from 1 up to max_attempts"
                        ),
                    ));
                }
                StatusDetails::Retrying {
                    attempt,
                    max_attempts,
                    next_attempt: eta(f, "next_attempt")?.ok_or_else(|| {
                        ProtocolError::invalid(f.at("next_attempt"), "required field is missing")
                    })?,
                }
            }
            Status::NeedsInput => {
                let questions = f.list("questions", Question::from_value)?;
                if questions.is_empty() {
                    return Err(ProtocolError::invalid(
                        f.at("questions"),
                        "a `needs_input` status requires at least one question {field, question}",
                    ));
                }
                StatusDetails::NeedsInput { questions }
            }
            Status::NeedsConfirmation => StatusDetails::NeedsConfirmation {
                action: {
                    let path = f.at("action");
                    let a = f.take("action").ok_or_else(|| {
                        ProtocolError::invalid(
                            &path,
                            "a `needs_confirmation` status requires the action to confirm",
                        )
                    })?;
                    field::text(a, &path)?
                },
                consequences: f.opt_str("consequences")?,
                reversible: f.opt_bool("reversible")?,
            },
            Status::Completed => StatusDetails::Completed,
            Status::Partial => StatusDetails::Partial {
                completed: f.list("completed", |v, _| Ok(v))?,
                remaining: f.list("remaining", |v, _| Ok(v))?,
                reason: opt_reason(f)?,
            },
            Status::Failed => StatusDetails::Failed {
                reason: req_reason(f, "failed")?,
                recoverable: f.opt_bool("recoverable")?,
                suggestion: f.opt_str("suggestion")?,
            },
            Status::Declined => StatusDetails::Declined {
                reason: req_reason(f, "declined")?,
            },
            Status::Expired => StatusDetails::Expired {
                expired_at: {
                    let path = f.at("expired_at");
                    match f.take("expired_at") {
                        Some(Value::String(s)) => time::parse_timestamp(&s)
                            .map_err(|e| ProtocolError::invalid(&path, e))?,
                        Some(other) => {
                            return Err(ProtocolError::invalid(
                                path,
                                format!("expected a timestamp, found {}", other.kind()),
                            ));
                        }
                        None => {
                            return Err(ProtocolError::invalid(
                                path,
                                "an `expired` status requires expired_at",
                            ));
                        }
                    }
                },
                stage: f.opt_str("stage")?,
            },
            Status::Cancelled => StatusDetails::Cancelled {
                reason: opt_reason(f)?,
            },
            Status::Superseded => StatusDetails::Superseded {
                superseded_by: {
                    let path = f.at("superseded_by");
                    field::id_text(f.req("superseded_by")?, &path)?
                },
                reason: {
                    let path = f.at("reason");
                    let r = field::text(f.req("reason")?, &path)?;
                    if !matches!(r.as_str(), "merge" | "split" | "replace") {
                        return Err(ProtocolError::invalid(
                            path,
                            format!("unknown reason {r:?} (expected merge, split or replace)"),
                        ));
                    }
                    r
                },
            },
            Status::Delegated => StatusDetails::Delegated {
                delegated_to: {
                    let path = f.at("delegated_to");
                    field::id_text(f.req("delegated_to")?, &path)?
                },
                reason: opt_reason(f)?,
            },
        })
    }

    fn write(&self, m: &mut Map) {
        let s = |v: &Option<String>| v.as_ref().map(Value::str);
        match self {
            StatusDetails::Received {
                queue_position,
                exchange_id,
            } => {
                m.insert_opt("queue_position", queue_position.map(Value::Int));
                m.insert_opt("exchange_id", s(exchange_id));
            }
            StatusDetails::Claimed { eta, estimate } => {
                m.insert_opt("eta", s(eta));
                m.insert_opt("estimate", estimate.as_ref().map(|d| Value::str(&d.text)));
            }
            StatusDetails::InProgress {
                progress_pct,
                eta,
                partial,
                estimate,
            } => {
                m.insert_opt("progress_pct", progress_pct.map(number));
                m.insert_opt("eta", s(eta));
                m.insert_opt("partial", partial.clone());
                m.insert_opt("estimate", estimate.as_ref().map(|d| Value::str(&d.text)));
            }
            StatusDetails::Waiting { waiting_for } => {
                m.insert("waiting_for", waiting_for.to_value());
            }
            StatusDetails::Held { reason, resume_eta } => {
                m.insert_opt("reason", reason.clone());
                m.insert_opt("resume_eta", s(resume_eta));
            }
            StatusDetails::Retrying {
                attempt,
                max_attempts,
                next_attempt,
            } => {
                m.insert("attempt", Value::Int(*attempt));
                m.insert("max_attempts", Value::Int(*max_attempts));
                m.insert("next_attempt", Value::str(next_attempt));
            }
            StatusDetails::NeedsInput { questions } => {
                m.insert(
                    "questions",
                    Value::Seq(questions.iter().map(Question::to_value).collect()),
                );
            }
            StatusDetails::NeedsConfirmation {
                action,
                consequences,
                reversible,
            } => {
                m.insert("action", Value::str(action));
                m.insert_opt("consequences", s(consequences));
                m.insert_opt("reversible", reversible.map(Value::Bool));
            }
            StatusDetails::Completed => {}
            StatusDetails::Partial {
                completed,
                remaining,
                reason,
            } => {
                field::put_list(m, "completed", completed, Clone::clone);
                field::put_list(m, "remaining", remaining, Clone::clone);
                m.insert_opt("reason", reason.clone());
            }
            StatusDetails::Failed {
                reason,
                recoverable,
                suggestion,
            } => {
                m.insert("reason", reason.clone());
                m.insert_opt("recoverable", recoverable.map(Value::Bool));
                m.insert_opt("suggestion", s(suggestion));
            }
            StatusDetails::Declined { reason } => m.insert("reason", reason.clone()),
            StatusDetails::Expired { expired_at, stage } => {
                m.insert("expired_at", Value::str(time::format_timestamp(expired_at)));
                m.insert_opt("stage", s(stage));
            }
            StatusDetails::Cancelled { reason } => m.insert_opt("reason", reason.clone()),
            StatusDetails::Superseded {
                superseded_by,
                reason,
            } => {
                m.insert("superseded_by", Value::str(superseded_by));
                m.insert("reason", Value::str(reason));
            }
            StatusDetails::Delegated {
                delegated_to,
                reason,
            } => {
                m.insert("delegated_to", Value::str(delegated_to));
                m.insert_opt("reason", reason.clone());
            }
        }
    }
}

impl Question {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a question")?;
        let field_path = f.at("field");
        let field_name = field::id_text(f.req("field")?, &field_path)?;
        Ok(Question {
            field: field_name,
            question: f.req_str("question")?,
            options: f.list("options", |v, _| Ok(v))?,
            extra: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("field", Value::str(&self.field));
        m.insert("question", Value::str(&self.question));
        field::put_list(&mut m, "options", &self.options, Clone::clone);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}

impl WaitingFor {
    fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "waiting_for")?;
        let type_path = f.at("type");
        let word = field::text(f.req("type")?, &type_path)?;
        let kind = WaitingKind::parse(&word).ok_or_else(|| {
            ProtocolError::invalid(
                &type_path,
                format!(
                    "unknown waiting type {word:?} (expected dependency, condition, resource, access or schedule)"
                ),
            )
        })?;
        if kind == WaitingKind::Schedule
            && let Some(Value::String(at)) = f.get("available_at")
        {
            time::parse_timestamp(at)
                .map_err(|e| ProtocolError::invalid(f.at("available_at"), e))?;
        }
        Ok(WaitingFor {
            kind,
            fields: f.rest(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("type", Value::str(self.kind.as_str()));
        m.extend_missing(self.fields.clone());
        Value::Map(m)
    }
}
