//! `GET /events`: server-sent events, one per change of a thread the caller may see, as the
//! exchange commits it (no polling), with keep-alive comments while nothing happens.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::wrappers::ReceiverStream;

use crate::exchange::access::visible_to;
use crate::exchange::directory::Directory;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::protocol::time;

/// Events a slow client may fall behind by before the stream drops it.
const BUFFER: usize = 256;

/// The stream of `thread` events (`{"ref", "status", "updated"}`); a `lagged` event says some
/// were missed and the client should re-read what it watches.
pub async fn events(State(state): State<AppState>, Caller(caller): Caller) -> impl IntoResponse {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(BUFFER);
    let mut changes = state.exchange.subscribe();
    let ex = state.exchange.clone();
    tokio::spawn(async move {
        loop {
            let event = match changes.recv().await {
                Ok(change) => {
                    let ex = ex.clone();
                    let who = caller.id.clone();
                    let env = change.envelope.clone();
                    let visible = tokio::task::spawn_blocking(move || {
                        visible_to(&who, &env, &Directory::load(ex.store()))
                    })
                    .await
                    .unwrap_or(false);
                    if !visible {
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
