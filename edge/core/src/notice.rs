//! Notices at the edge: a signed webhook to each executor a new request is routed to, as the
//! native exchange sends it (the whole thread file, `x-mess-signature` over
//! `<timestamp>.<delivery>.<body>`, the same delivery ids and headers). The engine names the
//! deliveries a request owes; the Durable Object keeps them in its outbox and hands them to a
//! Queue, whose consumer asks the engine ([`prepare`]) for the request to send at that moment.
//! Every webhook at the edge is registered with a key, so it may lead only where a key-made
//! webhook may on `mess serve`: public addresses, or hosts the operator lists.

use hmac::{Hmac, Mac};
use mess_protocol::config::ExecutorSpec;
use mess_protocol::ids::ThreadRef;
use mess_protocol::net;
use mess_protocol::value::Value;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::home::Home;

/// What the Worker's settings say of webhooks.
#[derive(Debug, Clone, Default)]
pub struct Webhooks {
    /// `MESS_WEBHOOK_SECRET`: signs webhooks whose registration brings no `secret`.
    pub secret: Option<String>,
    /// `MESS_WEBHOOK_ALLOW`: hosts (names or addresses) a webhook may reach beyond public ones.
    pub allow: Vec<String>,
}

/// One delivery owed: a notice of `event` about `thread` for `executor`, by webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// `THREAD.EXECUTOR.webhook.EVENT`, as the native exchange names deliveries (receivers use
    /// it to drop repeats).
    pub id: String,
    /// The thread's ref.
    pub thread: String,
    /// The executor.
    pub executor: String,
    /// `new`.
    pub event: String,
}

impl Delivery {
    /// A notice that `thread` waits for `executor`.
    pub fn new_request(thread: &ThreadRef, executor: &str) -> Delivery {
        Delivery {
            id: format!("{thread}.{executor}.webhook.new"),
            thread: thread.to_string(),
            executor: executor.to_owned(),
            event: "new".to_owned(),
        }
    }
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
    /// The thread file.
    pub body: String,
}

/// What the Queue's consumer sends for `delivery` at `at` (Unix seconds): the thread file as
/// it is now, signed; `Err` says why nothing is sent any more (the executor or its webhook is
/// gone, the address is refused, there is no signing key), and the delivery is dropped.
pub fn prepare(
    home: &Home<'_>,
    delivery: &Delivery,
    webhooks: &Webhooks,
    at: i64,
) -> Result<Prepared, String> {
    let roster = home.roster();
    let spec = roster
        .executors
        .get(&delivery.executor)
        .ok_or_else(|| format!("executor {} is no longer registered", delivery.executor))?;
    let (url, own) = webhook_of(spec)
        .ok_or_else(|| format!("executor {} has no webhook any more", delivery.executor))?;
    let url = check_url(&url, &webhooks.allow)?;
    let secret = own
        .or_else(|| webhooks.secret.clone())
        .ok_or("no signing key (secret: beside the url, or the Worker's MESS_WEBHOOK_SECRET)")?;
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
    let signature = sign(secret.as_bytes(), at, &delivery.id, body.as_bytes());
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
        body,
    })
}

/// What the Queue's consumer hands over for one delivery.
#[derive(Debug, Deserialize)]
pub struct NoticeInput {
    /// The delivery.
    pub delivery: Delivery,
    /// Unix seconds now (the exchange's clock).
    pub at: i64,
    /// `MESS_WEBHOOK_SECRET`.
    #[serde(default)]
    pub webhook_secret: Option<String>,
    /// `MESS_WEBHOOK_ALLOW`, split at commas.
    #[serde(default)]
    pub webhook_allow: Vec<String>,
}

/// [`prepare`] over a [`NoticeInput`] as JSON: `{"send": Prepared}` or `{"drop": WHY}`.
pub fn answer(kv: &mut dyn crate::kv::Kv, input: &[u8]) -> String {
    let input: NoticeInput = match serde_json::from_slice(input) {
        Ok(i) => i,
        Err(e) => {
            return serde_json::json!({"drop": format!("the Worker's notice: {e}")}).to_string();
        }
    };
    let mut home = Home::new(kv);
    home.webhooks = Webhooks {
        secret: input.webhook_secret.filter(|s| !s.is_empty()),
        allow: input.webhook_allow,
    };
    match prepare(&home, &input.delivery, &home.webhooks, input.at) {
        Ok(p) => serde_json::json!({"send": p}).to_string(),
        Err(why) => serde_json::json!({"drop": why}).to_string(),
    }
}
