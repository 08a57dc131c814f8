//! What an exchange answers and writes: the summary a listing shows, queue positions, a status
//! `query`'s list, acks, and the documents it writes into threads. Every build answers from
//! these, over the envelopes it reads.

use std::collections::HashMap;

use crate::config::ExecutorSpec;
use crate::content::ContentEntry;
use crate::envelope::{EXCHANGE, Envelope, MessageDoc};
use crate::ids::{Re, ThreadRef};
use crate::message::{Ack, AckEntry, Message, Payload, QueryFilter, Response};
use crate::request::Request;
use crate::rules::Incoming;
use crate::status::{State, Status};
use crate::time::{self, Timestamp};
use crate::value::{Map, Value};

/// The fields of a thread that listings show.
pub fn thread_summary(e: &Envelope) -> Value {
    let mut m = Map::new();
    m.insert("ref", Value::str(e.thread_ref.as_str()));
    if let Some(id) = &e.client_id {
        m.insert("client_id", Value::str(id));
    }
    m.insert("status", Value::str(e.status.as_str()));
    m.insert("intent", Value::str(&e.intent));
    if let Some(x) = &e.executor {
        m.insert("executor", Value::str(x));
    }
    m.insert("requestor", Value::str(&e.requestor));
    m.insert("updated", Value::str(time::format_timestamp(&e.updated)));
    Value::Map(m)
}

/// The queue position (1 = next) of every waiting thread among `listed` offered by `now`, in
/// the queue's order (urgent first, then the oldest, then by ref).
pub fn queue_positions(listed: &[Envelope], now: Timestamp) -> HashMap<ThreadRef, i64> {
    let mut waiting: Vec<&Envelope> = listed
        .iter()
        .filter(|e| e.status == Status::Pending && !e.too_early(now))
        .collect();
    waiting.sort_by(|a, b| a.queue_key().cmp(&b.queue_key()));
    waiting
        .into_iter()
        .enumerate()
        .map(|(i, e)| (e.thread_ref.clone(), i as i64 + 1))
        .collect()
}

/// When a pending request is held until, while its `not_before` is ahead of `now`: nobody is
/// offered it before.
pub fn held_until(env: &Envelope, now: Timestamp) -> Option<Timestamp> {
    (env.status == Status::Pending && env.too_early(now))
        .then_some(env.not_before)
        .flatten()
}

/// The `threads` of a status query's answer: of `mine` (every thread the sender is a party
/// to), those `filter` asks for (`only`: the threads its `re` named; without `re` or `status`,
/// the open ones), waiting work first in queue order (positions among `waiting`, the pending
/// threads), then the rest, most recently changed first.
pub fn status_threads(
    filter: &QueryFilter,
    only: &[ThreadRef],
    mine: &[Envelope],
    waiting: &[Envelope],
    now: Timestamp,
) -> Value {
    let all = filter
        .re
        .as_ref()
        .is_some_and(|re| re.items().contains(&"all"));
    let open_only = !all && filter.re.is_none() && filter.status.is_empty();
    let mut chosen: Vec<&Envelope> = mine
        .iter()
        // Open as `mess status` and `mess://pending` mean it: waiting or being worked on
        // (partial work was delivered, so it is not listed).
        .filter(|e| !open_only || matches!(e.status.state(), State::Received | State::Executing))
        .filter(|e| only.is_empty() || only.contains(&e.thread_ref))
        .filter(|e| filter.status.is_empty() || filter.status.contains(&e.status))
        .filter(|e| {
            filter
                .executor
                .as_ref()
                .is_none_or(|x| e.executor.as_ref() == Some(x))
        })
        .filter(|e| filter.since.is_none_or(|t| e.updated >= t))
        .collect();
    let positions = if chosen.iter().any(|e| e.status == Status::Pending) {
        queue_positions(waiting, now)
    } else {
        HashMap::new()
    };
    chosen.sort_by(
        |a, b| match (positions.get(&a.thread_ref), positions.get(&b.thread_ref)) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            // Ties in the listing order, whatever order the envelopes came in.
            (None, None) => b
                .updated
                .cmp(&a.updated)
                .then_with(|| crate::access::listing_order(a, b)),
        },
    );
    Value::Seq(
        chosen
            .into_iter()
            .map(|e| {
                let mut v = thread_summary(e);
                if let Value::Map(m) = &mut v {
                    if let Some(p) = positions.get(&e.thread_ref) {
                        m.insert("queue_position", Value::Int(*p));
                    } else if let Some(until) = held_until(e, now) {
                        m.insert("held_until", Value::str(time::format_timestamp(&until)));
                    }
                }
                v
            })
            .collect(),
    )
}

/// The exchange's answer to a `config` or a `query`: a response whose content is structured
/// data.
pub fn structured_response(data: Value) -> Payload {
    Payload::Response(Response {
        re: Re::One("last".to_owned()),
        content: vec![ContentEntry::Structured(data)],
        executor: None,
        completed_at: None,
        notes: None,
        extra: Map::new(),
    })
}

/// The document of a message as the exchange writes it into a thread: `payloads` from `from`,
/// received `now` through `channel`, led by the version the message named.
pub fn message_doc(
    from: &str,
    channel: &str,
    version: Option<&str>,
    payloads: impl IntoIterator<Item = Payload>,
    extra: Map,
    now: Timestamp,
) -> MessageDoc {
    let mut all: Vec<Payload> = version
        .map(|v| Payload::Version(v.to_owned()))
        .into_iter()
        .collect();
    all.extend(payloads);
    MessageDoc {
        from: from.to_owned(),
        received: now,
        channel: Some(channel.to_owned()),
        message: Message {
            payloads: all,
            extra,
        },
        extra: Map::new(),
    }
}

/// The exchange's ack written into a new thread after its request. The file's documents follow
/// the MESSE-AF example: the request names the version and the exchange's own documents imply
/// it.
pub fn creation_ack_doc(request: &Request, thread: &ThreadRef, now: Timestamp) -> MessageDoc {
    MessageDoc {
        from: EXCHANGE.to_owned(),
        received: now,
        channel: None,
        message: Message::new(vec![Payload::Ack(Ack {
            re: Some(request.id.clone().unwrap_or_else(|| "last".to_owned())),
            thread_ref: Some(thread.to_string()),
            requests: Vec::new(),
            received_at: None,
            queue_position: None,
            extra: Map::new(),
        })]),
        extra: Map::new(),
    }
}

/// The ack answered for `incoming` (its threads in `assigned`, by place in the message): one
/// request hears its ref and, waiting for an executor, where it stands in the queue
/// (`position`); several hear each one's ref.
pub fn ack_for(
    incoming: &[Incoming],
    assigned: &HashMap<usize, ThreadRef>,
    now: Timestamp,
    position: impl FnOnce(&ThreadRef) -> Option<i64>,
) -> Ack {
    if let [req] = incoming {
        let thread = &assigned[&req.index];
        return Ack {
            re: Some(req.request.id.clone().unwrap_or_else(|| "last".to_owned())),
            thread_ref: Some(thread.to_string()),
            requests: Vec::new(),
            received_at: Some(now),
            queue_position: position(thread),
            extra: Map::new(),
        };
    }
    Ack {
        re: None,
        thread_ref: None,
        requests: incoming
            .iter()
            .map(|r| AckEntry {
                id: r.request.id.clone(),
                thread_ref: assigned[&r.index].to_string(),
            })
            .collect(),
        received_at: Some(now),
        queue_position: None,
        extra: Map::new(),
    }
}

/// One capability of an exchange's catalog (the native exchange's `capabilities.yaml`).
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    /// The capability id.
    pub id: String,
    /// What it means.
    pub description: Option<String>,
    /// Tags for discovery.
    pub tags: Vec<String>,
}

/// The answer to a capabilities query: the catalog joined with what `executors` offer
/// (catalog entries first, then ids only executors name), each with the executors holding it;
/// with `tags`, only capabilities carrying one of them.
pub fn capabilities<'a>(
    catalog: &[CatalogEntry],
    executors: impl IntoIterator<Item = &'a ExecutorSpec>,
    tags: &[String],
) -> Value {
    let mut caps: Vec<(String, Map)> = Vec::new();
    for entry in catalog {
        let mut m = Map::new();
        m.insert("id", Value::str(&entry.id));
        if let Some(d) = &entry.description {
            m.insert("description", Value::str(d));
        }
        if !entry.tags.is_empty() {
            m.insert(
                "tags",
                Value::Seq(entry.tags.iter().map(Value::str).collect()),
            );
        }
        caps.push((entry.id.clone(), m));
    }
    for exec in executors {
        for id in exec.capability_ids() {
            let slot = match caps.iter().position(|(c, _)| c == id) {
                Some(i) => i,
                None => {
                    let mut m = Map::new();
                    m.insert("id", Value::str(id));
                    caps.push((id.to_owned(), m));
                    caps.len() - 1
                }
            };
            let m = &mut caps[slot].1;
            let mut list = match m.remove("executors") {
                Some(Value::Seq(v)) => v,
                _ => Vec::new(),
            };
            list.push(Value::str(&exec.id));
            m.insert("executors", Value::Seq(list));
        }
    }
    Value::Seq(
        caps.into_iter()
            .filter(|(_, m)| {
                tags.is_empty()
                    || m.get("tags").and_then(Value::as_seq).is_some_and(|t| {
                        t.iter()
                            .any(|x| x.as_str().is_some_and(|s| tags.iter().any(|w| w == s)))
                    })
            })
            .map(|(_, m)| Value::Map(m))
            .collect(),
    )
}

/// The answer to an executors query: the executors in effect (or the one named), summarised.
pub fn executors<'a>(
    executors: impl IntoIterator<Item = &'a ExecutorSpec>,
    only: Option<&str>,
) -> Value {
    Value::Seq(
        executors
            .into_iter()
            .filter(|e| only.is_none_or(|x| e.id == x))
            .map(executor_summary)
            .collect(),
    )
}

/// An executor as query answers show it.
pub fn executor_summary(e: &ExecutorSpec) -> Value {
    let mut m = Map::new();
    m.insert("id", Value::str(&e.id));
    if let Some(n) = &e.name {
        m.insert("name", Value::str(n));
    }
    m.insert(
        "capabilities",
        Value::Seq(e.capabilities.iter().map(|c| c.to_value()).collect()),
    );
    m.insert(
        "availability",
        Value::str(e.availability.as_deref().unwrap_or("always")),
    );
    if let Some(s) = &e.schedule {
        m.insert("schedule", Value::str(s));
    }
    if let Some(zone) = &e.timezone {
        m.insert("timezone", Value::str(zone));
    }
    Value::Map(m)
}
