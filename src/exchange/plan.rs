//! Turning the thread-directed payloads of a message (status, response, reply, cancel,
//! suggestion) into checked per-thread groups: reference resolution, roles, and the rules each
//! payload must pass against the thread's current state.

use crate::exchange::auth::Role;
use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::exchange::{Exchange, Sender, access};
use crate::protocol::envelope::Envelope;
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::machine::{self, Actor, Step};
use crate::protocol::message::Payload;
use crate::protocol::status::{State, Status};
use crate::protocol::time::Timestamp;
use crate::store::IndexKey;
use crate::store::error::StoreError;

/// The payloads of one message that go to one thread, in message order.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) thread: ThreadRef,
    pub(crate) payloads: Vec<Payload>,
}

/// Resolves a reference for `sender`: `last`, a ref, or one of the sender's client or
/// suggestion ids. Index entries are trusted only if their thread still exists.
pub(crate) fn resolve(ex: &Exchange, reference: &str, sender: &str) -> Result<ThreadRef, Error> {
    let store = ex.store();
    let exists = |r: &ThreadRef| -> Result<bool, StoreError> { Ok(!store.find(r)?.is_empty()) };
    if reference == "last" {
        return match store.lookup(sender, IndexKey::Last)? {
            Some(r) if exists(&r)? => Ok(r),
            _ => Err(Error::not_found(format!(
                "no request from {sender} yet, so `last` names nothing"
            ))),
        };
    }
    if let Ok(r) = ThreadRef::parse(reference)
        && exists(&r)?
    {
        return Ok(r);
    }
    for key in [
        IndexKey::ClientId(reference),
        IndexKey::Suggestion(reference),
    ] {
        if let Some(r) = store.lookup(sender, key)?
            && exists(&r)?
        {
            return Ok(r);
        }
    }
    // One answer for every reference that names nothing the sender may reach, whatever its
    // shape: other writers' refs need not look like ours, so the shape must not decide it.
    Err(Error::no_thread(reference))
}

/// Resolves a reference for `sender` and checks that `rule` (one of `access`'s) lets it reach
/// the thread; a thread it may not reach is reported exactly as one that does not exist. The
/// operator (no role) reaches every thread.
pub(crate) fn resolve_for(
    ex: &Exchange,
    reference: &str,
    sender: &Sender,
    directory: &Directory,
    rule: fn(&str, &Envelope, &Directory) -> bool,
) -> Result<ThreadRef, Error> {
    resolve_for_payload(ex, reference, sender, directory, rule, false)
}

/// [`resolve_for`] for a payload that claims a thread when `claiming` (`status: claimed`):
/// `last` is then refused with the candidates while the executor holds open work, since it
/// could mean the work held or the thread offered since.
fn resolve_for_payload(
    ex: &Exchange,
    reference: &str,
    sender: &Sender,
    directory: &Directory,
    rule: fn(&str, &Envelope, &Directory) -> bool,
    claiming: bool,
) -> Result<ThreadRef, Error> {
    let executor = sender.role != Some(Role::Agent) && directory.executor(&sender.id).is_some();
    let thread = if executor {
        resolve_as_executor(ex, reference, &sender.id, directory, rule, claiming)?
    } else {
        resolve(ex, reference, &sender.id)?
    };
    if sender.role.is_none() {
        return Ok(thread);
    }
    match ex.store().envelope(&thread) {
        Ok((env, _)) if rule(&sender.id, &env, directory) => Ok(thread),
        Ok(_) | Err(StoreError::NotFound { .. }) => Err(Error::no_thread(reference)),
        Err(e) => Err(e.into()),
    }
}

/// Resolves a reference an executor sends, the way the protocol's examples name threads:
/// `last` as [`last_for_executor`] says, and a client id is the requestor's, looked up among
/// the open threads `rule` lets this executor reach (so the answer never depends on threads it
/// may not see), then among the threads it claimed (so an id keeps naming its thread after the
/// thread ends: v1.0's `completed`, then the `response`). A ref, or an id of the executor's own
/// requests, is taken first.
fn resolve_as_executor(
    ex: &Exchange,
    reference: &str,
    executor: &str,
    directory: &Directory,
    rule: fn(&str, &Envelope, &Directory) -> bool,
    claiming: bool,
) -> Result<ThreadRef, Error> {
    if reference == "last" {
        return last_for_executor(ex, executor, claiming);
    }
    match resolve(ex, reference, executor) {
        Err(Error::NotFound { .. }) => {}
        found => return found,
    }
    let (open, _) = ex.store().list(&[State::Received, State::Executing], false);
    let mut named: Vec<ThreadRef> = open
        .into_iter()
        .filter(|(env, _, _)| {
            env.client_id.as_deref() == Some(reference) && rule(executor, env, directory)
        })
        .map(|(env, _, _)| env.thread_ref)
        .collect();
    named.sort();
    named.dedup();
    match named.len() {
        0 => match ex.store().lookup(executor, IndexKey::WorkId(reference))? {
            Some(r) => match ex.store().envelope(&r) {
                Ok((env, _))
                    if env.client_id.as_deref() == Some(reference)
                        && rule(executor, &env, directory) =>
                {
                    Ok(r)
                }
                Ok(_) | Err(StoreError::NotFound { .. }) => Err(Error::no_thread(reference)),
                Err(e) => Err(e.into()),
            },
            None => Err(Error::no_thread(reference)),
        },
        1 => Ok(named.remove(0)),
        _ => Err(ProtocolError::conflict(format!(
            "{reference:?} names {} threads you may work on ({}); send the ref instead",
            named.len(),
            named
                .iter()
                .map(ThreadRef::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

/// Whether `executor` holds the thread of `env` and may still work on it (claimed and not
/// final; `partial` work may still be completed).
fn holds(executor: &str, env: &Envelope) -> bool {
    env.executor.as_deref() == Some(executor)
        && env.status != Status::Pending
        && !env.status.is_terminal()
}

/// When `who` last acted on the thread of `env` (its newest history entry), if ever.
fn last_acted(who: &str, env: &Envelope) -> Option<Timestamp> {
    env.history
        .iter()
        .filter(|h| h.by == who)
        .map(|h| h.at)
        .max()
}

/// When the thread of `env` was last offered (dispatched or escalated), else when it was made.
fn last_offered(env: &Envelope) -> Timestamp {
    env.history
        .iter()
        .filter(|h| matches!(h.action.as_str(), "dispatched" | "escalated"))
        .map(|h| h.at)
        .max()
        .unwrap_or(env.created)
}

/// The open threads `executor` holds, the one it acted on last first. The thread it last
/// claimed or reported on is looked at first, so the common case (it still holds that one)
/// reads one envelope; otherwise the open folder is read.
fn held_by(ex: &Exchange, executor: &str, all: bool) -> Result<Vec<Envelope>, Error> {
    let store = ex.store();
    let recent = match store.lookup(executor, IndexKey::Held)? {
        Some(r) => match store.envelope(&r) {
            Ok((env, _)) => Some(env),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    if let Some(env) = &recent
        && holds(executor, env)
        && !all
    {
        return Ok(vec![env.clone()]);
    }
    let (open, _) = store.list(&[State::Executing], false);
    let mut held: Vec<Envelope> = open
        .into_iter()
        .map(|(env, _, _)| env)
        .filter(|env| holds(executor, env))
        .collect();
    // Partial work lives with the finished threads; the one it last reported on is still its.
    if let Some(env) = recent
        && holds(executor, &env)
        && !held.iter().any(|h| h.thread_ref == env.thread_ref)
    {
        held.push(env);
    }
    held.sort_by_key(|env| std::cmp::Reverse(last_acted(executor, env)));
    Ok(held)
}

/// What `last` names for an executor: the open thread it most recently claimed or reported on;
/// holding none, the later of the thread offered to it last and the thread it last worked on
/// (so a `response` right after `completed` reaches the thread it completed). A claim through
/// `last` while it holds open work is refused with the candidates, as it could mean either.
fn last_for_executor(ex: &Exchange, executor: &str, claiming: bool) -> Result<ThreadRef, Error> {
    let store = ex.store();
    let offered = match store.lookup(executor, IndexKey::LastWork)? {
        Some(r) => match store.envelope(&r) {
            Ok((env, _)) => Some(env),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let held = held_by(ex, executor, claiming)?;
    if let Some(first) = held.first() {
        if !claiming {
            return Ok(first.thread_ref.clone());
        }
        let mut candidates: Vec<String> = held
            .iter()
            .map(|env| format!("{} ({}, yours)", env.thread_ref, env.status))
            .collect();
        if let Some(env) = offered.as_ref().filter(|o| {
            o.status == Status::Pending && !held.iter().any(|h| h.thread_ref == o.thread_ref)
        }) {
            candidates.push(format!("{} (offered)", env.thread_ref));
        }
        return Err(ProtocolError::conflict(format!(
            "`last` is ambiguous for a claim while you hold open work: {}; send the ref you mean",
            candidates.join(", ")
        ))
        .into());
    }
    let worked = match store.lookup(executor, IndexKey::Held)? {
        Some(r) => match store.envelope(&r) {
            Ok((env, _)) if env.executor.as_deref() == Some(executor) => Some(env),
            Ok(_) | Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let chosen = match (offered, worked) {
        (Some(o), Some(w)) => {
            if last_acted(executor, &w).is_some_and(|t| t > last_offered(&o)) {
                w
            } else {
                o
            }
        }
        (Some(o), None) => o,
        (None, Some(w)) => w,
        (None, None) => {
            return Err(Error::not_found(format!(
                "nothing was offered to {executor} yet, so `last` names nothing"
            )));
        }
    };
    Ok(chosen.thread_ref)
}

/// Groups thread-directed payloads by the thread they name, keeping message order; a key
/// holder reaches only the threads `access::may_address` lets it address.
pub(crate) fn group(
    ex: &Exchange,
    payloads: &[(usize, Payload)],
    sender: &Sender,
    directory: &Directory,
) -> Result<Vec<Group>, Error> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, payload) in payloads {
        // `re: [a, a]` (or an id and the ref it names) reaches the thread once.
        let mut reached: Vec<ThreadRef> = Vec::new();
        let (re, many_ok) = match payload {
            Payload::Status(s) => (&s.re, false),
            Payload::Response(r) => (&r.re, false),
            Payload::Reply(r) => (&r.re, false),
            Payload::Review(r) => (&r.re, false),
            Payload::Cancel(c) => (&c.re, true),
            Payload::Suggestion(s) => (&s.re, true),
            _ => continue,
        };
        let items = re.items();
        if items.len() > 1 && !many_ok {
            return Err(ProtocolError::invalid(
                format!("MESS[{i}].{}.re", payload.kind()),
                "names several threads; a status, response or reply is about one",
            )
            .into());
        }
        let claiming = matches!(payload, Payload::Status(s) if s.code == Status::Claimed);
        for item in items {
            let thread =
                resolve_for_payload(ex, item, sender, directory, access::may_address, claiming)
                    .map_err(|e| match e {
                        Error::NotFound { message } => Error::NotFound {
                            message: format!("MESS[{i}].{}.re: {message}", payload.kind()),
                        },
                        other => other,
                    })?;
            if reached.contains(&thread) {
                continue;
            }
            if let Payload::Suggestion(s) = payload
                && let Some(id) = &s.id
            {
                check_suggestion_id(ex, id, &thread, *i)?;
            }
            reached.push(thread.clone());
            match groups.iter_mut().find(|g| g.thread == thread) {
                Some(g) => g.payloads.push(payload.clone()),
                None => groups.push(Group {
                    thread,
                    payloads: vec![payload.clone()],
                }),
            }
        }
    }
    Ok(groups)
}

/// A suggestion's id names one suggestion of its requestor: the requestor's reply finds it by
/// that id, so an id already in use (by any executor) or shaped like a thread ref is refused,
/// lest a reply accept a suggestion other than the one it read.
fn check_suggestion_id(ex: &Exchange, id: &str, thread: &ThreadRef, i: usize) -> Result<(), Error> {
    let field = format!("MESS[{i}].suggestion.id");
    let ref_shaped = id.len() > 11
        && chrono::NaiveDate::parse_from_str(&id[..10], "%Y-%m-%d").is_ok()
        && id[10..].starts_with('-')
        && id[11..].bytes().all(|b| b.is_ascii_digit());
    if ref_shaped {
        return Err(ProtocolError::invalid(field, "a suggestion id cannot be a thread ref").into());
    }
    let requestor = ex.store().envelope(thread)?.0.requestor;
    if ex
        .store()
        .lookup(&requestor, IndexKey::Suggestion(id))?
        .is_some()
    {
        return Err(ProtocolError::conflict(format!(
            "{field}: suggestion id {id:?} is already in use; give this suggestion an id of its own"
        ))
        .into());
    }
    Ok(())
}

/// What a group check needs besides the envelope: who sends, the executors, and the current
/// status of each dependency.
pub(crate) struct Context<'a> {
    pub(crate) sender: &'a str,
    pub(crate) directory: &'a Directory,
    pub(crate) dependencies: &'a [(String, Option<Status>)],
    pub(crate) now: Timestamp,
}

/// Checks every payload of a group against the thread, in order, as if the earlier ones were
/// already applied; returns the envelope they lead to.
pub(crate) fn check_group(
    env: &Envelope,
    payloads: &[Payload],
    cx: &Context<'_>,
) -> Result<Envelope, Error> {
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
                    }
                    .into());
                }
                if running.status.is_terminal() && running.status != Status::Completed {
                    return Err(ProtocolError::conflict(format!(
                        "cannot respond to {thread}: it is {}",
                        running.status
                    ))
                    .into());
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
                if !access::may_act_now(cx.sender, &running, cx.directory) {
                    return Err(ProtocolError::forbidden(format!(
                        "cannot suggest on {thread}: suggestions come from its claimant, or while it waits for someone from an executor able to take it"
                    ))
                    .into());
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
fn check_status(running: &Envelope, code: Status, cx: &Context<'_>) -> Result<(), Error> {
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
        ))
        .into());
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

fn require_requestor(env: &Envelope, sender: &str, what: &str) -> Result<(), Error> {
    if env.requestor == sender {
        return Ok(());
    }
    Err(ProtocolError::forbidden(format!(
        "cannot {what} {}: only its requestor may",
        env.thread_ref
    ))
    .into())
}

/// The role of an executor reporting status on this thread.
fn actor_for_report(env: &Envelope, cx: &Context<'_>) -> Result<Actor, Error> {
    if env.status != Status::Pending && env.executor.as_deref() == Some(cx.sender) {
        return Ok(Actor::Claimant);
    }
    if cx.directory.executor(cx.sender).is_some() {
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
    Err(ProtocolError::forbidden(why).into())
}

/// Checks that an executor may claim a pending thread: its `not_before` has come, and it
/// holds every required capability.
/// A thread whose dependencies are still open may be claimed (the claimant reports `waiting`
/// until they complete); work on it waits for them (`check_dependencies_done`).
fn check_may_claim(env: &Envelope, cx: &Context<'_>) -> Result<(), Error> {
    if env.too_early(cx.now) {
        return Err(ProtocolError::conflict(format!(
            "cannot claim {}: it may not start before {} (its not_before)",
            env.thread_ref,
            env.not_before
                .map(|t| crate::protocol::time::format_timestamp(&t))
                .unwrap_or_default()
        ))
        .into());
    }
    if let Some(only) = env
        .extra
        .get(access::OFFERED_TO)
        .and_then(crate::protocol::value::Value::scalar_text)
        && only != cx.sender
    {
        return Err(ProtocolError::forbidden(format!(
            "cannot claim {}: its requestor delegated it to one executor alone",
            env.thread_ref
        ))
        .into());
    }
    if let Some(exec) = cx.directory.executor(cx.sender) {
        let missing = cx.directory.missing(exec, &env.requires);
        if !missing.is_empty() {
            return Err(ProtocolError::forbidden(format!(
                "cannot claim {}: {} lacks the required capabilit{} {}",
                env.thread_ref,
                cx.sender,
                if missing.len() == 1 { "y" } else { "ies" },
                missing.join(", ")
            ))
            .into());
        }
    }
    Ok(())
}

/// Refuses work on a thread (`in_progress`, a result, a response) while a request it depends
/// on is open. The dependencies are the requestor's threads: an executor hears how many are
/// open, not which or how they stand.
fn check_dependencies_done(env: &Envelope, cx: &Context<'_>, what: &str) -> Result<(), Error> {
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
        ))
        .into());
    }
    Ok(())
}

/// The current status of each dependency of `env` (`None` when its file is gone).
pub(crate) fn dependency_statuses(
    ex: &Exchange,
    env: &Envelope,
) -> Result<Vec<(String, Option<Status>)>, Error> {
    env.depends_on
        .iter()
        .map(|d| {
            let status = match ThreadRef::parse(d) {
                Ok(r) => match ex.store().envelope(&r) {
                    Ok((e, _)) => Some(e.status),
                    Err(StoreError::NotFound { .. }) => None,
                    Err(e) => return Err(e.into()),
                },
                Err(_) => None,
            };
            Ok((d.clone(), status))
        })
        .collect()
}
