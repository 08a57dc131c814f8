//! G2, throughput: the load benchmark's lifecycle workload (request, claim, progress,
//! complete) with its steps spread round-robin over the nodes, beside the same workload on one
//! tier-0 node in the same run.

use std::time::{Duration, Instant};

use crate::Outcome;
use crate::common::{cpu_time, lifecycle, ms, percentile};
use crate::nodes::{Cluster, mess, serve};

/// Each lifecycle step's latencies, and how long the whole run took.
pub(crate) struct Run {
    pub(crate) steps: [Vec<Duration>; 4],
    pub(crate) wall: Duration,
}

impl Run {
    fn messages(&self) -> usize {
        self.steps.iter().map(Vec::len).sum()
    }

    fn rate(&self) -> f64 {
        self.messages() as f64 / self.wall.as_secs_f64()
    }

    fn all(&self) -> Vec<Duration> {
        let mut all: Vec<Duration> = self.steps.iter().flatten().copied().collect();
        all.sort();
        all
    }

    fn line(&self, name: &str) -> String {
        let all = self.all();
        let per_step: Vec<String> = ["request", "claim", "progress", "complete"]
            .iter()
            .zip(&self.steps)
            .map(|(n, v)| {
                let mut v = v.clone();
                v.sort();
                format!("{n} {}", ms(percentile(&v, 0.99)))
            })
            .collect();
        format!(
            "   {name:<28} {:>6.0} messages/s, p50 {}, p99 {} (p99 by step: {})",
            self.rate(),
            ms(percentile(&all, 0.5)),
            ms(percentile(&all, 0.99)),
            per_step.join(", ")
        )
    }
}

/// Every client runs `lifecycles` lifecycles against `urls` (round-robin by step).
pub(crate) async fn lifecycles(
    urls: &[String],
    keys: &[(String, String)],
    lifecycles: usize,
) -> Run {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(keys.len())
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, (agent, executor)) in keys.iter().enumerate() {
        let (client, urls) = (client.clone(), urls.to_vec());
        let (agent, executor) = (agent.clone(), executor.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            for n in 0..lifecycles {
                done.push(lifecycle(&client, &urls, (&agent, &executor), i, n).await.1);
            }
            done
        }));
    }
    let mut steps: [Vec<Duration>; 4] = Default::default();
    for task in tasks {
        for one in task.await.unwrap() {
            for (s, d) in one.iter().enumerate() {
                steps[s].push(*d);
            }
        }
    }
    Run {
        steps,
        wall: started.elapsed(),
    }
}

/// The agent and executor keys of `clients` load clients, made by `token(role, id)`.
pub(crate) fn keys(clients: usize, token: impl Fn(&str, &str) -> String) -> Vec<(String, String)> {
    (0..clients)
        .map(|i| {
            (
                token("agent", &format!("bench-agent-{i}")),
                token("executor", &format!("bench-{i}")),
            )
        })
        .collect()
}

/// Runs G2 on the running nodes of `cluster` and on one tier-0 node with `config`.
pub(crate) async fn run(
    cluster: &Cluster,
    config: &str,
    clients: usize,
    per_client: usize,
) -> Outcome {
    let keys1 = keys(clients, |role, id| cluster.token(role, id));
    let urls = cluster.mess_urls();
    // Warm both up, then measure.
    lifecycles(&urls, &keys1, 2).await;
    let (pg_before, nodes_before) = (cpu_named("postgres"), cpu_named("mess"));
    let tier1 = lifecycles(&urls, &keys1, per_client).await;
    let pg_cpu = cpu_named("postgres").saturating_sub(pg_before);
    let nodes_cpu = cpu_named("mess").saturating_sub(nodes_before);

    let dir = tempfile::TempDir::new().unwrap();
    std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    let keys0 = keys(clients, |role, id| {
        mess(dir.path(), None, &["token", role, id])
            .trim()
            .to_owned()
    });
    let node = serve(dir.path(), None);
    let url0 = vec![format!("{}/mess", node.base())];
    lifecycles(&url0, &keys0, 2).await;
    let tier0 = lifecycles(&url0, &keys0, per_client).await;
    drop(node);

    let all = tier1.all();
    let p99 = percentile(&all, 0.99);
    let worst_step = tier1
        .steps
        .iter()
        .map(|v| {
            let mut v = v.clone();
            v.sort();
            percentile(&v, 0.99)
        })
        .max()
        .unwrap_or_default();
    let ok = tier1.rate() >= 500.0 && worst_step <= Duration::from_millis(100);
    Outcome {
        ok,
        lines: vec![
            format!(
                "G2 throughput: {clients} clients x {per_client} lifecycles ({} messages, every write durable)",
                tier1.messages()
            ),
            tier1.line(&format!("tier 1, {} nodes round-robin", urls.len())),
            tier0.line("tier 0, one node"),
            format!(
                "   tier 1 CPU per message: PostgreSQL {:.2} ms, the {} nodes {:.2} ms (PostgreSQL's share {:.0}%)",
                per_message(pg_cpu, tier1.messages()),
                urls.len(),
                per_message(nodes_cpu, tier1.messages()),
                100.0 * pg_cpu.as_secs_f64() / (pg_cpu + nodes_cpu).as_secs_f64().max(1e-9)
            ),
            format!(
                "   tier 1 / tier 0: {:.2}x the rate; p99 {} (target: >= 500 messages/s, p99 per step <= 100 ms)",
                tier1.rate() / tier0.rate(),
                ms(p99)
            ),
        ],
    }
}

/// CPU used so far by the running processes named `name` (PostgreSQL's backends and
/// background processes, or the `mess` nodes); a process that ended takes its share with it,
/// so the measured span must not start or stop any.
pub(crate) fn cpu_named(name: &str) -> Duration {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        })
        .map(cpu_time)
        .sum()
}

pub(crate) fn per_message(cpu: Duration, messages: usize) -> f64 {
    cpu.as_secs_f64() * 1000.0 / messages.max(1) as f64
}
