//! Time and order: `needed_by` expiry, `depends_on` gating and failure down the chain, and
//! settling on read what a crashed writer left (and writing nothing when nothing is due).

use super::*;

#[test]
fn needed_by_expires_pending_threads_on_read_and_survives_restarts() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: Check if the garage door is closed\nneeded_by: \"2026-01-31T23:00:00-08:00\"",
    );
    let slow = f.request(
        "claude-agent",
        "intent: later\nconstraints:\n  timing:\n    expires: 2h",
    );
    let never = f.request("claude-agent", "intent: whenever");
    assert_eq!(
        f.env(&r).expires,
        Some(time::parse_timestamp("2026-01-31T23:00:00-08:00").unwrap())
    );
    f.clock.set(at("2026-01-31T19:30:00-08:00"));
    // A new process (a restart) sees the same files; expiry needs no memory of the old one.
    let restarted = Exchange::new(
        crate::store::testing::reopen(f.ex.store()),
        Settings::defaults(),
        f.clock.clone(),
    );
    let (open, _) = restarted.list(&[State::Received], false).unwrap();
    let open: Vec<String> = open.iter().map(|(e, _)| e.thread_ref.to_string()).collect();
    assert!(!open.contains(&slow), "expires: 2h passed at 19:00");
    assert!(open.contains(&r) && open.contains(&never));
    let env = f.env(&slow);
    assert_eq!(env.status, Status::Expired);
    assert_eq!(f.location(&slow), Location::State(State::Canceled));
    let last = env.history.last().unwrap();
    assert_eq!(
        (last.action.as_str(), last.by.as_str()),
        ("expired", "exchange")
    );
    assert!(f.text(&slow).contains("code: expired\n      message: expires passed before anyone claimed it\n      expired_at: 2026-02-01T03:00:00Z"));
    f.clock.set(at("2026-02-01T00:00:00-08:00"));
    let e = f.status("teague-phone", &r, "code: claimed").unwrap_err();
    assert!(
        e.to_string().contains("no longer open"),
        "an overdue thread is never claimable: {e}"
    );
    let thread = f.ex.thread(&never, "claude-agent").unwrap();
    assert_eq!(thread.envelope.status, Status::Pending);
}

#[test]
fn claimed_work_does_not_expire() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: x\nneeded_by: \"2026-01-31T18:00:00-08:00\"",
    );
    f.status("teague-phone", &r, "code: claimed\nestimate: PT45M")
        .unwrap();
    f.clock.advance(TimeDelta::hours(3));
    assert_eq!(
        f.ex.thread(&r, "claude-agent").unwrap().envelope.status,
        Status::Claimed
    );
    assert_eq!(f.env(&r).estimate.as_deref(), Some("PT45M"));
    f.status(
        "teague-phone",
        &r,
        "code: in_progress\nestimate: PT10M\nprogress_pct: 80",
    )
    .unwrap();
    assert_eq!(f.env(&r).estimate.as_deref(), Some("PT10M"));
    let e = f
        .status("teague-phone", &r, "code: in_progress\nestimate: soon")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[test]
fn dependencies_gate_claims_and_dispatch_then_release_in_order() {
    let f = fixture(EXECUTORS);
    let answer = f.ok(
        "claude-agent",
        "MESS:
  - request:
      id: get-onions
      intent: buy yellow onions
      requires: [take-photo]
  - request:
      id: deliver-onions
      intent: deliver onions to home
      requires: [take-photo]
      constraints:
        depends_on: [get-onions]
  - request:
      id: dice-onions
      intent: dice the onions, medium dice
      requires: [precision-knife-work, home-kitchen-access]
      constraints:
        depends_on: [deliver-onions]
",
    );
    let Payload::Ack(ack) = answer.content().next().unwrap() else {
        panic!()
    };
    let refs: Vec<String> = ack.requests.iter().map(|e| e.thread_ref.clone()).collect();
    let (get_r, deliver, dice) = (&refs[0], &refs[1], &refs[2]);
    assert_eq!(f.env(deliver).depends_on, vec![get_r.clone()]);
    assert!(f.env(get_r).dispatched());
    assert!(!f.env(deliver).dispatched(), "not dispatched while waiting");
    let e = f
        .status("teague-phone", deliver, "code: in_progress")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("it waits for 1 request it depends on to complete"),
        "{e}"
    );
    assert!(!e.to_string().contains(get_r.as_str()), "{e}");
    f.status("teague-phone", get_r, "code: claimed").unwrap();
    f.status("teague-phone", get_r, "code: completed").unwrap();
    assert!(
        f.env(deliver).dispatched(),
        "dispatched when the last dependency completed"
    );
    assert!(!f.env(dice).dispatched());
    f.status("teague-phone", deliver, "code: claimed").unwrap();
    f.status("teague-phone", deliver, "code: completed")
        .unwrap();
    let env = f.env(dice);
    let note = env.history.last().unwrap().note.clone().unwrap();
    assert_eq!(env.history.last().unwrap().action, "dispatched");
    assert!(note.contains("kitchen-robot"), "{note}");
}

#[test]
fn a_failed_dependency_fails_its_dependents_down_the_chain() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "id: a\nintent: first");
    let b = f.request(
        "claude-agent",
        "id: b\nintent: second\nconstraints:\n  depends_on: [a]",
    );
    let c = f.request(
        "claude-agent",
        &format!("intent: third\nconstraints:\n  depends_on: [{b}]"),
    );
    f.status("teague-phone", &a, "code: claimed").unwrap();
    f.status("teague-phone", &a, "code: declined\nreason: store closed")
        .unwrap();
    for r in [&b, &c] {
        let env = f.env(r);
        assert_eq!(env.status, Status::Failed, "{r}");
        assert_eq!(f.location(r), Location::State(State::Canceled));
    }
    let text = f.text(&b);
    assert!(
        text.contains("type: dependency_failed") && text.contains(&format!("ref: {a}")),
        "{text}"
    );
    let late = f.request(
        "claude-agent",
        &format!("intent: too late\nconstraints:\n  depends_on: [{a}]"),
    );
    assert_eq!(
        f.env(&late).status,
        Status::Failed,
        "depending on a failed thread fails at once"
    );
}

#[test]
fn bad_dependencies_are_refused_before_anything_is_written() {
    let f = fixture(EXECUTORS);
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      intent: x\n      constraints:\n        depends_on: [nope]\n",
        ErrorKind::Invalid,
        "depends_on[0]: unknown request \"nope\"",
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      id: a\n      intent: x\n      constraints:\n        depends_on: [b]\n  - request:\n      id: b\n      intent: y\n      constraints:\n        depends_on: [a]\n",
        ErrorKind::Invalid,
        "cycle",
    );
    f.refused(
        "claude-agent",
        "MESS:\n  - request:\n      id: a\n      intent: x\n      constraints:\n        depends_on: [a]\n",
        ErrorKind::Invalid,
        "cannot depend on itself",
    );
    let (all, _) = f.ex.list(&State::ALL, true).unwrap();
    assert!(all.is_empty(), "nothing was created");
}

#[test]
fn depends_on_last_means_the_same_thread_for_every_request_of_a_message() {
    let f = fixture(EXECUTORS);
    let before = f.request("claude-agent", "intent: earlier");
    let answer = f.ok(
        "claude-agent",
        "MESS:\n  - request:\n      intent: one\n      constraints:\n        depends_on: [last]\n  - request:\n      intent: two\n      constraints:\n        depends_on: [last]\n",
    );
    let Payload::Ack(ack) = answer.content().next().unwrap() else {
        panic!()
    };
    for e in &ack.requests {
        assert_eq!(
            f.env(&e.thread_ref).depends_on,
            vec![before.clone()],
            "{}",
            e.thread_ref
        );
    }
}

#[test]
fn a_dependent_left_waiting_by_a_crashed_writer_is_settled_on_read() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "id: a\nintent: first");
    let b = f.request(
        "claude-agent",
        "intent: second\nconstraints:\n  depends_on: [a]",
    );
    // Complete `a` through the store alone, as if the writer died before settling dependents.
    let t = ThreadRef::parse(&a).unwrap();
    f.ex.store()
        .modify(&t, |file| -> Result<_, Error> {
            let doc = crate::protocol::envelope::MessageDoc {
                from: "teague-phone".into(),
                received: f.ex.now(),
                channel: None,
                message: Message::from_value(
                    yaml::parse_document(&format!("MESS:\n  - status:\n      re: {a}\n      code: claimed\n  - status:\n      re: {a}\n      code: completed\n"), &Limits::DEFAULT).unwrap(),
                )
                .unwrap(),
                extra: Default::default(),
            };
            let mut envelope = file.envelope.clone();
            envelope.apply(&doc);
            Ok((Some(crate::store::Edit { envelope, append: vec![doc], deliveries: Vec::new() }), ()))
        })
        .unwrap();
    assert!(!f.env(&b).dispatched());
    f.ex.list(&[State::Received], false).unwrap();
    assert!(f.env(&b).dispatched(), "listing pending work settles it");
}

#[test]
fn reading_never_writes_a_thread_that_needs_nothing() {
    let f = fixture("");
    let r = f.request("claude-agent", "intent: nobody can do this yet");
    let before = f.text(&r);
    f.ex.thread(&r, "claude-agent").unwrap();
    f.ex.list(&State::ALL, true).unwrap();
    f.ex.routing().settle_pending().unwrap();
    assert_eq!(f.text(&r), before, "no dispatch, expiry or rewrite on read");
}
