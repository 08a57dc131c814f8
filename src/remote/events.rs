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

/// Largest event as it arrives (every field line of it, up to the blank line that ends it): a
/// stream that never ends an event would otherwise grow the parser's buffer without bound.
const MAX_RAW_EVENT: usize = 16 * 1024;

/// Most bytes one stream is read for before it is dropped (the caller opens another): a peer
/// that floods the stream cannot keep this side busy for the whole of its time.
const MAX_STREAM: usize = 64 * 1024 * 1024;

/// Counts a stream's bytes as they arrive: the bytes of the event being read (reset by the
/// blank line that ends each event, `\n\n` with any `\r` ignored) and of the whole stream.
#[derive(Debug, Default)]
pub(super) struct EventBound {
    in_event: usize,
    total: usize,
    after_newline: bool,
}

impl EventBound {
    /// Admits `chunk`, or says why the stream is cut off.
    pub(super) fn admit(&mut self, chunk: &[u8]) -> Result<(), String> {
        self.total += chunk.len();
        if self.total > MAX_STREAM {
            return Err(format!(
                "its event stream sent over {} MiB",
                MAX_STREAM / (1024 * 1024)
            ));
        }
        for &b in chunk {
            match b {
                b'\n' if self.after_newline => self.in_event = 0,
                b'\n' => self.after_newline = true,
                b'\r' => {}
                _ => {
                    self.after_newline = false;
                    self.in_event += 1;
                }
            }
            if self.in_event > MAX_RAW_EVENT {
                return Err(format!(
                    "an event of its stream is over {} KiB",
                    MAX_RAW_EVENT / 1024
                ));
            }
        }
        Ok(())
    }
}

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
        let mut bound = EventBound::default();
        let base = self.base.clone();
        let bounded = answer.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            bound.admit(&chunk).map_err(|why| {
                tracing::warn!(exchange = %base, "{why}; the stream is dropped");
                std::io::Error::other(why)
            })?;
            Ok::<_, std::io::Error>(chunk)
        });
        Ok(RemoteEvents {
            inner: Box::pin(SseStream::from_bytes_stream(bounded)),
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
