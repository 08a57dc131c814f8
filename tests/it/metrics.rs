//! `GET /metrics`: Prometheus text for an operator key (or on `metrics.listen` for whoever
//! reaches it), read by the real Prometheus text parser (the Python `prometheus_client`),
//! with the counts of what the test did: messages by type and outcome, claims won and lost,
//! request latencies by route, routing passes, pending work by capability, and jobs.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{Home, free_port};

/// Parses Prometheus text with `prometheus_client`'s parser; one JSON object per sample:
/// `{"name", "labels", "value"}`.
fn parse(text: &str) -> Vec<Value> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/test, which installs prometheus_client",
        python.display()
    );
    let script = "import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append({'family': family.name, 'type': family.type, 'name': s.name, 'labels': s.labels, 'value': s.value})
print(json.dumps(out))";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(samples: &[Value], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s["name"] == name
                && labels
                    .iter()
                    .all(|(k, v)| s["labels"][*k].as_str() == Some(*v))
        })
        .and_then(|s| s["value"].as_f64())
}

#[test]
#[ignore = "drives .venv's python (prometheus_client); .ci/test runs it"]
fn metrics_count_messages_claims_routes_and_queues_for_an_operator() {
    let listen = free_port();
    let home = Home::with_config(&format!(
        "agent_id: claude-agent
executors:
  teague-phone:
    capabilities: [take-photo]
  sam-phone:
    capabilities: [take-photo]
  roomba-kitchen:
    capabilities: [vacuum-floor]
metrics:
  listen: 127.0.0.1:{listen}
"
    ));
    let agent = home.token("agent", "claude-agent");
    let teague = home.token("executor", "teague-phone");
    let sam = home.token("executor", "sam-phone");
    let operator = home
        .ok(&["token", "operator", "prometheus"])
        .trim()
        .to_owned();
    let server = Server::start(&home);

    let request = |intent: &str, cap: &str| {
        let (status, body) = server.post_yaml(
            &agent,
            &format!("MESS:\n  - v: \"1.0\"\n  - request:\n      intent: {intent}\n      requires: [{cap}]\n"),
        );
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned()
    };
    let photo = request("what's in the fridge?", "take-photo");
    request("vacuum the hall", "vacuum-floor");
    request("vacuum the kitchen", "vacuum-floor");
    let claim =
        format!("MESS:\n  - v: \"1.0\"\n  - status:\n      re: {photo}\n      code: claimed\n");
    assert_eq!(server.post_yaml(&teague, &claim).0, 200);
    assert_eq!(server.post_yaml(&sam, &claim).0, 409);
    // Nobody but an operator reads /metrics on the API's address.
    assert_eq!(server.get("/metrics", "").0, 401);
    assert_eq!(server.get("/metrics", &agent).0, 401);
    // Routing runs in the background: wait (briefly) for its first pass to be counted.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let (text, samples) = loop {
        let (status, text) = server.get("/metrics", &operator);
        assert_eq!(status, 200, "{text}");
        let samples = parse(&text);
        if sample(&samples, "mess_routing_passes_total", &[]).is_some_and(|n| n >= 1.0)
            || std::time::Instant::now() > until
        {
            break (text, samples);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };

    let at_least = |name: &str, labels: &[(&str, &str)], want: f64| {
        let got = sample(&samples, name, labels)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"));
        assert!(
            got >= want,
            "{name} {labels:?} = {got}, want at least {want}"
        );
    };
    at_least(
        "mess_messages_total",
        &[("type", "request"), ("outcome", "ok")],
        3.0,
    );
    at_least(
        "mess_messages_total",
        &[("type", "status"), ("outcome", "conflict")],
        1.0,
    );
    assert_eq!(
        sample(&samples, "mess_claims_total", &[("outcome", "won")]),
        Some(1.0)
    );
    assert_eq!(
        sample(&samples, "mess_claims_total", &[("outcome", "lost")]),
        Some(1.0)
    );
    at_least(
        "mess_http_request_duration_seconds_count",
        &[("route", "/mess"), ("method", "POST"), ("status", "2xx")],
        4.0,
    );
    at_least(
        "mess_http_request_duration_seconds_bucket",
        &[("route", "/mess"), ("status", "2xx"), ("le", "+Inf")],
        4.0,
    );
    at_least("mess_routing_passes_total", &[], 1.0);
    at_least("mess_routing_pass_duration_seconds_count", &[], 1.0);
    assert_eq!(
        sample(
            &samples,
            "mess_pending_threads",
            &[("capability", "vacuum-floor")]
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&samples, "mess_open_threads", &[("state", "executing")]),
        Some(1.0)
    );
    assert!(
        sample(&samples, "mess_jobs_due", &[("kind", "notice")]).is_some(),
        "{text}"
    );
    assert_eq!(sample(&samples, "mess_executors", &[]), Some(3.0));
    let build = samples
        .iter()
        .find(|s| s["name"] == "mess_build_info")
        .unwrap_or_else(|| panic!("no build info in\n{text}"));
    assert!(!build["labels"]["commit"].as_str().unwrap().is_empty());
    // Every family is ours.
    assert!(
        samples
            .iter()
            .all(|s| s["name"].as_str().unwrap().starts_with("mess_"))
    );
    // A query: counted with its duration.
    let (status, _) = server.get("/query?sql=select%201", &agent);
    assert_eq!(status, 200);

    // metrics.listen answers without a key, and only /metrics.
    let port = listen.to_string();
    let raw = |path: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", listen)).unwrap();
        use std::io::{Read, Write};
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let open = raw("/metrics");
    assert!(open.starts_with("HTTP/1.1 200"), "{open:.300}");
    let body = open.split_once("\r\n\r\n").unwrap().1;
    let samples = parse(body);
    at_least_in(&samples, "mess_queries_total", &[("outcome", "ok")], 1.0);
    assert!(raw("/threads").starts_with("HTTP/1.1 404"));
}

fn at_least_in(samples: &[Value], name: &str, labels: &[(&str, &str)], want: f64) {
    let got = sample(samples, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?}"));
    assert!(got >= want, "{name} {labels:?} = {got}");
}
