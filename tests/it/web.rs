//! The human executor page in real headless Chromium: open a link, see the request (its HTML shown
//! as text), claim, ask a question, see the agent's reply arrive, complete with text and an
//! uploaded photo; a page load alone changes nothing; a bad link gets a clear page. Then the
//! reference design's features one by one: context media, places and references, remote media
//! loaded only on a tap; structured answers, notes, video, a place and a re-encoded photo; every
//! waiting reason; `confirm_before` first; preferences and the system's theme; `exchange=`. Last,
//! each status as a person reads it at a phone's and a desktop's width (relative times, sentences,
//! one next step in view), whose screenshots the docs embed (`MESS_BLESS=1` rewrites them).
//! Screenshots of the main screens land in `<target tmp>/screenshots/`.

use serde_json::Value;

use crate::support::Home;
use crate::support::browser::{Browser, decode_base64};
use crate::support::recorder::{CorsProxy, HttpsRecorder, Recorder};
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
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
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

    // Claim with an estimate picked as buttons: "Other…", then 20 in minutes.
    browser.click("#estimate-custom");
    browser.type_into("#estimate-minutes", "20");
    browser.click("#claim");
    assert_eq!(wait_status(&browser, "claimed"), "claimed");
    let claimed = thread_file(&home, &r);
    assert!(
        claimed.contains("status: claimed") && claimed.contains("estimate: PT20M"),
        "{claimed}"
    );
    // A reload (or a phone discarding the tab) keeps working without the token in the URL.
    browser.run("location.reload(); return null");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(wait_status(&browser, "claimed"), "claimed");

    // Ask a question; the agent's reply arrives on its own (server-sent events).
    browser.run("document.getElementById('question-form').open = true; return null");
    browser.type_into("#question", "Which shelf?");
    browser.type_into("#options", "top, bottom");
    browser.click("#ask");
    assert_eq!(wait_status(&browser, "needs_input"), "needs_input");
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
    assert_eq!(wait_status(&browser, "completed"), "completed");
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
    // The link is made while the thread is open to teague-phone; sam-phone takes it after.
    let link = home.ok(&["link", &taken, "--executor", "teague-phone"]);
    let taken_token = link.trim().rsplit("token=").next().unwrap().to_owned();
    home.ok(&["claim", &taken, "--as", "sam-phone"]);
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

/// Submits a request as the agent; returns its ref.
fn submit(server: &Server, agent: &str, yaml: &str) -> String {
    let (status, body) = server.post_yaml(agent, yaml);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned()
}

/// A presigned link's token for `teague-phone` on `r`.
fn token_for(home: &Home, r: &str) -> String {
    let link = home.ok(&["link", r, "--executor", "teague-phone"]);
    link.trim().rsplit("token=").next().unwrap().to_owned()
}

/// Every payload of `kind` in the thread file's messages, as JSON.
fn payloads(home: &Home, r: &str, kind: &str) -> Vec<Value> {
    let text = thread_file(home, r);
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: Value = serde_json::to_value(
            <serde_yaml::Value as serde::Deserialize>::deserialize(doc).unwrap(),
        )
        .unwrap();
        for p in v["MESS"].as_array().into_iter().flatten() {
            if !p[kind].is_null() {
                out.push(p[kind].clone());
            }
        }
    }
    out
}

/// Waits up to 10 s for the page's status to be `want` (the protocol's word, kept in the
/// badge's `data-code`; the badge itself says it in words); returns the last seen.
pub(crate) fn wait_status(browser: &Browser, want: &str) -> String {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let code = browser
            .run("var s = document.getElementById('status'); return s ? s.dataset.code || '' : ''");
        let code = code.as_str().unwrap_or_default().to_owned();
        if code == want || std::time::Instant::now() > until {
            return code;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits up to 10 s for `script` (returning a boolean) to hold in the page.
pub(crate) fn wait_until(browser: &Browser, script: &str) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if browser.run(script) == Value::Bool(true) {
            return true;
        }
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Sets a select or date input by script (as a tap on a picker would) and tells the page.
fn choose(browser: &Browser, css: &str, value: &str) {
    let script = format!(
        "var e = document.querySelector({css:?}); e.value = {value:?}; e.dispatchEvent(new Event('change')); return e.value"
    );
    assert_eq!(browser.run(&script), Value::from(value), "{css}");
}

struct Setup {
    home: Home,
    agent: String,
    server: Server,
    browser: Browser,
}

fn setup() -> Setup {
    assert!(
        Browser::available(),
        "chromium and chromium-driver are needed"
    );
    let home = Home::with_config(CONFIG);
    let agent = home
        .ok(&["token", "agent", "claude-agent"])
        .trim()
        .to_owned();
    let server = Server::start(&home);
    Setup {
        home,
        agent,
        server,
        browser: Browser::start(),
    }
}

impl Setup {
    /// Submits `yaml` and opens the page of the new thread; returns its ref.
    fn open(&self, yaml: &str) -> String {
        let r = submit(&self.server, &self.agent, yaml);
        let token = token_for(&self.home, &r);
        self.browser.open(&format!(
            "http://127.0.0.1:{}/respond?ref={r}&token={token}",
            self.server.port
        ));
        self.browser.find("#intent");
        r
    }
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn context_shows_video_places_and_references_and_remote_media_waits_for_a_tap() {
    let s = setup();
    let https = HttpsRecorder::start(PNG, "image/png");
    let plain = Recorder::start();
    s.open(&format!(
        "MESS:
  - request:
      intent: look at these
      requires: [take-photo]
      context:
        - video: {{uri: 'data:video/mp4;base64,AAAAIGZ0eXBpc29t', name: the shelf}}
        - image: {{uri: '{https}/remote.png', name: the label}}
        - image: '{plain}/plain.png'
        - file: {{uri: '{https}/manual.pdf', name: manual}}
        - location: {{name: Kitchen, address: 52 Paradise Dr, lat: 37.9, lng: -122.5}}
        - ref: dinner-check
      constraints:
        location: {{lat: 37.95, lng: -122.7, radius_km: 2}}
",
        https = https.url,
        plain = plain.url
    ));
    let b = &s.browser;
    assert_eq!(
        b.run("var v = document.querySelector('#context video'); return !!v && v.src.indexOf('data:video/mp4') === 0"),
        Value::Bool(true),
        "a video carried as data plays in the page"
    );
    assert!(b.text("#context").contains("video: the shelf"));
    // Nothing remote is fetched by opening the page, nor by reading it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(https.paths(), Vec::<String>::new());
    assert_eq!(
        b.run("return document.querySelectorAll('#context img').length"),
        Value::from(0)
    );
    assert!(
        b.text("#context")
            .contains("/plain.png (not loaded: only https addresses are)")
    );
    assert_eq!(
        b.run(&format!(
            "var a = document.querySelector('#context a[href=\"{}/manual.pdf\"]'); return !!a && a.rel === 'noopener noreferrer'",
            https.url
        )),
        Value::Bool(true),
        "a remote file is a link the executor may open"
    );
    let place = b.text("#context .location");
    assert!(
        place.contains("Kitchen · 52 Paradise Dr · 37.9, -122.5"),
        "{place}"
    );
    assert_eq!(
        b.run("return document.querySelector('#context .location a.coordinates').href"),
        Value::from("https://www.openstreetmap.org/?mlat=37.9&mlon=-122.5#map=17/37.9/-122.5")
    );
    assert!(
        b.text("#constraints")
            .contains("where: within 2 km · 37.95, -122.7")
    );
    assert_eq!(b.text("#context .ref"), "refers to request dinner-check");
    b.screenshot("5-context");
    // A tap loads the image, from the https server only.
    b.click("#context .load-remote");
    assert!(wait_until(
        b,
        "var i = document.querySelector('#context img.thumb'); return !!i && i.complete && i.naturalWidth === 1"
    ));
    assert_eq!(https.paths(), vec!["/remote.png".to_owned()]);
    assert!(plain.hits().is_empty(), "{:?}", plain.hits());
}

/// A noisy 64x64 JPEG at full quality, made by the browser's own encoder.
fn jpeg(b: &Browser) -> Vec<u8> {
    let uri = b.run(
        "var c = document.createElement('canvas'); c.width = 64; c.height = 64;
         var g = c.getContext('2d'); var seed = 7;
         for (var y = 0; y < 64; y++) for (var x = 0; x < 64; x++) {
           seed = (seed * 1103515245 + 12345) % 2147483648;
           g.fillStyle = 'rgb(' + (seed % 256) + ',' + ((seed >> 8) % 256) + ',' + ((seed >> 16) % 256) + ')';
           g.fillRect(x, y, 1, 1);
         }
         return c.toDataURL('image/jpeg', 1.0);",
    );
    let uri = uri.as_str().unwrap().to_owned();
    decode_base64(uri.split_once(',').unwrap().1)
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn an_executor_completes_with_notes_structured_data_video_a_place_and_a_smaller_photo() {
    let s = setup();
    let r = s.open(
        "MESS:
  - request:
      intent: count the cans
      requires: [take-photo]
      response_hint:
        - text: what you saw
        - structured: {count: integer, brand: string, dented: boolean, shelf: [top, bottom], weight: number}
        - video
        - location
",
    );
    let b = &s.browser;
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    assert!(b.text("#complete").contains("Answer: what you saw"));
    b.type_into("#answer-text", "Three cans.");
    b.type_into("[data-field=count]", "3");
    b.type_into("[data-field=brand]", "Acme");
    b.click("[data-field=dented]");
    choose(b, "[data-field=shelf]", "bottom");
    b.type_into("[data-field=weight]", "0.4");
    // A wrong type is named and nothing is sent.
    b.type_into("[data-field=count]", ".5");
    b.click("#complete-button");
    assert!(
        b.wait_text("#result", "count must be a whole number")
            .contains("count")
    );
    assert!(payloads(&s.home, &r, "response").is_empty());
    b.run("document.querySelector('[data-field=count]').value = ''; return null");
    b.type_into("[data-field=count]", "3");

    let clip = s.home.path().join("clip.webm");
    std::fs::write(&clip, b"\x1a\x45\xdf\xa3 not really a video").unwrap();
    b.type_into("#video", &clip.to_string_lossy());
    b.type_into("#loc-name", "Pantry");
    b.type_into("#loc-address", "52 Paradise Dr");
    b.type_into("#notes", "moved the mat to get underneath");
    let original = jpeg(b);
    let photo = s.home.path().join("cans.jpg");
    std::fs::write(&photo, &original).unwrap();
    choose(b, "#pref-quality", "0.4");
    b.type_into("#photos", &photo.to_string_lossy());
    b.click("#complete-button");
    assert_eq!(wait_status(b, "completed"), "completed");
    b.screenshot("6-completed-structured");

    let response = payloads(&s.home, &r, "response").remove(0);
    assert_eq!(response["notes"], "moved the mat to get underneath");
    let content = response["content"].as_array().unwrap();
    let find = |k: &str| {
        content
            .iter()
            .find(|c| !c[k].is_null())
            .map(|c| c[k].clone())
    };
    assert_eq!(content[0], "Three cans.");
    assert_eq!(
        find("structured").unwrap(),
        serde_json::json!({"count": 3, "brand": "Acme", "dented": true, "shelf": "bottom", "weight": 0.4})
    );
    let video = find("video").unwrap();
    assert_eq!(video["mime"], "video/webm");
    assert!(
        video["uri"]
            .as_str()
            .unwrap()
            .starts_with("data:video/webm;base64,")
    );
    assert_eq!(video["name"], "clip.webm");
    assert_eq!(
        find("location").unwrap(),
        serde_json::json!({"name": "Pantry", "address": "52 Paradise Dr"})
    );
    let image = find("image").unwrap();
    let sent = image["uri"].as_str().unwrap();
    assert!(sent.starts_with("data:image/jpeg;base64,"), "{sent:.40}");
    let bytes = decode_base64(sent.split_once(',').unwrap().1);
    assert!(
        bytes.len() * 2 < original.len(),
        "re-encoded at 40%: {} bytes from {}",
        bytes.len(),
        original.len()
    );
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn the_waiting_form_sends_each_reason_with_its_fields() {
    let s = setup();
    let r = s
        .open("MESS:\n  - request:\n      intent: dice the onions\n      requires: [take-photo]\n");
    let b = &s.browser;
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    // The claim's own change redraws the page once it arrives: open the form after that.
    assert!(wait_until(
        b,
        "return document.querySelectorAll('#history .message').length >= 3"
    ));
    let open = "document.getElementById('wait-form').open = true; return null";
    b.run(open);
    // A reason without its field is refused in the page, naming what is missing.
    choose(b, "#wait-type", "condition");
    b.click("#wait");
    assert!(
        b.wait_text("#result", "Say the condition first.")
            .contains("condition")
    );
    let steps: [(&str, &[(&str, &str)]); 5] = [
        ("dependency", &[("#wait-ref", "deliver-onions, get-knife")]),
        (
            "condition",
            &[("#wait-condition", "daylight"), ("#wait-eta", "7h")],
        ),
        (
            "resource",
            &[
                ("#wait-resource", "PLA filament"),
                ("#wait-resource-note", "ordered"),
            ],
        ),
        (
            "access",
            &[
                ("#wait-location", "the garage"),
                ("#wait-access-note", "door locked"),
            ],
        ),
        ("schedule", &[]),
    ];
    for (n, (kind, fields)) in steps.iter().enumerate() {
        b.run(open);
        choose(b, "#wait-type", kind);
        for (css, text) in *fields {
            b.type_into(css, text);
        }
        if *kind == "schedule" {
            choose(b, "#wait-available", "2030-01-02T09:30");
        }
        b.click("#wait");
        assert!(
            wait_until(
                b,
                &format!(
                    "return document.querySelectorAll('#history .message').length >= {}",
                    n + 4
                )
            ),
            "{kind}: {}",
            b.text("main")
        );
        assert_eq!(wait_status(b, "waiting"), "waiting");
        // "Sent." follows the page's own redraw after the send; the change's event, arriving
        // before or after it, redraws nothing more, so the next form opened stays open.
        assert!(b.wait_text("#result", "Sent.").contains("Sent."));
    }
    // The top card says what for, and "Resume" picks the work up again.
    let said = b.text("#waiting-for");
    assert!(said.starts_with("Waiting for a set time ("), "{said}");
    b.click("#resume");
    assert_eq!(wait_status(b, "in_progress"), "in_progress");
    let waits: Vec<Value> = payloads(&s.home, &r, "status")
        .into_iter()
        .filter(|p| p["code"] == "waiting")
        .map(|p| p["waiting_for"].clone())
        .collect();
    assert_eq!(waits.len(), 5, "{waits:?}");
    assert_eq!(
        waits[0],
        serde_json::json!({"type": "dependency", "ref": ["deliver-onions", "get-knife"]})
    );
    assert_eq!(
        waits[1],
        serde_json::json!({"type": "condition", "condition": "daylight", "eta": "PT7H"})
    );
    assert_eq!(
        waits[2],
        serde_json::json!({"type": "resource", "resource": "PLA filament", "note": "ordered"})
    );
    assert_eq!(
        waits[3],
        serde_json::json!({"type": "access", "location": "the garage", "note": "door locked"})
    );
    assert_eq!(waits[4]["type"], "schedule");
    let at = waits[4]["available_at"].as_str().unwrap();
    assert!(at.starts_with("2030-01-0") && at.len() >= 20, "{at}");
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn confirm_before_puts_asking_for_confirmation_first() {
    let s = setup();
    let r = s.open(
        "MESS:\n  - request:\n      intent: turn off the main water valve\n      requires: [take-photo]\n      confirm_before: true\n",
    );
    let b = &s.browser;
    assert!(
        b.text("#confirm-note")
            .contains("needs the requester's confirmation")
    );
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    // The ask comes before everything else, visible without opening anything.
    assert_eq!(
        b.run("var f = document.getElementById('confirm-first'), c = document.getElementById('complete'), p = document.getElementById('progress-form');
               return !!f && !!(f.compareDocumentPosition(c) & 4) && !!(f.compareDocumentPosition(p) & 4)
                 && document.getElementById('ask-confirm').offsetParent !== null
                 && f.contains(document.getElementById('ask-confirm'))"),
        Value::Bool(true),
        "{}",
        b.text("main")
    );
    b.type_into("#confirm-action", "close the valve in the garage");
    b.type_into("#confirm-consequences", "no water in the house");
    b.click("#ask-confirm");
    assert_eq!(wait_status(b, "needs_confirmation"), "needs_confirmation");
    assert!(
        b.text("#confirm-first")
            .contains("wait for the requester's answer")
    );
    let asked = payloads(&s.home, &r, "status")
        .into_iter()
        .find(|p| p["code"] == "needs_confirmation")
        .unwrap();
    assert_eq!(asked["action"], "close the valve in the garage");
    assert_eq!(asked["reversible"], false);
    let (status, body) = s.server.post_yaml(
        &s.agent,
        &format!("MESS:\n  - reply:\n      re: {r}\n      confirm: true\n"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        wait_until(
            b,
            "return document.getElementById('confirm-first') === null"
        ),
        "the yes arrives on its own: {}",
        b.text("main")
    );
    let history = b.text("#history");
    assert!(history.contains("Confirmed"), "{history}");
    assert!(!history.contains("confirm: true"), "{history}");
    b.click("#confirmed");
    b.click("#complete-button");
    assert_eq!(wait_status(b, "completed"), "completed");
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn preferences_are_kept_and_the_theme_follows_the_system() {
    let s = setup();
    let r = s.open(
        "MESS:\n  - request:\n      intent: record the noise\n      requires: [take-photo]\n",
    );
    let b = &s.browser;
    let background = "return getComputedStyle(document.body).backgroundColor";
    assert_eq!(b.run(background), Value::from("rgb(255, 255, 255)"));
    // Headless Chromium told that the system is dark, as a phone at night would be.
    b.cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
    );
    assert_eq!(b.run(background), Value::from("rgb(17, 24, 39)"));
    b.screenshot("7-dark");
    choose(b, "#pref-theme", "light");
    assert_eq!(b.run(background), Value::from("rgb(255, 255, 255)"));
    choose(b, "#pref-camera", "front");
    let wanted = ["mp4", "ogg"].into_iter().find(|f| {
        b.run(&format!(
            "return MediaRecorder.isTypeSupported('audio/{f}')"
        )) == Value::Bool(true)
    });
    if let Some(f) = wanted {
        choose(b, "#pref-audio", f);
    }
    // Kept across a reload (and so across links).
    b.run("location.reload(); return null");
    std::thread::sleep(std::time::Duration::from_millis(300));
    b.find("#intent");
    assert_eq!(b.run(background), Value::from("rgb(255, 255, 255)"));
    assert_eq!(
        b.run("return JSON.parse(localStorage.getItem('mess-prefs')).defaultCamera"),
        Value::from("front")
    );
    choose(b, "#pref-theme", "auto");
    assert_eq!(b.run(background), Value::from("rgb(17, 24, 39)"));
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    assert_eq!(
        b.run("return document.getElementById('camera').getAttribute('capture') + ' ' + document.getElementById('video').getAttribute('capture')"),
        Value::from("user user")
    );
    let Some(format) = wanted else {
        // Neither alternative records here: the choice says so and cannot be picked.
        assert_eq!(
            b.run("return [].every.call(document.querySelectorAll('#pref-audio option'), function (o) { return o.value === 'webm' || o.disabled; })"),
            Value::Bool(true)
        );
        return;
    };
    b.click("#record");
    std::thread::sleep(std::time::Duration::from_millis(700));
    b.click("#record");
    assert_eq!(b.wait_text("#record", "Record again"), "Record again");
    b.click("#complete-button");
    assert_eq!(wait_status(b, "completed"), "completed");
    let response = payloads(&s.home, &r, "response").remove(0);
    let audio = response["content"][0]["audio"].clone();
    assert_eq!(audio["mime"], format!("audio/{format}"), "{audio:.200}");
    assert!(
        audio["uri"]
            .as_str()
            .unwrap()
            .starts_with(&format!("data:audio/{format};base64,"))
    );
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn an_exchange_parameter_sends_everything_to_that_exchange() {
    let s = setup();
    let proxy = CorsProxy::start(s.server.port);
    let r = submit(
        &s.server,
        &s.agent,
        "MESS:\n  - request:\n      intent: check the door\n      requires: [take-photo]\n",
    );
    let token = token_for(&s.home, &r);
    let page = format!(
        "http://127.0.0.1:{}/respond?request={r}&token={token}&exchange={}/",
        s.server.port, proxy.url
    );
    // The page's policy lets it talk to that exchange, and to no other.
    let (status, head) = raw_head(
        &s.server,
        &format!("/respond?request={r}&exchange={}/", proxy.url),
    );
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("connect-src 'self' {};", proxy.url)),
        "{head}"
    );
    let b = &s.browser;
    b.open(&page);
    assert_eq!(b.wait_text("#intent", "check"), "check the door");
    assert_eq!(
        b.run("return location.search"),
        Value::from(format!(
            "?ref={r}&exchange={}",
            urlencode(&format!("{}/", proxy.url))
        ))
    );
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    assert!(thread_file(&s.home, &r).contains("status: claimed"));
    let hits = proxy.hits();
    let bearer = format!("Bearer {token}");
    assert!(
        hits.iter().any(|h| h.method == "GET"
            && h.path == format!("/mess/{r}")
            && h.authorization == bearer),
        "{hits:?}"
    );
    assert!(
        hits.iter()
            .any(|h| h.method == "POST" && h.path == "/mess" && h.authorization == bearer),
        "{hits:?}"
    );
    // Anything but http(s) is refused before a request is made.
    for bad in ["javascript:alert(1)", "ftp://127.0.0.1/"] {
        b.open(&format!(
            "http://127.0.0.1:{}/respond?ref={r}&token={token}&exchange={}",
            s.server.port,
            urlencode(bad)
        ));
        assert!(
            b.wait_text("main", "not an http or https address")
                .contains("The link names an exchange that is not an http or https address."),
            "{bad}: {}",
            b.text("main")
        );
    }
    // A stored token goes only to the exchange it came with.
    b.open(&format!(
        "http://127.0.0.1:{}/respond?ref={r}&exchange={}",
        s.server.port,
        urlencode("http://127.0.0.1:9")
    ));
    assert!(
        b.wait_text("main", "incomplete")
            .contains("it needs a ref and a token")
    );
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// The status and the response head of `GET path` (no key: the page needs none).
fn raw_head(server: &Server, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let head = raw.split("\r\n\r\n").next().unwrap_or_default().to_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head)
}

/// A small drawn photo (a fridge shelf with a carton) as a PNG data URI, by the browser.
fn shelf_photo(b: &Browser) -> String {
    let uri = b.run(
        "var c = document.createElement('canvas'); c.width = 240; c.height = 180;
         var g = c.getContext('2d');
         g.fillStyle = '#dfe7ee'; g.fillRect(0, 0, 240, 180);
         g.fillStyle = '#9aa9b5'; g.fillRect(0, 60, 240, 6); g.fillRect(0, 130, 240, 6);
         g.fillStyle = '#ffffff'; g.fillRect(40, 10, 40, 50);
         g.fillStyle = '#2563eb'; g.fillRect(40, 10, 40, 12);
         g.fillStyle = '#f59e0b'; g.beginPath(); g.arc(150, 110, 18, 0, 7); g.fill();
         g.fillStyle = '#16a34a'; g.fillRect(180, 90, 30, 40);
         return c.toDataURL('image/png');",
    );
    uri.as_str().unwrap().to_owned()
}

/// Checks one screen at a phone's width (390x844) and a desktop's (1280x900): nothing wider
/// than the screen, `primary` (the next step) visible without scrolling on the phone, no
/// raw JSON in the page; saves `phone-<name>` (and `desktop-<name>` when `desktop`).
fn screen(b: &Browser, name: &str, primary: &str, desktop: bool) -> usize {
    let mut bytes = 0;
    for (w, h, mobile) in [(390, 844, true), (1280, 900, false)] {
        b.viewport(w, h, mobile);
        // Without the passing "Sent." toast, as a person sees the screen a moment later.
        b.run("window.scrollTo(0, 0); document.getElementById('result').textContent = ''; return null");
        std::thread::sleep(std::time::Duration::from_millis(150));
        assert_eq!(
            b.run("return document.documentElement.scrollWidth <= window.innerWidth"),
            Value::Bool(true),
            "{name} at {w}px overflows sideways"
        );
        assert_eq!(
            b.run(&format!(
                "var e = document.querySelector({primary:?}); if (!e) return false;
                 var r = e.getBoundingClientRect();
                 return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight"
            )),
            Value::Bool(true),
            "{name} at {w}px: {primary} is not visible without scrolling"
        );
        let text = b.text("main");
        assert!(
            !text.contains("{\"") && !text.contains("\":"),
            "{name}: raw JSON shown: {text}"
        );
        if mobile {
            bytes += b.capture(&format!("phone-{name}"));
        } else if desktop {
            bytes += b.capture(&format!("desktop-{name}"));
        }
    }
    bytes
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn each_status_reads_as_a_message_with_one_next_step_at_phone_and_desktop_widths() {
    let s = setup();
    let b = &s.browser;
    let photo = shelf_photo(b);
    let due = b.run("return new Date(Date.now() + 15 * 60000).toISOString()");
    let r = s.open(&format!(
        "MESS:
  - request:
      intent: Is there milk in the fridge?
      requires: [take-photo]
      needed_by: '{due}'
      context:
        - The fridge is in the kitchen, left of the window. This is how it looked this morning.
        - image: {{uri: '{photo}', name: this morning}}
      constraints:
        budget: {{max: 0, currency: EUR}}
      response_hint: [{{text: how much is left}}, image]
",
        due = due.as_str().unwrap()
    ));
    let mut total = 0;

    // Pending: when it came and when it is needed, relative; "Take this" first.
    assert!(
        b.wait_text("#from", "just now")
            .contains("From claude-agent · just now")
    );
    let due_text = b.text("#needed-by");
    assert!(
        due_text == "Needed by in 15 min" || due_text == "Needed by in 14 min",
        "{due_text}"
    );
    assert_eq!(b.text("#claim"), "Take this");
    assert_eq!(b.text("#status"), "New", "the status in words");
    assert!(b.text("#constraints").contains("max: 0"));
    // The full local time on a tap, and as the title.
    b.click("#needed-by time");
    assert_eq!(
        b.run("var t = document.querySelector('#needed-by time'); return t.textContent === t.title && /\\d{4}/.test(t.title)"),
        Value::Bool(true),
        "{}",
        b.text("#needed-by")
    );
    b.click("#needed-by time");
    total += screen(b, "1-pending", "#claim", true);
    // The photo is a thumbnail that opens full size.
    b.viewport(390, 844, true);
    assert_eq!(
        b.run("var i = document.querySelector('#context img.thumb'); return !!i && i.getBoundingClientRect().width < 200 && i.naturalWidth === 240"),
        Value::Bool(true)
    );
    b.click("#context img.thumb");
    assert_eq!(
        b.run("var i = document.querySelector('#lightbox img'); return !!i && i.getBoundingClientRect().width >= 240"),
        Value::Bool(true)
    );
    total += b.capture("phone-2-photo");
    b.click("#lightbox");
    assert!(wait_until(
        b,
        "return document.getElementById('lightbox') === null"
    ));

    // The estimate from buttons, sent as ISO 8601.
    b.click("#estimate-15m");
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    let claimed = payloads(&s.home, &r, "status");
    assert_eq!(claimed[0]["estimate"], "PT15M", "{claimed:?}");
    let next = b.wait_text("#next", "expecting");
    assert!(
        next.contains("You took this just now, expecting 15 min"),
        "{next}"
    );
    total += screen(b, "3-claimed", "#start", false);

    // In progress: "Done" leads to the result.
    b.click("#start");
    assert_eq!(wait_status(b, "in_progress"), "in_progress");
    assert!(b.text("#next").contains("Working on it since just now"));
    total += screen(b, "4-working", "#to-done", true);

    // Waiting for the agent: what for, said at the top; its reply as sentences.
    b.run("document.getElementById('question-form').open = true; return null");
    b.type_into("#question", "Which shelf?");
    b.type_into("#options", "top, bottom");
    b.click("#ask");
    assert_eq!(wait_status(b, "needs_input"), "needs_input");
    assert_eq!(b.text("#status"), "Waiting for an answer");
    let waiting = b.text("#waiting-for");
    assert!(
        waiting.contains("Waiting for the requester to answer “Which shelf?”"),
        "{waiting}"
    );
    total += screen(b, "5-asked", "#waiting-for", false);
    let (status, body) = s.server.post_yaml(
        &s.agent,
        &format!(
            "MESS:\n  - reply:\n      re: {r}\n      message: Thanks!\n      answers: {{answer: the top shelf, also: [eggs, butter]}}\n"
        ),
    );
    assert_eq!(status, 200, "{body}");
    let history = b.wait_text("#history", "the top shelf");
    assert!(history.contains("answer: the top shelf"), "{history}");
    assert!(history.contains("also:\neggs\nbutter"), "{history}");
    assert!(!history.contains("{\"answer\""), "{history}");
    assert_eq!(
        b.run("return document.querySelectorAll('#history ul.list li').length"),
        Value::from(2)
    );

    // Done: what happened, with the photo sent as a thumbnail.
    let file = s.home.path().join("shelf.png");
    std::fs::write(&file, decode_base64(photo.split_once(',').unwrap().1)).unwrap();
    b.type_into("#answer-text", "Half a carton, on the top shelf.");
    b.type_into("#photos", &file.to_string_lossy());
    b.click("#complete-button");
    assert_eq!(wait_status(b, "completed"), "completed");
    assert!(b.wait_text("#final", "Done").starts_with("Done · just now"));
    assert!(b.text("#sent").contains("Half a carton, on the top shelf."));
    assert_eq!(
        b.run("return document.querySelectorAll('#sent img.thumb').length"),
        Value::from(1)
    );
    total += screen(b, "6-done", "#final", true);
    // Times stay true: twenty minutes later, back on the tab, "just now" has aged.
    b.run(
        "var real = Date.now; Date.now = function () { return real() + 20 * 60000; };
           document.dispatchEvent(new Event('visibilitychange')); return null",
    );
    let aged = b.text("#from");
    assert!(aged.ends_with("20 min ago"), "{aged}");
    // The docs carry these: they stay small.
    assert!(total < 600_000, "screenshots take {total} bytes");
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn the_executor_sees_the_review_and_a_redo_opens_the_work_again() {
    let s = setup();
    let r = s.open(
        "MESS:\n  - request:\n      intent: photograph the shelf\n      requires: [take-photo]\n",
    );
    let b = &s.browser;
    b.click("#claim");
    assert_eq!(wait_status(b, "claimed"), "claimed");
    s.home
        .ok(&["complete", &r, "--as", "teague-phone", "--text", "done"]);
    assert_eq!(wait_status(b, "completed"), "completed");
    let (status, body) = s.server.post_yaml(
        &s.agent,
        &format!("MESS:\n  - review:\n      re: {r}\n      rating: 2\n      feedback: the top shelf is cut off\n      request_redo: true\n"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        wait_until(
            b,
            "return document.getElementById('history').textContent.indexOf('Rated the work 2 of 5') >= 0"
        ),
        "{}",
        b.text("main")
    );
    let history = b.text("#history");
    assert!(history.contains("the top shelf is cut off"), "{history}");
    assert!(
        history.contains("Asked for it to be done again"),
        "{history}"
    );
    // The work is the executor's again.
    assert_eq!(wait_status(b, "claimed"), "claimed");
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn a_reference_the_executor_may_see_opens_its_summary_and_a_held_request_says_until_when() {
    let s = setup();
    // The phone did the dinner check; a later request refers to it by its client id.
    let dinner = submit(
        &s.server,
        &s.agent,
        "MESS:\n  - request: {id: dinner-check, intent: what is for dinner?, requires: [take-photo]}\n",
    );
    s.home.ok(&["claim", &dinner, "--as", "teague-phone"]);
    s.home.ok(&[
        "complete",
        &dinner,
        "--as",
        "teague-phone",
        "--text",
        "pasta with pesto",
    ]);
    // A request no phone may see (it needs what no phone has).
    let hidden = s
        .home
        .ok(&["request", "vacuum the hall", "--requires", "vacuum-floor"]);
    s.open(&format!(
        "MESS:\n  - request:\n      intent: buy what dinner needs\n      requires: [take-photo]\n      context:\n        - ref: dinner-check\n        - ref: {}\n",
        hidden.trim()
    ));
    let b = &s.browser;
    let refs = b.text("#context");
    assert!(refs.contains("refers to request dinner-check"), "{refs}");
    assert_eq!(
        b.run("return document.querySelectorAll('#context .show-ref').length"),
        Value::from(1),
        "only the thread the phone may see can be opened"
    );
    b.click("#context .show-ref");
    assert!(wait_until(
        b,
        "var s = document.querySelector('#context .ref-summary'); return !!s && s.textContent.indexOf('pasta with pesto') >= 0"
    ));
    assert!(
        b.text("#context .ref-summary")
            .contains("what is for dinner?")
    );
    // A request held for its not_before: nothing to press until then.
    s.open(
        "MESS:\n  - request:\n      intent: water the balcony plants\n      requires: [take-photo]\n      constraints: {timing: {not_before: '2099-01-01T09:00:00Z'}}\n",
    );
    assert!(
        b.text("#next").contains("Held until"),
        "{}",
        b.text("#next")
    );
    assert_eq!(
        b.run("return !!document.getElementById('claim')"),
        Value::Bool(false)
    );
}
