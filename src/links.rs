//! Presigned links: HS256 JWTs that let one executor act on one thread, for a set of actions,
//! until an expiry. Minting and checking only; the secret, the clock and the URL come from the
//! caller (P4: no store, no axum).

use std::fmt;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

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
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a valid link grants.
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
    /// The exchange it is for (the home's exchange id): another exchange refuses it even when
    /// both sign with the same secret.
    pub aud: String,
}

impl Grant {
    /// Whether the grant allows `action`.
    pub fn allows(&self, action: Action) -> bool {
        self.actions.contains(&action)
    }
}

/// Why a link was refused. The messages are safe to show to whoever presented it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LinkError {
    #[error("the link has expired")]
    Expired,
    #[error("the link is for another thread")]
    OtherThread,
    #[error("the link is not valid")]
    Invalid,
    #[error("the link secret must be at least 32 bytes")]
    WeakSecret,
}

/// Whose links an exchange accepts: its own, named by the public URL it issues them under
/// (`iss`) and its exchange id (`aud`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expected<'a> {
    /// The issuer's public URL, as its links carry it in `iss`.
    pub(crate) issuer: &'a str,
    /// The exchange id, as its links carry it in `aud`.
    pub(crate) audience: &'a str,
}

/// The shortest secret accepted (HS256 with less than 256 bits of key is guessable).
pub(crate) const MIN_SECRET_BYTES: usize = 32;

/// Mints a link token for `grant`.
pub(crate) fn mint(secret: &[u8], grant: &Grant) -> Result<String, LinkError> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(LinkError::WeakSecret);
    }
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        grant,
        &EncodingKey::from_secret(secret),
    )
    .map_err(|_| LinkError::Invalid)
}

/// Checks `token` for `thread` at `now` (seconds since the epoch) and returns its grant. Only
/// HS256 is accepted, so `alg: none` and algorithm swaps fail; the expiry is checked against
/// `now` with no leeway, and the token must be issued by and for `expected`.
pub(crate) fn verify(
    secret: &[u8],
    expected: &Expected<'_>,
    token: &str,
    thread: &str,
    now: i64,
) -> Result<Grant, LinkError> {
    let grant = verify_any(secret, expected, token, now)?;
    if grant.thread != thread {
        return Err(LinkError::OtherThread);
    }
    Ok(grant)
}

/// Checks a token's signature and expiry and returns what it grants, for whichever thread it
/// names (callers that take the thread from the token must still hold every payload to it).
/// The token must be issued by `expected.issuer` (its `iss`) for `expected.audience` (its
/// `aud`): another exchange's link is refused even when both sign with the same secret.
pub(crate) fn verify_any(
    secret: &[u8],
    expected: &Expected<'_>,
    token: &str,
    now: i64,
) -> Result<Grant, LinkError> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(LinkError::WeakSecret);
    }
    let mut validation = Validation::new(Algorithm::HS256);
    // The expiry is checked below against the caller's clock, not the system's.
    validation.validate_exp = false;
    validation.leeway = 0;
    validation.required_spec_claims = ["exp", "sub", "aud", "iss"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    validation.set_audience(&[expected.audience]);
    validation.set_issuer(&[expected.issuer]);
    let grant =
        jsonwebtoken::decode::<Grant>(token, &DecodingKey::from_secret(secret), &validation)
            .map_err(|_| LinkError::Invalid)?
            .claims;
    if grant.exp <= now {
        return Err(LinkError::Expired);
    }
    Ok(grant)
}

#[cfg(test)]
mod tests;
