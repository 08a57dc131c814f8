//! The MCP Inspector CLI (pinned in tests/inspector/) checks the tool schemas for portability
//! (`--strict`) in both protocol eras, and calls tools over stdio and HTTP: exit 0 for good
//! calls, 5 when the tool reports an error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

fn inspector_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inspector");
    assert!(
        dir.join("node_modules/.bin/inspector").exists(),
        "the MCP Inspector is missing: run .ci/test, which runs `npm ci` in {}",
        dir.display()
    );
    dir
}

fn inspector(home: &Home, args: &[&str]) -> Output {
    let dir = inspector_dir();
    Command::new(dir.join("node_modules/.bin/inspector"))
        .current_dir(&dir)
        .arg("--cli")
        .args(["-e", &format!("MESS_HOME={}", home.path().display())])
        .args(["-e", "MESS_AGENT_ID=claude-agent"])
        .arg(env!("CARGO_BIN_EXE_mess"))
        .arg("mcp")
        .args(args)
        .output()
        .unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

#[test]
#[ignore = "drives the MCP Inspector (node); .ci/test runs it"]
fn the_inspector_finds_the_schemas_portable_and_the_tools_working() {
    let home = Home::with_config(CONFIG);
    for era in [&[][..], &["--protocol-era", "modern"][..]] {
        let mut args = era.to_vec();
        args.extend(["--method", "tools/list", "--strict"]);
        let out = inspector(&home, &args);
        assert_eq!(
            code(&out),
            0,
            "{era:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = inspector(
        &home,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "mess_do",
            "--tool-arg",
            "intent=water the plants",
            "--format",
            "json",
            "-q",
        ],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"ref\""));
    let out = inspector(
        &home,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "mess_do",
            "--tool-arg",
            "intent=x",
            "--tool-arg",
            "priority=asap",
            "--format",
            "json",
            "-q",
        ],
    );
    assert_eq!(
        code(&out),
        5,
        "a tool error: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = inspector(
        &home,
        &[
            "--method",
            "resources/templates/list",
            "--format",
            "json",
            "-q",
        ],
    );
    assert_eq!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("mess://request/{id}"));

    // Over HTTP with a key.
    let key = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let server = Server::start(&home);
    let out = Command::new(inspector_dir().join("node_modules/.bin/inspector"))
        .current_dir(inspector_dir())
        .arg("--cli")
        .arg(format!("http://127.0.0.1:{}/mcp", server.port))
        .args(["--header", &format!("Authorization: Bearer {key}")])
        .args([
            "--method",
            "tools/call",
            "--tool-name",
            "mess_wait",
            "--tool-arg",
            "timeout_s=1",
            "--format",
            "json",
            "-q",
        ])
        .output()
        .unwrap();
    assert_eq!(
        code(&out),
        0,
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("timed_out"));
}
