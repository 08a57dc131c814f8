//! Load benchmark: concurrent clients run full request lifecycles (request, claim, progress,
//! complete with a response) against a real `mess serve` on a home with existing threads, over
//! loopback HTTP with every write durable. Prints throughput, p50/p99 per step against the
//! server's own `/healthz` round trip as the baseline, the server's peak memory, how soon the
//! background dispatcher routes a burst of requests nobody claims at once (in the lifecycles
//! the clients claim within milliseconds, before routing could matter), and `mess_status` over
//! MCP stdio against the MCP `tools/list` round trip.
//!
//! Then the scale section ([`scale`]): the lifecycles on homes of 0, 10,000 and 100,000 threads
//! once settled, and during the drain of a burst of 10,000 requests.
//!
//! Run with `cargo bench --bench load` (`-- --clients 16 --lifecycles 100 --threads 10000
//! --routing-burst 1000 --scale-lifecycles 40 --sizes 0,10000,100000 --burst 10000`; `--sizes
//! none` skips the scale section; `--baseline PATH` adds older builds, see [`compare`]).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use mess::protocol::ids::ThreadRef;
use mess::store::Store;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

mod common;
#[path = "load/scale.rs"]
mod scale;

use common::{
    MESS, ack_ref, cpu_time, lifecycle, ms, option, own_cpu_time, peak_rss_kib, percentile, post,
    serve, serve_binary, terminate,
};
use mess::store::disk_probe::{self, DiskProbe};

/// No run goes on longer than this, whatever the counts.
const TIME_LIMIT: Duration = Duration::from_secs(120);
const STEPS: [&str; 4] = ["request", "claim", "progress", "complete"];

struct Options {
    clients: usize,
    lifecycles: usize,
    threads: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let o = Options {
        clients: option(&args, "--clients", 16),
        lifecycles: option(&args, "--lifecycles", 100),
        threads: option(&args, "--threads", 10_000),
    };
    let dir = tempfile::TempDir::new().unwrap();
    let home = &dir.path().join("home");
    std::fs::create_dir(home).unwrap();
    // The disk's own limit, measured in the same run on the same folder: what every figure
    // below is a share of.
    let disk = disk_probe::probe(home, o.clients, Duration::from_secs(4)).unwrap();
    let t = Instant::now();
    let keys = common::seeded_home(home, o.threads, o.clients);
    // Each build compared below starts from a copy of the home as seeded.
    let baselines: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--baseline")
        .map(|w| w[1].clone())
        .collect();
    let pristine = dir.path().join("pristine");
    if !baselines.is_empty() {
        copy_home(home, &pristine);
    }
    println!(
        "mess load benchmark: {} clients x {} lifecycles against `mess serve` on a home of {} threads (seeded in {:.1} s); 2-core figures in the README",
        o.clients,
        o.lifecycles,
        o.threads,
        t.elapsed().as_secs_f64()
    );

    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut server, port) = serve(home);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    runtime.block_on(settle(server.id()));
    let (healthz, lifecycles) = runtime.block_on(load(&base, &keys, o.lifecycles, server.id()));
    // A burst of requests nobody claims (1,000 by default), spread over the clients.
    let burst_size = option(&args, "--routing-burst", 1000);
    let burst = runtime.block_on(routing_burst(
        home,
        &base,
        &keys,
        burst_size.div_ceil(o.clients.max(1)),
    ));
    let peak = peak_rss_kib(server.id());
    terminate(&server);
    let _ = server.wait();

    let log = std::fs::read_to_string(home.join("serve.log")).unwrap_or_default();
    for line in log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(5)
    {
        println!("server: {line}");
    }
    report(&disk, &healthz, &lifecycles, peak);
    println!("{burst}");
    runtime.block_on(mcp_status(home, &lifecycles));

    if !baselines.is_empty() {
        let mut builds = vec![("this build".to_owned(), MESS.to_owned())];
        for b in &baselines {
            let name = Path::new(b)
                .file_name()
                .map_or(b.clone(), |n| n.to_string_lossy().into_owned());
            builds.push((name, b.clone()));
        }
        runtime.block_on(compare(
            &pristine,
            &builds,
            &keys,
            o.lifecycles,
            option(&args, "--rounds", 2),
        ));
    }

    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map_or("0,10000,100000", String::as_str)
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    if !sizes.is_empty() {
        let points = scale::run(
            &runtime,
            o.clients,
            option(&args, "--scale-lifecycles", 40),
            &sizes,
            10_000,
            option(&args, "--burst", 10_000),
        );
        scale::report(&points);
    }
}

/// One finished lifecycle: its thread and each step's latency.
struct Lifecycle {
    thread: String,
    steps: [Duration; 4],
}

struct Run {
    done: Vec<Lifecycle>,
    wall: Duration,
    /// CPU the server used during the run.
    server_cpu: Duration,
    /// CPU the clients (this process) used during the run.
    client_cpu: Duration,
}

impl Run {
    fn messages(&self) -> usize {
        self.done.len() * 4
    }

    fn per_message(&self, cpu: Duration) -> String {
        ms(cpu / self.messages().max(1) as u32)
    }
}

/// The baseline (every client does `GET /healthz` as often as it will do lifecycle steps),
/// then the lifecycles.
async fn load(base: &str, keys: &[(String, String)], lifecycles: usize, server: u32) -> (Run, Run) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(keys.len())
        .build()
        .unwrap();
    let deadline = Instant::now() + TIME_LIMIT;

    let (started, server_cpu, client_cpu) = (Instant::now(), cpu_time(server), own_cpu_time());
    let mut tasks = Vec::new();
    for _ in keys {
        let (client, url) = (client.clone(), format!("{base}/healthz"));
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            for _ in 0..lifecycles {
                let mut steps = [Duration::ZERO; 4];
                for step in &mut steps {
                    let t = Instant::now();
                    let r = client.get(&url).send().await.unwrap();
                    assert!(r.status().is_success());
                    r.bytes().await.unwrap();
                    *step = t.elapsed();
                }
                done.push(Lifecycle {
                    thread: String::new(),
                    steps,
                });
                if Instant::now() > deadline {
                    break;
                }
            }
            done
        }));
    }
    let mut baseline = Vec::new();
    for t in tasks {
        baseline.extend(t.await.unwrap());
    }
    let baseline = Run {
        done: baseline,
        wall: started.elapsed(),
        server_cpu: cpu_time(server) - server_cpu,
        client_cpu: own_cpu_time() - client_cpu,
    };

    let (started, server_cpu, client_cpu) = (Instant::now(), cpu_time(server), own_cpu_time());
    let mut tasks = Vec::new();
    for (i, (agent, executor)) in keys.iter().enumerate() {
        let (client, url) = (client.clone(), format!("{base}/mess"));
        let (agent, executor) = (agent.clone(), executor.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            for n in 0..lifecycles {
                let (thread, steps) = lifecycle(
                    &client,
                    std::slice::from_ref(&url),
                    (&agent, &executor),
                    i,
                    n,
                )
                .await;
                done.push(Lifecycle { thread, steps });
                if Instant::now() > deadline {
                    break;
                }
            }
            done
        }));
    }
    let mut done = Vec::new();
    for t in tasks {
        done.extend(t.await.unwrap());
    }
    (
        baseline,
        Run {
            done,
            wall: started.elapsed(),
            server_cpu: cpu_time(server) - server_cpu,
            client_cpu: own_cpu_time() - client_cpu,
        },
    )
}

fn report(disk: &DiskProbe, baseline: &Run, run: &Run, peak_kib: u64) {
    let per_step = |r: &Run, s: usize| {
        let mut v: Vec<Duration> = r.done.iter().map(|l| l.steps[s]).collect();
        v.sort();
        v
    };
    let mut base: Vec<Duration> = (0..4).flat_map(|s| per_step(baseline, s)).collect();
    base.sort();
    let (b50, b99) = (percentile(&base, 0.5), percentile(&base, 0.99));
    let messages = run.messages();
    let rate = messages as f64 / run.wall.as_secs_f64();
    let base_rate = baseline.messages() as f64 / baseline.wall.as_secs_f64();
    println!();
    println!(
        "baseline, the disk: flush p50 {}, p99 {}; durable atomic replaces {:.0}/s with 1 writer, {:.0}/s with {}",
        ms(disk.flush_p50),
        ms(disk.flush_p99),
        disk.replaces_one,
        disk.replaces_many,
        disk.writers
    );
    println!(
        "baseline GET /healthz: {base_rate:.0} requests/s, p50 {}, p99 {}; server CPU {} per request",
        ms(b50),
        ms(b99),
        baseline.per_message(baseline.server_cpu)
    );
    println!(
        "lifecycles: {} ({messages} messages) in {:.2} s = {rate:.0} messages/s ({:.0} lifecycles/s), {:.2}x the /healthz rate",
        run.done.len(),
        run.wall.as_secs_f64(),
        run.done.len() as f64 / run.wall.as_secs_f64(),
        rate / base_rate
    );
    println!(
        "  = {:.2}x the disk's durable-replace rate with {} writers ({:.2}x its one-writer rate)",
        rate / disk.replaces_many,
        disk.writers,
        rate / disk.replaces_one
    );
    println!(
        "  CPU per message: server {} ({:.0}% of one core), clients {}",
        run.per_message(run.server_cpu),
        run.server_cpu.as_secs_f64() / run.wall.as_secs_f64() * 100.0,
        run.per_message(run.client_cpu)
    );
    println!(
        "{:<10} {:>10} {:>10} {:>10} {:>12}",
        "step", "p50", "p99", "max", "p50/healthz"
    );
    let mut all = Vec::new();
    for (s, name) in STEPS.iter().enumerate() {
        let v = per_step(run, s);
        println!(
            "{name:<10} {:>10} {:>10} {:>10} {:>11.1}x",
            ms(percentile(&v, 0.5)),
            ms(percentile(&v, 0.99)),
            ms(*v.last().unwrap_or(&Duration::ZERO)),
            percentile(&v, 0.5).as_secs_f64() / b50.as_secs_f64().max(1e-9)
        );
        all.extend(v);
    }
    all.sort();
    println!(
        "{:<10} {:>10} {:>10} {:>10}",
        "all steps",
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap_or(&Duration::ZERO))
    );
    println!(
        "server peak memory (VmHWM): {:.0} MiB",
        peak_kib as f64 / 1024.0
    );
}

/// The background dispatcher under a burst: every client sends `per_client` requests that
/// nobody claims; reports how long after its creation each got its `dispatched` entry (read
/// from the thread files) once all have one.
async fn routing_burst(
    home: &Path,
    base: &str,
    keys: &[(String, String)],
    per_client: usize,
) -> String {
    let client = reqwest::Client::new();
    let started = Instant::now();
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
                    format!("MESS:\n  - request:\n      intent: burst {n} of client {i}\n      requires: [bench-task-{i}]\n"),
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
    let sent = started.elapsed();
    let store = Store::open(home);
    let until = Instant::now() + Duration::from_secs(30);
    let lags = loop {
        let lags: Vec<Option<Duration>> = refs
            .iter()
            .map(|r| {
                let env = store.envelope(&ThreadRef::parse(r).unwrap()).unwrap().0;
                let h = env.history.iter().find(|h| h.action == "dispatched")?;
                Some((h.at - env.created).to_std().unwrap_or(Duration::ZERO))
            })
            .collect();
        if lags.iter().all(Option::is_some) || Instant::now() > until {
            break lags;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut routed: Vec<Duration> = lags.into_iter().flatten().collect();
    routed.sort();
    format!(
        "background routing, a burst of {} requests sent in {:.2} s: {} routed, creation to `dispatched` p50 {}, p99 {}, max {}",
        refs.len(),
        sent.as_secs_f64(),
        routed.len(),
        ms(percentile(&routed, 0.5)),
        ms(percentile(&routed, 0.99)),
        ms(*routed.last().unwrap_or(&Duration::ZERO)),
    )
}

/// `mess_status(ref)` over MCP stdio against `tools/list` (the protocol round trip).
async fn mcp_status(home: &Path, run: &Run) {
    const CALLS: usize = 300;
    let mut cmd = tokio::process::Command::new(MESS);
    cmd.arg("--home")
        .arg(home)
        .args(["--as", "bench-agent-0", "mcp"])
        .env("MESS_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    // Client 0's lifecycles come first, and their requests are bench-agent-0's.
    let thread = run.done[0].thread.clone();
    let mut list = Vec::new();
    let mut status = Vec::new();
    for _ in 0..CALLS {
        let t = Instant::now();
        client.list_tools(None).await.unwrap();
        list.push(t.elapsed());
        let t = Instant::now();
        let args = serde_json::json!({ "re": thread });
        let r = client
            .call_tool(
                CallToolRequestParams::new("mess_status")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        status.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    list.sort();
    status.sort();
    println!(
        "MCP stdio, {CALLS} calls: mess_status(ref) p50 {}, p99 {}; tools/list p50 {}, p99 {}; ratio {:.2}x",
        ms(percentile(&status, 0.5)),
        ms(percentile(&status, 0.99)),
        ms(percentile(&list, 0.5)),
        ms(percentile(&list, 0.99)),
        percentile(&status, 0.5).as_secs_f64() / percentile(&list, 0.5).as_secs_f64().max(1e-9)
    );
    client.cancel().await.unwrap();
}

/// Copies a home (every file, modes kept) so several runs can start from the same one.
fn copy_home(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cp -a {from:?} {to:?}");
}

/// The same lifecycles against several builds of mess in one run (`--baseline PATH`, an older
/// commit's binary from `benches/build-baseline`), each on a fresh copy of the seeded home,
/// alternating builds `rounds` times so a drift of the machine falls on all of them.
async fn compare(
    pristine: &Path,
    builds: &[(String, String)],
    keys: &[(String, String)],
    lifecycles: usize,
    rounds: usize,
) {
    let mut results: Vec<Vec<(f64, Duration, Duration)>> = vec![Vec::new(); builds.len()];
    let scratch = pristine.with_file_name("compared");
    for _ in 0..rounds.max(1) {
        for (i, (_, binary)) in builds.iter().enumerate() {
            copy_home(pristine, &scratch);
            let (server, port) = serve_binary(binary, &scratch, None);
            settle(server.id()).await;
            let (_, run) = load(
                &format!("http://127.0.0.1:{port}"),
                keys,
                lifecycles,
                server.id(),
            )
            .await;
            terminate(&server);
            let mut server = server;
            let _ = server.wait();
            let mut all: Vec<Duration> = run.done.iter().flat_map(|l| l.steps).collect();
            all.sort();
            results[i].push((
                run.messages() as f64 / run.wall.as_secs_f64(),
                run.server_cpu / run.messages().max(1) as u32,
                percentile(&all, 0.99),
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!();
    println!(
        "builds compared in this run ({} rounds, alternating, each on a copy of the same seeded home):",
        rounds.max(1)
    );
    println!(
        "{:<22} {:>14} {:>20} {:>10} {:>16}",
        "build", "messages/s", "server CPU/message", "p99", "vs this build"
    );
    let mut own = 0.0;
    for (i, (name, _)) in builds.iter().enumerate() {
        let rate = median(&mut results[i].iter().map(|r| r.0).collect());
        let cpu = median(&mut results[i].iter().map(|r| r.1.as_secs_f64()).collect());
        let p99 = median(&mut results[i].iter().map(|r| r.2.as_secs_f64()).collect());
        if i == 0 {
            own = rate;
        }
        println!(
            "{name:<22} {rate:>14.0} {:>17.2} ms {:>7.1} ms {:>15.2}x",
            cpu * 1e3,
            p99 * 1e3,
            rate / own.max(1e-9)
        );
    }
}

/// Waits until a freshly started server has done its start-up work (the first routing pass
/// over the seeded home's pending threads, the index of open threads): its CPU use over half a
/// second under a tenth of a core, or 60 s.
async fn settle(server: u32) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let before = cpu_time(server);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if cpu_time(server) - before < Duration::from_millis(50) || Instant::now() > until {
            return;
        }
    }
}
