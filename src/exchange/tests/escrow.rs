//! Escrow across the crash windows of a process: an escrow taken whose thread was never
//! written is refunded by the sweep (and only once it is old enough), and a change written
//! whose settlement never ran is settled by the delivery queued with it.

use chrono::TimeDelta;

use crate::exchange::tests::{EXECUTORS, deliver_until, fixture};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Payload;
use crate::protocol::status::{StatusDetails, StatusMsg};
use crate::store::outbox::Shelf;

fn balance(f: &crate::exchange::tests::Fixture, account: &str) -> i64 {
    f.ex.marketplace()
        .shell_balances()
        .unwrap()
        .get(account)
        .copied()
        .unwrap_or_default()
}

#[test]
fn an_escrow_whose_request_was_never_written_is_refunded_by_the_sweep_once() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 50, None)
        .unwrap();
    let kept = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 10}",
    );
    // What requests::create does before it writes the thread; the process stops there.
    let now = f.ex.now();
    let lost =
        f.ex.store()
            .allocate_refs(now.date_naive(), 1)
            .unwrap()
            .remove(0);
    let request = crate::protocol::request::Request::from_value(
        crate::protocol::yaml::parse_documents(
            "intent: vacuum\ncompensation: {shells: 15}",
            &crate::protocol::yaml::Limits::DEFAULT,
        )
        .unwrap()
        .remove(0),
        "request",
    )
    .unwrap();
    assert!(
        f.ex.marketplace()
            .escrow(&lost, &request, "claude-agent", now)
            .unwrap()
            .is_some()
    );
    assert_eq!(balance(&f, "claude-agent"), 25);
    // Too young: its writer may still be on its way.
    assert!(
        f.ex.marketplace()
            .sweep_orphan_escrows()
            .unwrap()
            .is_empty()
    );
    f.clock.advance(TimeDelta::minutes(6));
    f.ex.upkeep().sweep_expiry(true).unwrap();
    assert_eq!(balance(&f, "claude-agent"), 40, "the lost escrow refunded");
    assert_eq!(balance(&f, &format!("escrow:{lost}")), 0);
    assert_eq!(
        balance(&f, &format!("escrow:{kept}")),
        10,
        "a written thread keeps its escrow"
    );
    assert!(
        f.ex.marketplace()
            .sweep_orphan_escrows()
            .unwrap()
            .is_empty(),
        "once"
    );
    let refunds =
        f.ex.store()
            .ledger()
            .unwrap()
            .into_iter()
            .filter(|m| m.kind == "refund")
            .count();
    assert_eq!(refunds, 1);
}

#[test]
fn a_change_whose_settlement_never_ran_is_settled_by_its_queued_delivery() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 50, None)
        .unwrap();
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 10}",
    );
    let thread = ThreadRef::parse(&r).unwrap();
    // The change is written (the edit hook queues its settlement in the same write); the
    // process stops before it settles inline.
    expired_without_settling(&f, &thread);
    assert_eq!(balance(&f, &format!("escrow:{r}")), 10, "not settled yet");
    let queued = |f: &crate::exchange::tests::Fixture| {
        f.ex.store()
            .deliveries(Shelf::Queue)
            .0
            .into_iter()
            .any(|d| d.job == crate::store::outbox::Job::Settlement)
    };
    assert!(queued(&f));
    deliver_until(&f, "settled", || {
        balance(&f, "claude-agent") == 50 && !queued(&f)
    });
    assert_eq!(balance(&f, &format!("escrow:{r}")), 0);
    // Settling again moves nothing.
    assert!(!f.ex.marketplace().settle_escrow(&thread).unwrap());
}

#[test]
fn a_home_without_a_server_finishes_its_own_queued_work_in_the_next_command() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 50, None)
        .unwrap();
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 10}",
    );
    let thread = ThreadRef::parse(&r).unwrap();
    // A one-shot command that stopped between the change and its settlement.
    expired_without_settling(&f, &thread);
    // Only the exchange's own work waits: nobody needs to be sent anything for it.
    assert_eq!(f.ex.outbox().notices_stalled(), None);
    assert_eq!(balance(&f, &format!("escrow:{r}")), 10);
    // The next command finishes it, once.
    assert_eq!(f.ex.outbox().finish_internal_work().unwrap(), 1);
    assert_eq!(balance(&f, "claude-agent"), 50);
    assert_eq!(balance(&f, &format!("escrow:{r}")), 0);
    assert_eq!(f.ex.outbox().finish_internal_work().unwrap(), 0);
    assert!(
        f.ex.store()
            .deliveries(Shelf::Queue)
            .0
            .iter()
            .all(|d| d.job != crate::store::outbox::Job::Settlement)
    );
}

/// Expires `thread` as the exchange does (its settlement queued in the same write) and stops
/// there, as a process that dies before it settles inline.
pub(super) fn expired_without_settling(f: &crate::exchange::tests::Fixture, thread: &ThreadRef) {
    let now = f.ex.now();
    f.ex.store()
        .modify(thread, |t| -> Result<_, crate::exchange::Error> {
            let status = StatusMsg::new(
                t.envelope.thread_ref.as_str(),
                StatusDetails::Expired {
                    expired_at: now,
                    stage: None,
                },
            );
            Ok((
                Some(crate::exchange::lifecycle::exchange_edit(
                    &t.envelope,
                    vec![Payload::Status(status)],
                    now,
                )),
                (),
            ))
        })
        .unwrap();
}

/// Appends `doc` (from `who`) to thread `r` as a process that stops before settling does.
fn written_alone(f: &crate::exchange::tests::Fixture, r: &str, who: &str, payload: Payload) {
    let thread = ThreadRef::parse(r).unwrap();
    let now = f.ex.now();
    f.ex.store()
        .modify(&thread, |t| -> Result<_, crate::exchange::Error> {
            let doc = crate::protocol::envelope::MessageDoc {
                from: who.to_owned(),
                received: now,
                channel: Some("http".to_owned()),
                message: crate::protocol::message::Message::new(vec![payload.clone()]),
                extra: crate::protocol::value::Map::new(),
            };
            let mut envelope = t.envelope.clone();
            envelope.apply(&doc);
            Ok((
                Some(crate::store::Edit {
                    envelope,
                    append: vec![doc],
                    deliveries: Vec::new(),
                }),
                (),
            ))
        })
        .unwrap();
}

fn payload(f: &crate::exchange::tests::Fixture, yaml: &str) -> Payload {
    f.ex.intake()
        .parse_one(&format!("MESS:\n  - {yaml}\n"))
        .unwrap()
        .payloads
        .into_iter()
        .find(|p| !matches!(p, Payload::Unknown { .. }))
        .unwrap()
}

#[test]
fn a_review_after_a_completion_gets_its_own_settlement_delivery() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 50, None)
        .unwrap();
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 10, escrow: {release_on: reviewed}}",
    );
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    f.status("roomba-kitchen", &r, "code: completed").unwrap();
    // The completion's delivery finds nothing to settle yet (no review).
    deliver_until(&f, "the completion's delivery done", || {
        !f.ex
            .store()
            .deliveries(Shelf::Queue)
            .0
            .iter()
            .any(|d| d.job == crate::store::outbox::Job::Settlement)
    });
    // The accepting review is written; its process stops before settling.
    written_alone(
        &f,
        &r,
        "claude-agent",
        payload(&f, &format!("review: {{re: {r}, rating: 5}}")),
    );
    deliver_until(&f, "the review's settlement", || {
        balance(&f, "roomba-kitchen") == 10
    });
}

#[test]
fn a_release_interrupted_after_a_delegators_share_goes_on_as_a_release() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 100, None)
        .unwrap();
    let first = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 100, escrow: {delegator_share: 10}}",
    );
    f.ok(
        "roomba-kitchen",
        &format!("MESS:\n  - suggestion: {{id: sug-d, re: {first}, type: delegate, proposed: {{executor: kitchen-robot}}}}\n"),
    );
    let answer = f.ok(
        "claude-agent",
        "MESS:\n  - reply: {re: sug-d, accept: true}\n",
    );
    let r = answer
        .payloads
        .iter()
        .find_map(|p| match p {
            Payload::Status(s) => s.extra.get("refs")?.as_seq()?.first()?.scalar_text(),
            _ => None,
        })
        .expect("the new ref");
    assert_eq!(
        f.env(&first).status,
        crate::protocol::status::Status::Delegated
    );
    f.status("kitchen-robot", &r, "code: claimed").unwrap();
    // The completion is written and its release starts: the share is paid, then the
    // process stops.
    written_alone(
        &f,
        &r,
        "kitchen-robot",
        payload(&f, &format!("status: {{re: {r}, code: completed}}")),
    );
    let now = f.ex.now();
    f.ex.marketplace()
        .record(
            &crate::store::ledger::Movement {
                id: format!("share-{r}-1"),
                at: now,
                from: format!("escrow:{r}"),
                to: "roomba-kitchen".to_owned(),
                shells: 10,
                kind: "share".to_owned(),
                thread: Some(r.clone()),
                note: None,
            },
            &|_| Ok(()),
        )
        .unwrap();
    // The requestor asks for a redo, and the work then fails: the release still finishes.
    f.ok(
        "claude-agent",
        &format!("MESS:\n  - review: {{re: {r}, rating: 2, request_redo: true}}\n"),
    );
    f.status("kitchen-robot", &r, "code: failed\nreason: broke")
        .unwrap();
    f.ex.marketplace()
        .settle_escrow(&ThreadRef::parse(&r).unwrap())
        .unwrap();
    assert_eq!(
        (
            balance(&f, "roomba-kitchen"),
            balance(&f, "kitchen-robot"),
            balance(&f, &format!("escrow:{r}")),
        ),
        (10, 90, 0)
    );
}

#[test]
fn a_suggestion_id_in_use_or_shaped_like_a_ref_is_refused() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    let b = f.request(
        "claude-agent",
        "intent: vacuum more\nrequires: [vacuum-floor]",
    );
    f.ok(
        "roomba-kitchen",
        &format!("MESS:\n  - suggestion: {{id: sug-1, re: {a}, type: alternative, proposed: {{intent: sweep}}}}\n"),
    );
    f.refused(
        "kitchen-robot",
        &format!("MESS:\n  - suggestion: {{id: sug-1, re: {b}, type: delegate, proposed: {{executor: kitchen-robot}}}}\n"),
        crate::exchange::error::ErrorKind::Conflict,
        "already in use",
    );
    f.refused(
        "kitchen-robot",
        &format!("MESS:\n  - suggestion: {{id: {a}, re: {a}, type: delegate, proposed: {{executor: kitchen-robot}}}}\n"),
        crate::exchange::error::ErrorKind::Invalid,
        "cannot be a thread ref",
    );
}

#[test]
fn every_enumerated_term_is_closed() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 50, None)
        .unwrap();
    let refused = |yaml: &str, text: &str| {
        f.refused(
            "claude-agent",
            yaml,
            crate::exchange::error::ErrorKind::Invalid,
            text,
        );
    };
    refused(
        "MESS:\n  - request: {intent: vacuum, requires: [vacuum-floor], compensation: {shells: 5, escrow: {release_on: reviewd}}}\n",
        "MESS[0].request.compensation.escrow.release_on: unknown release_on reviewd (expected one of: completed, reviewed)",
    );
    refused(
        "MESS:\n  - request: {intent: vacuum, compensation: {shells: 5, escrow: reviewed}}\n",
        "compensation.escrow: expected a mapping",
    );
    // Nothing was held for the refused requests.
    assert_eq!(balance(&f, "claude-agent"), 50);
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 5, escrow: {release_on: reviewed}}",
    );
    assert_eq!(balance(&f, &format!("escrow:{r}")), 5);
    // A split's `ordered` is yes or no.
    f.refused(
        "roomba-kitchen",
        &format!(
            "MESS:\n  - suggestion: {{re: {r}, type: split, proposed: {{ordered: maybe, parts: [hall, stairs]}}}}\n"
        ),
        crate::exchange::error::ErrorKind::Invalid,
        "proposed.ordered: \"maybe\" is not one of: true, false",
    );
    for (field, bad) in [("rating", "6"), ("rating", "great")] {
        f.status("roomba-kitchen", &r, "code: claimed").ok();
        f.status("roomba-kitchen", &r, "code: completed").ok();
        f.refused(
            "claude-agent",
            &format!("MESS:\n  - review: {{re: {r}, {field}: {bad}}}\n"),
            crate::exchange::error::ErrorKind::Invalid,
            "is not a rating (1 to 5, accept or reject)",
        );
    }
}
