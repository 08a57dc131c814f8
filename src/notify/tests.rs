//! Channel parsing, notice text and webhook signatures; sending is tested end to end against
//! local servers in `tests/it/dispatch.rs`.

use crate::notify::{Channel, Notice, NoticeKind, Secret, sign};

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
        problems[0].contains("notify.pager: unknown channel"),
        "{problems:?}"
    );
    assert!(problems[1].contains("notify.sms: expected a non-empty string"));
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
