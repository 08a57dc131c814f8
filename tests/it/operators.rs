//! What operators get around the exchange: shell completions and manual pages generated from
//! the commands, help that shows itself, usage errors that keep clap's `Usage:` line, and the
//! server's log as text or JSON with levels from `MESS_LOG` or `RUST_LOG`.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::server::Server;
use crate::support::{CONFIG, Home, free_port};

#[test]
fn completions_for_every_shell_name_the_commands_and_bash_s_parses() {
    let home = Home::with_config(CONFIG);
    for (shell, marker) in [
        ("bash", "_mess()"),
        ("zsh", "#compdef mess"),
        ("fish", "complete -c mess"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let script = home.ok(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: {script:.300}");
        for command in ["request", "claim", "serve", "completions", "man"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
    // bash reads the script without a syntax error, and completes a command from it.
    let script = home.ok(&["completions", "bash"]);
    let file = home.path().join("mess.bash");
    std::fs::write(&file, &script).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && for w in req que; do COMP_WORDS=(mess $w) COMP_CWORD=1; _mess mess $w mess; echo \"${{COMPREPLY[@]}}\"; done",
            file.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The hidden query worker is never offered.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "request\nquery\n");
    let err = home.fails(&["completions", "tcsh"], 2);
    assert!(err.contains("tcsh"), "{err}");
}

#[test]
fn the_manual_page_is_roff_and_every_command_gets_its_own() {
    let home = Home::with_config(CONFIG);
    let page = home.ok(&["man"]);
    assert!(page.contains(".TH mess 1"), "{page:.300}");
    assert!(
        page.contains(".SH NAME") && page.contains(".SH SUBCOMMANDS"),
        "{page:.600}"
    );
    let dir = home.path().join("man1");
    let said = home.ok(&["man", "--out", dir.to_str().unwrap()]);
    assert!(said.starts_with("wrote "), "{said}");
    let request = std::fs::read_to_string(dir.join("mess-request.1")).unwrap();
    assert!(request.contains(".TH mess-request 1"), "{request:.300}");
    assert!(request.contains("mess request"), "{request:.600}");
    assert!(
        request.contains("needed\\-by"),
        "its flags: {request:.2000}"
    );
    assert!(
        !dir.join("mess-query-worker.1").exists(),
        "a hidden command"
    );
}

#[test]
fn bare_mess_shows_help_and_usage_errors_keep_the_usage_line() {
    let home = Home::with_config(CONFIG);
    let out = home.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Usage: mess [OPTIONS] <COMMAND>"), "{help}");
    assert!(help.contains("Examples:"), "{help}");
    // Global flags stand under their own heading, after the command's own.
    let help = home.ok(&["claim", "--help"]);
    let own = help
        .find("--note")
        .unwrap_or(usize::MAX)
        .min(help.find("Options:").unwrap());
    let global = help
        .find("Global options:")
        .expect("a heading for global flags");
    assert!(own < global && help[global..].contains("--home"), "{help}");
    assert!(!help[..global].contains("--home"), "{help}");
    let err = home.fails(&["request", "--bogus"], 2);
    assert!(
        err.contains(
            "hint: usage: mess request [OPTIONS] <INTENT>; `mess request --help` lists its flags"
        ),
        "{err}"
    );
}

/// Starts `mess serve` on `home` with `env`; returns the child, its port and its stderr.
fn serve_logging(
    home: &Home,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, u16, std::sync::mpsc::Receiver<String>) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut all = vec!["serve", "--addr", addr.as_str()];
    all.extend_from_slice(args);
    let mut child = home
        .command(&all)
        .env_remove("MESS_LOG")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, port, rx)
}

/// The log lines that arrive within `within` after `act` ran.
fn lines_after(rx: &std::sync::mpsc::Receiver<String>, within: Duration) -> Vec<String> {
    let until = Instant::now() + within;
    let mut lines = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    lines
}

fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_server_logs_json_with_the_request_id_principal_and_ref_and_honours_rust_log() {
    let home = Home::with_config(CONFIG);
    let key = home.token("agent", "claude-agent");
    let (mut child, port, rx) = serve_logging(&home, &["--log-format", "json"], &[]);
    let answer = get(
        port,
        "/threads/2026-01-31-001",
        &[
            ("authorization", &format!("Bearer {key}")),
            ("x-request-id", "req-42"),
        ],
    );
    assert!(answer.contains("x-request-id: req-42"), "{answer}");
    let lines = lines_after(&rx, Duration::from_secs(2));
    let served: Vec<serde_json::Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "served")
        .collect();
    assert_eq!(served.len(), 1, "{lines:?}");
    let span = &served[0]["span"];
    assert_eq!(span["id"], "req-42");
    assert_eq!(span["principal"], "claude-agent");
    assert_eq!(span["ref"], "2026-01-31-001");
    assert_eq!(served[0]["fields"]["status"], 404);
    assert!(
        lines
            .iter()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "every line is JSON: {lines:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
    // RUST_LOG sets the level when MESS_LOG does not (MESS_LOG_FORMAT the format): at `warn`,
    // a served request writes nothing; an id the caller sends that is not one is replaced.
    let (mut child, port, rx) = serve_logging(
        &home,
        &[],
        &[("RUST_LOG", "warn"), ("MESS_LOG_FORMAT", "text")],
    );
    let answer = get(port, "/healthz", &[("x-request-id", "bad id!")]);
    assert!(!answer.contains("bad id"), "{answer}");
    assert!(answer.contains("x-request-id: "), "{answer}");
    let lines = lines_after(&rx, Duration::from_secs(1));
    assert!(!lines.iter().any(|l| l.contains("served")), "{lines:?}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_example_config_is_quiet_and_links_point_where_the_server_listens() {
    let home = Home::with_config("");
    std::fs::remove_file(home.path().join("config.yaml")).ok();
    home.ok(&["init"]);
    // No warning on a fresh home: no channel waits for a token, no robot for an endpoint.
    let out = home.run(&["status"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "status warns");
    let r = home.ok(&["request", "check the fridge", "--requires", "take-photo"]);
    let r = r.trim();
    let fsck = home.run(&["fsck"]);
    assert!(fsck.status.success());
    assert!(String::from_utf8_lossy(&fsck.stdout).contains("0 problem(s)"));
    // Before any server ran: 127.0.0.1:8420 (http.port's default).
    let link = home.ok(&["link", r, "--executor", "teague-phone"]);
    assert!(
        link.starts_with("http://127.0.0.1:8420/respond?ref="),
        "{link}"
    );
    // With a server on another port, the link goes there, as its notices' links do.
    let port = free_port();
    let server = Server::start_on(&home, &format!("127.0.0.1:{port}"), &[]);
    let link = home.ok(&["link", r, "--executor", "teague-phone"]);
    server.stop();
    assert!(
        link.starts_with(&format!("http://127.0.0.1:{port}/respond?ref=")),
        "{link}"
    );
    // An address given wins over where the server listens.
    let given = home
        .command(&["link", r, "--executor", "teague-phone"])
        .env("MESS_PUBLIC_URL", "https://mess.example.org")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&given.stdout).starts_with("https://mess.example.org/respond?")
    );
}
