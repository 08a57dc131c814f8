//! Submitting one MESS message: config first, then requests, then the payloads directed at
//! existing threads (checked all together before any is written), then queries.

use crate::exchange::auth::Role;
use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::exchange::plan::{self, Context};
use crate::exchange::requests::{self, Incoming};
use crate::exchange::{Exchange, Sender, lifecycle, suggestions, view};
use crate::notify::ClaimantEvent;
use crate::protocol::emit;
use crate::protocol::envelope::MessageDoc;
use crate::protocol::error::ProtocolError;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::Status;
use crate::protocol::value::{Map, Value};
use crate::store::{Edit, IndexKey};

/// What a key's role lets it send: agents ask (request, reply, cancel), executors act
/// (status, response, suggestion) and register only themselves; both may query. Routing rules
/// change only locally (config.yaml, or `mess send` on the exchange's host), since they decide
/// where everyone's requests go.
fn check_role(role: Role, id: &str, message: &Message) -> Result<(), Error> {
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
                    ))
                    .into());
                }
                match &c.executor {
                    Some(e) if e.id != id => {
                        return Err(ProtocolError::forbidden(format!(
                            "MESS[{index}].config.executor.id: the key of {id} registers only {id}, not {:?}",
                            e.id
                        ))
                        .into());
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
            ))
            .into());
        }
    }
    Ok(())
}

/// Most payloads in one message.
pub(crate) const MAX_PAYLOADS: usize = 256;
/// Most threads one `cancel` or `suggestion` names.
pub(crate) const MAX_REFERENCES: usize = 256;

pub(crate) fn submit(ex: &Exchange, message: Message, sender: &Sender) -> Result<Message, Error> {
    if sender.id.trim().is_empty() || sender.id == crate::protocol::envelope::EXCHANGE {
        return Err(ProtocolError::forbidden(format!(
            "{:?} cannot send messages: pick an agent or executor id",
            sender.id
        ))
        .into());
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
        )
        .into());
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
            )
            .into());
        }
    }
    // Every adapter passes here, so the size limit holds for built messages (`mess complete
    // --file`) as well as for YAML text.
    let value = message.to_value();
    check_text(&value, "")?;
    let size = emit::to_yaml(&value).len();
    if size > ex.settings.max_message_bytes {
        return Err(ProtocolError::TooLarge {
            size,
            limit: ex.settings.max_message_bytes,
        }
        .into());
    }
    let now = ex.now();
    let version = message.version().map(str::to_owned);
    let mut requests = Vec::new();
    let mut directed = Vec::new();
    let mut configs = Vec::new();
    let mut queries = Vec::new();
    for (index, payload) in message.payloads.iter().enumerate() {
        match payload {
            Payload::Request(r) => requests.push(Incoming {
                index,
                request: r.clone(),
            }),
            Payload::Reply(_)
            | Payload::Review(_)
            | Payload::Cancel(_)
            | Payload::Status(_)
            | Payload::Response(_)
            | Payload::Suggestion(_) => {
                directed.push((index, payload.clone()));
            }
            Payload::Config(c) => configs.push((index, c.clone())),
            Payload::Query(q) => queries.push(q.clone()),
            Payload::Ack(_) => {
                return Err(ProtocolError::invalid(
                    format!("MESS[{index}].ack"),
                    "acks are sent by the exchange, not to it",
                )
                .into());
            }
            Payload::Version(_) | Payload::Unknown { .. } => {}
        }
    }
    if let Some(role) = sender.role {
        check_role(role, &sender.id, &message)?;
    }
    if requests.is_empty() && directed.is_empty() && configs.is_empty() && queries.is_empty() {
        let kinds: Vec<&str> = message.payloads.iter().map(Payload::kind).collect();
        return Err(ProtocolError::invalid(
            "MESS",
            format!(
                "nothing to act on (payloads: {}); send a request, reply, cancel, status, response, suggestion, query or config",
                kinds.join(", ")
            ),
        )
        .into());
    }

    // Check the directed payloads against their threads before writing anything, so a bad
    // payload late in the message leaves nothing half-applied.
    // A key holder hears of a thread only if it is a party to it (or may take it): to anyone
    // else it does not exist, so refusals cannot reveal it or its requestor.
    let mut directory = ex.directory();
    let groups = plan::group(ex, &directed, sender, &directory)?;
    for g in &groups {
        lifecycle::expire_if_due(ex, &g.thread, now)?;
    }
    let mut checked = Vec::with_capacity(groups.len());
    for g in groups {
        let (env, _) = ex.store().envelope(&g.thread)?;
        let deps = plan::dependency_statuses(ex, &env)?;
        let cx = Context {
            sender: &sender.id,
            directory: &directory,
            dependencies: &deps,
            now,
        };
        plan::check_group(&env, &g.payloads, &cx)?;
        checked.push((g, env, deps));
    }

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
            directory,
            dependencies: deps,
            now,
        };
        plan::check_group(&t.envelope, &g.payloads, &cx)?;
        let mut payloads = Vec::new();
        if let Some(v) = version {
            payloads.push(Payload::Version(v.to_owned()));
        }
        payloads.extend(g.payloads.iter().cloned());
        let doc = MessageDoc {
            from: sender.id.clone(),
            received: now,
            channel: Some(sender.channel.clone()),
            message: Message::new(payloads),
            extra: Map::new(),
        };
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
            (envelope.status, envelope.executor.clone(), echo),
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

/// Refuses control characters (NUL, escapes, ...) anywhere in a message's text, keys included:
/// they have no place in MESS, would reach terminals and web pages, and some tools cut text at
/// a NUL. Tabs and line breaks are text.
fn check_text(value: &Value, path: &str) -> Result<(), Error> {
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
            )
            .into()),
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
                )
                .into());
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
