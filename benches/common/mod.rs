//! Helpers the server benchmarks share: running the real `mess` binary, starting and stopping
//! `mess serve`, its peak memory, percentiles, and a `POST /mess`.

// Each benchmark is its own crate and uses only some of these.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub(crate) const MESS: &str = env!("CARGO_BIN_EXE_mess");

/// `--name N` from the command line, else `default`.
pub(crate) fn option(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Runs `mess --home <home> <args>`; its stdout.
pub(crate) fn mess(home: &Path, args: &[&str]) -> String {
    let out = Command::new(MESS)
        .arg("--home")
        .arg(home)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "mess {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Starts `mess serve` on a free port (its log in `<home>/serve.log`); returns it once it
/// listens.
pub(crate) fn serve(home: &Path) -> (Child, u16) {
    serve_on(home, None)
}

/// [`serve`], on the database `url` when one is given (tier 1).
pub(crate) fn serve_on(home: &Path, url: Option<&str>) -> (Child, u16) {
    serve_binary(MESS, home, url)
}

/// [`serve_on`] with another build of mess (an older commit's, for a comparison in one run).
pub(crate) fn serve_binary(binary: &str, home: &Path, url: Option<&str>) -> (Child, u16) {
    let log = std::fs::File::create(home.join("serve.log")).unwrap();
    let mut cmd = Command::new(binary);
    if let Some(url) = url {
        cmd.env("MESS_DATABASE_URL", url);
    }
    let mut child = cmd
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
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("mess serve did not start: {line:?}"));
    (child, port)
}

/// Asks the server to stop the way an operator would (SIGTERM).
pub(crate) fn terminate(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// A process's peak resident memory (VmHWM), in KiB.
pub(crate) fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) a process has used so far, from `/proc/PID/stat` (all its threads;
/// Linux counts it in USER_HZ ticks, 100 per second on every architecture mess runs on).
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// CPU time of this process (the benchmark's clients) so far.
pub(crate) fn own_cpu_time() -> Duration {
    cpu_time(std::process::id())
}

/// The `p` quantile of sorted durations.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Milliseconds with two decimals.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// `POST /mess` of a YAML body with a key; the answer, which must be a success.
pub(crate) async fn post(client: &reqwest::Client, url: &str, key: &str, body: String) -> String {
    let r = client
        .post(url)
        .bearer_auth(key)
        .header("content-type", "application/yaml")
        .header("accept", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    text
}

/// A home seeded with `threads` demo threads, plus one executor per client that alone holds
/// its own capability (so each client's requests route to, and are claimed by, its own
/// executor); returns each client's agent and executor keys.
pub(crate) fn seeded_home(home: &Path, threads: usize, clients: usize) -> Vec<(String, String)> {
    mess(home, &["demo", "seed", "--threads", &threads.to_string()]);
    let mut config = std::fs::read_to_string(home.join("config.yaml")).unwrap();
    let at = config.find("routing:").unwrap_or(config.len());
    let mut bench = String::new();
    for i in 0..clients {
        bench.push_str(&format!(
            "  bench-{i}:\n    capabilities: [bench-task-{i}]\n"
        ));
    }
    config.insert_str(at, &bench);
    std::fs::write(home.join("config.yaml"), config).unwrap();
    (0..clients)
        .map(|i| {
            (
                mess(home, &["token", "agent", &format!("bench-agent-{i}")])
                    .trim()
                    .to_owned(),
                mess(home, &["token", "executor", &format!("bench-{i}")])
                    .trim()
                    .to_owned(),
            )
        })
        .collect()
}

/// The ref an answer to a request acknowledges (the answer may begin with the version).
pub(crate) fn ack_ref(answer: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(answer).unwrap();
    v["MESS"]
        .as_array()
        .and_then(|ps| ps.iter().find_map(|p| p["ack"]["ref"].as_str()))
        .unwrap_or_else(|| panic!("no ref in {answer}"))
        .to_owned()
}

/// One client's full lifecycle `n` (request; claim with an estimate; progress; complete with
/// a response): its thread and each step's latency. With several `urls` (nodes of one
/// exchange) the steps go to them round-robin.
pub(crate) async fn lifecycle(
    client: &reqwest::Client,
    urls: &[String],
    (agent, executor): (&str, &str),
    i: usize,
    n: usize,
) -> (String, [Duration; 4]) {
    let url = |step: usize| urls[(i + n * 4 + step) % urls.len()].as_str();
    let mut steps = [Duration::ZERO; 4];
    let t = std::time::Instant::now();
    let ack = post(
        client,
        url(0),
        agent,
        format!(
            "MESS:\n  - request:\n      intent: bench task {n} of client {i}\n      requires: [bench-task-{i}]\n      response_hint: [text]\n"
        ),
    )
    .await;
    steps[0] = t.elapsed();
    let thread = ack_ref(&ack);
    let bodies = [
        format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: claimed\n      estimate: PT5M\n"
        ),
        format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: in_progress\n      progress: 50\n"
        ),
        format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: completed\n  - response:\n      re: {thread}\n      content:\n        - done, task {n} of client {i}\n"
        ),
    ];
    for (k, (step, body)) in steps[1..].iter_mut().zip(bodies).enumerate() {
        let t = std::time::Instant::now();
        post(client, url(k + 1), executor, body).await;
        *step = t.elapsed();
    }
    (thread, steps)
}
