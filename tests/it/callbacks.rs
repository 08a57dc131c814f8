//! Callbacks for agents: a request with `callback: URL` makes the exchange POST the thread,
//! signed like an executor webhook, to that URL on every change the requestor would want to
//! hear of (a new status, a question, the response), through the durable delivery queue; the
//! URL must pass the operator's allow-list at the door.

use std::time::Duration;

use crate::support::recorder::{Hit, Recorder};
use crate::support::server::Server;
use crate::support::{CONFIG, Home};

const SECRET: &str = "callback-signing-key-for-tests-0123456789";

fn with_webhooks(allow: &str) -> String {
    format!("{CONFIG}dispatch:\n  webhook:\n    secret: {SECRET}\n    allow: {allow}\n")
}

fn callbacks(hits: &[Hit]) -> Vec<&Hit> {
    hits.iter().filter(|h| h.path == "/agent-cb").collect()
}

fn signed(hit: &Hit) -> bool {
    let stamp: i64 = hit.headers["x-mess-timestamp"].parse().unwrap();
    hit.headers["x-mess-signature"]
        == mess::notify::sign(
            SECRET.as_bytes(),
            stamp,
            &hit.headers["x-mess-delivery"],
            hit.body.as_bytes(),
        )
}

#[test]
fn an_agent_hears_every_change_of_its_request_on_its_callback_signed() {
    let agent_side = Recorder::start();
    let home = Home::with_config(&with_webhooks("[127.0.0.1]"));
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let robot = home
        .ok(&["token", "executor", "roomba-kitchen"])
        .trim()
        .to_owned();
    let server = Server::start(&home);
    let (status, body) = server.post_yaml(
        &agent,
        &format!(
            "MESS:\n  - request:\n      intent: vacuum the kitchen\n      requires: [vacuum-floor]\n      callback: {}/agent-cb\n",
            agent_side.url
        ),
    );
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    let send = |key: &str, yaml: String| {
        let (status, body) = server.post_yaml(key, &yaml);
        assert_eq!(status, 200, "{body}");
    };
    // Routing notes the dispatch but changes nothing the agent waits for: no callback yet.
    std::thread::sleep(Duration::from_millis(500));
    assert!(callbacks(&agent_side.hits()).is_empty());

    // Each change is called back with the thread as it is when sent; here each change waits
    // for the callback of the one before, so each body shows its own.
    let heard = |n: usize| {
        agent_side.wait_for(Duration::from_secs(15), |h| callbacks(h).len() >= n);
    };
    send(
        &robot,
        format!("MESS:\n  - status: {{re: {r}, code: claimed}}\n"),
    );
    heard(1);
    send(
        &robot,
        format!(
            "MESS:\n  - status:\n      re: {r}\n      code: needs_input\n      questions:\n        - field: where\n          question: which room first?\n"
        ),
    );
    heard(2);
    // The agent's own answer is not called back to it.
    send(
        &agent,
        format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{where: hall}}\n"),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(callbacks(&agent_side.hits()).len(), 2);
    send(
        &robot,
        format!(
            "MESS:\n  - status: {{re: {r}, code: completed}}\n  - response:\n      re: {r}\n      content:\n        - kitchen vacuumed\n"
        ),
    );
    heard(3);
    // Nothing more comes: one callback per change.
    std::thread::sleep(Duration::from_millis(500));
    let got: Vec<Hit> = callbacks(&agent_side.hits()).into_iter().cloned().collect();
    assert_eq!(got.len(), 3, "{got:#?}");
    let mut seen = std::collections::HashSet::new();
    for h in &got {
        assert_eq!(h.headers["x-mess-event"], "changed");
        assert_eq!(h.headers["x-mess-thread"], r);
        assert!(signed(h), "not signed with the exchange's key: {h:#?}");
        assert!(
            seen.insert(h.headers["x-mess-delivery"].clone()),
            "{got:#?}"
        );
    }
    let bodies: Vec<&str> = got.iter().map(|h| h.body.as_str()).collect();
    assert!(
        bodies.iter().any(|b| b.contains("status: claimed")),
        "{bodies:#?}"
    );
    assert!(
        bodies.iter().any(|b| b.contains("status: needs_input")),
        "{bodies:#?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("status: completed") && b.contains("kitchen vacuumed")),
        "{bodies:#?}"
    );
    // The thread's history stays the requestor's business: no "notified" entries for it.
    let shown = home.ok(&["show", &r, "--as", "claude-agent"]);
    assert!(!shown.contains("via callback"), "{shown}");

    // The command line takes it too; the envelope keeps it.
    let said = home.ok(&[
        "request",
        "water the plants",
        "--callback",
        &format!("{}/agent-cb", agent_side.url),
    ]);
    assert!(said.contains("20"), "{said}");
    let listed = home.ok(&["show", "last", "--as", "claude-agent"]);
    assert!(listed.contains("callback: http://127.0.0.1"), "{listed}");
}

#[test]
fn a_callback_the_allow_list_does_not_permit_is_refused_at_the_door() {
    let home = Home::with_config(&with_webhooks("[]"));
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let server = Server::start(&home);
    for (callback, says) in [
        ("http://127.0.0.1:9/cb", "dispatch.webhook.allow"),
        ("http://10.0.0.7/cb", "dispatch.webhook.allow"),
        ("file:///etc/passwd", "callback"),
        ("[1, 2]", "callback"),
    ] {
        let (status, body) = server.post_yaml(
            &agent,
            &format!("MESS:\n  - request:\n      intent: x\n      callback: {callback}\n"),
        );
        assert_eq!(status, 422, "{callback}: {body}");
        assert!(
            body.contains(says) && body.contains("callback"),
            "{callback}: {body}"
        );
    }
    let err = home.fails(&["request", "x", "--callback", "http://localhost:9/cb"], 1);
    assert!(err.contains("callback"), "{err}");
    // Nothing was created.
    let all = home.ok(&[
        "status",
        "--all",
        "--as",
        "claude-agent",
        "--format",
        "json",
    ]);
    assert!(!all.contains("\"intent\": \"x\""), "{all}");
}

#[test]
fn an_agent_keys_callback_stands_in_for_requests_that_name_none() {
    let agent_side = Recorder::start();
    let home = Home::with_config(&with_webhooks("[127.0.0.1]"));
    let url = format!("{}/agent-cb", agent_side.url);
    let agent = home
        .ok(&["token", "agent", "claude-agent", "--callback", &url])
        .trim()
        .to_owned();
    let plain = home
        .ok(&["token", "agent", "other-agent"])
        .trim()
        .to_owned();
    let robot = home
        .ok(&["token", "executor", "roomba-kitchen"])
        .trim()
        .to_owned();
    // Held to the allow-list, and an agent's alone.
    let err = home.fails(
        &["token", "agent", "x", "--callback", "http://10.1.2.3/cb"],
        1,
    );
    assert!(
        err.contains("callback") && err.contains("10.1.2.3"),
        "{err}"
    );
    let err = home.fails(
        &["token", "executor", "roomba-kitchen", "--callback", &url],
        2,
    );
    assert!(err.contains("--callback"), "{err}");

    let server = Server::start(&home);
    let create = |key: &str, extra: &str| {
        let (status, body) = server.post_yaml(
            key,
            &format!(
                "MESS:\n  - request:\n      intent: vacuum the kitchen\n      requires: [vacuum-floor]\n{extra}"
            ),
        );
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned()
    };
    let keyed = create(&agent, "");
    let own = create(
        &agent,
        &format!("      callback: {}/own-cb\n", agent_side.url),
    );
    let other = create(&plain, "");
    // The key's callback is the envelope's; the request in the file is as it was sent.
    let file = home.ok(&["show", &keyed, "--as", "claude-agent"]);
    assert_eq!(file.matches(&url).count(), 1, "{file}");
    for r in [&keyed, &own, &other] {
        let (status, body) = server.post_yaml(
            &robot,
            &format!("MESS:\n  - status: {{re: {r}, code: claimed}}\n"),
        );
        assert_eq!(status, 200, "{body}");
    }
    agent_side.wait_for(Duration::from_secs(15), |h| {
        h.iter().filter(|h| h.path.ends_with("-cb")).count() >= 2
    });
    std::thread::sleep(Duration::from_millis(500));
    let hits = agent_side.hits();
    let threads = |path: &str| -> Vec<String> {
        hits.iter()
            .filter(|h| h.path == path)
            .map(|h| h.headers["x-mess-thread"].clone())
            .collect()
    };
    assert_eq!(threads("/agent-cb"), vec![keyed.clone()]);
    assert_eq!(threads("/own-cb"), vec![own.clone()]);
    assert!(hits.iter().filter(|h| h.path.ends_with("-cb")).all(signed));
}
