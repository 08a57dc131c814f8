//! Dispatch adapters: one file per channel (webhook, Slack, Telegram, SMS through Twilio, ntfy,
//! email over SMTP). They receive finished values (a [`Notice`] and a [`Channel`]) and
//! configuration, and never read the store or the read model (P4); every base URL comes from
//! configuration, so tests point them at local servers. The `mail` channel is the exchange's:
//! it writes a file into a mailbox.

mod email;
mod ntfy;
mod slack;
mod sms;
mod telegram;
mod webhook;

use std::time::Duration;

use crate::protocol::value::Value;

pub use webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};

/// A secret setting (a token or a signing key): its `Debug` output never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// What a notice is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeKind {
    /// A request the executor may take.
    New,
    /// Someone else took it (updates the earlier message where the channel allows).
    Taken {
        /// Who took it.
        by: String,
    },
    /// Nobody took it in time; the executor is asked as a fallback.
    Escalated,
    /// It ended before anyone took it (cancelled, expired, failed): the earlier message is
    /// updated to say so.
    Closed {
        /// The status it ended with.
        status: String,
    },
}

impl NoticeKind {
    /// Whether it updates an earlier message rather than asking for work (no link, no button).
    pub fn is_update(&self) -> bool {
        matches!(self, NoticeKind::Taken { .. } | NoticeKind::Closed { .. })
    }

    /// The kind's name in delivery ids and webhook headers.
    pub fn as_str(&self) -> &'static str {
        match self {
            NoticeKind::New => "new",
            NoticeKind::Taken { .. } => "taken",
            NoticeKind::Closed { .. } => "closed",
            NoticeKind::Escalated => "escalated",
        }
    }
}

/// One notice to one executor, with everything a channel needs to render it.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The delivery id (receivers use it to drop repeats).
    pub delivery: String,
    /// What it is about.
    pub kind: NoticeKind,
    /// The thread's ref.
    pub thread: String,
    /// The request's intent.
    pub intent: String,
    /// `background`, `normal`, `elevated` or `urgent`.
    pub priority: String,
    /// When it is needed by (RFC 3339), if anyone said.
    pub needed_by: Option<String>,
    /// The capabilities it requires.
    pub requires: Vec<String>,
    /// A presigned link to the human web page for this executor and thread.
    pub link: Option<String>,
    /// The whole thread file (webhooks post it).
    pub thread_yaml: String,
    /// The provider ref of the earlier message this notice updates.
    pub previous: Option<String>,
    /// When this attempt is made (Unix seconds, from the exchange's clock): webhooks sign it.
    pub at: i64,
}

impl Notice {
    /// A one-line headline.
    pub fn headline(&self) -> String {
        match &self.kind {
            NoticeKind::New => format!("MESS request: {}", self.intent),
            NoticeKind::Taken { by } => format!("Taken by {by}: {}", self.intent),
            NoticeKind::Escalated => format!("Still waiting for someone: {}", self.intent),
            NoticeKind::Closed { status } => {
                format!("No longer needed ({status}): {}", self.intent)
            }
        }
    }

    /// The details under the headline, one per line (no link).
    pub fn details(&self) -> Vec<String> {
        let mut lines = vec![format!("{} · priority {}", self.thread, self.priority)];
        if let Some(by) = &self.needed_by {
            lines.push(format!("needed by {by}"));
        }
        if !self.requires.is_empty() {
            lines.push(format!("requires {}", self.requires.join(", ")));
        }
        lines
    }

    /// Headline, details and link as plain text (SMS, email, ntfy).
    pub fn plain_text(&self) -> String {
        let mut text = self.headline();
        for line in self.details() {
            text.push('\n');
            text.push_str(&line);
        }
        if let (Some(link), false) = (&self.link, self.kind.is_update()) {
            text.push_str("\nRespond: ");
            text.push_str(link);
        }
        text
    }
}

/// Where a notice goes: one entry of an executor's `notify:`.
#[derive(Debug, Clone, PartialEq)]
pub enum Channel {
    /// POST of the thread YAML, signed.
    Webhook {
        /// The receiver.
        url: String,
        /// This receiver's signing key (else `dispatch.webhook.secret`).
        secret: Option<Secret>,
    },
    /// A Slack channel or user id.
    Slack(String),
    /// A Telegram chat id.
    Telegram(String),
    /// A phone number (E.164).
    Sms(String),
    /// An ntfy topic.
    Ntfy(String),
    /// An email address.
    Email(String),
    /// An agent mailbox (written by the exchange, not sent).
    Mail(String),
}

impl Channel {
    /// The channel's name, as in `notify:`.
    pub fn name(&self) -> &'static str {
        match self {
            Channel::Webhook { .. } => "webhook",
            Channel::Slack(_) => "slack",
            Channel::Telegram(_) => "telegram",
            Channel::Sms(_) => "sms",
            Channel::Ntfy(_) => "ntfy",
            Channel::Email(_) => "email",
            Channel::Mail(_) => "mail",
        }
    }

    /// Whether a message sent earlier can be updated when the thread is taken.
    pub fn updates_in_place(&self) -> bool {
        matches!(
            self,
            Channel::Slack(_) | Channel::Telegram(_) | Channel::Ntfy(_)
        )
    }

    /// Reads one `notify:` entry (`slack: U04XXXXXX`, `webhook: {url: ..., secret: ...}`).
    pub fn parse(name: &str, value: &Value) -> Result<Channel, String> {
        let text = |v: &Value| {
            v.scalar_text()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("notify.{name}: expected a non-empty string"))
        };
        Ok(match name {
            "webhook" => match value {
                Value::Map(m) => Channel::Webhook {
                    url: text(m.get("url").unwrap_or(&Value::Null))?,
                    secret: m
                        .get("secret")
                        .and_then(Value::scalar_text)
                        .filter(|s| !s.is_empty())
                        .map(Secret),
                },
                other => Channel::Webhook {
                    url: text(other)?,
                    secret: None,
                },
            },
            "slack" => Channel::Slack(text(value)?),
            "telegram" => Channel::Telegram(text(value)?),
            "sms" => Channel::Sms(text(value)?),
            "ntfy" => Channel::Ntfy(text(value)?),
            "email" => Channel::Email(text(value)?),
            "mail" => Channel::Mail(text(value)?),
            other => {
                return Err(format!(
                    "notify.{other}: unknown channel (webhook, slack, telegram, sms, ntfy, email, mail)"
                ));
            }
        })
    }

    /// The webhook signing key in an executor's `notify:` map (`webhook: {url, secret}`).
    pub fn webhook_secret_in(notify: &Value) -> Option<String> {
        notify
            .as_map()
            .and_then(|n| n.get("webhook"))
            .and_then(Value::as_map)
            .and_then(|w| w.get("secret"))
            .and_then(Value::scalar_text)
            .filter(|s| !s.trim().is_empty())
    }

    /// Every channel of an executor's `notify:` map, with the entries that could not be read.
    pub fn all_of(notify: &Value) -> (Vec<Channel>, Vec<String>) {
        let mut channels = Vec::new();
        let mut problems = Vec::new();
        if let Some(m) = notify.as_map() {
            for (name, value) in m.iter() {
                match Channel::parse(name, value) {
                    Ok(c) => channels.push(c),
                    Err(p) => problems.push(p),
                }
            }
        }
        (channels, problems)
    }
}

/// A sent notice: what the channel calls it, to update it later.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sent {
    /// The channel's id for the message (Slack `channel:ts`, Telegram `chat:message_id`, the
    /// ntfy sequence id).
    pub provider_ref: Option<String>,
}

/// A notice that was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// Worth trying again later (timeouts, 5xx, rate limits).
    #[error("{message}")]
    Retry {
        /// What happened (never a secret).
        message: String,
    },
    /// Trying again would not help (a bad address, a refused token, missing configuration).
    #[error("{message}")]
    Fail {
        /// What happened (never a secret).
        message: String,
    },
}

impl NotifyError {
    fn from_reqwest(what: &str, e: &reqwest::Error) -> NotifyError {
        // reqwest's messages name the URL, which for Telegram holds the bot token.
        let kind = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "could not connect"
        } else if e.is_builder() {
            // A request that cannot be built will not build next time either.
            return NotifyError::Fail {
                message: format!("{what}: the request cannot be built (a bad address or header)"),
            };
        } else {
            "request failed"
        };
        NotifyError::Retry {
            message: format!("{what}: {kind}"),
        }
    }

    fn from_status(what: &str, status: reqwest::StatusCode, _body: &str) -> NotifyError {
        // Only the status: the body comes from wherever a notify address points, and the
        // message ends up in thread history that others read.
        let message = format!("{what}: HTTP {}", status.as_u16());
        if status.is_server_error()
            || status == reqwest::StatusCode::TOO_MANY_REQUESTS
            || status == reqwest::StatusCode::REQUEST_TIMEOUT
        {
            NotifyError::Retry { message }
        } else {
            NotifyError::Fail { message }
        }
    }

    fn not_configured(what: &str) -> NotifyError {
        NotifyError::Fail {
            message: format!("{what} is not configured"),
        }
    }
}

/// Slack's settings (`dispatch.slack`).
#[derive(Debug, Clone, PartialEq)]
pub struct SlackSettings {
    /// API base (`https://slack.com/api`).
    pub base_url: String,
    /// The bot token (`xoxb-...`).
    pub bot_token: Option<Secret>,
}

/// Telegram's settings (`dispatch.telegram`).
#[derive(Debug, Clone, PartialEq)]
pub struct TelegramSettings {
    /// API base (`https://api.telegram.org`).
    pub base_url: String,
    /// The bot token.
    pub bot_token: Option<Secret>,
}

/// Twilio's settings for SMS (`dispatch.twilio`).
#[derive(Debug, Clone, PartialEq)]
pub struct TwilioSettings {
    /// API base (`https://api.twilio.com`).
    pub base_url: String,
    /// The account SID.
    pub account_sid: Option<String>,
    /// The auth token.
    pub auth_token: Option<Secret>,
    /// The sending number.
    pub from: Option<String>,
}

/// ntfy's settings (`dispatch.ntfy`).
#[derive(Debug, Clone, PartialEq)]
pub struct NtfySettings {
    /// Server base (`https://ntfy.sh`).
    pub base_url: String,
    /// An access token, for protected topics.
    pub token: Option<Secret>,
}

/// How email leaves (`dispatch.email`).
#[derive(Debug, Clone, PartialEq)]
pub struct EmailSettings {
    /// The SMTP server.
    pub smtp_host: Option<String>,
    /// Its port (587 by default).
    pub smtp_port: u16,
    /// `starttls` (default), `tls` (implicit, port 465) or `none` (local relays and tests).
    pub security: String,
    /// The sender address.
    pub from: Option<String>,
    /// SMTP login.
    pub username: Option<String>,
    /// SMTP password.
    pub password: Option<Secret>,
}

/// Every channel's settings: the `dispatch:` section of config.yaml.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Signing key for webhooks without their own.
    pub webhook_secret: Option<Secret>,
    /// Slack.
    pub slack: SlackSettings,
    /// Telegram.
    pub telegram: TelegramSettings,
    /// Twilio (SMS).
    pub twilio: TwilioSettings,
    /// ntfy.
    pub ntfy: NtfySettings,
    /// SMTP.
    pub email: EmailSettings,
    /// Longest wait for one attempt.
    pub timeout: Duration,
}

impl Settings {
    /// The documented defaults: the public services' URLs, no credentials, 10 s per attempt.
    pub fn defaults() -> Settings {
        Settings {
            webhook_secret: None,
            slack: SlackSettings {
                base_url: "https://slack.com/api".to_owned(),
                bot_token: None,
            },
            telegram: TelegramSettings {
                base_url: "https://api.telegram.org".to_owned(),
                bot_token: None,
            },
            twilio: TwilioSettings {
                base_url: "https://api.twilio.com".to_owned(),
                account_sid: None,
                auth_token: None,
                from: None,
            },
            ntfy: NtfySettings {
                base_url: "https://ntfy.sh".to_owned(),
                token: None,
            },
            email: EmailSettings {
                smtp_host: None,
                smtp_port: 587,
                security: "starttls".to_owned(),
                from: None,
                username: None,
                password: None,
            },
            timeout: Duration::from_secs(10),
        }
    }
}

/// Sends notices; one per server, shared by the delivery workers.
#[derive(Debug, Clone)]
pub struct Notifier {
    http: reqwest::Client,
    settings: Settings,
}

impl Notifier {
    /// A notifier with `settings`.
    pub fn new(settings: Settings) -> Result<Notifier, NotifyError> {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .user_agent(concat!("mess/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Fail {
                message: format!("cannot start the HTTP client: {e}"),
            })?;
        Ok(Notifier { http, settings })
    }

    /// Sends `notice` on `channel`.
    pub async fn send(&self, channel: &Channel, notice: &Notice) -> Result<Sent, NotifyError> {
        match channel {
            Channel::Webhook { url, secret } => {
                let secret = secret.as_ref().or(self.settings.webhook_secret.as_ref());
                webhook::send(&self.http, url, secret, notice).await
            }
            Channel::Slack(to) => slack::send(&self.http, &self.settings.slack, to, notice).await,
            Channel::Telegram(to) => {
                telegram::send(&self.http, &self.settings.telegram, to, notice).await
            }
            Channel::Sms(to) => sms::send(&self.http, &self.settings.twilio, to, notice).await,
            Channel::Ntfy(topic) => {
                ntfy::send(&self.http, &self.settings.ntfy, topic, notice).await
            }
            Channel::Email(to) => {
                email::send(&self.settings.email, self.settings.timeout, to, notice).await
            }
            Channel::Mail(_) => Err(NotifyError::Fail {
                message: "mail is delivered by the exchange, not sent".to_owned(),
            }),
        }
    }
}

/// Reads a JSON response body, classifying failures.
async fn json_of(
    what: &str,
    response: reqwest::Response,
) -> Result<serde_json::Value, NotifyError> {
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| NotifyError::from_reqwest(what, &e))?;
    if !status.is_success() {
        return Err(NotifyError::from_status(what, status, &body));
    }
    serde_json::from_str(&body).map_err(|_| NotifyError::Retry {
        message: format!("{what}: the answer is not JSON"),
    })
}

#[cfg(test)]
mod tests;
