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
    let out = home.with_stdin(
        &["send", "-", "--as", "claude-agent"],
        "MESS:\n  - request: {intent: a, compensation: {shells: 40}}\n  - request: {intent: b, compensation: {shells: 40}}\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
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
