//! The official Python MCP SDK drives scripted agent sessions (tests/python/): one against
//! `mess mcp` and `/mcp` of a running `mess serve` in both protocol eras, one with a local and a
//! remote exchange.

use std::path::Path;
use std::process::Command;

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

#[test]
#[ignore = "drives the Python MCP SDK; .ci/test runs it"]
fn the_python_sdk_runs_a_whole_agent_session_over_stdio_and_http() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = repo.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/test, which installs the Python MCP SDK",
        python.display()
    );
    let home = Home::with_config(CONFIG);
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let executor = home
        .ok(&["token", "executor", "roomba-kitchen"])
        .trim()
        .to_owned();
    let server = Server::start(&home);
    let out = Command::new(&python)
        .arg(repo.join("tests/python/mcp_session.py"))
        .env("MESS_BIN", env!("CARGO_BIN_EXE_mess"))
        .env("MESS_HOME", home.path())
        .env("MESS_PORT", server.port.to_string())
        .env("AGENT_KEY", &agent)
        .env("EXECUTOR_KEY", &executor)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for label in ["stdio legacy", "stdio auto", "http legacy", "http auto"] {
        assert!(stdout.contains(&format!("ok: {label}")), "{stdout}");
    }
}

#[test]
#[ignore = "drives the Python MCP SDK; .ci/test runs it"]
fn the_python_sdk_uses_a_local_and_a_remote_exchange_in_one_session() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = repo.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/test, which installs the Python MCP SDK",
        python.display()
    );
    let house = Home::with_config(CONFIG);
    let agent = house
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let robot = house
        .ok(&["token", "executor", "roomba-kitchen"])
        .trim()
        .to_owned();
    let laptop = Home::with_config(CONFIG);
    let out = Command::new(&python)
        .arg(repo.join("tests/python/mcp_exchanges.py"))
        .env("MESS_BIN", env!("CARGO_BIN_EXE_mess"))
        .env("LAPTOP_HOME", laptop.path())
        .env("HOUSE_HOME", house.path())
        .env("AGENT_KEY", &agent)
        .env("ROBOT_KEY", &robot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ok: two exchanges"), "{stdout}");
}
