//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension, as rmcp implements it): for a
//! client that declares the extension, `mess`, `mess_observe` and `mess_do` answer with a task
//! instead of waiting, and the task's id is the ref of the thread the call created. `tasks/get`,
//! `tasks/update` and `tasks/cancel` are answered from the thread file, so a task outlives the
//! server process and any session, over stdio and `/mcp` alike. A client that does not know
//! tasks keeps the plain tool results.

use std::collections::BTreeMap;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, InputRequest,
    InputResponses, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;

use crate::exchange::error::ErrorKind;
use crate::exchange::view::ThreadView;
use crate::mcp::{MessMcp, answer};
use crate::protocol::envelope::Envelope;
use crate::protocol::message::Message;
use crate::protocol::status::{Status, StatusDetails};
use crate::protocol::time::format_timestamp;
use crate::protocol::value::{Map, Value};

/// How often clients are asked to poll `tasks/get`, in milliseconds.
const POLL_MS: u64 = 2000;

/// The key of the input request a `needs_input` task asks for (the answers, by question).
const ANSWERS: &str = "answers";

/// The key of the input request a `needs_confirmation` task asks for (`confirm`).
const CONFIRM: &str = "confirm";

/// Whether the client of this call declared the tasks extension.
pub(crate) fn wants_task(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

impl MessMcp {
    /// A tool's answer as a task when it created exactly one request on this exchange (the
    /// task is that thread); any other answer (an error, several requests) stays as it is.
    pub(crate) async fn as_task(&self, created: CallToolResult) -> CallToolResponse {
        if created.is_error == Some(true) {
            return created.into();
        }
        let refs: Vec<String> = created
            .structured_content
            .as_ref()
            .and_then(|v| v.get("MESS"))
            .and_then(|v| v.as_array())
            .map(|ps| {
                ps.iter()
                    .filter_map(|p| p.get("ack")?.get("ref")?.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let [thread] = refs.as_slice() else {
            return created.into();
        };
        let r = thread.clone();
        match self
            .run(move |ex, who| Ok(ex.access().thread_for(&r, &who.id)?.envelope))
            .await
        {
            Ok(env) => CreateTaskResult::new(task_of(&env, status_of(env.status))).into(),
            Err(_) => created.into(),
        }
    }

    /// `tasks/get`: the thread as a task, with the tool result once it is over and the
    /// questions or confirmation while it waits for the agent.
    pub(crate) async fn task_get(&self, id: String) -> Result<GetTaskResult, McpError> {
        let (env, view) = self.task_thread(&id).await?;
        let status = status_of(env.status);
        let payload = match status {
            TaskStatus::Completed => TaskPayload::Completed {
                result: object(&answer(&view.to_value())),
            },
            TaskStatus::Failed => {
                let mut error = serde_json::Map::new();
                error.insert("code".into(), (-32000).into());
                error.insert(
                    "message".into(),
                    format!("the request ended {}{}", env.status, reason(&view)).into(),
                );
                error.insert(
                    "data".into(),
                    serde_json::to_value(view.to_value()).unwrap_or_default(),
                );
                TaskPayload::Failed { error }
            }
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            TaskStatus::InputRequired => TaskPayload::InputRequired {
                input_requests: input_requests(&view),
            },
            _ => TaskPayload::Working,
        };
        Ok(GetTaskResult::new(DetailedTask::new(
            task_of(&env, status),
            payload,
        )))
    }

    /// `tasks/update`: the agent's answers (`answers`, by question field) or confirmation
    /// (`confirm`), sent as its reply in the thread.
    pub(crate) async fn task_update(
        &self,
        id: String,
        responses: InputResponses,
    ) -> Result<(), McpError> {
        let (env, _) = self.task_thread(&id).await?;
        let mut body = Map::new();
        body.insert("re", Value::str(env.thread_ref.as_str()));
        if let Some(r) = responses.get(ANSWERS) {
            let (accepted, content) = elicited(r);
            if !accepted {
                return Ok(());
            }
            let limits = crate::protocol::yaml::Limits::json_message(
                self.exchange.settings().max_message_bytes,
            );
            let answers =
                crate::protocol::yaml::value_from(serde_json::Value::Object(content), &limits)
                    .map_err(|e| McpError::invalid_params(format!("answers: {e}"), None))?;
            body.insert("answers", answers);
        } else if let Some(r) = responses.get(CONFIRM) {
            let (accepted, content) = elicited(r);
            let yes = accepted
                && content
                    .get(CONFIRM)
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(true);
            body.insert("confirm", Value::Bool(yes));
        } else {
            return Err(McpError::invalid_params(
                format!("tasks/update: answer the input requests {ANSWERS:?} or {CONFIRM:?}"),
                None,
            ));
        }
        self.task_send("reply", body).await
    }

    /// `tasks/cancel`: cancels the thread (a thread already over stays as it is).
    pub(crate) async fn task_cancel(&self, id: String) -> Result<(), McpError> {
        let (env, _) = self.task_thread(&id).await?;
        if env.status.is_terminal() {
            return Ok(());
        }
        let mut body = Map::new();
        body.insert("re", Value::str(env.thread_ref.as_str()));
        body.insert("reason", Value::str("cancelled by the agent's MCP client"));
        self.task_send("cancel", body).await
    }

    /// The envelope and view of the thread task `id` names, when the caller may see it; an
    /// unknown task otherwise.
    async fn task_thread(&self, id: &str) -> Result<(Envelope, ThreadView), McpError> {
        let r = id.trim().to_owned();
        let unknown = || McpError::invalid_params(format!("unknown task: {id}"), None);
        // Only refs name tasks: a client id or `last` would make one task id mean two things.
        if crate::protocol::ids::ThreadRef::parse(&r).is_err() {
            return Err(unknown());
        }
        let ex = self.exchange.clone();
        let who = self.who.id.clone();
        let read = tokio::task::spawn_blocking(move || {
            let file = ex.access().thread_for(&r, &who)?;
            Ok::<_, crate::exchange::error::Error>((file.envelope.clone(), ThreadView::of(&file)?))
        })
        .await;
        match read {
            Ok(Ok((env, view))) if env.thread_ref.as_str() == id.trim() => Ok((env, view)),
            Ok(Err(e)) if e.kind() != ErrorKind::NotFound => Err(McpError::internal_error(
                self.exchange.public_message(&e),
                None,
            )),
            _ => Err(unknown()),
        }
    }

    async fn task_send(&self, kind: &'static str, body: Map) -> Result<(), McpError> {
        let outcome = self
            .run(move |ex, who| {
                let message = Message::single(kind, body)?;
                ex.intake().submit(message, who)
            })
            .await;
        match outcome {
            Ok(_) => Ok(()),
            Err(failed) => Err(McpError::invalid_params(crate::mcp::text_of(&failed), None)),
        }
    }
}

/// The task status of a thread in `status`.
fn status_of(status: Status) -> TaskStatus {
    match status {
        Status::Completed | Status::Partial => TaskStatus::Completed,
        Status::Cancelled => TaskStatus::Cancelled,
        Status::NeedsInput | Status::NeedsConfirmation => TaskStatus::InputRequired,
        s if s.is_terminal() => TaskStatus::Failed,
        _ => TaskStatus::Working,
    }
}

/// The task of the thread of `env`.
fn task_of(env: &Envelope, status: TaskStatus) -> Task {
    let message = match &env.executor {
        Some(executor) => format!("{} ({executor})", env.status),
        None => env.status.to_string(),
    };
    Task::new(
        env.thread_ref.as_str().to_owned(),
        status,
        format_timestamp(&env.created),
        format_timestamp(&env.updated),
    )
    .with_status_message(message)
    .with_poll_interval_ms(POLL_MS)
}

/// `: why` when the last status says why it ended.
fn reason(view: &ThreadView) -> String {
    let Some(current) = &view.current else {
        return String::new();
    };
    match (&current.details, &current.message) {
        (StatusDetails::Failed { reason, .. }, _) => format!(": {}", text(reason)),
        (StatusDetails::Declined { reason }, _) => format!(": {}", text(reason)),
        (_, Some(m)) => format!(": {m}"),
        _ => String::new(),
    }
}

fn text(v: &Value) -> String {
    v.scalar_text()
        .unwrap_or_else(|| crate::protocol::emit::to_yaml(v).trim().to_owned())
}

/// What a waiting thread asks the agent, as elicitation requests: its questions (one text
/// field each) or its confirmation (one yes/no field).
fn input_requests(view: &ThreadView) -> BTreeMap<String, InputRequest> {
    let mut out = BTreeMap::new();
    let Some(current) = &view.current else {
        return out;
    };
    let (key, message, schema) = match &current.details {
        StatusDetails::NeedsInput { questions } => {
            let mut properties = serde_json::Map::new();
            for q in questions {
                properties.insert(
                    q.field.clone(),
                    serde_json::json!({"type": "string", "description": q.question}),
                );
            }
            let required: Vec<&str> = questions.iter().map(|q| q.field.as_str()).collect();
            let asked: Vec<&str> = questions.iter().map(|q| q.question.as_str()).collect();
            (
                ANSWERS,
                asked.join("\n"),
                serde_json::json!({"type": "object", "properties": properties, "required": required}),
            )
        }
        StatusDetails::NeedsConfirmation {
            action,
            consequences,
            ..
        } => (
            CONFIRM,
            match consequences {
                Some(c) => format!("Confirm: {action} ({c})"),
                None => format!("Confirm: {action}"),
            },
            serde_json::json!({"type": "object", "properties": {
                CONFIRM: {"type": "boolean", "description": "go ahead"}
            }, "required": [CONFIRM]}),
        ),
        _ => return out,
    };
    let request = serde_json::json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    });
    match serde_json::from_value::<InputRequest>(request) {
        Ok(r) => {
            out.insert(key.to_owned(), r);
        }
        Err(e) => tracing::warn!(error = %e, "an input request could not be built"),
    }
    out
}

/// An elicitation result's verdict and content (`{action, content}`); a bare object counts
/// as accepted content.
fn elicited(response: &serde_json::Value) -> (bool, serde_json::Map<String, serde_json::Value>) {
    let content = response
        .get("content")
        .and_then(serde_json::Value::as_object)
        .cloned();
    match response.get("action").and_then(serde_json::Value::as_str) {
        Some(action) => (action == "accept", content.unwrap_or_default()),
        None => (true, response.as_object().cloned().unwrap_or_default()),
    }
}

/// A tool result as the JSON object a completed task carries.
fn object(result: &CallToolResult) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}
