//! The Worker build of mess (`edge/`), run locally by `edge/dev` (wrangler, workerd): it
//! builds from a fresh checkout with Debian's rustc-web, serves on loopback, and checks MESS
//! messages with the protocol crate compiled to WebAssembly, answering what the native
//! validation answers.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::free_port;
use mess::protocol::message::Message;
use mess::protocol::yaml::{self, Limits};

/// `edge/dev` and what it started (wrangler and workerd), stopped together.
struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        // The process group: wrangler's workerd would outlive wrangler alone. wrangler may
        // linger after SIGTERM, so the group is killed if it has not gone within 5 s.
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 exchange with the Worker: the status and the body.
fn http(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    http_with(port, method, path, &[], body)
}

/// [`http`] with extra request headers.
fn http_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Option<(u16, String)> {
    http_declaring(port, method, path, headers, body.len(), body)
}

/// [`http_with`] declaring a `Content-Length` of `declared` bytes, whatever `body` holds.
fn http_declaring(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    declared: usize,
    body: &str,
) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{extra}Content-Length: {declared}\r\n\r\n{body}"
    );
    stream.write_all(request.as_bytes()).ok()?;
    // workerd keeps the connection open after its answer: read the head, then as many bytes as
    // it says the body has.
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_len, length) = loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, _)) = text.split_once("\r\n\r\n") {
            let header = |name: &str| {
                head.lines().find_map(|l| {
                    let (n, value) = l.split_once(':')?;
                    n.eq_ignore_ascii_case(name)
                        .then(|| value.trim().to_owned())
                })
            };
            // No length: a chunked body (`None`), read to its last chunk.
            let length = match header("content-length") {
                Some(v) => Some(v.parse::<usize>().ok()?),
                None if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) => None,
                None => Some(0),
            };
            break (head.len() + 4, length);
        }
    };
    let complete = |raw: &[u8]| match length {
        Some(length) => raw.len() >= head_len + length,
        None => raw.ends_with(b"0\r\n\r\n"),
    };
    while !complete(&raw) {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = &text[head_len..];
    if length.is_some() {
        return Some((status, body.to_owned()));
    }
    // Chunks: a hexadecimal size line, that many bytes, a line break; size 0 ends.
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            break;
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size + 2..)?;
    }
    Some((status, out))
}

/// What the native exchange's validation says of `text`, in the Worker's words.
fn native_check(text: &str) -> String {
    let checked = yaml::parse_document(text, &Limits::DEFAULT)
        .map_err(|e| e.to_string())
        .and_then(|v| Message::from_value(v).map_err(|e| e.to_string()));
    match checked {
        Ok(m) => format!(
            "ok: {}",
            m.content()
                .map(|p| p.kind().to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn the_worker_builds_serves_on_loopback_and_checks_messages_as_the_native_exchange_does() {
    let port = free_port();
    let inspector = free_port();
    let dev = Dev(Command::new(crate::tidy::root().join("edge/dev"))
        .args([
            "--port",
            &port.to_string(),
            "--inspector-port",
            &inspector.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap());
    // The first build compiles std for wasm32 and installs wrangler: minutes on 2 cores.
    let until = Instant::now() + Duration::from_secs(600);
    let health = loop {
        if let Some(answer) = http(port, "GET", "/healthz", "") {
            break answer;
        }
        assert!(
            Instant::now() < until,
            "edge/dev did not answer within 600 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(health.0, 200, "{health:?}");
    assert!(health.1.contains("\"status\":\"ok\""), "{health:?}");

    for (message, status) in [
        (
            "MESS:\n  - v: 1.0.0\n  - request:\n      intent: check the fridge\n      requires: [take-photo]\n",
            200,
        ),
        ("MESS:\n  - request:\n      requires: [take-photo]\n", 422),
        (
            "MESS:\n  - status: {re: 2026-01-31-001, code: sideways}\n",
            422,
        ),
        ("MESS: [", 422),
    ] {
        let (code, body) = http(port, "POST", "/check", message).unwrap();
        assert_eq!(code, status, "{message}: {body}");
        let want = native_check(message);
        assert!(
            body.contains(&want),
            "{message}: the Worker said {body:?}, the native exchange {want:?}"
        );
    }
    let (code, _) = http(port, "GET", "/nowhere", "").unwrap();
    assert_eq!(code, 404);
    drop(dev);
}

/// A Worker started by `edge/dev` on a free port, with its operator key.
struct Worker {
    _dev: Dev,
    port: u16,
    operator: String,
    _state: tempfile::TempDir,
}

impl Worker {
    /// Starts `edge/dev` with fresh local storage (and a clock standing at `clock`).
    fn start(clock: Option<&str>) -> Worker {
        Worker::start_with(clock, &[])
    }

    /// [`Worker::start`] with settings (`MESS_WEBHOOK_ALLOW`, ...) in its environment.
    fn start_with(clock: Option<&str>, settings: &[(&str, &str)]) -> Worker {
        Worker::start_in(clock, settings, tempfile::TempDir::new().unwrap())
    }

    /// Stops the Worker and hands back its local storage, for [`Worker::start_in`].
    fn stop(self) -> tempfile::TempDir {
        drop(self._dev);
        self._state
    }

    /// [`Worker::start_with`] on the local storage in `state` (another run's, kept).
    fn start_in(
        clock: Option<&str>,
        settings: &[(&str, &str)],
        state: tempfile::TempDir,
    ) -> Worker {
        let port = free_port();
        let mut command = Command::new(crate::tidy::root().join("edge/dev"));
        // The inspector on a free port of its own: `port + 1` may be another run's.
        let inspector = free_port();
        command.args([
            "--port",
            &port.to_string(),
            "--inspector-port",
            &inspector.to_string(),
            "--state",
        ]);
        command.arg(state.path());
        if let Some(clock) = clock {
            command.args(["--clock", clock]);
        }
        // wrangler's log goes to a file, shown if the Worker never answers.
        let log_path = state.path().join("dev.log");
        let log = std::fs::File::create(&log_path).unwrap();
        for name in [
            "MESS_OPERATOR_KEY",
            "MESS_SECRET",
            "MESS_PUBLIC_URL",
            "MESS_WEBHOOK_SECRET",
            "MESS_WEBHOOK_ALLOW",
            "MESS_SLACK_TOKEN",
            "MESS_SLACK_URL",
            "MESS_TELEGRAM_TOKEN",
            "MESS_TELEGRAM_URL",
            "MESS_TWILIO_SID",
            "MESS_TWILIO_TOKEN",
            "MESS_TWILIO_FROM",
            "MESS_TWILIO_URL",
            "MESS_NTFY_URL",
            "MESS_NTFY_TOKEN",
        ] {
            command.env_remove(name);
        }
        command.envs(settings.iter().copied());
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.try_clone().unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut dev = Dev(child);
        let mut first = String::new();
        std::io::BufRead::read_line(&mut out, &mut first).unwrap();
        let operator = first
            .trim()
            .strip_prefix("operator key: ")
            .unwrap_or_else(|| panic!("edge/dev's first line: {first:?}"))
            .to_owned();
        // The rest is wrangler's log: copied to the file, so it never blocks on a full pipe.
        let mut sink = log;
        std::thread::spawn(move || std::io::copy(&mut out, &mut sink));
        let until = Instant::now() + Duration::from_secs(300);
        while http(port, "GET", "/healthz", "").is_none() {
            let ended = dev.0.try_wait().ok().flatten();
            if ended.is_some() || Instant::now() > until {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "edge/dev on port {port} {}; its log ends:\n{}",
                    match ended {
                        Some(status) => format!("exited ({status})"),
                        None => "did not answer within 300 s".to_owned(),
                    },
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Worker {
            _dev: dev,
            port,
            operator,
            _state: state,
        }
    }

    /// The thread files in R2, read by `GET /export` (which never reaches the Durable
    /// Object): (key, text), sorted.
    fn export(&self) -> Vec<(String, String)> {
        let bearer = format!("Bearer {}", self.operator);
        let (code, export) = http_with(
            self.port,
            "GET",
            "/export",
            &[("authorization", &bearer)],
            "",
        )
        .unwrap();
        assert_eq!(code, 200, "{export}");
        let mut files: Vec<(String, String)> = export
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["key"].as_str().unwrap().to_owned(),
                    v["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        files.sort();
        files
    }

    /// Mints a key for `id` (`agent` or `executor`) with the operator key.
    fn key(&self, kind: &str, id: &str) -> String {
        let bearer = format!("Bearer {}", self.operator);
        let (code, body) = http_with(
            self.port,
            "POST",
            "/keys",
            &[("authorization", &bearer)],
            &format!(r#"{{"kind":"{kind}","id":"{id}"}}"#),
        )
        .unwrap();
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["key"].as_str().unwrap().to_owned()
    }

    /// `POST /mess` with `key`: (status, body).
    fn post(&self, key: &str, text: &str, json: bool) -> (u16, String) {
        let bearer = format!("Bearer {key}");
        let content_type = if json {
            "application/json"
        } else {
            "application/yaml"
        };
        http_with(
            self.port,
            "POST",
            "/mess",
            &[
                ("authorization", &bearer),
                ("content-type", content_type),
                ("accept", "application/json"),
            ],
            text,
        )
        .unwrap()
    }
}

/// The native exchange in this process, on a clock standing still: what `POST /mess` answers.
struct Native {
    home: tempfile::TempDir,
    ex: mess::exchange::Exchange,
}

impl Native {
    fn new(clock: &str) -> Native {
        Native::open(tempfile::TempDir::new().unwrap(), clock)
    }

    /// The exchange over `home`, on a clock standing at `clock`.
    fn open(home: tempfile::TempDir, clock: &str) -> Native {
        let now = mess::protocol::time::parse_timestamp(clock)
            .unwrap()
            .to_utc();
        let ex = mess::exchange::Exchange::new(
            mess::store::Store::open(home.path()),
            mess::exchange::Settings::defaults(),
            std::sync::Arc::new(mess::exchange::clock::FixedClock::new(now)),
        );
        Native { home, ex }
    }

    /// What `POST /mess` answers `who` (holding a key of `role`) for `text`: status and body.
    fn post(&self, who: &str, role: &str, text: &str, json: bool) -> (u16, String) {
        use mess::exchange::error::ErrorKind;
        let sender = mess::exchange::Sender {
            id: who.to_owned(),
            channel: "http".to_owned(),
            role: mess::protocol::rules::Role::parse(role),
            callback: None,
        };
        let intake = self.ex.intake();
        match intake.take_body(text, json, |m| Ok(intake.submit(m, &sender)?.to_value())) {
            Ok(v) => (200, serde_json::to_string(&v).unwrap()),
            Err(e) => {
                let (status, code) = match e.kind() {
                    ErrorKind::Malformed => (400, "malformed"),
                    ErrorKind::Invalid => (422, "invalid"),
                    ErrorKind::Unauthorized => (401, "unauthorized"),
                    ErrorKind::Forbidden => (403, "forbidden"),
                    ErrorKind::NotFound => (404, "not_found"),
                    ErrorKind::Conflict => (409, "conflict"),
                    ErrorKind::TooLarge => (413, "too_large"),
                    other => panic!("{other:?}: {e}"),
                };
                let body = serde_json::json!({"error": {"code": code, "message": e.to_string()}});
                (status, body.to_string())
            }
        }
    }

    /// The thread files of the home: (path under the home, text).
    fn files(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.home.path()).unwrap() {
            let dir = entry.unwrap().path();
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("state=") {
                continue;
            }
            for file in std::fs::read_dir(&dir).unwrap() {
                let path = file.unwrap().path();
                let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
                if file_name.ends_with(".messe-af.yaml") {
                    out.push((
                        format!("{name}/{file_name}"),
                        std::fs::read_to_string(&path).unwrap(),
                    ));
                }
            }
        }
        out.sort();
        out
    }
}

/// The instant both exchanges stand at in the comparison.
const CLOCK: &str = "2026-11-28T09:30:00Z";

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn a_conversation_gets_the_same_answers_and_the_same_files_from_the_worker_as_from_mess_serve() {
    let worker = Worker::start(Some(CLOCK));
    let native = Native::new(CLOCK);
    let keys: Vec<(&str, &str, String)> = [
        ("agent", "alice"),
        ("agent", "bob"),
        ("executor", "robo"),
        ("executor", "rosie"),
        ("executor", "ollie"),
    ]
    .into_iter()
    .map(|(kind, id)| (kind, id, worker.key(kind, id)))
    .collect();
    let key_of = |who: &str| {
        keys.iter()
            .find(|(_, id, _)| *id == who)
            .map(|(kind, _, key)| (*kind, key.clone()))
            .unwrap()
    };
    let day = &CLOCK[..10];
    let script: Vec<(&str, String, u16)> = vec![
        // Registrations: two able to vacuum, one on demand.
        ("robo", "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [vacuum-floor, take-photo]\n".into(), 200),
        ("rosie", "MESS:\n  - config:\n      executor:\n        id: rosie\n        capabilities: [vacuum-floor]\n".into(), 200),
        ("ollie", "MESS:\n  - config:\n      executor:\n        id: ollie\n        availability: on_demand\n        capabilities: [take-photo, order-groceries]\n".into(), 200),
        // A key registers only itself.
        ("rosie", "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [vacuum-floor]\n".into(), 403),
        // What is on offer: capabilities (one tag no executor's capability carries), executors.
        ("alice", "MESS:\n  - query: {type: capabilities}\n  - query:\n      type: capabilities\n      filter: {tags: [kitchen]}\n".into(), 200),
        ("bob", "MESS:\n  - query:\n      type: executors\n      filter: {executor: ollie}\n  - query: {type: executors}\n".into(), 200),
        // Requests: one, two at once, a re-sent client id, one nobody but ollie can take.
        ("alice", "MESS:\n  - v: 1.0.0\n  - request:\n      id: vac-1\n      intent: vacuum the kitchen\n      requires: [vacuum-floor]\n      priority: urgent\n".into(), 200),
        ("alice", "MESS:\n  - request:\n      id: photo-1\n      intent: what is in the fridge?\n      requires: [take-photo]\n      response_hint: [image]\n  - request:\n      intent: water the plants\n".into(), 200),
        ("alice", "MESS:\n  - v: 1.0.0\n  - request:\n      id: vac-1\n      intent: vacuum the kitchen\n      requires: [vacuum-floor]\n      priority: urgent\n".into(), 200),
        ("bob", r#"{"MESS":[{"v":"1.1.0"},{"request":{"intent":"order onions","requires":["order-groceries"],"confirm_before":true}}]}"#.into(), 200),
        // Claims: by client id, the race's loser, someone lacking the capability.
        ("robo", "MESS:\n  - status: {re: vac-1, code: claimed, eta: 10m}\n".into(), 200),
        ("rosie", format!("MESS:\n  - status: {{re: {day}-001, code: claimed}}\n"), 409),
        ("rosie", format!("MESS:\n  - status: {{re: {day}-002, code: claimed}}\n"), 404),
        // Work, a question and its answer, the result, a review.
        ("robo", "MESS:\n  - status: {re: last, code: in_progress, progress: 40}\n".into(), 200),
        ("robo", "MESS:\n  - status:\n      re: last\n      code: needs_input\n      questions:\n        - field: rooms\n          question: Also the hallway?\n          options: [kitchen, both]\n".into(), 200),
        ("alice", "MESS:\n  - reply:\n      re: vac-1\n      answers:\n        rooms: both\n".into(), 200),
        ("robo", "MESS:\n  - response:\n      re: last\n      content:\n        - text: kitchen and hallway vacuumed\n".into(), 200),
        ("alice", "MESS:\n  - review:\n      re: vac-1\n      rating: 5\n      comment: spotless\n".into(), 200),
        // A photo claimed and failed; a cancel; a suggestion.
        ("robo", format!("MESS:\n  - status: {{re: {day}-002, code: claimed}}\n")  , 200),
        ("robo", format!("MESS:\n  - status:\n      re: {day}-002\n      code: failed\n      reason: the fridge door is locked\n"), 200),
        ("alice", format!("MESS:\n  - cancel:\n      re: {day}-003\n      reason: it rained\n"), 200),
        ("ollie", format!("MESS:\n  - suggestion:\n      re: {day}-004\n      id: sug-1\n      type: alternative\n      proposed: {{intent: order shallots}}\n      reason: onions are sold out\n"), 200),
        // Confirmation before acting.
        ("ollie", format!("MESS:\n  - status: {{re: {day}-004, code: claimed}}\n"), 200),
        ("ollie", format!("MESS:\n  - status:\n      re: {day}-004\n      code: needs_confirmation\n      action: pay 3 EUR for onions\n"), 200),
        ("bob", format!("MESS:\n  - reply: {{re: {day}-004, confirm: true}}\n"), 200),
        ("ollie", format!("MESS:\n  - status: {{re: {day}-004, code: completed}}\n"), 200),
        // Status queries: the open ones, every one, one by client id, by status; another's.
        ("alice", "MESS:\n  - query: {type: status}\n".into(), 200),
        ("alice", "MESS:\n  - query:\n      type: status\n      filter: {re: all}\n".into(), 200),
        ("alice", "MESS:\n  - query:\n      type: status\n      filter: {re: vac-1}\n  - query:\n      type: status\n      filter: {status: [failed, cancelled]}\n".into(), 200),
        ("bob", "MESS:\n  - query: {type: status}\n".into(), 200),
        ("bob", format!("MESS:\n  - query:\n      type: status\n      filter: {{re: {day}-001}}\n"), 404),
        // Refusals: roles, strangers, bad input.
        ("alice", format!("MESS:\n  - status: {{re: {day}-001, code: completed}}\n"), 403),
        ("bob", "MESS:\n  - cancel: {re: vac-1}\n".into(), 404),
        ("bob", format!("MESS:\n  - review: {{re: {day}-001, rating: 1}}\n"), 404),
        ("alice", "MESS:\n  - request:\n      requires: [vacuum-floor]\n".into(), 422),
        ("alice", "MESS: [".into(), 400),
        ("alice", r#"{"MESS": [}"#.into(), 400),
        ("alice", "MESS:\n  - ack: {re: last}\n".into(), 422),
        ("robo", format!("MESS:\n  - status: {{re: {day}-001, code: sideways}}\n"), 422),
    ];
    for (who, text, status) in &script {
        let (kind, key) = key_of(who);
        let json = text.starts_with('{');
        let from_worker = worker.post(&key, text, json);
        let from_native = native.post(who, kind, text, json);
        assert_eq!(
            from_worker, from_native,
            "{who} sent:\n{text}\nthe Worker answered the first, the native exchange the second"
        );
        assert_eq!(
            from_worker.0, *status,
            "{who} sent:\n{text}\n{from_worker:?}"
        );
    }

    // The files: the Worker's R2, exported, against the native home, byte for byte.
    let exported = worker.export();
    let files = native.files();
    assert_eq!(
        exported.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        files.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()
    );
    for ((key, text), (_, want)) in exported.iter().zip(&files) {
        assert_eq!(text, want, "{key} differs");
    }
    assert_eq!(files.len(), 4, "{files:?}");

    // One thread file as the API reads it back, in both forms.
    let (_, alice) = key_of("alice");
    let bearer = format!("Bearer {alice}");
    let (code, text) = http_with(
        worker.port,
        "GET",
        &format!("/threads/{day}-001?format=messe-af"),
        &[("authorization", &bearer)],
        "",
    )
    .unwrap();
    assert_eq!(code, 200);
    let want = files
        .iter()
        .find(|(k, _)| k.ends_with(&format!("{day}-001.messe-af.yaml")))
        .map(|(_, t)| t.clone())
        .unwrap();
    assert_eq!(text, want);
    let (code, body) = http_with(
        worker.port,
        "GET",
        "/threads/vac-1",
        &[("authorization", &bearer)],
        "",
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["envelope"]["status"], "completed", "{body}");
    assert_eq!(
        v["messages"].as_array().unwrap().len(),
        want.matches("\n---\n").count(),
        "{body}"
    );
    // Another agent's thread answers as one that does not exist.
    let (_, bob) = key_of("bob");
    let bearer = format!("Bearer {bob}");
    let (code, body) = http_with(
        worker.port,
        "GET",
        &format!("/threads/{day}-001"),
        &[("authorization", &bearer)],
        "",
    )
    .unwrap();
    assert_eq!((code, body.contains("no thread")), (404, true), "{body}");
    // Keys: only the operator mints them, and unknown keys are refused.
    let (code, _) = http_with(
        worker.port,
        "POST",
        "/keys",
        &[("authorization", &bearer)],
        r#"{"kind":"agent","id":"mallory"}"#,
    )
    .unwrap();
    assert_eq!(code, 401);
    let (code, _) = worker.post("mess_0000", "MESS:\n  - request: {intent: x}\n", false);
    assert_eq!(code, 401);
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn six_executors_racing_for_one_thread_see_exactly_one_claim_won() {
    let worker = Worker::start(None);
    let agent = worker.key("agent", "alice");
    let executors: Vec<(String, String)> = (1..=6)
        .map(|i| {
            let id = format!("mop-{i}");
            let key = worker.key("executor", &id);
            let (code, body) = worker.post(
                &key,
                &format!("MESS:\n  - config:\n      executor:\n        id: {id}\n        capabilities: [mop-floor]\n"),
                false,
            );
            assert_eq!(code, 200, "{body}");
            (id, key)
        })
        .collect();
    for round in 0..3 {
        let (code, body) = worker.post(
            &agent,
            &format!(
                "MESS:\n  - request: {{intent: mop the hall {round}, requires: [mop-floor]}}\n"
            ),
            false,
        );
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let thread = v["MESS"]
            .as_array()
            .and_then(|ps| ps.iter().find_map(|p| p["ack"]["ref"].as_str()))
            .unwrap()
            .to_owned();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(executors.len()));
        let answers: Vec<(String, u16)> = std::thread::scope(|s| {
            let handles: Vec<_> = executors
                .iter()
                .map(|(id, key)| {
                    let barrier = barrier.clone();
                    let thread = thread.clone();
                    let worker = &worker;
                    s.spawn(move || {
                        barrier.wait();
                        let (code, _) = worker.post(
                            key,
                            &format!("MESS:\n  - status: {{re: {thread}, code: claimed}}\n"),
                            false,
                        );
                        (id.clone(), code)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<&String> = answers
            .iter()
            .filter(|(_, c)| *c == 200)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        assert!(
            answers.iter().all(|(_, c)| *c == 200 || *c == 409),
            "{answers:?}"
        );
        let bearer = format!("Bearer {agent}");
        let (_, text) = http_with(
            worker.port,
            "GET",
            &format!("/threads/{thread}?format=messe-af"),
            &[("authorization", &bearer)],
            "",
        )
        .unwrap();
        assert_eq!(text.matches("code: claimed").count(), 1, "{text}");
        assert!(text.contains(&format!("executor: {}", won[0])), "{text}");
    }
    // Without a valid key (or link), the answer comes before the body: the client has sent
    // 6 of the 1 MB it declared, and hears 401 at once.
    for bearer in ["Bearer mess_unknown", "Bearer a.b.c"] {
        let (code, body) = http_declaring(
            worker.port,
            "POST",
            "/mess",
            &[
                ("authorization", bearer),
                ("content-type", "application/yaml"),
            ],
            1_000_000,
            "MESS:\n",
        )
        .unwrap();
        assert_eq!(code, 401, "{body}");
    }
    // No other route takes a body, with a key or without: answered before it is read.
    let (code, body) = http_declaring(
        worker.port,
        "POST",
        "/threads",
        &[("authorization", &format!("Bearer {agent}"))],
        1_000_000,
        "MESS:\n",
    )
    .unwrap();
    assert_eq!(code, 404, "{body}");
    // A body declared past the 16 MiB limit is refused as the native exchange refuses it,
    // before it is read. (wrangler's local proxy sometimes closes the connection right after
    // the head of an answer given before the body came: such an answer is asked for again.)
    let bearer = format!("Bearer {agent}");
    let mut answers = Vec::new();
    for _ in 0..3 {
        let answer = http_declaring(
            worker.port,
            "POST",
            "/mess",
            &[
                ("authorization", &bearer),
                ("content-type", "application/yaml"),
            ],
            16 * 1024 * 1024 + 1,
            "MESS:\n",
        )
        .unwrap();
        assert_eq!(answer.0, 413, "{}", answer.1);
        let whole = !answer.1.is_empty();
        answers.push(answer.1);
        if whole {
            break;
        }
    }
    assert!(
        answers
            .last()
            .unwrap()
            .contains("the body is larger than the limit of 16777216 bytes"),
        "{answers:?}"
    );
}

fn stdout_of(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn the_remote_cli_drives_the_worker_and_its_files_pulled_out_form_a_home_mess_reads() {
    let worker = Worker::start(None);
    let url = format!("http://127.0.0.1:{}", worker.port);
    let agent = worker.key("agent", "claude-agent");
    let robot = worker.key("executor", "roomba");
    let (code, body) = worker.post(
        &robot,
        "MESS:\n  - config:\n      executor: {id: roomba, capabilities: [vacuum-floor]}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let laptop = crate::support::Home::with_config("");
    let run = |key: &str, args: &[&str]| {
        let mut all = vec!["--exchange", url.as_str()];
        all.extend_from_slice(args);
        laptop
            .command(&all)
            .env("MESS_API_KEY", key)
            .output()
            .unwrap()
    };
    let said = stdout_of(&run(
        &agent,
        &[
            "request",
            "vacuum the kitchen",
            "--requires",
            "vacuum-floor",
            "--id",
            "job-1",
        ],
    ));
    let r = said
        .split_whitespace()
        .find(|w| w.starts_with("20") && w.len() == 14)
        .unwrap_or_else(|| panic!("no ref in {said}"))
        .to_owned();
    stdout_of(&run(&robot, &["claim", &r]));
    stdout_of(&run(&robot, &["complete", &r, "--text", "kitchen done"]));
    let shown = stdout_of(&run(&agent, &["show", &r]));
    assert!(
        shown.contains("kitchen done") && shown.contains("status: completed"),
        "{shown}"
    );
    let all = stdout_of(&run(&agent, &["status", "--all", "--format", "json"]));
    assert!(all.contains(&r) && all.contains("completed"), "{all}");
    // What the key may not see answers as what does not exist.
    let second = stdout_of(&run(
        &agent,
        &["request", "photo of the porch", "--requires", "take-photo"],
    ));
    let r2 = second
        .split_whitespace()
        .find(|w| w.starts_with("20") && w.len() == 14)
        .unwrap()
        .to_owned();
    let hidden = run(&robot, &["show", &r2]);
    assert!(!hidden.status.success());
    assert!(
        String::from_utf8_lossy(&hidden.stderr).contains("no thread"),
        "{hidden:?}"
    );
    stdout_of(&run(&agent, &["cancel", &r2, "--reason", "not needed"]));

    // The files, pulled out of R2, are a home the native commands read.
    let local = crate::support::Home::with_config("");
    let pulled = Command::new(crate::tidy::root().join("edge/pull"))
        .args(["--url", &url, "--home"])
        .arg(local.path())
        .env("MESS_OPERATOR_KEY", &worker.operator)
        .output()
        .unwrap();
    assert!(stdout_of(&pulled).contains("2 thread files"), "{pulled:?}");
    let status = local.ok(&["status", "--all", "--format", "json"]);
    assert!(status.contains(&r) && status.contains(&r2), "{status}");
    // A pulled home has no index caches yet (client ids, `last`); one repair builds them.
    local.ok(&["fsck", "--repair"]);
    let fsck = local.ok(&["fsck"]);
    assert!(fsck.contains(" 0 problem"), "{fsck}");
    let shown_here = local.ok(&["show", &r]);
    assert_eq!(shown_here, shown, "mess show on the pulled home");
}

/// The text of an MCP tool's answer.
fn tool_text(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn mcp_tools_act_on_the_worker_named_in_exchanges() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    let worker = Worker::start(None);
    let agent = worker.key("agent", "claude-agent");
    let robot = worker.key("executor", "roomba");
    let (code, body) = worker.post(
        &robot,
        "MESS:\n  - config:\n      executor: {id: roomba, capabilities: [vacuum-floor]}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let laptop = crate::support::Home::with_config(&format!(
        "exchanges:\n  edge:\n    type: remote\n    url: http://127.0.0.1:{}\n    api_key: ${{EDGE_KEY}}\n",
        worker.port
    ));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", laptop.path())
            .env("MESS_AGENT_ID", "claude-agent")
            .env("EDGE_KEY", &agent);
        let client = ()
            .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap();
        let call = |name: &'static str, a: serde_json::Value| {
            let client = &client;
            async move {
                client
                    .call_tool(
                        CallToolRequestParams::new(name)
                            .with_arguments(a.as_object().cloned().unwrap_or_default()),
                    )
                    .await
                    .unwrap()
            }
        };
        let r = call(
            "mess_do",
            serde_json::json!({"intent": "vacuum the kitchen", "requires": ["vacuum-floor"], "exchange": "edge"}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", tool_text(&r));
        let s = r.structured_content.clone().unwrap();
        assert_eq!(s["exchange"], "edge", "{s}");
        let thread = s["MESS"]
            .as_array()
            .and_then(|ps| ps.iter().find_map(|p| p["ack"]["ref"].as_str()))
            .unwrap()
            .to_owned();

        // The robot works it on the Worker; the agent's status there shows the answer.
        for body in [
            format!("MESS:\n  - status: {{re: {thread}, code: claimed}}\n"),
            format!(
                "MESS:\n  - status:\n      re: {thread}\n      code: needs_input\n      questions:\n        - field: rooms\n          question: which rooms?\n"
            ),
        ] {
            let (code, answer) = worker.post(&robot, &body, false);
            assert_eq!(code, 200, "{answer}");
        }
        let answered = call(
            "mess_answer",
            serde_json::json!({"ref": thread, "answer": "the kitchen only", "exchange": "edge"}),
        )
        .await;
        assert_eq!(answered.is_error, Some(false), "{}", tool_text(&answered));
        let (code, answer) = worker.post(
            &robot,
            &format!("MESS:\n  - response: {{re: {thread}, content: [kitchen done]}}\n"),
            false,
        );
        assert_eq!(code, 200, "{answer}");
        let done = call(
            "mess_status",
            serde_json::json!({"re": thread, "exchange": "edge"}),
        )
        .await;
        assert_eq!(done.is_error, Some(false), "{}", tool_text(&done));
        assert!(tool_text(&done).contains("kitchen done"), "{}", tool_text(&done));

        // A second request, listed among the open ones and cancelled there.
        let r = call(
            "mess_do",
            serde_json::json!({"intent": "water the plants", "exchange": "edge"}),
        )
        .await;
        let plants = r.structured_content.clone().unwrap()["MESS"]
            .as_array()
            .and_then(|ps| ps.iter().find_map(|p| p["ack"]["ref"].as_str()))
            .unwrap()
            .to_owned();
        let open = call("mess_status", serde_json::json!({"exchange": "edge"})).await;
        assert!(tool_text(&open).contains("water the plants"), "{}", tool_text(&open));
        let c = call(
            "mess_cancel",
            serde_json::json!({"re": plants, "reason": "it rained", "exchange": "edge"}),
        )
        .await;
        assert_eq!(c.is_error, Some(false), "{}", tool_text(&c));
        let bearer = format!("Bearer {agent}");
        let (_, file) = http_with(
            worker.port,
            "GET",
            &format!("/threads/{plants}?format=messe-af"),
            &[("authorization", &bearer)],
            "",
        )
        .unwrap();
        assert!(file.contains("status: cancelled"), "{file}");
        client.cancel().await.unwrap();
    });
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn a_native_exchange_forwards_to_the_worker_and_the_answer_comes_back() {
    use crate::support::server::Server;
    let worker = Worker::start(None);
    let house_key = worker.key("agent", "house");
    let grocer = worker.key("executor", "grocer");
    let (code, body) = worker.post(
        &grocer,
        "MESS:\n  - config:\n      executor: {id: grocer, capabilities: [buy-groceries]}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let house = crate::support::Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  edge:\n    capabilities: [buy-groceries]\n    exchange:\n      url: http://127.0.0.1:{}\n      api_key: ${{EDGE_KEY}}\n",
        worker.port
    ));
    let _server = Server::start_with(&house, &[("EDGE_KEY", &house_key)]);
    let said = house.with_stdin(
        &["send", "-"],
        "MESS:\n  - request:\n      intent: buy onions\n      requires: [buy-groceries]\n",
    );
    assert!(said.status.success(), "{said:?}");
    let text = String::from_utf8_lossy(&said.stdout).into_owned();
    let at_house = text
        .split(|c: char| c.is_whitespace() || c == '"')
        .find(|w| w.starts_with("20") && w.len() == 14)
        .unwrap_or_else(|| panic!("no ref in {text}"))
        .to_owned();
    let until = |what: &str, check: &dyn Fn(&str) -> bool| {
        let start = Instant::now();
        loop {
            let file = house.ok(&["show", &at_house, "--as", "claude-agent"]);
            if check(&file) {
                return file;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what}: not after 30 s:\n{file}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let file = until("forwarded to the Worker", &|f| f.contains("delegated_to:"));
    let after = &file[file.find("delegated_to:").unwrap()..];
    let at_edge = after
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("ref:"))
        .unwrap()
        .trim()
        .trim_matches('"')
        .to_owned();
    // The grocer at the edge takes it and answers; the answer comes back into the house.
    for body in [
        format!("MESS:\n  - status: {{re: {at_edge}, code: claimed}}\n"),
        format!("MESS:\n  - response: {{re: {at_edge}, content: [onions bought]}}\n"),
    ] {
        let (code, answer) = worker.post(&grocer, &body, false);
        assert_eq!(code, 200, "{answer}");
    }
    let done = until("the answer came back", &|f| {
        f.contains("onions bought") && f.contains("status: completed")
    });
    assert!(done.contains("executor: edge"), "{done}");
}

/// `POST /links` with the operator key: the page's address for `executor` on `thread`.
fn worker_link(worker: &Worker, thread: &str, executor: &str) -> String {
    let bearer = format!("Bearer {}", worker.operator);
    let (code, body) = http_with(
        worker.port,
        "POST",
        "/links",
        &[("authorization", &bearer)],
        &format!(r#"{{"ref":"{thread}","executor":"{executor}"}}"#),
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["url"].as_str().unwrap().to_owned()
}

#[test]
#[ignore = "drives wrangler (workerd), Debian's rustc-web and Chromium; .ci/test runs it"]
fn an_executor_works_a_request_from_a_worker_link_in_a_real_browser() {
    use crate::support::browser::Browser;
    assert!(
        Browser::available(),
        "chromium and chromium-driver are needed"
    );
    let worker = Worker::start(None);
    let alice = worker.key("agent", "alice");
    let robo = worker.key("executor", "robo");
    let (code, body) = worker.post(
        &robo,
        "MESS:\n  - config:\n      executor: {id: robo, capabilities: [take-photo]}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let (code, body) = worker.post(
        &alice,
        "MESS:\n  - request:\n      intent: \"what is in the <b>fridge</b>?\"\n      requires: [take-photo]\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    let page = worker_link(&worker, &r, "robo");
    assert!(
        page.starts_with(&format!(
            "http://127.0.0.1:{}/respond?ref={r}&token=",
            worker.port
        )),
        "{page}"
    );
    // The page's headers are the native ones.
    let (code, _) = http(worker.port, "GET", "/respond/app.js", "").unwrap();
    assert_eq!(code, 200);

    let browser = Browser::start();
    browser.open(&page);
    assert_eq!(
        browser.wait_text("#intent", "fridge"),
        "what is in the <b>fridge</b>?",
        "HTML is shown as text"
    );
    browser.click("#claim");
    assert_eq!(crate::web::wait_status(&browser, "claimed"), "claimed");
    // "Sent." follows the page's own redraw; the claim's event redraws nothing more after it,
    // so the form opened next stays open.
    assert!(browser.wait_text("#result", "Sent.").contains("Sent."));
    // The agent's reply to a question arrives over the link's event stream.
    browser.run("document.getElementById('question-form').open = true; return null");
    browser.type_into("#question", "Which shelf?");
    browser.click("#ask");
    assert_eq!(
        crate::web::wait_status(&browser, "needs_input"),
        "needs_input"
    );
    let (code, body) = worker.post(
        &alice,
        &format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{answer: the top shelf}}\n"),
        false,
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        browser
            .wait_text("#history", "the top shelf")
            .contains("the top shelf"),
        "the reply shows without reloading: {}",
        browser.text("main")
    );
    browser.type_into("#answer-text", "Milk, eggs and a lemon.");
    browser.click("#complete-button");
    assert_eq!(crate::web::wait_status(&browser, "completed"), "completed");
    // What the page did is in the thread, as robo's, by the link.
    let bearer = format!("Bearer {alice}");
    let (code, file) = http_with(
        worker.port,
        "GET",
        &format!("/threads/{r}?format=messe-af"),
        &[("authorization", &bearer)],
        "",
    )
    .unwrap();
    assert_eq!(code, 200, "{file}");
    assert!(file.contains("status: completed"), "{file}");
    assert!(file.contains("Milk, eggs and a lemon."), "{file}");
    assert!(file.contains("channel: link"), "{file}");
    assert!(file.contains("executor: robo"), "{file}");
    // A forged link gets the page's clear answer, and a link to one thread opens no other.
    browser.open(&format!(
        "http://127.0.0.1:{}/respond?ref={r}&token=a.b.c",
        worker.port
    ));
    assert!(
        browser
            .wait_text("main", "expired or is not valid")
            .contains("The link has expired or is not valid"),
        "{}",
        browser.text("main")
    );
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn a_routed_request_reaches_the_executor_s_webhook_signed_and_retried_through_the_queue() {
    use crate::support::recorder::{Recorder, Script};
    let hook = Recorder::start();
    // The receiver fails the first attempt: the Queue tries again.
    hook.script("/hook", vec![Script::Status(500)]);
    let worker = Worker::start_with(None, &[("MESS_WEBHOOK_ALLOW", "127.0.0.1")]);
    let alice = worker.key("agent", "alice");
    let robo = worker.key("executor", "robo");
    let rosie = worker.key("executor", "rosie");
    let secret = "whsec-robo-of-this-test";
    let (code, body) = worker.post(
        &robo,
        &format!(
            "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [mop]\n        notify:\n          webhook: {{url: '{}/hook', secret: {secret}}}\n",
            hook.url
        ),
        false,
    );
    assert_eq!(code, 200, "{body}");
    // Where a key may not lead a webhook, a channel this Worker has no settings for, and one
    // the Worker build does not send.
    for (notify, why) in [
        (
            "{webhook: {url: 'http://10.1.2.3/h', secret: s}}",
            "not a public address",
        ),
        (
            "{webhook: {url: 'http://localhost:9/h', secret: s}}",
            "names this machine",
        ),
        ("{telegram: '@rosie_bot'}", "it has no MESS_TELEGRAM_TOKEN"),
        (
            "{email: 'rosie@example.org'}",
            "not supported by the Worker build",
        ),
    ] {
        let (code, body) = worker.post(
            &rosie,
            &format!("MESS:\n  - config:\n      executor:\n        id: rosie\n        capabilities: [mop]\n        notify: {notify}\n"),
            false,
        );
        assert_eq!(code, 422, "{notify}: {body}");
        assert!(body.contains(why), "{notify}: {body}");
    }
    let (code, body) = worker.post(
        &alice,
        "MESS:\n  - request: {intent: mop the hall, requires: [mop]}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    let hits = hook.wait_for(Duration::from_secs(30), |h| h.len() >= 2);
    assert_eq!(hits.len(), 2, "one failed attempt, one delivered: {hits:?}");
    for hit in &hits {
        assert_eq!(hit.method, "POST");
        assert_eq!(
            hit.headers["x-mess-delivery"],
            format!("{r}.robo.webhook.new")
        );
        assert_eq!(hit.headers["x-mess-thread"], r);
        assert_eq!(hit.headers["x-mess-event"], "new");
        assert!(hit.body.contains("intent: mop the hall"), "{}", hit.body);
        // Checked as a receiver checks it, with the native exchange's own signing code.
        let at: i64 = hit.headers["x-mess-timestamp"].parse().unwrap();
        assert_eq!(
            hit.headers["x-mess-signature"],
            mess::notify::sign(
                secret.as_bytes(),
                at,
                &hit.headers["x-mess-delivery"],
                hit.body.as_bytes()
            )
        );
    }
    // Delivered once: no further attempt follows the 2xx.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(hook.hits().len(), 2);
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn slack_telegram_sms_and_ntfy_hear_of_a_routed_request_from_the_worker_with_a_link_that_works() {
    use crate::support::recorder::{Recorder, Script};
    let services = Recorder::start();
    // Slack is rate-limited at the first attempt: the Queue tries again.
    services.script("/slack", vec![Script::Status(429)]);
    let base = |path: &str| format!("{}/{path}", services.url);
    let (slack, telegram, twilio, ntfy) =
        (base("slack/api"), base("tg"), base("twilio"), base("ntfy"));
    let worker = Worker::start_with(
        None,
        &[
            ("MESS_SLACK_TOKEN", "xoxb-edge-test"),
            ("MESS_SLACK_URL", &slack),
            ("MESS_TELEGRAM_TOKEN", "123:tg-edge-test"),
            ("MESS_TELEGRAM_URL", &telegram),
            ("MESS_TWILIO_SID", "AC0001"),
            ("MESS_TWILIO_TOKEN", "tw-edge-test"),
            ("MESS_TWILIO_FROM", "+15550000000"),
            ("MESS_TWILIO_URL", &twilio),
            ("MESS_NTFY_URL", &ntfy),
        ],
    );
    let alice = worker.key("agent", "alice");
    let teague = worker.key("executor", "teague");
    let (code, body) = worker.post(
        &teague,
        "MESS:\n  - config:\n      executor:\n        id: teague\n        capabilities: [take-photo]\n        notify: {slack: U04TEAGUE, telegram: '-100123', sms: '+15551234567', ntfy: teague-phone}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let (code, body) = worker.post(
        &alice,
        "MESS:\n  - request: {intent: check the fridge, requires: [take-photo], priority: urgent}\n",
        false,
    );
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    let hits = services.wait_for(Duration::from_secs(30), |h| h.len() >= 5);
    let to = |prefix: &str| -> Vec<crate::support::recorder::Hit> {
        hits.iter()
            .filter(|h| h.path.starts_with(prefix))
            .cloned()
            .collect()
    };
    let slack_hits = to("/slack/api/chat.postMessage");
    assert_eq!(
        slack_hits.len(),
        2,
        "one refused attempt, one sent: {hits:?}"
    );
    let slack = &slack_hits[1];
    assert_eq!(slack.headers["authorization"], "Bearer xoxb-edge-test");
    let message: serde_json::Value = serde_json::from_str(&slack.body).unwrap();
    assert_eq!(message["channel"], "U04TEAGUE");
    assert_eq!(message["text"], "MESS request: check the fridge");
    let telegram = to("/tg/bot123:tg-edge-test/sendMessage");
    assert_eq!(telegram.len(), 1, "{hits:?}");
    let message: serde_json::Value = serde_json::from_str(&telegram[0].body).unwrap();
    assert_eq!(message["chat_id"], "-100123");
    assert!(message["text"].as_str().unwrap().contains(&r));
    let sms = to("/twilio/2010-04-01/Accounts/AC0001/Messages.json");
    assert_eq!(sms.len(), 1, "{hits:?}");
    // Basic AC0001:tw-edge-test, as Twilio checks it.
    assert_eq!(
        sms[0].headers["authorization"],
        "Basic QUMwMDAxOnR3LWVkZ2UtdGVzdA=="
    );
    assert!(
        sms[0]
            .body
            .starts_with("To=%2B15551234567&From=%2B15550000000&Body="),
        "{}",
        sms[0].body
    );
    let ntfy = to("/ntfy/teague-phone");
    assert_eq!(ntfy.len(), 1, "{hits:?}");
    assert_eq!(ntfy[0].headers["x-priority"], "5");
    assert_eq!(ntfy[0].headers["x-sequence-id"], format!("mess-{r}"));
    // The link a notice carries opens the thread for teague on the Worker.
    let link = message_link(&slack.body);
    assert!(link.contains(&format!("/respond?ref={r}&token=")), "{link}");
    let token = link.split("token=").nth(1).unwrap();
    let (code, body) = http(
        worker.port,
        "GET",
        &format!("/thread/{r}?token={token}"),
        "",
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("check the fridge"), "{body}");
    assert!(ntfy[0].headers["x-click"].contains("/respond?ref="));
    // Sent once each: nothing follows a delivered notice.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(services.hits().len(), 5);
}

/// The page link in a Slack message's "Respond" button.
fn message_link(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["blocks"][2]["elements"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn a_request_past_its_deadline_expires_with_the_same_file_as_on_mess_serve() {
    let worker = Worker::start(Some(CLOCK));
    let native = Native::new(CLOCK);
    let alice = worker.key("agent", "alice");
    let robo = worker.key("executor", "robo");
    for (who, role, key, text) in [
        (
            "robo",
            "executor",
            &robo,
            "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [mop]\n",
        ),
        (
            "alice",
            "agent",
            &alice,
            "MESS:\n  - request: {intent: mop the hall, requires: [mop], needed_by: '2026-11-28T10:00:00Z'}\n  - request: {intent: dust, requires: [mop], constraints: {timing: {expires: 1h}}}\n",
        ),
    ] {
        let (code, body) = worker.post(key, text, false);
        assert_eq!(code, 200, "{body}");
        assert_eq!(native.post(who, role, text, false).0, 200);
    }
    // Both come back two hours later.
    let later = "2026-11-28T11:30:00Z";
    let state = worker.stop();
    let worker = Worker::start_in(Some(later), &[], state);
    let native = Native::open(native.home, later);
    let (code, body) = http_with(
        worker.port,
        "GET",
        "/threads/2026-11-28-001",
        &[("authorization", &format!("Bearer {alice}"))],
        "",
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("expired"), "{body}");
    native.ex.routing().settle_pending().unwrap();
    let files = native.files();
    assert_eq!(
        files.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        [
            "state=canceled/2026-11-28-001.messe-af.yaml",
            "state=canceled/2026-11-28-002.messe-af.yaml"
        ]
    );
    assert_eq!(
        worker.export(),
        files,
        "the Worker's files against mess serve's"
    );
}

#[test]
#[ignore = "drives wrangler (workerd) and Debian's rustc-web; .ci/test runs it"]
fn the_durable_object_s_alarm_expires_a_request_when_nobody_asks() {
    let worker = Worker::start(None);
    let alice = worker.key("agent", "alice");
    let due = chrono::Utc::now() + chrono::Duration::seconds(3);
    let (code, body) = worker.post(
        &alice,
        &format!(
            "MESS:\n  - request: {{intent: water the plants, needed_by: '{}'}}\n",
            due.format("%Y-%m-%dT%H:%M:%SZ")
        ),
        false,
    );
    assert_eq!(code, 200, "{body}");
    // R2 is read by the front Worker alone: only the alarm can have moved the file.
    let until = Instant::now() + Duration::from_secs(30);
    let files = loop {
        let files = worker.export();
        if files.iter().any(|(k, _)| k.starts_with("state=canceled/")) || Instant::now() > until {
            break files;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].0.starts_with("state=canceled/"), "{files:?}");
    assert!(
        files[0]
            .1
            .contains("needed_by passed before anyone claimed it"),
        "{}",
        files[0].1
    );
}
