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
use crate::store::FileStore;

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
        let ex = Exchange::new(FileStore::open(dir.path()), Settings::defaults(), clock);
        let as_key = |id: &str, role: Role| Sender::principal(&Principal { id: id.to_owned(), role, callback: None }, "http");
        let alice = as_key("alice", Role::Agent);
        let request = format!(
            "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n      confirm_before: {confirm_before}\n"
        );
        let ack = ex.submit(ex.parse_one(&request).unwrap(), &alice).unwrap();
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
            let outcome = ex.submit(ex.parse_one(&text).unwrap(), &as_key(id, role));
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

/// What the shells property test does at one step (on thread `i` of at most four).
const SHELL_MOVES: [&str; 10] = [
    "create", "claim", "complete", "fail", "cancel", "accept", "reject", "redo", "restart",
    "settle",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_ledger_always_balances_and_every_escrow_is_settled_once(
        steps in prop::collection::vec((0..SHELL_MOVES.len(), 0usize..4, 1i64..80), 1..40),
    ) {
        let dir = TempDir::new().unwrap();
        std::fs::write(dir.path().join("config.yaml"), CONFIG).unwrap();
        let clock = Arc::new(FixedClock::new(
            time::parse_timestamp("2026-01-31T17:00:00Z").unwrap().to_utc(),
        ));
        let open = || Exchange::new(FileStore::open(dir.path()), Settings::defaults(), clock.clone());
        let mut ex = open();
        let as_key = |id: &str, role: Role| Sender::principal(&Principal { id: id.to_owned(), role, callback: None }, "http");
        let (alice, robot) = (as_key("alice", Role::Agent), as_key("able-1", Role::Executor));
        ex.grant_shells("alice", 200, None).unwrap();
        let mut threads: Vec<String> = Vec::new();
        for (what, i, shells) in steps {
            let r = threads.get(i % threads.len().max(1)).cloned().unwrap_or_default();
            let send = |ex: &Exchange, who: &Sender, body: String| {
                ex.parse_one(&format!("MESS:\n  - {body}\n")).ok().map(|m| ex.submit(m, who))
            };
            match SHELL_MOVES[what] {
                "create" => {
                    let reviewed = if shells % 2 == 0 { "\n        escrow: {release_on: reviewed}" } else { "" };
                    let body = format!("request:\n      intent: vacuum\n      requires: [vacuum-floor]\n      compensation:\n        shells: {shells}{reviewed}");
                    if let Some(Ok(ack)) = send(&ex, &alice, body) {
                        let v = ack.to_value();
                        let r = v.as_map().and_then(|m| m.get("MESS")).and_then(|m| m.as_seq())
                            .and_then(|s| s.iter().find_map(|p| p.as_map().and_then(|p| p.get("ack")))).and_then(|a| a.as_map())
                            .and_then(|a| a.get("ref")).and_then(|r| r.as_str()).unwrap().to_owned();
                        threads.push(r);
                    }
                }
                _ if r.is_empty() => {}
                "claim" => { let _ = send(&ex, &robot, format!("status: {{re: {r}, code: claimed}}")); }
                "complete" => { let _ = send(&ex, &robot, format!("status: {{re: {r}, code: completed}}")); }
                "fail" => { let _ = send(&ex, &robot, format!("status: {{re: {r}, code: failed, reason: broke}}")); }
                "cancel" => { let _ = send(&ex, &alice, format!("cancel: {{re: {r}}}")); }
                "accept" => { let _ = send(&ex, &alice, format!("review: {{re: {r}, rating: accept}}")); }
                "reject" => { let _ = send(&ex, &alice, format!("review: {{re: {r}, rating: 1}}")); }
                "redo" => { let _ = send(&ex, &alice, format!("review: {{re: {r}, rating: 2, request_redo: true}}")); }
                "restart" => ex = open(),
                // What the delivery worker does with a queued settlement.
                _ => for t in &threads { ex.settle_escrow(&ThreadRef::parse(t).unwrap()).unwrap(); },
            }
            let balances = ex.shell_balances().unwrap();
            prop_assert_eq!(balances.values().sum::<i64>(), 0, "double entry");
            prop_assert_eq!(balances.iter().filter(|(a, _)| *a != "operator").map(|(_, b)| b).sum::<i64>(), 200, "what was granted");
            prop_assert!(balances.iter().all(|(a, b)| a == "operator" || *b >= 0), "{balances:?}");
            let ledger = ex.store().ledger().unwrap();
            for t in &threads {
                let settled = ledger.iter().filter(|m| m.id == format!("settle-{t}")).count();
                let escrowed = ledger.iter().filter(|m| m.id == format!("escrow-{t}")).count();
                prop_assert_eq!(escrowed, 1, "{}", t);
                prop_assert!(settled <= 1, "{} settled twice", t);
                let held = balances.get(&format!("escrow:{t}")).copied().unwrap_or_default();
                let env = ex.store().envelope(&ThreadRef::parse(t).unwrap()).unwrap().0;
                prop_assert_eq!(held == 0, settled == 1, "{} holds {} with {} settlement(s)", t, held, settled);
                // An outcome the exchange can decide is settled as it is decided.
                let waits_for_review = matches!(env.status, Status::Completed | Status::Partial)
                    && ex.store().read(&env.thread_ref).unwrap().text().contains("release_on: reviewed");
                if env.status.is_terminal() && !waits_for_review {
                    prop_assert_eq!(settled, 1, "{} is {} and unsettled", t, env.status);
                }
            }
        }
    }
}
