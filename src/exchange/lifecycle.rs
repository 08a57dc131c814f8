//! What the exchange does on its own: expiring overdue pending threads, failing or dispatching
//! the dependents of a thread that reached a final status, and recording dispatch decisions.

use crate::db::Routed;
use crate::exchange::directory::RouteInput;
use crate::exchange::error::Error;
use crate::exchange::{Exchange, plan};
use crate::notify::ClaimantEvent;
use crate::protocol::envelope::{EXCHANGE, Envelope, MessageDoc};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status, StatusDetails, StatusMsg};
use crate::protocol::time::Timestamp;
use crate::protocol::value::{Map, Value};
use crate::store::Edit;
use crate::store::error::StoreError;
use crate::store::thread::ThreadFile;

/// Expires `thread` if it is still pending and its expiry has passed; returns the new status.
pub(crate) fn expire_if_due(
    ex: &Exchange,
    thread: &ThreadRef,
    now: Timestamp,
) -> Result<Option<Status>, Error> {
    let (env, _) = match ex.store().envelope(thread) {
        Ok(e) => e,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if !is_overdue(&env, now) {
        return Ok(None);
    }
    let ended = ex.store().modify(thread, |t| -> Result<_, Error> {
        if !is_overdue(&t.envelope, now) {
            return Ok((None, None));
        }
        // Several answers asked for and some came: the thread ends partial with them.
        let doc = match crate::exchange::hands::at_deadline(&t.envelope, t, now)? {
            Some(doc) => doc,
            None => match crate::protocol::machine::expiry(&t.envelope, now) {
                Some(doc) => doc,
                None => return Ok((None, None)),
            },
        };
        let mut envelope = t.envelope.clone();
        envelope.apply(&doc);
        let status = envelope.status;
        Ok((
            Some(Edit {
                envelope,
                append: vec![doc],
                deliveries: Vec::new(),
            }),
            Some(status),
        ))
    })?;
    if let Some(status) = ended {
        tell_claimant(ex, &env, ClaimantEvent::Ended, now);
        settle_dependents(ex, thread, now)?;
        return Ok(Some(status));
    }
    Ok(None)
}

fn is_overdue(env: &Envelope, now: Timestamp) -> bool {
    // Envelopes written by other tools may carry only `needed_by`.
    env.deadline().is_some_and(|(t, _)| t <= now)
}

/// Brings one thread up to date on read: expires it when overdue (pending, waiting or held),
/// or settles a pending one when it waits for dependencies and was never dispatched (the
/// process that should have done so may have died after writing a dependency's final status).
/// Returns whether it changed.
pub(crate) fn settle(ex: &Exchange, env: &Envelope, now: Timestamp) -> Result<bool, Error> {
    if is_overdue(env, now) {
        return Ok(expire_if_due(ex, &env.thread_ref, now)?.is_some());
    }
    if env.status != Status::Pending {
        return Ok(false);
    }
    if !env.depends_on.is_empty() && !env.dispatched() {
        return Ok(reconcile(ex, &env.thread_ref, now)?.is_some());
    }
    Ok(false)
}

/// Settles every pending, waiting and held thread (see [`settle`]); returns the refs that
/// changed.
pub(crate) fn settle_all(ex: &Exchange, now: Timestamp) -> Result<Vec<ThreadRef>, Error> {
    let (pending, _) = ex.store().list(&[State::Received, State::Executing], false);
    let mut changed = Vec::new();
    for (env, _, _) in pending {
        if settle(ex, &env, now)? {
            changed.push(env.thread_ref);
        }
    }
    Ok(changed)
}

/// Queues a notice of `event` to the executor holding the thread of `before` (its envelope
/// before the change), on its channels. A thread nobody holds tells nobody; a notice that
/// cannot be queued is logged, not fatal: the change itself is written.
pub(crate) fn tell_claimant(
    ex: &Exchange,
    before: &Envelope,
    event: ClaimantEvent,
    now: Timestamp,
) {
    let Some(claimant) = before.executor.as_deref() else {
        return;
    };
    // A review comes after the work, so it reaches the executor of a finished thread.
    let after_the_work = matches!(event, ClaimantEvent::Reviewed | ClaimantEvent::Redo);
    if before.status == Status::Pending || (before.status.is_terminal() && !after_the_work) {
        return;
    }
    // Each event is its own notice: the kind carries the instant so a second answer is not
    // taken for a repeat of the first.
    let kind = format!("{}.{}", event.as_str(), now.timestamp_millis());
    if let Err(e) =
        ex.outbox()
            .queue_notices(&before.thread_ref, &[claimant.to_owned()], &kind, now)
    {
        tracing::warn!(thread = %before.thread_ref, error = %e, "cannot queue the claimant's notice");
    }
}

/// A message document from the exchange, applied to a copy of `env`.
pub(crate) fn exchange_edit(env: &Envelope, payloads: Vec<Payload>, now: Timestamp) -> Edit {
    let doc = MessageDoc {
        from: EXCHANGE.to_owned(),
        received: now,
        channel: None,
        message: Message::new(payloads),
        extra: Map::new(),
    };
    let mut envelope = env.clone();
    envelope.apply(&doc);
    Edit {
        envelope,
        append: vec![doc],
        deliveries: Vec::new(),
    }
}

/// After `thread` reached a final status (or completed): fails dependents that can no longer
/// run and dispatches those whose dependencies have all completed, following the chain.
pub(crate) fn settle_dependents(
    ex: &Exchange,
    thread: &ThreadRef,
    now: Timestamp,
) -> Result<(), Error> {
    let mut queue = vec![thread.clone()];
    while let Some(next) = queue.pop() {
        for dependent in ex.store().dependents(&next)? {
            if reconcile(ex, &dependent, now)? == Some(Status::Failed) {
                queue.push(dependent);
            }
        }
    }
    Ok(())
}

/// Brings a thread with dependencies up to date: fails it if a dependency can no longer
/// complete (claimed early or not: its work can never start), dispatches it once all have
/// completed if it is still waiting for an executor. Returns the status it moved to.
pub(crate) fn reconcile(
    ex: &Exchange,
    thread: &ThreadRef,
    now: Timestamp,
) -> Result<Option<Status>, Error> {
    let env = match ex.store().envelope(thread) {
        Ok((e, _)) => e,
        // The dependent's file is written after its dependency entry; its creator reconciles it.
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if env.status.is_terminal() || env.depends_on.is_empty() {
        return Ok(None);
    }
    let placed = env.status != Status::Pending || env.dispatched();
    // Dependency states are read before taking this thread's lock: two thread locks are never
    // held at once, and a final status never changes, so an early read cannot mislead.
    let deps = plan::dependency_statuses(ex, &env)?;
    let failed = deps
        .iter()
        .find(|(_, s)| s.is_none_or(Status::fails_dependents))
        .cloned();
    let all_done = deps.iter().all(|(_, s)| *s == Some(Status::Completed));
    if failed.is_none() && (placed || !all_done) {
        return Ok(None);
    }
    let moved = ex.store().modify(thread, |t| -> Result<_, Error> {
        let env = &t.envelope;
        if env.status.is_terminal() {
            return Ok((None, None));
        }
        if let Some((dep, dep_status)) = &failed {
            let mut reason = Map::new();
            reason.insert("type", Value::str("dependency_failed"));
            reason.insert("ref", Value::str(dep));
            reason.insert(
                "detail",
                Value::str(format!(
                    "{dep} is {}",
                    dep_status.map_or("missing".to_owned(), |s| s.to_string())
                )),
            );
            let status = StatusMsg::new(
                env.thread_ref.as_str(),
                StatusDetails::Failed {
                    reason: Value::Map(reason),
                    recoverable: Some(false),
                    suggestion: None,
                },
            );
            return Ok((
                Some(exchange_edit(env, vec![Payload::Status(status)], now)),
                Some(Status::Failed),
            ));
        }
        if env.status != Status::Pending || env.dispatched() || env.too_early(now) {
            return Ok((None, None));
        }
        let input = route_input(t)?;
        let mut envelope = env.clone();
        if !record_dispatch(ex, &mut envelope, &input, now) {
            return Ok((None, None));
        }
        Ok((
            Some(Edit {
                envelope,
                append: Vec::new(),
                deliveries: Vec::new(),
            }),
            Some(Status::Pending),
        ))
    })?;
    if moved == Some(Status::Failed) {
        tell_claimant(ex, &env, ClaimantEvent::Ended, now);
    }
    Ok(moved)
}

/// The request a thread was made with (its first request payload), if the file still has it.
pub(crate) fn first_request(
    thread: &ThreadFile,
) -> Result<Option<crate::protocol::request::Request>, Error> {
    Ok(thread
        .messages()?
        .into_iter()
        .flat_map(|d| d.message.payloads)
        .find_map(|p| match p {
            Payload::Request(r) => Some(r),
            _ => None,
        }))
}

/// What routing needs of a thread: its request's required capabilities, precision and
/// urgency (the envelope's `requires` for a file whose request document is missing).
pub(crate) fn route_input(thread: &ThreadFile) -> Result<RouteInput, Error> {
    Ok(first_request(thread)?
        .as_ref()
        .map(RouteInput::of)
        .unwrap_or_else(|| RouteInput {
            requires: thread.envelope.requires.clone(),
            ..RouteInput::default()
        }))
}

/// Routes a pending thread with the SQL macro `route_for` (the body of `route_request`) and
/// records the decision as a `dispatched` history entry; returns false (and records nothing)
/// when no executor is eligible, the read model cannot answer, or the exchange routes in the
/// background (the router then routes the thread soon after it is written). Routing never
/// blocks a request: a broken config.yaml shows in `mess status` and `mess fsck` warnings
/// instead.
pub(crate) fn record_dispatch(
    ex: &Exchange,
    env: &mut Envelope,
    input: &RouteInput,
    now: Timestamp,
) -> bool {
    if ex.settings().route_in_background {
        return false;
    }
    let directory = ex.directory().routing();
    let routed = match ex.db().and_then(|db| {
        db.route_wanted(&input.wanted(String::new()), &now, Some(&directory))
            .map_err(|e| e.to_string())
    }) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(thread = %env.thread_ref, error = %e, "routing failed; the request waits undispatched");
            return false;
        }
    };
    if !routed.is_empty() {
        let executors: Vec<String> = routed.iter().map(|r| r.executor.clone()).collect();
        // Queued before the thread is written: a crash in between leaves notices about a
        // thread that never was, which the worker drops, never a routed thread unannounced.
        if let Err(e) = ex
            .outbox()
            .queue_notices(&env.thread_ref, &executors, "new", now)
        {
            // Not recorded as routed, so a server's router routes (and notifies) it later.
            tracing::warn!(thread = %env.thread_ref, error = %e, "cannot queue the notices; the request waits undispatched");
            return false;
        }
    }
    record_routed(env, &routed, now)
}

/// Records a routing decision as a `dispatched` history entry; false when nobody was chosen.
pub(crate) fn record_routed(env: &mut Envelope, routed: &[Routed], now: Timestamp) -> bool {
    if routed.is_empty() {
        return false;
    }
    let note = routed
        .iter()
        .map(|r| format!("{}: {}", r.executor, r.reason))
        .collect::<Vec<_>>()
        .join("; ");
    env.record(
        "dispatched",
        now,
        EXCHANGE,
        Some(format!("routed to {note}")),
    );
    true
}
