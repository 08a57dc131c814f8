//! Test support: a temp exchange home and a runner for the real `mess` binary.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

pub(crate) mod browser;
pub(crate) mod postgres;
pub(crate) mod recorder;
pub(crate) mod server;

/// An exchange home in a temp folder (in tier 1, a node's mirror of a database).
pub(crate) struct Home {
    pub(crate) dir: TempDir,
    /// The database the home mirrors (`MESS_DATABASE_URL` of every command), if any.
    pub(crate) database: Option<String>,
}

/// Executors used across CLI tests.
pub(crate) const CONFIG: &str = "agent_id: claude-agent
executors:
  teague-phone:
    capabilities: [take-photo, check-visual]
  roomba-kitchen:
    capabilities: [vacuum-floor]
";

impl Home {
    /// A home with `config` as config.yaml (none when empty).
    pub(crate) fn with_config(config: &str) -> Home {
        let dir = TempDir::new().unwrap();
        if !config.is_empty() {
            std::fs::write(dir.path().join("config.yaml"), config).unwrap();
        }
        Home {
            dir,
            database: None,
        }
    }

    /// A node's home over the database at `url`, with `config` as config.yaml.
    pub(crate) fn on_database(config: &str, url: &str) -> Home {
        let mut home = Home::with_config(config);
        home.database = Some(url.to_owned());
        home
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A `mess` command on this home, with no identity from the environment.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mess"));
        c.args(args)
            .env("MESS_HOME", self.path())
            .env_remove("MESS_AGENT_ID")
            .env_remove("MESS_DATABASE_URL")
            .env_remove("MESS_LOG_FORMAT")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        if let Some(url) = &self.database {
            c.env("MESS_DATABASE_URL", url);
        }
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs `mess` and returns stdout, failing the test on a non-zero exit.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "mess {args:?} failed ({:?}):\n{}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `mess`, expects exit code `code`, and returns stderr.
    pub(crate) fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "mess {args:?}: stdout {}\nstderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    /// Runs `mess` with `input` on stdin.
    pub(crate) fn with_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// A new API key of `role` (`agent` or `executor`) for `id`.
    pub(crate) fn token(&self, role: &str, id: &str) -> String {
        self.ok(&["token", role, id]).trim().to_owned()
    }

    /// `mess send -` of `yaml` as `who`, which must be refused; what it said on stderr.
    pub(crate) fn send_refused(&self, who: &str, yaml: &str) -> String {
        let out = self.with_stdin(&["send", "-", "--as", who], yaml);
        assert!(
            !out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    /// `mess send -` of `yaml` as `who`, which must succeed; its answer.
    pub(crate) fn send_as(&self, who: &str, yaml: &str) -> String {
        let out = self.with_stdin(&["send", "-", "--as", who], yaml);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Copies a folder tree (a fixture home) into `to`.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
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

/// A port on 127.0.0.1 that nothing listens on right now, for a program the test starts.
/// (`postgres.rs` keeps its own: the cluster benchmark includes that file alone.)
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
