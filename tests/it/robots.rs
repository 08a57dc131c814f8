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
/// `as_task`, it answers with an MCP task that is over at the first `tasks/get`. A robot that
/// `asks` first puts a question to the exchange: during the call as an elicitation (`Ask::
/// Elicit`, or `Ask::Confirm` for a yes or no), or as its task's `input_required`, answered
/// with `tasks/update` (`Ask::InTask`); it records what it was told.
#[derive(Clone, Default)]
struct Arm {
    calls: Arc<Mutex<Vec<serde_json::Value>>>,
    as_task: bool,
    asks: Option<Ask>,
    told: Arc<Mutex<Vec<serde_json::Value>>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ask {
    Elicit,
    Confirm,
    InTask,
}

/// The form a robot asks with: which shelf, or (`yes_or_no`) whether to go ahead.
fn form(yes_or_no: bool) -> rmcp::model::ElicitRequestParams {
    let schema = if yes_or_no {
        serde_json::json!({"type": "object", "properties": {"go": {"type": "boolean"}}})
    } else {
        serde_json::json!({"type": "object", "properties": {
            "shelf": {"type": "string", "enum": ["top", "bottom"], "description": "which shelf"}
        }})
    };
    serde_json::from_value(serde_json::json!({
        "mode": "form",
        "message": if yes_or_no { "Fold the silk shirts too?" } else { "Which shelf?" },
        "requestedSchema": schema,
    }))
    .unwrap()
}

fn done(intent: &str) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(format!("folded: {intent}"))]);
    result.structured_content = Some(serde_json::json!({"folded": 12, "where": "shelf"}));
    result
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let intent = args["intent"].as_str().unwrap_or_default().to_owned();
        self.calls.lock().unwrap().push(args);
        if let Some(ask @ (Ask::Elicit | Ask::Confirm)) = self.asks {
            let asked = context
                .peer
                .send_request(rmcp::model::ServerRequest::ElicitRequest(
                    rmcp::model::Request::new(form(ask == Ask::Confirm)),
                ))
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let rmcp::model::ClientResult::ElicitResult(answer) = asked else {
                return Err(ErrorData::internal_error("not an elicit result", None));
            };
            let told = serde_json::to_value(&answer).unwrap();
            self.told.lock().unwrap().push(told.clone());
            return Ok(done(&format!("{intent} ({told})")).into());
        }
        if self.as_task || self.asks == Some(Ask::InTask) {
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
        if self.asks == Some(Ask::InTask) && self.told.lock().unwrap().is_empty() {
            let mut requests = rmcp::model::InputRequests::new();
            requests.insert(
                "shelf-1".to_owned(),
                rmcp::model::InputRequest::Elicitation(rmcp::model::Request::new(form(false))),
            );
            return Ok(GetTaskResult::new(DetailedTask::new(
                Task::new(request.task_id, TaskStatus::InputRequired, at.clone(), at),
                TaskPayload::InputRequired {
                    input_requests: requests,
                },
            )));
        }
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

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.record_update(&request.input_responses);
        Ok(())
    }
}

impl Arm {
    /// `tasks/update`: the answers to the task's questions.
    fn record_update(&self, responses: &rmcp::model::InputResponses) {
        for value in responses.values() {
            self.told.lock().unwrap().push(value.clone());
        }
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
    // The tool's structured result is the protocol's `structured` content entry.
    assert!(file.contains("- structured:"), "{file}");
    assert!(file.contains("folded: 12"), "{file}");
    assert!(!file.contains("data:"), "{file}");
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
    let server = Server::start_with(&home, &[("MESS_ROUTE_RETRY_MS", "300")]);
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

/// A home whose `arm` executor is the robot at `url`, and its server.
fn robot_home(url: &str) -> (Home, Server) {
    let home = Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  arm:\n    capabilities: [fold-laundry]\n    mcp:\n      url: {url}\n"
    ));
    let server = Server::start(&home);
    (home, server)
}

/// Requests `intent` of the robot; the ref.
fn ask_robot(home: &Home, intent: &str) -> String {
    let said = home.ok(&["request", intent, "--requires", "fold-laundry"]);
    said.split_whitespace()
        .find(|w| w.starts_with("20"))
        .unwrap()
        .to_owned()
}

#[test]
fn a_robot_that_asks_during_its_call_gets_the_requestors_answer_and_goes_on() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let arm = Arm {
        asks: Some(Ask::Elicit),
        ..Arm::default()
    };
    let url = serve(arm.clone(), &runtime);
    let (home, _server) = robot_home(&url);
    let r = ask_robot(&home, "fold the towels");
    // The robot's question is the thread's needs_input, with its options.
    let file = until(&home, &r, "the robot's question", |f| {
        f.contains("status: needs_input")
    });
    assert!(
        file.contains("field: shelf") && file.contains("- top"),
        "{file}"
    );
    let status = home.ok(&["status", &r, "--as", "claude-agent"]);
    assert!(status.contains("which shelf"), "{status}");
    home.ok(&[
        "reply",
        &r,
        "--answer",
        "shelf=bottom",
        "--as",
        "claude-agent",
    ]);
    let file = until(&home, &r, "completed with the answer", |f| {
        f.contains("status: completed")
    });
    assert!(
        file.contains("code: in_progress"),
        "the work went on: {file}"
    );
    let told = arm.told.lock().unwrap().clone();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["action"], "accept");
    assert_eq!(told[0]["content"]["shelf"], "bottom");
}

#[test]
fn a_robot_that_asks_yes_or_no_waits_for_the_requestors_confirmation() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let arm = Arm {
        asks: Some(Ask::Confirm),
        ..Arm::default()
    };
    let url = serve(arm.clone(), &runtime);
    let (home, _server) = robot_home(&url);
    let r = ask_robot(&home, "fold the shirts");
    let file = until(&home, &r, "the robot asks to confirm", |f| {
        f.contains("status: needs_confirmation")
    });
    assert!(file.contains("Fold the silk shirts too?"), "{file}");
    home.ok(&["reply", &r, "--confirm", "true", "--as", "claude-agent"]);
    until(&home, &r, "completed after the confirmation", |f| {
        f.contains("status: completed")
    });
    let told = arm.told.lock().unwrap().clone();
    assert_eq!(told[0]["action"], "accept", "{told:?}");
    assert_eq!(told[0]["content"]["go"], true, "{told:?}");
}

#[test]
fn a_robots_task_that_needs_input_is_answered_with_tasks_update() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let arm = Arm {
        asks: Some(Ask::InTask),
        ..Arm::default()
    };
    let url = serve(arm.clone(), &runtime);
    let (home, _server) = robot_home(&url);
    let r = ask_robot(&home, "fold the sheets");
    until(&home, &r, "the task's question", |f| {
        f.contains("status: needs_input")
    });
    home.ok(&["reply", &r, "--answer", "shelf=top", "--as", "claude-agent"]);
    until(&home, &r, "the task completed", |f| {
        f.contains("status: completed")
    });
    let told = arm.told.lock().unwrap().clone();
    assert_eq!(told[0]["content"]["shelf"], "top", "{told:?}");
}

#[test]
#[ignore = "drives the Python MCP SDK; .ci/test runs it"]
fn a_python_robot_that_asks_with_ctx_elicit_gets_the_answer() {
    use std::io::BufRead as _;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = repo.join(".venv/bin/python");
    assert!(
        python.exists(),
        "run .ci/test, which installs the Python MCP SDK"
    );
    let mut robot = std::process::Command::new(&python)
        .arg(repo.join("tests/python/robot_asks.py"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(robot.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();
    // Wait until it listens.
    let port: u16 = url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the robot never listened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (home, _server) = robot_home(&url);
    let r = ask_robot(&home, "vacuum");
    let file = until(&home, &r, "the Python robot's questions", |f| {
        f.contains("status: needs_input")
    });
    assert!(
        file.contains("field: room") && file.contains("field: passes"),
        "{file}"
    );
    home.ok(&[
        "reply",
        &r,
        "--answer",
        "room=kitchen",
        "--answer",
        "passes=2",
        "--as",
        "claude-agent",
    ]);
    let file = until(&home, &r, "completed with the answer", |f| {
        f.contains("status: completed")
    });
    assert!(
        file.contains("did vacuum in the kitchen, 2 passes"),
        "{file}"
    );
    let _ = robot.kill();
    let _ = robot.wait();
}
