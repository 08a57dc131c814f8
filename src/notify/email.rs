//! Email over SMTP (lettre): the headline as the subject, the details and the link as a plain
//! text body. STARTTLS by default; `tls` for implicit TLS; `none` only for local relays.

use std::time::Duration;

use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::notify::{EmailSettings, Notice, NotifyError, Sent, check_email};

pub(crate) async fn send(
    settings: &EmailSettings,
    timeout: Duration,
    to: &str,
    notice: &Notice,
) -> Result<Sent, NotifyError> {
    let (Some(host), Some(from)) = (&settings.smtp_host, &settings.from) else {
        return Err(NotifyError::not_configured(
            "dispatch.email (smtp_host and from)",
        ));
    };
    let address = |a: &str, field: &str| {
        a.parse::<Mailbox>().map_err(|e| NotifyError::Fail {
            message: format!("email: {field} {a:?} is not an address: {e}"),
        })
    };
    // The recipient is a bare address (checked when the entry was read, and again here).
    check_email(to).map_err(|e| NotifyError::Fail {
        message: format!("email: notify.email {e}"),
    })?;
    let message = Message::builder()
        .from(address(from, "dispatch.email.from")?)
        .to(address(to, "notify.email")?)
        .subject(notice.headline())
        .header(ContentType::TEXT_PLAIN)
        .body(notice.plain_text())
        .map_err(|e| NotifyError::Fail {
            message: format!("email: cannot build the message: {e}"),
        })?;
    let tls = || {
        TlsParameters::new(host.clone()).map_err(|e| NotifyError::Fail {
            message: format!("email: TLS setup for {host}: {e}"),
        })
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.as_str())
        .port(settings.smtp_port)
        .timeout(Some(timeout));
    builder = match settings.security.as_str() {
        "none" => builder.tls(Tls::None),
        "tls" => builder.tls(Tls::Wrapper(tls()?)),
        _ => builder.tls(Tls::Required(tls()?)),
    };
    if let (Some(user), Some(password)) = (&settings.username, &settings.password) {
        builder = builder.credentials(Credentials::new(user.clone(), password.expose().to_owned()));
    }
    let response = builder.build().send(message).await.map_err(|e| {
        let message = format!("email via {host}: {e}");
        if e.is_permanent() {
            NotifyError::Fail { message }
        } else {
            NotifyError::Retry { message }
        }
    })?;
    Ok(Sent {
        provider_ref: response.message().next().map(str::to_owned),
    })
}
