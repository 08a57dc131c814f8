//! The engine over an in-memory map: what the Worker does, without the Worker.

#![allow(clippy::unwrap_used)]

use crate::http::{Input, Output, handle};
use crate::kv::MemKv;

const OPERATOR: &str = "operator-key-of-these-tests";
const NOW: &str = "2026-11-28T09:30:00Z";

fn input(method: &str, path: &str, key: Option<&str>, body: &str) -> Input {
    Input {
        method: method.to_owned(),
        path: path.split('?').next().unwrap_or_default().to_owned(),
        query: path
            .split_once('?')
            .map(|(_, q)| q.to_owned())
            .unwrap_or_default(),
        authorization: key.map(|k| format!("Bearer {k}")),
        accept: Some("application/json".to_owned()),
        content_type: Some("application/yaml".to_owned()),
        body: body.to_owned(),
        now: NOW.to_owned(),
        operator_key: Some(OPERATOR.to_owned()),
        entropy: "ab".repeat(32),
        watchers: Vec::new(),
    }
}

fn key(kv: &mut MemKv, kind: &str, id: &str, entropy: &str) -> String {
    let mut i = input(
        "POST",
        "/keys",
        Some(OPERATOR),
        &format!(r#"{{"kind":"{kind}","id":"{id}"}}"#),
    );
    i.entropy = entropy.repeat(64);
    let out = handle(kv, &i);
    assert_eq!(out.status, 200, "{}", out.body);
    let v: serde_json::Value = serde_json::from_str(&out.body).unwrap();
    v["key"].as_str().unwrap().to_owned()
}

fn post(kv: &mut MemKv, key: &str, body: &str) -> Output {
    handle(kv, &input("POST", "/mess", Some(key), body))
}

#[test]
fn a_request_is_routed_claimed_and_completed_and_each_file_goes_to_r2() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let robo = key(&mut kv, "executor", "robo", "2");
    let out = post(
        &mut kv,
        &robo,
        "MESS:\n  - config:\n      executor: {id: robo, capabilities: [vacuum-floor]}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let out = post(
        &mut kv,
        &alice,
        "MESS:\n  - request: {id: vac-1, intent: vacuum, requires: [vacuum-floor]}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(
        out.body.contains(r#""ref":"2026-11-28-001""#),
        "{}",
        out.body
    );
    assert!(out.body.contains(r#""queue_position":1"#), "{}", out.body);
    assert_eq!(out.r2_put.len(), 1);
    assert_eq!(
        out.r2_put[0].0,
        "state=received/2026-11-28-001.messe-af.yaml"
    );
    assert!(
        out.r2_put[0]
            .1
            .contains("routed to robo: holds vacuum-floor"),
        "{}",
        out.r2_put[0].1
    );

    let out = post(
        &mut kv,
        &robo,
        "MESS:\n  - status: {re: vac-1, code: claimed}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(
        out.r2_put[0].0,
        "state=executing/2026-11-28-001.messe-af.yaml"
    );
    assert_eq!(
        out.r2_delete,
        vec!["state=received/2026-11-28-001.messe-af.yaml"]
    );

    let out = post(
        &mut kv,
        &robo,
        "MESS:\n  - response: {re: last, content: [{text: done}]}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(out.body.contains(r#""code":"completed""#), "{}", out.body);
    assert_eq!(
        out.r2_put[0].0,
        "state=finished/2026-11-28-001.messe-af.yaml"
    );

    let out = handle(
        &mut kv,
        &input("GET", "/threads?state=finished", Some(&alice), ""),
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(out.body.contains("2026-11-28-001"), "{}", out.body);
}

#[test]
fn a_refused_message_writes_nothing_and_answers_as_the_native_exchange() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let before = kv.map.clone();
    for (body, status, code) in [
        (
            "MESS:\n  - status: {re: 2026-11-28-001, code: claimed}\n",
            403,
            "forbidden",
        ),
        (
            "MESS:\n  - cancel: {re: 2026-11-28-001}\n",
            404,
            "not_found",
        ),
        ("MESS: [", 400, "malformed"),
        (
            "MESS:\n  - request: {intent: x, needed_by: 2026-11-29T00:00:00Z}\n",
            422,
            "invalid",
        ),
        (
            "MESS:\n  - request: {intent: x, callback: 'http://127.0.0.1:9/'}\n",
            422,
            "invalid",
        ),
    ] {
        let out = post(&mut kv, &alice, body);
        assert_eq!(out.status, status, "{body}: {}", out.body);
        assert!(out.body.contains(code), "{body}: {}", out.body);
        assert!(out.r2_put.is_empty() && out.r2_delete.is_empty());
        assert_eq!(kv.map, before, "{body} wrote something");
    }
    let out = post(&mut kv, "mess_unknown", "MESS:\n  - request: {intent: x}\n");
    assert_eq!(out.status, 401);
    let out = handle(
        &mut kv,
        &input(
            "POST",
            "/keys",
            Some(&alice),
            r#"{"kind":"agent","id":"eve"}"#,
        ),
    );
    assert_eq!(out.status, 401, "an agent key mints no keys");
}

#[test]
fn query_parameters_are_percent_decoded() {
    assert_eq!(
        crate::http::percent_decode("a%20b+c%2F%zz%e2%82%ac"),
        "a b c/%zz€"
    );
    assert_eq!(crate::http::percent_decode("%4"), "%4");
    assert_eq!(crate::http::percent_decode("€%"), "€%");
}

#[test]
fn each_change_is_told_to_the_watchers_who_may_see_it() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let robo = key(&mut kv, "executor", "robo", "2");
    let out = post(
        &mut kv,
        &robo,
        "MESS:\n  - config:\n      executor: {id: robo, capabilities: [vacuum-floor]}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let mut i = input(
        "POST",
        "/mess",
        Some(&alice),
        "MESS:\n  - request: {intent: vacuum, requires: [vacuum-floor]}\n",
    );
    i.watchers = vec!["alice".into(), "robo".into(), "eve".into()];
    let out = handle(&mut kv, &i);
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(out.changes.len(), 1);
    assert_eq!(out.changes[0].status, "pending");
    assert_eq!(out.changes[0].to, vec!["alice", "robo"]);
    let mut i = input("GET", "/events", Some(&alice), "");
    i.watchers = vec!["alice".into()];
    let out = handle(&mut kv, &i);
    assert_eq!(
        (out.status, out.body.as_str()),
        (200, r#"{"watch":"alice"}"#)
    );
    let out = handle(&mut kv, &input("GET", "/events", Some("mess_nobody"), ""));
    assert_eq!(out.status, 401);
}
