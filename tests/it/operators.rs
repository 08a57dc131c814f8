//! What operators get around the exchange: shell completions and manual pages generated from
//! the commands, help that shows itself, usage errors that keep clap's `Usage:` line, and the
//! server's log as text or JSON with levels from `MESS_LOG` or `RUST_LOG`.

use std::io::{BufRead, BufReader};
use std::path::Path;
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

#[test]
fn config_check_and_fsck_fail_on_a_misspelt_key_and_name_the_fix() {
    let home = Home::with_config(CONFIG);
    let ok = home.ok(&["config", "check"]);
    assert!(ok.contains(": ok (2 executor(s)"), "{ok}");
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "{CONFIG}executers:\n  sam:\n    capabilities: [x]\nlimits:\n  max_mesage_bytes: 10\n"
        ),
    )
    .unwrap();
    let out = home.run(&["config", "check"]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("executers: unknown key; did you mean executors?"),
        "{said}"
    );
    assert!(
        said.contains("max_mesage_bytes: unknown key; did you mean max_message_bytes?"),
        "{said}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 problem(s)"), "{err}");
    // fsck counts them too: the home is not clean while its config has a typo.
    let out = home.run(&["fsck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("problem: config: config.yaml: executers"),
        "{out:?}"
    );
}

#[test]
fn mess_link_refuses_an_unknown_or_ineligible_executor_with_did_you_mean() {
    let home = Home::with_config(CONFIG);
    let r = home
        .ok(&["request", "check the fridge", "--requires", "take-photo"])
        .trim()
        .to_owned();
    let err = home.fails(&["link", &r, "--executor", "teague-phon"], 1);
    assert!(
        err.contains("no executor named \"teague-phon\"")
            && err.contains("did you mean teague-phone?"),
        "{err}"
    );
    let err = home.fails(&["link", &r, "--executor", "roomba-kitchen"], 1);
    assert!(
        err.contains("roomba-kitchen cannot take") && err.contains("take-photo"),
        "{err}"
    );
    let link = home.ok(&[
        "link",
        &r,
        "--executor",
        "teague-phone",
        "--ttl",
        "tomorrow 18:00",
    ]);
    assert!(link.contains("token="), "{link}");
    home.ok(&["claim", &r, "--as", "teague-phone"]);
    // Once taken, nobody else's link would open it.
    let err = home.fails(&["link", &r, "--executor", "roomba-kitchen"], 1);
    assert!(err.contains("is held by teague-phone"), "{err}");
}

#[test]
fn every_time_flag_reads_rfc3339_durations_and_phrases() {
    let home = Home::with_config(CONFIG);
    let r = home
        .ok(&[
            "request",
            "photo",
            "--requires",
            "take-photo",
            "--needed-by",
            "tomorrow 9:00",
        ])
        .trim()
        .to_owned();
    let file = std::fs::read_to_string(
        home.path()
            .join(format!("state=received/{r}.messe-af.yaml")),
    )
    .unwrap();
    let line = file
        .lines()
        .find(|l| l.trim_start().starts_with("needed_by:"))
        .unwrap_or_else(|| panic!("{file}"));
    let value = line
        .split_once(':')
        .unwrap()
        .1
        .trim()
        .trim_matches(['"', '\'']);
    let at = chrono::DateTime::parse_from_rfc3339(value).unwrap_or_else(|e| panic!("{value}: {e}"));
    let local = at.with_timezone(&chrono::Local);
    assert_eq!(local.format("%H:%M").to_string(), "09:00", "{value}");
    assert_eq!(
        local.date_naive(),
        chrono::Local::now().date_naive().succ_opt().unwrap(),
        "{value}"
    );
    // RFC 3339 is kept as written, with its offset; a duration counts from now.
    let r2 = home
        .ok(&[
            "request",
            "photo",
            "--needed-by",
            "2030-01-02T03:04:05-08:00",
        ])
        .trim()
        .to_owned();
    let file = std::fs::read_to_string(
        home.path()
            .join(format!("state=received/{r2}.messe-af.yaml")),
    )
    .unwrap();
    assert!(file.contains("2030-01-02T03:04:05-08:00"), "{file}");
    home.ok(&["request", "photo", "--needed-by", "2h"]);
    home.ok(&[
        "claim",
        &r,
        "--as",
        "teague-phone",
        "--eta",
        "today 23:59",
        "--estimate",
        "45m",
    ]);
    let shown = home.ok(&["show", &r]);
    assert!(shown.contains("estimate: PT45M"), "{shown}");
    let err = home.fails(&["request", "photo", "--needed-by", "soonish"], 2);
    assert!(
        err.contains("--needed-by: cannot read \"soonish\"") && err.contains("tomorrow 9:00"),
        "{err}"
    );
    let err = home.fails(&["archive", "--older-than", "tomorrow"], 2);
    assert!(err.contains("is not a time gone by"), "{err}");
    home.ok(&["archive", "--older-than", "2 days ago"]);
}

#[test]
fn the_version_and_healthz_name_the_commit_and_build_day() {
    let home = Home::with_config(CONFIG);
    let version = home.ok(&["--version"]);
    assert!(
        version.starts_with("mess 0.")
            && version.contains("(commit ")
            && version.contains(", built 20"),
        "{version}"
    );
    let server = Server::start(&home);
    let health = get(server.port, "/healthz", &[]);
    let body: serde_json::Value =
        serde_json::from_str(health.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["status"], "ok");
    assert!(
        version.contains(body["commit"].as_str().unwrap()),
        "{body} {version}"
    );
    assert!(
        version.contains(body["built"].as_str().unwrap()),
        "{body} {version}"
    );
}

/// Runs `command` (a shell line) under a pseudo-terminal of `columns` columns (util-linux
/// `script`); what the terminal showed.
fn on_a_terminal(home: &Home, columns: u16, command: &str) -> String {
    let out = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("stty cols {columns} rows 40; {command}"),
            "/dev/null",
        ])
        .env("MESS_HOME", home.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                Path::new(env!("CARGO_BIN_EXE_mess"))
                    .parent()
                    .unwrap()
                    .display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env_remove("MESS_AGENT_ID")
        .env_remove("MESS_DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{command}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_bars_and_fitted_tables_on_a_terminal_and_plain_lines_otherwise() {
    let home = Home::with_config(CONFIG);
    // On a terminal: a progress bar that ends at the total.
    let shown = on_a_terminal(&home, 100, "mess demo seed --threads 400");
    assert!(
        shown.contains("seeding") && shown.contains("400/400"),
        "{shown}"
    );
    // In a pipe: no bar, no control sequences.
    let out = home.run(&["demo", "seed", "--threads", "50", "--seed", "7"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = on_a_terminal(&home, 100, "mess fsck");
    assert!(shown.contains("checking"), "{shown}");
    // A table fits a narrow terminal; the same query in a pipe keeps one line per row.
    let sql = "SELECT ref, intent, requestor, executor, status, created FROM threads ORDER BY ref LIMIT 5";
    let shown = on_a_terminal(&home, 60, &format!("mess query \"{sql}\""));
    for line in shown.lines() {
        let width = console_width(line);
        assert!(width <= 60, "{width} columns: {line:?}\n{shown}");
    }
    let piped = home.ok(&["query", sql]);
    assert_eq!(piped.lines().count(), 6, "{piped}");
    assert!(piped.lines().any(|l| l.chars().count() > 60), "{piped}");
}

/// The columns a terminal line takes (its characters, less escape sequences and the carriage
/// returns the terminal adds).
fn console_width(line: &str) -> usize {
    let mut n = 0;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c != '\r' {
            n += 1;
        }
    }
    n
}
