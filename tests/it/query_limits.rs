//! The bounds of user SQL against the real server: queries run in worker processes that stop
//! at their memory ceiling, a limit on queries at once (429 with `Retry-After`), a worker that
//! overstays its timeout killed and replaced, the Arrow size cap from the first batch, no
//! server path or home through any answer or error, and one bad directory file that does not
//! stop key holders' queries.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::Home;
use crate::support::server::Server;

fn key(home: &Home, id: &str) -> String {
    home.ok(&["token", "agent", id]).trim().to_owned()
}

/// One `POST /query?format=FORMAT` to the server on `port`, with `sql` as the body: status, headers (lower-case
/// names), body bytes.
fn query(port: u16, key: &str, format: &str, sql: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /query?format={format} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {key}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{sql}",
        sql.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (status, head, body)
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&raw[..line]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[line + 2..line + 2 + size]);
        raw = &raw[line + 2 + size + 2..];
    }
}

fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

/// The error code and message of a JSON error body.
fn error_of(body: &[u8]) -> (String, String) {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    (
        v["error"]["code"].as_str().unwrap_or_default().to_owned(),
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// A field of `/proc/PID/status` in KiB (`VmHWM`, `VmRSS`).
fn kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The processes whose parent is `pid` (a server's query workers).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if parent == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Queries that build values outside DuckDB's buffer manager, far over a worker's ceiling.
const HOSTILE: &[&str] = &[
    "SELECT repeat('x', 700000000) AS s",
    "SELECT length(repeat('x', 700000000)) AS n",
    "SELECT string_agg(repeat('x', 1000000), '') AS s FROM range(1000)",
    "SELECT list(repeat('x', 1000000)) AS l FROM range(1000)",
    "SELECT to_json(list(repeat('x', 1000000))) AS j FROM range(600)",
];

#[test]
fn queries_that_build_huge_values_stop_at_the_worker_ceiling_and_the_server_stays_small() {
    let home = Home::with_config("agent_id: claude-agent\n");
    let alice = key(&home, "alice");
    let bob = key(&home, "bob");
    let server = Server::start(&home);
    for sql in HOSTILE {
        for format in ["json", "arrow"] {
            let (status, _, body) = query(server.port, &alice, format, sql);
            let (code, message) = error_of(&body);
            assert_eq!(
                (status, code.as_str()),
                (422, "invalid"),
                "{sql}: {}",
                text(&body)
            );
            assert!(
                message.contains("256 MiB") && message.contains("limits.query_memory"),
                "{sql}: {message}"
            );
        }
    }
    // Four at once, from two keys: each stops at its own ceiling, none is answered.
    let hostile: Vec<_> = (0..4)
        .map(|i| {
            let key = if i % 2 == 0 {
                alice.clone()
            } else {
                bob.clone()
            };
            let port = server.port;
            std::thread::spawn(move || query(port, &key, "json", HOSTILE[i % HOSTILE.len()]).0)
        })
        .collect();
    for h in hostile {
        let status = h.join().unwrap();
        assert!(matches!(status, 422 | 429), "{status}");
    }
    assert_eq!(server.send("GET", "/healthz", &[], b"").0, 200);
    let (status, _, body) = query(server.port, &alice, "json", "SELECT 42 AS n");
    assert_eq!((status, text(&body).contains("\"n\":42")), (200, true));
    // The values were built in the workers: the server itself never held them.
    let peak = kib(server.pid(), "VmHWM") / 1024;
    assert!(peak < 400, "the server peaked at {peak} MiB");
    // The same ceiling for `mess query` and `mess_query`.
    let err = home.fails(&["query", HOSTILE[0]], 1);
    assert!(err.contains("256 MiB"), "{err}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = mcp_client(&home).await;
        let r = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("mess_query")
                    .with_arguments(sql_args(HOSTILE[0])),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert!(tool_text(&r).contains("256 MiB"), "{}", tool_text(&r));
        client.cancel().await.unwrap();
    });
}

async fn mcp_client(home: &Home) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
    cmd.arg("mcp")
        .env("MESS_HOME", home.path())
        .env("MESS_AGENT_ID", "claude-agent");
    ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

fn sql_args(sql: &str) -> serde_json::Map<String, serde_json::Value> {
    serde_json::json!({ "sql": sql })
        .as_object()
        .cloned()
        .unwrap()
}

fn tool_text(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// A query that runs until its timeout interrupts it.
const ENDLESS: &str = "SELECT count(*) FROM range(10000000000) a, range(1000) b";

type Answer = (u16, String, Vec<u8>);

/// Starts an endless query for `key` (whose limit is one query at once) and returns once it
/// holds its place, with the refusal of a second query for the same key that shows it. A probe
/// sent before the endless query arrives takes the place itself; the endless one is then
/// refused, and started again.
fn hold(port: u16, key: &str) -> (std::thread::JoinHandle<Answer>, Answer) {
    for _ in 0..20 {
        let owned = key.to_owned();
        let endless = std::thread::spawn(move || query(port, &owned, "json", ENDLESS));
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let probe = query(port, key, "json", "SELECT 1");
            if probe.0 == 429 {
                return (endless, probe);
            }
            if endless.is_finished() {
                break;
            }
        }
    }
    panic!("no endless query took its place");
}

#[test]
fn queries_beyond_the_limits_are_refused_with_429_and_retry_after() {
    let home =
        Home::with_config("limits:\n  queries: 2\n  queries_per_key: 1\n  query_timeout: 6s\n");
    let (alice, bob, carol) = (key(&home, "alice"), key(&home, "bob"), key(&home, "carol"));
    let server = Server::start(&home);
    // Alice's second query waits for no one: 429, a JSON error, and when to retry.
    let (first, (status, head, body)) = hold(server.port, &alice);
    assert_eq!(status, 429, "{}", text(&body));
    assert!(head.contains("retry-after: 1"), "{head}");
    let (code, message) = error_of(&body);
    assert_eq!(code, "busy");
    assert!(
        message.contains("this key already runs 1") && message.contains("retry"),
        "{message}"
    );
    // Bob has a place of his own; with his endless query the server is full.
    let (status, _, body) = query(server.port, &bob, "json", "SELECT 1 AS n");
    assert_eq!(status, 200, "{}", text(&body));
    let (second, _) = hold(server.port, &bob);
    let (status, _, body) = query(server.port, &carol, "arrow", "SELECT 1");
    assert_eq!(status, 429, "{}", text(&body));
    assert!(
        error_of(&body).1.contains("the server already runs 2"),
        "{}",
        text(&body)
    );
    for h in [first, second] {
        let (status, _, body) = h.join().unwrap();
        assert_eq!(status, 422, "{}", text(&body));
        assert!(
            error_of(&body).1.contains("interrupted after 6 s"),
            "{}",
            text(&body)
        );
    }
    // The places are back.
    let (status, _, body) = query(server.port, &carol, "json", "SELECT 1 AS n");
    assert_eq!(status, 200, "{}", text(&body));
}

#[test]
fn mess_query_says_to_retry_beyond_the_limit_per_key() {
    let home = Home::with_config("limits:\n  queries_per_key: 1\n  query_timeout: 3s\n");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = mcp_client(&home).await;
        let call = |sql: &str| {
            client.call_tool(
                rmcp::model::CallToolRequestParams::new("mess_query").with_arguments(sql_args(sql)),
            )
        };
        // A second query of the same agent while its first runs is refused, with a tool error
        // that says to retry. (Whichever of the two arrives second is the one refused.)
        let (endless, probes) = tokio::join!(call(ENDLESS), async {
            let mut answers = Vec::new();
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let r = call("SELECT 1").await.unwrap();
                let refused = r.is_error == Some(true);
                answers.push(r);
                if refused {
                    break;
                }
            }
            answers
        });
        let endless = endless.unwrap();
        let refused: Vec<_> = probes
            .iter()
            .chain([&endless])
            .filter(|r| r.is_error == Some(true) && tool_text(r).contains("retry"))
            .collect();
        assert_eq!(refused.len(), 1, "{probes:?} {endless:?}");
        assert!(tool_text(refused[0]).contains("too many queries at once"));
        let again = call("SELECT 1 AS n").await.unwrap();
        assert_eq!(again.is_error, Some(false), "{}", tool_text(&again));
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_worker_that_does_not_stop_at_its_timeout_is_killed_and_replaced() {
    let home = Home::with_config("limits:\n  query_timeout: 1s\n  query_grace: 2s\n");
    let alice = key(&home, "alice");
    let server = Server::start(&home);
    let (status, _, body) = query(server.port, &alice, "json", "SELECT 1");
    assert_eq!(status, 200, "{}", text(&body));
    let before = children(server.pid());
    assert_eq!(before.len(), 1, "one idle worker: {before:?}");
    // Workers run at a lower priority than the exchange: user SQL yields the CPU.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", before[0])).unwrap();
    let nice: i32 = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(16)?.parse().ok())
        .unwrap();
    assert_eq!(nice, 10, "{stat}");
    // One call of a quadratic function on one row: DuckDB checks for interrupts between
    // chunks, not inside it, and it needs many seconds.
    let started = Instant::now();
    let (status, _, body) = query(
        server.port,
        &alice,
        "json",
        "SELECT levenshtein(repeat('a', 80000), repeat('b', 80000)) AS d",
    );
    let took = started.elapsed();
    assert_eq!(status, 422, "{}", text(&body));
    assert!(
        error_of(&body).1.contains("interrupted after 1 s"),
        "{}",
        text(&body)
    );
    // The function alone runs for well over ten seconds.
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
    // Killed and reaped, not left computing.
    assert!(
        !std::path::Path::new(&format!("/proc/{}", before[0])).exists(),
        "worker {} is still there",
        before[0]
    );
    let (status, _, body) = query(server.port, &alice, "json", "SELECT 2 AS n");
    assert_eq!((status, text(&body).contains("\"n\":2")), (200, true));
    let after = children(server.pid());
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
}

#[test]
fn a_worker_that_dies_during_a_query_is_reported_with_the_ceiling_and_replaced() {
    let home = Home::with_config("agent_id: claude-agent\n");
    let alice = key(&home, "alice");
    let server = Server::start(&home);
    let (status, _, _) = query(server.port, &alice, "json", "SELECT 1");
    assert_eq!(status, 200);
    let worker = children(server.pid());
    assert_eq!(worker.len(), 1, "{worker:?}");
    let port = server.port;
    let owned = alice.clone();
    let running = std::thread::spawn(move || query(port, &owned, "json", ENDLESS));
    // What the kernel's OOM killer would do to a worker over the machine's memory.
    std::thread::sleep(Duration::from_millis(800));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &worker[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (status, _, body) = running.join().unwrap();
    assert_eq!(status, 422, "{}", text(&body));
    let message = error_of(&body).1;
    assert!(
        message.starts_with("query stopped: its worker ended")
            && message.contains("SIGKILL")
            && message.contains("256 MiB"),
        "{message}"
    );
    let (status, _, body) = query(server.port, &alice, "json", "SELECT 3 AS n");
    assert_eq!((status, text(&body).contains("\"n\":3")), (200, true));
    let replaced = children(server.pid());
    assert_eq!(replaced.len(), 1);
    assert_ne!(replaced, worker);
}

#[test]
fn an_arrow_answer_holds_its_64_mib_cap_from_the_first_batch() {
    // Room enough for the worker to build a first batch larger than the cap.
    let home = Home::with_config("limits:\n  query_memory: 1GiB\n");
    let alice = key(&home, "alice");
    let server = Server::start(&home);
    let (status, head, body) = query(
        server.port,
        &alice,
        "arrow",
        "SELECT repeat('x', 1000000) AS s FROM range(100)",
    );
    assert_eq!(status, 200, "{}", text(&body));
    assert!(head.contains("x-mess-truncated: true"), "{head}");
    assert!(body.len() <= 64 * 1024 * 1024, "{} bytes", body.len());
    let rows: usize = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(body), None)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert!((60..=67).contains(&rows), "{rows} rows");
    let (status, _, body) = query(
        server.port,
        &alice,
        "arrow",
        "SELECT repeat('x', 70000000) AS s",
    );
    assert_eq!(status, 422, "{}", text(&body));
    assert!(
        error_of(&body)
            .1
            .contains("the first row alone is larger than the 64 MiB"),
        "{}",
        text(&body)
    );
}

#[test]
fn no_server_path_or_home_folder_leaves_through_sql_answers_or_errors() {
    let home = Home::with_config("executors:\n  teague-phone:\n    capabilities: [take-photo]\n");
    let alice = key(&home, "alice");
    let user_home = tempfile::TempDir::new().unwrap();
    let server = Server::start_with(&home, &[("HOME", &user_home.path().to_string_lossy())]);
    server.post_yaml(&alice, "MESS:\n  - request:\n      intent: look\n");
    let secrets: Vec<String> = [
        home.path().to_owned(),
        home.path().canonicalize().unwrap(),
        user_home.path().to_owned(),
        user_home.path().canonicalize().unwrap(),
    ]
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect();
    let refused = [
        "SELECT sql FROM duckdb_views()",
        "SELECT view_name, sql FROM duckdb_views",
        "SELECT macro_definition FROM duckdb_functions()",
        "SELECT name, value FROM duckdb_settings()",
        "SELECT current_setting('extension_directory')",
        "SELECT current_setting('home_directory')",
        "SELECT current_setting('temp_directory')",
        "SELECT current_setting('secret_directory')",
        "SELECT * FROM duckdb_extensions()",
        "SELECT * FROM duckdb_secrets()",
        "SELECT * FROM which_secret('s3://bucket/x', 's3')",
        "SELECT * FROM duckdb_memory()",
        "SELECT * FROM duckdb_temporary_files()",
        "SELECT * FROM duckdb_databases()",
        "SELECT * FROM pragma_database_list",
        "SELECT * FROM pragma_show('threads')",
        "SELECT getenv('HOME')",
        "SELECT sql FROM sqlite_master",
        "SELECT view_definition FROM information_schema.views",
        "SELECT definition FROM pg_catalog.pg_views",
        "SELECT * FROM query('SELECT sql FROM duckdb_views()')",
    ];
    let clean = |sql: &str, format: &str, body: &[u8]| {
        let body = text(body);
        for secret in &secrets {
            assert!(
                !body.contains(secret.as_str()),
                "{sql} ({format}) names {secret}: {body}"
            );
        }
        assert!(!body.contains("/.duckdb"), "{sql} ({format}): {body}");
    };
    for sql in refused {
        let (status, _, body) = query(server.port, &alice, "json", sql);
        let (code, message) = error_of(&body);
        assert_eq!(
            (status, code.as_str()),
            (403, "forbidden"),
            "{sql}: {}",
            text(&body)
        );
        assert!(
            message.contains("describes the database engine"),
            "{sql}: {message}"
        );
        clean(sql, "json", &body);
    }
    // Answers and errors that remain name no server folder either.
    let answered = [
        "SELECT * FROM threads",
        "SELECT filename FROM messages",
        "SELECT * FROM executors",
        "DESCRIBE threads",
        "SHOW TABLES",
        "SELECT * FROM read_yaml_auto('~/nothing.yaml')",
        "SELECT * FROM read_yaml_auto('nothing*.yaml')",
        "SELECT * FROM read_csv('~/x.csv')",
        "SELECT * FROM glob('~/*')",
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT * FROM read_yaml_auto('/proc/self/environ')",
        "SELECT * FROM read_yaml_auto('.mess/keys.yaml')",
        "SELECT version(), current_database(), current_schemas(true)",
    ];
    for sql in answered {
        for format in ["json", "csv", "arrow"] {
            let (status, _, body) = query(server.port, &alice, format, sql);
            assert!(
                matches!(status, 200 | 403 | 422),
                "{sql}: {status} {}",
                text(&body)
            );
            clean(sql, format, &body);
        }
    }
}

#[test]
fn one_directory_file_the_views_choke_on_does_not_stop_key_holders_queries() {
    let home = Home::with_config("agent_id: claude-agent\n");
    let alice = key(&home, "alice");
    let server = Server::start(&home);
    server.post_yaml(&alice, "MESS:\n  - request:\n      intent: look\n");
    // A catalog entry whose id is a list: the capabilities view cannot bind over it.
    std::fs::write(
        home.path().join("capabilities.yaml"),
        "id: [1, 2]\ndescription: x\n",
    )
    .unwrap();
    let (status, _, body) = query(
        server.port,
        &alice,
        "json",
        "SELECT count(*) AS n FROM threads",
    );
    assert_eq!(status, 200, "{}", text(&body));
    assert!(text(&body).contains("\"n\":1"), "{}", text(&body));
    // That view answers empty, with its columns.
    let (status, _, body) = query(server.port, &alice, "json", "SELECT * FROM capabilities");
    assert_eq!(status, 200, "{}", text(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["row_count"], 0);
    assert_eq!(
        v["columns"],
        serde_json::json!(["id", "description", "tags", "executors", "in_catalog"])
    );
}

#[test]
fn query_limits_in_config_yaml_are_checked_and_name_the_field() {
    for (limits, problem) in [
        (
            "query_memory: 100MiB",
            "limits.query_memory must be at least 128 MiB",
        ),
        (
            "query_memory: lots",
            "limits.query_memory must be a size in bytes or with a unit",
        ),
        ("queries: 0", "limits.queries must be a positive integer"),
        (
            "queries_per_key: -1",
            "limits.queries_per_key must be a positive integer",
        ),
        (
            "query_timeout: soon",
            "limits.query_timeout: \"soon\" is not a positive duration",
        ),
        (
            "query_grace: 0s",
            "limits.query_grace: \"0s\" is not a positive duration",
        ),
    ] {
        let home = Home::with_config(&format!("limits:\n  {limits}\n"));
        let err = home.fails(&["query", "SELECT 1"], 1);
        assert!(err.contains(problem), "{limits}: {err}");
    }
    // Sizes with units, read as written: the smallest ceiling still runs a small query, and
    // says so when a query needs more.
    let home = Home::with_config("limits:\n  query_memory: 128MiB\n  queries: 1\n");
    assert_eq!(
        home.ok(&["query", "--format", "csv", "SELECT 1 AS n"]),
        "n\n1\n"
    );
    let err = home.fails(&["query", "SELECT repeat('x', 100000000)"], 1);
    assert!(err.contains("the 128 MiB a query may use"), "{err}");
}
