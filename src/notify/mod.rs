//! Dispatch: sends a finished [`Notice`] on a [`Channel`] with the configured settings, and
//! never reads the store or the read model (P4). What Slack, Telegram, Twilio (SMS) and ntfy are
//! sent, and what their answers mean, is `mess_protocol::notice` (the Worker build sends the
//! same); this module sends it (`Notifier::send_outbound`), and has its own adapters for
//! webhooks (signed, with the address guard) and email over SMTP. Every base URL comes from
//! configuration, so tests point them at local servers. The `mail` channel is the exchange's:
//! it writes a file into a mailbox.
//!
//! Channel values are checked when read ([`Channel::parse`]), so no value can change the path
//! or query of a request or add a header; URLs are built segment by segment ([`endpoint`]).
//! No client follows redirects, and webhooks a key holder registered go through a client whose
//! resolver keeps them to public addresses and the operator's allow-list ([`guard`]).

mod email;
pub mod guard;
pub mod matrix;
mod webhook;

use std::time::Duration;

use crate::protocol::notice::{self as protocol_notice, Auth, Body, Outbound};
use crate::protocol::value::Value;

pub use crate::protocol::notice::{
    ClaimantEvent, Notice, NoticeKind, NotifyError, Sent, check_discord, check_matrix,
    check_ntfy_topic, check_phone, check_slack, check_telegram,
};

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
    /// A Discord channel id (a snowflake), posted to by the bot of `dispatch.discord`.
    Discord(String),
    /// A Matrix room id (`!abc:example.org`), or `default` for `dispatch.matrix.room`.
    Matrix(String),
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
    pub const NAMES: [&'static str; 9] = [
        "webhook", "slack", "telegram", "sms", "ntfy", "email", "mail", "discord", "matrix",
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
            Channel::Discord(_) => "discord",
            Channel::Matrix(_) => "matrix",
        }
    }

    /// Whether a message sent earlier can be updated when the thread is taken.
    pub fn updates_in_place(&self) -> bool {
        matches!(
            self,
            Channel::Slack(_)
                | Channel::Telegram(_)
                | Channel::Ntfy(_)
                | Channel::Discord(_)
                | Channel::Matrix(_)
        )
    }

    /// Whether a notice on the channel named `name` may carry buttons that act from the
    /// message (the press comes back through a hook, an act address or a reply).
    pub fn takes_buttons(name: &str) -> bool {
        matches!(
            name,
            "slack" | "telegram" | "discord" | "matrix" | "ntfy" | "email"
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
            "discord" => Channel::Discord(checked(value, check_discord)?),
            "matrix" => Channel::Matrix(checked(value, check_matrix)?),
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

/// A URL under an operator's base URL ([`protocol_notice::service_url`]: each segment whole,
/// no query or fragment), parsed.
pub fn endpoint<S: AsRef<str>>(base: &str, segments: &[S]) -> Result<reqwest::Url, String> {
    let url = protocol_notice::service_url(base, segments)?;
    reqwest::Url::parse(&url).map_err(|e| format!("base_url {base:?}: {e}"))
}

/// A transport failure (no answer): worth another attempt, unless the request cannot be built.
fn transport_error(what: &str, e: &reqwest::Error) -> NotifyError {
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

/// Slack's settings (`dispatch.slack`).
#[derive(Debug, Clone, PartialEq)]
pub struct SlackSettings {
    /// API base (`https://slack.com/api`).
    pub base_url: String,
    /// The bot token (`xoxb-...`).
    pub bot_token: Option<Secret>,
    /// The app's signing secret: with it, notices carry buttons and presses are taken at
    /// `POST /hooks/slack`.
    pub signing_secret: Option<Secret>,
}

/// Telegram's settings (`dispatch.telegram`).
#[derive(Debug, Clone, PartialEq)]
pub struct TelegramSettings {
    /// API base (`https://api.telegram.org`).
    pub base_url: String,
    /// The bot token.
    pub bot_token: Option<Secret>,
    /// The secret token given to `setWebhook`: with it, notices carry buttons and callback
    /// queries are taken at `POST /hooks/telegram` (Telegram sends it in a header).
    pub secret_token: Option<Secret>,
}

/// Discord's settings (`dispatch.discord`).
#[derive(Debug, Clone, PartialEq)]
pub struct DiscordSettings {
    /// API base (`https://discord.com/api/v10`).
    pub base_url: String,
    /// The application id (interactions name it).
    pub application_id: Option<String>,
    /// The application's Ed25519 public key (hex): with it, notices carry buttons and
    /// interactions are taken at `POST /hooks/discord`.
    pub public_key: Option<String>,
    /// The bot token.
    pub bot_token: Option<Secret>,
}

/// Matrix's settings (`dispatch.matrix`).
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSettings {
    /// The homeserver's base URL (`https://matrix.example.org`).
    pub homeserver: Option<String>,
    /// The bot account's access token.
    pub access_token: Option<Secret>,
    /// The room for executors whose entry is `matrix: default`.
    pub room: Option<String>,
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
    /// Discord.
    pub discord: DiscordSettings,
    /// Matrix.
    pub matrix: MatrixSettings,
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
                signing_secret: None,
            },
            telegram: TelegramSettings {
                base_url: "https://api.telegram.org".to_owned(),
                bot_token: None,
                secret_token: None,
            },
            discord: DiscordSettings {
                base_url: "https://discord.com/api/v10".to_owned(),
                application_id: None,
                public_key: None,
                bot_token: None,
            },
            matrix: MatrixSettings {
                homeserver: None,
                access_token: None,
                room: None,
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
            "discord" if self.discord.bot_token.is_none() => Some("dispatch.discord.bot_token"),
            "matrix" if self.matrix.homeserver.is_none() || self.matrix.access_token.is_none() => {
                Some("dispatch.matrix (homeserver and access_token)")
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

    /// A client for the Matrix homeserver, when `dispatch.matrix` names one and its token.
    pub fn matrix(&self) -> Option<matrix::MatrixClient> {
        let m = &self.settings.matrix;
        Some(matrix::MatrixClient {
            http: self.http.clone(),
            homeserver: m.homeserver.clone()?,
            token: m.access_token.as_ref()?.expose().to_owned(),
        })
    }

    /// The settings it sends with (the hooks check presses with their secrets).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether a press on `channel` can come back: Slack and Telegram post presses only to an
    /// app configured for them, Discord's are checked with its public key. Elsewhere the
    /// buttons are dropped rather than shown to fail.
    fn presses_return(&self, channel: &Channel) -> bool {
        match channel {
            Channel::Slack(_) => self.settings.slack.signing_secret.is_some(),
            Channel::Telegram(_) => self.settings.telegram.secret_token.is_some(),
            Channel::Discord(_) => self.settings.discord.public_key.is_some(),
            other => Channel::takes_buttons(other.name()),
        }
    }

    /// Sends `notice` on `channel`, chosen by `reach`.
    pub async fn send(
        &self,
        channel: &Channel,
        notice: &Notice,
        reach: Reach,
    ) -> Result<Sent, NotifyError> {
        let without_buttons;
        let notice = if notice.buttons.is_some() && !self.presses_return(channel) {
            without_buttons = Notice {
                buttons: None,
                ..notice.clone()
            };
            &without_buttons
        } else {
            notice
        };
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
            Channel::Slack(to) => {
                let slack = &self.settings.slack;
                let Some(token) = &slack.bot_token else {
                    return Err(NotifyError::not_configured("dispatch.slack.bot_token"));
                };
                let out = protocol_notice::slack(token.expose(), to, notice);
                self.send_outbound(&slack.base_url, out).await
            }
            Channel::Telegram(chat) => {
                let telegram = &self.settings.telegram;
                let Some(token) = &telegram.bot_token else {
                    return Err(NotifyError::not_configured("dispatch.telegram.bot_token"));
                };
                let out = protocol_notice::telegram(token.expose(), chat, notice);
                self.send_outbound(&telegram.base_url, out).await
            }
            Channel::Sms(to) => {
                let twilio = &self.settings.twilio;
                let (Some(sid), Some(token), Some(from)) =
                    (&twilio.account_sid, &twilio.auth_token, &twilio.from)
                else {
                    return Err(NotifyError::not_configured(
                        "dispatch.twilio (account_sid, auth_token and from)",
                    ));
                };
                let out = protocol_notice::sms(sid, token.expose(), from, to, notice);
                self.send_outbound(&twilio.base_url, out).await
            }
            Channel::Ntfy(topic) => {
                let ntfy = &self.settings.ntfy;
                let out =
                    protocol_notice::ntfy(ntfy.token.as_ref().map(Secret::expose), topic, notice)
                        .map_err(|e| NotifyError::endpoint("ntfy", e))?;
                self.send_outbound(&ntfy.base_url, out).await
            }
            Channel::Email(to) => {
                email::send(&self.settings.email, self.settings.timeout, to, notice).await
            }
            Channel::Discord(to) => {
                let discord = &self.settings.discord;
                let Some(token) = &discord.bot_token else {
                    return Err(NotifyError::not_configured("dispatch.discord.bot_token"));
                };
                let out = protocol_notice::discord(token.expose(), to, notice);
                self.send_outbound(&discord.base_url, out).await
            }
            Channel::Matrix(to) => {
                let matrix = &self.settings.matrix;
                let (Some(base), Some(token)) = (&matrix.homeserver, &matrix.access_token) else {
                    return Err(NotifyError::not_configured(
                        "dispatch.matrix (homeserver and access_token)",
                    ));
                };
                let room = match (to.as_str(), &matrix.room) {
                    ("default", Some(room)) => room.clone(),
                    ("default", None) => {
                        return Err(NotifyError::not_configured("dispatch.matrix.room"));
                    }
                    _ => to.clone(),
                };
                let out = protocol_notice::matrix(token.expose(), &room, notice);
                self.send_outbound(base, out).await
            }
            Channel::Mail(_) => Err(NotifyError::Fail {
                message: "mail is delivered by the exchange, not sent".to_owned(),
            }),
        }
    }

    /// Sends what `mess_protocol::notice` built for a service under `base`, and reads its
    /// answer there too.
    pub(crate) async fn send_outbound(
        &self,
        base: &str,
        out: Outbound,
    ) -> Result<Sent, NotifyError> {
        let what = out.what;
        let url = endpoint(base, &out.path).map_err(|e| {
            // A credential in the path (Telegram's token) stays out of every message.
            let problem = if out.secret_in_path {
                format!("check dispatch.{what}")
            } else {
                e
            };
            NotifyError::endpoint(what, problem)
        })?;
        let method = reqwest::Method::from_bytes(out.method.as_bytes())
            .map_err(|_| NotifyError::endpoint(what, format!("bad method {}", out.method)))?;
        let mut request = self.http.request(method, url);
        for (name, value) in &out.headers {
            request = request.header(name, value);
        }
        request = match &out.auth {
            Auth::None => request,
            Auth::Bearer(token) => request.bearer_auth(token),
            Auth::Basic { user, password } => request.basic_auth(user, Some(password)),
        };
        request = match &out.body {
            Body::Json(v) => request.json(v),
            Body::Form(pairs) => request.form(pairs),
            Body::Text(text) => request.body(text.clone()),
        };
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(what, &e))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| transport_error(what, &e))?;
        out.read(status, &body)
    }
}

#[cfg(test)]
mod tests;
