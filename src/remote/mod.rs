//! A remote exchange reached through its HTTP API (`mess serve` on another machine): the
//! client behind `mess --exchange NAME|URL`. Every call has a timeout; calls that are safe to
//! repeat (reads, and messages whose requests all carry client ids) are retried when the
//! exchange cannot be reached; answers come back as the same protocol types a local exchange
//! gives, so the commands print the same output.

mod events;

pub(crate) use events::{RemoteEvent, RemoteEvents};

use std::path::PathBuf;
use std::time::Duration;

use crate::protocol::envelope::Envelope;
use crate::protocol::message::{Message, Payload};
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};
use crate::protocol::{emit, status::State};
use crate::store::layout::Location;
use crate::store::thread::ThreadFile;

/// How long one call may take before the exchange counts as unreachable.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Attempts of a call that is safe to repeat.
const ATTEMPTS: u32 = 3;

/// Largest answer read from a remote exchange, counted as it arrives (a declared length is
/// checked first, but a peer may send none and stream without end).
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Largest error answer read: `{"error": {code, message}}` is short.
const MAX_ERROR_ANSWER: usize = 64 * 1024;

/// Why a call to a remote exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteError {
    /// No answer: the exchange is down, the address is wrong, or the call timed out.
    Unreachable(String),
    /// The exchange answered with an error (its HTTP status, error code and message).
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// The exchange answered with something that is not what the API promises.
    Garbled(String),
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Unreachable(m) | RemoteError::Garbled(m) => f.write_str(m),
            RemoteError::Refused { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for RemoteError {}

#[cfg(test)]
mod tests;

/// A remote exchange: its base URL (the `mess serve` address) and the API key calls carry.
#[derive(Clone)]
pub(crate) struct Remote {
    base: String,
    key: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Remote").field("base", &self.base).finish()
    }
}

impl Remote {
    /// A client of the exchange at `url` (http or https) acting with `key`. A URL that carries
    /// credentials (`https://user:secret@host`) is refused, and no message quotes them: the key
    /// goes in `MESS_API_KEY` or the entry's `api_key`, where no log or listing shows it.
    pub(crate) fn new(url: &str, key: &str) -> Result<Remote, RemoteError> {
        let base = url.trim().trim_end_matches('/').to_owned();
        let shown = redact_url(&base);
        let parsed = reqwest::Url::parse(&base)
            .map_err(|e| RemoteError::Garbled(format!("exchange URL {shown:?}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(RemoteError::Garbled(format!(
                "exchange URL {shown:?}: only http and https are supported"
            )));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(RemoteError::Garbled(format!(
                "exchange URL {shown:?}: credentials in the URL are refused; give the API key with MESS_API_KEY or the entry's api_key"
            )));
        }
        if key.trim().is_empty() {
            return Err(RemoteError::Garbled(format!(
                "no API key for the exchange at {base} (set MESS_API_KEY or the exchange's api_key)"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| RemoteError::Garbled(format!("HTTP client: {e}")))?;
        Ok(Remote {
            base,
            key: key.trim().to_owned(),
            http,
        })
    }

    /// Submits `message` as the key's principal; returns the exchange's answer.
    pub(crate) async fn submit(&self, message: &Message) -> Result<Message, RemoteError> {
        let body = emit::to_yaml(&message.to_value());
        let retry = message.payloads.iter().all(|p| match p {
            Payload::Request(r) => r.id.is_some(),
            _ => false,
        });
        let text = self
            .call(retry, || {
                self.http
                    .post(format!("{}/mess", self.base))
                    .header(reqwest::header::CONTENT_TYPE, "application/yaml")
                    .header(reqwest::header::ACCEPT, "application/yaml")
                    .body(body.clone())
            })
            .await?;
        let value = yaml::parse_document(&text, &Limits::message(text.len()))
            .map_err(|e| self.garbled(&format!("its answer is not YAML: {}", e.message)))?;
        Message::from_value(value).map_err(|e| self.garbled(&format!("its answer: {e}")))
    }

    /// The thread `re` names (a ref, a client id, or `last`) as its file, when the key may
    /// read it.
    pub(crate) async fn thread(&self, re: &str) -> Result<ThreadFile, RemoteError> {
        let mut url = self.url_of(&["threads", re.trim()])?;
        url.query_pairs_mut().append_pair("format", "messe-af");
        let text = self.get_yaml(&url).await?;
        let head = crate::store::thread::pieces(&text).0;
        let value = yaml::parse_document(head, &Limits::message(head.len()))
            .map_err(|e| self.garbled(&format!("the thread is not YAML: {}", e.message)))?;
        let envelope = Envelope::from_value(value)
            .map_err(|e| self.garbled(&format!("the thread's envelope: {e}")))?;
        let location = Location::State(envelope.status.state());
        let path = PathBuf::from(format!(
            "{}/{}.messe-af.yaml",
            location_dir(&location),
            envelope.thread_ref
        ));
        ThreadFile::parse(&path, location, text)
            .map_err(|e| self.garbled(&format!("the thread file: {e}")))
    }

    /// The envelopes of the threads in `states` the key may see, newest first (at most
    /// `limit` per state).
    pub(crate) async fn threads(
        &self,
        states: &[State],
        limit: usize,
    ) -> Result<Vec<Envelope>, RemoteError> {
        let mut out = Vec::new();
        for state in states {
            let mut url = self.url_of(&["threads"])?;
            url.query_pairs_mut()
                .append_pair("state", state.as_str())
                .append_pair("limit", &limit.to_string());
            let text = self.get_yaml(&url).await?;
            let value = yaml::parse_document(&text, &Limits::message(text.len()))
                .map_err(|e| self.garbled(&format!("its list is not YAML: {}", e.message)))?;
            let Value::Map(map) = value else {
                return Err(self.garbled("its list is not a mapping"));
            };
            let Some(Value::Seq(items)) = map.get("threads") else {
                return Err(self.garbled("its list has no threads"));
            };
            for item in items {
                out.push(
                    Envelope::from_value(item.clone())
                        .map_err(|e| self.garbled(&format!("an envelope of its list: {e}")))?,
                );
            }
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.updated));
        Ok(out)
    }

    /// The YAML body of a `GET url` (a read: retried when the exchange cannot be reached).
    async fn get_yaml(&self, url: &reqwest::Url) -> Result<String, RemoteError> {
        self.call(true, || {
            self.http
                .get(url.clone())
                .header(reqwest::header::ACCEPT, "application/yaml")
        })
        .await
    }

    /// A URL under the base with `segments` percent-encoded.
    fn url_of(&self, segments: &[&str]) -> Result<reqwest::Url, RemoteError> {
        let mut url = reqwest::Url::parse(&self.base)
            .map_err(|e| RemoteError::Garbled(format!("exchange URL {:?}: {e}", self.base)))?;
        url.path_segments_mut()
            .map_err(|()| RemoteError::Garbled(format!("exchange URL {:?}", self.base)))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// Sends the request `build` makes (again, when `retry` and the exchange did not answer)
    /// with the key; returns the body of a 2xx answer.
    async fn call(
        &self,
        retry: bool,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<String, RemoteError> {
        let attempts = if retry { ATTEMPTS } else { 1 };
        let mut last = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            match build().bearer_auth(&self.key).send().await {
                Ok(answer) => return self.read(answer).await,
                Err(e) => last = Some(e),
            }
        }
        let why = last.map_or_else(String::new, |e| {
            if e.is_timeout() {
                "it did not answer in time".to_owned()
            } else if e.is_connect() {
                "no connection".to_owned()
            } else {
                "the connection failed".to_owned()
            }
        });
        Err(RemoteError::Unreachable(format!(
            "the exchange at {} is unreachable ({why})",
            self.base
        )))
    }

    /// The body of `answer`, or its error as the exchange said it. The body is read piece by
    /// piece and given up at the cap, so a peer that streams without end (no length, or a
    /// false one) costs at most the cap in memory, and the connection is dropped.
    async fn read(&self, mut answer: reqwest::Response) -> Result<String, RemoteError> {
        let status = answer.status();
        let cap = if status.is_success() {
            MAX_ANSWER
        } else {
            MAX_ERROR_ANSWER
        };
        let too_large = || {
            self.garbled(&format!(
                "its answer is over the limit of {} and was cut off",
                size_text(cap)
            ))
        };
        if answer.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_large());
        }
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            match answer.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > cap {
                        return Err(too_large());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Err(self.garbled("its answer did not arrive in time"));
                }
                Err(_) => return Err(self.garbled("its answer broke off")),
            }
        }
        // Valid UTF-8 (every answer of mess) is taken as it is, without a copy.
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        if status.is_success() {
            return Ok(text);
        }
        // `{"error": {"code", "message"}}`, in YAML or JSON.
        let (code, message) = yaml::parse_document(&text, &Limits::message(text.len()))
            .ok()
            .and_then(|v| match v {
                Value::Map(m) => match m.get("error") {
                    Some(Value::Map(e)) => Some((
                        e.get("code")
                            .and_then(Value::scalar_text)
                            .unwrap_or_default(),
                        e.get("message")
                            .and_then(Value::scalar_text)
                            .unwrap_or_default(),
                    )),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_else(|| (String::new(), format!("HTTP {}", status.as_u16())));
        Err(RemoteError::Refused {
            status: status.as_u16(),
            code,
            message: format!("{} (the exchange at {})", message, self.base),
        })
    }

    fn garbled(&self, what: &str) -> RemoteError {
        RemoteError::Garbled(format!("the exchange at {}: {what}", self.base))
    }
}

/// A byte count as people read it (`64 MiB`, `16 KiB`).
fn size_text(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// `url` with its userinfo (`user:secret@`) shown as `***@`, for messages and logs; the rest is
/// kept as written. Works on text that is not a valid URL too, as error messages quote such text.
pub(crate) fn redact_url(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &rest[at..]),
        None => url.to_owned(),
    }
}

/// The folder of `location` as a relative path.
fn location_dir(location: &Location) -> String {
    match location {
        Location::State(s) => format!("state={}", s.as_str()),
        Location::Archive(m) => format!("archive/{m}"),
    }
}
