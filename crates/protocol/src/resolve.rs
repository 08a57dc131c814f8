//! Which thread a reference in a message names for its sender (`last`, a ref, a client id or a
//! suggestion id), and the grouping of a message's payloads by the thread they reach. Written
//! once over [`Threads`], the few lookups an exchange's storage answers, so the native exchange
//! (files or PostgreSQL) and the Worker build resolve every reference alike; a thread the
//! sender may not reach is answered exactly as one that does not exist.

use crate::access::{self, Roster};
use crate::envelope::Envelope;
use crate::error::ProtocolError;
use crate::ids::ThreadRef;
use crate::message::Payload;
use crate::rules::Role;
use crate::status::{State, Status};
use crate::time::Timestamp;

/// What a sender's index entry names.
#[derive(Debug, Clone, Copy)]
pub enum IndexKey<'a> {
    /// The most recent request of the sender.
    Last,
    /// The most recent thread offered to (dispatched to) or claimed by an executor: what
    /// `re: last` names when that executor holds no open thread.
    LastWork,
    /// The thread an executor most recently claimed or reported on: what `re: last` names
    /// while it holds open work.
    Held,
    /// A requestor's client id of a thread an executor claimed: the id keeps naming that
    /// thread for the executor after it ends.
    WorkId(&'a str),
    /// A client id of one of the sender's requests.
    ClientId(&'a str),
    /// The id of a suggestion made on one of the sender's threads.
    Suggestion(&'a str),
}

/// What resolution reads of an exchange's threads.
pub trait Threads {
    /// The storage's error; refusals of the rules convert into it.
    type Error: From<ProtocolError>;
    /// The thread `key` of `who` names, if the entry exists (it may name a thread since gone).
    fn lookup(&self, who: &str, key: IndexKey<'_>) -> Result<Option<ThreadRef>, Self::Error>;
    /// The envelope of thread `r`; `None` when there is no such thread.
    fn envelope(&self, r: &ThreadRef) -> Result<Option<Envelope>, Self::Error>;
    /// Whether thread `r` exists.
    fn exists(&self, r: &ThreadRef) -> Result<bool, Self::Error> {
        Ok(self.envelope(r)?.is_some())
    }
    /// The envelopes of every thread in the `states` folders.
    fn open(&self, states: &[State]) -> Result<Vec<Envelope>, Self::Error>;
    /// The error for a reference that names nothing the caller may reach.
    fn not_found(message: String) -> Self::Error;
    /// Whether `e` is such an error.
    fn is_not_found(e: &Self::Error) -> bool;
    /// `e` with the field it concerns (`MESS[1].status.re`) put in front, when it is a
    /// not-found error; any other error as it is.
    fn in_payload(e: Self::Error, path: &str) -> Self::Error;
}

/// Who sends: its id, and the role of the key it came with (`None` for the operator and
/// local callers, who reach every thread).
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    /// The agent or executor id.
    pub id: &'a str,
    /// The role of its key.
    pub role: Option<Role>,
}

/// An access rule of [`crate::access`]: whether `who` may reach the thread of an envelope.
pub type Rule = fn(&str, &Envelope, &dyn Roster) -> bool;

/// The one answer for a thread reference that names nothing the caller may see, whether the
/// thread does not exist or belongs to others: the same words everywhere, so the answer cannot
/// tell the two apart.
pub fn no_thread(reference: &str) -> String {
    format!("no thread {reference:?}")
}

/// The payloads of one message that go to one thread, in message order.
#[derive(Debug, Clone)]
pub struct Group {
    /// The thread.
    pub thread: ThreadRef,
    /// Its payloads.
    pub payloads: Vec<Payload>,
}

/// Resolves a reference for `sender`: `last`, a ref, or one of the sender's client or
/// suggestion ids. Index entries are trusted only if their thread still exists.
pub fn resolve<T: Threads + ?Sized>(
    threads: &T,
    reference: &str,
    sender: &str,
) -> Result<ThreadRef, T::Error> {
    let exists = |r: &ThreadRef| -> Result<bool, T::Error> { threads.exists(r) };
    if reference == "last" {
        return match threads.lookup(sender, IndexKey::Last)? {
            Some(r) if exists(&r)? => Ok(r),
            _ => Err(T::not_found(format!(
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
        if let Some(r) = threads.lookup(sender, key)?
            && exists(&r)?
        {
            return Ok(r);
        }
    }
    // One answer for every reference that names nothing the sender may reach, whatever its
    // shape: other writers' refs need not look like ours, so the shape must not decide it.
    Err(T::not_found(no_thread(reference)))
}

/// Resolves a reference for `sender` and checks that `rule` (one of `access`'s) lets it reach
/// the thread; a thread it may not reach is reported exactly as one that does not exist. The
/// operator (no role) reaches every thread.
pub fn resolve_for<T: Threads + ?Sized>(
    threads: &T,
    reference: &str,
    sender: &Sender<'_>,
    roster: &dyn Roster,
    rule: Rule,
) -> Result<ThreadRef, T::Error> {
    resolve_for_payload(threads, reference, sender, roster, rule, false)
}

/// [`resolve_for`] for a payload that claims a thread when `claiming` (`status: claimed`):
/// `last` is then refused with the candidates while the executor holds open work, since it
/// could mean the work held or the thread offered since.
fn resolve_for_payload<T: Threads + ?Sized>(
    threads: &T,
    reference: &str,
    sender: &Sender<'_>,
    roster: &dyn Roster,
    rule: Rule,
    claiming: bool,
) -> Result<ThreadRef, T::Error> {
    let executor = sender.role != Some(Role::Agent) && roster.is_executor(sender.id);
    let thread = if executor {
        resolve_as_executor(threads, reference, sender.id, roster, rule, claiming)?
    } else {
        resolve(threads, reference, sender.id)?
    };
    if sender.role.is_none() {
        return Ok(thread);
    }
    match threads.envelope(&thread)? {
        Some(env) if rule(sender.id, &env, roster) => Ok(thread),
        _ => Err(T::not_found(no_thread(reference))),
    }
}

/// Resolves a reference an executor sends, the way the protocol's examples name threads:
/// `last` as [`last_for_executor`] says, and a client id is the requestor's, looked up among
/// the open threads `rule` lets this executor reach (so the answer never depends on threads it
/// may not see), then among the threads it claimed (so an id keeps naming its thread after the
/// thread ends: v1.0's `completed`, then the `response`). A ref, or an id of the executor's own
/// requests, is taken first.
fn resolve_as_executor<T: Threads + ?Sized>(
    threads: &T,
    reference: &str,
    executor: &str,
    roster: &dyn Roster,
    rule: Rule,
    claiming: bool,
) -> Result<ThreadRef, T::Error> {
    if reference == "last" {
        return last_for_executor(threads, executor, claiming);
    }
    match resolve(threads, reference, executor) {
        Err(e) if T::is_not_found(&e) => {}
        found => return found,
    }
    let open = threads.open(&[State::Received, State::Executing])?;
    let mut named: Vec<ThreadRef> = open
        .into_iter()
        .filter(|env| env.client_id.as_deref() == Some(reference) && rule(executor, env, roster))
        .map(|env| env.thread_ref)
        .collect();
    named.sort();
    named.dedup();
    match named.len() {
        0 => match threads.lookup(executor, IndexKey::WorkId(reference))? {
            Some(r) => match threads.envelope(&r)? {
                Some(env)
                    if env.client_id.as_deref() == Some(reference)
                        && rule(executor, &env, roster) =>
                {
                    Ok(r)
                }
                _ => Err(T::not_found(no_thread(reference))),
            },
            None => Err(T::not_found(no_thread(reference))),
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
fn held_by<T: Threads + ?Sized>(
    threads: &T,
    executor: &str,
    all: bool,
) -> Result<Vec<Envelope>, T::Error> {
    let recent = match threads.lookup(executor, IndexKey::Held)? {
        Some(r) => threads.envelope(&r)?,
        None => None,
    };
    if let Some(env) = &recent
        && holds(executor, env)
        && !all
    {
        return Ok(vec![env.clone()]);
    }
    let open = threads.open(&[State::Executing])?;
    let mut held: Vec<Envelope> = open
        .into_iter()
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
fn last_for_executor<T: Threads + ?Sized>(
    threads: &T,
    executor: &str,
    claiming: bool,
) -> Result<ThreadRef, T::Error> {
    let offered = match threads.lookup(executor, IndexKey::LastWork)? {
        Some(r) => threads.envelope(&r)?,
        None => None,
    };
    let held = held_by(threads, executor, claiming)?;
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
    let worked = match threads.lookup(executor, IndexKey::Held)? {
        Some(r) => threads
            .envelope(&r)?
            .filter(|env| env.executor.as_deref() == Some(executor)),
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
            return Err(T::not_found(format!(
                "nothing was offered to {executor} yet, so `last` names nothing"
            )));
        }
    };
    Ok(chosen.thread_ref)
}

/// Groups thread-directed payloads by the thread they name, keeping message order; a key
/// holder reaches only the threads `access::may_address` lets it address.
pub fn group<T: Threads + ?Sized>(
    threads: &T,
    payloads: &[(usize, Payload)],
    sender: &Sender<'_>,
    roster: &dyn Roster,
) -> Result<Vec<Group>, T::Error> {
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
                resolve_for_payload(threads, item, sender, roster, access::may_address, claiming)
                    .map_err(|e| T::in_payload(e, &format!("MESS[{i}].{}.re", payload.kind())))?;
            if reached.contains(&thread) {
                continue;
            }
            if let Payload::Suggestion(s) = payload
                && let Some(id) = &s.id
            {
                check_suggestion_id(threads, id, &thread, *i)?;
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
fn check_suggestion_id<T: Threads + ?Sized>(
    threads: &T,
    id: &str,
    thread: &ThreadRef,
    i: usize,
) -> Result<(), T::Error> {
    let field = format!("MESS[{i}].suggestion.id");
    let ref_shaped = id.len() > 11
        && chrono::NaiveDate::parse_from_str(&id[..10], "%Y-%m-%d").is_ok()
        && id[10..].starts_with('-')
        && id[11..].bytes().all(|b| b.is_ascii_digit());
    if ref_shaped {
        return Err(ProtocolError::invalid(field, "a suggestion id cannot be a thread ref").into());
    }
    let Some(requestor) = threads.envelope(thread)?.map(|env| env.requestor) else {
        return Err(T::not_found(no_thread(thread.as_str())));
    };
    if threads
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
