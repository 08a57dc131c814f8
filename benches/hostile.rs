//! Hostile-load benchmark: 16 clients run full request lifecycles against a real `mess serve`
//! twice in one run, first alone (the baseline), then while hostile clients keep sending
//! oversized bodies (declared and chunked), messages crafted to cost the parser the most,
//! heavy SQL (huge strings, endless ranges, wide scans) and half-open connections that never
//! finish their headers. Prints both runs' throughput and p50/p99 side by side, what the
//! hostile clients got back, and the server's peak memory (VmHWM).
//!
//! Run with `cargo bench --bench hostile` (`-- --clients 16 --lifecycles 60 --threads 2000`).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use common::{lifecycle, ms, option, peak_rss_kib, percentile, serve, terminate};

/// One run of the normal clients: every step's latency and the wall time.
struct Run {
    steps: Vec<Duration>,
    lifecycles: usize,
    wall: Duration,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let clients = option(&args, "--clients", 16);
    let lifecycles = option(&args, "--lifecycles", 60);
    let threads = option(&args, "--threads", 2_000);
    let half_open = option(&args, "--half-open", 500);
    let dir = tempfile::TempDir::new().unwrap();
    let home = dir.path();
    let keys = common::seeded_home(home, threads, clients);
    let hostile_agent = common::mess(home, &["token", "agent", "hostile-agent"])
        .trim()
        .to_owned();
    println!(
        "mess hostile-load benchmark: {clients} clients x {lifecycles} lifecycles on a home of {threads} threads, quiet and then beside hostile clients (2-core figures in the README)"
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut server, port) = serve(home);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");

    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (sampling, pid) = (sampling.clone(), server.id());
        std::thread::spawn(move || {
            let mut peak = 0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(family_rss_kib(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    let quiet = runtime.block_on(normal(&base, &keys, lifecycles));
    let quiet_peak = peak_rss_kib(server.id());
    let stop = Arc::new(AtomicBool::new(false));
    let hostile = runtime.spawn(attack(
        base.clone(),
        port,
        hostile_agent,
        half_open,
        stop.clone(),
    ));
    // Let the attack get going before measuring.
    runtime.block_on(async { tokio::time::sleep(Duration::from_secs(2)).await });
    let loud = runtime.block_on(normal(&base, &keys, lifecycles));
    stop.store(true, Ordering::Relaxed);
    let outcomes = runtime.block_on(hostile).unwrap();
    let peak = peak_rss_kib(server.id());
    sampling.store(false, Ordering::Relaxed);
    let family_peak = sampler.join().unwrap();
    terminate(&server);
    let _ = server.wait();

    let line = |name: &str, r: &Run| {
        let rate = (r.lifecycles * 4) as f64 / r.wall.as_secs_f64();
        println!(
            "{name:<8} {:>6} lifecycles in {:>6.2} s = {rate:>6.0} messages/s; p50 {}, p99 {}, max {}",
            r.lifecycles,
            r.wall.as_secs_f64(),
            ms(percentile(&r.steps, 0.5)),
            ms(percentile(&r.steps, 0.99)),
            ms(*r.steps.last().unwrap_or(&Duration::ZERO))
        );
        (rate, percentile(&r.steps, 0.99))
    };
    let (quiet_rate, quiet_p99) = line("quiet", &quiet);
    let (loud_rate, loud_p99) = line("hostile", &loud);
    println!(
        "under attack: {:.2}x the throughput, p99 {:.2}x the quiet run's",
        loud_rate / quiet_rate,
        loud_p99.as_secs_f64() / quiet_p99.as_secs_f64().max(1e-9)
    );
    println!("hostile requests and what they got:");
    for (what, count) in &outcomes {
        println!("  {what}: {count}");
    }
    println!(
        "server peak memory (VmHWM): {:.0} MiB after the quiet run, {:.0} MiB at the end",
        quiet_peak as f64 / 1024.0,
        peak as f64 / 1024.0
    );
    println!(
        "server and its query workers together, sampled every 20 ms: peak {:.0} MiB",
        family_peak as f64 / 1024.0
    );
    let log = std::fs::read_to_string(home.join("serve.log")).unwrap_or_default();
    let errors = log.lines().filter(|l| l.contains("ERROR")).count();
    println!("server log: {errors} error lines");
}

/// Resident memory of `pid` and every process whose parent it is (the query workers), in KiB.
fn family_rss_kib(pid: u32) -> u64 {
    let field = |status: &str, name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let me = field(&status, "Pid:") == Some(u64::from(pid));
        if me || field(&status, "PPid:") == Some(u64::from(pid)) {
            total += field(&status, "VmRSS:").unwrap_or(0);
        }
    }
    total
}

/// The normal clients' lifecycles, all at once.
async fn normal(base: &str, keys: &[(String, String)], lifecycles: usize) -> Run {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(keys.len())
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, (agent, executor)) in keys.iter().enumerate() {
        let (client, url) = (client.clone(), format!("{base}/mess"));
        let (agent, executor) = (agent.clone(), executor.clone());
        tasks.push(tokio::spawn(async move {
            let mut steps = Vec::new();
            for n in 0..lifecycles {
                let (_, s) = lifecycle(
                    &client,
                    std::slice::from_ref(&url),
                    (&agent, &executor),
                    i,
                    n,
                )
                .await;
                steps.extend(s);
            }
            steps
        }));
    }
    let mut steps = Vec::new();
    for t in tasks {
        steps.extend(t.await.unwrap());
    }
    steps.sort();
    Run {
        lifecycles: steps.len() / 4,
        steps,
        wall: started.elapsed(),
    }
}

/// Runs every hostile client until `stop`; counts what each kind of request got back.
async fn attack(
    base: String,
    port: u16,
    agent: String,
    half_open: usize,
    stop: Arc<AtomicBool>,
) -> BTreeMap<String, usize> {
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    // Oversized bodies: declared too large (refused before reading), and chunked without a
    // length (read up to the limit, then refused).
    for chunked in [false, true] {
        let (client, url, agent, stop) = (
            client.clone(),
            format!("{base}/mess"),
            agent.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            let junk = vec![b'x'; 20 * 1024 * 1024];
            while !stop.load(Ordering::Relaxed) {
                let body = if chunked {
                    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                        junk.chunks(1 << 20).map(|c| Ok(c.to_vec())).collect();
                    reqwest::Body::wrap_stream(futures_stream(chunks))
                } else {
                    reqwest::Body::from(junk.clone())
                };
                let what = if chunked {
                    "20 MiB chunked body"
                } else {
                    "20 MiB declared body"
                };
                let status = client
                    .post(&url)
                    .bearer_auth(&agent)
                    .header("content-type", "application/yaml")
                    .body(body)
                    .send()
                    .await
                    .map(|r| r.status().as_u16().to_string())
                    .unwrap_or_else(|_| "connection closed".to_owned());
                *seen.entry(format!("{what} -> {status}")).or_insert(0) += 1;
            }
            seen
        }));
    }
    // Messages just under the size limit that cost the parser most per byte.
    {
        let (client, url, agent, stop) = (
            client.clone(),
            format!("{base}/mess"),
            agent.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            let dense = format!(
                "MESS:\n  - request:\n      intent: x\n      data: [{}]\n",
                vec!["1"; 7 * 1024 * 1024].join(",")
            );
            while !stop.load(Ordering::Relaxed) {
                let status = client
                    .post(&url)
                    .bearer_auth(&agent)
                    .header("content-type", "application/yaml")
                    .body(dense.clone())
                    .send()
                    .await
                    .map(|r| r.status().as_u16().to_string())
                    .unwrap_or_else(|_| "connection closed".to_owned());
                *seen
                    .entry(format!("14 MiB flow sequence -> {status}"))
                    .or_insert(0) += 1;
            }
            seen
        }));
    }
    // Heavy SQL.
    for sql in [
        "SELECT repeat('x', 700000000) AS s",
        "SELECT count(*) FROM range(100000000000)",
        "SELECT * FROM messages",
        "SELECT string_agg(repeat('y', 1000000), ',') FROM range(2000)",
    ] {
        let (client, url, agent, stop) = (
            client.clone(),
            format!("{base}/query"),
            agent.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let status = client
                    .post(&url)
                    .bearer_auth(&agent)
                    .header("content-type", "text/plain")
                    .body(sql)
                    .send()
                    .await
                    .map(|r| r.status().as_u16().to_string())
                    .unwrap_or_else(|_| "connection closed".to_owned());
                let short: String = sql.chars().take(32).collect();
                *seen
                    .entry(format!("query {short}… -> {status}"))
                    .or_insert(0) += 1;
                if status == "429" {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let _ = started;
            }
            seen
        }));
    }
    // Half-open connections: headers begun and never finished, reopened when the server
    // closes them.
    {
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            let mut open = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                open.retain(|(_, t): &(tokio::net::TcpStream, Instant)| {
                    t.elapsed() < Duration::from_secs(12)
                });
                while open.len() < half_open {
                    match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                        Ok(mut s) => {
                            let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await;
                            open.push((s, Instant::now()));
                            *seen
                                .entry("half-open connections opened".to_owned())
                                .or_insert(0) += 1;
                        }
                        Err(_) => {
                            *seen
                                .entry("half-open connections refused".to_owned())
                                .or_insert(0) += 1;
                            break;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            seen
        }));
    }
    let mut all = BTreeMap::new();
    for t in tasks {
        for (k, v) in t.await.unwrap() {
            *all.entry(k).or_insert(0) += v;
        }
    }
    all
}

/// A stream of chunks, for a body sent without a length.
fn futures_stream(
    chunks: Vec<Result<Vec<u8>, std::io::Error>>,
) -> impl tokio_stream::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    tokio_stream::iter(chunks)
}
