//! The operator dashboard: signing in with the link `mess dashboard` prints (once, never with a
//! key in the address), who else is kept out, the JSON it reads, and the page itself in
//! Chromium at phone and desktop sizes (threads, a thread's timeline and routing, the queue's
//! retry and cancel, executors, shells, throughput, and live updates).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::browser::Browser;
use crate::support::server::Server;
use crate::support::{CONFIG, Home};

/// The login link `mess dashboard` prints for `server`.
fn login_link(home: &Home, server: &Server) -> String {
    let base = format!("http://127.0.0.1:{}", server.port);
    let link = home
        .ok(&["dashboard", "--base-url", &base])
        .trim()
        .to_owned();
    assert!(
        link.starts_with(&format!("{base}/dashboard/login?token=")),
        "{link}"
    );
    link
}

/// The path and query of `link`.
fn path_of(link: &str) -> String {
    let rest = link.split_once("://").unwrap().1;
    format!("/{}", rest.split_once('/').unwrap().1)
}

/// Follows a login link over HTTP: the status and the session cookie it set, if any.
fn sign_in(server: &Server, link: &str) -> (u16, Option<String>) {
    let (status, head) = server.send_head("GET", &path_of(link));
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .map(|c| c.split(';').next().unwrap().to_owned());
    (status, cookie)
}

fn api(server: &Server, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let (status, body) = server.send("GET", path, headers, b"");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn a_login_link_works_once_and_only_operators_read_the_dashboard() {
    let home = Home::with_config(CONFIG);
    home.ok(&["demo", "seed", "--threads", "40"]);
    let agent = home.token("agent", "claude-agent");
    let operator = home.ok(&["token", "operator", "ops"]).trim().to_owned();
    let server = Server::start(&home);
    let link = login_link(&home, &server);

    // The link sets an HttpOnly, SameSite=Strict session and sends the browser to `/`.
    let (status, head) = server.send_head("GET", &path_of(&link));
    assert_eq!(status, 303, "{head}");
    assert!(
        head.contains("location: /\r\n") || head.contains("location: /\n"),
        "{head}"
    );
    let set = head
        .lines()
        .find(|l| l.starts_with("set-cookie: "))
        .unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set["set-cookie: ".len()..]
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    // A second use of the same link is refused.
    let (again, _) = sign_in(&server, &link);
    assert_eq!(again, 401);
    let (_, body) = server.send("GET", &path_of(&link), &[], b"");
    assert!(body.contains("works once"), "{body}");

    // The session reads every view; the counts are the threads the demo wrote.
    let with_cookie = [("cookie", cookie.as_str())];
    let (status, overview) = api(&server, "/dashboard/api/overview", &with_cookie);
    assert_eq!(status, 200, "{overview}");
    let total: u64 = overview["states"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 40, "{overview}");
    assert!(
        overview["version"].as_str().unwrap().contains("commit"),
        "{overview}"
    );
    let (_, threads) = api(
        &server,
        "/dashboard/api/threads?state=finished&limit=5",
        &with_cookie,
    );
    let rows = threads["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r["state"] == "finished"), "{threads}");
    assert_eq!(threads["truncated"], true);
    // Times are RFC 3339, as browsers read them.
    let updated = rows[0]["updated"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(updated).is_ok(),
        "{updated}"
    );
    let r = rows[0]["ref"].as_str().unwrap().to_owned();
    let (status, one) = api(
        &server,
        &format!("/dashboard/api/thread?ref={r}"),
        &with_cookie,
    );
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["history"][0]["action"], "created", "{one}");
    // A search that is SQL text finds nothing and breaks nothing.
    let (status, none) = api(
        &server,
        "/dashboard/api/threads?q=%27%29%20OR%201%3D1%20--",
        &with_cookie,
    );
    assert_eq!(
        (status, none["rows"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{none}"
    );
    let (status, _) = api(
        &server,
        "/dashboard/api/thread?ref=2026-01-01-999",
        &with_cookie,
    );
    assert_eq!(status, 404);
    let (status, bad) = api(&server, "/dashboard/api/threads?state=lost", &with_cookie);
    assert_eq!(status, 422, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("received"),
        "{bad}"
    );

    // An operator key reads it too; an agent's key, no credentials, a forged session and a
    // presigned link's token do not.
    let bearer = format!("Bearer {operator}");
    assert_eq!(
        api(
            &server,
            "/dashboard/api/executors",
            &[("authorization", &bearer)]
        )
        .0,
        200
    );
    let agent_bearer = format!("Bearer {agent}");
    assert_eq!(
        api(
            &server,
            "/dashboard/api/executors",
            &[("authorization", &agent_bearer)]
        )
        .0,
        401
    );
    assert_eq!(api(&server, "/dashboard/api/executors", &[]).0, 401);
    let forged = format!("{}x", cookie);
    assert_eq!(
        api(&server, "/dashboard/api/executors", &[("cookie", &forged)]).0,
        401
    );
    let taker = rows[0]["executor"].as_str().unwrap().to_owned();
    let executor_link = home.ok(&["link", &r, "--executor", &taker]);
    let link_token = executor_link.trim().rsplit("token=").next().unwrap();
    let as_login = format!("/dashboard/login?token={link_token}");
    assert_eq!(server.send_head("GET", &as_login).0, 401);
    let as_session = format!("mess_dashboard={link_token}");
    assert_eq!(
        api(
            &server,
            "/dashboard/api/executors",
            &[("cookie", &as_session)]
        )
        .0,
        401
    );

    // A session from another exchange's home does not open this one.
    let other = Home::with_config(CONFIG);
    let other_link = other.ok(&["dashboard"]).trim().to_owned();
    let other_token = other_link.rsplit("token=").next().unwrap();
    assert_eq!(
        server
            .send_head("GET", &format!("/dashboard/login?token={other_token}"))
            .0,
        401
    );

    // A change made with the cookie needs the page's header (a form elsewhere cannot send it).
    let (status, body) = server.send(
        "POST",
        "/dashboard/api/jobs/retry",
        &[("cookie", &cookie), ("content-type", "application/json")],
        b"{\"id\":\"2026-01-01-001.x.webhook.new\"}",
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = server.send(
        "POST",
        "/dashboard/api/jobs/retry",
        &[
            ("cookie", &cookie),
            ("content-type", "application/json"),
            ("x-mess-dashboard", "1"),
        ],
        b"{\"id\":\"2026-01-01-001.x.webhook.new\"}",
    );
    assert_eq!(status, 404, "{body}");
}

/// A config whose robot's webhook points at a closed port, so its notices fail and are retried.
const FAILING: &str = "agent_id: claude-agent
executors:
  teague-phone:
    capabilities: [take-photo, check-visual]
  roomba-kitchen:
    capabilities: [vacuum-floor]
    notify:
      webhook: http://127.0.0.1:9/hook
dispatch:
  webhook:
    allow: [127.0.0.1]
";

/// Waits up to 15 s for `script` to return true in the page.
fn wait_until(b: &Browser, script: &str) {
    let until = Instant::now() + Duration::from_secs(15);
    while b.run(script) != Value::Bool(true) {
        if Instant::now() > until {
            let page = b.run("return document.body.innerText");
            panic!(
                "never true: {script}\nthe page says: {}",
                page.as_str().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Checks the page fits `w` pixels and captures it as `name` (into the docs with MESS_BLESS=1).
fn shot(b: &Browser, name: &str, w: u32) {
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        b.run("return document.documentElement.scrollWidth <= window.innerWidth"),
        Value::Bool(true),
        "{name} at {w}px overflows sideways"
    );
    b.capture(name);
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn the_dashboard_shows_threads_queue_executors_and_throughput_live_at_phone_and_desktop_sizes() {
    assert!(
        Browser::available(),
        "chromium and chromium-driver are needed (.ci/test installs them)"
    );
    let home = Home::with_config(FAILING);
    home.ok(&["demo", "seed", "--threads", "120", "--days", "10"]);
    let agent = home.token("agent", "claude-agent");
    let server = Server::start(&home);
    // A request for the robot: its webhook notice fails and waits for its next try.
    let (status, answer) = server.post_yaml(
        &agent,
        "MESS:\n  - v: \"1.0\"\n  - request:\n      intent: vacuum the hallway\n      requires: [vacuum-floor]\n",
    );
    assert_eq!(status, 200, "{answer}");
    let b = Browser::start();
    for (w, h, mobile) in [(1280, 860, false), (390, 844, true)] {
        b.viewport(w, h, mobile);
        let size = if mobile { "phone" } else { "desktop" };
        b.open(&login_link(&home, &server));
        // Signed in: the address bar no longer holds the token.
        wait_until(
            &b,
            "return location.pathname === '/' && location.search === ''",
        );
        wait_until(
            &b,
            "return document.querySelectorAll('#thread-rows tr[data-ref]').length > 0",
        );
        wait_until(
            &b,
            "return document.getElementById('live').classList.contains('on')",
        );
        let version = b.text("#version");
        assert!(version.contains("commit"), "{version}");
        shot(&b, &format!("{size}-dashboard-threads"), w);

        // Search narrows the list.
        b.type_into("#search", "hallway");
        wait_until(
            &b,
            "var rows = document.querySelectorAll('#thread-rows tr[data-ref]');
             return rows.length === 1 && rows[0].textContent.includes('vacuum the hallway')",
        );
        // The thread: its timeline, and why it was offered to whom.
        b.click("#thread-rows tr[data-ref] .ref");
        wait_until(
            &b,
            "return !document.getElementById('thread-detail').hidden",
        );
        let timeline = b.wait_text("#timeline", "created");
        assert!(timeline.contains("created"), "{timeline}");
        let route = b.wait_text("#route", "roomba-kitchen");
        assert!(route.contains("roomba-kitchen"), "{route}");
        shot(&b, &format!("{size}-dashboard-thread"), w);
        b.click("#close-detail");
        b.run("var s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); return null");

        // The queue: the robot's notice is retrying; cancel it, then put it back.
        b.click("#tab-queue");
        wait_until(
            &b,
            "return document.querySelectorAll('#job-rows tr[data-id]').length > 0",
        );
        wait_until(
            &b,
            "return document.querySelector('#job-rows tr[data-id]').textContent.includes('roomba-kitchen')",
        );
        if !mobile {
            // The first attempt's error is shown once it has been tried.
            wait_until(
                &b,
                "var e = document.querySelector('#job-rows tr[data-id] .err'); return !!e && e.textContent.length > 0",
            );
        }
        shot(&b, &format!("{size}-dashboard-queue"), w);
        b.run("window.confirm = function () { return true; }; return null");
        b.click("#job-rows tr[data-id] button.cancel");
        wait_until(
            &b,
            "return document.querySelectorAll('#job-rows tr[data-id]').length === 0",
        );
        b.click("#shelf-failed");
        wait_until(
            &b,
            "return !!document.querySelector('#job-rows tr[data-id] button.retry')",
        );
        b.click("#job-rows tr[data-id] button.retry");
        b.click("#shelf-queue");
        wait_until(
            &b,
            "return document.querySelectorAll('#job-rows tr[data-id]').length === 1",
        );

        // Executors with their availability and reputation; the throughput chart.
        b.click("#tab-executors");
        let executors = b.wait_text("#executor-rows", "teague-phone");
        assert!(executors.contains("roomba-kitchen"), "{executors}");
        b.click("#tab-throughput");
        wait_until(
            &b,
            "return document.querySelectorAll('#throughput-chart rect').length > 3",
        );
        shot(&b, &format!("{size}-dashboard-throughput"), w);
        b.click("#tab-shells");
        b.find("#balance-rows");

        // Live: a request sent now appears without a reload.
        b.click("#tab-threads");
        let intent = format!("water the plants ({size})");
        let (status, answer) = server.post_yaml(
            &agent,
            &format!("MESS:\n  - v: \"1.0\"\n  - request:\n      intent: {intent}\n      requires: [take-photo]\n"),
        );
        assert_eq!(status, 200, "{answer}");
        wait_until(
            &b,
            &format!(
                "return document.getElementById('thread-rows').textContent.includes({intent:?})"
            ),
        );
    }
}
