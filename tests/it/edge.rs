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
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
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
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            break (head.len() + 4, length);
        }
    };
    while raw.len() < head_len + length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text[head_len..].to_owned()))
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
    let dev = Dev(Command::new(crate::tidy::root().join("edge/dev"))
        .args(["--port", &port.to_string()])
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
