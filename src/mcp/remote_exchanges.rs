//! Tools acting on another exchange (`exchange: NAME`, a remote entry of `exchanges:`): the
//! message a tool builds goes to that exchange's HTTP API with its key, and every answer says
//! which exchange it came from, so refs stay unambiguous across exchanges.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::exchange::view::{self, ThreadView};
use crate::mcp::threads::{all_threads, open_threads};
use crate::mcp::wait::{self, Heard, Here, Woke, Word, settles};
use crate::mcp::{MessMcp, answer, marked};
use crate::protocol::emit;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status};
use crate::protocol::value::{Map, Value};
use crate::remote::{Remote, RemoteEvent, RemoteEvents};

/// A remote exchange a tool call names: its name in `exchanges:` and its client.
pub(crate) struct Target {
    name: String,
    remote: Remote,
}

/// The id of the last event heard from each remote exchange, by name: a wait resumes there
/// (`Last-Event-ID`), so a change between two waits is not missed where the remote keeps a
/// change feed.
pub(crate) type Cursors = Arc<Mutex<HashMap<String, String>>>;

/// The watchers of other exchanges one wait listens to; dropping it stops them.
pub(crate) struct Watchers {
    tasks: JoinSet<()>,
    tx: mpsc::Sender<Word>,
    pub(crate) rx: mpsc::Receiver<Word>,
}

/// What one watcher watches.
struct Watch {
    name: String,
    remote: Remote,
    /// The thread (its ref there); `None`: every thread the key may see.
    thread: Option<String>,
    /// A stream opened already (before the thread was read, so nothing falls between).
    stream: Option<RemoteEvents>,
    until: tokio::time::Instant,
    /// Stop after the first word (`mess_wait`) or go on until `until` (a request's wait).
    once: bool,
}

/// Threads a remote listing asks for per folder.
const LIST_LIMIT: usize = 1000;

impl MessMcp {
    /// The remote exchange `name` names, or `None` for this exchange (empty, `primary`, or a
    /// name that is not a remote entry; an unknown name is refused by [`MessMcp::unknown`]).
    pub(crate) fn elsewhere(&self, name: &str) -> Option<Result<Target, CallToolResult>> {
        let name = name.trim();
        if name.is_empty() || name == "primary" {
            return None;
        }
        Some(
            self.remotes
                .iter()
                .find(|(n, _)| n == name)
                .map(|(n, r)| Target {
                    name: n.clone(),
                    remote: r.clone(),
                })
                .ok_or_else(|| self.unknown(name)),
        )
    }

    /// The tool error for an exchange name that is not configured.
    fn unknown(&self, name: &str) -> CallToolResult {
        let known: Vec<&str> = std::iter::once("primary")
            .chain(self.remotes.iter().map(|(n, _)| n.as_str()))
            .chain(self.locals.iter().map(|l| l.name.as_str()))
            .collect();
        CallToolResult::error(vec![ContentBlock::text(format!(
            "exchange: no exchange named {name:?} (known: {})",
            known.join(", ")
        ))])
    }

    /// Submits one payload of `kind` to `target` and answers with its reply.
    pub(crate) async fn send_elsewhere(
        &self,
        target: Result<Target, CallToolResult>,
        kind: &str,
        body: Map,
    ) -> CallToolResult {
        let target = match target {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        let message = match Message::single(kind, body) {
            Ok(m) => m,
            Err(e) => return self.failure(&e.into()),
        };
        match target.remote.submit(&message).await {
            Ok(reply) => answer(&marked(reply.to_value(), &target.name)),
            Err(e) => failed(&e),
        }
    }

    /// `mess` on `target`: the YAML message is read here (the same checks as a local one),
    /// then sent.
    pub(crate) async fn raw_elsewhere(
        &self,
        target: Result<Target, CallToolResult>,
        text: String,
    ) -> CallToolResult {
        let target = match target {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        let messages = match self.run(move |ex, _| ex.intake().parse_text(&text)).await {
            Ok(m) => m,
            Err(failed) => return failed,
        };
        let mut answers = Vec::new();
        for message in &messages {
            match target.remote.submit(message).await {
                Ok(reply) => answers.push(marked(reply.to_value(), &target.name)),
                Err(e) => return failed(&e),
            }
        }
        match answers.len() {
            1 => answer(&answers.remove(0)),
            _ => {
                let mut out = Map::new();
                out.insert("answers", Value::Seq(answers));
                answer(&Value::Map(out))
            }
        }
    }

    /// `mess_status` on `target`: one thread (`re`), the open ones (empty) or all (`all`).
    pub(crate) async fn status_elsewhere(
        &self,
        target: Result<Target, CallToolResult>,
        re: String,
    ) -> CallToolResult {
        let target = match target {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        if re.is_empty() || re == "all" {
            let states: &[State] = if re.is_empty() {
                &[State::Received, State::Executing]
            } else {
                &State::ALL
            };
            return match target.remote.threads(states, LIST_LIMIT).await {
                Ok(list) => {
                    let mut out = Map::new();
                    out.insert(
                        "threads",
                        Value::Seq(
                            list.iter()
                                .map(|e| marked(view::thread_summary(e), &target.name))
                                .collect(),
                        ),
                    );
                    answer(&marked(Value::Map(out), &target.name))
                }
                Err(e) => failed(&e),
            };
        }
        match self.view_elsewhere(&target, &re).await {
            Ok((_, view)) => answer(&view),
            Err(failed) => failed,
        }
    }

    /// Watchers for one wait (none started yet).
    pub(crate) fn watchers(&self) -> Watchers {
        let (tx, rx) = mpsc::channel(16);
        Watchers {
            tasks: JoinSet::new(),
            tx,
            rx,
        }
    }

    /// Starts watchers of every other exchange for `mess_wait` without `exchange`: each passes
    /// on the first change of a thread the key (or, on a home of this machine, the agent) may
    /// see there.
    pub(crate) fn watch_everywhere(&self, watchers: &mut Watchers, limit: Duration) {
        for local in self.locals.iter() {
            let changes = local.server.exchange.changes().subscribe();
            let (tx, name, who) = (watchers.tx.clone(), local.name.clone(), self.who.id.clone());
            let until = tokio::time::Instant::now() + limit;
            watchers
                .tasks
                .spawn(run_local_watch(changes, name, who, until, tx));
        }
        for (name, remote) in self.remotes.iter() {
            self.spawn_watch(
                watchers,
                Watch {
                    name: name.clone(),
                    remote: remote.clone(),
                    thread: None,
                    stream: None,
                    until: tokio::time::Instant::now() + limit,
                    once: true,
                },
            );
        }
    }

    /// Starts the watcher of `mess_wait` on `target`: of thread `re` there (a ref, client id
    /// or `last`), or of every thread the key may see there. Fails as a tool result when the
    /// exchange cannot be reached or has no such thread for the key.
    pub(crate) async fn watch_elsewhere(
        &self,
        watchers: &mut Watchers,
        target: Result<Target, CallToolResult>,
        re: &str,
        limit: Duration,
    ) -> Result<(), CallToolResult> {
        let target = target?;
        let after = self.cursor(&target.name);
        let stream = target
            .remote
            .events(after.as_deref(), limit)
            .await
            .map_err(|e| failed(&e))?;
        let thread = if re.is_empty() {
            None
        } else {
            let file = target.remote.thread(re).await.map_err(|e| failed(&e))?;
            Some(file.envelope.thread_ref.as_str().to_owned())
        };
        self.spawn_watch(
            watchers,
            Watch {
                name: target.name,
                remote: target.remote,
                thread,
                stream: Some(stream),
                until: tokio::time::Instant::now() + limit,
                once: true,
            },
        );
        Ok(())
    }

    /// The id of the last event heard from the exchange `name`.
    fn cursor(&self, name: &str) -> Option<String> {
        lock(&self.cursors).get(name).cloned()
    }

    fn spawn_watch(&self, watchers: &mut Watchers, watch: Watch) {
        let (tx, cursors) = (watchers.tx.clone(), self.cursors.clone());
        watchers.tasks.spawn(run_watch(watch, cursors, tx));
    }

    /// `mess_observe` / `mess_do` on `target`: creates the request, then with `wait_s` waits
    /// for it to settle, reading it again on each event of it from the exchange.
    pub(crate) async fn request_elsewhere(
        &self,
        target: Result<Target, CallToolResult>,
        body: Map,
        wait_s: u32,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let target = match target {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        let message = match Message::single("request", body) {
            Ok(m) => m,
            Err(e) => return self.failure(&e.into()),
        };
        let limit = Duration::from_secs(u64::from(wait_s.min(wait::MOST_REQUEST_WAIT_S)));
        // Opened before the request exists, so no change to it is missed; a request sent
        // without one is still sent (the wait then reads the thread when it ends).
        let stream = if wait_s > 0 {
            target.remote.events(None, limit).await.ok()
        } else {
            None
        };
        let reply = match target.remote.submit(&message).await {
            Ok(r) => r,
            Err(e) => return failed(&e),
        };
        let ack = marked(reply.to_value(), &target.name);
        let thread = reply.payloads.iter().find_map(|p| match p {
            Payload::Ack(a) => a.thread_ref.clone(),
            _ => None,
        });
        let (Some(thread), true) = (thread, wait_s > 0) else {
            return answer(&ack);
        };
        let mut waiting = self.waiting(limit, &ctx);
        let mut watchers = self.watchers();
        if let Some(stream) = stream {
            self.spawn_watch(
                &mut watchers,
                Watch {
                    name: target.name.clone(),
                    remote: target.remote.clone(),
                    thread: Some(thread.as_str().to_owned()),
                    stream: Some(stream),
                    until: tokio::time::Instant::now() + limit,
                    once: false,
                },
            );
        }
        // Nothing of this exchange is waited on; its bus only satisfies the signature.
        let mut quiet = self.exchange.changes().subscribe();
        let (status, view) = loop {
            let (status, view) = match self.view_elsewhere(&target, thread.as_str()).await {
                Ok(v) => v,
                Err(failed) => return failed,
            };
            if settles(status) {
                break (status, view);
            }
            match self
                .next_change(
                    &mut waiting,
                    &mut quiet,
                    Here::Nothing,
                    Some(&mut watchers.rx),
                    &ctx,
                )
                .await
            {
                Woke::Elsewhere(_) | Woke::Change(_) | Woke::Lagged => {}
                Woke::Ended => {
                    // The last word is the thread as it is now.
                    match self.view_elsewhere(&target, thread.as_str()).await {
                        Ok(v) => break v,
                        Err(failed) => return failed,
                    }
                }
            }
        };
        let mut out = ack.as_map().cloned().unwrap_or_default();
        out.insert("thread", view);
        out.insert("waited_s", Value::Int(waiting.waited_s() as i64));
        out.insert("timed_out", Value::Bool(!settles(status)));
        answer(&Value::Map(out))
    }

    /// `mess_status`'s listing of this exchange (`local`) with the threads of every remote
    /// exchange appended (see [`MessMcp::merged`]).
    pub(crate) async fn with_other_exchanges(
        &self,
        local: CallToolResult,
        all: bool,
    ) -> CallToolResult {
        if !self.has_others() {
            return local;
        }
        match local
            .structured_content
            .as_ref()
            .and_then(|v| serde_json::from_value::<Value>(v.clone()).ok())
        {
            Some(Value::Map(m)) => answer(&Value::Map(self.merged(m, all).await)),
            _ => local,
        }
    }

    /// `mess://pending` (or with `all`, `mess://history`) when other exchanges are configured:
    /// the listing of every exchange as YAML, or the error to show; `None` when there are no
    /// others.
    pub(crate) async fn listing_everywhere(&self, all: bool) -> Option<Result<String, String>> {
        if !self.has_others() {
            return None;
        }
        let (ex, who) = (self.exchange.clone(), self.who.id.clone());
        let local = tokio::task::spawn_blocking(move || {
            if all {
                all_threads(&ex, &who)
            } else {
                open_threads(&ex, &who)
            }
        })
        .await;
        Some(match local {
            Ok(Ok(Value::Map(m))) => Ok(emit::to_yaml(&Value::Map(self.merged(m, all).await))),
            Ok(Ok(other)) => Ok(emit::to_yaml(&other)),
            Ok(Err(e)) => Err(self.exchange.public_message(&e)),
            Err(e) => Err(format!("the exchange failed unexpectedly: {e}")),
        })
    }

    /// [`MessMcp::listing_everywhere`] for the resource `uri`, when it is one of the listings.
    pub(crate) async fn listing_everywhere_of(&self, uri: &str) -> Option<Result<String, String>> {
        match uri.trim() {
            "mess://pending" => self.listing_everywhere(false).await,
            "mess://history" => self.listing_everywhere(true).await,
            _ => None,
        }
    }

    /// A listing of this exchange (`local`, its `threads`) with the threads of every remote
    /// exchange appended, each marked with its exchange; an exchange that does not answer is
    /// named under `unreachable` instead of failing the listing.
    async fn merged(&self, mut out: Map, all: bool) -> Map {
        let mut threads: Vec<Value> = match out.get("threads") {
            Some(Value::Seq(items)) => items.iter().map(|t| marked(t.clone(), "primary")).collect(),
            _ => Vec::new(),
        };
        let states: &[State] = if all {
            &State::ALL
        } else {
            &[State::Received, State::Executing]
        };
        let mut unreachable = Vec::new();
        for local in self.locals.iter() {
            let (ex, who) = (local.server.exchange.clone(), self.who.id.clone());
            let listed = tokio::task::spawn_blocking(move || {
                if all {
                    all_threads(&ex, &who)
                } else {
                    open_threads(&ex, &who)
                }
            })
            .await;
            match listed {
                Ok(Ok(Value::Map(m))) => {
                    if let Some(Value::Seq(items)) = m.get("threads") {
                        threads.extend(items.iter().map(|t| marked(t.clone(), &local.name)));
                    }
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => unreachable.push(unreachable_item(
                    &local.name,
                    local.server.exchange.public_message(&e),
                )),
                Err(e) => unreachable.push(unreachable_item(&local.name, e.to_string())),
            }
        }
        for (name, remote) in self.remotes.iter() {
            match remote.threads(states, LIST_LIMIT).await {
                Ok(list) => {
                    threads.extend(list.iter().map(|e| marked(view::thread_summary(e), name)))
                }
                Err(e) => unreachable.push(unreachable_item(name, e.to_string())),
            }
        }
        out.insert("threads", Value::Seq(threads));
        if !unreachable.is_empty() {
            out.insert("unreachable", Value::Seq(unreachable));
        }
        out
    }

    /// `mess_answer` on `target`: the thread is read there, the reply sent there.
    pub(crate) async fn answer_elsewhere(
        &self,
        target: Result<Target, CallToolResult>,
        re: String,
        text: String,
    ) -> CallToolResult {
        let target = match target {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        let thread = match target.remote.thread(&re).await {
            Ok(t) => t,
            Err(e) => return failed(&e),
        };
        let body = ThreadView::of(&thread).and_then(|view| {
            crate::mcp::tools::answer_body(&view, thread.envelope.thread_ref.as_str(), &re, &text)
        });
        match body {
            Ok(body) => self.send_elsewhere(Ok(target), "reply", body).await,
            Err(e) => self.failure(&e),
        }
    }

    /// One thread of `target` as `mess_status` shows it, with its status.
    async fn view_elsewhere(
        &self,
        target: &Target,
        re: &str,
    ) -> Result<(Status, Value), CallToolResult> {
        let file = target.remote.thread(re).await.map_err(|e| failed(&e))?;
        let view = ThreadView::of(&file).map_err(|e| self.failure(&e))?;
        Ok((file.envelope.status, marked(view.to_value(), &target.name)))
    }
}

/// Passes on what `watch` hears to `tx` until its time is up, the wait ends (`tx` closed), or,
/// with `once`, after the first word. A stream that breaks is opened again after a pause,
/// resuming after the last event heard; an exchange that cannot be reached is reported and
/// the watcher ends.
async fn run_watch(mut watch: Watch, cursors: Cursors, tx: mpsc::Sender<Word>) {
    let word = |heard| Word {
        exchange: watch.name.clone(),
        heard,
    };
    loop {
        let now = tokio::time::Instant::now();
        if now >= watch.until {
            return;
        }
        let mut events = match watch.stream.take() {
            Some(s) => s,
            None => {
                let after = lock(&cursors).get(&watch.name).cloned();
                match watch
                    .remote
                    .events(after.as_deref(), watch.until - now)
                    .await
                {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(word(Heard::Unreachable(e.to_string()))).await;
                        return;
                    }
                }
            }
        };
        loop {
            let heard = tokio::select! {
                () = tx.closed() => return,
                () = tokio::time::sleep_until(watch.until) => return,
                event = events.next() => match event {
                    Ok(RemoteEvent::Thread { thread, status, updated, id }) => {
                        if let Some(id) = id {
                            lock(&cursors).insert(watch.name.clone(), id);
                        }
                        if watch.thread.as_ref().is_some_and(|t| *t != thread) {
                            continue;
                        }
                        Heard::Changed { thread, status, updated }
                    }
                    Ok(RemoteEvent::Lagged) => Heard::Lagged,
                    Err(_) => break,
                },
            };
            if tx.send(word(heard)).await.is_err() || watch.once {
                return;
            }
        }
        tokio::time::sleep(REOPEN_AFTER).await;
    }
}

/// Passes on the first change of a thread `who` is a party to on a home of this machine (its
/// change bus, fed by its file watcher) until `until` or until the wait ends.
async fn run_local_watch(
    mut changes: tokio::sync::broadcast::Receiver<crate::exchange::ThreadChange>,
    name: String,
    who: String,
    until: tokio::time::Instant,
    tx: mpsc::Sender<Word>,
) {
    use tokio::sync::broadcast::error::RecvError;
    let heard = loop {
        tokio::select! {
            () = tx.closed() => return,
            () = tokio::time::sleep_until(until) => return,
            change = changes.recv() => match change {
                Ok(c) if !c.is_routing() && crate::exchange::access::party(&who, &c.envelope) => {
                    break Heard::Changed {
                        thread: c.thread.as_str().to_owned(),
                        status: c.status.as_str().to_owned(),
                        updated: crate::protocol::time::format_timestamp(&c.updated),
                    };
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => break Heard::Lagged,
                Err(RecvError::Closed) => return,
            },
        }
    };
    let _ = tx
        .send(Word {
            exchange: name,
            heard,
        })
        .await;
}

/// An entry of `unreachable`: the exchange and why it did not answer.
fn unreachable_item(name: &str, error: String) -> Value {
    let mut m = Map::new();
    m.insert("exchange", Value::str(name));
    m.insert("error", Value::str(error));
    Value::Map(m)
}

/// Pause before an event stream that broke is opened again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

fn lock(cursors: &Cursors) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    match cursors.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The tool error for a remote exchange that failed or refused.
fn failed(e: &crate::remote::RemoteError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.to_string())])
}
