//! Accepted suggestions carried out by the exchange, end to end through the CLI: merge, split,
//! delegate, alternative and defer; a rejected one changes nothing but the record; a claim
//! that lands first wins over an acceptance.

use crate::support::Home;

const CONFIG: &str = "agent_id: claude-agent
executors:
  instacart-proxy:
    capabilities: [buy-groceries]
  corner-shop:
    capabilities: [buy-groceries]
  roomba-kitchen:
    capabilities: [vacuum-floor]
";

fn request(home: &Home, intent: &str, id: &str, requires: &str) -> String {
    home.ok(&[
        "request",
        intent,
        "--id",
        id,
        "--requires",
        requires,
        "--as",
        "claude-agent",
    ])
    .trim()
    .to_owned()
}

/// `mess status REF --json` as JSON.
fn status(home: &Home, r: &str) -> serde_json::Value {
    serde_json::from_str(&home.ok(&["status", r, "--as", "claude-agent", "--format", "json"]))
        .unwrap()
}

fn show(home: &Home, r: &str) -> String {
    home.ok(&["show", r, "--as", "claude-agent"])
}

/// The `refs` of the answer to an accepting reply.
fn refs_of(answer: &str) -> Vec<String> {
    let after = answer.split("refs:").nth(1).expect(answer);
    after
        .lines()
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim().trim_start_matches("- ").to_owned())
        .collect()
}

#[test]
fn an_accepted_merge_makes_one_thread_and_supersedes_the_originals() {
    let home = Home::with_config(CONFIG);
    let onions = request(&home, "get onions", "get-onions", "buy-groceries");
    let garlic = request(&home, "get garlic", "get-garlic", "buy-groceries");
    home.send_as("instacart-proxy",
        "MESS:\n  - suggestion:\n      id: sug:merge-grocery\n      type: merge\n      re: [get-onions, get-garlic]\n      proposed:\n        executor: instacart-proxy\n        combined_intent: buy onions and garlic\n      reason: same store, saves delivery fee\n",
    );
    let answer = home.send_as(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:merge-grocery\n      accept: true\n",
    );
    assert!(answer.contains("superseded"), "{answer}");
    let made = refs_of(&answer);
    assert_eq!(made.len(), 1, "{answer}");
    let merged = &made[0];
    // The new thread: the combined intent, the requestor's, claimed by the proposer as it said.
    let s = status(&home, merged);
    assert_eq!(s["intent"], "buy onions and garlic", "{s}");
    assert_eq!(s["status"], "claimed", "{s}");
    assert_eq!(s["executor"], "instacart-proxy", "{s}");
    let file = show(&home, merged);
    assert!(
        file.contains("made_by") && file.contains("sug:merge-grocery"),
        "{file}"
    );
    // Both originals superseded by it, with the reason; the client ids now lead to it.
    for original in [&onions, &garlic] {
        let s = status(&home, original);
        assert_eq!(s["status"], "superseded", "{s}");
        let file = show(&home, original);
        assert!(file.contains(&format!("superseded_by: {merged}")), "{file}");
        assert!(file.contains("reason: merge"), "{file}");
    }
    assert_eq!(status(&home, "get-onions")["ref"], merged.as_str());
    // The proposer completes the merged work as its own.
    home.ok(&[
        "complete",
        merged,
        "--as",
        "instacart-proxy",
        "--text",
        "both bought",
    ]);
    assert_eq!(status(&home, merged)["status"], "completed");
    // Accepting again is refused: the originals are over.
    let err = home.send_refused(
        "claude-agent",
        &format!("MESS:\n  - reply:\n      re: {onions}\n      accept: true\n"),
    );
    assert!(
        err.contains("superseded") || err.contains("cannot"),
        "{err}"
    );
    home.ok(&["fsck"]);
}

#[test]
fn an_accepted_split_makes_ordered_parts_and_a_rejected_one_changes_nothing() {
    let home = Home::with_config(CONFIG);
    let big = request(&home, "clean the kitchen", "kitchen", "vacuum-floor");
    home.send_as("roomba-kitchen",
        &format!(
            "MESS:\n  - suggestion:\n      id: sug:split\n      type: split\n      re: {big}\n      proposed:\n        ordered: true\n        parts:\n          - vacuum the floor\n          - intent: mop the floor\n            priority: elevated\n"
        ),
    );
    // Rejected first: only the record.
    home.send_as(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:split\n      accept: false\n",
    );
    assert_eq!(status(&home, &big)["status"], "pending");
    assert!(show(&home, &big).contains("suggestion rejected"));
    let answer = home.send_as(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:split\n      accept: true\n",
    );
    let parts = refs_of(&answer);
    assert_eq!(parts.len(), 2, "{answer}");
    let s = status(&home, &big);
    assert_eq!(s["status"], "superseded", "{s}");
    assert!(show(&home, &big).contains("reason: split"));
    let first = status(&home, &parts[0]);
    let second = status(&home, &parts[1]);
    assert_eq!(first["intent"], "vacuum the floor", "{first}");
    assert_eq!(second["intent"], "mop the floor", "{second}");
    assert_eq!(second["priority"], "elevated", "{second}");
    assert!(show(&home, &parts[1]).contains(&format!("depends_on:\n  - {}", parts[0])));
    // The parts carry client ids made from the original's.
    assert_eq!(status(&home, "kitchen.2")["ref"], parts[1].as_str());
    // The second waits for the first.
    home.ok(&["claim", &parts[0], "--as", "roomba-kitchen"]);
    let err = home.fails(
        &[
            "complete",
            &parts[1],
            "--as",
            "roomba-kitchen",
            "--text",
            "x",
        ],
        1,
    );
    assert!(err.contains(&parts[0]) || err.contains("depend"), "{err}");
    home.ok(&["fsck"]);
}

#[test]
fn an_accepted_delegation_offers_the_work_to_the_delegate_alone() {
    let home = Home::with_config(CONFIG);
    let onions = request(&home, "get onions", "get-onions", "buy-groceries");
    home.ok(&["claim", &onions, "--as", "instacart-proxy"]);
    // A delegate that cannot do the work is refused when the suggestion is accepted.
    home.send_as("instacart-proxy",
        &format!(
            "MESS:\n  - suggestion:\n      id: sug:bad\n      type: delegate\n      re: {onions}\n      proposed: {{executor: roomba-kitchen}}\n"
        ),
    );
    let err = home.send_refused(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:bad\n      accept: true\n",
    );
    assert!(err.contains("lacks buy-groceries"), "{err}");
    assert_eq!(status(&home, &onions)["status"], "claimed");
    home.send_as("instacart-proxy",
        &format!(
            "MESS:\n  - suggestion:\n      id: sug:delegate\n      type: delegate\n      re: {onions}\n      proposed: {{executor: corner-shop}}\n      reason: they are open now\n"
        ),
    );
    let answer = home.send_as(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:delegate\n      accept: true\n",
    );
    let made = refs_of(&answer);
    assert_eq!(made.len(), 1, "{answer}");
    let s = status(&home, &onions);
    assert_eq!(s["status"], "delegated", "{s}");
    assert!(show(&home, &onions).contains("delegated_to: corner-shop"));
    // Only the delegate may take it.
    let err = home.fails(&["claim", &made[0], "--as", "instacart-proxy"], 1);
    assert!(err.contains("delegated it to one executor alone"), "{err}");
    home.ok(&["claim", &made[0], "--as", "corner-shop"]);
    assert_eq!(status(&home, "get-onions")["ref"], made[0].as_str());
}

#[test]
fn accepted_alternatives_and_deferrals_amend_the_request_in_place() {
    let home = Home::with_config(CONFIG);
    let onions = request(&home, "get red onions", "get-onions", "buy-groceries");
    home.ok(&["claim", &onions, "--as", "instacart-proxy"]);
    home.send_as("instacart-proxy",
        &format!(
            "MESS:\n  - suggestion:\n      id: sug:alt\n      type: alternative\n      re: {onions}\n      proposed: {{intent: get yellow onions}}\n      reason: no red ones left\n"
        ),
    );
    home.send_as(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:alt\n      accept: true\n",
    );
    let s = status(&home, &onions);
    assert_eq!(s["intent"], "get yellow onions", "{s}");
    assert_eq!(s["status"], "claimed", "{s}");
    home.send_as("instacart-proxy",
        &format!(
            "MESS:\n  - suggestion:\n      id: sug:defer\n      type: defer\n      re: {onions}\n      proposed: {{needed_by: '2099-01-02T10:00:00Z'}}\n"
        ),
    );
    home.send_as(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:defer\n      accept: true\n",
    );
    let file = show(&home, &onions);
    assert!(file.contains("needed_by: 2099-01-02T10:00:00Z"), "{file}");
    assert!(file.contains("amended"), "{file}");
    // The envelope is what the messages say: a check of the file finds nothing to heal.
    let fsck = home.ok(&["fsck"]);
    assert!(!fsck.contains("heal"), "{fsck}");
}

#[test]
fn a_claim_that_lands_before_the_acceptance_wins() {
    let home = Home::with_config(CONFIG);
    let onions = request(&home, "get onions", "get-onions", "buy-groceries");
    let garlic = request(&home, "get garlic", "get-garlic", "buy-groceries");
    home.send_as("instacart-proxy",
        "MESS:\n  - suggestion:\n      id: sug:merge\n      type: merge\n      re: [get-onions, get-garlic]\n      proposed: {combined_intent: buy onions and garlic}\n",
    );
    home.ok(&["claim", &onions, "--as", "corner-shop"]);
    let err = home.send_refused(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:merge\n      accept: true\n",
    );
    assert!(
        err.contains("claimed by corner-shop") && err.contains("nothing changed"),
        "{err}"
    );
    assert_eq!(status(&home, &onions)["status"], "claimed");
    assert_eq!(status(&home, &garlic)["status"], "pending");
    assert!(!show(&home, &onions).contains("superseded"));
}

/// `POST /mess` as `key`, which must succeed; the answer as JSON.
fn post(server: &crate::support::server::Server, key: &str, yaml: &str) -> serde_json::Value {
    let (code, body) = server.post_yaml(key, yaml);
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn suggestions_over_http_are_carried_out_and_a_race_with_a_claim_has_one_winner() {
    use crate::support::server::Server;
    let home = Home::with_config(CONFIG);
    let agent = home.token("agent", "claude-agent");
    let proxy = home.token("executor", "instacart-proxy");
    let shop = home.token("executor", "corner-shop");
    let server = Server::start(&home);
    let create = |id: &str| -> String {
        let v = post(
            &server,
            &agent,
            &format!(
                "MESS:\n  - request:\n      id: {id}\n      intent: get {id}\n      requires: [buy-groceries]\n"
            ),
        );
        v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned()
    };

    // A delegation over HTTP: the delegate alone may see the new thread.
    let leeks = create("leeks");
    post(
        &server,
        &proxy,
        &format!("MESS:\n  - status: {{re: {leeks}, code: claimed}}\n"),
    );
    post(
        &server,
        &proxy,
        &format!(
            "MESS:\n  - suggestion:\n      id: sug:leeks\n      type: delegate\n      re: {leeks}\n      proposed: {{executor: corner-shop}}\n"
        ),
    );
    let v = post(
        &server,
        &agent,
        "MESS:\n  - reply: {re: sug:leeks, accept: true}\n",
    );
    let status = &v["MESS"][1]["status"];
    assert_eq!(status["code"], "delegated", "{v}");
    assert_eq!(status["delegated_to"], "corner-shop", "{v}");
    let new = status["refs"][0].as_str().unwrap().to_owned();
    let (code, body) = server.post_yaml(
        &proxy,
        &format!("MESS:\n  - status: {{re: {new}, code: claimed}}\n"),
    );
    assert_eq!(code, 404, "the proxy may not even see it: {body}");
    post(
        &server,
        &shop,
        &format!("MESS:\n  - status: {{re: {new}, code: claimed}}\n"),
    );
    let (_, thread) = server.get(&format!("/threads/{new}"), &agent);
    assert!(thread.contains("corner-shop"), "{thread}");

    // Races: an acceptance of a merge against a claim of its anchor, many times over; each
    // time exactly one wins, and the files say which.
    let (mut merges, mut claims) = (0, 0);
    for round in 0..12 {
        let a = create(&format!("a{round}"));
        let b = create(&format!("b{round}"));
        post(
            &server,
            &proxy,
            &format!(
                "MESS:\n  - suggestion:\n      id: sug:r{round}\n      type: merge\n      re: [{a}, {b}]\n      proposed: {{combined_intent: both}}\n"
            ),
        );
        let (accepted, claimed) = std::thread::scope(|s| {
            let accept = s.spawn(|| {
                server.post_yaml(
                    &agent,
                    &format!("MESS:\n  - reply: {{re: sug:r{round}, accept: true}}\n"),
                )
            });
            let claim = s.spawn(|| {
                server.post_yaml(
                    &shop,
                    &format!("MESS:\n  - status: {{re: {a}, code: claimed}}\n"),
                )
            });
            (accept.join().unwrap(), claim.join().unwrap())
        });
        let (_, file) = server.get(&format!("/threads/{a}?format=messe-af"), &agent);
        match (accepted.0, claimed.0) {
            // The losing claim hears a conflict, or, once the thread has ended, that there is
            // no such thread for it (ended threads are their parties' alone).
            (200, 404 | 409) => {
                merges += 1;
                assert!(
                    file.contains("code: superseded") && !file.contains("corner-shop"),
                    "{file}"
                );
            }
            (409, 200) => {
                claims += 1;
                assert!(
                    accepted.1.contains("claimed by corner-shop"),
                    "{}",
                    accepted.1
                );
                assert!(!file.contains("superseded"), "{file}");
                let (_, other) = server.get(&format!("/threads/{b}?format=messe-af"), &agent);
                assert!(!other.contains("superseded"), "{other}");
            }
            other => {
                panic!("round {round}: both or neither won: {other:?}\n{accepted:?}\n{claimed:?}")
            }
        }
    }
    assert_eq!(merges + claims, 12);
    server.stop();
    home.ok(&["fsck"]);
}

#[test]
fn merge_split_alternative_and_defer_over_http_carry_out_what_was_accepted() {
    use crate::support::server::Server;
    let home = Home::with_config(CONFIG);
    let agent = home.token("agent", "claude-agent");
    let proxy = home.token("executor", "instacart-proxy");
    home.ok(&["shells", "grant", "claude-agent", "100"]);
    let server = Server::start(&home);
    let create = |id: &str, extra: &str| -> String {
        let v = post(
            &server,
            &agent,
            &format!(
                "MESS:\n  - request:\n      id: {id}\n      intent: get {id}\n      requires: [buy-groceries]\n{extra}"
            ),
        );
        v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned()
    };
    let suggest = |body: String| post(&server, &proxy, &format!("MESS:\n  - suggestion:\n{body}"));
    let accept = |id: &str| {
        post(
            &server,
            &agent,
            &format!("MESS:\n  - reply: {{re: {id}, accept: true}}\n"),
        )
    };
    let file = |r: &str| {
        server
            .get(&format!("/threads/{r}?format=messe-af"), &agent)
            .1
    };
    let escrow = |r: &str| -> i64 {
        home.ok(&["shells", "balance", &format!("escrow:{r}")])
            .trim()
            .parse()
            .unwrap()
    };

    // Merge: the new thread is the proposer's, and holds both escrows.
    let paid = "      compensation: {shells: 10}\n";
    let onions = create("onions", paid);
    let garlic = create("garlic", paid);
    suggest(format!(
        "      id: sug:m\n      type: merge\n      re: [{onions}, {garlic}]\n      proposed: {{executor: instacart-proxy, combined_intent: buy onions and garlic}}\n"
    ));
    let v = accept("sug:m");
    let status = &v["MESS"][1]["status"];
    assert_eq!(status["code"], "superseded", "{v}");
    let merged = status["refs"][0].as_str().unwrap().to_owned();
    let text = file(&merged);
    assert!(
        text.contains("intent: buy onions and garlic") && text.contains("status: claimed"),
        "{text}"
    );
    assert!(file(&garlic).contains(&format!("superseded_by: {merged}")));
    assert_eq!((escrow(&onions), escrow(&merged)), (0, 20));

    // Split, ordered: two parts, the second waiting on the first, the escrow shared.
    let kitchen = create("kitchen", paid);
    suggest(format!(
        "      id: sug:s\n      type: split\n      re: {kitchen}\n      proposed:\n        ordered: true\n        parts: [buy the onions, buy the garlic]\n"
    ));
    let v = accept("sug:s");
    let parts: Vec<String> = v["MESS"][1]["status"]["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(parts.len(), 2, "{v}");
    assert!(file(&parts[1]).contains(&format!("depends_on:\n  - {}", parts[0])));
    assert!(file(&kitchen).contains("reason: split"));
    assert_eq!((escrow(&parts[0]), escrow(&parts[1])), (5, 5));

    // A rejected alternative changes nothing; an accepted one changes the intent in place.
    let leeks = create("leeks", "");
    suggest(format!(
        "      id: sug:a\n      type: alternative\n      re: {leeks}\n      proposed: {{intent: get spring onions}}\n"
    ));
    post(
        &server,
        &agent,
        "MESS:\n  - reply: {re: sug:a, accept: false}\n",
    );
    assert!(file(&leeks).contains("intent: get leeks"));
    accept("sug:a");
    let text = file(&leeks);
    assert!(
        text.contains("intent: get spring onions") && text.contains("status: pending"),
        "{text}"
    );

    // Defer: needed_by moves as accepted.
    let milk = create("milk", "      needed_by: 2099-01-01T10:00:00Z\n");
    suggest(format!(
        "      id: sug:d\n      type: defer\n      re: {milk}\n      proposed: {{needed_by: 2099-01-02T10:00:00Z}}\n"
    ));
    accept("sug:d");
    let (_, json) = server.get(&format!("/threads/{milk}"), &agent);
    assert!(json.contains("2099-01-02T10:00:00Z"), "{json}");
    server.stop();
    home.ok(&["fsck"]);
}
