//! Robots that speak MCP: an executor entry with `mcp: {url}` gets the requests routed to it as
//! an `execute_task` tool call on a small MCP server this test runs (rmcp over streamable HTTP
//! on loopback); the exchange claims for it, and the tool's result becomes the response. A
//! robot that is down is retried and the failure noted, with the thread left open for
//! escalation; a key holder cannot name a robot.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult,
    DetailedTask, GetTaskParams, GetTaskResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Task, TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::support::Home;
use crate::support::server::Server;

/// The robot: one tool, `execute_task`, which records its arguments and says it is done; with
/// `as_task`, it answers with an MCP task that is over at the first `tasks/get`.
#[derive(Clone, Default)]
struct Arm {
    calls: Arc<Mutex<Vec<serde_json::Value>>>,
    as_task: bool,
}

fn done(intent: &str) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!("folded: {intent}"))])
}

impl ServerHandler for Arm {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema =
            serde_json::json!({"type": "object", "properties": {"intent": {"type": "string"}}});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "execute_task",
            "fold laundry",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let intent = args["intent"].as_str().unwrap_or_default().to_owned();
        self.calls.lock().unwrap().push(args);
        if self.as_task {
            let at = "2026-11-27T00:00:00Z".to_owned();
            let task =
                Task::new(intent, TaskStatus::Working, at.clone(), at).with_poll_interval_ms(200);
            return Ok(CreateTaskResult::new(task).into());
        }
        Ok(done(&intent).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let at = "2026-11-27T00:00:01Z".to_owned();
        let serde_json::Value::Object(result) =
            serde_json::to_value(done(&request.task_id)).unwrap()
        else {
            unreachable!()
        };
        Ok(GetTaskResult::new(DetailedTask::new(
            Task::new(request.task_id, TaskStatus::Completed, at.clone(), at),
            TaskPayload::Completed { result },
        )))
    }
}

/// Serves `arm` over streamable HTTP on loopback; its URL.
fn serve(arm: Arm, runtime: &tokio::runtime::Runtime) -> String {
    let service = StreamableHttpService::new(
        move || Ok(arm.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new().nest_service("/mcp", service);
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn until(home: &Home, r: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let file = home.ok(&["show", r, "--as", "claude-agent"]);
        if check(&file) {
            return file;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{what}:\n{file}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_request_routed_to_an_mcp_robot_is_completed_by_its_tool_result() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let arm = Arm::default();
    let url = serve(arm.clone(), &runtime);
    let home = Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  arm:\n    capabilities: [fold-laundry]\n    mcp:\n      url: {url}\n"
    ));
    let _server = Server::start(&home);
    let said = home.ok(&[
        "request",
        "fold the towels",
        "--requires",
        "fold-laundry",
        "--context",
        "in the dryer",
    ]);
    let r = said
        .split_whitespace()
        .find(|w| w.starts_with("20"))
        .unwrap()
        .to_owned();
    let file = until(&home, &r, "completed by the robot", |f| {
        f.contains("status: completed")
    });
    assert!(file.contains("folded: fold the towels"), "{file}");
    assert!(file.contains("executor: arm"), "{file}");
    // The call carried the request: intent, ref, context and a link to the thread's page.
    let calls = arm.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["ref"], r.as_str());
    assert!(
        calls[0]["context"].to_string().contains("in the dryer"),
        "{calls:?}"
    );
    assert!(
        calls[0]["link"].as_str().unwrap().contains("/respond?ref="),
        "{calls:?}"
    );
}

#[test]
fn a_robot_that_answers_with_an_mcp_task_is_followed_until_the_task_is_over() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let arm = Arm {
        as_task: true,
        ..Arm::default()
    };
    let url = serve(arm.clone(), &runtime);
    let home = Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  arm:\n    capabilities: [fold-laundry]\n    mcp:\n      url: {url}\n"
    ));
    let _server = Server::start(&home);
    let said = home.ok(&["request", "fold the sheets", "--requires", "fold-laundry"]);
    let r = said
        .split_whitespace()
        .find(|w| w.starts_with("20"))
        .unwrap()
        .to_owned();
    let file = until(&home, &r, "completed through the task", |f| {
        f.contains("status: completed")
    });
    assert!(file.contains("folded: fold the sheets"), "{file}");
}

#[test]
fn a_robot_that_is_down_is_retried_and_then_the_request_is_escalated() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let home = Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  arm:\n    capabilities: [fold-laundry]\n    mcp:\n      url: http://127.0.0.1:{port}/mcp\n  teague-phone:\n    capabilities: [fold-laundry]\nrouting:\n  - match: {{capability: fold-laundry}}\n    prefer: [arm]\n  - default:\n    prefer: [teague-phone]\ndispatch:\n  retry: {{attempts: 2, first: 1s, max: 1s}}\n  escalate_after: 2s\n"
    ));
    let server = Server::start_with(&home, &[("MESS_DISPATCH_RETRY_MS", "300")]);
    let said = home.ok(&["request", "fold the towels", "--requires", "fold-laundry"]);
    let r = said
        .split_whitespace()
        .find(|w| w.starts_with("20"))
        .unwrap()
        .to_owned();
    let file = until(&home, &r, "the failure noted", |f| {
        f.contains("notify_failed")
    });
    assert!(file.contains("after 2 attempts"), "{file}");
    assert!(file.contains("status: pending"), "{file}");
    // Nobody took it: it is offered to the default rule's executor, as for any channel.
    until(&home, &r, "escalated", |f| {
        f.contains("action: escalated") && f.contains("offered to teague-phone")
    });
    // A key holder may not name a robot (a URL reached from here, or a command run here).
    let robot_key = home.ok(&["token", "executor", "mallory"]).trim().to_owned();
    let (status, body) = server.post_yaml(
        &robot_key,
        "MESS:\n  - config:\n      executor:\n        id: mallory\n        capabilities: [fold-laundry]\n        mcp:\n          command: [sh, -c, 'touch /tmp/owned']\n",
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("operator"), "{body}");
}
