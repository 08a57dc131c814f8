//! G6, a job queue's shape: a fixed depth of waiting work that producers keep topped up, and
//! workers that find work, claim it and complete it, for a fixed time (180 s by default): the
//! shape in which PostgreSQL job queues are compared (jobs worked per second at a steady
//! depth). It runs on the three nodes and, for the same time, on one tier-0 node, so the
//! figure stands beside a baseline of the same run.
//!
//! Workers find work the way an HTTP executor does: `GET /threads?status=pending` for the
//! capability they share, a random pick among the first 32, a claim (a loser hears 409 and
//! looks again), then `completed` with a response. Every successful claim is checked to be
//! the only one of its thread.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Semaphore};

use crate::common::{ms, percentile};
use crate::nodes::{Cluster, mess, serve};
use crate::{Outcome, try_post};

/// The capability every queue worker holds.
pub(crate) const CAPABILITY: &str = "bench-queue";
/// Producers that keep the depth (each with its own agent key).
const PRODUCERS: usize = 4;
/// Most jobs a producer sends in one body.
const BATCH: usize = 10;
/// How many of the listed threads a worker picks among.
const PICK_AMONG: usize = 32;

/// The executors of the queue's workers, for the cluster's config.
pub(crate) fn executors(workers: usize) -> String {
    (0..workers)
        .map(|i| format!("  queue-{i}:\n    capabilities: [{CAPABILITY}]\n"))
        .collect()
}

/// What one queue run measured.
struct Run {
    jobs: usize,
    conflicts: usize,
    lists: usize,
    wall: Duration,
    /// From a worker's pick to its completion acknowledged.
    work: Vec<Duration>,
    /// Waiting jobs counted at the end (the depth held; a listing shows at most 1,000).
    depth_at_end: usize,
    duplicates: usize,
}

impl Run {
    fn rate(&self) -> f64 {
        self.jobs as f64 / self.wall.as_secs_f64()
    }

    fn line(&self, name: &str) -> String {
        format!(
            "   {name:<28} {:>6.0} jobs/s ({:.0} messages/s), claim and complete p50 {}, p99 {}; {:.2} lost claims and {:.2} listings per job; depth at the end {}",
            self.rate(),
            self.rate() * 3.0,
            ms(percentile(&self.work, 0.5)),
            ms(percentile(&self.work, 0.99)),
            self.conflicts as f64 / self.jobs.max(1) as f64,
            self.lists as f64 / self.jobs.max(1) as f64,
            self.depth_at_end
        )
    }
}

/// Keys of the queue's producers and workers.
struct Keys {
    producers: Vec<String>,
    workers: Vec<String>,
}

impl Keys {
    fn made_by(workers: usize, token: impl Fn(&str, &str) -> String) -> Keys {
        Keys {
            producers: (0..PRODUCERS)
                .map(|i| token("agent", &format!("queue-producer-{i}")))
                .collect(),
            workers: (0..workers)
                .map(|i| token("executor", &format!("queue-{i}")))
                .collect(),
        }
    }
}

/// The request a producer sends, as one item of a MESS body.
fn job_item(producer: usize, n: usize) -> String {
    format!(
        "  - request:\n      intent: queued job {n} of producer {producer}\n      requires: [{CAPABILITY}]\n      response_hint: [text]\n"
    )
}

/// The request a producer sends, as a whole body.
fn job(producer: usize, n: usize) -> String {
    format!("MESS:\n{}", job_item(producer, n))
}

/// Waiting threads' refs as the worker's key may see them.
async fn waiting(client: &reqwest::Client, base: &str, key: &str) -> Vec<String> {
    let Ok(r) = client
        .get(format!(
            "{base}/threads?status=pending&capability={CAPABILITY}&limit={PICK_AMONG}"
        ))
        .bearer_auth(key)
        .timeout(Duration::from_secs(30))
        .send()
        .await
    else {
        return Vec::new();
    };
    let Ok(v) = r.json::<serde_json::Value>().await else {
        return Vec::new();
    };
    v["threads"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["ref"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// How many jobs wait now (a listing shows at most 1,000).
async fn depth_now(base: &str, key: &str) -> usize {
    let listed = reqwest::Client::new()
        .get(format!(
            "{base}/threads?status=pending&capability={CAPABILITY}&limit=1000"
        ))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    listed["threads"].as_array().map_or(0, Vec::len)
}

/// Runs the queue for `seconds` against `bases` (`http://host:port` of each node).
async fn queue(bases: &[String], keys: &Keys, depth: usize, seconds: u64) -> Run {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(keys.workers.len() + PRODUCERS)
        .build()
        .unwrap();
    let posts: Vec<String> = bases.iter().map(|b| format!("{b}/mess")).collect();
    // The depth, filled before the clock starts.
    let fill = Arc::new(AtomicUsize::new(0));
    let mut fillers = Vec::new();
    for (p, key) in keys.producers.iter().enumerate() {
        let (client, posts, key, fill) = (client.clone(), posts.clone(), key.clone(), fill.clone());
        fillers.push(tokio::spawn(async move {
            loop {
                let n = fill.fetch_add(1, Ordering::Relaxed);
                if n >= depth {
                    break;
                }
                let url = &posts[n % posts.len()];
                let _ = try_post(&client, url, &key, &job(p, n)).await;
            }
        }));
    }
    for f in fillers {
        f.await.unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    // One permit per job completed: a producer sends one job in its place.
    let owed = Arc::new(Semaphore::new(0));
    let claimed: Arc<Mutex<HashSet<String>>> = Arc::default();
    let duplicates = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut producers = Vec::new();
    for (p, key) in keys.producers.iter().enumerate() {
        let (client, posts, key) = (client.clone(), posts.clone(), key.clone());
        let (owed, stop) = (owed.clone(), stop.clone());
        producers.push(tokio::spawn(async move {
            let mut n = depth + p;
            while !stop.load(Ordering::Relaxed) {
                let Ok(Ok(first)) =
                    tokio::time::timeout(Duration::from_millis(200), owed.acquire()).await
                else {
                    continue;
                };
                first.forget();
                // What else is owed goes in the same body, as a queue's batch insert does.
                let more = owed.available_permits().min(BATCH - 1);
                if let Ok(rest) = owed.try_acquire_many(more as u32) {
                    rest.forget();
                }
                let jobs: String = (0..=more).map(|k| job_item(p, n + k * PRODUCERS)).collect();
                let url = &posts[n % posts.len()];
                let _ = try_post(&client, url, &key, &format!("MESS:\n{jobs}")).await;
                n += (more + 1) * PRODUCERS;
            }
        }));
    }
    let mut workers = Vec::new();
    for (w, key) in keys.workers.iter().enumerate() {
        let (client, bases, posts, key) =
            (client.clone(), bases.to_vec(), posts.clone(), key.clone());
        let (owed, stop, claimed, duplicates) = (
            owed.clone(),
            stop.clone(),
            claimed.clone(),
            duplicates.clone(),
        );
        workers.push(tokio::spawn(async move {
            let (mut jobs, mut conflicts, mut lists) = (0usize, 0usize, 0usize);
            let mut work = Vec::new();
            let mut turn = w;
            let mut pick = w.wrapping_mul(2_654_435_761);
            while !stop.load(Ordering::Relaxed) {
                turn += 1;
                let node = turn % bases.len();
                lists += 1;
                let refs = waiting(&client, &bases[node], &key).await;
                if refs.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                pick = pick.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let thread = &refs[(pick >> 33) % refs.len()];
                let t = Instant::now();
                let claim = format!("MESS:\n  - status:\n      re: {thread}\n      code: claimed\n");
                match try_post(&client, &posts[node], &key, &claim).await {
                    Ok((200, _)) => {}
                    _ => {
                        conflicts += 1;
                        continue;
                    }
                }
                if !claimed.lock().await.insert(thread.clone()) {
                    duplicates.fetch_add(1, Ordering::Relaxed);
                }
                let done = format!(
                    "MESS:\n  - status:\n      re: {thread}\n      code: completed\n  - response:\n      re: {thread}\n      content:\n        - done by queue-{w}\n"
                );
                let next = posts[(node + 1) % posts.len()].clone();
                if let Ok((200, _)) = try_post(&client, &next, &key, &done).await {
                    work.push(t.elapsed());
                    jobs += 1;
                    owed.add_permits(1);
                }
            }
            (jobs, conflicts, lists, work)
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut run = Run {
        jobs: 0,
        conflicts: 0,
        lists: 0,
        wall: Duration::ZERO,
        work: Vec::new(),
        depth_at_end: 0,
        duplicates: 0,
    };
    for w in workers {
        let (jobs, conflicts, lists, work) = w.await.unwrap();
        run.jobs += jobs;
        run.conflicts += conflicts;
        run.lists += lists;
        run.work.extend(work);
    }
    run.wall = started.elapsed();
    for p in producers {
        p.await.unwrap();
    }
    run.work.sort();
    run.duplicates = duplicates.load(Ordering::Relaxed);
    run
}

/// Runs G6 on the running nodes of `cluster`, then on one tier-0 node with `config`.
pub(crate) async fn run(
    cluster: &Cluster,
    config: &str,
    workers: usize,
    depth: usize,
    seconds: u64,
) -> Outcome {
    let bases: Vec<String> = cluster
        .mess_urls()
        .iter()
        .map(|u| u.trim_end_matches("/mess").to_owned())
        .collect();
    let keys1 = Keys::made_by(workers, |role, id| cluster.token(role, id));
    let (pg_before, nodes_before) = (
        crate::throughput::cpu_named("postgres"),
        crate::throughput::cpu_named("mess"),
    );
    let mut tier1 = queue(&bases, &keys1, depth, seconds).await;
    let pg_cpu = crate::throughput::cpu_named("postgres").saturating_sub(pg_before);
    let nodes_cpu = crate::throughput::cpu_named("mess").saturating_sub(nodes_before);
    tier1.depth_at_end = depth_now(&bases[0], &keys1.workers[0]).await;

    let dir = tempfile::TempDir::new().unwrap();
    std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    let keys0 = Keys::made_by(workers, |role, id| {
        mess(dir.path(), None, &["token", role, id])
            .trim()
            .to_owned()
    });
    let node = serve(dir.path(), None);
    let mut tier0 = queue(&[node.base()], &keys0, depth, seconds).await;
    tier0.depth_at_end = depth_now(&node.base(), &keys0.workers[0]).await;
    drop(node);

    let messages = tier1.jobs * 3;
    let ok = tier1.duplicates == 0 && tier0.duplicates == 0 && tier1.jobs > 0;
    Outcome {
        ok,
        lines: vec![
            format!(
                "G6 queue: {workers} workers and {PRODUCERS} producers, a depth of {depth} waiting jobs kept, {seconds} s each (every write durable)"
            ),
            tier1.line(&format!("tier 1, {} nodes", bases.len())),
            tier0.line("tier 0, one node"),
            format!(
                "   tier 1 CPU per message: PostgreSQL {:.2} ms, the {} nodes {:.2} ms (PostgreSQL's share {:.0}%)",
                crate::throughput::per_message(pg_cpu, messages),
                bases.len(),
                crate::throughput::per_message(nodes_cpu, messages),
                100.0 * pg_cpu.as_secs_f64() / (pg_cpu + nodes_cpu).as_secs_f64().max(1e-9)
            ),
            format!(
                "   tier 1 / tier 0: {:.2}x the jobs/s; claims won twice: {} (target: none)",
                tier1.rate() / tier0.rate().max(1e-9),
                tier1.duplicates + tier0.duplicates
            ),
        ],
    }
}
