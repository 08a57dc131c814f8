//! Presigned links at the edge: HS256 JSON Web Tokens over `mess-protocol`'s [`Grant`], signed
//! and checked as the native exchange does it (HS256 only, `exp`, `sub`, `aud` and `iss`
//! required, the audience and issuer this exchange's own, the expiry against the exchange's
//! clock with no leeway). A token one of them signs, the other reads, given the same secret,
//! issuer and audience.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use mess_protocol::link::Grant;
use sha2::Sha256;

use crate::failure::Failure;

/// The shortest secret accepted (HS256 with less than 256 bits of key is guessable).
pub const MIN_SECRET_BYTES: usize = 32;

/// The token's header, as the native exchange writes it.
const HEADER: &str = r#"{"typ":"JWT","alg":"HS256"}"#;

/// Whose links this exchange accepts.
pub struct Expected<'a> {
    /// Its public URL (`iss`).
    pub issuer: &'a str,
    /// Its exchange id (`aud`).
    pub audience: &'a str,
}

fn mac(secret: &[u8]) -> Result<Hmac<Sha256>, Failure> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(Failure::new(
            500,
            "misconfigured",
            "the link secret (MESS_SECRET) must be at least 32 bytes; set it with `wrangler secret put MESS_SECRET`",
        ));
    }
    Hmac::<Sha256>::new_from_slice(secret)
        .map_err(|_| Failure::new(500, "internal", "the link secret cannot key HMAC"))
}

/// Signs `grant`.
pub fn mint(secret: &[u8], grant: &Grant) -> Result<String, Failure> {
    let claims = serde_json::to_string(grant)
        .map_err(|e| Failure::new(500, "internal", format!("writing a link: {e}")))?;
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(HEADER),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let mut m = mac(secret)?;
    m.update(signed.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(m.finalize().into_bytes());
    Ok(format!("{signed}.{signature}"))
}

fn invalid() -> Failure {
    Failure::unauthorized("the link is not valid")
}

/// Checks `token`'s signature, algorithm, claims, issuer, audience and expiry (`now`, seconds
/// since the epoch) and answers its grant, for whichever thread it names.
pub fn verify(
    secret: &[u8],
    expected: &Expected<'_>,
    token: &str,
    now: i64,
) -> Result<Grant, Failure> {
    let mut m = mac(secret)?;
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| invalid())?;
    m.update(header.as_bytes());
    m.update(b".");
    m.update(claims.as_bytes());
    // `verify_slice` compares in constant time.
    m.verify_slice(&signature).map_err(|_| invalid())?;
    // Only HS256: a token naming another algorithm (`none`, RS256) is refused even when its
    // signature happens to check.
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).map_err(|_| invalid())?)
            .map_err(|_| invalid())?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("HS256") {
        return Err(invalid());
    }
    // The claims straight into the grant, as the native exchange reads them: `aud` one string,
    // and a duplicated claim refused.
    let grant: Grant =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).map_err(|_| invalid())?)
            .map_err(|_| invalid())?;
    if grant.aud != expected.audience || grant.iss.as_deref() != Some(expected.issuer) {
        return Err(invalid());
    }
    if grant.exp <= now {
        return Err(Failure::unauthorized("the link has expired"));
    }
    Ok(grant)
}
