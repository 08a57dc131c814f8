//! A tier-1 exchange for the benchmark: a private PostgreSQL, node homes (mirrors) over it,
//! `mess serve` processes on them that can be started and SIGKILLed, and tier-0 homes to
//! compare with.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::common::{MESS, serve_on};
use crate::postgres::Postgres;

/// Executors of the G1 claim race, all able to take every request.
pub(crate) const ROBOTS: usize = 6;

/// The configuration every node (and the tier-0 comparison) gets: `ROBOTS` robots for the
/// claim race, one executor per load client with a capability of its own, and a courier that
/// is notified by webhook at `webhook`.
pub(crate) fn config(clients: usize, webhook: &str) -> String {
    let mut c =
        String::from("dispatch:\n  timeout: 2s\n  retry: {attempts: 8, first: 0.2s}\nexecutors:\n");
    for i in 0..ROBOTS {
        c.push_str(&format!("  robot-{i}:\n    capabilities: [vacuum-floor]\n"));
    }
    for i in 0..clients {
        c.push_str(&format!(
            "  bench-{i}:\n    capabilities: [bench-task-{i}]\n"
        ));
    }
    c.push_str(&crate::queue::executors(clients));
    c.push_str(&format!(
        "  courier:\n    capabilities: [deliver-note]\n    notify:\n      webhook: {webhook}/courier\n"
    ));
    c
}

/// A running `mess serve`.
pub(crate) struct Node {
    child: Child,
    pub(crate) port: u16,
}

impl Node {
    /// `http://127.0.0.1:<port>`.
    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `mess serve` on `home` (on the database `url`, if any) on a free port; returns it
/// once it listens.
pub(crate) fn serve(home: &Path, url: Option<&str>) -> Node {
    let (child, port) = serve_on(home, url);
    Node { child, port }
}

/// Runs `mess` on `home` (on the database `url`, if any); its stdout.
pub(crate) fn mess(home: &Path, url: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new(MESS);
    cmd.arg("--home").arg(home);
    if let Some(url) = url {
        cmd.env("MESS_DATABASE_URL", url);
    }
    let out = cmd.args(args).stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "mess {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// A database and node homes over it, with their servers.
pub(crate) struct Cluster {
    pub(crate) pg: Postgres,
    dirs: Vec<TempDir>,
    pub(crate) nodes: Vec<Option<Node>>,
}

impl Cluster {
    /// A fresh database with the schema and `n` node homes with `config`; no server runs yet.
    pub(crate) fn new(n: usize, config: &str) -> Cluster {
        let pg = Postgres::start();
        let dirs: Vec<TempDir> = (0..n)
            .map(|_| {
                let d = TempDir::new().unwrap();
                std::fs::write(d.path().join("config.yaml"), config).unwrap();
                d
            })
            .collect();
        let cluster = Cluster {
            pg,
            dirs,
            nodes: (0..n).map(|_| None).collect(),
        };
        cluster.mess(0, &["db", "init"]);
        cluster
    }

    /// The database's URL.
    pub(crate) fn url(&self) -> String {
        self.pg.url()
    }

    /// Node `i`'s home (its mirror).
    pub(crate) fn home(&self, i: usize) -> PathBuf {
        self.dirs[i].path().to_owned()
    }

    /// Runs `mess` on node `i`'s home and the database.
    pub(crate) fn mess(&self, i: usize, args: &[&str]) -> String {
        mess(&self.home(i), Some(&self.url()), args)
    }

    /// A new key of `role` for `id`.
    pub(crate) fn token(&self, role: &str, id: &str) -> String {
        self.mess(0, &["token", role, id]).trim().to_owned()
    }

    /// Starts every node's server.
    pub(crate) fn start_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.nodes[i] = Some(serve(&self.home(i), Some(&self.url())));
        }
    }

    /// Every running node's `/mess` URL, in node order.
    pub(crate) fn mess_urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flatten()
            .map(|n| format!("{}/mess", n.base()))
            .collect()
    }

    /// Node `i` dies without a word (SIGKILL).
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(node) = self.nodes[i].take() {
            let _ = Command::new("kill")
                .args(["-KILL", &node.pid().to_string()])
                .status();
            drop(node);
        }
    }

    /// Stops every server.
    pub(crate) fn stop_all(&mut self) {
        for node in &mut self.nodes {
            *node = None;
        }
    }

    /// A direct connection to the database (its calls block: in async code, inside
    /// [`Cluster::rows`] or a thread of its own).
    pub(crate) fn sql(&self) -> ::postgres::Client {
        tokio::task::block_in_place(|| self.pg.client())
    }

    /// The rows of `query` on the database, read directly.
    pub(crate) fn rows(&self, query: &str) -> Vec<::postgres::Row> {
        tokio::task::block_in_place(|| self.pg.client().query(query, &[]).unwrap())
    }

    /// The first column of the one row of `query`, a count.
    pub(crate) fn count(&self, query: &str) -> i64 {
        self.rows(query)[0].get(0)
    }
}

impl Drop for Cluster {
    /// Shows the first warnings and errors of each node's log, which explain a missed target.
    fn drop(&mut self) {
        self.stop_all();
        for i in 0..self.dirs.len() {
            let log = std::fs::read_to_string(self.home(i).join("serve.log")).unwrap_or_default();
            for line in log
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .take(5)
            {
                println!("   node {i}: {line}");
            }
        }
    }
}

/// Polls `done` every 20 ms until it holds or `within` passes; whether it held.
pub(crate) fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every thread file under `root` (state folders and archive), by path relative to it.
pub(crate) fn thread_files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
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
