//! Local stand-ins for the outbound services: an HTTP server on `127.0.0.1:0` that records
//! every request and answers in each API's shape (Slack, Telegram, Twilio, ntfy, webhooks),
//! with scripted failures and delays, and an SMTP server that records each message. For the
//! human page: an https server with the test certificate (`tests/fixtures/tls/`) that records
//! what a browser fetched, and a recording proxy that puts an exchange at another origin with
//! CORS, as a remote exchange named by `exchange=` would be.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One request the recorder received.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: String,
}

/// What to do with the next requests to paths starting with a prefix.
#[derive(Debug, Clone)]
pub(crate) enum Script {
    /// Answer with this status (and an error body).
    Status(u16),
    /// Wait this long before answering normally.
    Delay(Duration),
    /// Answer `302 Found` pointing at this location.
    Redirect(&'static str),
}

#[derive(Default)]
struct State {
    hits: Vec<Hit>,
    scripts: Vec<(String, Script)>,
}

/// Serves `app` on `127.0.0.1:0` from a thread of its own until the test process ends; its
/// port.
pub(crate) fn serve(app: axum::Router) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// The HTTP recorder; it runs until the test process ends.
#[derive(Clone)]
pub(crate) struct Recorder {
    pub(crate) url: String,
    state: Arc<Mutex<State>>,
}

impl Recorder {
    pub(crate) fn start() -> Recorder {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let port = serve(axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = shared.clone();
                async move { answer(&state, method, uri, headers, body).await }
            },
        ));
        Recorder {
            url: format!("http://127.0.0.1:{port}"),
            state,
        }
    }

    /// The next requests to paths starting with `prefix` follow `scripts`, one each.
    pub(crate) fn script(&self, prefix: &str, scripts: Vec<Script>) {
        let mut s = self.state.lock().unwrap();
        for script in scripts {
            s.scripts.push((prefix.to_owned(), script));
        }
    }

    /// Every request so far.
    pub(crate) fn hits(&self) -> Vec<Hit> {
        self.state.lock().unwrap().hits.clone()
    }

    /// Waits up to `within` until `done` holds for the requests so far; returns them.
    pub(crate) fn wait_for(&self, within: Duration, done: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        let until = Instant::now() + within;
        loop {
            let hits = self.hits();
            if done(&hits) || Instant::now() > until {
                return hits;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

async fn answer(
    state: &Mutex<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let script = {
        let mut s = state.lock().unwrap();
        s.hits.push(Hit {
            method: method.to_string(),
            path: path.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let found = s.scripts.iter().position(|(p, _)| path.starts_with(p));
        found.map(|i| s.scripts.remove(i).1)
    };
    match script {
        Some(Script::Status(code)) => {
            return (
                StatusCode::from_u16(code).unwrap(),
                [("content-type", "application/json")],
                "{\"ok\":false,\"error\":\"scripted\"}".to_owned(),
            )
                .into_response();
        }
        Some(Script::Redirect(to)) => {
            return (StatusCode::FOUND, [("location", to)], String::new()).into_response();
        }
        Some(Script::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    let json = if path.contains("/chat.postMessage") || path.contains("/chat.update") {
        "{\"ok\":true,\"channel\":\"C0123\",\"ts\":\"1769882400.000100\"}".to_owned()
    } else if path.contains("/sendMessage")
        || path.contains("/editMessageText")
        || path.contains("/answerCallbackQuery")
    {
        "{\"ok\":true,\"result\":{\"message_id\":42,\"chat\":{\"id\":777}}}".to_owned()
    } else if path.contains("/Messages.json") {
        "{\"sid\":\"SM0001\",\"status\":\"queued\"}".to_owned()
    } else {
        "{\"id\":\"n0001\"}".to_owned()
    };
    (StatusCode::OK, [("content-type", "application/json")], json).into_response()
}

/// One message the SMTP recorder accepted.
#[derive(Debug, Clone)]
pub(crate) struct Mail {
    pub(crate) from: String,
    pub(crate) to: Vec<String>,
    pub(crate) data: String,
}

/// A minimal SMTP server (no TLS, no auth) that accepts and records every message.
#[derive(Clone)]
pub(crate) struct SmtpRecorder {
    pub(crate) port: u16,
    mails: Arc<Mutex<Vec<Mail>>>,
}

impl SmtpRecorder {
    pub(crate) fn start() -> SmtpRecorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mails: Arc<Mutex<Vec<Mail>>> = Arc::default();
        let shared = mails.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let _ = session(stream, &shared);
                });
            }
        });
        SmtpRecorder { port, mails }
    }

    pub(crate) fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }
}

fn session(stream: std::net::TcpStream, mails: &Mutex<Vec<Mail>>) -> std::io::Result<()> {
    let mut out = stream.try_clone()?;
    let mut lines = BufReader::new(stream);
    out.write_all(b"220 recorder ready\r\n")?;
    let (mut from, mut to) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let upper = line.to_ascii_uppercase();
        if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            out.write_all(b"250-recorder\r\n250 8BITMIME\r\n")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = line[10..].trim().to_owned();
            out.write_all(b"250 ok\r\n")?;
        } else if upper.starts_with("RCPT TO:") {
            to.push(line[8..].trim().to_owned());
            out.write_all(b"250 ok\r\n")?;
        } else if upper.starts_with("DATA") {
            out.write_all(b"354 go ahead\r\n")?;
            let mut data = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line)? == 0 {
                    return Ok(());
                }
                if line == ".\r\n" || line == ".\n" {
                    break;
                }
                data.push_str(&line);
            }
            mails.lock().unwrap().push(Mail {
                from: std::mem::take(&mut from),
                to: std::mem::take(&mut to),
                data,
            });
            out.write_all(b"250 queued\r\n")?;
        } else if upper.starts_with("QUIT") {
            out.write_all(b"221 bye\r\n")?;
            return Ok(());
        } else {
            out.write_all(b"250 ok\r\n")?;
        }
    }
}

/// An https server on `127.0.0.1:0` with the test certificate: it answers every request with
/// one fixed body and records the request lines' paths.
#[derive(Clone)]
pub(crate) struct HttpsRecorder {
    pub(crate) url: String,
    paths: Arc<Mutex<Vec<String>>>,
}

impl HttpsRecorder {
    pub(crate) fn start(body: &'static [u8], content_type: &'static str) -> HttpsRecorder {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let cert = CertificateDer::from(include_bytes!("../../fixtures/tls/cert.der").to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            include_bytes!("../../fixtures/tls/key.der").to_vec(),
        ));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let paths: Arc<Mutex<Vec<String>>> = Arc::default();
        let shared = paths.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (config, shared) = (config.clone(), shared.clone());
                std::thread::spawn(move || {
                    let _ = serve_tls(stream, config, &shared, body, content_type);
                });
            }
        });
        HttpsRecorder {
            url: format!("https://127.0.0.1:{port}"),
            paths,
        }
    }

    /// The paths requested so far.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

fn serve_tls(
    stream: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    paths: &Mutex<Vec<String>>,
    body: &[u8],
    content_type: &str,
) -> std::io::Result<()> {
    use std::io::Read;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let head = read_head(&mut tls)?;
    let path = head
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    paths.lock().unwrap().push(path);
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body);
    tls.write_all(&answer)?;
    tls.conn.send_close_notify();
    tls.flush()?;
    let mut rest = [0u8; 64];
    let _ = tls.read(&mut rest);
    Ok(())
}

/// The request head (through the blank line) read from `stream`.
fn read_head(stream: &mut impl std::io::Read) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// One request the CORS proxy passed on.
#[derive(Debug, Clone)]
pub(crate) struct ProxyHit {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) authorization: String,
}

/// A proxy on `127.0.0.1:0` in front of a local server: it answers CORS preflights, passes
/// other requests on (but not event streams, which it refuses) and adds
/// `Access-Control-Allow-Origin: *` to the answers, recording each request.
#[derive(Clone)]
pub(crate) struct CorsProxy {
    pub(crate) url: String,
    hits: Arc<Mutex<Vec<ProxyHit>>>,
}

impl CorsProxy {
    pub(crate) fn start(target: u16) -> CorsProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits: Arc<Mutex<Vec<ProxyHit>>> = Arc::default();
        let shared = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let _ = pass_on(stream, target, &shared);
                });
            }
        });
        CorsProxy {
            url: format!("http://127.0.0.1:{port}"),
            hits,
        }
    }

    /// The requests so far.
    pub(crate) fn hits(&self) -> Vec<ProxyHit> {
        self.hits.lock().unwrap().clone()
    }
}

const CORS: &str = "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Headers: authorization, content-type, accept\r\nAccess-Control-Allow-Methods: GET, POST\r\n";

fn pass_on(
    mut stream: std::net::TcpStream,
    target: u16,
    hits: &Mutex<Vec<ProxyHit>>,
) -> std::io::Result<()> {
    use std::io::Read;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let head = read_head(&mut stream)?;
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default().to_owned();
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    let (mut length, mut authorization) = (0usize, String::new());
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        if k == "content-length" {
            length = v.trim().parse().unwrap_or(0);
        }
        if k == "authorization" {
            authorization = v.trim().to_owned();
        }
        if !matches!(k.as_str(), "host" | "connection" | "origin") {
            headers.push(line.to_owned());
        }
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body)?;
    hits.lock().unwrap().push(ProxyHit {
        method: method.clone(),
        path: path.clone(),
        authorization,
    });
    if method == "OPTIONS" || path.contains("/events") {
        let code = if method == "OPTIONS" {
            "204 No Content"
        } else {
            "404 Not Found"
        };
        let answer =
            format!("HTTP/1.1 {code}\r\n{CORS}Content-Length: 0\r\nConnection: close\r\n\r\n");
        return stream.write_all(answer.as_bytes());
    }
    let mut upstream = std::net::TcpStream::connect(("127.0.0.1", target))?;
    let mut out =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{target}\r\nConnection: close\r\n");
    for h in headers {
        out.push_str(&h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    upstream.write_all(out.as_bytes())?;
    upstream.write_all(&body)?;
    let mut answer = Vec::new();
    upstream.read_to_end(&mut answer)?;
    let at = answer
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(answer.len(), |i| i + 2);
    let mut back = answer[..at].to_vec();
    back.extend_from_slice(CORS.as_bytes());
    back.extend_from_slice(&answer[at..]);
    stream.write_all(&back)
}
