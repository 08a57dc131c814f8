//! Read views of threads (what `status` shows: the envelope plus the latest response, open
//! questions or pending confirmation) and the answers to `query` and `config` messages.

use crate::exchange::access::Access;
use crate::exchange::directory::{Directory, Origin};
use crate::exchange::error::Error;
use crate::exchange::{Exchange, Sender, access, plan};
use crate::notify::Channel;
use crate::protocol::config::ConfigMsg;
use crate::protocol::content::{ContentEntry, unmet_hints};
use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::error::ProtocolError;
use crate::protocol::message::{Payload, Query, QueryKind, Response};
use crate::protocol::status::{State, Status, StatusMsg};
use crate::protocol::time;
use crate::protocol::value::{Map, Value};
use crate::store::layout::Location;
use crate::store::thread::ThreadFile;

/// A thread as `status` presents it.
#[derive(Debug, Clone)]
pub struct ThreadView {
    /// The envelope.
    pub envelope: Envelope,
    /// Which folder holds it.
    pub location: Location,
    /// The most recent response, if any.
    pub response: Option<Response>,
    /// The status message behind the current status (questions, action to confirm, reason).
    pub current: Option<StatusMsg>,
    /// Number of message documents.
    pub messages: usize,
    /// Response hints of the request that the latest response does not answer (v1.1 3.1).
    pub unmet_hints: Vec<String>,
}

impl ThreadView {
    /// Builds the view of a thread file.
    pub fn of(thread: &ThreadFile) -> Result<ThreadView, Error> {
        let messages = thread.messages()?;
        // Where many hands answer, the response is the exchange's aggregate or verdict, not
        // whichever slot answered last.
        let many = thread.envelope.hands.multi() || thread.envelope.hands.approval.is_some();
        let response = if many {
            latest_response(
                &messages
                    .iter()
                    .filter(|d| d.from == crate::protocol::envelope::EXCHANGE)
                    .cloned()
                    .collect::<Vec<_>>(),
            )
        } else {
            latest_response(&messages)
        };
        let hints: Vec<String> = messages
            .iter()
            .flat_map(|d| &d.message.payloads)
            .find_map(|p| match p {
                Payload::Request(r) => {
                    Some(r.response_hint.iter().map(|h| h.kind.clone()).collect())
                }
                _ => None,
            })
            .unwrap_or_default();
        let unmet_hints = match &response {
            Some(r) => unmet_hints(hints.iter().map(String::as_str), &r.content),
            None => Vec::new(),
        };
        Ok(ThreadView {
            envelope: thread.envelope.clone(),
            location: thread.location.clone(),
            response,
            current: latest_status(&messages, thread.envelope.status),
            messages: messages.len(),
            unmet_hints,
        })
    }

    /// The view as a value, for YAML and JSON output.
    pub fn to_value(&self) -> Value {
        let mut m = match self.envelope.to_value() {
            Value::Map(m) => m,
            _ => Map::new(),
        };
        // History is long and lives in `show`; the summary keeps its size.
        m.remove("history");
        m.insert("state", Value::str(location_name(&self.location)));
        if let Some(cur) = &self.current {
            let mut details = match cur.to_value() {
                Value::Map(d) => d,
                _ => Map::new(),
            };
            details.remove("re");
            details.remove("code");
            if !details.is_empty() {
                m.insert(self.envelope.status.as_str(), Value::Map(details));
            }
        }
        if let Some(r) = &self.response {
            m.insert(
                "response",
                Value::Seq(r.content.iter().map(ContentEntry::to_value).collect()),
            );
            if let Some(n) = &r.notes {
                m.insert("notes", Value::str(n));
            }
        }
        if !self.unmet_hints.is_empty() {
            m.insert(
                "unmet_hints",
                Value::Seq(self.unmet_hints.iter().map(Value::str).collect()),
            );
        }
        m.insert("messages", Value::Int(self.messages as i64));
        if let Some(why) = self.envelope.unroutable() {
            m.insert("waiting_because", Value::str(why));
        }
        Value::Map(m)
    }
}

fn location_name(l: &Location) -> String {
    match l {
        Location::State(s) => s.as_str().to_owned(),
        Location::Archive(m) => format!("archive/{m}"),
    }
}

fn latest_response(messages: &[MessageDoc]) -> Option<Response> {
    messages.iter().rev().find_map(|d| {
        d.message.payloads.iter().rev().find_map(|p| match p {
            Payload::Response(r) => Some(r.clone()),
            _ => None,
        })
    })
}

fn latest_status(messages: &[MessageDoc], status: Status) -> Option<StatusMsg> {
    messages.iter().rev().find_map(|d| {
        d.message.payloads.iter().rev().find_map(|p| match p {
            Payload::Status(s) if s.code == status => Some(s.clone()),
            _ => None,
        })
    })
}

/// The status payload echoed to a sender after a change (see [`crate::protocol::rules::status_echo`]).
pub(crate) fn status_echo(
    env: &Envelope,
    recent: &[Payload],
    thread: &ThreadFile,
) -> Result<Payload, Error> {
    Ok(crate::protocol::rules::status_echo(
        env,
        recent,
        thread.messages_rev(),
    )?)
}

/// Checks a `config` message before anything is written: the executor id must be usable as a
/// file name, executors of config.yaml are changed only there, a registration is changed only
/// by whoever made it or by the executor itself, and its `notify:` channels must be usable
/// (a key holder's webhooks must lead to public addresses or the operator's allow-list).
pub(crate) fn check_config(
    ex: &Exchange,
    config: &ConfigMsg,
    index: usize,
    sender: &Sender,
    dir: &Directory,
) -> Result<(), Error> {
    let Some(exec) = &config.executor else {
        return Ok(());
    };
    exec.check(&format!("MESS[{index}].config.executor"))?;
    let path = format!("MESS[{index}].config.executor.id");
    if crate::store::ledger::reserved_account(&exec.id) {
        return Err(ProtocolError::invalid(
            path,
            format!("{:?} names an account of the shells ledger", exec.id),
        )
        .into());
    }
    if crate::protocol::ids::ThreadRef::parse(&exec.id).is_err() {
        return Err(ProtocolError::invalid(
            path,
            format!(
                "{:?} is not a usable executor id (letters, digits, '.', '_', ':', '-')",
                exec.id
            ),
        )
        .into());
    }
    if let Some(notify) = exec.extra.get("notify") {
        check_notify(
            notify,
            &exec.id,
            &format!("MESS[{index}].config.executor"),
            sender.role.is_some(),
            &ex.settings().dispatch.webhook_allow,
        )?;
    }
    if let Some(peer) = exec.extra.get("exchange") {
        let path = format!("MESS[{index}].config.executor.exchange");
        // Where requests may be forwarded (with which key) is the operator's decision.
        if sender.role.is_some() {
            return Err(ProtocolError::forbidden(format!(
                "{path}: forwarding to another exchange is set in config.yaml or by the operator, not with a key"
            ))
            .into());
        }
        crate::exchange::peers::peer_of(&exec.id, peer, ex.settings().dispatch.expand)
            .map_err(|why| ProtocolError::invalid(path, why))?;
    }
    if let Some(robot) = exec.extra.get("mcp") {
        crate::exchange::robots::check_entry(
            &exec.id,
            robot,
            sender.role.is_some(),
            ex.settings().dispatch.expand,
        )
        .map_err(|why| {
            ProtocolError::forbidden(format!("MESS[{index}].config.executor.mcp: {why}"))
        })?;
    }
    let sender = sender.id.as_str();
    match dir.origin(&exec.id) {
        Some(Origin::ConfigFile) => Err(ProtocolError::forbidden(format!(
            "cannot register {}: it is defined in config.yaml; change it there",
            exec.id
        ))
        .into()),
        Some(Origin::Registration { by: Some(by), .. }) if by != sender && exec.id != sender => {
            Err(ProtocolError::forbidden(format!(
                "cannot change executor {}: it was registered by {by}; only {by} or {} may change it",
                exec.id, exec.id
            ))
            .into())
        }
        _ => Ok(()),
    }
}

/// Checks a registration's `notify:` (under `path`): every known channel's value has its form,
/// and with `by_key`, webhooks lead only where `allow` lets them. Channels this exchange does
/// not know are kept (and reported as skipped), as unknown fields are.
fn check_notify(
    notify: &Value,
    executor: &str,
    path: &str,
    by_key: bool,
    allow: &crate::notify::Allow,
) -> Result<(), Error> {
    let Some(channels) = notify.as_map() else {
        return match notify {
            Value::Null => Ok(()),
            other => Err(ProtocolError::invalid(
                format!("{path}.notify"),
                format!(
                    "expected a mapping of channels ({}), found {}",
                    Channel::NAMES.join(", "),
                    other.kind()
                ),
            )
            .into()),
        };
    };
    for (name, value) in channels.iter() {
        match Channel::parse(name, value) {
            Err(bad) if !bad.unknown => {
                return Err(
                    ProtocolError::invalid(format!("{path}.{}", bad.field), bad.problem).into(),
                );
            }
            Ok(Channel::Webhook { url, .. }) if by_key => {
                allow
                    .check(&url)
                    .map_err(|why| ProtocolError::invalid(format!("{path}.notify.webhook"), why))?;
            }
            Ok(Channel::Mail(mailbox))
                if !access::may_notify_mailbox(executor, &mailbox, by_key) =>
            {
                return Err(ProtocolError::invalid(
                    format!("{path}.notify.mail"),
                    format!("a registration made with a key notifies only its own mailbox ({executor}), not {mailbox:?}"),
                )
                .into());
            }
            _ => {}
        }
    }
    Ok(())
}

/// Stores an executor registration or routing rules from a `config` message, recording who
/// first registered the executor (its owner from then on) and how this version came
/// (`registered_with: key` or `operator`, which decides where its webhooks may lead).
pub(crate) fn apply_config(
    ex: &Exchange,
    config: &ConfigMsg,
    sender: &Sender,
    dir: &Directory,
) -> Result<Payload, Error> {
    let mut done = Map::new();
    if let Some(exec) = &config.executor {
        let owner = match dir.origin(&exec.id) {
            Some(Origin::Registration { by: Some(by), .. }) => by.clone(),
            _ => sender.id.clone(),
        };
        let mut value = exec.to_value();
        if let Value::Map(m) = &mut value {
            m.insert("registered_by", Value::str(owner));
            let with = if sender.role.is_some() {
                "key"
            } else {
                "operator"
            };
            m.insert("registered_with", Value::str(with));
        }
        ex.store().put_registration(&exec.id, &value)?;
        done.insert("registered", Value::str(&exec.id));
    }
    if let Some(rules) = &config.routing {
        let mut r = Map::new();
        r.insert(
            "rules",
            Value::Seq(rules.iter().map(|x| x.to_value()).collect()),
        );
        ex.store().put_routing(&Value::Map(r))?;
        done.insert("routing_rules", Value::Int(rules.len() as i64));
    }
    Ok(structured_response(Value::Map(done)))
}

use crate::protocol::answer::structured_response;
pub use crate::protocol::answer::thread_summary;

/// Most `ref:` entries of one thread resolved for a reader (each costs a read).
const MAX_REFERENCES: usize = 32;

/// Answers a `query` with a response whose content is structured data.
pub(crate) fn answer_query(
    ex: &Exchange,
    q: &Query,
    sender: &Sender,
    dir: &Directory,
    listed: &mut Option<Vec<Envelope>>,
) -> Result<Payload, Error> {
    let mut data = Map::new();
    match q.kind {
        QueryKind::Status => {
            let f = &q.filter;
            // `re: all` asks for every thread of the sender; without `re` or `status` the
            // answer lists the open ones (what a requestor usually wants to know).
            let all = f.re.as_ref().is_some_and(|re| re.items().contains(&"all"));
            let mut only = Vec::new();
            if let Some(re) = f.re.as_ref().filter(|_| !all) {
                for item in re.items() {
                    // A thread the sender is no party to answers like one that does not exist.
                    only.push(plan::resolve_for(ex, item, sender, dir, |who, env, _| {
                        access::party(who, env)
                    })?);
                }
            }
            if listed.is_none() {
                let (items, _) = ex.list(&State::ALL, true)?;
                *listed = Some(
                    items
                        .into_iter()
                        .map(|(e, _)| e)
                        .filter(|e| access::party(&sender.id, e))
                        .collect(),
                );
            }
            let mine = listed.as_deref().unwrap_or_default();
            let waiting = if mine.iter().any(|e| e.status == Status::Pending) {
                let (waiting, _) = ex.store().list(&[State::Received], false);
                waiting.into_iter().map(|(e, _, _)| e).collect()
            } else {
                Vec::new()
            };
            data.insert(
                "threads",
                crate::protocol::answer::status_threads(f, &only, mine, &waiting, ex.now()),
            );
        }
        QueryKind::Capabilities => {
            data.insert(
                "capabilities",
                crate::protocol::answer::capabilities(&dir.catalog, &dir.executors, &q.filter.tags),
            );
        }
        QueryKind::Executors => {
            data.insert(
                "executors",
                crate::protocol::answer::executors(&dir.executors, q.filter.executor.as_deref()),
            );
        }
    }
    Ok(structured_response(Value::Map(data)))
}

/// Where `env` stands among the threads waiting for an executor (1 is next, in
/// `Envelope::queue_key` order); `None` when it does not wait, or is held until its
/// `not_before` (then it waits for no one, and no one waits for it).
pub fn queue_position(ex: &Exchange, env: &Envelope) -> Option<i64> {
    let now = ex.now();
    if env.status != Status::Pending || env.too_early(now) {
        return None;
    }
    Some(ex.queue.position(env, now, || pending(ex)))
}

/// When a pending request is held until, while its `not_before` is ahead: nobody is offered
/// it before.
pub fn held_until(ex: &Exchange, env: &Envelope) -> Option<time::Timestamp> {
    crate::protocol::answer::held_until(env, ex.now())
}

/// `view` (a status view) with where the thread waits: `held_until` and a `waiting_because`
/// that says so while it is held, else `queue_position` while it waits for an executor.
pub fn with_waiting(ex: &Exchange, env: &Envelope, view: Value) -> Value {
    let Value::Map(mut m) = view else {
        return view;
    };
    if let Some(until) = held_until(ex, env) {
        m.insert("held_until", Value::str(time::format_timestamp(&until)));
        m.insert("waiting_because", Value::str(held_text(&until)));
    } else if let Some(p) = queue_position(ex, env) {
        m.insert("queue_position", Value::Int(p));
    }
    Value::Map(m)
}

/// What a held request says of itself: `held until T (not_before)`.
pub fn held_text(until: &time::Timestamp) -> String {
    format!(
        "held until {} (not_before): nobody is offered it before then",
        time::format_timestamp(until)
    )
}

/// Every pending thread, read from the store.
pub(crate) fn open(ex: &Exchange) -> Vec<Envelope> {
    let (open, _) = ex.store().list(&[State::Received, State::Executing], false);
    open.into_iter()
        .map(|(e, _, _)| e)
        .filter(|e| !e.status.is_terminal())
        .collect()
}

/// The pending threads, from the store.
pub(crate) fn pending(ex: &Exchange) -> Vec<Envelope> {
    let (waiting, _) = ex.store().list(&[State::Received], false);
    waiting
        .into_iter()
        .map(|(e, _, _)| e)
        .filter(|e| e.status == Status::Pending)
        .collect()
}

impl Access<'_> {
    /// The threads the `ref:` entries of `file` name (v1.0 section 2.4: a MESS id in `ref:`
    /// resolves to that request), for `viewer`: a map from each entry as written to the
    /// summary of the thread it names (envelope fields, and the latest response's content once
    /// there is one). An entry is resolved as its author meant it (a ref, or the author's
    /// client id or `last`), and a thread `viewer` may not see is left out exactly as one that
    /// does not exist.
    pub fn references_for(&self, file: &ThreadFile, viewer: &str) -> Result<Map, Error> {
        let mut out = Map::new();
        let Ok(messages) = file.messages() else {
            return Ok(out);
        };
        let directory = self.ex.directory();
        for doc in &messages {
            for payload in &doc.message.payloads {
                let entries: &[ContentEntry] = match payload {
                    Payload::Request(r) => &r.context,
                    Payload::Response(r) => &r.content,
                    Payload::Reply(r) => &r.context,
                    _ => continue,
                };
                for entry in entries {
                    let ContentEntry::Ref(named) = entry else {
                        continue;
                    };
                    if out.contains_key(named) || out.len() >= MAX_REFERENCES {
                        continue;
                    }
                    let Ok(thread) = self.ex.resolve(named, &doc.from) else {
                        continue;
                    };
                    if thread == file.envelope.thread_ref {
                        continue;
                    }
                    let Ok(referenced) = self.ex.store().read(&thread) else {
                        continue;
                    };
                    if !access::may_see(viewer, &referenced.envelope, &directory) {
                        continue;
                    }
                    let mut summary = match thread_summary(&referenced.envelope) {
                        Value::Map(m) => m,
                        _ => Map::new(),
                    };
                    if let Ok(view) = ThreadView::of(&referenced)
                        && let Some(response) = view.response
                    {
                        summary.insert(
                            "response",
                            Value::Seq(
                                response
                                    .content
                                    .iter()
                                    .map(ContentEntry::to_value)
                                    .collect(),
                            ),
                        );
                    }
                    out.insert(named.clone(), Value::Map(summary));
                }
            }
        }
        Ok(out)
    }
}
