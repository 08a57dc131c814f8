//! Submitting one MESS message: config first, then requests, then the payloads directed at
//! existing threads (checked all together before any is written), then queries.

use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::exchange::plan::{self, Context};
use crate::exchange::requests;
use crate::exchange::{Exchange, Sender, lifecycle, suggestions, view};
use crate::notify::ClaimantEvent;
use crate::protocol::emit;
use crate::protocol::envelope::Envelope;
use crate::protocol::error::ProtocolError;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::Status;
use crate::protocol::time::Timestamp;
use crate::protocol::value::{Map, Value};
use crate::store::{Edit, HeadMemo, IndexKey};

/// The door every message comes in by: reading (bounded by the parse gate) and submitting.
#[derive(Clone, Copy)]
pub struct Intake<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// The door messages come in by.
    pub fn intake(&self) -> Intake<'_> {
        Intake { ex: self }
    }
}

use crate::protocol::rules::{Sorted, check_role, sort};

/// Submits one message from `sender`: everything in it is checked (its bounds, the sender's
/// role, each payload against its thread) before anything is written, then configs, requests,
/// the payloads directed at threads, and queries are carried out in that order.
pub(crate) fn submit(ex: &Exchange, message: Message, sender: &Sender) -> Result<Message, Error> {
    // What the message held, for the metrics: its payloads' types, and its claims.
    let kinds: Vec<&'static str> = message
        .payloads
        .iter()
        .map(crate::exchange::telemetry::payload_type)
        .collect();
    let claims = message
        .payloads
        .iter()
        .filter(|p| matches!(p, crate::protocol::message::Payload::Status(s) if s.code == crate::protocol::status::Status::Claimed))
        .count();
    let answer = submit_checked(ex, message, sender);
    let outcome = match &answer {
        Ok(_) => "ok",
        Err(e) => crate::exchange::telemetry::error_kind(e.kind()),
    };
    for kind in kinds {
        crate::exchange::telemetry::message(kind, outcome);
    }
    if claims > 0 {
        match &answer {
            Ok(_) => crate::exchange::telemetry::claim(true),
            Err(e) if e.kind() == crate::exchange::error::ErrorKind::Conflict => {
                crate::exchange::telemetry::claim(false);
            }
            Err(_) => {}
        }
    }
    answer
}

/// [`submit`] itself: checks every payload, then writes.
fn submit_checked(ex: &Exchange, message: Message, sender: &Sender) -> Result<Message, Error> {
    crate::protocol::rules::check_bounds(&message, &sender.id, ex.settings.max_message_bytes)?;
    let now = ex.now();
    let version = message.version().map(str::to_owned);
    let Sorted {
        requests,
        directed,
        configs,
        queries,
    } = sort(&message)?;
    if let Some(role) = sender.role {
        check_role(role, &sender.id, &message)?;
    }

    // Check the directed payloads against their threads before writing anything, so a bad
    // payload late in the message leaves nothing half-applied.
    let mut directory = ex.directory();
    let checked = check_directed(ex, &directed, sender, &directory, now)?;
    let deps = requests::check(ex, &requests, sender, &directory, now)?;
    for (index, config) in &configs {
        view::check_config(ex, config, *index, sender, &directory)?;
    }

    let mut answer = Vec::new();
    for (_, config) in &configs {
        answer.push(view::apply_config(ex, config, sender, &directory)?);
    }
    if !configs.is_empty() {
        directory = ex.directory();
    }
    if !requests.is_empty() {
        answer.push(requests::create(
            ex,
            requests,
            &deps,
            version.as_deref(),
            &message.extra,
            sender,
            now,
        )?);
    }
    for (g, before, deps) in checked {
        answer.push(apply_group(
            ex,
            &g,
            &before,
            &deps,
            version.as_deref(),
            sender,
            &directory,
            now,
        )?);
    }
    // Status queries read the sender's threads once for the whole message.
    let mut listed = None;
    for q in &queries {
        answer.push(view::answer_query(ex, q, sender, &directory, &mut listed)?);
    }
    Ok(Message::from_exchange(answer, version.as_deref()))
}

/// A group of directed payloads checked against its thread: the envelope and the
/// dependencies' statuses it was checked on.
type Checked = (plan::Group, Envelope, Vec<(String, Option<Status>)>);

/// The directed payloads grouped by thread, each group checked against its thread as it is
/// (expired first when due), with the envelope and dependency statuses it was checked on.
/// A key holder hears of a thread only if it is a party to it (or may take it): to anyone
/// else it does not exist, so refusals cannot reveal it or its requestor.
fn check_directed(
    ex: &Exchange,
    directed: &[(usize, Payload)],
    sender: &Sender,
    directory: &Directory,
    now: Timestamp,
) -> Result<Vec<Checked>, Error> {
    let groups = plan::group(ex, directed, sender, directory)?;
    for g in &groups {
        lifecycle::expire_if_due(ex, &g.thread, now)?;
    }
    let mut checked = Vec::with_capacity(groups.len());
    for g in groups {
        let (env, _) = ex.store().envelope(&g.thread)?;
        let deps = plan::dependency_statuses(ex, &env)?;
        let cx = Context {
            sender: &sender.id,
            roster: directory,
            dependencies: &deps,
            now,
        };
        plan::check_group(&env, &g.payloads, &cx)?;
        checked.push((g, env, deps));
    }
    Ok(checked)
}

/// Writes one group under the thread's lock (checking it again there), then settles what
/// follows from the new status; returns the status payload answered to the sender.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the values are the use case's state"
)]
fn apply_group(
    ex: &Exchange,
    g: &plan::Group,
    before: &crate::protocol::envelope::Envelope,
    deps: &[(String, Option<Status>)],
    version: Option<&str>,
    sender: &Sender,
    directory: &Directory,
    now: crate::protocol::time::Timestamp,
) -> Result<Payload, Error> {
    // An accepting reply of the requestor to a suggestion: what carrying it out writes is worked
    // out first; the decision itself is the write below.
    let accepted = match g.payloads.iter().find_map(|p| match p {
        Payload::Reply(r) if sender.id == before.requestor && r.accept == Some(true) => Some(r),
        _ => None,
    }) {
        Some(reply) => {
            let file = ex.store().read(&g.thread)?;
            suggestions::accepted(ex, &file, reply, directory, now)?
        }
        None => None,
    };
    let (status, holder, echo) = ex.store().modify(&g.thread, |t| -> Result<_, Error> {
        let cx = Context {
            sender: &sender.id,
            roster: directory,
            dependencies: deps,
            now,
        };
        plan::check_group(&t.envelope, &g.payloads, &cx)?;
        let doc = crate::protocol::answer::message_doc(
            &sender.id,
            &sender.channel,
            version,
            g.payloads.iter().cloned(),
            Map::new(),
            now,
        );
        // Every change rewrites the whole file: a thread grows only so far, or appending to
        // it would cost more each time without end.
        let grown = t.text().len() + emit::to_yaml(&doc.to_value()).len();
        let most = ex.settings().max_thread_bytes;
        if grown > most {
            return Err(Error::ThreadFull {
                message: format!(
                    "{} would grow to {grown} bytes, past the {most} bytes a thread may hold; start a new request",
                    g.thread
                ),
            });
        }
        let mut envelope = t.envelope.clone();
        envelope.apply(&doc);
        let mut append = vec![doc];
        let mut deliveries = Vec::new();
        let mut recent = g.payloads.clone();
        // Enough answers or decisions decide the thread: the exchange's verdict is written
        // with the message that decided it.
        if let Some(verdict) =
            crate::exchange::hands::settle(&envelope, t, &append, directory, now)?
        {
            envelope.apply(&verdict);
            recent.extend(verdict.message.payloads.iter().cloned());
            append.push(verdict);
        }
        if let Some(a) = &accepted {
            a.still_applies(&t.envelope)?;
            let verdict = a.verdict(&envelope, now);
            envelope.apply(&verdict);
            recent.extend(verdict.message.payloads.iter().cloned());
            deliveries.extend(a.delivery(&envelope, now));
            append.push(verdict);
        }
        let echo = view::status_echo(&envelope, &recent, t)?;
        Ok((
            Some(Edit {
                envelope: envelope.clone(),
                append,
                deliveries,
            }),
            (
                envelope.status,
                // A slot holder holds its part of a thread asking for several answers.
                envelope.executor.clone().or_else(|| {
                    envelope
                        .hands
                        .slot_of(&sender.id)
                        .map(|_| sender.id.clone())
                }),
                echo,
            ),
        ))
    })?;
    if sender.id == before.requestor {
        for p in &g.payloads {
            let event = match p {
                Payload::Reply(r) => match r.confirm {
                    Some(true) => ClaimantEvent::Confirmed,
                    Some(false) => ClaimantEvent::Refused,
                    None => ClaimantEvent::Answered,
                },
                Payload::Cancel(_) => ClaimantEvent::Cancelled,
                Payload::Review(r) if r.request_redo == Some(true) => ClaimantEvent::Redo,
                Payload::Review(_) => ClaimantEvent::Reviewed,
                _ => continue,
            };
            lifecycle::tell_claimant(ex, before, event, now);
        }
    }
    if before.hands.confirm_by.is_some() {
        follow_confirmation(ex, before, &g.thread, now);
    }
    if holder.as_deref() == Some(sender.id.as_str()) && sender.id != before.requestor {
        // What `re: last` and the requestor's client id name for this executor from now on
        // (see `plan::last_for_executor`): written only when it changes, as most reports
        // are on the thread reported on last.
        let mut entries = Vec::new();
        if before.status == Status::Pending {
            entries.push((IndexKey::LastWork, &g.thread));
            if let Some(id) = before.client_id.as_deref() {
                entries.push((IndexKey::WorkId(id), &g.thread));
            }
        }
        if ex.store().lookup(&sender.id, IndexKey::Held)?.as_ref() != Some(&g.thread) {
            entries.push((IndexKey::Held, &g.thread));
        }
        if !entries.is_empty() {
            ex.store().remember(&sender.id, &entries)?;
        }
    }
    for p in &g.payloads {
        if let Payload::Suggestion(s) = p
            && let Some(id) = &s.id
        {
            // A suggestion about several threads is answered on the first one it named.
            if ex
                .store()
                .lookup(&before.requestor, IndexKey::Suggestion(id))?
                .is_none()
            {
                ex.store()
                    .remember(&before.requestor, &[(IndexKey::Suggestion(id), &g.thread)])?;
            }
        }
    }
    if status != before.status && (status == Status::Completed || status.fails_dependents()) {
        lifecycle::settle_dependents(ex, &g.thread, now)?;
    }
    // Settled here when this change decided it; the delivery queued with the change does it
    // otherwise (and finds it done here).
    if let Err(e) = ex.marketplace().settle_escrow(&g.thread) {
        tracing::warn!(thread = %g.thread, error = %e, "cannot settle the escrow now; the delivery worker will");
    }
    let echo = match accepted {
        Some(_) => {
            let made = suggestions::carry_out_now(ex, &g.thread, now)?;
            lifecycle::tell_claimant(ex, before, ClaimantEvent::Ended, now);
            with_refs(echo, made)
        }
        None => echo,
    };
    Ok(echo)
}

/// The status echo of an accepted suggestion, naming the threads it made (`refs`).
fn with_refs(echo: Payload, made: Vec<String>) -> Payload {
    match echo {
        Payload::Status(mut s) if !made.is_empty() => {
            s.extra.insert(
                "refs",
                Value::Seq(made.into_iter().map(Value::str).collect()),
            );
            Payload::Status(s)
        }
        other => other,
    }
}

/// Memory all message parsing of one process may take at once.
pub(super) const PARSE_BUDGET: usize = 384 * 1024 * 1024;

/// How long a message waits for room to be parsed before it is refused as busy.
const PARSE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// What parsing a message of `len` bytes may cost at most (the multiple measured by the parse
/// benchmark, with room to spare): the budget each parse holds while it runs.
pub(super) fn parse_cost(len: usize) -> usize {
    len.saturating_mul(10).saturating_add(4 * 1024 * 1024)
}

/// A counting gate over [`PARSE_BUDGET`]: a parse waits until its cost fits beside the parses
/// in flight, so many large messages at once queue instead of exhausting memory.
#[derive(Debug, Default)]
pub(super) struct ParseGate {
    used: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl ParseGate {
    /// Waits for room for `cost` and holds it until the guard drops; a cost over the whole
    /// budget waits for the gate to be empty. Waits at most `patience`: a parse that cannot
    /// start by then is refused as busy rather than queued behind others without end.
    pub(super) fn enter(
        &self,
        cost: usize,
        patience: std::time::Duration,
    ) -> Result<ParseGuard<'_>, Error> {
        let cost = cost.min(PARSE_BUDGET);
        let deadline = std::time::Instant::now() + patience;
        let mut used = match self.used.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        while *used + cost > PARSE_BUDGET {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(Error::Busy {
                    message: "the exchange is reading as many large messages as it holds at \
                              once; retry shortly"
                        .to_owned(),
                });
            }
            used = match self.freed.wait_timeout(used, left) {
                Ok((g, _)) => g,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        *used += cost;
        Ok(ParseGuard { gate: self, cost })
    }
}

/// Room held in the [`ParseGate`].
pub(super) struct ParseGuard<'a> {
    gate: &'a ParseGate,
    cost: usize,
}

impl Drop for ParseGuard<'_> {
    fn drop(&mut self) {
        let mut used = match self.gate.used.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *used = used.saturating_sub(self.cost);
        self.gate.freed.notify_all();
    }
}

impl Intake<'_> {
    /// Parses YAML text holding one or more MESS messages (one per document) and submits each,
    /// in order; returns the exchange's answer to each. Stops at the first failure; callers that
    /// must report the answers before it submit [`Intake::parse_text`]'s messages one by one.
    pub fn submit_text(&self, text: &str, sender: &Sender) -> Result<Vec<Message>, Error> {
        self.parse_text(text)?
            .into_iter()
            .map(|m| self.submit(m, sender))
            .collect()
    }

    /// Parses YAML text holding one or more MESS messages (one per document), checking the size
    /// limit first; nothing is submitted.
    pub fn parse_text(&self, text: &str) -> Result<Vec<Message>, Error> {
        let _room = self.parse_room(text)?;
        self.read_messages(text)
    }

    /// Holds room in the parse budget for `text` (after checking the size limit, so an
    /// oversized text is refused before it waits).
    fn parse_room(&self, text: &str) -> Result<ParseGuard<'_>, Error> {
        if text.len() > self.ex.settings.max_message_bytes {
            return Err(ProtocolError::TooLarge {
                size: text.len(),
                limit: self.ex.settings.max_message_bytes,
            }
            .into());
        }
        self.ex
            .parsing
            .enter(parse_cost(text.len()), PARSE_PATIENCE)
    }

    /// [`Intake::parse_text`] without taking room (the caller holds it).
    fn read_messages(&self, text: &str) -> Result<Vec<Message>, Error> {
        Ok(crate::protocol::read::messages(text)?)
    }

    /// Parses a JSON text (RFC 8259) holding exactly one MESS message, as the API reads bodies
    /// sent as `application/json`: strict JSON, not YAML, so every escape JSON allows (surrogate
    /// pairs included) reads as JSON means it, and an error gives the line and column.
    pub fn parse_json(&self, text: &str) -> Result<Message, Error> {
        let _room = self.parse_room(text)?;
        self.read_json(text)
    }

    /// [`Intake::parse_json`] without taking room (the caller holds it).
    fn read_json(&self, text: &str) -> Result<Message, Error> {
        Ok(crate::protocol::read::json_message(text)?)
    }

    /// Parses YAML (or JSON) text holding exactly one MESS message, as the API takes one per
    /// request.
    pub fn parse_one(&self, text: &str) -> Result<Message, Error> {
        let _room = self.parse_room(text)?;
        self.read_one(text)
    }

    /// [`Intake::parse_one`] without taking room (the caller holds it).
    fn read_one(&self, text: &str) -> Result<Message, Error> {
        Ok(crate::protocol::read::one_message(text)?)
    }

    /// Parses a request body holding one MESS message (strict JSON when `json`, else YAML) and
    /// hands it to `then`, holding the message's room in the parse budget until `then` returns:
    /// the parsed message lives that long, so the budget counts it while it is submitted.
    pub fn take_body<T>(
        &self,
        text: &str,
        json: bool,
        then: impl FnOnce(Message) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let _room = self.parse_room(text)?;
        let message = if json {
            self.read_json(text)?
        } else {
            self.read_one(text)?
        };
        then(message)
    }

    /// Submits one parsed MESS message and returns the exchange's answer (ack, statuses,
    /// query responses).
    pub fn submit(&self, message: Message, sender: &Sender) -> Result<Message, Error> {
        let _heads = HeadMemo::open();
        submit(self.ex, message, sender)
    }
}

/// Who hears of a `confirm_by` thread's confirmation once a change is written: the confirmers
/// when the claimant asks (`needs_confirmation`), the claimant when they have decided it.
fn follow_confirmation(
    ex: &Exchange,
    before: &Envelope,
    thread: &crate::protocol::ids::ThreadRef,
    now: Timestamp,
) {
    use crate::protocol::envelope::ConfirmState;
    let Ok((after, _)) = ex.store().envelope(thread) else {
        return;
    };
    if after.confirmation == before.confirmation {
        return;
    }
    match after.confirmation {
        Some(ConfirmState::Requested) => {
            let people = crate::exchange::hands::confirmers(&after, &ex.directory());
            if let Err(e) = ex.outbox().queue_notices(thread, &people, "confirm", now) {
                tracing::warn!(%thread, error = %e, "cannot queue the confirmers' notices");
            }
        }
        Some(ConfirmState::Confirmed) => {
            lifecycle::tell_claimant(ex, &after, ClaimantEvent::Confirmed, now);
        }
        Some(ConfirmState::Rejected) => {
            lifecycle::tell_claimant(ex, &after, ClaimantEvent::Refused, now);
        }
        None => {}
    }
}
