//! Shells through the CLI: grants from the operator, balances, the ledger's files and views,
//! and what is refused.

use crate::support::{CONFIG, Home};

#[test]
fn the_operator_grants_shells_and_the_ledger_balances() {
    let home = Home::with_config(CONFIG);
    assert_eq!(home.ok(&["shells", "balance", "claude-agent"]).trim(), "0");
    let out = home.ok(&[
        "shells",
        "grant",
        "claude-agent",
        "100",
        "--note",
        "welcome",
    ]);
    assert_eq!(
        out.trim(),
        "granted 100 shells to claude-agent; balance 100"
    );
    home.ok(&["shells", "grant", "roomba-kitchen", "7"]);
    home.ok(&["shells", "grant", "claude-agent", "20"]);
    assert_eq!(
        home.ok(&["shells", "balance", "claude-agent"]).trim(),
        "120"
    );
    let all = home.ok(&["shells", "balance"]);
    assert!(all.contains("operator        -127"), "{all}");
    // The month's file is YAML documents, one per movement; the views agree with the command.
    let month = std::fs::read_dir(home.path().join("ledger"))
        .unwrap()
        .count();
    assert_eq!(month, 1);
    let sum = home.ok(&[
        "query",
        "SELECT sum(balance) AS total, count(*) AS accounts FROM balances",
        "--format",
        "csv",
    ]);
    assert_eq!(sum.trim(), "total,accounts\n0,3");
    let notes = home.ok(&[
        "query",
        "SELECT shells, note FROM ledger WHERE \"to\" = 'claude-agent' ORDER BY \"at\"",
        "--format",
        "csv",
    ]);
    assert!(
        notes.starts_with("shells,note\n100,welcome\n20,"),
        "{notes}"
    );
    // Bad input names the problem.
    let err = home.fails(&["shells", "grant", "claude-agent", "0"], 1);
    assert!(err.contains("1 to 1000000000"), "{err}");
    let err = home.fails(&["shells", "grant", "../x", "5"], 1);
    assert!(err.contains("not an account"), "{err}");
    let err = home.fails(&["shells", "grant", "operator", "5"], 1);
    assert!(err.contains("not an account"), "{err}");
}

const ROBOT: &str = "agent_id: claude-agent
executors:
  roomba-kitchen:
    capabilities: [vacuum-floor]
";

fn offer(home: &Home, shells: i64, extra: &str) -> String {
    let out = home.with_stdin(
        &["send", "-", "--as", "claude-agent"],
        &format!("MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n      compensation:\n        shells: {shells}\n{extra}"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("ref: "))
        .unwrap()
        .to_owned()
}

fn balance(home: &Home, account: &str) -> i64 {
    home.ok(&["shells", "balance", account])
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn compensation_is_held_in_escrow_then_released_or_refunded_once() {
    let home = Home::with_config(ROBOT);
    home.ok(&["shells", "grant", "claude-agent", "100"]);
    // Released to the executor on completion.
    let paid = offer(&home, 30, "");
    assert_eq!(
        (
            balance(&home, "claude-agent"),
            balance(&home, &format!("escrow:{paid}"))
        ),
        (70, 30)
    );
    home.ok(&["claim", &paid, "--as", "roomba-kitchen"]);
    home.ok(&[
        "complete",
        &paid,
        "--as",
        "roomba-kitchen",
        "--text",
        "done",
    ]);
    assert_eq!(balance(&home, "roomba-kitchen"), 30);
    // A redo and a second completion move nothing again.
    home.ok(&[
        "review",
        &paid,
        "--rating",
        "2",
        "--redo",
        "--as",
        "claude-agent",
    ]);
    home.ok(&[
        "complete",
        &paid,
        "--as",
        "roomba-kitchen",
        "--text",
        "again",
    ]);
    assert_eq!(balance(&home, "roomba-kitchen"), 30);
    // Refunded on cancel.
    let cancelled = offer(&home, 20, "");
    assert_eq!(balance(&home, "claude-agent"), 50);
    home.ok(&["cancel", &cancelled, "--as", "claude-agent"]);
    assert_eq!(balance(&home, "claude-agent"), 70);
    // With release_on: reviewed, the review decides: a rejection refunds, an acceptance pays.
    let review = "        escrow: {release_on: reviewed}\n";
    let rejected = offer(&home, 10, review);
    home.ok(&["claim", &rejected, "--as", "roomba-kitchen"]);
    home.ok(&[
        "complete",
        &rejected,
        "--as",
        "roomba-kitchen",
        "--text",
        "done",
    ]);
    assert_eq!(
        balance(&home, &format!("escrow:{rejected}")),
        10,
        "held until reviewed"
    );
    home.ok(&[
        "review",
        &rejected,
        "--rating",
        "reject",
        "--as",
        "claude-agent",
    ]);
    assert_eq!(balance(&home, "claude-agent"), 70);
    let accepted = offer(&home, 10, review);
    home.ok(&["claim", &accepted, "--as", "roomba-kitchen"]);
    home.ok(&[
        "complete",
        &accepted,
        "--as",
        "roomba-kitchen",
        "--text",
        "done",
    ]);
    home.ok(&["review", &accepted, "--rating", "5", "--as", "claude-agent"]);
    assert_eq!(
        (
            balance(&home, "claude-agent"),
            balance(&home, "roomba-kitchen")
        ),
        (60, 40)
    );
    // A message offering more than the balance is refused before anything is written.
    let err = home.send_refused(
        "claude-agent",
        "MESS:\n  - request: {intent: a, compensation: {shells: 40}}\n  - request: {intent: b, compensation: {shells: 40}}\n",
    );
    assert!(
        err.contains("offers 80 shells and claude-agent holds 60"),
        "{err}"
    );
    assert!(
        !home
            .ok(&["status", "--all", "--as", "claude-agent"])
            .contains(" a\n")
    );
    // Every account sums to zero; each escrow was settled exactly once.
    let sums = home.ok(&[
        "query",
        "SELECT sum(balance) AS total FROM balances",
        "--format",
        "csv",
    ]);
    assert_eq!(sums.trim(), "total\n0");
    let settles = home.ok(&["query", "SELECT count(*) AS n, count(DISTINCT thread) AS threads FROM ledger WHERE kind IN ('release', 'refund')", "--format", "csv"]);
    assert_eq!(settles.trim(), "n,threads\n4,4");
    assert!(
        !home
            .ok(&["status", "--as", "claude-agent"])
            .contains("warning")
    );
}

const CHAIN: &str = "agent_id: claude-agent
executors:
  roomba-kitchen:
    capabilities: [vacuum-floor]
  roomba-hall:
    capabilities: [vacuum-floor]
  roomba-attic:
    capabilities: [vacuum-floor]
";

/// `who` suggests `body` (a suggestion's fields after `type`) on `re` and the requestor
/// accepts it; the refs the acceptance made.
fn accepted(home: &Home, who: &str, id: &str, re: &str, body: &str) -> Vec<String> {
    home.send_as(
        who,
        &format!("MESS:\n  - suggestion:\n      id: {id}\n      re: {re}\n{body}"),
    );
    let answer = home.send_as(
        "claude-agent",
        &format!("MESS:\n  - reply:\n      re: {id}\n      accept: true\n"),
    );
    let after = answer.split("refs:").nth(1).expect(&answer);
    after
        .lines()
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim().trim_start_matches("- ").to_owned())
        .collect()
}

fn escrow(home: &Home, r: &str) -> i64 {
    balance(home, &format!("escrow:{r}"))
}

#[test]
fn escrow_moves_with_accepted_suggestions_and_delegators_keep_their_share() {
    let home = Home::with_config(CHAIN);
    home.ok(&["shells", "grant", "claude-agent", "300"]);
    // A delegation chain: kitchen delegates to hall, hall to attic; each delegator keeps 10%
    // of what reaches it, as the request states, when the work is paid.
    let first = offer(&home, 100, "        escrow: {delegator_share: 10}\n");
    let hall = accepted(
        &home,
        "roomba-kitchen",
        "sug:to-hall",
        &first,
        "      type: delegate\n      proposed: {executor: roomba-hall}\n",
    );
    assert_eq!((escrow(&home, &first), escrow(&home, &hall[0])), (0, 100));
    let attic = accepted(
        &home,
        "roomba-hall",
        "sug:to-attic",
        &hall[0],
        "      type: delegate\n      proposed: {executor: roomba-attic}\n",
    );
    assert_eq!(
        (escrow(&home, &hall[0]), escrow(&home, &attic[0])),
        (0, 100)
    );
    let file = home.ok(&["show", &attic[0], "--as", "claude-agent"]);
    assert!(
        file.contains("delegators:\n    - roomba-kitchen\n    - roomba-hall"),
        "{file}"
    );
    home.ok(&["claim", &attic[0], "--as", "roomba-attic"]);
    home.ok(&[
        "complete",
        &attic[0],
        "--as",
        "roomba-attic",
        "--text",
        "done",
    ]);
    assert_eq!(
        (
            balance(&home, "roomba-kitchen"),
            balance(&home, "roomba-hall"),
            balance(&home, "roomba-attic"),
            escrow(&home, &attic[0]),
        ),
        (10, 9, 81, 0)
    );
    assert_eq!(balance(&home, "claude-agent"), 200);
    // A split shares the escrow evenly (the odd shells to the first parts)...
    let big = offer(&home, 50, "");
    let parts = accepted(
        &home,
        "roomba-kitchen",
        "sug:split",
        &big,
        "      type: split\n      proposed:\n        parts: [vacuum the hall, vacuum the stairs, vacuum the attic]\n",
    );
    let held: Vec<i64> = parts.iter().map(|p| escrow(&home, p)).collect();
    assert_eq!(held, vec![17, 17, 16]);
    let part = home.ok(&["show", &parts[2], "--as", "claude-agent"]);
    assert!(part.contains("shells: 16"), "{part}");
    // ...or as the parts state, the rest refunded; more than is held is refused.
    let stated = offer(&home, 30, "");
    let before = balance(&home, "claude-agent");
    let out = home.with_stdin(
        &["send", "-", "--as", "roomba-kitchen"],
        &format!("MESS:\n  - suggestion:\n      id: sug:greedy\n      type: split\n      re: {stated}\n      proposed:\n        parts:\n          - {{intent: hall, compensation: {{shells: 20}}}}\n          - {{intent: stairs, compensation: {{shells: 20}}}}\n"),
    );
    assert!(out.status.success());
    let err = home.send_refused(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:greedy\n      accept: true\n",
    );
    assert!(
        err.contains("the parts offer 40 shells and the request holds 30"),
        "{err}"
    );
    assert_eq!(escrow(&home, &stated), 30, "nothing moved");
    let parts = accepted(
        &home,
        "roomba-kitchen",
        "sug:stated",
        &stated,
        "      type: split\n      proposed:\n        parts:\n          - {intent: hall, compensation: {shells: 10}}\n          - stairs\n",
    );
    assert_eq!(
        (
            escrow(&home, &parts[0]),
            escrow(&home, &parts[1]),
            escrow(&home, &stated),
            balance(&home, "claude-agent") - before,
        ),
        (10, 0, 0, 20)
    );
    // A merge holds what its originals held; it is paid to whoever completes it.
    let a = offer(&home, 10, "");
    let b = offer(&home, 15, "");
    let merged = accepted(
        &home,
        "roomba-hall",
        "sug:merge",
        &format!("[{a}, {b}]"),
        "      type: merge\n      proposed: {executor: roomba-hall, combined_intent: vacuum both}\n",
    );
    assert_eq!(
        (
            escrow(&home, &a),
            escrow(&home, &b),
            escrow(&home, &merged[0])
        ),
        (0, 0, 25)
    );
    home.ok(&[
        "complete",
        &merged[0],
        "--as",
        "roomba-hall",
        "--text",
        "done",
    ]);
    assert_eq!(balance(&home, "roomba-hall"), 9 + 25);
    // An escrow never pays out twice: every account still sums to zero, none below it.
    let sums = home.ok(&[
        "query",
        "SELECT sum(balance) AS total, min(balance) FILTER (WHERE account <> 'operator') AS least FROM balances",
        "--format",
        "csv",
    ]);
    assert_eq!(sums.trim(), "total,least\n0,0");
    home.ok(&["fsck"]);
}

#[test]
fn a_server_refunds_an_escrow_whose_request_was_never_written() {
    let home = Home::with_config(ROBOT);
    home.ok(&["shells", "grant", "claude-agent", "40"]);
    let kept = offer(&home, 5, "");
    // A process stopped between taking an escrow and writing its thread an hour ago: the
    // ledger holds the escrow, no thread has the ref.
    let month = std::fs::read_dir(home.path().join("ledger"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let hour_ago = (chrono::Utc::now() - chrono::TimeDelta::hours(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let mut text = std::fs::read_to_string(&month).unwrap();
    text.push_str(&format!(
        "---\nid: escrow-2020-01-01-999\nat: {hour_ago}\nfrom: claude-agent\nto: escrow:2020-01-01-999\nshells: 12\nkind: escrow\nthread: 2020-01-01-999\n"
    ));
    std::fs::write(&month, text).unwrap();
    assert_eq!(balance(&home, "claude-agent"), 23);
    // The server's first sweep gives it back; the written request keeps its escrow.
    let _server = crate::support::server::Server::start(&home);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while balance(&home, "claude-agent") != 35 {
        assert!(std::time::Instant::now() < deadline, "never refunded");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(balance(&home, &format!("escrow:{kept}")), 5);
    let note = home.ok(&[
        "query",
        "SELECT note FROM ledger WHERE id = 'settle-2020-01-01-999'",
        "--format",
        "csv",
    ]);
    assert!(note.contains("never written"), "{note}");
}

#[test]
fn fsck_reports_a_ledger_edited_by_hand() {
    let home = Home::with_config(ROBOT);
    home.ok(&["shells", "grant", "claude-agent", "40"]);
    home.ok(&["fsck"]);
    let month = std::fs::read_dir(home.path().join("ledger"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&month).unwrap();
    let grant = text.trim_start_matches("---\n").to_owned();
    std::fs::write(
        &month,
        format!(
            "{text}---\n{grant}---\nid: hand\nnote: not a movement\n---\nid: gift\nat: 2026-11-27T12:00:00Z\nfrom: roomba-kitchen\nto: claude-agent\nshells: 500\nkind: grant\n"
        ),
    )
    .unwrap();
    let out = home.command(&["fsck"]).output().unwrap();
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for problem in [
        "is recorded twice",
        "document 3 is not a movement of shells",
        "roomba-kitchen is below zero (-500)",
    ] {
        assert!(said.contains(problem), "{problem}: {said}");
    }
}

#[test]
fn a_key_holder_sees_its_own_shells_and_no_one_elses() {
    let home = Home::with_config(ROBOT);
    let agent = home.token("agent", "claude-agent");
    let robot = home.token("executor", "roomba-kitchen");
    home.ok(&["shells", "grant", "claude-agent", "50"]);
    home.ok(&["shells", "grant", "bob", "99"]);
    let paid = offer(&home, 20, "");
    home.ok(&["claim", &paid, "--as", "roomba-kitchen"]);
    home.ok(&[
        "complete",
        &paid,
        "--as",
        "roomba-kitchen",
        "--text",
        "done",
    ]);
    let other = offer(&home, 5, "");
    let server = crate::support::server::Server::start(&home);
    let rows = |key: &str, sql: &str| -> String {
        let (code, body) = server.get(
            &format!(
                "/query?format=csv&sql={}",
                sql.replace(' ', "%20")
                    .replace('\'', "%27")
                    .replace(',', "%2C")
            ),
            key,
        );
        assert_eq!(code, 200, "{body}");
        body
    };
    let sql = "SELECT account, balance FROM balances ORDER BY account";
    assert_eq!(
        rows(&agent, sql).trim(),
        format!("account,balance\nclaude-agent,25\nescrow:{paid},0\nescrow:{other},5")
    );
    assert_eq!(
        rows(&robot, sql).trim(),
        // The robot sees the escrow of work it may take, as it sees the offer in the thread.
        format!("account,balance\nescrow:{paid},0\nescrow:{other},5\nroomba-kitchen,20")
    );
    let movements = rows(&agent, "SELECT count(*) AS n FROM ledger");
    assert_eq!(movements.trim(), "n\n4", "a grant, two escrows, a release");
    // The operator sees everything.
    assert!(
        home.ok(&["query", "SELECT account FROM balances"])
            .contains("bob")
    );
}
