//! G4, events across nodes: requests created through node A, one at a time, and an `/events`
//! client on node B; how long from A's acknowledgement to B's event. Then again while every
//! LISTEN and NOTIFY connection of the nodes is killed over and over, so only the followers'
//! own reading of the change feed carries the changes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{ms, percentile};
use crate::nodes::Cluster;
use crate::{Outcome, ref_of, try_post};

/// Opens `/events` on `port`; each thread event's data as it arrives, with the time.
fn open_events(port: u16, key: &str) -> mpsc::Receiver<(Instant, String)> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut data, mut kind) = (String::new(), String::new());
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if let Some(v) = line.strip_prefix("data:") {
                data = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_owned();
            } else if line.is_empty() && !data.is_empty() {
                if kind == "thread" && tx.send((Instant::now(), data.clone())).is_err() {
                    return;
                }
                data.clear();
                kind.clear();
            }
        }
    });
    rx
}

/// Creates `count` requests through `url`, one every `gap`, and measures each one's way to
/// `events`; changes that never arrive within 5 s count as lost.
async fn measure(
    url: &str,
    key: &str,
    events: &mpsc::Receiver<(Instant, String)>,
    count: usize,
    gap: Duration,
    tag: &str,
) -> (Vec<Duration>, usize) {
    let client = reqwest::Client::new();
    let mut sent: HashMap<String, Instant> = HashMap::new();
    let mut seen: HashMap<String, Duration> = HashMap::new();
    let drain = |sent: &HashMap<String, Instant>, seen: &mut HashMap<String, Duration>| {
        while let Ok((at, data)) = events.try_recv() {
            for (r, t) in sent {
                if !seen.contains_key(r) && data.contains(r.as_str()) {
                    seen.insert(r.clone(), at.saturating_duration_since(*t));
                }
            }
        }
    };
    for n in 0..count {
        let body = format!("MESS:\n  - request:\n      intent: {tag} change {n}\n");
        let (status, text) = try_post(&client, url, key, &body).await.unwrap();
        let at = Instant::now();
        assert_eq!(status, 200, "{text}");
        sent.insert(ref_of(&text).unwrap(), at);
        tokio::time::sleep(gap).await;
        drain(&sent, &mut seen);
    }
    let until = Instant::now() + Duration::from_secs(5);
    while seen.len() < sent.len() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
        drain(&sent, &mut seen);
    }
    let mut lat: Vec<Duration> = seen.into_values().collect();
    lat.sort();
    (lat.clone(), sent.len() - lat.len())
}

/// Runs G4 on nodes 1 (writes) and 2 (events) of `cluster`.
pub(crate) async fn run(cluster: &Cluster, changes: usize) -> Outcome {
    let key = cluster.token("agent", "g4-agent");
    let a = cluster.nodes[1].as_ref().unwrap();
    let b = cluster.nodes[2].as_ref().unwrap();
    let url = format!("{}/mess", a.base());
    let events = open_events(b.port, &key);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (normal, lost) = measure(
        &url,
        &key,
        &events,
        changes,
        Duration::from_millis(20),
        "heard",
    )
    .await;

    // Kill the notification connections every 10 ms while the next changes are made.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let (stop, mut sql) = (stop.clone(), cluster.sql());
        std::thread::spawn(move || {
            let mut killed = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(rows) = sql.query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE pid <> pg_backend_pid() AND (query ILIKE 'LISTEN%' OR query ILIKE 'NOTIFY%')",
                    &[],
                ) {
                    killed += rows.len() as u64;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            killed
        })
    };
    let (deaf, lost_deaf) = measure(
        &url,
        &key,
        &events,
        changes / 4,
        Duration::from_millis(100),
        "unheard",
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let killed = killer.join().unwrap();

    let p95 = percentile(&normal, 0.95);
    let deaf_max = deaf.last().copied().unwrap_or_default();
    let ok = lost == 0
        && lost_deaf == 0
        && p95 <= Duration::from_millis(50)
        && deaf_max <= Duration::from_secs(2);
    Outcome {
        ok,
        lines: vec![
            format!(
                "G4 events across nodes: {changes} changes committed through node A, one every 20 ms, each timed from A's answer to B's /events"
            ),
            format!(
                "   with notifications: p50 {}, p95 {}, max {}, lost {lost} (target p95 <= 50 ms)",
                ms(percentile(&normal, 0.5)),
                ms(p95),
                ms(normal.last().copied().unwrap_or_default())
            ),
            format!(
                "   notification connections killed every 10 ms ({killed} killed), {} changes: p50 {}, p95 {}, max {}, lost {lost_deaf} (target: within 2 s)",
                changes / 4,
                ms(percentile(&deaf, 0.5)),
                ms(percentile(&deaf, 0.95)),
                ms(deaf_max)
            ),
        ],
    }
}
