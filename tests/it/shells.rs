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
