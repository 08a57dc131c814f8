//! Presigned links: HS256 JWTs that let one executor act on one thread, for a set of actions,
//! until an expiry. Minting and checking only; the secret, the clock and the URL come from the
//! caller (P4: no store, no axum).

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};

pub(crate) use crate::protocol::link::{Action, Grant};

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
