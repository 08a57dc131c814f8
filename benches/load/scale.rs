//! The load benchmark's scale section: the same lifecycle workload on homes of 0, 10,000 and
//! 100,000 threads once the server has settled (its background work idle), and on the 10,000
//! home right after a burst of 10,000 routable requests, while the dispatcher drains it; so
//! that tier 0's cost per request is seen not to grow with the home, and the burst's cost is
//! seen too.

use std::path::Path;
use std::time::{Duration, Instant};

use mess::protocol::ids::ThreadRef;
use mess::store::Store;

use crate::common::{ack_ref, lifecycle, ms, percentile, post, seeded_home, serve, terminate};

/// One measurement: messages per second and the p99 of every step.
pub(crate) struct Point {
    pub(crate) label: String,
    pub(crate) rate: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) note: String,
}

/// Waits until the server `pid` has used under 5% of a core for two half-seconds in a row
/// (its startup routing pass and other background work done), at most `limit`.
fn settle(pid: u32, limit: Duration) -> Duration {
    let ticks = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // utime and stime: fields 14 and 15, after the parenthesised command name.
        let rest = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let started = Instant::now();
    let mut quiet = 0;
    let mut last = ticks();
    while quiet < 2 && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(500));
        let now = ticks();
        // 100 ticks a second: under 3 ticks in half a second is under 6% of a core.
        quiet = if now.saturating_sub(last) < 3 {
            quiet + 1
        } else {
            0
        };
        last = now;
    }
    started.elapsed()
}

/// Every client runs `lifecycles` lifecycles; the rate and step latencies.
async fn lifecycles(
    base: &str,
    keys: &[(String, String)],
    lifecycles: usize,
) -> (f64, Vec<Duration>) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(keys.len())
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, (agent, executor)) in keys.iter().enumerate() {
        let (client, urls) = (client.clone(), vec![format!("{base}/mess")]);
        let (agent, executor) = (agent.clone(), executor.clone());
        tasks.push(tokio::spawn(async move {
            let mut steps = Vec::new();
            // Numbered after the main section's lifecycles, so intents stay unique.
            for n in 10_000..10_000 + lifecycles {
                steps.extend(lifecycle(&client, &urls, (&agent, &executor), i, n).await.1);
            }
            steps
        }));
    }
    let mut steps = Vec::new();
    for t in tasks {
        steps.extend(t.await.unwrap());
    }
    let rate = steps.len() as f64 / started.elapsed().as_secs_f64();
    steps.sort();
    (rate, steps)
}

/// Sends `total` requests nobody claims (each routable to its client's executor) from every
/// client at once; their refs and how long sending took.
async fn burst(base: &str, keys: &[(String, String)], total: usize) -> (Vec<String>, Duration) {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let per_client = total.div_ceil(keys.len());
    let mut tasks = Vec::new();
    for (i, (agent, _)) in keys.iter().enumerate() {
        let (client, url, agent) = (client.clone(), format!("{base}/mess"), agent.clone());
        tasks.push(tokio::spawn(async move {
            let mut refs = Vec::new();
            for n in 0..per_client {
                let ack = post(
                    &client,
                    &url,
                    &agent,
                    format!("MESS:\n  - request:\n      intent: scale burst {n} of client {i}\n      requires: [bench-task-{i}]\n"),
                )
                .await;
                refs.push(ack_ref(&ack));
            }
            refs
        }));
    }
    let mut refs = Vec::new();
    for t in tasks {
        refs.extend(t.await.unwrap());
    }
    (refs, started.elapsed())
}

/// How many of `refs` have been routed (have a `dispatched` entry).
fn routed(home: &Path, refs: &[String]) -> usize {
    let store = Store::open(home);
    refs.iter()
        .filter(|r| {
            store
                .envelope(&ThreadRef::parse(r).unwrap())
                .is_ok_and(|(env, _)| env.history.iter().any(|h| h.action == "dispatched"))
        })
        .count()
}

/// Runs the scale section: `sizes` settled, then a burst of `burst_size` on the home of
/// `burst_on` threads; `per_client` lifecycles per client each time.
pub(crate) fn run(
    runtime: &tokio::runtime::Runtime,
    clients: usize,
    per_client: usize,
    sizes: &[usize],
    burst_on: usize,
    burst_size: usize,
) -> Vec<Point> {
    let mut points = Vec::new();
    for &size in sizes {
        let dir = tempfile::TempDir::new().unwrap();
        let home = dir.path();
        let t = Instant::now();
        let keys = seeded_home(home, size, clients);
        let seeded = t.elapsed();
        let (mut server, port) = serve(home);
        let base = format!("http://127.0.0.1:{port}");
        let waited = settle(server.id(), Duration::from_secs(300));
        runtime.block_on(lifecycles(&base, &keys, 2));
        settle(server.id(), Duration::from_secs(60));
        let (rate, steps) = runtime.block_on(lifecycles(&base, &keys, per_client));
        points.push(Point {
            label: format!("{size} threads, settled"),
            rate,
            p50: percentile(&steps, 0.5),
            p99: percentile(&steps, 0.99),
            note: format!(
                "seeded in {:.0} s, settled {:.1} s after start",
                seeded.as_secs_f64(),
                waited.as_secs_f64()
            ),
        });
        if size == burst_on {
            settle(server.id(), Duration::from_secs(60));
            let (refs, sent) = runtime.block_on(burst(&base, &keys, burst_size));
            let before = routed(home, &refs);
            let t = Instant::now();
            let (rate, steps) = runtime.block_on(lifecycles(&base, &keys, per_client));
            let during = t.elapsed();
            let after = routed(home, &refs);
            let drained = settle(server.id(), Duration::from_secs(300));
            let last = routed(home, &refs);
            points.push(Point {
                label: format!("{size} threads, {} burst draining", refs.len()),
                rate,
                p50: percentile(&steps, 0.5),
                p99: percentile(&steps, 0.99),
                note: format!(
                    "burst sent in {:.1} s; routed {before} when the load began, {after} after its {:.1} s, {last} once idle {:.1} s later",
                    sent.as_secs_f64(),
                    during.as_secs_f64(),
                    drained.as_secs_f64()
                ),
            });
        }
        terminate(&server);
        let _ = server.wait();
    }
    points
}

/// Prints the scale table, each row against the empty home.
pub(crate) fn report(points: &[Point]) {
    println!();
    println!("scale: the same lifecycles by home size (tier 0, one node)");
    println!(
        "{:<36} {:>12} {:>10} {:>10} {:>10}",
        "home", "messages/s", "vs empty", "p50", "p99"
    );
    let empty = points.first().map_or(1.0, |p| p.rate);
    for p in points {
        println!(
            "{:<36} {:>12.0} {:>9.0}% {:>10} {:>10}   {}",
            p.label,
            p.rate,
            100.0 * p.rate / empty,
            ms(p.p50),
            ms(p.p99),
            p.note
        );
    }
}
