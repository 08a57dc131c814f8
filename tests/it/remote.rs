//! `mess --exchange NAME|URL`: the agent and executor commands of a machine without the home
//! act on a real `mess serve` over loopback HTTP, with API keys, and print what the same
//! commands print on the exchange's own machine.

use std::process::Output;

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

/// `mess` on `client`'s home with `key` as `MESS_API_KEY`.
fn with_key(client: &Home, key: &str, args: &[&str]) -> Output {
    client
        .command(args)
        .env("MESS_API_KEY", key)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn the_cli_acts_on_a_remote_exchange_as_its_key_and_prints_what_a_local_command_prints() {
    let house = Home::with_config(CONFIG);
    let agent = house
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let robot = house
        .ok(&["token", "executor", "roomba-kitchen"])
        .trim()
        .to_owned();
    let server = Server::start(&house);
    let url = format!("http://127.0.0.1:{}", server.port);
    // A laptop with no copy of the home: the exchange by name, its key from the environment.
    let laptop = Home::with_config(&format!(
        "exchanges:\n  house:\n    type: remote\n    url: {url}\n    api_key: ${{HOUSE_KEY}}\n"
    ));
    let out = laptop
        .command(&[
            "--exchange",
            "house",
            "request",
            "vacuum the kitchen",
            "--requires",
            "vacuum-floor",
            "--id",
            "job-1",
        ])
        .env("HOUSE_KEY", &agent)
        .output()
        .unwrap();
    let said = stdout(&out);
    let local = house.ok(&["status", "--as", "claude-agent", "--format", "yaml"]);
    let r = said
        .split_whitespace()
        .find(|w| w.starts_with("20") && w.len() == 14)
        .unwrap_or_else(|| panic!("no ref in {said}"))
        .to_owned();
    assert!(local.contains(&r), "{local}");
    // Sent again with the same client id: the same thread.
    let again = stdout(&with_key(
        &laptop,
        &agent,
        &[
            "--exchange",
            &url,
            "request",
            "vacuum the kitchen",
            "--requires",
            "vacuum-floor",
            "--id",
            "job-1",
        ],
    ));
    assert!(again.contains(&r), "{again}");

    // The robot's controller claims and completes through the URL.
    stdout(&with_key(
        &laptop,
        &robot,
        &["--exchange", &url, "claim", &r],
    ));
    stdout(&with_key(
        &laptop,
        &robot,
        &["--exchange", &url, "complete", &r, "--text", "kitchen done"],
    ));
    // The same output as on the exchange's machine: the file byte for byte, the status alike.
    let shown = stdout(&with_key(
        &laptop,
        &agent,
        &["--exchange", &url, "show", &r],
    ));
    assert_eq!(shown, house.ok(&["show", &r, "--as", "claude-agent"]));
    for format in ["yaml", "json", "table"] {
        let remote = stdout(&with_key(
            &laptop,
            &agent,
            &["--exchange", &url, "status", &r, "--format", format],
        ));
        let here = house.ok(&["status", &r, "--as", "claude-agent", "--format", format]);
        assert_eq!(remote, here, "status --format {format}");
    }
    let all = stdout(&with_key(
        &laptop,
        &agent,
        &["--exchange", &url, "status", "--all", "--format", "json"],
    ));
    assert!(all.contains(&r) && all.contains("completed"), "{all}");

    // A cancel through the exchange.
    let second = stdout(&with_key(
        &laptop,
        &agent,
        &["--exchange", &url, "request", "photo of the porch"],
    ));
    let r2 = second
        .split_whitespace()
        .find(|w| w.starts_with("20") && w.len() == 14)
        .unwrap()
        .to_owned();
    stdout(&with_key(
        &laptop,
        &agent,
        &["--exchange", &url, "cancel", &r2, "--reason", "not needed"],
    ));
    let status = house.ok(&["status", &r2, "--as", "claude-agent", "--format", "yaml"]);
    assert!(status.contains("cancelled"), "{status}");

    // What the key may not see answers as what does not exist.
    let hidden = with_key(&laptop, &robot, &["--exchange", &url, "show", &r2]);
    assert_eq!(hidden.status.code(), Some(1));
    let missing = with_key(
        &laptop,
        &robot,
        &["--exchange", &url, "show", "2026-01-01-999"],
    );
    assert_eq!(
        String::from_utf8_lossy(&hidden.stderr).replace(&r2, "REF"),
        String::from_utf8_lossy(&missing.stderr).replace("2026-01-01-999", "REF")
    );
    // A wrong key is refused; commands that need the home refuse --exchange.
    let refused = with_key(&laptop, "nonsense", &["--exchange", &url, "show", &r]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains(&url), "{err}");
    let err = laptop.fails(&["--exchange", "house", "token", "agent", "x"], 2);
    assert!(err.contains("works on a local home"), "{err}");
    let err = laptop.fails(&["--exchange", "elsewhere", "status"], 2);
    assert!(err.contains("known: house"), "{err}");
    let (code, body) = server.get(&format!("/threads/{r}?format=pdf"), &agent);
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("messe-af"), "{body}");
    drop(server);

    // The exchange is down: a clear error naming it, soon.
    let started = std::time::Instant::now();
    let down = with_key(&laptop, &agent, &["--exchange", &url, "status", &r]);
    assert_eq!(down.status.code(), Some(1));
    let err = String::from_utf8_lossy(&down.stderr);
    assert!(err.contains("unreachable") && err.contains(&url), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_local_entry_of_exchanges_is_another_home() {
    let other = Home::with_config(CONFIG);
    let r = other.ok(&["request", "dice the onions", "--as", "claude-agent"]);
    let here = Home::with_config(&format!(
        "exchanges:\n  pantry:\n    type: local\n    path: {}\n",
        other.path().display()
    ));
    let shown = here.ok(&[
        "--exchange",
        "pantry",
        "show",
        r.trim(),
        "--as",
        "claude-agent",
    ]);
    assert_eq!(shown, other.ok(&["show", r.trim(), "--as", "claude-agent"]));
    let err = Home::with_config("exchanges:\n  x: {type: faraway}\n").fails(&["status"], 1);
    assert!(err.contains("exchanges.x.type"), "{err}");
}

#[test]
fn credentials_in_an_exchange_url_never_appear_and_the_refusal_says_where_the_key_goes() {
    let client = Home::with_config(
        "exchanges:\n  town:\n    type: remote\n    url: https://alice:s3cret@town.example\n    api_key: k-123\n",
    );
    for args in [
        vec!["--exchange", "http://alice:s3cret@127.0.0.1:9", "status"],
        vec!["--exchange", "town", "status"],
    ] {
        let out = with_key(&client, "k-123", &args);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !said.contains("s3cret") && !said.contains("alice"),
            "{said}"
        );
        assert!(said.contains("MESS_API_KEY"), "{said}");
    }
    // Without a key the refusal names the exchange, with its userinfo hidden.
    let out = client
        .command(&["--exchange", "http://alice:s3cret@127.0.0.1:9", "status"])
        .env_remove("MESS_API_KEY")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("http://***@127.0.0.1:9"), "{said}");
    assert!(!said.contains("s3cret"), "{said}");
}
