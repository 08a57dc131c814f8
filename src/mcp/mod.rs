//! The MCP server (contract section 7): the exchange's tools and resources for agents, over
//! stdio (`mess mcp`) and streamable HTTP (`/mcp` in `mess serve`). A translator like `http`:
//! it decodes tool arguments, calls the exchange on a blocking thread, and answers with YAML
//! text plus the same data as structured content; failures the model can fix are tool errors.

pub mod args;
mod tools;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, ContentBlock};

use crate::exchange::Exchange;
use crate::exchange::error::Error;
use crate::protocol::emit;
use crate::protocol::value::Value;

/// The MCP server for one principal (the agent the tools act as).
#[derive(Clone)]
pub struct MessMcp {
    exchange: Arc<Exchange>,
    who: String,
    tool_router: ToolRouter<MessMcp>,
}

impl MessMcp {
    /// A server acting as `who` on `exchange`.
    pub fn new(exchange: Arc<Exchange>, who: impl Into<String>) -> MessMcp {
        MessMcp {
            exchange,
            who: who.into(),
            tool_router: MessMcp::tool_router(),
        }
    }

    /// Runs exchange work off the async workers and turns its outcome into a tool result.
    async fn call(
        &self,
        work: impl FnOnce(&Exchange, &str) -> Result<Value, Error> + Send + 'static,
    ) -> CallToolResult {
        let ex = self.exchange.clone();
        let who = self.who.clone();
        match tokio::task::spawn_blocking(move || work(&ex, &who)).await {
            Ok(Ok(value)) => answer(&value),
            Ok(Err(e)) => failure(&e),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "the exchange failed unexpectedly: {e}"
            ))]),
        }
    }
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

/// A tool error with the exchange's message (it names the field or the rule at fault).
fn failure(e: &Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.to_string())])
}

/// What the server tells agents when they connect.
const INSTRUCTIONS: &str = "mess dispatches physical-world tasks to people, robots and services. \
Use mess_observe to find something out and mess_do to get something done; both return a ref at once. \
Then mess_wait for changes and mess_status for the result. Answer needs_input with mess_reply answers, \
needs_confirmation with mess_reply confirm. mess://help has the full guide.";

#[rmcp::tool_handler(router = self.tool_router)]
impl rmcp::ServerHandler for MessMcp {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            "mess",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }
}
