//! Webhooks (robots, services): a POST of the whole thread YAML, signed with HMAC-SHA256 over
//! `<timestamp>.<delivery id>.<body>`, so receivers can check it came from this exchange and
//! refuse replays (an old timestamp, or a delivery id seen before). The delivery id names the
//! thread, the executor, the channel and the event, so a notice signed for one receiver or
//! event does not verify as another.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::notify::{Notice, NotifyError, Secret, Sent};

/// The signature header: `sha256=<hex of HMAC-SHA256(secret, "<timestamp>.<delivery>.<body>")>`.
pub const SIGNATURE_HEADER: &str = "x-mess-signature";
/// The timestamp header: Unix seconds when the attempt was made.
pub const TIMESTAMP_HEADER: &str = "x-mess-timestamp";

/// The signature of delivery `delivery` with `body`, sent at `timestamp` (what
/// [`SIGNATURE_HEADER`] carries).
pub fn sign(secret: &[u8], timestamp: i64, delivery: &str, body: &[u8]) -> String {
    // HMAC accepts keys of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(delivery.as_bytes());
    mac.update(b".");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

pub(crate) async fn send(
    http: &reqwest::Client,
    url: &str,
    secret: Option<&Secret>,
    notice: &Notice,
) -> Result<Sent, NotifyError> {
    let what = "webhook";
    let Some(secret) = secret else {
        return Err(NotifyError::not_configured(
            "the webhook signing key (dispatch.webhook.secret, or secret: beside the url)",
        ));
    };
    let body = notice.thread_yaml.clone().into_bytes();
    let signature = sign(
        secret.expose().as_bytes(),
        notice.at,
        &notice.delivery,
        &body,
    );
    let response = http
        .post(url)
        .header("content-type", "application/yaml")
        .header(SIGNATURE_HEADER, signature)
        .header(TIMESTAMP_HEADER, notice.at.to_string())
        .header("x-mess-delivery", &notice.delivery)
        .header("x-mess-event", notice.kind.as_str())
        .header("x-mess-thread", &notice.thread)
        .body(body)
        .send()
        .await
        .map_err(|e| super::transport_error(what, &e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(Sent::default());
    }
    Err(NotifyError::from_status(what, status.as_u16()))
}
