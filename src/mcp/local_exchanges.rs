//! Tools on another home of this machine (`exchange: NAME` for a `type: local` entry of
//! `exchanges:`): the call is answered by a server of the same agent over that home, exactly as
//! it would be with no `exchange` there, and the answer says which exchange it came from. A
//! task made there has the id `NAME/REF`, so it never collides with a ref of this home.

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Task};
use rmcp::service::RequestContext;

use crate::mcp::{MessMcp, answer, marked};
use crate::protocol::value::Value;
use crate::protocol::yaml::Limits;

/// Another home of this machine tools may name: its name in `exchanges:` and the server of the
/// same agent over it.
#[derive(Clone)]
pub(crate) struct Local {
    pub(crate) name: String,
    pub(crate) server: MessMcp,
}

impl MessMcp {
    /// The same server with other homes of this machine tools may name.
    pub(crate) fn with_locals(mut self, locals: Vec<Local>) -> MessMcp {
        self.locals = std::sync::Arc::new(locals);
        self
    }

    /// The local exchange the `exchange` argument of `request` names, if it names one.
    pub(crate) fn local_of_call(&self, request: &CallToolRequestParams) -> Option<&Local> {
        let name = request
            .arguments
            .as_ref()?
            .get("exchange")?
            .as_str()?
            .trim();
        self.locals.iter().find(|l| l.name == name)
    }

    /// The local exchange and its own task id of the task `id` (`NAME/REF`); `None` for a task
    /// of this home.
    pub(crate) fn local_task<'a>(&self, id: &'a str) -> Option<(&Local, &'a str)> {
        let (name, task) = id.trim().split_once('/')?;
        self.locals
            .iter()
            .find(|l| l.name == name)
            .map(|l| (l, task))
    }
}

impl Local {
    /// Answers the tool call `request` on this exchange: without its `exchange` argument, by
    /// the server over this home, and marked with this exchange's name.
    pub(crate) async fn call(
        &self,
        mut request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(args) = request.arguments.as_mut() {
            args.remove("exchange");
        }
        // The tool router of that server, not its `call_tool`: it names no other exchanges.
        let call = rmcp::handler::server::tool::ToolCallContext::new(&self.server, request, ctx);
        let response = self.server.tool_router.call(call).await?;
        Ok(match response {
            CallToolResponse::Complete(result) => {
                CallToolResponse::Complete(self.marked_result(result))
            }
            CallToolResponse::Task(mut created) => {
                self.name_task(&mut created.task);
                CallToolResponse::Task(created)
            }
            other => other,
        })
    }

    /// `task`, as the agent knows it: its id names this exchange.
    pub(crate) fn name_task(&self, task: &mut Task) {
        task.task_id = format!("{}/{}", self.name, task.task_id);
    }

    /// `result` marked `exchange: NAME`: the structured content, its listed threads and
    /// changes, and the YAML text when it is the structured content's (notes after it stay).
    pub(crate) fn marked_result(&self, mut result: CallToolResult) -> CallToolResult {
        if result.is_error == Some(true) {
            result
                .content
                .insert(0, ContentBlock::text(format!("on exchange {}:", self.name)));
            return result;
        }
        let Some(structured) = result.structured_content.take() else {
            return result;
        };
        let Ok(value) = serde_json::from_value::<Value>(structured.clone()) else {
            result.structured_content = Some(structured);
            return result;
        };
        // The text is the answer as YAML unless the tool words it (`mess_wait`, a table).
        let was_yaml = result
            .content
            .first()
            .and_then(|c| c.as_text())
            .is_some_and(|t| {
                matches!(
                    crate::protocol::yaml::parse_document(&t.text, &Limits::DEFAULT),
                    Ok(Value::Map(_))
                )
            });
        let value = self.mark_items(value);
        let mut marked_answer = answer(&value);
        if !was_yaml {
            marked_answer.content = std::mem::take(&mut result.content);
        } else {
            marked_answer.content.extend(result.content.drain(1..));
        }
        marked_answer
    }

    /// `value` with `exchange: NAME`, and each item of its `threads` and `updated` lists too.
    fn mark_items(&self, value: Value) -> Value {
        let Value::Map(mut m) = value else {
            return marked(value, &self.name);
        };
        for list in ["threads", "updated"] {
            if let Some(Value::Seq(items)) = m.get(list) {
                let items = items
                    .iter()
                    .map(|i| marked(i.clone(), &self.name))
                    .collect();
                m.insert(list, Value::Seq(items));
            }
        }
        marked(Value::Map(m), &self.name)
    }
}
