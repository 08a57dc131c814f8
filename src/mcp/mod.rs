//! The MCP server (docs/reference/mcp.md): the exchange's tools and resources for agents, over
//! stdio (`mess mcp`) and streamable HTTP (`/mcp` in `mess serve`). A translator like `http`:
//! it decodes tool arguments, calls the exchange on a blocking thread, and answers with YAML
//! text plus the same data as structured content; failures the model can fix are tool errors.

pub(crate) mod args;
mod local_exchanges;
mod remote_exchanges;
pub(crate) use local_exchanges::Local;
mod resources;
mod schemas;
mod subscribe;
mod tasks;
mod threads;
mod tools;
mod wait;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::exchange::error::Error;
use crate::exchange::{Exchange, Sender};
use crate::protocol::emit;
use crate::protocol::value::Value;

/// The MCP server for one principal (the agent the tools act as).
#[derive(Clone)]
pub(crate) struct MessMcp {
    exchange: Arc<Exchange>,
    /// Legacy resource subscriptions of this session, by URI.
    subscriptions: Arc<subscribe::Subscriptions>,
    /// Who the tools act as (with the key's role over HTTP).
    who: Sender,
    /// How often `mess_wait` tells the client it is still waiting.
    heartbeat: std::time::Duration,
    /// Other exchanges tools may name (`exchange:`), by name: the remote entries of
    /// `exchanges:` in config.yaml.
    remotes: Arc<Vec<(String, crate::remote::Remote)>>,
    /// Other homes of this machine tools may name: the local entries of `exchanges:`.
    locals: Arc<Vec<local_exchanges::Local>>,
    /// Where waits on each remote exchange resume.
    cursors: remote_exchanges::Cursors,
    tool_router: ToolRouter<MessMcp>,
}

impl MessMcp {
    /// A server acting as `who` on `exchange`.
    pub(crate) fn new(exchange: Arc<Exchange>, who: Sender) -> MessMcp {
        MessMcp {
            exchange,
            subscriptions: Arc::default(),
            who,
            // Well inside the 60 s many clients allow a call before giving up on it.
            heartbeat: std::time::Duration::from_secs(15),
            remotes: Arc::default(),
            locals: Arc::default(),
            cursors: remote_exchanges::Cursors::default(),
            tool_router: MessMcp::tool_router(),
        }
    }

    /// The same server with other exchanges tools may name.
    pub(crate) fn with_remotes(mut self, remotes: Vec<(String, crate::remote::Remote)>) -> MessMcp {
        self.remotes = Arc::new(remotes);
        self
    }

    /// Whether tools may name exchanges besides this one.
    fn has_others(&self) -> bool {
        !self.remotes.is_empty() || !self.locals.is_empty()
    }

    /// The same server with another heartbeat interval for `mess_wait` (tests shorten it).
    pub(crate) fn with_heartbeat(mut self, every: std::time::Duration) -> MessMcp {
        self.heartbeat = every;
        self
    }

    /// A tool error with the exchange's message (it names the field or the rule at fault; no
    /// server path, and only a generic line for internal failures).
    pub(crate) fn failure(&self, e: &Error) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.exchange.public_message(e))])
    }

    /// Runs exchange work off the async workers and turns its outcome into a tool result.
    async fn call(
        &self,
        work: impl FnOnce(&Exchange, &Sender) -> Result<Value, Error> + Send + 'static,
    ) -> CallToolResult {
        let stalled = self
            .run(move |ex, who| Ok((work(ex, who), ex.outbox().notices_stalled())))
            .await;
        match stalled {
            Ok((Ok(value), note)) => with_note(answer(&value), note),
            Ok((Err(e), note)) => with_note(self.failure(&e), note),
            Err(failed) => failed,
        }
    }

    /// `result` with the exchange's warning about notices nobody sends, if there is one.
    async fn noted(&self, result: CallToolResult) -> CallToolResult {
        let note = self
            .run(|ex, _| Ok(ex.outbox().notices_stalled()))
            .await
            .ok()
            .flatten();
        with_note(result, note)
    }

    /// Runs exchange work off the async workers; a failure comes back as the tool error to
    /// answer with.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Exchange, &Sender) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, CallToolResult> {
        let ex = self.exchange.clone();
        let who = self.who.clone();
        match tokio::task::spawn_blocking(move || work(&ex, &who)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.failure(&e)),
            Err(e) => Err(CallToolResult::error(vec![ContentBlock::text(format!(
                "the exchange failed unexpectedly: {e}"
            ))])),
        }
    }
}

/// Adds `note` to what the model reads, after the answer; the structured content keeps its
/// schema.
fn with_note(mut result: CallToolResult, note: Option<String>) -> CallToolResult {
    if let Some(note) = note {
        result
            .content
            .push(ContentBlock::text(format!("note: {note}")));
    }
    result
}

/// A successful result: YAML for the model to read, the same data as structured content.
fn answer(value: &Value) -> CallToolResult {
    let structured = match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(m)) => serde_json::Value::Object(m),
        Ok(other) => serde_json::json!({ "result": other }),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    };
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(emit::to_yaml(value))];
    result
}

/// `value` with `exchange: name` (a mapping gains the key; anything else is wrapped).
fn marked(value: Value, name: &str) -> Value {
    match value {
        Value::Map(mut m) => {
            m.insert("exchange", Value::str(name));
            Value::Map(m)
        }
        other => {
            let mut m = crate::protocol::value::Map::new();
            m.insert("exchange", Value::str(name));
            m.insert("result", other);
            Value::Map(m)
        }
    }
}

/// The text a tool result shows the model.
fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the server tells agents when they connect.
const INSTRUCTIONS: &str = "mess dispatches physical-world tasks to people, robots and services. \
Use mess_observe to find something out (it waits up to 50 s for the answer) and mess_do to get something \
done (it returns the ref at once unless you pass wait_s). While a request is open, mess_wait for changes \
and mess_status for the result. Answer needs_input with mess_reply answers, needs_confirmation with \
mess_reply confirm: true or false. mess://help has the full guide.";

#[rmcp::tool_handler(router = self.tool_router)]
impl rmcp::ServerHandler for MessMcp {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tasks()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            "mess",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        if let Some(local) = self.local_of_call(&request) {
            return local.call(request, context).await;
        }
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        if let Some((local, id)) = self.local_task(&request.task_id) {
            let mut got = local.server.task_get(id.to_owned()).await?;
            local.name_task(&mut got.task.task);
            if let rmcp::model::TaskPayload::Completed { result } = &mut got.task.payload
                && let Ok(r) = serde_json::from_value::<CallToolResult>(serde_json::Value::Object(
                    std::mem::take(result),
                ))
                && let Ok(serde_json::Value::Object(m)) =
                    serde_json::to_value(local.marked_result(r))
            {
                *result = m;
            }
            return Ok(got);
        }
        self.task_get(request.task_id).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some((local, id)) = self.local_task(&request.task_id) {
            return local
                .server
                .task_update(id.to_owned(), request.input_responses)
                .await;
        }
        self.task_update(request.task_id, request.input_responses)
            .await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some((local, id)) = self.local_task(&request.task_id) {
            return local.server.task_cancel(id.to_owned()).await;
        }
        self.task_cancel(request.task_id).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(
            resources::FIXED
                .iter()
                .map(|(uri, name, description)| {
                    Resource::new(*uri, *name)
                        .with_description(*description)
                        .with_mime_type(if *name == "help" {
                            "text/markdown"
                        } else {
                            resources::YAML
                        })
                })
                .collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::TEMPLATES
                .iter()
                .map(|(uri, name, description)| {
                    ResourceTemplate::new(*uri, *name)
                        .with_description(*description)
                        .with_mime_type(resources::YAML)
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let Some(listing) = self.listing_everywhere_of(&request.uri).await {
            return match listing {
                Ok(text) => Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(text, request.uri).with_mime_type(resources::YAML),
                ])
                .into()),
                Err(message) => Err(McpError::invalid_params(message, None)),
            };
        }
        let ex = self.exchange.clone();
        let who = self.who.id.clone();
        let uri = request.uri.clone();
        let read = tokio::task::spawn_blocking(move || resources::read(&ex, &who, &uri))
            .await
            .map_err(|e| McpError::internal_error(format!("reading failed: {e}"), None))?;
        match read {
            Ok(Some((text, mime))) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, request.uri).with_mime_type(mime),
            ])
            .into()),
            Ok(None) => Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            )),
            Err(e) if e.kind() == crate::exchange::error::ErrorKind::NotFound => Err(
                McpError::resource_not_found(self.exchange.public_message(&e), None),
            ),
            Err(e) => Err(McpError::invalid_params(
                self.exchange.public_message(&e),
                None,
            )),
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if !subscribe::known(&request.uri) {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {:?} to subscribe to: mess://pending, mess://history, mess://request/{{ref}} or thread://{{ref}}",
                    request.uri
                ),
                None,
            ));
        }
        if self.subscriptions.full(&request.uri) {
            return Err(McpError::invalid_request(
                format!(
                    "a session holds at most {} subscriptions; unsubscribe from one first",
                    subscribe::MAX_SUBSCRIPTIONS
                ),
                None,
            ));
        }
        // Subscribed before the check, so no change between the two is missed.
        let mut changes = self.exchange.changes().subscribe();
        if let Some(id) = subscribe::thread_of(&request.uri) {
            let (ex, who, id) = (self.exchange.clone(), self.who.id.clone(), id.to_owned());
            let found = tokio::task::spawn_blocking(move || ex.access().thread_for(&id, &who))
                .await
                .map_err(|e| McpError::internal_error(format!("subscribing failed: {e}"), None))?;
            if let Err(e) = found {
                return Err(McpError::resource_not_found(
                    self.exchange.public_message(&e),
                    None,
                ));
            }
        }
        let ex = self.exchange.clone();
        let who = self.who.id.clone();
        let uri = request.uri.clone();
        let peer = context.peer.clone();
        let forward = tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(change) => {
                        if subscribe::notify(&ex, &uri, &change, &who).await
                            && peer
                                .notify_resource_updated(ResourceUpdatedNotificationParam::new(
                                    uri.clone(),
                                ))
                                .await
                                .is_err()
                        {
                            break;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        self.subscriptions
            .insert(request.uri, forward.abort_handle());
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.remove(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Known resources only, each once, and a bounded number: every change is matched
        // against every one of them.
        let mut uris: Vec<String> = Vec::new();
        for uri in requested.resource_subscriptions.iter().flatten() {
            if subscribe::known(uri) && !uris.contains(uri) {
                uris.push(uri.clone());
            }
        }
        uris.truncate(subscribe::MAX_SUBSCRIPTIONS);
        let mut accepted = SubscriptionFilter::new();
        accepted.resource_subscriptions = Some(uris);
        Some(accepted)
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.exchange.changes().subscribe();
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(change) => {
                        for uri in &uris {
                            if subscribe::notify(&self.exchange, uri, &change, &self.who.id).await
                                && context.sink().notify_resource_updated(uri.clone()).await.is_err()
                            {
                                return Ok(());
                            }
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}
