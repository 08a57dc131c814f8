//! Reviews of finished work (the v2 `review` payload) through the CLI, HTTP and MCP: recorded
//! in the thread, told to the executor, and a redo that reopens the work to the same executor.

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

use crate::support::Home;
use crate::support::server::Server;

/// The executors, the robot with a channel so it hears of reviews.
const CONFIG: &str = "agent_id: claude-agent
executors:
  roomba-kitchen:
    capabilities: [vacuum-floor]
    notify:
      slack: U0ROOMBA
";

fn done(home: &Home, intent: &str) -> String {
    let r = home
        .ok(&[
            "request",
            intent,
            "--requires",
            "vacuum-floor",
            "--as",
            "claude-agent",
        ])
        .trim()
        .to_owned();
    home.ok(&["claim", &r, "--as", "roomba-kitchen"]);
    home.ok(&["complete", &r, "--as", "roomba-kitchen", "--text", "done"]);
    r
}

fn status(home: &Home, r: &str) -> serde_json::Value {
    serde_json::from_str(&home.ok(&["status", r, "--as", "claude-agent", "--format", "json"]))
        .unwrap()
}

#[test]
fn a_review_is_recorded_and_a_redo_gives_the_work_back_to_its_executor() {
    let home = Home::with_config(CONFIG);
    let r = done(&home, "vacuum the hall");
    home.ok(&[
        "review",
        &r,
        "--rating",
        "4",
        "--feedback",
        "good, a few crumbs left",
        "--as",
        "claude-agent",
    ]);
    let s = status(&home, &r);
    assert_eq!(s["status"], "completed", "{s}");
    let file = home.ok(&["show", &r, "--as", "claude-agent"]);
    assert!(
        file.contains("- review:") && file.contains("rating: 4"),
        "{file}"
    );
    assert!(
        file.contains("action: reviewed") && file.contains("rating 4: good, a few crumbs left"),
        "{file}"
    );

    // A redo: claimed again by the same executor, which hears of it.
    home.ok(&[
        "review",
        &r,
        "--rating",
        "reject",
        "--feedback",
        "the corners",
        "--redo",
        "--as",
        "claude-agent",
    ]);
    let s = status(&home, &r);
    assert_eq!(s["status"], "claimed", "{s}");
    assert_eq!(s["executor"], "roomba-kitchen", "{s}");
    let queued = std::fs::read_dir(home.path().join(".mess/outbox/queue"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    assert!(
        queued
            .iter()
            .any(|f| f.contains(".roomba-kitchen.") && f.contains("redo")),
        "{queued:?}"
    );
    let file = home.ok(&["show", &r, "--as", "claude-agent"]);
    assert!(file.contains("do it again: the corners"), "{file}");
    home.ok(&[
        "complete",
        &r,
        "--as",
        "roomba-kitchen",
        "--text",
        "corners too",
    ]);
    assert_eq!(status(&home, &r)["status"], "completed");
    home.ok(&["fsck"]);

    // What is refused, and why.
    let open = home
        .ok(&["request", "vacuum the stairs", "--as", "claude-agent"])
        .trim()
        .to_owned();
    let err = home.fails(
        &["review", &open, "--rating", "5", "--as", "claude-agent"],
        1,
    );
    assert!(err.contains("follows finished work"), "{err}");
    let err = home.fails(&["review", &r, "--rating", "7", "--as", "claude-agent"], 2);
    assert!(err.contains("--rating") && err.contains("1 to 5"), "{err}");
    let err = home.fails(&["review", &r, "--as", "claude-agent"], 2);
    assert!(err.contains("a review says something"), "{err}");
    let err = home.fails(&["review", &r, "--rating", "1", "--as", "someone-else"], 1);
    assert!(err.contains("only its requestor"), "{err}");
}

#[test]
fn reviews_over_http_and_mcp() {
    let home = Home::with_config(CONFIG);
    let agent = home.token("agent", "claude-agent");
    let robot = home.token("executor", "roomba-kitchen");
    let server = Server::start(&home);
    let r = done(&home, "vacuum the kitchen");
    let (code, body) = server.post_yaml(
        &robot,
        &format!("MESS:\n  - review: {{re: {r}, rating: 5}}\n"),
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("executor keys send status"), "{body}");
    let (code, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - review: {{re: {r}, rating: accept}}\n"),
    );
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["MESS"][1]["status"]["code"], "completed", "{v}");
    drop(server);

    let second = done(&home, "vacuum the porch");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", home.path())
            .env("MESS_AGENT_ID", "claude-agent");
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let args =
            serde_json::json!({"re": second, "rating": 3, "feedback": "ok", "request_redo": true});
        let result = client
            .call_tool(
                CallToolRequestParams::new("mess_review")
                    .with_arguments(args.as_object().cloned().unwrap()),
            )
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let _ = client.cancel().await;
    });
    assert_eq!(status(&home, &second)["status"], "claimed");
    assert!(
        home.ok(&["show", &second, "--as", "claude-agent"])
            .contains("rating 3: ok")
    );
}
