//! Submitting messages: dated refs, client ids and idempotency, multi-request messages, forged
//! senders, size and parse limits, and input refused whole with nothing written.

use super::*;

#[test]
fn refs_are_dated_serials_and_requests_are_idempotent_by_client_id() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "id: fridge\nintent: check the fridge");
    let b = f.request("claude-agent", "intent: water the plants");
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("2026-02-01-001", "2026-02-01-002")
    );
    let again = f.request("claude-agent", "id: fridge\nintent: check the fridge");
    assert_eq!(
        again, a,
        "re-sending an open client id returns the same thread"
    );
    let other_agent = f.request("other-agent", "id: fridge\nintent: their own fridge");
    assert_ne!(other_agent, a, "client ids belong to their sender");
    f.ok(
        "claude-agent",
        &format!("MESS:\n  - cancel:\n      re: {a}\n"),
    );
    let fresh = f.request("claude-agent", "id: fridge\nintent: check the fridge");
    assert_ne!(fresh, a, "a finished client id can be used again");
    assert_eq!(
        f.ex.resolve("fridge", "claude-agent").unwrap().as_str(),
        fresh
    );
    assert_eq!(
        f.ex.resolve("last", "claude-agent").unwrap().as_str(),
        fresh
    );
    assert_eq!(
        f.ex.resolve("fridge", "other-agent").unwrap().as_str(),
        other_agent
    );
    assert_eq!(
        f.ex.resolve("fridge", "teague-phone").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    f.clock.advance(TimeDelta::days(1));
    assert_eq!(
        f.request("claude-agent", "intent: tomorrow"),
        "2026-02-02-001"
    );
}

#[test]
fn a_multi_request_message_creates_one_thread_each_and_acks_the_mapping() {
    let f = fixture(EXECUTORS);
    let answer = f.ok(
        "claude-agent",
        "MESS:
  - request:
      id: my-task-1
      intent: check the fridge
  - request:
      id: my-task-2
      intent: water the plants
  - request:
      intent: no id here
",
    );
    let Payload::Ack(ack) = answer.content().next().unwrap() else {
        panic!("{answer:?}")
    };
    let pairs: Vec<(Option<&str>, &str)> = ack
        .requests
        .iter()
        .map(|e| (e.id.as_deref(), e.thread_ref.as_str()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            (Some("my-task-1"), "2026-02-01-001"),
            (Some("my-task-2"), "2026-02-01-002"),
            (None, "2026-02-01-003")
        ]
    );
    for (_, r) in pairs {
        let text = f.text(r);
        assert_eq!(
            text.matches("- request:").count(),
            1,
            "one request per thread:\n{text}"
        );
    }
    assert!(
        f.text("2026-02-01-002")
            .contains("re: my-task-2\n      ref: 2026-02-01-002")
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      id: dup\n      intent: a\n  - request:\n      id: dup\n      intent: b\n",
        ErrorKind::Invalid,
        "ids in one message must differ",
    );
}

#[test]
fn a_message_with_one_bad_payload_changes_nothing() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "intent: one\nrequires: [take-photo]");
    let b = f.request("claude-agent", "intent: two\nrequires: [take-photo]");
    let (ta, tb) = (f.text(&a), f.text(&b));
    let e = f
        .send(
            "teague-phone",
            &format!("MESS:\n  - status:\n      re: {a}\n      code: claimed\n  - status:\n      re: {b}\n      code: declined\n      reason: busy\n"),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert_eq!(
        (f.text(&a), f.text(&b)),
        (ta, tb),
        "the valid first payload must not be applied alone"
    );
}

#[test]
fn oversized_and_malformed_input_is_refused_cleanly() {
    let f = fixture(EXECUTORS);
    let small = Exchange::new(
        crate::store::testing::reopen(f.ex.store()),
        Settings {
            max_message_bytes: 1000,
            ..Settings::defaults()
        },
        f.clock.clone(),
    );
    let big = format!(
        "MESS:\n  - request:\n      intent: x\n      context:\n        - image: data:image/png;base64,{}\n",
        "A".repeat(2000)
    );
    let e = small
        .intake()
        .submit_text(&big, &Sender::new("claude-agent", "cli"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    assert!(
        e.to_string().contains("over the limit of 1000 bytes"),
        "{e}"
    );
    assert_eq!(
        f.send("claude-agent", "MESS: [").unwrap_err().kind(),
        ErrorKind::Malformed
    );
    assert_eq!(
        f.send("claude-agent", "MESS:\n  - request: {}\n")
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - ack:\n      ref: x\n",
        ErrorKind::Invalid,
        "acks are sent by the exchange",
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - v: 1.1.0\n  - bid:\n      shells: 5\n",
        ErrorKind::Invalid,
        "nothing to act on",
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - v: 1.1.0\n  - review:\n      rating: 5\n",
        ErrorKind::Invalid,
        "MESS[1].review.re",
    );
    f.refused(
        "exchange",
        "MESS:\n  - request:\n      intent: x\n",
        ErrorKind::Forbidden,
        "cannot send messages",
    );
    let (all, errors) = f.ex.list(&State::ALL, true).unwrap();
    assert!(all.is_empty() && errors.is_empty());
}

#[test]
fn senders_cannot_forge_who_sent_a_message_or_when() {
    let f = fixture(EXECUTORS);
    let answer = f.ok(
        "claude-agent",
        "from: teague-phone\nreceived: 1999-01-01T00:00:00Z\nchannel: forged\nnote: kept\nMESS:\n  - request:\n      intent: check the door\n",
    );
    let Payload::Ack(ack) = answer.content().next().unwrap() else {
        panic!()
    };
    let r = ack.thread_ref.clone().unwrap();
    let thread = f.ex.store().read(&ThreadRef::parse(&r).unwrap()).unwrap();
    let first = &thread.messages().unwrap()[0];
    assert_eq!(first.from, "claude-agent");
    assert_eq!(first.channel.as_deref(), Some("cli"));
    assert_eq!(first.received, f.ex.now());
    assert!(
        f.text(&r).contains("note: kept"),
        "other top-level keys are kept"
    );
    assert_eq!(f.env(&r).requestor, "claude-agent");
}

#[test]
fn client_ids_that_re_would_misread_are_refused() {
    let f = fixture(EXECUTORS);
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      id: last\n      intent: x\n",
        ErrorKind::Invalid,
        "`last` is reserved",
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      id: 2026-01-31-001\n      intent: x\n",
        ErrorKind::Invalid,
        "looks like an exchange ref",
    );
}

#[test]
fn re_sending_the_id_of_an_overdue_request_starts_a_new_thread() {
    let f = fixture(EXECUTORS);
    let old = f.request(
        "claude-agent",
        "id: z\nintent: x\nneeded_by: \"2026-01-31T17:00:01-08:00\"",
    );
    f.clock.advance(TimeDelta::seconds(5));
    let new = f.request("claude-agent", "id: z\nintent: y");
    assert_ne!(new, old);
    assert_eq!(f.env(&old).status, Status::Expired);
}

#[test]
fn messages_built_by_adapters_obey_the_size_limit_too() {
    let f = fixture(EXECUTORS);
    let small = Exchange::new(
        crate::store::testing::reopen(f.ex.store()),
        Settings {
            max_message_bytes: 500,
            ..Settings::defaults()
        },
        f.clock.clone(),
    );
    let big = Message::from_value(
        yaml::parse_document(
            &format!("MESS:\n  - request:\n      intent: {}\n", "x".repeat(600)),
            &Limits::DEFAULT,
        )
        .unwrap(),
    )
    .unwrap();
    let e = small
        .intake()
        .submit(big, &Sender::new("claude-agent", "cli"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
}

#[test]
fn parsing_waits_for_room_when_large_messages_arrive_at_once() {
    let gate = Arc::new(crate::exchange::submit::ParseGate::default());
    let patience = std::time::Duration::from_secs(30);
    let held = gate
        .enter(crate::exchange::submit::PARSE_BUDGET - 10, patience)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiting = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            let _room = gate.enter(100, patience).unwrap();
            tx.send(()).unwrap();
        })
    };
    // The second parse does not fit beside the first: it waits.
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(200))
            .is_err()
    );
    drop(held);
    assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
    waiting.join().unwrap();
    // A cost over the whole budget still gets through, alone.
    drop(
        gate.enter(crate::exchange::submit::PARSE_BUDGET * 4, patience)
            .unwrap(),
    );
    // A parse that cannot get room in time is refused as busy, and holds nothing.
    let held = gate
        .enter(crate::exchange::submit::PARSE_BUDGET, patience)
        .unwrap();
    let refused = gate
        .enter(1, std::time::Duration::from_millis(50))
        .err()
        .unwrap();
    assert_eq!(refused.kind(), crate::exchange::error::ErrorKind::Busy);
    drop(held);
    drop(
        gate.enter(crate::exchange::submit::PARSE_BUDGET, patience)
            .unwrap(),
    );
}

#[test]
fn a_thread_grows_only_so_far() {
    let f = fixture_with(
        EXECUTORS,
        Settings {
            max_thread_bytes: 1024 * 1024,
            ..Settings::defaults()
        },
    );
    let r = f.request("claude-agent", "intent: photo");
    let big = "x".repeat(300 * 1024);
    let reply = || {
        let mut m = crate::protocol::value::Map::new();
        m.insert("re", Value::str(&r));
        m.insert("reason", Value::str(&big));
        Message::single("reply", m).unwrap()
    };
    let mut refused = None;
    for _ in 0..6 {
        if let Err(e) =
            f.ex.intake()
                .submit(reply(), &Sender::new("claude-agent", "cli"))
        {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("a thread past its limit was accepted");
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    assert!(e.to_string().contains("start a new request"), "{e}");
    assert!(f.text(&r).len() <= 1024 * 1024);
}

#[test]
fn a_request_that_is_already_stale_is_refused() {
    let f = fixture(EXECUTORS);
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      intent: x\n      needed_by: \"2026-01-31T16:00:00-08:00\"\n",
        ErrorKind::Invalid,
        "MESS[0].request.needed_by: 2026-01-31T16:00:00-08:00 has already passed",
    );
}
