//! Links as the reference design describes them (docs/spec-conformance.md), beyond the page: tokens
//! name their exchange (`iss`, `aud`) so another exchange refuses them even with the same secret,
//! and a page hosted elsewhere may call the API from the origins in `http.cors_origins`.

use crate::support::server::Server;
use crate::support::{CONFIG, Home};

const SECRET: &str = "one-secret-shared-by-two-homes-0123456789";

fn request(home: &Home) -> String {
    home.ok(&[
        "--as",
        "claude-agent",
        "request",
        "photo of the fridge",
        "--requires",
        "take-photo",
    ])
    .trim()
    .to_owned()
}

#[test]
fn a_link_works_only_on_the_exchange_that_issued_it_even_with_a_shared_secret() {
    let (a, b) = (Home::with_config(CONFIG), Home::with_config(CONFIG));
    let (ra, rb) = (request(&a), request(&b));
    assert_eq!(ra, rb, "both homes number their first thread alike");
    let link = a
        .command(&["link", &ra, "--executor", "teague-phone"])
        .env("MESS_SECRET", SECRET)
        .output()
        .unwrap();
    let link = String::from_utf8(link.stdout).unwrap();
    let token = link.trim().split("token=").nth(1).unwrap().to_owned();
    let path = format!("/thread/{ra}?token={token}");
    let server_a = Server::start_with(&a, &[("MESS_SECRET", SECRET)]);
    let server_b = Server::start_with(&b, &[("MESS_SECRET", SECRET)]);
    assert_eq!(server_a.send("GET", &path, &[], b"").0, 200);
    let (status, body) = server_b.send("GET", &path, &[], b"");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("the link is not valid"), "{body}");
}

#[test]
fn pages_on_configured_origins_may_call_the_api_and_others_get_no_cors_headers() {
    let home = Home::with_config(&format!(
        "{CONFIG}http:\n  cors_origins: ['https://page.example', 'http://127.0.0.1:9000/']\n"
    ));
    let r = request(&home);
    let server = Server::start(&home);
    let preflight = |origin: &str| {
        server.send_head_with(
            "OPTIONS",
            "/mess",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization,content-type",
                ),
            ],
        )
    };
    let (status, head) = preflight("https://page.example");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.contains("access-control-allow-origin: https://page.example"),
        "{head}"
    );
    assert!(head.contains("authorization"), "{head}");
    let (_, head) = preflight("http://127.0.0.1:9000");
    assert!(
        head.contains("access-control-allow-origin: http://127.0.0.1:9000"),
        "{head}"
    );
    let (_, head) = preflight("https://evil.example");
    assert!(!head.contains("access-control-allow-origin"), "{head}");
    // The real call carries the header too (the answer itself is the API's usual one).
    let (status, head) = server.send_head_with(
        "GET",
        &format!("/mess/{r}"),
        &[("Origin", "https://page.example")],
    );
    assert_eq!(status, 401, "{head}");
    assert!(
        head.contains("access-control-allow-origin: https://page.example"),
        "{head}"
    );

    // A value that is not an origin is named.
    let bad = Home::with_config(&format!("{CONFIG}http:\n  cors_origins: ['*']\n"));
    let err = bad.fails(&["status"], 1);
    assert!(
        err.contains("http.cors_origins: \"*\" is not an origin"),
        "{err}"
    );
}
