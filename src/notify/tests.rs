//! Channel parsing and the forms of channel values, where key-made webhooks may lead (the
//! allow-list, the address rules, the guarded resolver), the URL builders (property tests:
//! no value a validator accepts, nor any string, adds a path segment or a query), notice text
//! and webhook signatures; sending is tested end to end against local servers in
//! `tests/it/dispatch.rs` and `tests/it/outbound.rs`.

use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;
use reqwest::dns::Resolve;

use crate::notify::guard::{self, Allow};
use crate::notify::{
    Channel, Notice, NoticeKind, Secret, Settings, check_email, check_ntfy_topic, check_phone,
    check_slack, check_telegram, endpoint, sign,
};
use crate::protocol::notice as service;

/// Python: hmac.new(b"secret", b"100.r.a.webhook.new.body", hashlib.sha256).hexdigest()
const EXPECTED: &str = "1acbb62aca0357e2d6e97c2d8f26ddba553f24ffb30d247f81baa08b1aa38411";
use crate::protocol::value::{Map, Value};

fn notice(kind: NoticeKind) -> Notice {
    Notice {
        delivery: "2026-01-31-001.teague-phone.slack.new".to_owned(),
        kind,
        thread: "2026-01-31-001".to_owned(),
        intent: "check the fridge".to_owned(),
        priority: "high".to_owned(),
        needed_by: Some("2026-01-31T18:00:00Z".to_owned()),
        requires: vec!["take-photo".to_owned()],
        link: Some("https://mess.example/respond?ref=2026-01-31-001&token=t".to_owned()),
        thread_yaml: "ref: 2026-01-31-001\n".to_owned(),
        previous: None,
        at: 1_769_882_400,
        asks: crate::protocol::notice::Asks::One,
        buttons: None,
    }
}

#[test]
fn discord_and_matrix_notices_carry_buttons_and_updates_replace_the_message() {
    use crate::protocol::buttons::{Buttons, Verb};
    use crate::protocol::notice::{Auth, Body, discord, matrix};
    let mut new = notice(NoticeKind::New);
    new.asks = crate::protocol::notice::Asks::Approval(1);
    new.buttons = Some(Buttons {
        code: "AbCdEfGh1234".to_owned(),
        verbs: vec![Verb::Approve, Verb::Deny],
        act_url: "https://mess.example/r/AbCdEfGh1234".to_owned(),
    });
    let out = discord("bot-token", "123456789012345678", &new);
    assert_eq!(
        (out.method, out.path.join("/").as_str()),
        ("POST", "channels/123456789012345678/messages")
    );
    assert!(
        out.headers
            .contains(&("authorization".to_owned(), "Bot bot-token".to_owned()))
    );
    let Body::Json(body) = &out.body else {
        panic!()
    };
    let row = &body["components"][0]["components"];
    assert_eq!(row[0]["custom_id"], "approve:AbCdEfGh1234");
    assert_eq!(
        (row[1]["label"].as_str(), row[1]["style"].as_i64()),
        (Some("Deny"), Some(4))
    );
    assert_eq!(
        (row[2]["label"].as_str(), row[2]["style"].as_i64()),
        (Some("Open"), Some(5))
    );
    assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
    let mut taken = notice(NoticeKind::Taken {
        by: "sam".to_owned(),
    });
    taken.previous = Some("123456789012345678:999".to_owned());
    let out = discord("bot-token", "123456789012345678", &taken);
    assert_eq!(
        (out.method, out.path.join("/").as_str()),
        ("PATCH", "channels/123456789012345678/messages/999")
    );
    let Body::Json(body) = &out.body else {
        panic!()
    };
    assert_eq!(body["components"], serde_json::json!([]));
    assert_eq!(
        out.read(200, r#"{"id":"1000","channel_id":"123456789012345678"}"#)
            .unwrap()
            .provider_ref
            .as_deref(),
        Some("123456789012345678:1000")
    );

    let out = matrix("mx", "!room:hs.test", &new);
    assert_eq!(out.method, "PUT");
    assert_eq!(
        out.path[4..],
        [
            "!room:hs.test",
            "send",
            "m.room.message",
            "2026-01-31-001.teague-phone.slack.new"
        ]
    );
    assert_eq!(out.auth, Auth::Bearer("mx".to_owned()));
    let Body::Json(body) = &out.body else {
        panic!()
    };
    assert_eq!(body["mess"]["actions"]["deny"], "AbCdEfGh1234");
    assert!(
        body["body"]
            .as_str()
            .unwrap()
            .contains("Reply to this message with approve or deny")
    );
    let sent = out.read(200, r#"{"event_id":"$e1"}"#).unwrap();
    assert_eq!(sent.provider_ref.as_deref(), Some("!room:hs.test $e1"));
    taken.previous = sent.provider_ref;
    let out = matrix("mx", "!room:hs.test", &taken);
    let Body::Json(body) = &out.body else {
        panic!()
    };
    assert_eq!(body["m.relates_to"]["rel_type"], "m.replace");
    assert_eq!(body["m.relates_to"]["event_id"], "$e1");
    assert!(
        body["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .starts_with("Taken by sam")
    );
    assert!(body.get("mess").is_none(), "an update carries no codes");

    for (name, good, bad) in [
        ("discord", "123456789012345678", "general"),
        ("matrix", "!abc:example.org", "#alias:example.org"),
    ] {
        assert!(Channel::parse(name, &Value::str(good)).is_ok(), "{name}");
        let e = Channel::parse(name, &Value::str(bad)).unwrap_err();
        assert_eq!(e.field, format!("notify.{name}"));
    }
}

#[test]
fn notify_entries_parse_into_channels_and_name_what_is_wrong() {
    let mut webhook = Map::new();
    webhook.insert("url", Value::str("http://127.0.0.1:9/robot"));
    webhook.insert("secret", Value::str("s3cret"));
    let mut notify = Map::new();
    notify.insert("slack", Value::str("U04XXXXXX"));
    notify.insert("webhook", Value::Map(webhook));
    notify.insert("pager", Value::str("x"));
    notify.insert("sms", Value::str(""));
    let (channels, problems) = Channel::all_of(&Value::Map(notify));
    assert_eq!(
        channels,
        vec![
            Channel::Slack("U04XXXXXX".to_owned()),
            Channel::Webhook {
                url: "http://127.0.0.1:9/robot".to_owned(),
                secret: Some(Secret("s3cret".to_owned())),
            },
        ]
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0]
            .to_string()
            .contains("notify.pager: unknown channel"),
        "{problems:?}"
    );
    assert!(problems[0].unknown && !problems[1].unknown);
    assert!(
        problems[1]
            .to_string()
            .contains("notify.sms: expected a non-empty string")
    );
    assert!(Channel::Slack(String::new()).updates_in_place());
    assert!(!Channel::Sms(String::new()).updates_in_place());
}

#[test]
fn notices_read_well_and_taken_ones_carry_no_link() {
    let new = notice(NoticeKind::New);
    assert_eq!(new.headline(), "MESS request: check the fridge");
    let text = new.plain_text();
    assert!(text.contains("2026-01-31-001 · priority high"), "{text}");
    assert!(text.contains("needed by 2026-01-31T18:00:00Z"), "{text}");
    assert!(text.contains("requires take-photo"), "{text}");
    assert!(text.ends_with("Respond: https://mess.example/respond?ref=2026-01-31-001&token=t"));
    let taken = notice(NoticeKind::Taken {
        by: "sam-phone".to_owned(),
    });
    assert_eq!(taken.headline(), "Taken by sam-phone: check the fridge");
    assert!(!taken.plain_text().contains("token="));
}

#[test]
fn signatures_bind_the_secret_the_time_the_delivery_and_the_body() {
    let id = "r.a.webhook.new";
    let s = sign(b"secret", 100, id, b"body");
    assert!(s.starts_with("sha256=") && s.len() == 7 + 64, "{s}");
    // HMAC-SHA256 of "100.r.a.webhook.new.body" under "secret", computed independently.
    assert_eq!(s, format!("sha256={EXPECTED}"));
    assert_ne!(
        s,
        sign(b"secret", 101, id, b"body"),
        "a replay with a new time fails"
    );
    assert_ne!(
        s,
        sign(b"secret", 100, "r.b.webhook.new", b"body"),
        "nor to another receiver"
    );
    assert_ne!(
        s,
        sign(b"secret", 100, "r.a.webhook.escalated", b"body"),
        "nor as another event"
    );
    assert_ne!(s, sign(b"secret", 100, id, b"bodY"));
    assert_ne!(s, sign(b"other", 100, id, b"body"));
    assert_eq!(format!("{:?}", Secret("x".to_owned())), "Secret(..)");
}

/// `notify.<name>: value` as a channel, or the problem.
fn parse(name: &str, value: &str) -> Result<Channel, String> {
    Channel::parse(name, &Value::str(value)).map_err(|e| e.to_string())
}

#[test]
fn channel_values_are_accepted_only_in_their_documented_forms() {
    for (name, value) in [
        ("ntfy", "teague-topic"),
        ("ntfy", "A_b-9"),
        ("ntfy", &"x".repeat(64)),
        ("telegram", "1001"),
        ("telegram", "-1001234567890"),
        ("telegram", "@my_channel"),
        ("sms", "+15551234567"),
        ("sms", "+4930123"),
        ("slack", "U04XXXXXX"),
        ("slack", "C0123ABCD"),
        ("slack", "#robots"),
        ("slack", "team-robots_2.0"),
        ("email", "teague@example.org"),
        ("email", "first.last+tag@sub.example.org"),
        ("webhook", "https://robot.example/mess?key=1"),
        ("webhook", "http://127.0.0.1:9/robot"),
    ] {
        assert!(
            parse(name, value).is_ok(),
            "{name}: {value:?}: {:?}",
            parse(name, value)
        );
    }
    for (name, value, says) in [
        ("ntfy", "a/../b", "not an ntfy topic"),
        ("ntfy", "topic?x=1", "not an ntfy topic"),
        ("ntfy", "topic#x", "not an ntfy topic"),
        ("ntfy", "top ic", "not an ntfy topic"),
        ("ntfy", &"x".repeat(65), "not an ntfy topic"),
        ("telegram", "12/../sendMessage", "not a Telegram chat"),
        ("telegram", "@abc", "not a Telegram chat"),
        ("telegram", "@1abcdef", "not a Telegram chat"),
        ("telegram", "--1", "not a Telegram chat"),
        ("sms", "15551234567", "not an E.164 number"),
        ("sms", "+1555", "not an E.164 number"),
        ("sms", "+1234567890123456", "not an E.164 number"),
        ("sms", "+0555123456", "not an E.164 number"),
        ("sms", "+1555\r\n123", "not an E.164 number"),
        ("slack", "C01/../../admin", "not a Slack id"),
        ("slack", "U0 X", "not a Slack id"),
        ("slack", "Robots", "not a Slack id"),
        ("slack", "...", "not a Slack id"),
        (
            "email",
            "a@example.org\r\nBcc: b@example.org",
            "line breaks are not allowed",
        ),
        ("email", "Alice <a@example.org>", "not an email address"),
        ("email", "not-an-address", "not an email address"),
        (
            "webhook",
            "ftp://example.com/x",
            "webhooks are http or https",
        ),
        (
            "webhook",
            "file:///etc/passwd",
            "webhooks are http or https",
        ),
        (
            "webhook",
            "https://example.com/\r\nX-Injected: 1",
            "control characters",
        ),
        ("webhook", "https://exa mple.com/", "spaces"),
        ("webhook", "robot.example/mess", "is not a URL"),
    ] {
        let got = parse(name, value);
        assert!(
            got.as_ref()
                .is_err_and(|e| e.starts_with(&format!("notify.{name}: ")) && e.contains(says)),
            "{name}: {value:?}: {got:?}"
        );
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn only_public_unicast_addresses_pass_without_the_allow_list() {
    for public in [
        "93.184.215.14",
        "8.8.8.8",
        "1.1.1.1",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.169.0.1",
        "2606:4700::1111",
        "2001:4860:4860::8888",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "::ffff:8.8.8.8",
    ] {
        assert!(guard::is_public(ip(public)), "{public}");
    }
    for inside in [
        "0.0.0.0",
        "0.1.2.3",
        "127.0.0.1",
        "127.255.0.9",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.255",
        "192.0.0.8",
        "192.0.2.1",
        "198.18.0.1",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::127.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:10.1.2.3",
        "::ffff:169.254.169.254",
        "64:ff9b::7f00:1",
        "64:ff9b::a00:1",
        "2002:7f00:1::1",
        "2002:c0a8:101::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "2001:db8::1",
        "2001::1",
        "100::1",
        "3fff::1",
    ] {
        assert!(!guard::is_public(ip(inside)), "{inside}");
    }
}

#[test]
fn the_allow_list_reads_addresses_cidrs_and_names_and_lets_only_those_in() {
    let allow = Allow::parse(&[
        "127.0.0.1",
        "10.1.0.0/16",
        "[::1]",
        "fd00::/8",
        "Robot.LAN.",
    ])
    .unwrap();
    for (addr, ok) in [
        ("127.0.0.1", true),
        ("::ffff:127.0.0.1", true),
        ("127.0.0.2", false),
        ("10.1.200.3", true),
        ("10.2.0.1", false),
        ("::1", true),
        ("fd00::7", true),
        ("fe80::1", false),
        ("8.8.8.8", true),
    ] {
        assert_eq!(allow.permits(ip(addr)), ok, "{addr}");
    }
    assert!(allow.check("http://robot.lan:8080/hook").is_ok());
    assert!(allow.check("http://127.0.0.1:9/hook").is_ok());
    assert!(allow.check("http://10.3.0.1/hook").is_err());
    for bad in ["10.0.0.0/33", "robot lan", "http://x", "", "a..b"] {
        let e = Allow::parse(&[bad]).unwrap_err();
        assert!(e.starts_with("dispatch.webhook.allow[0]: "), "{bad}: {e}");
    }

    let public = Allow::public_only();
    for refused in [
        "http://127.0.0.1/hook",
        "http://localhost/hook",
        "http://LOCALHOST./hook",
        "http://printer.localhost/hook",
        "http://ip6-localhost/hook",
        "http://[::ffff:7f00:1]/hook",
        "http://0x7f.1/hook",
        "http://2130706433/hook",
        "http://017700000001/hook",
        "http://[fe80::1%25eth0]/hook",
        "gopher://example.com/",
    ] {
        assert!(public.check(refused).is_err(), "{refused}");
    }
    // Names that are not local pass the door; what they resolve to is checked when sending.
    assert!(public.check("https://robot.example/mess").is_ok());
    assert!(public.check_address("http://localhost/hook").is_ok());
    assert!(public.check_address("http://127.0.0.1/hook").is_err());
}

#[tokio::test]
async fn the_guarded_resolver_drops_every_address_the_allow_list_refuses() {
    let resolve = |allow: Allow, name: &'static str| async move {
        let resolver = guard::Resolver {
            allow: Arc::new(allow),
        };
        resolver
            .resolve(name.parse().unwrap())
            .await
            .map(|addrs| addrs.map(|a| a.ip()).collect::<Vec<_>>())
            .map_err(|e| e.to_string())
    };
    let refused = resolve(Allow::public_only(), "localhost")
        .await
        .unwrap_err();
    assert!(
        refused.contains("localhost resolves only to addresses webhooks may not reach"),
        "{refused}"
    );
    let v4 = resolve(Allow::parse(&["127.0.0.0/8"]).unwrap(), "localhost")
        .await
        .unwrap();
    assert!(
        !v4.is_empty() && v4.iter().all(|a| a.is_loopback() && a.is_ipv4()),
        "{v4:?}"
    );
    let listed = resolve(Allow::parse(&["localhost"]).unwrap(), "localhost")
        .await
        .unwrap();
    assert!(listed.iter().any(IpAddr::is_loopback), "{listed:?}");
}

#[test]
fn a_channel_without_its_settings_says_what_it_lacks() {
    let mut s = Settings::defaults();
    assert_eq!(s.missing("slack"), Some("dispatch.slack.bot_token"));
    assert_eq!(s.missing("telegram"), Some("dispatch.telegram.bot_token"));
    assert!(
        s.missing("sms")
            .is_some_and(|m| m.starts_with("dispatch.twilio"))
    );
    assert!(
        s.missing("email")
            .is_some_and(|m| m.starts_with("dispatch.email"))
    );
    for ready in ["webhook", "ntfy", "mail"] {
        assert_eq!(s.missing(ready), None, "{ready}");
    }
    s.slack.bot_token = Some(Secret("xoxb".to_owned()));
    s.twilio.account_sid = Some("AC1".to_owned());
    s.twilio.auth_token = Some(Secret("t".to_owned()));
    assert_eq!(s.missing("slack"), None);
    assert!(s.missing("sms").is_some(), "from is still unset");
}

#[test]
fn endpoints_take_segments_whole_and_drop_any_query() {
    let url = endpoint("https://api.example/v1/?x=1#f", &["a/b?c#d", "e f"]).unwrap();
    assert_eq!(url.as_str(), "https://api.example/v1/a%2Fb%3Fc%23d/e%20f");
    for bad in ["", ".", "..", "%2e%2e", "a\nb"] {
        assert!(
            endpoint("https://api.example/v1", &[bad]).is_err(),
            "{bad:?}"
        );
    }
    assert!(endpoint("ftp://api.example/", &["x"]).is_err());
    assert_eq!(
        endpoint(
            "https://slack.com/api/",
            &service::slack("t", "C1", &notice(NoticeKind::New)).path
        )
        .unwrap()
        .as_str(),
        "https://slack.com/api/chat.postMessage"
    );
}

/// The URL an ntfy notice on `topic` goes to.
fn ntfy_url(base: &str, topic: &str) -> Result<reqwest::Url, String> {
    endpoint(
        base,
        &service::ntfy(None, topic, &notice(NoticeKind::New))?.path,
    )
}

/// The URL an SMS through Twilio account `sid` goes to.
fn sms_url(base: &str, sid: &str) -> Result<reqwest::Url, String> {
    let out = service::sms(
        sid,
        "token",
        "+15550000000",
        "+15551111111",
        &notice(NoticeKind::New),
    );
    endpoint(base, &out.path)
}

/// One client for the property tests (building one per case costs milliseconds).
fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    })
}

fn proptest_config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6d65_7373),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The path segments and the query of `url`.
fn shape(url: &reqwest::Url) -> (Vec<String>, Option<String>, Option<String>) {
    (
        url.path_segments()
            .map(|s| s.map(str::to_owned).collect())
            .unwrap_or_default(),
        url.query().map(str::to_owned),
        url.fragment().map(str::to_owned),
    )
}

/// Anything, including the characters that reshape URLs and headers.
fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[-a-zA-Z0-9_./?#%@:;&=+ \\r\\n\\t\\\\]{0,24}",
        "(\\.\\./|%2e|%2F|\\?|#|\\r\\n|@|-)+[a-z]{0,4}",
    ]
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn every_accepted_ntfy_topic_is_one_segment_and_nothing_else_is_accepted(
        topic in "[A-Za-z0-9_-]{1,64}",
        any_text in hostile(),
    ) {
        let url = ntfy_url("https://ntfy.example/base", &topic).unwrap();
        prop_assert_eq!(shape(&url), (vec!["base".to_owned(), topic.clone()], None, None));
        prop_assert_eq!(url.host_str(), Some("ntfy.example"));
        if check_ntfy_topic(&any_text).is_ok() {
            prop_assert!(any_text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            let url = ntfy_url("https://ntfy.example/base", &any_text).unwrap();
            prop_assert_eq!(shape(&url).0.len(), 2);
        } else {
            prop_assert!(ntfy_url("https://ntfy.example/base", &any_text).is_err());
        }
    }

    #[test]
    fn telegram_and_twilio_urls_keep_their_shape_whatever_the_token_or_account(
        token in hostile(),
        sid in hostile(),
    ) {
        if let Ok(url) = endpoint("https://tg.example/", &service::telegram(&token, "1", &notice(NoticeKind::New)).path) {
            let (segments, query, fragment) = shape(&url);
            prop_assert_eq!(segments.len(), 2, "{}", url);
            prop_assert_eq!(&segments[1], "sendMessage");
            prop_assert!(segments[0].starts_with("bot"));
            prop_assert_eq!((query, fragment), (None, None));
            prop_assert_eq!(url.host_str(), Some("tg.example"));
        }
        if let Ok(url) = sms_url("https://twilio.example", &sid) {
            let (segments, query, fragment) = shape(&url);
            prop_assert_eq!(segments.len(), 4, "{}", url);
            prop_assert_eq!(&segments[..2], &["2010-04-01".to_owned(), "Accounts".to_owned()]);
            prop_assert_eq!(&segments[3], "Messages.json");
            prop_assert_eq!((query, fragment), (None, None));
        }
        // The usual values go through as they are.
        let plain: String = sid.chars().filter(char::is_ascii_alphanumeric).collect();
        if !plain.is_empty() {
            let url = sms_url("https://twilio.example/", &plain).unwrap();
            prop_assert_eq!(url.path(), format!("/2010-04-01/Accounts/{plain}/Messages.json"));
        }
    }

    #[test]
    fn chat_ids_phone_numbers_and_slack_ids_accept_their_forms_and_only_safe_text(
        chat in "-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31}",
        number in "\\+[1-9][0-9]{6,14}",
        slack_id in "[A-Z0-9]{2,32}|#?[a-z0-9][a-z0-9._-]{0,79}",
        any_text in hostile(),
    ) {
        prop_assert!(check_telegram(&chat).is_ok(), "{}", chat);
        prop_assert!(check_phone(&number).is_ok(), "{}", number);
        prop_assert!(check_slack(&slack_id).is_ok(), "{}", slack_id);
        let safe = |s: &str, extra: &[u8]| s.bytes().all(|b| b.is_ascii_alphanumeric() || extra.contains(&b));
        if check_telegram(&any_text).is_ok() {
            prop_assert!(safe(&any_text, b"-@_"), "{:?}", any_text);
        }
        if check_phone(&any_text).is_ok() {
            prop_assert!(safe(&any_text, b"+"), "{:?}", any_text);
        }
        if check_slack(&any_text).is_ok() {
            prop_assert!(safe(&any_text, b"#._-"), "{:?}", any_text);
        }
        // The number goes in a form body: it stays one field, whatever it holds.
        let request = client()
            .post("https://twilio.example/x")
            .form(&[("To", any_text.as_str()), ("From", "+15550000"), ("Body", "hi")])
            .build()
            .unwrap();
        let body = std::str::from_utf8(request.body().and_then(|b| b.as_bytes()).unwrap()).unwrap().to_owned();
        let keys: Vec<&str> = body.split('&').map(|kv| kv.split('=').next().unwrap_or("")).collect();
        prop_assert_eq!(keys, vec!["To", "From", "Body"]);
    }

    #[test]
    fn accepted_emails_and_webhooks_carry_no_line_break_or_space(
        local in "[a-z0-9][a-z0-9.+_-]{0,20}",
        domain in "[a-z]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z]{2,6}){1,2}",
        any_text in hostile(),
    ) {
        let address = format!("{local}@{domain}");
        if !local.contains("..") && !local.ends_with('.') {
            prop_assert!(check_email(&address).is_ok(), "{}", address);
        }
        for accepted in [check_email(&any_text).is_ok(), guard::webhook_url(&any_text).is_ok()] {
            if accepted {
                prop_assert!(!any_text.chars().any(|c| c.is_control() || c.is_whitespace()), "{:?}", any_text);
            }
        }
        if let Ok(url) = guard::webhook_url(&any_text) {
            prop_assert!(matches!(url.scheme(), "http" | "https"));
        }
    }

    #[test]
    fn an_ipv4_address_and_its_ipv6_forms_are_judged_alike(
        a in any::<u8>(), b in any::<u8>(), c in any::<u8>(), d in any::<u8>(),
    ) {
        let v4 = std::net::Ipv4Addr::new(a, b, c, d);
        let public = guard::is_public(IpAddr::V4(v4));
        prop_assert_eq!(guard::is_public(IpAddr::V6(v4.to_ipv6_mapped())), public);
        let nat64: std::net::Ipv6Addr = format!("64:ff9b::{v4}").parse().unwrap();
        prop_assert_eq!(guard::is_public(IpAddr::V6(nat64)), public);
        let private = a == 10 || a == 127 || (a == 192 && b == 168) || (a == 172 && (16..32).contains(&b))
            || (a == 169 && b == 254) || (a == 100 && (64..128).contains(&b)) || a == 0 || a >= 224;
        if private {
            prop_assert!(!public, "{}", v4);
        }
    }
}

#[test]
fn a_notice_says_when_it_asks_for_approval_or_one_of_several_answers() {
    let mut approval = notice(NoticeKind::New);
    approval.asks = service::Asks::Approval(2);
    assert_eq!(
        approval.headline(),
        "Your approval is needed: check the fridge"
    );
    assert!(
        approval
            .details()
            .contains(&"2 approvals needed".to_owned())
    );
    let service::Body::Json(body) = service::slack("t", "C1", &approval).body else {
        panic!("slack posts JSON")
    };
    assert_eq!(
        body["blocks"][2]["elements"][0]["text"]["text"],
        "Approve or deny"
    );
    let service::Body::Json(body) = service::telegram("t", "42", &approval).body else {
        panic!("telegram posts JSON")
    };
    assert_eq!(
        body["reply_markup"]["inline_keyboard"][0][0]["text"],
        "Approve or deny"
    );
    let mut answers = notice(NoticeKind::New);
    answers.asks = service::Asks::Answers(3);
    assert!(
        answers
            .plain_text()
            .contains("3 people answer, each on their own")
    );
    assert_eq!(answers.headline(), "MESS request: check the fridge");
}
