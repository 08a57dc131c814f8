//! Exchanges that forward: three real `mess serve` processes on loopback (a house, a town, a
//! city), each forwarding what it cannot serve to the next through an executor entry with
//! `exchange: {url, api_key}`. A request travels two hops, is answered at the end, and the
//! answer comes back into the first thread; a cancel travels the other way; a loop of
//! forwarding entries is refused at the door.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::Home;
use crate::support::server::Server;

fn with_key(home: &Home, key: &str, args: &[&str]) -> Output {
    home.command(args)
        .env("MESS_API_KEY", key)
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The first ref (`YYYY-MM-DD-NNN`) in `text`.
fn ref_in(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .find(|w| w.starts_with("20") && w.len() == 14 && w.as_bytes()[4] == b'-')
        .unwrap_or_else(|| panic!("no ref in {text}"))
        .to_owned()
}

/// The `ref` under `delegated_to:` in a thread file.
fn delegated_ref(file: &str) -> Option<String> {
    let after = &file[file.find("delegated_to:")?..];
    let line = after.lines().find(|l| l.trim_start().starts_with("ref:"))?;
    Some(
        line.trim_start()
            .trim_start_matches("ref:")
            .trim()
            .trim_matches('"')
            .to_owned(),
    )
}

/// Waits up to 30 s for `check` to hold of `home`'s thread `r` (as `who` shows it).
fn until(home: &Home, r: &str, who: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let file = home.ok(&["show", r, "--as", who]);
        if check(&file) {
            return file;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: not after 30 s:\n{file}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An executor entry forwarding `capability` to the exchange at `port` with the key in `env`.
fn forwarding(id: &str, capability: &str, port: u16, env: &str) -> String {
    format!(
        "  {id}:\n    capabilities: [{capability}]\n    exchange:\n      url: http://127.0.0.1:{port}\n      api_key: ${{{env}}}\n"
    )
}

#[test]
fn a_request_is_forwarded_two_hops_answered_there_and_the_answer_comes_back() {
    // The city has the grocer; the town forwards groceries to the city; the house to the town.
    let city = Home::with_config("executors:\n  grocer:\n    capabilities: [buy-groceries]\n");
    let town_at_city = city.ok(&["token", "agent", "town"]).trim().to_owned();
    let grocer = city.ok(&["token", "executor", "grocer"]).trim().to_owned();
    let city_server = Server::start(&city);
    let town = Home::with_config(&format!(
        "executors:\n{}",
        forwarding("city", "buy-groceries", city_server.port, "CITY_KEY")
    ));
    let house_at_town = town.ok(&["token", "agent", "house"]).trim().to_owned();
    let town_server = Server::start_with(&town, &[("CITY_KEY", &town_at_city)]);
    let house = Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  roomba-kitchen:\n    capabilities: [vacuum-floor]\n{}",
        forwarding("town", "buy-groceries", town_server.port, "TOWN_KEY")
    ));
    let _house_server = Server::start_with(&house, &[("TOWN_KEY", &house_at_town)]);

    // Nobody in the house can buy groceries: the request goes to the town, then the city. It
    // offers shells: the house holds them in escrow; the peers are not asked for any.
    house.ok(&["shells", "grant", "claude-agent", "10"]);
    let said = house.with_stdin(
        &["send", "-"],
        "MESS:\n  - request:\n      intent: buy onions\n      requires: [buy-groceries]\n      compensation: {shells: 5, note: two will do}\n",
    );
    let at_house = ref_in(&ok(said));
    let file = until(
        &house,
        &at_house,
        "claude-agent",
        "forwarded to the town",
        |f| delegated_ref(f).is_some(),
    );
    assert!(file.contains("executor: town"), "{file}");
    let at_town = delegated_ref(&file).unwrap();
    let town_file = until(&town, &at_town, "house", "forwarded to the city", |f| {
        delegated_ref(f).is_some()
    });
    let at_city = delegated_ref(&town_file).unwrap();
    // Both files show the chain: the town's request came from the house; the city's from both.
    assert!(town_file.contains("delegated_from:"), "{town_file}");
    assert!(
        town_file.contains("note: two will do") && !town_file.contains("shells"),
        "{town_file}"
    );
    assert!(
        town_file.contains(&format!("ref: {at_house}")),
        "{town_file}"
    );
    let city_file = city.ok(&["show", &at_city, "--as", "town"]);
    assert!(city_file.contains("delegated_from:"), "{city_file}");
    assert!(city_file.contains("intent: buy onions"), "{city_file}");
    assert_eq!(
        city_file.matches("exchange: mess-").count(),
        2,
        "{city_file}"
    );

    // The grocer answers in the city; the answer comes back to the house's thread.
    let url = format!("http://127.0.0.1:{}", city_server.port);
    ok(with_key(
        &city,
        &grocer,
        &["--exchange", &url, "claim", &at_city],
    ));
    ok(with_key(
        &city,
        &grocer,
        &[
            "--exchange",
            &url,
            "complete",
            &at_city,
            "--text",
            "two onions bought",
        ],
    ));
    let file = until(
        &house,
        &at_house,
        "claude-agent",
        "the answer back home",
        |f| f.contains("status: completed") && f.contains("two onions bought"),
    );
    assert!(file.contains("peer_message:"), "{file}");
    let status = house.ok(&["status", &at_house, "--as", "claude-agent"]);
    assert!(status.contains("completed"), "{status}");
    // The escrow is released at home to the forwarding entry, the account of the town.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while house.ok(&["shells", "balance", "town"]).trim() != "5" {
        assert!(
            std::time::Instant::now() < deadline,
            "the escrow was never released"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(house.ok(&["shells", "balance", "claude-agent"]).trim(), "5");
    assert!(
        town.ok(&["show", &at_town, "--as", "house"])
            .contains("two onions bought")
    );

    // A cancel in the house reaches the city.
    let said = house.ok(&["request", "buy leeks", "--requires", "buy-groceries"]);
    let leeks = ref_in(&said);
    let file = until(&house, &leeks, "claude-agent", "leeks forwarded", |f| {
        delegated_ref(f).is_some()
    });
    let leeks_town = delegated_ref(&file).unwrap();
    let town_file = until(&town, &leeks_town, "house", "leeks forwarded on", |f| {
        delegated_ref(f).is_some()
    });
    let leeks_city = delegated_ref(&town_file).unwrap();
    house.ok(&["cancel", &leeks, "--reason", "found some"]);
    until(
        &city,
        &leeks_city,
        "town",
        "the cancel reaches the city",
        |f| f.contains("status: cancelled"),
    );
}

#[test]
fn a_loop_of_forwarding_exchanges_is_refused_at_the_door() {
    // Two exchanges that forward groceries to each other: the second hop is refused, because
    // the request's chain names the exchange it would come back to.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let east = Home::with_config("");
    let west = Home::with_config("");
    let west_at_east = east.ok(&["token", "agent", "west"]).trim().to_owned();
    let east_at_west = west.ok(&["token", "agent", "east"]).trim().to_owned();
    std::fs::write(
        east.path().join("config.yaml"),
        format!(
            "agent_id: claude-agent\nexecutors:\n{}",
            forwarding("west", "buy-groceries", port, "WEST_KEY")
        ),
    )
    .unwrap();
    let east_server = Server::start_with(&east, &[("WEST_KEY", &east_at_west)]);
    std::fs::write(
        west.path().join("config.yaml"),
        format!(
            "executors:\n{}",
            forwarding("east", "buy-groceries", east_server.port, "EAST_KEY")
        ),
    )
    .unwrap();
    let _west_server = Server::start_on(
        &west,
        &format!("127.0.0.1:{port}"),
        &[("EAST_KEY", &west_at_east)],
    );

    let said = east.ok(&["request", "buy onions", "--requires", "buy-groceries"]);
    let at_east = ref_in(&said);
    let file = until(&east, &at_east, "claude-agent", "forwarded west", |f| {
        delegated_ref(f).is_some()
    });
    let at_west = delegated_ref(&file).unwrap();
    // West's attempt to hand it back is refused by east, and west's thread says why.
    let west_file = until(&west, &at_west, "east", "the refusal noted", |f| {
        f.contains("loop")
    });
    assert!(!west_file.contains("delegated_to:"), "{west_file}");
    // East holds one thread only: the loop made nothing there.
    let all = east.ok(&["status", "--all", "--as", "west", "--format", "json"]);
    assert!(!all.contains("\"requestor\": \"west\""), "{all}");
    let mine = east.ok(&[
        "status",
        "--all",
        "--as",
        "claude-agent",
        "--format",
        "json",
    ]);
    assert_eq!(mine.matches("buy onions").count(), 1, "{mine}");

    // A request that names the exchange in its chain is refused outright, with the reason.
    let (status, body) = east_server.post_yaml(
        &west_at_east,
        "MESS:\n  - request:\n      intent: buy onions\n      delegated_from:\n        - exchange: mess-0000\n          ref: 2026-01-01-001\n        - exchange: mess-0001\n          ref: 2026-01-01-002\n        - exchange: mess-0002\n          ref: 2026-01-01-003\n        - exchange: mess-0003\n          ref: 2026-01-01-004\n",
    );
    assert!(
        status >= 400 && body.contains("exchanges"),
        "{status} {body}"
    );
}

#[test]
fn a_forwarding_entry_added_while_the_server_runs_is_followed() {
    let town = Home::with_config("executors:\n  grocer:\n    capabilities: [buy-groceries]\n");
    let house_at_town = town.ok(&["token", "agent", "house"]).trim().to_owned();
    let grocer = town.ok(&["token", "executor", "grocer"]).trim().to_owned();
    let town_server = Server::start(&town);
    let house = Home::with_config(
        "agent_id: claude-agent\nexecutors:\n  roomba-kitchen:\n    capabilities: [vacuum-floor]\n",
    );
    let _house_server = Server::start_with(&house, &[("TOWN_KEY", &house_at_town)]);
    // The operator adds the town while the house's server runs (after it has looked for peers).
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(
        house.path().join("config.yaml"),
        format!(
            "agent_id: claude-agent\nexecutors:\n  roomba-kitchen:\n    capabilities: [vacuum-floor]\n{}",
            forwarding("town", "buy-groceries", town_server.port, "TOWN_KEY")
        ),
    )
    .unwrap();
    let said = house.ok(&["request", "buy onions", "--requires", "buy-groceries"]);
    let at_house = ref_in(&said);
    let file = until(&house, &at_house, "claude-agent", "forwarded", |f| {
        delegated_ref(f).is_some()
    });
    let at_town = delegated_ref(&file).unwrap();
    let url = format!("http://127.0.0.1:{}", town_server.port);
    ok(with_key(
        &town,
        &grocer,
        &["--exchange", &url, "claim", &at_town],
    ));
    ok(with_key(
        &town,
        &grocer,
        &[
            "--exchange",
            &url,
            "complete",
            &at_town,
            "--text",
            "onions bought",
        ],
    ));
    until(&house, &at_house, "claude-agent", "the answer back", |f| {
        f.contains("status: completed") && f.contains("onions bought")
    });
}

/// A hostile peer on loopback: every request is answered `200 OK` with a body that declares no
/// length and goes on for `total` bytes or until the reader hangs up (`/events` as one event
/// that never ends). Its port and the bytes it got out.
fn streaming_peer(total: u64) -> (u16, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let events = head.starts_with("GET /events");
                let (kind, piece): (&str, Vec<u8>) = if events {
                    ("text/event-stream", b"data: x".repeat(64 * 1024 / 7))
                } else {
                    ("application/yaml", b"threads: [".repeat(64 * 1024 / 10))
                };
                let answer =
                    format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n");
                if stream.write_all(answer.as_bytes()).is_err() {
                    return;
                }
                let mut out = 0u64;
                while out < total {
                    if stream.write_all(&piece).is_err() {
                        break;
                    }
                    out += piece.len() as u64;
                    counter.fetch_add(piece.len() as u64, Ordering::Relaxed);
                }
            });
        }
    });
    (port, sent)
}

/// A field of `/proc/PID/status` in MiB (`VmHWM`, `VmRSS`).
fn mib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap()
        / 1024
}

#[test]
#[expect(
    clippy::print_stderr,
    reason = "prints the measurement docs/guide/performance.md quotes (seen with --nocapture)"
)]
fn a_peer_that_streams_without_end_is_cut_off_at_the_cap_and_memory_stays_flat() {
    const TWO_GIB: u64 = 2 * 1024 * 1024 * 1024;
    let (port, sent) = streaming_peer(TWO_GIB);
    let house = Home::with_config(&format!(
        "agent_id: claude-agent\nexecutors:\n  town:\n    capabilities: [buy-groceries]\n    exchange:\n      url: http://127.0.0.1:{port}\n      api_key: town-key\ndispatch:\n  retry: {{attempts: 2, first: 1s, max: 1s}}\n"
    ));
    let server = Server::start_with(&house, &[("MESS_ROUTE_RETRY_MS", "300")]);
    std::thread::sleep(Duration::from_millis(500));
    let quiet = mib(server.pid(), "VmHWM");
    let r = ref_in(&house.ok(&["request", "buy onions", "--requires", "buy-groceries"]));
    // Both attempts to forward read at most the cap, then give up with a clear note.
    let file = until(&house, &r, "claude-agent", "the forward given up", |f| {
        f.contains("notify_failed")
    });
    assert!(file.contains("cut off"), "{file}");
    assert!(file.contains("status: pending"), "{file}");
    let peak = mib(server.pid(), "VmHWM");
    let streamed = sent.load(std::sync::atomic::Ordering::Relaxed) / (1024 * 1024);
    eprintln!(
        "a peer streaming without a length: the server read {streamed} MiB over every connection and peaked at {peak} MiB (quiet: {quiet} MiB)"
    );
    assert!(
        peak < quiet + 200,
        "the server grew from {quiet} MiB to {peak} MiB"
    );
    assert!(streamed < 1024, "the server read {streamed} MiB");
    // The CLI on the same peer: the same cap, and the error says what happened.
    let out = with_key(
        &house,
        "town-key",
        &["--exchange", &format!("http://127.0.0.1:{port}"), "status"],
    );
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("over the limit of 64 MiB"), "{said}");
}
