//! MCP Tasks with rmcp's client: a client that declares the tasks extension gets a task for
//! `mess_do` and `mess_observe` calls that would wait (its id is the thread's ref), polls it with `tasks/get` across a
//! restart of `mess serve`, answers the executor's question with `tasks/update`, cancels with
//! `tasks/cancel`; a client that does not declare it keeps plain tool results.

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, GetTaskParams, GetTaskResult, Implementation, TaskPayload, TaskStatus,
    UpdateTaskParams,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

fn tasks_client() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("mess-tests", "0"),
    )
}

async fn over_http(port: u16, key: &str) -> Client {
    tasks_client()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"))
                .auth_header(key.to_owned()),
        ))
        .await
        .unwrap()
}

fn arguments(a: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match a {
        serde_json::Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// Calls `name`, which must answer with a task; its id.
async fn task_of(client: &Client, name: &'static str, a: serde_json::Value) -> String {
    let answer = client
        .call_tool_once(CallToolRequestParams::new(name).with_arguments(arguments(a)))
        .await
        .unwrap();
    match answer {
        CallToolResponse::Task(t) => {
            assert_eq!(t.task.status, TaskStatus::Working);
            t.task.task_id.clone()
        }
        other => panic!("{name}: not a task: {other:?}"),
    }
}

async fn get(client: &Client, id: &str) -> GetTaskResult {
    client
        .get_task(GetTaskParams::new(id.to_owned()))
        .await
        .unwrap()
}

/// Polls task `id` until its status is `want` (at most 20 s).
async fn until(client: &Client, id: &str, want: TaskStatus) -> GetTaskResult {
    let start = Instant::now();
    loop {
        let g = get(client, id).await;
        if g.task.status() == want {
            return g;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "task {id} never became {want:?}: {g:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_task_survives_a_restart_of_the_server_and_is_polled_to_completion() {
    let home = Home::with_config(CONFIG);
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let mut server = Server::start(&home);
    let port = server.port;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = over_http(port, &agent).await;
        let id = task_of(
            &client,
            "mess_do",
            serde_json::json!({"intent": "vacuum the kitchen", "requires": ["vacuum-floor"], "wait_s": 60}),
        )
        .await;
        assert!(
            home.ok(&["status", &id, "--as", "claude-agent"])
                .contains("pending")
        );
        let g = get(&client, &id).await;
        assert_eq!(g.task.status(), TaskStatus::Working, "{g:?}");
        let _ = client.cancel().await;

        // The server goes away and comes back on the same address: the task is still there.
        assert!(server.terminate(Duration::from_secs(20)));
        server = Server::start_on(&home, &format!("127.0.0.1:{port}"), &[]);
        let client = over_http(port, &agent).await;
        home.ok(&["claim", &id, "--as", "roomba-kitchen"]);
        home.ok(&[
            "update",
            &id,
            "--status",
            "needs_input",
            "--question",
            "where: which room first?",
            "--as",
            "roomba-kitchen",
        ]);
        // The question is an input request; the answer goes back as the agent's reply.
        let g = until(&client, &id, TaskStatus::InputRequired).await;
        let TaskPayload::InputRequired { input_requests } = &g.task.payload else {
            panic!("{g:?}")
        };
        let asked = serde_json::to_string(&input_requests["answers"]).unwrap();
        assert!(asked.contains("which room first?"), "{asked}");
        let mut responses = std::collections::BTreeMap::new();
        responses.insert(
            "answers".to_owned(),
            serde_json::json!({"action": "accept", "content": {"where": "hall"}}),
        );
        client
            .update_task(UpdateTaskParams::new(id.clone(), responses))
            .await
            .unwrap();
        let shown = home.ok(&["show", &id, "--as", "claude-agent"]);
        assert!(shown.contains("where: hall"), "{shown}");
        home.ok(&[
            "complete",
            &id,
            "--text",
            "kitchen done",
            "--as",
            "roomba-kitchen",
        ]);
        let g = until(&client, &id, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = g.task.payload else {
            panic!()
        };
        let result: CallToolResult = serde_json::from_value(result.into()).unwrap();
        let text = serde_json::to_string(&result).unwrap();
        assert!(text.contains("kitchen done"), "{text}");

        // An id that names no thread of the caller is an unknown task.
        let err = client
            .get_task(GetTaskParams::new("2026-01-01-999".to_owned()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown task"), "{err}");
        let _ = client.cancel().await;
    });
    drop(server);
}

#[test]
fn a_task_over_stdio_is_cancelled_and_a_client_without_tasks_gets_plain_results() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let command = || {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
            cmd.arg("mcp")
                .env("MESS_HOME", home.path())
                .env("MESS_AGENT_ID", "claude-agent");
            TokioChildProcess::new(cmd).unwrap()
        };
        let client = tasks_client().serve(command()).await.unwrap();
        let id = task_of(
            &client,
            "mess_observe",
            serde_json::json!({"intent": "is the oven off?"}),
        )
        .await;
        client
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await
            .unwrap();
        let g = until(&client, &id, TaskStatus::Cancelled).await;
        assert!(matches!(g.task.payload, TaskPayload::Cancelled), "{g:?}");
        assert!(
            home.ok(&["status", &id, "--as", "claude-agent"])
                .contains("cancelled")
        );

        // A call that answers at once anyway (mess_do without wait_s) stays a plain result.
        let at_once = client
            .call_tool_once(
                CallToolRequestParams::new("mess_do")
                    .with_arguments(arguments(serde_json::json!({"intent": "feed the cat"}))),
            )
            .await
            .unwrap();
        assert!(
            matches!(at_once, CallToolResponse::Complete(_)),
            "{at_once:?}"
        );
        let _ = client.cancel().await;

        // Without the extension: the ack, as always.
        let plain = ().serve(command()).await.unwrap();
        let r = plain
            .call_tool(
                CallToolRequestParams::new("mess_do")
                    .with_arguments(arguments(serde_json::json!({"intent": "water the plants"}))),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false));
        assert!(r.structured_content.unwrap()["MESS"][1]["ack"]["ref"].is_string());
        let _ = plain.cancel().await;
    });
}

#[test]
fn a_task_on_another_home_of_this_machine_names_that_exchange() {
    let pantry = Home::with_config(CONFIG);
    let laptop = Home::with_config(&format!(
        "{CONFIG}exchanges:\n  pantry:\n    type: local\n    path: {}\n",
        pantry.path().display()
    ));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", laptop.path())
            .env("MESS_AGENT_ID", "claude-agent");
        let client = tasks_client()
            .serve(TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap();
        let id = task_of(
            &client,
            "mess_do",
            serde_json::json!({"intent": "vacuum the pantry", "requires": ["vacuum-floor"], "wait_s": 60, "exchange": "pantry"}),
        )
        .await;
        let thread = id.strip_prefix("pantry/").expect(&id).to_owned();
        pantry.ok(&["claim", &thread, "--as", "roomba-kitchen"]);
        pantry.ok(&[
            "complete",
            &thread,
            "--as",
            "roomba-kitchen",
            "--text",
            "pantry done",
        ]);
        let g = until(&client, &id, TaskStatus::Completed).await;
        assert_eq!(g.task.task.task_id, id);
        let TaskPayload::Completed { result } = &g.task.payload else {
            panic!("{g:?}");
        };
        let result: CallToolResult =
            serde_json::from_value(serde_json::Value::Object(result.clone())).unwrap();
        let s = result.structured_content.unwrap();
        assert_eq!(s["exchange"], "pantry", "{s}");
        assert!(s.to_string().contains("pantry done"), "{s}");
        // The same ref without the name is not a task of this home.
        let err = client
            .get_task(GetTaskParams::new(thread.clone()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown task"), "{err}");
        let _ = client.cancel().await;
    });
}
