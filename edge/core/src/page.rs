//! The presigned-link routes the human page calls, as `mess serve` answers them: the
//! operator's `POST /links` makes a link; `GET /thread/{ref}?token=` (and `GET /mess/{ref}`
//! with the token as bearer) reads the thread as the link's executor; `POST /thread/{ref}?token=`
//! (and `POST /mess` with the token as bearer) sends a status or a response through it;
//! `GET /thread/{ref}/events?token=` names the stream the Durable Object then holds. What a
//! link may do is `mess-protocol`'s rule ([`Grant::check_message`]); the token is checked here.

use mess_protocol::access;
use mess_protocol::error::ProtocolError;
use mess_protocol::ids::ThreadRef;
use mess_protocol::link::{Action, Grant};
use mess_protocol::message::Message;
use mess_protocol::resolve;
use mess_protocol::rules::Role;
use mess_protocol::time::{self, Timestamp};
use mess_protocol::value::{Map, Value};

use crate::failure::Failure;
use crate::home::{Home, envelope_of};
use crate::http::{Answer, Input, JSON, messages_of, operator, render};
use crate::link::{self, Expected};
use crate::submit::{self, Caller};

/// How long a link works when `POST /links` names no `ttl` (as `mess link`).
const DEFAULT_TTL: &str = "24h";

fn secret(input: &Input) -> &[u8] {
    input.link_secret.as_deref().unwrap_or_default().as_bytes()
}

/// Checks `token` (signature, issuer, audience, expiry) and answers its grant.
fn verify(home: &Home<'_>, input: &Input, token: &str, now: Timestamp) -> Result<Grant, Failure> {
    // Before the first link there is no audience: nothing signed here can exist yet.
    let audience = home
        .exchange_id()
        .ok_or_else(|| Failure::unauthorized("the link is not valid"))?;
    link::verify(
        secret(input),
        &Expected {
            issuer: &input.issuer,
            audience: &audience,
        },
        token,
        now.timestamp(),
    )
}

/// Checks `token` for `thread` in the path: a link works only for its own thread.
fn verify_for(
    home: &Home<'_>,
    input: &Input,
    token: &str,
    thread: &str,
    now: Timestamp,
) -> Result<Grant, Failure> {
    let grant = verify(home, input, token, now)?;
    if grant.thread != thread {
        return Err(Failure::new(
            403,
            "forbidden",
            "the link is for another thread",
        ));
    }
    Ok(grant)
}

/// The `token` query parameter, required.
pub fn token_param(input: &Input) -> Result<String, Failure> {
    crate::http::query_param(&input.query, "token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::unauthorized("this route needs a link token (?token=)"))
}

/// A ref in a path, refused before it is used when it cannot be one.
fn thread_of(reference: &str) -> Result<ThreadRef, Failure> {
    Ok(ThreadRef::parse(reference)?)
}

/// `POST /links` with the operator key: `{ref, executor, ttl?, actions?}` answers
/// `{token, url, expires}`, the page's address carrying a link for that executor on that
/// thread.
pub fn mint(home: &mut Home<'_>, input: &Input, now: Timestamp) -> Result<Answer, Failure> {
    operator(input, "POST /links")?;
    let body: serde_json::Value = serde_json::from_str(&input.body)
        .map_err(|e| Failure::new(400, "malformed", format!("invalid JSON: {e}")))?;
    let text = |name: &str| body.get(name).and_then(|v| v.as_str()).unwrap_or_default();
    let thread = thread_of(text("ref"))?;
    if home.read(&thread).is_none() {
        return Err(Failure::not_found(resolve::no_thread(thread.as_str())));
    }
    let executor = text("executor");
    if executor.is_empty() || ThreadRef::parse(executor).is_err() {
        return Err(ProtocolError::invalid(
            "executor",
            format!(
                "{executor:?} is not a usable executor id (letters, digits, '.', '_', ':', '-')"
            ),
        )
        .into());
    }
    let ttl = match body.get("ttl").and_then(|v| v.as_str()) {
        Some(t) => t,
        None => DEFAULT_TTL,
    };
    let ttl = time::parse_any_duration(ttl)
        .map_err(|e| Failure::from(ProtocolError::invalid("ttl", e)))?;
    let actions = match body.get("actions").and_then(|v| v.as_array()) {
        None => Action::ALL.to_vec(),
        Some(list) => list
            .iter()
            .map(|a| {
                a.as_str().and_then(Action::parse).ok_or_else(|| {
                    Failure::from(ProtocolError::invalid(
                        "actions",
                        format!("unknown action {a} (read, claim, update, respond, decline)"),
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let exp = now.timestamp().saturating_add(ttl.length.num_seconds());
    let grant = Grant {
        thread: thread.to_string(),
        executor: executor.to_owned(),
        actions,
        exp,
        iat: now.timestamp(),
        via: None,
        iss: Some(input.issuer.clone()),
        aud: home.exchange_id_or_new(&input.entropy),
    };
    let token = link::mint(secret(input), &grant)?;
    let url = mess_protocol::link::page_url(&input.issuer, thread.as_str(), &token);
    let expires = chrono::DateTime::from_timestamp(exp, 0)
        .map(|t| time::format_timestamp(&t.fixed_offset()))
        .unwrap_or_default();
    Ok((
        200,
        JSON,
        serde_json::json!({"token": token, "url": url, "expires": expires}).to_string(),
    ))
}

/// Checks a link for reading `thread`: valid for it, allowing `read`, and its executor still
/// one who may read the thread (nobody else took it); else the thread answers as absent.
fn for_reading(
    home: &Home<'_>,
    input: &Input,
    token: &str,
    reference: &str,
    now: Timestamp,
) -> Result<(Grant, String), Failure> {
    let thread = thread_of(reference)?;
    let grant = verify_for(home, input, token, thread.as_str(), now)?;
    if !grant.allows(Action::Read) {
        return Err(Failure::new(
            403,
            "forbidden",
            "this link does not allow read",
        ));
    }
    let gone = || Failure::not_found(resolve::no_thread(thread.as_str()));
    let (_, text) = home.read(&thread).ok_or_else(gone)?;
    if !access::link_reads(&grant.executor, &envelope_of(&text)?) {
        return Err(gone());
    }
    Ok((grant, text))
}

/// The thread a link reads, with who the link acts as and what it allows (so the page offers
/// only what can work).
pub fn read(
    home: &Home<'_>,
    input: &Input,
    token: &str,
    reference: &str,
    now: Timestamp,
) -> Result<Answer, Failure> {
    let (grant, text) = for_reading(home, input, token, reference, now)?;
    let mut out = Map::new();
    out.insert("envelope", envelope_of(&text)?.to_value());
    out.insert("link", grant.view());
    out.insert("messages", Value::Seq(messages_of(&text)?));
    render(input, &Value::Map(out))
}

/// `GET /thread/{ref}/events?token=`: the stream's name (`link EXECUTOR REF`) and when the
/// link stops working, for the Durable Object, which holds the stream.
pub fn watch(
    home: &Home<'_>,
    input: &Input,
    token: &str,
    reference: &str,
    now: Timestamp,
) -> Result<Answer, Failure> {
    let (grant, _) = for_reading(home, input, token, reference, now)?;
    Ok((
        200,
        JSON,
        serde_json::json!({
            "watch": format!("link {} {}", grant.executor, grant.thread),
            "until": grant.exp,
        })
        .to_string(),
    ))
}

/// Checks a link for sending (on `thread`, when the route names one), before the message is
/// read.
pub fn check(
    home: &Home<'_>,
    input: &Input,
    token: &str,
    thread: Option<&str>,
    now: Timestamp,
) -> Result<(), Failure> {
    match thread {
        Some(reference) => verify_for(home, input, token, thread_of(reference)?.as_str(), now),
        None => verify(home, input, token, now),
    }
    .map(|_| ())
}

/// Sends `message` through a link: each payload a status or a response about the link's
/// thread, of an action it allows, sent as the link's executor; `thread` is the path's, when
/// the route names one.
pub fn post(
    home: &mut Home<'_>,
    input: &Input,
    token: &str,
    thread: Option<&str>,
    message: &Message,
    now: Timestamp,
) -> Result<Answer, Failure> {
    check(home, input, token, thread, now)?;
    let grant = verify(home, input, token, now)?;
    grant.check_message(message)?;
    let caller = Caller {
        id: grant.executor.clone(),
        role: Role::Executor,
        channel: grant.channel().to_owned(),
    };
    let reply = submit::submit(home, message, &caller, now)?;
    render(input, &reply.to_value())
}
