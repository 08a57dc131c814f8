//! The official Python MCP SDK drives scripted agent sessions (tests/python/): one against
//! `mess mcp` and `/mcp` of a running `mess serve` in both protocol eras, one with a local and a
//! remote exchange.

use std::path::Path;
use std::process::Command;

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

/// The venv's Python (installed by .ci/test), a home with the test config, and its agent
/// (claude-agent) and executor (roomba-kitchen) keys.
fn setup() -> (std::path::PathBuf, Home, String, String) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = repo.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/test, which installs the Python MCP SDK",
        python.display()
    );
    let home = Home::with_config(CONFIG);
    let key = |role: &str, id: &str| home.ok(&["token", role, id]).trim().to_owned();
    let (agent, executor) = (
        key("agent", "claude-agent"),
        key("executor", "roomba-kitchen"),
    );
    (python, home, agent, executor)
}

/// Runs the script `name` of tests/python with `env`; its stdout, which must say `ok: LABEL`
/// for each of `labels`.
fn script(python: &Path, name: &str, env: &[(&str, String)], labels: &[&str]) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .arg(repo.join("tests/python").join(name))
        .env("MESS_BIN", env!("CARGO_BIN_EXE_mess"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for label in labels {
        assert!(stdout.contains(&format!("ok: {label}")), "{stdout}");
    }
}

#[test]
#[ignore = "drives the Python MCP SDK; .ci/test runs it"]
fn the_python_sdk_runs_a_whole_agent_session_over_stdio_and_http() {
    let (python, home, agent, executor) = setup();
    let server = Server::start(&home);
    script(
        &python,
        "mcp_session.py",
        &[
            ("MESS_HOME", home.path().display().to_string()),
            ("MESS_PORT", server.port.to_string()),
            ("AGENT_KEY", agent),
            ("EXECUTOR_KEY", executor),
        ],
        &["stdio legacy", "stdio auto", "http legacy", "http auto"],
    );
}

#[test]
#[ignore = "drives the Python MCP SDK; .ci/test runs it"]
fn the_python_sdk_uses_a_local_and_a_remote_exchange_in_one_session() {
    let (python, house, agent, robot) = setup();
    let laptop = Home::with_config(CONFIG);
    script(
        &python,
        "mcp_exchanges.py",
        &[
            ("LAPTOP_HOME", laptop.path().display().to_string()),
            ("HOUSE_HOME", house.path().display().to_string()),
            ("AGENT_KEY", agent),
            ("ROBOT_KEY", robot),
        ],
        &["two exchanges"],
    );
}
