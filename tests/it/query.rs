//! `mess query` end to end: the spec's DuckDB queries run unchanged against a home at
//! `~/.mess`, output formats, and the read-only lockdown.

use std::path::Path;
use std::process::Command;

use crate::support::{Home, copy_dir};
use tempfile::TempDir;

/// A HOME whose `.mess` is a copy of the fixture home, plus the spec's alternative flat layout
/// (`threads/` with links to every thread file) for the reference design's queries that use it.
struct SpecHome {
    dir: TempDir,
}

impl SpecHome {
    fn new() -> SpecHome {
        let dir = TempDir::new().unwrap();
        let home = dir.path().join(".mess");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/homes/basic"),
            &home,
        );
        let threads = home.join("threads");
        std::fs::create_dir_all(&threads).unwrap();
        for folder in [
            "state=received",
            "state=executing",
            "state=finished",
            "state=canceled",
            "archive/2026-01",
        ] {
            for entry in std::fs::read_dir(home.join(folder)).unwrap().flatten() {
                std::os::unix::fs::symlink(entry.path(), threads.join(entry.file_name())).unwrap();
            }
        }
        SpecHome { dir }
    }

    fn query(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_mess"))
            .arg("query")
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("MESS_HOME")
            .env_remove("MESS_AGENT_ID")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// CSV rows of a query that must succeed, without the header.
    fn csv(&self, sql: &str) -> Vec<String> {
        let (code, out, err) = self.query(&[sql, "--format", "csv"]);
        assert_eq!(code, 0, "{sql}\n{err}");
        out.lines().skip(1).map(str::to_owned).collect()
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn the_spec_queries_run_unchanged_and_answer_as_expected() {
    let h = SpecHome::new();
    // MESSE-AF 1, "Folder Mapping": hive partitions give a `state` column.
    // Thread files give one row per thread (`multi_document := 'thread'` is their default).
    let executing = h.csv("SELECT ref, state FROM read_yaml_auto('~/.mess/state=*/*.messe-af.yaml', hive_partitioning=true)\nWHERE state = 'executing';");
    assert_eq!(executing, ["2026-01-31-006,executing"]);
    // MESSE-AF 1, "With DuckDB (optional)": one executing thread.
    assert_eq!(
        h.csv("SELECT count(*) FROM read_yaml_auto('~/.mess/state=executing/*.messe-af.yaml')"),
        ["1"]
    );
    // Documents are rows when asked for.
    assert_eq!(
        h.csv("SELECT count(*) FROM read_yaml_auto('~/.mess/state=executing/*.messe-af.yaml', multi_document := 'rows')"),
        ["5"]
    );
    // `*/` reaches the four state folders and the flat `threads/` folder (all eight threads).
    assert_eq!(
        h.csv("SELECT count(DISTINCT ref) FROM read_yaml_auto('~/.mess/*/*.messe-af.yaml')"),
        ["8"]
    );
    // the reference design (docs/spec-conformance.md), "Basic Queries with read_yaml_auto".
    assert_eq!(
        sorted(h.csv("SELECT ref, intent, created, priority\nFROM read_yaml_auto('~/.mess/state=received/*.messe-af.yaml')")),
        [
            "2026-01-31-004,photo of the garden,2026-01-31 11:00:00+00,normal",
            "2026-01-31-005,print a cable clip,2026-01-31 11:30:00+00,normal",
            "2026-01-31-007,dice the onions,2026-01-31 12:30:00+00,normal",
        ]
    );
    let working = h.csv("SELECT ref, intent, executor, updated\nFROM read_yaml_auto('~/.mess/state=executing/*.messe-af.yaml')");
    assert_eq!(
        working,
        ["2026-01-31-006,is the door locked?,teague-phone,2026-01-31 12:06:00+00"]
    );
    assert_eq!(
        sorted(h.csv("-- Executor stats from finished\nSELECT executor, COUNT(*) as completed\nFROM read_yaml_auto('~/.mess/state=finished/*.messe-af.yaml')\nGROUP BY executor;")),
        ["roomba-kitchen,1", "teague-phone,1"]
    );
    // the reference design (docs/spec-conformance.md), "Advanced: duckdb_yaml for Message Parsing",
    // over the threads view.
    let actors = h.csv("SELECT \n    ref,\n    yaml_extract(messages, '$[*].from') as actors,\n    yaml_extract(messages, '$[-1].MESS') as last_message\nFROM threads;");
    assert!(
        actors.contains(&r#"2026-01-31-002,"[""claude-agent"", ""exchange"", ""roomba-kitchen"", ""roomba-kitchen""]","[{""status"":{""re"":""2026-01-31-002"",""code"":""completed""}}]""#.to_owned()),
        "{actors:?}"
    );
    // the reference design's table names, as views over the same files.
    assert_eq!(
        h.csv("SELECT count(*), count(DISTINCT ref), count(*) FILTER (status = 'pending') FROM requests"),
        ["8,8,3"]
    );
    assert_eq!(
        h.csv("SELECT ref, executor, estimate, released FROM claims WHERE ref LIKE '2026-01-31%' ORDER BY ref"),
        [
            "2026-01-31-001,teague-phone,PT30M,false",
            "2026-01-31-002,roomba-kitchen,,false",
            "2026-01-31-003,roomba-kitchen,,true",
            "2026-01-31-006,teague-phone,,false",
        ]
    );
    assert_eq!(
        h.csv("SELECT code, count(*) FROM statuses GROUP BY code ORDER BY code"),
        ["claimed,5", "completed,3", "failed,1", "in_progress,1"]
    );
    assert_eq!(
        h.csv(
            "SELECT r.intent, s.executor, s.content FROM requests r JOIN responses s USING (ref)"
        ),
        [r#"what's in the fridge?,teague-phone,"[""chicken and rice""]""#]
    );
    assert_eq!(
        h.csv(
            "SELECT yaml_extract('a: [1, 2]', '$.a[1]'), yaml_extract('a: [oops', '$.a') IS NULL"
        ),
        ["2,true"]
    );
    assert_eq!(
        h.csv("SELECT ref, intent, status, updated\nFROM read_yaml_auto('~/.mess/state=canceled/*.messe-af.yaml')\nWHERE status = 'failed';"),
        ["2026-01-31-003,vacuum the hall,failed,2026-01-31 10:45:00+00"]
    );
    // the reference design (docs/spec-conformance.md), "When You'd Add DuckDB" (the flat threads/
    // layout).
    assert_eq!(
        h.csv("SELECT count(DISTINCT ref) FROM read_yaml_auto('~/.mess/threads/*.yaml')"),
        ["8"]
    );
    assert_eq!(
        sorted(h.csv("SELECT ref, intent, created, priority\nFROM read_yaml_auto('~/.mess/threads/*.yaml')\nWHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired', 'declined');")),
        [
            "2026-01-31-004,photo of the garden,2026-01-31 11:00:00+00,normal",
            "2026-01-31-005,print a cable clip,2026-01-31 11:30:00+00,normal",
            "2026-01-31-006,is the door locked?,2026-01-31 12:00:00+00,normal",
            "2026-01-31-007,dice the onions,2026-01-31 12:30:00+00,normal",
        ]
    );
    assert_eq!(
        h.csv("SELECT executor, COUNT(*) as completed\nFROM read_yaml_auto('~/.mess/archive/**/*.yaml')\nWHERE status = 'completed'\nGROUP BY executor;"),
        ["teague-phone,1"]
    );
}

#[test]
fn formats_and_caps() {
    let h = SpecHome::new();
    let (code, out, _) = h.query(&["SELECT id, capabilities FROM executors ORDER BY id LIMIT 2"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "id             capabilities\nkitchen-robot  [vacuum-floor, precision-knife-work]\nnight-owl      [take-photo, night-watch]\n"
    );
    let (_, out, _) = h.query(&[
        "SELECT id, capabilities FROM executors ORDER BY id LIMIT 1",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"][0]["capabilities"][1], "precision-knife-work");
    assert_eq!(v["truncated"], false);
    let (_, out, err) = h.query(&[
        "SELECT * FROM range(50)",
        "--max-rows",
        "10",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 10);
    assert_eq!(v["truncated"], true);
    assert!(err.contains("only the first 10 rows"), "{err}");
    let (_, out, _) = h.query(&["SELECT 'a,b' AS x, 'say \"hi\"' AS y", "--format", "csv"]);
    assert_eq!(out, "x,y\n\"a,b\",\"say \"\"hi\"\"\"\n");
}

#[test]
fn anything_but_reading_the_exchange_is_refused() {
    let h = SpecHome::new();
    let outside = h.dir.path().join("outside.yaml");
    std::fs::write(&outside, "secret: 1\n").unwrap();
    let cases = [
        (
            "COPY threads TO '/tmp/mess-copy.csv'",
            "refused: only read-only queries",
        ),
        ("INSTALL httpfs", "refused: only read-only queries"),
        ("ATTACH '/tmp/mess.db'", "refused: only read-only queries"),
        (
            "SET enable_external_access = true",
            "refused: only read-only queries",
        ),
        (
            "CREATE TABLE t AS SELECT 1",
            "refused: only read-only queries",
        ),
        ("DELETE FROM threads", "refused: only read-only queries"),
        (
            "SELECT 1; SELECT 2",
            "refused: send one statement at a time",
        ),
        (
            "SELECT * FROM read_csv('/etc/passwd')",
            "refused: the query may only read the exchange",
        ),
        (
            "SELECT * FROM read_text('/etc/hostname')",
            "refused: the query may only read the exchange",
        ),
    ];
    for (sql, want) in cases {
        let (code, out, err) = h.query(&[sql]);
        assert_eq!(code, 1, "{sql}: {out}{err}");
        assert!(err.starts_with(&format!("error: {want}")), "{sql}: {err}");
    }
    let (code, _, err) = h.query(&[&format!(
        "SELECT * FROM read_yaml_auto('{}')",
        outside.display()
    )]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: refused: the query may only read the exchange")
            && err.contains("is outside the exchange home"),
        "{err}"
    );
    let (code, _, err) = h.query(&["SELECT * FROM read_yaml_auto('/etc/**/*.yaml')"]);
    assert_eq!(code, 1);
    assert!(err.contains("is outside the exchange home"), "{err}");
    let (code, _, err) = h.query(&["SELECT * FROM read_yaml_auto('.mess/**/*')"]);
    assert_eq!(code, 1);
    assert!(err.contains("hidden folder"), "{err}");
    // Patterns relative to the home, and trailing comments, are fine.
    let (code, out, err) = h.query(&[
        "SELECT count(*) AS n FROM read_yaml_auto('state=*/*.messe-af.yaml', multi_document := 'first'); -- all threads",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("n\n"), "{out}");
    let (code, _, err) = h.query(&[
        "SELECT count(*) FROM range(10000000000) a, range(1000) b",
        "--timeout",
        "1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("interrupted after 1 s"), "{err}");
    let (code, _, err) = h.query(&["SELEC 1"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: query failed: syntax error"),
        "{err}"
    );
    assert!(!Path::new("/tmp/mess-copy.csv").exists());
}

#[test]
fn query_errors_and_filenames_are_relative_to_the_home() {
    let home = Home::with_config("agent_id: claude-agent\n");
    home.ok(&["request", "look around"]);
    std::fs::write(
        home.path()
            .join("state=received/2026-01-01-001.messe-af.yaml"),
        "ref: [\n",
    )
    .unwrap();
    let err = home.fails(&["query", "SELECT * FROM threads"], 1);
    assert!(
        err.contains("state=received/2026-01-01-001.messe-af.yaml: document 1"),
        "{err}"
    );
    let server_path = home.path().to_string_lossy().to_string();
    assert!(!err.contains(&server_path), "{err}");
    std::fs::remove_file(
        home.path()
            .join("state=received/2026-01-01-001.messe-af.yaml"),
    )
    .unwrap();
    let out = home.ok(&["query", "--format", "csv", "SELECT filename FROM threads"]);
    assert!(out.contains("state=received/"), "{out}");
    assert!(!out.contains(&server_path), "{out}");
}

#[test]
fn the_spec_queries_answer_zero_rows_on_a_new_home() {
    let h = SpecHome {
        dir: TempDir::new().unwrap(),
    };
    let init = Command::new(env!("CARGO_BIN_EXE_mess"))
        .arg("init")
        .env("HOME", h.dir.path())
        .env_remove("MESS_HOME")
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    for sql in [
        "SELECT ref, intent, status, updated\nFROM read_yaml_auto('~/.mess/state=canceled/*.messe-af.yaml')\nWHERE status = 'failed';",
        "SELECT * FROM read_yaml_auto('~/.mess/state=*/*.messe-af.yaml', hive_partitioning=true)\nWHERE state = 'executing';",
        "SELECT executor, COUNT(*) as completed\nFROM read_yaml_auto('~/.mess/state=finished/*.messe-af.yaml')\nGROUP BY executor;",
        "SELECT ref, yaml_extract(messages, '$[*].from') as actors FROM threads;",
    ] {
        assert_eq!(h.csv(sql), Vec::<String>::new(), "{sql}");
    }
    // A path without wildcards names one file: a missing one is an error.
    let (code, _, err) = h.query(&[
        "SELECT * FROM read_yaml_auto('~/.mess/state=canceled/2026-01-31-001.messe-af.yaml')",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("No files found"), "{err}");
}

#[test]
fn the_plan_views_tell_what_the_exchange_recorded_not_what_a_payload_declares() {
    let home = Home::with_config(crate::support::CONFIG);
    let r = home.ok(&[
        "request",
        "what's in the fridge?",
        "--requires",
        "take-photo",
    ]);
    let r = r.trim();
    // The claimant names someone else in its claim's payload; the claim is still its own.
    home.send_as(
        "teague-phone",
        &format!(
            "MESS:\n  - status:\n      re: {r}\n      code: claimed\n      executor: mallory\n"
        ),
    );
    let claims = home.ok(&["query", "SELECT executor FROM claims", "--format", "csv"]);
    assert_eq!(claims.trim(), "executor\nteague-phone", "{claims}");
    // A request that says nothing of its priority is `normal`, as the exchange reads it.
    let priority = home.ok(&["query", "SELECT priority FROM requests", "--format", "csv"]);
    assert_eq!(priority.trim(), "priority\nnormal", "{priority}");
}
