//! A running `mess serve` on `127.0.0.1:0` over a test home, and a small HTTP/1.1 client for
//! it (one connection per request), so the tests speak real HTTP to the real binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use crate::support::Home;

/// `mess serve` on a free loopback port; stopped when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
}

impl Server {
    /// Starts the server on `home` and waits until it listens.
    pub(crate) fn start(home: &Home) -> Server {
        Server::start_with(home, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub(crate) fn start_with(home: &Home, env: &[(&str, &str)]) -> Server {
        Server::start_on(home, "127.0.0.1:0", env)
    }

    /// [`Server::start_with`] on the address `addr`.
    pub(crate) fn start_on(home: &Home, addr: &str, env: &[(&str, &str)]) -> Server {
        let mut child = home
            .command(&["serve", "--addr", addr])
            .envs(env.iter().copied())
            .env("MESS_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server { child, port }
    }

    /// Sends one request; returns the status and the body.
    pub(crate) fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        // A server that refuses a body early (too large, no credentials) answers and closes
        // before reading it: the rest of the write may then fail, and the answer still counts.
        let _ = stream.write_all(body);
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, body.to_owned())
    }

    /// Sends a request without a body; returns the status and the head (lower-case header
    /// names), for redirects and CORS headers.
    pub(crate) fn send_head(&self, method: &str, path: &str) -> (u16, String) {
        self.send_head_with(method, path, &[])
    }

    /// [`Server::send_head`] with request headers.
    pub(crate) fn send_head_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head =
            format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let head = text.split("\r\n\r\n").next().unwrap_or_default();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let lines: Vec<String> = head
            .lines()
            .map(|l| match l.split_once(':') {
                Some((k, v)) => format!("{}:{v}", k.to_ascii_lowercase()),
                None => l.to_owned(),
            })
            .collect();
        (status, lines.join("\n"))
    }

    /// `GET path` with a bearer key.
    pub(crate) fn get(&self, path: &str, key: &str) -> (u16, String) {
        let auth = format!("Bearer {key}");
        self.send("GET", path, &[("Authorization", &auth)], b"")
    }

    /// `POST /mess` with a bearer key and a YAML body.
    pub(crate) fn post_yaml(&self, key: &str, yaml: &str) -> (u16, String) {
        let auth = format!("Bearer {key}");
        self.send(
            "POST",
            "/mess",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/yaml"),
                ("Accept", "application/json"),
            ],
            yaml.as_bytes(),
        )
    }
}

impl Server {
    /// The server's process id (its query workers are its children).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server the way an operator does (SIGTERM) and waits for it: writes in flight,
    /// the background pass's too, finish first. Dropping it instead kills it mid-write, which
    /// is a crash: what a check of the files finds then is a crash's leftovers.
    pub(crate) fn stop(mut self) {
        assert!(
            self.terminate(std::time::Duration::from_secs(30)),
            "the server did not stop within 30 s of SIGTERM"
        );
    }

    /// Sends SIGTERM and waits up to `within` for the process to exit; whether it did.
    pub(crate) fn terminate(&mut self, within: std::time::Duration) -> bool {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = std::time::Instant::now() + within;
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
