//! Waiting inside a tool call (`mess_wait`, and `mess_observe` / `mess_do` with `wait_s`): the
//! next change the caller may hear of, from the exchange's change bus (nothing polls files),
//! with progress heartbeats so clients that reset their call timeout on progress stay patient,
//! and an end at the deadline or when the client cancels the call.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use crate::exchange::ThreadChange;
use crate::exchange::access;
use crate::mcp::MessMcp;
use crate::protocol::ids::ThreadRef;

/// Longest `mess_wait` call, in seconds (also its default): inside the 60 s many clients allow
/// a call whether or not they heed progress.
pub(crate) const MOST_WAIT_S: u32 = 50;

/// Longest wait of `mess_observe` and `mess_do` (`wait_s`), in seconds: beyond 50 s only
/// clients that reset their timeout on progress notifications keep the call open.
pub(crate) const MOST_REQUEST_WAIT_S: u32 = 120;

/// One tool call's wait: when it started and ends, and its heartbeat.
pub(crate) struct Waiting {
    started: std::time::Instant,
    deadline: tokio::time::Instant,
    heartbeat: tokio::time::Interval,
    token: Option<ProgressToken>,
    beats: u32,
}

impl Waiting {
    /// Whole seconds waited so far.
    pub(crate) fn waited_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

/// What ended one step of a wait.
pub(crate) enum Woke {
    /// A change the caller may hear of.
    Change(ThreadChange),
    /// Word from another exchange's events.
    Elsewhere(Word),
    /// Changes were missed (the caller fell behind): read the current state again.
    Lagged,
    /// The deadline passed, the client cancelled the call, or the exchange is stopping.
    Ended,
}

impl MessMcp {
    /// Starts a wait of at most `limit` for the call of `ctx`.
    pub(crate) fn waiting(&self, limit: Duration, ctx: &RequestContext<RoleServer>) -> Waiting {
        let now = tokio::time::Instant::now();
        Waiting {
            started: std::time::Instant::now(),
            deadline: now + limit,
            // The first beat one period in: a beat at once would say nothing.
            heartbeat: tokio::time::interval_at(now + self.heartbeat, self.heartbeat),
            token: ctx.meta.get_progress_token(),
            beats: 0,
        }
    }

    /// Waits for the next change the caller hears of on this exchange, as `here` says (a change
    /// that hides the thread from the caller, such as someone else taking it, is not one it
    /// hears of), or for word from other exchanges on `elsewhere`. Routing decisions change
    /// nothing the caller reads.
    pub(crate) async fn next_change(
        &self,
        waiting: &mut Waiting,
        changes: &mut Receiver<ThreadChange>,
        here: Here<'_>,
        elsewhere: Option<&mut tokio::sync::mpsc::Receiver<Word>>,
        ctx: &RequestContext<RoleServer>,
    ) -> Woke {
        let mut elsewhere = elsewhere;
        loop {
            tokio::select! {
                word = heard(&mut elsewhere) => match word {
                    Some(w) => return Woke::Elsewhere(w),
                    // Every watcher of another exchange is done: only this one is left.
                    None => elsewhere = None,
                },
                () = ctx.ct.cancelled() => return Woke::Ended,
                () = tokio::time::sleep_until(waiting.deadline) => return Woke::Ended,
                _ = waiting.heartbeat.tick() => {
                    if let Some(t) = &waiting.token {
                        waiting.beats += 1;
                        let _ = ctx.peer.notify_progress(
                            ProgressNotificationParam::new(t.clone(), f64::from(waiting.beats))
                                .with_message(format!("waiting, {} s so far", waiting.waited_s())),
                        ).await;
                    }
                }
                change = changes.recv() => match change {
                    Ok(c) if c.is_routing() => {}
                    Ok(c) => {
                        let hears = match here {
                            Here::Thread(t) if &c.thread == t => self.may_see(&c).await,
                            Here::Thread(_) | Here::Nothing => false,
                            Here::Any => access::party(&self.who.id, &c.envelope),
                        };
                        if hears {
                            return Woke::Change(c);
                        }
                    }
                    Err(RecvError::Lagged(_)) => return Woke::Lagged,
                    Err(RecvError::Closed) => return Woke::Ended,
                },
            }
        }
    }

    /// Whether the caller may see the thread as `change` left it (the directory is read off the
    /// async workers, and only when the envelope alone does not tell).
    async fn may_see(&self, change: &ThreadChange) -> bool {
        match access::quick_verdict(&self.who.id, &change.envelope) {
            Some(verdict) => verdict,
            None => {
                let (ex, who, env) = (
                    self.exchange.clone(),
                    self.who.id.clone(),
                    change.envelope.clone(),
                );
                tokio::task::spawn_blocking(move || ex.access().may_see(&who, &env))
                    .await
                    .unwrap_or(false)
            }
        }
    }
}

/// Word from another exchange a wait listens to (its watcher reads the exchange's events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The exchange's name in `exchanges:`.
    pub(crate) exchange: String,
    pub(crate) heard: Heard,
}

/// What a watcher of another exchange heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// A thread changed: its ref, status and `updated` instant.
    Changed {
        thread: String,
        status: String,
        updated: String,
    },
    /// Changes were missed: read again.
    Lagged,
    /// The exchange cannot be reached (why).
    Unreachable(String),
}

/// What of this exchange a wait listens to.
#[derive(Clone, Copy)]
pub(crate) enum Here<'a> {
    /// One thread.
    Thread(&'a ThreadRef),
    /// Every thread the caller is a party to.
    Any,
    /// Nothing (the wait is on other exchanges only).
    Nothing,
}

/// The next word on `elsewhere`, or never when there is no channel; `None` once every sender
/// is gone.
async fn heard(elsewhere: &mut Option<&mut tokio::sync::mpsc::Receiver<Word>>) -> Option<Word> {
    match elsewhere {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Whether a request in `status` is done waiting for: over, partly answered, or waiting for
/// its requestor (questions, a confirmation).
pub(crate) fn settles(status: crate::protocol::status::Status) -> bool {
    use crate::protocol::status::Status;
    status.is_terminal()
        || matches!(
            status,
            Status::Partial | Status::NeedsInput | Status::NeedsConfirmation
        )
}
