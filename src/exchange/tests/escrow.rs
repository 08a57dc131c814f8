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
    f.ex.shell_balances()
        .unwrap()
        .get(account)
        .copied()
        .unwrap_or_default()
}

#[test]
fn an_escrow_whose_request_was_never_written_is_refunded_by_the_sweep_once() {
    let f = fixture(EXECUTORS);
    f.ex.grant_shells("claude-agent", 50, None).unwrap();
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
        f.ex.escrow(&lost, &request, "claude-agent", now)
            .unwrap()
            .is_some()
    );
    assert_eq!(balance(&f, "claude-agent"), 25);
    // Too young: its writer may still be on its way.
    assert!(f.ex.sweep_orphan_escrows().unwrap().is_empty());
    f.clock.advance(TimeDelta::minutes(6));
    f.ex.sweep_expiry(true).unwrap();
    assert_eq!(balance(&f, "claude-agent"), 40, "the lost escrow refunded");
    assert_eq!(balance(&f, &format!("escrow:{lost}")), 0);
    assert_eq!(
        balance(&f, &format!("escrow:{kept}")),
        10,
        "a written thread keeps its escrow"
    );
    assert!(f.ex.sweep_orphan_escrows().unwrap().is_empty(), "once");
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
    f.ex.grant_shells("claude-agent", 50, None).unwrap();
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 10}",
    );
    let thread = ThreadRef::parse(&r).unwrap();
    // The change is written (the edit hook queues its settlement in the same write); the
    // process stops before it settles inline.
    let now = f.ex.now();
    f.ex.store()
        .modify(&thread, |t| -> Result<_, crate::exchange::Error> {
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
    assert_eq!(balance(&f, &format!("escrow:{r}")), 10, "not settled yet");
    let queued = |f: &crate::exchange::tests::Fixture| {
        f.ex.store()
            .deliveries(Shelf::Queue)
            .0
            .into_iter()
            .any(|d| d.channel == crate::exchange::escrow::CHANNEL)
    };
    assert!(queued(&f));
    deliver_until(&f, "settled", || {
        balance(&f, "claude-agent") == 50 && !queued(&f)
    });
    assert_eq!(balance(&f, &format!("escrow:{r}")), 0);
    // Settling again moves nothing.
    assert!(!f.ex.settle_escrow(&thread).unwrap());
}
