//! Property tests of the thread state machine through the exchange: random sequences of
//! messages from random principals (the requestor, executors able to take the thread, one
//! that is not, a stranger) on a real temp home never break the lifecycle rules (docs/protocol.md),
//! and never lose an acknowledged message. Seeded by proptest, a bounded number of cases.

use std::sync::Arc;

use proptest::prelude::*;
use tempfile::TempDir;

use crate::exchange::access;
use crate::exchange::auth::{Principal, Role};
use crate::exchange::clock::FixedClock;
use crate::exchange::directory::Directory;
use crate::exchange::{Exchange, Sender, Settings};
use crate::protocol::envelope::{self, ConfirmState};
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::Status;
use crate::protocol::time;

const CONFIG: &str = "
executors:
  able-1:
    capabilities: [vacuum-floor]
  able-2:
    capabilities: [vacuum-floor, take-photo]
  unable:
    capabilities: [take-photo]
";

/// Who sends, with the role of a key: every principal a thread meets.
const ACTORS: [(&str, Role); 5] = [
    ("alice", Role::Agent),
    ("able-1", Role::Executor),
    ("able-2", Role::Executor),
    ("unable", Role::Executor),
    ("mallory", Role::Agent),
];

/// The payloads principals try (the thread's ref filled in).
const MOVES: [&str; 14] = [
    "status:\n      re: REF\n      code: claimed",
    "status:\n      re: REF\n      code: in_progress\n      progress_pct: 40",
    "status:\n      re: REF\n      code: needs_input\n      questions: [{field: q, question: Which?}]",
    "status:\n      re: REF\n      code: needs_confirmation\n      action: act\n      consequences: none",
    "status:\n      re: REF\n      code: completed",
    "status:\n      re: REF\n      code: failed\n      reason: broke",
    "status:\n      re: REF\n      code: declined\n      reason: no",
    "status:\n      re: REF\n      code: held\n      reason: wait",
    "response:\n      re: REF\n      content: [{text: done}]",
    "reply:\n      re: REF\n      answers: {q: yes please}",
    "reply:\n      re: REF\n      confirm: true",
    "cancel:\n      re: REF",
    "suggestion:\n      re: REF\n      type: alternative\n      intent: try this",
    "status:\n      re: REF\n      code: retrying\n      attempt: 2\n      max_attempts: 3\n      next_attempt: 2026-02-01T00:00:00Z",
];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_messages_never_break_the_rules_or_lose_an_acknowledged_one(
        confirm_before in any::<bool>(),
        steps in prop::collection::vec((0..ACTORS.len(), 0..MOVES.len()), 1..24),
    ) {
        let dir = TempDir::new().unwrap();
        std::fs::write(dir.path().join("config.yaml"), CONFIG).unwrap();
        let clock = Arc::new(FixedClock::new(
            time::parse_timestamp("2026-01-31T17:00:00Z").unwrap().to_utc(),
        ));
        let ex = Exchange::new(crate::store::testing::store_in(dir.path()), Settings::defaults(), clock);
        let as_key = |id: &str, role: Role| Sender::principal(&Principal { id: id.to_owned(), role, callback: None }, "http");
        let alice = as_key("alice", Role::Agent);
        let request = format!(
            "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n      confirm_before: {confirm_before}\n"
        );
        let ack = ex.intake().submit(ex.intake().parse_one(&request).unwrap(), &alice).unwrap();
        let r = ack.to_value();
        let r = r.as_map().and_then(|m| m.get("MESS")).and_then(|m| m.as_seq())
            .and_then(|s| s.iter().find_map(|p| p.as_map().and_then(|p| p.get("ack")))).and_then(|a| a.as_map())
            .and_then(|a| a.get("ref")).and_then(|r| r.as_str()).unwrap().to_owned();
        let thread = ThreadRef::parse(&r).unwrap();
        // The request and the exchange's ack.
        let mut accepted = ex.store().read(&thread).unwrap().messages().unwrap().len();
        for (who, what) in steps {
            let (id, role) = ACTORS[who];
            let before = ex.store().envelope(&thread).unwrap().0;
            let directory = Directory::load(ex.store());
            let text = format!("MESS:\n  - {}\n", MOVES[what].replace("REF", &r));
            let outcome = ex.intake().submit(ex.intake().parse_one(&text).unwrap(), &as_key(id, role));
            let after = ex.store().envelope(&thread).unwrap().0;
            match outcome {
                Ok(_) => {
                    accepted += 1;
                    // Only someone the thread concerns moved it.
                    prop_assert!(access::may_address(id, &before, &directory), "{id} moved {r}: {text}");
                    // Final statuses stay final (partial may still complete).
                    if before.status.is_terminal() {
                        prop_assert_eq!(after.status, before.status, "{} changed a final thread", text);
                    }
                    // A claimed thread moves only by its claimant or its requestor.
                    if before.status != Status::Pending && before.status != after.status {
                        prop_assert!(
                            before.executor.as_deref() == Some(id) || before.requestor == id,
                            "{} moved {}'s thread: {}", id, before.executor.as_deref().unwrap_or("-"), text
                        );
                    }
                    // Without a confirmed confirmation, a confirm_before thread never completes.
                    if before.confirm_before && after.status == Status::Completed && before.status != Status::Completed {
                        prop_assert_eq!(before.confirmation, Some(ConfirmState::Confirmed), "{}", text);
                    }
                }
                Err(_) => prop_assert_eq!(&after.status, &before.status, "a refused message changed {}", r),
            }
            // Every acknowledged message is in the file, and the envelope is what they say.
            let file = ex.store().read(&thread).unwrap();
            let messages = file.messages().unwrap();
            prop_assert_eq!(messages.len(), accepted, "{}", file.text());
            let rebuilt = envelope::rebuild(&thread, Some(&file.envelope), &messages).unwrap();
            prop_assert_eq!(rebuilt.status, file.envelope.status);
            prop_assert_eq!(rebuilt.executor, file.envelope.executor);
        }
    }
}

/// What the shells property test does at one step (on thread `i` of those with escrow).
const SHELL_MOVES: [&str; 13] = [
    "create", "claim", "complete", "fail", "cancel", "accept", "reject", "redo", "restart",
    "settle", "delegate", "orphan", "sweep",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_ledger_always_balances_and_every_escrow_is_settled_once(
        steps in prop::collection::vec((0..SHELL_MOVES.len(), 0usize..6, 1i64..80), 1..40),
    ) {
        let dir = TempDir::new().unwrap();
        std::fs::write(dir.path().join("config.yaml"), CONFIG).unwrap();
        let clock = Arc::new(FixedClock::new(
            time::parse_timestamp("2026-01-31T17:00:00Z").unwrap().to_utc(),
        ));
        let first = crate::store::testing::store_in(dir.path());
        let open = || Exchange::new(crate::store::testing::reopen(&first), Settings::defaults(), clock.clone());
        let mut ex = open();
        let as_key = |id: &str, role: Role| Sender::principal(&Principal { id: id.to_owned(), role, callback: None }, "http");
        let alice = as_key("alice", Role::Agent);
        let robots = [as_key("able-1", Role::Executor), as_key("able-2", Role::Executor)];
        ex.marketplace().grant_shells("alice", 200, None).unwrap();
        // Escrows taken by a process that stopped before writing their thread.
        let mut orphans: Vec<String> = Vec::new();
        for (what, i, shells) in steps {
            // Every thread with an escrow, made by a request or by an accepted delegation.
            let threads: Vec<String> = escrowed(&ex).into_iter().filter(|t| !orphans.contains(t)).collect();
            let r = threads.get(i % threads.len().max(1)).cloned().unwrap_or_default();
            let send = |ex: &Exchange, who: &Sender, body: String| {
                ex.intake().parse_one(&format!("MESS:\n  - {body}\n")).ok().map(|m| ex.intake().submit(m, who))
            };
            // An executor's move, by whichever of the two may make it (a delegated thread is
            // offered to its delegate alone).
            let by_robot = |ex: &Exchange, body: String| {
                robots.iter().any(|who| matches!(send(ex, who, body.clone()), Some(Ok(_))))
            };
            let swept = SHELL_MOVES[what] == "sweep";
            match SHELL_MOVES[what] {
                "create" => {
                    let reviewed = if shells % 2 == 0 { "release_on: reviewed, " } else { "" };
                    let share = shells % 3 * 10;
                    let body = format!("request:\n      intent: vacuum\n      requires: [vacuum-floor]\n      compensation:\n        shells: {shells}\n        escrow: {{{reviewed}delegator_share: {share}}}");
                    let _ = send(&ex, &alice, body);
                }
                "orphan" => {
                    let now = ex.now();
                    let lost = ex.store().allocate_refs(now.date_naive(), 1).unwrap().remove(0);
                    let request = crate::protocol::request::Request::from_value(
                        crate::protocol::yaml::parse_documents(&format!("intent: vacuum\ncompensation: {{shells: {shells}}}"), &crate::protocol::yaml::Limits::DEFAULT).unwrap().remove(0),
                        "request",
                    ).unwrap();
                    if ex.marketplace().escrow(&lost, &request, "alice", now).is_ok() {
                        orphans.push(lost.to_string());
                    }
                }
                "sweep" => {
                    clock.advance(chrono::TimeDelta::minutes(6));
                    ex.marketplace().sweep_orphan_escrows().unwrap();
                }
                _ if r.is_empty() => {}
                "claim" => { by_robot(&ex, format!("status: {{re: {r}, code: claimed}}")); }
                "complete" => { by_robot(&ex, format!("status: {{re: {r}, code: completed}}")); }
                "fail" => { by_robot(&ex, format!("status: {{re: {r}, code: failed, reason: broke}}")); }
                "delegate" => {
                    let id = format!("sug-{shells}-{i}");
                    for (from, to) in [("able-1", "able-2"), ("able-2", "able-1")] {
                        let who = robots.iter().find(|s| s.id == from).unwrap();
                        let proposed = format!("suggestion: {{id: {id}, re: {r}, type: delegate, proposed: {{executor: {to}}}}}");
                        if matches!(send(&ex, who, proposed), Some(Ok(_))) {
                            let _ = send(&ex, &alice, format!("reply: {{re: {id}, accept: true}}"));
                            break;
                        }
                    }
                }
                "cancel" => { let _ = send(&ex, &alice, format!("cancel: {{re: {r}}}")); }
                "accept" => { let _ = send(&ex, &alice, format!("review: {{re: {r}, rating: accept}}")); }
                "reject" => { let _ = send(&ex, &alice, format!("review: {{re: {r}, rating: 1}}")); }
                "redo" => { let _ = send(&ex, &alice, format!("review: {{re: {r}, rating: 2, request_redo: true}}")); }
                "restart" => ex = open(),
                // What the delivery worker does with a queued settlement.
                _ => for t in &threads { ex.marketplace().settle_escrow(&ThreadRef::parse(t).unwrap()).unwrap(); },
            }
            let balances = ex.marketplace().shell_balances().unwrap();
            prop_assert_eq!(balances.values().sum::<i64>(), 0, "double entry");
            prop_assert_eq!(balances.iter().filter(|(a, _)| *a != "operator").map(|(_, b)| b).sum::<i64>(), 200, "what was granted");
            prop_assert!(balances.iter().all(|(a, b)| a == "operator" || *b >= 0), "{balances:?}");
            let ledger = ex.store().ledger().unwrap();
            let count = |id: String| ledger.iter().filter(|m| m.id == id).count();
            for t in escrowed(&ex).iter().chain(&orphans) {
                let account = format!("escrow:{t}");
                let taken = ledger.iter().filter(|m| m.to == account).count();
                let settled = count(format!("settle-{t}"));
                prop_assert!(count(format!("rest-{t}")) <= 1, "{} refunded its rest twice", t);
                let carried = ledger.iter().any(|m| m.from == account && m.kind == "carry");
                prop_assert_eq!(taken, 1, "{} taken once", t);
                prop_assert!(settled <= 1, "{} settled twice", t);
                let held = balances.get(&account).copied().unwrap_or_default();
                prop_assert_eq!(held == 0, settled == 1 || carried, "{} holds {} with {} settlement(s)", t, held, settled);
                if orphans.contains(t) {
                    if swept {
                        prop_assert_eq!(settled, 1, "{} orphaned and not refunded by the sweep", t);
                    }
                    continue;
                }
                // An outcome the exchange can decide is settled as it is decided; work an
                // accepted delegation moved on is carried into its new thread.
                let file = ex.store().read(&ThreadRef::parse(t).unwrap()).unwrap();
                let env = &file.envelope;
                let moved = crate::exchange::escrow::moved_on(&file).unwrap();
                prop_assert!(!carried || moved, "{} carried on while {}", t, env.status);
                if moved {
                    // Work paid before it was redone and delegated has nothing left to carry.
                    prop_assert!(carried || settled == 1, "{} moved on and kept its shells", t);
                }
                let waits_for_review = matches!(env.status, Status::Completed | Status::Partial)
                    && file.text().contains("release_on: reviewed");
                if env.status.is_terminal() && !waits_for_review && !moved {
                    prop_assert_eq!(settled, 1, "{} is {} and unsettled", t, env.status);
                }
            }
        }
    }
}

/// The threads whose escrow the ledger names (an `escrow:REF` account it credited).
fn escrowed(ex: &Exchange) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in ex.store().ledger().unwrap() {
        if let Some(t) = m.to.strip_prefix("escrow:")
            && !out.iter().any(|o| o == t)
        {
            out.push(t.to_owned());
        }
    }
    out
}
