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

use crate::exchange::error::Error;
use crate::exchange::{Exchange, ThreadChange};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::link::{Token, decode};
use crate::links::Action;
use crate::protocol::envelope::Envelope;
use crate::protocol::status::Status;
use crate::protocol::time;

/// Events a slow client may fall behind by before the stream drops it.
const BUFFER: usize = 256;

/// The stream of `thread` events (`{"ref", "status", "updated"}`); a `lagged` event says some
/// were missed and the client should re-read what it watches. The stream ends when the client
/// goes away or the server shuts down.
pub async fn events(State(state): State<AppState>, Caller(caller): Caller) -> impl IntoResponse {
    let who = caller.id;
    stream(state, None, move |ex, change| {
        let (ex, who, env) = (ex.clone(), who.clone(), change.envelope.clone());
        async move { sees(&ex, &who, &env).await }
    })
}

/// `GET /thread/{ref}/events?token=`: the same events for one thread, for the holder of a
/// presigned link to it (the human client's page); the stream ends when the link expires.
pub async fn thread_events(
    State(state): State<AppState>,
    reference: Result<Path<String>, PathRejection>,
    token: Result<Query<Token>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let (thread, token) = decode(reference, token)?;
    let ex = state.exchange.clone();
    let checked = thread.clone();
    let grant = state
        .blocking(move || -> Result<_, Error> {
            let grant = ex.check_link(&token, &checked)?;
            if !grant.allows(Action::Read) {
                return Err(Error::Forbidden {
                    message: "this link does not allow read".to_owned(),
                });
            }
            Ok(grant)
        })
        .await??;
    let left = u64::try_from(grant.exp - state.exchange.now().timestamp()).unwrap_or(0);
    Ok(stream(
        state,
        Some(Duration::from_secs(left)),
        move |_, change| {
            let mine = change.thread == thread;
            async move { mine }
        },
    ))
}

/// Server-sent events of the changes `keep` lets through, until the client leaves, the server
/// stops, or `limit` passes.
fn stream<F, Fut>(state: AppState, limit: Option<Duration>, keep: F) -> impl IntoResponse
where
    F: Fn(&Arc<Exchange>, &ThreadChange) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(BUFFER);
    let mut changes = state.exchange.subscribe();
    let ex = state.exchange.clone();
    let stop = state.stop.clone();
    let until =
        tokio::time::Instant::now() + limit.unwrap_or(Duration::from_secs(u64::from(u32::MAX)));
    tokio::spawn(async move {
        loop {
            let change = tokio::select! {
                () = stop.cancelled() => break,
                () = tx.closed() => break,
                () = tokio::time::sleep_until(until) => break,
                change = changes.recv() => change,
            };
            let event = match change {
                Ok(change) => {
                    if !keep(&ex, &change).await {
                        continue;
                    }
                    let data = serde_json::json!({
                        "ref": change.thread.as_str(),
                        "status": change.status.as_str(),
                        "updated": time::format_timestamp(&change.updated),
                    });
                    Event::default().event("thread").data(data.to_string())
                }
                Err(RecvError::Lagged(n)) => Event::default()
                    .event("lagged")
                    .data(format!("{{\"missed\":{n}}}")),
                Err(RecvError::Closed) => break,
            };
            if tx.send(Ok(event)).await.is_err() {
                break;
            }
        }
    });
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Whether `who` may see the thread of `env`: parties at once; others only while it is
/// pending and they are eligible, which reads the executors in effect off the async workers.
async fn sees(ex: &Arc<Exchange>, who: &str, env: &Arc<Envelope>) -> bool {
    if env.requestor == who || env.executor.as_deref() == Some(who) {
        return true;
    }
    if env.status != Status::Pending {
        return false;
    }
    let (ex, who, env) = (ex.clone(), who.to_owned(), env.clone());
    tokio::task::spawn_blocking(move || ex.sees(&who, &env))
        .await
        .unwrap_or(false)
}
