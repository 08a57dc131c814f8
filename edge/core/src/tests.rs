//! The engine over an in-memory map: what the Worker does, without the Worker.

#![allow(clippy::unwrap_used)]

use crate::http::{Input, Output, handle};
use crate::kv::MemKv;

const OPERATOR: &str = "operator-key-of-these-tests";
const NOW: &str = "2026-11-28T09:30:00Z";
const SECRET: &str = "link-secret-of-these-tests-32-bytes-at-least";

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
        link_secret: Some(SECRET.to_owned()),
        issuer: "http://127.0.0.1:8787".to_owned(),
        authorize_only: false,
        dispatch: crate::notice::Dispatch::default(),
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
            "MESS:\n  - request: {intent: x, constraints: {timing: {not_before: 2026-11-29T00:00:00Z}}}\n",
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

/// A link for `executor` on `thread` (with `extra` JSON fields), minted by the operator.
fn link(kv: &mut MemKv, thread: &str, executor: &str, extra: &str) -> String {
    link_until(kv, thread, executor, extra, "2026-11-29T09:30:00Z")
}

/// [`link`], checking when it expires.
fn link_until(kv: &mut MemKv, thread: &str, executor: &str, extra: &str, expires: &str) -> String {
    let out = handle(
        kv,
        &input(
            "POST",
            "/links",
            Some(OPERATOR),
            &format!(r#"{{"ref":"{thread}","executor":"{executor}"{extra}}}"#),
        ),
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let v: serde_json::Value = serde_json::from_str(&out.body).unwrap();
    let url = v["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!(
            "http://127.0.0.1:8787/respond?ref={thread}&token="
        )),
        "{url}"
    );
    assert_eq!(v["expires"], expires, "24 hours by default");
    v["token"].as_str().unwrap().to_owned()
}

#[test]
fn a_link_reads_and_works_its_own_thread_only_and_only_as_far_as_it_allows() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let robo = key(&mut kv, "executor", "robo", "2");
    for (who, body) in [
        (
            &robo,
            "MESS:\n  - config:\n      executor: {id: robo, capabilities: [mop]}\n",
        ),
        (
            &alice,
            "MESS:\n  - request: {intent: mop the hall, requires: [mop]}\n",
        ),
        (
            &alice,
            "MESS:\n  - request: {intent: mop the stairs, requires: [mop]}\n",
        ),
    ] {
        assert_eq!(post(&mut kv, who, body).status, 200);
    }
    let one = "2026-11-28-001";
    let token = link(&mut kv, one, "robo", "");
    // Read, as the page does it: with the token as bearer, and as `?token=`.
    let out = handle(
        &mut kv,
        &input("GET", &format!("/mess/{one}"), Some(&token), ""),
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let v: serde_json::Value = serde_json::from_str(&out.body).unwrap();
    assert_eq!(v["envelope"]["intent"], "mop the hall");
    assert_eq!(v["link"]["executor"], "robo");
    assert_eq!(v["link"]["actions"].as_array().unwrap().len(), 5);
    let q = format!("/thread/{one}?token={token}");
    assert_eq!(handle(&mut kv, &input("GET", &q, None, "")).status, 200);
    // Another thread, by path or by payload, is refused.
    let other = format!("/thread/2026-11-28-002?token={token}");
    let out = handle(&mut kv, &input("GET", &other, None, ""));
    assert_eq!(out.status, 403, "{}", out.body);
    assert!(out.body.contains("another thread"), "{}", out.body);
    let out = post(
        &mut kv,
        &token,
        "MESS:\n  - status: {re: 2026-11-28-002, code: claimed}\n",
    );
    assert_eq!(out.status, 403, "{}", out.body);
    // Only status and response payloads.
    let out = post(
        &mut kv,
        &token,
        &format!("MESS:\n  - cancel: {{re: {one}}}\n"),
    );
    assert_eq!(out.status, 403, "{}", out.body);
    assert!(
        out.body.contains("only status and response"),
        "{}",
        out.body
    );
    // The claim goes in as robo, by the link's channel.
    let out = handle(
        &mut kv,
        &input(
            "POST",
            &q,
            None,
            &format!("MESS:\n  - status: {{re: {one}, code: claimed}}\n"),
        ),
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let file = &out.r2_put[0].1;
    assert!(file.contains("executor: robo"), "{file}");
    assert!(file.contains("channel: link"), "{file}");
    // A link that may only read cannot answer; another executor's link stops reading once
    // robo holds the thread, as if it did not exist.
    let reader = link(&mut kv, one, "robo", r#","actions":["read"]"#);
    let out = post(
        &mut kv,
        &reader,
        &format!("MESS:\n  - response: {{re: {one}, content: [{{text: done}}]}}\n"),
    );
    assert_eq!(out.status, 403, "{}", out.body);
    assert!(out.body.contains("does not allow respond"), "{}", out.body);
    let rosie = link(&mut kv, one, "rosie", "");
    let out = handle(
        &mut kv,
        &input("GET", &format!("/mess/{one}"), Some(&rosie), ""),
    );
    assert_eq!(out.status, 404, "{}", out.body);
    // The thread's stream names the link, and the change that takes the thread out of a
    // link's reach is its last.
    let out = handle(
        &mut kv,
        &input(
            "GET",
            &format!("/thread/{one}/events?token={token}"),
            None,
            "",
        ),
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(
        out.body.contains(&format!("link robo {one}")),
        "{}",
        out.body
    );
    let mut i = input(
        "POST",
        "/mess",
        Some(&token),
        &format!("MESS:\n  - status: {{re: {one}, code: in_progress}}\n"),
    );
    i.watchers = vec![
        format!("link robo {one}"),
        format!("link rosie {one}"),
        "link robo 2026-11-28-002".to_owned(),
    ];
    let out = handle(&mut kv, &i);
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(
        out.changes[0].to,
        vec![format!("link robo {one}"), format!("link rosie {one}")]
    );
    assert_eq!(out.changes[0].end, vec![format!("link rosie {one}")]);
}

#[test]
fn tampered_expired_foreign_and_unsigned_links_are_refused() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    assert_eq!(
        post(&mut kv, &alice, "MESS:\n  - request: {intent: x}\n").status,
        200
    );
    let one = "2026-11-28-001";
    let token = link_until(
        &mut kv,
        one,
        "robo",
        r#","ttl":"1m""#,
        "2026-11-28T09:31:00Z",
    );
    let read = |kv: &mut MemKv, token: &str, now: &str, issuer: &str| {
        let mut i = input("GET", &format!("/mess/{one}"), Some(token), "");
        i.now = now.to_owned();
        i.issuer = issuer.to_owned();
        handle(kv, &i).status
    };
    let here = "http://127.0.0.1:8787";
    assert_eq!(read(&mut kv, &token, NOW, here), 200);
    assert_eq!(
        read(&mut kv, &token, "2026-11-28T09:31:00Z", here),
        401,
        "expired"
    );
    assert_eq!(
        read(&mut kv, &token, NOW, "https://elsewhere.example"),
        401,
        "issuer"
    );
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let flipped = if parts[2].starts_with('A') { "B" } else { "A" };
    parts[2].replace_range(0..1, flipped);
    assert_eq!(read(&mut kv, &parts.join("."), NOW, here), 401, "signature");
    // `alg: none` with no signature.
    use base64::Engine;
    let none = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(
        read(&mut kv, &format!("{none}.{}.", parts[1]), NOW, here),
        401
    );
    // Without a secret, links are refused as misconfigured rather than signed weakly.
    let mut i = input(
        "POST",
        "/links",
        Some(OPERATOR),
        &format!(r#"{{"ref":"{one}","executor":"robo"}}"#),
    );
    i.link_secret = None;
    let out = handle(&mut kv, &i);
    assert_eq!(out.status, 500, "{}", out.body);
    assert!(out.body.contains("MESS_SECRET"), "{}", out.body);
    // An agent key makes no links.
    let mut i = input(
        "POST",
        "/links",
        Some(&alice),
        &format!(r#"{{"ref":"{one}","executor":"robo"}}"#),
    );
    i.link_secret = Some(SECRET.to_owned());
    assert_eq!(handle(&mut kv, &i).status, 401);
}

/// The token the native exchange's `jsonwebtoken` signs for [`GRANT`] with [`SECRET`]
/// (`src/links/tests.rs` signs the same grant and requires these bytes): the two
/// implementations of HS256 agree byte for byte, so each reads the other's links.
pub(crate) const NATIVE_TOKEN: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJyZWYiOiIyMDI2LTExLTI4LTAwMSIsInN1YiI6InJvYm8iLCJhY3QiOlsicmVhZCIsImNsYWltIiwidXBkYXRlIiwicmVzcG9uZCIsImRlY2xpbmUiXSwiZXhwIjo0MTAyNDQ0ODAwLCJpYXQiOjE3OTUwMDAwMDAsImNoIjoic2xhY2siLCJpc3MiOiJodHRwczovL21lc3MuZXhhbXBsZSIsImF1ZCI6ImVkZ2UtYWJhYmFiYWJhYmFiYWJhYiJ9.cbQLozuYWcfN4H8SPIfl-RmbNvkLXl7hnn9rH9QCKg0";

#[test]
fn a_link_signs_to_the_same_bytes_as_the_native_exchange_s() {
    let grant = mess_protocol::link::Grant {
        thread: "2026-11-28-001".to_owned(),
        executor: "robo".to_owned(),
        actions: mess_protocol::link::Action::ALL.to_vec(),
        exp: 4_102_444_800,
        iat: 1_795_000_000,
        via: Some("slack".to_owned()),
        iss: Some("https://mess.example".to_owned()),
        aud: "edge-abababababababab".to_owned(),
    };
    let token = crate::link::mint(SECRET.as_bytes(), &grant).unwrap();
    assert_eq!(token, NATIVE_TOKEN);
    let expected = crate::link::Expected {
        issuer: "https://mess.example",
        audience: "edge-abababababababab",
    };
    let read =
        crate::link::verify(SECRET.as_bytes(), &expected, NATIVE_TOKEN, 1_795_000_000).unwrap();
    assert_eq!(read, grant);
}

#[test]
fn the_caller_is_checked_before_the_body_is_read() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    assert_eq!(
        post(&mut kv, &alice, "MESS:\n  - request: {intent: x}\n").status,
        200
    );
    let token = link(&mut kv, "2026-11-28-001", "robo", "");
    let check = |kv: &mut MemKv, path: &str, key: Option<&str>| {
        let mut i = input("POST", path, key, "");
        i.authorize_only = true;
        let out = handle(kv, &i);
        assert!(out.r2_put.is_empty());
        out.status
    };
    assert_eq!(check(&mut kv, "/mess", Some(&alice)), 200);
    assert_eq!(check(&mut kv, "/mess", Some(&token)), 200);
    assert_eq!(check(&mut kv, "/mess", Some("mess_unknown")), 401);
    assert_eq!(check(&mut kv, "/mess", None), 401);
    assert_eq!(check(&mut kv, "/mess", Some("a.b.c")), 401);
    assert_eq!(check(&mut kv, "/keys", Some(&alice)), 401);
    assert_eq!(check(&mut kv, "/links", Some(OPERATOR)), 200);
    let q = format!("/thread/2026-11-28-001?token={token}");
    assert_eq!(check(&mut kv, &q, None), 200);
    let q = format!("/thread/2026-11-28-002?token={token}");
    assert_eq!(check(&mut kv, &q, None), 403);
    assert_eq!(check(&mut kv, "/thread/2026-11-28-001", None), 401);
    // No other route takes a body: refused before it is read, whoever asks.
    assert_eq!(check(&mut kv, "/threads", Some(&alice)), 404);
    assert_eq!(check(&mut kv, "/x", None), 404);
    // A path that is almost a stream's is answered, not a trap.
    let out = handle(&mut kv, &input("GET", "/thread/events", None, ""));
    assert_eq!(out.status, 401, "{}", out.body);
    let out = handle(&mut kv, &input("GET", "/thread//events?token=x", None, ""));
    assert!(out.status == 401 || out.status == 422, "{}", out.body);
}

#[test]
fn webhooks_sign_as_the_native_exchange_signs() {
    // The native test's vector (`src/notify/tests.rs`): HMAC-SHA256 of
    // "100.r.a.webhook.new.body" under "secret".
    assert_eq!(
        crate::notice::sign(b"secret", 100, "r.a.webhook.new", b"body"),
        "sha256=1acbb62aca0357e2d6e97c2d8f26ddba553f24ffb30d247f81baa08b1aa38411"
    );
}

#[test]
fn a_routed_request_owes_a_signed_webhook_to_an_address_a_key_may_register() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let robo = key(&mut kv, "executor", "robo", "2");
    let register = |kv: &mut MemKv, notify: &str, allow: &[&str], secret: Option<&str>| {
        let mut i = input(
            "POST",
            "/mess",
            Some(&robo),
            &format!(
                "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [mop]\n        notify: {notify}\n"
            ),
        );
        i.dispatch.webhook_allow = allow.iter().map(|s| (*s).to_owned()).collect();
        i.dispatch.webhook_secret = secret.map(str::to_owned);
        handle(kv, &i)
    };
    for (notify, why) in [
        (
            "{webhook: {url: 'http://127.0.0.1:9/h', secret: s}}",
            "not a public address",
        ),
        (
            "{webhook: {url: 'http://0x7f.1:9/h', secret: s}}",
            "not a public address",
        ),
        (
            "{webhook: {url: 'http://[::ffff:10.0.0.1]/h', secret: s}}",
            "not a public address",
        ),
        (
            "{webhook: {url: 'http://localhost:9/h', secret: s}}",
            "names this machine",
        ),
        (
            "{webhook: {url: 'ftp://example.org/h', secret: s}}",
            "http or https",
        ),
        ("{webhook: 'https://hooks.example.org/h'}", "no signing key"),
        ("{slack: '#ops'}", "it has no MESS_SLACK_TOKEN"),
        ("{email: 'robo@example.org'}", "the email channel"),
    ] {
        let out = register(&mut kv, notify, &[], None);
        assert_eq!(out.status, 422, "{notify}: {}", out.body);
        assert!(out.body.contains(why), "{notify}: {}", out.body);
    }
    // The operator's list lets one in; the Worker's key signs when the entry brings none.
    let out = register(
        &mut kv,
        "{webhook: 'http://127.0.0.1:9/h'}",
        &["127.0.0.1"],
        Some("whsec"),
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let out = post(
        &mut kv,
        &alice,
        "MESS:\n  - request: {intent: mop, requires: [mop]}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(
        out.notices,
        vec![crate::notice::Delivery {
            id: "2026-11-28-001.robo.webhook.new".into(),
            thread: "2026-11-28-001".into(),
            executor: "robo".into(),
            channel: "webhook".into(),
            event: "new".into(),
            issuer: "http://127.0.0.1:8787".into(),
        }]
    );
    let webhooks = crate::notice::Dispatch {
        webhook_secret: Some("whsec".into()),
        webhook_allow: vec!["127.0.0.1".into()],
        ..Default::default()
    };
    let home = crate::home::Home::new(&mut kv);
    let sent =
        crate::notice::prepare(&home, &out.notices[0], &webhooks, None, 1_795_000_000).unwrap();
    assert_eq!(sent.reading, None);
    assert_eq!(sent.url, "http://127.0.0.1:9/h");
    assert!(sent.body.contains("intent: mop"), "{}", sent.body);
    let header = |n: &str| {
        sent.headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        header("x-mess-signature"),
        crate::notice::sign(
            b"whsec",
            1_795_000_000,
            &out.notices[0].id,
            sent.body.as_bytes()
        )
    );
    assert_eq!(header("x-mess-event"), "new");
    // Once the list no longer holds it, nothing is sent there.
    let closed = crate::notice::Dispatch {
        webhook_allow: Vec::new(),
        ..webhooks.clone()
    };
    let refused = crate::notice::prepare(&home, &out.notices[0], &closed, None, 1_795_000_000);
    assert!(refused.is_err_and(|why| why.contains("not a public address")));
    // Once someone holds the thread, the notice is dropped rather than sent late.
    let claimed = post(
        &mut kv,
        &robo,
        "MESS:\n  - status: {re: 2026-11-28-001, code: claimed}\n",
    );
    assert_eq!(claimed.status, 200, "{}", claimed.body);
    let home = crate::home::Home::new(&mut kv);
    let late = crate::notice::prepare(&home, &out.notices[0], &webhooks, None, 1_795_000_000);
    assert!(late.is_err_and(|why| why.contains("no longer waits")));
}

#[test]
fn slack_telegram_sms_and_ntfy_notices_are_built_by_the_protocol_s_rule_with_a_working_link() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let teague = key(&mut kv, "executor", "teague", "2");
    let dispatch = crate::notice::Dispatch {
        slack_token: Some("xoxb-edge".into()),
        slack_url: Some("http://127.0.0.1:9/slack/api".into()),
        telegram_token: Some("123:tg-edge".into()),
        telegram_url: Some("http://127.0.0.1:9/tg".into()),
        twilio_sid: Some("AC0001".into()),
        twilio_token: Some("tw-secret".into()),
        twilio_from: Some("+15550000000".into()),
        twilio_url: Some("http://127.0.0.1:9/twilio".into()),
        ntfy_url: Some("http://127.0.0.1:9/ntfy".into()),
        ..Default::default()
    };
    let mut register = input(
        "POST",
        "/mess",
        Some(&teague),
        "MESS:\n  - config:\n      executor:\n        id: teague\n        capabilities: [take-photo]\n        notify: {slack: U04TEAGUE, telegram: '-100123', sms: '+15551234567', ntfy: teague-phone}\n",
    );
    register.dispatch = dispatch.clone();
    let out = handle(&mut kv, &register);
    assert_eq!(out.status, 200, "{}", out.body);
    let mut ask = input(
        "POST",
        "/mess",
        Some(&alice),
        "MESS:\n  - request: {intent: check the fridge, requires: [take-photo], priority: urgent}\n",
    );
    ask.dispatch = dispatch.clone();
    let out = handle(&mut kv, &ask);
    assert_eq!(out.status, 200, "{}", out.body);
    let ids: Vec<&str> = out.notices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "2026-11-28-001.teague.slack.new",
            "2026-11-28-001.teague.telegram.new",
            "2026-11-28-001.teague.sms.new",
            "2026-11-28-001.teague.ntfy.new",
        ]
    );
    let home = crate::home::Home::new(&mut kv);
    let at = chrono::DateTime::parse_from_rfc3339(NOW)
        .unwrap()
        .timestamp();
    let sent: Vec<crate::notice::Prepared> = out
        .notices
        .iter()
        .map(|d| crate::notice::prepare(&home, d, &dispatch, Some(SECRET), at).unwrap())
        .collect();
    let header = |p: &crate::notice::Prepared, n: &str| {
        p.headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let urls: Vec<&str> = sent.iter().map(|p| p.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "http://127.0.0.1:9/slack/api/chat.postMessage",
            "http://127.0.0.1:9/tg/bot123:tg-edge/sendMessage",
            "http://127.0.0.1:9/twilio/2010-04-01/Accounts/AC0001/Messages.json",
            "http://127.0.0.1:9/ntfy/teague-phone",
        ]
    );
    assert_eq!(header(&sent[0], "authorization"), "Bearer xoxb-edge");
    assert_eq!(header(&sent[1], "authorization"), "");
    // base64("AC0001:tw-secret")
    assert_eq!(
        header(&sent[2], "authorization"),
        "Basic QUMwMDAxOnR3LXNlY3JldA=="
    );
    assert_eq!(
        header(&sent[2], "content-type"),
        "application/x-www-form-urlencoded"
    );
    assert!(
        sent[2]
            .body
            .starts_with("To=%2B15551234567&From=%2B15550000000&Body=MESS+request"),
        "{}",
        sent[2].body
    );
    assert_eq!(header(&sent[3], "x-priority"), "5");
    assert_eq!(
        header(&sent[3], "x-title"),
        "MESS request: check the fridge"
    );
    let slack: serde_json::Value = serde_json::from_str(&sent[0].body).unwrap();
    assert_eq!(slack["channel"], "U04TEAGUE");
    assert_eq!(slack["text"], "MESS request: check the fridge");
    // The link in the notice opens the thread as teague, through the page's own route.
    let link = slack["blocks"][2]["elements"][0]["url"].as_str().unwrap();
    let token = link.split("token=").nth(1).unwrap();
    assert!(link.starts_with("http://127.0.0.1:8787/respond?ref=2026-11-28-001&token="));
    // Each channel's link is its own (it names the channel it came by).
    let prefix = "http://127.0.0.1:8787/respond?ref=2026-11-28-001&token=";
    assert!(header(&sent[3], "x-click").starts_with(prefix));
    assert_ne!(header(&sent[3], "x-click"), link);
    let read = handle(
        &mut kv,
        &input(
            "GET",
            &format!("/thread/2026-11-28-001?token={token}"),
            None,
            "",
        ),
    );
    assert_eq!(read.status, 200, "{}", read.body);
    assert!(read.body.contains("check the fridge"), "{}", read.body);
    // Answers are read by the protocol's rule, as the native exchange reads them.
    let answer = |p: &crate::notice::Prepared, status: u16, body: &str| {
        let input = serde_json::json!({"reading": p.reading, "status": status, "body": body});
        crate::notice::read_answer(input.to_string().as_bytes())
    };
    assert_eq!(
        answer(&sent[0], 200, r#"{"ok":true,"channel":"D1","ts":"1.2"}"#),
        r#"{"sent":"D1:1.2"}"#
    );
    assert_eq!(
        answer(&sent[0], 200, r#"{"ok":false,"error":"ratelimited"}"#),
        r#"{"retry":"slack chat.postMessage: ratelimited"}"#
    );
    assert_eq!(
        answer(
            &sent[1],
            200,
            r#"{"ok":false,"description":"chat not found"}"#
        ),
        r#"{"fail":"telegram sendMessage: chat not found"}"#
    );
    assert_eq!(answer(&sent[2], 503, ""), r#"{"retry":"sms: HTTP 503"}"#);
    assert_eq!(
        answer(&sent[3], 200, "{}"),
        r#"{"sent":"mess-2026-11-28-001"}"#
    );
    let webhook = serde_json::json!({"status": 404}).to_string();
    assert_eq!(
        crate::notice::read_answer(webhook.as_bytes()),
        r#"{"retry":"webhook: HTTP 404"}"#
    );
}

#[test]
fn a_channel_the_worker_lacks_settings_for_is_refused_at_registration_by_its_setting() {
    let mut kv = MemKv::default();
    let teague = key(&mut kv, "executor", "teague", "2");
    for (notify, why) in [
        ("{telegram: '@teague_bot'}", "it has no MESS_TELEGRAM_TOKEN"),
        ("{sms: '+15551234567'}", "it has no MESS_TWILIO_SID"),
        ("{sms: '555-1234'}", "not an E.164 number"),
        ("{ntfy: 'a/b'}", "not an ntfy topic"),
        ("{slack: 'Not A Channel'}", "not a Slack id"),
        ("{mail: teague}", "the mail channel"),
    ] {
        let out = post(
            &mut kv,
            &teague,
            &format!(
                "MESS:\n  - config:\n      executor:\n        id: teague\n        capabilities: [mop]\n        notify: {notify}\n"
            ),
        );
        assert_eq!(out.status, 422, "{notify}: {}", out.body);
        assert!(out.body.contains(why), "{notify}: {}", out.body);
    }
    // ntfy needs no token: the public server takes any topic.
    let out = post(
        &mut kv,
        &teague,
        "MESS:\n  - config:\n      executor:\n        id: teague\n        capabilities: [mop]\n        notify: {ntfy: teague-phone}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
}

#[test]
fn a_request_whose_deadline_passes_unclaimed_expires_at_the_first_request_after_it() {
    let mut kv = MemKv::default();
    let alice = key(&mut kv, "agent", "alice", "1");
    let robo = key(&mut kv, "executor", "robo", "2");
    let out = post(
        &mut kv,
        &robo,
        "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [mop]\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    let out = post(
        &mut kv,
        &alice,
        "MESS:\n  - request: {intent: mop, requires: [mop], needed_by: '2026-11-28T10:00:00Z'}\n  - request: {intent: dust, requires: [mop], needed_by: '2026-11-28T11:00:00Z'}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(out.next_deadline, Some(1_795_860_000));
    // Robo takes the second: its deadline no longer applies.
    let out = post(
        &mut kv,
        &robo,
        "MESS:\n  - status: {re: 2026-11-28-002, code: claimed}\n",
    );
    assert_eq!(out.status, 200, "{}", out.body);
    // Before the deadline nothing happens; after it, any request finds it expired.
    let mut early = input("GET", "/threads/2026-11-28-001", Some(&alice), "");
    early.now = "2026-11-28T09:59:59Z".into();
    let out = handle(&mut kv, &early);
    assert!(out.body.contains("\"status\":\"pending\""), "{}", out.body);
    assert!(out.r2_put.is_empty());
    let mut late = input(
        "POST",
        "/mess",
        Some(&robo),
        "MESS:\n  - status: {re: 2026-11-28-001, code: claimed}\n",
    );
    late.now = "2026-11-28T12:00:00Z".into();
    let saved = kv.clone();
    let out = handle(&mut kv, &late);
    // Robo may no longer see a thread that ended without it: as if there were none.
    assert_eq!(out.status, 404, "a claim after the deadline: {}", out.body);
    // A refused request writes nothing (the Durable Object rolls it back, as here); the
    // alarm's call passes the deadline for good.
    kv = saved;
    let mut alarm = input("POST", crate::http::DEADLINES, None, "");
    alarm.now = "2026-11-28T12:00:00Z".into();
    let out = handle(&mut kv, &alarm);
    assert_eq!(out.status, 200, "{}", out.body);
    let keys: Vec<&str> = out.r2_put.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["state=canceled/2026-11-28-001.messe-af.yaml"]);
    assert_eq!(
        out.r2_delete,
        ["state=received/2026-11-28-001.messe-af.yaml"]
    );
    let text = &out.r2_put[0].1;
    assert!(text.contains("code: expired"), "{text}");
    assert!(
        text.contains("needed_by passed before anyone claimed it"),
        "{text}"
    );
    assert_eq!(
        out.next_deadline, None,
        "the claimed one's deadline is dropped"
    );
    let home = crate::home::Home::new(&mut kv);
    let claimed = home
        .read(&mess_protocol::ids::ThreadRef::parse("2026-11-28-002").unwrap())
        .unwrap();
    assert!(!claimed.1.contains("expired"), "{}", claimed.1);
}
