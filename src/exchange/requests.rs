//! Creating threads from the `request` payloads of a message: idempotent re-sends, ref
//! allocation, `depends_on` resolution (sibling ids, refs, the sender's client ids), the thread
//! files with their ack, routing, and the ack answered to the sender.

use std::collections::HashMap;

use crate::exchange::directory::{Directory, RouteInput};
use crate::exchange::error::Error;
use crate::exchange::{Exchange, Sender, access, lifecycle, plan, view};
use crate::protocol::answer;
use crate::protocol::envelope::Envelope;
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Payload;
use crate::protocol::time::Timestamp;
use crate::protocol::value::Map;
use crate::store::IndexKey;

pub(crate) use crate::protocol::rules::Incoming;

/// Where a `depends_on` entry points.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Another request of the same message, by its position in `MESS:`.
    Sibling(usize),
    /// A thread that exists already.
    Thread(ThreadRef),
}

/// The dependencies of each request, resolved once, keyed by the request's position.
pub(crate) type Dependencies = HashMap<usize, Vec<Target>>;

/// Checks the requests of a message before anything is written: client ids differ within the
/// message, every `depends_on` entry names a sibling, a ref or a client id of the sender, and
/// no request depends on itself or on a cycle of siblings. Resolves the entries once, so
/// `last` means the same thing for every request of the message.
pub(crate) fn check(
    ex: &Exchange,
    incoming: &[Incoming],
    sender: &Sender,
    directory: &Directory,
    now: Timestamp,
) -> Result<Dependencies, Error> {
    crate::protocol::rules::check_new_requests(incoming, now)?;
    let siblings: HashMap<&str, usize> = incoming
        .iter()
        .filter_map(|r| r.request.id.as_deref().map(|id| (id, r.index)))
        .collect();
    for req in incoming {
        ex.peers()
            .check_chain(&req.request.extra, &format!("MESS[{}].request", req.index))?;
        if let Some(callback) = req.request.extra.get(crate::exchange::callbacks::FIELD) {
            let path = format!("MESS[{}].request.callback", req.index);
            let url = callback
                .scalar_text()
                .ok_or_else(|| ProtocolError::invalid(&path, "must be a URL (http or https)"))?;
            // Sent like a key holder's webhook: only where the operator's allow-list permits.
            ex.settings()
                .dispatch
                .webhook_allow
                .check(&url)
                .map_err(|why| ProtocolError::invalid(&path, why))?;
        }
    }
    // An approval names people who can reach its quorum now: a quorum nobody could meet is
    // refused, never quietly lowered.
    for req in incoming {
        let path = format!("MESS[{}].request.approval", req.index);
        let hands = crate::protocol::hands::Hands::read(&req.request, now, &path)?;
        if let Some(a) = &hands.approval {
            let able = crate::exchange::hands::named(&hands, 0, directory);
            if (able.len() as u32) < a.need {
                return Err(ProtocolError::invalid(
                    format!("{path}.need"),
                    format!(
                        "{} approvals needed, but only {} of the approvers it names can decide{}",
                        a.need,
                        able.len(),
                        if able.is_empty() {
                            " (name registered executor ids, or capabilities they hold)".to_owned()
                        } else {
                            format!(" ({})", able.join(", "))
                        }
                    ),
                )
                .into());
            }
        }
        if let Some(c) = &hands.confirm_by {
            let able = crate::exchange::hands::named_confirmers(&hands, directory).len();
            if (able as u32) < c.need {
                return Err(ProtocolError::invalid(
                    format!("MESS[{}].request.confirm_by.need", req.index),
                    format!(
                        "{} confirmations needed, but only {able} of the people it names can confirm (name registered executor ids, or capabilities they hold)",
                        c.need
                    ),
                )
                .into());
            }
        }
    }
    for req in incoming {
        crate::exchange::escrow::check_terms(&req.request).map_err(|(field, why)| {
            ProtocolError::invalid(format!("MESS[{}].request.{field}", req.index), why)
        })?;
    }
    // The shells every request of the message offers, against what the sender holds, before
    // anything is written (each escrow is checked again, under the ledger lock, as it is taken).
    let offered: i64 = incoming
        .iter()
        .filter_map(|r| crate::exchange::escrow::offered(&r.request))
        .try_fold(0i64, i64::checked_add)
        .unwrap_or(i64::MAX);
    if offered > 0 {
        let held = ex
            .marketplace()
            .shell_balances()?
            .get(&sender.id)
            .copied()
            .unwrap_or_default();
        if held < offered {
            let first = incoming
                .iter()
                .find(|r| crate::exchange::escrow::offered(&r.request).is_some())
                .map_or(0, |r| r.index);
            return Err(ProtocolError::invalid(
                format!("MESS[{first}].request.compensation.shells"),
                format!(
                    "the message offers {offered} shells and {} holds {held} (the operator grants shells: mess shells grant {} N)",
                    sender.id, sender.id
                ),
            )
            .into());
        }
    }
    let mut deps = Dependencies::new();
    for req in incoming {
        let mut targets = Vec::new();
        for (j, dep) in req.request.depends_on().iter().enumerate() {
            let path = format!("MESS[{}].request.constraints.depends_on[{j}]", req.index);
            if let Some(&target) = siblings.get(dep.as_str()) {
                if target == req.index {
                    return Err(
                        ProtocolError::invalid(path, "a request cannot depend on itself").into(),
                    );
                }
                targets.push(Target::Sibling(target));
                continue;
            }
            // Only threads the sender may see: another's ref answers like one that does not
            // exist.
            let thread = plan::resolve_for(ex, dep, sender, directory, access::may_depend_on)
                .map_err(|e| match e {
                Error::NotFound { .. } => Error::from(ProtocolError::invalid(
                    path,
                    format!("unknown request {dep:?} (not a ref, a sibling id, or one of your client ids)"),
                )),
                other => other,
            })?;
            targets.push(Target::Thread(thread));
        }
        deps.insert(req.index, targets);
    }
    if let Some(c) = find_cycle(&deps) {
        return Err(ProtocolError::invalid(
            format!("MESS[{c}].request.constraints.depends_on"),
            "the requests of this message depend on each other in a cycle",
        )
        .into());
    }
    Ok(deps)
}

/// A request on a cycle of sibling dependencies, if there is one.
fn find_cycle(deps: &Dependencies) -> Option<usize> {
    fn visit(n: usize, deps: &Dependencies, state: &mut HashMap<usize, u8>) -> Option<usize> {
        match state.get(&n) {
            Some(1) => return Some(n),
            Some(2) => return None,
            _ => {}
        }
        state.insert(n, 1);
        for t in deps.get(&n).into_iter().flatten() {
            if let Target::Sibling(m) = t
                && let Some(c) = visit(*m, deps, state)
            {
                return Some(c);
            }
        }
        state.insert(n, 2);
        None
    }
    let mut state = HashMap::new();
    let mut keys: Vec<usize> = deps.keys().copied().collect();
    keys.sort_unstable();
    keys.into_iter().find_map(|n| visit(n, deps, &mut state))
}

/// Creates a thread per request (or finds the open thread of a re-sent client id) and returns
/// the ack payload for the sender. `deps` comes from [`check`].
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the values are the use case's state"
)]
pub(crate) fn create(
    ex: &Exchange,
    incoming: Vec<Incoming>,
    deps: &Dependencies,
    version: Option<&str>,
    extra: &Map,
    sender: &Sender,
    now: Timestamp,
) -> Result<Payload, Error> {
    let store = ex.store();
    // One sender's creates with client ids run one at a time, from the client-id lookup to
    // the written file, so a re-sent id never makes a second thread however many processes
    // send it. Without ids there is nothing to look up: refs come from an atomic counter and
    // `last` moves only forward.
    let guard = if incoming.iter().any(|r| r.request.id.is_some()) {
        Some(store.lock_sender(&sender.id)?)
    } else {
        None
    };
    let existing = open_threads_of_ids(ex, &incoming, sender, now)?;
    let fresh: Vec<&Incoming> = incoming
        .iter()
        .filter(|r| !existing.contains_key(&r.index))
        .collect();
    let refs = if fresh.is_empty() {
        Vec::new()
    } else {
        store.allocate_refs(now.date_naive(), fresh.len())?
    };
    let mut assigned: HashMap<usize, ThreadRef> = existing;
    for (req, r) in fresh.iter().zip(&refs) {
        assigned.insert(req.index, r.clone());
    }

    let mut created = Vec::new();
    for req in &fresh {
        let thread = assigned[&req.index].clone();
        let depends_on: Vec<String> = deps
            .get(&req.index)
            .into_iter()
            .flatten()
            .map(|t| match t {
                Target::Sibling(i) => assigned[i].to_string(),
                Target::Thread(r) => r.to_string(),
            })
            .collect();
        let sent = Sent {
            version,
            extra,
            sender,
        };
        let waits = create_one(ex, req, &thread, depends_on, &sent, now)?;
        created.push((thread, waits));
    }
    drop(guard);
    // Dependencies may have finished (or failed) while the files were written.
    for (thread, has_deps) in &created {
        if *has_deps {
            lifecycle::reconcile(ex, thread, now)?;
        }
    }
    Ok(Payload::Ack(answer::ack_for(
        &incoming,
        &assigned,
        now,
        |thread| match ex.store().envelope(thread) {
            Ok((env, _)) => view::queue_position(ex, &env),
            Err(_) => None,
        },
    )))
}

/// The open threads the client ids of `incoming` already name (by the request's place in the
/// message): a re-sent request finds its thread instead of making a second one.
fn open_threads_of_ids(
    ex: &Exchange,
    incoming: &[Incoming],
    sender: &Sender,
    now: Timestamp,
) -> Result<HashMap<usize, ThreadRef>, Error> {
    let store = ex.store();
    let mut existing = HashMap::new();
    for req in incoming {
        if let Some(id) = &req.request.id
            && let Some(r) = store.lookup(&sender.id, IndexKey::ClientId(id))?
            && let Ok((env, _)) = store.envelope(&r)
            && !env.status.is_terminal()
            // An overdue thread is expired first: it is final, so the id is free again.
            && !lifecycle::settle(ex, &env, now)?
        {
            existing.insert(req.index, r);
        }
    }
    Ok(existing)
}

/// How the message with the requests came: its version, its top-level keys and its sender.
struct Sent<'a> {
    version: Option<&'a str>,
    extra: &'a Map,
    sender: &'a Sender,
}

/// Writes the thread of one request: its escrow held, its callback, its routing, the
/// sender's names for it and its dependencies, then the file with the request and the
/// exchange's ack. True when it waits on other threads.
fn create_one(
    ex: &Exchange,
    req: &Incoming,
    thread: &ThreadRef,
    depends_on: Vec<String>,
    sent: &Sent<'_>,
    now: Timestamp,
) -> Result<bool, Error> {
    let store = ex.store();
    let sender = sent.sender;
    let doc = answer::message_doc(
        &sender.id,
        &sender.channel,
        sent.version,
        [Payload::Request(req.request.clone())],
        sent.extra.clone(),
        now,
    );
    let mut envelope = Envelope::create(thread.clone(), &req.request, &doc, depends_on);
    // The offered shells are held before the thread exists: a crash in between leaves an
    // escrow without a thread, never a thread whose shells were not held.
    if let Some(escrow) = ex
        .marketplace()
        .escrow(thread, &req.request, &sender.id, now)?
    {
        envelope
            .extra
            .insert(crate::exchange::escrow::ESCROW, escrow);
    }
    // A key's callback stands in for the request's own; the message stays as it was sent.
    if let Some(url) = &sender.callback
        && !envelope
            .extra
            .contains_key(crate::exchange::callbacks::FIELD)
    {
        envelope.extra.insert(
            crate::exchange::callbacks::FIELD,
            crate::protocol::value::Value::str(url),
        );
    }
    // Work with a `not_before` ahead is offered when it comes (the router wakes for it).
    if envelope.depends_on.is_empty() && !envelope.too_early(now) {
        lifecycle::record_dispatch(ex, &mut envelope, &RouteInput::of(&req.request), now);
    }
    let ack = answer::creation_ack_doc(&req.request, thread, now);
    // Index entries go first: if the process dies before the thread file exists, they point
    // at nothing and are ignored; the other order could lose an acknowledged client id.
    let mut entries = vec![(IndexKey::Last, thread)];
    if let Some(id) = &req.request.id {
        entries.push((IndexKey::ClientId(id), thread));
    }
    store.remember(&sender.id, &entries)?;
    for dep in &envelope.depends_on {
        if let Ok(dep) = ThreadRef::parse(dep) {
            store.add_dependent(&dep, thread)?;
        }
    }
    store.create(&envelope, &[doc, ack])?;
    Ok(!envelope.depends_on.is_empty())
}
