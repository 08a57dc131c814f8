//! The protocol's own flows through the exchange (issue 10): executors naming threads by the
//! requestor's client id or `last`, claims implied by work reported on a pending thread,
//! responses that complete, and claims taken while dependencies are still open.

use super::Settings;
use super::error::ErrorKind;
use super::route::PassScope;
use super::tests::{EXECUTORS, fixture, fixture_with};
use crate::protocol::content::ContentEntry;
use crate::protocol::message::Payload;
use crate::protocol::status::{State, Status};
use crate::protocol::time;
use crate::protocol::value::Value;

#[test]
fn an_executor_names_a_thread_by_the_requestors_client_id_or_last() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "id: vacuum-kitchen\nintent: vacuum the kitchen\nrequires: [vacuum-floor]",
    );
    // The examples' way: `re:` is the requestor's id for the request.
    f.status("roomba-kitchen", "vacuum-kitchen", "code: claimed")
        .unwrap();
    assert_eq!(f.env(&r).executor.as_deref(), Some("roomba-kitchen"));
    // `last` is the thread last offered to or claimed by the executor.
    f.status("roomba-kitchen", "last", "code: in_progress")
        .unwrap();
    assert_eq!(f.env(&r).status, Status::InProgress);
    // An executor that may not reach the thread gets the answer an absent one gets.
    let hidden = f
        .status("teague-phone", "vacuum-kitchen", "code: claimed")
        .unwrap_err();
    let absent = f
        .status("teague-phone", "no-such-request", "code: claimed")
        .unwrap_err();
    assert_eq!(hidden.kind(), ErrorKind::NotFound);
    assert_eq!(
        hidden.to_string().replace("vacuum-kitchen", "X"),
        absent.to_string().replace("no-such-request", "X")
    );
    // One that could have taken it hears that it lost it, as with a ref.
    let lost = f
        .status("kitchen-robot", "vacuum-kitchen", "code: claimed")
        .unwrap_err();
    assert_eq!(lost.kind(), ErrorKind::Conflict);
    assert!(lost.to_string().contains("no longer open to you"), "{lost}");
}

#[test]
fn a_client_id_that_names_several_reachable_threads_lists_them() {
    let f = fixture(EXECUTORS);
    let a = f.request(
        "claude-agent",
        "id: photo\nintent: one\nrequires: [take-photo]",
    );
    let b = f.request(
        "other-agent",
        "id: photo\nintent: two\nrequires: [take-photo]",
    );
    // Another agent's request with the same id that the executor cannot take is not counted.
    f.request(
        "third-agent",
        "id: photo\nintent: three\nrequires: [vacuum-floor]",
    );
    let e = f
        .status("teague-phone", "photo", "code: claimed")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    let text = e.to_string();
    assert!(
        text.contains("names 2 threads") && text.contains(&a) && text.contains(&b),
        "{text}"
    );
    // Each agent's own id still names its own thread.
    f.ok("claude-agent", "MESS:\n  - cancel:\n      re: photo\n");
    assert_eq!(f.env(&a).status, Status::Cancelled);
    // With one left open, the id is no longer ambiguous.
    f.status("teague-phone", "photo", "code: claimed").unwrap();
    assert_eq!(f.env(&b).executor.as_deref(), Some("teague-phone"));
}

#[test]
fn work_reported_on_a_pending_thread_claims_it_and_a_response_completes_it() {
    let f = fixture(EXECUTORS);
    // The v1.0 appendix: needs_confirmation straight from received, a reply, a bare response.
    let r = f.request(
        "claude-agent",
        "id: start-rice\nintent: start rice cooker with 2 cups rice\nrequires: [vacuum-floor]",
    );
    f.status(
        "kitchen-robot",
        "start-rice",
        "code: needs_confirmation\naction: start rice cooker\nconsequences: rice in 25 minutes",
    )
    .unwrap();
    let env = f.env(&r);
    assert_eq!(env.status, Status::NeedsConfirmation);
    assert_eq!(env.executor.as_deref(), Some("kitchen-robot"));
    let actions: Vec<&str> = env.history.iter().map(|h| h.action.as_str()).collect();
    assert!(
        actions.ends_with(&["claimed", "needs_confirmation"]),
        "{actions:?}"
    );
    // Exactly one winner: the other able executor now hears that it lost.
    let e = f
        .status("roomba-kitchen", &r, "code: in_progress")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    f.ok(
        "claude-agent",
        "MESS:\n  - reply:\n      re: start-rice\n      confirm: true\n",
    );
    f.ok(
        "kitchen-robot",
        "MESS:\n  - response:\n      re: start-rice\n      content:\n        - Rice cooker started\n",
    );
    assert_eq!(f.env(&r).status, Status::Completed);
    // A `completed` that follows the response changes nothing and is no error.
    f.status("kitchen-robot", &r, "code: completed").unwrap();
    assert_eq!(f.env(&r).status, Status::Completed);
    // Declining or failing still needs a claim: they would end the request for everyone.
    let other = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    for code in ["declined", "failed"] {
        let e = f
            .status(
                "teague-phone",
                &other,
                &format!("code: {code}\nreason: busy"),
            )
            .unwrap_err();
        assert!(e.to_string().contains("claim it first"), "{e}");
    }
}

#[test]
fn a_bare_response_passes_the_confirmation_gate_like_completed() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: start the dishwasher\nrequires: [take-photo]\nconfirm_before: true",
    );
    f.status("teague-phone", &r, "code: claimed").unwrap();
    let response = format!("MESS:\n  - response:\n      re: {r}\n      content:\n        - done\n");
    f.refused(
        "teague-phone",
        &response,
        ErrorKind::Conflict,
        "requires confirmation before work starts",
    );
    assert_eq!(f.env(&r).status, Status::Claimed);
    // Work reported with its outcome in one message keeps the status it names.
    let s = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    f.ok(
        "teague-phone",
        &format!(
            "MESS:\n  - status:\n      re: {s}\n      code: partial\n  - response:\n      re: {s}\n      content:\n        - half of it\n"
        ),
    );
    assert_eq!(f.env(&s).status, Status::Partial);
}

#[test]
fn a_response_to_a_pending_thread_claims_it_and_completes_it_as_v1_1_flows_do() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: where is the spare key?\nrequires: [take-photo]",
    );
    let response =
        format!("MESS:\n  - response:\n      re: {r}\n      content:\n        - under the mat\n");
    // Not from an executor that cannot take it, and not from the requestor.
    f.refused(
        "roomba-kitchen",
        &response,
        ErrorKind::Forbidden,
        "lacks the required capability",
    );
    f.refused("claude-agent", &response, ErrorKind::Forbidden, "requestor");
    assert_eq!(f.env(&r).status, Status::Pending);
    f.ok("teague-phone", &response);
    let env = f.env(&r);
    assert_eq!(env.status, Status::Completed);
    assert_eq!(env.executor.as_deref(), Some("teague-phone"));
    let actions: Vec<&str> = env.history.iter().map(|h| h.action.as_str()).collect();
    assert!(actions.ends_with(&["claimed", "completed"]), "{actions:?}");
    // The confirmation gate holds for it as for a claimed thread.
    let gated = f.request(
        "claude-agent",
        "intent: start the dishwasher\nrequires: [take-photo]\nconfirm_before: true",
    );
    f.refused(
        "teague-phone",
        &format!("MESS:\n  - response:\n      re: {gated}\n      content:\n        - started\n"),
        ErrorKind::Conflict,
        "requires confirmation before work starts",
    );
    assert_eq!(f.env(&gated).status, Status::Pending);
}

#[test]
fn a_claimant_may_take_a_thread_whose_dependencies_are_open_and_wait_for_them() {
    let f = fixture(EXECUTORS);
    let first = f.request(
        "claude-agent",
        "id: deliver-onions\nintent: deliver onions\nrequires: [take-photo]",
    );
    let dice = f.request(
        "claude-agent",
        "id: dice-onions\nintent: dice the onions\nrequires: [precision-knife-work]\nconstraints:\n  depends_on: [deliver-onions]",
    );
    // v1.0 section 4.4: the claimant reports waiting on the dependency.
    f.status("kitchen-robot", "dice-onions", "code: claimed")
        .unwrap();
    f.status(
        "kitchen-robot",
        "dice-onions",
        "code: waiting\nwaiting_for:\n  type: dependency\n  ref: [deliver-onions]",
    )
    .unwrap();
    assert_eq!(f.env(&dice).status, Status::Waiting);
    // The work itself waits for the dependency; the refusal names no other thread.
    let e = f
        .status("kitchen-robot", &dice, "code: in_progress")
        .unwrap_err();
    assert!(
        e.to_string().contains("waits for 1 request it depends on")
            && !e.to_string().contains(&first),
        "{e}"
    );
    f.status("teague-phone", &first, "code: completed").unwrap();
    f.status("kitchen-robot", &dice, "code: in_progress")
        .unwrap();
    assert_eq!(f.env(&dice).status, Status::InProgress);

    // A dependency that fails fails a dependent someone already holds.
    let a = f.request(
        "claude-agent",
        "id: fetch\nintent: fetch\nrequires: [take-photo]",
    );
    let b = f.request(
        "claude-agent",
        "intent: use it\nrequires: [precision-knife-work]\nconstraints:\n  depends_on: [fetch]",
    );
    f.status("kitchen-robot", &b, "code: claimed").unwrap();
    f.status("teague-phone", &a, "code: claimed").unwrap();
    f.status("teague-phone", &a, "code: failed\nreason: none left")
        .unwrap();
    assert_eq!(f.env(&b).status, Status::Failed);
}

#[test]
fn a_waiting_request_hears_its_place_in_the_queue() {
    let f = fixture(EXECUTORS);
    let position = |answer: &crate::protocol::message::Message| match answer.content().next() {
        Some(Payload::Ack(a)) => a.queue_position,
        other => panic!("no ack: {other:?}"),
    };
    let body = |p: &str| {
        format!(
            "MESS:\n  - request:\n      intent: photo\n      requires: [take-photo]\n      priority: {p}\n"
        )
    };
    assert_eq!(position(&f.ok("claude-agent", &body("normal"))), Some(1));
    // Urgent work goes ahead of normal work that came earlier.
    assert_eq!(position(&f.ok("claude-agent", &body("urgent"))), Some(1));
    assert_eq!(position(&f.ok("claude-agent", &body("normal"))), Some(3));
    assert_eq!(
        position(&f.ok("claude-agent", &body("background"))),
        Some(4)
    );
}

#[test]
fn a_status_query_lists_open_threads_unless_asked_for_all() {
    let f = fixture(EXECUTORS);
    let done = f.request("claude-agent", "intent: one\nrequires: [take-photo]");
    let open = f.request("claude-agent", "intent: two\nrequires: [take-photo]");
    f.status("teague-phone", &done, "code: completed").unwrap();
    let listed = |filter: &str| -> Vec<(String, Option<i64>)> {
        let answer = f.ok(
            "claude-agent",
            &format!("MESS:\n  - query:\n      type: status\n{filter}"),
        );
        let Some(Payload::Response(r)) = answer.content().next() else {
            panic!("{answer:?}")
        };
        let Some(ContentEntry::Structured(data)) = r.content.first() else {
            panic!("{r:?}")
        };
        let field = |t: &Value, k: &str| t.as_map().and_then(|m| m.get(k)).cloned();
        match field(data, "threads") {
            Some(Value::Seq(items)) => items
                .iter()
                .map(|t| {
                    (
                        field(t, "ref").and_then(|v| v.scalar_text()).unwrap(),
                        match field(t, "queue_position") {
                            Some(Value::Int(n)) => Some(n),
                            _ => None,
                        },
                    )
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(listed(""), vec![(open.clone(), Some(1))]);
    let all: Vec<String> = listed("      filter:\n        re: all\n")
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(all.len(), 2);
    assert!(all.contains(&done) && all.contains(&open));
    assert_eq!(
        listed("      filter:\n        status: [completed]\n"),
        vec![(done.clone(), None)]
    );
}

#[test]
fn the_exchanges_answers_name_their_version() {
    let f = fixture(EXECUTORS);
    let answer = f.ok(
        "claude-agent",
        "MESS:\n  - request:\n      intent: photo\n      requires: [take-photo]\n",
    );
    assert_eq!(answer.version(), Some("1.1.0"));
    let answer = f.ok(
        "claude-agent",
        "MESS:\n  - v: 1.0.0\n  - request:\n      intent: photo\n      requires: [take-photo]\n",
    );
    assert_eq!(answer.version(), Some("1.0.0"));
}

#[test]
fn not_before_holds_offers_and_claims_until_it_comes() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: water the plants\nrequires: [take-photo]\nconstraints:\n  timing:\n    not_before: 2026-02-01T09:00:00Z",
    );
    assert!(!f.env(&r).dispatched(), "offered before not_before");
    let e = f.status("teague-phone", &r, "code: claimed").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("may not start before"), "{e}");
    // The router learns when to look again, and then offers it.
    let pass = f.ex.routing().route_waiting(PassScope::All).unwrap();
    assert!(pass.routed.is_empty());
    assert_eq!(
        pass.next_start.map(|t| time::format_timestamp(&t)),
        Some("2026-02-01T09:00:00Z".to_owned())
    );
    f.clock.set(
        time::parse_timestamp("2026-02-01T09:00:01Z")
            .unwrap()
            .to_utc(),
    );
    let pass = f.ex.routing().route_waiting(PassScope::All).unwrap();
    assert_eq!(pass.routed.len(), 1);
    assert!(f.env(&r).dispatched());
    f.status("teague-phone", &r, "code: claimed").unwrap();
}

#[test]
fn waiting_and_held_work_expires_and_says_which_deadline_passed() {
    let f = fixture(EXECUTORS);
    let waiting = f.request(
        "claude-agent",
        "intent: one\nrequires: [take-photo]\nneeded_by: 2026-01-31T19:00:00-08:00",
    );
    let held = f.request(
        "claude-agent",
        "intent: two\nrequires: [take-photo]\nconstraints:\n  timing:\n    expires: 2026-01-31T19:00:00-08:00",
    );
    let working = f.request(
        "claude-agent",
        "intent: three\nrequires: [take-photo]\nneeded_by: 2026-01-31T19:00:00-08:00",
    );
    let pending = f.request(
        "claude-agent",
        "intent: four\nrequires: [take-photo]\nconstraints:\n  timing:\n    expires: 2026-01-31T19:00:00-08:00",
    );
    f.status(
        "teague-phone",
        &waiting,
        "code: waiting\nwaiting_for:\n  type: condition\n  condition: daylight",
    )
    .unwrap();
    f.status("teague-phone", &held, "code: held\nreason: paused")
        .unwrap();
    f.status("teague-phone", &working, "code: in_progress")
        .unwrap();
    f.clock.advance(chrono::TimeDelta::hours(3));
    f.ex.routing().settle_pending().unwrap();
    let note = |r: &str| f.env(r).history.last().and_then(|h| h.note.clone());
    assert_eq!(f.env(&waiting).status, Status::Expired);
    assert_eq!(
        note(&waiting).as_deref(),
        Some("needed_by passed while it was waiting")
    );
    assert_eq!(f.env(&held).status, Status::Expired);
    assert_eq!(
        note(&held).as_deref(),
        Some("expires passed while it was held")
    );
    // Work under way is the claimant's to finish or fail.
    assert_eq!(f.env(&working).status, Status::InProgress);
    assert_eq!(f.env(&pending).status, Status::Expired);
    assert_eq!(
        note(&pending).as_deref(),
        Some("expires passed before anyone claimed it")
    );
}

#[test]
fn priority_orders_listings_and_urgent_work_escalates_sooner() {
    let mut settings = Settings::defaults();
    settings.dispatch.escalate_after = Some(std::time::Duration::from_secs(20 * 60));
    let f = fixture_with(EXECUTORS, settings);
    let normal = f.request("claude-agent", "intent: normal\nrequires: [take-photo]");
    let urgent = f.request(
        "claude-agent",
        "intent: urgent\nrequires: [take-photo]\npriority: urgent",
    );
    let done = f.request("claude-agent", "intent: done\nrequires: [take-photo]");
    f.status("teague-phone", &done, "code: completed").unwrap();
    let listed: Vec<String> =
        f.ex.access()
            .threads_for("claude-agent", &State::ALL)
            .unwrap()
            .into_iter()
            .map(|e| e.thread_ref.to_string())
            .collect();
    assert_eq!(listed, vec![urgent.clone(), normal.clone(), done]);
    // A quarter of escalate_after for urgent work; normal work waits the whole of it.
    f.clock.advance(chrono::TimeDelta::minutes(6));
    let escalated: Vec<String> =
        f.ex.routing()
            .escalate_due()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
    assert_eq!(escalated, vec![urgent]);
    f.clock.advance(chrono::TimeDelta::minutes(15));
    let escalated: Vec<String> =
        f.ex.routing()
            .escalate_due()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
    assert_eq!(escalated, vec![normal]);
}
