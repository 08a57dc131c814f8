//! The status lifecycle (docs/protocol.md): claims, transitions, replies, confirmation,
//! declines, cancels, suggestions, and the change announcements that follow each write.

use super::*;

#[test]
fn exactly_one_executor_wins_a_claim_and_only_it_moves_the_thread_on() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    let e = f.status("kitchen-robot", &r, "code: claimed").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("already claimed"), "{e}");
    let e = f
        .status("kitchen-robot", &r, "code: completed")
        .unwrap_err();
    // Another executor hears that the thread is no longer open to it, and nothing of whose
    // it is or where it stands.
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("no longer open to you"), "{e}");
    assert!(!e.to_string().contains("roomba"), "{e}");
    assert_eq!(f.env(&r).executor.as_deref(), Some("roomba-kitchen"));
    assert_eq!(f.location(&r), Location::State(State::Executing));
}

#[test]
fn claims_need_a_registered_eligible_executor() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor, home-kitchen-access]",
    );
    let e = f.status("teague-phone", &r, "code: claimed").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    assert!(
        e.to_string()
            .contains("lacks the required capabilities vacuum-floor, home-kitchen-access"),
        "{e}"
    );
    let e = f.status("stranger", &r, "code: claimed").unwrap_err();
    assert!(
        e.to_string()
            .contains("stranger is not a registered executor"),
        "{e}"
    );
    let e = f.status("claude-agent", &r, "code: claimed").unwrap_err();
    assert!(e.to_string().contains("requestors reply or cancel"), "{e}");
    f.status("kitchen-robot", &r, "code: claimed").unwrap();
}

#[test]
fn invalid_transitions_are_refused_and_nothing_is_written() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    let before = f.text(&r);
    let e = f
        .status("teague-phone", &r, "code: declined\nreason: busy")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("claim it first"), "{e}");
    assert_eq!(f.text(&r), before);
    f.status("teague-phone", &r, "code: claimed").unwrap();
    f.status("teague-phone", &r, "code: completed").unwrap();
    let e = f
        .status("teague-phone", &r, "code: in_progress")
        .unwrap_err();
    assert!(
        e.to_string().contains("already completed, which is final"),
        "{e}"
    );
    let e = f
        .send(
            "claude-agent",
            &format!("MESS:\n  - cancel:\n      re: {r}\n"),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
}

#[test]
fn partial_may_still_become_completed() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    f.status("roomba-kitchen", &r, "code: partial\ncompleted: [main area]\nremaining: [under cabinet]\nreason: need a smaller tool").unwrap();
    assert_eq!(f.location(&r), Location::State(State::Finished));
    f.status("roomba-kitchen", &r, "code: completed").unwrap();
    assert_eq!(f.env(&r).status, Status::Completed);
}

#[test]
fn replies_are_recorded_and_bump_updated_without_changing_status() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    f.status(
        "roomba-kitchen",
        &r,
        "code: needs_input\nquestions:\n  - field: location\n    question: which?",
    )
    .unwrap();
    f.clock.advance(TimeDelta::minutes(2));
    f.ok(
        "claude-agent",
        &format!("MESS:\n  - reply:\n      re: {r}\n      answers:\n        location: both\n"),
    );
    let env = f.env(&r);
    assert_eq!(env.status, Status::NeedsInput);
    assert_eq!(env.updated, f.ex.now());
    assert_eq!(env.history.last().unwrap().action, "replied");
    let e = f
        .send(
            "teague-phone",
            &format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{a: b}}\n"),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden, "{e}");
}

#[test]
fn only_the_requestor_may_reply_or_cancel() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: photo");
    for body in [
        "reply:\n      re: R\n      reason: hi",
        "cancel:\n      re: R",
    ] {
        let yaml = format!("MESS:\n  - {}\n", body.replace('R', &r));
        f.refused(
            "other-agent",
            &yaml,
            ErrorKind::Forbidden,
            "only its requestor may",
        );
    }
}

#[test]
fn confirm_before_holds_work_until_the_requestor_confirms() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "id: water-valve\nintent: Turn off the main water valve\nconfirm_before: true",
    );
    f.status("teague-phone", &r, "code: claimed").unwrap();
    for body in ["code: in_progress", "code: completed"] {
        let e = f.status("teague-phone", &r, body).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert!(
            e.to_string()
                .contains("requires confirmation before work starts"),
            "{e}"
        );
    }
    let e = f
        .send(
            "teague-phone",
            &format!("MESS:\n  - response:\n      re: {r}\n      content: [done]\n"),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    f.refused(
        "claude-agent",
        "MESS:\n  - reply:\n      re: water-valve\n      confirm: true\n",
        ErrorKind::Conflict,
        "no confirmation was asked for",
    );
    f.status("teague-phone", &r, "code: needs_confirmation\naction: Close main water shutoff valve\nconsequences: no water\nreversible: true").unwrap();
    assert!(
        f.status("teague-phone", &r, "code: in_progress").is_err(),
        "asked but not answered"
    );
    f.ok(
        "claude-agent",
        "MESS:\n  - reply:\n      re: water-valve\n      confirm: true\n",
    );
    f.status("teague-phone", &r, "code: in_progress").unwrap();
    f.send("teague-phone", &format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content:\n        - confirmation: true\n")).unwrap();
    assert_eq!(f.env(&r).status, Status::Completed);
}

#[test]
fn after_a_refused_confirmation_only_cancelled_or_held_are_accepted() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: Delete all photos\nconfirm_before: true",
    );
    f.status("teague-phone", &r, "code: claimed").unwrap();
    f.status(
        "teague-phone",
        &r,
        "code: needs_confirmation\naction: delete 300 photos",
    )
    .unwrap();
    f.ok("claude-agent", &format!("MESS:\n  - reply:\n      re: {r}\n      confirm: false\n      reason: let me check first\n"));
    assert!(
        f.env(&r)
            .history
            .last()
            .unwrap()
            .note
            .as_deref()
            .unwrap()
            .contains("let me check first")
    );
    for body in [
        "code: in_progress",
        "code: completed",
        "code: failed\nreason: x",
    ] {
        let e = f.status("teague-phone", &r, body).unwrap_err();
        assert!(e.to_string().contains("refused confirmation"), "{e}");
    }
    f.status(
        "teague-phone",
        &r,
        "code: held\nreason: waiting for the owner",
    )
    .unwrap();
    f.ok(
        "claude-agent",
        &format!("MESS:\n  - reply:\n      re: {r}\n      confirm: true\n"),
    );
    f.status("teague-phone", &r, "code: in_progress").unwrap();
}

#[test]
fn only_a_claimant_declines_so_one_executor_cannot_end_a_request_for_all() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    let e = f
        .status("kitchen-robot", &r, "code: declined\nreason: not me")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("claim it first"), "{e}");
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    f.status(
        "roomba-kitchen",
        &r,
        "code: declined\nreason: too big a spill",
    )
    .unwrap();
    assert_eq!(f.env(&r).status, Status::Declined);
}

#[test]
fn cancel_takes_a_list_and_last() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "id: req-1\nintent: one");
    let b = f.request("claude-agent", "id: req-2\nintent: two");
    let c = f.request("claude-agent", "intent: three");
    f.ok(
        "claude-agent",
        "MESS:\n  - cancel:\n      re: [req-1, req-2]\n      reason: plans changed\n",
    );
    f.ok("claude-agent", "MESS:\n  - cancel:\n      re: last\n");
    for r in [&a, &b, &c] {
        assert_eq!(f.env(r).status, Status::Cancelled);
        assert_eq!(f.location(r), Location::State(State::Canceled));
    }
    assert_eq!(
        f.env(&a).history.last().unwrap().note.as_deref(),
        Some("plans changed")
    );
}

#[test]
fn naming_one_thread_twice_in_a_cancel_cancels_it_once() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "id: dup\nintent: x");
    f.ok(
        "claude-agent",
        &format!("MESS:\n  - cancel:\n      re: [dup, {r}, dup]\n"),
    );
    assert_eq!(f.env(&r).status, Status::Cancelled);
    assert_eq!(f.text(&r).matches("- cancel:").count(), 1);
}

#[test]
fn suggestions_are_recorded_and_can_be_answered_by_id() {
    let f = fixture(EXECUTORS);
    let a = f.request("claude-agent", "id: get-onions\nintent: buy onions");
    let b = f.request("claude-agent", "id: get-garlic\nintent: buy garlic");
    f.ok(
        "teague-phone",
        &format!("MESS:\n  - suggestion:\n      id: sug:merge-grocery\n      type: merge\n      re: [{a}, {b}]\n      proposed:\n        combined_intent: buy onions and garlic\n      reason: same store\n"),
    );
    assert_eq!(f.env(&b).history.last().unwrap().action, "suggested");
    f.ok(
        "claude-agent",
        "MESS:\n  - reply:\n      re: sug:merge-grocery\n      accept: true\n",
    );
    // The acceptance is recorded, and the merge carried out: both superseded by one thread.
    let accepted = f.env(&a);
    assert!(
        accepted
            .history
            .iter()
            .any(|h| h.action == "replied" && h.note.as_deref() == Some("suggestion accepted"))
    );
    assert_eq!(accepted.status, Status::Superseded);
    assert_eq!(f.env(&b).status, Status::Superseded);
}

#[test]
fn every_committed_change_is_announced_after_it_is_written() {
    let f = fixture(EXECUTORS);
    let mut changes = f.ex.changes().subscribe();
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    let created = changes.try_recv().unwrap();
    assert_eq!(
        (created.thread.as_str(), created.status),
        (r.as_str(), Status::Pending)
    );
    // Announced only once durable: the file already says so.
    assert_eq!(f.env(&r).status, Status::Pending);
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    let claimed = changes.try_recv().unwrap();
    assert_eq!(claimed.status, Status::Claimed);
    assert_eq!(f.location(&r), Location::State(State::Executing));
    // A refused message writes nothing and announces nothing.
    f.status("roomba-kitchen", &r, "code: pending").unwrap_err();
    assert!(changes.try_recv().is_err());
}

#[test]
fn a_write_that_commits_after_another_with_an_earlier_instant_is_still_announced() {
    // Two writes race: one takes its instant first but commits second (an executor's answer
    // while the notice's delivery is noted). The later commit has more history and an earlier
    // `updated`; it must not pass for a change announced already.
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    let base = f.env(&r);
    let early = base.updated + TimeDelta::milliseconds(1);
    let late = base.updated + TimeDelta::milliseconds(2);
    let mut noted = base.clone();
    noted.record("notified", late, "exchange", None);
    let mut answered = noted.clone();
    answered.record("claimed", early, "roomba-kitchen", None);
    answered.updated = early;
    let announced = crate::exchange::watch::Announced::default();
    assert!(announced.first(&base));
    assert!(announced.first(&noted));
    assert!(announced.first(&answered));
    assert!(!announced.first(&answered));
    assert!(!announced.first(&noted));
}

/// `re: last` and the requestor's client ids as an executor sends them, in the protocol's
/// own order of messages.
mod executor_references {
    use super::*;

    fn later(f: &Fixture) {
        f.clock.advance(TimeDelta::minutes(1));
    }

    fn said(f: &Fixture, who: &str, yaml: &str) -> Result<Message, Error> {
        later(f);
        f.send(who, yaml)
    }

    #[test]
    fn last_names_the_work_an_executor_holds_not_the_thread_offered_since() {
        let f = fixture(EXECUTORS);
        let a = f.request(
            "claude-agent",
            "intent: photo the fridge\nrequires: [take-photo]",
        );
        later(&f);
        f.status("teague-phone", &a, "code: claimed").unwrap();
        later(&f);
        // B is offered to the same phone while it holds A.
        let b = f.request(
            "claude-agent",
            "intent: photo the porch\nrequires: [take-photo]",
        );
        said(
            &f,
            "teague-phone",
            "MESS:\n  - status: {re: last, code: in_progress}\n",
        )
        .unwrap();
        assert_eq!(f.env(&a).status, Status::InProgress);
        assert_eq!(f.env(&b).status, Status::Pending);
        // A claim through `last` could mean either: refused, naming both.
        let e = said(
            &f,
            "teague-phone",
            "MESS:\n  - status: {re: last, code: claimed}\n",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        let why = e.to_string();
        assert!(why.contains(&a) && why.contains(&b), "{why}");
        assert_eq!(f.env(&b).status, Status::Pending);
        // `completed`, then the `response` (v1.0: the response follows): both reach A.
        said(
            &f,
            "teague-phone",
            "MESS:\n  - status: {re: last, code: completed}\n",
        )
        .unwrap();
        said(
            &f,
            "teague-phone",
            "MESS:\n  - response:\n      re: last\n      content: [milk, eggs]\n",
        )
        .unwrap();
        assert_eq!(f.env(&a).status, Status::Completed);
        assert!(f.text(&a).contains("- milk"), "{}", f.text(&a));
        assert_eq!(f.env(&b).status, Status::Pending);
        assert!(!f.text(&b).contains("milk"));
        // Holding nothing, the phone's `last` is the next thread offered to it.
        later(&f);
        let c = f.request(
            "claude-agent",
            "intent: photo the shed\nrequires: [take-photo]",
        );
        said(
            &f,
            "teague-phone",
            "MESS:\n  - status: {re: last, code: claimed}\n",
        )
        .unwrap();
        assert_eq!(f.env(&c).status, Status::Claimed);
        assert_eq!(f.env(&b).status, Status::Pending);
    }

    #[test]
    fn a_client_id_keeps_naming_its_thread_for_the_executor_after_it_ends() {
        let f = fixture(EXECUTORS);
        let r = f.request(
            "claude-agent",
            "id: fridge-check\nintent: photo the fridge\nrequires: [take-photo]",
        );
        said(
            &f,
            "teague-phone",
            "MESS:\n  - status: {re: fridge-check, code: claimed}\n",
        )
        .unwrap();
        said(
            &f,
            "teague-phone",
            "MESS:\n  - status: {re: fridge-check, code: completed}\n",
        )
        .unwrap();
        said(
            &f,
            "teague-phone",
            "MESS:\n  - response:\n      re: fridge-check\n      content: [butter]\n",
        )
        .unwrap();
        assert_eq!(f.env(&r).status, Status::Completed);
        assert!(f.text(&r).contains("- butter"), "{}", f.text(&r));
        // Another executor, which never held it, still hears of no such thread.
        let e = said(
            &f,
            "roomba-kitchen",
            "MESS:\n  - response:\n      re: fridge-check\n      content: [crumbs]\n",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn answers_to_partial_work_are_refused_as_to_completed_work() {
        let f = fixture(EXECUTORS);
        let done = f.request(
            "claude-agent",
            "intent: photo the fridge\nrequires: [take-photo]",
        );
        let part = f.request(
            "claude-agent",
            "intent: photo the attic\nrequires: [take-photo]",
        );
        for r in [&done, &part] {
            f.status("teague-phone", r, "code: claimed").unwrap();
        }
        f.status("teague-phone", &done, "code: completed").unwrap();
        f.status(
            "teague-phone",
            &part,
            "code: partial\ncompleted: [front]\nremaining: [back]",
        )
        .unwrap();
        let answer = |r: &str| {
            f.send(
                "claude-agent",
                &format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{side: back}}\n"),
            )
            .unwrap_err()
        };
        let (a, b) = (answer(&done), answer(&part));
        assert_eq!(a.kind(), ErrorKind::Conflict);
        assert_eq!(b.kind(), ErrorKind::Conflict);
        assert!(a.to_string().contains("which is final"), "{a}");
        assert!(b.to_string().contains("which is final"), "{b}");
        // `query type: status` lists open work only, as `mess status` does.
        let answer = f.ok("claude-agent", "MESS:\n  - query: {type: status}\n");
        let text = crate::protocol::emit::to_yaml(&answer.to_value());
        assert!(!text.contains(&part) && !text.contains(&done), "{text}");
    }
}
