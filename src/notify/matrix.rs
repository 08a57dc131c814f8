//! The Matrix client the exchange reads replies with: who the bot is, the room events since
//! a sync token (long-polled), one event by id, and a message sent into a room. Notices are
//! sent like every other channel's (`mess_protocol::notice::matrix`); this is the other
//! direction, which Matrix offers only by polling.

use std::time::Duration;

use serde_json::{Value, json};

use crate::notify::{NotifyError, endpoint};

/// A client for the homeserver of `dispatch.matrix`, as its bot.
#[derive(Debug, Clone)]
pub struct MatrixClient {
    pub(crate) http: reqwest::Client,
    pub(crate) homeserver: String,
    pub(crate) token: String,
}

/// How long one sync waits on the homeserver for something new.
pub const SYNC_WAIT: Duration = Duration::from_secs(25);

impl MatrixClient {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<Value>,
        wait: Duration,
    ) -> Result<Value, NotifyError> {
        let mut segments = vec!["_matrix", "client", "v3"];
        segments.extend_from_slice(path);
        let mut url = endpoint(&self.homeserver, &segments)
            .map_err(|e| NotifyError::endpoint("matrix", e))?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut request = self
            .http
            .request(method, url)
            .bearer_auth(&self.token)
            // A long poll waits on the server longer than a notice may.
            .timeout(wait + Duration::from_secs(10));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| NotifyError::Retry {
            message: format!(
                "matrix: {}",
                if e.is_timeout() {
                    "timed out"
                } else {
                    "request failed"
                }
            ),
        })?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(NotifyError::from_status("matrix", status));
        }
        response.json().await.map_err(|_| NotifyError::Retry {
            message: "matrix: the answer is not JSON".to_owned(),
        })
    }

    /// The bot's own user id (`@mess:example.org`).
    pub async fn whoami(&self) -> Result<String, NotifyError> {
        let v = self
            .call(
                reqwest::Method::GET,
                &["account", "whoami"],
                &[],
                None,
                Duration::ZERO,
            )
            .await?;
        v["user_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| NotifyError::Fail {
                message: "matrix: whoami names no user".to_owned(),
            })
    }

    /// The events since `since` (all recent ones without it), waiting up to [`SYNC_WAIT`]
    /// for one.
    pub async fn sync(&self, since: Option<&str>) -> Result<Value, NotifyError> {
        let wait = if since.is_some() {
            SYNC_WAIT
        } else {
            Duration::ZERO
        };
        let mut query = vec![
            ("timeout", wait.as_millis().to_string()),
            (
                "filter",
                json!({"room": {"timeline": {"limit": 50, "types": ["m.room.message", "m.reaction"]}}, "presence": {"types": []}})
                    .to_string(),
            ),
        ];
        if let Some(since) = since {
            query.push(("since", since.to_owned()));
        }
        self.call(reqwest::Method::GET, &["sync"], &query, None, wait)
            .await
    }

    /// Event `event` of `room`.
    pub async fn event(&self, room: &str, event: &str) -> Result<Value, NotifyError> {
        self.call(
            reqwest::Method::GET,
            &["rooms", room, "event", event],
            &[],
            None,
            Duration::ZERO,
        )
        .await
    }

    /// Sends `content` as an `m.room.message` into `room` under transaction `txn` (a repeat
    /// of the same transaction is the same event).
    pub async fn send(&self, room: &str, txn: &str, content: Value) -> Result<(), NotifyError> {
        self.call(
            reqwest::Method::PUT,
            &["rooms", room, "send", "m.room.message", txn],
            &[],
            Some(content),
            Duration::ZERO,
        )
        .await
        .map(|_| ())
    }
}
