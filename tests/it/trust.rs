//! The trust boundary, tried as a hostile or careless user would, against the real binary: data
//! that would stop routing, answers that would tell hidden threads from absent ones, links and
//! suggestions past their executor's part, roles, strict wire formats, files from other writers
//! and crashes, log lines and file modes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn key(home: &Home, role: &str, id: &str) -> String {
    home.ok(&["token", role, id]).trim().to_owned()
}

fn request(server: &Server, agent: &str, yaml_body: &str) -> String {
    let (status, body) = server.post_yaml(agent, yaml_body);
    assert_eq!(status, 200, "{body}");
    json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Polls `check` every 50 ms until it holds, for at most 10 s; whether it did.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

/// The error message of an error body.
fn message(body: &str) -> String {
    json(body)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn bad_schedules_and_capabilities_are_refused_at_the_door_and_contained_on_disk() {
    let home = Home::with_config(
        "executors:
  teague-phone:
    capabilities: [vacuum-floor]
    notify: { mail: teague-phone }
",
    );
    let evil = key(&home, "executor", "evil");
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start_with(&home, &[("MESS_ROUTE_RETRY_MS", "300")]);

    // At the door: each is refused with 422 naming the field, and nothing is stored.
    let register = |body: &str| server.post_yaml(&evil, body);
    for (body, field) in [
        (
            "MESS:\n  - config:\n      executor: {id: evil, capabilities: [vacuum-floor], availability: schedule, schedule: '0 */0 * * *'}\n",
            "MESS[0].config.executor.schedule",
        ),
        (
            "MESS:\n  - config:\n      executor: {id: evil, capabilities: ['{x']}\n",
            "MESS[0].config.executor.capabilities[0]",
        ),
        (
            "MESS:\n  - config:\n      executor: {id: evil, capabilities: ['a\"b']}\n",
            "MESS[0].config.executor.capabilities[0]",
        ),
        (
            "MESS:\n  - config:\n      executor: {id: evil, capabilities: [x], availability: schedule, schedule: '0 25 * * *'}\n",
            "MESS[0].config.executor.schedule",
        ),
        (
            "MESS:\n  - config:\n      executor: {id: evil, capabilities: [x], availability: schedule, schedule: '0 8-22 * * mon-fri', timezone: Europe/Berln}\n",
            "MESS[0].config.executor.timezone",
        ),
        (
            "MESS:\n  - config:\n      executor: {id: evil, capabilities: [x], location: {lat: 100, lng: 0}}\n",
            "MESS[0].config.executor.location",
        ),
    ] {
        let (status, reply) = register(body);
        assert_eq!(status, 422, "{body}: {reply}");
        assert!(message(&reply).starts_with(field), "{field}: {reply}");
    }
    assert!(!home.path().join("executors/evil.yaml").exists());
    let (status, reply) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: x\n      requires: ['{x']\n",
    );
    assert_eq!(status, 422, "{reply}");
    assert!(
        message(&reply).starts_with("MESS[0].request.requires[0]"),
        "{reply}"
    );

    // Already on disk (written by hand or by an older version): skipped, reported, contained.
    std::fs::create_dir_all(home.path().join("executors")).unwrap();
    std::fs::write(
        home.path().join("executors/zero-step.yaml"),
        "id: zero-step\ncapabilities: [vacuum-floor]\navailability: schedule\nschedule: '0 */0 * * *'\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("executors/braces.yaml"),
        "id: braces\ncapabilities: ['{x', 'a\"b', vacuum-floor]\n",
    )
    .unwrap();
    let stray = "2026-01-02-001";
    std::fs::create_dir_all(home.path().join("state=received")).unwrap();
    std::fs::write(
        home.path().join(format!("state=received/{stray}.messe-af.yaml")),
        format!(
            "ref: {stray}\nrequestor: claude-agent\nstatus: pending\ncreated: 2026-01-02T00:00:00Z\nupdated: 2026-01-02T00:00:00Z\nintent: odd\nrequires: ['{{x']\nhistory:\n  - action: created\n    at: 2026-01-02T00:00:00Z\n    by: claude-agent\n---\nfrom: claude-agent\nreceived: 2026-01-02T00:00:00Z\nMESS:\n  - request:\n      intent: odd\n      requires: ['{{x']\n"
        ),
    )
    .unwrap();

    // Routing and notifications for everyone else go on.
    let r = request(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: vacuum the kitchen\n      requires: [vacuum-floor]\n",
    );
    assert!(
        eventually(|| {
            let (_, body) = server.get(&format!("/threads/{r}"), &agent);
            body.contains("routed to teague-phone")
        }),
        "the good request was not routed"
    );
    let inbox = home.path().join(".mail/teague-phone");
    assert!(
        eventually(|| std::fs::read_dir(&inbox).is_ok_and(|d| d.count() > 0)),
        "no notice reached teague-phone"
    );
    // The thread that cannot be routed says why, in its status and in fsck.
    assert!(
        eventually(|| {
            let (_, body) = server.get(&format!("/threads/{stray}"), &agent);
            body.contains("unroutable")
        }),
        "the stray thread does not say why it waits"
    );
    let status = home.ok(&["status", stray, "--format", "json"]);
    assert!(status.contains("waiting_because"), "{status}");
    let fsck = home.run(&["fsck"]);
    let said =
        String::from_utf8_lossy(&fsck.stdout).into_owned() + &String::from_utf8_lossy(&fsck.stderr);
    for expected in ["pending and not routed", "zero-step", "braces"] {
        assert!(said.contains(expected), "{expected}: {said}");
    }
    let warnings = String::from_utf8_lossy(&home.run(&["status"]).stderr).into_owned();
    assert!(
        warnings.contains("zero-step") && warnings.contains("braces"),
        "{warnings}"
    );

    // Every key holder's SQL keeps answering.
    for k in [&agent, &evil] {
        let (status, body) =
            server.get("/query?sql=SELECT%20count(*)%20AS%20n%20FROM%20threads", k);
        assert_eq!(status, 200, "{body}");
        let (status, body) = server.get("/query?sql=SELECT%20id%20FROM%20executors", k);
        assert_eq!(status, 200, "{body}");
    }
    let out = home.ok(&[
        "query",
        "SELECT id, capabilities FROM executors ORDER BY id",
    ]);
    assert!(out.contains("teague-phone"), "{out}");
}

#[test]
fn hidden_threads_answer_exactly_like_absent_ones_everywhere() {
    let home = Home::with_config(CONFIG);
    let alice = key(&home, "agent", "alice");
    let mallory = key(&home, "agent", "mallory");
    let server = Server::start(&home);
    let hidden = request(
        &server,
        &alice,
        "MESS:\n  - request:\n      intent: private errand\n      id: errand\n",
    );
    let absent = "2025-01-01-999";
    let same = |what: &str, with_hidden: (u16, String), with_absent: (u16, String)| {
        let (s1, b1) = with_hidden;
        let (s2, b2) = with_absent;
        assert_eq!(s1, s2, "{what}: {b1} / {b2}");
        assert_eq!(
            b1.replace(&hidden, "REF"),
            b2.replace(absent, "REF"),
            "{what} tells the two apart"
        );
    };
    same(
        "GET /threads/{ref}",
        server.get(&format!("/threads/{hidden}"), &mallory),
        server.get(&format!("/threads/{absent}"), &mallory),
    );
    for payload in [
        "reply:\n      re: REF\n      reason: hi",
        "cancel:\n      re: REF",
        "query:\n      type: status\n      re: REF",
    ] {
        let send = |r: &str| {
            server.post_yaml(
                &mallory,
                &format!("MESS:\n  - {}\n", payload.replace("REF", r)),
            )
        };
        same(payload, send(&hidden), send(absent));
    }
    let depend = |r: &str| {
        server.post_yaml(
            &mallory,
            &format!(
                "MESS:\n  - request:\n      intent: after\n      constraints:\n        depends_on: [{r}]\n"
            ),
        )
    };
    let (status, body) = depend(&hidden);
    assert_ne!(
        status, 200,
        "mallory may not depend on alice's thread: {body}"
    );
    same("depends_on", depend(&hidden), depend(absent));
}

#[test]
fn suggestions_and_links_stop_at_the_executor_s_part() {
    let home = Home::with_config(
        "executors:
  xavier:
    capabilities: [vacuum-floor]
  yvonne:
    capabilities: [vacuum-floor]
",
    );
    let agent = key(&home, "agent", "claude-agent");
    let xavier = key(&home, "executor", "xavier");
    let yvonne = key(&home, "executor", "yvonne");
    let server = Server::start(&home);
    let r = request(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n",
    );
    let link = home
        .ok(&["link", &r, "--executor", "xavier"])
        .trim()
        .to_owned();
    let token = link.split("token=").nth(1).unwrap().to_owned();
    let (status, body) = server.send("GET", &format!("/thread/{r}?token={token}"), &[], b"");
    assert_eq!(status, 200, "{body}");

    // xavier's link follows the thread's events until someone else takes it.
    let mut events = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    events
        .write_all(
            format!("GET /thread/{r}/events?token={token} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
        .unwrap();
    events
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));

    let (status, body) = server.post_yaml(
        &yvonne,
        &format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    );
    assert_eq!(status, 200, "{body}");

    // The stream ends (the server closes it) after telling of the claim.
    let mut seen = Vec::new();
    let ended = {
        let mut buf = [0u8; 4096];
        loop {
            match events.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(_) => break false,
            }
        }
    };
    let seen = String::from_utf8_lossy(&seen).into_owned();
    assert!(ended, "the link's event stream did not end: {seen}");
    assert!(seen.contains("claimed"), "{seen}");

    // The link no longer reads the thread, exactly as for a thread that does not exist.
    let (status, body) = server.send("GET", &format!("/thread/{r}?token={token}"), &[], b"");
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains("yvonne"), "{body}");

    // xavier may not suggest on yvonne's thread, and the refusal tells nothing of her.
    let (status, body) = server.post_yaml(
        &xavier,
        &format!("MESS:\n  - suggestion:\n      re: {r}\n      type: alternative\n      intent: use the mop\n"),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        !body.contains("yvonne") && !body.contains("claimed"),
        "{body}"
    );
    // yvonne, its claimant, may.
    let (status, body) = server.post_yaml(
        &yvonne,
        &format!("MESS:\n  - suggestion:\n      re: {r}\n      type: alternative\n      intent: use the mop\n"),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn wire_formats_are_strict_and_answers_say_something() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let phone = key(&home, "executor", "teague-phone");
    let server = Server::start(&home);
    let post_json = |auth: &str, body: &str| {
        server.send(
            "POST",
            "/mess",
            &[
                ("Authorization", auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
    };
    // The scheme is case-insensitive.
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let (status, body) = server.send(
            "GET",
            "/threads",
            &[("Authorization", &format!("{scheme} {agent}"))],
            b"",
        );
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    let auth = format!("Bearer {agent}");
    // Invalid JSON is a 400 with the position, not read as YAML.
    let (status, body) = post_json(&auth, "{\"MESS\": [{\"request\": {\"intent\": 'x'}}]}");
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("line 1 column"), "{body}");
    // Valid JSON with a surrogate pair is JSON's meaning of it.
    let (status, body) = post_json(
        &auth,
        r#"{"MESS": [{"request": {"intent": "feed the cat \ud83d\udc31", "requires": ["take-photo"]}}]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let r = json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = server.get(&format!("/threads/{r}"), &agent);
    assert!(body.contains("feed the cat \u{1f431}"), "{body}");

    // A blank answer is refused.
    let (status, body) = server.post_yaml(
        &phone,
        &format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post_yaml(
        &phone,
        &format!(
            "MESS:\n  - status:\n      re: {r}\n      code: needs_input\n      questions:\n        - {{field: color, question: Which bowl?}}\n"
        ),
    );
    assert_eq!(status, 200, "{body}");
    for blank in ["''", "'   '", "null", "[]"] {
        let (status, body) = server.post_yaml(
            &agent,
            &format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{color: {blank}}}\n"),
        );
        assert_eq!(status, 422, "{blank}: {body}");
        assert!(message(&body).contains("answers.color"), "{body}");
    }
}

#[test]
fn connections_are_bounded_and_links_are_checked_before_their_body() {
    let home = Home::with_config(CONFIG);
    let server = Server::start_with(&home, &[("MESS_HEADER_TIMEOUT_MS", "1500")]);
    // A thousand connections that never send a request do not keep /healthz from answering.
    let idle: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap())
        .collect();
    let started = Instant::now();
    let (status, body) = server.send("GET", "/healthz", &[], b"");
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "healthz took {:?}",
        started.elapsed()
    );
    // Connections that send no headers in time are closed by the server.
    let mut silent = idle.into_iter().next().unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    let started = Instant::now();
    let closed =
        matches!(silent.read(&mut buf), Ok(0)) || started.elapsed() < Duration::from_secs(9);
    assert!(closed, "an idle connection stayed open");

    drop(silent);

    // With every connection slot taken by clients that send nothing, the oldest of them make
    // room for newcomers: more silent connections than the server holds keep nobody out.
    let other = Home::with_config(CONFIG);
    let small = Server::start_with(&other, &[("MESS_MAX_CONNECTIONS", "100")]);
    let _silent: Vec<TcpStream> = (0..250)
        .map(|_| TcpStream::connect(("127.0.0.1", small.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let (status, body) = small.send("GET", "/healthz", &[], b"");
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(2));

    // A link POST with a bad token is refused before the body is read: the server answers at
    // once although the promised 100 MB never come.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(
            b"POST /thread/2026-01-01-001?token=forged HTTP/1.1\r\nHost: x\r\nContent-Type: application/yaml\r\nContent-Length: 100000000\r\n\r\n",
        )
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).unwrap_or(0);
    let head = String::from_utf8_lossy(&head[..n]).into_owned();
    assert!(head.starts_with("HTTP/1.1 401"), "{head:?}");
}

#[test]
fn files_from_other_writers_and_crashes_are_handled_without_loss() {
    let home = Home::with_config(CONFIG);
    let made = home.ok(&["request", "check the stove", "--requires", "take-photo"]);
    let r = made.lines().next().unwrap().trim().to_owned();
    let file = home
        .path()
        .join(format!("state=received/{r}.messe-af.yaml"));
    // Another writer leaves no final line break.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.trim_end_matches('\n')).unwrap();
    let before = home.ok(&["show", &r]);
    let out = home.run(&["fsck", "--repair"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !home.path().join(".mess/quarantine").exists()
            || std::fs::read_dir(home.path().join(".mess/quarantine"))
                .unwrap()
                .count()
                == 0,
        "fsck quarantined a whole message"
    );
    assert_eq!(home.ok(&["show", &r]), before);
    home.ok(&["claim", &r, "--as", "teague-phone"]);
    home.ok(&["complete", &r, "--as", "teague-phone", "--text", "all off"]);
    let shown = home.ok(&["show", &r]);
    assert!(shown.contains("intent: check the stove"), "{shown}");
    assert!(shown.contains("all off"), "{shown}");
    assert_eq!(
        shown.matches("\n---").count(),
        before.matches("\n---").count() + 2,
        "every message kept: {shown}"
    );

    // A crash leaves a temp file; a server start removes it and fsck is clean.
    let stale = home
        .path()
        .join(format!("state=finished/.{r}.messe-af.yaml.tmp-999999-1"));
    std::fs::write(&stale, "half a thread").unwrap();
    let outbox = home.path().join(".mess/outbox/queue");
    std::fs::create_dir_all(&outbox).unwrap();
    let stale_outbox = outbox.join(".x.yaml.tmp-999999-2");
    std::fs::write(&stale_outbox, "half a delivery").unwrap();
    // Left by a writer that died a while ago (a fresh one might still be at work).
    let aged = std::process::Command::new("touch")
        .args(["-d", "2 minutes ago"])
        .arg(&stale_outbox)
        .status()
        .unwrap();
    assert!(aged.success());
    let before = home.run(&["fsck"]);
    assert!(!before.status.success() || !String::from_utf8_lossy(&before.stdout).contains("clean"));
    drop(Server::start(&home));
    assert!(!stale.exists() && !stale_outbox.exists());
    let after = home.run(&["fsck"]);
    assert!(after.status.success(), "{after:?}");
}

#[test]
fn logs_cannot_be_forged_and_the_home_is_private() {
    let home = Home::with_config(
        "executors:
  teague-phone:
    capabilities: [vacuum-floor]
",
    );
    let evil = key(&home, "executor", "evil");
    let agent = key(&home, "agent", "claude-agent");
    let log = home.path().join("server.log");
    let mut child = home
        .command(&["serve", "--addr", "127.0.0.1:0"])
        .env("MESS_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line.trim().rsplit(':').next().unwrap().parse().unwrap();
    let send = |k: &str, body: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let head = format!(
            "POST /mess HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {k}\r\nContent-Type: application/yaml\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    // A notify entry whose name carries a line break reaches the log when the executor is
    // routed to: it must stay on its line.
    let reply = send(
        &evil,
        "MESS:\n  - config:\n      executor:\n        id: evil\n        capabilities: [vacuum-floor]\n        notify: {\"x\\nFORGED line\": y}\n",
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let reply = send(
        &agent,
        "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n",
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("FORGED"),
        "the entry was not logged: {logged}"
    );
    assert!(
        !logged.lines().any(|l| l.starts_with("FORGED")),
        "a forged line: {logged}"
    );
    assert!(!logged.contains('\u{1b}'), "terminal escapes in the log");

    // The home, thread files, mail and registrations are the owner's alone.
    let fresh = home.path().join("fresh");
    let run = |args: &[&str]| {
        let out = home
            .command(args)
            .env("MESS_HOME", &fresh)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    run(&["init"]);
    let r = run(&["request", "x", "--as", "claude-agent"]);
    let r = r.lines().next().unwrap().trim().to_owned();
    run(&["--as", "a", "mail", "send", "--to", "b", "--body", "hi"]);
    let message = home.path().join("register.yaml");
    std::fs::write(
        &message,
        "MESS:\n  - config:\n      executor: {id: robo, capabilities: [vacuum-floor]}\n",
    )
    .unwrap();
    run(&["send", message.to_str().unwrap(), "--as", "robo"]);
    assert_eq!(mode(&fresh.join("executors/robo.yaml")), 0o600);
    assert_eq!(mode(&fresh), 0o700);
    assert_eq!(
        mode(&fresh.join(format!("state=received/{r}.messe-af.yaml"))),
        0o600
    );
    assert_eq!(mode(&fresh.join("state=received")), 0o700);
    for entry in std::fs::read_dir(fresh.join(".mail/b")).unwrap().flatten() {
        if entry.path().is_file() {
            assert_eq!(mode(&entry.path()), 0o600, "{entry:?}");
        }
    }
}

#[test]
fn one_key_cannot_hold_every_stream_or_session() {
    let home = Home::with_config(CONFIG);
    let greedy = key(&home, "agent", "greedy");
    let other = key(&home, "agent", "other");
    let server = Server::start(&home);
    let open_events = |k: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.write_all(
            format!("GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {k}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).unwrap();
        (String::from_utf8_lossy(&head).into_owned(), s)
    };
    let held: Vec<_> = (0..16).map(|_| open_events(&greedy)).collect();
    assert!(held.iter().all(|(h, _)| h.starts_with("HTTP/1.1 200")));
    let (head, _) = open_events(&greedy);
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    let (head, _) = open_events(&other);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(held);

    // MCP sessions: each initialize opens one; a key holds at most 32.
    let initialize = |k: &str| {
        server.send(
            "POST",
            "/mcp",
            &[
                ("Authorization", &format!("Bearer {k}")),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        )
    };
    for _ in 0..32 {
        let (status, body) = initialize(&greedy);
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = initialize(&greedy);
    assert_eq!(status, 429, "{body}");
    let (status, body) = initialize(&other);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_message_built_to_exhaust_the_parser_is_refused_before_it_costs_memory() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let dense = format!(
        "MESS:\n  - request:\n      intent: x\n      data: [{}]\n",
        vec!["1"; 4 * 1024 * 1024].join(",")
    );
    let started = Instant::now();
    let (status, body) = server.post_yaml(&agent, &dense);
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("too many values"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The same bytes as one attachment are a fine message.
    let attachment = format!(
        "MESS:\n  - request:\n      intent: look\n      context:\n        - file: data:text/plain;base64,{}\n",
        "QUJD".repeat(2 * 1024 * 1024)
    );
    let (status, body) = server.post_yaml(&agent, &attachment);
    assert_eq!(status, 200, "{}", &body[..body.len().min(300)]);
    let peak_kib: u64 = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(
        peak_kib < 400 * 1024,
        "the server peaked at {} MiB reading two 8 MiB messages",
        peak_kib / 1024
    );
}

#[test]
fn an_agent_session_is_an_agent_unless_the_operator_says_otherwise() {
    let home = Home::with_config(CONFIG);
    let alice = key(&home, "agent", "alice");
    let server = Server::start(&home);
    let hidden = request(
        &server,
        &alice,
        "MESS:\n  - request:\n      intent: private errand\n",
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use rmcp::ServiceExt;
        let start = |operator: bool| {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
            cmd.arg("mcp").env("MESS_HOME", home.path()).env("MESS_AGENT_ID", "mallory");
            if operator {
                cmd.arg("--operator");
            }
            async move {
                ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
                    .await
                    .unwrap()
            }
        };
        let agent = start(false).await;
        // Someone else's thread reads exactly like one that does not exist.
        let (e1, t1) = call(&agent, "mess_status", serde_json::json!({"re": hidden})).await;
        let (e2, t2) = call(&agent, "mess_status", serde_json::json!({"re": "2025-01-01-999"})).await;
        assert!(e1 && e2);
        assert_eq!(t1.replace(&hidden, "REF"), t2.replace("2025-01-01-999", "REF"));
        // No registering executors, no routing rules.
        for message in [
            "MESS:\n  - config:\n      executor: {id: mallory, capabilities: [vacuum-floor]}\n",
            "MESS:\n  - config:\n      routing:\n        - default:\n          prefer: [mallory]\n",
        ] {
            let (refused, text) = call(&agent, "mess", serde_json::json!({"message": message})).await;
            assert!(refused, "{text}");
        }
        assert!(!home.path().join("executors/mallory.yaml").exists());
        assert!(!home.path().join("routing.yaml").exists());
        // SQL sees only its own threads.
        let (_, rows) = call(
            &agent,
            "mess_query",
            serde_json::json!({"sql": "SELECT count(*) AS n FROM threads", "format": "json"}),
        )
        .await;
        assert!(rows.contains("\"n\": 0") || rows.contains("\"n\":0"), "{rows}");
        drop(agent);
        let operator = start(true).await;
        let (refused, text) = call(
            &operator,
            "mess",
            serde_json::json!({"message": "MESS:\n  - config:\n      executor: {id: mallory, capabilities: [vacuum-floor]}\n"}),
        )
        .await;
        assert!(!refused, "{text}");
        assert!(home.path().join("executors/mallory.yaml").exists());
    });
}

/// Calls MCP tool `name` with arguments `a`; whether it failed, and its text.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &'static str,
    a: Value,
) -> (bool, String) {
    let params = rmcp::model::CallToolRequestParams::new(name)
        .with_arguments(a.as_object().cloned().unwrap_or_default());
    let r = client.call_tool(params).await.unwrap();
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    (r.is_error == Some(true), text)
}

#[test]
fn a_key_made_registration_leaves_notices_only_in_its_own_mailbox() {
    let home = Home::with_config(CONFIG);
    let robo = key(&home, "executor", "robo");
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start_with(&home, &[("MESS_ROUTE_RETRY_MS", "300")]);
    let (status, body) = server.post_yaml(
        &robo,
        "MESS:\n  - config:\n      executor: {id: robo, capabilities: [mop-floor], notify: {mail: orchestrator}}\n",
    );
    assert_eq!(status, 422, "{body}");
    assert!(message(&body).contains("notify.mail"), "{body}");
    let (status, body) = server.post_yaml(
        &robo,
        "MESS:\n  - config:\n      executor: {id: robo, capabilities: [mop-floor], notify: {mail: robo}}\n",
    );
    assert_eq!(status, 200, "{body}");
    // A registration on disk from before the rule (no record of how it was made) is held to it
    // when notices go out.
    std::fs::write(
        home.path().join("executors/sneaky.yaml"),
        "id: sneaky\ncapabilities: [mop-floor]\nnotify: {mail: orchestrator}\n",
    )
    .unwrap();
    let r = request(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: mop\n      requires: [mop-floor]\n",
    );
    assert!(eventually(|| std::fs::read_dir(
        home.path().join(".mail/robo")
    )
    .is_ok_and(|d| d.count() > 0)));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !home.path().join(".mail/orchestrator").exists(),
        "a task landed in another session's mailbox"
    );
    let _ = r;
}

#[test]
fn the_work_one_message_asks_for_is_bounded() {
    let home = Home::with_config(CONFIG);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let many = format!("MESS:\n{}", "  - query: {type: status}\n".repeat(257));
    let (status, body) = server.post_yaml(&agent, &many);
    assert_eq!(status, 422, "{body}");
    assert!(message(&body).contains("at most 256"), "{body}");
    let refs: Vec<String> = (0..300).map(|i| format!("2026-01-01-{i:03}")).collect();
    let (status, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - cancel:\n      re: [{}]\n", refs.join(", ")),
    );
    assert_eq!(status, 422, "{body}");
    assert!(message(&body).starts_with("MESS[0].cancel.re"), "{body}");
    // Within the bounds, many status queries answer from one listing.
    let fine = format!("MESS:\n{}", "  - query: {type: status}\n".repeat(256));
    let (status, body) = server.post_yaml(&agent, &fine);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn no_key_fills_another_mailbox() {
    let home = Home::with_config(CONFIG);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use rmcp::ServiceExt;
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", home.path())
            .env("MESS_AGENT_ID", "chatty");
        let agent = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        for i in 0..100 {
            let (refused, text) = call(
                &agent,
                "mess_mail_send",
                serde_json::json!({"to": "worker", "body": format!("note {i}")}),
            )
            .await;
            assert!(!refused, "{i}: {text}");
        }
        let (refused, text) = call(
            &agent,
            "mess_mail_send",
            serde_json::json!({"to": "worker", "body": "one too many"}),
        )
        .await;
        assert!(refused, "{text}");
        assert!(text.contains("100 unread messages"), "{text}");
        // Others still reach the mailbox.
        let count = std::fs::read_dir(home.path().join(".mail/worker"))
            .unwrap()
            .count();
        assert_eq!(count, 100);
    });
    let out = home.ok(&[
        "--as", "boss", "mail", "send", "--to", "worker", "--body", "hi",
    ]);
    assert!(out.contains("worker/"), "{out}");
}
