//! A real headless Chromium driven over WebDriver (chromedriver from Debian's
//! `chromium-driver`), with a small synchronous client: open a page, find, click, type, run a
//! script, take a screenshot.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;
use serde_json::{Value, json};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process with one browser session; both end when dropped.
pub(crate) struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let text = body.map(Value::to_string).unwrap_or_default();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(text.as_bytes()).unwrap();
    // chromedriver keeps the connection open: read the head, then exactly Content-Length.
    let mut reader = std::io::BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

impl Browser {
    /// Whether chromedriver and chromium are installed (`.ci/test` installs them).
    pub(crate) fn available() -> bool {
        Command::new("chromedriver")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Starts chromedriver and a headless phone-sized Chromium session.
    pub(crate) fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        // The test https server's certificate is self-signed (`tests/fixtures/tls/`).
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=412,915",
                         // Loopback only: no update checks, sync or other background calls.
                         "--no-first-run", "--disable-background-networking",
                         "--disable-component-update", "--disable-sync",
                         "--disable-default-apps", "--use-fake-ui-for-media-stream",
                         "--use-fake-device-for-media-stream"]
            }
        }}});
        let answer = call(port, "POST", "/session", Some(&caps));
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Browser {
            driver,
            port,
            session,
        }
    }

    fn at(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let answer = call(
            self.port,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        );
        answer["value"].clone()
    }

    /// Opens `url`.
    pub(crate) fn open(&self, url: &str) {
        self.at("POST", "/url", Some(&json!({ "url": url })));
    }

    /// The element matching `css`, waiting up to 10 s for it.
    pub(crate) fn find(&self, css: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.at(
                "POST",
                "/element",
                Some(&json!({"using": "css selector", "value": css})),
            );
            if let Some(id) = v[ELEMENT].as_str() {
                return id.to_owned();
            }
            assert!(Instant::now() < until, "no element {css}: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks the element matching `css`.
    pub(crate) fn click(&self, css: &str) {
        let id = self.find(css);
        let v = self.at("POST", &format!("/element/{id}/click"), Some(&json!({})));
        assert!(v.is_null(), "click {css}: {v}");
    }

    /// Types `text` into the element matching `css` (a path, for file inputs).
    pub(crate) fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        let v = self.at(
            "POST",
            &format!("/element/{id}/value"),
            Some(&json!({ "text": text })),
        );
        assert!(v.is_null(), "type into {css}: {v}");
    }

    /// The visible text of the element matching `css`.
    pub(crate) fn text(&self, css: &str) -> String {
        let id = self.find(css);
        self.at("GET", &format!("/element/{id}/text"), None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs `script` in the page and returns its value.
    pub(crate) fn run(&self, script: &str) -> Value {
        self.at(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// Waits up to 10 s until the text of `css` contains `want`; returns the text.
    pub(crate) fn wait_text(&self, css: &str, want: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let t = self.text(css);
            if t.contains(want) || Instant::now() > until {
                return t;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs one Chrome DevTools Protocol command (chromedriver's `goog/cdp/execute`).
    pub(crate) fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.at(
            "POST",
            "/goog/cdp/execute",
            Some(&json!({"cmd": cmd, "params": params})),
        )
    }

    /// Saves a PNG screenshot as `<target tmp>/screenshots/<name>.png`.
    pub(crate) fn screenshot(&self, name: &str) {
        let b64 = self.at("GET", "/screenshot", None);
        let bytes = decode_base64(b64.as_str().unwrap_or_default());
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }

    /// Emulates a viewport of `width` x `height` CSS pixels at one device pixel per CSS pixel
    /// (a phone's when `mobile`).
    pub(crate) fn viewport(&self, width: u32, height: u32, mobile: bool) {
        let v = self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        );
        assert!(v.get("error").is_none(), "viewport: {v}");
    }

    /// Captures the viewport as a PNG (`Page.captureScreenshot`) into
    /// `<target tmp>/screenshots/<name>.png` and, with `MESS_BLESS=1`, into the docs'
    /// `docs/screenshots/<name>.png`; returns its size in bytes.
    pub(crate) fn capture(&self, name: &str) -> usize {
        let v = self.cdp(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": false}),
        );
        let bytes = decode_base64(v["data"].as_str().unwrap_or_default());
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "no screenshot {name}: {v:.200}"
        );
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &bytes).unwrap();
        if std::env::var_os("MESS_BLESS").is_some_and(|v| v == "1") {
            let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(format!("{name}.png")), &bytes).unwrap();
        }
        bytes.len()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = call(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (as WebDriver sends screenshots).
pub(crate) fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(c);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
