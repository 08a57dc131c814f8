//! Link tokens: a round trip, and every way a link must fail (expired, another thread, forged,
//! tampered, truncated, `alg: none`, another algorithm, a weak secret).

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use super::*;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef-test-secret";
const NOW: i64 = 1_800_000_000;
const AUD: &str = "mess-0123456789abcdef";
const ISS: &str = "https://mess.example";
const WHO: Expected<'static> = Expected {
    issuer: ISS,
    audience: AUD,
};

fn grant() -> Grant {
    Grant {
        thread: "2026-01-31-001".into(),
        executor: "teague-phone".into(),
        actions: vec![Action::Read, Action::Respond],
        exp: NOW + 3600,
        iat: NOW,
        via: None,
        iss: Some(ISS.into()),
        aud: AUD.into(),
    }
}

/// Unpadded base64url, for hand-made tokens.
fn b64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[test]
fn a_minted_link_verifies_for_its_thread_until_it_expires() {
    let token = mint(SECRET, &grant()).unwrap();
    let got = verify(SECRET, &WHO, &token, "2026-01-31-001", NOW).unwrap();
    assert_eq!(got, grant());
    assert!(got.allows(Action::Respond) && !got.allows(Action::Claim));
    assert_eq!(
        verify(SECRET, &WHO, &token, "2026-01-31-001", NOW + 3600),
        Err(LinkError::Expired)
    );
    assert_eq!(
        verify(SECRET, &WHO, &token, "2026-01-31-002", NOW),
        Err(LinkError::OtherThread)
    );
}

#[test]
fn forged_tampered_truncated_and_unsigned_links_are_refused() {
    let token = mint(SECRET, &grant()).unwrap();
    let check = |t: &str| verify(SECRET, &WHO, t, "2026-01-31-001", NOW);
    assert_eq!(
        verify(
            b"another-secret-another-secret-another",
            &WHO,
            &token,
            "2026-01-31-001",
            NOW
        ),
        Err(LinkError::Invalid),
        "another secret"
    );
    let parts: Vec<&str> = token.split('.').collect();
    let mut other = grant();
    other.executor = "mallory".into();
    let forged_payload = b64(&serde_json::to_vec(&other).unwrap());
    assert_eq!(
        check(&format!("{}.{forged_payload}.{}", parts[0], parts[2])),
        Err(LinkError::Invalid),
        "payload swapped"
    );
    assert_eq!(
        check(&token[..token.len() - 5]),
        Err(LinkError::Invalid),
        "truncated"
    );
    assert_eq!(check(""), Err(LinkError::Invalid));
    assert_eq!(check("a.b"), Err(LinkError::Invalid));
    let none_header = b64(br#"{"alg":"none","typ":"JWT"}"#);
    assert_eq!(
        check(&format!("{none_header}.{}.", parts[1])),
        Err(LinkError::Invalid),
        "alg none"
    );
    let hs512 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS512),
        &grant(),
        &EncodingKey::from_secret(SECRET),
    )
    .unwrap();
    assert_eq!(check(&hs512), Err(LinkError::Invalid), "another algorithm");
    assert_eq!(
        verify(
            SECRET,
            &Expected {
                issuer: ISS,
                audience: "mess-another-exchange",
            },
            &token,
            "2026-01-31-001",
            NOW
        ),
        Err(LinkError::Invalid),
        "another exchange, same secret"
    );
    let elsewhere = Expected {
        issuer: "https://other.example",
        audience: AUD,
    };
    assert_eq!(
        verify(SECRET, &elsewhere, &token, "2026-01-31-001", NOW),
        Err(LinkError::Invalid),
        "another issuer, same secret and audience"
    );
    let mut anonymous = grant();
    anonymous.iss = None;
    let unnamed = mint(SECRET, &anonymous).unwrap();
    assert_eq!(
        check(&unnamed),
        Err(LinkError::Invalid),
        "a link that names no issuer"
    );
    assert_eq!(mint(b"short", &grant()), Err(LinkError::WeakSecret));
    assert_eq!(
        verify(b"short", &WHO, &token, "2026-01-31-001", NOW),
        Err(LinkError::WeakSecret)
    );
}

#[test]
fn actions_have_stable_names() {
    for a in Action::ALL {
        assert_eq!(Action::parse(a.as_str()), Some(a));
    }
    assert_eq!(Action::parse("admin"), None);
}

/// The Worker build signs links with its own HS256 code (`edge/core/src/link.rs`); its tests
/// require this same token for this same grant, so each exchange reads the other's links.
#[test]
fn the_worker_build_signs_the_same_bytes() {
    let grant = Grant {
        thread: "2026-11-28-001".to_owned(),
        executor: "robo".to_owned(),
        actions: Action::ALL.to_vec(),
        exp: 4_102_444_800,
        iat: 1_795_000_000,
        via: Some("slack".to_owned()),
        iss: Some("https://mess.example".to_owned()),
        aud: "edge-abababababababab".to_owned(),
    };
    let secret = b"link-secret-of-these-tests-32-bytes-at-least";
    let token = mint(secret, &grant).unwrap();
    assert_eq!(
        token,
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJyZWYiOiIyMDI2LTExLTI4LTAwMSIsInN1YiI6InJvYm8iLCJhY3QiOlsicmVhZCIsImNsYWltIiwidXBkYXRlIiwicmVzcG9uZCIsImRlY2xpbmUiXSwiZXhwIjo0MTAyNDQ0ODAwLCJpYXQiOjE3OTUwMDAwMDAsImNoIjoic2xhY2siLCJpc3MiOiJodHRwczovL21lc3MuZXhhbXBsZSIsImF1ZCI6ImVkZ2UtYWJhYmFiYWJhYmFiYWJhYiJ9.cbQLozuYWcfN4H8SPIfl-RmbNvkLXl7hnn9rH9QCKg0"
    );
}
