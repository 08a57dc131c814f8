//! The background router of a server: routes pending threads that wait for executors
//! (created while routing runs in the background, whose dependencies just completed, or that
//! nobody could take when they came in) in batches, one `route_batch` statement per pass.
//! Creates are acknowledged as soon as their file is durable; routing follows within one pass.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::db::error::DbError;
use crate::db::{RouteWanted, Routed};
use crate::exchange::error::Error;
use crate::exchange::{Exchange, lifecycle, plan};
use crate::protocol::config::Prefer;
use crate::protocol::envelope::{EXCHANGE, Envelope};
use crate::protocol::ids::ThreadRef;
use crate::protocol::request::Priority;
use crate::protocol::status::{State, Status};
use crate::protocol::time::Timestamp;
use crate::store::error::StoreError;
use crate::store::{Edit, HeadMemo};

/// Who gets the work: routing waiting threads, escalating unclaimed ones, settling
/// dependencies.
#[derive(Clone, Copy)]
pub struct Routing<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// Routing, escalation and settling of waiting threads.
    pub fn routing(&self) -> Routing<'_> {
        Routing { ex: self }
    }
}

/// What one routing pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Threads routed (a `dispatched` entry was written).
    pub routed: Vec<ThreadRef>,
    /// Threads still waiting: no executor is eligible now (tried again on the next full pass).
    pub waiting: Vec<ThreadRef>,
    /// The earliest `not_before` still ahead among the threads looked at: the router
    /// wakes for it.
    pub next_start: Option<Timestamp>,
}

/// What a pass does with one thread.
enum Wanted {
    /// Route it.
    Route(RouteWanted),
    /// Offer it to these executors, chosen without the routing statement (an approval's
    /// approvers).
    Offer(Vec<Routed>),
    /// Nothing now: its `not_before` is this instant.
    Later(Timestamp),
    /// Nothing: it is not waiting for an executor (or not ready).
    No,
}

/// Which threads a pass looks at.
#[derive(Debug, Clone)]
pub enum PassScope {
    /// Every pending thread (at start, after missed changes, and on the retry interval).
    All,
    /// These threads, and the dependents of those among them that completed.
    Threads(Vec<ThreadRef>),
}

/// What a thread's history says when it cannot be routed: the problem when it is the thread's
/// own (an invalid requirement, an unreadable message), a pointer to the log otherwise (a
/// store or database failure may name server paths).
fn unroutable_reason(e: &Error) -> String {
    match e.kind() {
        crate::exchange::error::ErrorKind::Invalid | crate::exchange::error::ErrorKind::Malformed => {
            format!("cannot be routed: {e}")
        }
        _ => "cannot be routed: its request could not be read (the server log and `mess fsck` have the details)"
            .to_owned(),
    }
}

/// How long work of `priority` waits unclaimed before it is offered more widely:
/// `dispatch.escalate_after` for normal work, a quarter of it for urgent work, half for
/// elevated, twice as long for background work.
fn escalation_delay(after: chrono::TimeDelta, priority: Priority) -> chrono::TimeDelta {
    match priority {
        Priority::Urgent => after / 4,
        Priority::Elevated => after / 2,
        Priority::Normal => after,
        Priority::Background => after * 2,
    }
}

fn waits_for_routing(env: &Envelope, now: Timestamp) -> bool {
    env.status == Status::Pending
        && !env.dispatched()
        && env.expires.or(env.needed_by).is_none_or(|t| t > now)
}

/// Routing time a burst of passes may take back to back before the router rests.
const BURST: Duration = Duration::from_millis(250);

/// Routing decisions a pass records at once.
const RECORDING_LANES: usize = 8;

/// What recording one routing decision did.
enum Recorded {
    /// The thread was offered to its executors.
    Offered,
    /// Routing found no executor: the thread waits.
    NoExecutor,
    /// The thread no longer waited for routing (claimed, canceled or routed meanwhile).
    Moved,
}

/// The most routing time owed: a burst after a long busy spell waits at most
/// `2 * (OWED_AT_MOST - BURST)` for its pass.
const OWED_AT_MOST: Duration = Duration::from_secs(1);

/// CPU time the calling thread has used (the routing pass runs on one blocking thread; what
/// DuckDB's own workers spend on its statement is not in it).
fn thread_cpu() -> Duration {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD).map_or(
        Duration::ZERO,
        |usage| {
            let (user, system) = (usage.user_time(), usage.system_time());
            let micros = |t: nix::sys::time::TimeVal| {
                u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000
                    + u64::try_from(t.tv_usec()).unwrap_or(0)
            };
            Duration::from_micros(micros(user) + micros(system))
        },
    )
}

/// Runs the router until `stop`: a pass over every pending thread at start and every
/// `retry`, and in between a pass over the threads each batch of changes names. Changes that
/// arrive during a pass wait for the next one, so under load each pass routes many threads;
/// beyond a short burst, the router rests so that routing takes at most half of one core
/// from the requests themselves.
pub fn run(ex: Exchange, stop: CancellationToken, retry: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = ex.changes().subscribe();
        let mut full = true;
        let mut named: BTreeSet<ThreadRef> = BTreeSet::new();
        let mut next_full = Instant::now();
        // Routing time owed: each pass adds its duration, wall time pays it back at half
        // speed, and passes wait while more than a burst's worth is owed. A lone request is
        // routed at once; under sustained load routing keeps to half of one core.
        let mut owed = Duration::ZERO;
        let mut settled = Instant::now();
        let mut rested = Instant::now();
        // When the earliest `not_before` seen comes: a full pass then offers that work.
        let mut next_start: Option<Instant> = None;
        loop {
            if next_start.is_some_and(|t| Instant::now() >= t) {
                next_start = None;
                full = true;
            }
            if full || (!named.is_empty() && Instant::now() >= rested) {
                let scope = if full {
                    next_full = Instant::now() + retry;
                    named.clear();
                    PassScope::All
                } else {
                    PassScope::Threads(std::mem::take(&mut named).into_iter().collect())
                };
                full = false;
                let worker = ex.clone();
                let escalate = matches!(scope, PassScope::All);
                let mut spent = Duration::ZERO;
                match tokio::task::spawn_blocking(move || {
                    let started = thread_cpu();
                    let pass = worker.routing().route_waiting(scope);
                    let pass = pass.and_then(|pass| {
                        if escalate {
                            worker.routing().escalate_due()?;
                        }
                        Ok::<_, Error>(pass)
                    });
                    (pass, thread_cpu().saturating_sub(started))
                })
                .await
                .map(|(pass, cpu)| {
                    spent = cpu;
                    pass
                }) {
                    Ok(Ok(pass)) => {
                        if let Some(at) = pass.next_start {
                            let ahead = (at - ex.now()).to_std().unwrap_or(Duration::ZERO);
                            let when = Instant::now() + ahead + Duration::from_millis(5);
                            next_start = Some(next_start.map_or(when, |t| t.min(when)));
                        }
                        if !pass.routed.is_empty() {
                            tracing::debug!(
                                routed = pass.routed.len(),
                                waiting = pass.waiting.len(),
                                "routing pass"
                            );
                        }
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "routing pass failed; retrying later")
                    }
                    Err(e) => tracing::error!(error = %e, "routing pass panicked"),
                }
                let now = Instant::now();
                // The CPU the pass used, not its wall time: on a busy machine a pass waits for a
                // core, and counting that wait starved routing for seconds after a load.
                owed = (owed.saturating_sub((now - settled) / 2) + spent).min(OWED_AT_MOST);
                settled = now;
                rested = now + owed.saturating_sub(BURST) * 2;
            }
            let mut wake = if named.is_empty() {
                next_full
            } else {
                rested.min(next_full)
            };
            if let Some(t) = next_start {
                wake = wake.min(t);
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(wake) => {
                    full = Instant::now() >= next_full
                        || next_start.is_some_and(|t| Instant::now() >= t);
                }
                change = changes.recv() => match change {
                    Ok(c) => {
                        note(&mut named, &c.envelope);
                        // Everything already queued joins this pass.
                        loop {
                            match changes.try_recv() {
                                Ok(c) => note(&mut named, &c.envelope),
                                Err(TryRecvError::Lagged(_)) => full = true,
                                Err(_) => break,
                            }
                        }
                    }
                    Err(RecvError::Lagged(_)) => full = true,
                    Err(RecvError::Closed) => return,
                },
            }
        }
    })
}

/// Remembers the threads a change may make routable: a new or changed pending thread that is
/// not routed yet, and a completed thread (whose dependents may now be ready).
fn note(named: &mut BTreeSet<ThreadRef>, env: &Envelope) {
    let waits = env.status == Status::Pending && !env.dispatched();
    if waits || env.status == Status::Completed {
        named.insert(env.thread_ref.clone());
    }
}

impl Routing<'_> {
    /// Routes the pending threads in `scope` that wait for executors, all in one statement, and
    /// records each decision; threads claimed, canceled or routed meanwhile are left alone.
    pub fn route_waiting(&self, scope: PassScope) -> Result<Pass, Error> {
        let started = std::time::Instant::now();
        let pass = self.pass(scope);
        if let Ok(p) = &pass {
            crate::exchange::telemetry::routing_pass(started.elapsed(), p.routed.len());
        }
        pass
    }

    /// One routing pass (see [`Routing::route_waiting`]).
    fn pass(&self, scope: PassScope) -> Result<Pass, Error> {
        let now = self.ex.now();
        // A pass over the threads that just changed reads each once (a pass over all pending
        // threads needs only their heads, and holds none).
        let _threads = matches!(scope, PassScope::Threads(_)).then(HeadMemo::open);
        let candidates: Vec<ThreadRef> = match scope {
            PassScope::All => {
                // A process that keeps the open threads knows which were never dispatched.
                if let Some(unrouted) = self.ex.queue.unrouted() {
                    unrouted
                } else {
                    // Urgent work first, then the oldest: the order every pending list follows.
                    let (mut pending, _) = self.ex.store().list(&[State::Received], false);
                    pending.sort_by(|a, b| a.0.queue_key().cmp(&b.0.queue_key()));
                    pending
                        .into_iter()
                        .map(|(env, _, _)| env.thread_ref)
                        .collect()
                }
            }
            PassScope::Threads(threads) => {
                let mut all = threads.clone();
                for thread in &threads {
                    all.extend(self.ex.store().dependents(thread)?);
                }
                all
            }
        };
        let mut seen = HashSet::new();
        let mut wanted = Vec::new();
        let mut pass = Pass::default();
        for thread in candidates {
            if !seen.insert(thread.clone()) {
                continue;
            }
            // One thread that cannot be routed (a broken message document, a required
            // capability no id can match) waits, and says why; it does not hold up the others.
            match self.waiting_request(&thread, now) {
                Ok(Wanted::Route(w)) => wanted.push(w),
                Ok(Wanted::Offer(routed)) => match self.record_decision(&thread, &routed, now) {
                    Ok(Recorded::Offered) => pass.routed.push(thread),
                    Ok(Recorded::NoExecutor) => pass.waiting.push(thread),
                    Ok(Recorded::Moved) | Err(Error::Store(StoreError::NotFound { .. })) => {}
                    Err(e) => return Err(e),
                },
                Ok(Wanted::No) => {}
                Ok(Wanted::Later(until)) => {
                    pass.next_start = Some(pass.next_start.map_or(until, |t| t.min(until)));
                }
                Err(e) => {
                    tracing::warn!(thread = %thread, error = %e, "cannot route this thread");
                    self.note_unroutable(&thread, &unroutable_reason(&e), now);
                    pass.waiting.push(thread);
                }
            }
        }
        if wanted.is_empty() {
            if !pass.routed.is_empty() {
                self.ex.outbox().wake_deliveries();
            }
            return Ok(pass);
        }
        let db = self
            .ex
            .db()
            .map_err(|message| Error::Db(DbError::Failed { message }))?;
        // Routing reads the executors and rules as checked here, so no registration can make
        // the statement fail for everyone.
        let directory = self.ex.directory().routing();
        let decisions = match db.route_batch(&wanted, &now, Some(&directory)) {
            Ok(d) => d,
            Err(e) => {
                // Whatever made the batch fail, route each thread alone: the others go on, the
                // one at fault waits with its reason.
                tracing::warn!(error = %e, "a routing batch failed; routing its threads one by one");
                let mut one_by_one = Vec::with_capacity(wanted.len());
                for w in &wanted {
                    match db.route_batch(std::slice::from_ref(w), &now, Some(&directory)) {
                        Ok(mut d) => one_by_one.push(d.pop().unwrap_or_default()),
                        Err(e) => {
                            if let Ok(thread) = ThreadRef::parse(&w.thread) {
                                tracing::warn!(thread = %thread, error = %e, "cannot route this thread");
                                self.note_unroutable(
                                    &thread,
                                    "the routing statement failed for it (the server log has the details)",
                                    now,
                                );
                            }
                            one_by_one.push(Vec::new());
                        }
                    }
                }
                one_by_one
            }
        };
        let decided: Vec<(ThreadRef, Vec<Routed>)> = wanted
            .iter()
            .zip(decisions)
            .filter_map(|(w, routed)| Some((ThreadRef::parse(&w.thread).ok()?, routed)))
            .collect();
        // Each decision is its own durable write; several run at once, so their flushes
        // overlap (a disk completes many concurrent flushes in about the time of one) and a
        // burst of requests is offered within a fraction of a second.
        let lanes = decided.len().clamp(1, RECORDING_LANES);
        let recorded: Vec<Vec<(ThreadRef, Result<Recorded, Error>)>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..lanes)
                    .map(|lane| {
                        let decided = &decided;
                        scope.spawn(move || {
                            decided
                                .iter()
                                .skip(lane)
                                .step_by(lanes)
                                .map(|(thread, routed)| {
                                    (thread.clone(), self.record_decision(thread, routed, now))
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_default())
                    .collect()
            });
        let mut failed = None;
        for (thread, outcome) in recorded.into_iter().flatten() {
            match outcome {
                Ok(Recorded::Offered) => pass.routed.push(thread),
                Ok(Recorded::NoExecutor) => pass.waiting.push(thread),
                Ok(Recorded::Moved) | Err(Error::Store(StoreError::NotFound { .. })) => {}
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if !pass.routed.is_empty() {
            self.ex.outbox().wake_deliveries();
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(pass)
    }

    /// Records one routing decision on its thread, with its notices, unless the thread was
    /// claimed, canceled or routed meanwhile.
    fn record_decision(
        &self,
        thread: &ThreadRef,
        routed: &[Routed],
        now: Timestamp,
    ) -> Result<Recorded, Error> {
        if routed.is_empty() {
            return Ok(Recorded::NoExecutor);
        }
        // The notices are written with the decision (before it on files, in its transaction
        // in a database), so no routed thread goes untold; one queued before under the same
        // id is not queued again.
        let executors: Vec<String> = routed.iter().map(|r| r.executor.clone()).collect();
        let deliveries = self.ex.outbox().notices(thread, &executors, "new", now)?;
        let recorded = self.ex.store().modify(thread, |t| -> Result<_, Error> {
            if !waits_for_routing(&t.envelope, now) {
                return Ok((None, false));
            }
            let mut envelope = t.envelope.clone();
            lifecycle::record_routed(&mut envelope, routed, now);
            Ok((
                Some(Edit {
                    envelope,
                    append: Vec::new(),
                    deliveries: deliveries.clone(),
                }),
                true,
            ))
        })?;
        Ok(if recorded {
            Recorded::Offered
        } else {
            Recorded::Moved
        })
    }

    /// Offers every pending thread that was routed more than `dispatch.escalate_after` ago and
    /// is still unclaimed to the `default` routing rule's executors (those able to take it),
    /// once: an `escalated` history entry names them and each gets an `escalated` notice. The
    /// deadline is read from the thread's own history, so a restart keeps it. Returns the
    /// threads escalated.
    pub fn escalate_due(&self) -> Result<Vec<ThreadRef>, Error> {
        let mut escalated = self.climb_ladders()?;
        escalated.extend(self.escalate_unclaimed()?);
        Ok(escalated)
    }

    /// Moves the offer of every pending thread with an escalation ladder up to each rung whose
    /// time has come (counted from when the request was received), once per rung: an
    /// `escalated` history entry names the rung and who it reaches, and each of them gets an
    /// `escalated` notice. The rung that ends the ladder is a deadline, which expiry keeps.
    pub fn climb_ladders(&self) -> Result<Vec<ThreadRef>, Error> {
        let now = self.ex.now();
        let (pending, _) = self.ex.store().list(&[State::Received], false);
        let due = |env: &Envelope| -> Option<usize> {
            if env.status != Status::Pending || env.hands.escalate.is_empty() {
                return None;
            }
            let reached = crate::protocol::access::rungs_reached(env);
            let rung = env.hands.escalate.get(reached)?;
            (!rung.to.is_empty() && env.created + rung.after.length <= now).then_some(reached)
        };
        let mut climbed = Vec::new();
        for (env, _, _) in pending {
            let Some(index) = due(&env) else {
                continue;
            };
            let directory = self.ex.directory();
            let rung = &env.hands.escalate[index];
            let reached: Vec<String> = directory
                .executors
                .iter()
                .filter(|e| {
                    let caps = e.capability_ids();
                    rung.to
                        .iter()
                        .any(|x| *x == e.id || caps.contains(&x.as_str()))
                })
                .map(|e| e.id.clone())
                .collect();
            let thread = env.thread_ref.clone();
            let deliveries = self
                .ex
                .outbox()
                .notices(&thread, &reached, "escalated", now)?;
            let note = format!(
                "rung {} of {} after {}: offered to {}",
                index + 1,
                env.hands.escalate.len(),
                rung.after.text,
                if reached.is_empty() {
                    format!("nobody registered ({})", rung.to.join(", "))
                } else {
                    reached.join(", ")
                }
            );
            let still_due = |env: &Envelope| due(env) == Some(index);
            if self.record_escalation(
                &thread,
                &still_due,
                &note,
                Some(index + 1),
                &deliveries,
                now,
            )? {
                climbed.push(thread);
            }
        }
        Ok(climbed)
    }

    /// The escalation of `dispatch.escalate_after` (see [`Routing::escalate_due`]).
    fn escalate_unclaimed(&self) -> Result<Vec<ThreadRef>, Error> {
        let Some(after) = self.ex.settings().dispatch.escalate_after else {
            return Ok(Vec::new());
        };
        let Ok(after) = chrono::TimeDelta::from_std(after) else {
            return Ok(Vec::new());
        };
        let now = self.ex.now();
        let directory = self.ex.directory();
        let fallback: Vec<String> = directory
            .rules
            .iter()
            .filter(|r| r.matcher.is_none())
            .flat_map(|r| match &r.prefer {
                Prefer::Executors(ids) => ids.clone(),
                Prefer::Strategy(_) => Vec::new(),
            })
            .collect();
        if fallback.is_empty() {
            return Ok(Vec::new());
        }
        let due = |env: &Envelope| {
            env.status == Status::Pending
                && env.hands.escalate.is_empty()
                && env.hands.approval.is_none()
                && !env.history.iter().any(|h| h.action == "escalated")
                && env
                    .history
                    .iter()
                    .find(|h| h.action == "dispatched")
                    .is_some_and(|h| h.at + escalation_delay(after, env.priority) <= now)
        };
        // A process that keeps the open threads reads only those whose time has come.
        let pending: Vec<Envelope> = match self
            .ex
            .queue
            .escalation_due(|priority, at| at + escalation_delay(after, priority) <= now)
        {
            Some(candidates) => candidates
                .iter()
                .filter_map(|t| self.ex.store().envelope(t).ok().map(|(env, _)| env))
                .collect(),
            None => {
                let (mut pending, _) = self.ex.store().list(&[State::Received], false);
                pending.sort_by(|a, b| a.0.queue_key().cmp(&b.0.queue_key()));
                pending.into_iter().map(|(env, _, _)| env).collect()
            }
        };
        let mut escalated = Vec::new();
        for env in pending.into_iter().filter(|env| due(env)) {
            let able: Vec<String> = fallback
                .iter()
                .filter(|id| {
                    directory
                        .executor(id)
                        .is_some_and(|spec| directory.missing(spec, &env.requires).is_empty())
                })
                .cloned()
                .collect();
            let thread = env.thread_ref.clone();
            let deliveries = self.ex.outbox().notices(&thread, &able, "escalated", now)?;
            let note = if able.is_empty() {
                "unclaimed; no executor of the default rule can take it".to_owned()
            } else {
                format!("unclaimed; offered to {}", able.join(", "))
            };
            if self.record_escalation(&thread, &due, &note, None, &deliveries, now)? {
                escalated.push(thread);
            }
        }
        Ok(escalated)
    }

    /// Writes an `escalated` history entry (naming its `rung` of a ladder, if any) with its
    /// notices, when `still_due` holds for the thread as it is under its lock; whether it did.
    fn record_escalation(
        &self,
        thread: &ThreadRef,
        still_due: &dyn Fn(&Envelope) -> bool,
        note: &str,
        rung: Option<usize>,
        deliveries: &[crate::store::outbox::Delivery],
        now: Timestamp,
    ) -> Result<bool, Error> {
        let written = self.ex.store().modify(thread, |t| -> Result<_, Error> {
            if !still_due(&t.envelope) {
                return Ok((None, false));
            }
            let mut envelope = t.envelope.clone();
            envelope.record("escalated", now, EXCHANGE, Some(note.to_owned()));
            if let (Some(rung), Some(entry)) = (rung, envelope.history.last_mut()) {
                entry
                    .extra
                    .insert("rung", crate::protocol::value::Value::Int(rung as i64));
            }
            Ok((
                Some(Edit {
                    envelope,
                    append: Vec::new(),
                    deliveries: deliveries.to_vec(),
                }),
                true,
            ))
        });
        match written {
            Ok(true) => {
                self.ex.outbox().wake_deliveries();
                Ok(true)
            }
            Ok(false) | Err(Error::Store(StoreError::NotFound { .. })) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Records in `thread`'s history why it cannot be routed (an `unroutable` entry), once per
    /// reason, so `mess status` and `mess fsck` can say why it waits; a thread that changed
    /// meanwhile, or already says so, is left alone.
    fn note_unroutable(&self, thread: &ThreadRef, reason: &str, now: Timestamp) {
        let written = self.ex.store().modify(thread, |t| -> Result<_, Error> {
            let env = &t.envelope;
            let said = env.unroutable() == Some(reason);
            if env.status != Status::Pending || said {
                return Ok((None, ()));
            }
            let mut envelope = env.clone();
            envelope.record("unroutable", now, EXCHANGE, Some(reason.to_owned()));
            Ok((
                Some(Edit {
                    envelope,
                    append: Vec::new(),
                    deliveries: Vec::new(),
                }),
                (),
            ))
        });
        if let Err(e) = written {
            tracing::warn!(thread = %thread, error = %e, "cannot record why this thread waits");
        }
    }

    /// The routing input of `thread` if it is pending, not yet routed, not overdue, and every
    /// dependency has completed.
    fn waiting_request(&self, thread: &ThreadRef, now: Timestamp) -> Result<Wanted, Error> {
        let env = match self.ex.store().envelope(thread) {
            Ok((env, _)) => env,
            Err(StoreError::NotFound { .. }) => return Ok(Wanted::No),
            Err(e) => return Err(e.into()),
        };
        if !waits_for_routing(&env, now) {
            return Ok(Wanted::No);
        }
        if env.too_early(now) {
            return Ok(Wanted::Later(env.not_before.unwrap_or(now)));
        }
        if !env.depends_on.is_empty()
            && !plan::dependency_statuses(self.ex, &env)?
                .iter()
                .all(|(_, s)| *s == Some(Status::Completed))
        {
            return Ok(Wanted::No);
        }
        // An approval goes to everyone who may decide it, whatever the routing rules say.
        if env.hands.approval.is_some() {
            let directory = self.ex.directory();
            return Ok(Wanted::Offer(
                crate::exchange::hands::approvers(&env, &directory)
                    .into_iter()
                    .map(|executor| Routed {
                        executor,
                        reason: "named approver".to_owned(),
                    })
                    .collect(),
            ));
        }
        let file = match self.ex.store().read(thread) {
            Ok(f) => f,
            Err(StoreError::NotFound { .. }) => return Ok(Wanted::No),
            Err(e) => return Err(e.into()),
        };
        let input = lifecycle::route_input(&file)?;
        // Requests from before capability ids were checked at the door (or files written by
        // hand) may require an id routing cannot match safely.
        for id in &input.requires {
            crate::protocol::ids::check_capability_id(id).map_err(|why| {
                Error::from(crate::protocol::error::ProtocolError::invalid(
                    "requires", why,
                ))
            })?;
        }
        Ok(Wanted::Route(input.wanted(thread.to_string())))
    }
}

impl Routing<'_> {
    /// Expires every pending thread whose `needed_by` has passed and settles pending threads
    /// whose dependencies finished; returns the refs that changed.
    pub fn settle_pending(&self) -> Result<Vec<ThreadRef>, Error> {
        lifecycle::settle_all(self.ex, self.ex.now())
    }
}
