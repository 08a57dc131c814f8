//! Submitting one MESS message at the edge, in the native exchange's order: every payload is
//! checked first (bounds, the key's role, each request, each payload against its thread), then
//! configs, requests and the payloads directed at threads are carried out. The rules, the
//! reference resolution, the envelope and the file text all come from `mess-protocol`, as in
//! the native exchange; what this file holds is the order of the steps and the edge's storage.
//! What the Worker build cannot do yet (dependencies, deadlines, shells, callbacks, notices,
//! accepting suggestions) is refused by name before anything is written.

use std::collections::HashMap;

use mess_protocol::access;
use mess_protocol::answer;
use mess_protocol::config::{ConfigMsg, ExecutorSpec};
use mess_protocol::emit;
use mess_protocol::envelope::{EXCHANGE, Envelope, MessageDoc};
use mess_protocol::error::ProtocolError;
use mess_protocol::ids::ThreadRef;
use mess_protocol::message::{Message, Payload, Query, QueryKind};
use mess_protocol::resolve::{self, Group, IndexKey, Threads};
use mess_protocol::route;
use mess_protocol::rules::{self, Context, Incoming, Role, Sorted};
use mess_protocol::status::{State, Status};
use mess_protocol::thread_text;
use mess_protocol::time::Timestamp;
use mess_protocol::value::{Map, Value};
use mess_protocol::yaml::{self, Limits};

use crate::failure::Failure;
use crate::home::{EdgeRoster, Home, envelope_of};
use crate::notice;

/// Most bytes of one message (the native exchange's default `max_message_bytes`).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Most bytes of one thread file (the native default `max_thread_bytes`).
pub const MAX_THREAD_BYTES: usize = 64 * 1024 * 1024;
/// The channel messages sent with a key arrive by.
pub const HTTP: &str = "http";

/// A key's principal.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The agent or executor id.
    pub id: String,
    /// The key's role.
    pub role: Role,
    /// The channel its messages arrive by (`http`; a link's channel for a presigned link).
    pub channel: String,
}

/// Submits `message` from `caller` at `now`; answers the exchange's reply.
pub fn submit(
    home: &mut Home<'_>,
    message: &Message,
    caller: &Caller,
    now: Timestamp,
) -> Result<Message, Failure> {
    rules::check_bounds(message, &caller.id, MAX_MESSAGE_BYTES)?;
    let version = message.version().map(str::to_owned);
    let Sorted {
        requests,
        directed,
        configs,
        queries,
    } = rules::sort(message)?;
    rules::check_role(caller.role, &caller.id, message)?;
    let sender = resolve::Sender {
        id: &caller.id,
        role: Some(caller.role),
    };

    let mut roster = home.roster();
    let groups = resolve::group(&*home, &directed, &sender, &roster)?;
    for g in &groups {
        let Some(env) = home.envelope(&g.thread)? else {
            return Err(Failure::not_found(resolve::no_thread(g.thread.as_str())));
        };
        check_group_here(&env, g, caller, &roster, now)?;
    }
    check_requests(&requests, now)?;
    for (index, config) in &configs {
        check_config(home, config, *index, caller)?;
    }
    let mut answer = Vec::new();
    for (_, config) in &configs {
        answer.push(apply_config(home, config, caller));
    }
    if !configs.is_empty() {
        roster = home.roster();
    }
    if !requests.is_empty() {
        answer.push(create(
            home,
            &requests,
            version.as_deref(),
            &message.extra,
            caller,
            &roster,
            now,
        )?);
    }
    for g in &groups {
        answer.push(apply_group(
            home,
            g,
            version.as_deref(),
            caller,
            &roster,
            now,
        )?);
    }
    // Status queries read the sender's threads once for the whole message.
    let mut mine: Option<Vec<Envelope>> = None;
    for q in &queries {
        answer.push(match q.kind {
            QueryKind::Status => status_query(home, q, &sender, &roster, &mut mine, now)?,
            // The edge has no catalog file: the capabilities are those its executors offer.
            QueryKind::Capabilities => one_field(
                "capabilities",
                answer::capabilities(&[], roster.executors.values(), &q.filter.tags),
            ),
            QueryKind::Executors => one_field(
                "executors",
                answer::executors(roster.executors.values(), q.filter.executor.as_deref()),
            ),
        });
    }
    Ok(Message::from_exchange(answer, version.as_deref()))
}

/// The checks of one group against its thread, plus what the edge does not do: accepting a
/// suggestion (which carries it out) is refused.
fn check_group_here(
    env: &Envelope,
    g: &Group,
    caller: &Caller,
    roster: &EdgeRoster,
    now: Timestamp,
) -> Result<Envelope, Failure> {
    if caller.id == env.requestor
        && g.payloads
            .iter()
            .any(|p| matches!(p, Payload::Reply(r) if r.accept == Some(true)))
    {
        return Err(Failure::not_at_edge(
            "reply.accept",
            "accepting a suggestion",
        ));
    }
    let cx = Context {
        sender: &caller.id,
        roster,
        dependencies: &[],
        now,
    };
    Ok(rules::check_group(env, &g.payloads, &cx)?)
}

/// The native checks of new requests, and a refusal by name of what the edge cannot carry out.
fn check_requests(incoming: &[Incoming], now: Timestamp) -> Result<(), Failure> {
    rules::check_new_requests(incoming, now)?;
    for req in incoming {
        let path = format!("MESS[{}].request", req.index);
        let r = &req.request;
        // Several answers, approvals and ladders need the exchange's verdicts and a climb
        // over time, which the Worker does not write yet.
        for (key, what) in [
            ("assignments", "several answers to one request"),
            ("agree", "an agreement rule over several answers"),
            ("approval", "an approval by named people"),
            ("escalate", "an escalation ladder"),
            ("confirm_by", "a confirmation by named people"),
        ] {
            if r.extra.contains_key(key) {
                return Err(Failure::not_at_edge(&format!("{path}.{key}"), what));
            }
        }
        if !r.depends_on().is_empty() {
            return Err(Failure::not_at_edge(
                &format!("{path}.constraints.depends_on"),
                "a dependency between requests",
            ));
        }
        // Deadlines are kept (they expire through the Durable Object's alarm); a start time
        // would need a dispatch later, which the edge does not make yet.
        if r.constraints
            .as_ref()
            .and_then(|c| c.timing.as_ref())
            .is_some_and(|t| t.not_before.is_some())
        {
            return Err(Failure::not_at_edge(
                &format!("{path}.constraints.timing.not_before"),
                "a start time (not_before)",
            ));
        }
        if r.compensation.is_some() {
            return Err(Failure::not_at_edge(
                &format!("{path}.compensation"),
                "compensation (the shells ledger)",
            ));
        }
        for field in ["callback", "escalate", "offered_to"] {
            if r.extra.contains_key(field) {
                return Err(Failure::not_at_edge(&format!("{path}.{field}"), field));
            }
        }
        if let Some(i) = r.requires.iter().position(|c| c.meta.is_some()) {
            return Err(Failure::not_at_edge(
                &format!("{path}.requires[{i}]"),
                "capability metadata",
            ));
        }
    }
    Ok(())
}

/// The native checks of an executor registration, and a refusal by name of the fields the
/// edge's routing cannot honour (schedules, places, environments, capability metadata) or
/// whose channels it cannot reach.
fn check_config(
    home: &Home<'_>,
    config: &ConfigMsg,
    index: usize,
    caller: &Caller,
) -> Result<(), Failure> {
    let Some(exec) = &config.executor else {
        return Ok(());
    };
    let base = format!("MESS[{index}].config.executor");
    exec.check(&base)?;
    let path = format!("{base}.id");
    if exec.id == "operator" || exec.id.starts_with("escrow:") {
        return Err(ProtocolError::invalid(
            path,
            format!("{:?} names an account of the shells ledger", exec.id),
        )
        .into());
    }
    if ThreadRef::parse(&exec.id).is_err() {
        return Err(ProtocolError::invalid(
            path,
            format!(
                "{:?} is not a usable executor id (letters, digits, '.', '_', ':', '-')",
                exec.id
            ),
        )
        .into());
    }
    if exec.availability.as_deref() == Some("schedule") || exec.schedule.is_some() {
        return Err(Failure::not_at_edge(
            &format!("{base}.schedule"),
            "an availability schedule",
        ));
    }
    if !exec.access.is_empty() || exec.location.is_some() {
        return Err(Failure::not_at_edge(&format!("{base}.location"), "places"));
    }
    if !exec.environment.is_empty() {
        return Err(Failure::not_at_edge(
            &format!("{base}.environment"),
            "environments",
        ));
    }
    if let Some(i) = exec.capabilities.iter().position(|c| c.meta.is_some()) {
        return Err(Failure::not_at_edge(
            &format!("{base}.capabilities[{i}]"),
            "capability metadata",
        ));
    }
    for field in ["exchange", "mcp"] {
        if exec.extra.contains_key(field) {
            return Err(Failure::not_at_edge(&format!("{base}.{field}"), field));
        }
    }
    check_notify(home, exec, &base)?;
    let by = home.registration(&exec.id).and_then(|v| {
        v.as_map()
            .and_then(|m| m.get("registered_by"))
            .and_then(Value::scalar_text)
    });
    if let Some(by) = by
        && by != caller.id
        && exec.id != caller.id
    {
        return Err(ProtocolError::forbidden(format!(
            "cannot change executor {}: it was registered by {by}; only {by} or {} may change it",
            exec.id, exec.id
        ))
        .into());
    }
    Ok(())
}

/// An executor's `notify:` at the edge: the channels the Worker sends (webhook, Slack,
/// Telegram, SMS, ntfy; the others are refused by name), each address in its channel's form, a
/// webhook's where a key may lead one and with a key to sign it, and the Worker holding what
/// the channel needs.
fn check_notify(home: &Home<'_>, exec: &ExecutorSpec, base: &str) -> Result<(), Failure> {
    let Some(notify) = exec.extra.get("notify") else {
        return Ok(());
    };
    let path = format!("{base}.notify");
    let Some(channels) = notify.as_map() else {
        return Err(ProtocolError::invalid(path, "expected a map of channels").into());
    };
    for (name, _) in channels.iter() {
        let field = format!("{path}.{name}");
        if !notice::Dispatch::CHANNELS.contains(&name.as_str()) {
            return Err(Failure::not_at_edge(&field, &format!("the {name} channel")));
        }
        if name == "webhook" {
            check_webhook(home, exec, &field)?;
            continue;
        }
        let to = notice::address_of(exec, name).ok_or_else(|| {
            Failure::from(ProtocolError::invalid(
                &field,
                "expected a non-empty string",
            ))
        })?;
        notice::check_address(name, &to)
            .map_err(|why| Failure::from(ProtocolError::invalid(&field, why)))?;
        if let Some(setting) = home.dispatch.missing(name) {
            return Err(ProtocolError::invalid(
                field,
                format!("this Worker cannot send {name} notices: it has no {setting}"),
            )
            .into());
        }
    }
    Ok(())
}

/// A webhook a key registers: an address it may lead to, and a key to sign it.
fn check_webhook(home: &Home<'_>, exec: &ExecutorSpec, field: &str) -> Result<(), Failure> {
    let (url, own) = notice::webhook_of(exec).ok_or_else(|| {
        Failure::from(ProtocolError::invalid(
            field,
            "expected a URL, or {url, secret}",
        ))
    })?;
    notice::check_url(&url, &home.dispatch.webhook_allow)
        .map_err(|why| Failure::from(ProtocolError::invalid(field, why)))?;
    if own.is_none() && home.dispatch.webhook_secret().is_none() {
        return Err(ProtocolError::invalid(
            field,
            "no signing key: give secret: beside the url (this Worker has no MESS_WEBHOOK_SECRET)",
        )
        .into());
    }
    Ok(())
}

/// Stores an executor registration, recording its first registrant as its owner.
fn apply_config(home: &mut Home<'_>, config: &ConfigMsg, caller: &Caller) -> Payload {
    let mut done = Map::new();
    if let Some(exec) = &config.executor {
        let owner = home
            .registration(&exec.id)
            .and_then(|v| {
                v.as_map()
                    .and_then(|m| m.get("registered_by"))
                    .and_then(Value::scalar_text)
            })
            .unwrap_or_else(|| caller.id.clone());
        let mut value = exec.to_value();
        if let Value::Map(m) = &mut value {
            m.insert("registered_by", Value::str(owner));
            m.insert("registered_with", Value::str("key"));
        }
        home.put_registration(&exec.id, &value);
        done.insert("registered", Value::str(&exec.id));
    }
    answer::structured_response(Value::Map(done))
}

/// A structured response holding `value` under `name`.
fn one_field(name: &str, value: Value) -> Payload {
    let mut data = Map::new();
    data.insert(name, value);
    answer::structured_response(Value::Map(data))
}

/// Answers a status query as the native exchange does: the sender's threads it asks for.
fn status_query(
    home: &Home<'_>,
    q: &Query,
    sender: &resolve::Sender<'_>,
    roster: &EdgeRoster,
    mine: &mut Option<Vec<Envelope>>,
    now: Timestamp,
) -> Result<Payload, Failure> {
    let f = &q.filter;
    let all = f.re.as_ref().is_some_and(|re| re.items().contains(&"all"));
    let mut only = Vec::new();
    if let Some(re) = f.re.as_ref().filter(|_| !all) {
        for item in re.items() {
            // A thread the sender is no party to answers like one that does not exist.
            only.push(resolve::resolve_for(
                home,
                item,
                sender,
                roster,
                |who, env, _| access::party(who, env),
            )?);
        }
    }
    let listed = mine.get_or_insert_with(|| {
        home.envelopes(&State::ALL)
            .into_iter()
            .filter(|e| access::party(sender.id, e))
            .collect()
    });
    let waiting = if listed.iter().any(|e| e.status == Status::Pending) {
        home.open_envelopes(&[State::Received])
    } else {
        Vec::new()
    };
    let mut data = Map::new();
    data.insert(
        "threads",
        answer::status_threads(f, &only, listed, &waiting, now),
    );
    Ok(answer::structured_response(Value::Map(data)))
}

/// Creates the threads of `incoming` (a re-sent client id finds its open thread instead) and
/// answers the ack.
fn create(
    home: &mut Home<'_>,
    incoming: &[Incoming],
    version: Option<&str>,
    extra: &Map,
    caller: &Caller,
    roster: &EdgeRoster,
    now: Timestamp,
) -> Result<Payload, Failure> {
    let mut assigned: HashMap<usize, ThreadRef> = HashMap::new();
    for req in incoming {
        if let Some(id) = &req.request.id
            && let Some(r) = home.lookup(&caller.id, IndexKey::ClientId(id))?
            && let Some(env) = home.envelope(&r)?
            && !env.status.is_terminal()
        {
            assigned.insert(req.index, r);
        }
    }
    let fresh: Vec<&Incoming> = incoming
        .iter()
        .filter(|r| !assigned.contains_key(&r.index))
        .collect();
    let refs = if fresh.is_empty() {
        Vec::new()
    } else {
        home.allocate_refs(now.date_naive(), fresh.len())
    };
    for (req, r) in fresh.iter().zip(refs) {
        assigned.insert(req.index, r);
    }
    for req in &fresh {
        let thread = assigned[&req.index].clone();
        create_one(home, req, &thread, version, extra, caller, roster, now);
    }
    let mut position = None;
    if let [req] = incoming
        && let Some(env) = home.envelope(&assigned[&req.index])?
    {
        position = queue_position(home, &env, now);
    }
    Ok(Payload::Ack(answer::ack_for(
        incoming,
        &assigned,
        now,
        |_| position,
    )))
}

/// Writes the thread of one request: routed to the executors able to take it, with the
/// request and the exchange's ack, and the sender's names for it.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the values are the use case's state"
)]
fn create_one(
    home: &mut Home<'_>,
    req: &Incoming,
    thread: &ThreadRef,
    version: Option<&str>,
    extra: &Map,
    caller: &Caller,
    roster: &EdgeRoster,
    now: Timestamp,
) {
    let doc = answer::message_doc(
        &caller.id,
        &caller.channel,
        version,
        [Payload::Request(req.request.clone())],
        extra.clone(),
        now,
    );
    let mut envelope = Envelope::create(thread.clone(), &req.request, &doc, Vec::new());
    if envelope.depends_on.is_empty() && !envelope.too_early(now) {
        let load = home.active_claims();
        let candidates: Vec<route::Candidate<'_>> = roster
            .executors
            .iter()
            .map(|(id, spec)| route::Candidate {
                id,
                capabilities: spec.capability_ids(),
                on_demand: spec.availability.as_deref() == Some("on_demand"),
                load: load.get(id).copied().unwrap_or(0),
            })
            .collect();
        let routed = route::by_capability(&envelope.requires, &candidates);
        if !routed.is_empty() {
            envelope.record(
                "dispatched",
                now,
                EXCHANGE,
                Some(route::dispatched_note(&routed)),
            );
            // What `re: last` names for each executor offered it (the native exchange writes
            // this as it delivers the notice).
            for r in &routed {
                home.remember(&r.executor, &[(IndexKey::LastWork, thread)]);
                let channels = roster
                    .executors
                    .get(&r.executor)
                    .map(notice::channels_of)
                    .unwrap_or_default();
                if channels.iter().any(|c| c != "webhook") {
                    // The links in these notices name this exchange as their audience.
                    let fresh = home.entropy.clone();
                    home.exchange_id_or_new(&fresh);
                }
                for channel in channels {
                    let owed =
                        notice::Delivery::new_request(thread, &r.executor, &channel, &home.issuer);
                    home.notices.push(owed);
                }
            }
        }
    }
    let ack = answer::creation_ack_doc(&req.request, thread, now);
    let mut entries = vec![(IndexKey::Last, thread)];
    if let Some(id) = &req.request.id {
        entries.push((IndexKey::ClientId(id), thread));
    }
    home.remember(&caller.id, &entries);
    let text = thread_text::new_thread_text(&envelope, &[doc, ack]);
    home.write(&envelope, text);
}

/// Where a waiting thread stands among those offered by `now` (1 = next), in the native
/// queue order; `None` for a thread not waiting or still held.
pub fn queue_position(home: &Home<'_>, env: &Envelope, now: Timestamp) -> Option<i64> {
    if env.status != Status::Pending || env.too_early(now) {
        return None;
    }
    let ahead = home
        .open_envelopes(&[State::Received])
        .iter()
        .filter(|e| e.status == Status::Pending && !e.too_early(now))
        .filter(|e| e.queue_key() < env.queue_key())
        .count();
    Some(i64::try_from(ahead).unwrap_or(i64::MAX).saturating_add(1))
}

/// The message documents of a thread's text, newest first.
fn messages_rev(text: &str) -> Vec<Result<MessageDoc, Failure>> {
    let (_, docs) = thread_text::pieces(text);
    docs.iter()
        .enumerate()
        .rev()
        .filter_map(|(i, raw)| {
            let path = format!("document {}", i + 2);
            match yaml::parse_document(raw, &Limits::DEFAULT) {
                Err(e) => Some(Err(Failure::from(ProtocolError::invalid(path, e.message)))),
                Ok(v) if v.is_null() => None,
                Ok(v) => Some(MessageDoc::from_value(v, &path).map_err(Failure::from)),
            }
        })
        .collect()
}

/// Expires every thread whose deadline has passed at `now`, as the native exchange does
/// ([`mess_protocol::machine::expiry`]): each one's file gets the exchange's `expired` status
/// and moves to its folder. A thread no longer waiting (claimed, ended) is left as it is; a
/// later write puts its deadline back if one applies again.
pub fn expire_due(home: &mut Home<'_>, now: Timestamp) {
    for thread in home.take_due(now.timestamp()) {
        let Some((_, text)) = home.read(&thread) else {
            continue;
        };
        let Ok(before) = envelope_of(&text) else {
            continue;
        };
        let Some(doc) = mess_protocol::machine::expiry(&before, now) else {
            continue;
        };
        let mut envelope = before;
        envelope.apply(&doc);
        let new_text = thread_text::rewrite_text(&text, &envelope, &[doc]);
        home.write(&envelope, new_text);
    }
}

/// Writes one group of payloads to its thread and answers the status echo.
fn apply_group(
    home: &mut Home<'_>,
    g: &Group,
    version: Option<&str>,
    caller: &Caller,
    roster: &EdgeRoster,
    now: Timestamp,
) -> Result<Payload, Failure> {
    let Some((_, text)) = home.read(&g.thread) else {
        return Err(Failure::not_found(resolve::no_thread(g.thread.as_str())));
    };
    let before = envelope_of(&text)?;
    check_group_here(&before, g, caller, roster, now)?;
    let doc = answer::message_doc(
        &caller.id,
        &caller.channel,
        version,
        g.payloads.iter().cloned(),
        Map::new(),
        now,
    );
    let grown = text.len() + emit::to_yaml(&doc.to_value()).len();
    if grown > MAX_THREAD_BYTES {
        return Err(Failure::new(
            413,
            "too_large",
            format!(
                "{} would grow to {grown} bytes, past the {MAX_THREAD_BYTES} bytes a thread may hold; start a new request",
                g.thread
            ),
        ));
    }
    let mut envelope = before.clone();
    envelope.apply(&doc);
    let echo = rules::status_echo(&envelope, &g.payloads, messages_rev(&text).into_iter())?;
    let new_text = thread_text::rewrite_text(&text, &envelope, &[doc]);
    home.write(&envelope, new_text);

    if envelope.executor.as_deref() == Some(caller.id.as_str()) && caller.id != before.requestor {
        let mut entries = Vec::new();
        if before.status == Status::Pending {
            entries.push((IndexKey::LastWork, &g.thread));
            if let Some(id) = before.client_id.as_deref() {
                entries.push((IndexKey::WorkId(id), &g.thread));
            }
        }
        if home.lookup(&caller.id, IndexKey::Held)?.as_ref() != Some(&g.thread) {
            entries.push((IndexKey::Held, &g.thread));
        }
        home.remember(&caller.id, &entries);
    }
    for p in &g.payloads {
        if let Payload::Suggestion(s) = p
            && let Some(id) = &s.id
            && home
                .lookup(&before.requestor, IndexKey::Suggestion(id))?
                .is_none()
        {
            home.remember(&before.requestor, &[(IndexKey::Suggestion(id), &g.thread)]);
        }
    }
    Ok(echo)
}
