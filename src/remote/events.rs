//! A remote exchange's change events (`GET /events`, server-sent events): what waits on another
//! exchange listen to instead of reading threads again and again. A stream opened with the id of
//! the last event seen (`Last-Event-ID`) first hears every change since, when the remote keeps a
//! change feed (a database tier); otherwise it hears changes from the moment it opens.

use std::time::Duration;

use sse_stream::SseStream;
use tokio_stream::{Stream, StreamExt};

use super::{Remote, RemoteError};

/// One event of a remote exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteEvent {
    /// A thread the key may see changed: its ref, new status and `updated` instant (as text),
    /// and the event's id to resume after, when the remote gives ids.
    Thread {
        thread: String,
        status: String,
        updated: String,
        id: Option<String>,
    },
    /// The stream missed changes: what is watched must be read again.
    Lagged,
}

/// An open event stream of a remote exchange.
pub(crate) struct RemoteEvents {
    inner: std::pin::Pin<Box<dyn Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>>,
    base: String,
}

/// Largest `data:` of one event: a thread event is a ref, a status and an instant.
const MAX_EVENT: usize = 4096;

impl Remote {
    /// Opens the remote's event stream for at most `limit`, resuming after `after` (the id of
    /// the last event seen) when given. Fails when the exchange cannot be reached or refuses.
    pub(crate) async fn events(
        &self,
        after: Option<&str>,
        limit: Duration,
    ) -> Result<RemoteEvents, RemoteError> {
        let url = self.url_of(&["events"])?;
        let mut request = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            // The client's whole-call timeout would cut a stream that is quiet by design.
            .timeout(limit + Duration::from_secs(5))
            .bearer_auth(&self.key);
        if let Some(id) = after {
            request = request.header("last-event-id", id);
        }
        let answer = request.send().await.map_err(|e| {
            RemoteError::Unreachable(format!(
                "the exchange at {} is unreachable ({})",
                self.base,
                if e.is_timeout() {
                    "it did not answer in time"
                } else {
                    "no connection"
                }
            ))
        })?;
        if !answer.status().is_success() {
            // The error body, read as any other call's.
            return Err(self
                .read(answer)
                .await
                .err()
                .unwrap_or_else(|| self.garbled("its event stream failed")));
        }
        Ok(RemoteEvents {
            inner: Box::pin(SseStream::from_bytes_stream(answer.bytes_stream())),
            base: self.base.clone(),
        })
    }
}

impl RemoteEvents {
    /// The next event; `Err` when the stream broke or ended (the caller opens another, resuming
    /// after the last id it saw, or reads what it watches again).
    pub(crate) async fn next(&mut self) -> Result<RemoteEvent, RemoteError> {
        loop {
            let sse = match self.inner.next().await {
                Some(Ok(sse)) => sse,
                Some(Err(_)) | None => {
                    return Err(RemoteError::Unreachable(format!(
                        "the event stream of the exchange at {} ended",
                        self.base
                    )));
                }
            };
            match sse.event.as_deref() {
                Some("thread") => {}
                Some("lagged") => return Ok(RemoteEvent::Lagged),
                // Keep-alive comments and events of kinds this client does not know.
                _ => continue,
            }
            let data = sse.data.unwrap_or_default();
            if data.len() > MAX_EVENT {
                continue;
            }
            let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(&data) else {
                continue;
            };
            let text = |k: &str| fields.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            if let (Some(thread), Some(status), Some(updated)) =
                (text("ref"), text("status"), text("updated"))
            {
                return Ok(RemoteEvent::Thread {
                    thread,
                    status,
                    updated,
                    id: sse.id.filter(|id| id.len() <= 64),
                });
            }
        }
    }
}
