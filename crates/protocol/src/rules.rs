//! The rules a message must pass against a thread as it stands, before anything is written:
//! which payloads a key's role may send, and whether each status, response, reply, review,
//! cancel and suggestion may follow the thread's current state. Every exchange build checks
//! messages with these, so the same message meets the same answer everywhere.

use std::fmt;

use crate::access::{self, Roster};
use crate::emit;
use crate::envelope::{ConfirmState, Envelope, MessageDoc};
use crate::error::ProtocolError;
use crate::ids::ThreadRef;
use crate::machine::{self, Actor, Step};
use crate::message::{Message, Payload};
use crate::request::Request;
use crate::status::{Status, StatusDetails, StatusMsg};
use crate::time::Timestamp;
use crate::value::{Map, Value};

/// Most payloads in one message.
pub const MAX_PAYLOADS: usize = 256;
/// Most threads one `cancel` or `suggestion` names.
pub const MAX_REFERENCES: usize = 256;

/// Refuses a message before any work: a sender with no id (or the exchange's own), more
/// payloads or named threads than one message may ask about, or more text than the size limit.
/// Every adapter of every build passes here, so the limits hold for built messages as well
/// as for YAML text.
pub fn check_bounds(
    message: &Message,
    sender: &str,
    max_message_bytes: usize,
) -> Result<(), ProtocolError> {
    if sender.trim().is_empty() || sender == crate::envelope::EXCHANGE {
        return Err(ProtocolError::forbidden(format!(
            "{:?} cannot send messages: pick an agent or executor id",
            sender
        )));
    }
    // The work a message asks for is bounded where it comes in, like its size: each payload
    // and each thread a payload names costs lookups, writes or a listing.
    if message.payloads.len() > MAX_PAYLOADS {
        return Err(ProtocolError::invalid(
            "MESS",
            format!(
                "{} payloads in one message; send at most {MAX_PAYLOADS} (split the rest into further messages)",
                message.payloads.len()
            ),
        ));
    }
    for (index, payload) in message.payloads.iter().enumerate() {
        let re = match payload {
            Payload::Cancel(c) => &c.re,
            Payload::Suggestion(s) => &s.re,
            Payload::Query(q) => match &q.filter.re {
                Some(re) => re,
                None => continue,
            },
            _ => continue,
        };
        if re.items().len() > MAX_REFERENCES {
            return Err(ProtocolError::invalid(
                format!("MESS[{index}].{}.re", payload.kind()),
                format!(
                    "names {} threads; at most {MAX_REFERENCES} in one payload",
                    re.items().len()
                ),
            ));
        }
    }
    let value = message.to_value();
    check_text(&value, "")?;
    let size = emit::to_yaml(&value).len();
    if size > max_message_bytes {
        return Err(ProtocolError::TooLarge {
            size,
            limit: max_message_bytes,
        });
    }
    Ok(())
}

/// A message's payloads by what the exchange does with them.
pub struct Sorted {
    /// The requests, with their place in the message.
    pub requests: Vec<Incoming>,
    /// Payloads about existing threads, with their place in the message.
    pub directed: Vec<(usize, Payload)>,
    /// Config payloads, with their place in the message.
    pub configs: Vec<(usize, crate::config::ConfigMsg)>,
    /// Status queries.
    pub queries: Vec<crate::message::Query>,
}

/// Sorts `message`'s payloads; refuses acks (the exchange sends them) and a message with
/// nothing to act on.
pub fn sort(message: &Message) -> Result<Sorted, ProtocolError> {
    let mut sorted = Sorted {
        requests: Vec::new(),
        directed: Vec::new(),
        configs: Vec::new(),
        queries: Vec::new(),
    };
    for (index, payload) in message.payloads.iter().enumerate() {
        match payload {
            Payload::Request(r) => sorted.requests.push(Incoming {
                index,
                request: r.clone(),
            }),
            Payload::Reply(_)
            | Payload::Review(_)
            | Payload::Cancel(_)
            | Payload::Status(_)
            | Payload::Response(_)
            | Payload::Suggestion(_) => {
                sorted.directed.push((index, payload.clone()));
            }
            Payload::Config(c) => sorted.configs.push((index, c.clone())),
            Payload::Query(q) => sorted.queries.push(q.clone()),
            Payload::Ack(_) => {
                return Err(ProtocolError::invalid(
                    format!("MESS[{index}].ack"),
                    "acks are sent by the exchange, not to it",
                ));
            }
            Payload::Version(_) | Payload::Unknown { .. } => {}
        }
    }
    if sorted.requests.is_empty()
        && sorted.directed.is_empty()
        && sorted.configs.is_empty()
        && sorted.queries.is_empty()
    {
        let kinds: Vec<&str> = message.payloads.iter().map(Payload::kind).collect();
        return Err(ProtocolError::invalid(
            "MESS",
            format!(
                "nothing to act on (payloads: {}); send a request, reply, cancel, status, response, suggestion, query or config",
                kinds.join(", ")
            ),
        ));
    }
    Ok(sorted)
}

/// Refuses control characters (NUL, escapes, ...) anywhere in a message's text, keys included:
/// they have no place in MESS, would reach terminals and web pages, and some tools cut text at
/// a NUL. Tabs and line breaks are text.
pub fn check_text(value: &Value, path: &str) -> Result<(), ProtocolError> {
    let bad = |s: &str| {
        s.chars()
            .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    };
    match value {
        Value::String(s) => match bad(s) {
            Some(c) => Err(ProtocolError::invalid(
                path,
                format!(
                    "control character U+{:04X} is not allowed in text",
                    c as u32
                ),
            )),
            None => Ok(()),
        },
        Value::Seq(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_text(v, &format!("{path}[{i}]"))),
        Value::Map(m) => m.iter().try_for_each(|(k, v)| {
            if let Some(c) = bad(k) {
                return Err(ProtocolError::invalid(
                    if path.is_empty() { "message" } else { path },
                    format!(
                        "control character U+{:04X} is not allowed in a key",
                        c as u32
                    ),
                ));
            }
            let inner = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            check_text(v, &inner)
        }),
        _ => Ok(()),
    }
}

/// A request of a message, with its place in the message's `MESS:` list.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// Its place in the message.
    pub index: usize,
    /// The request.
    pub request: Request,
}

/// Checks the requests of one message before any is written: their required capabilities,
/// that none has expired already, and their client ids (not `last`, not shaped like a ref, and
/// different within the message).
pub fn check_new_requests(incoming: &[Incoming], now: Timestamp) -> Result<(), ProtocolError> {
    let mut siblings: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for req in incoming {
        let path = format!("MESS[{}].request", req.index);
        req.request.check_requires(&path)?;
        crate::hands::Hands::read(&req.request, now, &path)?;
    }
    for req in incoming {
        if let Some(at) = req.request.expires_at(now)
            && at <= now
        {
            let field = if req.request.needed_by.is_some() {
                "needed_by"
            } else {
                "constraints.timing.expires"
            };
            return Err(ProtocolError::invalid(
                format!("MESS[{}].request.{field}", req.index),
                format!("{} has already passed", crate::time::format_timestamp(&at)),
            ));
        }
        if let Some(id) = &req.request.id {
            let why = if id == "last" {
                Some("`last` is reserved: it names your most recent request")
            } else if ThreadRef::looks_assigned(id) {
                Some(
                    "it looks like an exchange ref (YYYY-MM-DD-NNN), which `re:` would take for one",
                )
            } else {
                None
            };
            if let Some(why) = why {
                return Err(ProtocolError::invalid(
                    format!("MESS[{}].request.id", req.index),
                    format!("{id:?} cannot be a client id: {why}"),
                ));
            }
        }
        if let Some(id) = &req.request.id
            && let Some(first) = siblings.insert(id, req.index)
        {
            return Err(ProtocolError::invalid(
                format!("MESS[{}].request.id", req.index),
                format!("{id:?} is also the id of MESS[{first}]; ids in one message must differ"),
            ));
        }
    }
    Ok(())
}

/// What a principal is to the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends requests, replies and cancels.
    Agent,
    /// Claims and carries out requests.
    Executor,
}

impl Role {
    /// The role's name, as stored and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Executor => "executor",
        }
    }

    /// The role named `s` (`agent`, `executor`).
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "agent" => Some(Role::Agent),
            "executor" => Some(Role::Executor),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a key's role lets it send: agents ask (request, reply, cancel), executors act
/// (status, response, suggestion) and register only themselves; both may query. Routing rules
/// change only locally (config.yaml, or `mess send` on the exchange's host), since they decide
/// where everyone's requests go.
pub fn check_role(role: Role, id: &str, message: &Message) -> Result<(), ProtocolError> {
    for (index, payload) in message.payloads.iter().enumerate() {
        let kind = payload.kind();
        let allowed = match (role, payload) {
            (_, Payload::Version(_) | Payload::Query(_) | Payload::Unknown { .. }) => true,
            (
                Role::Agent,
                Payload::Request(_) | Payload::Reply(_) | Payload::Cancel(_) | Payload::Review(_),
            ) => true,
            (
                Role::Executor,
                Payload::Status(_) | Payload::Response(_) | Payload::Suggestion(_),
            ) => true,
            (Role::Executor, Payload::Config(c)) => {
                if c.routing.is_some() {
                    return Err(ProtocolError::forbidden(format!(
                        "MESS[{index}].config.routing: routing rules change only in the exchange's config.yaml (or with `mess send` on its host), not with a key"
                    )));
                }
                match &c.executor {
                    Some(e) if e.id != id => {
                        return Err(ProtocolError::forbidden(format!(
                            "MESS[{index}].config.executor.id: the key of {id} registers only {id}, not {:?}",
                            e.id
                        )));
                    }
                    _ => true,
                }
            }
            _ => false,
        };
        if !allowed {
            let hint = match role {
                Role::Agent => "agent keys send request, reply, cancel, review and query",
                Role::Executor => {
                    "executor keys send status, response, suggestion, query and their own config"
                }
            };
            return Err(ProtocolError::forbidden(format!(
                "MESS[{index}].{kind}: {id} holds an {role} key ({hint})"
            )));
        }
    }
    Ok(())
}

/// What a group check needs besides the envelope: who sends, the executors, and the current
/// status of each dependency.
pub struct Context<'a> {
    /// Who sends the payloads.
    pub sender: &'a str,
    /// The executors in effect.
    pub roster: &'a dyn Roster,
    /// Each dependency of the thread and its status (`None` when its file is gone).
    pub dependencies: &'a [(String, Option<Status>)],
    /// The exchange's time for this message.
    pub now: Timestamp,
}

/// Checks every payload of a group against the thread, in order, as if the earlier ones were
/// already applied; returns the envelope they lead to.
pub fn check_group(
    env: &Envelope,
    payloads: &[Payload],
    cx: &Context<'_>,
) -> Result<Envelope, ProtocolError> {
    if cx.sender != env.requestor {
        if env.hands.approval.is_some() {
            return check_decisions(env, payloads, cx, Deciding::Approval);
        }
        if env.hands.confirm_by.is_some()
            && env.status != Status::Pending
            && env.executor.as_deref() != Some(cx.sender)
        {
            return check_decisions(env, payloads, cx, Deciding::Confirmation);
        }
        if env.hands.multi() {
            return check_slot_group(env, payloads, cx);
        }
    }
    let mut running = env.clone();
    let thread = env.thread_ref.as_str();
    let has_status = payloads.iter().any(|p| matches!(p, Payload::Status(_)));
    for payload in payloads {
        match payload {
            Payload::Status(s) => check_status(&running, s.code, cx)?,
            Payload::Response(_) => {
                // A response on a pending thread claims it first, as the v1.1 flows show:
                // checked as a claim, then as the claimant's response.
                if running.status == Status::Pending {
                    check_status(&running, Status::Claimed, cx)?;
                    running.claim_implicitly(cx.sender, cx.now, "responding");
                }
                if running.executor.as_deref() != Some(cx.sender)
                    || running.status == Status::Pending
                {
                    return Err(if running.status == Status::Pending {
                        ProtocolError::conflict(format!(
                            "cannot respond to {thread}: claim it first"
                        ))
                    } else {
                        ProtocolError::forbidden(format!(
                            "cannot respond to {thread}: only the executor who claimed it may respond"
                        ))
                    });
                }
                if running.status.is_terminal() && running.status != Status::Completed {
                    return Err(ProtocolError::conflict(format!(
                        "cannot respond to {thread}: it is {}",
                        running.status
                    )));
                }
                machine::check_confirmation(
                    thread,
                    running.confirm_before,
                    running.confirmation,
                    Step::Response,
                )?;
                if !running.status.is_terminal() {
                    check_dependencies_done(&running, cx, "respond to")?;
                }
            }
            Payload::Reply(r) => {
                require_requestor(&running, cx.sender, "reply to")?;
                // The people confirm_by names decide, as many as it needs: the requestor
                // cannot confirm in their place, and so cannot lower the number.
                if let (Some(c), Some(_)) = (&running.hands.confirm_by, r.confirm) {
                    return Err(ProtocolError::conflict(format!(
                        "cannot confirm {thread} yourself: {} of {} confirm it (mess approve / mess deny); cancel it to stop the work",
                        c.need,
                        c.from.join(", ")
                    )));
                }
                machine::check_reply(
                    thread,
                    running.status,
                    running.confirmation,
                    r.answers.as_ref().is_some_and(|a| !a.is_empty()),
                    r.confirm.is_some(),
                )?;
            }
            Payload::Review(r) => {
                require_requestor(&running, cx.sender, "review")?;
                machine::check_review(
                    thread,
                    running.status,
                    running.executor.is_some(),
                    r.request_redo == Some(true),
                )?;
            }
            Payload::Cancel(_) => {
                require_requestor(&running, cx.sender, "cancel")?;
                machine::check_transition(
                    thread,
                    running.status,
                    Status::Cancelled,
                    Actor::Requestor,
                )?;
            }
            Payload::Suggestion(_) => {
                // Only an executor that may act on the thread now: its claimant, or while it
                // is pending one able to take it. The refusal names no status and no other
                // executor, so it tells an outsider nothing of who holds the thread.
                if !access::may_act_now(cx.sender, &running, cx.roster) {
                    return Err(ProtocolError::forbidden(format!(
                        "cannot suggest on {thread}: suggestions come from its claimant, or while it waits for someone from an executor able to take it"
                    )));
                }
            }
            _ => continue,
        }
        running.apply_payload(payload, cx.sender, cx.now);
    }
    // A response with no status completes the thread: the same step as `completed` would be.
    if !has_status
        && payloads.iter().any(|p| matches!(p, Payload::Response(_)))
        && !running.status.is_terminal()
    {
        machine::check_transition(thread, running.status, Status::Completed, Actor::Claimant)?;
        running.complete_by_response(cx.sender, cx.now);
    }
    Ok(running)
}

/// Checks one status an executor reports on the thread as it stands.
fn check_status(running: &Envelope, code: Status, cx: &Context<'_>) -> Result<(), ProtocolError> {
    let thread = running.thread_ref.as_str();
    let actor = actor_for_report(running, cx)?;
    if actor == Actor::Claimant {
        // A repeated `completed` (a response completed the thread, then the status came)
        // changes nothing and is not an error.
        if running.status == Status::Completed && code == Status::Completed {
            return Ok(());
        }
        machine::check_transition(thread, running.status, code, actor)?;
        machine::check_confirmation(
            thread,
            running.confirm_before,
            running.confirmation,
            Step::Status(code),
        )?;
        if matches!(
            code,
            Status::InProgress | Status::Completed | Status::Partial
        ) {
            check_dependencies_done(running, cx, &format!("set {code} on"))?;
        }
        return Ok(());
    }
    // An executor that is not the claimant hears only that it lost the thread: not its
    // status, not who holds it (another's work is not its business).
    if running.status != Status::Pending {
        return Err(ProtocolError::conflict(format!(
            "cannot set {thread} to {code}: it is no longer open to you (already claimed by another executor, or ended)"
        )));
    }
    if code == Status::Claimed || !code.implies_claim() {
        machine::check_transition(thread, running.status, code, actor)?;
        return check_may_claim(running, cx);
    }
    // Work reported on a pending thread claims it first, then is checked as the claimant's.
    check_may_claim(running, cx)?;
    machine::check_transition(thread, Status::Claimed, code, Actor::Claimant)?;
    machine::check_confirmation(
        thread,
        running.confirm_before,
        running.confirmation,
        Step::Status(code),
    )?;
    if matches!(
        code,
        Status::InProgress | Status::Completed | Status::Partial
    ) {
        check_dependencies_done(running, cx, &format!("set {code} on"))?;
    }
    Ok(())
}

fn require_requestor(env: &Envelope, sender: &str, what: &str) -> Result<(), ProtocolError> {
    if env.requestor == sender {
        return Ok(());
    }
    Err(ProtocolError::forbidden(format!(
        "cannot {what} {}: only its requestor may",
        env.thread_ref
    )))
}

/// The role of an executor reporting status on this thread.
fn actor_for_report(env: &Envelope, cx: &Context<'_>) -> Result<Actor, ProtocolError> {
    if env.status != Status::Pending && env.executor.as_deref() == Some(cx.sender) {
        return Ok(Actor::Claimant);
    }
    if cx.roster.is_executor(cx.sender) {
        return Ok(Actor::Executor);
    }
    let why = if cx.sender == env.requestor {
        format!(
            "{} is the requestor of {}; requestors reply or cancel, executors report status",
            cx.sender, env.thread_ref
        )
    } else {
        format!(
            "{} is not a registered executor (add it under `executors:` in config.yaml or send a config message)",
            cx.sender
        )
    };
    Err(ProtocolError::forbidden(why))
}

/// Checks that an executor may claim a pending thread: its `not_before` has come, and it
/// holds every required capability.
/// A thread whose dependencies are still open may be claimed (the claimant reports `waiting`
/// until they complete); work on it waits for them (`check_dependencies_done`).
fn check_may_claim(env: &Envelope, cx: &Context<'_>) -> Result<(), ProtocolError> {
    if env.too_early(cx.now) {
        return Err(ProtocolError::conflict(format!(
            "cannot claim {}: it may not start before {} (its not_before)",
            env.thread_ref,
            env.not_before
                .map(|t| crate::time::format_timestamp(&t))
                .unwrap_or_default()
        )));
    }
    if let Some(only) = env
        .extra
        .get(access::OFFERED_TO)
        .and_then(crate::value::Value::scalar_text)
        && only != cx.sender
    {
        return Err(ProtocolError::forbidden(format!(
            "cannot claim {}: its requestor delegated it to one executor alone",
            env.thread_ref
        )));
    }
    // A rung of the escalation ladder the offer has reached opens the work to those it names.
    let on_the_ladder = !env.hands.escalate.is_empty() && access::named(cx.sender, env, cx.roster);
    if cx.roster.is_executor(cx.sender) && !on_the_ladder {
        let missing = cx.roster.missing(cx.sender, &env.requires);
        if !missing.is_empty() {
            return Err(ProtocolError::forbidden(format!(
                "cannot claim {}: {} lacks the required capabilit{} {}",
                env.thread_ref,
                cx.sender,
                if missing.len() == 1 { "y" } else { "ies" },
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

/// Refuses work on a thread (`in_progress`, a result, a response) while a request it depends
/// on is open. The dependencies are the requestor's threads: an executor hears how many are
/// open, not which or how they stand.
fn check_dependencies_done(
    env: &Envelope,
    cx: &Context<'_>,
    what: &str,
) -> Result<(), ProtocolError> {
    let waiting = cx
        .dependencies
        .iter()
        .filter(|(_, s)| *s != Some(Status::Completed))
        .count();
    if waiting > 0 {
        return Err(ProtocolError::conflict(format!(
            "cannot {what} {}: it waits for {waiting} request{} it depends on to complete; report waiting until then",
            env.thread_ref,
            if waiting == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// The status payload echoed to a sender after a change: the thread's current status (in
/// `env`) with the fields of the message that set it, looked for first in `recent` (the
/// payloads just written) and then in the thread's earlier messages, newest first.
pub fn status_echo<E>(
    env: &Envelope,
    recent: &[Payload],
    earlier: impl Iterator<Item = Result<MessageDoc, E>>,
) -> Result<Payload, E> {
    let matching = |p: &Payload| match p {
        Payload::Status(s) if s.code == env.status => Some(s.clone()),
        _ => None,
    };
    let mut found = recent.iter().rev().find_map(matching);
    if found.is_none() {
        for doc in earlier {
            if let Some(s) = doc?.message.payloads.iter().rev().find_map(matching) {
                found = Some(s);
                break;
            }
        }
    }
    let details = match found {
        Some(s) => Some(s.details),
        None => match env.status {
            Status::Pending => Some(StatusDetails::Received {
                queue_position: None,
                exchange_id: None,
            }),
            Status::Claimed => Some(StatusDetails::Claimed {
                eta: None,
                estimate: None,
            }),
            Status::Completed => Some(StatusDetails::Completed),
            Status::Cancelled => Some(StatusDetails::Cancelled { reason: None }),
            _ => None,
        },
    };
    Ok(match details {
        Some(details) => {
            let mut msg = StatusMsg::new(env.thread_ref.as_str(), details);
            msg.executor.clone_from(&env.executor);
            Payload::Status(msg)
        }
        // A status set without a status message (a hand-edited file): report the code alone.
        None => {
            let mut m = Map::new();
            m.insert("re", Value::str(env.thread_ref.as_str()));
            m.insert("code", Value::str(env.status.code()));
            Payload::Unknown {
                kind: "status".to_owned(),
                body: Value::Map(m),
            }
        }
    })
}

/// A document of one payload from `cx.sender`, to run a check's envelope forward.
fn single(payload: &Payload, cx: &Context<'_>) -> MessageDoc {
    MessageDoc {
        from: cx.sender.to_owned(),
        received: cx.now,
        channel: None,
        message: Message::new(vec![payload.clone()]),
        extra: Map::new(),
    }
}

/// What deciders decide on a thread: an approval (the request itself), or the claimant's
/// `needs_confirmation` on a `confirm_by` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deciding {
    Approval,
    Confirmation,
}

/// Checks a decider's payloads: one decision each (a response whose content holds
/// `confirmation:`), from someone the approval or `confirm_by` names, while the decision is
/// open (the thread, or the claimant's question). Everything else a decider might send is
/// refused by name.
fn check_decisions(
    env: &Envelope,
    payloads: &[Payload],
    cx: &Context<'_>,
    deciding: Deciding,
) -> Result<Envelope, ProtocolError> {
    let thread = env.thread_ref.as_str();
    let (role, yes) = match deciding {
        Deciding::Approval => ("approver", "approved"),
        Deciding::Confirmation => ("confirmer", "confirmed"),
    };
    let how = "a response whose content is confirmation: {confirmed: true|false, details: why}";
    let mut running = env.clone();
    for payload in payloads {
        let r = match payload {
            Payload::Response(r) => r,
            Payload::Status(_) | Payload::Suggestion(_) => {
                let whose = match deciding {
                    Deciding::Approval => format!("{thread} asks for approval"),
                    Deciding::Confirmation => format!(
                        "{thread} is {}'s",
                        running.executor.as_deref().unwrap_or("someone else")
                    ),
                };
                return Err(ProtocolError::conflict(format!(
                    "{whose}: decide with {how} (mess approve, mess deny), not a {}",
                    payload.kind()
                )));
            }
            _ => continue,
        };
        if let Some(d) = running.hands.decision_of(cx.sender) {
            return Err(ProtocolError::conflict(format!(
                "{} already decided on {thread}: {} at {}{}; each {role} decides once",
                cx.sender,
                if d.approved { yes } else { "denied" },
                crate::time::format_timestamp(&d.at),
                d.channel
                    .as_deref()
                    .map(|c| format!(" (via {c})"))
                    .unwrap_or_default()
            )));
        }
        let (may, open, why) = match deciding {
            Deciding::Approval => (
                access::may_decide(cx.sender, &running, cx.roster),
                !running.status.is_terminal(),
                format!("it is already {}", running.status),
            ),
            Deciding::Confirmation => (
                access::may_confirm(cx.sender, &running, cx.roster),
                running.confirmation == Some(ConfirmState::Requested),
                "its confirmation is already decided".to_owned(),
            ),
        };
        if !may {
            return Err(ProtocolError::forbidden(format!(
                "cannot decide on {thread}: {} is not among its {role}s{}",
                cx.sender,
                if deciding == Deciding::Confirmation {
                    ", or no confirmation is asked now"
                } else {
                    ""
                }
            )));
        }
        if !open {
            return Err(ProtocolError::conflict(format!(
                "cannot decide on {thread}: {why}"
            )));
        }
        if crate::hands::decision_in(r).is_none() {
            return Err(ProtocolError::invalid(
                "response.content",
                format!("{thread} waits for a decision: the response's content must hold {how}"),
            ));
        }
        running.apply(&single(payload, cx));
    }
    Ok(running)
}

/// Checks a slot holder's (or would-be slot holder's) payloads on a thread that asks for
/// several answers: a claim takes a free slot (one per executor, never a second), and each
/// later status or response moves that executor's own slot along the usual steps.
fn check_slot_group(
    env: &Envelope,
    payloads: &[Payload],
    cx: &Context<'_>,
) -> Result<Envelope, ProtocolError> {
    let thread = env.thread_ref.as_str();
    let mut running = env.clone();
    for payload in payloads {
        let code = match payload {
            Payload::Status(s) => s.code,
            Payload::Response(_) => Status::Completed,
            Payload::Suggestion(_) => {
                return Err(ProtocolError::conflict(format!(
                    "{thread} asks for {} answers; suggestions are taken on requests for one",
                    running.hands.wanted()
                )));
            }
            _ => continue,
        };
        let response = matches!(payload, Payload::Response(_));
        match running.hands.slot_of(cx.sender) {
            None => {
                if running.status.is_terminal() {
                    return Err(ProtocolError::conflict(format!(
                        "cannot set {thread} to {code}: it is no longer open to you (already answered by enough executors, or ended)"
                    )));
                }
                if !response && code != Status::Claimed && !code.implies_claim() {
                    return Err(ProtocolError::conflict(format!(
                        "cannot set {thread} to {code}: claim a slot first"
                    )));
                }
                if running.hands.open() == 0 {
                    return Err(ProtocolError::conflict(format!(
                        "cannot claim {thread}: all {} of its slots are taken",
                        running.hands.wanted()
                    )));
                }
                if !cx.roster.is_executor(cx.sender) {
                    return Err(ProtocolError::forbidden(format!(
                        "{} is not a registered executor (add it under `executors:` in config.yaml or send a config message)",
                        cx.sender
                    )));
                }
                check_may_claim(&running, cx)?;
            }
            Some((n, slot)) => {
                let completed_here = slot.status == Status::Completed
                    && env
                        .hands
                        .slot_of(cx.sender)
                        .is_none_or(|(_, s)| s.status != Status::Completed);
                if completed_here && code == Status::Completed {
                    // A response and its `completed` status in one message: one step.
                } else if slot.status.is_terminal() {
                    return Err(ProtocolError::conflict(format!(
                        "your slot ({n}) of {thread} is already {}; each executor answers once",
                        slot.status
                    )));
                } else if code == Status::Claimed {
                    return Err(ProtocolError::conflict(format!(
                        "you already hold slot {n} of {thread}; each executor takes one"
                    )));
                } else if !response {
                    machine::check_transition(thread, slot.status, code, Actor::Claimant)?;
                }
            }
        }
        if matches!(
            code,
            Status::InProgress | Status::Completed | Status::Partial
        ) {
            check_dependencies_done(&running, cx, &format!("set {code} on"))?;
        }
        running.apply(&single(payload, cx));
    }
    Ok(running)
}
