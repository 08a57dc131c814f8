//! Exchange tests on a temp home with a fixed clock: the spec's example threads reproduced by
//! driving the lifecycle, and one or more tests per rule of contract section 2.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tempfile::TempDir;

use crate::exchange::clock::FixedClock;
use crate::exchange::directory::Directory;
use crate::exchange::dispatch::{Pass, Scope};
use crate::exchange::error::{Error, ErrorKind};
use crate::exchange::view::ThreadView;
use crate::exchange::{Exchange, Sender, Settings};
use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status};
use crate::protocol::time;
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};
use crate::store::FileStore;
use crate::store::layout::Location;

pub(super) const EXECUTORS: &str = "
agent_id: claude-agent
executors:
  teague-phone:
    name: Teague's Phone
    capabilities: [take-photo, check-visual]
    notify:
      slack: U04XXXXXX
  roomba-kitchen:
    capabilities: [vacuum-floor, home-kitchen-access]
  kitchen-robot:
    capabilities: [vacuum-floor, precision-knife-work, home-kitchen-access]
routing:
  - match: { capability: vacuum-floor }
    prefer: [roomba-kitchen]
  - default:
    prefer: [teague-phone]
";

pub(super) struct Fixture {
    pub(super) dir: TempDir,
    pub(super) ex: Exchange,
    pub(super) clock: Arc<FixedClock>,
}

fn at(s: &str) -> DateTime<Utc> {
    time::parse_timestamp(s).unwrap().to_utc()
}

pub(super) fn fixture(config: &str) -> Fixture {
    fixture_with(config, Settings::defaults())
}

pub(super) fn fixture_with(config: &str, settings: Settings) -> Fixture {
    let dir = TempDir::new().unwrap();
    if !config.is_empty() {
        std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    }
    let clock = Arc::new(FixedClock::new(at("2026-01-31T17:00:00-08:00")));
    let ex = Exchange::new(FileStore::open(dir.path()), settings, clock.clone());
    Fixture { dir, ex, clock }
}

impl Fixture {
    pub(super) fn send_via(&self, who: &str, channel: &str, yaml: &str) -> Result<Message, Error> {
        let mut answers = self.ex.submit_text(yaml, &Sender::new(who, channel))?;
        Ok(answers.remove(0))
    }

    pub(super) fn send(&self, who: &str, yaml: &str) -> Result<Message, Error> {
        self.send_via(who, "cli", yaml)
    }

    pub(super) fn ok(&self, who: &str, yaml: &str) -> Message {
        self.send(who, yaml)
            .unwrap_or_else(|e| panic!("{who} sending\n{yaml}\nfailed: {e}"))
    }

    pub(super) fn refused(&self, who: &str, yaml: &str, kind: ErrorKind, text: &str) {
        match self.send(who, yaml) {
            Ok(a) => panic!("accepted:\n{yaml}\nanswer: {a:?}"),
            Err(e) => {
                assert_eq!(e.kind(), kind, "{e}");
                assert!(e.to_string().contains(text), "expected {text:?} in {e:?}");
            }
        }
    }

    /// Submits a request and returns its ref.
    pub(super) fn request(&self, who: &str, body: &str) -> String {
        let answer = self.ok(who, &format!("MESS:\n  - request:\n{}", indent(body, 6)));
        match answer.content().next().unwrap() {
            Payload::Ack(a) => a.thread_ref.clone().unwrap(),
            other => panic!("no ack: {other:?}"),
        }
    }

    pub(super) fn status(&self, who: &str, r: &str, body: &str) -> Result<Message, Error> {
        self.send(
            who,
            &format!("MESS:\n  - status:\n      re: {r}\n{}", indent(body, 6)),
        )
    }

    pub(super) fn env(&self, r: &str) -> Envelope {
        self.ex
            .store()
            .read(&ThreadRef::parse(r).unwrap())
            .unwrap()
            .envelope
    }

    pub(super) fn location(&self, r: &str) -> Location {
        self.ex
            .store()
            .read(&ThreadRef::parse(r).unwrap())
            .unwrap()
            .location
    }

    pub(super) fn text(&self, r: &str) -> String {
        self.ex
            .store()
            .read(&ThreadRef::parse(r).unwrap())
            .unwrap()
            .text()
            .to_owned()
    }
}

pub(super) fn indent(body: &str, n: usize) -> String {
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{}{}\n", " ".repeat(n), l))
        .collect()
}

fn docs(text: &str) -> Vec<Value> {
    yaml::split_documents(text)
        .iter()
        .map(|s| yaml::parse_document(&text[s.start..s.end], &Limits::DEFAULT).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_map().and_then(|m| m.get(key))
}

/// Equal in meaning: timestamps as instants (within `slack` seconds), everything else exactly.
fn same(a: &Value, b: &Value, slack: i64) -> bool {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str())
        && let (Ok(tx), Ok(ty)) = (time::parse_timestamp(x), time::parse_timestamp(y))
    {
        return (tx - ty).num_seconds().abs() <= slack;
    }
    a == b
}

/// Checks that the thread file `ours` says what the spec's example `spec` says. Differences
/// allowed, each because of a documented decision: refs carry the UTC date (`ref_map`); the
/// exchange's own entries (ack document, dispatch) carry the instant it handled the request,
/// where the example shows one second later; an ack document the example leaves out; and
/// history notes the example leaves out.
fn assert_same_thread(spec: &str, ours: &str, ref_map: (&str, &str)) {
    let spec = spec.replace(ref_map.0, ref_map.1);
    let (s, o) = (docs(&spec), docs(ours));
    let (se, oe) = (&s[0], &o[0]);
    for (k, v) in se.as_map().unwrap().iter() {
        if k == "history" {
            continue;
        }
        let ov = get(oe, k).unwrap_or_else(|| panic!("envelope lacks {k}"));
        assert!(same(v, ov, 0), "envelope {k}: spec {v:?}, ours {ov:?}");
    }
    for k in oe.as_map().unwrap().keys() {
        assert!(
            se.as_map().unwrap().contains_key(k)
                || ["estimate", "requires", "confirmation"].contains(&k.as_str()),
            "envelope has an unexpected field {k}"
        );
    }
    let hist = |v: &Value| get(v, "history").unwrap().as_seq().unwrap().to_vec();
    let spec_hist = hist(se);
    let spec_dispatch = spec_hist
        .iter()
        .any(|h| get(h, "action").unwrap().as_str() == Some("dispatched"));
    let our_hist: Vec<Value> = hist(oe)
        .into_iter()
        .filter(|h| spec_dispatch || get(h, "action").unwrap().as_str() != Some("dispatched"))
        .collect();
    assert_eq!(
        spec_hist.len(),
        our_hist.len(),
        "history: spec {spec_hist:?}\nours {our_hist:?}"
    );
    for (sh, oh) in spec_hist.iter().zip(&our_hist) {
        let by_exchange = get(sh, "by").unwrap().as_str() == Some("exchange");
        assert_eq!(get(sh, "action"), get(oh, "action"));
        assert_eq!(get(sh, "by"), get(oh, "by"));
        assert!(
            same(
                get(sh, "at").unwrap(),
                get(oh, "at").unwrap(),
                if by_exchange { 1 } else { 0 }
            ),
            "{sh:?} vs {oh:?}"
        );
        if let Some(note) = get(sh, "note").filter(|_| !by_exchange) {
            assert_eq!(Some(note), get(oh, "note"));
        }
    }
    let spec_acks = s
        .iter()
        .skip(1)
        .any(|d| get(d, "from").unwrap().as_str() == Some("exchange"));
    let our_docs: Vec<&Value> = o
        .iter()
        .skip(1)
        .filter(|d| spec_acks || get(d, "from").unwrap().as_str() != Some("exchange"))
        .collect();
    assert_eq!(s.len() - 1, our_docs.len(), "number of messages");
    for (sd, od) in s.iter().skip(1).zip(our_docs) {
        let slack = if get(sd, "from").unwrap().as_str() == Some("exchange") {
            1
        } else {
            0
        };
        for (k, v) in sd.as_map().unwrap().iter() {
            let ov = get(od, k).unwrap_or_else(|| panic!("message lacks {k}: {od:?}"));
            assert!(same(v, ov, slack), "message {k}: spec {v:?}\nours {ov:?}");
        }
        assert_eq!(
            sd.as_map().unwrap().len(),
            od.as_map().unwrap().len(),
            "{od:?}"
        );
    }
}

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/threads")
            .join(name),
    )
    .unwrap()
}

#[test]
fn the_complete_example_thread_is_reproduced_by_the_lifecycle() {
    let f = fixture(EXECUTORS);
    f.send_via(
        "claude-agent",
        "mcp",
        "MESS:
  - v: 1.0.0
  - request:
      intent: check what's in the fridge
      context:
        - Planning dinner for 4
        - Kids prefer pasta
      response_hint:
        - text
        - image
",
    )
    .unwrap();
    let r = "2026-02-01-001";
    f.clock.set(at("2026-01-31T17:00:30-08:00"));
    f.send_via(
        "teague-phone",
        "http",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    )
    .unwrap();
    f.clock.set(at("2026-01-31T17:05:00-08:00"));
    f.send_via(
        "teague-phone",
        "http",
        &format!(
            "MESS:
  - status:
      re: {r}
      code: completed
  - response:
      re: {r}
      content:
        - image: data:image/jpeg;base64,/9j/4AAQ...
        - |
          Proteins: chicken thighs (1 lb, expires tomorrow)
          Vegetables: broccoli, carrots, half onion
          Dairy: milk, cheddar, butter
          Pantry: rice, pasta, soy sauce
      notes: chicken should be used tonight
"
        ),
    )
    .unwrap();
    assert_eq!(f.location(r), Location::State(State::Finished));
    assert_same_thread(
        &fixture_text("complete-example.messe-af.yaml"),
        &f.text(r),
        ("2026-01-31-001", r),
    );
}

#[test]
fn the_needs_input_example_thread_is_reproduced_by_the_lifecycle() {
    // No executor is registered when the request arrives (so nothing is dispatched, as in the
    // example); the robot registers itself with a config message before claiming.
    let f = fixture("");
    f.clock.set(at("2026-01-31T18:00:00-08:00"));
    f.send_via("claude-agent", "mcp", "MESS:\n  - request:\n      intent: vacuum the kitchen spill\n      context:\n        - Rice spill near the sink\n").unwrap();
    let r = "2026-02-01-001";
    f.send_via("roomba-kitchen", "webhook", "MESS:\n  - config:\n      executor:\n        id: roomba-kitchen\n        capabilities: [vacuum-floor]\n").unwrap();
    f.clock.set(at("2026-01-31T18:00:05-08:00"));
    f.send_via(
        "roomba-kitchen",
        "webhook",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    )
    .unwrap();
    f.clock.set(at("2026-01-31T18:01:00-08:00"));
    f.send_via(
        "roomba-kitchen",
        "webhook",
        &format!(
            "MESS:
  - status:
      re: {r}
      code: needs_input
      message: multiple spills detected
      questions:
        - field: location
          question: \"Rice near sink AND crumbs by stove. Which area?\"
          options: [near sink, by stove, both]
"
        ),
    )
    .unwrap();
    f.clock.set(at("2026-01-31T18:02:30-08:00"));
    f.send_via(
        "claude-agent",
        "mcp",
        &format!("MESS:\n  - reply:\n      re: {r}\n      answers:\n        location: both\n"),
    )
    .unwrap();
    f.clock.set(at("2026-01-31T18:03:00-08:00"));
    f.send_via(
        "roomba-kitchen",
        "webhook",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: in_progress\n      message: starting with sink area\n"),
    )
    .unwrap();
    assert_same_thread(
        &fixture_text("needs-input-example.messe-af.yaml"),
        &f.text(r),
        ("2026-01-31-002", r),
    );
}

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
        FileStore::open(f.dir.path()),
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
fn routing_follows_rules_then_default_then_capability() {
    let f = fixture(EXECUTORS);
    let note = |r: &str| {
        let env = f.env(r);
        env.history
            .iter()
            .find(|h| h.action == "dispatched")
            .and_then(|h| h.note.clone())
    };
    let vac = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    assert_eq!(
        note(&vac).unwrap(),
        "routed to roomba-kitchen: rule 1 (match capability vacuum-floor) prefers roomba-kitchen"
    );
    let photo = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    assert_eq!(
        note(&photo).unwrap(),
        "routed to teague-phone: rule 2 (default) prefers teague-phone"
    );
    let knife = f.request(
        "claude-agent",
        "intent: dice\nrequires: [precision-knife-work]",
    );
    assert_eq!(
        note(&knife).unwrap(),
        "routed to kitchen-robot: holds precision-knife-work"
    );
    let nobody = f.request("claude-agent", "intent: fly\nrequires: [flight]");
    assert_eq!(
        note(&nobody),
        None,
        "no eligible executor, nothing dispatched"
    );
    let meta = f.request(
        "claude-agent",
        "intent: print\nrequires:\n  - vacuum-floor: {areas: [kitchen]}",
    );
    assert_eq!(
        note(&meta),
        None,
        "capability metadata must be satisfied, and no executor here declares areas"
    );
}

#[test]
fn config_messages_register_executors_and_rules_at_once() {
    let f = fixture("");
    let r = f.request(
        "claude-agent",
        "intent: print a clip\nrequires: [3d-print-fdm]",
    );
    assert!(f.status("prusa", &r, "code: claimed").is_err());
    let answer = f.ok(
        "admin",
        "MESS:
  - config:
      executor:
        id: prusa
        name: Prusa MK4
        capabilities:
          - 3d-print-fdm: { level: expert }
        availability: always
        notify: { webhook: http://127.0.0.1:9/prusa }
  - config:
      routing:
        rules:
          - match: { capability: 3d-print-fdm }
            prefer: [prusa]
",
    );
    assert_eq!(answer.content().count(), 2);
    assert!(f.dir.path().join("executors/prusa.yaml").exists());
    let stored = std::fs::read_to_string(f.dir.path().join("executors/prusa.yaml")).unwrap();
    assert!(
        stored.contains("notify:") && stored.contains("level: expert"),
        "unknown fields kept:\n{stored}"
    );
    f.status("prusa", &r, "code: claimed").unwrap();
    let next = f.request("claude-agent", "intent: another\nrequires: [3d-print-fdm]");
    assert!(
        f.env(&next)
            .history
            .iter()
            .any(|h| h.note.as_deref().is_some_and(|n| n.contains("rule 1")))
    );
}

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
    assert_eq!(
        f.env(&a).history.last().unwrap().note.as_deref(),
        Some("suggestion accepted")
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
fn oversized_and_malformed_input_is_refused_cleanly() {
    let f = fixture(EXECUTORS);
    let small = Exchange::new(
        FileStore::open(f.dir.path()),
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
        "MESS:\n  - v: 1.1.0\n  - review:\n      rating: 5\n",
        ErrorKind::Invalid,
        "nothing to act on",
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
fn a_refused_request_leaves_the_config_of_the_same_message_unwritten() {
    let f = fixture("");
    f.refused(
        "claude-agent",
        "MESS:\n  - config:\n      executor:\n        id: sneaky\n  - request:\n      id: a\n      intent: x\n  - request:\n      id: a\n      intent: y\n",
        ErrorKind::Invalid,
        "ids in one message must differ",
    );
    assert!(!f.dir.path().join("executors/sneaky.yaml").exists());
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
fn messages_built_by_adapters_obey_the_size_limit_too() {
    let f = fixture(EXECUTORS);
    let small = Exchange::new(
        FileStore::open(f.dir.path()),
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
        .submit(big, &Sender::new("claude-agent", "cli"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
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
            Ok((Some(crate::store::Edit { envelope, append: vec![doc] }), ()))
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
    f.ex.settle_pending().unwrap();
    assert_eq!(f.text(&r), before, "no dispatch, expiry or rewrite on read");
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
fn registrations_belong_to_their_registrant_and_config_yaml_to_its_owner() {
    let f = fixture(EXECUTORS);
    let msg = |id: &str, cap: &str| {
        format!(
            "MESS:\n  - config:\n      executor:\n        id: {id}\n        capabilities: [{cap}]\n"
        )
    };
    f.refused(
        "random-agent",
        &msg("teague-phone", "nothing"),
        ErrorKind::Forbidden,
        "defined in config.yaml",
    );
    f.ok("admin", &msg("prusa", "3d-print-fdm"));
    f.refused(
        "random-agent",
        &msg("prusa", "nothing"),
        ErrorKind::Forbidden,
        "registered by admin",
    );
    f.ok("prusa", &msg("prusa", "3d-print-resin"));
    f.ok("admin", &msg("prusa", "3d-print-fdm"));
    let stored = std::fs::read_to_string(f.dir.path().join("executors/prusa.yaml")).unwrap();
    assert!(stored.contains("registered_by: admin"), "{stored}");
    f.refused(
        "admin",
        &msg("../escape", "x"),
        ErrorKind::Invalid,
        "MESS[0].config.executor.id",
    );
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

#[test]
fn config_problems_are_reported_not_fatal() {
    let f = fixture(
        "executors:\n  good:\n    capabilities: [a]\n    notify: {pager: '555'}\n  \"../bad\":\n    capabilities: [a]\nrouting:\n  - match: {capability: a}\n    prefer: [nobody]\n  - match: {intent: x}\n    prefer: [good]\n",
    );
    let problems = f.ex.config_problems();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("routing rule 2: match on intent is not understood")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("\"../bad\"")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("prefers nobody")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("executor good: notify.pager: unknown channel")),
        "{problems:?}"
    );
    let r = f.request("claude-agent", "intent: x\nrequires: [a]");
    f.status("good", &r, "code: claimed").unwrap();
}

#[test]
fn a_keys_registration_may_point_webhooks_only_where_allowed_and_records_how_it_came() {
    use crate::exchange::auth::Role;
    use crate::exchange::directory::Origin;
    let keyed = Sender {
        id: "robo".to_owned(),
        channel: "http".to_owned(),
        role: Some(Role::Executor),
    };
    let register = |f: &Fixture, who: &Sender, hook: &str| {
        f.ex.submit_text(
            &format!("MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [x]\n        notify: {{ntfy: robo-topic, webhook: '{hook}'}}\n"),
            who,
        )
    };
    let f = fixture("");
    let e = register(&f, &keyed, "http://127.0.0.1:9/hook").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(
        e.to_string().starts_with(
            "MESS[0].config.executor.notify.webhook: 127.0.0.1 is not a public address"
        ),
        "{e}"
    );
    let e = register(&f, &keyed, "https://robot.example/a b").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("MESS[0].config.executor.notify.webhook"),
        "{e}"
    );
    assert!(!f.dir.path().join("executors/robo.yaml").exists());
    // The operator on this machine (no key) may point anywhere.
    register(&f, &Sender::new("robo", "cli"), "http://127.0.0.1:9/hook").unwrap();
    assert_eq!(
        Directory::load(f.ex.store()).origin("robo"),
        Some(&Origin::Registration {
            by: Some("robo".to_owned()),
            by_key: false
        })
    );

    let mut settings = Settings::defaults();
    settings.dispatch.webhook_allow = crate::notify::Allow::parse(&["127.0.0.0/8"]).unwrap();
    let g = fixture_with("", settings);
    register(&g, &keyed, "http://127.0.0.1:9/hook").unwrap();
    let stored = std::fs::read_to_string(g.dir.path().join("executors/robo.yaml")).unwrap();
    assert!(stored.contains("registered_with: key"), "{stored}");
    // A file without the field (an older version's) counts as key-made.
    std::fs::write(
        g.dir.path().join("executors/robo.yaml"),
        stored.replace("registered_with: key\n", ""),
    )
    .unwrap();
    assert!(matches!(
        Directory::load(g.ex.store()).origin("robo"),
        Some(Origin::Registration { by_key: true, .. })
    ));
}

#[test]
fn executors_on_channels_without_their_settings_are_config_problems() {
    let mut settings = Settings::defaults();
    settings.dispatch.unconfigured = vec![("slack", "dispatch.slack.bot_token")];
    let f = fixture_with(EXECUTORS, settings);
    let problems = f.ex.config_problems();
    assert_eq!(
        problems,
        vec![
            "executor teague-phone notifies on slack, but dispatch.slack.bot_token is not set: those notices will fail"
                .to_owned()
        ]
    );
    assert!(fixture(EXECUTORS).ex.config_problems().is_empty());
}

#[test]
fn api_keys_are_shown_once_stored_hashed_and_name_their_principal() {
    use crate::exchange::auth::{Principal, Role};
    use std::os::unix::fs::PermissionsExt;
    let f = fixture(EXECUTORS);
    let agent = f.ex.issue_key(Role::Agent, "claude-agent").unwrap();
    let robot = f.ex.issue_key(Role::Executor, "roomba-kitchen").unwrap();
    assert!(
        agent.starts_with("mess_") && agent.len() == 5 + 64,
        "{agent}"
    );
    assert_ne!(agent, robot);
    assert_eq!(
        f.ex.authenticate(&agent).unwrap(),
        Some(Principal {
            id: "claude-agent".into(),
            role: Role::Agent
        })
    );
    assert_eq!(
        f.ex.authenticate(&robot).unwrap().map(|p| p.role),
        Some(Role::Executor)
    );
    assert_eq!(f.ex.authenticate("mess_not-a-key").unwrap(), None);
    assert_eq!(f.ex.authenticate("").unwrap(), None);
    let file = f.ex.store().layout().keys_file();
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(!stored.contains(&agent[5..]), "only hashes are kept");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let e = f.ex.issue_key(Role::Agent, "../etc").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);

    // A key made elsewhere (another process: `mess token` beside a running server) works at
    // once, though this exchange has the old records cached.
    let elsewhere = Exchange::new(
        FileStore::open(f.dir.path()),
        Settings::defaults(),
        f.clock.clone(),
    );
    let late = elsewhere.issue_key(Role::Executor, "teague-phone").unwrap();
    assert_eq!(
        f.ex.authenticate(&late).unwrap().map(|p| p.id),
        Some("teague-phone".to_owned())
    );
    assert!(f.ex.authenticate(&agent).unwrap().is_some());
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
        f.ex.mint_link(&r, "roomba-kitchen", &[Action::Read, Action::Claim], 3600)
            .unwrap();
    let grant = f.ex.check_link(&token, &r).unwrap();
    assert_eq!(grant.executor, "roomba-kitchen");
    assert!(grant.allows(Action::Claim) && !grant.allows(Action::Respond));
    assert_eq!(
        f.ex.check_link(&token, &other).unwrap_err().kind(),
        ErrorKind::Forbidden
    );
    assert_eq!(
        f.ex.check_link("forged.token.here", &r).unwrap_err().kind(),
        ErrorKind::Unauthorized
    );
    f.clock.advance(TimeDelta::seconds(3600));
    let e = f.ex.check_link(&token, &r).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized);
    assert!(e.to_string().contains("expired"), "{e}");
    let missing = ThreadRef::parse("2026-01-31-999").unwrap();
    assert_eq!(
        f.ex.mint_link(&missing, "roomba-kitchen", &[], 60)
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    // The secret is made once, private, and kept.
    let secret = f.ex.store().layout().secret_file();
    let first = std::fs::read(&secret).unwrap();
    f.ex.mint_link(&r, "roomba-kitchen", &[], 60).unwrap();
    assert_eq!(std::fs::read(&secret).unwrap(), first);
}

#[test]
fn every_committed_change_is_announced_after_it_is_written() {
    let f = fixture(EXECUTORS);
    let mut changes = f.ex.subscribe();
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

fn background() -> Settings {
    Settings {
        route_in_background: true,
        ..Settings::defaults()
    }
}

fn dispatched_note(f: &Fixture, r: &str) -> Option<String> {
    f.env(r)
        .history
        .iter()
        .find(|h| h.action == "dispatched")
        .and_then(|h| h.note.clone())
}

fn refs(v: &[ThreadRef]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

#[test]
fn background_routing_acks_first_then_one_pass_routes_like_the_synchronous_path() {
    let now = fixture(EXECUTORS);
    let later = fixture_with(EXECUTORS, background());
    let bodies = [
        "intent: vacuum\nrequires: [vacuum-floor]",
        "intent: photo\nrequires: [take-photo]",
        "intent: dice\nrequires: [precision-knife-work]",
        "intent: anything",
        "intent: hurry\nrequires: [take-photo]\nconstraints:\n  timing:\n    urgency: now",
    ];
    let mut deferred = Vec::new();
    for body in bodies {
        let sync = now.request("claude-agent", body);
        let r = later.request("claude-agent", body);
        assert_eq!(
            dispatched_note(&later, &r),
            None,
            "acknowledged before routing"
        );
        deferred.push((dispatched_note(&now, &sync).unwrap(), r));
    }
    let pass = later.ex.dispatch_waiting(Scope::All).unwrap();
    assert_eq!(pass.routed.len(), bodies.len());
    assert!(pass.waiting.is_empty());
    for (expected, r) in &deferred {
        assert_eq!(dispatched_note(&later, r).as_ref(), Some(expected), "{r}");
    }
    let again = later.ex.dispatch_waiting(Scope::All).unwrap();
    assert_eq!(
        again,
        Pass::default(),
        "a routed thread is not routed twice"
    );
}

#[test]
fn the_dispatcher_skips_claimed_threads_and_retries_unroutable_ones() {
    let f = fixture_with(EXECUTORS, background());
    let taken = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    let nobody = f.request("claude-agent", "intent: fly\nrequires: [flight]");
    f.status("teague-phone", &taken, "code: claimed").unwrap();
    let pass =
        f.ex.dispatch_waiting(Scope::Threads(vec![
            ThreadRef::parse(&taken).unwrap(),
            ThreadRef::parse(&nobody).unwrap(),
        ]))
        .unwrap();
    assert!(pass.routed.is_empty(), "{pass:?}");
    assert_eq!(refs(&pass.waiting), vec![nobody.clone()]);
    assert_eq!(dispatched_note(&f, &taken), None, "claimed before routing");

    // A pilot registers later: the next full pass routes the waiting thread.
    f.ok(
        "admin",
        "MESS:\n  - config:\n      executor:\n        id: pilot\n        capabilities: [flight]\n",
    );
    let pass = f.ex.dispatch_waiting(Scope::All).unwrap();
    assert_eq!(refs(&pass.routed), vec![nobody.clone()]);
    assert_eq!(
        dispatched_note(&f, &nobody).unwrap(),
        "routed to pilot: holds flight"
    );
}

#[test]
fn the_dispatcher_routes_dependents_when_their_dependency_completes() {
    let f = fixture_with(EXECUTORS, background());
    let first = f.request(
        "claude-agent",
        "id: a\nintent: first\nrequires: [take-photo]",
    );
    let second = f.request(
        "claude-agent",
        "intent: second\nrequires: [vacuum-floor]\nconstraints:\n  depends_on: [a]",
    );
    let pass = f.ex.dispatch_waiting(Scope::All).unwrap();
    assert_eq!(
        refs(&pass.routed),
        vec![first.clone()],
        "the dependent waits"
    );
    f.status("teague-phone", &first, "code: claimed").unwrap();
    f.status("teague-phone", &first, "code: completed").unwrap();
    assert_eq!(dispatched_note(&f, &second), None, "left to the dispatcher");
    let pass =
        f.ex.dispatch_waiting(Scope::Threads(vec![ThreadRef::parse(&first).unwrap()]))
            .unwrap();
    assert_eq!(refs(&pass.routed), vec![second.clone()]);
    assert!(
        dispatched_note(&f, &second)
            .unwrap()
            .contains("roomba-kitchen")
    );
}

#[test]
fn the_dispatcher_leaves_overdue_threads_to_expiry() {
    let f = fixture_with(EXECUTORS, background());
    let r = f.request(
        "claude-agent",
        "intent: soon\nrequires: [take-photo]\nneeded_by: 2026-01-31T17:30:00-08:00",
    );
    f.clock.advance(TimeDelta::hours(1));
    let pass = f.ex.dispatch_waiting(Scope::All).unwrap();
    assert!(
        pass.routed.is_empty() && pass.waiting.is_empty(),
        "{pass:?}"
    );
    assert_eq!(dispatched_note(&f, &r), None);
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
    let e = f.ex.mint_link(&r, "teague-phone", &[], 60).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal, "{e}");
    assert!(e.to_string().contains("MESS_SECRET"), "{e}");
    assert_eq!(
        f.ex.public_message(&e),
        "the exchange could not complete this; the server log has the details"
    );
}

#[test]
fn routing_over_the_checked_directory_decides_as_the_views_do() {
    let f = fixture(
        "
executors:
  teague-phone:
    capabilities: [take-photo, {check-visual: {camera: rear}}]
  roomba-kitchen:
    capabilities: [vacuum-floor]
    availability: schedule
    schedule: '0 8-22 * * 1-5'
  night-robot:
    capabilities: [vacuum-floor, mop-floor]
    availability: schedule
    schedule: '0 0-7,23 * * *'
  helper:
    capabilities: [vacuum-floor, take-photo]
    availability: on_demand
routing:
  - match: { capability: vacuum-floor, urgency: now }
    prefer: lower_latency
  - match: { capability: take-photo }
    prefer: [helper, teague-phone]
  - match: { capability: mop-floor, colour: red }
    prefer: [night-robot]
  - default:
    prefer: [teague-phone]
",
    );
    let db = f.ex.db().unwrap();
    let directory = Directory::load(f.ex.store()).routing();
    assert_eq!(directory.executors.len(), 4);
    for instant in [
        "2026-01-30T12:00:00Z",
        "2026-01-31T12:00:00Z",
        "2026-01-31T23:30:00Z",
    ] {
        let now = time::parse_timestamp(instant).unwrap();
        for (requires, urgency) in [
            (vec!["vacuum-floor"], None),
            (vec!["vacuum-floor"], Some("now")),
            (vec!["take-photo"], None),
            (vec!["check-visual"], None),
            (vec!["mop-floor"], None),
            (vec![], None),
            (vec!["flight"], None),
        ] {
            let requires: Vec<String> = requires.iter().map(|s| s.to_string()).collect();
            let views = db.route(&requires, None, urgency, &now, None).unwrap();
            let checked = db
                .route(&requires, None, urgency, &now, Some(&directory))
                .unwrap();
            assert_eq!(checked, views, "{requires:?} {urgency:?} at {instant}");
        }
    }
}

#[test]
fn parsing_waits_for_room_when_large_messages_arrive_at_once() {
    let gate = Arc::new(super::ParseGate::default());
    let patience = std::time::Duration::from_secs(30);
    let held = gate.enter(super::PARSE_BUDGET - 10, patience).unwrap();
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
    drop(gate.enter(super::PARSE_BUDGET * 4, patience).unwrap());
    // A parse that cannot get room in time is refused as busy, and holds nothing.
    let held = gate.enter(super::PARSE_BUDGET, patience).unwrap();
    let refused = gate
        .enter(1, std::time::Duration::from_millis(50))
        .err()
        .unwrap();
    assert_eq!(refused.kind(), crate::exchange::error::ErrorKind::Busy);
    drop(held);
    drop(gate.enter(super::PARSE_BUDGET, patience).unwrap());
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
        if let Err(e) = f.ex.submit(reply(), &Sender::new("claude-agent", "cli")) {
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
fn requests_route_by_zone_place_environment_and_metadata_as_the_views_route_them() {
    // The fixture's clock: Saturday 2026-01-31 17:00 in Los Angeles, Sunday 02:00 in Berlin.
    let f = fixture(
        "timezone: America/Los_Angeles
executors:
  la-phone:
    capabilities: [take-photo, fetch]
    availability: schedule
    schedule: '0 8-22 * * sat,sun'
  berlin-phone:
    capabilities: [take-photo, fetch]
    availability: schedule
    schedule: '0 8-22 * * *'
    timezone: Europe/Berlin
  kitchen-arm:
    capabilities:
      - vacuum-floor: {areas: [kitchen]}
      - fetch
    access: [home/kitchen]
    environment: [indoor]
  roomba:
    capabilities: [vacuum-floor]
",
    );
    assert_eq!(f.ex.config_problems(), Vec::<String>::new());
    let note = |r: &str| {
        f.env(r)
            .history
            .iter()
            .find(|h| h.action == "dispatched")
            .and_then(|h| h.note.clone())
    };
    let mut threads = Vec::new();
    for (body, routed) in [
        (
            "intent: photo\nrequires: [take-photo]",
            Some("routed to la-phone: holds take-photo"),
        ),
        (
            "intent: vacuum\nrequires:\n  - vacuum-floor: {areas: [kitchen]}",
            Some("routed to kitchen-arm: holds vacuum-floor"),
        ),
        (
            "intent: vacuum\nrequires:\n  - vacuum-floor: {areas: [garage]}",
            None,
        ),
        (
            "intent: fetch\nrequires: [fetch]\nconstraints: {location: home/garage}",
            Some("routed to la-phone: holds fetch"),
        ),
        (
            "intent: fetch\nrequires: [fetch]\nconstraints: {environment: [outdoor]}",
            Some("routed to la-phone: holds fetch"),
        ),
        (
            "intent: fetch\nrequires: [fetch]\nconstraints: {location: home/kitchen/sink, environment: [indoor]}",
            Some("routed to kitchen-arm: holds fetch; la-phone: holds fetch"),
        ),
    ] {
        let r = f.request("claude-agent", body);
        assert_eq!(note(&r).as_deref(), routed, "{body}");
        threads.push(r);
    }
    // The same requests over the checked directory and over the views, at other hours and
    // across both zones' changes to daylight saving time.
    let db = f.ex.db().unwrap();
    let directory = Directory::load(f.ex.store()).routing();
    for instant in [
        "2026-02-01T16:00:00Z",
        "2026-03-08T09:59:00Z",
        "2026-03-08T15:00:00Z",
        "2026-03-08T16:00:00Z",
        "2026-03-29T00:59:00Z",
        "2026-03-29T06:00:00Z",
    ] {
        let now = time::parse_timestamp(instant).unwrap();
        for r in &threads {
            let file = f.ex.store().read(&ThreadRef::parse(r).unwrap()).unwrap();
            let wanted = super::lifecycle::route_input(&file)
                .unwrap()
                .wanted(r.clone());
            assert_eq!(
                db.route_wanted(&wanted, &now, Some(&directory)).unwrap(),
                db.route_wanted(&wanted, &now, None).unwrap(),
                "{r} at {instant}"
            );
        }
    }
}

#[test]
fn unknown_time_zones_are_reported_and_their_schedules_allow_nothing() {
    let f = fixture(
        "timezone: Europe/Berln
executors:
  zoned:
    capabilities: [x]
    availability: schedule
    schedule: '* * * * *'
    timezone: Mars/Base
  defaulted:
    capabilities: [x]
    availability: schedule
    schedule: '* * * * *'
  always:
    capabilities: [x]
",
    );
    let problems = f.ex.config_problems();
    assert!(
        problems.iter().any(|p| p
            .starts_with("config.yaml: timezone: \"Europe/Berln\" is not a known IANA time zone")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p
            .starts_with("executor zoned.timezone: \"Mars/Base\" is not a known IANA time zone")
            && p.ends_with("that executor is skipped")),
        "{problems:?}"
    );
    let r = f.request("claude-agent", "intent: x\nrequires: [x]");
    assert_eq!(
        f.env(&r)
            .history
            .iter()
            .find(|h| h.action == "dispatched")
            .and_then(|h| h.note.clone())
            .as_deref(),
        Some("routed to always: holds x")
    );
}
