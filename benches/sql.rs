//! SQL benchmark: `read_yaml_auto` against DuckDB's own `read_json_auto` over the same
//! documents (each thread file also written as NDJSON, one document per line), on homes of
//! 1,000, 10,000 and 100,000 threads: cold time (our parse cache empty; the OS page cache warm
//! for both), warm time, and peak memory, for (a) a count per state folder, (b) the
//! `pending_by_capability` view, (c) the `executor_stats` view.
//!
//! Then user queries (`mess query`, `/query`, `mess_query`) through the exchange's query
//! workers against the in-process path they replaced, on the same home, as a ratio: with a warm
//! pool of workers (what a server does) and with a fresh worker per query.
//!
//! Run with `cargo bench --bench sql` (`-- --sizes 1000,10000` for other sizes). Each size runs
//! in a child process so its peak memory is its own.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mess::db::Db;
use mess::db::query::{self, Scope};
use mess::exchange::clock::FixedClock;
use mess::exchange::{Exchange, Settings};
use mess::protocol::time;
use mess::protocol::yaml::{self, Limits};
use mess::store::Store;

const TEMPLATE_THREADS: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(args[i + 1].parse().unwrap());
        return;
    }
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .map(|i| args[i + 1].split(',').map(|n| n.parse().unwrap()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    println!(
        "mess SQL benchmark: read_yaml_auto (ours) vs read_json_auto (DuckDB) on the same documents"
    );
    println!(
        "cold = our parse cache empty (the OS page cache is warm for both); warm = repeated query; medians of 3"
    );
    println!();
    println!(
        "{:>8}  {:<26} {:>10} {:>10} {:>7}  {:>10} {:>10} {:>7}",
        "threads", "query", "yaml cold", "json", "ratio", "yaml warm", "json", "speedup"
    );
    for n in sizes {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--child", &n.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            println!("{n}: failed (see stderr)");
        }
    }
}

fn child(n: usize) {
    let dir = tempfile::TempDir::new().unwrap();
    let home = dir.path().join("home");
    let json = dir.path().join("json");
    build_home(&home, &json, n);
    // The parse cache keeps no file modified in the last 2 seconds (an edit in place within
    // the same clock tick would go unseen); in a real home nearly every file is older.
    std::thread::sleep(Duration::from_millis(2100));
    trace("home built");
    let db = Db::open(&home).unwrap();
    trace("database open");
    let h = home.display();
    let j = json.display();
    let cases = [
        (
            "(a) count per state",
            format!("SELECT state, count(*) FROM read_yaml_auto('{h}/state=*/*.messe-af.yaml', hive_partitioning := true) GROUP BY state"),
            format!("SELECT state, count(*) FROM read_json_auto('{j}/state=*/*.ndjson', hive_partitioning := true, format := 'newline_delimited') GROUP BY state"),
        ),
        (
            "(b) pending_by_capability",
            "SELECT * FROM pending_by_capability".to_owned(),
            format!(
                "SELECT capability, count(*) AS pending, min(created) AS oldest, list(ref ORDER BY created, ref) AS refs
                 FROM (SELECT ref, created, unnest(CASE WHEN len(coalesce(requires, []::VARCHAR[])) = 0 THEN ['(any)'] ELSE requires END) AS capability
                       FROM read_json_auto('{j}/state=received/*.ndjson', format := 'newline_delimited') WHERE status = 'pending')
                 GROUP BY capability ORDER BY pending DESC, capability"
            ),
        ),
        (
            "(c) executor_stats",
            "SELECT * FROM executor_stats".to_owned(),
            format!(
                "WITH h AS (SELECT ref, e.\"action\" AS act, e.\"at\"::TIMESTAMP AS at_utc, e.\"by\" AS who FROM (SELECT ref, unnest(history) AS e FROM read_json_auto('{j}/state=*/*.ndjson', hive_partitioning := true, format := 'newline_delimited') WHERE history IS NOT NULL)),
                 created AS (SELECT ref, min(at_utc) AS at_utc FROM h WHERE act = 'created' GROUP BY ref),
                 claims AS (SELECT ref, who AS executor, min(at_utc) AS at_utc FROM h WHERE act = 'claimed' GROUP BY ref, who),
                 ends AS (SELECT ref, who AS executor, act, min(at_utc) AS at_utc FROM h WHERE act IN ('completed', 'failed', 'declined') GROUP BY ALL)
                 SELECT c.executor, count(DISTINCT c.ref), count(DISTINCT CASE WHEN e.act = 'completed' THEN e.ref END),
                        median(epoch(c.at_utc) - epoch(cr.at_utc)), median(CASE WHEN e.act = 'completed' THEN epoch(e.at_utc) - epoch(c.at_utc) END)
                 FROM claims c LEFT JOIN created cr ON cr.ref = c.ref LEFT JOIN ends e ON e.ref = c.ref AND e.executor = c.executor
                 GROUP BY c.executor ORDER BY c.executor"
            ),
        ),
    ];
    let mut lines = Vec::new();
    let mut results = Vec::new();
    for (name, ours, theirs) in &cases {
        let cold = median3(|| {
            yaml_scan::clear_cache();
            time_rows(&db, ours)
        });
        trace(&format!("{name} cold"));
        let warm = median3(|| time_rows(&db, ours));
        trace(&format!("{name} warm"));
        results.push((name, ours, theirs, cold, warm));
    }
    let peak_yaml = peak_kib();
    for (name, _ours, theirs, cold, warm) in results {
        let json = median3(|| time_rows(&db, theirs));
        lines.push(format!(
            "{n:>8}  {name:<26} {:>10} {:>10} {:>6.2}x  {:>10} {:>10} {:>6.1}x",
            ms(cold),
            ms(json),
            cold.as_secs_f64() / json.as_secs_f64(),
            ms(warm),
            ms(json),
            json.as_secs_f64() / warm.as_secs_f64(),
        ));
    }
    for l in lines {
        println!("{l}");
    }
    println!(
        "{n:>8}  peak memory: {} MiB after the read_yaml_auto runs, {} MiB at the end; {} files cached",
        peak_yaml / 1024,
        peak_kib() / 1024,
        yaml_scan::cached_files()
    );
    query_paths(&home, n);
}

/// User queries through query workers against the in-process path they replaced (settling
/// pending threads, then `query::run` in the caller's process, its parse cache warm): medians
/// of 7 runs after one that fills each worker's cache; a fresh worker per query starts cold.
fn query_paths(home: &Path, n: usize) {
    let clock = Arc::new(FixedClock::new(
        time::parse_timestamp("2026-02-15T00:00:00Z")
            .unwrap()
            .to_utc(),
    ));
    let mut settings = Settings::defaults();
    settings.queries.worker = Some(PathBuf::from(env!("CARGO_BIN_EXE_mess")));
    let exchange = || Exchange::new(Store::open(home), settings.clone(), clock.clone());
    let pooled = exchange();
    let limits = pooled.sql().query_limits();
    for (name, sql) in [
        ("count threads", "SELECT count(*) FROM threads"),
        (
            "pending_by_capability",
            "SELECT * FROM pending_by_capability",
        ),
    ] {
        let in_process = median7(|| {
            let t = Instant::now();
            pooled.routing().settle_pending().unwrap();
            query::run(home, sql, &limits, &Scope::All).unwrap();
            t.elapsed()
        });
        let answer = pooled.sql().query(sql, &limits, None);
        if let Err(e) = answer {
            println!("{n:>8}  query path: {name:<22} through a worker: {e}");
            continue;
        }
        let pool = median7(|| {
            let t = Instant::now();
            pooled.sql().query(sql, &limits, None).unwrap();
            t.elapsed()
        });
        let fresh = median7(|| {
            let one_shot = exchange();
            let t = Instant::now();
            let answer = one_shot.sql().query(sql, &limits, None);
            let took = t.elapsed();
            answer.unwrap();
            took
        });
        println!(
            "{n:>8}  query path: {name:<22} in-process {:>7}  worker pool {:>7} ({:.2}x)  fresh worker {:>7} ({:.2}x)",
            ms(in_process),
            ms(pool),
            pool.as_secs_f64() / in_process.as_secs_f64(),
            ms(fresh),
            fresh.as_secs_f64() / in_process.as_secs_f64(),
        );
    }
}

fn median7(mut f: impl FnMut() -> Duration) -> Duration {
    let mut v: Vec<Duration> = (0..7).map(|_| f()).collect();
    v.sort();
    v[3]
}

fn time_rows(db: &Db, sql: &str) -> Duration {
    let t = Instant::now();
    let rows = db.rows(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert!(!rows.is_empty(), "{sql}: no rows");
    t.elapsed()
}

fn median3(mut f: impl FnMut() -> Duration) -> Duration {
    let mut v = [f(), f(), f()];
    v.sort();
    v[1]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// With `MESS_BENCH_TRACE` set, prints the resident and peak memory after a stage (stderr).
fn trace(stage: &str) {
    if std::env::var_os("MESS_BENCH_TRACE").is_some() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
                / 1024
        };
        eprintln!(
            "{stage}: rss {} MiB, peak {} MiB",
            field("VmRSS:"),
            field("VmHWM:")
        );
    }
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Seeds `TEMPLATE_THREADS` demo threads, then copies them (with fresh refs) up to `n`, and
/// writes every thread file a second time as NDJSON under `json`.
fn build_home(home: &Path, json: &Path, n: usize) {
    let template = home.with_file_name("template");
    let clock = Arc::new(FixedClock::new(
        time::parse_timestamp("2026-02-15T00:00:00Z")
            .unwrap()
            .to_utc(),
    ));
    let ex = Exchange::new(Store::open(&template), Settings::defaults(), clock);
    mess::exchange::demo::seed(&ex, TEMPLATE_THREADS.min(n), 30, 7, &mut |_, _| {}).unwrap();
    std::fs::create_dir_all(home).unwrap();
    for f in ["config.yaml", "capabilities.yaml"] {
        std::fs::copy(template.join(f), home.join(f)).unwrap();
    }
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for state in ["received", "executing", "finished", "canceled"] {
        let dir = template.join(format!("state={state}"));
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            files.push((state.to_owned(), e.path()));
        }
    }
    files.sort();
    for state in ["received", "executing", "finished", "canceled"] {
        std::fs::create_dir_all(home.join(format!("state={state}"))).unwrap();
        std::fs::create_dir_all(json.join(format!("state={state}"))).unwrap();
    }
    for i in 0..n {
        let (state, path) = &files[i % files.len()];
        let copy = i / files.len();
        let old_ref = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(".messe-af.yaml", "");
        let new_ref = if copy == 0 {
            old_ref.clone()
        } else {
            format!("{old_ref}-c{copy}")
        };
        let text = std::fs::read_to_string(path)
            .unwrap()
            .replace(&old_ref, &new_ref);
        std::fs::write(
            home.join(format!("state={state}/{new_ref}.messe-af.yaml")),
            &text,
        )
        .unwrap();
        let mut ndjson = String::new();
        for doc in yaml::parse_documents(&text, &Limits::DEFAULT).unwrap() {
            if !doc.is_null() {
                ndjson.push_str(&serde_json::to_string(&doc).unwrap());
                ndjson.push('\n');
            }
        }
        std::fs::write(json.join(format!("state={state}/{new_ref}.ndjson")), ndjson).unwrap();
    }
}
