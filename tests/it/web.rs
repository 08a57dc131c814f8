//! The human executor page in real headless Chromium: open a link, see the request (its HTML
//! shown as text), claim, ask a question, see the agent's reply arrive, complete with text and
//! an uploaded photo; a page load alone changes nothing; a bad link gets a clear page.
//! Screenshots of the main screens land in `<target tmp>/screenshots/`.

use serde_json::Value;

use crate::support::Home;
use crate::support::browser::Browser;
use crate::support::server::Server;

const CONFIG: &str = "agent_id: claude-agent
executors:
  teague-phone:
    capabilities: [take-photo]
  sam-phone:
    capabilities: [take-photo]
";

/// A 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn thread_file(home: &Home, r: &str) -> String {
    for state in ["received", "executing", "finished", "canceled"] {
        let p = home.path().join(format!("state={state}/{r}.messe-af.yaml"));
        if let Ok(t) = std::fs::read_to_string(p) {
            return t;
        }
    }
    panic!("no thread file for {r}");
}

#[test]
fn an_executor_works_a_request_from_the_link_in_a_real_browser() {
    assert!(
        Browser::available(),
        "chromium and chromium-driver are needed (.ci/test installs them)"
    );
    let home = Home::with_config(CONFIG);
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let server = Server::start(&home);
    let intent = "check <b>the</b> shelf <script>window.pwned = 1</script>";
    let (status, body) = server.post_yaml(
        &agent,
        &format!(
            "MESS:\n  - request:\n      intent: \"{intent}\"\n      requires: [take-photo]\n      context:\n        - \"<img src=x onerror=window.pwned=2>\"\n        - url: https://example.org/fridge\n        - location: {{name: Kitchen, lat: 52.5, lng: 13.4}}\n      response_hint: [image, text]\n"
        ),
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let r = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    let link = home.ok(&["link", &r, "--executor", "teague-phone"]);
    let token = link.trim().rsplit("token=").next().unwrap().to_owned();
    let page = format!(
        "http://127.0.0.1:{}/respond?ref={r}&token={token}",
        server.port
    );

    // Opening the page shows the request and changes nothing (a mail scanner may open it).
    // The server's own routing write comes first.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !thread_file(&home, &r).contains("action: dispatched") {
        assert!(std::time::Instant::now() < until, "never routed");
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let before = thread_file(&home, &r);
    let browser = Browser::start();
    browser.open(&page);
    assert_eq!(
        browser.wait_text("#intent", "check"),
        intent,
        "HTML is shown as text"
    );
    assert!(
        browser
            .text("#context")
            .contains("<img src=x onerror=window.pwned=2>")
    );
    assert!(browser.text("#context").contains("Kitchen"));
    assert_eq!(
        browser.run("return window.pwned === undefined"),
        Value::Bool(true)
    );
    assert_eq!(
        browser.run("return location.search.indexOf('token') < 0"),
        Value::Bool(true),
        "the token leaves the address bar"
    );
    browser.screenshot("1-request");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(thread_file(&home, &r), before, "a page load writes nothing");

    // Claim with an estimate.
    browser.type_into("#estimate", "20m");
    browser.click("#claim");
    assert_eq!(browser.wait_text("#status", "claimed"), "claimed");
    let claimed = thread_file(&home, &r);
    assert!(
        claimed.contains("status: claimed") && claimed.contains("estimate: PT20M"),
        "{claimed}"
    );
    // A reload (or a phone discarding the tab) keeps working without the token in the URL.
    browser.run("location.reload(); return null");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(browser.wait_text("#status", "claimed"), "claimed");

    // Ask a question; the agent's reply arrives on its own (server-sent events).
    browser.run("document.getElementById('question-form').open = true; return null");
    browser.type_into("#question", "Which shelf?");
    browser.type_into("#options", "top, bottom");
    browser.click("#ask");
    assert_eq!(browser.wait_text("#status", "needs_input"), "needs_input");
    let (status, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - reply:\n      re: {r}\n      answers: {{answer: the top shelf}}\n"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        browser
            .wait_text("#history", "the top shelf")
            .contains("the top shelf"),
        "the reply shows without reloading"
    );
    browser.screenshot("2-reply-arrived");

    // Complete with text and an uploaded photo.
    let photo = home.path().join("shelf.png");
    std::fs::write(&photo, PNG).unwrap();
    browser.type_into("#answer-text", "Milk, eggs and a lemon.");
    browser.type_into("#photos", &photo.to_string_lossy());
    browser.click("#complete-button");
    assert_eq!(browser.wait_text("#status", "completed"), "completed");
    let done = thread_file(&home, &r);
    assert!(done.contains("status: completed"), "{done}");
    assert!(done.contains("Milk, eggs and a lemon."), "{done}");
    assert!(done.contains("data:image/png;base64,iVBORw0KGgo"), "{done}");
    browser.screenshot("3-completed");

    // A forged or foreign link gets a clear page, and nothing happens.
    browser.open(&format!(
        "http://127.0.0.1:{}/respond?ref={r}&token=forged",
        server.port
    ));
    assert!(
        browser
            .wait_text("main", "expired or is not valid")
            .contains("The link has expired or is not valid"),
        "{}",
        browser.text("main")
    );
    browser.screenshot("4-bad-link");
    // A thread someone else took is no longer open to the link: the page says so, names
    // nobody, and offers nothing.
    let (_, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: taken elsewhere\n      requires: [take-photo]\n",
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    let taken = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    home.ok(&["claim", &taken, "--as", "sam-phone"]);
    let link = home.ok(&["link", &taken, "--executor", "teague-phone"]);
    let taken_token = link.trim().rsplit("token=").next().unwrap().to_owned();
    browser.open(&format!(
        "http://127.0.0.1:{}/respond?ref={taken}&token={taken_token}",
        server.port
    ));
    let said = browser.wait_text("#taken", "no longer open to you");
    assert!(said.contains("someone else has taken it"), "{said}");
    assert!(!browser.text("main").contains("sam-phone"));
    assert_eq!(
        browser.run("return document.querySelectorAll('button').length"),
        Value::from(0)
    );
    // A link to one thread opens no other.
    let (_, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: another\n      requires: [take-photo]\n",
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    let other = v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
    browser.open(&format!(
        "http://127.0.0.1:{}/respond?ref={other}&token={token}",
        server.port
    ));
    assert!(
        browser
            .wait_text("main", "another request")
            .contains("This link is for another request."),
        "{}",
        browser.text("main")
    );
}
