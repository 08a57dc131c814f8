//! `GET /events` (and `GET /thread/{ref}/events?token=` for a link holder): server-sent
//! events, one per change of a thread the caller may see, as the exchange commits it (no
//! polling), with keep-alive comments while nothing happens.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::wrappers::ReceiverStream;

use crate::exchange::{Exchange, ThreadChange, access};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::link::{Token, decode};
use crate::protocol::envelope::Envelope;
use crate::protocol::time;

/// Events a slow client may fall behind by before the stream drops it.
const BUFFER: usize = 256;

/// Event streams one principal (or one link's executor on one thread) may hold open at once.
pub(crate) const MAX_STREAMS: usize = 16;

/// The open event streams, by who holds them.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    open: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

/// One open stream, counted until dropped (when its task ends).
pub(crate) struct StreamSlot {
    streams: Arc<Streams>,
    holder: String,
}

impl Streams {
    fn open(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, usize>> {
        match self.open.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A slot for `holder`, or 429 when it already holds [`MAX_STREAMS`].
    fn take(self: &Arc<Self>, holder: String) -> Result<StreamSlot, ApiError> {
        let mut open = self.open();
        let n = open.entry(holder.clone()).or_insert(0);
        if *n >= MAX_STREAMS {
            return Err(ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "busy",
                format!("at most {MAX_STREAMS} event streams at once; close one first"),
            ));
        }
        *n += 1;
        Ok(StreamSlot {
            streams: self.clone(),
            holder,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open();
        if let Some(n) = open.get_mut(&self.holder) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.holder);
            }
        }
    }
}

/// The stream of `thread` events (`{"ref", "status", "updated"}`); a `lagged` event says some
/// were missed and the client should re-read what it watches. The stream ends when the client
/// goes away or the server shuts down.
pub(crate) async fn events(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let slot = state
        .streams
        .take(format!("{}:{}", caller.role, caller.id))?;
    let who = caller.id;
    let resume = last_event_id(&headers);
    Ok(stream(state, None, resume, slot, move |ex, change| {
        let (ex, who, env) = (ex.clone(), who.clone(), change.envelope.clone());
        async move {
            if may_see(&ex, &who, &env).await {
                Verdict::Send
            } else {
                Verdict::Skip
            }
        }
    }))
}

/// The stream of every `thread` event, for an operator (the dashboard's live updates).
pub(crate) fn for_operator(
    state: AppState,
    operator: &str,
) -> Result<axum::response::Response, ApiError> {
    let slot = state.streams.take(format!("operator:{operator}"))?;
    Ok(stream(state, None, None, slot, |_, _| async { Verdict::Send }).into_response())
}

/// `GET /thread/{ref}/events?token=`: the same events for one thread, for the holder of a
/// presigned link to it (the human client's page); the stream ends when the link expires.
pub(crate) async fn thread_events(
    State(state): State<AppState>,
    reference: Result<Path<String>, PathRejection>,
    token: Result<Query<Token>, QueryRejection>,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let resume = last_event_id(&headers);
    let (thread, token) = decode(reference, token)?;
    let ex = state.exchange.clone();
    let checked = thread.clone();
    let grant = state
        .blocking(move || ex.access().link_for_reading(&token, &checked))
        .await??;
    let left = u64::try_from(grant.exp - state.exchange.now().timestamp()).unwrap_or(0);
    let executor = grant.executor;
    let slot = state.streams.take(format!("link:{executor}:{thread}"))?;
    Ok(stream(
        state,
        Some(Duration::from_secs(left)),
        resume,
        slot,
        move |ex, change| {
            let verdict = if change.thread != thread {
                Verdict::Skip
            } else if ex.access().link_follows(&executor, &change.envelope) {
                Verdict::Send
            } else {
                // Taken by someone else: this change is the last the link hears of it.
                Verdict::SendAndEnd
            };
            async move { verdict }
        },
    ))
}

/// What a stream does with one change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Not for this caller.
    Skip,
    /// Sent.
    Send,
    /// Sent, and the stream ends after it (the caller may not follow the thread any more).
    SendAndEnd,
}

/// Threads a resumed stream replays at most before it goes on live: each costs a read of the
/// database, and a key holder may reconnect with an old id as often as it likes. Beyond it the
/// stream says `lagged`, and the client re-reads what it watches.
const REPLAY: usize = 1_000;

/// The `Last-Event-ID` a reconnecting client sends, if it has the form of our ids.
fn last_event_id(headers: &axum::http::HeaderMap) -> Option<String> {
    let id = headers.get("last-event-id")?.to_str().ok()?;
    (id.len() <= 64 && id.bytes().all(|b| b.is_ascii_digit() || b == b'-')).then(|| id.to_owned())
}

/// Server-sent events of the changes `keep` lets through, until the client leaves, the server
/// stops, or `limit` passes. With a database, each event's id is its place in the change feed,
/// and a stream opened with `resume` (a `Last-Event-ID` from any node) first sends every thread
/// changed since, as it is now.
fn stream<F, Fut>(
    state: AppState,
    limit: Option<Duration>,
    resume: Option<String>,
    slot: StreamSlot,
    keep: F,
) -> impl IntoResponse
where
    F: Fn(&Arc<Exchange>, &ThreadChange) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Verdict> + Send,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(BUFFER);
    let mut changes = state.exchange.changes().subscribe();
    let ex = state.exchange.clone();
    let stop = state.stop.clone();
    let until =
        tokio::time::Instant::now() + limit.unwrap_or(Duration::from_secs(u64::from(u32::MAX)));
    tokio::spawn(async move {
        let _slot = slot;
        // Subscribed before the replay is read, so nothing falls between the two.
        // `None`: the cursor is older than the change feed keeps, so changes were missed.
        let replay: Option<Vec<ThreadChange>> = match resume {
            Some(cursor) => {
                let reader = ex.clone();
                tokio::task::spawn_blocking(move || reader.changes().changes_since(&cursor, REPLAY))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or(Some(Vec::new()))
            }
            None => Some(Vec::new()),
        };
        let too_old = replay.is_none();
        let mut replay: std::collections::VecDeque<ThreadChange> =
            replay.unwrap_or_default().into();
        if too_old || replay.len() >= REPLAY {
            let lagged = Event::default()
                .event("lagged")
                .data(format!("{{\"missed\":{}}}", replay.len()));
            replay.clear();
            if tx.send(Ok(lagged)).await.is_err() {
                return;
            }
        }
        loop {
            let change = match replay.pop_front() {
                Some(change) => Ok(change),
                None => tokio::select! {
                    () = stop.cancelled() => break,
                    () = tx.closed() => break,
                    () = tokio::time::sleep_until(until) => break,
                    change = changes.recv() => change,
                },
            };
            let mut last = false;
            let event = match change {
                Ok(change) => {
                    match keep(&ex, &change).await {
                        Verdict::Skip => continue,
                        Verdict::Send => {}
                        Verdict::SendAndEnd => last = true,
                    }
                    let data = serde_json::json!({
                        "ref": change.thread.as_str(),
                        "status": change.status.as_str(),
                        "updated": time::format_timestamp(&change.updated),
                    });
                    let event = Event::default().event("thread").data(data.to_string());
                    match &change.cursor {
                        Some(cursor) => event.id(cursor),
                        None => event,
                    }
                }
                Err(RecvError::Lagged(n)) => Event::default()
                    .event("lagged")
                    .data(format!("{{\"missed\":{n}}}")),
                Err(RecvError::Closed) => break,
            };
            if tx.send(Ok(event)).await.is_err() || last {
                break;
            }
        }
    });
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Whether `who` may see the thread of `env`: answered from the envelope when it can be, else
/// off the async workers (it reads the executors in effect).
async fn may_see(ex: &Arc<Exchange>, who: &str, env: &Arc<Envelope>) -> bool {
    if let Some(verdict) = access::quick_verdict(who, env) {
        return verdict;
    }
    let (ex, who, env) = (ex.clone(), who.to_owned(), env.clone());
    tokio::task::spawn_blocking(move || ex.access().may_see(&who, &env))
        .await
        .unwrap_or(false)
}
