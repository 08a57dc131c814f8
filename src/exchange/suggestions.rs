//! Accepted suggestions carried out (docs/guide/marketplace.md): when a requestor replies
//! `accept: true` to an executor's suggestion, the exchange does what it proposes. `merge`
//! and `split` make new threads and supersede the originals, `delegate` passes the work to
//! another executor in a new thread, `alternative` and `defer` amend the request.
//!
//! The decision is one write: the reply and the exchange's verdict on the thread the
//! suggestion was made on (the anchor), under that thread's lock. A claim that lands first
//! wins (the acceptance is refused and nothing changes); an acceptance that lands first ends
//! the anchor, so a later claim is refused. What follows (the new threads, the other
//! originals) is written after it from what the anchor records, each step idempotent, and a
//! delivery queued in the decision write finishes it after a crash.

use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::exchange::escrow::{Carried, Held};
use crate::exchange::{Exchange, lifecycle, plan};
use crate::protocol::envelope::{AMEND, EXCHANGE, Envelope, MessageDoc};
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload, Reply, Suggestion};
use crate::protocol::request::Request;
use crate::protocol::status::{StatusDetails, StatusMsg};
use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::store::IndexKey;
use crate::store::outbox::{Delivery, Job, Shelf};
use crate::store::thread::ThreadFile;

/// The channel a suggestion's carrying out names in the messages it writes.
const CHANNEL: &str = "suggestion";

/// Most parts a split may make.
const MOST_PARTS: usize = 32;

/// What carrying out one accepted suggestion writes, worked out before the decision.
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    /// The suggestion's id, or its place in the anchor's file.
    id: String,
    kind: String,
    /// The executor that made it.
    proposer: String,
    /// The other threads a merge supersedes.
    others: Vec<ThreadRef>,
    /// The threads it makes: ref, request, dependencies among them.
    fresh: Vec<Fresh>,
    /// A merge the proposer said it would do itself: the new thread starts claimed by it.
    claimed_by: Option<String>,
    /// The executor a delegation goes to.
    delegate: Option<String>,
    /// What an `alternative` or `defer` changes.
    amend: Map,
}

#[derive(Debug, Clone)]
struct Fresh {
    thread: ThreadRef,
    request: Request,
    depends_on: Vec<String>,
}

/// The suggestion an accepting reply of the requestor answers on `file` (the one its `re`
/// names by id, else the newest in the thread), and what carrying it out writes; `None` when
/// the reply accepts nothing or the thread has no suggestion. Refs for new threads are
/// allocated here; one refused later leaves a gap in the day's numbering, nothing else.
pub(crate) fn accepted(
    ex: &Exchange,
    file: &ThreadFile,
    reply: &Reply,
    directory: &Directory,
    now: Timestamp,
) -> Result<Option<Accepted>, Error> {
    if reply.accept != Some(true) {
        return Ok(None);
    }
    let Some((place, suggestion, proposer)) = answered(file, reply)? else {
        return Ok(None);
    };
    let env = &file.envelope;
    let id = suggestion
        .id
        .clone()
        .unwrap_or_else(|| format!("{}#{place}", env.thread_ref));
    let proposed = Proposed {
        id: id.clone(),
        fields: suggestion
            .proposed
            .as_ref()
            .and_then(Value::as_map)
            .cloned()
            .unwrap_or_default(),
    };
    check_open(env, &proposer)?;
    let mut out = Accepted {
        id,
        kind: suggestion.kind.clone(),
        proposer,
        others: Vec::new(),
        fresh: Vec::new(),
        claimed_by: None,
        delegate: None,
        amend: Map::new(),
    };
    match suggestion.kind.as_str() {
        "merge" => plan_merge(ex, file, &suggestion, &proposed, &mut out, now)?,
        "split" => plan_split(ex, file, &proposed, &mut out, now)?,
        "delegate" => plan_delegate(ex, file, &proposed, directory, &mut out, now)?,
        "alternative" | "defer" => plan_amendment(&proposed, &mut out)?,
        _ => return Ok(None),
    }
    Ok(Some(out))
}

/// The suggestion `reply` answers in `file`: the first with an id its `re` names (the one the
/// requestor was shown), else the newest; with its place among the messages and its sender.
fn answered(
    file: &ThreadFile,
    reply: &Reply,
) -> Result<Option<(usize, Suggestion, String)>, Error> {
    let named = reply.re.items();
    let mut by_id: Option<(usize, Suggestion, String)> = None;
    let mut newest: Option<(usize, Suggestion, String)> = None;
    for (i, doc) in file.messages()?.into_iter().enumerate() {
        for p in doc.message.payloads {
            if let Payload::Suggestion(s) = p {
                if by_id.is_none() && s.id.as_deref().is_some_and(|id| named.contains(&id)) {
                    by_id = Some((i, s.clone(), doc.from.clone()));
                }
                newest = Some((i, s, doc.from.clone()));
            }
        }
    }
    Ok(by_id.or(newest))
}

/// A suggestion's `proposed` mapping, read with paths that name the suggestion.
struct Proposed {
    id: String,
    fields: Map,
}

impl Proposed {
    /// The trimmed text of `key`, when it has some.
    fn text(&self, key: &str) -> Option<String> {
        self.fields
            .get(key)
            .and_then(Value::scalar_text)
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
    }

    /// The path of `key` in an error.
    fn field(&self, key: &str) -> String {
        format!("suggestion {}: proposed.{key}", self.id)
    }
}

/// A merge: the other threads it names (the requestor's, open, and holding the suggestion)
/// end, and one new thread asks for all of it, holding every escrow.
fn plan_merge(
    ex: &Exchange,
    file: &ThreadFile,
    suggestion: &Suggestion,
    proposed: &Proposed,
    out: &mut Accepted,
    now: Timestamp,
) -> Result<(), Error> {
    let env = &file.envelope;
    let id = &out.id;
    let mut files = vec![file.clone()];
    for item in suggestion.re.items() {
        let r = plan::resolve(ex, item, &env.requestor)?;
        if r != env.thread_ref && !out.others.contains(&r) {
            let other = ex.store().read(&r)?;
            if other.envelope.requestor != env.requestor {
                return Err(Error::no_thread(item));
            }
            // Only threads the suggestion was made on (`last` and client ids resolve for the
            // requestor here, for the proposer when it was sent).
            if !records(&other, suggestion, &out.proposer)? {
                return Err(ProtocolError::invalid(
                    format!("suggestion {id}: re"),
                    format!(
                        "{item} is not a thread the suggestion was made on; ask for a merge that names refs"
                    ),
                )
                .into());
            }
            check_open(&other.envelope, &out.proposer)?;
            out.others.push(r);
            files.push(other);
        }
    }
    if out.others.is_empty() {
        return Err(ProtocolError::invalid(
            format!("suggestion {id}: re"),
            "a merge names two or more open requests of yours",
        )
        .into());
    }
    let mut requests = Vec::new();
    for f in &files {
        requests.push(request_of(f)?);
    }
    let intent = proposed
        .text("combined_intent")
        .or_else(|| proposed.text("intent"))
        .unwrap_or_else(|| {
            requests
                .iter()
                .map(|r| r.intent.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        });
    let held: i64 = files
        .iter()
        .filter_map(|f| Held::of(&f.envelope))
        .map(|h| h.shells)
        .fold(0i64, i64::saturating_add);
    let mut request = merged(&requests, &intent, id)?;
    if held > 0 {
        let mut m = match request.to_value() {
            Value::Map(m) => m,
            _ => Map::new(),
        };
        set_shells(&mut m, held);
        request = Request::from_value(Value::Map(m), &format!("suggestion {id}"))?;
    }
    out.claimed_by = proposed.text("executor").filter(|e| *e == out.proposer);
    out.fresh.push(Fresh {
        thread: one_ref(ex, now)?,
        request,
        depends_on: Vec::new(),
    });
    Ok(())
}

/// A split: one new thread per part (an intent, or a request's fields over the original's),
/// each after the one before when `ordered`, the escrow shared out among them.
fn plan_split(
    ex: &Exchange,
    file: &ThreadFile,
    proposed: &Proposed,
    out: &mut Accepted,
    now: Timestamp,
) -> Result<(), Error> {
    let parts_path = proposed.field("parts");
    let parts = match proposed
        .fields
        .get("parts")
        .or_else(|| proposed.fields.get("requests"))
    {
        Some(Value::Seq(items)) if !items.is_empty() && items.len() <= MOST_PARTS => items.clone(),
        _ => {
            return Err(ProtocolError::invalid(
                parts_path,
                format!("a split lists its parts (1 to {MOST_PARTS}), each an intent or a request"),
            )
            .into());
        }
    };
    let original = request_of(file)?;
    let ordered = matches!(proposed.fields.get("ordered"), Some(Value::Bool(true)));
    let held = Held::of(&file.envelope).map_or(0, |h| h.shells);
    let shares = split_shares(&parts, held, &parts_path)?;
    let refs = ex.store().allocate_refs(now.date_naive(), parts.len())?;
    let base = original.id.clone().unwrap_or_else(|| out.id.clone());
    for (n, (part, thread)) in parts.iter().zip(refs).enumerate() {
        let path = format!("{parts_path}[{n}]");
        let mut request = original.to_value();
        if let Value::Map(m) = &mut request {
            match part {
                Value::Map(p) => {
                    // A part changes what is asked, not where the thread reports or what it
                    // waits on: those stay the requestor's.
                    for (k, v) in p
                        .iter()
                        .filter(|(k, _)| !matches!(k.as_str(), "callback" | "depends_on" | "id"))
                    {
                        m.insert(k.clone(), v.clone());
                    }
                }
                other => {
                    let intent = other.scalar_text().ok_or_else(|| {
                        ProtocolError::invalid(path.clone(), "an intent or a request")
                    })?;
                    m.insert("intent", Value::str(intent));
                }
            }
            m.insert("id", Value::str(format!("{base}.{}", n + 1)));
            if held > 0 {
                set_shells(m, shares[n]);
            }
        }
        let request = Request::from_value(request, &path)?;
        let depends_on = match (ordered, out.fresh.last()) {
            (true, Some(before)) => vec![before.thread.to_string()],
            _ => Vec::new(),
        };
        out.fresh.push(Fresh {
            thread,
            request,
            depends_on,
        });
    }
    Ok(())
}

/// A delegation: the request goes, as it is, to another executor of this exchange that holds
/// every capability it requires.
fn plan_delegate(
    ex: &Exchange,
    file: &ThreadFile,
    proposed: &Proposed,
    directory: &Directory,
    out: &mut Accepted,
    now: Timestamp,
) -> Result<(), Error> {
    let path = proposed.field("executor");
    let to = proposed
        .text("executor")
        .or_else(|| proposed.text("exchange"))
        .ok_or_else(|| {
            ProtocolError::invalid(
                path.clone(),
                "a delegation names the executor (or forwarding exchange) to take the work",
            )
        })?;
    let spec = directory.executor(&to).ok_or_else(|| {
        ProtocolError::invalid(
            path.clone(),
            format!("{to:?} is not an executor of this exchange"),
        )
    })?;
    let missing = directory.missing(spec, &file.envelope.requires);
    if !missing.is_empty() {
        return Err(ProtocolError::invalid(
            path,
            format!(
                "{to} lacks {} that the request requires",
                missing.join(", ")
            ),
        )
        .into());
    }
    out.delegate = Some(to);
    out.fresh.push(Fresh {
        thread: one_ref(ex, now)?,
        request: request_of(file)?,
        depends_on: Vec::new(),
    });
    Ok(())
}

/// An alternative or a deferral: the thread itself takes the proposed intent, `needed_by` or
/// `not_before`.
fn plan_amendment(proposed: &Proposed, out: &mut Accepted) -> Result<(), Error> {
    for key in ["intent", "needed_by", "not_before"] {
        let Some(v) = proposed.text(key) else {
            continue;
        };
        if key != "intent" {
            let at = time::parse_timestamp_lenient(&v)
                .map_err(|why| ProtocolError::invalid(proposed.field(key), why))?;
            out.amend
                .insert(key, Value::str(time::format_timestamp(&at)));
        } else {
            out.amend.insert(key, Value::str(v));
        }
    }
    if out.amend.is_empty() {
        return Err(ProtocolError::invalid(
            format!("suggestion {}: proposed", out.id),
            "an alternative or a deferral proposes intent, needed_by or not_before",
        )
        .into());
    }
    Ok(())
}

/// Whether `file` holds `suggestion`, as `proposer` made it.
fn records(file: &ThreadFile, suggestion: &Suggestion, proposer: &str) -> Result<bool, Error> {
    Ok(file
        .messages()?
        .iter()
        .filter(|d| d.from == proposer)
        .flat_map(|d| d.message.payloads.iter())
        .any(|p| match p {
            Payload::Suggestion(s) => {
                s.id == suggestion.id
                    && s.kind == suggestion.kind
                    && s.re.items() == suggestion.re.items()
            }
            _ => false,
        }))
}

/// A thread a suggestion may still change: open, and nobody but the proposer holds it.
fn check_open(env: &Envelope, proposer: &str) -> Result<(), Error> {
    let thread = &env.thread_ref;
    if env.status.is_terminal() {
        return Err(ProtocolError::conflict(format!(
            "{thread} is {}; the suggestion no longer applies (nothing changed)",
            env.status
        ))
        .into());
    }
    if let Some(holder) = env.executor.as_deref()
        && holder != proposer
    {
        return Err(ProtocolError::conflict(format!(
            "{thread} was claimed by {holder} after the suggestion; it no longer applies (nothing changed)"
        ))
        .into());
    }
    Ok(())
}

/// The request a thread was made with.
fn request_of(file: &ThreadFile) -> Result<Request, Error> {
    lifecycle::first_request(file)?.ok_or_else(|| {
        Error::from(ProtocolError::conflict(format!(
            "{} has no request document; the suggestion cannot be carried out",
            file.envelope.thread_ref
        )))
    })
}

/// The shells each part of a split takes from the original's escrow of `held`: what each
/// part's own `compensation.shells` states when any part states one (the rest refunded; more
/// than is held is refused), otherwise an even split with the odd shells to the first parts.
fn split_shares(parts: &[Value], held: i64, field: &str) -> Result<Vec<i64>, Error> {
    let stated: Vec<Option<&Value>> = parts
        .iter()
        .map(|p| {
            p.as_map()
                .and_then(|p| p.get("compensation"))
                .and_then(Value::as_map)
                .and_then(|c| c.get("shells"))
        })
        .collect();
    if stated.iter().all(Option::is_none) {
        let n = i64::try_from(parts.len()).unwrap_or(1).max(1);
        return Ok((0..n).map(|i| held / n + i64::from(i < held % n)).collect());
    }
    let mut shares = Vec::new();
    for (i, s) in stated.iter().enumerate() {
        shares.push(match s {
            None => 0,
            Some(Value::Int(n)) if *n >= 0 => *n,
            Some(_) => {
                return Err(ProtocolError::invalid(
                    format!("{field}[{i}].compensation.shells"),
                    "a number of shells (0 or more)",
                )
                .into());
            }
        });
    }
    let asked = shares
        .iter()
        .try_fold(0i64, |a, b| a.checked_add(*b))
        .unwrap_or(i64::MAX);
    if asked > held {
        return Err(ProtocolError::invalid(
            field,
            format!("the parts offer {asked} shells and the request holds {held} in escrow"),
        )
        .into());
    }
    Ok(shares)
}

/// Sets `compensation.shells` of the request `m` to `shells` (none when 0).
fn set_shells(m: &mut Map, shells: i64) {
    let mut c = m
        .get("compensation")
        .and_then(Value::as_map)
        .cloned()
        .unwrap_or_default();
    if shells > 0 {
        c.insert("shells", Value::Int(shells));
    } else {
        c.remove("shells");
    }
    if c.is_empty() {
        m.remove("compensation");
    } else {
        m.insert("compensation", Value::Map(c));
    }
}

fn one_ref(ex: &Exchange, now: Timestamp) -> Result<ThreadRef, Error> {
    Ok(ex.store().allocate_refs(now.date_naive(), 1)?.remove(0))
}

/// The request of a merge: the combined intent, every capability and context entry of the
/// originals, the highest priority and the earliest `needed_by`.
fn merged(requests: &[Request], intent: &str, id: &str) -> Result<Request, Error> {
    let mut m = match requests[0].to_value() {
        Value::Map(m) => m,
        _ => Map::new(),
    };
    m.insert("intent", Value::str(intent));
    m.insert("id", Value::str(id));
    let mut requires: Vec<Value> = Vec::new();
    let mut context: Vec<Value> = Vec::new();
    for r in requests {
        if let Some(Value::Map(v)) = Some(r.to_value()) {
            if let Some(Value::Seq(items)) = v.get("requires") {
                for i in items {
                    if !requires.contains(i) {
                        requires.push(i.clone());
                    }
                }
            }
            if let Some(Value::Seq(items)) = v.get("context") {
                context.extend(items.iter().cloned());
            }
        }
    }
    if !requires.is_empty() {
        m.insert("requires", Value::Seq(requires));
    }
    if !context.is_empty() {
        m.insert("context", Value::Seq(context));
    }
    if let Some(p) = requests.iter().filter_map(|r| r.priority).max() {
        m.insert("priority", Value::str(p.as_str()));
    }
    if let Some(n) = requests.iter().filter_map(|r| r.needed_by).min() {
        m.insert("needed_by", Value::str(time::format_timestamp(&n)));
    }
    Ok(Request::from_value(
        Value::Map(m),
        &format!("suggestion {id}"),
    )?)
}

impl Accepted {
    /// Checks again, under the anchor's lock, that the suggestion still applies to it.
    pub(crate) fn still_applies(&self, env: &Envelope) -> Result<(), Error> {
        check_open(env, &self.proposer)
    }

    /// The exchange's document on the anchor, written with the accepting reply: the anchor
    /// superseded, delegated or amended. It records the whole plan (the new threads with their
    /// requests, the other originals), so what follows can be finished from the file alone.
    pub(crate) fn verdict(&self, env: &Envelope, now: Timestamp) -> MessageDoc {
        let payload = match self.kind.as_str() {
            "alternative" | "defer" => {
                let mut body = self.amend.clone();
                body.insert("re", Value::str(env.thread_ref.as_str()));
                body.insert("suggestion", Value::str(&self.id));
                Payload::Unknown {
                    kind: AMEND.to_owned(),
                    body: Value::Map(body),
                }
            }
            kind => {
                let first = self.fresh[0].thread.to_string();
                let details = match self.delegate.as_ref() {
                    Some(to) => StatusDetails::Delegated {
                        delegated_to: to.clone(),
                        reason: None,
                    },
                    None => StatusDetails::Superseded {
                        superseded_by: first,
                        reason: kind.to_owned(),
                    },
                };
                let mut status = StatusMsg::new(env.thread_ref.as_str(), details);
                status.message = Some(format!("suggestion {} accepted", self.id));
                status.extra.insert("suggestion", Value::str(&self.id));
                status.extra.insert("carried_out", self.plan_value());
                Payload::Status(status)
            }
        };
        MessageDoc {
            from: EXCHANGE.to_owned(),
            received: now,
            channel: None,
            message: Message::new(vec![payload]),
            extra: Map::new(),
        }
    }

    fn plan_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind", Value::str(&self.kind));
        m.insert("proposer", Value::str(&self.proposer));
        let threads = self
            .fresh
            .iter()
            .map(|f| {
                let mut t = Map::new();
                t.insert("ref", Value::str(f.thread.as_str()));
                if !f.depends_on.is_empty() {
                    t.insert(
                        "depends_on",
                        Value::Seq(f.depends_on.iter().map(Value::str).collect()),
                    );
                }
                t.insert("request", f.request.to_value());
                Value::Map(t)
            })
            .collect();
        m.insert("threads", Value::Seq(threads));
        if !self.others.is_empty() {
            m.insert(
                "supersedes",
                Value::Seq(self.others.iter().map(|r| Value::str(r.as_str())).collect()),
            );
        }
        m.insert_opt("claimed_by", self.claimed_by.as_deref().map(Value::str));
        m.insert_opt("delegate", self.delegate.as_deref().map(Value::str));
        Value::Map(m)
    }

    /// The delivery, queued in the decision write, that finishes the work if this process
    /// stops before it does.
    pub(crate) fn delivery(&self, env: &Envelope, now: Timestamp) -> Option<Delivery> {
        if self.fresh.is_empty() {
            return None;
        }
        Some(finishing(&env.thread_ref, now))
    }
}

/// The reference design an anchor's verdict records, as [`Accepted::plan_value`] wrote it.
struct Recorded {
    id: String,
    proposer: String,
    kind: String,
    threads: Vec<Fresh>,
    supersedes: Vec<ThreadRef>,
    claimed_by: Option<String>,
    delegate: Option<String>,
}

fn recorded(file: &ThreadFile) -> Result<Option<Recorded>, Error> {
    for doc in file.messages_rev() {
        let doc = doc?;
        if doc.from != EXCHANGE {
            continue;
        }
        for p in &doc.message.payloads {
            let Payload::Status(s) = p else { continue };
            let Some(Value::Map(plan)) = s.extra.get("carried_out") else {
                continue;
            };
            let text = |k: &str| plan.get(k).and_then(Value::scalar_text);
            let mut threads = Vec::new();
            for t in plan
                .get("threads")
                .and_then(Value::as_seq)
                .unwrap_or_default()
            {
                let Some(t) = t.as_map() else { continue };
                let (Some(r), Some(request)) =
                    (t.get("ref").and_then(Value::scalar_text), t.get("request"))
                else {
                    continue;
                };
                threads.push(Fresh {
                    thread: ThreadRef::parse(&r).map_err(|e| {
                        ProtocolError::invalid("carried_out.threads.ref", e.to_string())
                    })?,
                    request: Request::from_value(request.clone(), "carried_out.threads.request")?,
                    depends_on: t
                        .get("depends_on")
                        .and_then(Value::as_seq)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(Value::scalar_text)
                        .collect(),
                });
            }
            let supersedes = plan
                .get("supersedes")
                .and_then(Value::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(|v| ThreadRef::parse(&v.scalar_text()?).ok())
                .collect();
            return Ok(Some(Recorded {
                id: s
                    .extra
                    .get("suggestion")
                    .and_then(Value::scalar_text)
                    .unwrap_or_default(),
                proposer: text("proposer").unwrap_or_default(),
                kind: text("kind").unwrap_or_default(),
                threads,
                supersedes,
                claimed_by: text("claimed_by"),
                delegate: text("delegate"),
            }));
        }
    }
    Ok(None)
}

/// The delivery that finishes the suggestion accepted on `anchor`.
fn finishing(anchor: &ThreadRef, now: Timestamp) -> Delivery {
    Delivery::new(
        anchor.as_str(),
        EXCHANGE,
        Job::CarryOut,
        Value::Null,
        "carried",
        now,
    )
}

/// [`carry_out`] right after the decision, in the process that made it; the delivery queued
/// for a crash is then done, so no server is needed to finish it.
pub(crate) fn carry_out_now(
    ex: &Exchange,
    anchor: &ThreadRef,
    now: Timestamp,
) -> Result<Vec<String>, Error> {
    let made = carry_out(ex, anchor, now)?;
    if !made.is_empty() {
        let mut done = finishing(anchor, now);
        done.outcome = Some(format!("carried out: {}", made.join(", ")));
        if let Err(e) = ex.store().shelve(&done, Shelf::Queue, Shelf::Done) {
            // The worker finds it all done and shelves it then.
            tracing::warn!(thread = %anchor, error = %e, "cannot shelve the finished suggestion's delivery");
        }
    }
    Ok(made)
}

/// Finishes what the verdict on `anchor` decided: makes the new threads that do not exist yet
/// and supersedes the other originals still open. Safe to run again, by any process; returns
/// the refs made.
pub(crate) fn carry_out(
    ex: &Exchange,
    anchor: &ThreadRef,
    now: Timestamp,
) -> Result<Vec<String>, Error> {
    let file = ex.store().read(anchor)?;
    let Some(plan) = recorded(&file)? else {
        return Ok(Vec::new());
    };
    let requestor = file.envelope.requestor.clone();
    let callback = file
        .envelope
        .extra
        .get(crate::exchange::callbacks::FIELD)
        .cloned();
    let mut replaced_ids = Vec::new();
    if plan.kind == "merge" {
        replaced_ids.extend(file.envelope.client_id.clone());
        for other in &plan.supersedes {
            if let Ok((env, _)) = ex.store().envelope(other) {
                replaced_ids.extend(env.client_id);
            }
        }
    }
    // The other originals first: only those this suggestion ends give their escrow to the
    // new thread (one that finished meanwhile settles its own).
    let first = plan
        .threads
        .first()
        .map(|f| f.thread.to_string())
        .unwrap_or_default();
    for other in &plan.supersedes {
        let (id, kind) = (plan.id.clone(), plan.kind.clone());
        ex.store().modify(other, |t| -> Result<_, Error> {
            // One that ended, or that someone else claimed since, goes on as it is.
            let taken = t
                .envelope
                .executor
                .as_ref()
                .is_some_and(|h| *h != plan.proposer);
            if t.envelope.status.is_terminal() || taken {
                return Ok((None, ()));
            }
            let mut status = StatusMsg::new(
                t.envelope.thread_ref.as_str(),
                StatusDetails::Superseded {
                    superseded_by: first.clone(),
                    reason: kind.clone(),
                },
            );
            status.message = Some(format!("suggestion {id} accepted"));
            status.extra.insert("suggestion", Value::str(&id));
            Ok((
                Some(lifecycle::exchange_edit(
                    &t.envelope,
                    vec![Payload::Status(status)],
                    now,
                )),
                (),
            ))
        })?;
    }
    let sources = escrow_sources(ex, &file, &plan)?;
    let mut made = Vec::new();
    {
        let _guard = ex.store().lock_sender(&requestor)?;
        for fresh in &plan.threads {
            made.push(fresh.thread.to_string());
            if !ex.store().find(&fresh.thread)?.is_empty() {
                continue;
            }
            let owner = Owner {
                requestor: &requestor,
                anchor,
                callback: callback.as_ref(),
                replaced_ids: &replaced_ids,
            };
            let carried = carried_into(&plan, fresh, &sources);
            create(ex, &plan, fresh, &owner, &carried, now)?;
        }
    }
    // Every new thread holds its part: what a split left unassigned goes back.
    for (source, _) in &sources {
        ex.marketplace()
            .refund_rest(&source.thread_ref, &requestor, now)?;
    }
    for other in &plan.supersedes {
        lifecycle::settle_dependents(ex, other, now)?;
    }
    lifecycle::settle_dependents(ex, anchor, now)?;
    for fresh in &plan.threads {
        if !fresh.depends_on.is_empty() {
            lifecycle::reconcile(ex, &fresh.thread, now)?;
        }
    }
    Ok(made)
}

/// The originals whose escrow moves with the work of the suggestion recorded on `anchor`
/// (those it ended), each with what it holds.
fn escrow_sources(
    ex: &Exchange,
    anchor: &ThreadFile,
    plan: &Recorded,
) -> Result<Vec<(Envelope, Held)>, Error> {
    let mut out = Vec::new();
    let mut files = vec![anchor.clone()];
    for other in &plan.supersedes {
        files.push(ex.store().read(other)?);
    }
    for f in files {
        if let Some(mut held) = Held::of(&f.envelope)
            && ended_by(&f, &plan.id)?
        {
            held.shells = ex.marketplace().available(&f.envelope.thread_ref)?;
            out.push((f.envelope, held));
        }
    }
    Ok(out)
}

/// Whether the exchange ended `file` for the suggestion `id`.
fn ended_by(file: &ThreadFile, id: &str) -> Result<bool, Error> {
    if !crate::exchange::escrow::moved_on(file)? {
        return Ok(false);
    }
    for doc in file.messages_rev() {
        let doc = doc?;
        for p in &doc.message.payloads {
            if let Payload::Status(s) = p
                && doc.from == EXCHANGE
                && let Some(v) = s.extra.get("suggestion")
            {
                return Ok(v.scalar_text().as_deref() == Some(id));
            }
        }
    }
    Ok(false)
}

/// What the new thread `fresh` takes from the escrows of `sources`: all of them for a merge
/// or a delegation, its part (as its request states) for a split. A delegation adds its
/// proposer to the delegators, who keep the share the request states on release.
fn carried_into(plan: &Recorded, fresh: &Fresh, sources: &[(Envelope, Held)]) -> Carried {
    let from = match plan.kind.as_str() {
        "split" => sources
            .iter()
            .take(1)
            .map(|(env, held)| {
                // The parts before this one take theirs first; none takes more than is left.
                let before: i64 = plan
                    .threads
                    .iter()
                    .take_while(|t| t.thread != fresh.thread)
                    .filter_map(|t| crate::exchange::escrow::offered(&t.request))
                    .sum();
                let asked = crate::exchange::escrow::offered(&fresh.request).unwrap_or(0);
                (
                    env.thread_ref.clone(),
                    asked.min((held.shells - before).max(0)),
                )
            })
            .collect(),
        _ => sources
            .iter()
            .map(|(env, held)| (env.thread_ref.clone(), held.shells))
            .collect(),
    };
    let mut terms = sources.first().map(|(_, h)| h.clone()).unwrap_or(Held {
        shells: 0,
        release_on: "completed".to_owned(),
        share: 0,
        delegators: Vec::new(),
    });
    if sources.iter().any(|(_, h)| h.release_on == "reviewed") {
        terms.release_on = "reviewed".to_owned();
    }
    // Merged escrows with different shares: the smallest, so no delegator takes from another
    // original's shells more than that original's requestor agreed to.
    if let Some(least) = sources.iter().map(|(_, h)| h.share).min() {
        terms.share = least;
    }
    for (_, h) in sources.iter().skip(1) {
        for d in &h.delegators {
            if !terms.delegators.contains(d) {
                terms.delegators.push(d.clone());
            }
        }
    }
    if plan.kind == "delegate" && plan.proposer != EXCHANGE && !plan.proposer.is_empty() {
        terms.delegators.push(plan.proposer.clone());
    }
    Carried { from, terms }
}

/// Whose the threads a suggestion makes are, and what they inherit from the anchor.
struct Owner<'a> {
    requestor: &'a str,
    anchor: &'a ThreadRef,
    callback: Option<&'a Value>,
    /// Client ids of the originals a merge replaces: they name the new thread from now on.
    replaced_ids: &'a [String],
}

/// Writes one thread a suggestion makes: the request as the requestor's (it accepted it),
/// noted as made by the suggestion; claimed by the proposer when it said it would do it,
/// offered to the delegate alone for a delegation, routed as any request otherwise.
fn create(
    ex: &Exchange,
    plan: &Recorded,
    fresh: &Fresh,
    owner: &Owner<'_>,
    carried: &Carried,
    now: Timestamp,
) -> Result<(), Error> {
    let Owner {
        requestor,
        anchor,
        callback,
        replaced_ids,
    } = *owner;
    let mut doc_extra = Map::new();
    let mut from = Map::new();
    from.insert("suggestion", Value::str(&plan.id));
    from.insert("accepted_on", Value::str(anchor.as_str()));
    doc_extra.insert("made_by", Value::Map(from.clone()));
    let doc = MessageDoc {
        from: requestor.to_owned(),
        received: now,
        channel: Some(CHANNEL.to_owned()),
        message: Message::new(vec![Payload::Request(fresh.request.clone())]),
        extra: doc_extra,
    };
    let mut envelope = Envelope::create(
        fresh.thread.clone(),
        &fresh.request,
        &doc,
        fresh.depends_on.clone(),
    );
    envelope.extra.insert("made_by", Value::Map(from));
    if let Some(url) = callback {
        envelope
            .extra
            .insert(crate::exchange::callbacks::FIELD, url.clone());
    }
    // The shells move before the thread exists, as a request's escrow is taken: a crash in
    // between is finished by the suggestion's delivery (each movement once).
    if let Some(escrow) = ex.marketplace().carry_escrow(carried, &fresh.thread, now)? {
        envelope
            .extra
            .insert(crate::exchange::escrow::ESCROW, escrow);
    }
    let mut docs = vec![doc];
    if let Some(to) = &plan.delegate {
        envelope
            .extra
            .insert(crate::exchange::access::OFFERED_TO, Value::str(to));
        if envelope.depends_on.is_empty() {
            ex.outbox()
                .queue_notices(&fresh.thread, std::slice::from_ref(to), "new", now)?;
            lifecycle::record_routed(
                &mut envelope,
                &[crate::db::Routed {
                    executor: to.clone(),
                    reason: format!("delegated by suggestion {}", plan.id),
                }],
                now,
            );
        }
    } else if let Some(holder) = plan.claimed_by.as_ref().filter(|h| **h == plan.proposer) {
        let mut status = StatusMsg::new(
            fresh.thread.as_str(),
            StatusDetails::Claimed {
                eta: None,
                estimate: None,
            },
        );
        status.message = Some(format!("claimed by its accepted suggestion {}", plan.id));
        let claim = MessageDoc {
            from: holder.clone(),
            received: now,
            channel: Some(CHANNEL.to_owned()),
            message: Message::new(vec![Payload::Status(status)]),
            extra: Map::new(),
        };
        envelope.apply(&claim);
        docs.push(claim);
    } else if envelope.depends_on.is_empty() {
        lifecycle::record_dispatch(
            ex,
            &mut envelope,
            &crate::exchange::directory::RouteInput::of(&fresh.request),
            now,
        );
    }
    // The requestor's names follow the work: `last`, the new request's client id, and for a
    // merge the client ids of the originals it replaces.
    let mut entries = vec![(IndexKey::Last, &fresh.thread)];
    if let Some(id) = &fresh.request.id {
        entries.push((IndexKey::ClientId(id), &fresh.thread));
    }
    for id in replaced_ids {
        entries.push((IndexKey::ClientId(id), &fresh.thread));
    }
    ex.store().remember(requestor, &entries)?;
    // The proposer of a merge names the merged thread with `last` from now on (the threads it
    // answered on are superseded): offered to it, and held when it said it would do it.
    if plan.kind == "merge" {
        let mut work = vec![(IndexKey::LastWork, &fresh.thread)];
        if envelope.executor.as_deref() == Some(plan.proposer.as_str()) {
            work.push((IndexKey::Held, &fresh.thread));
        }
        ex.store().remember(&plan.proposer, &work)?;
    }
    for dep in &envelope.depends_on {
        if let Ok(dep) = ThreadRef::parse(dep) {
            ex.store().add_dependent(&dep, &fresh.thread)?;
        }
    }
    ex.store().create(&envelope, &docs)?;
    Ok(())
}
