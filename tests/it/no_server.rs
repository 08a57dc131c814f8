//! Notices without `mess serve`: the background work runs in whichever long-lived process holds the
//! home (`mess serve` or an agent host's `mess mcp`), the others take over when it exits, one-shot
//! commands, `mess status` and MCP answers say when queued notices have nobody to send them, and
//! `mess mcp` reads the reference design's `~/.config/mess-mcp/config.yaml` and can serve the HTTP
//! API and the human page (`--http`, `http.enabled`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;

use crate::support::Home;
use crate::support::free_port;
use crate::support::recorder::{Hit, Recorder};
use crate::support::server::Server;

/// A home whose one executor is notified by webhook at the recorder (config.yaml's entry: the
/// operator's, so loopback is allowed).
fn home(recorder: &Recorder) -> Home {
    Home::with_config(&format!(
        "agent_id: claude-agent
dispatch:
  timeout: 1s
  retry: {{attempts: 3, first: 0.1s, max: 0.2s}}
executors:
  teague-phone:
    capabilities: [check-visual]
    notify:
      webhook: {}/hook
",
        recorder.url
    ))
}

fn hooks(hits: &[Hit]) -> usize {
    hits.iter().filter(|h| h.path == "/hook").count()
}

/// `mess request` as claude-agent; returns the ref and what the command warned.
fn request(home: &Home, intent: &str) -> (String, String) {
    let out = home.run(&[
        "--as",
        "claude-agent",
        "request",
        intent,
        "--requires",
        "check-visual",
    ]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = stdout
        .split_whitespace()
        .find(|w| w.starts_with("20") && w.len() >= 14)
        .unwrap_or_else(|| panic!("no ref in {stdout}"))
        .to_owned();
    (r, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `mess mcp` on the home with stdin held open (the session lasts until it is closed).
fn mcp_session(home: &Home, extra: &[&str]) -> Child {
    home.command(&[&["mcp"][..], extra].concat())
        .env("MESS_AGENT_ID", "claude-agent")
        .env("MESS_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// `GET path` on 127.0.0.1:`port`, retried while the port does not answer yet; the status.
fn http_status(port: u16, path: &str) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            );
            let mut raw = String::new();
            let _ = s.read_to_string(&mut raw);
            if let Some(code) = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()) {
                return code;
            }
        }
        assert!(Instant::now() < deadline, "nothing answers on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_agent_hosts_mcp_session_sends_the_notices_and_a_server_takes_over_when_it_ends() {
    let recorder = Recorder::start();
    let home = home(&recorder);
    // A one-shot command queues the notice and says nobody sends it.
    let (first, warned) = request(&home, "is the garage door closed?");
    assert!(
        warned.contains("1 notice queued and no process sends them"),
        "{warned}"
    );
    let status = home.run(&["status"]);
    assert!(
        String::from_utf8_lossy(&status.stderr).contains("no process sends them"),
        "{status:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(hooks(&recorder.hits()), 0, "nothing runs yet");

    // The reference design's "no separate server needed": the agent host's session sends it.
    let mut session = mcp_session(&home, &[]);
    let hits = recorder.wait_for(Duration::from_secs(15), |h| hooks(h) >= 1);
    assert_eq!(hooks(&hits), 1);
    assert!(hits[0].body.contains(&first), "{}", hits[0].body);
    let shown = home.ok(&["show", &first]);
    assert!(
        shown.contains("notified teague-phone via webhook"),
        "{shown}"
    );
    let quiet = home.run(&["status"]);
    assert!(
        !String::from_utf8_lossy(&quiet.stderr).contains("notice"),
        "{quiet:?}"
    );

    // A server started meanwhile stands by, then takes over when the session ends.
    let _server = Server::start(&home);
    // An agent host ends its session by closing stdin.
    drop(session.stdin.take());
    session.wait().unwrap();
    let (second, _) = request(&home, "is the back door locked?");
    let hits = recorder.wait_for(Duration::from_secs(15), |h| hooks(h) >= 2);
    assert_eq!(hooks(&hits), 2, "each notice once");
    assert!(hits[1].body.contains(&second));
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn mcp_answers_say_when_notices_are_overdue_and_a_standby_session_takes_over() {
    let recorder = Recorder::start();
    let home = home(&recorder);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // A worker that holds the home and sends nothing: this test, holding the lock.
        let locks = home.path().join(".mess/locks");
        std::fs::create_dir_all(&locks).unwrap();
        let stuck = std::fs::File::create(locks.join("worker.lock")).unwrap();
        stuck.lock().unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", home.path())
            .env("MESS_AGENT_ID", "claude-agent")
            .env("MESS_NOTICE_OVERDUE_MS", "3000");
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let call = |name: &'static str, a: serde_json::Value| {
            client.call_tool(
                CallToolRequestParams::new(name).with_arguments(a.as_object().cloned().unwrap()),
            )
        };
        let done = call(
            "mess_do",
            serde_json::json!({"intent": "check the garage", "requires": ["check-visual"]}),
        )
        .await
        .unwrap();
        assert!(
            !text(&done).contains("note:"),
            "not overdue yet: {}",
            text(&done)
        );
        tokio::time::sleep(Duration::from_millis(3200)).await;
        let status = call("mess_status", serde_json::json!({})).await.unwrap();
        assert!(
            text(&status).contains("note: 1 notice due for over 3s and not sent"),
            "{}",
            text(&status)
        );
        assert_eq!(hooks(&recorder.hits()), 0);
        // The stuck worker goes; the session standing by takes over and sends.
        drop(stuck);
        let hits = recorder.wait_for(Duration::from_secs(15), |h| hooks(h) >= 1);
        assert_eq!(hooks(&hits), 1);
        // Sent, then recorded: the note goes once the record is written.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = call("mess_status", serde_json::json!({})).await.unwrap();
            if !text(&status).contains("note:") {
                break;
            }
            assert!(Instant::now() < deadline, "{}", text(&status));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.cancel().await.unwrap();
    });
}

#[test]
fn mcp_reads_the_plans_config_file_and_serves_the_page_when_http_is_enabled() {
    let recorder = Recorder::start();
    let home = home(&recorder);
    let xdg = tempfile::TempDir::new().unwrap();
    let port = free_port();
    std::fs::create_dir_all(xdg.path().join("mess-mcp")).unwrap();
    std::fs::write(
        xdg.path().join("mess-mcp/config.yaml"),
        format!(
            "# ~/.config/mess-mcp/config.yaml\nagent_id: kitchen-agent\n\nexchange:\n  type: local\n  path: {}\n\nhttp:\n  enabled: true\n  port: {port}\n",
            home.path().display()
        ),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env_remove("MESS_HOME")
            .env_remove("MESS_AGENT_ID")
            .env("XDG_CONFIG_HOME", xdg.path());
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let done = client
            .call_tool(
                CallToolRequestParams::new("mess_observe").with_arguments(
                    serde_json::json!({"intent": "what is in the fridge?", "wait_s": 0})
                        .as_object()
                        .cloned()
                        .unwrap(),
                ),
            )
            .await
            .unwrap();
        assert_ne!(done.is_error, Some(true), "{}", text(&done));
        // The session acts as the file's agent, on the file's home.
        let listed = home.ok(&["--as", "kitchen-agent", "status", "--format", "json"]);
        assert!(listed.contains("what is in the fridge?"), "{listed}");
        assert_eq!(http_status(port, "/healthz"), 200);
        assert_eq!(http_status(port, "/respond"), 200);
        client.cancel().await.unwrap();
    });

    // A type the session cannot serve is refused by name.
    std::fs::write(
        xdg.path().join("mess-mcp/config.yaml"),
        "exchange: {type: remote, url: https://mess.example}\n",
    )
    .unwrap();
    let out = home
        .command(&["mcp"])
        .env("XDG_CONFIG_HOME", xdg.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("exchange.type \"remote\""),
        "{err}"
    );
}

#[test]
fn mcp_serves_http_on_the_address_given() {
    let recorder = Recorder::start();
    let home = home(&recorder);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut session = mcp_session(&home, &["--http", &addr]);
    assert_eq!(http_status(port, "/healthz"), 200);
    drop(session.stdin.take());
    session.wait().unwrap();
}
