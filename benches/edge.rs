//! The Worker build against `mess serve`, in one run on one machine: lifecycles (request,
//! claim, progress, complete with a response) by concurrent clients, each client's requests
//! routed to its own executor, on `edge/dev` (wrangler dev, workerd, local Durable Object and
//! R2) and on `mess serve` over an empty home; messages/s, p50/p99 per step, and server CPU
//! per message (the whole process group for the Worker: wrangler's node and workerd). Then
//! the Worker's bundle size and its cold start: `edge/dev` started to `/healthz` answered,
//! and the first `POST /mess` (Durable Object and WebAssembly instantiated), against
//! `mess serve` started to listening.
//!
//! Needs what `edge/dev` needs (Debian's rustc-web, wrangler from edge/package-lock.json).
//! Run with `cargo bench --bench edge` (`-- --clients 8 --lifecycles 50`).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{cpu_time, lifecycle, mess, ms, option, percentile, serve, terminate};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// CPU time of every process in process group `group` (wrangler's node and its workerd).
fn group_cpu(group: u32) -> Duration {
    let mut total = Duration::ZERO;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        // The process group is field 5 of the line, the third after the name.
        if rest.split_whitespace().nth(2).and_then(|g| g.parse().ok()) == Some(group) {
            total += cpu_time(pid);
        }
    }
    total
}

/// `edge/dev` running in its own process group, stopped with it.
struct Dev {
    child: Child,
    port: u16,
    operator: String,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        std::thread::sleep(Duration::from_secs(2));
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `edge/dev` (already built) on fresh storage; returns it and how long it took to
/// answer `/healthz`.
fn start_edge(state: &Path) -> (Dev, Duration) {
    let port = free_port();
    let started = Instant::now();
    let mut child = Command::new(root().join("edge/dev"))
        .args([
            "--port",
            &port.to_string(),
            "--inspector-port",
            &free_port().to_string(),
            "--state",
        ])
        .arg(state)
        .env_remove("MESS_OPERATOR_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let operator = first
        .trim()
        .strip_prefix("operator key: ")
        .unwrap()
        .to_owned();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = format!("http://127.0.0.1:{port}/healthz");
    loop {
        if probe::healthy(&url).unwrap_or(false) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "edge/dev did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    (
        Dev {
            child,
            port,
            operator,
        },
        took,
    )
}

/// A blocking GET without a runtime, while the Worker starts.
mod probe {
    /// True when `url` answers 200.
    pub(super) fn healthy(url: &str) -> Result<bool, std::io::Error> {
        use std::io::{Read as _, Write as _};
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let mut s = std::net::TcpStream::connect(host)?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        write!(
            s,
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )?;
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf)?;
        Ok(buf.ends_with(b"200"))
    }
}

/// Mints a key at the Worker.
async fn edge_key(client: &reqwest::Client, dev: &Dev, kind: &str, id: &str) -> String {
    let r = client
        .post(format!("http://127.0.0.1:{}/keys", dev.port))
        .bearer_auth(&dev.operator)
        .body(format!(r#"{{"kind":"{kind}","id":"{id}"}}"#))
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    v["key"].as_str().unwrap().to_owned()
}

struct Run {
    messages_per_s: f64,
    steps: Vec<Vec<Duration>>,
    cpu_per_message: Duration,
}

/// `clients` clients, each running `lifecycles` lifecycles against `url`; `cpu` reads the
/// server's CPU time.
async fn drive(
    url: &str,
    keys: &[(String, String)],
    lifecycles: usize,
    cpu: impl Fn() -> Duration,
) -> Run {
    let client = reqwest::Client::new();
    let urls = vec![format!("{url}/mess")];
    let cpu_before = cpu();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, (agent, executor)) in keys.iter().enumerate() {
        let client = client.clone();
        let urls = urls.clone();
        let (agent, executor) = (agent.clone(), executor.clone());
        tasks.push(tokio::spawn(async move {
            let mut steps: Vec<Vec<Duration>> = vec![Vec::new(); 4];
            for n in 0..lifecycles {
                let (_, took) = lifecycle(&client, &urls, (&agent, &executor), i, n).await;
                for (k, t) in took.iter().enumerate() {
                    steps[k].push(*t);
                }
            }
            steps
        }));
    }
    let mut steps: Vec<Vec<Duration>> = vec![Vec::new(); 4];
    for t in tasks {
        for (k, s) in t.await.unwrap().into_iter().enumerate() {
            steps[k].extend(s);
        }
    }
    let elapsed = started.elapsed();
    let messages = (keys.len() * lifecycles * 4) as u32;
    for s in &mut steps {
        s.sort();
    }
    Run {
        messages_per_s: f64::from(messages) / elapsed.as_secs_f64(),
        steps,
        cpu_per_message: (cpu() - cpu_before) / messages,
    }
}

/// `/healthz` asked `n` times by `clients` clients at once: requests/s and server CPU per
/// request, what the platform costs before any exchange work.
async fn healthz(
    url: &str,
    clients: usize,
    n: usize,
    cpu: impl Fn() -> Duration,
) -> (f64, Duration) {
    let client = reqwest::Client::new();
    let cpu_before = cpu();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let client = client.clone();
        let url = format!("{url}/healthz");
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / clients {
                let r = client.get(&url).send().await.unwrap();
                assert!(r.status().is_success());
                r.bytes().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let done = (n / clients * clients) as u32;
    (
        f64::from(done) / started.elapsed().as_secs_f64(),
        (cpu() - cpu_before) / done,
    )
}

fn report(name: &str, run: &Run) {
    let names = ["request", "claim", "progress", "complete"];
    let steps: Vec<String> = run
        .steps
        .iter()
        .zip(names)
        .map(|(s, n)| {
            format!(
                "{n} p50 {} p99 {}",
                ms(percentile(s, 0.5)),
                ms(percentile(s, 0.99))
            )
        })
        .collect();
    println!(
        "{name:<12} {:>7.0} messages/s, server CPU {} per message; {}",
        run.messages_per_s,
        ms(run.cpu_per_message),
        steps.join(", ")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let clients = option(&args, "--clients", 8);
    let lifecycles = option(&args, "--lifecycles", 50);
    let dir = tempfile::TempDir::new().unwrap();

    let built = Command::new(root().join("edge/build"))
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(built.status.success(), "edge/build failed");
    let dist = PathBuf::from(String::from_utf8(built.stdout).unwrap().trim());
    let wasm = std::fs::metadata(dist.join("mess_edge_core.wasm"))
        .unwrap()
        .len();
    // The Worker's script and the human page it serves (page.js).
    let js = ["index.js", "page.js"]
        .iter()
        .map(|f| std::fs::metadata(dist.join(f)).unwrap().len())
        .sum::<u64>();
    let gzipped = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat '{}' '{}' '{}' | gzip -9 | wc -c",
            dist.join("mess_edge_core.wasm").display(),
            dist.join("index.js").display(),
            dist.join("page.js").display()
        ))
        .output()
        .unwrap();
    let gzipped: u64 = String::from_utf8(gzipped.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    println!(
        "mess edge benchmark: {clients} clients x {lifecycles} lifecycles, the Worker (wrangler dev, local) against mess serve, 2 cores"
    );
    println!(
        "bundle: WebAssembly {} KiB + JavaScript {} KiB = {} KiB, {} KiB gzipped (Workers' free plan allows 3 MiB compressed)",
        wasm / 1024,
        js / 1024,
        (wasm + js) / 1024,
        gzipped / 1024
    );

    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // mess serve, with one executor per client holding its own capability.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut config = String::from("executors:\n");
    for i in 0..clients {
        config.push_str(&format!(
            "  bench-{i}:\n    capabilities: [bench-task-{i}]\n"
        ));
    }
    std::fs::write(home.join("config.yaml"), config).unwrap();
    let native_keys: Vec<(String, String)> = (0..clients)
        .map(|i| {
            (
                mess(&home, &["token", "agent", &format!("bench-agent-{i}")])
                    .trim()
                    .to_owned(),
                mess(&home, &["token", "executor", &format!("bench-{i}")])
                    .trim()
                    .to_owned(),
            )
        })
        .collect();
    let started = Instant::now();
    let (server, port) = serve(&home);
    let native_start = started.elapsed();

    // The Worker, the same executors registered by their own keys.
    let (dev, edge_start) = start_edge(&dir.path().join("edge-state"));
    let edge_keys: Vec<(String, String)> = runtime.block_on(async {
        let client = reqwest::Client::new();
        let first = Instant::now();
        let mut keys = Vec::new();
        for i in 0..clients {
            let agent = edge_key(&client, &dev, "agent", &format!("bench-agent-{i}")).await;
            let executor = edge_key(&client, &dev, "executor", &format!("bench-{i}")).await;
            if i == 0 {
                println!(
                    "cold start: edge/dev to /healthz {} (mess serve to listening {}); the first request to the Durable Object {}",
                    ms(edge_start),
                    ms(native_start),
                    ms(first.elapsed())
                );
            }
            common::post(
                &client,
                &format!("http://127.0.0.1:{}/mess", dev.port),
                &executor,
                format!(
                    "MESS:\n  - config:\n      executor: {{id: bench-{i}, capabilities: [bench-task-{i}]}}\n"
                ),
            )
            .await;
            keys.push((agent, executor));
        }
        keys
    });

    let group = dev.child.id();
    let edge = runtime.block_on(drive(
        &format!("http://127.0.0.1:{}", dev.port),
        &edge_keys,
        lifecycles,
        || group_cpu(group),
    ));
    let pid = server.id();
    let native = runtime.block_on(drive(
        &format!("http://127.0.0.1:{port}"),
        &native_keys,
        lifecycles,
        || cpu_time(pid),
    ));
    let (edge_hz, edge_hz_cpu) = runtime.block_on(healthz(
        &format!("http://127.0.0.1:{}", dev.port),
        clients,
        2000,
        || group_cpu(group),
    ));
    let (native_hz, native_hz_cpu) = runtime.block_on(healthz(
        &format!("http://127.0.0.1:{port}"),
        clients,
        2000,
        || cpu_time(pid),
    ));
    println!(
        "/healthz (the platform alone): Worker {edge_hz:.0}/s at {} CPU each, mess serve {native_hz:.0}/s at {} CPU each",
        ms(edge_hz_cpu),
        ms(native_hz_cpu)
    );
    report("Worker", &edge);
    report("mess serve", &native);
    println!(
        "Worker: {:.2}x its own /healthz rate; mess serve: {:.2}x its own",
        edge.messages_per_s / edge_hz,
        native.messages_per_s / native_hz
    );
    println!(
        "Worker / mess serve: {:.2}x the messages/s, {:.2}x the server CPU per message, {:.2}x the p99 of a claim",
        edge.messages_per_s / native.messages_per_s,
        edge.cpu_per_message.as_secs_f64() / native.cpu_per_message.as_secs_f64().max(1e-9),
        percentile(&edge.steps[1], 0.99).as_secs_f64()
            / percentile(&native.steps[1], 0.99).as_secs_f64().max(1e-9)
    );
    terminate(&server);
    drop(dev);
}
