//! The MESSE-AF envelope (document 1 of a thread file), message documents (documents 2..), and
//! how each message changes the envelope. `apply` is the single definition of those effects: the
//! exchange uses it when writing and `fsck` uses it to rebuild envelopes from messages.

use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::hands::Hands;
use crate::ids::ThreadRef;
use crate::message::{Message, Payload};
use crate::request::{Priority, Request};
use crate::status::{self, Status, StatusDetails};
use crate::time::{self, Timestamp};
use crate::value::{Map, Value};

/// The exchange's payload that amends a request after an accepted suggestion (mess's
/// extension; applied only from the exchange).
pub const AMEND: &str = "amend";

/// The actor name the exchange uses for its own messages and history entries.
pub const EXCHANGE: &str = "exchange";

/// Document 1 of a thread file: the exchange's cached view of the thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The exchange-assigned ref; also the file name.
    pub thread_ref: ThreadRef,
    /// The client's id for the request, if it gave one.
    pub client_id: Option<String>,
    /// The agent that created the request.
    pub requestor: String,
    /// The executor that claimed it.
    pub executor: Option<String>,
    /// Current status.
    pub status: Status,
    /// When the request was received.
    pub created: Timestamp,
    /// Last change of the envelope.
    pub updated: Timestamp,
    /// When a still-pending request expires (`needed_by`, else `constraints.timing.expires`).
    pub expires: Option<Timestamp>,
    /// The request's intent.
    pub intent: String,
    /// The request's priority.
    pub priority: Priority,
    /// Required capability ids.
    pub requires: Vec<String>,
    /// v1.1 `needed_by`, as requested.
    pub needed_by: Option<Timestamp>,
    /// `constraints.timing.not_before`: nobody is offered or may claim the work before it.
    pub not_before: Option<Timestamp>,
    /// v1.1 `confirm_before`.
    pub confirm_before: bool,
    /// Refs of the threads this one waits for.
    pub depends_on: Vec<String>,
    /// v1.1 estimate from the claim (ISO 8601 duration).
    pub estimate: Option<String>,
    /// Where the confirmation handshake stands.
    pub confirmation: Option<ConfirmState>,
    /// Several answers, approvals and the escalation ladder: what the request asked of many
    /// hands and where that stands.
    pub hands: Hands,
    /// State transition log.
    pub history: Vec<HistoryEntry>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// Where the `needs_confirmation` handshake of a thread stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmState {
    /// The executor asked and the requestor has not answered.
    Requested,
    /// The requestor replied `confirm: true`.
    Confirmed,
    /// The requestor replied `confirm: false`.
    Rejected,
}

impl ConfirmState {
    /// The envelope word.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmState::Requested => "requested",
            ConfirmState::Confirmed => "confirmed",
            ConfirmState::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "requested" => Some(ConfirmState::Requested),
            "confirmed" => Some(ConfirmState::Confirmed),
            "rejected" => Some(ConfirmState::Rejected),
            _ => None,
        }
    }
}

/// One entry of the envelope's `history`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// `created`, `dispatched`, a status word, `replied`, `cancelled`, `suggested`, ...
    pub action: String,
    /// When.
    pub at: Timestamp,
    /// Who: an agent, an executor or `exchange`.
    pub by: String,
    /// Optional explanation.
    pub note: Option<String>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// Actions that `apply` derives from messages; other history entries (`dispatched`) are
/// recorded by the exchange alone and survive a rebuild as they are.
pub fn is_derived_action(action: &str) -> bool {
    matches!(
        action,
        "created"
            | "replied"
            | "suggested"
            | "amended"
            | "reviewed"
            | "redo"
            | "approved"
            | "denied"
            | "approval used"
    ) || Status::parse(action).is_some()
}

/// A message document (document 2.. of a thread file).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDoc {
    /// Who sent it: an agent, an executor, or `exchange`.
    pub from: String,
    /// When the exchange received or generated it.
    pub received: Timestamp,
    /// How it arrived (`mcp`, `http`, `cli`, `webhook`, ...).
    pub channel: Option<String>,
    /// The MESS message.
    pub message: Message,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

impl MessageDoc {
    /// Reads a message document; timestamps without an offset are read as UTC.
    pub fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a message document")?;
        let from_path = f.at("from");
        let from = field::id_text(f.req("from")?, &from_path)?;
        let received = lenient_time(&mut f, "received")?
            .ok_or_else(|| ProtocolError::invalid(f.at("received"), "required field is missing"))?;
        let channel = f.opt_str("channel")?;
        let mess = f.req("MESS")?;
        let mut wrapper = Map::new();
        wrapper.insert("MESS", mess);
        let message = Message::from_value(Value::Map(wrapper)).map_err(|e| prefix(e, path))?;
        Ok(MessageDoc {
            from,
            received,
            channel,
            message,
            extra: f.rest(),
        })
    }

    /// Writes the document back.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("from", Value::str(&self.from));
        m.insert(
            "received",
            Value::str(time::format_timestamp(&self.received)),
        );
        field::put_str(&mut m, "channel", &self.channel);
        m.extend_missing(self.extra.clone());
        // The sender's own top-level keys come last and never replace `from`, `received` or
        // `channel`, which only the exchange sets.
        if let Value::Map(mm) = self.message.to_value() {
            for (k, v) in mm {
                if k == "MESS" || !m.contains_key(&k) {
                    m.insert(k, v);
                }
            }
        }
        Value::Map(m)
    }
}

fn prefix(e: ProtocolError, path: &str) -> ProtocolError {
    match e {
        ProtocolError::Invalid { path: p, problem } if !path.is_empty() => ProtocolError::Invalid {
            path: format!("{path}.{p}"),
            problem,
        },
        other => other,
    }
}

fn lenient_time(f: &mut Fields, key: &str) -> Result<Option<Timestamp>> {
    let path = f.at(key);
    match f.take(key) {
        None => Ok(None),
        Some(Value::String(s)) => time::parse_timestamp_lenient(&s)
            .map(Some)
            .map_err(|e| ProtocolError::invalid(path, e)),
        Some(other) => Err(ProtocolError::invalid(
            path,
            format!("expected a timestamp, found {}", other.kind()),
        )),
    }
}

impl Envelope {
    /// Builds the envelope of a new thread from its request.
    pub fn create(
        thread_ref: ThreadRef,
        request: &Request,
        doc: &MessageDoc,
        depends_on: Vec<String>,
    ) -> Envelope {
        Envelope {
            thread_ref,
            client_id: request.id.clone(),
            requestor: doc.from.clone(),
            executor: None,
            status: Status::Pending,
            created: doc.received,
            updated: doc.received,
            expires: request.expires_at(doc.received),
            intent: request.intent.clone(),
            priority: request.priority.unwrap_or(Priority::Normal),
            requires: request.required_ids(),
            needed_by: request.needed_by,
            not_before: request
                .constraints
                .as_ref()
                .and_then(|c| c.timing.as_ref())
                .and_then(|t| t.not_before),
            confirm_before: request.confirm_before.unwrap_or(false),
            depends_on,
            estimate: None,
            confirmation: None,
            hands: Hands::read(request, doc.received, "request").unwrap_or_default(),
            history: vec![HistoryEntry {
                action: "created".into(),
                at: doc.received,
                by: doc.from.clone(),
                note: None,
                extra: Map::new(),
            }],
            // Where the requestor asked to hear of changes (mess's `callback` extension).
            extra: request
                .extra
                .get("callback")
                .map(|url| {
                    let mut m = Map::new();
                    m.insert("callback", url.clone());
                    m
                })
                .unwrap_or_default(),
        }
    }

    /// Appends a history entry and bumps `updated`.
    pub fn record(&mut self, action: &str, at: Timestamp, by: &str, note: Option<String>) {
        self.history.push(HistoryEntry {
            action: action.to_owned(),
            at,
            by: by.to_owned(),
            note,
            extra: Map::new(),
        });
        if at > self.updated {
            self.updated = at;
        }
    }

    /// Applies the effects of one message document appended to this thread, and reports whether
    /// the envelope changed (and so must be rewritten).
    ///
    /// Checks nothing: callers validate transitions and permissions first; `fsck` replays
    /// whatever the file holds.
    pub fn apply(&mut self, doc: &MessageDoc) -> bool {
        if let Some(changed) = self.apply_hands(doc) {
            return changed;
        }
        let mut changed = false;
        for payload in &doc.message.payloads {
            changed |= self.apply_payload(payload, &doc.from, doc.received);
        }
        let has_status = doc
            .message
            .payloads
            .iter()
            .any(|p| matches!(p, Payload::Status(_)));
        let has_response = doc
            .message
            .payloads
            .iter()
            .any(|p| matches!(p, Payload::Response(_)));
        if has_response && !has_status {
            changed |= self.complete_by_response(&doc.from, doc.received);
        }
        changed
    }

    /// Applies one payload of a document from `from` received at `at`.
    pub fn apply_payload(&mut self, payload: &Payload, from: &str, at: Timestamp) -> bool {
        let mut changed = false;
        match payload {
            Payload::Status(s) => {
                if let Some(est) = s.estimate()
                    && self.estimate.as_deref() != Some(est.text.as_str())
                {
                    self.estimate = Some(est.text.clone());
                    changed = true;
                }
                if s.code == Status::NeedsConfirmation
                    && self.confirmation != Some(ConfirmState::Requested)
                {
                    self.confirmation = Some(ConfirmState::Requested);
                    changed = true;
                }
                // Work reported on a thread nobody holds claims it first (the protocol's own
                // examples go from received straight to needs_confirmation).
                if s.code.implies_claim() {
                    changed |= self.claim_implicitly(from, at, &format!("reporting {}", s.code));
                }
                if s.code != self.status {
                    self.status = s.code;
                    if s.code == Status::Claimed {
                        self.executor = Some(from.to_owned());
                    }
                    let note = s.message.clone().or_else(|| reason_note(&s.details));
                    self.record(s.code.as_str(), at, from, note);
                    changed = true;
                }
            }
            Payload::Cancel(c) if self.status != Status::Cancelled => {
                self.status = Status::Cancelled;
                self.record("cancelled", at, from, c.reason.clone());
                changed = true;
            }
            Payload::Reply(r) => {
                let note = match r.confirm {
                    Some(true) => {
                        self.confirmation = Some(ConfirmState::Confirmed);
                        Some("confirmed".to_owned())
                    }
                    Some(false) => {
                        self.confirmation = Some(ConfirmState::Rejected);
                        Some(match &r.reason {
                            Some(why) => format!("confirmation rejected: {why}"),
                            None => "confirmation rejected".to_owned(),
                        })
                    }
                    None => r.accept.map(|a| {
                        if a {
                            "suggestion accepted"
                        } else {
                            "suggestion rejected"
                        }
                        .to_owned()
                    }),
                };
                self.record("replied", at, from, note);
                changed = true;
            }
            // A response on a thread nobody holds claims it first (v1.1's flows answer
            // straight after the request); a response with no status then completes it.
            Payload::Response(_) => changed |= self.claim_implicitly(from, at, "responding"),
            Payload::Review(r) => {
                let note = match (&r.rating, r.feedback.as_deref().map(str::trim)) {
                    (Some(rating), Some(text)) if !text.is_empty() => {
                        Some(format!("rating {}: {text}", rating.text()))
                    }
                    (Some(rating), _) => Some(format!("rating {}", rating.text())),
                    (None, Some(text)) if !text.is_empty() => Some(text.to_owned()),
                    _ => None,
                };
                self.record("reviewed", at, from, note);
                changed = true;
                // A redo reopens finished work to the executor who did it.
                if r.request_redo == Some(true)
                    && matches!(self.status, Status::Completed | Status::Partial)
                    && self.executor.is_some()
                {
                    self.status = Status::Claimed;
                    self.record(
                        "redo",
                        at,
                        from,
                        Some(match r.feedback.as_deref() {
                            Some(f) if !f.trim().is_empty() => format!("do it again: {}", f.trim()),
                            _ => "do it again".to_owned(),
                        }),
                    );
                }
            }
            Payload::Unknown { kind, body } if kind == AMEND && from == EXCHANGE => {
                changed |= self.amend(body, at);
            }
            Payload::Unknown { kind, body }
                if kind == crate::hands::APPROVAL_USE && from == EXCHANGE =>
            {
                self.hands.used += 1;
                let note = body
                    .as_map()
                    .and_then(|m| m.get("action"))
                    .and_then(Value::scalar_text);
                self.record("approval used", at, from, note);
                changed = true;
            }
            Payload::Suggestion(s) => {
                let note = match &s.id {
                    Some(id) => format!("{} ({id})", s.kind),
                    None => s.kind.clone(),
                };
                self.record("suggested", at, from, Some(note));
                changed = true;
            }
            _ => {}
        }
        if changed && at > self.updated {
            self.updated = at;
        }
        changed
    }

    /// Applies the exchange's `amend` (an accepted `alternative` or `defer`): a new intent,
    /// `needed_by` (which is then when the request expires) or `not_before`, noted in history.
    fn amend(&mut self, body: &Value, at: Timestamp) -> bool {
        let Some(m) = body.as_map() else {
            return false;
        };
        let text = |k: &str| m.get(k).and_then(Value::scalar_text);
        let instant = |k: &str| text(k).and_then(|t| crate::time::parse_timestamp_lenient(&t).ok());
        let mut changed = Vec::new();
        if let Some(intent) = text("intent").filter(|i| *i != self.intent) {
            self.intent = intent;
            changed.push("intent");
        }
        if let Some(by) = instant("needed_by") {
            self.needed_by = Some(by);
            self.expires = Some(by);
            changed.push("needed_by");
        }
        if let Some(nb) = instant("not_before") {
            self.not_before = Some(nb);
            changed.push("not_before");
        }
        if changed.is_empty() {
            return false;
        }
        let by = text("suggestion").map_or(String::new(), |s| format!(" (suggestion {s})"));
        self.record(
            "amended",
            at,
            EXCHANGE,
            Some(format!("{}{by}", changed.join(", "))),
        );
        true
    }

    /// Claims a thread nobody holds for `from`, who does work on it (`how`: "reporting
    /// in_progress", "responding"); false when the thread is not pending or `from` is the
    /// exchange or the requestor.
    pub fn claim_implicitly(&mut self, from: &str, at: Timestamp, how: &str) -> bool {
        if self.status != Status::Pending || from == EXCHANGE || from == self.requestor {
            return false;
        }
        self.status = Status::Claimed;
        self.executor = Some(from.to_owned());
        self.record(
            Status::Claimed.as_str(),
            at,
            from,
            Some(format!("claimed by {how}")),
        );
        if at > self.updated {
            self.updated = at;
        }
        true
    }

    /// A response from the claimant that came with no status completes the thread, as the
    /// protocol's flows end (`response` after `claimed` or a confirmation); a thread already
    /// final stays as it is.
    pub fn complete_by_response(&mut self, from: &str, at: Timestamp) -> bool {
        if self.status.is_terminal()
            || self.status == Status::Pending
            || self.executor.as_deref() != Some(from)
        {
            return false;
        }
        self.status = Status::Completed;
        self.record(
            Status::Completed.as_str(),
            at,
            from,
            Some("completed by its response".to_owned()),
        );
        true
    }

    /// Reads an envelope; lenient about timestamps (no offset means UTC) and missing optional
    /// fields, so files written by hand or by other tools load.
    pub fn from_value(v: Value) -> Result<Envelope> {
        let mut f = Fields::new(v, "envelope", "the envelope")?;
        let ref_path = f.at("ref");
        let raw_ref = field::id_text(f.req("ref")?, &ref_path)?;
        let thread_ref = ThreadRef::parse(&raw_ref)
            .map_err(|_| ProtocolError::invalid(&ref_path, format!("invalid ref {raw_ref:?}")))?;
        let client_id = f.opt_id("client_id")?;
        let requestor = field::id_text(f.req("requestor")?, &f.at("requestor"))?;
        let executor = f.opt_id("executor")?;
        let status_path = f.at("status");
        let status = status::read_status(f.req("status")?, &status_path)?;
        let created = lenient_time(&mut f, "created")?
            .ok_or_else(|| ProtocolError::invalid(f.at("created"), "required field is missing"))?;
        let updated = lenient_time(&mut f, "updated")?.unwrap_or(created);
        let expires = lenient_time(&mut f, "expires")?;
        let intent = match f.take("intent") {
            Some(v) => v.scalar_text().unwrap_or_default(),
            None => String::new(),
        };
        let priority = match f.take("priority") {
            None => Priority::Normal,
            Some(v) => Priority::read(v, &f.at("priority"))?,
        };
        let requires = f.list("requires", |v, p| {
            v.scalar_text()
                .or_else(|| v.as_map().and_then(|m| m.keys().next().cloned()))
                .ok_or_else(|| ProtocolError::invalid(p, "expected a capability id"))
        })?;
        let needed_by = lenient_time(&mut f, "needed_by")?;
        let not_before = lenient_time(&mut f, "not_before")?;
        let confirm_before = f.opt_bool("confirm_before")?.unwrap_or(false);
        let depends_on = f.list("depends_on", field::id_text)?;
        let estimate = f.opt_str("estimate")?;
        let confirmation = match f.opt_str("confirmation")? {
            None => None,
            Some(s) => Some(ConfirmState::parse(&s).ok_or_else(|| {
                ProtocolError::invalid(
                    f.at("confirmation"),
                    format!("unknown value {s:?} (expected requested, confirmed or rejected)"),
                )
            })?),
        };
        let hands = Hands::take(&mut f);
        let history = f.list("history", |v, p| {
            let mut g = Fields::new(v, p, "a history entry")?;
            let action = match g.take("action") {
                Some(a) => a.scalar_text().unwrap_or_default(),
                None => {
                    return Err(ProtocolError::invalid(
                        g.at("action"),
                        "required field is missing",
                    ));
                }
            };
            let at = lenient_time(&mut g, "at")?
                .ok_or_else(|| ProtocolError::invalid(g.at("at"), "required field is missing"))?;
            let by = g.opt_id("by")?.unwrap_or_default();
            let note = g.take("note").and_then(|n| n.scalar_text());
            Ok(HistoryEntry {
                action,
                at,
                by,
                note,
                extra: g.rest(),
            })
        })?;
        Ok(Envelope {
            thread_ref,
            client_id,
            requestor,
            executor,
            status,
            created,
            updated,
            expires,
            intent,
            priority,
            requires,
            needed_by,
            not_before,
            confirm_before,
            depends_on,
            estimate,
            confirmation,
            hands,
            history,
            extra: f.rest(),
        })
    }

    /// Writes the envelope in the field order of the MESSE-AF examples, `history` last.
    pub fn to_value(&self) -> Value {
        let ts = |t: &Timestamp| Value::str(time::format_timestamp(t));
        let mut m = Map::new();
        m.insert("ref", Value::str(self.thread_ref.as_str()));
        field::put_str(&mut m, "client_id", &self.client_id);
        m.insert("requestor", Value::str(&self.requestor));
        field::put_str(&mut m, "executor", &self.executor);
        m.insert("status", Value::str(self.status.as_str()));
        m.insert("created", ts(&self.created));
        m.insert("updated", ts(&self.updated));
        m.insert_opt("expires", self.expires.as_ref().map(ts));
        m.insert("intent", Value::str(&self.intent));
        m.insert("priority", Value::str(self.priority.as_str()));
        field::put_list(&mut m, "requires", &self.requires, |s| Value::str(s));
        m.insert_opt("needed_by", self.needed_by.as_ref().map(ts));
        m.insert_opt("not_before", self.not_before.as_ref().map(ts));
        if self.confirm_before {
            m.insert("confirm_before", Value::Bool(true));
        }
        field::put_list(&mut m, "depends_on", &self.depends_on, |s| Value::str(s));
        field::put_str(&mut m, "estimate", &self.estimate);
        m.insert_opt(
            "confirmation",
            self.confirmation.map(|c| Value::str(c.as_str())),
        );
        self.hands.put(&mut m);
        m.extend_missing(self.extra.clone());
        let history = self
            .history
            .iter()
            .map(|h| {
                let mut e = Map::new();
                e.insert("action", Value::str(&h.action));
                e.insert("at", ts(&h.at));
                e.insert("by", Value::str(&h.by));
                field::put_str(&mut e, "note", &h.note);
                e.extend_missing(h.extra.clone());
                Value::Map(e)
            })
            .collect();
        m.insert("history", Value::Seq(history));
        Value::Map(m)
    }

    /// The deadline after which the exchange ends this thread if nobody works on it (pending,
    /// or paused as `waiting` or `held`), and the field that set it (`needed_by` or
    /// `expires`).
    ///
    /// A thread asking for several answers keeps its deadline while its slots are all taken
    /// (it ends `partial` with the answers in); an approval's `expires` and the end of an
    /// escalation ladder are deadlines too, whichever comes first.
    pub fn deadline(&self) -> Option<(Timestamp, &'static str)> {
        let waiting = matches!(
            self.status,
            Status::Pending | Status::Waiting | Status::Held
        ) || (self.hands.multi() && self.status == Status::Claimed);
        if !waiting {
            return None;
        }
        let own = self.expires.or(self.needed_by).map(|at| {
            (
                at,
                if self.needed_by == Some(at) {
                    "needed_by"
                } else {
                    "expires"
                },
            )
        });
        let pending = self.status == Status::Pending;
        let approval = self
            .hands
            .approval
            .as_ref()
            .and_then(|a| a.expires)
            .filter(|_| pending)
            .map(|at| (at, "approval.expires"));
        let ladder = self
            .hands
            .ladder_end(self.created)
            .filter(|_| pending)
            .map(|at| (at, "escalate"));
        [own, approval, ladder]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at)
    }

    /// True while the request's `not_before` is still ahead: nobody is offered it or may
    /// claim it yet.
    pub fn too_early(&self, now: Timestamp) -> bool {
        self.not_before.is_some_and(|t| t > now)
    }

    /// Where a waiting thread stands among others: urgent first, then the earliest received,
    /// then by ref. Queue positions and every list of pending work follow this order.
    pub fn queue_key(&self) -> (std::cmp::Reverse<Priority>, Timestamp, &ThreadRef) {
        (
            std::cmp::Reverse(self.priority),
            self.created,
            &self.thread_ref,
        )
    }

    /// True when a dispatch has been recorded.
    pub fn dispatched(&self) -> bool {
        self.history.iter().any(|h| h.action == "dispatched")
    }

    /// Why a pending thread waits when routing could not route it: the note of its last
    /// routing entry, if that is `unroutable` (not a later `dispatched`).
    pub fn unroutable(&self) -> Option<&str> {
        if self.status != Status::Pending {
            return None;
        }
        self.history
            .iter()
            .rev()
            .find(|h| h.action == "unroutable" || h.action == "dispatched")
            .filter(|h| h.action == "unroutable")
            .and_then(|h| h.note.as_deref())
    }
}

pub(crate) fn reason_note(details: &StatusDetails) -> Option<String> {
    let reason = match details {
        StatusDetails::Failed { reason, .. } | StatusDetails::Declined { reason } => Some(reason),
        StatusDetails::Held { reason, .. }
        | StatusDetails::Cancelled { reason }
        | StatusDetails::Partial { reason, .. }
        | StatusDetails::Delegated { reason, .. } => reason.as_ref(),
        _ => None,
    }?;
    match reason {
        Value::String(s) => Some(s.clone()),
        Value::Map(m) => {
            let kind = m.get("type").and_then(Value::scalar_text);
            let detail = m.get("detail").and_then(Value::scalar_text);
            match (kind, detail) {
                (Some(k), Some(d)) => Some(format!("{k}: {d}")),
                (Some(k), None) => Some(k),
                (None, Some(d)) => Some(d),
                (None, None) => None,
            }
        }
        _ => None,
    }
}

/// Rebuilds a thread's envelope from its messages, as `fsck --repair` does.
///
/// The first request gives the cached request fields; every later document is applied in order.
/// History entries only the exchange records (`dispatched`) and unknown envelope fields are taken
/// from `stored` when there is one.
pub fn rebuild(
    thread_ref: &ThreadRef,
    stored: Option<&Envelope>,
    docs: &[MessageDoc],
) -> Result<Envelope> {
    let (first, request) = docs
        .iter()
        .find_map(|d| {
            d.message.payloads.iter().find_map(|p| match p {
                Payload::Request(r) => Some((d, r)),
                _ => None,
            })
        })
        .ok_or_else(|| ProtocolError::invalid("MESS", "the thread has no request message"))?;
    let depends_on = match stored {
        Some(s) if !s.depends_on.is_empty() => s.depends_on.clone(),
        _ => request.depends_on().to_vec(),
    };
    let mut env = Envelope::create(thread_ref.clone(), request, first, depends_on);
    for doc in docs {
        if !std::ptr::eq(doc, first) {
            env.apply(doc);
        }
    }
    if let Some(s) = stored {
        let kept: Vec<HistoryEntry> = s
            .history
            .iter()
            .filter(|h| !is_derived_action(&h.action))
            .cloned()
            .collect();
        for h in &kept {
            if h.at > env.updated {
                env.updated = h.at;
            }
        }
        env.history.extend(kept);
        // At equal instants the exchange's own entries (a dispatch) follow the creation they
        // belong to and precede the rest; the sort is stable, so each group keeps its order.
        env.history.sort_by_key(history_order);
        env.extra = s.extra.clone();
        // Writers may bump `updated` for messages that change nothing else; later is kept.
        env.updated = env.updated.max(s.updated);
        if env.expires.is_none() {
            env.expires = s.expires;
        }
        // Notes are free text; where replay and file agree on the entry, keep the file's note.
        for h in env.history.iter_mut() {
            if let Some(old) = s
                .history
                .iter()
                .find(|o| o.action == h.action && o.at == h.at && o.by == h.by)
            {
                h.note.clone_from(&old.note);
                h.extra = old.extra.clone();
            }
        }
    }
    Ok(env)
}

/// Where a history entry goes when the history is put in time order: at equal instants the
/// exchange's own entries (a dispatch) follow the creation they belong to and precede the rest.
fn history_order(h: &HistoryEntry) -> (Timestamp, u8) {
    let rank = match h.action.as_str() {
        "created" => 0,
        a if !is_derived_action(a) => 1,
        _ => 2,
    };
    (h.at, rank)
}

/// True when `stored` says something about the thread's state that its messages do not:
/// another status, executor, confirmation or estimate, another sequence of history entries, or
/// an `updated` older than the last change.
pub fn differs_in_state(stored: &Envelope, rebuilt: &Envelope) -> bool {
    state_difference(stored, rebuilt).is_some()
}

/// What `stored` says that its messages do not, in words (the first difference found), for
/// `fsck` to name; `None` when they agree. See [`differs_in_state`].
pub fn state_difference(stored: &Envelope, rebuilt: &Envelope) -> Option<String> {
    let shown = |v: Option<String>| v.unwrap_or_else(|| "nothing".to_owned());
    if stored.status != rebuilt.status {
        return Some(format!(
            "says {}, messages say {}",
            stored.status, rebuilt.status
        ));
    }
    if stored.executor != rebuilt.executor {
        return Some(format!(
            "executor: says {}, messages say {}",
            shown(stored.executor.clone()),
            shown(rebuilt.executor.clone())
        ));
    }
    if stored.confirmation != rebuilt.confirmation {
        return Some("confirmation differs from the messages'".to_owned());
    }
    // What the request asked of many hands is the request's, never the cache's: a quorum
    // written lower by hand is healed back, not obeyed.
    if stored.hands.assignments != rebuilt.hands.assignments
        || stored.hands.agree != rebuilt.hands.agree
        || stored.hands.approval != rebuilt.hands.approval
        || stored.hands.escalate != rebuilt.hands.escalate
    {
        return Some("what the request asked of many hands differs from the request".to_owned());
    }
    if stored.hands.used != rebuilt.hands.used {
        return Some("the approval's uses differ from the messages'".to_owned());
    }
    if stored.hands.slots != rebuilt.hands.slots {
        return Some("slots differ from the messages'".to_owned());
    }
    if stored.hands.decisions != rebuilt.hands.decisions {
        return Some("decisions differ from the messages'".to_owned());
    }
    if stored.estimate != rebuilt.estimate {
        return Some("estimate differs from the messages'".to_owned());
    }
    if stored.updated < rebuilt.updated {
        return Some(format!(
            "updated {}, before the last message at {}",
            stored.updated, rebuilt.updated
        ));
    }
    // Compared in time order: writers take their clock before they take a thread's lock, so
    // an exchange entry (a routing pass's `dispatched`) may land after a message received a
    // moment later by another process. The same entries in another order are the same state.
    let key = |e: &Envelope| {
        let mut history: Vec<&HistoryEntry> = e.history.iter().collect();
        history.sort_by_key(|h| history_order(h));
        history
            .into_iter()
            .map(|h| (h.action.clone(), h.at, h.by.clone()))
            .collect::<Vec<_>>()
    };
    let (old, new) = (key(stored), key(rebuilt));
    if old != new {
        let at = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let entry = |k: &[(String, _, _)]| {
            k.get(at)
                .map(|(action, when, _)| format!("{action} at {when}"))
                .unwrap_or_else(|| "no entry".to_owned())
        };
        return Some(format!(
            "history entry {}: says {}, messages say {}",
            at + 1,
            entry(&old),
            entry(&new)
        ));
    }
    None
}
