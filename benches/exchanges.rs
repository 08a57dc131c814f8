//! Several exchanges: what reaching a remote exchange adds. Part 1: `mess_status` and `mess_do`
//! through `mess mcp` (rmcp's client over stdio) on the agent's own home versus on a remote
//! `mess serve` named by `exchange:` (p50/p99 of each, in the same run). Part 2: request to
//! answer on one exchange whose executor answers at once (a webhook in this process that claims
//! and completes), versus the same request made one exchange earlier and forwarded there
//! (one federation hop there and back).
//!
//! Run with `cargo bench --bench exchanges` (`-- --calls 200 --requests 30`).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use tokio_stream::StreamExt;

use common::{MESS, ack_ref, mess, ms, option, percentile, post, serve, terminate};

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn call(client: &Client, name: &'static str, a: serde_json::Value) -> Duration {
    let serde_json::Value::Object(map) = a else {
        unreachable!()
    };
    let started = Instant::now();
    let r = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(map))
        .await
        .unwrap();
    let took = started.elapsed();
    assert_ne!(r.is_error, Some(true), "{name}: {:?}", r.content);
    took
}

fn line(what: &str, local: &mut [Duration], remote: &mut [Duration]) {
    local.sort();
    remote.sort();
    let (l50, l99) = (percentile(local, 0.5), percentile(local, 0.99));
    let (r50, r99) = (percentile(remote, 0.5), percentile(remote, 0.99));
    println!(
        "{what:<12} local p50 {} p99 {} | remote p50 {} p99 {} | added p50 {} ({:.1}x)",
        ms(l50),
        ms(l99),
        ms(r50),
        ms(r99),
        ms(r50.saturating_sub(l50)),
        r50.as_secs_f64() / l50.as_secs_f64().max(1e-9)
    );
}

/// Part 1: the MCP tools on the local home and on a remote exchange.
async fn tools(dir: &Path, calls: usize) {
    let house = dir.join("house");
    let laptop = dir.join("laptop");
    let config =
        "agent_id: claude-agent\nexecutors:\n  roomba-kitchen:\n    capabilities: [vacuum-floor]\n";
    for home in [&house, &laptop] {
        std::fs::create_dir_all(home).unwrap();
        std::fs::write(home.join("config.yaml"), config).unwrap();
    }
    let key = mess(&house, &["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let (server, port) = serve(&house);
    std::fs::write(
        laptop.join("config.yaml"),
        format!("{config}exchanges:\n  house:\n    type: remote\n    url: http://127.0.0.1:{port}\n    api_key: ${{HOUSE_KEY}}\n"),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(MESS);
    cmd.arg("mcp")
        .env("MESS_HOME", &laptop)
        .env("MESS_AGENT_ID", "claude-agent")
        .env("MESS_LOG", "warn")
        .env("HOUSE_KEY", &key);
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let created = |exchange: &str, i: usize| {
        serde_json::json!({"intent": format!("vacuum room {i}"), "requires": ["vacuum-floor"],
                           "wait_s": 0, "exchange": exchange})
    };
    // Warm both paths (connections, caches) before measuring.
    for i in 0..10 {
        call(&client, "mess_do", created("primary", i)).await;
        call(&client, "mess_do", created("house", i)).await;
    }
    let (mut do_local, mut do_remote) = (Vec::new(), Vec::new());
    let (mut st_local, mut st_remote) = (Vec::new(), Vec::new());
    for i in 0..calls {
        do_local.push(call(&client, "mess_do", created("primary", i)).await);
        do_remote.push(call(&client, "mess_do", created("house", i)).await);
        let one = |exchange: &str| serde_json::json!({"re": "last", "exchange": exchange});
        st_local.push(call(&client, "mess_status", one("primary")).await);
        st_remote.push(call(&client, "mess_status", one("house")).await);
    }
    println!("MCP tools through `mess mcp` ({calls} calls each, interleaved):");
    line("mess_do", &mut do_local, &mut do_remote);
    line("mess_status", &mut st_local, &mut st_remote);
    client.cancel().await.unwrap();
    terminate(&server);
}

/// A webhook at which the town's executor answers every notice at once: claims and completes
/// through the town's API with its key.
async fn robot(town_url: String, key: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let (http, town_url, key) = (http.clone(), town_url.clone(), key.clone());
        async move {
            if let Some(r) = headers.get("x-mess-thread").and_then(|v| v.to_str().ok()) {
                let r = r.to_owned();
                tokio::spawn(async move {
                    let body = format!(
                        "MESS:\n  - status: {{re: {r}, code: claimed}}\n  - status: {{re: {r}, code: completed}}\n  - response:\n      re: {r}\n      content:\n        - bought\n"
                    );
                    post(&http, &format!("{town_url}/mess"), &key, body).await;
                });
            }
            "ok"
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// Creates `n` requests on the exchange at `url` (one at a time, 100 ms apart) and times each
/// from just before `POST /mess` to its `completed` event on `/events`.
async fn request_to_answer(url: &str, key: &str, n: usize) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let events = http
        .get(format!("{url}/events"))
        .bearer_auth(key)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut stream = sse_stream::SseStream::from_bytes_stream(events.bytes_stream());
    let mut out = Vec::new();
    for i in 0..n {
        let started = Instant::now();
        let answer = post(
            &http,
            &format!("{url}/mess"),
            key,
            format!("MESS:\n  - request:\n      intent: buy onions ({i})\n      requires: [buy-groceries]\n"),
        )
        .await;
        let r = ack_ref(&answer);
        loop {
            let Ok(Some(Ok(event))) =
                tokio::time::timeout(Duration::from_secs(20), stream.next()).await
            else {
                let shown = http
                    .get(format!("{url}/threads/{r}?format=messe-af"))
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                panic!("{r} at {url} not answered in 20 s:\n{shown}");
            };
            let data = event.data.unwrap_or_default();
            if data.contains(&format!("\"{r}\"")) && data.contains("\"completed\"") {
                break;
            }
        }
        out.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    out
}

/// Part 2: request to answer on the town itself, and through the house forwarding to it.
async fn federation(dir: &Path, requests: usize) {
    let town = dir.join("town");
    let house = dir.join("house-fwd");
    std::fs::create_dir_all(&town).unwrap();
    std::fs::create_dir_all(&house).unwrap();
    // The robot's webhook URL is known only once it listens: the town starts after it.
    std::fs::write(
        town.join("config.yaml"),
        "executors:\n  grocer:\n    capabilities: [buy-groceries]\n",
    )
    .unwrap();
    let grocer = mess(&town, &["token", "executor", "grocer"])
        .trim()
        .to_owned();
    let town_agent = mess(&town, &["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let house_at_town = mess(&town, &["token", "agent", "house"]).trim().to_owned();
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let town_port = probe.local_addr().unwrap().port();
    drop(probe);
    let town_url = format!("http://127.0.0.1:{town_port}");
    let hook = robot(town_url.clone(), grocer).await;
    std::fs::write(
        town.join("config.yaml"),
        format!("executors:\n  grocer:\n    capabilities: [buy-groceries]\n    notify:\n      webhook: {hook}\n"),
    )
    .unwrap();
    let mut town_server = std::process::Command::new(MESS)
        .arg("--home")
        .arg(&town)
        .args(["serve", "--addr", &format!("127.0.0.1:{town_port}")])
        .env("MESS_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(
        house.join("config.yaml"),
        format!("executors:\n  town:\n    capabilities: [buy-groceries]\n    exchange:\n      url: {town_url}\n      api_key: {house_at_town}\n"),
    )
    .unwrap();
    let house_agent = mess(&house, &["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let (house_server, house_port) = serve(&house);
    // The town listening is known when a request there is answered: warm both paths.
    for _ in 0..50 {
        if reqwest::get(format!("{town_url}/healthz")).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let house_url = format!("http://127.0.0.1:{house_port}");
    request_to_answer(&town_url, &town_agent, 3).await;
    request_to_answer(&house_url, &house_agent, 3).await;
    let mut local = request_to_answer(&town_url, &town_agent, requests).await;
    let mut forwarded = request_to_answer(&house_url, &house_agent, requests).await;
    println!("Request to answer ({requests} requests each; the executor answers at once):");
    line("one hop", &mut local, &mut forwarded);
    terminate(&house_server);
    terminate(&town_server);
    let _ = town_server.wait();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let calls = option(&args, "--calls", 200);
    let requests = option(&args, "--requests", 30);
    let dir = tempfile::TempDir::new().unwrap();
    // reqwest over rustls needs its crypto provider chosen.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        tools(dir.path(), calls).await;
        federation(dir.path(), requests).await;
    });
}
