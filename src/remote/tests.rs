//! The remote client's door: URLs with credentials are refused without quoting them, and
//! redaction hides userinfo in any text shaped like a URL.

use super::*;

#[test]
fn userinfo_is_hidden_wherever_a_url_is_shown() {
    for (url, shown) in [
        (
            "https://alice:s3cret@town.example",
            "https://***@town.example",
        ),
        (
            "http://tok@127.0.0.1:8420/x?y=z",
            "http://***@127.0.0.1:8420/x?y=z",
        ),
        ("https://a:b@c@host/p@q", "https://***@host/p@q"),
        ("https://town.example/a@b", "https://town.example/a@b"),
        ("user:pw@host", "***@host"),
        ("https://town.example", "https://town.example"),
    ] {
        assert_eq!(redact_url(url), shown, "{url}");
    }
}

#[test]
fn a_url_with_credentials_is_refused_without_quoting_them() {
    for url in [
        "https://alice:s3cret@town.example",
        "http://s3cret@127.0.0.1:8420",
        "http://:s3cret@127.0.0.1:8420",
    ] {
        let e = Remote::new(url, "key").unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("MESS_API_KEY"), "{e}");
    }
    let bad = Remote::new("ht!tp://alice:s3cret@x", "key")
        .unwrap_err()
        .to_string();
    assert!(!bad.contains("s3cret"), "{bad}");
    let fine = Remote::new("https://town.example/", "key").unwrap();
    assert!(!format!("{fine:?}").contains("key"), "{fine:?}");
}

#[test]
fn an_event_stream_is_cut_off_at_an_endless_event_and_a_flood() {
    use super::events::EventBound;
    let mut fine = EventBound::default();
    let event = b"event: thread\r\ndata: {\"ref\":\"2026-01-31-001\"}\r\n\r\n";
    for _ in 0..1000 {
        fine.admit(event).unwrap();
    }
    // One event that never ends, however it is cut into chunks.
    let mut endless = EventBound::default();
    let line = [b'x'; 1000];
    let mut cut = None;
    for n in 0..100 {
        if let Err(why) = endless.admit(&line) {
            cut = Some((n, why));
            break;
        }
        endless.admit(b"\n").unwrap();
    }
    let (n, why) = cut.expect("an endless event is cut off");
    assert!(n <= 17, "cut after {n} KiB");
    assert!(why.contains("16 KiB"), "{why}");
    // Keep-alives without end: small events, but the stream as a whole is bounded.
    let mut flood = EventBound::default();
    let chunk = b": keep-alive\n\n".repeat(4096);
    let mut read = 0usize;
    while flood.admit(&chunk).is_ok() {
        read += chunk.len();
        assert!(read <= 64 * 1024 * 1024, "never cut off");
    }
}
