//! End-to-end CLI tests: the README walk-through, output formats, and error reporting.

use crate::support::{CONFIG, Home};

#[test]
fn the_readme_walkthrough_works_on_a_fresh_home() {
    let home = Home::with_config("");
    let out = home.ok(&["init"]);
    assert!(out.contains("initialized exchange home"), "{out}");
    for d in [
        "state=received",
        "state=executing",
        "state=finished",
        "state=canceled",
        "archive",
    ] {
        assert!(home.path().join(d).is_dir(), "{d}");
    }
    let again = home.ok(&["init"]);
    assert!(
        again.contains("kept existing"),
        "init is safe to repeat: {again}"
    );

    let r = home.ok(&[
        "request",
        "what's in the fridge?",
        "--context",
        "Planning dinner for 4",
        "--requires",
        "take-photo",
    ]);
    let r = r.trim();
    assert!(
        r.len() >= 14 && r.as_bytes()[10] == b'-',
        "prints the ref: {r}"
    );
    let list = home.ok(&["status"]);
    assert!(
        list.starts_with("REF") && list.contains(r) && list.contains("pending"),
        "{list}"
    );

    let claimed = home.ok(&["claim", r, "--as", "teague-phone", "--estimate", "PT20M"]);
    assert_eq!(claimed.trim(), format!("{r} claimed (teague-phone)"));
    assert!(
        home.path()
            .join(format!("state=executing/{r}.messe-af.yaml"))
            .exists()
    );

    let done = home.ok(&[
        "complete",
        r,
        "--as",
        "teague-phone",
        "--text",
        "chicken, broccoli, rice",
        "--notes",
        "use the chicken tonight",
    ]);
    assert_eq!(done.trim(), format!("{r} completed (teague-phone)"));
    let status = home.ok(&["status", r]);
    for want in [
        "completed (state=finished)",
        "executor     teague-phone",
        "estimate     PT20M",
        "chicken, broccoli, rice",
        "notes: use the chicken tonight",
    ] {
        assert!(status.contains(want), "missing {want:?} in\n{status}");
    }
    let show = home.ok(&["show", r]);
    assert!(
        show.starts_with(&format!("ref: {r}\n")) && show.contains("code: completed"),
        "{show}"
    );
    assert!(
        home.ok(&["status"]).lines().count() == 1,
        "no open threads left"
    );
    assert!(home.ok(&["status", "--all"]).contains(r));
    home.ok(&["fsck"]);
}

#[test]
fn questions_replies_and_cancel_from_the_shell() {
    let home = Home::with_config(CONFIG);
    let r = home.ok(&[
        "request",
        "vacuum the kitchen",
        "--requires",
        "vacuum-floor",
        "--id",
        "vac",
    ]);
    let r = r.trim();
    home.ok(&["claim", r, "--as", "roomba-kitchen"]);
    home.ok(&[
        "update",
        r,
        "--as",
        "roomba-kitchen",
        "--status",
        "needs_input",
        "--message",
        "two spills",
        "--question",
        "location: Which area? [sink|stove|both]",
    ]);
    let status = home.ok(&["status", "vac"]);
    assert!(
        status.contains("location: Which area? [sink | stove | both]")
            && status.contains("two spills"),
        "{status}"
    );
    home.ok(&["reply", "vac", "--answer", "location=both"]);
    let yaml = home.ok(&["status", "vac", "--format", "yaml"]);
    assert!(
        yaml.contains("status: needs_input") && yaml.contains("questions:"),
        "{yaml}"
    );
    let bad = home.fails(
        &["update", r, "--as", "roomba-kitchen", "--status", "failed"],
        2,
    );
    assert!(
        bad.starts_with("error: --reason: a `failed` status requires a reason"),
        "{bad}"
    );
    let bad = home.fails(
        &[
            "update",
            r,
            "--as",
            "roomba-kitchen",
            "--status",
            "in_progress",
            "--question",
            "a: b",
        ],
        2,
    );
    assert!(
        bad.starts_with("error: --question does not apply to --status in_progress"),
        "{bad}"
    );
    home.ok(&[
        "update",
        r,
        "--as",
        "roomba-kitchen",
        "--status",
        "in_progress",
        "--progress",
        "40",
    ]);
    home.ok(&["cancel", "vac", "--reason", "plans changed"]);
    let status = home.ok(&["status", r, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["state"], "canceled");
}

#[test]
fn send_takes_raw_messages_from_stdin_and_answers_in_yaml() {
    let home = Home::with_config(CONFIG);
    let out = home.with_stdin(
        &["send", "-", "--as", "claude-agent"],
        "MESS:\n  - request:\n      id: my-task-1\n      intent: check the fridge\n  - request:\n      id: my-task-2\n      intent: water the plants\n---\nMESS:\n  - query:\n      type: executors\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("ack:\n      requests:\n        - id: my-task-1\n"),
        "{text}"
    );
    assert!(
        text.contains("---\nMESS:\n  - v: 1.1.0\n  - response:")
            && text.contains("id: roomba-kitchen"),
        "{text}"
    );
    let list = home.ok(&["status", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
}

#[test]
fn errors_are_one_clear_line_with_the_right_exit_code() {
    let home = Home::with_config(CONFIG);
    let err = home.fails(&["claim", "2026-01-31-999", "--as", "teague-phone"], 1);
    assert!(
        err.starts_with("error: MESS[0].status.re: no thread \"2026-01-31-999\""),
        "{err}"
    );
    assert!(err.lines().nth(1).unwrap().starts_with("hint: "), "{err}");
    let usage = home.fails(&["claim"], 2);
    assert_eq!(usage.lines().count(), 2, "one line and a hint: {usage}");
    assert!(
        usage.starts_with("error: the following required arguments were not provided: <RE>"),
        "{usage}"
    );
    let out = home.with_stdin(&["send", "--as", "claude-agent"], "MESS: [\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: invalid YAML"));
    let bare = Home::with_config("");
    let err = bare.fails(&["request", "x"], 2);
    assert!(
        err.contains("no identity to act as") && err.contains("--as ID"),
        "{err}"
    );
    let err = home.fails(&["request", "x", "--needed-by", "tonight"], 2);
    assert_eq!(
        err.lines().next().unwrap(),
        "error: --needed-by: cannot read \"tonight\" as a time or a duration"
    );
    let r = home.ok(&["request", "photo", "--requires", "take-photo"]);
    let err = home.fails(&["claim", r.trim(), "--as", "roomba-kitchen"], 1);
    assert!(
        err.contains("roomba-kitchen lacks the required capability take-photo"),
        "{err}"
    );
    let broken = Home::with_config("agent_id: [unclosed\n");
    let err = broken.fails(&["status"], 1);
    assert!(
        err.contains("config.yaml") && err.contains("invalid YAML"),
        "{err}"
    );
}

#[test]
fn a_failing_document_still_reports_the_ones_before_it() {
    let home = Home::with_config(CONFIG);
    let out = home.with_stdin(
        &["send", "-", "--as", "claude-agent"],
        "MESS:\n  - request:\n      intent: first\n---\nMESS:\n  - reply:\n      re: nothing-by-this-id\n      reason: x\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ack:") && stdout.contains("ref: "),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: document 2 of 2: MESS[0].reply.re: no thread"),
        "{stderr}"
    );
}

#[test]
fn attachments_count_against_the_size_limit_and_cancel_takes_several_refs() {
    let home = Home::with_config(&format!("{CONFIG}limits:\n  max_message_bytes: 4000\n"));
    let r = home.ok(&["request", "photo", "--requires", "take-photo"]);
    let r = r.trim().to_owned();
    home.ok(&["claim", &r, "--as", "teague-phone"]);
    let big = home.path().join("big.png");
    std::fs::write(&big, vec![7u8; 6000]).unwrap();
    let err = home.fails(
        &[
            "complete",
            &r,
            "--as",
            "teague-phone",
            "--file",
            big.to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("over the limit of 4000 bytes"), "{err}");
    let small = home.path().join("small.png");
    std::fs::write(&small, [137u8, 80, 78, 71]).unwrap();
    home.ok(&[
        "complete",
        &r,
        "--as",
        "teague-phone",
        "--file",
        small.to_str().unwrap(),
    ]);
    assert!(home.ok(&["show", &r]).contains(
        "image:\n            uri: data:image/png;base64,iVBORw==\n            name: small.png"
    ));
    let a = home.ok(&["request", "one", "--id", "one"]);
    let b = home.ok(&["request", "two", "--id", "two"]);
    home.ok(&["cancel", "one", b.trim(), "--reason", "never mind"]);
    for re in [a.trim(), b.trim()] {
        assert!(
            home.ok(&["status", re])
                .contains("cancelled (state=canceled)")
        );
    }
    let usage = home.fails(&["reply", "one", "--answer", "no-equals-sign"], 2);
    assert!(usage.contains("is not field=value"), "{usage}");
}

#[test]
fn fsck_and_archive_report_their_work() {
    let home = Home::with_config(CONFIG);
    let r = home.ok(&["request", "photo", "--requires", "take-photo"]);
    let r = r.trim().to_owned();
    home.ok(&["claim", &r, "--as", "teague-phone"]);
    home.ok(&["complete", &r, "--as", "teague-phone", "--text", "done"]);
    let moved = home.ok(&["archive", "--older-than", "0s", "--list"]);
    assert!(
        moved.contains(&format!("{r} -> archive/"))
            && moved.contains("archived 1 thread(s): 1 in archive/"),
        "{moved}"
    );
    assert!(
        home.ok(&["status", &r]).contains("(archive/"),
        "archived threads stay readable"
    );
    // Simulate a crash between writing the new copy and removing the old one.
    let archived = std::fs::read_dir(home.path().join("archive"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = archived.join(format!("{r}.messe-af.yaml"));
    std::fs::copy(
        &file,
        home.path()
            .join(format!("state=finished/{r}.messe-af.yaml")),
    )
    .unwrap();
    let out = home.run(&["fsck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("problem: "),
        "{out:?}"
    );
    let fixed = home.ok(&["fsck", "--repair"]);
    assert!(fixed.contains("repaired: "), "{fixed}");
    home.ok(&["fsck"]);
    let bad = home.fails(&["archive", "--older-than", "soon"], 2);
    assert!(bad.contains("--older-than"), "{bad}");
}

#[test]
fn a_malformed_document_stops_send_before_anything_is_applied() {
    let home = Home::with_config(CONFIG);
    let out = home.with_stdin(
        &["send", "-", "--as", "claude-agent"],
        "MESS: [{request: {intent: one}}]\n---\nMESS: [{request: {intent: [not, text]}}]\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: document 2: MESS[0].request.intent: expected a string"),
        "{err}"
    );
    assert!(
        home.ok(&["status", "--all", "--format", "json"]).trim() == "[]",
        "nothing applied"
    );
}

#[test]
fn warnings_name_unroutable_requests_and_terminal_escapes_are_shown_as_text() {
    let home = Home::with_config(CONFIG);
    let out = home.run(&["request", "fly to the moon", "--requires", "rocket"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: ") && err.contains("no registered executor holds rocket"),
        "{err}"
    );
    let err = home.fails(&["request", "red \u{1b}[31malert"], 1);
    assert!(
        err.contains("control character U+001B is not allowed") && !err.contains('\u{1b}'),
        "{err}"
    );
    // A thread file written by another tool may still hold one: it is shown as text.
    let r = home.ok(&["request", "red alert"]);
    let r = r.lines().next().unwrap().trim();
    let path = home
        .path()
        .join(format!("state=received/{r}.messe-af.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("intent: red alert", "intent: \"red \\e[31malert\""),
    )
    .unwrap();
    let list = home.ok(&["status"]);
    assert!(
        list.contains("red \\u{1b}[31malert") && !list.contains('\u{1b}'),
        "{list}"
    );
}

#[test]
fn tokens_and_links_from_the_shell() {
    let home = Home::with_config(CONFIG);
    let key = home.ok(&["token", "agent", "claude-agent"]);
    assert!(
        key.trim().starts_with("mess_") && key.lines().count() == 1,
        "{key}"
    );
    let out = home.run(&["token", "executor", "nobody"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nobody is not a registered executor"),
        "{out:?}"
    );
    home.fails(&["token", "agent", "../x"], 1);
    let r = home.ok(&[
        "request",
        "vacuum the kitchen",
        "--requires",
        "vacuum-floor",
        "--as",
        "claude-agent",
    ]);
    let r = r.lines().next().unwrap().trim().to_owned();
    let link = home.ok(&[
        "link",
        &r,
        "--executor",
        "roomba-kitchen",
        "--ttl",
        "2h",
        "--actions",
        "read,claim",
        "--base-url",
        "https://mess.example/",
    ]);
    assert!(
        link.starts_with(&format!("https://mess.example/respond?ref={r}&token=ey")),
        "{link}"
    );
    // Without --base-url, the address notifications use: dispatch.public_url (or the
    // environment's MESS_PUBLIC_URL, which wins).
    let default = home.ok(&["link", &r, "--executor", "roomba-kitchen"]);
    assert!(
        default.starts_with(&format!("http://127.0.0.1:8420/respond?ref={r}&token=ey")),
        "{default}"
    );
    let public = home
        .command(&["link", &r, "--executor", "roomba-kitchen"])
        .env("MESS_PUBLIC_URL", "https://exchange.example/")
        .output()
        .unwrap();
    let public = String::from_utf8_lossy(&public.stdout);
    assert!(
        public.starts_with(&format!(
            "https://exchange.example/respond?ref={r}&token=ey"
        )),
        "{public}"
    );
    let err = home.fails(
        &[
            "link",
            &r,
            "--executor",
            "roomba-kitchen",
            "--actions",
            "admin",
        ],
        2,
    );
    assert!(err.contains("unknown action \"admin\""), "{err}");
    let err = home.fails(
        &["link", &r, "--executor", "roomba-kitchen", "--ttl", "soon"],
        2,
    );
    assert!(err.contains("--ttl"), "{err}");
    home.fails(
        &["link", "2020-01-01-001", "--executor", "roomba-kitchen"],
        1,
    );
}

#[test]
fn agent_mail_from_the_command_line_and_in_sql() {
    let home = Home::with_config("");
    let sent = home.ok(&[
        "--as",
        "worker-1",
        "mail",
        "send",
        "--to",
        "orchestrator",
        "--type",
        "status",
        "--tags",
        "BUG-1,fugue",
        "--body",
        "## Done\n\nFixed it.",
    ]);
    let (mailbox, file) = sent.trim().split_once('/').unwrap();
    assert_eq!(mailbox, "orchestrator");
    assert!(file.ends_with("_worker-1_status.md"), "{file}");
    let list = home.ok(&["--as", "orchestrator", "mail", "list"]);
    assert!(
        list.contains(file) && list.contains("worker-1") && list.contains("## Done"),
        "{list}"
    );
    let read = home.ok(&["--as", "orchestrator", "mail", "read", file]);
    assert!(
        read.contains("Fixed it.") && read.contains("tags      BUG-1, fugue"),
        "{read}"
    );

    let rows = home.ok(&[
        "query",
        "--format",
        "csv",
        "SELECT mailbox, folder, \"from\", \"type\", tags FROM mail",
    ]);
    assert!(
        rows.contains("orchestrator,unread,worker-1,status,\"[BUG-1, fugue]\""),
        "{rows}"
    );

    home.ok(&["--as", "orchestrator", "mail", "mark-read", file]);
    let again = home.fails(&["--as", "orchestrator", "mail", "mark-read", file], 1);
    assert!(again.contains("already read"), "{again}");
    let rows = home.ok(&["query", "--format", "csv", "SELECT folder FROM mail"]);
    assert!(rows.contains("read"), "{rows}");
    home.ok(&["--as", "orchestrator", "mail", "archive", file]);
    let archived = home.ok(&[
        "--as",
        "orchestrator",
        "mail",
        "list",
        "--folder",
        "archive",
    ]);
    assert!(archived.contains(file), "{archived}");

    home.ok(&[
        "--as",
        "nexus",
        "mail",
        "send",
        "--to",
        "__broadcast",
        "--type",
        "report",
        "--body",
        "all hands",
    ]);
    assert!(
        home.ok(&["mail", "list", "__broadcast"])
            .contains("all hands")
    );
    let bad = home.fails(
        &["--as", "x", "mail", "send", "--to", "../etc", "--body", "b"],
        1,
    );
    assert!(bad.contains("not a usable mailbox name"), "{bad}");
    // SQL still cannot reach the exchange's internals.
    let refused = home.fails(
        &["query", "SELECT * FROM read_yaml_auto('.mess/keys.yaml')"],
        1,
    );
    assert!(refused.contains("hidden folder"), "{refused}");
}

#[test]
fn the_plans_config_names_are_read_and_misspelt_keys_are_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secret = "a-link-secret-of-more-than-32-bytes-0123456789";
    let home = Home::with_config(&format!(
        "{CONFIG}http:\n  port: {port}\nsecret: {secret}\nlimts:\n  queries: 2\n"
    ));
    // A misspelt key is named, with what it likely meant, by status and fsck.
    let status = home.run(&["status"]);
    let said = String::from_utf8_lossy(&status.stderr).into_owned()
        + &String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains("limts: unknown key; did you mean limits?"),
        "{said}"
    );
    let fsck = home.run(&["fsck"]);
    let said =
        String::from_utf8_lossy(&fsck.stderr).into_owned() + &String::from_utf8_lossy(&fsck.stdout);
    assert!(said.contains("did you mean limits?"), "{said}");
    // `secret:` signs the links (the reference design's name for MESS_SECRET).
    let r = home
        .ok(&[
            "request",
            "photo",
            "--requires",
            "take-photo",
            "--as",
            "claude-agent",
        ])
        .trim()
        .to_owned();
    let link = home.ok(&["link", &r, "--executor", "teague-phone"]);
    let token = link.trim().split("token=").nth(1).unwrap().to_owned();
    let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    rules.required_spec_claims.clear();
    rules.validate_exp = false;
    rules.validate_aud = false;
    let with = |key: &str| {
        jsonwebtoken::decode::<serde_json::Value>(
            &token,
            &jsonwebtoken::DecodingKey::from_secret(key.as_bytes()),
            &rules,
        )
    };
    // The token names the exchange: `iss` where executors reach it (with no address given,
    // where `mess serve` listens: here `http.port`), `aud` this home's id.
    let claims = with(secret).unwrap().claims;
    assert_eq!(
        claims["iss"],
        format!("http://127.0.0.1:{port}"),
        "{claims}"
    );
    let id = std::fs::read_to_string(home.path().join(".mess/exchange-id")).unwrap();
    assert_eq!(
        claims["aud"],
        format!("mess-{}", &id.trim()[..32]),
        "{claims}"
    );
    assert!(with("another-secret-of-more-than-32-bytes-0123456789").is_err());
    // `http.port` is where `mess serve` listens without --addr.
    let mut child = home
        .command(&["serve"])
        .env("MESS_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
}

#[test]
fn a_message_appended_by_hand_as_messe_af_shows_takes_effect() {
    let home = Home::with_config(CONFIG);
    let r = home.ok(&["request", "is the door locked?"]);
    let r = r.trim();
    let file = home
        .path()
        .join(format!("state=received/{r}.messe-af.yaml"));
    // MESSE-AF 1, "Append Message": `cat >>` a claim, then a completion with a response.
    let appended = format!(
        "---\nfrom: teague-phone\nreceived: 2026-01-31T17:00:30-08:00\nchannel: http\nMESS:\n  - status:\n      re: {r}\n      code: claimed\n---\nfrom: teague-phone\nreceived: 2026-01-31T17:05:00-08:00\nchannel: http\nMESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content:\n        - locked\n"
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("cat >> \"$0\"")
        .arg(&file)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(appended.as_bytes())?;
            c.wait()
        })
        .unwrap();
    assert!(out.success());
    let status = home.ok(&["status", r, "--format", "yaml"]);
    assert!(
        status.contains("status: completed") && status.contains("teague-phone"),
        "{status}"
    );
    assert!(status.contains("locked"), "{status}");
    let moved = home
        .path()
        .join(format!("state=finished/{r}.messe-af.yaml"));
    assert!(moved.exists() && !file.exists());
    assert!(
        std::fs::read_to_string(&moved)
            .unwrap()
            .ends_with(&appended)
    );
    let fsck = home.ok(&["fsck"]);
    assert!(!fsck.contains("out of date"), "{fsck}");
}

/// Runs `mess args` with its stdout already closed by the reader (`mess … | head` after head
/// has gone); its exit code and stderr.
fn with_stdout_closed(home: &Home, args: &[&str]) -> (Option<i32>, String) {
    let mut child = home
        .command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_exits_quietly_when_its_reader_goes_away() {
    let home = Home::with_config(CONFIG);
    home.ok(&["init"]);
    let r = home.ok(&[
        "request",
        "what's in the fridge?",
        "--requires",
        "take-photo",
    ]);
    let r = r.trim();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["status", "--help"],
        vec!["--version"],
        vec![
            "request",
            "vacuum the kitchen",
            "--requires",
            "vacuum-floor",
        ],
        vec!["status"],
        vec!["status", "--all", "--format", "yaml"],
        vec!["status", "--all", "--format", "json"],
        vec!["status", r],
        vec!["show", r],
        vec!["claim", r, "--as", "teague-phone"],
        vec![
            "update",
            r,
            "--as",
            "teague-phone",
            "--status",
            "in_progress",
        ],
        vec!["complete", r, "--as", "teague-phone", "--text", "rice"],
        vec!["query", "SELECT ref, status FROM threads"],
        vec!["query", "SELECT ref FROM threads", "--format", "csv"],
        vec!["sql", "init"],
        vec!["token", "agent", "pipe-agent"],
        vec!["link", r, "--executor", "teague-phone"],
        vec!["mail", "list", "--as", "claude-agent"],
        vec!["shells", "balance"],
        vec!["fsck"],
        vec!["archive"],
        vec!["init"],
    ];
    for args in commands {
        let (code, stderr) = with_stdout_closed(&home, &args);
        assert_eq!(code, Some(0), "mess {args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "mess {args:?}: {stderr}"
        );
    }
}

#[test]
fn status_jobs_and_fsck_show_the_outbox_by_kind_of_job() {
    let home = Home::with_config(
        "agent_id: claude-agent\nexecutors:\n  teague-phone:\n    capabilities: [take-photo]\n    notify: {ntfy: teague-topic}\n",
    );
    let r = home.ok(&["request", "photo", "--requires", "take-photo"]);
    let r = r.trim().to_owned();
    // No server runs: the notice waits in the queue.
    let table = home.ok(&["status", "--jobs"]);
    let row = table
        .lines()
        .find(|l| l.contains("notice"))
        .unwrap_or_else(|| panic!("no notice row: {table}"));
    assert!(row.split_whitespace().nth(1) == Some("1"), "{table}");
    let json = home.ok(&["status", "--jobs", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["jobs"]["notice"]["queued"], 1, "{json}");
    assert_eq!(json["unreadable"], 0, "{json}");
    assert!(
        home.fails(&["status", &r, "--jobs"], 2).contains("--jobs"),
        "a thread and the jobs are two questions"
    );
    // A notice given up, and a record nobody can read.
    let outbox = home.path().join(".mess/outbox");
    let queued = std::fs::read_dir(outbox.join("queue"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::create_dir_all(outbox.join("failed")).unwrap();
    let record = std::fs::read_to_string(&queued).unwrap()
        + "attempts:\n- at: 2026-01-31T12:00:00Z\n  error: 'ntfy: 503'\noutcome: 'ntfy: 503'\n";
    std::fs::write(
        outbox.join("failed").join(queued.file_name().unwrap()),
        record,
    )
    .unwrap();
    std::fs::remove_file(&queued).unwrap();
    std::fs::write(outbox.join("queue/garbage.yaml"), "{not: [a record").unwrap();
    let out = home.run(&["fsck"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("problem: outbox:") && stdout.contains("garbage.yaml"),
        "{stdout}"
    );
    assert!(stdout.contains("outbox: notice: 1 given up"), "{stdout}");
    let json = home.ok(&["status", "--jobs", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["jobs"]["notice"]["failed"], 1, "{json}");
    assert_eq!(json["unreadable"], 1, "{json}");
}

#[test]
fn doctor_measures_the_disk_names_a_missing_home_and_leaves_the_home_as_it_was() {
    fn listing(dir: &std::path::Path) -> Vec<String> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            names.push(path.display().to_string());
            if path.is_dir() {
                names.extend(listing(&path));
            }
        }
        names.sort();
        names
    }
    let home = Home::with_config("");
    let out = home.run(&["doctor", "--seconds", "1"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("no exchange here yet (`mess init` makes one)"),
        "{said}"
    );

    home.ok(&["init"]);
    let before = listing(home.path());
    let said = home.ok(&["doctor", "--seconds", "1", "--writers", "4"]);
    let rates: Vec<f64> = said
        .lines()
        .find(|l| l.contains("durable atomic replaces"))
        .unwrap_or_else(|| panic!("{said}"))
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    // "N/s with 1 writer, M/s with 4": both rates measured, and the writer counts.
    assert_eq!(rates.len(), 4, "{said}");
    assert!(rates[0] > 0.0 && rates[2] > 0.0, "{said}");
    assert_eq!((rates[1], rates[3]), (1.0, 4.0), "{said}");
    assert!(said.contains("ceiling: about"), "{said}");
    assert!(said.contains("database  none"), "{said}");
    assert_eq!(listing(home.path()), before, "the probe's files are gone");
}
