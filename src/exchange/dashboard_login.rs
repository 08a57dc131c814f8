//! Signing in to the operator dashboard without a key in a URL: `mess dashboard`, run by
//! whoever holds the home, mints a login token (10 minutes, one use); the server trades it for
//! a session token kept in an HttpOnly cookie (12 hours). Both are HS256 JWTs under a key
//! derived from the link secret for this use alone, so neither can pass for a presigned link
//! (nor a link for either), and they name the exchange (`aud`) they were made for.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::exchange::Error;
use crate::exchange::auth::Auth;

/// How long a login link works.
pub const LOGIN_SECONDS: i64 = 600;
/// How long a dashboard session lasts.
pub const SESSION_SECONDS: i64 = 12 * 3600;

/// What a dashboard token says.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Claims {
    /// The operator it signs in.
    sub: String,
    /// The exchange id it was made for.
    aud: String,
    exp: i64,
    iat: i64,
    /// Unique per token: a login is used once.
    jti: String,
    /// `dashboard-login` or `dashboard-session`.
    #[serde(rename = "use")]
    purpose: String,
}

const LOGIN: &str = "dashboard-login";
const SESSION: &str = "dashboard-session";

/// A login token traded for a session.
#[derive(Debug, Clone)]
pub struct Login {
    /// The session token for the cookie.
    pub session: String,
    /// The login's id, for refusing a second use.
    pub login_id: String,
    /// When the login expires (seconds since the epoch): its id need not be kept longer.
    pub login_expires: i64,
}

impl Auth<'_> {
    /// A login token for `operator`, valid [`LOGIN_SECONDS`].
    pub fn mint_dashboard_login(&self, operator: &str) -> Result<String, Error> {
        self.mint_dashboard(operator, LOGIN, LOGIN_SECONDS)
    }

    /// Checks a login token and makes the session it opens. The caller refuses a login id it
    /// has seen (one use).
    pub fn open_dashboard_login(&self, token: &str) -> Result<Login, Error> {
        let claims = self.check_dashboard(token, LOGIN)?;
        Ok(Login {
            session: self.mint_dashboard(&claims.sub, SESSION, SESSION_SECONDS)?,
            login_id: claims.jti,
            login_expires: claims.exp,
        })
    }

    /// The operator a session token signs in, or why not.
    pub fn dashboard_session(&self, token: &str) -> Result<String, Error> {
        Ok(self.check_dashboard(token, SESSION)?.sub)
    }

    fn mint_dashboard(&self, operator: &str, purpose: &str, ttl: i64) -> Result<String, Error> {
        let now = self.ex.now().timestamp();
        let claims = Claims {
            sub: operator.to_owned(),
            aud: self.ex.store().exchange_id()?,
            exp: now.saturating_add(ttl),
            iat: now,
            jti: crate::exchange::auth::hex(&self.ex.store().random_bytes(16)?),
            purpose: purpose.to_owned(),
        };
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&self.dashboard_key()?),
        )
        .map_err(|e| Error::Misconfigured {
            message: format!("cannot sign a dashboard token: {e}"),
        })
    }

    fn check_dashboard(&self, token: &str, purpose: &str) -> Result<Claims, Error> {
        let refused = |why: &str| Error::Unauthorized {
            message: why.to_owned(),
        };
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.validate_exp = false;
        validation.set_audience(&[self.ex.store().exchange_id()?]);
        validation.set_required_spec_claims(&["exp", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Claims>(
            token.trim(),
            &DecodingKey::from_secret(&self.dashboard_key()?),
            &validation,
        )
        .map_err(|_| refused("the dashboard link is not valid; `mess dashboard` prints a new one"))?
        .claims;
        // The exchange's clock decides, as it does for links.
        if claims.exp <= self.ex.now().timestamp() {
            return Err(refused(
                "the dashboard link has expired; `mess dashboard` prints a new one",
            ));
        }
        if claims.purpose != purpose {
            return Err(refused(
                "the dashboard link is not valid; `mess dashboard` prints a new one",
            ));
        }
        Ok(claims)
    }

    /// The signing key: the link secret, hashed with this use's name, so a dashboard token and
    /// a presigned link never verify under each other's key.
    fn dashboard_key(&self) -> Result<Vec<u8>, Error> {
        let mut h = Sha256::new();
        h.update(b"mess operator dashboard\n");
        h.update(self.link_secret()?);
        Ok(h.finalize().to_vec())
    }
}
