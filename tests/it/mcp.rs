//! MCP with a real client: rmcp's own client drives `mess mcp` over stdio.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;

use crate::support::{CONFIG, Home};

fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `mess mcp` on the test home as claude-agent, with rmcp's client over stdio.
async fn stdio_client(home: &Home) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    stdio_client_with(home, &[]).await
}

/// [`stdio_client`] with extra arguments for `mess mcp` (`--operator`).
async fn stdio_client_with(
    home: &Home,
    extra: &[&str],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
    cmd.arg("mcp")
        .args(extra)
        .env("MESS_HOME", home.path())
        .env("MESS_AGENT_ID", "claude-agent");
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// Calls tool `name` with arguments `a`.
async fn tool(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &'static str,
    a: serde_json::Value,
) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args(a)))
        .await
        .unwrap()
}

#[test]
fn an_agent_session_over_stdio() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = stdio_client(&home).await;
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for want in [
            "mess",
            "mess_observe",
            "mess_do",
            "mess_request",
            "mess_status",
            "mess_reply",
            "mess_answer",
            "mess_cancel",
            "mess_capabilities",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        let call = |name: &'static str, a: serde_json::Value| tool(&client, name, a);

        let r = call(
            "mess_do",
            serde_json::json!({"intent": "vacuum the kitchen", "requires": ["vacuum-floor"]}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let structured = r.structured_content.clone().unwrap();
        let thread = structured["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text(&r).contains(&format!("ref: {thread}")),
            "YAML text: {}",
            text(&r)
        );

        let r = call("mess_status", serde_json::json!({"ref": thread})).await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        assert!(text(&r).contains("status: pending"), "{}", text(&r));

        home.ok(&["claim", &thread, "--as", "roomba-kitchen"]);
        home.ok(&[
            "update",
            &thread,
            "--as",
            "roomba-kitchen",
            "--status",
            "needs_input",
            "--question",
            "where: Which spill? [sink|stove]",
        ]);
        let r = call("mess_status", serde_json::json!({"re": "last"})).await;
        assert!(text(&r).contains("Which spill?"), "{}", text(&r));
        let r = call(
            "mess_answer",
            serde_json::json!({"ref": thread, "answer": "sink"}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        home.ok(&[
            "complete",
            &thread,
            "--as",
            "roomba-kitchen",
            "--text",
            "the sink side is clean",
        ]);
        let r = call("mess_status", serde_json::json!({"re": thread})).await;
        assert!(text(&r).contains("the sink side is clean"), "{}", text(&r));

        let r = call(
            "mess_observe",
            serde_json::json!({"intent": "is the garage door closed?", "priority": "urgent", "wait_s": 0}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let r = call(
            "mess_cancel",
            serde_json::json!({"re": "last", "reason": "checked myself"}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let r = call("mess_status", serde_json::json!({})).await;
        assert!(
            text(&r).contains("threads: []"),
            "nothing open: {}",
            text(&r)
        );

        // Bad input the model can fix comes back as a tool error naming the problem.
        let r = call(
            "mess_do",
            serde_json::json!({"intent": "x", "priority": "asap"}),
        )
        .await;
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("priority"), "{}", text(&r));
        let r = call(
            "mess",
            serde_json::json!({"message": "MESS: [request: {intent: [}"}),
        )
        .await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        let r = call("mess_status", serde_json::json!({"re": "2020-01-01-001"})).await;
        assert_eq!(r.is_error, Some(true));
        let r = call("mess_capabilities", serde_json::json!({})).await;
        assert!(text(&r).contains("vacuum-floor"), "{}", text(&r));
        client.cancel().await.unwrap();
    });
}

#[test]
fn waits_wake_on_changes_from_other_processes_and_resources_read_back() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = stdio_client(&home).await;
        let call = |name: &'static str, a: serde_json::Value| tool(&client, name, a);
        let r = call(
            "mess_observe",
            serde_json::json!({"intent": "photo of the porch", "wait_s": 0}),
        )
        .await;
        let thread = r.structured_content.unwrap()["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned();

        let r = call(
            "mess_wait",
            serde_json::json!({"re": thread, "timeout_s": 1}),
        )
        .await;
        assert_eq!(
            r.structured_content.as_ref().unwrap()["timed_out"],
            true,
            "{}",
            text(&r)
        );

        // Another process claims while the wait runs: the wait returns at once.
        let claimer = {
            let path = home.path().to_owned();
            let thread = thread.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(300));
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_mess"))
                    .args(["claim", &thread, "--as", "teague-phone"])
                    .env("MESS_HOME", path)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            })
        };
        let started = std::time::Instant::now();
        let r = call(
            "mess_wait",
            serde_json::json!({"ref": thread, "timeout_s": 20}),
        )
        .await;
        claimer.join().unwrap();
        let s = r.structured_content.clone().unwrap();
        assert_eq!(s["timed_out"], false, "{}", text(&r));
        assert_eq!(s["updated"][0]["status"], "claimed");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));

        let listed = client.list_all_resources().await.unwrap();
        let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["mess://pending", "mess://history", "mess://help"]);
        let templates = client.list_all_resource_templates().await.unwrap();
        assert_eq!(templates.len(), 2);
        let read = |uri: String| {
            let client = &client;
            async move {
                let r = client
                    .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
                    .await
                    .unwrap();
                match &r.contents[0] {
                    rmcp::model::ResourceContents::TextResourceContents { text, .. } => {
                        text.clone()
                    }
                    other => panic!("{other:?}"),
                }
            }
        };
        assert!(read("mess://pending".into()).await.contains(&thread));
        assert!(
            read(format!("thread://{thread}"))
                .await
                .contains("code: claimed")
        );
        assert!(
            read(format!("mess://request/{thread}"))
                .await
                .contains("status: claimed")
        );
        assert!(read("mess://help".into()).await.starts_with("# MESS"));
        assert!(
            client
                .read_resource(rmcp::model::ReadResourceRequestParams::new(
                    "mess://nothing"
                ))
                .await
                .is_err()
        );

        let r = call("mess_fetch", serde_json::json!({"uri": "mess://history"})).await;
        assert!(text(&r).contains(&thread), "{}", text(&r));
        let r = call(
            "mess_query",
            serde_json::json!({"sql": "SELECT ref, status FROM threads", "limit": 5}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        assert!(text(&r).starts_with("| ref | status |"), "{}", text(&r));
        assert_eq!(
            r.structured_content.as_ref().unwrap()["rows"][0]["status"],
            "claimed"
        );
        let r = call(
            "mess_query",
            serde_json::json!({"sql": "DROP VIEW threads"}),
        )
        .await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        client.cancel().await.unwrap();
    });
}

#[test]
fn the_same_tools_over_streamable_http_as_the_key_s_principal() {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let home = Home::with_config(CONFIG);
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let other = home
        .ok(&["token", "agent", "other-agent"])
        .trim()
        .to_owned();
    let server = crate::support::server::Server::start(&home);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    // rmcp's HTTP client is reqwest over rustls, which needs its crypto provider chosen.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let connect = |key: String| {
            let url = url.clone();
            async move {
                ().serve(StreamableHttpClientTransport::from_config(
                    StreamableHttpClientTransportConfig::with_uri(url).auth_header(key),
                ))
                .await
            }
        };
        let client = connect(agent.clone()).await.unwrap();
        let r = client
            .call_tool(
                CallToolRequestParams::new("mess_observe").with_arguments(args(
                    serde_json::json!({"intent": "is the oven off?", "wait_s": 0}),
                )),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let thread = r.structured_content.unwrap()["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned();
        // Written through /mcp, visible on the REST routes as the same principal.
        let (status, body) = server.get(&format!("/threads/{thread}"), &agent);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"requestor\":\"claude-agent\""), "{body}");
        // Another key is another principal: the thread is not theirs to see.
        let intruder = connect(other).await.unwrap();
        let r = intruder
            .call_tool(
                CallToolRequestParams::new("mess_status")
                    .with_arguments(args(serde_json::json!({"re": thread}))),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        // Nor read its mailbox.
        let r = intruder
            .call_tool(
                CallToolRequestParams::new("mess_mail_list")
                    .with_arguments(args(serde_json::json!({"mailbox": "claude-agent"}))),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        assert!(text(&r).contains("only its own mailbox"), "{}", text(&r));
        // Nor can they subscribe to it (and so learn when it changes); the legacy call is the
        // one that names a URI up front.
        #[allow(deprecated)]
        let refused = intruder
            .subscribe(rmcp::model::SubscribeRequestParams::new(format!(
                "thread://{thread}"
            )))
            .await;
        assert!(refused.is_err(), "{refused:?}");
        // Only resources that exist, and a bounded number of them per session.
        #[allow(deprecated)]
        let odd = intruder
            .subscribe(rmcp::model::SubscribeRequestParams::new("x://1"))
            .await;
        assert!(odd.is_err(), "{odd:?}");
        #[allow(deprecated)]
        let pending = intruder
            .subscribe(rmcp::model::SubscribeRequestParams::new("mess://pending"))
            .await;
        assert!(pending.is_ok(), "{pending:?}");
        // A file that does not parse is nobody's thread, and nothing names the server's paths.
        std::fs::write(
            home.path()
                .join("state=received/2026-01-01-900.messe-af.yaml"),
            "ref: [unclosed\n",
        )
        .unwrap();
        for (tool, a) in [
            (
                "mess_query",
                serde_json::json!({"sql": "SELECT * FROM threads"}),
            ),
            (
                "mess_fetch",
                serde_json::json!({"uri": "thread://2026-01-01-900"}),
            ),
        ] {
            let r = client
                .call_tool(CallToolRequestParams::new(tool).with_arguments(args(a)))
                .await
                .unwrap();
            let t = text(&r);
            assert!(
                !t.contains(&home.path().to_string_lossy().to_string()),
                "{tool}: {t}"
            );
        }
        intruder.cancel().await.unwrap();
        client.cancel().await.unwrap();
        // No key, no session.
        assert!(connect("mess_nope".into()).await.is_err());
    });
}

#[test]
fn agent_mail_through_mcp_tools() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // An agent session sends anywhere but reads only its own mailbox (and the broadcast
        // one); the operator reads every mailbox.
        let agent = stdio_client(&home).await;
        let r = tool(
            &agent,
            "mess_mail_send",
            serde_json::json!({"to": "claude-agent", "body": "note to self"}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let r = tool(&agent, "mess_mail_list", serde_json::json!({})).await;
        assert_eq!(r.structured_content.unwrap()["messages"][0]["from"], "claude-agent");
        let r = tool(&agent, "mess_mail_list", serde_json::json!({"mailbox": "worker"})).await;
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("only its own mailbox"), "{}", text(&r));
        agent.cancel().await.unwrap();
        let client = stdio_client_with(&home, &["--operator"]).await;
        let call = |name: &'static str, a: serde_json::Value| tool(&client, name, a);
        let r = call(
            "mess_mail_send",
            serde_json::json!({"to": "worker", "type": "task", "body": "## Review\n\nPlease review BUG-7.", "tags": ["BUG-7"], "needs_response": true}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let file = r.structured_content.unwrap()["file"].as_str().unwrap().to_owned();
        assert!(file.ends_with("_claude-agent_task.md"), "{file}");

        let r = call("mess_mail_list", serde_json::json!({"mailbox": "worker"})).await;
        let listed = r.structured_content.unwrap();
        assert_eq!(listed["messages"][0]["file"], file.as_str());
        assert_eq!(listed["messages"][0]["needs_response"], true);

        let r = call(
            "mess_mail_read",
            serde_json::json!({"mailbox": "worker", "file": file, "mark_read": true}),
        )
        .await;
        let read = r.structured_content.unwrap();
        assert_eq!((read["folder"].as_str(), read["tags"][0].as_str()), (Some("read"), Some("BUG-7")));
        assert!(read["body"].as_str().unwrap().contains("Please review"));
        let r = call(
            "mess_mail_read",
            serde_json::json!({"mailbox": "worker", "file": file, "mark_read": true}),
        )
        .await;
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("already read"), "{}", text(&r));
        let r = call(
            "mess_mail_archive",
            serde_json::json!({"mailbox": "worker", "file": file}),
        )
        .await;
        assert_eq!(r.structured_content.unwrap()["folder"], "archive");
        let r = call("mess_mail_send", serde_json::json!({"to": "../x", "body": "b"})).await;
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("not a usable mailbox name"), "{}", text(&r));
        client.cancel().await.unwrap();
    });
}

#[test]
fn tools_act_on_a_remote_exchange_named_by_exchange_and_the_local_one_keeps_working() {
    use crate::support::server::Server;
    let house = Home::with_config(CONFIG);
    let agent = house
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let robot = house
        .ok(&["token", "executor", "roomba-kitchen"])
        .trim()
        .to_owned();
    let server = Server::start(&house);
    let laptop = Home::with_config(&format!(
        "{CONFIG}exchanges:\n  house:\n    type: remote\n    url: http://127.0.0.1:{}\n    api_key: ${{HOUSE_KEY}}\n",
        server.port
    ));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", laptop.path())
            .env("MESS_AGENT_ID", "claude-agent")
            .env("HOUSE_KEY", &agent);
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let call = |name: &'static str, a: serde_json::Value| tool(&client, name, a);

        // A request on the house exchange, answered as from there.
        let r = call(
            "mess_do",
            serde_json::json!({"intent": "vacuum the kitchen", "requires": ["vacuum-floor"], "exchange": "house"}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let s = r.structured_content.clone().unwrap();
        assert_eq!(s["exchange"], "house", "{s}");
        let thread = s["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
        assert!(house.ok(&["status", &thread, "--as", "claude-agent"]).contains("pending"));
        let err = laptop.fails(&["show", &thread, "--as", "claude-agent"], 1);
        assert!(err.contains("not found") || err.contains("no thread"), "{err}");

        // Its status there; a robot of the house answers; a wait on it sees the answer.
        let st = call("mess_status", serde_json::json!({"re": thread, "exchange": "house"})).await;
        assert_eq!(st.is_error, Some(false), "{}", text(&st));
        assert!(text(&st).contains("exchange: house"), "{}", text(&st));
        let observed = call(
            "mess_observe",
            serde_json::json!({"intent": "is the hall clean?", "exchange": "house", "wait_s": 1}),
        )
        .await;
        let o = observed.structured_content.clone().unwrap();
        assert_eq!(o["timed_out"], true, "{o}");
        assert_eq!(o["thread"]["exchange"], "house", "{o}");
        house.ok(&["claim", &thread, "--as", "roomba-kitchen"]);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mess"))
            .args(["--exchange", &format!("http://127.0.0.1:{}", server.port)])
            .args(["complete", &thread, "--text", "kitchen done"])
            .env("MESS_API_KEY", &robot)
            .env("MESS_HOME", laptop.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let done = call("mess_status", serde_json::json!({"re": thread, "exchange": "house"})).await;
        assert!(text(&done).contains("kitchen done"), "{}", text(&done));

        // Open requests of the house, and a cancel there.
        let open = call("mess_status", serde_json::json!({"exchange": "house"})).await;
        assert!(text(&open).contains("is the hall clean?"), "{}", text(&open));
        let observed_ref = o["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
        assert_ne!(observed_ref, thread);
        let c = call(
            "mess_cancel",
            serde_json::json!({"re": observed_ref, "reason": "never mind", "exchange": "house"}),
        )
        .await;
        assert_eq!(c.is_error, Some(false), "{}", text(&c));
        assert!(house
            .ok(&["status", &observed_ref, "--as", "claude-agent"])
            .contains("cancelled"));

        // A question from the house's robot, answered there.
        let fridge = call(
            "mess_do",
            serde_json::json!({"intent": "clean the fridge", "exchange": "house"}),
        )
        .await;
        let fridge = fridge.structured_content.clone().unwrap()["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned();
        house.ok(&["claim", &fridge, "--as", "roomba-kitchen"]);
        house.ok(&[
            "update", &fridge, "--as", "roomba-kitchen", "--status", "needs_input",
            "--question", "shelves: which shelves?",
        ]);
        let answered = call(
            "mess_answer",
            serde_json::json!({"ref": fridge, "answer": "the top two", "exchange": "house"}),
        )
        .await;
        assert_eq!(answered.is_error, Some(false), "{}", text(&answered));
        assert!(house
            .ok(&["show", &fridge, "--as", "claude-agent"])
            .contains("the top two"));

        // The local exchange is this home; an unknown name is refused with the known ones.
        let here = call("mess_do", serde_json::json!({"intent": "dice the onions"})).await;
        assert_eq!(here.is_error, Some(false), "{}", text(&here));
        assert!(here.structured_content.clone().unwrap().get("exchange").is_none());
        // Without `exchange`, the listing covers every exchange, each thread marked.
        let plants = call(
            "mess_do",
            serde_json::json!({"intent": "water the plants", "exchange": "house"}),
        )
        .await;
        assert_eq!(plants.is_error, Some(false), "{}", text(&plants));
        let every = call("mess_status", serde_json::json!({})).await;
        let listed = every.structured_content.clone().unwrap();
        let marks: Vec<(String, String)> = listed["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["intent"].as_str().unwrap().to_owned(), t["exchange"].as_str().unwrap().to_owned()))
            .collect();
        assert!(marks.contains(&("water the plants".to_owned(), "house".to_owned())), "{marks:?}");
        assert!(marks.contains(&("dice the onions".to_owned(), "primary".to_owned())), "{marks:?}");
        let only_here = call("mess_status", serde_json::json!({"exchange": "primary"})).await;
        assert!(!text(&only_here).contains("water the plants"), "{}", text(&only_here));
        let bad = call("mess_status", serde_json::json!({"exchange": "nowhere"})).await;
        assert_eq!(bad.is_error, Some(true));
        assert!(text(&bad).contains("known: primary, house"), "{}", text(&bad));

        // The house goes down: its calls fail clearly, this exchange keeps working.
        drop(server);
        let down = call("mess_status", serde_json::json!({"re": thread, "exchange": "house"})).await;
        assert_eq!(down.is_error, Some(true));
        assert!(text(&down).contains("unreachable"), "{}", text(&down));
        let mine = call("mess_status", serde_json::json!({})).await;
        assert_eq!(mine.is_error, Some(false), "{}", text(&mine));
        assert!(text(&mine).contains("dice the onions"), "{}", text(&mine));
        let gone = mine.structured_content.clone().unwrap();
        assert_eq!(gone["unreachable"][0]["exchange"], "house", "{gone}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn tools_act_on_another_home_of_this_machine_named_by_exchange() {
    let pantry = Home::with_config(CONFIG);
    let laptop = Home::with_config(&format!(
        "{CONFIG}exchanges:\n  pantry:\n    type: local\n    path: {}\n",
        pantry.path().display()
    ));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = stdio_client(&laptop).await;
        let call = |name: &'static str, a: serde_json::Value| tool(&client, name, a);

        // A request in the pantry's home, answered as from there.
        let r = call(
            "mess_do",
            serde_json::json!({"intent": "vacuum the pantry", "requires": ["vacuum-floor"], "exchange": "pantry"}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let s = r.structured_content.clone().unwrap();
        assert_eq!(s["exchange"], "pantry", "{s}");
        assert!(text(&r).contains("exchange: pantry"), "{}", text(&r));
        let thread = s["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
        assert!(pantry.ok(&["show", &thread, "--as", "claude-agent"]).contains("vacuum the pantry"));
        let err = laptop.fails(&["show", &thread, "--as", "claude-agent"], 1);
        assert!(err.contains("not found") || err.contains("no thread"), "{err}");
        let st = call("mess_status", serde_json::json!({"re": thread, "exchange": "pantry"})).await;
        assert_eq!(st.structured_content.clone().unwrap()["exchange"], "pantry");

        // A wait on every exchange hears the pantry's robot, which works in another process.
        let claim = async {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"))
                .args(["claim", &thread, "--as", "roomba-kitchen"])
                .env("MESS_HOME", pantry.path())
                .output()
                .await
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        };
        let (waited, ()) = tokio::join!(
            call("mess_wait", serde_json::json!({"timeout_s": 20})),
            claim
        );
        let w = waited.structured_content.clone().unwrap();
        assert_eq!(w["timed_out"], false, "{w}");
        assert_eq!(w["updated"][0]["exchange"], "pantry", "{w}");
        assert_eq!(w["updated"][0]["ref"], thread.as_str(), "{w}");
        assert_eq!(w["updated"][0]["status"], "claimed", "{w}");

        // The listing covers both homes, each thread marked; a wait named there waits there.
        let here = call("mess_do", serde_json::json!({"intent": "dice the onions"})).await;
        assert_eq!(here.is_error, Some(false), "{}", text(&here));
        let every = call("mess_status", serde_json::json!({})).await;
        let listed = every.structured_content.clone().unwrap();
        let marks: Vec<(String, String)> = listed["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["intent"].as_str().unwrap().to_owned(), t["exchange"].as_str().unwrap().to_owned()))
            .collect();
        assert!(marks.contains(&("vacuum the pantry".to_owned(), "pantry".to_owned())), "{marks:?}");
        assert!(marks.contains(&("dice the onions".to_owned(), "primary".to_owned())), "{marks:?}");
        let pending = client
            .read_resource(rmcp::model::ReadResourceRequestParams::new("mess://pending"))
            .await
            .unwrap();
        let pending = format!("{pending:?}");
        assert!(pending.contains("exchange: pantry") && pending.contains("exchange: primary"), "{pending}");
        let named = call(
            "mess_wait",
            serde_json::json!({"re": thread, "exchange": "pantry", "timeout_s": 1}),
        )
        .await;
        let named = named.structured_content.clone().unwrap();
        assert_eq!(named["timed_out"], true, "{named}");
        assert_eq!(named["exchange"], "pantry", "{named}");

        // A cancel there; an unknown name lists this one too.
        let c = call(
            "mess_cancel",
            serde_json::json!({"re": thread, "reason": "never mind", "exchange": "pantry"}),
        )
        .await;
        assert_eq!(c.is_error, Some(false), "{}", text(&c));
        assert!(pantry.ok(&["status", &thread, "--as", "claude-agent"]).contains("cancelled"));
        let bad = call("mess_status", serde_json::json!({"exchange": "nowhere"})).await;
        assert!(text(&bad).contains("known: primary, pantry"), "{}", text(&bad));
        let missing = call("mess_status", serde_json::json!({"re": "2026-01-01-999", "exchange": "pantry"})).await;
        assert_eq!(missing.is_error, Some(true));
        assert!(text(&missing).contains("on exchange pantry"), "{}", text(&missing));
        client.cancel().await.unwrap();
    });
}
