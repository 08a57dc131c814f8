//! Dispatch benchmark: how soon a routed executor's webhook hears of a new request, measured
//! from just before `POST /mess` to the webhook's receipt (a local server in this process;
//! requests 50 ms apart),
//! against the bare round trip of posting to that same webhook server; then how fast
//! `mess serve` drains 1,000 queued notifications, and what the queue costs on disk and in
//! the server's memory.
//!
//! Run with `cargo bench --bench dispatch` (`-- --requests 200 --queued 1000`).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mess::exchange::clock::SystemClock;
use mess::exchange::{Exchange, Sender, Settings};
use mess::protocol::ids::ThreadRef;
use mess::protocol::message::Payload;
use mess::store::Store;

const MESS: &str = env!("CARGO_BIN_EXE_mess");

type Seen = Arc<Mutex<HashMap<String, Instant>>>;

fn option(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A webhook receiver on 127.0.0.1 recording when each thread's notice arrived.
fn receiver(runtime: &tokio::runtime::Runtime) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let shared = seen.clone();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let seen = shared.clone();
        async move {
            let at = Instant::now();
            if let Some(thread) = headers.get("x-mess-thread").and_then(|v| v.to_str().ok()) {
                seen.lock().unwrap().entry(thread.to_owned()).or_insert(at);
            }
            "ok"
        }
    });
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn serve(home: &Path) -> (Child, u16) {
    let log = std::fs::File::create(home.join("serve.log")).unwrap();
    let mut child = Command::new(MESS)
        .arg("--home")
        .arg(home)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().rsplit(':').next().unwrap().parse().unwrap();
    (child, port)
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn home_with(dir: &Path, webhook: &str) {
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "agent_id: bench-agent\ndispatch:\n  webhook: {{secret: bench-signing-key-0123456789abcdef}}\nexecutors:\n  robot:\n    capabilities: [vacuum-floor]\n    notify:\n      webhook: {webhook}/robot\n"
        ),
    )
    .unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let requests = option(&args, "--requests", 200);
    let queued = option(&args, "--queued", 1000);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (webhook, seen) = receiver(&runtime);
    let http = reqwest::Client::new();
    println!(
        "mess dispatch benchmark: {requests} requests one at a time, 50 ms apart, then {queued} queued notifications; webhook receiver in this process on loopback"
    );

    // Latency: request creation to the webhook's receipt, one request at a time.
    let dir = tempfile::TempDir::new().unwrap();
    home_with(dir.path(), &webhook);
    let key = String::from_utf8(
        Command::new(MESS)
            .arg("--home")
            .arg(dir.path())
            .args(["token", "agent", "bench-agent"])
            .stderr(Stdio::null())
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    let (server, port) = serve(dir.path());
    let (latency, acks, floor) = runtime.block_on(async {
        let mut latency = Vec::new();
        let mut acks = Vec::new();
        let mut floor = Vec::new();
        for n in 0..requests {
            let t = Instant::now();
            let r = http
                .post(format!("http://127.0.0.1:{port}/mess"))
                .bearer_auth(&key)
                .header("content-type", "application/yaml")
                .header("accept", "application/json")
                .body(format!(
                    "MESS:\n  - request:\n      intent: bench {n}\n      requires: [vacuum-floor]\n"
                ))
                .send()
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
            acks.push(t.elapsed());
            let thread = v["MESS"]
                .as_array()
                .and_then(|ps| ps.iter().find_map(|p| p["ack"]["ref"].as_str()))
                .unwrap()
                .to_owned();
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(at) = seen.lock().unwrap().get(&thread) {
                    latency.push(*at - t);
                    break;
                }
                assert!(Instant::now() < until, "no notice for {thread}");
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            // The floor: one bare POST to the same receiver from here.
            let t = Instant::now();
            http.post(format!("{webhook}/floor"))
                .body("x")
                .send()
                .await
                .unwrap();
            floor.push(t.elapsed());
            // Requests arrive apart, as they do: back to back they would be sustained load,
            // where the dispatcher deliberately keeps routing to half a core.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (latency, acks, floor)
    });
    stop(server);
    let (mut latency, mut acks, mut floor) = (latency, acks, floor);
    latency.sort();
    acks.sort();
    floor.sort();
    println!();
    println!(
        "creation to first notification: p50 {}, p99 {}, max {} (the ack itself: p50 {}; a bare loopback POST to the receiver: p50 {}); p50 ratio to the bare POST {:.1}x",
        ms(percentile(&latency, 0.5)),
        ms(percentile(&latency, 0.99)),
        ms(*latency.last().unwrap()),
        ms(percentile(&acks, 0.5)),
        ms(percentile(&floor, 0.5)),
        percentile(&latency, 0.5).as_secs_f64() / percentile(&floor, 0.5).as_secs_f64()
    );

    // Throughput: `queued` notifications already in the outbox when the server starts.
    let dir = tempfile::TempDir::new().unwrap();
    home_with(dir.path(), &webhook);
    let store = Store::open(dir.path());
    let ex = Exchange::new(
        store,
        Settings {
            route_in_background: true,
            ..Settings::defaults()
        },
        Arc::new(SystemClock),
    );
    let mut threads = Vec::new();
    for n in 0..queued {
        let answer = ex
            .intake().submit_text(
                &format!("MESS:\n  - request:\n      intent: queued {n}\n      requires: [vacuum-floor]\n"),
                &Sender::new("bench-agent", "bench"),
            )
            .unwrap();
        // The answer may begin with the version; the ack is wherever it is.
        let Some(ack) = answer[0].payloads.iter().find_map(|p| match p {
            Payload::Ack(ack) => Some(ack),
            _ => None,
        }) else {
            panic!("no ack")
        };
        let thread = ThreadRef::parse(ack.thread_ref.as_deref().unwrap()).unwrap();
        ex.outbox()
            .queue_notices(&thread, &["robot".to_owned()], "new", ex.now())
            .unwrap();
        threads.push(thread.to_string());
    }
    let queue_dir = dir.path().join(".mess/outbox/queue");
    let bytes: u64 = std::fs::read_dir(&queue_dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    seen.lock().unwrap().clear();
    let started = Instant::now();
    let (server, _) = serve(dir.path());
    let idle = rss_kib(server.id(), "VmRSS:");
    let until = Instant::now() + Duration::from_secs(120);
    while seen.lock().unwrap().len() < queued && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let drained = started.elapsed();
    let got = seen.lock().unwrap().len();
    let peak = rss_kib(server.id(), "VmHWM:");
    stop(server);
    println!(
        "{queued} queued notifications ({:.0} KiB on disk, {} bytes each): {got} delivered in {:.2} s from server start = {:.0} deliveries/s; server memory {:.0} MiB at start, peak {:.0} MiB",
        bytes as f64 / 1024.0,
        bytes / queued.max(1) as u64,
        drained.as_secs_f64(),
        got as f64 / drained.as_secs_f64(),
        idle as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}
