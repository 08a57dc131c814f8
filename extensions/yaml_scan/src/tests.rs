//! The cases where `read_yaml_auto` must answer as DuckDB's `read_json_auto` does, each on an in-memory DuckDB with
//! `read_yaml_auto` registered, plus cache correctness under edits, moves and deletes.

use std::path::Path;

use duckdb::Connection;
use tempfile::TempDir;

use crate::{register, register_confined};

struct Db {
    con: Connection,
    dir: TempDir,
}

fn db() -> Db {
    let con = Connection::open_in_memory().unwrap();
    register(&con).unwrap();
    Db {
        con,
        dir: TempDir::new().unwrap(),
    }
}

impl Db {
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    fn path(&self, rel: &str) -> String {
        self.dir.path().join(rel).to_string_lossy().into_owned()
    }

    /// Every value as text (NULL as None), row by row.
    fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let wrapped = format!("SELECT COLUMNS(*)::VARCHAR FROM ({sql})");
        let mut stmt = self
            .con
            .prepare(&wrapped)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let mut rows = stmt.query([]).unwrap();
        let mut out = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            let n = row.as_ref().column_count();
            out.push(
                (0..n)
                    .map(|i| row.get::<_, Option<String>>(i).unwrap())
                    .collect(),
            );
        }
        out
    }

    fn one(&self, sql: &str) -> Option<String> {
        self.rows(sql).remove(0).remove(0)
    }

    /// Column names and DuckDB types.
    fn types(&self, sql: &str) -> Vec<(String, String)> {
        let mut stmt = self.con.prepare(&format!("DESCRIBE {sql}")).unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut out = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            out.push((
                row.get::<_, String>(0).unwrap(),
                row.get::<_, String>(1).unwrap(),
            ));
        }
        out
    }

    fn error(&self, sql: &str) -> String {
        match self
            .con
            .prepare(sql)
            .and_then(|mut s| s.query([]).map(|_| ()))
        {
            Ok(()) => panic!("{sql} succeeded"),
            Err(e) => e.to_string(),
        }
    }
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

#[test]
fn case_01_scalars() {
    let d = db();
    let f = d.file("a.yaml", "name: John\nage: 30\nis_active: true\n");
    let sql = format!("SELECT * FROM read_yaml_auto('{f}')");
    assert_eq!(d.rows(&sql), vec![vec![s("John"), s("30"), s("true")]]);
    assert_eq!(
        d.types(&sql),
        vec![
            ("name".into(), "VARCHAR".into()),
            ("age".into(), "BIGINT".into()),
            ("is_active".into(), "BOOLEAN".into())
        ]
    );
}

#[test]
fn case_02_03_documents_union_and_first() {
    let d = db();
    let f = d.file("a.yaml", "id: 1\nname: John\n---\nid: 2\nname: Jane\nrole: Developer\n---\nid: 3\nname: Bob\nmanager: true\n");
    let sql = format!("SELECT * FROM read_yaml_auto('{f}')");
    let names: Vec<String> = d.types(&sql).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["id", "name", "role", "manager"]);
    assert_eq!(d.rows(&sql)[0], vec![s("1"), s("John"), None, None]);
    assert_eq!(
        d.rows(&format!(
            "SELECT * FROM read_yaml_auto('{f}', multi_document := 'first')"
        )),
        vec![vec![s("1"), s("John")]]
    );
}

#[test]
fn case_04_05_root_sequence() {
    let d = db();
    let f = d.file(
        "a.yaml",
        "- {id: 1, name: a}\n- {id: 2, name: b, extra: x}\n",
    );
    let rows = d.rows(&format!("SELECT * FROM read_yaml_auto('{f}')"));
    assert_eq!(
        rows,
        vec![vec![s("1"), s("a"), None], vec![s("2"), s("b"), s("x")]]
    );
    let sql = format!("SELECT * FROM read_yaml_auto('{f}', expand_root_sequence := false)");
    assert_eq!(d.rows(&sql).len(), 1);
    assert!(
        d.types(&sql)[0].1.starts_with("STRUCT(") && d.types(&sql)[0].1.ends_with(")[]"),
        "{:?}",
        d.types(&sql)
    );
}

#[test]
fn case_06_07_empty_and_scalar_documents() {
    let d = db();
    let f = d.file("a.yaml", "a: 1\n---\n---\nb: 2\n--- hello\n");
    assert_eq!(
        d.rows(&format!("SELECT * FROM read_yaml_auto('{f}')"))
            .len(),
        2
    );
}

#[test]
fn case_08_to_11_nesting() {
    let d = db();
    let f = d.file(
        "a.yaml",
        "person: {name: John Doe, age: 30}\ntags: [developer, x, designer]\nnumbers: [1, 2, 3]\nitems: [{name: a, required: x}, {name: b, required: y, optional: z}]\ngroups: [{members: [{user: u}]}, {members: [{user: v, department: sales}]}]\n",
    );
    let src = format!("read_yaml_auto('{f}')");
    assert_eq!(
        d.one(&format!("SELECT person.name FROM {src}")),
        s("John Doe")
    );
    let types = d.types(&format!("SELECT * FROM {src}"));
    assert_eq!(types[0].1, "STRUCT(\"name\" VARCHAR, age BIGINT)");
    assert_eq!(d.one(&format!("SELECT tags[3] FROM {src}")), s("designer"));
    assert_eq!(types[1].1, "VARCHAR[]");
    assert_eq!(d.one(&format!("SELECT numbers[2] FROM {src}")), s("2"));
    assert_eq!(types[2].1, "BIGINT[]");
    assert_eq!(
        types[3].1,
        "STRUCT(\"name\" VARCHAR, required VARCHAR, optional VARCHAR)[]"
    );
    assert_eq!(
        d.one(&format!("SELECT items[1].optional IS NULL FROM {src}")),
        s("true")
    );
    assert_eq!(
        d.one(&format!(
            "SELECT groups[1].members[1].department IS NULL FROM {src}"
        )),
        s("true")
    );
    assert_eq!(
        d.one(&format!(
            "SELECT groups[2].members[1].department FROM {src}"
        )),
        s("sales")
    );
}

#[test]
fn case_12_to_18_type_conflicts() {
    let d = db();
    let f = d.file("mixed.yaml", "mixed: [1, hello, true, 3.14, null]\n");
    assert_eq!(
        d.one(&format!("SELECT mixed::VARCHAR FROM read_yaml_auto('{f}')")),
        s("[1, hello, true, 3.14, NULL]")
    );
    let f = d.file("n.yaml", "n: 5\n---\nn: 5000\n");
    assert_eq!(
        d.one(&format!("SELECT sum(n) FROM read_yaml_auto('{f}')")),
        s("5005")
    );
    assert_eq!(
        d.types(&format!("SELECT * FROM read_yaml_auto('{f}')"))[0].1,
        "BIGINT"
    );
    let f = d.file("r.yaml", "r: 1\n---\nr: 2.5\n");
    assert_eq!(
        d.types(&format!("SELECT * FROM read_yaml_auto('{f}')"))[0].1,
        "DOUBLE"
    );
    let f = d.file("m.yaml", "m: 1\n---\nm: hello\n");
    assert_eq!(
        d.rows(&format!("SELECT m FROM read_yaml_auto('{f}')")),
        vec![vec![s("1")], vec![s("hello")]]
    );
    d.file("meta/a.yaml", "metadata: {author: x}\n");
    d.file("meta/b.yaml", "metadata: plain\n");
    let rows = d.rows(&format!(
        "SELECT metadata FROM read_yaml_auto('{}')",
        d.path("meta/*.yaml")
    ));
    assert_eq!(rows, vec![vec![s("{\"author\":\"x\"}")], vec![s("plain")]]);
    let f = d.file("x.yaml", "x: {}\ny: []\n");
    let sql = format!("SELECT * FROM read_yaml_auto('{f}')");
    assert_eq!(d.rows(&sql), vec![vec![s("{}"), s("[]")]]);
    assert_eq!(d.types(&sql)[1].1, "VARCHAR[]");
}

#[test]
fn case_19_to_24_scalars_by_yaml_1_2() {
    let d = db();
    let f = d.file(
        "a.yaml",
        "d: 2026-01-31\nq: \"2026-01-31\"\nts: 2026-01-31T17:00:00-08:00\nz: 2026-01-31T17:00:00Z\nnaive: 2026-01-31 17:00:00\nb: yes\nc: n\nid: \"001\"\nv: 1.0.0\nbase: &b {k: 1}\nuse: *b\n",
    );
    let sql = format!("SELECT * FROM read_yaml_auto('{f}')");
    let types: Vec<String> = d.types(&sql).into_iter().map(|(_, t)| t).collect();
    // `q` is quoted, but serde_yaml does not expose quoting, so it is typed like `d` (pinned).
    assert_eq!(
        &types[..9],
        [
            "DATE",
            "DATE",
            "TIMESTAMP WITH TIME ZONE",
            "TIMESTAMP WITH TIME ZONE",
            "TIMESTAMP",
            "VARCHAR",
            "VARCHAR",
            "VARCHAR",
            "VARCHAR"
        ]
    );
    // Normalised to UTC and lossless (DuckDB prints TIMESTAMPTZ in UTC without ICU).
    assert_eq!(
        d.one(&format!("SELECT ts::VARCHAR FROM read_yaml_auto('{f}')")),
        s("2026-02-01 01:00:00+00")
    );
    assert_eq!(
        d.one(&format!("SELECT naive::VARCHAR FROM read_yaml_auto('{f}')")),
        s("2026-01-31 17:00:00")
    );
    let row = &d.rows(&format!(
        "SELECT b, c, id, v, use.k FROM read_yaml_auto('{f}')"
    ))[0];
    assert_eq!(row, &vec![s("yes"), s("n"), s("001"), s("1.0.0"), s("1")]);
    // Text that starts like a timestamp stays text, whatever follows it.
    let g = d.file(
        "b.yaml",
        "intent: \"2026-02-01 09:00:00 – call mum\"\nother: 2026-02-01T09:00:00 ü\n",
    );
    assert_eq!(
        d.rows(&format!("SELECT intent, other FROM read_yaml_auto('{g}')"))[0],
        vec![
            s("2026-02-01 09:00:00 – call mum"),
            s("2026-02-01T09:00:00 ü")
        ]
    );
}

#[test]
fn case_25_to_27_errors() {
    let d = db();
    let pattern = d.path("nothing.yaml");
    let e = d.error(&format!("SELECT * FROM read_yaml_auto('{pattern}')"));
    assert!(
        e.contains(&format!(
            "No files found that match the pattern \"{pattern}\""
        )),
        "{e}"
    );
    let f = d.file("bad.yaml", "valid: true\n---\ninvalid: : : :\n");
    let e = d.error(&format!("SELECT * FROM read_yaml_auto('{f}')"));
    assert!(
        e.contains("bad.yaml") && e.contains("document 2") && e.contains("line 3"),
        "{e}"
    );
    assert_eq!(
        d.rows(&format!(
            "SELECT * FROM read_yaml_auto('{f}', ignore_errors := true)"
        )),
        vec![vec![s("true")]]
    );
    let e = d.error(&format!(
        "SELECT * FROM read_yaml_auto('{f}', not_a_param := 1)"
    ));
    assert!(
        e.contains("Invalid named parameter \"not_a_param\" for function read_yaml_auto"),
        "{e}"
    );
    let e = d.error("SELECT * FROM read_yaml_auto(NULL)");
    assert!(e.contains("Binder Error"), "{e}");
    let e = d.error("SELECT * FROM read_yaml_auto(42)");
    assert!(e.contains("expects a path"), "{e}");
}

#[test]
fn case_28_list_argument() {
    let d = db();
    let a = d.file("a.yaml", "x: 1\n");
    let b = d.file("b.yaml", "y: two\n");
    let rows = d.rows(&format!("SELECT * FROM read_yaml_auto(['{a}', '{b}'])"));
    assert_eq!(rows, vec![vec![s("1"), None], vec![None, s("two")]]);
}

#[test]
fn case_29_to_33_hive_and_filename() {
    let d = db();
    let x = d.file("root/state=received/x.yaml", "id: x\nstate: inner\n");
    d.file("root/state=executing/y.yaml", "id: y\n");
    let pattern = d.path("root/state=*/*.yaml");
    let sql = format!("SELECT * FROM read_yaml_auto('{pattern}', hive_partitioning := true)");
    assert_eq!(
        d.types(&sql).last().unwrap(),
        &("state".to_owned(), "VARCHAR".to_owned())
    );
    assert_eq!(
        d.rows(&format!("SELECT id FROM ({sql}) WHERE state = 'executing'")),
        vec![vec![s("y")]]
    );
    assert_eq!(
        d.rows(&format!("SELECT state FROM ({sql}) WHERE id = 'x'")),
        vec![vec![s("received")]],
        "the path wins"
    );
    assert!(
        d.types(&format!("SELECT * FROM read_yaml_auto('{pattern}')"))
            .iter()
            .any(|(n, _)| n == "state")
    );
    let no_hive = d.types(&format!(
        "SELECT * FROM read_yaml_auto('{pattern}', hive_partitioning = false)"
    ));
    assert_eq!(
        no_hive.len(),
        2,
        "the YAML key `state` remains, no partition column: {no_hive:?}"
    );
    let with_name = format!(
        "SELECT filename FROM read_yaml_auto('{pattern}', filename := true) WHERE id = 'x'"
    );
    assert_eq!(d.one(&with_name), Some(x));
    d.file("p/day=2026-01-31/n=7/z.yaml", "k: 1\n");
    let sql = format!("SELECT * FROM read_yaml_auto('{}')", d.path("p/*/*/*.yaml"));
    let types = d.types(&sql);
    assert_eq!(
        types[1..],
        [
            ("day".to_owned(), "VARCHAR".to_owned()),
            ("n".to_owned(), "VARCHAR".to_owned())
        ],
        "pinned: partition values stay text"
    );
}

const THREAD: &str = "ref: 2026-01-31-001\nstatus: completed\ncreated: 2026-01-31T17:00:00-08:00\nhistory:\n  - action: created\n    at: 2026-01-31T17:00:00-08:00\n    by: agent\n  - action: completed\n    at: 2026-01-31T17:05:00-08:00\n    by: robot\n---\nfrom: agent\nMESS:\n  - v: 1.0.0\n  - request:\n      intent: x\n---\nfrom: exchange\nMESS:\n  - ack:\n      ref: 2026-01-31-001\n---\nfrom: robot\nMESS:\n  - status:\n      code: claimed\n---\nfrom: robot\nMESS:\n  - status:\n      code: completed\n  - response:\n      content: [done]\n";

#[test]
fn case_34_35_39_thread_files() {
    let d = db();
    let f = d.file("t.messe-af.yaml", THREAD);
    let src = format!("read_yaml_auto('{f}', multi_document := 'rows')");
    assert_eq!(d.one(&format!("SELECT count(*) FROM {src}")), s("5"));
    let types = d.types(&format!("SELECT history, MESS FROM {src}"));
    assert_eq!(
        types[0].1,
        "STRUCT(\"action\" VARCHAR, \"at\" TIMESTAMP WITH TIME ZONE, \"by\" VARCHAR)[]"
    );
    assert_eq!(
        types[1].1,
        "STRUCT(v VARCHAR, request STRUCT(intent VARCHAR), ack STRUCT(\"ref\" VARCHAR), status STRUCT(code VARCHAR), response STRUCT(\"content\" VARCHAR[]))[]"
    );
    assert_eq!(
        d.one(&format!(
            "SELECT history[2].action FROM {src} WHERE status = 'completed'"
        )),
        s("completed")
    );
    let list = format!("read_yaml_auto('{f}', multi_document := 'list')");
    assert_eq!(
        d.rows(&format!(
            "SELECT len(documents), documents[1].ref FROM {list}"
        )),
        vec![vec![s("5"), s("2026-01-31-001")]]
    );
    let idx: Vec<Option<String>> = d
        .rows(&format!(
            "SELECT document_index FROM read_yaml_auto('{f}', document_index := true, multi_document := 'rows')"
        ))
        .into_iter()
        .map(|mut r| r.remove(0))
        .collect();
    assert_eq!(idx, [s("0"), s("1"), s("2"), s("3"), s("4")]);
}

#[test]
fn case_36_38_count_and_no_sampling() {
    let d = db();
    for (i, docs) in [2, 4, 5, 2].iter().enumerate() {
        let text: Vec<String> = (0..*docs).map(|j| format!("n: {j}\n")).collect();
        d.file(&format!("c/{i}.yaml"), &text.join("---\n"));
    }
    assert_eq!(
        d.one(&format!(
            "SELECT count(*) FROM read_yaml_auto('{}')",
            d.path("c/*.yaml")
        )),
        s("13")
    );
    for i in 0..40 {
        let extra = if i == 33 { "k: late\n" } else { "" };
        d.file(&format!("many/{i:02}.yaml"), &format!("i: {i}\n{extra}"));
    }
    let sql = format!(
        "SELECT k FROM read_yaml_auto('{}') WHERE k IS NOT NULL",
        d.path("many/*.yaml")
    );
    assert_eq!(d.rows(&sql), vec![vec![s("late")]]);
}

#[test]
fn case_37_home_expansion() {
    let d = db();
    let home = std::env::var("HOME").unwrap();
    let dir = Path::new(&home).join(format!(".yaml_scan_test_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), "tilde: works\n").unwrap();
    let rel = format!("~/{}/a.yaml", dir.file_name().unwrap().to_string_lossy());
    let got = d.one(&format!("SELECT tilde FROM read_yaml_auto('{rel}')"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(got, s("works"));
}

#[test]
fn case_40_frontmatter() {
    let d = db();
    d.file(
        "f/a.yaml",
        "ref: A\nstatus: open\n---\nfrom: x\n---\nfrom: y\n",
    );
    d.file("f/b.yaml", "ref: B\nstatus: done\n---\nfrom: z\n");
    let rows = d.rows(&format!(
        "SELECT ref, status, \"from\" FROM read_yaml_auto('{}', multi_document := 'frontmatter')",
        d.path("f/*.yaml")
    ));
    assert_eq!(
        rows,
        vec![
            vec![s("A"), s("open"), s("x")],
            vec![s("A"), s("open"), s("y")],
            vec![s("B"), s("done"), s("z")]
        ]
    );
    // A message document with a key of the front matter keeps its own value there, and only
    // there.
    d.file(
        "f/c.yaml",
        "ref: C\nstatus: open\n---\nfrom: w\nref: inner\n",
    );
    let rows = d.rows(&format!(
        "SELECT ref, \"from\" FROM read_yaml_auto('{}', multi_document := 'frontmatter')",
        d.path("f/*.yaml")
    ));
    assert_eq!(
        rows,
        vec![
            vec![s("A"), s("x")],
            vec![s("A"), s("y")],
            vec![s("B"), s("z")],
            vec![s("inner"), s("w")]
        ]
    );
}

/// Sets the modification time of `path` an hour back, as for a file written long ago (fresh
/// files are never cached: see `cache::SETTLE`).
fn age(path: &str) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
}

/// Held by the tests that look into the process-wide cache (one of them empties it), so they
/// do not see each other's doings.
static CACHE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cache_tests() -> std::sync::MutexGuard<'static, ()> {
    CACHE_TESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn the_cache_always_matches_a_cold_read() {
    let _serial = cache_tests();
    let d = db();
    let one = d.file("h/state=received/1.yaml", "id: 1\nstatus: pending\n");
    let two = d.file("h/state=received/2.yaml", "id: 2\nstatus: pending\n");
    age(&one);
    age(&two);
    let q = format!(
        "SELECT id, status, state FROM read_yaml_auto('{}') ORDER BY id",
        d.path("h/state=*/*.yaml")
    );
    let cold = |d: &Db| {
        crate::clear_cache();
        d.rows(&q)
    };
    assert_eq!(d.rows(&q), cold(&d));
    let before = d.rows(&q);
    assert!(
        crate::cache::holds(Path::new(&one)),
        "an old file is cached"
    );
    assert_eq!(d.rows(&q), before, "warm read");
    d.file(
        "h/state=received/1.yaml",
        "id: 1\nstatus: pending\nnote: edited\n",
    );
    let warm = d.rows(&q);
    assert_eq!(warm, cold(&d), "edit");
    assert!(
        !crate::cache::holds(Path::new(&one)),
        "a file modified just now is not cached"
    );
    d.rows(&q);
    d.file("h/state=received/3.yaml", "id: 3\nstatus: pending\n");
    assert_eq!(d.rows(&q).len(), 3, "added");
    std::fs::create_dir_all(d.path("h/state=executing")).unwrap();
    std::fs::rename(
        d.path("h/state=received/2.yaml"),
        d.path("h/state=executing/2.yaml"),
    )
    .unwrap();
    let moved = d.rows(&q);
    assert_eq!(
        moved[1],
        vec![s("2"), s("pending"), s("executing")],
        "moved"
    );
    assert_eq!(moved, cold(&d));
    d.rows(&q);
    std::fs::remove_file(d.path("h/state=received/3.yaml")).unwrap();
    assert_eq!(d.rows(&q).len(), 2, "deleted");
    assert_eq!(d.rows(&q), cold(&d));
    // An edit in place that keeps both the size and the modification time: the change time
    // still tells.
    age(&one);
    d.rows(&q);
    assert!(crate::cache::holds(Path::new(&one)));
    let mtime = std::fs::metadata(&one).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    d.file(
        "h/state=received/1.yaml",
        "id: 1\nstatus: pendinG\nnote: edited\n",
    );
    std::fs::File::options()
        .write(true)
        .open(&one)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(d.rows(&q)[0][1], s("pendinG"));
    // A file replaced by a rename (as the exchange writes) with the same size and time.
    age(&one);
    d.rows(&q);
    let mtime = std::fs::metadata(&one).unwrap().modified().unwrap();
    let tmp = d.file("h/tmp.yaml.part", "id: 1\nstatus: PendinG\nnote: edited\n");
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::fs::rename(&tmp, &one).unwrap();
    assert_eq!(d.rows(&q)[0][1], s("PendinG"));
}

#[test]
fn a_confined_function_reads_only_under_its_root() {
    let d = db();
    let inside = d.file("home/a.yaml", "a: 1\n");
    let outside = d.file("other/b.yaml", "b: 2\n");
    let con = Connection::open_in_memory().unwrap();
    register_confined(&con, d.dir.path().join("home")).unwrap();
    let ok: i64 = con
        .query_row(
            &format!("SELECT count(*) FROM read_yaml_auto('{inside}')"),
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ok, 1);
    let e = con
        .prepare(&format!("SELECT * FROM read_yaml_auto('{outside}')"))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("is outside the exchange home"), "{e}");
    let refused = |pattern: &str| {
        con.prepare(&format!("SELECT * FROM read_yaml_auto('{pattern}')"))
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let root = d.dir.path().display().to_string();
    assert!(refused(&format!("{root}/home/../other/b.yaml")).contains("uses `..`"));
    // A glob that starts outside is refused before any folder is listed, so the error cannot
    // tell which files exist there.
    let e = refused(&format!("{root}/*/b.yaml"));
    assert!(e.contains("is outside") && !e.contains("other"), "{e}");
    assert!(refused("/**/*.yaml").contains("is outside"));
    // Hidden folders of the home (locks, indexes, mail) are not data.
    d.file("home/.mess/index.yaml", "secret: 1\n");
    assert!(refused(&format!("{root}/home/.mess/*.yaml")).contains("hidden folder"));
    // A link inside the home that leads out is refused without naming its target.
    std::os::unix::fs::symlink(d.dir.path().join("other"), d.dir.path().join("home/link")).unwrap();
    let e = refused(&format!("{root}/home/link/*.yaml"));
    assert!(
        e.contains("outside the exchange home") && !e.contains("b.yaml"),
        "{e}"
    );
    // Relative patterns are read from the home; `**` stays inside it.
    d.file("home/state=received/c.yaml", "c: 3\n");
    let count = |sql: &str| -> i64 { con.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM read_yaml_auto('state=*/*.yaml')"),
        1
    );
    assert_eq!(
        count(&format!(
            "SELECT count(*) FROM read_yaml_auto('{root}/home/**/*.yaml')"
        )),
        2
    );
}

#[test]
fn allow_empty_turns_missing_files_into_zero_rows() {
    let d = db();
    let sql = format!(
        "SELECT * FROM read_yaml_auto('{}', allow_empty := true, filename := true)",
        d.path("none/*.yaml")
    );
    assert!(d.rows(&sql).is_empty());
    assert_eq!(
        d.types(&sql),
        vec![("filename".to_owned(), "VARCHAR".to_owned())]
    );
    let f = d.file("one.yaml", "a: 1\n");
    let both = format!(
        "SELECT a FROM read_yaml_auto(['{f}', '{}'], allow_empty := true)",
        d.path("none/*.yaml")
    );
    assert_eq!(d.rows(&both), vec![vec![s("1")]]);
}

#[test]
fn very_wide_mappings_become_json_text_and_stay_linear() {
    let d = db();
    let mut text = String::from("id: 1\ncontent:\n");
    for i in 0..200_000 {
        text.push_str(&format!("  k{i}: {i}\n"));
    }
    let f = d.file("wide.yaml", &text);
    let sql =
        format!("SELECT id, json_extract(content::JSON, '$.k199999') FROM read_yaml_auto('{f}')");
    assert_eq!(d.rows(&sql), vec![vec![s("1"), s("199999")]]);
    let mut top = String::new();
    for i in 0..1001 {
        top.push_str(&format!("k{i}: {i}\n"));
    }
    let g = d.file("top.yaml", &top);
    let e = d.error(&format!("SELECT * FROM read_yaml_auto('{g}')"));
    assert!(e.contains("more than 1000 distinct top-level keys"), "{e}");
}

#[test]
fn names_that_differ_only_by_case_are_kept_apart() {
    let d = db();
    d.file(
        "n/state=a/t.yaml",
        "ID: 1\nid: 2\nc: {ID: 3, id: 4}\nfilename: mine\nState: lost\n",
    );
    let sql = format!(
        "SELECT * FROM read_yaml_auto('{}', filename := true)",
        d.path("n/state=*/t.yaml")
    );
    let names: Vec<String> = d.types(&sql).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["ID", "id_1", "c", "filename_1", "state", "filename"]
    );
    let row = &d.rows(&format!(
        "SELECT \"ID\", id_1, c.id_1, filename_1, state FROM ({sql})"
    ))[0];
    assert_eq!(row, &vec![s("1"), s("2"), s("4"), s("mine"), s("a")]);
}

#[test]
fn thread_files_give_one_row_per_thread_with_their_messages() {
    let d = db();
    d.file("h/state=finished/2026-01-31-001.messe-af.yaml", THREAD);
    // An unclaimed thread written by another tool, with the format's other suffix.
    d.file(
        "h/state=received/2026-01-31-002.messe-af",
        "ref: 2026-01-31-002\nstatus: pending\nintent: water the plants\n---\nfrom: agent\nMESS:\n  - request:\n      intent: water the plants\n",
    );
    let all = format!(
        "read_yaml_auto(['{0}', '{1}'])",
        d.path("h/state=*/*.messe-af.yaml"),
        d.path("h/state=*/*.messe-af")
    );
    assert_eq!(
        d.rows(&format!(
            "SELECT ref, status, state, executor, json_array_length(messages) FROM {all} ORDER BY ref"
        )),
        vec![
            vec![
                s("2026-01-31-001"),
                s("completed"),
                s("finished"),
                None,
                s("4")
            ],
            vec![
                s("2026-01-31-002"),
                s("pending"),
                s("received"),
                None,
                s("1")
            ],
        ]
    );
    // The reference design's message query (docs/spec-conformance.md), with DuckDB's JSON paths:
    // `messages` is JSON.
    assert_eq!(
        d.rows(&format!(
            "SELECT json_extract(messages, '$[*].from')::VARCHAR, json_extract(messages, '$[#-1].MESS[0].status.code')::VARCHAR FROM {all} ORDER BY ref"
        )),
        vec![
            vec![s(r#"["agent", "exchange", "robot", "robot"]"#), s(r#""completed""#)],
            vec![s(r#"["agent"]"#), None],
        ]
    );
    // Every MESSE-AF envelope field is a column, typed as the format writes it.
    let types = d.types(&format!("SELECT * FROM {all}"));
    for (name, ty) in [
        ("ref", "VARCHAR"),
        ("executor", "VARCHAR"),
        ("updated", "TIMESTAMP WITH TIME ZONE"),
        ("priority", "VARCHAR"),
        ("state", "VARCHAR"),
        ("messages", "VARCHAR"),
    ] {
        assert!(
            types.contains(&(name.to_owned(), ty.to_owned())),
            "{name}: {types:?}"
        );
    }
    // Asked for, the documents are still rows; other YAML files keep one row per document.
    let f = d.path("h/state=finished/2026-01-31-001.messe-af.yaml");
    assert_eq!(
        d.one(&format!(
            "SELECT count(*) FROM read_yaml_auto('{f}', multi_document := 'rows')"
        )),
        s("5")
    );
    let other = d.file("plain.yaml", "a: 1\n---\na: 2\n");
    assert_eq!(
        d.one(&format!("SELECT count(*) FROM read_yaml_auto('{other}')")),
        s("2")
    );
    assert_eq!(
        d.one(&format!(
            "SELECT count(*) FROM read_yaml_auto(['{other}', '{f}'])"
        )),
        s("7")
    );
    // Asking for document indexes asks for documents.
    assert_eq!(
        d.one(&format!(
            "SELECT max(document_index) FROM read_yaml_auto('{f}', document_index := true)"
        )),
        s("4")
    );
}

#[test]
fn a_glob_over_an_empty_folder_answers_zero_rows() {
    let d = db();
    std::fs::create_dir_all(d.path("h/state=canceled")).unwrap();
    let empty = d.path("h/state=canceled/*.messe-af.yaml");
    let sql = format!(
        "SELECT ref, intent, status, updated, state FROM read_yaml_auto('{empty}') WHERE status = 'failed'"
    );
    assert!(d.rows(&sql).is_empty());
    let types = d.types(&format!("SELECT * FROM read_yaml_auto('{empty}')"));
    let names: Vec<&str> = types.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "ref",
            "client_id",
            "requestor",
            "executor",
            "status",
            "created",
            "updated",
            "expires",
            "intent",
            "priority",
            "history",
            "messages",
            "state"
        ]
    );
    // A folder that does not exist either, with the spec's hive_partitioning=true.
    let missing = d.path("h/state=*/*.messe-af.yaml");
    assert_eq!(
        d.one(&format!("SELECT count(*) FROM read_yaml_auto('{missing}', hive_partitioning=true) WHERE state = 'executing'")),
        s("0")
    );
    // Other files: zero rows, with `filename` as the one column.
    let yaml = d.path("h/none/*.yaml");
    assert_eq!(
        d.types(&format!("SELECT * FROM read_yaml_auto('{yaml}')")),
        vec![("filename".to_owned(), "VARCHAR".to_owned())]
    );
    // A path without wildcards names one file: a missing one is still an error.
    let one = d.path("h/state=canceled/2026-01-31-001.messe-af.yaml");
    let e = d.error(&format!("SELECT * FROM read_yaml_auto('{one}')"));
    assert!(e.contains("No files found that match the pattern"), "{e}");
}

#[test]
fn yaml_to_json_reads_documents_and_turns_bad_text_into_null() {
    use crate::yaml_to_json;
    assert_eq!(
        yaml_to_json("a: [1, 2]\nb: x\n").as_deref(),
        Some(r#"{"a":[1,2],"b":"x"}"#)
    );
    // Several documents are a list; empty ones are left out.
    assert_eq!(
        yaml_to_json("x: 1\n---\n---\nx: 2\n").as_deref(),
        Some(r#"[{"x":1},{"x":2}]"#)
    );
    // JSON is YAML; YAML 1.2 keeps `yes` text; a timestamp stays the text written.
    assert_eq!(yaml_to_json(r#"{"a": 3}"#).as_deref(), Some(r#"{"a":3}"#));
    assert_eq!(yaml_to_json("yes").as_deref(), Some(r#""yes""#));
    assert_eq!(
        yaml_to_json("at: 2026-01-31T12:00:00Z").as_deref(),
        Some(r#"{"at":"2026-01-31T12:00:00Z"}"#)
    );
    for bad in ["a: [unclosed", "", "# only a comment\n", "a: *nowhere"] {
        assert_eq!(yaml_to_json(bad), None, "{bad:?}");
    }
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(yaml_to_json(&deep), None, "nesting past the parser's limit");

    let d = db();
    crate::register_scalars(&d.con).unwrap();
    assert_eq!(
        d.rows(
            "SELECT yaml_to_json(t) FROM (VALUES ('k: v'), (NULL), ('k: [oops')) AS v(t) ORDER BY t NULLS FIRST"
        ),
        [vec![None], vec![None], vec![Some(r#"{"k":"v"}"#.to_owned())]]
    );
}

#[test]
fn a_packed_file_unpacks_to_the_same_documents() {
    let text = "a: ~\nb: true\nc: false\nd: -42\ne: 2.5\nf: \"tëxt: with \\\"quotes\\\"\"\ng: 2026-11-28\nh: 2026-11-28T07:34:40.509Z\ni: 2026-11-28 07:34:40\nj: [1, [2, {k: v}], {}]\nl: {m: {n: [x]}}\n184467440737095516150: big key\n---\n# only a comment\n---\n[unclosed\n---\n- {x: 1}\n- 7\n";
    let parsed = crate::parse::parse_file(text, false);
    let unpacked = crate::packed::Packed::pack(&parsed).unpack();
    assert_eq!(format!("{:?}", unpacked.docs), format!("{:?}", parsed.docs));
    assert!(unpacked.complete);
    let first = crate::parse::parse_file(text, true);
    let packed = crate::packed::Packed::pack(&first);
    assert!(
        !packed.unpack().complete,
        "an envelope-only parse stays one"
    );
    assert_eq!(
        crate::packed::Packed::pack(&parsed).broken.map(|(i, _)| i),
        Some(2),
        "the first broken document is remembered"
    );
}

/// A home of thread files read with a budget of `budget` bytes on this thread.
fn with_budget<T>(budget: usize, f: impl FnOnce() -> T) -> T {
    crate::cache::TEST_BUDGET.with(|b| b.set(Some(budget)));
    let out = f();
    crate::cache::TEST_BUDGET.with(|b| b.set(None));
    out
}

#[test]
fn past_its_budget_the_cache_keeps_nothing_more_and_every_answer_stays_the_same() {
    let _serial = cache_tests();
    let d = db();
    let mut files = Vec::new();
    for i in 0..40 {
        let state = ["received", "executing", "finished"][i % 3];
        let f = d.file(
            &format!("h/state={state}/2026-11-28-{i:03}.messe-af.yaml"),
            &format!(
                "ref: 2026-11-28-{i:03}\nstatus: pending\nhistory:\n  - action: created\n    at: 2026-11-28T07:00:00Z\n    by: agent-{}\n---\nfrom: agent\nMESS:\n  - request:\n      intent: thing {i}\n---\nfrom: exchange\nMESS:\n  - ack:\n      ref: 2026-11-28-{i:03}\n",
                i % 4
            ),
        );
        age(&f);
        files.push(f);
    }
    let pattern = d.path("h/state=*/*.messe-af.yaml");
    let queries = [
        format!(
            "SELECT ref, status, state, history, messages FROM read_yaml_auto('{pattern}') ORDER BY ref"
        ),
        format!(
            "SELECT ref, \"from\", document_index, \"MESS\" FROM read_yaml_auto('{pattern}', multi_document := 'frontmatter', document_index := true) ORDER BY ref, document_index"
        ),
        format!("SELECT * FROM read_yaml_auto('{pattern}', multi_document := 'rows') ORDER BY ALL"),
        format!(
            "SELECT state, count(*) FROM read_yaml_auto('{pattern}') GROUP BY state ORDER BY state"
        ),
    ];
    // Each round starts cold for these files (a new modification time), without emptying the
    // cache the tests beside this one use.
    let answers = |budget: usize| {
        for f in &files {
            age(f);
        }
        with_budget(budget, || {
            queries
                .iter()
                .map(|q| (d.rows(q), d.rows(q)))
                .collect::<Vec<_>>()
        })
    };
    let unbounded = answers(usize::MAX);
    assert!(files.iter().all(|f| crate::cache::holds(Path::new(f))));
    let none = answers(0);
    assert_eq!(none, unbounded, "with no budget every file is read again");
    assert!(files.iter().all(|f| !crate::cache::holds(Path::new(f))));
    let some = answers(8 * 1024);
    assert_eq!(some, unbounded, "with a budget for a few files");
    let held = files
        .iter()
        .filter(|f| crate::cache::holds(Path::new(f)))
        .count();
    assert!(
        held > 0 && held < files.len(),
        "{held} of {} files kept",
        files.len()
    );
    for (cold, warm) in &unbounded {
        assert_eq!(cold, warm);
        assert!(!cold.is_empty());
    }
}
