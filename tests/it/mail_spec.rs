//! Agent mail as the agent mail format specifies it, through the real binary: `__broadcast`
//! read per session, tag mailboxes shared by the sessions their registration tags, `expires`
//! and the pruning of expired mail and old archive, and the format's own message types.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::Home;
use crate::support::server::Server;

/// An MCP client session over `/mcp` with `key`.
type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn connect(server: &Server, key: &str) -> Client {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    // rmcp's HTTP client is reqwest over rustls, which needs its crypto provider chosen.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    ().serve(StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(key.to_owned()),
    ))
    .await
    .unwrap()
}

/// Calls tool `name`: whether it failed, its text, its structured content.
async fn call(client: &Client, name: &'static str, a: Value) -> (bool, String, Value) {
    let r = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(a.as_object().cloned().unwrap()))
        .await
        .unwrap();
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

/// The files of one mailbox listed through MCP (`folder` unread, read or archive).
async fn listed(client: &Client, mailbox: &str, folder: &str) -> Vec<String> {
    let (failed, text, s) = call(
        client,
        "mess_mail_list",
        json!({"mailbox": mailbox, "folder": folder}),
    )
    .await;
    assert!(!failed, "{text}");
    s["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["file"].as_str().unwrap().to_owned())
        .collect()
}

/// A message file written by another tool (or long ago) into `dir` of the home.
fn hand_written(home: &Home, dir: &str, file: &str, front: &str) {
    let dir = home.path().join(".mail").join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(file), format!("---\n{front}---\n\nbody\n")).unwrap();
}

#[test]
fn a_broadcast_read_by_one_session_stays_unread_for_every_other() {
    let home = Home::with_config("");
    let sent = home.ok(&[
        "--as",
        "nexus",
        "mail",
        "send",
        "--to",
        "__broadcast",
        "--type",
        "announcement",
        "--body",
        "all hands at noon",
    ]);
    let file = sent.trim().strip_prefix("__broadcast/").unwrap().to_owned();
    assert!(file.ends_with("_nexus_announcement.md"), "{file}");
    let list = |who: &str, folder: &str| {
        home.ok(&[
            "--as",
            who,
            "mail",
            "list",
            "__broadcast",
            "--folder",
            folder,
        ])
    };
    let marked = home.ok(&[
        "--as",
        "worker-1",
        "mail",
        "mark-read",
        "--mailbox",
        "__broadcast",
        &file,
    ]);
    assert_eq!(marked.trim(), format!("__broadcast/read/{file}"));
    assert!(!list("worker-1", "unread").contains(&file));
    assert!(list("worker-1", "read").contains(&file));
    assert!(list("worker-2", "unread").contains(&file));
    assert!(!list("worker-2", "read").contains(&file));
    let again = home.fails(
        &[
            "--as",
            "worker-1",
            "mail",
            "mark-read",
            "--mailbox",
            "__broadcast",
            &file,
        ],
        1,
    );
    assert!(again.contains("already read by worker-1"), "{again}");
    home.ok(&[
        "--as",
        "worker-2",
        "mail",
        "mark-read",
        "--mailbox",
        "__broadcast",
        &file,
    ]);
    assert!(list("worker-3", "unread").contains(&file));
    let read = home.ok(&[
        "--as",
        "worker-1",
        "mail",
        "read",
        "--mailbox",
        "__broadcast",
        &file,
    ]);
    assert!(
        read.contains("(read)") && read.contains("read_at"),
        "{read}"
    );
}

#[test]
fn expiring_mail_from_the_command_line_and_the_format_s_types() {
    let home = Home::with_config("");
    let send = |extra: &[&str]| {
        let mut args = vec![
            "--as", "orch", "mail", "send", "--to", "worker", "--body", "b",
        ];
        args.extend_from_slice(extra);
        home.run(&args)
    };
    let out = send(&["--type", "task", "--expires", "2h"]);
    assert!(out.status.success(), "{out:?}");
    let file = String::from_utf8(out.stdout).unwrap();
    let file = file.trim().strip_prefix("worker/").unwrap().to_owned();
    let read = home.ok(&["--as", "worker", "mail", "read", &file]);
    assert!(read.contains("expires   20"), "{read}");
    let bad = send(&["--expires", "2020-01-01T00:00:00Z"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("expires: 2020-01-01T00:00:00Z is not in the future"),
        "{bad:?}"
    );
    // The format's own announcement, and a type it does not list, are kept; an unsafe one is not.
    for kind in ["announcement", "digest"] {
        let out = send(&["--type", kind]);
        assert!(out.status.success(), "{kind}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .ends_with(&format!("_orch_{kind}.md")),
            "{out:?}"
        );
    }
    let bad = send(&["--type", "../x"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not a usable message type"),
        "{bad:?}"
    );

    // Written by another tool: an expired message, and archive older than 90 days.
    hand_written(
        &home,
        "worker",
        "20260101T000000Z_orch_task.md",
        "from: orch\nto: worker\ntype: task\ntimestamp: 2026-01-01T00:00:00Z\nexpires: 2026-01-02T00:00:00Z\n",
    );
    hand_written(
        &home,
        "worker/archive",
        "20200101T000000Z_orch_report.md",
        "from: orch\nto: worker\ntype: report\ntimestamp: 2020-01-01T00:00:00Z\n",
    );
    hand_written(
        &home,
        "other",
        "20200101T000000Z_orch_alert.md",
        "from: orch\nto: other\ntype: alert\ntimestamp: 2020-01-01T00:00:00Z\nexpires: 2020-01-02T00:00:00Z\n",
    );
    let list = home.ok(&["--as", "worker", "mail", "list"]);
    assert!(!list.contains("20260101T000000Z"), "{list}");
    assert!(list.contains(&file), "{list}");
    assert!(
        !home
            .path()
            .join(".mail/worker/20260101T000000Z_orch_task.md")
            .exists()
    );
    let gone = home.fails(
        &[
            "--as",
            "worker",
            "mail",
            "read",
            "20260101T000000Z_orch_task.md",
        ],
        1,
    );
    assert!(gone.contains("no message"), "{gone}");
    let pruned = home.ok(&["mail", "prune"]);
    assert!(pruned.starts_with("deleted 2 "), "{pruned}");
    assert!(
        !home
            .path()
            .join(".mail/worker/archive/20200101T000000Z_orch_report.md")
            .exists()
    );
    assert!(home.ok(&["mail", "prune"]).starts_with("deleted 0 "));
}

#[test]
fn a_server_sweeps_expired_mail_that_nobody_lists() {
    let home = Home::with_config("");
    let expired = home
        .path()
        .join(".mail/worker/20260101T000000Z_orch_task.md");
    hand_written(
        &home,
        "worker",
        "20260101T000000Z_orch_task.md",
        "from: orch\nto: worker\ntype: task\ntimestamp: 2026-01-01T00:00:00Z\nexpires: 2026-01-02T00:00:00Z\n",
    );
    hand_written(
        &home,
        "worker",
        "20260101T000000Z_orch_status.md",
        "from: orch\nto: worker\ntype: status\ntimestamp: 2026-01-01T00:00:00Z\n",
    );
    let _server = Server::start(&home);
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while expired.exists() {
        assert!(
            std::time::Instant::now() < until,
            "the expired message is still there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        home.path()
            .join(".mail/worker/20260101T000000Z_orch_status.md")
            .exists()
    );
}

/// Executors of config.yaml with mail tags: `scribe` shares `reviewers`; its other tags name a
/// key holder's and an executor's own mailboxes, which no tag opens.
const TAGGED: &str = "agent_id: claude-agent
executors:
  scribe:
    capabilities: [check-visual]
    tags: [reviewers, claude-agent, teague-phone]
  proof:
    capabilities: [check-visual]
    tags: [reviewers]
  teague-phone:
    capabilities: [take-photo]
";

#[test]
fn keys_read_their_tag_mailboxes_and_broadcast_for_themselves_over_mcp() {
    let home = Home::with_config(TAGGED);
    let scribe = home.ok(&["token", "executor", "scribe"]).trim().to_owned();
    let proof = home.ok(&["token", "executor", "proof"]).trim().to_owned();
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let selfie = home.ok(&["token", "executor", "selfie"]).trim().to_owned();
    home.ok(&[
        "--as",
        "claude-agent",
        "mail",
        "send",
        "--to",
        "claude-agent",
        "--body",
        "private",
    ]);
    let task = home.ok(&[
        "--as",
        "orch",
        "mail",
        "send",
        "--to",
        "reviewers",
        "--type",
        "task",
        "--body",
        "review BUG-7",
    ]);
    let task = task.trim().strip_prefix("reviewers/").unwrap().to_owned();
    let server = Server::start(&home);
    // A key holder that tags its own registration joins nothing.
    let (status, body) = server.post_yaml(
        &selfie,
        "MESS:\n  - config:\n      executor: {id: selfie, capabilities: [take-photo], tags: [reviewers]}\n",
    );
    assert_eq!(status, 200, "{body}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let scribe = connect(&server, &scribe).await;
        let proof = connect(&server, &proof).await;
        let agent = connect(&server, &agent).await;
        let selfie = connect(&server, &selfie).await;

        // Both tagged sessions see the shared mailbox; the first to mark a message read gets it.
        assert_eq!(listed(&scribe, "reviewers", "unread").await, [task.as_str()]);
        assert_eq!(listed(&proof, "reviewers", "unread").await, [task.as_str()]);
        let (failed, text, s) = call(
            &proof,
            "mess_mail_read",
            json!({"mailbox": "reviewers", "file": task, "mark_read": true}),
        )
        .await;
        assert!(!failed, "{text}");
        assert_eq!(s["folder"], "read");
        let (failed, text, _) = call(
            &scribe,
            "mess_mail_read",
            json!({"mailbox": "reviewers", "file": task, "mark_read": true}),
        )
        .await;
        assert!(failed && text.contains("already read"), "{text}");
        let (failed, text, _) = call(
            &scribe,
            "mess_mail_archive",
            json!({"mailbox": "reviewers", "file": task}),
        )
        .await;
        assert!(!failed, "{text}");

        // Nobody else reads it: not an untagged key, not a self-made tag; and a tag naming a
        // principal's own mailbox opens nothing.
        for (client, mailbox) in [
            (&agent, "reviewers"),
            (&selfie, "reviewers"),
            (&scribe, "claude-agent"),
            (&scribe, "teague-phone"),
        ] {
            let (failed, text, _) =
                call(client, "mess_mail_list", json!({"mailbox": mailbox})).await;
            assert!(failed, "{mailbox}: {text}");
            assert!(text.contains("only its own mailbox"), "{text}");
        }

        // __broadcast: each session marks a message read for itself alone, and none archives it.
        let (failed, text, s) = call(
            &agent,
            "mess_mail_send",
            json!({"to": "__broadcast", "type": "announcement", "body": "deploy at 5", "expires": "1d"}),
        )
        .await;
        assert!(!failed, "{text}");
        let shout = s["file"].as_str().unwrap().to_owned();
        let (failed, text, s) = call(
            &scribe,
            "mess_mail_read",
            json!({"mailbox": "__broadcast", "file": shout, "mark_read": true}),
        )
        .await;
        assert!(!failed, "{text}");
        assert!(s["expires"].is_string() && s["read_at"].is_string(), "{s}");
        assert!(listed(&scribe, "__broadcast", "unread").await.is_empty());
        assert_eq!(listed(&scribe, "__broadcast", "read").await, [shout.as_str()]);
        for other in [&proof, &agent, &selfie] {
            assert_eq!(listed(other, "__broadcast", "unread").await, [shout.as_str()]);
        }
        let (failed, text, _) = call(
            &proof,
            "mess_mail_archive",
            json!({"mailbox": "__broadcast", "file": shout}),
        )
        .await;
        assert!(failed && text.contains("do not archive"), "{text}");
        let (failed, text, _) = call(
            &agent,
            "mess_mail_send",
            json!({"to": "reviewers", "body": "x", "expires": "yesterday"}),
        )
        .await;
        assert!(failed && text.contains("expires"), "{text}");
        for client in [scribe, proof, agent, selfie] {
            client.cancel().await.unwrap();
        }
    });
}
