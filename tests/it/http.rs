//! The HTTP API end to end: the real `mess serve` on loopback, real keys, a full lifecycle, every
//! error code of docs/reference/http.md, hostile input, and concurrent claims.

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn key(home: &Home, role: &str, id: &str) -> String {
    home.ok(&["token", role, id]).trim().to_owned()
}

/// The error code of an error body, after checking it has the documented shape and names no
/// server path.
fn error_code(body: &str) -> String {
    let v = json(body);
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{body}");
    assert!(
        !message.contains("/tmp/") && !message.contains(".mess/"),
        "server path in {body}"
    );
    v["error"]["code"].as_str().unwrap().to_owned()
}

#[test]
fn a_request_goes_through_its_whole_lifecycle_over_http() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let robot = key(&home, "executor", "roomba-kitchen");
    let phone = key(&home, "executor", "teague-phone");
    let server = Server::start(&home);

    let (status, body) = server.send("GET", "/healthz", &[], b"");
    assert_eq!((status, json(&body)["status"].as_str()), (200, Some("ok")));
    let (status, body) = server.get("/executors", &agent);
    assert_eq!(status, 200);
    let executors = json(&body)["executors"].clone();
    let ids: Vec<&str> = executors
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(ids, ["teague-phone", "roomba-kitchen"]);
    let (_, body) = server.get("/capabilities", &agent);
    let caps = json(&body)["capabilities"].clone();
    assert!(
        caps.as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "vacuum-floor" && c["executors"][0] == "roomba-kitchen"),
        "{caps}"
    );

    let auth = format!("Bearer {agent}");
    let (status, body) = server.send(
        "POST",
        "/mess",
        &[("Authorization", &auth), ("Content-Type", "application/json")],
        br#"{"MESS":[{"request":{"intent":"vacuum the kitchen","requires":["vacuum-floor"],"ref":"2020-01-01-001","status":"completed","created":"2020-01-01T00:00:00Z"}}]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let r = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(
        r, "2020-01-01-001",
        "envelope fields in a request are not assignable"
    );

    // The capable executor sees it; one without the capability does not.
    let (_, body) = server.get("/threads?status=pending", &robot);
    assert_eq!(json(&body)["threads"][0]["ref"], r.as_str());
    assert_eq!(json(&body)["threads"][0]["status"], "pending");
    let (_, body) = server.get("/threads", &phone);
    assert_eq!(
        json(&body)["threads"].as_array().unwrap().len(),
        0,
        "{body}"
    );
    let (status, body) = server.get(&format!("/threads/{r}"), &phone);
    assert_eq!((status, error_code(&body).as_str()), (404, "not_found"));

    let claim =
        format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n      estimate: PT20M\n");
    let (status, body) = server.post_yaml(&phone, &claim);
    assert_eq!(
        (status, error_code(&body).as_str()),
        (404, "not_found"),
        "an executor that could never take it does not learn it exists: {body}"
    );
    let (status, body) = server.post_yaml(&robot, &claim);
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post_yaml(&robot, &claim);
    assert_eq!(
        (status, error_code(&body).as_str()),
        (409, "conflict"),
        "{body}"
    );
    let (status, body) = server.post_yaml(
        &robot,
        &format!(
            "MESS:\n  - status:\n      re: {r}\n      code: in_progress\n      progress_pct: 140\n"
        ),
    );
    assert_eq!(
        (status, error_code(&body).as_str()),
        (422, "invalid"),
        "{body}"
    );
    let (status, body) = server.post_yaml(
        &robot,
        &format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content:\n        - kitchen vacuumed\n"),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post_yaml(
        &robot,
        &format!("MESS:\n  - status:\n      re: {r}\n      code: in_progress\n"),
    );
    assert_eq!(
        (status, error_code(&body).as_str()),
        (409, "conflict"),
        "{body}"
    );

    let (status, body) = server.send(
        "GET",
        &format!("/threads/{r}"),
        &[("Authorization", &auth), ("Accept", "application/yaml")],
        b"",
    );
    assert_eq!(status, 200);
    assert!(body.starts_with("envelope:\n  ref: "), "{body}");
    assert!(
        body.contains("status: completed") && body.contains("kitchen vacuumed"),
        "{body}"
    );
}

#[test]
fn bad_credentials_and_hostile_input_get_the_right_errors_and_change_nothing() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let other = key(&home, "agent", "other-agent");
    let server = Server::start(&home);
    let auth = format!("Bearer {agent}");
    let post = |body: &[u8], content_type: &str| {
        server.send(
            "POST",
            "/mess",
            &[
                ("Authorization", &auth),
                ("Content-Type", content_type),
                ("Accept", "application/json"),
            ],
            body,
        )
    };

    for headers in [
        vec![],
        vec![("Authorization", "Bearer mess_0000")],
        vec![("Authorization", "Basic abc")],
        vec![("Authorization", "Bearer ")],
    ] {
        let (status, body) = server.send("GET", "/threads", &headers, b"");
        assert_eq!(
            (status, error_code(&body).as_str()),
            (401, "unauthorized"),
            "{headers:?}"
        );
    }

    let cases: Vec<(&[u8], &str, u16, &str)> = vec![
        (b"{\"MESS\": [", "application/json", 400, "malformed"),
        (
            b"MESS: [{request: {intent: 5}}]",
            "application/yaml",
            422,
            "invalid",
        ),
        (b"[1, 2, 3]", "application/json", 422, "invalid"),
        (
            b"MESS:\n  - request:\n      intent: \"a\\u0000b\"\n",
            "application/yaml",
            422,
            "invalid",
        ),
        (
            b"MESS:\n  - request:\n      intent: \"red \\e[31malert\"\n",
            "application/yaml",
            422,
            "invalid",
        ),
        (
            b"MESS:\n  - request:\n      intent: x\n---\nMESS:\n  - request:\n      intent: y\n",
            "application/yaml",
            422,
            "invalid",
        ),
        (
            b"MESS:\n  - status:\n      re: 2026-01-31-001\n      code: teleported\n",
            "application/yaml",
            422,
            "invalid",
        ),
        (b"\xff\xfe", "application/yaml", 400, "malformed"),
    ];
    for (body, content_type, want_status, want_code) in cases {
        let (status, answer) = post(body, content_type);
        assert_eq!(
            (status, error_code(&answer).as_str()),
            (want_status, want_code),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    // An alias bomb and absurd nesting are refused before they cost anything.
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        bomb.push_str(&format!(
            "{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n",
            (b'a' + i) as char,
            (b'a' + i) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char
        ));
    }
    let (status, body) = post(bomb.as_bytes(), "application/yaml");
    assert_eq!(status / 100, 4, "{body}");
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let (status, body) = post(deep.as_bytes(), "application/json");
    assert_eq!(status / 100, 4, "{body}");
    let big = vec![b'a'; 17 * 1024 * 1024];
    let (status, body) = post(&big, "application/yaml");
    assert_eq!((status, error_code(&body).as_str()), (413, "too_large"));

    // Path traversal in the ref, in every encoding, finds nothing and reads nothing.
    for path in [
        "/threads/..%2F..%2Fetc%2Fpasswd",
        "/threads/%2e%2e%2fconfig.yaml",
        "/threads/..%252F..%252Fetc%252Fpasswd",
        "/threads/..%5C..%5Cconfig.yaml",
        "/threads/2026-01-31-001%00.yaml",
        "/threads/%2Fetc%2Fpasswd",
    ] {
        let (status, body) = server.get(path, &agent);
        assert!(status == 404 || status == 400, "{path}: {status} {body}");
        assert!(!body.contains("root:"), "{path}: {body}");
    }
    let (status, _) = server.get("/no/such/route", &agent);
    assert_eq!(status, 404);

    // Nothing above created a thread; another agent's thread stays invisible.
    let (_, body) = server.get("/threads", &agent);
    assert_eq!(
        json(&body)["threads"].as_array().unwrap().len(),
        0,
        "{body}"
    );
    let (status, body) = post(
        b"MESS:\n  - request:\n      intent: mine\n",
        "application/yaml",
    );
    assert_eq!(status, 200, "{body}");
    let r = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = server.get(&format!("/threads/{r}"), &other);
    assert_eq!(status, 404);
    let (status, body) = server.post_yaml(&other, &format!("MESS:\n  - cancel:\n      re: {r}\n"));
    assert_eq!(status / 100, 4, "{body}");
    let (_, body) = server.get(&format!("/threads/{r}"), &agent);
    assert_eq!(json(&body)["envelope"]["status"], "pending");
}

#[test]
fn of_many_simultaneous_claims_over_http_exactly_one_wins() {
    let executors: Vec<String> = (0..12).map(|i| format!("bot-{i}")).collect();
    let mut config = String::from("executors:\n");
    for e in &executors {
        config.push_str(&format!("  {e}:\n    capabilities: [lift]\n"));
    }
    let home = Home::with_config(&config);
    let agent = key(&home, "agent", "claude-agent");
    let keys: Vec<String> = executors
        .iter()
        .map(|e| key(&home, "executor", e))
        .collect();
    let server = Server::start(&home);
    let (_, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: lift the box\n      requires: [lift]\n",
    );
    let r = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    let claim = format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n");
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = keys
            .iter()
            .map(|k| s.spawn(|| server.post_yaml(k, &claim).0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 409),
        "{statuses:?}"
    );
}

#[test]
fn a_presigned_link_acts_only_on_its_thread_and_only_as_allowed() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let create = |intent: &str| {
        let (_, body) = server.post_yaml(
            &agent,
            &format!("MESS:\n  - request:\n      intent: {intent}\n      requires: [take-photo]\n"),
        );
        json(&body)["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let r = create("photo of the fridge");
    let other = create("photo of the garden");
    let token_of = |thread: &str, extra: &[&str]| {
        let mut args = vec!["link", thread, "--executor", "teague-phone"];
        args.extend_from_slice(extra);
        let url = home.ok(&args);
        url.trim().rsplit("token=").next().unwrap().to_owned()
    };
    let full = token_of(&r, &[]);
    let read_only = token_of(&r, &["--actions", "read"]);
    let short = token_of(&r, &["--ttl", "1s"]);

    let (status, body) = server.send("GET", &format!("/thread/{r}?token={full}"), &[], b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["envelope"]["ref"], r.as_str());
    let (status, body) = server.send("GET", &format!("/thread/{other}?token={full}"), &[], b"");
    assert_eq!((status, error_code(&body).as_str()), (403, "forbidden"));
    let (status, body) = server.send("GET", &format!("/thread/{r}"), &[], b"");
    assert_eq!((status, error_code(&body).as_str()), (401, "unauthorized"));
    let forged = format!("{}x", &full[..full.len() - 1]);
    let (status, _) = server.send("GET", &format!("/thread/{r}?token={forged}"), &[], b"");
    assert_eq!(status, 401);
    let none = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJyZWYiOiIyMDI2LTAxLTMxLTAwMSIsInN1YiI6InRlYWd1ZS1waG9uZSIsImFjdCI6WyJyZWFkIl0sImV4cCI6OTk5OTk5OTk5OSwiaWF0IjowfQ.";
    let (status, _) = server.send("GET", &format!("/thread/{r}?token={none}"), &[], b"");
    assert_eq!(status, 401);

    let post = |thread: &str, token: &str, yaml: &str| {
        server.send(
            "POST",
            &format!("/thread/{thread}?token={token}"),
            &[
                ("Content-Type", "application/yaml"),
                ("Accept", "application/json"),
            ],
            yaml.as_bytes(),
        )
    };
    let claim = format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n");
    let (status, body) = post(&r, &read_only, &claim);
    assert_eq!(
        (status, error_code(&body).as_str()),
        (403, "forbidden"),
        "{body}"
    );
    let (status, body) = post(
        &r,
        &full,
        &format!("MESS:\n  - status:\n      re: {other}\n      code: claimed\n"),
    );
    assert_eq!(
        (status, error_code(&body).as_str()),
        (403, "forbidden"),
        "{body}"
    );
    let (status, body) = post(&r, &full, "MESS:\n  - request:\n      intent: sneaky\n");
    assert_eq!(
        (status, error_code(&body).as_str()),
        (403, "forbidden"),
        "{body}"
    );
    let (status, body) = post(&r, &full, &claim);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(
        &r,
        &full,
        &format!(
            "MESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content:\n        - milk, eggs\n"
        ),
    );
    assert_eq!(status, 200, "{body}");
    let (_, body) = server.get(&format!("/threads/{r}"), &agent);
    assert_eq!(json(&body)["envelope"]["status"], "completed");
    assert_eq!(json(&body)["envelope"]["executor"], "teague-phone");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (status, body) = server.send("GET", &format!("/thread/{r}?token={short}"), &[], b"");
    assert_eq!((status, error_code(&body).as_str()), (401, "unauthorized"));
    assert!(body.contains("expired"), "{body}");
}

/// Opens a server-sent event stream with `head` (the request line and headers, without the
/// blank line); returns it past the response headers.
fn open_events(server: &Server, head: &str) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::{BufRead, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(format!("{head}Host: 127.0.0.1\r\n\r\n").as_bytes())
        .unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            return reader;
        }
    }
}

/// The next event's data, as JSON.
fn next_data(reader: &mut std::io::BufReader<std::net::TcpStream>) -> Value {
    use std::io::BufRead;
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if let Some(d) = line.trim().strip_prefix("data:") {
            return json(d.trim());
        }
    }
}

#[test]
fn events_stream_the_changes_the_caller_may_see_as_they_happen() {
    use std::io::{BufRead, BufReader, Write};
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let other = key(&home, "agent", "other-agent");
    let server = Server::start(&home);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(
            format!(
                "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {agent}\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    // Headers, then the stream.
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
    }
    // The subscription is live once the headers are out; another agent's thread first, then ours.
    server.post_yaml(&other, "MESS:\n  - request:\n      intent: not yours\n");
    let (_, body) = server.post_yaml(&agent, "MESS:\n  - request:\n      intent: yours\n");
    let mine = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut data = Vec::new();
    while data.is_empty() {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if let Some(d) = line.trim().strip_prefix("data:") {
            data.push(json(d.trim()));
        }
    }
    assert_eq!(
        data[0]["ref"],
        mine.as_str(),
        "the first event is our thread: {data:?}"
    );
    assert_eq!(data[0]["status"], "pending");
}

#[test]
fn the_query_endpoint_answers_in_json_csv_and_arrow_and_refuses_the_rest() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    for i in 0..3 {
        server.post_yaml(
            &agent,
            &format!("MESS:\n  - request:\n      intent: task {i}\n"),
        );
    }
    let q = |path: &str| server.get(path, &agent);
    let (status, body) =
        q("/query?sql=SELECT%20intent%20FROM%20threads%20ORDER%20BY%20intent&limit=2");
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["columns"], serde_json::json!(["intent"]));
    assert_eq!(v["rows"][1]["intent"], "task 1");
    assert_eq!(
        (v["row_count"].as_u64(), v["truncated"].as_bool()),
        (Some(2), Some(true))
    );

    let auth = format!("Bearer {agent}");
    let (status, body) = server.send(
        "POST",
        "/query?format=csv",
        &[("Authorization", &auth), ("Content-Type", "text/plain")],
        b"SELECT count(*) AS n, 'a,b' AS s FROM threads",
    );
    assert_eq!((status, body.as_str()), (200, "n,s\n3,\"a,b\"\n"));

    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let body = br#"{"sql": "SELECT ref, created FROM threads ORDER BY ref", "format": "arrow"}"#;
    std::io::Write::write_all(
        &mut stream,
        format!(
            "POST /query HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    std::io::Write::write_all(&mut stream, body).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut stream, &mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    assert!(
        head.starts_with("HTTP/1.1 200") && head.contains("application/vnd.apache.arrow.stream"),
        "{head}"
    );
    let payload = &raw[split + 4..];
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(payload), None).unwrap();
    let schema = reader.schema();
    assert_eq!(schema.field(0).name(), "ref");
    assert!(
        matches!(
            schema.field(1).data_type(),
            arrow::datatypes::DataType::Timestamp(_, Some(_))
        ),
        "{schema:?}"
    );
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 3);

    for (sql, want_status, want_code) in [
        ("COPY%20threads%20TO%20'/tmp/x.csv'", 403, "forbidden"),
        (
            "SELECT%20*%20FROM%20read_csv('/etc/passwd')",
            403,
            "forbidden",
        ),
        ("SELEC%201", 422, "invalid"),
        ("", 400, "malformed"),
    ] {
        let (status, body) = q(&format!("/query?sql={sql}"));
        assert_eq!(
            (status, error_code(&body).as_str()),
            (want_status, want_code),
            "{sql}: {body}"
        );
    }
    let (status, body) = q("/query?sql=SELECT%201&format=xml");
    assert_eq!((status, error_code(&body).as_str()), (422, "invalid"));
    // Files are named relative to the home, never by their server path; a broken file is
    // nobody's thread, so a key holder's query does not see it at all.
    std::fs::write(
        home.path()
            .join("state=received/2026-01-01-001.messe-af.yaml"),
        "ref: [\n",
    )
    .unwrap();
    let (status, body) = q("/query?sql=SELECT%20filename%20FROM%20threads%20ORDER%20BY%201");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"filename\":\"state=received/2026-"),
        "{body}"
    );
    assert!(
        !body.contains(&home.path().to_string_lossy().to_string()),
        "{body}"
    );
    assert!(!body.contains("2026-01-01-001"), "{body}");
}

/// Polls the agent's view of thread `r` until `done` holds for its JSON (at most 10 s).
fn eventually(server: &Server, agent: &str, r: &str, done: impl Fn(&str) -> bool) -> String {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, body) = server.get(&format!("/threads/{r}"), agent);
        assert_eq!(status, 200, "{body}");
        if done(&body) || std::time::Instant::now() > until {
            return body;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_server_routes_requests_after_acknowledging_them_and_retries_waiting_ones() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start_with(&home, &[("MESS_ROUTE_RETRY_MS", "300")]);
    let create = |requires: &str| {
        let (status, body) = server.post_yaml(
            &agent,
            &format!(
                "MESS:\n  - request:\n      intent: something\n      requires: [{requires}]\n"
            ),
        );
        assert_eq!(status, 200, "{body}");
        json(&body)["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let routed = |body: &str| body.contains("\"dispatched\"");

    let vacuum = create("vacuum-floor");
    let body = eventually(&server, &agent, &vacuum, routed);
    assert!(
        body.contains("routed to roomba-kitchen: holds vacuum-floor"),
        "{body}"
    );

    let flight = create("flight");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let (_, body) = server.get(&format!("/threads/{flight}"), &agent);
    assert!(!routed(&body), "nobody can fly yet: {body}");
    std::fs::write(
        home.path().join("config.yaml"),
        format!("{CONFIG}  pilot:\n    capabilities: [flight]\n"),
    )
    .unwrap();
    let body = eventually(&server, &agent, &flight, routed);
    assert!(body.contains("routed to pilot: holds flight"), "{body}");
}

#[test]
fn a_key_sends_only_what_its_role_allows_and_unknown_threads_stay_unknown() {
    let home = Home::with_config(CONFIG);
    let alice = key(&home, "agent", "alice");
    let mallory = key(&home, "agent", "mallory");
    let robot = key(&home, "executor", "roomba-kitchen");
    let server = Server::start(&home);
    let (status, body) = server.post_yaml(
        &alice,
        "MESS:\n  - request:\n      intent: vacuum the safe room\n      requires: [vacuum-floor]\n",
    );
    assert_eq!(status, 200, "{body}");
    let r = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();

    // An agent key cannot make itself an executor, change routing, or act as an executor.
    for (yaml, names) in [
        (
            "MESS:\n  - config:\n      executor:\n        id: mallory\n        capabilities: [vacuum-floor]\n".to_owned(),
            "MESS[0].config: mallory holds an agent key",
        ),
        (
            "MESS:\n  - config:\n      routing:\n        rules:\n          - default:\n            prefer: [mallory]\n".to_owned(),
            "MESS[0].config: mallory holds an agent key",
        ),
        (
            format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
            "MESS[0].status: mallory holds an agent key",
        ),
    ] {
        let (status, body) = server.post_yaml(&mallory, &yaml);
        assert_eq!((status, error_code(&body).as_str()), (403, "forbidden"), "{body}");
        assert!(json(&body)["error"]["message"].as_str().unwrap().contains(names), "{body}");
    }
    assert!(!home.path().join("executors/mallory.yaml").exists());
    assert!(!home.path().join("routing.yaml").exists());

    // An executor key registers only itself, never routing, and does not make requests.
    for (yaml, names) in [
        (
            "MESS:\n  - config:\n      executor:\n        id: teague-phone\n        capabilities: [vacuum-floor]\n",
            "registers only roomba-kitchen",
        ),
        (
            "MESS:\n  - config:\n      routing:\n        rules:\n          - default:\n            prefer: [roomba-kitchen]\n",
            "routing rules change only in the exchange's config.yaml",
        ),
        (
            "MESS:\n  - request:\n      intent: buy me a boat\n",
            "MESS[0].request: roomba-kitchen holds an executor key",
        ),
    ] {
        let (status, body) = server.post_yaml(&robot, yaml);
        assert_eq!(
            (status, error_code(&body).as_str()),
            (403, "forbidden"),
            "{body}"
        );
        assert!(
            json(&body)["error"]["message"]
                .as_str()
                .unwrap()
                .contains(names),
            "{body}"
        );
    }
    let scout = key(&home, "executor", "scout");
    let (status, body) = server.post_yaml(
        &scout,
        "MESS:\n  - config:\n      executor:\n        id: scout\n        capabilities: [take-photo]\n",
    );
    assert_eq!(status, 200, "an executor registers itself: {body}");
    assert!(home.path().join("executors/scout.yaml").exists());

    // Replying to or cancelling someone else's thread answers as if it did not exist.
    for yaml in [
        format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{x: y}}\n"),
        format!("MESS:\n  - cancel:\n      re: {r}\n"),
    ] {
        let (status, body) = server.post_yaml(&mallory, &yaml);
        assert_eq!(
            (status, error_code(&body).as_str()),
            (404, "not_found"),
            "{body}"
        );
        assert!(!body.contains("alice"), "{body}");
    }
    let (_, body) = server.get(&format!("/threads/{r}"), &alice);
    assert_eq!(
        json(&body)["envelope"]["status"],
        "pending",
        "nothing changed: {body}"
    );
}

#[test]
fn the_server_expires_overdue_requests_on_time_and_stops_with_streams_open() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let mut server = Server::start(&home);
    let soon = (chrono::Utc::now() + chrono::TimeDelta::milliseconds(800))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let (status, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - request:\n      intent: quick look\n      needed_by: {soon}\n"),
    );
    assert_eq!(status, 200, "{body}");
    let r = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    // Watched on disk, not through the API (a read would expire it itself).
    let expired = home
        .path()
        .join(format!("state=canceled/{r}.messe-af.yaml"));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !expired.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&expired).expect("expired by the server's sweeper");
    assert!(text.contains("status: expired"), "{text}");

    // One server per home: a second one would send every notification twice.
    let second = home.fails(&["serve", "--addr", "127.0.0.1:0"], 1);
    assert!(
        second.contains("another mess serve runs on this home"),
        "{second}"
    );

    // An open event stream does not hold the server up when it is told to stop.
    let port = server.port;
    let stream = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let head = format!(
            "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {agent}\r\n\r\n"
        );
        std::io::Write::write_all(&mut s, head.as_bytes()).unwrap();
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut sink);
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        server.terminate(std::time::Duration::from_secs(5)),
        "mess serve did not stop within 5 s with /events open"
    );
    stream.join().unwrap();
}

#[test]
fn a_key_holders_queries_see_only_their_threads_and_no_contact_details() {
    let home = Home::with_config(
        "executors:\n  teague-phone:\n    capabilities: [take-photo]\n    notify:\n      sms: '+15550100'\n",
    );
    let alice = key(&home, "agent", "alice");
    let carol = key(&home, "agent", "carol");
    let server = Server::start(&home);
    let (status, body) = server.post_yaml(
        &alice,
        "MESS:\n  - request:\n      intent: the safe code is 1234\n      requires: [take-photo]\n",
    );
    assert_eq!(status, 200, "{body}");
    let query = |who: &str, sql: &str| {
        let (status, body) = server.send(
            "POST",
            "/query",
            &[("Authorization", &format!("Bearer {who}"))],
            sql.as_bytes(),
        );
        (status, body)
    };
    let (status, body) = query(&alice, "SELECT count(*) AS n FROM messages");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"n\":2"),
        "the requestor sees its thread: {body}"
    );
    for sql in [
        "SELECT count(*) AS n FROM messages",
        "SELECT count(*) AS n FROM threads",
        "SELECT count(*) AS n FROM read_yaml_auto('state=*/*.yaml', allow_empty := true)",
    ] {
        let (status, body) = query(&carol, sql);
        assert_eq!(status, 200, "{sql}: {body}");
        assert!(body.contains("\"n\":0"), "{sql}: {body}");
    }
    let (status, body) = query(&carol, "SELECT * FROM executors");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("teague-phone") && !body.contains("15550100"),
        "{body}"
    );
    let (status, body) = query(&carol, "SELECT * FROM read_yaml_auto('config.yaml')");
    assert_eq!(
        status, 422,
        "config.yaml is not there for a key holder: {body}"
    );
    assert!(!body.contains("15550100"), "{body}");
}

#[test]
fn a_link_holder_hears_of_its_thread_and_nothing_else() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let create = |intent: &str| {
        let (_, body) = server.post_yaml(
            &agent,
            &format!(
                "MESS:\n  - request:\n      intent: {intent}\n      requires: [vacuum-floor]\n"
            ),
        );
        json(&body)["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mine = create("vacuum the hall");
    let other = create("vacuum the stairs");
    let link = home.ok(&["link", &mine, "--executor", "roomba-kitchen"]);
    let token = link.trim().rsplit("token=").next().unwrap().to_owned();
    let other_link = home.ok(&["link", &other, "--executor", "roomba-kitchen"]);
    let other_token = other_link
        .trim()
        .rsplit("token=")
        .next()
        .unwrap()
        .to_owned();

    let (status, body) = server.send(
        "GET",
        &format!("/thread/{mine}/events?token=nope"),
        &[],
        b"",
    );
    assert_eq!((status, error_code(&body).as_str()), (401, "unauthorized"));
    let (status, _) = server.send(
        "GET",
        &format!("/thread/{mine}/events?token={other_token}"),
        &[],
        b"",
    );
    assert_eq!(status / 100, 4, "a link works only for its own thread");

    let mut reader = open_events(
        &server,
        &format!("GET /thread/{mine}/events?token={token} HTTP/1.1\r\n"),
    );
    // The other thread changes first, then ours (the agent replies).
    server.post_yaml(&agent, &format!("MESS:\n  - cancel:\n      re: {other}\n"));
    server.post_yaml(
        &agent,
        &format!("MESS:\n  - reply:\n      re: {mine}\n      message: the hall is upstairs\n"),
    );
    let data = next_data(&mut reader);
    assert_eq!(data["ref"], mine.as_str(), "only its own thread: {data}");
}

#[test]
fn the_plans_client_calls_work_with_a_link_token_as_the_bearer() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let create = |intent: &str| {
        let (_, body) = server.post_yaml(
            &agent,
            &format!("MESS:\n  - request:\n      intent: {intent}\n      requires: [take-photo]\n"),
        );
        json(&body)["MESS"][1]["ack"]["ref"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let r = create("photo of the fridge");
    let other = create("photo of the garden");
    let token_of = |extra: &[&str]| {
        let mut args = vec!["link", r.as_str(), "--executor", "teague-phone"];
        args.extend_from_slice(extra);
        home.ok(&args)
            .trim()
            .rsplit("token=")
            .next()
            .unwrap()
            .to_owned()
    };
    let token = token_of(&[]);
    let read_only = token_of(&["--actions", "read"]);
    let bearer = |t: &str| format!("Bearer {t}");
    // GET /mess/{ref}, as the reference design's page loads the request.
    let (status, body) = server.send(
        "GET",
        &format!("/mess/{r}"),
        &[("authorization", &bearer(&token))],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["envelope"]["ref"], r.as_str());
    let (status, body) = server.send(
        "GET",
        &format!("/mess/{other}"),
        &[("authorization", &bearer(&token))],
        b"",
    );
    assert_eq!((status, error_code(&body).as_str()), (403, "forbidden"));
    // An API key reads it too, as GET /threads/{ref}.
    let (status, body) = server.get(&format!("/mess/{r}"), &agent);
    assert_eq!(status, 200, "{body}");
    // POST /mess with the token: status and response about the link's thread, within its actions.
    let post = |t: &str, yaml: String| {
        server.send(
            "POST",
            "/mess",
            &[
                ("authorization", &bearer(t)),
                ("content-type", "application/yaml"),
            ],
            yaml.as_bytes(),
        )
    };
    let (status, body) = post(
        &read_only,
        format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    );
    assert_eq!(
        (status, error_code(&body).as_str()),
        (403, "forbidden"),
        "{body}"
    );
    let (status, body) = post(
        &token,
        format!("MESS:\n  - status:\n      re: {other}\n      code: claimed\n"),
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = post(&token, "MESS:\n  - request:\n      intent: x\n".to_owned());
    assert_eq!(status, 403, "a link cannot ask for work: {body}");
    let (status, body) = post(
        &token,
        format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.send(
        "GET",
        &format!("/mess/{r}"),
        &[("authorization", &bearer(&token))],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["envelope"]["executor"],
        "teague-phone",
        "{body}"
    );
    // A forged token is no key and no link.
    let forged = format!("{}x", &token[..token.len() - 1]);
    let (status, _) = post(
        &forged,
        format!("MESS:\n  - status:\n      re: {r}\n      code: in_progress\n"),
    );
    assert_eq!(status, 401);
}
