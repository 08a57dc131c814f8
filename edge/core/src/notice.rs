//! Notices at the edge, sent as the native exchange sends them. An executor's webhook gets the
//! whole thread file, signed (`x-mess-signature` over `<timestamp>.<delivery>.<body>`, the same
//! delivery ids and headers); Slack, Telegram, SMS through Twilio and ntfy get what
//! `mess_protocol::notice` builds for them, with a presigned link to the page. The engine names
//! the deliveries a request owes; the Durable Object keeps them in its outbox and hands them to
//! a Queue, whose consumer asks the engine ([`prepare`]) for the request to send at that moment
//! and reads the answer with the same rule ([`read_answer`]). Every registration at the edge is
//! made with a key, so a webhook may lead only where a key-made webhook may on `mess serve`:
//! public addresses, or hosts the operator lists.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use mess_protocol::config::ExecutorSpec;
use mess_protocol::ids::ThreadRef;
use mess_protocol::link::{Action, Grant};
use mess_protocol::net;
use mess_protocol::notice::{self as service, Auth, Body, Notice, NoticeKind, Reading};
use mess_protocol::value::Value;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::home::Home;

/// How long the link in a notice works (the native exchange's `dispatch.link_ttl`).
const LINK_TTL_SECONDS: i64 = 24 * 3600;

/// The Worker's settings for notices (its environment, read by the Durable Object): what signs
/// webhooks and where they may lead, and each service's credentials and base URL (for tests
/// and self-hosted servers; the public services when unset).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Dispatch {
    /// `MESS_WEBHOOK_SECRET`: signs webhooks whose registration brings no `secret`.
    #[serde(default)]
    pub webhook_secret: Option<String>,
    /// `MESS_WEBHOOK_ALLOW`: hosts (names or addresses) a webhook may reach beyond public ones.
    #[serde(default)]
    pub webhook_allow: Vec<String>,
    /// `MESS_SLACK_TOKEN`: the bot token (`xoxb-…`).
    #[serde(default)]
    pub slack_token: Option<String>,
    /// `MESS_SLACK_URL` (`https://slack.com/api`).
    #[serde(default)]
    pub slack_url: Option<String>,
    /// `MESS_TELEGRAM_TOKEN`: the bot token.
    #[serde(default)]
    pub telegram_token: Option<String>,
    /// `MESS_TELEGRAM_URL` (`https://api.telegram.org`).
    #[serde(default)]
    pub telegram_url: Option<String>,
    /// `MESS_TWILIO_SID`: the account.
    #[serde(default)]
    pub twilio_sid: Option<String>,
    /// `MESS_TWILIO_TOKEN`: its auth token.
    #[serde(default)]
    pub twilio_token: Option<String>,
    /// `MESS_TWILIO_FROM`: the sending number.
    #[serde(default)]
    pub twilio_from: Option<String>,
    /// `MESS_TWILIO_URL` (`https://api.twilio.com`).
    #[serde(default)]
    pub twilio_url: Option<String>,
    /// `MESS_NTFY_URL` (`https://ntfy.sh`).
    #[serde(default)]
    pub ntfy_url: Option<String>,
    /// `MESS_NTFY_TOKEN`: for protected topics.
    #[serde(default)]
    pub ntfy_token: Option<String>,
}

/// A setting that is there and not empty.
fn given(setting: &Option<String>) -> Option<&str> {
    setting.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// A service's base URL: the setting's, else the public service's.
fn or_public<'a>(setting: &'a Option<String>, public: &'static str) -> &'a str {
    given(setting).unwrap_or(public)
}

impl Dispatch {
    /// The channels the Worker sends.
    pub const CHANNELS: [&'static str; 5] = ["webhook", "slack", "telegram", "sms", "ntfy"];

    /// The webhook signing key the Worker has for registrations without their own.
    pub fn webhook_secret(&self) -> Option<&str> {
        given(&self.webhook_secret)
    }

    /// The Worker settings `channel` lacks to send anything (webhooks: see [`check_url`]).
    pub fn missing(&self, channel: &str) -> Option<&'static str> {
        match channel {
            "slack" if given(&self.slack_token).is_none() => Some("MESS_SLACK_TOKEN"),
            "telegram" if given(&self.telegram_token).is_none() => Some("MESS_TELEGRAM_TOKEN"),
            "sms"
                if [&self.twilio_sid, &self.twilio_token, &self.twilio_from]
                    .iter()
                    .any(|s| given(s).is_none()) =>
            {
                Some("MESS_TWILIO_SID, MESS_TWILIO_TOKEN and MESS_TWILIO_FROM")
            }
            _ => None,
        }
    }

    /// The request `notice` makes of `channel`'s service for address `to`, and the base URL
    /// it goes under.
    fn outbound(
        &self,
        channel: &str,
        to: &str,
        notice: &Notice,
    ) -> Result<(&str, service::Outbound), String> {
        let missing = || {
            format!(
                "the Worker has no {}",
                self.missing(channel).unwrap_or("settings for it")
            )
        };
        Ok(match channel {
            "slack" => {
                let token = given(&self.slack_token).ok_or_else(missing)?;
                service::check_slack(to)?;
                (
                    or_public(&self.slack_url, "https://slack.com/api"),
                    service::slack(token, to, notice),
                )
            }
            "telegram" => {
                let token = given(&self.telegram_token).ok_or_else(missing)?;
                service::check_telegram(to)?;
                (
                    or_public(&self.telegram_url, "https://api.telegram.org"),
                    service::telegram(token, to, notice),
                )
            }
            "sms" => {
                let (Some(sid), Some(token), Some(from)) = (
                    given(&self.twilio_sid),
                    given(&self.twilio_token),
                    given(&self.twilio_from),
                ) else {
                    return Err(missing());
                };
                service::check_phone(to)?;
                (
                    or_public(&self.twilio_url, "https://api.twilio.com"),
                    service::sms(sid, token, from, to, notice),
                )
            }
            "ntfy" => (
                or_public(&self.ntfy_url, "https://ntfy.sh"),
                service::ntfy(given(&self.ntfy_token), to, notice)?,
            ),
            other => return Err(format!("the Worker does not send {other} notices")),
        })
    }
}

/// Checks the address an executor gives `channel` (`slack: C0123ABCD`), as the native exchange
/// checks it.
pub fn check_address(channel: &str, to: &str) -> Result<(), String> {
    match channel {
        "slack" => service::check_slack(to),
        "telegram" => service::check_telegram(to),
        "sms" => service::check_phone(to),
        "ntfy" => service::check_ntfy_topic(to),
        _ => Ok(()),
    }
}

/// One delivery owed: a notice of `event` about `thread` for `executor`, on `channel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// `THREAD.EXECUTOR.CHANNEL.EVENT`, as the native exchange names deliveries (receivers use
    /// it to drop repeats).
    pub id: String,
    /// The thread's ref.
    pub thread: String,
    /// The executor.
    pub executor: String,
    /// `webhook`, `slack`, `telegram`, `sms` or `ntfy`.
    #[serde(default = "webhook")]
    pub channel: String,
    /// `new`.
    pub event: String,
    /// The exchange's public URL when the notice was owed: its link points there.
    #[serde(default)]
    pub issuer: String,
}

fn webhook() -> String {
    "webhook".to_owned()
}

impl Delivery {
    /// A notice on `channel` that `thread` waits for `executor`, whose link points at `issuer`.
    pub fn new_request(
        thread: &ThreadRef,
        executor: &str,
        channel: &str,
        issuer: &str,
    ) -> Delivery {
        Delivery {
            id: format!("{thread}.{executor}.{channel}.new"),
            thread: thread.to_string(),
            executor: executor.to_owned(),
            channel: channel.to_owned(),
            event: "new".to_owned(),
            issuer: issuer.to_owned(),
        }
    }
}

/// The channels an executor's registration names that the Worker sends, in its order.
pub fn channels_of(spec: &ExecutorSpec) -> Vec<String> {
    spec.extra
        .get("notify")
        .and_then(Value::as_map)
        .map(|m| {
            m.iter()
                .map(|(name, _)| name.to_owned())
                .filter(|name| Dispatch::CHANNELS.contains(&name.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

/// The address an executor's registration gives `channel` (not a webhook's).
pub fn address_of(spec: &ExecutorSpec, channel: &str) -> Option<String> {
    spec.extra
        .get("notify")?
        .as_map()?
        .get(channel)?
        .scalar_text()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The signature header's value: `sha256=<hex of HMAC-SHA256(secret, "<at>.<delivery>.<body>")>`.
pub fn sign(secret: &[u8], at: i64, delivery: &str, body: &[u8]) -> String {
    // HMAC takes keys of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(at.to_string().as_bytes());
    mac.update(b".");
    mac.update(delivery.as_bytes());
    mac.update(b".");
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// Checks a webhook address as the native exchange checks a key-made one: http or https, a
/// host, no spaces or control characters; an address must be public and a name must not
/// mean this machine, unless the operator lists the host.
pub fn check_url(raw: &str, allow: &[String]) -> Result<url::Url, String> {
    if let Some(c) = raw.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "the URL holds {c:?}; spaces and control characters are not allowed"
        ));
    }
    let url = url::Url::parse(raw).map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{}: is not allowed; webhooks are http or https",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the URL holds a user name or password; give the key as secret: instead".to_owned(),
        );
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or("the URL has no host")?;
    // IPv6 literals come bracketed; IPv4 ones already normalised (`0x7f.1` is 127.0.0.1).
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    let listed = allow
        .iter()
        .any(|a| a.trim().trim_end_matches('.').eq_ignore_ascii_case(bare) || *a == name);
    if listed {
        return Ok(url);
    }
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) if !net::is_public(ip) => Err(format!(
            "{ip} is not a public address (loopback, private, link-local, multicast or reserved); the operator may allow it in MESS_WEBHOOK_ALLOW"
        )),
        Err(_) if net::is_local_name(&name) => Err(format!(
            "{name} names this machine; the operator may allow it in MESS_WEBHOOK_ALLOW"
        )),
        _ => Ok(url),
    }
}

/// An executor's webhook: its address and its own signing key, if it gave one.
pub fn webhook_of(spec: &ExecutorSpec) -> Option<(String, Option<String>)> {
    let hook = spec.extra.get("notify")?.as_map()?.get("webhook")?;
    match hook {
        Value::Map(m) => Some((
            m.get("url")?.scalar_text()?,
            m.get("secret")
                .and_then(Value::scalar_text)
                .filter(|s| !s.is_empty()),
        )),
        other => Some((other.scalar_text()?, None)),
    }
}

/// The request a delivery sends now.
#[derive(Debug, Serialize)]
pub struct Prepared {
    /// Where.
    pub url: String,
    /// Its headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// How the answer is read ([`read_answer`]); none for a webhook, where any 2xx is
    /// delivered.
    pub reading: Option<Reading>,
}

/// Where a delivery's notice stands when it is to be sent.
struct Due<'s> {
    spec: &'s ExecutorSpec,
    env: mess_protocol::envelope::Envelope,
    body: String,
}

/// What the Queue's consumer sends for `delivery` at `at` (Unix seconds): the notice as the
/// thread is now; `Err` says why nothing is sent any more (the executor or its address is gone,
/// the request no longer waits for it, the address is refused, a setting is missing), and the
/// delivery is dropped.
pub fn prepare(
    home: &Home<'_>,
    delivery: &Delivery,
    dispatch: &Dispatch,
    link_secret: Option<&str>,
    at: i64,
) -> Result<Prepared, String> {
    let roster = home.roster();
    let spec = roster
        .executors
        .get(&delivery.executor)
        .ok_or_else(|| format!("executor {} is no longer registered", delivery.executor))?;
    let thread = ThreadRef::parse(&delivery.thread).map_err(|e| e.to_string())?;
    let (_, body) = home
        .read(&thread)
        .ok_or_else(|| format!("no thread {}", delivery.thread))?;
    // A new request's notice goes out only while the request still waits and the executor may
    // still see it (as the native exchange drops it): once someone took it, a retry must not
    // hand the thread to those who lost it.
    let env = crate::home::envelope_of(&body).map_err(|f| f.body())?;
    if env.status != mess_protocol::status::Status::Pending
        || !mess_protocol::access::may_see(&delivery.executor, &env, &roster)
    {
        return Err(format!(
            "{} no longer waits for {}",
            delivery.thread, delivery.executor
        ));
    }
    let due = Due { spec, env, body };
    if delivery.channel == "webhook" {
        return prepare_webhook(&due, delivery, dispatch, at);
    }
    let to = address_of(spec, &delivery.channel).ok_or_else(|| {
        format!(
            "executor {} has no {} address any more",
            delivery.executor, delivery.channel
        )
    })?;
    let link = link_secret.and_then(|secret| {
        let grant = Grant {
            thread: delivery.thread.clone(),
            executor: delivery.executor.clone(),
            actions: Action::ALL.to_vec(),
            exp: at.saturating_add(LINK_TTL_SECONDS),
            iat: at,
            via: Some(delivery.channel.clone()),
            iss: Some(delivery.issuer.clone()),
            aud: home.exchange_id()?,
        };
        let token = crate::link::mint(secret.as_bytes(), &grant).ok()?;
        Some(mess_protocol::link::page_url(
            &delivery.issuer,
            &delivery.thread,
            &token,
        ))
    });
    let notice = Notice {
        delivery: delivery.id.clone(),
        kind: NoticeKind::New,
        thread: delivery.thread.clone(),
        intent: due.env.intent.clone(),
        priority: due.env.priority.as_str().to_owned(),
        needed_by: due
            .env
            .needed_by
            .map(|t| mess_protocol::time::format_timestamp(&t)),
        requires: due.env.requires.clone(),
        link,
        thread_yaml: due.body,
        previous: None,
        at,
        asks: mess_protocol::notice::Asks::of(&due.env.hands),
        // A press needs the native exchange's hooks.
        buttons: None,
    };
    let (base, out) = dispatch.outbound(&delivery.channel, &to, &notice)?;
    // The Worker posts every notice; a service that needs another method is not one it sends.
    if out.method != "POST" {
        return Err(format!(
            "{}: the Worker does not send this channel",
            out.what
        ));
    }
    let url = service::service_url(base, &out.path)
        .and_then(|u| url::Url::parse(&u).map_err(|e| e.to_string()))
        .map_err(|e| {
            // A credential in the path (Telegram's token) stays out of every message.
            let problem = if out.secret_in_path {
                "check the Worker's settings for it".to_owned()
            } else {
                e
            };
            format!("{}: cannot build the address: {problem}", out.what)
        })?;
    let mut headers = out.headers;
    match &out.auth {
        Auth::None => {}
        Auth::Bearer(token) => headers.push(("authorization".into(), format!("Bearer {token}"))),
        Auth::Basic { user, password } => headers.push((
            "authorization".into(),
            format!("Basic {}", STANDARD.encode(format!("{user}:{password}"))),
        )),
    }
    let (content_type, body) = match out.body {
        Body::Json(v) => ("application/json", v.to_string()),
        Body::Form(pairs) => (
            "application/x-www-form-urlencoded",
            url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs)
                .finish(),
        ),
        Body::Text(text) => ("text/plain; charset=utf-8", text),
    };
    headers.push(("content-type".into(), content_type.into()));
    Ok(Prepared {
        url: url.to_string(),
        headers,
        body,
        reading: Some(out.reading),
    })
}

/// A webhook: the thread file as it is now, signed with the executor's own key or the
/// Worker's.
fn prepare_webhook(
    due: &Due<'_>,
    delivery: &Delivery,
    dispatch: &Dispatch,
    at: i64,
) -> Result<Prepared, String> {
    let (url, own) = webhook_of(due.spec)
        .ok_or_else(|| format!("executor {} has no webhook any more", delivery.executor))?;
    let url = check_url(&url, &dispatch.webhook_allow)?;
    let secret = own
        .or_else(|| dispatch.webhook_secret().map(str::to_owned))
        .ok_or("no signing key (secret: beside the url, or the Worker's MESS_WEBHOOK_SECRET)")?;
    let signature = sign(secret.as_bytes(), at, &delivery.id, due.body.as_bytes());
    Ok(Prepared {
        url: url.to_string(),
        headers: vec![
            ("content-type".into(), "application/yaml".into()),
            ("x-mess-signature".into(), signature),
            ("x-mess-timestamp".into(), at.to_string()),
            ("x-mess-delivery".into(), delivery.id.clone()),
            ("x-mess-event".into(), delivery.event.clone()),
            ("x-mess-thread".into(), delivery.thread.clone()),
        ],
        body: due.body.clone(),
        reading: None,
    })
}

/// What the Queue's consumer hands over for one delivery.
#[derive(Debug, Deserialize)]
pub struct NoticeInput {
    /// The delivery.
    pub delivery: Delivery,
    /// Unix seconds now (the exchange's clock).
    pub at: i64,
    /// `MESS_SECRET`, which signs the notice's link.
    #[serde(default)]
    pub link_secret: Option<String>,
    /// The Worker's settings for notices.
    #[serde(flatten)]
    pub dispatch: Dispatch,
}

/// [`prepare`] over a [`NoticeInput`] as JSON: `{"send": Prepared}` or `{"drop": WHY}`.
pub fn answer(kv: &mut dyn crate::kv::Kv, input: &[u8]) -> String {
    let input: NoticeInput = match serde_json::from_slice(input) {
        Ok(i) => i,
        Err(e) => {
            return serde_json::json!({"drop": format!("the Worker's notice: {e}")}).to_string();
        }
    };
    let home = Home::new(kv);
    let secret = given(&input.link_secret);
    match prepare(&home, &input.delivery, &input.dispatch, secret, input.at) {
        Ok(p) => serde_json::json!({"send": p}).to_string(),
        Err(why) => serde_json::json!({"drop": why}).to_string(),
    }
}

/// A service's answer to a sent notice, as the Queue's consumer hands it over.
#[derive(Debug, Deserialize)]
pub struct AnswerInput {
    /// How to read it ([`Prepared::reading`]); none for a webhook.
    #[serde(default)]
    pub reading: Option<Reading>,
    /// The HTTP status.
    pub status: u16,
    /// The body (a service's answer is small; the consumer reads at most 64 KiB).
    #[serde(default)]
    pub body: String,
}

/// What an answer means, as JSON: `{"sent": PROVIDER_REF}`, `{"retry": WHY}` or
/// `{"fail": WHY}` (dropped: another attempt would not help). A webhook is registered with a
/// key, so every failure of one is retried alike, as on `mess serve`: the attempts tell nothing
/// of what answered.
pub fn read_answer(input: &[u8]) -> String {
    let input: AnswerInput = match serde_json::from_slice(input) {
        Ok(i) => i,
        Err(e) => {
            return serde_json::json!({"fail": format!("the Worker's answer: {e}")}).to_string();
        }
    };
    let read = match &input.reading {
        Some(reading) => reading.read(input.status, &input.body),
        None if (200..300).contains(&input.status) => Ok(service::Sent::default()),
        None => Err(service::NotifyError::Retry {
            message: format!("webhook: HTTP {}", input.status),
        }),
    };
    match read {
        Ok(sent) => serde_json::json!({"sent": sent.provider_ref}).to_string(),
        Err(service::NotifyError::Retry { message }) => {
            serde_json::json!({"retry": message}).to_string()
        }
        Err(service::NotifyError::Fail { message }) => {
            serde_json::json!({"fail": message}).to_string()
        }
    }
}
