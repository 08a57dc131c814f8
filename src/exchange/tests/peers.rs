//! What a forwarded request tells the peer exchange: the work and when it is wanted, nothing of
//! the requestor's endpoints, refs, shells or extensions.

use super::*;
use crate::exchange::peers;

#[test]
fn a_forwarded_request_carries_only_the_fields_a_peer_needs() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 20, None)
        .unwrap();
    let before = f.request(
        "claude-agent",
        "intent: take out the bins\nrequires: [take-photo]",
    );
    let r = f.request(
        "claude-agent",
        &format!(
            "intent: buy onions
id: onions-1
requires: [take-photo]
context: [two red ones]
priority: urgent
needed_by: 2026-02-01T12:00:00Z
confirm_before: true
response_hint: [image]
callback: https://agent.example.net/hooks/mess
depends_on: [{before}]
x-loyalty-card: 1234-5678
compensation: {{shells: 5, escrow: {{release_on: reviewed}}, note: two will do}}"
        ),
    );
    let file = f.ex.store().read(&ThreadRef::parse(&r).unwrap()).unwrap();
    let message = peers::request_for_peer(&file, Vec::new(), "mess-0123456789ab").unwrap();
    let Payload::Request(sent) = &message.payloads[0] else {
        panic!("{message:?}")
    };
    let Value::Map(body) = sent.to_value() else {
        panic!()
    };
    let mut keys: Vec<&str> = body.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "compensation",
            "confirm_before",
            "context",
            "delegated_from",
            "id",
            "intent",
            "needed_by",
            "priority",
            "requires",
            "response_hint",
        ]
    );
    let text = crate::protocol::emit::to_yaml(&Value::Map(body.clone()));
    for absent in [
        "agent.example.net",
        "onions-1",
        "1234-5678",
        "shells",
        "escrow",
        &before,
    ] {
        assert!(!text.contains(absent), "{absent} reached the peer:\n{text}");
    }
    assert!(text.contains("note: two will do"), "{text}");
    assert!(
        text.contains(&format!("id: via-mess01234567-{r}")),
        "{text}"
    );
}
