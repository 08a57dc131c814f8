//! Several `mess` processes at once: creates get distinct refs, and exactly one of many
//! simultaneous claims wins.

use std::process::Stdio;

use crate::support::Home;

const EXECUTORS: usize = 12;

fn config() -> String {
    let mut c = String::from("agent_id: claude-agent\nexecutors:\n");
    for i in 0..EXECUTORS {
        c.push_str(&format!("  robot-{i}:\n    capabilities: [vacuum-floor]\n"));
    }
    c
}

#[test]
fn simultaneous_creates_from_many_processes_get_distinct_refs() {
    let home = Home::with_config(&config());
    let children: Vec<_> = (0..24)
        .map(|i| {
            home.command(&[
                "request",
                &format!("task {i}"),
                "--id",
                &format!("task-{i}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut refs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .collect();
    refs.sort();
    let before = refs.len();
    refs.dedup();
    assert_eq!(refs.len(), before, "duplicate refs: {refs:?}");
    let files = std::fs::read_dir(home.path().join("state=received"))
        .unwrap()
        .count();
    assert_eq!(files, 24);
    let serials: Vec<u64> = refs.iter().map(|r| r[11..].parse().unwrap()).collect();
    assert_eq!(serials, (1..=24).collect::<Vec<_>>(), "no gaps either");
    home.ok(&["fsck"]);
}

#[test]
fn exactly_one_of_many_simultaneous_claims_wins() {
    let home = Home::with_config(&config());
    for round in 0..3 {
        let r = home.ok(&[
            "request",
            &format!("vacuum {round}"),
            "--requires",
            "vacuum-floor",
        ]);
        let r = r.trim().to_owned();
        let children: Vec<_> = (0..EXECUTORS)
            .map(|i| {
                home.command(&["claim", &r, "--as", &format!("robot-{i}")])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outcomes: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let winners: Vec<_> = outcomes.iter().filter(|o| o.status.success()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {} winners", winners.len());
        for loser in outcomes.iter().filter(|o| !o.status.success()) {
            assert_eq!(loser.status.code(), Some(1));
            let err = String::from_utf8_lossy(&loser.stderr);
            assert!(err.contains("already claimed"), "{err}");
        }
        let winner = String::from_utf8_lossy(&winners[0].stdout);
        let show = home.ok(&["show", &r]);
        assert_eq!(
            show.matches("code: claimed").count(),
            1,
            "one claim recorded:\n{show}"
        );
        assert!(show.contains(&format!(
            "executor: {}",
            winner.trim().split(['(', ')']).nth(1).unwrap()
        )));
    }
}

#[test]
fn re_sending_one_client_id_from_many_processes_makes_one_thread() {
    let home = Home::with_config(&config());
    let children: Vec<_> = (0..10)
        .map(|_| {
            home.command(&["request", "same task", "--id", "same"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let refs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .collect();
    assert!(refs.iter().all(|r| r == &refs[0]), "{refs:?}");
    assert_eq!(
        std::fs::read_dir(home.path().join("state=received"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn fsck_repair_while_others_create_loses_no_index_entry() {
    let home = Home::with_config(&config());
    for i in 0..20 {
        home.ok(&[
            "request",
            &format!("early {i}"),
            "--id",
            &format!("early-{i}"),
        ]);
    }
    let writers: Vec<_> = (0..4)
        .map(|w| {
            home.command(&["send", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map(|mut c| {
                    use std::io::Write;
                    let mut text = String::new();
                    for i in 0..15 {
                        text.push_str(&format!(
                            "MESS:\n  - request:\n      id: w{w}-{i}\n      intent: task {i}\n---\n"
                        ));
                    }
                    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
                    c
                })
                .unwrap()
        })
        .collect();
    for _ in 0..3 {
        let out = home.run(&["fsck", "--repair"]);
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "{out:?}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("Directory not empty"),
            "{out:?}"
        );
    }
    for w in writers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for i in 0..20 {
        home.ok(&["status", &format!("early-{i}")]);
    }
    for w in 0..4 {
        for i in 0..15 {
            home.ok(&["status", &format!("w{w}-{i}")]);
        }
    }
}
