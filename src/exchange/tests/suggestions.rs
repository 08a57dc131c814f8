//! An accepted suggestion whose process stopped right after the decision: the delivery worker
//! finishes it from the anchor's file, and finishing again changes nothing.

use crate::exchange::suggestions;
use crate::exchange::tests::{EXECUTORS, deliver_until, fixture};
use crate::protocol::envelope::MessageDoc;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::Status;
use crate::protocol::value::Map;
use crate::store::Edit;
use crate::store::outbox::Shelf;

#[test]
fn a_merge_decided_before_a_crash_is_finished_by_the_delivery_worker_once() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "id: get-onions\nintent: buy onions");
    let b = f.request("claude-agent", "id: get-garlic\nintent: buy garlic");
    f.ok(
        "teague-phone",
        &format!("MESS:\n  - suggestion:\n      id: sug:m\n      type: merge\n      re: [{a}, {b}]\n      proposed: {{combined_intent: buy both}}\n"),
    );
    // The decision alone, as the accepting process writes it before it stops.
    let anchor = crate::protocol::ids::ThreadRef::parse(&a).unwrap();
    let mut body = Map::new();
    body.insert("re", crate::protocol::value::Value::str("sug:m"));
    body.insert("accept", crate::protocol::value::Value::Bool(true));
    let Payload::Reply(reply) = Message::single("reply", body).unwrap().payloads[0].clone() else {
        unreachable!()
    };
    let now = f.ex.now();
    let file = f.ex.store().read(&anchor).unwrap();
    let accepted = suggestions::accepted(&f.ex, &file, &reply, &f.ex.directory(), now)
        .unwrap()
        .unwrap();
    f.ex.store()
        .modify(&anchor, |t| -> Result<_, crate::exchange::Error> {
            let doc = MessageDoc {
                from: "claude-agent".to_owned(),
                received: now,
                channel: Some("cli".to_owned()),
                message: Message::new(vec![Payload::Reply(reply.clone())]),
                extra: Map::new(),
            };
            let mut envelope = t.envelope.clone();
            envelope.apply(&doc);
            let verdict = accepted.verdict(&envelope, now);
            envelope.apply(&verdict);
            Ok((
                Some(Edit {
                    deliveries: accepted.delivery(&envelope, now).into_iter().collect(),
                    envelope,
                    append: vec![doc, verdict],
                }),
                (),
            ))
        })
        .unwrap();
    assert_eq!(f.env(&a).status, Status::Superseded);
    assert_eq!(f.env(&b).status, Status::Pending, "not finished yet");
    let made = accepted_refs(&f.text(&a));
    assert!(f.ex.store().find(&made).unwrap().is_empty());

    // A server's delivery worker finishes it, and shelves it as done.
    deliver_until(&f, "finished", || {
        !f.ex.store().find(&made).unwrap().is_empty() && f.env(&b).status == Status::Superseded
    });
    deliver_until(&f, "shelved", || {
        !f.ex
            .store()
            .deliveries(Shelf::Queue)
            .0
            .into_iter()
            .any(|d| d.job == crate::store::outbox::Job::CarryOut)
    });
    assert_eq!(f.env(made.as_str()).intent, "buy both");
    assert_eq!(f.env(&b).status, Status::Superseded);
    // Again: nothing changes.
    let before = (f.text(&a), f.text(&b), f.text(made.as_str()));
    let again = suggestions::carry_out(&f.ex, &anchor, now).unwrap();
    assert_eq!(again, vec![made.to_string()]);
    assert_eq!(before, (f.text(&a), f.text(&b), f.text(made.as_str())));
}

/// The ref the verdict in `text` names as made.
fn accepted_refs(text: &str) -> crate::protocol::ids::ThreadRef {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("superseded_by:"))
        .expect(text);
    crate::protocol::ids::ThreadRef::parse(line.split(':').nth(1).unwrap().trim()).unwrap()
}

#[test]
fn a_merge_takes_in_only_threads_the_suggestion_was_made_on() {
    let f = fixture(EXECUTORS);
    let a = f.request(
        "claude-agent",
        "intent: vacuum the hall\nrequires: [vacuum-floor]",
    );
    let c = f.request(
        "claude-agent",
        "intent: vacuum the attic\nrequires: [vacuum-floor]",
    );
    f.status("roomba-kitchen", &c, "code: claimed").unwrap();
    // `last` is the robot's last work (c) when it suggests...
    f.ok(
        "roomba-kitchen",
        &format!("MESS:\n  - suggestion: {{id: sug-last, re: [{a}, last], type: merge}}\n"),
    );
    // ...and the requestor's newest request (b) when it accepts: b is not taken in.
    let b = f.request(
        "claude-agent",
        "intent: vacuum the cellar\nrequires: [vacuum-floor]",
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - reply: {re: sug-last, accept: true}\n",
        crate::exchange::error::ErrorKind::Invalid,
        "not a thread the suggestion was made on",
    );
    assert_eq!(f.env(&b).status, Status::Pending);
    assert_eq!(f.env(&a).status, Status::Pending);
}
