//! Queue positions in acks: counted from the store by a process that does not follow the home,
//! and from the in-memory queue by one that does, with the same answers as requests arrive,
//! jump the queue (urgent) and leave it (claimed).

use chrono::TimeDelta;

use crate::exchange::tests::{EXECUTORS, Fixture, fixture, indent};
use crate::protocol::message::Payload;

/// Sends a request; its ref and queue position.
fn ask(f: &Fixture, body: &str) -> (String, i64) {
    f.clock.advance(TimeDelta::seconds(1));
    let answer = f.ok(
        "claude-agent",
        &format!("MESS:\n  - request:\n{}", indent(body, 6)),
    );
    match answer.content().next().unwrap() {
        Payload::Ack(a) => (a.thread_ref.clone().unwrap(), a.queue_position.unwrap()),
        other => panic!("no ack: {other:?}"),
    }
}

fn positions(follow: bool) -> Vec<i64> {
    let f = fixture(EXECUTORS);
    if follow {
        f.ex.queue.follow(|| crate::exchange::view::pending(&f.ex));
    }
    let mut out = Vec::new();
    let (a, p) = ask(&f, "intent: vacuum the hall\nrequires: [vacuum-floor]");
    out.push(p);
    out.push(ask(&f, "intent: vacuum the stairs\nrequires: [vacuum-floor]").1);
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
    // hall 1; stairs 2; spill (urgent) 1; porch 4; hall claimed: attic after spill, stairs,
    // porch is 4; car (urgent) after spill is 2.
    let want = vec![1, 2, 1, 4, 4, 2];
    assert_eq!(positions(false), want);
    assert_eq!(positions(true), want);
}
