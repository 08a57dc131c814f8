//! Dispatch adapters: one file per channel (webhook, Slack, Telegram, SMS through Twilio, ntfy,
//! email over SMTP). They receive finished values (a [`Notice`] and a [`Channel`]) and
//! configuration, and never read the store or the read model (P4); every base URL comes from
//! configuration, so tests point them at local servers. The `mail` channel is the exchange's:
//! it writes a file into a mailbox.
//!
//! Channel values are checked when read ([`Channel::parse`]), so no value can change the path
//! or query of a request or add a header; URLs are built segment by segment ([`endpoint`]).
//! No client follows redirects, and webhooks a key holder registered go through a client whose
//! resolver keeps them to public addresses and the operator's allow-list ([`guard`]).

mod email;
pub mod guard;
mod ntfy;
mod slack;
mod sms;
mod telegram;
mod webhook;

use std::time::Duration;

use crate::protocol::value::Value;

pub use guard::Allow;
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
    /// Something the executor holding the thread must hear: the requestor answered its
    /// questions, confirmed or refused, or cancelled; or the thread ended without it.
    ForClaimant(ClaimantEvent),
    /// For a requestor's callback: its thread changed (a new status, or a message from
    /// someone else).
    Changed {
        /// The status it has now.
        status: String,
    },
}

/// What happened on a thread its claimant is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimantEvent {
    /// The requestor answered the claimant's questions.
    Answered,
    /// The requestor confirmed: the work may go ahead.
    Confirmed,
    /// The requestor refused the confirmation.
    Refused,
    /// The requestor cancelled the request.
    Cancelled,
    /// The thread expired or failed while the claimant held it.
    Ended,
    /// The requestor reviewed the finished work.
    Reviewed,
    /// The requestor asked for the work again (a review with `request_redo`).
    Redo,
}

impl ClaimantEvent {
    /// The event's name in delivery kinds and webhook headers.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimantEvent::Answered => "answered",
            ClaimantEvent::Confirmed => "confirmed",
            ClaimantEvent::Refused => "refused",
            ClaimantEvent::Cancelled => "cancelled",
            ClaimantEvent::Ended => "ended",
            ClaimantEvent::Reviewed => "reviewed",
            ClaimantEvent::Redo => "redo",
        }
    }

    /// The event a delivery kind names.
    pub fn parse(kind: &str) -> Option<ClaimantEvent> {
        [
            ClaimantEvent::Answered,
            ClaimantEvent::Confirmed,
            ClaimantEvent::Refused,
            ClaimantEvent::Cancelled,
            ClaimantEvent::Ended,
            ClaimantEvent::Reviewed,
            ClaimantEvent::Redo,
        ]
        .into_iter()
        .find(|e| e.as_str() == kind)
    }
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
            NoticeKind::ForClaimant(e) => e.as_str(),
            NoticeKind::Changed { .. } => "changed",
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
            NoticeKind::ForClaimant(e) => match e {
                ClaimantEvent::Answered => format!("Your questions were answered: {}", self.intent),
                ClaimantEvent::Confirmed => format!("Confirmed, go ahead: {}", self.intent),
                ClaimantEvent::Refused => format!("Confirmation refused: {}", self.intent),
                ClaimantEvent::Cancelled => format!("Cancelled by the requestor: {}", self.intent),
                ClaimantEvent::Ended => format!("Ended while you held it: {}", self.intent),
                ClaimantEvent::Reviewed => format!("Your work was reviewed: {}", self.intent),
                ClaimantEvent::Redo => format!("Please do it again: {}", self.intent),
            },
            NoticeKind::Changed { status } => format!("Now {status}: {}", self.intent),
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
        /// The receiver (`http` or `https`).
        url: String,
        /// The key that signs for this receiver: its own, else the shared one (the exchange
        /// fills it in before sending).
        secret: Option<Secret>,
    },
    /// A Slack channel or user id (`C0123ABCD`, `U04XXXXXX`) or channel name (`#robots`).
    Slack(String),
    /// A Telegram chat id (`-1001234567890`) or public username (`@my_channel`).
    Telegram(String),
    /// A phone number (E.164: `+` and 7 to 15 digits).
    Sms(String),
    /// An ntfy topic (`[A-Za-z0-9_-]`, 1 to 64).
    Ntfy(String),
    /// An email address (an RFC 5322 addr-spec, no display name).
    Email(String),
    /// An agent mailbox (written by the exchange, not sent).
    Mail(String),
}

/// A `notify:` entry that cannot be used: which one, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct BadChannel {
    /// `notify.<channel>`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
    /// Whether the channel's name is one this exchange does not know (the others have a bad
    /// value).
    pub unknown: bool,
}

/// Who chose where a notice goes, which decides where it may lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The operator (config.yaml, or a registration made locally without a key): anywhere.
    Operator,
    /// A key holder's registration: webhooks reach public addresses and
    /// `dispatch.webhook.allow` only, and every failure is retried alike, so the number of
    /// attempts says nothing of what answered.
    KeyHolder,
}

impl Channel {
    /// The channels this exchange knows, as named in `notify:`.
    pub const NAMES: [&'static str; 7] = [
        "webhook", "slack", "telegram", "sms", "ntfy", "email", "mail",
    ];

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

    /// Reads one `notify:` entry (`slack: U04XXXXXX`, `webhook: {url: ..., secret: ...}`),
    /// checking its value has the channel's form.
    pub fn parse(name: &str, value: &Value) -> Result<Channel, BadChannel> {
        let bad = |problem: String| BadChannel {
            field: format!("notify.{name}"),
            problem,
            unknown: false,
        };
        let text = |v: &Value| {
            v.scalar_text()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| bad("expected a non-empty string".to_owned()))
        };
        let checked = |v: &Value, check: fn(&str) -> Result<(), String>| {
            let value = text(v)?;
            check(&value).map_err(bad)?;
            Ok::<_, BadChannel>(value)
        };
        Ok(match name {
            "webhook" => {
                let (url, secret) = match value {
                    Value::Map(m) => (
                        text(m.get("url").unwrap_or(&Value::Null))?,
                        m.get("secret")
                            .and_then(Value::scalar_text)
                            .filter(|s| !s.is_empty())
                            .map(Secret),
                    ),
                    other => (text(other)?, None),
                };
                guard::webhook_url(&url).map_err(bad)?;
                Channel::Webhook { url, secret }
            }
            "slack" => Channel::Slack(checked(value, check_slack)?),
            "telegram" => Channel::Telegram(checked(value, check_telegram)?),
            "sms" => Channel::Sms(checked(value, check_phone)?),
            "ntfy" => Channel::Ntfy(checked(value, check_ntfy_topic)?),
            "email" => Channel::Email(checked(value, check_email)?),
            "mail" => Channel::Mail(text(value)?),
            other => {
                return Err(BadChannel {
                    field: format!("notify.{other}"),
                    problem: format!("unknown channel ({})", Channel::NAMES.join(", ")),
                    unknown: true,
                });
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
    pub fn all_of(notify: &Value) -> (Vec<Channel>, Vec<BadChannel>) {
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

/// An ntfy topic: `[A-Za-z0-9_-]{1,64}` (what ntfy.sh accepts), so it is one path segment.
pub fn check_ntfy_topic(topic: &str) -> Result<(), String> {
    let fine = (1..=64).contains(&topic.len())
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{topic:?} is not an ntfy topic (1 to 64 letters, digits, '-' or '_')"
        ))
    }
}

/// A Telegram chat: a numeric id (`-?` and 1 to 20 digits) or a public username (`@`, a letter,
/// then 4 to 31 letters, digits or `_`).
pub fn check_telegram(chat: &str) -> Result<(), String> {
    let digits = chat.strip_prefix('-').unwrap_or(chat);
    let numeric = (1..=20).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
    let username = chat.strip_prefix('@').is_some_and(|u| {
        (5..=32).contains(&u.len())
            && u.starts_with(|c: char| c.is_ascii_alphabetic())
            && u.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if numeric || username {
        Ok(())
    } else {
        Err(format!(
            "{chat:?} is not a Telegram chat (a numeric id such as -1001234567890, or @username)"
        ))
    }
}

/// A phone number in E.164: `+`, then 7 to 15 digits, the first not 0.
pub fn check_phone(number: &str) -> Result<(), String> {
    let fine = number.strip_prefix('+').is_some_and(|d| {
        (7..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0')
    });
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{number:?} is not an E.164 number ('+' and 7 to 15 digits, such as +15551234567)"
        ))
    }
}

/// A Slack conversation: an id (`C0123ABCD`, `U04XXXXXX`: 2 to 32 upper-case letters and
/// digits) or a channel name (`#robots` or `robots`: lower case letters, digits, `-`, `_`, `.`,
/// at most 80).
pub fn check_slack(to: &str) -> Result<(), String> {
    let id = (2..=32).contains(&to.len())
        && to
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    let name = to.strip_prefix('#').unwrap_or(to);
    let named = (1..=80).contains(&name.len())
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
        && name.bytes().any(|b| b != b'.');
    if id || named {
        Ok(())
    } else {
        Err(format!(
            "{to:?} is not a Slack id (C0123ABCD, U04XXXXXX) or channel name (#robots)"
        ))
    }
}

/// An email address: an RFC 5322 addr-spec as lettre reads it (no display name, no spaces or
/// line breaks).
pub fn check_email(address: &str) -> Result<(), String> {
    if address.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "{address:?} is not an email address (spaces and line breaks are not allowed)"
        ));
    }
    address
        .parse::<lettre::Address>()
        .map(|_| ())
        .map_err(|e| format!("{address:?} is not an email address ({e})"))
}

/// A URL under an operator's base URL: `base` with `segments` appended one by one (each
/// percent-encoded, so a `/`, `?` or `#` in one stays inside it) and no query or fragment.
/// An empty segment, `.` or `..`, or one holding `%`, is refused: the URL parser would drop or
/// reinterpret it.
pub fn endpoint(base: &str, segments: &[&str]) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(base).map_err(|e| format!("base_url {base:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("base_url {base:?}: not http or https"));
    }
    for segment in segments {
        if segment.is_empty()
            || *segment == "."
            || *segment == ".."
            || segment.contains('%')
            || segment.chars().any(char::is_control)
        {
            return Err(format!("{segment:?} cannot be a path segment"));
        }
    }
    url.set_query(None);
    url.set_fragment(None);
    url.path_segments_mut()
        .map_err(|()| format!("base_url {base:?}: cannot hold a path"))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
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
        } else if let Some(refused) = guard::Refused::in_chain(e) {
            return NotifyError::Retry {
                message: format!("{what}: refused: {refused}"),
            };
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

    /// A URL that cannot be built from the configuration and the channel's value.
    fn endpoint(what: &str, problem: String) -> NotifyError {
        NotifyError::Fail {
            message: format!("{what}: cannot build the address: {problem}"),
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
    /// Where webhooks of key-made registrations may lead besides public addresses
    /// (`dispatch.webhook.allow`).
    pub webhook_allow: Allow,
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
            webhook_allow: Allow::public_only(),
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

    /// The settings the channel `name` lacks to send anything (`None` when it can send: ntfy
    /// needs no token, webhooks are signed with a generated key when none is configured).
    pub fn missing(&self, name: &str) -> Option<&'static str> {
        match name {
            "slack" if self.slack.bot_token.is_none() => Some("dispatch.slack.bot_token"),
            "telegram" if self.telegram.bot_token.is_none() => Some("dispatch.telegram.bot_token"),
            "sms"
                if self.twilio.account_sid.is_none()
                    || self.twilio.auth_token.is_none()
                    || self.twilio.from.is_none() =>
            {
                Some("dispatch.twilio (account_sid, auth_token and from)")
            }
            "email" if self.email.smtp_host.is_none() || self.email.from.is_none() => {
                Some("dispatch.email (smtp_host and from)")
            }
            _ => None,
        }
    }
}

/// Sends notices; one per server, shared by the delivery workers.
#[derive(Debug, Clone)]
pub struct Notifier {
    /// For the operator's addresses: every channel's service and the operator's webhooks.
    http: reqwest::Client,
    /// For webhooks key holders registered: public addresses and the allow-list only, no
    /// proxy (a proxy would resolve the name where the resolver cannot check it).
    guarded: reqwest::Client,
    settings: Settings,
}

impl Notifier {
    /// A notifier with `settings`.
    pub fn new(settings: Settings) -> Result<Notifier, NotifyError> {
        let failed = |e: reqwest::Error| NotifyError::Fail {
            message: format!("cannot start the HTTP client: {e}"),
        };
        // A redirect would lead a notice (and a webhook's signed thread) to an address nobody
        // checked: an answer is final, whatever it says.
        let builder = || {
            reqwest::Client::builder()
                .timeout(settings.timeout)
                .user_agent(concat!("mess/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
        };
        let http = builder().build().map_err(failed)?;
        let guarded = builder()
            .no_proxy()
            .dns_resolver(guard::Resolver {
                allow: std::sync::Arc::new(settings.webhook_allow.clone()),
            })
            .build()
            .map_err(failed)?;
        Ok(Notifier {
            http,
            guarded,
            settings,
        })
    }

    /// Sends `notice` on `channel`, chosen by `reach`.
    pub async fn send(
        &self,
        channel: &Channel,
        notice: &Notice,
        reach: Reach,
    ) -> Result<Sent, NotifyError> {
        match channel {
            Channel::Webhook { url, secret } => match reach {
                Reach::Operator => webhook::send(&self.http, url, secret.as_ref(), notice).await,
                Reach::KeyHolder => {
                    // The literal address is checked here (the resolver sees only names); any
                    // failure is retried alike, so the attempts tell nothing of what answered.
                    let sent = match self.settings.webhook_allow.check_address(url) {
                        Ok(_) => webhook::send(&self.guarded, url, secret.as_ref(), notice).await,
                        Err(why) => Err(NotifyError::Fail {
                            message: format!("webhook: refused: {why}"),
                        }),
                    };
                    sent.map_err(|e| NotifyError::Retry {
                        message: e.to_string(),
                    })
                }
            },
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
