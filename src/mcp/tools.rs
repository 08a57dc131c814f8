//! The tools of contract section 7, each a thin translation to one exchange use case.

use rmcp::ErrorData as McpError;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::exchange::view::{self, ThreadView};
use crate::exchange::{Exchange, Sender};
use crate::mcp::MessMcp;
use crate::mcp::args::{
    AnswerArgs, CancelArgs, CapabilitiesArgs, DoArgs, MessArgs, ObserveArgs, ReplyArgs,
    RequestArgs, StatusArgs, either,
};
use crate::protocol::error::ProtocolError;
use crate::protocol::message::Message;
use crate::protocol::status::{State, StatusDetails};
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
    req
}

/// Submits one payload of `kind` as `who` and returns the exchange's answer.
fn send(ex: &Exchange, who: &str, kind: &str, body: Map) -> Result<Value, Error> {
    let message = Message::single(kind, body)?;
    Ok(ex.submit(message, &Sender::new(who, "mcp"))?.to_value())
}

/// `yes`/`no` (and true/false) as a boolean; empty as none.
fn yes_no(field: &str, text: &str) -> Result<Option<bool>, Error> {
    match text.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "yes" | "true" | "y" => Ok(Some(true)),
        "no" | "false" | "n" => Ok(Some(false)),
        other => {
            Err(ProtocolError::invalid(field, format!("expected yes or no, not {other:?}")).into())
        }
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

/// The status of one thread for its requestor: envelope, current status, response.
pub(crate) fn status_of(ex: &Exchange, who: &str, re: &str) -> Result<Value, Error> {
    let thread = ex.thread_for(re, who)?;
    Ok(ThreadView::of(&thread)?.to_value())
}

/// The open threads of `who` (pending and in progress), newest first.
pub(crate) fn open_threads(ex: &Exchange, who: &str) -> Result<Value, Error> {
    let list = ex.threads_for(who, &[State::Received, State::Executing])?;
    let mut out = Map::new();
    out.insert(
        "threads",
        Value::Seq(list.iter().map(view::thread_summary).collect()),
    );
    Ok(Value::Map(out))
}

#[tool_router(vis = "pub(crate)")]
impl MessMcp {
    #[tool(
        description = "Send a raw MESS message (YAML). Use it for several requests at once, dependencies (constraints.depends_on), attachments, or replies to suggestions. Returns the exchange's answer (an ack with the ref of each new request).",
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess(&self, Parameters(a): Parameters<MessArgs>) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let message = ex.parse_one(&a.message)?;
                Ok(ex.submit(message, &Sender::new(who, "mcp"))?.to_value())
            })
            .await)
    }

    #[tool(
        description = "Ask for an observation of the physical world (\"what's in the fridge?\"). Returns the request's ref at once; the answer comes later: use mess_wait, then mess_status.",
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_observe(
        &self,
        Parameters(a): Parameters<ObserveArgs>,
    ) -> Result<CallToolResult, McpError> {
        let args = RequestArgs {
            intent: a.intent,
            context: a.context,
            requires: Vec::new(),
            response_hint: a.response_hint,
            confirm_before: false,
            needed_by: a.needed_by,
            priority: a.priority,
        };
        Ok(self
            .call(move |ex, who| send(ex, who, "request", request_body(&args)))
            .await)
    }

    #[tool(
        description = "Ask for a physical action (\"vacuum the kitchen\"), optionally requiring capabilities and a confirmation before acting. Returns the request's ref at once; follow it with mess_wait and mess_status.",
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_do(&self, Parameters(a): Parameters<DoArgs>) -> Result<CallToolResult, McpError> {
        let args = RequestArgs {
            intent: a.intent,
            context: a.context,
            requires: a.requires,
            response_hint: Vec::new(),
            confirm_before: a.confirm_before,
            needed_by: a.needed_by,
            priority: a.priority,
        };
        Ok(self
            .call(move |ex, who| send(ex, who, "request", request_body(&args)))
            .await)
    }

    #[tool(
        description = "Same as mess_observe and mess_do, with all their fields (for clients written against the older mess_request tool).",
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_request(
        &self,
        Parameters(a): Parameters<RequestArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| send(ex, who, "request", request_body(&a)))
            .await)
    }

    #[tool(
        description = "Where a request stands: its status, the executor, and when finished the executor's response content; on needs_input the questions, on needs_confirmation the action and consequences. Without re: all your open requests.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn mess_status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
    ) -> Result<CallToolResult, McpError> {
        let re = either(&a.re, &a.r#ref);
        Ok(self
            .call(move |ex, who| {
                if re.is_empty() {
                    open_threads(ex, who)
                } else {
                    status_of(ex, who, &re)
                }
            })
            .await)
    }

    #[tool(
        description = "Answer an executor: `answers` for needs_input questions (by question id), `confirm` yes/no for needs_confirmation, `accept` yes/no for a suggestion. The status does not change; the executor sees the reply.",
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_reply(
        &self,
        Parameters(a): Parameters<ReplyArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let mut body = Map::new();
                body.insert("re", Value::str(needs_re(either(&a.re, &a.r#ref))?));
                if !a.answers.is_empty() {
                    let answers = serde_json::Value::Object(a.answers.clone());
                    let text = serde_json::to_string(&answers).unwrap_or_default();
                    body.insert(
                        "answers",
                        crate::protocol::yaml::parse_document(
                            &text,
                            &crate::protocol::yaml::Limits::DEFAULT,
                        )
                        .map_err(|e| ProtocolError::invalid("answers", e.message))?,
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
                send(ex, who, "reply", body)
            })
            .await)
    }

    #[tool(
        description = "Answer the open question of a needs_input request with one text (for clients written against the older mess_answer tool; with several questions open, use mess_reply).",
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn mess_answer(
        &self,
        Parameters(a): Parameters<AnswerArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let thread = ex.thread_for(a.r#ref.trim(), who)?;
                let view = ThreadView::of(&thread)?;
                let questions = match view.current.as_ref().map(|s| &s.details) {
                    Some(StatusDetails::NeedsInput { questions }) => questions.clone(),
                    _ => Vec::new(),
                };
                let field = match questions.as_slice() {
                    [only] => only.field.clone(),
                    [] => {
                        return Err(ProtocolError::invalid(
                            "ref",
                            format!("{} has no open question", a.r#ref.trim()),
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
                answers.insert(field, Value::str(&a.answer));
                let mut body = Map::new();
                body.insert("re", Value::str(thread.envelope.thread_ref.as_str()));
                body.insert("answers", Value::Map(answers));
                send(ex, who, "reply", body)
            })
            .await)
    }

    #[tool(
        description = "Cancel a request that is no longer needed (only its requestor can).",
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn mess_cancel(
        &self,
        Parameters(a): Parameters<CancelArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(self
            .call(move |ex, who| {
                let mut body = Map::new();
                body.insert("re", Value::str(needs_re(either(&a.re, &a.r#ref))?));
                if !a.reason.trim().is_empty() {
                    body.insert("reason", Value::str(a.reason.trim()));
                }
                send(ex, who, "cancel", body)
            })
            .await)
    }

    #[tool(
        description = "The capabilities executors offer (with descriptions and tags from the catalog, and who holds each), to choose `requires` for mess_do.",
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
                out.insert(
                    "capabilities",
                    view::capabilities(&Directory::load(ex.store()), &tags),
                );
                Ok(Value::Map(out))
            })
            .await)
    }
}
