//! Tools acting on another exchange (`exchange: NAME`, a remote entry of `exchanges:`): the
//! message a tool builds goes to that exchange's HTTP API with its key, and every answer says
//! which exchange it came from, so refs stay unambiguous across exchanges.

use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;

use crate::exchange::view::{self, ThreadView};
use crate::mcp::wait::{self, settles};
use crate::mcp::{MessMcp, answer};
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status};
use crate::protocol::value::{Map, Value};
use crate::remote::Remote;

/// A remote exchange a tool call names: its name in `exchanges:` and its client.
pub(crate) struct Target {
    name: String,
    remote: Remote,
}

/// How often a wait on a remote exchange reads the thread again.
const POLL_EVERY: Duration = Duration::from_secs(1);

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
        let messages = match self.run(move |ex, _| ex.parse_text(&text)).await {
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

    /// `mess_observe` / `mess_do` on `target`: creates the request, then with `wait_s` reads
    /// it every second until it settles or the wait ends.
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
        let limit = Duration::from_secs(u64::from(wait_s.min(wait::MOST_REQUEST_WAIT_S)));
        let started = Instant::now();
        let (status, view) = loop {
            let (status, view) = match self.view_elsewhere(&target, &thread).await {
                Ok(v) => v,
                Err(failed) => return failed,
            };
            if settles(status) || started.elapsed() >= limit || ctx.ct.is_cancelled() {
                break (status, view);
            }
            tokio::time::sleep(POLL_EVERY.min(limit.saturating_sub(started.elapsed()))).await;
        };
        let mut out = ack.as_map().cloned().unwrap_or_default();
        out.insert("thread", view);
        out.insert("waited_s", Value::Int(started.elapsed().as_secs() as i64));
        out.insert("timed_out", Value::Bool(!settles(status)));
        answer(&Value::Map(out))
    }

    /// `mess_status`'s listing of this exchange (`local`) with the threads of every remote
    /// exchange appended, each marked; an exchange that does not answer is named under
    /// `unreachable` instead of failing the listing.
    pub(crate) async fn with_other_exchanges(
        &self,
        local: CallToolResult,
        all: bool,
    ) -> CallToolResult {
        if self.remotes.is_empty() {
            return local;
        }
        let mut out = match local
            .structured_content
            .as_ref()
            .and_then(|v| serde_json::from_value::<Value>(v.clone()).ok())
        {
            Some(Value::Map(m)) => m,
            _ => return local,
        };
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
        for (name, remote) in self.remotes.iter() {
            match remote.threads(states, LIST_LIMIT).await {
                Ok(list) => {
                    threads.extend(list.iter().map(|e| marked(view::thread_summary(e), name)))
                }
                Err(e) => {
                    let mut m = Map::new();
                    m.insert("exchange", Value::str(name));
                    m.insert("error", Value::str(e.to_string()));
                    unreachable.push(Value::Map(m));
                }
            }
        }
        out.insert("threads", Value::Seq(threads));
        if !unreachable.is_empty() {
            out.insert("unreachable", Value::Seq(unreachable));
        }
        answer(&Value::Map(out))
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

/// `value` with `exchange: name` (a mapping gains the key; anything else is wrapped).
fn marked(value: Value, name: &str) -> Value {
    match value {
        Value::Map(mut m) => {
            m.insert("exchange", Value::str(name));
            Value::Map(m)
        }
        other => {
            let mut m = Map::new();
            m.insert("exchange", Value::str(name));
            m.insert("result", other);
            Value::Map(m)
        }
    }
}

/// The tool error for a remote exchange that failed or refused.
fn failed(e: &crate::remote::RemoteError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.to_string())])
}
