//! Tier 1: several nodes (homes that mirror one PostgreSQL database) create, claim and read
//! threads with exactly-once results, thread history is append-only in the database itself,
//! every node's mirror holds the database's bytes, and a home moves into a database and back
//! without a byte changed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::Home;
use crate::support::postgres::Postgres;
use crate::support::server::Server;

const EXECUTORS: usize = 6;

fn config() -> String {
    let mut c = String::from("agent_id: claude-agent\nexecutors:\n");
    for i in 0..EXECUTORS {
        c.push_str(&format!("  robot-{i}:\n    capabilities: [vacuum-floor]\n"));
    }
    c
}

/// A database with the schema, and `n` node homes over it.
fn cluster(pg: &Postgres, n: usize) -> Vec<Home> {
    let homes: Vec<Home> = (0..n)
        .map(|_| Home::on_database(&config(), &pg.url()))
        .collect();
    homes[0].ok(&["db", "init"]);
    homes
}

/// `POST /mess` of one request with client id `id` through `server`; returns its ref.
fn request(server: &Server, key: &str, id: &str, intent: &str, requires: Option<&str>) -> String {
    let requires = requires.map_or(String::new(), |c| format!("      requires: [{c}]\n"));
    let (status, body) = server.post_yaml(
        key,
        &format!("MESS:\n  - request:\n      id: {id}\n      intent: {intent}\n{requires}"),
    );
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["MESS"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|p| p["ack"]["ref"].as_str())
        .unwrap_or_else(|| panic!("no ack in {body}"))
        .to_owned()
}

/// Every thread file under `root` (state folders and archive), by path relative to it.
fn thread_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".messe-af.yaml") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn db_commands_manage_the_schema() {
    let pg = Postgres::start();
    let home = Home::on_database(&config(), &pg.url());
    let err = home.fails(&["status"], 1);
    assert!(err.contains("mess db init"), "{err}");
    let err = home.fails(&["db", "status"], 1);
    assert!(
        err.contains("schema version 0") || err.contains("behind"),
        "{err}"
    );
    let out = home.ok(&["db", "init"]);
    assert!(
        out.contains("applied migration 1") && out.contains("applied migration 2"),
        "{out}"
    );
    let out = home.ok(&["db", "migrate"]);
    assert!(out.contains("nothing to do"), "{out}");
    let out = home.ok(&["db", "status"]);
    assert!(
        out.contains("schema version 6 (this mess needs 6); 0 thread(s)"),
        "{out}"
    );
    // An agent key's callback is kept with it, for every node.
    home.ok(&[
        "token",
        "agent",
        "a",
        "--callback",
        "https://agent.example.org/cb",
    ]);
    let row = pg
        .client()
        .query_one("SELECT principal, callback FROM mess_keys", &[])
        .unwrap();
    let (principal, callback): (String, Option<String>) = (row.get(0), row.get(1));
    assert_eq!(
        (principal.as_str(), callback.as_deref()),
        ("a", Some("https://agent.example.org/cb"))
    );
    // Shells are kept in the database, append-only like thread history.
    home.ok(&["shells", "grant", "a", "5"]);
    let err = pg
        .client()
        .execute("UPDATE mess_ledger SET shells = 500", &[])
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("the shells ledger is append-only"),
        "{err:?}"
    );
    // A database one migration behind (as an older mess left it) is refused until migrated,
    // and migrating applies only what it lacks.
    pg.client()
        .batch_execute(
            "DROP TABLE mess_mail, mess_mail_reads; DROP SEQUENCE mess_mail_version; \
             DELETE FROM mess_schema WHERE version = 2",
        )
        .unwrap();
    let err = home.fails(&["status"], 1);
    assert!(err.contains("mess db migrate"), "{err}");
    let out = home.ok(&["db", "migrate"]);
    assert!(
        out.contains("applied migration 2") && !out.contains("applied migration 1"),
        "{out}"
    );
    home.ok(&["--as", "a", "mail", "send", "--to", "b", "--body", "hi"]);
    let plain = Home::with_config(&config());
    let err = plain.fails(&["db", "status"], 2);
    assert!(err.contains("MESS_DATABASE_URL"), "{err}");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn shells_are_one_ledger_for_every_node_and_never_overdrawn() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 2);
    homes[0].ok(&["shells", "grant", "claude-agent", "150"]);
    assert_eq!(
        homes[1].ok(&["shells", "balance", "claude-agent"]).trim(),
        "150"
    );
    let servers: Vec<Server> = homes.iter().map(Server::start).collect();
    let agent = homes[0].token("agent", "claude-agent");
    // Twenty requests of 10 shells each at once over both nodes: fifteen are held, the rest
    // refused by name, and the account never goes below zero.
    let answers: Vec<(u16, String)> = std::thread::scope(|s| {
        let jobs: Vec<_> = (0..20)
            .map(|i| {
                let (server, agent) = (&servers[i % 2], &agent);
                s.spawn(move || {
                    server.post_yaml(
                        agent,
                        &format!("MESS:\n  - request:\n      id: paid-{i}\n      intent: vacuum {i}\n      requires: [vacuum-floor]\n      compensation: {{shells: 10}}\n"),
                    )
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let held = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(held, 15, "{answers:?}");
    assert!(
        answers
            .iter()
            .filter(|(status, _)| *status != 200)
            .all(|(status, body)| *status == 422 && body.contains("holds")),
        "{answers:?}"
    );
    assert_eq!(
        homes[1].ok(&["shells", "balance", "claude-agent"]).trim(),
        "0"
    );
    // Work paid on one node is paid once, whichever node settles it.
    let (_, body) = answers.iter().find(|(status, _)| *status == 200).unwrap();
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let r = v["MESS"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|p| p["ack"]["ref"].as_str())
        .unwrap()
        .to_owned();
    homes[1].ok(&["claim", &r, "--as", "robot-0"]);
    homes[0].ok(&["complete", &r, "--as", "robot-0", "--text", "done"]);
    assert_eq!(homes[1].ok(&["shells", "balance", "robot-0"]).trim(), "10");
    // Each node's mirror holds the same ledger files, read by the views.
    for home in &homes {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let counts = home.ok(&[
                "query",
                "SELECT (SELECT count(*) FROM ledger) AS movements, (SELECT balance FROM balances WHERE account = 'robot-0') AS robot",
                "--format",
                "csv",
            ]);
            if counts.trim() == "movements,robot\n17,10" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the mirror never caught up: {counts}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn creates_and_claims_across_nodes_are_exactly_once() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 3);
    // 24 creates over three nodes, every client id sent twice from different nodes.
    let children: Vec<_> = (0..24)
        .map(|i| {
            homes[i % 3]
                .command(&[
                    "request",
                    &format!("task {}", i % 12),
                    "--id",
                    &format!("task-{}", i % 12),
                    "--requires",
                    "vacuum-floor",
                    "--as",
                    "claude-agent",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut by_id: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        by_id
            .entry(i % 12)
            .or_default()
            .push(String::from_utf8(out.stdout).unwrap().trim().to_owned());
    }
    for (id, refs) in &by_id {
        assert!(
            refs.iter().all(|r| r == &refs[0]),
            "client id {id}: {refs:?}"
        );
    }
    let mut refs: Vec<String> = by_id.values().map(|r| r[0].clone()).collect();
    refs.sort();
    refs.dedup();
    assert_eq!(refs.len(), 12, "{refs:?}");
    let serials: Vec<u64> = refs.iter().map(|r| r[11..].parse().unwrap()).collect();
    assert_eq!(
        serials,
        (1..=12).collect::<Vec<_>>(),
        "distinct refs, no gaps"
    );
    // Every executor claims every thread from some node: one winner per thread.
    for r in refs.iter().take(4) {
        let children: Vec<_> = (0..EXECUTORS)
            .map(|i| {
                homes[i % 3]
                    .command(&["claim", r, "--as", &format!("robot-{i}")])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outcomes: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let winners = outcomes.iter().filter(|o| o.status.success()).count();
        assert_eq!(winners, 1, "{r}: {winners} winners");
        for loser in outcomes.iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&loser.stderr);
            assert!(err.contains("already claimed"), "{err}");
        }
        let show = homes[2].ok(&["show", r]);
        assert_eq!(show.matches("code: claimed").count(), 1, "{show}");
    }
    let status = homes[1].ok(&["status", "--all"]);
    assert_eq!(status.matches("claimed").count(), 4, "{status}");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn thread_history_is_append_only_in_the_database() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 1);
    let r = homes[0].ok(&["request", "photo of the fridge", "--as", "claude-agent"]);
    let r = r.trim();
    let mut client = pg.client();
    let count = |client: &mut ::postgres::Client| -> i64 {
        client
            .query_one("SELECT count(*) FROM mess_messages WHERE ref = $1", &[&r])
            .unwrap()
            .get(0)
    };
    let before = count(&mut client);
    assert!(before >= 1);
    for statement in [
        "UPDATE mess_messages SET doc = 'x' WHERE ref = $1",
        "DELETE FROM mess_messages WHERE ref = $1",
    ] {
        let err = client.execute(statement, &[&r]).unwrap_err();
        assert!(
            err.to_string().contains("append-only") || format!("{err:?}").contains("append-only"),
            "{statement}: {err:?}"
        );
    }
    let err = client
        .batch_execute("TRUNCATE mess_messages CASCADE")
        .unwrap_err();
    assert!(format!("{err:?}").contains("append-only"), "{err:?}");
    assert_eq!(count(&mut client), before);
    // The exchange itself still appends.
    homes[0].ok(&["cancel", r, "--as", "claude-agent"]);
    assert_eq!(count(&mut client), before + 1);
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn a_home_moves_into_a_database_and_back_unchanged() {
    let pg = Postgres::start();
    let source = Home::with_config(&config());
    source.ok(&["demo", "seed", "--threads", "300", "--days", "60"]);
    source.ok(&["archive", "--older-than", "20d"]);
    source.ok(&["fsck"]);
    for (to, kind) in [
        ("worker", "task"),
        ("worker", "task"),
        ("__broadcast", "announcement"),
    ] {
        source.ok(&[
            "--as", "orch", "mail", "send", "--to", to, "--type", kind, "--body", "b",
        ]);
    }
    let first = source.ok(&["--as", "worker", "mail", "list"]);
    let first = first.split_whitespace().next().unwrap().to_owned();
    source.ok(&["--as", "worker", "mail", "mark-read", &first]);
    let mail_before = mail_files(source.path());
    assert_eq!(mail_before.len(), 3, "{:?}", mail_before.keys());
    // What else moves with the threads: keys, a self-registered executor, shells in escrow.
    let key = source
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    std::fs::create_dir_all(source.path().join("executors")).unwrap();
    std::fs::write(
        source.path().join("executors/scout.yaml"),
        "id: scout\ncapabilities: [take-photo]\n",
    )
    .unwrap();
    source.ok(&["shells", "grant", "claude-agent", "50"]);
    let paid = source.with_stdin(
        &["send", "-", "--as", "claude-agent"],
        "MESS:\n  - request: {intent: vacuum, requires: [vacuum-floor], compensation: {shells: 20}}\n",
    );
    assert!(paid.status.success());
    let node = Home::on_database(&config(), &pg.url());
    node.ok(&["db", "init"]);
    let out = node.ok(&["import", &source.path().to_string_lossy()]);
    assert!(out.contains("in one transaction"), "{out}");
    assert!(
        out.contains("1 key(s), 1 registration(s) and routing rule(s), 2 ledger movement(s)"),
        "{out}"
    );
    assert_eq!(node.ok(&["shells", "balance", "claude-agent"]).trim(), "30");
    let registry: i64 = pg
        .client()
        .query_one(
            "SELECT count(*) FROM mess_registry WHERE name = 'executors/scout'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(registry, 1);
    let server = Server::start(&node);
    let (code, _) = server.get("/threads", &key);
    assert_eq!(code, 200, "the home's key works on the node");
    drop(server);
    // Importing again changes nothing.
    let again = node.ok(&["import", &source.path().to_string_lossy()]);
    assert!(again.contains("imported 0 thread(s)"), "{again}");
    assert!(
        again.contains("0 key(s)") && again.contains("0 ledger movement(s)"),
        "{again}"
    );
    let target = tempfile::TempDir::new().unwrap();
    let exported = target.path().join("home");
    node.ok(&["export", &exported.to_string_lossy()]);
    for file in ["executors/scout.yaml", ".mess/keys.yaml"] {
        assert!(exported.join(file).exists(), "{file} not exported");
    }
    let ledger = |home: &Path| -> Vec<String> {
        let mut files: Vec<String> = std::fs::read_dir(home.join("ledger"))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        files.sort();
        files
    };
    assert_eq!(
        ledger(&exported),
        ledger(source.path()),
        "the ledger changed on the way"
    );
    let before = thread_files(source.path());
    let after = thread_files(&exported);
    assert!(before.len() >= 300, "{}", before.len());
    assert!(before.keys().any(|k| k.starts_with("archive/")));
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (path, bytes) in &before {
        assert!(after[path] == *bytes, "{path} changed on the way");
    }
    assert!(
        mail_files(&exported) == mail_before,
        "agent mail changed on the way"
    );
    // The index came along: the exported home answers as the source did.
    let copy = Home::with_config(&config());
    crate::support::copy_dir(&exported, copy.path());
    assert_eq!(
        copy.ok(&["status", "--all", "--as", "claude-agent"]),
        source.ok(&["status", "--all", "--as", "claude-agent"])
    );
    copy.ok(&["fsck"]);
    // And the database answers as the source did too.
    assert_eq!(
        node.ok(&["status", "--all", "--as", "claude-agent"]),
        source.ok(&["status", "--all", "--as", "claude-agent"])
    );
    // Export refuses a home that has threads.
    let err = node.fails(&["export", &source.path().to_string_lossy()], 1);
    assert!(err.contains("already holds threads"), "{err}");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn a_hostile_export_is_refused_whole_and_writes_nothing() {
    let pg = Postgres::start();
    let node = Home::on_database(&config(), &pg.url());
    node.ok(&["db", "init"]);
    // A good home, then one lie at a time in a copy of it.
    let good = Home::with_config(&config());
    good.ok(&["request", "vacuum the hall", "--requires", "vacuum-floor"]);
    good.ok(&["token", "agent", "claude-agent"]);
    good.ok(&["shells", "grant", "claude-agent", "10"]);
    let hash = "ab".repeat(32);
    let key = |principal: &str, role: &str| {
        format!(
            "- hash: {hash}\n  principal: '{principal}'\n  role: {role}\n  created: 2026-11-27T00:00:00Z\n"
        )
    };
    let movement = |id: &str, from: &str, to: &str, shells: i64, kind: &str| {
        format!(
            "---\nid: {id}\nat: 2026-11-27T12:00:00Z\nfrom: '{from}'\nto: '{to}'\nshells: {shells}\nkind: {kind}\n"
        )
    };
    let lies: Vec<(&str, &str, String, &str)> = vec![
        (".mess/keys.yaml", "append", key("operator", "agent"), "ledger"),
        (".mess/keys.yaml", "append", key("escrow:2026-11-27-001", "agent"), "ledger"),
        (".mess/keys.yaml", "append", key("../../etc", "executor"), "not a usable"),
        // An operator key from another home is not carried over; a made-up role is refused.
        (".mess/keys.yaml", "append", key("mallory", "operator"), "operator keys are not imported"),
        (".mess/keys.yaml", "append", key("mallory", "root"), "role"),
        (
            "ledger/2026-11.yaml",
            "append",
            movement("mint-1", "claude-agent", "mallory", 1000, "release"),
            "not a movement the exchange records",
        ),
        (
            "ledger/2026-11.yaml",
            "append",
            movement("escrow-x", "claude-agent", "escrow:2026-11-27-009", 11, "escrow"),
            "holds 10 shells, not the 11",
        ),
        (
            "executors/sneaky.yaml",
            "write",
            "id: sneaky\ncapabilities: [vacuum-floor]\nexchange: {url: 'http://127.0.0.1:9', api_key: k}\nregistered_by: mallory\nregistered_with: key\n".to_owned(),
            "forwarding",
        ),
        (
            "executors/hooked.yaml",
            "write",
            "id: hooked\ncapabilities: [vacuum-floor]\nnotify: {webhook: 'http://127.0.0.1:9/hook'}\nregistered_by: mallory\nregistered_with: key\n".to_owned(),
            "webhook",
        ),
    ];
    for (file, how, text, said) in lies {
        let source = Home::with_config(&config());
        crate::support::copy_dir(good.path(), source.path());
        let path = source.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if how == "append" {
            let mut all = std::fs::read_to_string(&path).unwrap_or_default();
            all.push_str(&text);
            std::fs::write(&path, all).unwrap();
        } else {
            std::fs::write(&path, text).unwrap();
        }
        let err = node.fails(&["import", &source.path().to_string_lossy()], 1);
        assert!(err.contains(said), "{file}: {err}");
        assert!(
            err.contains("nothing was imported") && err.contains("one transaction"),
            "{err}"
        );
        let mut client = pg.client();
        for table in ["mess_threads", "mess_keys", "mess_ledger", "mess_registry"] {
            let n: i64 = client
                .query_one(&format!("SELECT count(*) FROM {table}"), &[])
                .unwrap()
                .get(0);
            assert_eq!(
                n, 0,
                "{file}: {table} holds {n} row(s) after a refused import"
            );
        }
    }
    // The good home goes in whole.
    let out = node.ok(&["import", &good.path().to_string_lossy()]);
    assert!(out.contains("imported 1 thread(s)"), "{out}");
    assert_eq!(node.ok(&["shells", "balance", "claude-agent"]).trim(), "10");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn a_database_error_names_postgresqls_message_and_sqlstate() {
    let pg = Postgres::start();
    let home = Home::on_database(&config(), &pg.url().replace("/postgres", "/no_such_db"));
    let err = home.fails(&["status"], 1);
    assert!(
        err.contains("SQLSTATE 3D000") && err.contains("\"no_such_db\" does not exist"),
        "{err}"
    );
    assert!(!err.contains("db error"), "{err}");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn every_node_mirrors_every_write() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 2);
    let first = homes[1].ok(&["request", "before the node starts", "--as", "claude-agent"]);
    let server = Server::start(&homes[0]);
    let r = homes[1].ok(&["request", "after it started", "--as", "claude-agent"]);
    homes[1].ok(&["claim", r.trim(), "--as", "robot-0"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mirror = thread_files(homes[0].path());
        let want: BTreeMap<String, Vec<u8>> = [first.trim(), r.trim()]
            .iter()
            .map(|t| {
                let text = homes[1].ok(&["show", t]);
                let state = if *t == r.trim() {
                    "executing"
                } else {
                    "received"
                };
                (
                    format!("state={state}/{t}.messe-af.yaml"),
                    text.into_bytes(),
                )
            })
            .collect();
        if mirror == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the mirror did not follow: {:?}",
            mirror.keys().collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    homes[0].ok(&["fsck"]);
    // The other home mirrors nothing (no node serves it): fsck says so and repairs it.
    let err = homes[1].fails(&["fsck"], 1);
    assert!(err.contains("problem(s) remain"), "{err}");
    homes[1].ok(&["fsck", "--repair"]);
    homes[1].ok(&["fsck"]);
    assert_eq!(thread_files(homes[1].path()), thread_files(homes[0].path()));
    drop(server);
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn three_servers_share_keys_claims_and_events() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 3);
    // Keys made on one node work on every node: they live in the database.
    let agent = homes[0].token("agent", "claude-agent");
    let robots: Vec<String> = (0..EXECUTORS)
        .map(|i| homes[i % 3].token("executor", &format!("robot-{i}")))
        .collect();
    let servers: Vec<Server> = homes.iter().map(Server::start).collect();
    let refs: Vec<String> = (0..6)
        .map(|i| {
            let (id, intent) = (format!("job-{i}"), format!("vacuum room {i}"));
            request(&servers[i % 3], &agent, &id, &intent, Some("vacuum-floor"))
        })
        .collect();
    // Every robot claims every thread through a different node, all at once.
    let results: Vec<(String, u16)> = std::thread::scope(|s| {
        let handles: Vec<_> = refs
            .iter()
            .flat_map(|r| robots.iter().enumerate().map(move |(i, key)| (r, i, key)))
            .map(|(r, i, key)| {
                let server = &servers[(i + r.len()) % 3];
                s.spawn(move || {
                    let claim = format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n");
                    (r.clone(), server.post_yaml(key, &claim).0)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &refs {
        let won = results.iter().filter(|(t, s)| t == r && *s == 200).count();
        let lost = results.iter().filter(|(t, s)| t == r && *s == 409).count();
        assert_eq!((won, lost), (1, EXECUTORS - 1), "{r}: {results:?}");
    }
    // Every node reads every thread, byte for byte the same, and its mirror follows.
    for r in &refs {
        let texts: Vec<String> = servers
            .iter()
            .map(|s| {
                let (status, body) = s.get(&format!("/threads/{r}"), &agent);
                assert_eq!(status, 200, "{body}");
                body
            })
            .collect();
        assert!(texts.iter().all(|t| t == &texts[0]), "{r}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(thread_files(homes[0].path()) == thread_files(homes[1].path())
        && thread_files(homes[1].path()) == thread_files(homes[2].path())
        && thread_files(homes[0].path()).len() == refs.len())
    {
        assert!(Instant::now() < deadline, "the mirrors did not converge");
        std::thread::sleep(Duration::from_millis(50));
    }
    for home in &homes {
        home.ok(&["fsck"]);
    }
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn a_node_answers_503_while_the_database_is_down_and_recovers() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 1);
    let agent = homes[0].token("agent", "claude-agent");
    let server = Server::start(&homes[0]);
    let request = |id: &str| {
        server.post_yaml(
            &agent,
            &format!("MESS:\n  - request:\n      id: {id}\n      intent: photo of the shelf\n"),
        )
    };
    assert_eq!(request("before").0, 200);
    assert_eq!(server.send("GET", "/healthz", &[], b"").0, 200);
    pg.halt();
    let started = Instant::now();
    let (status, body) = request("during");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("unavailable"), "{body}");
    assert!(
        !body.contains("127.0.0.1"),
        "the driver's words stay in the log: {body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.send("GET", "/healthz", &[], b"").0, 503);
    pg.resume();
    // The node reconnects by itself; the retried request makes exactly one thread.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = request("during");
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery: {status} {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(request("during").0, 200);
    assert_eq!(server.send("GET", "/healthz", &[], b"").0, 200);
    let mut client = pg.client();
    let threads: i64 = client
        .query_one("SELECT count(*) FROM mess_threads", &[])
        .unwrap()
        .get(0);
    assert_eq!(threads, 2, "one thread per client id, nothing half-written");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !homes[0].run(&["fsck"]).status.success() {
        assert!(Instant::now() < deadline, "the mirror did not catch up");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A JSON-RPC POST to `/mcp` of `port`; returns the status, the head (lower-case names) and
/// the body.
pub(crate) fn mcp_post(
    port: u16,
    key: &str,
    session: Option<&str>,
    body: &str,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(id) = session {
        head.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn an_mcp_session_opened_on_one_node_continues_on_another() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 2);
    let agent = homes[0].token("agent", "claude-agent");
    let other = homes[0].token("agent", "other-agent");
    let servers: Vec<Server> = homes.iter().map(Server::start).collect();
    let (status, head, body) = mcp_post(
        servers[0].port,
        &agent,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cluster-test","version":"1"}}}"#,
    );
    assert_eq!(status, 200, "{head}\n{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no session id in {head}"))
        .to_owned();
    let (status, _, body) = mcp_post(
        servers[0].port,
        &agent,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!(status == 202 || status == 200, "{status} {body}");
    // The next call lands on the other node, which has never seen the session.
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (status, head, body) = mcp_post(servers[1].port, &agent, Some(&session), list);
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(body.contains("mess_request"), "{body}");
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mess_request","arguments":{"intent":"photo of the porch"}}}"#;
    let (status, _, body) = mcp_post(servers[1].port, &agent, Some(&session), call);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ref"), "{body}");
    // Another principal cannot pick the session up on any node.
    for server in &servers {
        let (status, _, body) = mcp_post(server.port, &other, Some(&session), list);
        assert!(status == 404 || status == 400, "{status} {body}");
        assert!(!body.contains("mess_request"), "{body}");
    }
}

/// An open `GET /events` stream: its `thread` events as (id, data), read on a thread.
fn open_events(
    port: u16,
    key: &str,
    last: Option<&str>,
) -> std::sync::mpsc::Receiver<(String, String)> {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut head = format!(
        "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n"
    );
    if let Some(id) = last {
        head.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut id, mut data, mut kind) = (String::new(), String::new(), String::new());
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data:") {
                data = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_owned();
            } else if line.is_empty() && !data.is_empty() {
                // A `lagged` event comes through with that as its id.
                let id = if kind == "lagged" {
                    kind.clone()
                } else {
                    id.clone()
                };
                if matches!(kind.as_str(), "thread" | "lagged")
                    && tx.send((id, data.clone())).is_err()
                {
                    return;
                }
                data.clear();
                kind.clear();
            }
        }
    });
    rx
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn events_cross_nodes_and_resume_on_any_node_with_last_event_id() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 2);
    let agent = homes[0].token("agent", "claude-agent");
    let servers: Vec<Server> = homes.iter().map(Server::start).collect();
    let create = |server: &Server, i: usize| -> String {
        let (id, intent) = (format!("ev-{i}"), format!("check window {i}"));
        request(server, &agent, &id, &intent, None)
    };
    let events = open_events(servers[1].port, &agent, None);
    std::thread::sleep(Duration::from_millis(300));
    // Written on node 0, heard on node 1.
    let mut latencies = Vec::new();
    let mut last_id = String::new();
    for i in 0..10 {
        let sent = Instant::now();
        let r = create(&servers[0], i);
        loop {
            let (id, data) = events
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("no event for {r} on the other node"));
            if data.contains(&r) {
                latencies.push(sent.elapsed());
                assert!(!id.is_empty(), "events carry ids with a database");
                last_id = id;
                break;
            }
        }
    }
    latencies.sort();
    assert!(
        latencies[latencies.len() * 95 / 100] < Duration::from_secs(1),
        "{latencies:?}"
    );
    drop(events);
    // Changes while nobody listens; the client comes back to the other node with its last id.
    let missed: Vec<String> = (10..13).map(|i| create(&servers[1], i)).collect();
    let resumed = open_events(servers[0].port, &agent, Some(&last_id));
    let mut seen = Vec::new();
    while !missed
        .iter()
        .all(|r| seen.iter().any(|d: &String| d.contains(r)))
    {
        let (_, data) = resumed
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("the resumed stream missed some of {missed:?}: {seen:?}"));
        seen.push(data);
    }
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn every_node_sends_notices_and_a_killed_nodes_leases_move_on() {
    use crate::support::recorder::{Recorder, Script};
    let pg = Postgres::start();
    let services = Recorder::start();
    // Slow answers keep deliveries in flight when a node dies.
    services.script(
        "/robot",
        vec![Script::Delay(Duration::from_millis(300)); 12],
    );
    let config = format!(
        "agent_id: claude-agent
dispatch:
  timeout: 2s
  retry: {{attempts: 5, first: 0.2s}}
executors:
  robot:
    capabilities: [vacuum-floor]
    notify:
      webhook: {}/robot
",
        services.url
    );
    let homes: Vec<Home> = (0..3)
        .map(|_| Home::on_database(&config, &pg.url()))
        .collect();
    homes[0].ok(&["db", "init"]);
    let agent = homes[0].token("agent", "claude-agent");
    let mut servers: Vec<Server> = homes.iter().map(Server::start).collect();
    let mut refs = Vec::new();
    for i in 0..30 {
        let (id, intent) = (format!("job-{i}"), format!("vacuum room {i}"));
        let server = &servers[i % servers.len()];
        refs.push(request(server, &agent, &id, &intent, Some("vacuum-floor")));
        if i == 10 {
            // The node that was sending dies without a word; the others take over.
            let first = servers.remove(0);
            let pid = first.pid();
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            drop(first);
        }
    }
    let wanted: Vec<String> = refs
        .iter()
        .map(|r| format!("{r}.robot.webhook.new"))
        .collect();
    let missing = unsent(&services, &wanted, Duration::from_secs(60));
    assert!(missing.is_empty(), "never sent: {missing:?}");
    // Every delivery is recorded as sent, on one shelf, in the database.
    let mut client = pg.client();
    let queued: i64 = client
        .query_one(
            "SELECT count(*) FROM mess_outbox WHERE shelf = 'queue'",
            &[],
        )
        .unwrap()
        .get(0);
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut queued = queued;
    while queued > 0 {
        assert!(
            Instant::now() < deadline,
            "{queued} deliveries still queued"
        );
        std::thread::sleep(Duration::from_millis(200));
        queued = client
            .query_one(
                "SELECT count(*) FROM mess_outbox WHERE shelf = 'queue'",
                &[],
            )
            .unwrap()
            .get(0);
    }
}

/// Every file under `<root>/.mail`, by path relative to it.
fn mail_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let base = root.join(".mail");
    let mut out = BTreeMap::new();
    let mut stack = vec![base.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(&base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn agent_mail_is_shared_by_every_node_and_moves_with_the_home() {
    let pg = Postgres::start();
    let nodes = cluster(&pg, 2);
    let (a, b) = (&nodes[0], &nodes[1]);
    let sent = a.ok(&[
        "--as", "orch", "mail", "send", "--to", "workers", "--type", "task", "--body", "sweep",
    ]);
    let file = sent.trim().strip_prefix("workers/").unwrap().to_owned();
    // The other node lists it; the mail is in the database, not in either node's folder.
    assert!(
        b.ok(&["--as", "w0", "mail", "list", "workers"])
            .contains(&file)
    );
    assert!(mail_files(a.path()).is_empty() && mail_files(b.path()).is_empty());
    // Eight readers on two nodes claim it at once: exactly one wins.
    let outcomes: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let node = &nodes[i % 2];
                let (who, file) = (format!("w{i}"), file.clone());
                s.spawn(move || {
                    node.run(&[
                        "--as",
                        &who,
                        "mail",
                        "mark-read",
                        "--mailbox",
                        "workers",
                        &file,
                    ])
                    .status
                    .success()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        outcomes.iter().filter(|won| **won).count(),
        1,
        "{outcomes:?}"
    );
    let read = b.ok(&["--as", "w0", "mail", "read", "--mailbox", "workers", &file]);
    assert!(
        read.contains("(read)") && read.contains("read_at"),
        "{read}"
    );
    // A broadcast read on one node stays unread for another reader on the other node.
    let sent = b.ok(&[
        "--as",
        "nexus",
        "mail",
        "send",
        "--to",
        "__broadcast",
        "--type",
        "announcement",
        "--body",
        "noon",
    ]);
    let news = sent.trim().strip_prefix("__broadcast/").unwrap().to_owned();
    a.ok(&[
        "--as",
        "w1",
        "mail",
        "mark-read",
        "--mailbox",
        "__broadcast",
        &news,
    ]);
    let again = b.fails(
        &[
            "--as",
            "w1",
            "mail",
            "mark-read",
            "--mailbox",
            "__broadcast",
            &news,
        ],
        1,
    );
    assert!(again.contains("already read by w1"), "{again}");
    let unread = |node: &Home, who: &str| node.ok(&["--as", who, "mail", "list", "__broadcast"]);
    assert!(!unread(b, "w1").contains(&news));
    assert!(unread(b, "w2").contains(&news));
    // Archived on one node, it is in the archive on the other.
    b.ok(&[
        "--as",
        "orch",
        "mail",
        "archive",
        "--mailbox",
        "workers",
        &file,
    ]);
    let archive = a.ok(&[
        "--as", "orch", "mail", "list", "workers", "--folder", "archive",
    ]);
    assert!(archive.contains(&file), "{archive}");
    // Export writes the mail as files with the database's exact text, and import takes them
    // into another database unchanged.
    let out = tempfile::TempDir::new().unwrap();
    let home = out.path().join("home");
    let exported = a.ok(&["export", &home.to_string_lossy()]);
    assert!(exported.contains("3 mail message(s)"), "{exported}");
    let files = mail_files(&home);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        [
            format!("__broadcast/{news}"),
            format!("__broadcast/read/w1/{news}"),
            format!("workers/archive/{file}"),
        ]
        .iter()
        .collect::<Vec<_>>()
    );
    // A serving node mirrors the mail into its home, read-only, as the export wrote it (so the
    // `mail` view and readers of the format's files work on every node).
    let server = Server::start(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mail_files(a.path()) != files {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            mail_files(a.path()).keys()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let plain = Home::with_config(&config());
    crate::support::copy_dir(&home, plain.path());
    let sql = "SELECT mailbox, folder, file, \"from\", read_at FROM mail ORDER BY ALL";
    let listed = a.ok(&["query", sql]);
    assert!(listed.contains(&news) && listed.contains(&file), "{listed}");
    assert_eq!(listed, plain.ok(&["query", sql]));
    drop(server);
    let other = Postgres::start();
    let fresh = cluster(&other, 1);
    let imported = fresh[0].ok(&["import", &home.to_string_lossy()]);
    assert!(imported.contains("3 mail message(s)"), "{imported}");
    assert!(unread(&fresh[0], "w2").contains(&news));
    assert!(!unread(&fresh[0], "w1").contains(&news));
    let back = out.path().join("back");
    fresh[0].ok(&["export", &back.to_string_lossy()]);
    assert_eq!(mail_files(&back), files);
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn an_old_change_feed_is_pruned_and_who_missed_it_starts_over() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 1);
    let agent = homes[0].token("agent", "claude-agent");
    let server = Server::start(&homes[0]);
    let events = open_events(server.port, &agent, None);
    std::thread::sleep(Duration::from_millis(300));
    let first = request(&server, &agent, "old-1", "water the ferns", None);
    let cursor = loop {
        let (id, data) = events.recv_timeout(Duration::from_secs(5)).unwrap();
        if data.contains(&first) {
            break id;
        }
    };
    drop(events);
    drop(server);
    // A week and a day pass for what the feed holds; then one more change.
    let mut client = pg.client();
    client
        .batch_execute("UPDATE mess_changes SET at = now() - interval '8 days'")
        .unwrap();
    homes[0].ok(&["--as", "claude-agent", "request", "feed the cat"]);
    let before: i64 = client
        .query_one("SELECT count(*) FROM mess_changes", &[])
        .unwrap()
        .get(0);
    // The sweep at start prunes the old entries; the follower, whose record is older than
    // what is left, rebuilds the mirror.
    let server = Server::start(&homes[0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = loop {
        let left: i64 = client
            .query_one("SELECT count(*) FROM mess_changes", &[])
            .unwrap()
            .get(0);
        if left < before || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(left, 1, "only the fresh change is kept (of {before})");
    let floor: i64 = client
        .query_one("SELECT xid FROM mess_feed_floor", &[])
        .unwrap()
        .get(0);
    assert!(floor > 0);
    std::thread::sleep(Duration::from_millis(1500));
    homes[0].ok(&["fsck"]);
    // A client resuming from before the pruned entries is told it lagged.
    let resumed = open_events(server.port, &agent, Some(&cursor));
    let (id, data) = resumed.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(id, "lagged", "{data}");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn a_node_that_was_away_catches_up_through_several_batches_of_the_feed() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 2);
    let busy = homes[1].ok(&["--as", "claude-agent", "request", "busy thread"]);
    let quiet = homes[1].ok(&["--as", "claude-agent", "request", "quiet thread"]);
    let server = Server::start(&homes[0]);
    let received = format!("state=received/{}.messe-af.yaml", quiet.trim());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !thread_files(homes[0].path()).contains_key(&received) {
        assert!(Instant::now() < deadline, "the mirror did not follow");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    // While the node is away the feed gains more changes than one pass reads (a busy thread
    // noted again and again), and only after them the change it must not miss.
    let mut client = pg.client();
    client
        .execute(
            "INSERT INTO mess_changes (ref, seq) SELECT $1, 1 FROM generate_series(1, 4500)",
            &[&busy.trim()],
        )
        .unwrap();
    homes[1].ok(&["claim", quiet.trim(), "--as", "robot-0"]);
    let server = Server::start(&homes[0]);
    let executing = format!("state=executing/{}.messe-af.yaml", quiet.trim());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mirror = thread_files(homes[0].path());
        if mirror.contains_key(&executing) && !mirror.contains_key(&received) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the claim behind 4,500 changes never reached the mirror: {:?}",
            mirror.keys().collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    homes[0].ok(&["fsck"]);
    drop(server);
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn leased_deliveries_waiting_for_a_free_slot_are_sent_without_waiting_out_their_lease() {
    use crate::support::recorder::{Recorder, Script};
    let pg = Postgres::start();
    let services = Recorder::start();
    // Every answer takes longer than the worker's look for new deliveries (2 s), so more
    // deliveries are leased than its slots (16) can send before the next look.
    services.script(
        "/robot",
        vec![Script::Delay(Duration::from_millis(2500)); 40],
    );
    let config = format!(
        "agent_id: claude-agent
dispatch:
  timeout: 5s
executors:
  robot:
    capabilities: [vacuum-floor]
    notify:
      webhook: {}/robot
",
        services.url
    );
    let home = Home::on_database(&config, &pg.url());
    home.ok(&["db", "init"]);
    let agent = home.token("agent", "claude-agent");
    let server = Server::start(&home);
    let started = Instant::now();
    let refs: Vec<String> = (0..40)
        .map(|i| {
            request(
                &server,
                &agent,
                &format!("job-{i}"),
                "vacuum",
                Some("vacuum-floor"),
            )
        })
        .collect();
    let wanted: Vec<String> = refs
        .iter()
        .map(|r| format!("{r}.robot.webhook.new"))
        .collect();
    // Three rounds of 2.5 s; a delivery left to wait out its lease would take 30 s.
    let missing = unsent(&services, &wanted, Duration::from_secs(20));
    assert!(
        missing.is_empty(),
        "after {:?}, {} deliveries not sent: {missing:?}",
        started.elapsed(),
        missing.len()
    );
    drop(server);
}

/// The delivery ids of `wanted` that `services` has not received (by `x-mess-delivery`) when
/// all of them have arrived or `within` has passed.
fn unsent(
    services: &crate::support::recorder::Recorder,
    wanted: &[String],
    within: Duration,
) -> Vec<String> {
    let arrived = |hits: &[crate::support::recorder::Hit]| -> Vec<String> {
        hits.iter()
            .filter_map(|h| h.headers.get("x-mess-delivery").cloned())
            .collect()
    };
    let hits = services.wait_for(within, |hits| {
        let got = arrived(hits);
        wanted.iter().all(|w| got.contains(w))
    });
    let got = arrived(&hits);
    wanted
        .iter()
        .filter(|w| !got.contains(w))
        .cloned()
        .collect()
}

/// Runs `mess` with each argument list on the node of the same index at once; the outputs.
fn at_once(homes: &[Home], runs: &[(usize, Vec<String>)]) -> Vec<std::process::Output> {
    let children: Vec<_> = runs
        .iter()
        .map(|(node, args)| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            homes[*node]
                .command(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn the_last_slot_and_a_second_vote_are_decided_once_across_nodes() {
    let pg = Postgres::start();
    let homes = cluster(&pg, 2);
    let r = homes[0]
        .ok(&[
            "request",
            "count the chairs",
            "--requires",
            "vacuum-floor",
            "--assignments",
            "2",
            "--as",
            "claude-agent",
        ])
        .trim()
        .to_owned();
    homes[1].ok(&["claim", &r, "--as", "robot-0"]);
    // Five executors race for the last slot from both nodes: one takes it.
    let runs: Vec<(usize, Vec<String>)> = (1..EXECUTORS)
        .map(|i| {
            (
                i % 2,
                vec![
                    "claim".to_owned(),
                    r.clone(),
                    "--as".to_owned(),
                    format!("robot-{i}"),
                ],
            )
        })
        .collect();
    let outcomes = at_once(&homes, &runs);
    let winners = outcomes.iter().filter(|o| o.status.success()).count();
    assert_eq!(winners, 1, "{winners} took the last slot");
    let show = homes[0].ok(&["show", &r]);
    assert_eq!(show.matches("note: slot ").count(), 2, "{show}");
    assert!(show.contains("status: claimed"), "{show}");

    // The same approver decides on both nodes at once: one decision is recorded.
    let a = homes[1]
        .ok(&[
            "request",
            "unlock the back door",
            "--approver",
            "robot-0",
            "--approver",
            "robot-1",
            "--need",
            "2",
            "--as",
            "claude-agent",
        ])
        .trim()
        .to_owned();
    let runs: Vec<(usize, Vec<String>)> = (0..2)
        .map(|node| {
            (
                node,
                vec![
                    "approve".to_owned(),
                    a.clone(),
                    "--as".to_owned(),
                    "robot-0".to_owned(),
                ],
            )
        })
        .collect();
    let outcomes = at_once(&homes, &runs);
    assert_eq!(outcomes.iter().filter(|o| o.status.success()).count(), 1);
    let refused = outcomes.iter().find(|o| !o.status.success()).unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("already decided"), "{err}");
    let show = homes[0].ok(&["show", &a]);
    assert_eq!(show.matches("action: approved").count(), 1, "{show}");
    assert_eq!(show.matches("decision: approved").count(), 1, "{show}");
    homes[0].ok(&["approve", &a, "--as", "robot-1"]);
    let done = homes[1].ok(&["status", &a]);
    assert!(done.contains("completed"), "{done}");
}

#[test]
#[ignore = "drives PostgreSQL; .ci/test runs it"]
fn a_button_press_counts_once_whichever_node_it_reaches() {
    use crate::buttons::{json_of, now, slack_press};
    use crate::support::recorder::Recorder;
    let pg = Postgres::start();
    let services = Recorder::start();
    let secret = "slack-signing-secret-for-the-cluster";
    let config = format!(
        "agent_id: claude-agent
dispatch:
  public_url: https://mess.example
  slack: {{bot_token: xoxb-test, signing_secret: {secret}, base_url: {}/slack}}
executors:
  ana: {{capabilities: [look], notify: {{slack: U0ANA}}}}
  ben: {{capabilities: [look]}}
",
        services.url
    );
    let homes: Vec<Home> = (0..2)
        .map(|_| Home::on_database(&config, &pg.url()))
        .collect();
    homes[0].ok(&["db", "init"]);
    let agent = homes[0].token("agent", "claude-agent");
    let servers: Vec<Server> = homes.iter().map(Server::start).collect();
    let (status, body) = servers[0].post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: pay invoice 42\n      approval: {from: [ana, ben], need: 2}\n",
    );
    assert_eq!(status, 200, "{body}");
    let r = json_of(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    let hits = services.wait_for(Duration::from_secs(20), |h| {
        h.iter().any(|x| x.path.ends_with("/chat.postMessage"))
    });
    let notice = hits
        .iter()
        .find(|x| x.path.ends_with("/chat.postMessage"))
        .unwrap_or_else(|| panic!("{hits:#?}"));
    let approve = json_of(&notice.body)["blocks"][2]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    // The code was saved by the node that sent the notice; the press reaches the other one.
    let (status, body, _) = slack_press(&servers[1], &approve, now(), secret);
    assert_eq!(status, 200, "{body}");
    // Pressed again, freshly signed, on the first node: taken at the door, refused by the rules.
    let (status, body, _) = slack_press(&servers[0], &approve, now() + 1, secret);
    assert_eq!(status, 200, "{body}");
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        h.iter().any(|x| x.path.ends_with("/chat.postEphemeral"))
    });
    let refused = hits
        .iter()
        .find(|x| x.path.ends_with("/chat.postEphemeral"))
        .unwrap_or_else(|| panic!("{hits:#?}"));
    assert!(
        refused.body.contains("ana already decided"),
        "{}",
        refused.body
    );
    let env = json_of(&homes[1].ok(&["status", &r, "--format", "json"]));
    let decisions = env["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{env}");
    assert_eq!(decisions[0]["channel"], "slack");
}
