//! The MCP tools (docs/reference/mcp.md), each a thin translation to one exchange use case.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router};

use crate::exchange::access::MailUse;
use crate::exchange::error::Error;
use crate::exchange::view::ThreadView;
use crate::exchange::{Exchange, Sender};
use crate::mcp::MessMcp;
use crate::mcp::args::{
    AnswerArgs, ApprovedArgs, CancelArgs, CapabilitiesArgs, DecideArgs, DoArgs, FetchArgs,
    MailFileArgs, MailListArgs, MailSendArgs, MessArgs, ObserveArgs, QueryArgs, ReplyArgs,
    RequestArgs, ReviewArgs, StatusArgs, WaitArgs, YesNo, either,
};
use crate::mcp::tasks::wants_task;
use crate::mcp::threads::{all_threads, open_threads, status_of, with_queue_position};
use crate::mcp::wait::{self, Heard, Here, Woke, settles};
use crate::mcp::{resources, schemas};
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Message;
use crate::protocol::status::StatusDetails;
use crate::protocol::value::{Map, Value};

fn strings(items: &[String]) -> Value {
    Value::Seq(items.iter().map(Value::str).collect())
}

/// The body of a request payload from the convenience tools' fields.
fn request_body(a: &RequestArgs) -> Map {
    let mut req = Map::new();
    req.insert("intent", Value::str(&a.intent));
    if !a.context.is_empty() {
        req.insert("context", strings(&a.context));
    }
    if !a.requires.is_empty() {
        req.insert("requires", strings(&a.requires));
    }
    if !a.response_hint.is_empty() {
        req.insert("response_hint", strings(&a.response_hint));
    }
    if a.confirm_before {
        req.insert("confirm_before", Value::Bool(true));
    }
    if !a.needed_by.trim().is_empty() {
        req.insert("needed_by", Value::str(a.needed_by.trim()));
    }
    if !a.priority.trim().is_empty() {
        req.insert("priority", Value::str(a.priority.trim()));
    }
    if !a.callback.trim().is_empty() {
        req.insert("callback", Value::str(a.callback.trim()));
    }
    let many = &a.many;
    if many.assignments > 0 {
        req.insert("assignments", Value::Int(i64::from(many.assignments)));
    }
    let json = |v: serde_json::Value| serde_json::from_value::<Value>(v).unwrap_or(Value::Null);
    if let Some(agree) = &many.agree {
        req.insert("agree", json(serde_json::Value::Object(agree.clone())));
    }
    if let Some(approval) = &many.approval {
        req.insert(
            "approval",
            json(serde_json::Value::Object(approval.clone())),
        );
    }
    if let Some(by) = &many.confirm_by {
        req.insert("confirm_by", json(serde_json::Value::Object(by.clone())));
    }
    if !many.escalate.is_empty() {
        req.insert(
            "escalate",
            json(serde_json::Value::Array(
                many.escalate
                    .iter()
                    .cloned()
                    .map(serde_json::Value::Object)
                    .collect(),
            )),
        );
    }
    req
}

/// Submits one payload of `kind` as `who` and returns the exchange's answer.
fn send(ex: &Exchange, who: &Sender, kind: &str, body: Map) -> Result<Value, Error> {
    let message = Message::single(kind, body)?;
    Ok(ex.intake().submit(message, who)?.to_value())
}

/// The body of `mess_reply`'s reply payload.
fn reply_body(ex: &Exchange, a: &ReplyArgs) -> Result<Map, Error> {
    let mut body = Map::new();
    body.insert("re", Value::str(needs_re(either(&a.re, &a.r#ref))?));
    if !a.answers.is_empty() {
        // Read straight from the JSON the client sent, under a message's limits.
        let limits = crate::protocol::yaml::Limits::json_message(ex.settings().max_message_bytes);
        body.insert(
            "answers",
            crate::protocol::yaml::value_from(
                serde_json::Value::Object(a.answers.clone()),
                &limits,
            )
            .map_err(|e| ProtocolError::invalid("answers", e.to_string()))?,
        );
    }
    if let Some(c) = yes_no("confirm", &a.confirm)? {
        body.insert("confirm", Value::Bool(c));
    }
    if let Some(c) = yes_no("accept", &a.accept)? {
        body.insert("accept", Value::Bool(c));
    }
    if !a.reason.trim().is_empty() {
        body.insert("reason", Value::str(a.reason.trim()));
    }
    Ok(body)
}

/// The reply that answers the one open question of the thread `view` shows (`thread_ref`)
/// with `answer` (`mess_answer`).
pub(crate) fn answer_body(
    view: &ThreadView,
    thread_ref: &str,
    re: &str,
    answer: &str,
) -> Result<Map, Error> {
    let questions = match view.current.as_ref().map(|s| &s.details) {
        Some(StatusDetails::NeedsInput { questions }) => questions.clone(),
        _ => Vec::new(),
    };
    let field = match questions.as_slice() {
        [only] => only.field.clone(),
        [] => {
            return Err(ProtocolError::invalid(
                "ref",
                format!("{} has no open question", re.trim()),
            )
            .into());
        }
        many => {
            return Err(ProtocolError::invalid(
                "answer",
                format!(
                    "{} questions are open ({}); answer them with mess_reply",
                    many.len(),
                    many.iter()
                        .map(|q| q.field.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .into());
        }
    };
    let mut answers = Map::new();
    answers.insert(field, Value::str(answer));
    let mut body = Map::new();
    body.insert("re", Value::str(thread_ref));
    body.insert("answers", Value::Map(answers));
    Ok(body)
}

/// A protocol boolean from a tool argument: JSON true/false, or the words yes/no/true/false;
/// absent, null or empty as none.
fn yes_no(field: &str, given: &YesNo) -> Result<Option<bool>, Error> {
    let text = match &given.0 {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::Bool(b) => return Ok(Some(*b)),
        serde_json::Value::String(s) => s.trim().to_ascii_lowercase(),
        other => other.to_string(),
    };
    match text.as_str() {
        "" => Ok(None),
        "yes" | "true" | "y" => Ok(Some(true)),
        "no" | "false" | "n" => Ok(Some(false)),
        other => Err(ProtocolError::invalid(
            field,
            format!("expected true or false (or yes or no), not {other}"),
        )
        .into()),
    }
}

fn needs_re(re: String) -> Result<String, Error> {
    if re.is_empty() {
        Err(
            ProtocolError::invalid("re", "name the request: its ref, your client id, or last")
                .into(),
        )
    } else {
        Ok(re)
    }
}

/// What `mess_status` takes as `re` for every thread of the caller (the reference design's "Request ID or
/// 'all'"); a client id `all` is therefore reached through its ref.
const ALL: &str = "all";

fn found_value(f: &crate::mail::Found, with_body: bool) -> Value {
    let l = &f.letter;
    let mut m = Map::new();
    m.insert("file", Value::str(&f.file));
    m.insert("mailbox", Value::str(&f.mailbox));
    m.insert("folder", Value::str(f.folder.as_str()));
    m.insert("from", Value::str(&l.from));
    m.insert("to", Value::str(&l.to));
    m.insert("type", Value::str(&l.kind));
    m.insert(
        "timestamp",
        Value::str(crate::protocol::time::format_timestamp(&l.timestamp)),
    );
    m.insert("priority", Value::str(&l.priority));
    m.insert("needs_response", Value::Bool(l.needs_response));
    m.insert("tags", Value::Seq(l.tags.iter().map(Value::str).collect()));
    m.insert_opt("thread_id", l.thread_id.as_deref().map(Value::str));
    m.insert_opt("in_reply_to", l.in_reply_to.as_deref().map(Value::str));
    m.insert_opt(
        "expires",
        l.expires
            .map(|t| Value::str(crate::protocol::time::format_timestamp(&t))),
    );
    m.insert_opt(
        "read_at",
        l.read_at
            .map(|t| Value::str(crate::protocol::time::format_timestamp(&t))),
    );
    if with_body {
        m.insert("body", Value::str(&l.body));
    }
    Value::Map(m)
}

#[tool_router(vis = "pub(crate)")]
impl MessMcp {
    #[tool(
        description = "Send a raw MESS message (YAML). Use it for several requests at once, dependencies (constraints.depends_on), attachments, or replies to suggestions. Returns the exchange's answer (an ack with the ref of each new request).",
        output_schema = schemas::message(),
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess(&self, Parameters(a): Parameters<MessArgs>) -> Result<CallToolResult, McpError> {
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(self.raw_elsewhere(target, a.message).await);
        }
        Ok(self
            .call(move |ex, who| {
                ex.intake().take_body(&a.message, false, |message| {
                    Ok(ex.intake().submit(message, who)?.to_value())
                })
            })
            .await)
    }

    #[tool(
        description = "Ask for an observation of the physical world (\"what's in the fridge?\"). Returns when complete: waits up to wait_s seconds (default 50, at most 120; 0 returns the ref at once) for the answer, sending progress meanwhile, and returns the ack with `thread` (the status, and the response once completed). If it is still open then (`timed_out`), continue with mess_wait and mess_status.",
        output_schema = schemas::request(),
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_observe(
        &self,
        Parameters(a): Parameters<ObserveArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = RequestArgs {
            intent: a.intent,
            context: a.context,
            requires: Vec::new(),
            response_hint: a.response_hint,
            confirm_before: false,
            needed_by: a.needed_by,
            priority: a.priority,
            exchange: a.exchange,
            callback: a.callback,
            many: crate::mcp::args::ManyArgs {
                assignments: a.assignments,
                agree: a.agree,
                ..Default::default()
            },
        };
        Ok(self.request_or_task(args, a.wait_s, ctx).await)
    }

    #[tool(
        description = "Ask for a physical action (\"vacuum the kitchen\"), optionally requiring capabilities and a confirmation before acting. Returns the request's ref at once; with wait_s (at most 120) it waits that long for the request to complete or need you (needs_input, needs_confirmation) and returns `thread` too. Otherwise follow it with mess_wait and mess_status.",
        output_schema = schemas::request(),
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_do(
        &self,
        Parameters(a): Parameters<DoArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = RequestArgs {
            intent: a.intent,
            context: a.context,
            requires: a.requires,
            response_hint: Vec::new(),
            confirm_before: a.confirm_before,
            needed_by: a.needed_by,
            priority: a.priority,
            exchange: a.exchange,
            callback: a.callback,
            many: a.many,
        };
        Ok(self.request_or_task(args, a.wait_s, ctx).await)
    }

    #[tool(
        description = "Same as mess_observe and mess_do, with all their fields (for clients written against the older mess_request tool).",
        output_schema = schemas::message(),
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_request(
        &self,
        Parameters(a): Parameters<RequestArgs>,
    ) -> Result<CallToolResult, McpError> {
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(self
                .send_elsewhere(target, "request", request_body(&a))
                .await);
        }
        Ok(self
            .call(move |ex, who| send(ex, who, "request", request_body(&a)))
            .await)
    }

    #[tool(
        description = "Where a request stands: its status, the executor, and when finished the executor's response content; on needs_input the questions, on needs_confirmation the action and consequences. Without re: all your open requests; with re \"all\": every request of yours, finished ones too.",
        output_schema = schemas::status(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn mess_status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
    ) -> Result<CallToolResult, McpError> {
        let re = either(&a.re, &a.r#ref);
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(self.status_elsewhere(target, re).await);
        }
        let listing = re.is_empty() || re == ALL;
        // A listing without `exchange` covers every exchange; `primary` names this one only.
        let everywhere = listing && a.exchange.trim().is_empty();
        let all = re == ALL;
        let result = self
            .call(move |ex, who| {
                if re.is_empty() {
                    open_threads(ex, &who.id)
                } else if re == ALL {
                    all_threads(ex, &who.id)
                } else {
                    status_of(ex, &who.id, &re)
                }
            })
            .await;
        if everywhere && result.is_error != Some(true) {
            return Ok(self.with_other_exchanges(result, all).await);
        }
        Ok(result)
    }

    #[tool(
        description = "Answer an executor: `answers` for needs_input questions (by question id), `confirm: true|false` for needs_confirmation, `accept: true|false` for a suggestion. The status does not change; the executor sees the reply.",
        output_schema = schemas::message(),
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_reply(
        &self,
        Parameters(a): Parameters<ReplyArgs>,
    ) -> Result<CallToolResult, McpError> {
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(match self.run(move |ex, _| reply_body(ex, &a)).await {
                Ok(body) => self.send_elsewhere(target, "reply", body).await,
                Err(failed) => failed,
            });
        }
        Ok(self
            .call(move |ex, who| send(ex, who, "reply", reply_body(ex, &a)?))
            .await)
    }

    #[tool(
        description = "Answer the open question of a needs_input request with one text (for clients written against the older mess_answer tool; with several questions open, use mess_reply).",
        output_schema = schemas::message(),
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_answer(
        &self,
        Parameters(a): Parameters<AnswerArgs>,
    ) -> Result<CallToolResult, McpError> {
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(self.answer_elsewhere(target, a.r#ref, a.answer).await);
        }
        Ok(self
            .call(move |ex, who| {
                let thread = ex.access().thread_for(a.r#ref.trim(), &who.id)?;
                let body = answer_body(
                    &ThreadView::of(&thread)?,
                    thread.envelope.thread_ref.as_str(),
                    &a.r#ref,
                    &a.answer,
                )?;
                send(ex, who, "reply", body)
            })
            .await)
    }

    #[tool(
        description = "Cancel a request that is no longer needed (only its requestor can): `re` is its ref, your client id or \"last\".",
        output_schema = schemas::message(),
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_cancel(
        &self,
        Parameters(a): Parameters<CancelArgs>,
    ) -> Result<CallToolResult, McpError> {
        let body = || -> Result<Map, Error> {
            let mut body = Map::new();
            body.insert("re", Value::str(needs_re(either(&a.re, &a.r#ref))?));
            if !a.reason.trim().is_empty() {
                body.insert("reason", Value::str(a.reason.trim()));
            }
            Ok(body)
        };
        let body = match body() {
            Ok(b) => b,
            Err(e) => return Ok(self.failure(&e)),
        };
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(self.send_elsewhere(target, "cancel", body).await);
        }
        Ok(self
            .call(move |ex, who| send(ex, who, "cancel", body))
            .await)
    }

    #[tool(
        description = "Review finished work (only its requestor can): `rating` 1-5, \"accept\" or \"reject\", `feedback` on what was wrong or right, and `request_redo: true` to have the same executor do completed or partial work again. The executor sees the review.",
        output_schema = schemas::message(),
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_review(
        &self,
        Parameters(a): Parameters<ReviewArgs>,
    ) -> Result<CallToolResult, McpError> {
        let body = || -> Result<Map, Error> {
            let mut body = Map::new();
            body.insert("re", Value::str(needs_re(either(&a.re, &a.r#ref))?));
            match &a.rating {
                None | Some(serde_json::Value::Null) => {}
                Some(serde_json::Value::Number(n)) => {
                    body.insert("rating", Value::Int(n.as_i64().unwrap_or(0)));
                }
                Some(serde_json::Value::String(s)) => body.insert("rating", Value::str(s.trim())),
                Some(other) => body.insert("rating", Value::str(other.to_string())),
            }
            if !a.feedback.trim().is_empty() {
                body.insert("feedback", Value::str(a.feedback.trim()));
            }
            if a.request_redo {
                body.insert("request_redo", Value::Bool(true));
            }
            Ok(body)
        };
        let body = match body() {
            Ok(b) => b,
            Err(e) => return Ok(self.failure(&e)),
        };
        if let Some(target) = self.elsewhere(&a.exchange) {
            return Ok(self.send_elsewhere(target, "review", body).await);
        }
        Ok(self
            .call(move |ex, who| send(ex, who, "review", body))
            .await)
    }

    #[tool(
        description = "Decide on a request that asks for your approval (executors named as its approvers), or confirm the step an executor asks to take on a request whose confirm_by names you: approve: true or false, with a reason (say why when you deny). One decision per person: a second is refused.",
        output_schema = schemas::message(),
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_decide(
        &self,
        Parameters(a): Parameters<DecideArgs>,
    ) -> Result<CallToolResult, McpError> {
        let re = match needs_re(either(&a.re, &a.r#ref)) {
            Ok(re) => re.to_owned(),
            Err(e) => return Ok(self.failure(&e)),
        };
        let reason = Some(a.reason.trim().to_owned()).filter(|r| !r.is_empty());
        let body = crate::exchange::hands::decision_body(&re, a.approve, reason);
        Ok(self
            .call(move |ex, who| send(ex, who, "response", body))
            .await)
    }

    #[tool(
        description = "Whether an approval you asked for covers an action: its state (pending, approved, denied, expired), every decision, and once approved its scope (intent, parameters digest, amount, uses, valid window). Name the action (intent, parameters, amount) to get covers: true only within that scope; use: true also uses it once.",
        output_schema = schemas::message(),
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn mess_approved(
        &self,
        Parameters(a): Parameters<ApprovedArgs>,
    ) -> Result<CallToolResult, McpError> {
        let re = match needs_re(either(&a.re, &a.r#ref)) {
            Ok(re) => re.to_owned(),
            Err(e) => return Ok(self.failure(&e)),
        };
        let parameters = match a.parameters {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match serde_json::from_value::<Value>(v) {
                Ok(v) => Some(v),
                Err(e) => {
                    return Ok(self.failure(&Error::from(ProtocolError::invalid(
                        "parameters",
                        e.to_string(),
                    ))));
                }
            },
        };
        let action = crate::exchange::hands::Action {
            intent: Some(a.intent.trim().to_owned()).filter(|i| !i.is_empty()),
            parameters,
            amount: a.amount,
        };
        let use_it = a.use_it;
        Ok(self
            .call(move |ex, who| {
                let view = ex.approvals().check(&re, &who.id, &action, use_it)?;
                Ok(view.to_value())
            })
            .await)
    }

    #[tool(
        description = "The capabilities executors offer (with descriptions and tags from the catalog, and who holds each), to choose `requires` for mess_do.",
        output_schema = schemas::capabilities(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn mess_capabilities(
        &self,
        Parameters(a): Parameters<CapabilitiesArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, _who| {
                let tags: Vec<String> = Some(a.tag.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .into_iter()
                    .collect();
                let mut out = Map::new();
                out.insert("capabilities", {
                    let dir = ex.directory();
                    crate::protocol::answer::capabilities(&dir.catalog, &dir.executors, &tags)
                });
                Ok(Value::Map(out))
            })
            .await)
    }

    #[tool(
        description = "Read-only SQL over all requests and executors (DuckDB). Views: threads, messages, thread_history, executors, capabilities, pending_by_capability, executor_availability, executor_stats; macros: route_request(ref), match_capabilities(required, offered). Returns at most `limit` rows and says when it cut (`truncated`).",
        output_schema = schemas::query(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mess_query(
        &self,
        Parameters(a): Parameters<QueryArgs>,
    ) -> Result<CallToolResult, McpError> {
        let format = a.format.trim().to_ascii_lowercase();
        if !matches!(format.as_str(), "markdown" | "json" | "csv") {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "format: {format:?} is not one of markdown, json, csv"
            ))]));
        }
        let limits = crate::db::query::QueryLimits {
            max_rows: a.limit.clamp(1, 1000) as usize,
            ..self.exchange.sql().query_limits()
        };
        let ex = self.exchange.clone();
        let sql = a.sql;
        // A principal sees only its threads; the operator sees the home.
        let viewer = crate::exchange::access::query_viewer(&self.who).map(str::to_owned);
        let outcome =
            tokio::task::spawn_blocking(move || ex.sql().query(&sql, &limits, viewer.as_deref()))
                .await;
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Ok(self.failure(&e)),
            Err(e) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "the query failed unexpectedly: {e}"
                ))]));
            }
        };
        let rows: Vec<serde_json::Value> = result
            .json_rows
            .iter()
            .map(|r| serde_json::from_str(r).unwrap_or(serde_json::Value::Null))
            .collect();
        let mut structured = serde_json::json!({
            "columns": result.columns,
            "rows": rows,
            "row_count": result.json_rows.len(),
            "truncated": result.truncated,
        });
        if let Some(w) = &result.warning {
            structured["warning"] = serde_json::Value::String(w.clone());
        }
        let mut text = match format.as_str() {
            "json" => result.to_json(),
            "csv" => result.to_csv(),
            _ => markdown(&result),
        };
        if let Some(w) = &result.warning {
            text.push_str(&format!("\n(truncated: {w})"));
        }
        let mut answer = CallToolResult::structured(structured);
        answer.content = vec![ContentBlock::text(text)];
        Ok(answer)
    }

    #[tool(
        description = "Read a resource as a tool: mess://pending (your open requests), mess://history, mess://request/{ref}, thread://{ref} (the whole thread file), mess://help (this server's guide).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn mess_fetch(
        &self,
        Parameters(a): Parameters<FetchArgs>,
    ) -> Result<CallToolResult, McpError> {
        if let Some(listing) = self.listing_everywhere_of(&a.uri).await {
            return Ok(match listing {
                Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
            });
        }
        let ex = self.exchange.clone();
        let who = self.who.id.clone();
        let uri = a.uri.trim().to_owned();
        let outcome =
            tokio::task::spawn_blocking(move || resources::read(&ex, &who, &uri).map(|r| (r, uri)))
                .await;
        Ok(match outcome {
            Ok(Ok((Some((text, _)), _))) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Ok(Ok((None, uri))) => CallToolResult::error(vec![ContentBlock::text(format!(
                "no resource {uri:?}: use mess://pending, mess://history, mess://request/{{ref}}, thread://{{ref}} or mess://help"
            ))]),
            Ok(Err(e)) => self.failure(&e),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "failed unexpectedly: {e}"
            ))]),
        })
    }

    #[tool(
        description = "Leave a message in an agent mailbox (.mail/<to>/): a session name, a tag several agents share, or __broadcast (every session). For handoffs, reports and questions to agents that may be offline; it persists until read, or until `expires`.",
        output_schema = schemas::mail_sent(),
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn mess_mail_send(
        &self,
        Parameters(a): Parameters<MailSendArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let or = |s: &str, d: &str| {
                    if s.trim().is_empty() {
                        d.to_owned()
                    } else {
                        s.trim().to_owned()
                    }
                };
                let opt = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
                let letter = crate::mail::Letter {
                    from: who.id.clone(),
                    to: a.to.trim().to_owned(),
                    kind: or(&a.kind, "status"),
                    timestamp: ex.now(),
                    needs_response: a.needs_response,
                    priority: or(&a.priority, "normal"),
                    tags: a.tags.clone(),
                    in_reply_to: opt(&a.in_reply_to),
                    thread_id: opt(&a.thread_id),
                    expires: crate::mail::parse_expires(&a.expires, ex.now())?,
                    read_at: None,
                    body: a.body.clone(),
                };
                let file = ex.access().send_mail(who, &letter)?;
                let mut m = Map::new();
                m.insert("mailbox", Value::str(&letter.to));
                m.insert("file", Value::str(file));
                Ok(Value::Map(m))
            })
            .await)
    }

    #[tool(
        description = "List the messages of a mailbox (yours by default; also __broadcast and the tag mailboxes your registration names), oldest first: file, from, type, priority, timestamp. In __broadcast, unread means not yet read by you. Read one with mess_mail_read.",
        output_schema = schemas::mail_list(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn mess_mail_list(
        &self,
        Parameters(a): Parameters<MailListArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let mailbox = ex.access().mailbox_for(who, &a.mailbox, MailUse::Read)?;
                let folder = crate::mail::Folder::parse(a.folder.trim())?;
                let (found, problems) =
                    ex.mail().list(&mailbox, folder, Some(&who.id), ex.now())?;
                let mut m = Map::new();
                m.insert(
                    "messages",
                    Value::Seq(found.iter().map(|f| found_value(f, false)).collect()),
                );
                if !problems.is_empty() {
                    m.insert(
                        "unreadable",
                        Value::Seq(problems.iter().map(Value::str).collect()),
                    );
                }
                Ok(Value::Map(m))
            })
            .await)
    }

    #[tool(
        description = "Read one message. With mark_read: also mark it read. In your own or a tag mailbox that claims it (it moves to read/; of several readers exactly one gets it, the others are told it was claimed); in __broadcast it is marked read for you alone, every other session still sees it unread.",
        output_schema = schemas::mail_message(),
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn mess_mail_read(
        &self,
        Parameters(a): Parameters<MailFileArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let use_ = if a.mark_read {
                    MailUse::Claim
                } else {
                    MailUse::Read
                };
                let mailbox = ex.access().mailbox_for(who, &a.mailbox, use_)?;
                let found = if a.mark_read {
                    ex.mail()
                        .mark_read(&mailbox, a.file.trim(), &who.id, ex.now())?
                } else {
                    ex.mail()
                        .read(&mailbox, a.file.trim(), Some(&who.id), ex.now())?
                };
                Ok(found_value(&found, true))
            })
            .await)
    }

    #[tool(
        description = "Move a message (read or unread) to the mailbox's archive/.",
        output_schema = schemas::mail_message(),
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn mess_mail_archive(
        &self,
        Parameters(a): Parameters<MailFileArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let mailbox = ex.access().mailbox_for(who, &a.mailbox, MailUse::Archive)?;
                ex.mail().archive(&mailbox, a.file.trim())?;
                Ok(found_value(
                    &ex.mail()
                        .read(&mailbox, a.file.trim(), Some(&who.id), ex.now())?,
                    false,
                ))
            })
            .await)
    }

    #[tool(
        description = "Wait until a request changes (or, without re, any of yours on every exchange), at most timeout_s seconds (default and most 50). Returns {updated: [{ref, status, updated, exchange}], waited_s, timed_out}; on timed_out just call it again. Then read the result with mess_status (with the same exchange).",
        output_schema = schemas::wait(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn mess_wait(
        &self,
        Parameters(a): Parameters<WaitArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        // Subscribed before anything is read, so a change in between is not missed.
        let mut changes = self.exchange.changes().subscribe();
        let re = either(&a.re, &a.r#ref);
        let limit = Duration::from_secs(u64::from(a.timeout_s.clamp(1, wait::MOST_WAIT_S)));
        let mut watchers = self.watchers();
        // Which exchanges answer: a named remote one alone; without `exchange` and `re`, every
        // one; otherwise this one. Items are marked with their exchange when there are others.
        let elsewhere = self.elsewhere(&a.exchange);
        let everywhere = elsewhere.is_none() && re.is_empty() && a.exchange.trim().is_empty();
        let mark = self.has_others();
        let target = match elsewhere {
            Some(target) => {
                if let Err(failed) = self
                    .watch_elsewhere(&mut watchers, target, &re, limit)
                    .await
                {
                    return Ok(failed);
                }
                None
            }
            None if re.is_empty() => {
                if everywhere {
                    self.watch_everywhere(&mut watchers, limit);
                }
                None
            }
            None => match self
                .run(move |ex, who| ex.access().thread_for(&re, &who.id))
                .await
            {
                Ok(t) => Some(t.envelope.thread_ref),
                Err(failed) => return Ok(failed),
            },
        };
        let here = match (&target, self.elsewhere(&a.exchange).is_some()) {
            (_, true) => Here::Nothing,
            (Some(t), false) => Here::Thread(t),
            (None, false) => Here::Any,
        };
        let mut waiting = self.waiting(limit, &ctx);
        let mut updated = Vec::new();
        let mut unreachable = Vec::new();
        let timed_out = loop {
            match self
                .next_change(
                    &mut waiting,
                    &mut changes,
                    here,
                    Some(&mut watchers.rx),
                    &ctx,
                )
                .await
            {
                Woke::Change(c) => {
                    let mut item = serde_json::json!({
                        "ref": c.thread.as_str(),
                        "status": c.status.as_str(),
                        "updated": crate::protocol::time::format_timestamp(&c.updated),
                    });
                    if mark {
                        item["exchange"] = "primary".into();
                    }
                    updated.push(item);
                    break false;
                }
                Woke::Elsewhere(word) => match word.heard {
                    Heard::Changed {
                        thread,
                        status,
                        updated: at,
                    } => {
                        updated.push(serde_json::json!({
                            "ref": thread, "status": status, "updated": at,
                            "exchange": word.exchange,
                        }));
                        break false;
                    }
                    Heard::Lagged => break false,
                    // Waiting on that exchange alone: its failure is the answer.
                    Heard::Unreachable(why) if matches!(here, Here::Nothing) => {
                        return Ok(CallToolResult::error(vec![ContentBlock::text(why)]));
                    }
                    Heard::Unreachable(why) => unreachable.push(serde_json::json!({
                        "exchange": word.exchange, "error": why,
                    })),
                },
                // Fell behind: something changed; the caller re-reads.
                Woke::Lagged => break false,
                Woke::Ended => break true,
            }
        };
        let mut structured = serde_json::json!({
            "updated": updated,
            "waited_s": waiting.waited_s(),
            "timed_out": timed_out,
        });
        if !unreachable.is_empty() {
            structured["unreachable"] = unreachable.into();
        }
        let text = if timed_out {
            format!(
                "nothing changed in {} s; call mess_wait again to keep waiting",
                waiting.waited_s()
            )
        } else if updated.is_empty() {
            "something changed; mess_status shows the details".to_owned()
        } else {
            let list: Vec<String> = updated
                .iter()
                .map(|u| {
                    format!(
                        "{} is now {}",
                        u["ref"].as_str().unwrap_or("?"),
                        u["status"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            format!("{}; mess_status shows the details", list.join(", "))
        };
        let mut answer = CallToolResult::structured(structured);
        answer.content = vec![ContentBlock::text(text)];
        Ok(answer)
    }
}

/// The ref the exchange's answer acknowledges (`MESS: [ack: {ref}]`).
fn acked_ref(answer: &Value) -> Option<ThreadRef> {
    answer
        .as_map()?
        .get("MESS")?
        .as_seq()?
        .iter()
        .find_map(|p| p.as_map()?.get("ack")?.as_map()?.get("ref")?.scalar_text())
        .and_then(|r| ThreadRef::parse(&r).ok())
}

impl MessMcp {
    /// A request on this exchange that would wait (`wait_s` above zero), for a client that
    /// declared MCP Tasks, answers with the task of its thread at once instead; otherwise
    /// [`MessMcp::request_and_wait`]. A call that answers at once anyway stays a plain result,
    /// as clients that declare tasks but call a tool plainly expect.
    async fn request_or_task(
        &self,
        args: RequestArgs,
        wait_s: u32,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        if wait_s > 0 && wants_task(&ctx) && self.elsewhere(&args.exchange).is_none() {
            let created = self.request_and_wait(args, 0, ctx).await;
            return self.as_task(created).await;
        }
        self.request_and_wait(args, wait_s, ctx).await.into()
    }

    /// Creates the request of `args`; with `wait_s` above zero, waits (at most
    /// [`wait::MOST_REQUEST_WAIT_S`]) until it settles ([`settles`]) and answers with the ack
    /// plus `thread` (its status view), `waited_s` and `timed_out`.
    async fn request_and_wait(
        &self,
        args: RequestArgs,
        wait_s: u32,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        if let Some(target) = self.elsewhere(&args.exchange) {
            return self
                .request_elsewhere(target, request_body(&args), wait_s, ctx)
                .await;
        }
        let create =
            move |ex: &Exchange, who: &Sender| send(ex, who, "request", request_body(&args));
        if wait_s == 0 {
            return self.call(create).await;
        }
        // Subscribed before the request exists, so no change to it is missed.
        let mut changes = self.exchange.changes().subscribe();
        let ack = match self.run(create).await {
            Ok(ack) => ack,
            Err(failed) => return failed,
        };
        let Some(thread) = acked_ref(&ack) else {
            return super::answer(&ack);
        };
        let limit = Duration::from_secs(u64::from(wait_s.min(wait::MOST_REQUEST_WAIT_S)));
        let mut waiting = self.waiting(limit, &ctx);
        loop {
            match self
                .next_change(
                    &mut waiting,
                    &mut changes,
                    Here::Thread(&thread),
                    None,
                    &ctx,
                )
                .await
            {
                Woke::Change(c) if settles(c.status) => break,
                Woke::Change(_) => {}
                // Missed changes: the status read below tells whether to go on.
                Woke::Lagged => {
                    let r = thread.clone();
                    let now = self
                        .run(move |ex, who| {
                            Ok(ex.access().thread_for(r.as_str(), &who.id)?.envelope.status)
                        })
                        .await;
                    if now.is_ok_and(settles) {
                        break;
                    }
                }
                Woke::Ended | Woke::Elsewhere(_) => break,
            }
        }
        let r = thread.clone();
        let view = self
            .run(move |ex, who| {
                let file = ex.access().thread_for(r.as_str(), &who.id)?;
                let view = ThreadView::of(&file)?.to_value();
                Ok((
                    file.envelope.status,
                    with_queue_position(ex, &file.envelope, view),
                ))
            })
            .await;
        let (status, view) = match view {
            Ok(v) => v,
            Err(failed) => return failed,
        };
        let mut out = ack.as_map().cloned().unwrap_or_default();
        out.insert("thread", view);
        out.insert("waited_s", Value::Int(waiting.waited_s() as i64));
        out.insert("timed_out", Value::Bool(!settles(status)));
        self.noted(super::answer(&Value::Map(out))).await
    }
}

/// A query result as a markdown table (pipes and line breaks in cells escaped).
fn markdown(result: &crate::db::query::QueryResult) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = format!(
        "| {} |\n|{}|\n",
        result
            .columns
            .iter()
            .map(|c| cell(c))
            .collect::<Vec<_>>()
            .join(" | "),
        vec![" --- "; result.columns.len()].join("|")
    );
    for row in &result.rows {
        out.push_str(&format!(
            "| {} |\n",
            row.iter()
                .map(|c| c.as_deref().map_or("NULL".to_owned(), cell))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    out
}
