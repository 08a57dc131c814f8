//! The job worker: the outbox holds jobs of named kinds ([`Job`]: notices, forwards,
//! callbacks, robot calls, suggestions' carrying out, settlements), and a long-running
//! process works them off with at most `PARALLEL` in flight. Each kind has its handler (in its
//! own module), its retry policy (`Outbox::retry_policy`) and its failure
//! (`outcome::JobError`); what an attempt came to (`outcome::Outcome`) is recorded in one
//! place, so a new kind is one variant, one handler and one policy. Jobs are records in the
//! store, so a restart resumes them all.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::exchange::outcome::{JobError, Outcome};
use crate::exchange::{Error, Exchange, backoff, callbacks, peers, robots, suggestions};
use crate::notify::Notifier;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::Status;
use crate::protocol::time::{self, Timestamp};
use crate::store::outbox::{Attempt, Delivery, Job, Shelf};

/// The outbox and its work: notices queued and sent, the other kinds of job (forwards,
/// callbacks, robot calls, carry-outs, settlements) retried by their policies, and what
/// operators see of them. One of the parts `Exchange` hands out ([`Exchange::outbox`]).
#[derive(Clone, Copy)]
pub struct Outbox<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// The outbox: notices and the other jobs.
    pub fn outbox(&self) -> Outbox<'_> {
        Outbox { ex: self }
    }
}

/// Jobs in flight at once.
const PARALLEL: usize = 16;
/// How long records of finished jobs are kept in `done/`.
const KEEP_DONE: Duration = Duration::from_secs(14 * 24 * 3600);
/// How often old records are swept.
const SWEEP_DONE: Duration = Duration::from_secs(3600);
/// Failed attempts a record keeps (the latest): a kind retried until done would otherwise grow
/// its record forever. Sixteen doublings of any first wait pass every longest wait, so the
/// backoff, which counts the attempts kept, is not shortened by forgetting older ones.
const KEEP_ATTEMPTS: usize = 16;

/// How often at most sent notices are followed up: the threads that changed meanwhile are
/// looked at together (under load, one lookup for many changes instead of one each).
const FOLLOW_UP_EVERY: Duration = Duration::from_millis(100);

/// How often the worker looks at the outbox even when nothing woke it (jobs queued by other
/// processes, such as a `mess request` on the command line).
const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// How a kind of job is retried after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Attempts before it is given up; `None`: until it succeeds.
    pub attempts: Option<u32>,
    /// The wait after the first failure; it doubles with each further one (with jitter).
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
}

/// How one attempt ended, for the worker's bookkeeping.
enum Attempted {
    /// Shelved (sent, done or failed): nothing more to do.
    Finished,
    /// Back in the queue, as written (a retry, or a notice waiting for its thread).
    Requeued(Box<Delivery>),
    /// Sent, or perhaps sent, but not recorded: not tried again by this process, so a broken
    /// disk cannot turn one notice into a message every few seconds.
    Stuck,
}

/// The outbox by kind of job: what [`Outbox::jobs`] counts.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JobsReport {
    /// One row per kind that has jobs (named as [`Job::KINDS`] lists them).
    pub kinds: BTreeMap<&'static str, JobCounts>,
    /// Records that could not be read, each as what went wrong (naming the record).
    pub unreadable: Vec<String>,
}

/// One kind's jobs in the outbox.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JobCounts {
    /// Waiting to be sent or done.
    pub queued: usize,
    /// Of those, due now.
    pub due: usize,
    /// Of those, failed at least once.
    pub retrying: usize,
    /// Sent, kept until their thread is taken (so the message can be updated).
    pub sent: usize,
    /// Finished (kept two weeks).
    pub done: usize,
    /// Given up.
    pub failed: usize,
    /// When the earliest queued one is due.
    pub oldest_due: Option<Timestamp>,
    /// The latest failed attempt of a queued one: when, and what went wrong.
    pub last_error: Option<(Timestamp, String)>,
}

/// One attempt of one job: its kind's handler, then the record of what it came to (both off
/// the async workers where they touch the store).
async fn attempt(ex: &Exchange, notifier: &Notifier, job: &Delivery) -> Attempted {
    let outcome = match &job.job {
        Job::Notice(_) => ex.outbox().send_notice(notifier, job).await,
        Job::Callback => callbacks::call_back(ex, notifier, job).await,
        Job::Forward => peers::forward(ex, job).await,
        Job::RobotCall => robots::call(ex, job).await,
        Job::CarryOut | Job::Settlement => {
            let (worker, job) = (ex.clone(), job.clone());
            tokio::task::spawn_blocking(move || worker.outbox().work(&job))
                .await
                .unwrap_or(Outcome::Unknown)
        }
    };
    if let Outcome::Failed(e) = &outcome {
        tracing::warn!(job = %job.id, kind = job.job.kind(), error = %e, "job attempt failed");
    }
    if matches!(outcome, Outcome::Unknown) {
        tracing::error!(job = %job.id, "a job's handler stopped without an answer; it waits for a restart");
        return Attempted::Stuck;
    }
    let (worker, recorded) = (ex.clone(), job.clone());
    match tokio::task::spawn_blocking(move || worker.outbox().record_attempt(&recorded, outcome))
        .await
    {
        Ok(Ok(Some(requeued))) => Attempted::Requeued(Box::new(requeued)),
        Ok(Ok(None)) => Attempted::Finished,
        Ok(Err(e)) => {
            tracing::error!(job = %job.id, error = %e, "cannot record the job; it waits for a restart");
            Attempted::Stuck
        }
        Err(e) => {
            tracing::error!(job = %job.id, error = %e, "recording the job panicked");
            Attempted::Stuck
        }
    }
}

/// Runs the job worker until `stop`: works off due jobs (at most `PARALLEL` at once), reads
/// the queue again when jobs are queued in this process, when a retry is requeued, and every
/// `LOOK_AGAIN` (for other processes' jobs), and follows up sent notices when threads change.
pub fn run(
    ex: Exchange,
    notifier: Notifier,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let notifier = Arc::new(notifier);
        let mut changes = ex.changes().subscribe();
        let mut in_flight: HashSet<String> = HashSet::new();
        let mut tasks: tokio::task::JoinSet<(String, Attempted)> = tokio::task::JoinSet::new();
        let mut ids: std::collections::HashMap<tokio::task::Id, String> =
            std::collections::HashMap::new();
        let mut waiting: Vec<Delivery> = Vec::new();
        let (mut follow_all, mut reload) = (true, true);
        // Threads whose sent notices may need an update.
        let mut follow: HashSet<String> = HashSet::new();
        // Jobs this process will not try again (sent but unrecorded, or panicked); they take
        // no slot, so they cannot stall the others.
        let mut stuck: HashSet<String> = HashSet::new();
        let mut looked = tokio::time::Instant::now();
        let mut swept: Option<tokio::time::Instant> = None;
        let mut followed: Option<tokio::time::Instant> = None;
        loop {
            if swept.is_none_or(|t| t.elapsed() >= SWEEP_DONE) {
                swept = Some(tokio::time::Instant::now());
                let worker = ex.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let _ = worker.store().prune_done(KEEP_DONE);
                    worker.store().prune_short_links(worker.now().timestamp())
                })
                .await;
            }
            let follow_due = followed.is_none_or(|t| t.elapsed() >= FOLLOW_UP_EVERY);
            if (follow_all || !follow.is_empty()) && follow_due {
                followed = Some(tokio::time::Instant::now());
                let only = (!follow_all).then(|| std::mem::take(&mut follow));
                follow_all = false;
                follow.clear();
                let worker = ex.clone();
                match tokio::task::spawn_blocking(move || {
                    worker.outbox().follow_up_sent(only.as_ref())
                })
                .await
                {
                    Ok(Err(e)) => tracing::warn!(error = %e, "following up sent notices failed"),
                    Err(e) => tracing::error!(error = %e, "following up sent notices panicked"),
                    Ok(Ok(_)) => {}
                }
            }
            if reload || looked.elapsed() >= LOOK_AGAIN {
                reload = false;
                looked = tokio::time::Instant::now();
                let worker = ex.clone();
                let mut fresh = tokio::task::spawn_blocking(move || worker.store().queued())
                    .await
                    .map(|(q, _)| q)
                    .unwrap_or_default();
                // On a database a look leases only what nobody holds: the jobs this node
                // leased earlier and has not started yet (all slots busy) stay in its list, or
                // they would wait out their lease undone.
                if ex.store().is_shared_by_nodes() {
                    let listed: HashSet<String> = fresh.iter().map(|d| d.id.clone()).collect();
                    fresh.extend(waiting.drain(..).filter(|d| !listed.contains(&d.id)));
                }
                waiting = fresh;
                waiting.retain(|d| !in_flight.contains(&d.id) && !stuck.contains(&d.id));
            }
            let now = ex.now();
            let mut next = looked + LOOK_AGAIN;
            if let Some(t) = followed
                && (follow_all || !follow.is_empty())
            {
                next = next.min(t + FOLLOW_UP_EVERY);
            }
            let mut later = Vec::with_capacity(waiting.len());
            for d in waiting.drain(..) {
                if d.due > now {
                    let ahead = (d.due - now).to_std().unwrap_or(Duration::ZERO);
                    next = next.min(tokio::time::Instant::now() + ahead);
                    later.push(d);
                    continue;
                }
                // Due, but the slots are full: it goes when a task finishes.
                if in_flight.len() >= PARALLEL {
                    later.push(d);
                    continue;
                }
                in_flight.insert(d.id.clone());
                let (ex, notifier) = (ex.clone(), notifier.clone());
                let id = d.id.clone();
                let task = tasks.spawn(async move {
                    let attempted = attempt(&ex, &notifier, &d).await;
                    (d.id, attempted)
                });
                ids.insert(task.id(), id);
            }
            waiting = later;
            tokio::select! {
                () = stop.cancelled() => break,
                done = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let (id, attempted) = match done {
                        Some(Ok((task, (id, attempted)))) => {
                            ids.remove(&task);
                            (id, attempted)
                        }
                        Some(Err(e)) => {
                            tracing::error!(error = %e, "a job task panicked; it waits for a restart");
                            (ids.remove(&e.id()).unwrap_or_default(), Attempted::Stuck)
                        }
                        None => continue,
                    };
                    in_flight.remove(&id);
                    // A sent notice may have landed on sent/ after its thread was taken.
                    if let Some(thread) = id.split('.').next() {
                        follow.insert(thread.to_owned());
                    }
                    match attempted {
                        Attempted::Finished => {}
                        Attempted::Requeued(d) => waiting.push(*d),
                        Attempted::Stuck => {
                            stuck.insert(id);
                        }
                    }
                }
                () = ex.deliveries.notified() => reload = true,
                () = tokio::time::sleep_until(next) => {}
                change = changes.recv() => match change {
                    Ok(c) if c.status != Status::Pending => {
                        follow.insert(c.thread.to_string());
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => follow_all = true,
                    Err(RecvError::Closed) => break,
                },
            }
        }
        // Attempts in flight finish (each is bounded by the channel timeout) and record.
        while tasks.join_next().await.is_some() {}
    })
}

impl Outbox<'_> {
    /// How `job` is retried. Messages follow the `dispatch:` policy (8 attempts from 2 s up
    /// to 10 min apart by default), and their last failure is noted in the thread. The
    /// exchange's own work uses the same waits but never gives up: a settlement left undone
    /// would keep shells in escrow, and every step of it is idempotent.
    pub(crate) fn retry_policy(&self, job: &Job) -> RetryPolicy {
        let dispatch = &self.ex.settings().dispatch;
        RetryPolicy {
            attempts: (!job.is_internal()).then_some(dispatch.attempts),
            first: dispatch.first_retry,
            max: dispatch.max_retry,
        }
    }

    /// The wait after the `tries`-th failure under `policy`, with noise drawn from the store's
    /// random source (the middle of the range when it cannot give any).
    fn backoff(&self, policy: RetryPolicy, tries: u32) -> chrono::TimeDelta {
        let noise = self
            .ex
            .store()
            .random_bytes(2)
            .map(|b| f64::from(u16::from_le_bytes([b[0], b[1]])) / f64::from(u16::MAX))
            .unwrap_or(0.5);
        let wait = backoff::backoff(tries, policy.first, policy.max, noise);
        chrono::TimeDelta::from_std(wait).unwrap_or(chrono::TimeDelta::seconds(1))
    }

    /// Records what an attempt of `job` came to: shelves a sent message (on `sent/` while a
    /// `taken` update may follow) or finished work, requeues a retryable failure with its
    /// kind's backoff, or gives up (noting an undelivered message in the thread). Returns the
    /// job as requeued when it goes back for another try.
    pub(crate) fn record_attempt(
        &self,
        job: &Delivery,
        outcome: Outcome,
    ) -> Result<Option<Delivery>, Error> {
        let now = self.ex.now();
        let mut d = job.clone();
        let counted = match &outcome {
            Outcome::Placed | Outcome::Unknown => None,
            Outcome::Done(_) => Some("done"),
            Outcome::Sent { .. } => Some("sent"),
            Outcome::Failed(e) => {
                let tries = d.attempts.len() as u32 + 1;
                let policy = self.retry_policy(&d.job);
                Some(
                    if e.retryable() && policy.attempts.is_none_or(|most| tries < most) {
                        "retry"
                    } else {
                        "failed"
                    },
                )
            }
        };
        if let Some(outcome) = counted {
            crate::exchange::telemetry::delivery(d.job.kind(), d.job.name(), outcome);
        }
        match outcome {
            Outcome::Placed | Outcome::Unknown => Ok(None),
            Outcome::Done(why) => {
                d.outcome = Some(why);
                self.ex.store().shelve(&d, Shelf::Queue, Shelf::Done)?;
                Ok(None)
            }
            Outcome::Sent { sent, updatable } => {
                d.provider_ref = sent.provider_ref;
                d.outcome = Some(format!("sent {}", time::format_timestamp(&now)));
                // Offers are kept on sent/ so a `taken` update can follow where the channel
                // edits messages in place; everything else is done once sent.
                let offer = matches!(d.kind.as_str(), "new" | "escalated");
                // A callback is the requestor's own: its thread's history does not note it.
                if !matches!(d.kind.as_str(), "taken" | "closed") && d.job != Job::Callback {
                    // Recorded before it is shelved: a crash in between notes it twice at worst.
                    self.record_notified(&d, now);
                }
                let shelf = if offer && updatable {
                    Shelf::Sent
                } else {
                    Shelf::Done
                };
                self.ex.store().shelve(&d, Shelf::Queue, shelf)?;
                Ok(None)
            }
            Outcome::Failed(e) => {
                d.attempts.push(Attempt {
                    at: now,
                    error: e.to_string(),
                });
                let excess = d.attempts.len().saturating_sub(KEEP_ATTEMPTS);
                d.attempts.drain(..excess);
                let tries = d.attempts.len() as u32;
                let policy = self.retry_policy(&d.job);
                if e.retryable() && policy.attempts.is_none_or(|most| tries < most) {
                    d.due = now + self.backoff(policy, tries);
                    self.ex.store().requeue(&d)?;
                    return Ok(Some(d));
                }
                d.outcome = Some(e.to_string());
                // The thread hears of it first: a crash in between retries the job once more
                // rather than losing the note.
                match &e {
                    JobError::Undelivered(failure) => self.record_failure(&d, tries, failure)?,
                    other => {
                        tracing::error!(job = %d.id, error = %other, "the exchange's own work gave up");
                    }
                }
                self.ex.store().shelve(&d, Shelf::Queue, Shelf::Failed)?;
                Ok(None)
            }
        }
    }

    /// Does the exchange's own work `job` (a settlement, a suggestion's carrying out) here and
    /// now; what it came to.
    fn work(&self, job: &Delivery) -> Outcome {
        let Ok(thread) = ThreadRef::parse(&job.thread) else {
            return Outcome::Done("moot: not a thread".to_owned());
        };
        // Thread history and job records are read by others: no server paths in them.
        let scrubbed = |e: Error| self.ex.scrub_home(&e.to_string());
        match job.job {
            Job::Settlement => match self.ex.marketplace().settle_escrow(&thread) {
                Ok(moved) => Outcome::Done(format!(
                    "settled ({})",
                    if moved { "now" } else { "nothing to move" }
                )),
                Err(e) => Outcome::Failed(JobError::Unsettled(scrubbed(e))),
            },
            Job::CarryOut => match suggestions::carry_out(self.ex, &thread, self.ex.now()) {
                Ok(made) => Outcome::Done(format!("carried out: {}", made.join(", "))),
                Err(e) => Outcome::Failed(JobError::NotCarriedOut(scrubbed(e))),
            },
            _ => Outcome::Done(format!(
                "moot: a {} is not the exchange's own work",
                job.job.kind()
            )),
        }
    }

    /// Finishes the exchange's own queued work ([`Job::is_internal`]) here and now, when no
    /// long-running process works on this home: what a one-shot command queued (a settlement
    /// or a suggestion's carrying out that it could not finish inline) or an earlier command
    /// left. Each step is idempotent, so one that a server also runs changes nothing twice.
    /// Returns how many it finished; one that fails stays queued for the next command.
    pub fn finish_internal_work(&self) -> Result<usize, Error> {
        let store = self.ex.store();
        if !store.has_deliveries(Shelf::Queue) || store.worker_alive().unwrap_or(true) {
            return Ok(0);
        }
        let (queued, _) = store.deliveries(Shelf::Queue);
        let mut finished = 0;
        for job in queued.into_iter().filter(|d| d.job.is_internal()) {
            match self.work(&job) {
                Outcome::Failed(e) => {
                    tracing::warn!(job = %job.id, error = %e, "internal work left for later");
                }
                outcome => {
                    self.record_attempt(&job, outcome)?;
                    finished += 1;
                }
            }
        }
        Ok(finished)
    }

    /// Puts the failed job `id` back on the queue, due now, with its attempts forgotten so its
    /// kind's retries start over (an operator's retry, once what failed is fixed).
    pub fn retry(&self, id: &str) -> Result<(), Error> {
        let mut job = self.on_shelf(id, Shelf::Failed)?;
        job.due = self.ex.now();
        job.attempts.clear();
        job.outcome = None;
        self.ex.store().shelve(&job, Shelf::Failed, Shelf::Queue)?;
        tracing::info!(job = %id, "an operator put a failed job back on the queue");
        Ok(())
    }

    /// Gives up the queued job `id` (an operator's cancel): it moves to the failed shelf as
    /// canceled and is not tried again. An attempt already under way may still finish.
    pub fn cancel(&self, id: &str) -> Result<(), Error> {
        let mut job = self.on_shelf(id, Shelf::Queue)?;
        job.outcome = Some(format!(
            "canceled by the operator {}",
            time::format_timestamp(&self.ex.now())
        ));
        self.ex.store().shelve(&job, Shelf::Queue, Shelf::Failed)?;
        tracing::info!(job = %id, "an operator canceled a queued job");
        Ok(())
    }

    /// The job `id` on `shelf`, or why not (it is elsewhere, or nowhere).
    fn on_shelf(&self, id: &str, shelf: Shelf) -> Result<Delivery, Error> {
        // A job's id starts with its thread's ref, which holds no dot: only that thread's
        // records are read.
        let thread = id.split('.').next().unwrap_or_default();
        let only = HashSet::from([thread.to_owned()]);
        let find = |s: Shelf| {
            let (found, _) = self.ex.store().deliveries_of(s, Some(&only));
            found.into_iter().find(|d| d.id == id)
        };
        if let Some(job) = find(shelf) {
            return Ok(job);
        }
        let elsewhere = Shelf::ALL
            .into_iter()
            .filter(|s| *s != shelf)
            .find(|s| find(*s).is_some());
        Err(match elsewhere {
            Some(s) => crate::protocol::error::ProtocolError::conflict(format!(
                "job {id} is on the {} shelf, not the {} shelf",
                s.dir_name(),
                shelf.dir_name()
            ))
            .into(),
            None => Error::NotFound {
                message: format!("no job {id}"),
            },
        })
    }

    /// The outbox by kind of job and shelf, for operators (`mess status --jobs`, `mess fsck`).
    pub fn jobs(&self) -> JobsReport {
        let now = self.ex.now();
        let mut report = JobsReport::default();
        for shelf in Shelf::ALL {
            let (jobs, unreadable) = self.ex.store().deliveries(shelf);
            report
                .unreadable
                .extend(unreadable.iter().map(ToString::to_string));
            for job in jobs {
                let row = report.kinds.entry(job.job.kind()).or_default();
                match shelf {
                    Shelf::Queue => {
                        row.queued += 1;
                        if job.due <= now {
                            row.due += 1;
                        }
                        if !job.attempts.is_empty() {
                            row.retrying += 1;
                        }
                        if row.oldest_due.is_none_or(|t| job.due < t) {
                            row.oldest_due = Some(job.due);
                        }
                        if let Some(last) = job.attempts.last()
                            && row.last_error.as_ref().is_none_or(|(at, _)| last.at > *at)
                        {
                            row.last_error = Some((last.at, last.error.clone()));
                        }
                    }
                    Shelf::Sent => row.sent += 1,
                    Shelf::Done => row.done += 1,
                    Shelf::Failed => row.failed += 1,
                }
            }
        }
        report
    }
}
