//! A private PostgreSQL for one test: `initdb` into a temp folder, `pg_ctl start` on a free
//! loopback port (the socket in that folder too), stopped when dropped. Debian's server
//! binaries live under /usr/lib/postgresql/<version>/bin; as root they run as `postgres`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

/// A running PostgreSQL server, stopped (immediately) when dropped.
pub(crate) struct Postgres {
    dir: TempDir,
    bin: PathBuf,
    pub(crate) port: u16,
    options: String,
}

impl Postgres {
    /// Initialises and starts a server; panics (the test fails) when PostgreSQL is missing.
    pub(crate) fn start() -> Postgres {
        let bin = server_bin().unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server programs (initdb, pg_ctl) are missing: install Debian's \
                 `postgresql` (.ci/test does)"
            )
        });
        let dir = TempDir::new().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            for p in [dir.path(), data.as_path()] {
                let status = Command::new("chown")
                    .args(["postgres:postgres", &p.to_string_lossy()])
                    .status()
                    .unwrap();
                assert!(
                    status.success(),
                    "chown of {} to postgres failed",
                    p.display()
                );
            }
        }
        let out = run_as_owner(&bin.join("initdb"))
            .args(["-D", &data.to_string_lossy()])
            .args(["-U", "mess", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={} \
             -c max_connections=200",
            dir.path().display()
        );
        let pg = Postgres {
            dir,
            bin,
            port,
            options,
        };
        pg.resume();
        pg
    }

    /// Starts the server on its data and port (again, after [`Postgres::halt`]).
    pub(crate) fn resume(&self) {
        let data = self.data();
        let log = self.dir.path().join("log");
        let out = run_as_owner(&self.bin.join("pg_ctl"))
            .args(["-D", &data.to_string_lossy(), "-o", &self.options])
            .args(["-w", "-t", "60", "-l", &log.to_string_lossy(), "start"])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stops the server at once, as a crash would (`-m immediate`).
    pub(crate) fn halt(&self) {
        let out = run_as_owner(&self.bin.join("pg_ctl"))
            .args([
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "immediate",
                "stop",
            ])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl stop failed");
    }

    /// The URL of the server's `postgres` database, as user `mess`.
    pub(crate) fn url(&self) -> String {
        format!("postgres://mess@127.0.0.1:{}/postgres", self.port)
    }

    /// A client connection, for checks the exchange does not offer.
    pub(crate) fn client(&self) -> ::postgres::Client {
        ::postgres::Client::connect(&self.url(), ::postgres::NoTls).unwrap()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = run_as_owner(&self.bin.join("pg_ctl"))
            .args([
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "immediate",
                "stop",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The folder of `initdb` and `pg_ctl`: on PATH, else Debian's newest version.
fn server_bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return Some(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` as the data folder's owner: PostgreSQL refuses to run as root.
fn run_as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
