//! Views and access: queries, status views, API keys shown once and stored hashed, share links
//! and their expiry, and a weak link secret reported to the operator.

use super::*;

#[test]
fn queries_answer_with_structured_content() {
    let f = fixture(EXECUTORS);
    std::fs::write(
        f.dir.path().join("capabilities.yaml"),
        "id: take-photo\ndescription: Capture and attach photos\ntags: [visual, attachments]\n---\nid: vacuum-floor\ndescription: Vacuum floors\ntags: [cleaning]\n",
    )
    .unwrap();
    let mine = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    f.request("other-agent", "intent: not mine");
    let answer = f.ok("claude-agent", "MESS:\n  - query:\n      type: status\n");
    let text = crate::protocol::emit::to_yaml(&answer.to_value());
    assert!(
        text.contains(&format!("ref: {mine}")) && !text.contains("not mine"),
        "{text}"
    );
    let answer = f.ok(
        "claude-agent",
        "MESS:\n  - query:\n      type: capabilities\n      filter:\n        tags: [visual]\n",
    );
    let text = crate::protocol::emit::to_yaml(&answer.to_value());
    assert!(
        text.contains("id: take-photo")
            && text.contains("- teague-phone")
            && !text.contains("vacuum-floor"),
        "{text}"
    );
    let answer = f.ok("claude-agent", "MESS:\n  - query:\n      type: executors\n");
    let text = crate::protocol::emit::to_yaml(&answer.to_value());
    assert!(
        text.contains("id: roomba-kitchen") && text.contains("availability: always"),
        "{text}"
    );
}

#[test]
fn status_views_show_questions_and_the_latest_response() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    f.status("roomba-kitchen", &r, "code: claimed").unwrap();
    f.status("roomba-kitchen", &r, "code: needs_input\nquestions:\n  - field: location\n    question: which?\n    options: [sink, stove]").unwrap();
    let v = ThreadView::of(&f.ex.thread(&r, "claude-agent").unwrap()).unwrap();
    let text = crate::protocol::emit::to_yaml(&v.to_value());
    assert!(text.contains("needs_input:\n  questions:"), "{text}");
    f.status("roomba-kitchen", &r, "code: in_progress").unwrap();
    f.send("roomba-kitchen", &format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content:\n        - all clean\n      notes: moved the mat\n")).unwrap();
    let v = ThreadView::of(&f.ex.thread(&r, "claude-agent").unwrap()).unwrap();
    let text = crate::protocol::emit::to_yaml(&v.to_value());
    assert!(
        text.contains("response:\n  - all clean\nnotes: moved the mat"),
        "{text}"
    );
}

#[test]
fn status_views_name_response_hints_the_response_left_unanswered() {
    let f = fixture(EXECUTORS);
    let r = f.request(
        "claude-agent",
        "intent: where are my keys?\nresponse_hint: [location, image, text]",
    );
    f.status("teague-phone", &r, "code: claimed").unwrap();
    f.send(
        "teague-phone",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content:\n        - location:\n            name: Kitchen counter\n        - next to the fruit bowl\n"),
    )
    .unwrap();
    let v = ThreadView::of(&f.ex.thread(&r, "claude-agent").unwrap()).unwrap();
    assert_eq!(
        v.unmet_hints,
        vec!["image".to_owned()],
        "the response has no image"
    );
    assert!(crate::protocol::emit::to_yaml(&v.to_value()).contains("unmet_hints:\n  - image"));
}

#[test]
fn api_keys_are_shown_once_stored_hashed_and_name_their_principal() {
    use crate::exchange::auth::{Principal, Role};
    use std::os::unix::fs::PermissionsExt;
    let f = fixture(EXECUTORS);
    let agent = f.ex.auth().issue_key(Role::Agent, "claude-agent").unwrap();
    let robot =
        f.ex.auth()
            .issue_key(Role::Executor, "roomba-kitchen")
            .unwrap();
    assert!(
        agent.starts_with("mess_") && agent.len() == 5 + 64,
        "{agent}"
    );
    assert_ne!(agent, robot);
    assert_eq!(
        f.ex.auth().authenticate(&agent).unwrap(),
        Some(Principal {
            id: "claude-agent".into(),
            role: Role::Agent,
            callback: None,
        })
    );
    assert_eq!(
        f.ex.auth().authenticate(&robot).unwrap().map(|p| p.role),
        Some(Role::Executor)
    );
    assert_eq!(f.ex.auth().authenticate("mess_not-a-key").unwrap(), None);
    assert_eq!(f.ex.auth().authenticate("").unwrap(), None);
    let records = f.ex.store().key_records().unwrap();
    assert_eq!(records.len(), 2);
    assert!(
        records
            .iter()
            .all(|r| !r.hash.contains(&agent[5..]) && r.hash.len() == 64),
        "only hashes are kept"
    );
    if crate::store::testing::on_files() {
        let file = f.ex.store().layout().keys_file();
        assert!(
            !std::fs::read_to_string(&file)
                .unwrap()
                .contains(&agent[5..])
        );
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let e = f.ex.auth().issue_key(Role::Agent, "../etc").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);

    // A key made elsewhere (another process: `mess token` beside a running server) works at
    // once, though this exchange has the old records cached.
    let elsewhere = Exchange::new(
        crate::store::testing::reopen(f.ex.store()),
        Settings::defaults(),
        f.clock.clone(),
    );
    let late = elsewhere
        .auth()
        .issue_key(Role::Executor, "teague-phone")
        .unwrap();
    assert_eq!(
        f.ex.auth().authenticate(&late).unwrap().map(|p| p.id),
        Some("teague-phone".to_owned())
    );
    assert!(f.ex.auth().authenticate(&agent).unwrap().is_some());
}

#[test]
fn links_work_for_their_thread_until_they_expire() {
    use crate::links::Action;
    let f = fixture(EXECUTORS);
    let r =
        ThreadRef::parse(&f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]"))
            .unwrap();
    let other =
        ThreadRef::parse(&f.request("claude-agent", "intent: photo\nrequires: [take-photo]"))
            .unwrap();
    let token =
        f.ex.auth()
            .mint_link(&r, "roomba-kitchen", &[Action::Read, Action::Claim], 3600)
            .unwrap();
    let grant = f.ex.auth().check_link(&token, &r).unwrap();
    assert_eq!(grant.executor, "roomba-kitchen");
    assert!(grant.allows(Action::Claim) && !grant.allows(Action::Respond));
    assert_eq!(
        f.ex.auth().check_link(&token, &other).unwrap_err().kind(),
        ErrorKind::Forbidden
    );
    assert_eq!(
        f.ex.auth()
            .check_link("forged.token.here", &r)
            .unwrap_err()
            .kind(),
        ErrorKind::Unauthorized
    );
    f.clock.advance(TimeDelta::seconds(3600));
    let e = f.ex.auth().check_link(&token, &r).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized);
    assert!(e.to_string().contains("expired"), "{e}");
    let missing = ThreadRef::parse("2026-01-31-999").unwrap();
    assert_eq!(
        f.ex.auth()
            .mint_link(&missing, "roomba-kitchen", &[], 60)
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    // The secret is made once and kept (on files, in a private file).
    let first = f.ex.store().link_secret().unwrap();
    f.ex.auth()
        .mint_link(&r, "roomba-kitchen", &[], 60)
        .unwrap();
    assert_eq!(f.ex.store().link_secret().unwrap(), first);
    assert_eq!(first.len(), 64);
    if crate::store::testing::on_files() {
        let secret = f.ex.store().layout().secret_file();
        assert_eq!(std::fs::read(&secret).unwrap(), first);
    }
}

#[test]
fn a_weak_link_secret_is_the_operators_problem_not_the_callers() {
    use crate::exchange::Secret;
    let f = fixture_with(
        EXECUTORS,
        Settings {
            link_secret: Some(Secret("short".to_owned())),
            ..Settings::defaults()
        },
    );
    let r = ThreadRef::parse(&f.request("claude-agent", "intent: look")).unwrap();
    let e =
        f.ex.auth()
            .mint_link(&r, "teague-phone", &[], 60)
            .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal, "{e}");
    assert!(e.to_string().contains("MESS_SECRET"), "{e}");
    assert_eq!(
        f.ex.public_message(&e),
        "the exchange could not complete this; the server log has the details"
    );
}

#[test]
fn a_held_request_says_until_when_and_stands_in_nobodys_way() {
    let f = fixture(EXECUTORS);
    // Clock: 2026-02-01T01:00:00Z. The first request is held until the afternoon.
    let held = f.request(
        "claude-agent",
        "intent: water the plants\nrequires: [take-photo]\nconstraints: {timing: {not_before: 2026-02-01T15:00:00Z}}",
    );
    let next = f.request(
        "claude-agent",
        "intent: photo the fridge\nrequires: [take-photo]",
    );
    let env = |r: &str| f.env(r);
    assert_eq!(
        crate::exchange::view::queue_position(&f.ex, &env(&held)),
        None
    );
    assert_eq!(
        crate::exchange::view::queue_position(&f.ex, &env(&next)),
        Some(1)
    );
    let shown = |r: &str| {
        let v = ThreadView::of(&f.ex.thread(r, "claude-agent").unwrap()).unwrap();
        crate::protocol::emit::to_yaml(&crate::exchange::view::with_waiting(
            &f.ex,
            &env(r),
            v.to_value(),
        ))
    };
    let text = shown(&held);
    assert!(
        text.contains("held_until: 2026-02-01T15:00:00Z")
            && text.contains("held until 2026-02-01T15:00:00Z (not_before)")
            && !text.contains("queue_position"),
        "{text}"
    );
    assert!(shown(&next).contains("queue_position: 1"));
    // The requestor's status query says it too, and counts only what is offered.
    let answer = f.ok("claude-agent", "MESS:\n  - query: {type: status}\n");
    let text = crate::protocol::emit::to_yaml(&answer.to_value());
    assert!(text.contains("held_until: 2026-02-01T15:00:00Z"), "{text}");
    assert_eq!(text.matches("queue_position: 1").count(), 1, "{text}");
    // Once the time has come, it is in the queue like any other, in its order.
    f.clock.advance(TimeDelta::hours(15));
    assert_eq!(
        crate::exchange::view::queue_position(&f.ex, &env(&held)),
        Some(1)
    );
    assert_eq!(
        crate::exchange::view::queue_position(&f.ex, &env(&next)),
        Some(2)
    );
    assert!(!shown(&held).contains("held_until"));
}

#[test]
fn ref_entries_resolve_for_whoever_may_see_the_thread_they_name() {
    let f = fixture(EXECUTORS);
    let vacuumed = f.request(
        "claude-agent",
        "intent: vacuum the hall\nrequires: [vacuum-floor]",
    );
    f.status("roomba-kitchen", &vacuumed, "code: claimed")
        .unwrap();
    f.send(
        "roomba-kitchen",
        &format!("MESS:\n  - response:\n      re: {vacuumed}\n      content: [hall is clean]\n"),
    )
    .unwrap();
    let elses = f.request("other-agent", "intent: not yours\nrequires: [vacuum-floor]");
    f.status("kitchen-robot", &elses, "code: claimed").unwrap();
    let photo = f.request(
        "claude-agent",
        &format!(
            "intent: photo the hall\nrequires: [take-photo]\ncontext:\n  - ref: {vacuumed}\n  - ref: {elses}\n  - ref: 2099-01-01-001\n"
        ),
    );
    let file =
        f.ex.store()
            .read(&ThreadRef::parse(&photo).unwrap())
            .unwrap();
    let text = |who: &str| {
        crate::protocol::emit::to_yaml(&Value::Map(
            f.ex.access().references_for(&file, who).unwrap(),
        ))
    };
    // The requestor sees its own finished thread, with what came back.
    let mine = text("claude-agent");
    assert!(
        mine.contains(&format!("{vacuumed}:")) && mine.contains("hall is clean"),
        "{mine}"
    );
    // Another principal's thread and a thread that does not exist are alike: absent.
    assert!(
        !mine.contains(&elses) && !mine.contains("2099-01-01-001"),
        "{mine}"
    );
    // The phone offered the photo may not see the vacuuming (claimed by the robot).
    assert_eq!(text("teague-phone").trim(), "{}");
    // The robot that did the vacuuming sees it, and nothing of the other agent's.
    let robot = text("roomba-kitchen");
    assert!(
        robot.contains("hall is clean") && !robot.contains(&elses),
        "{robot}"
    );
}
