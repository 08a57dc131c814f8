//! Peers, exchanges that this one forwards to: an executor entry with `exchange: {url, api_key}` stands
//! for a peer exchange. A request routed to it is created there (as the key's agent, with a
//! client id made from our ref, so a retry never makes two), and our thread is claimed by that
//! executor with `delegated_to` naming the peer and its ref. The peer's statuses and responses
//! come back into our thread as that executor's messages (read from the peer's events,
//! resumable), a cancel or reply here goes there, and the request there carries the chain
//! (`delegated_from`) that makes loops impossible.

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::exchange::directory::Origin;
use crate::exchange::outcome::Outcome;
use crate::exchange::{Error, Exchange, Sender};
use crate::notify::{NotifyError, Sent};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status};
use crate::protocol::value::{Map, Value};
use crate::remote::{Remote, RemoteError, RemoteEvent};
use crate::store::outbox::Delivery;
use crate::store::thread::ThreadFile;

/// The peer exchanges: each forwarding executor's peer, the chain a forwarded request carries
/// (and its check), and the copies of forwarded threads kept in step. One of the parts
/// `Exchange` hands out ([`Exchange::peers`]).
#[derive(Clone, Copy)]
pub struct Peers<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// The peer exchanges that forwarding executors stand for.
    pub fn peers(&self) -> Peers<'_> {
        Peers { ex: self }
    }
}

/// The delivery channel of a forwarding executor.
pub(crate) const CHANNEL: &str = "exchange";

/// Exchanges a request may pass through, the first included: a request whose chain is this
/// long is not forwarded again.
pub(crate) const MAX_HOPS: usize = 4;

/// The request field that carries the chain: one `{exchange, ref}` per exchange the request
/// came through, the first exchange first.
pub(crate) const CHAIN: &str = "delegated_from";

/// The status field of our claim that names the peer and the request there.
pub(crate) const DELEGATED_TO: &str = "delegated_to";

/// The field our copies of the peer's messages carry: the message's place in the peer's file,
/// so each is copied once.
const PEER_MESSAGE: &str = "peer_message";

/// How often a follower reads every open forwarded thread of its peer again, whatever the
/// events said.
const RESYNC_EVERY: Duration = Duration::from_secs(30);

/// How often the forwarding entries in effect are looked at again.
const LOOK_FOR_PEERS: Duration = Duration::from_secs(10);

/// How long a follower waits before opening a broken event stream again, at most.
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// A peer exchange a forwarding executor entry names.
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    /// The executor id standing for it.
    pub(crate) executor: String,
    /// Its base URL.
    pub(crate) url: String,
    remote: Remote,
}

/// The peer an executor entry's `exchange:` names: `{url, api_key}` (the key may be `${ENV}`).
pub(crate) fn peer_of(
    executor: &str,
    entry: &Value,
    expand: fn(&str) -> String,
) -> Result<Peer, String> {
    let map = entry.as_map().ok_or_else(|| {
        format!("executor {executor}: exchange must be a mapping {{url, api_key}}")
    })?;
    let text = |k: &str| map.get(k).and_then(Value::scalar_text).map(|s| expand(&s));
    let url = text("url").ok_or_else(|| format!("executor {executor}: exchange.url is missing"))?;
    let key = text("api_key").unwrap_or_default();
    let remote = Remote::new(&url, &key).map_err(|e| format!("executor {executor}: {e}"))?;
    Ok(Peer {
        executor: executor.to_owned(),
        url: url.trim().trim_end_matches('/').to_owned(),
        remote,
    })
}

/// Whether an executor entry of this origin was made by the operator (config.yaml, or a
/// registration without a key): only those may forward.
fn operators(origin: Option<&Origin>) -> bool {
    matches!(
        origin,
        Some(Origin::ConfigFile | Origin::Registration { by_key: false, .. })
    )
}

/// The `exchange` of one link of a chain.
fn link_exchange(link: &Value) -> Option<String> {
    link.as_map()?.get("exchange")?.scalar_text()
}

/// The chain the thread's request came with (empty when it started here).
fn request_chain(file: &ThreadFile) -> Vec<Value> {
    let Ok(messages) = file.messages() else {
        return Vec::new();
    };
    messages
        .iter()
        .flat_map(|m| m.message.payloads.iter())
        .find_map(|p| match p {
            Payload::Request(r) => match r.extra.get(CHAIN) {
                Some(Value::Seq(links)) => Some(links.clone()),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_default()
}

/// The request fields a peer receives: what describes the work and when it is wanted. Nothing
/// else of the request goes (an allow-list, so a field added later stays home until it is
/// named here): not its `callback` (the agent's endpoint is ours to call), its `depends_on`
/// (our refs), its client id (replaced by ours), or any field of an extension.
pub(crate) const FORWARDED_FIELDS: [&str; 10] = [
    "intent",
    "precision",
    "requires",
    "context",
    "constraints",
    "response_hint",
    "priority",
    "needed_by",
    "confirm_before",
    "compensation",
];

/// The request of `file` as it goes to the peer: the fields of [`FORWARDED_FIELDS`], with a
/// client id made from our ref and the chain. Shells are this exchange's currency, so the
/// compensation goes without `shells` and `escrow` (the escrow stays here, released to the
/// forwarding entry).
pub(crate) fn request_for_peer(
    file: &ThreadFile,
    chain: Vec<Value>,
    exchange_id: &str,
) -> Option<Message> {
    let messages = file.messages().ok()?;
    let request = messages
        .iter()
        .flat_map(|m| m.message.payloads.iter())
        .find_map(|p| match p {
            Payload::Request(r) => Some(r.clone()),
            _ => None,
        })?;
    let Value::Map(whole) = request.to_value() else {
        return None;
    };
    let mut body = Map::new();
    for (key, value) in whole.iter() {
        if FORWARDED_FIELDS.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    let mut unpaid = false;
    if let Some(Value::Map(c)) = body.get_mut("compensation") {
        c.remove("shells");
        c.remove("escrow");
        unpaid = c.is_empty();
    }
    if unpaid {
        body.remove("compensation");
    }
    body.insert(
        "id",
        Value::str(client_id(exchange_id, &file.envelope.thread_ref)),
    );
    body.insert(CHAIN, Value::Seq(chain));
    Message::single("request", body).ok()
}

/// The client id of our thread `thread` at a peer: ours, and the same on every retry.
fn client_id(exchange_id: &str, thread: &ThreadRef) -> String {
    let short: String = exchange_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect();
    format!("via-{short}-{thread}")
}

/// Forwards the thread of delivery `d` to the peer its executor stands for.
pub(crate) async fn forward(ex: &Exchange, d: &Delivery) -> Outcome {
    let peer = match ex.peers().peer(&d.executor) {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Outcome::undelivered(NotifyError::Fail { message: e }),
        None => return Outcome::moot(format!("{} does not forward", d.executor)),
    };
    let Ok(thread) = ThreadRef::parse(&d.thread) else {
        return Outcome::moot("not a thread".to_owned());
    };
    let (worker, r) = (ex.clone(), thread.clone());
    let prepared = tokio::task::spawn_blocking(move || -> Result<_, String> {
        let file = worker.store().read(&r).map_err(|e| e.to_string())?;
        if file.envelope.status != Status::Pending {
            return Ok(Err(format!("the thread is {}", file.envelope.status)));
        }
        let chain = worker.peers().chain_from_here(&file)?;
        let id = worker.store().exchange_id().map_err(|e| e.to_string())?;
        Ok(request_for_peer(&file, chain, &id)
            .ok_or_else(|| "the thread has no request".to_owned()))
    })
    .await;
    let message = match prepared {
        Ok(Ok(Ok(m))) => m,
        Ok(Ok(Err(moot))) => return Outcome::moot(moot),
        Ok(Err(why)) => return Outcome::undelivered(NotifyError::Fail { message: why }),
        Err(e) => {
            return Outcome::undelivered(NotifyError::Retry {
                message: e.to_string(),
            });
        }
    };
    let answer = match peer.remote.submit(&message).await {
        Ok(a) => a,
        Err(e) => return Outcome::undelivered(failure(&e)),
    };
    let Some(peer_ref) = answer.payloads.iter().find_map(|p| match p {
        Payload::Ack(a) => a.thread_ref.clone(),
        _ => None,
    }) else {
        return Outcome::undelivered(NotifyError::Fail {
            message: format!(
                "the exchange at {} did not acknowledge the request",
                peer.url
            ),
        });
    };
    let (worker, r, executor, url, there) = (
        ex.clone(),
        thread.clone(),
        peer.executor.clone(),
        peer.url.clone(),
        peer_ref.as_str().to_owned(),
    );
    let claimed = tokio::task::spawn_blocking(move || {
        worker.peers().claim_forwarded(&r, &executor, &url, &there)
    })
    .await;
    match claimed {
        Ok(Ok(())) => {
            // What happened there while the claim was written comes back now.
            let _ = sync(ex, &peer, &thread, peer_ref.as_str()).await;
            Outcome::of_sending(Ok(Sent {
                provider_ref: Some(peer_ref.as_str().to_owned()),
            }))
        }
        Ok(Err(e)) => {
            // Taken here by someone else meanwhile: the copy there is withdrawn.
            let _ = peer
                .remote
                .submit(&cancel(peer_ref.as_str(), "taken elsewhere"))
                .await;
            Outcome::moot(format!("not claimed here: {}", ex.public_message(&e)))
        }
        Err(e) => Outcome::undelivered(NotifyError::Retry {
            message: e.to_string(),
        }),
    }
}

/// A delivery error for a peer's failure: retried unless the peer refused the request itself.
fn failure(e: &RemoteError) -> NotifyError {
    match e {
        RemoteError::Refused { status, .. } if *status < 500 && *status != 429 => {
            NotifyError::Fail {
                message: e.to_string(),
            }
        }
        _ => NotifyError::Retry {
            message: e.to_string(),
        },
    }
}

fn cancel(re: &str, reason: &str) -> Message {
    let mut body = Map::new();
    body.insert("re", Value::str(re));
    body.insert("reason", Value::str(reason));
    Message::single("cancel", body).expect("a cancel is a valid message")
}

/// The forwarding executor as the sender of what comes from its peer: an executor, held to
/// what executors may do.
fn as_executor(executor: &str) -> Sender {
    Sender {
        id: executor.to_owned(),
        channel: CHANNEL.to_owned(),
        role: Some(crate::exchange::auth::Role::Executor),
        callback: None,
    }
}

/// The peer's ref our claim of `file` recorded.
fn delegated_ref(file: &ThreadFile) -> Option<String> {
    let messages = file.messages().ok()?;
    messages.iter().rev().find_map(|m| {
        m.message.payloads.iter().find_map(|p| match p {
            Payload::Status(s) => s
                .extra
                .get(DELEGATED_TO)?
                .as_map()?
                .get("ref")?
                .scalar_text(),
            _ => None,
        })
    })
}

/// The highest place in the peer's file our thread has a copy of (0: none yet).
fn copied_up_to(file: &ThreadFile) -> usize {
    let Ok(messages) = file.messages() else {
        return 0;
    };
    messages
        .iter()
        .flat_map(|m| m.message.payloads.iter())
        .filter_map(|p| {
            let extra = match p {
                Payload::Status(s) => &s.extra,
                Payload::Response(r) => &r.extra,
                _ => return None,
            };
            match extra.get(PEER_MESSAGE) {
                Some(Value::Int(n)) => usize::try_from(*n).ok(),
                _ => None,
            }
        })
        .max()
        .unwrap_or(0)
}

/// Copies into our `thread` what the peer's thread `there` has that ours does not: the
/// statuses and responses of its executors (not its own claim, which ours stands for, and not
/// what this exchange sent). Each copy names its place in the peer's file.
async fn sync(ex: &Exchange, peer: &Peer, thread: &ThreadRef, there: &str) -> Result<(), String> {
    let theirs = peer.remote.thread(there).await.map_err(|e| e.to_string())?;
    tracing::debug!(thread = %thread, there = %there, status = %theirs.envelope.status, "copying from the peer");
    let (worker, r, executor) = (ex.clone(), thread.clone(), peer.executor.clone());
    tokio::task::spawn_blocking(move || worker.peers().copy_from_peer(&r, &executor, &theirs))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Follows every peer of the home's forwarding executors until `stop`: copies what happens
/// there into our threads, and sends our cancels and replies there.
pub(crate) fn run(ex: Exchange, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut followers = tokio::task::JoinSet::new();
        // One follower per forwarding entry as it is now: entries added, changed or removed
        // while the server runs are followed, replaced or dropped at the next look.
        let mut followed: HashMap<(String, String), CancellationToken> = HashMap::new();
        loop {
            let peers = {
                let worker = ex.clone();
                tokio::task::spawn_blocking(move || worker.peers().all())
                    .await
                    .unwrap_or_default()
            };
            let wanted: Vec<(String, String)> = peers
                .iter()
                .map(|p| (p.executor.clone(), p.url.clone()))
                .collect();
            followed.retain(|key, token| {
                let keep = wanted.contains(key);
                if !keep {
                    token.cancel();
                }
                keep
            });
            for peer in peers {
                let key = (peer.executor.clone(), peer.url.clone());
                if let std::collections::hash_map::Entry::Vacant(slot) = followed.entry(key) {
                    let token = stop.child_token();
                    slot.insert(token.clone());
                    followers.spawn(follow(ex.clone(), peer, token));
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(LOOK_FOR_PEERS) => {}
            }
        }
        while followers.join_next().await.is_some() {}
    })
}

/// How long a peer's event stream must have lasted for its end to count as a normal reconnect
/// (no pause before the next).
const STEADY_STREAM: Duration = Duration::from_secs(30);

/// Follows one peer: its events (resuming after the last id heard), and our own changes of the
/// threads forwarded to it.
async fn follow(ex: Exchange, peer: Peer, stop: CancellationToken) {
    let mut ours = ex.changes().subscribe();
    let mut cursor: Option<String> = None;
    let mut backoff = Duration::from_millis(500);
    loop {
        if stop.is_cancelled() {
            return;
        }
        let events = peer
            .remote
            .events(cursor.as_deref(), Duration::from_secs(3600))
            .await;
        let mut events = match events {
            Ok(e) => e,
            Err(e) => {
                tracing::info!(peer = %peer.url, error = %e, "peer exchange unreachable; trying again");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MOST_BACKOFF);
                continue;
            }
        };
        let connected = tokio::time::Instant::now();
        // Connected (again): whatever changed while away is read now.
        let mut known = refreshed(&ex, &peer).await;
        for (there, thread) in &known {
            if let Err(e) = sync(&ex, &peer, thread, there).await {
                tracing::info!(thread = %thread, error = %e, "catching up with the peer failed");
            }
            pass_on(&ex, &peer, thread, there).await;
        }
        let mut safety =
            tokio::time::interval_at(tokio::time::Instant::now() + RESYNC_EVERY, RESYNC_EVERY);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                // A net under the events: every open forwarded thread is read again now and then.
                _ = safety.tick() => {
                    known = refreshed(&ex, &peer).await;
                    for (there, thread) in &known {
                        let _ = sync(&ex, &peer, thread, there).await;
                    }
                }
                event = events.next() => match event {
                    Ok(RemoteEvent::Thread { thread: there, id, status, .. }) => {
                        tracing::debug!(peer = %peer.url, thread = %there, status = %status, known = known.contains_key(&there), "peer event");
                        if id.is_some() {
                            cursor = id;
                        }
                        if !known.contains_key(&there) {
                            known = refreshed(&ex, &peer).await;
                        }
                        if let Some(thread) = known.get(&there)
                            && let Err(e) = sync(&ex, &peer, thread, &there).await
                        {
                            tracing::info!(thread = %thread, error = %e, "copying from the peer failed");
                        }
                    }
                    Ok(RemoteEvent::Lagged) => {
                        for (there, thread) in &known {
                            let _ = sync(&ex, &peer, thread, there).await;
                        }
                    }
                    Err(_) => break,
                },
                change = ours.recv() => match change {
                    Ok(c) if !c.is_routing() => {
                        let there = known.iter().find_map(|(t, r)| (*r == c.thread).then(|| t.clone()));
                        match there {
                            Some(there) => pass_on(&ex, &peer, &c.thread, &there).await,
                            // Just claimed for the peer: what happened there before the claim
                            // was written (its events found no thread here) is read now.
                            None if c.envelope.executor.as_deref() == Some(peer.executor.as_str())
                                && !c.envelope.status.is_terminal() =>
                            {
                                known = refreshed(&ex, &peer).await;
                                if let Some(there) = known.iter().find_map(|(t, r)| (*r == c.thread).then(|| t.clone())) {
                                    let _ = sync(&ex, &peer, &c.thread, &there).await;
                                }
                            }
                            None => {}
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    _ => {}
                },
            }
        }
        // A stream that broke soon after it opened (a peer that cuts it, or floods it past its
        // bounds) is opened again only after a pause that grows, so a hostile peer cannot keep
        // this side reconnecting and reading in a tight loop.
        if connected.elapsed() < STEADY_STREAM {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MOST_BACKOFF);
        } else {
            backoff = Duration::from_millis(500);
        }
    }
}

/// The map of the peer's refs to our threads, read again from the files.
async fn refreshed(ex: &Exchange, peer: &Peer) -> HashMap<String, ThreadRef> {
    let (worker, p) = (ex.clone(), peer.clone());
    tokio::task::spawn_blocking(move || worker.peers().forwarded_to(&p))
        .await
        .unwrap_or_default()
}

/// Sends the peer what our requestor did in `thread` that the peer's thread does not show yet:
/// replies (counted against the replies there), and a cancel. Read from both files each time,
/// so nothing is sent twice or lost across restarts.
async fn pass_on(ex: &Exchange, peer: &Peer, thread: &ThreadRef, there: &str) {
    tracing::debug!(thread = %thread, there = %there, "passing on to the peer");
    let (worker, r) = (ex.clone(), thread.clone());
    let Ok(Ok(file)) = tokio::task::spawn_blocking(move || worker.store().read(&r)).await else {
        return;
    };
    let Ok(theirs) = peer.remote.thread(there).await else {
        return;
    };
    let (Ok(ours), Ok(at_peer)) = (file.messages(), theirs.messages()) else {
        return;
    };
    let us = at_peer.first().map(|m| m.from.clone()).unwrap_or_default();
    let replies_there = at_peer
        .iter()
        .filter(|m| m.from == us)
        .flat_map(|m| m.message.payloads.iter())
        .filter(|p| matches!(p, Payload::Reply(_)))
        .count();
    let requestor = &file.envelope.requestor;
    let replies_here: Vec<&crate::protocol::message::Reply> = ours
        .iter()
        .filter(|m| &m.from == requestor)
        .flat_map(|m| m.message.payloads.iter())
        .filter_map(|p| match p {
            Payload::Reply(r) => Some(r),
            _ => None,
        })
        .collect();
    for reply in replies_here.iter().skip(replies_there) {
        let mut r = (*reply).clone();
        r.re = crate::protocol::ids::Re::One(there.to_owned());
        let message = Message {
            payloads: vec![Payload::Reply(r)],
            extra: Map::new(),
        };
        if let Err(e) = peer.remote.submit(&message).await {
            tracing::info!(thread = %thread, error = %e, "passing a reply on to the peer failed");
            return;
        }
    }
    if file.envelope.status == Status::Cancelled && !theirs.envelope.status.is_terminal() {
        let why = ours
            .iter()
            .flat_map(|m| m.message.payloads.iter())
            .find_map(|p| match p {
                Payload::Cancel(c) => c.reason.clone(),
                _ => None,
            })
            .unwrap_or_else(|| "cancelled by the requestor".to_owned());
        if let Err(e) = peer.remote.submit(&cancel(there, &why)).await {
            tracing::info!(thread = %thread, error = %e, "passing a cancel on to the peer failed");
        }
    }
}

impl Peers<'_> {
    /// The peer exchange executor `id` stands for, when it is a forwarding entry.
    pub(crate) fn peer(&self, id: &str) -> Option<Result<Peer, String>> {
        let directory = self.ex.directory();
        let entry = directory.executor(id)?.extra.get("exchange")?.clone();
        if !operators(directory.origin(id)) {
            return Some(Err(format!(
                "executor {id}: forwarding is set in config.yaml or by the operator, not with a key"
            )));
        }
        Some(peer_of(id, &entry, self.ex.settings().dispatch.expand))
    }

    /// Every forwarding executor's peer (entries that cannot be read are skipped and logged).
    fn all(&self) -> Vec<Peer> {
        let directory = self.ex.directory();
        let mut out = Vec::new();
        for spec in &directory.executors {
            if let Some(entry) = spec.extra.get("exchange")
                && operators(directory.origin(&spec.id))
            {
                match peer_of(&spec.id, entry, self.ex.settings().dispatch.expand) {
                    Ok(p) => out.push(p),
                    Err(e) => tracing::warn!(problem = %e, "forwarding executor skipped"),
                }
            }
        }
        out
    }

    /// The chain a request forwarded from this exchange carries: the chain it came with, then
    /// this exchange. Refused when this exchange is in it already (a loop) or it is at the hop
    /// limit.
    fn chain_from_here(&self, file: &ThreadFile) -> Result<Vec<Value>, String> {
        let here = self.ex.store().exchange_id().map_err(|e| e.to_string())?;
        let mut chain = request_chain(file);
        if chain
            .iter()
            .any(|link| link_exchange(link).as_deref() == Some(here.as_str()))
        {
            return Err("a loop: the request came through this exchange already".to_owned());
        }
        if chain.len() + 1 >= MAX_HOPS {
            return Err(format!(
                "the request has passed through {} exchanges; at most {MAX_HOPS} may handle it",
                chain.len() + 1
            ));
        }
        let mut link = Map::new();
        link.insert("exchange", Value::str(&here));
        link.insert("ref", Value::str(file.envelope.thread_ref.as_str()));
        chain.push(Value::Map(link));
        Ok(chain)
    }

    /// Refuses a request whose chain says it came through this exchange already, or has
    /// passed through as many exchanges as allowed: a loop of forwarding entries ends here.
    pub(crate) fn check_chain(&self, request: &Map, path: &str) -> Result<(), Error> {
        let Some(chain) = request.get(CHAIN) else {
            return Ok(());
        };
        let refuse = |why: String| -> Result<(), Error> {
            Err(
                crate::protocol::error::ProtocolError::invalid(format!("{path}.{CHAIN}"), why)
                    .into(),
            )
        };
        let Value::Seq(links) = chain else {
            return refuse("must be a list of {exchange, ref}".to_owned());
        };
        if links.len() >= MAX_HOPS {
            return refuse(format!(
                "the request has passed through {} exchanges; at most {MAX_HOPS} may handle it",
                links.len()
            ));
        }
        let here = self.ex.store().exchange_id()?;
        if links
            .iter()
            .any(|l| link_exchange(l).as_deref() == Some(here.as_str()))
        {
            return refuse("a loop: the request came through this exchange already".to_owned());
        }
        Ok(())
    }

    /// Claims `thread` for the forwarding executor, naming the peer and its ref.
    fn claim_forwarded(
        &self,
        thread: &ThreadRef,
        executor: &str,
        url: &str,
        there: &str,
    ) -> Result<(), Error> {
        let mut to = Map::new();
        to.insert("exchange", Value::str(executor));
        to.insert("url", Value::str(url));
        to.insert("ref", Value::str(there));
        let mut body = Map::new();
        body.insert("re", Value::str(thread.as_str()));
        body.insert("code", Value::str("claimed"));
        body.insert(DELEGATED_TO, Value::Map(to));
        let message = Message::single("status", body)?;
        self.ex.intake().submit(message, &as_executor(executor))?;
        Ok(())
    }

    /// Our open threads forwarded to `peer`: the peer's ref of each, to ours.
    fn forwarded_to(&self, peer: &Peer) -> HashMap<String, ThreadRef> {
        let mut out = HashMap::new();
        let (listed, _) = self.ex.store().list(&[State::Executing], false);
        for (env, _, _) in listed {
            if env.executor.as_deref() != Some(peer.executor.as_str()) {
                continue;
            }
            if let Ok(file) = self.ex.store().read(&env.thread_ref)
                && let Some(there) = delegated_ref(&file)
            {
                out.insert(there, env.thread_ref.clone());
            }
        }
        out
    }

    fn copy_from_peer(
        &self,
        thread: &ThreadRef,
        executor: &str,
        theirs: &ThreadFile,
    ) -> Result<(), Error> {
        let ours = self.ex.store().read(thread)?;
        if ours.envelope.status.is_terminal() {
            return Ok(());
        }
        let done = copied_up_to(&ours);
        let messages = theirs.messages()?;
        // Who we are there: the sender of the request.
        let us = messages.first().map(|m| m.from.clone()).unwrap_or_default();
        let sender = as_executor(executor);
        for (n, doc) in messages.iter().enumerate().skip(1) {
            let n = n + 1;
            if n <= done || doc.from == us || doc.from == crate::protocol::envelope::EXCHANGE {
                continue;
            }
            let mut payloads = Vec::new();
            for p in &doc.message.payloads {
                match p {
                    // Ours is claimed already by the executor standing for the peer.
                    Payload::Status(s) if matches!(s.code, Status::Claimed | Status::Pending) => {}
                    Payload::Status(s) => {
                        let mut s = s.clone();
                        s.re = crate::protocol::ids::Re::One(thread.as_str().to_owned());
                        s.executor = None;
                        s.extra.insert(PEER_MESSAGE, Value::Int(n as i64));
                        payloads.push(Payload::Status(s));
                    }
                    Payload::Response(r) => {
                        let mut r = r.clone();
                        r.re = crate::protocol::ids::Re::One(thread.as_str().to_owned());
                        r.executor = None;
                        r.extra.insert(PEER_MESSAGE, Value::Int(n as i64));
                        payloads.push(Payload::Response(r));
                    }
                    _ => {}
                }
            }
            if payloads.is_empty() {
                continue;
            }
            let message = Message {
                payloads,
                ..doc.message.clone()
            };
            if let Err(e) = self.ex.intake().submit(message, &sender) {
                // One message the machine refuses here must not stop the rest.
                tracing::warn!(thread = %thread, peer_message = n, error = %e, "a message of the peer was not copied");
            }
        }
        Ok(())
    }
}
