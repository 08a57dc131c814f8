//! The same SQL through the embedded DuckDB (`mess query`) and through the real duckdb CLI with
//! the `mess_yaml` extension and `mess sql init`'s setup gives the same rows.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::copy_dir;
use tempfile::TempDir;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The duckdb CLI and the built extension that `.ci/test` provides.
fn tools() -> (PathBuf, PathBuf) {
    let cli = repo().join(".venv/bin/duckdb");
    let ext = repo().join("extensions/mess_yaml/mess_yaml.duckdb_extension");
    assert!(
        cli.exists() && ext.exists(),
        "the duckdb CLI ({}) and the extension ({}) are missing: run .ci/test, which installs and builds them",
        cli.display(),
        ext.display()
    );
    (cli, ext)
}

fn mess(home: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mess"))
        .args(args)
        .env("MESS_HOME", home)
        .env_remove("MESS_AGENT_ID")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mess {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "drives the duckdb CLI and Python duckdb with the mess_yaml extension; .ci/test runs it"]
fn the_duckdb_cli_with_the_extension_answers_like_the_embedded_duckdb() {
    let (cli, ext) = tools();
    let dir = TempDir::new().unwrap();
    let home = dir.path().join("home");
    copy_dir(&repo().join("tests/fixtures/homes/basic"), &home);
    let init = dir.path().join("init.sql");
    std::fs::write(
        &init,
        mess(
            &home,
            &["sql", "init", "--extension", ext.to_str().unwrap()],
        ),
    )
    .unwrap();
    let h = home.display();
    let queries = [
        format!("SELECT state, count(*) AS n FROM read_yaml_auto('{h}/state=*/*.messe-af.yaml') GROUP BY ALL ORDER BY ALL"),
        format!("SELECT ref, history, document_index FROM read_yaml_auto('{h}/state=finished/*.messe-af.yaml', document_index := true, filename := true) ORDER BY filename, document_index"),
        format!("SELECT len(documents), documents[1].ref FROM read_yaml_auto('{h}/state=*/*.messe-af.yaml', multi_document := 'list') ORDER BY 2"),
        format!("SELECT ref, \"from\", received FROM read_yaml_auto('{h}/state=*/*.messe-af.yaml', multi_document := 'frontmatter') ORDER BY ALL"),
        // Thread files: one row per thread by default; a glob over an empty folder is empty.
        format!("SELECT ref, intent, created, priority, executor, json_array_length(messages) FROM read_yaml_auto('{h}/state=*/*.messe-af.yaml') ORDER BY ref"),
        format!("SELECT count(*), count(ref) FROM read_yaml_auto('{h}/state=nothing/*.messe-af.yaml')"),
        "SELECT ref, yaml_extract(messages, '$[*].from') AS actors, yaml_extract(messages, '$[-1].MESS') AS last_message FROM threads ORDER BY ref".to_owned(),
        "SELECT * EXCLUDE (filename) FROM threads ORDER BY ref".to_owned(),
        "SELECT * EXCLUDE (filename) FROM messages ORDER BY ref, seq".to_owned(),
        "SELECT * FROM thread_history ORDER BY ref, seq".to_owned(),
        // The reference design's names (docs/spec-conformance.md), and yaml_extract over YAML text
        // (yaml_to_json).
        "SELECT * EXCLUDE (filename) FROM requests ORDER BY ref, seq".to_owned(),
        "SELECT * EXCLUDE (filename) FROM statuses ORDER BY ref, seq".to_owned(),
        "SELECT * EXCLUDE (filename) FROM claims ORDER BY ref, seq".to_owned(),
        "SELECT * EXCLUDE (filename) FROM responses ORDER BY ref, seq".to_owned(),
        "SELECT yaml_extract(E'x: 1\\n---\\nx: [2, 3]\\n', '$[*].x'), yaml_extract('a: [oops', '$.a')".to_owned(),
        "SELECT * FROM executors ORDER BY id".to_owned(),
        "SELECT * FROM routing_rules ORDER BY position".to_owned(),
        "SELECT * FROM capabilities ORDER BY id".to_owned(),
        "SELECT * FROM pending_by_capability".to_owned(),
        "SELECT * FROM executor_stats".to_owned(),
        "SELECT * FROM executor_availability_at('2026-01-31T21:00:00Z'::TIMESTAMPTZ)".to_owned(),
        "SELECT * FROM route_request('2026-01-31-004', '2026-01-31T12:00:00Z'::TIMESTAMPTZ)".to_owned(),
        "SELECT * FROM route_for(['vacuum-floor'], NULL, NULL, '2026-01-31T12:00:00Z'::TIMESTAMPTZ)".to_owned(),
    ];
    for q in &queries {
        let embedded = mess(&home, &["query", q, "--format", "csv"]);
        let out = Command::new(&cli)
            .args(["-unsigned", "-csv", "-nullvalue", "", "-init"])
            .arg(&init)
            .arg("-c")
            .arg(format!("SELECT COLUMNS(*)::VARCHAR FROM ({q})"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("Error"),
            "duckdb CLI: {q}\n{stderr}"
        );
        let from_cli = String::from_utf8(out.stdout).unwrap();
        assert!(embedded.lines().count() > 1, "{q} returned no rows");
        // Both sides write valid CSV but quote differently (the CLI also quotes `'`), so the
        // cells are compared, not the text.
        assert_eq!(
            parse_csv(&from_cli),
            parse_csv(&embedded),
            "rows differ for {q}"
        );
    }
}

/// Cells of a CSV text (RFC 4180 quoting).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    if !cell.is_empty() || !row.is_empty() {
        row.push(cell);
        rows.push(row);
    }
    rows
}

#[test]
#[ignore = "drives the duckdb CLI and Python duckdb with the mess_yaml extension; .ci/test runs it"]
fn python_duckdb_loads_the_extension() {
    let (cli, ext) = tools();
    let python = cli.with_file_name("python");
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("a.yaml"), "x: 1\n---\nx: 2\n").unwrap();
    let script = format!(
        "import duckdb\ncon = duckdb.connect(config={{'allow_unsigned_extensions': 'true'}})\ncon.execute(\"LOAD '{}'\")\nprint(con.execute(\"SELECT sum(x) FROM read_yaml_auto('{}/*.yaml')\").fetchone()[0])\n",
        ext.display(),
        dir.path().display()
    );
    let out = Command::new(python).arg("-c").arg(script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
}
