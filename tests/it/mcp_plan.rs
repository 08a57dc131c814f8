//! The reference design's MCP surface (docs/spec-conformance.md, "The reference design"), through
//! rmcp's client against `mess mcp`: its input schemas (`mess_cancel` requires `re`), the
//! protocol's booleans in `mess_reply`, `mess_status(re: "all")`, `mess_observe` / `mess_do` that
//! return when complete (with progress heartbeats), and resources typed `application/x-yaml`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, NumberOrString, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::support::{CONFIG, Home};

/// A client that counts the progress notifications it receives.
#[derive(Clone, Default)]
struct Counting {
    progress: Arc<AtomicUsize>,
}

impl ClientHandler for Counting {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
}

type Client = RunningService<RoleClient, Counting>;

/// `mess mcp` on `home` as `agent`, heartbeats every 200 ms.
async fn session(home: &Home, agent: &str) -> Client {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
    cmd.arg("mcp")
        .env("MESS_HOME", home.path())
        .env("MESS_AGENT_ID", agent)
        .env("MESS_MCP_HEARTBEAT_MS", "200");
    Counting::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// Calls tool `name` (with a progress token): whether it failed, its text, its structured
/// content.
async fn call(client: &Client, name: &'static str, a: Value) -> (bool, String, Value) {
    let mut params =
        CallToolRequestParams::new(name).with_arguments(a.as_object().cloned().unwrap());
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(7),
    )));
    let r = client.call_tool(params).await.unwrap();
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    (
        r.is_error == Some(true),
        text,
        r.structured_content.unwrap_or(Value::Null),
    )
}

/// The ref a request tool's answer acknowledges.
fn acked(structured: &Value) -> String {
    structured["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Runs `mess args...` on `home` after `delay`, on another thread (an executor acting while a
/// tool call waits).
fn later(home: &Home, delay: Duration, steps: Vec<Vec<String>>) -> std::thread::JoinHandle<()> {
    let path = home.path().to_owned();
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        for args in steps {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_mess"))
                .args(&args)
                .env("MESS_HOME", &path)
                .env_remove("MESS_AGENT_ID")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_input_schemas_follow_the_plan() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = session(&home, "claude-agent").await;
        let tools = client.list_all_tools().await.unwrap();
        let schema = |name: &str| {
            let tool = tools.iter().find(|t| t.name == name).unwrap();
            Value::Object((*tool.input_schema).clone())
        };
        assert_eq!(schema("mess_cancel")["required"], json!(["re"]));
        let reply = schema("mess_reply");
        for field in ["confirm", "accept"] {
            assert_eq!(reply["properties"][field]["type"], "boolean", "{reply}");
            assert!(
                reply["properties"][field]["description"].is_string(),
                "{reply}"
            );
        }
        assert_eq!(
            schema("mess_observe")["properties"]["wait_s"]["default"],
            50
        );
        assert_eq!(schema("mess_do")["properties"]["wait_s"]["default"], 0);
        assert_eq!(schema("mess_observe")["required"], json!(["intent"]));
        client.cancel().await.unwrap();
    });
}

#[test]
fn replies_take_the_protocol_s_booleans_and_the_old_words() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = session(&home, "claude-agent").await;
        let (_, text, s) = call(
            &client,
            "mess_do",
            json!({"intent": "clear the garage", "requires": ["vacuum-floor"], "confirm_before": true}),
        )
        .await;
        assert!(s["thread"].is_null(), "no wait by default: {text}");
        let thread = acked(&s);
        home.ok(&["claim", &thread, "--as", "roomba-kitchen"]);
        home.ok(&[
            "update",
            &thread,
            "--as",
            "roomba-kitchen",
            "--status",
            "needs_confirmation",
            "--action",
            "throw out the boxes",
        ]);
        let (failed, text, _) = call(
            &client,
            "mess_reply",
            json!({"re": thread, "confirm": "maybe"}),
        )
        .await;
        assert!(failed && text.contains("confirm"), "{text}");
        let (failed, text, _) = call(
            &client,
            "mess_reply",
            json!({"re": thread, "confirm": true}),
        )
        .await;
        assert!(!failed, "{text}");
        let shown = home.ok(&["show", &thread]);
        assert!(shown.contains("confirm: true"), "{shown}");
        // The words of older clients still work, beside `ref` for `re`.
        let (_, _, s) = call(
            &client,
            "mess_do",
            json!({"intent": "empty the attic", "requires": ["vacuum-floor"], "confirm_before": true}),
        )
        .await;
        let attic = acked(&s);
        home.ok(&["claim", &attic, "--as", "roomba-kitchen"]);
        home.ok(&[
            "update",
            &attic,
            "--as",
            "roomba-kitchen",
            "--status",
            "needs_confirmation",
            "--action",
            "throw out the boxes",
        ]);
        let (failed, text, _) = call(
            &client,
            "mess_reply",
            json!({"ref": attic, "confirm": "no", "accept": false, "reason": "keep them"}),
        )
        .await;
        assert!(!failed, "{text}");
        let shown = home.ok(&["show", &attic]);
        assert!(
            shown.contains("confirm: false") && shown.contains("accept: false"),
            "{shown}"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn status_all_lists_every_request_of_the_caller_and_no_other() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = session(&home, "claude-agent").await;
        let other = session(&home, "other-agent").await;
        let (_, _, s) = call(&client, "mess_do", json!({"intent": "water the plants"})).await;
        let open = acked(&s);
        let (_, _, s) = call(
            &client,
            "mess_observe",
            json!({"intent": "is the door locked?", "wait_s": 0}),
        )
        .await;
        let done = acked(&s);
        let (failed, text, _) = call(&client, "mess_cancel", json!({"re": done})).await;
        assert!(!failed, "{text}");
        let (_, _, s) = call(&other, "mess_do", json!({"intent": "feed the cat"})).await;
        let theirs = acked(&s);

        let refs = |s: &Value| -> Vec<String> {
            s["threads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["ref"].as_str().unwrap().to_owned())
                .collect()
        };
        let (_, _, s) = call(&client, "mess_status", json!({})).await;
        assert_eq!(refs(&s), [open.as_str()]);
        let (failed, text, s) = call(&client, "mess_status", json!({"re": "all"})).await;
        assert!(!failed, "{text}");
        let all = refs(&s);
        assert!(
            all.contains(&open) && all.contains(&done) && !all.contains(&theirs),
            "{all:?}"
        );
        assert!(text.contains("status: cancelled"), "{text}");
        let (_, _, s) = call(&other, "mess_status", json!({"re": "all"})).await;
        assert_eq!(refs(&s), [theirs]);
        client.cancel().await.unwrap();
        other.cancel().await.unwrap();
    });
}

#[test]
fn observe_returns_when_complete_with_heartbeats_meanwhile() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = session(&home, "claude-agent").await;
        // The ref is known only once the request exists: the executor takes the next one.
        let executor = {
            let path = home.path().to_owned();
            std::thread::spawn(move || {
                let run = |args: &[&str]| {
                    std::process::Command::new(env!("CARGO_BIN_EXE_mess"))
                        .args(args)
                        .env("MESS_HOME", &path)
                        .env_remove("MESS_AGENT_ID")
                        .output()
                        .unwrap()
                };
                let until = Instant::now() + Duration::from_secs(10);
                let thread = loop {
                    let listed =
                        String::from_utf8(run(&["status", "--as", "claude-agent"]).stdout).unwrap();
                    if let Some(line) = listed.lines().find(|l| l.contains("pending")) {
                        break line.split_whitespace().next().unwrap().to_owned();
                    }
                    assert!(Instant::now() < until, "no request appeared: {listed}");
                    std::thread::sleep(Duration::from_millis(100));
                };
                std::thread::sleep(Duration::from_millis(700));
                for args in [
                    vec!["claim", &thread, "--as", "teague-phone"],
                    vec![
                        "complete",
                        &thread,
                        "--as",
                        "teague-phone",
                        "--text",
                        "chicken, broccoli, rice",
                    ],
                ] {
                    let out = run(&args);
                    assert!(out.status.success(), "{out:?}");
                }
            })
        };
        let started = Instant::now();
        let (failed, text, s) = call(
            &client,
            "mess_observe",
            json!({"intent": "what's in the fridge?", "wait_s": 30}),
        )
        .await;
        executor.join().unwrap();
        assert!(!failed, "{text}");
        assert!(started.elapsed() < Duration::from_secs(20), "{text}");
        assert_eq!(s["timed_out"], false, "{text}");
        assert_eq!(s["thread"]["status"], "completed", "{text}");
        assert_eq!(s["thread"]["ref"].as_str(), Some(acked(&s).as_str()));
        assert!(text.contains("chicken, broccoli, rice"), "{text}");
        assert!(
            client.service().progress.load(Ordering::SeqCst) >= 2,
            "heartbeats while waiting"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn waits_end_when_the_request_needs_you_or_wait_s_runs_out() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = session(&home, "claude-agent").await;
        // Nobody acts: the wait ends after wait_s with the request as it stands.
        let started = Instant::now();
        let (failed, text, s) = call(
            &client,
            "mess_observe",
            json!({"intent": "photo of the porch", "wait_s": 1}),
        )
        .await;
        assert!(!failed, "{text}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(s["timed_out"], true, "{text}");
        assert_eq!(s["thread"]["status"], "pending", "{text}");
        let porch = acked(&s);

        // A question ends the wait of mess_do: the executor waits for the agent now.
        let (_, _, s) = call(&client, "mess_status", json!({"re": porch})).await;
        assert_eq!(s["status"], "pending");
        let next = format!(
            "{}{:03}",
            &porch[..11],
            porch[11..].parse::<u32>().unwrap() + 1
        );
        let executor = later(
            &home,
            Duration::from_millis(800),
            vec![
                strings(&["claim", &next, "--as", "roomba-kitchen"]),
                strings(&[
                    "update",
                    &next,
                    "--as",
                    "roomba-kitchen",
                    "--status",
                    "needs_input",
                    "--question",
                    "where: Which room? [kitchen|hall]",
                ]),
            ],
        );
        let started = Instant::now();
        let (failed, text, s) = call(
            &client,
            "mess_do",
            json!({"intent": "vacuum", "requires": ["vacuum-floor"], "wait_s": 30}),
        )
        .await;
        executor.join().unwrap();
        assert!(!failed, "{text}");
        assert_eq!(acked(&s), next);
        assert!(started.elapsed() < Duration::from_secs(20), "{text}");
        assert_eq!(s["timed_out"], false, "{text}");
        assert_eq!(s["thread"]["status"], "needs_input", "{text}");
        assert!(text.contains("Which room?"), "{text}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn resources_are_typed_as_the_plan_says() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = session(&home, "claude-agent").await;
        let (_, _, s) = call(&client, "mess_do", json!({"intent": "water the plants"})).await;
        let thread = acked(&s);
        let listed = client.list_all_resources().await.unwrap();
        let types: Vec<(&str, Option<&str>)> = listed
            .iter()
            .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
            .collect();
        assert_eq!(
            types,
            [
                ("mess://pending", Some("application/x-yaml")),
                ("mess://history", Some("application/x-yaml")),
                ("mess://help", Some("text/markdown")),
            ]
        );
        for template in client.list_all_resource_templates().await.unwrap() {
            assert_eq!(template.mime_type.as_deref(), Some("application/x-yaml"));
        }
        for uri in [
            "mess://pending".to_owned(),
            "mess://history".to_owned(),
            format!("mess://request/{thread}"),
            format!("thread://{thread}"),
        ] {
            let read = client
                .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()))
                .await
                .unwrap();
            match &read.contents[0] {
                rmcp::model::ResourceContents::TextResourceContents {
                    mime_type, text, ..
                } => {
                    assert_eq!(mime_type.as_deref(), Some("application/x-yaml"), "{uri}");
                    assert!(text.contains(&thread), "{uri}: {text}");
                }
                other => panic!("{uri}: {other:?}"),
            }
        }
        client.cancel().await.unwrap();
    });
}
