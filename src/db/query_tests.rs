//! Tests of the query engine in this process (the code a query worker runs): what a locked
//! instance shows, which statements it refuses, the snapshots of key holders' queries, the
//! Arrow size cap, and the worker's wire.

use std::collections::HashSet;
use std::io::Cursor;
use std::path::Path;

use tempfile::TempDir;

use crate::db::error::DbError;
use crate::db::query::{self, QueryLimits, Scope};
use crate::db::worker::{self, Reply, Request};

fn fixture() -> TempDir {
    let dir = TempDir::new().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/homes/basic"),
        dir.path(),
    );
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A key holder who sees no thread.
fn nobody() -> Scope {
    Scope::Threads {
        files: HashSet::new(),
        accounts: HashSet::new(),
    }
}

/// Every value of `sql` on `con`, as text, one string.
fn all_text(con: &duckdb::Connection, sql: &str) -> String {
    let mut stmt = con
        .prepare(&format!("SELECT COLUMNS(*)::VARCHAR FROM ({sql})"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows = stmt.query([]).unwrap();
    let mut out = String::new();
    while let Some(row) = rows.next().unwrap() {
        for i in 0..row.as_ref().column_count() {
            out.push_str(&row.get::<_, Option<String>>(i).unwrap().unwrap_or_default());
            out.push('\n');
        }
    }
    out
}

#[test]
fn a_locked_instance_names_no_server_path_in_its_catalog_or_settings() {
    let home = fixture();
    let (con, problems) = query::locked(home.path(), &nobody(), &QueryLimits::defaults()).unwrap();
    assert_eq!(problems, Vec::<String>::new());
    let real = home.path().canonicalize().unwrap();
    // What the refused functions would have shown, read here without the refusal.
    for sql in [
        "SELECT sql FROM duckdb_views()",
        "SELECT macro_definition FROM duckdb_functions()",
        "SELECT name, value FROM duckdb_settings()",
        "SELECT * FROM duckdb_databases()",
    ] {
        let text = all_text(&con, sql);
        for home in [home.path(), real.as_path()] {
            assert!(
                !text.contains(&*home.to_string_lossy()),
                "{sql} names the home"
            );
        }
        // Any path a setting holds is the placeholder, not a folder of this machine.
        for line in text.lines().filter(|l| l.starts_with('/')) {
            assert!(line.starts_with(query::NOWHERE), "{sql}: {line}");
        }
    }
    // The views still read the home, through patterns relative to it.
    let threads = all_text(
        &con,
        "SELECT sql FROM duckdb_views() WHERE view_name = 'threads'",
    );
    assert!(
        threads.contains("read_yaml_auto(list_value('state=*/"),
        "{threads}"
    );
}

/// The verdict on `sql`: `Ok` with its text, or the refusal.
fn shape(sql: &str) -> Result<String, String> {
    let home = TempDir::new().unwrap();
    let (con, _) =
        query::locked(home.path(), &query::Scope::All, &QueryLimits::defaults()).unwrap();
    query::check_shape(&con, sql).map_err(|e| e.to_string())
}

#[test]
fn statements_that_name_the_engine_s_catalog_are_refused_wherever_they_name_it() {
    for (sql, named) in [
        ("SELECT * FROM duckdb_settings()", "duckdb_settings()"),
        ("SELECT sql FROM duckdb_views", "duckdb_views"),
        (
            "SELECT * FROM \"DuckDB_Extensions\"()",
            "duckdb_extensions()",
        ),
        (
            "SELECT current_setting('home_directory')",
            "current_setting()",
        ),
        ("SELECT getenv('HOME')", "getenv()"),
        (
            "SELECT * FROM which_secret('s3://a/b', 's3')",
            "which_secret()",
        ),
        ("SELECT * FROM pragma_database_list", "pragma_database_list"),
        (
            "SELECT view_definition FROM information_schema.views",
            "information_schema.views",
        ),
        ("SELECT * FROM pg_catalog.pg_views", "pg_views"),
        ("SELECT sql FROM sqlite_master", "sqlite_master"),
        ("SELECT pg_get_viewdef(1)", "pg_get_viewdef()"),
        (
            "SELECT * FROM system.main.duckdb_memory()",
            "duckdb_memory()",
        ),
        ("SELECT * FROM query('SELECT 1')", "query()"),
        ("SELECT * FROM query_table('threads')", "query_table()"),
        (
            "WITH t AS (SELECT * FROM duckdb_temporary_files()) SELECT * FROM t",
            "duckdb_temporary_files()",
        ),
        (
            "SELECT (SELECT count(*) FROM duckdb_secrets()) AS n",
            "duckdb_secrets()",
        ),
        (
            "SELECT list_transform([1], lambda x: current_setting('temp_directory'))",
            "current_setting()",
        ),
        (
            "DESCRIBE SELECT * FROM duckdb_functions()",
            "duckdb_functions()",
        ),
        (
            "SUMMARIZE SELECT * FROM duckdb_settings()",
            "duckdb_settings()",
        ),
    ] {
        let refused = shape(sql).expect_err(sql);
        assert!(
            refused.starts_with(&format!("refused: {named} describes the database engine")),
            "{sql}: {refused}"
        );
    }
    for sql in [
        "SELECT * FROM threads",
        "DESCRIBE threads",
        "SHOW TABLES",
        "SUMMARIZE threads",
        "SELECT query_text FROM (SELECT 1 AS query_text)",
        "SELECT * FROM read_yaml_auto('state=*/*.messe-af.yaml')",
    ] {
        assert!(shape(sql).is_ok(), "{sql}: {:?}", shape(sql));
    }
}

#[test]
fn a_directory_view_that_cannot_be_built_answers_empty_for_key_holders() {
    let home = fixture();
    let typed = |home: &Path| {
        let (con, problems) = query::locked(home, &nobody(), &QueryLimits::defaults()).unwrap();
        (
            all_text(
                &con,
                "SELECT column_name, column_type FROM (DESCRIBE capabilities)",
            ),
            all_text(&con, "SELECT count(*) FROM capabilities"),
            problems,
        )
    };
    let (columns, count, problems) = typed(home.path());
    assert_ne!(count, "0\n");
    assert!(problems.is_empty(), "{problems:?}");
    // A catalog entry whose id is a list: the capabilities view cannot bind over it.
    std::fs::write(home.path().join("capabilities.yaml"), "id: [1, 2]\n").unwrap();
    let (after, count, problems) = typed(home.path());
    assert_eq!((after, count), (columns, "0\n".to_owned()));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("the capabilities view answers empty for key holders"),
        "{problems:?}"
    );
    // The rest of the query runs; the operator's own query of the view still fails loudly.
    let result = query::run(
        home.path(),
        "SELECT count(*) AS n FROM executors",
        &QueryLimits::defaults(),
        &nobody(),
    )
    .unwrap();
    assert_eq!(result.json_rows, ["{\"n\":5}"]);
    assert_eq!(result.problems.len(), 1);
    assert!(
        query::run(
            home.path(),
            "SELECT * FROM capabilities",
            &QueryLimits::defaults(),
            &Scope::All
        )
        .is_err()
    );
}

/// Rows and truncation of an Arrow IPC stream.
fn arrow_rows(ipc: &[u8]) -> usize {
    arrow::ipc::reader::StreamReader::try_new(Cursor::new(ipc), None)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum()
}

#[test]
fn an_arrow_answer_holds_its_size_cap_from_the_first_batch() {
    let home = TempDir::new().unwrap();
    let limits = QueryLimits {
        duckdb_memory: 1024 * 1024 * 1024,
        ..QueryLimits::defaults()
    };
    let run = |sql: &str| {
        let mut ipc = Vec::new();
        query::run_arrow(home.path(), sql, &limits, &Scope::All, &mut ipc).map(|done| (ipc, done))
    };
    // One batch of 100 rows of 1 MB: 100 MB, over the 64 MiB cap on its own.
    let (ipc, done) = run("SELECT repeat('x', 1000000) AS s FROM range(100)").unwrap();
    assert!(done.truncated);
    assert!(ipc.len() <= query::ARROW_MAX_BYTES, "{} bytes", ipc.len());
    let rows = arrow_rows(&ipc);
    assert!((60..=67).contains(&rows), "{rows} rows");
    // A single row over the cap has nothing to show.
    let refused = run("SELECT repeat('x', 70000000) AS s").unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("the first row alone is larger than the 64 MiB"),
        "{refused}"
    );
    // Small answers are whole.
    let (ipc, done) = run("SELECT * FROM range(5000)").unwrap();
    assert_eq!((arrow_rows(&ipc), done.truncated), (1000, true));
}

#[test]
fn a_worker_answers_each_request_on_its_wire_until_its_input_ends() {
    let home = fixture();
    let request = |sql: &str, arrow: bool| Request {
        home: home.path().to_owned(),
        sql: sql.to_owned(),
        limits: QueryLimits::defaults(),
        scope: Scope::All,
        arrow,
    };
    let mut input = Vec::new();
    for r in [
        request("SELECT count(*) AS n FROM threads", false),
        request("SELECT ref FROM threads ORDER BY ref LIMIT 3", true),
        request("DROP VIEW threads", false),
    ] {
        worker::write_frame(
            &mut input,
            worker::REQUEST,
            &serde_json::to_vec(&r).unwrap(),
        )
        .unwrap();
    }
    let mut output = Vec::new();
    worker::serve(&mut Cursor::new(input), &mut output).unwrap();
    let mut frames = Vec::new();
    let mut wire = Cursor::new(output);
    while let Some(frame) = worker::read_frame(&mut wire, worker::MAX_REPLY_BYTES).unwrap() {
        frames.push(frame);
    }
    // Started and replied; started, Arrow data and replied; refused before it started.
    let kinds: Vec<u8> = frames.iter().map(|(k, _)| *k).collect();
    let data = kinds.iter().filter(|k| **k == worker::DATA).count();
    let mut expected = vec![worker::STARTED, worker::REPLY, worker::STARTED];
    expected.extend(std::iter::repeat_n(worker::DATA, data));
    expected.extend([worker::REPLY, worker::REPLY]);
    assert_eq!(kinds, expected);
    assert!(data >= 1);
    let reply = |i: usize| serde_json::from_slice::<Reply>(&frames[i].1).unwrap();
    match reply(1) {
        Reply::Rows(r) => assert_eq!(r.json_rows, ["{\"n\":8}"]),
        other => panic!("{other:?}"),
    }
    let ipc: Vec<u8> = frames[3..3 + data]
        .iter()
        .flat_map(|(_, bytes)| bytes.clone())
        .collect();
    assert_eq!(arrow_rows(&ipc), 3);
    assert!(matches!(reply(3 + data), Reply::Arrow(ref d) if !d.truncated));
    match reply(4 + data) {
        Reply::Failed(f) => assert!(matches!(
            f.into_error(256),
            DbError::Refused { message } if message.starts_with("refused: only read-only")
        )),
        other => panic!("{other:?}"),
    }
}
