//! Cluster benchmark (tier 1): three `mess serve` nodes on one private PostgreSQL (started by
//! the benchmark on loopback, every write durable), measured from outside over HTTP:
//! G1 exactly-once claims, G2 throughput beside one tier-0 node, G3 failover after a SIGKILL,
//! G4 events across nodes, G5 import, mirror and export byte for byte, G6 a job queue's shape
//! (a steady depth of waiting work, workers claiming and completing) beside one tier-0 node. Each prints its numbers
//! and whether it met its target; the process fails when one did not.
//!
//! Run with `cargo bench --bench cluster` (`-- --requests 2000 --clients 16 --lifecycles 100
//! --seconds 20 --changes 200 --threads 1000 --depth 500 --queue-seconds 180`); `-- --only g2`
//! (or `g1,g4`) runs some of them.

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;
// The test suite's private PostgreSQL, as is.
#[allow(dead_code)]
#[path = "../../tests/it/support/postgres.rs"]
mod postgres;

mod events;
mod exactly_once;
mod failover;
mod nodes;
mod queue;
mod roundtrip;
mod throughput;

use common::option;

/// What one measurement found.
pub(crate) struct Outcome {
    ok: bool,
    lines: Vec<String>,
}

/// `POST /mess` of a YAML body with a key: the status and the answer, or why no answer came.
pub(crate) async fn try_post(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &str,
) -> Result<(u16, String), reqwest::Error> {
    let r = client
        .post(url)
        .bearer_auth(key)
        .header("content-type", "application/yaml")
        .header("accept", "application/json")
        .timeout(Duration::from_secs(30))
        .body(body.to_owned())
        .send()
        .await?;
    let status = r.status().as_u16();
    Ok((status, r.text().await?))
}

/// The ref an answer acknowledges.
pub(crate) fn ref_of(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v["MESS"]
        .as_array()?
        .iter()
        .find_map(|p| p["ack"]["ref"].as_str())
        .map(str::to_owned)
}

/// A webhook receiver on loopback that records each delivery id and when it arrived.
pub(crate) struct Recorder {
    url: String,
    hits: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl Recorder {
    async fn start() -> Recorder {
        let hits: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
        let app = {
            let hits = hits.clone();
            axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
                let hits = hits.clone();
                async move {
                    if let Some(id) = headers.get("x-mess-delivery").and_then(|v| v.to_str().ok()) {
                        hits.lock().unwrap().push((id.to_owned(), Instant::now()));
                    }
                    "ok"
                }
            })
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Recorder { url, hits }
    }

    pub(crate) fn hits(&self) -> Vec<(String, Instant)> {
        self.hits.lock().unwrap().clone()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let requests = option(&args, "--requests", 2_000);
    let clients = option(&args, "--clients", 16);
    // Long enough that the run is not mostly its first seconds (after G1 the database is still
    // vacuuming what G1 left).
    let per_client = option(&args, "--lifecycles", 100);
    let seconds = option(&args, "--seconds", 20) as u64;
    let changes = option(&args, "--changes", 200);
    let threads = option(&args, "--threads", 1_000);
    let depth = option(&args, "--depth", 500);
    let queue_seconds = option(&args, "--queue-seconds", 180) as u64;
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.to_lowercase());
    let wanted = |g: &str| only.as_deref().is_none_or(|o| o.split(',').any(|x| x == g));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "mess cluster benchmark: 3 nodes on one PostgreSQL (fsync on), over loopback HTTP; 2-core figures in the README"
    );
    let outcomes = runtime.block_on(async {
        let recorder = Recorder::start().await;
        let config = nodes::config(clients, &recorder.url);
        let mut cluster = nodes::Cluster::new(3, &config);
        cluster.start_all();
        let mut outcomes = Vec::new();
        if wanted("g1") {
            record(
                &mut outcomes,
                "G1",
                exactly_once::run(&cluster, requests).await,
            );
        }
        if wanted("g2") {
            let g2 = throughput::run(&cluster, &config, clients, per_client).await;
            record(&mut outcomes, "G2", g2);
        }
        if wanted("g6") {
            let g6 = queue::run(&cluster, &config, clients, depth, queue_seconds).await;
            record(&mut outcomes, "G6", g6);
        }
        if wanted("g4") {
            record(&mut outcomes, "G4", events::run(&cluster, changes).await);
        }
        if wanted("g3") {
            let keys = throughput::keys(clients, |role, id| cluster.token(role, id));
            let g3 = failover::run(
                &mut cluster,
                &keys,
                &recorder,
                seconds,
                Duration::from_secs(5),
            )
            .await;
            record(&mut outcomes, "G3", g3);
        }
        cluster.stop_all();
        if wanted("g5") {
            let g5 = tokio::task::spawn_blocking(move || roundtrip::run(threads, &config))
                .await
                .unwrap();
            record(&mut outcomes, "G5", g5);
        }
        outcomes
    });
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|(_, o)| !o.ok)
        .map(|(name, _)| *name)
        .collect();
    if failed.is_empty() {
        println!("every target met");
    } else {
        println!("targets missed: {}", failed.join(", "));
        std::process::exit(1);
    }
}

/// Prints what one measurement found and keeps it for the verdict.
fn record(outcomes: &mut Vec<(&'static str, Outcome)>, name: &'static str, outcome: Outcome) {
    for line in &outcome.lines {
        println!("{line}");
    }
    println!("   -> {}", if outcome.ok { "met" } else { "MISSED" });
    outcomes.push((name, outcome));
}
