//! The Worker's HTTP API, as the native `mess serve` answers it: `POST /mess`,
//! `GET /threads/{ref}` (and `?format=messe-af`), `GET /mess/{ref}`, and the operator's
//! `POST /keys`. The JavaScript passes each request in as JSON and sends back what this
//! answers; storage is the Durable Object's, through [`Kv`].

use mess_protocol::access;
use mess_protocol::emit;
use mess_protocol::error::ProtocolError;
use mess_protocol::ids::ThreadRef;
use mess_protocol::read;
use mess_protocol::resolve;
use mess_protocol::rules::Role;
use mess_protocol::time::{self, Timestamp};
use mess_protocol::value::{Map, Value};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::failure::Failure;
use crate::home::{Home, Mirror, envelope_of};
use crate::kv::Kv;
use crate::page;
use crate::submit::{self, Caller, MAX_MESSAGE_BYTES};

/// One HTTP request, as the Worker hands it over.
#[derive(Debug, Deserialize)]
pub struct Input {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path (`/mess`).
    pub path: String,
    /// The query string without `?`.
    #[serde(default)]
    pub query: String,
    /// The `Authorization` header.
    #[serde(default)]
    pub authorization: Option<String>,
    /// The `Accept` header.
    #[serde(default)]
    pub accept: Option<String>,
    /// The `Content-Type` header.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The body, as text.
    #[serde(default)]
    pub body: String,
    /// The exchange's time for this request (RFC 3339).
    pub now: String,
    /// The operator's key (the Worker's `MESS_OPERATOR_KEY` secret), if set.
    #[serde(default)]
    pub operator_key: Option<String>,
    /// 32 random bytes as hex, for keys minted by this request.
    #[serde(default)]
    pub entropy: String,
    /// The link secret (the Worker's `MESS_SECRET`), if set.
    #[serde(default)]
    pub link_secret: Option<String>,
    /// The exchange's public URL (`MESS_PUBLIC_URL`, else the request's origin): the issuer
    /// of its links, and where they point.
    #[serde(default)]
    pub issuer: String,
    /// The Worker's settings for notices (`MESS_WEBHOOK_SECRET`, `MESS_SLACK_TOKEN`, …).
    #[serde(flatten)]
    pub dispatch: crate::notice::Dispatch,
    /// Only check the caller, before the body is read (which it is not yet): the answer is
    /// 200 with no body, or the refusal the request will get.
    #[serde(default)]
    pub authorize_only: bool,
    /// The principals holding an event stream open (`GET /events`): each change is told to
    /// those who may see it.
    #[serde(default)]
    pub watchers: Vec<String>,
}

/// A thread this request changed, and which watchers may hear of it.
#[derive(Debug, Serialize)]
pub struct Change {
    /// The thread's ref.
    #[serde(rename = "ref")]
    pub thread: String,
    /// Its status now.
    pub status: String,
    /// When it changed (RFC 3339).
    pub updated: String,
    /// The watchers that may see it.
    pub to: Vec<String>,
    /// The link watchers told of it for the last time: their executor may no longer read it.
    pub end: Vec<String>,
}

/// The answer, and what R2 must now hold.
#[derive(Debug, Serialize)]
pub struct Output {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: String,
    /// The body.
    pub body: String,
    /// Thread files to put into R2: (key, text).
    pub r2_put: Vec<(String, String)>,
    /// R2 keys to delete.
    pub r2_delete: Vec<String>,
    /// The threads changed, for the event streams.
    pub changes: Vec<Change>,
    /// The notices owed, for the outbox.
    pub notices: Vec<crate::notice::Delivery>,
    /// The earliest deadline kept (seconds since the epoch): the Durable Object's alarm.
    pub next_deadline: Option<i64>,
}

pub(crate) const JSON: &str = "application/json";
/// The path the Durable Object's alarm calls to pass the deadlines due.
pub const DEADLINES: &str = "/_deadlines";
const YAML: &str = "application/yaml; charset=utf-8";

fn is_yaml(v: &str) -> bool {
    let v = v.to_ascii_lowercase();
    v.contains("yaml")
}

/// Answers one request against `kv`.
pub fn handle(kv: &mut dyn Kv, input: &Input) -> Output {
    let mut home = Home::new(kv);
    home.dispatch = input.dispatch.clone();
    home.issuer = input.issuer.clone();
    home.entropy = input.entropy.clone();
    let answered = if input.authorize_only {
        authorize(&home, input).map(|()| (200, JSON, String::new()))
    } else {
        // Whatever a request does, it does after the deadlines due by now have passed.
        if let Ok(now) = time::parse_timestamp(&input.now) {
            crate::submit::expire_due(&mut home, now);
        }
        route(&mut home, input)
    };
    let Mirror { put, delete } = std::mem::take(&mut home.mirror);
    match answered {
        Ok((status, content_type, body)) => Output {
            status,
            content_type: content_type.to_owned(),
            body,
            changes: changes(&home, &put, &input.watchers),
            notices: std::mem::take(&mut home.notices),
            r2_put: put,
            r2_delete: delete,
            next_deadline: home.next_deadline(),
        },
        // A failed request writes nothing: the Durable Object rolls its transaction back
        // (it throws inside it on any status of 400 or more).
        Err(f) => Output {
            status: f.status,
            content_type: JSON.to_owned(),
            body: f.body(),
            r2_put: Vec::new(),
            r2_delete: Vec::new(),
            changes: Vec::new(),
            notices: Vec::new(),
            next_deadline: None,
        },
    }
}

/// The threads written (their new files), each with the watchers that may see it as it is now.
fn changes(home: &Home<'_>, written: &[(String, String)], watchers: &[String]) -> Vec<Change> {
    let roster = (!watchers.is_empty()).then(|| home.roster());
    written
        .iter()
        .filter_map(|(_, text)| envelope_of(text).ok())
        .map(|env| {
            let mut to = Vec::new();
            let mut end = Vec::new();
            for w in watchers {
                // A link's stream (`link EXECUTOR REF`: spaces, which no principal id holds,
                // so no key's stream reads as one) hears of its own thread, and of the change
                // that takes it out of the executor's reach, last.
                if let Some((executor, thread)) =
                    w.strip_prefix("link ").and_then(|l| l.split_once(' '))
                {
                    if thread == env.thread_ref.as_str() {
                        to.push(w.clone());
                        if !access::link_reads(executor, &env) {
                            end.push(w.clone());
                        }
                    }
                } else if roster.as_ref().is_some_and(|r| access::may_see(w, &env, r)) {
                    to.push(w.clone());
                }
            }
            Change {
                thread: env.thread_ref.to_string(),
                status: env.status.as_str().to_owned(),
                updated: time::format_timestamp(&env.updated),
                to,
                end,
            }
        })
        .collect()
}

/// Checks the caller of a request that carries a body, as the route will, so that nobody
/// without a key, a link or the operator key makes the Worker take a body in (the native
/// exchange checks the key before it reads a byte, too). Routes without a body pass.
fn authorize(home: &Home<'_>, input: &Input) -> Result<(), Failure> {
    let now = time::parse_timestamp(&input.now)
        .map_err(|e| Failure::new(500, "internal", format!("the Worker's clock: {e}")))?;
    match (input.method.as_str(), input.path.as_str()) {
        ("POST", "/keys") => operator(input, "POST /keys"),
        ("POST", "/links") => operator(input, "POST /links"),
        ("POST", "/mess") => match link_token(input) {
            Some(token) => page::check(home, input, token, None, now),
            None => caller(home, input).map(|_| ()),
        },
        ("POST", p) if p.starts_with("/thread/") => {
            let token = page::token_param(input)?;
            page::check(home, input, &token, Some(&p["/thread/".len()..]), now)
        }
        ("GET", _) => Ok(()),
        // No other route takes a body: refused before one is read.
        (method, path) => Err(no_route(method, path)),
    }
}

fn no_route(method: &str, path: &str) -> Failure {
    Failure::not_found(format!(
        "no route {method} {path} on the Worker build of mess"
    ))
}

pub(crate) type Answer = (u16, &'static str, String);

fn route(home: &mut Home<'_>, input: &Input) -> Result<Answer, Failure> {
    let now = time::parse_timestamp(&input.now)
        .map_err(|e| Failure::new(500, "internal", format!("the Worker's clock: {e}")))?;
    let path = input.path.as_str();
    match (input.method.as_str(), path) {
        ("POST", "/keys") => mint_key(home, input),
        ("POST", "/links") => page::mint(home, input, now),
        ("POST", "/mess") => post_mess(home, input, now),
        // The Durable Object's alarm: the deadlines due were passed above. (The front Worker
        // never forwards this path.)
        ("POST", DEADLINES) => Ok((200, JSON, "{}".to_owned())),
        ("GET", "/threads") => list_threads(home, input),
        // The stream itself is the Durable Object's: here the key is checked, and its
        // principal named.
        ("GET", "/events") => {
            let caller = caller(home, input)?;
            Ok((
                200,
                JSON,
                serde_json::json!({"watch": caller.id}).to_string(),
            ))
        }
        ("GET", p)
            if p.strip_prefix("/thread/")
                .and_then(|r| r.strip_suffix("/events"))
                .is_some_and(|r| !r.is_empty()) =>
        {
            let reference = &p["/thread/".len()..p.len() - "/events".len()];
            page::watch(home, input, &page::token_param(input)?, reference, now)
        }
        ("GET", p) if p.starts_with("/thread/") => page::read(
            home,
            input,
            &page::token_param(input)?,
            &p["/thread/".len()..],
            now,
        ),
        ("POST", p) if p.starts_with("/thread/") => {
            let token = page::token_param(input)?;
            let message = message_of(input)?;
            page::post(
                home,
                input,
                &token,
                Some(&p["/thread/".len()..]),
                &message,
                now,
            )
        }
        ("GET", p) if p.starts_with("/threads/") => {
            read_thread(home, input, &p["/threads/".len()..], true)
        }
        ("GET", p) if p.starts_with("/mess/") => match link_token(input) {
            Some(token) => page::read(home, input, token, &p["/mess/".len()..], now),
            None => read_thread(home, input, &p["/mess/".len()..], false),
        },
        _ => Err(no_route(&input.method, path)),
    }
}

fn bearer(input: &Input) -> Result<&str, Failure> {
    let header = input.authorization.as_deref().ok_or_else(|| {
        Failure::unauthorized("an API key is required (Authorization: Bearer <key>; POST /keys with the operator key makes one)")
    })?;
    header
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| Failure::unauthorized("the Authorization header must be `Bearer <key>`"))
}

/// The bearer token when it is a presigned link's (a JWT: three dot-separated parts, which no
/// API key has); the routes the page calls take either.
fn link_token(input: &Input) -> Option<&str> {
    bearer(input).ok().filter(|t| t.split('.').count() == 3)
}

fn hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn caller(home: &Home<'_>, input: &Input) -> Result<Caller, Failure> {
    let key = bearer(input)?;
    let (role, id) = home
        .key_holder(&hash(key))
        .ok_or_else(|| Failure::unauthorized("unknown API key"))?;
    let role = Role::parse(&role).ok_or_else(|| Failure::unauthorized("unknown API key"))?;
    Ok(Caller {
        id,
        role,
        channel: submit::HTTP.to_owned(),
    })
}

/// Checks that `input` carries the operator key (for `route`).
pub(crate) fn operator(input: &Input, route: &str) -> Result<(), Failure> {
    let key = bearer(input)?;
    let operator = input
        .operator_key
        .as_deref()
        .filter(|k| k.len() >= 16)
        .ok_or_else(|| {
            Failure::unauthorized(
                "this Worker has no operator key (set the MESS_OPERATOR_KEY secret)",
            )
        })?;
    if !same_secret(key, operator) {
        return Err(Failure::unauthorized(format!(
            "{route} takes the operator key"
        )));
    }
    Ok(())
}

/// `POST /keys` with the operator key: `{kind: agent|executor, id}` mints a key for that
/// principal; only its hash is kept.
fn mint_key(home: &mut Home<'_>, input: &Input) -> Result<Answer, Failure> {
    operator(input, "POST /keys")?;
    let body: serde_json::Value = serde_json::from_str(&input.body)
        .map_err(|e| Failure::new(400, "malformed", format!("invalid JSON: {e}")))?;
    let kind = body
        .get("kind")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let role = Role::parse(kind).ok_or_else(|| {
        Failure::from(ProtocolError::invalid(
            "kind",
            format!("{kind:?}: expected agent or executor"),
        ))
    })?;
    let id = body.get("id").and_then(|v| v.as_str()).unwrap_or_default();
    if id.is_empty()
        || id == mess_protocol::envelope::EXCHANGE
        || id == "operator"
        || ThreadRef::parse(id).is_err()
    {
        return Err(ProtocolError::invalid(
            "id",
            format!("{id:?} is not a usable principal id (letters, digits, '.', '_', ':', '-')"),
        )
        .into());
    }
    if input.entropy.len() < 64 || !input.entropy.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Failure::new(
            500,
            "internal",
            "the Worker passed no randomness",
        ));
    }
    let minted = format!("mess_{}", &input.entropy[..64]);
    home.put_key(&hash(&minted), role.as_str(), id);
    Ok((
        200,
        JSON,
        serde_json::json!({"key": minted, "kind": role.as_str(), "id": id}).to_string(),
    ))
}

/// The format the caller wants: what `Accept` names, else what it sent.
fn wants_yaml(input: &Input) -> bool {
    match input.accept.as_deref() {
        Some(a) if is_yaml(a) => true,
        Some(a) if a.contains("json") => false,
        _ => input.content_type.as_deref().is_some_and(is_yaml),
    }
}

pub(crate) fn render(input: &Input, value: &Value) -> Result<Answer, Failure> {
    if wants_yaml(input) {
        return Ok((200, YAML, emit::to_yaml(value)));
    }
    serde_json::to_string(value)
        .map(|text| (200, JSON, text))
        .map_err(|e| Failure::new(500, "internal", format!("writing JSON: {e}")))
}

/// `POST /mess`: one MESS message (JSON when sent as JSON, else YAML) as the key's principal.
fn post_mess(home: &mut Home<'_>, input: &Input, now: Timestamp) -> Result<Answer, Failure> {
    if let Some(token) = link_token(input) {
        let message = message_of(input)?;
        return page::post(home, input, token, None, &message, now);
    }
    let caller = caller(home, input)?;
    let message = message_of(input)?;
    let reply = submit::submit(home, &message, &caller, now)?;
    render(input, &reply.to_value())
}

/// The MESS message of a request's body: JSON when sent as JSON, else YAML.
fn message_of(input: &Input) -> Result<mess_protocol::message::Message, Failure> {
    let text = &input.body;
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(ProtocolError::TooLarge {
            size: text.len(),
            limit: MAX_MESSAGE_BYTES,
        }
        .into());
    }
    let json = input.content_type.as_deref().is_some_and(|v| {
        let v = v
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        v == "application/json" || v.ends_with("+json")
    });
    Ok(if json {
        read::json_message(text)?
    } else {
        read::one_message(text)?
    })
}

/// `GET /threads/{ref}` (and `GET /mess/{ref}`): the envelope and messages of a thread the
/// caller may see; with `?format=messe-af` (on `/threads`), the thread file itself.
fn read_thread(
    home: &mut Home<'_>,
    input: &Input,
    reference: &str,
    formats: bool,
) -> Result<Answer, Failure> {
    let caller = caller(home, input)?;
    let format = input
        .query
        .split('&')
        .find_map(|kv| kv.strip_prefix("format="))
        .filter(|_| formats);
    if let Some(other) = format.filter(|f| *f != "messe-af") {
        return Err(Failure::new(
            422,
            "invalid",
            format!(
                "format: unknown format {other:?} (messe-af, or none for the envelope and messages)"
            ),
        ));
    }
    let thread = resolve::resolve(&*home, reference, &caller.id)?;
    let roster = home.roster();
    let Some((_, text)) = home.read(&thread) else {
        return Err(Failure::not_found(resolve::no_thread(reference)));
    };
    let envelope = envelope_of(&text)?;
    if !access::may_see(&caller.id, &envelope, &roster) {
        return Err(Failure::not_found(resolve::no_thread(reference)));
    }
    if format.is_some() {
        return Ok((200, YAML, text));
    }
    let mut out = Map::new();
    out.insert("envelope", envelope.to_value());
    out.insert("messages", Value::Seq(messages_of(&text)?));
    render(input, &Value::Map(out))
}

/// The message documents of a thread file's text, oldest first.
pub(crate) fn messages_of(text: &str) -> Result<Vec<Value>, Failure> {
    let mut messages = Vec::new();
    for (i, raw) in mess_protocol::thread_text::pieces(text)
        .1
        .iter()
        .enumerate()
    {
        let path = format!("document {}", i + 2);
        let value = mess_protocol::yaml::parse_document(raw, &mess_protocol::yaml::Limits::DEFAULT)
            .map_err(|e| Failure::from(ProtocolError::invalid(&path, e.message)))?;
        if value.is_null() {
            continue;
        }
        messages.push(mess_protocol::envelope::MessageDoc::from_value(value, &path)?.to_value());
    }
    Ok(messages)
}

/// Most threads one listing returns.
const MAX_LIMIT: usize = 1000;

/// The value of `name` in a query string, percent-decoded.
pub(crate) fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // Both digits are checked as ASCII first, so the slice never cuts a character.
        let hex = (bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit())
        .then(|| u8::from_str_radix(&s[i + 1..i + 3], 16).ok())
        .flatten();
        match (bytes[i], hex) {
            (_, Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (b, None) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /threads?status=&state=&executor=&requestor=&capability=&limit=`: the envelopes the
/// caller may see, in listing order.
fn list_threads(home: &mut Home<'_>, input: &Input) -> Result<Answer, Failure> {
    let caller = caller(home, input)?;
    let q = &input.query;
    let status = match query_param(q, "status") {
        Some(s) => Some(mess_protocol::status::Status::parse(&s).ok_or_else(|| {
            Failure::new(422, "invalid", format!("status: unknown status {s:?}"))
        })?),
        None => None,
    };
    let states = match query_param(q, "state") {
        Some(s) => Some(vec![
            mess_protocol::status::State::ALL
                .into_iter()
                .find(|x| x.as_str() == s)
                .ok_or_else(|| {
                    Failure::new(
                        422,
                        "invalid",
                        format!(
                            "state: unknown state {s:?} (received, executing, finished, canceled)"
                        ),
                    )
                })?,
        ]),
        None => None,
    };
    let limit = match query_param(q, "limit") {
        Some(l) => l.parse::<usize>().map_err(|e| {
            Failure::new(
                400,
                "malformed",
                format!("Failed to deserialize query string: limit: {e}"),
            )
        })?,
        None => 100,
    };
    let filter = access::ThreadFilter {
        status,
        states,
        executor: query_param(q, "executor"),
        requestor: query_param(q, "requestor"),
        capability: query_param(q, "capability"),
        limit: limit.min(MAX_LIMIT),
    };
    let roster = home.roster();
    let mut envelopes: Vec<_> = home
        .envelopes(&filter.folders())
        .into_iter()
        .filter(|e| access::may_see(&caller.id, e, &roster))
        .collect();
    envelopes.sort_by(access::listing_order);
    let items: Vec<Value> = envelopes
        .iter()
        .filter(|e| filter.matches(e))
        .take(filter.limit)
        .map(|e| e.to_value())
        .collect();
    let mut out = Map::new();
    out.insert("threads", Value::Seq(items));
    render(input, &Value::Map(out))
}
