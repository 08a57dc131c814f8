//! Presigned links: what a link grants (one executor, one thread, a set of actions, until an
//! expiry) and the rule of what a message sent through one may do. Signing and checking the
//! token is the caller's: the native exchange and the Worker each do it with their own HS256
//! code, over the claims defined here.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::ProtocolError;
use crate::ids::Re;
use crate::message::{Message, Payload};
use crate::status::Status;

/// What a link allows its executor to do on its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// See the thread.
    Read,
    /// Claim it (`status: claimed`).
    Claim,
    /// Report progress, ask questions, hold, retry (the non-final statuses).
    Update,
    /// Deliver the result (`response`, `completed`, `partial`, `failed`).
    Respond,
    /// Decline it.
    Decline,
}

impl Action {
    /// Every action, the default for a new link.
    pub const ALL: [Action; 5] = [
        Action::Read,
        Action::Claim,
        Action::Update,
        Action::Respond,
        Action::Decline,
    ];

    /// The action's name, as on the command line and in the token.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Claim => "claim",
            Action::Update => "update",
            Action::Respond => "respond",
            Action::Decline => "decline",
        }
    }

    /// Parses a name of [`Action::as_str`].
    pub fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// The action a status code needs.
    pub fn of_status(code: Status) -> Action {
        match code {
            Status::Claimed => Action::Claim,
            Status::Declined => Action::Decline,
            Status::Completed | Status::Partial | Status::Failed => Action::Respond,
            _ => Action::Update,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a valid link grants: the token's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The thread.
    #[serde(rename = "ref")]
    pub thread: String,
    /// The executor the link acts as.
    #[serde(rename = "sub")]
    pub executor: String,
    /// What it may do.
    #[serde(rename = "act")]
    pub actions: Vec<Action>,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// The channel the link was sent through (`slack`, `sms`, ...): answers that come
    /// through the link carry it as their `channel`.
    #[serde(rename = "ch", default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The exchange that issued it, as its executors reach it (its public URL): the page
    /// talks to it when the link names no `exchange=`, and the exchange checks it is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// The exchange it is for (its exchange id): another exchange refuses it even when both
    /// sign with the same secret.
    pub aud: String,
}

/// The channels whose names a link's answers may carry (only names the exchange itself
/// signed into the token reach a thread file).
pub const LINK_CHANNELS: [&str; 9] = [
    "webhook", "slack", "telegram", "sms", "ntfy", "email", "mail", "discord", "matrix",
];

impl Grant {
    /// Whether the grant allows `action`.
    pub fn allows(&self, action: Action) -> bool {
        self.actions.contains(&action)
    }

    /// Who the link acts as and what it allows, as a link's read shows it (so a page offers
    /// only what can work).
    pub fn view(&self) -> crate::value::Value {
        use crate::value::{Map, Value};
        let mut m = Map::new();
        m.insert("executor", Value::str(&self.executor));
        m.insert(
            "actions",
            Value::Seq(
                self.actions
                    .iter()
                    .map(|a| Value::str(a.as_str()))
                    .collect(),
            ),
        );
        Value::Map(m)
    }

    /// The channel the messages sent through the link arrive by: the one it was sent through
    /// when that is one of [`LINK_CHANNELS`], else `link`.
    pub fn channel(&self) -> &str {
        self.via
            .as_deref()
            .filter(|v| LINK_CHANNELS.contains(v))
            .unwrap_or("link")
    }

    /// Checks a message sent through the link: every payload must be a status or a response
    /// about the link's thread, of an action the link allows. The exchange's own rules
    /// (eligibility, transitions) then apply as for any executor.
    pub fn check_message(&self, message: &Message) -> Result<(), ProtocolError> {
        for payload in &message.payloads {
            let (re, action) = match payload {
                Payload::Version(_) => continue,
                Payload::Status(s) => (&s.re, Action::of_status(s.code)),
                Payload::Response(r) => (&r.re, Action::Respond),
                other => {
                    return Err(ProtocolError::forbidden(format!(
                        "a link may send only status and response payloads, not {}",
                        other.kind()
                    )));
                }
            };
            if !matches!(re, Re::One(r) if *r == self.thread) {
                return Err(ProtocolError::forbidden(format!(
                    "a link acts only on {}",
                    self.thread
                )));
            }
            if !self.allows(action) {
                return Err(ProtocolError::forbidden(format!(
                    "this link does not allow {action}"
                )));
            }
        }
        Ok(())
    }
}

/// The human page's address for a link: `BASE/respond?ref=THREAD&token=TOKEN`, the one form
/// every notice, `mess link` and `POST /links` hand out (a trailing `/` of `base` dropped).
pub fn page_url(base: &str, thread: &str, token: &str) -> String {
    format!(
        "{}/respond?ref={thread}&token={token}",
        base.trim_end_matches('/')
    )
}
