//! Queue positions in acks: counted from the store by a process that does not follow the home,
//! and from the in-memory queue by one that does, with the same answers as requests arrive,
//! jump the queue (urgent), wait held (`not_before`) and leave it (claimed); and what the kept
//! open threads tell the sweeper and the router.

use chrono::TimeDelta;

use crate::exchange::tests::{EXECUTORS, Fixture, fixture, indent};
use crate::protocol::message::Payload;

/// Sends a request; its ref and queue position (none while it is held).
fn ask(f: &Fixture, body: &str) -> (String, Option<i64>) {
    f.clock.advance(TimeDelta::seconds(1));
    let answer = f.ok(
        "claude-agent",
        &format!("MESS:\n  - request:\n{}", indent(body, 6)),
    );
    match answer.content().next().unwrap() {
        Payload::Ack(a) => (a.thread_ref.clone().unwrap(), a.queue_position),
        other => panic!("no ack: {other:?}"),
    }
}

fn positions(follow: bool) -> Vec<Option<i64>> {
    let f = fixture(EXECUTORS);
    if follow {
        f.ex.queue.follow(|| crate::exchange::view::open(&f.ex));
    }
    let mut out = Vec::new();
    let (a, p) = ask(&f, "intent: vacuum the hall\nrequires: [vacuum-floor]");
    out.push(p);
    out.push(ask(&f, "intent: vacuum the stairs\nrequires: [vacuum-floor]").1);
    // Held until next week: behind the two before it, and in nobody's way after.
    out.push(
        ask(
            &f,
            "intent: vacuum the roof\nrequires: [vacuum-floor]\nconstraints: {timing: {not_before: 2026-02-07T00:00:00Z}}",
        )
        .1,
    );
    out.push(
        ask(
            &f,
            "intent: vacuum the spill\nrequires: [vacuum-floor]\npriority: urgent",
        )
        .1,
    );
    out.push(ask(&f, "intent: vacuum the porch\nrequires: [vacuum-floor]").1);
    f.status("roomba-kitchen", &a, "code: claimed").unwrap();
    out.push(ask(&f, "intent: vacuum the attic\nrequires: [vacuum-floor]").1);
    out.push(
        ask(
            &f,
            "intent: vacuum the car\nrequires: [vacuum-floor]\npriority: urgent",
        )
        .1,
    );
    out
}

#[test]
fn queue_positions_are_the_same_counted_or_kept() {
    // hall 1; stairs 2; roof held, in no place; spill (urgent) 1; porch 4 (the roof is not
    // ahead); hall claimed: attic after spill, stairs, porch is 4; car (urgent) after spill 2.
    let want = [Some(1), Some(2), None, Some(1), Some(4), Some(4), Some(2)].to_vec();
    assert_eq!(positions(false), want);
    assert_eq!(positions(true), want);
}

/// The threads the kept index says were never dispatched, in queue order.
fn unrouted_of(f: &Fixture) -> Vec<String> {
    f.ex.queue
        .unrouted()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_kept_open_threads_name_what_is_due_unrouted_or_to_escalate() {
    let at = |s: &str| crate::protocol::time::parse_timestamp(s).unwrap();
    use crate::exchange::view;
    use crate::protocol::status::Status;

    let f = fixture(EXECUTORS);
    f.ex.queue.follow(|| view::open(&f.ex));
    let soon = f.request(
        "claude-agent",
        "intent: vacuum the hall\nrequires: [vacuum-floor]\nneeded_by: \"2026-01-31T18:00:00-08:00\"",
    );
    let later = f.request(
        "claude-agent",
        "intent: vacuum the stairs\nrequires: [vacuum-floor]\nneeded_by: \"2026-01-31T20:00:00-08:00\"",
    );
    let nobody = f.request("claude-agent", "intent: juggle\nrequires: [juggling]");
    let due = f.ex.queue.due(at("2026-01-31T17:30:00-08:00")).unwrap();
    assert!(due.overdue.is_empty());
    assert_eq!(due.next, Some(at("2026-01-31T18:00:00-08:00")));
    let unrouted = unrouted_of(&f);
    assert_eq!(
        unrouted,
        vec![nobody.clone()],
        "the hall and stairs were dispatched at once"
    );
    // Dispatched at 17:00; due for escalation 15 minutes later, normal priority.
    let escalate = |now: &str| {
        let now = at(now);
        f.ex.queue
            .escalation_due(|_, dispatched| dispatched + chrono::TimeDelta::minutes(15) <= now)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert!(escalate("2026-01-31T17:10:00-08:00").is_empty());
    assert_eq!(
        escalate("2026-01-31T17:20:00-08:00"),
        vec![soon.clone(), later.clone()]
    );

    // The sweeper settles the thread that is due, by the index, and moves on to the next.
    f.clock
        .set(crate::exchange::tests::at("2026-01-31T18:30:00-08:00"));
    let next = f.ex.upkeep().sweep_expiry(false).unwrap();
    f.follow();
    assert_eq!(f.env(&soon).status, Status::Expired);
    assert_eq!(f.env(&later).status, Status::Pending);
    assert_eq!(next, Some(at("2026-01-31T20:00:00-08:00")));
    let due = f.ex.queue.due(at("2026-01-31T18:30:00-08:00")).unwrap();
    assert!(due.overdue.is_empty(), "the expired thread left the index");

    // A claim leaves the queue and the escalation list; the deadline stays (claimed work
    // has none: it is no longer pending, waiting or held).
    f.status("roomba-kitchen", &later, "code: claimed").unwrap();
    assert!(escalate("2026-01-31T19:00:00-08:00").is_empty());
    assert_eq!(
        f.ex.queue
            .due(at("2026-01-31T21:00:00-08:00"))
            .unwrap()
            .next,
        None
    );

    // A rebuild from the store agrees with what was kept.
    f.ex.queue.rebuild(|| view::open(&f.ex));
    let unrouted = unrouted_of(&f);
    assert_eq!(unrouted, vec![nobody]);
    assert_eq!(
        f.ex.queue
            .due(at("2026-01-31T21:00:00-08:00"))
            .unwrap()
            .next,
        None
    );
}
