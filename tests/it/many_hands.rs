//! Many hands: several answers to one request (one slot per executor, an agreement rule, a
//! partial end at the deadline), approvals by M of N named people (every vote counted once
//! whichever channel it comes by, a quorum that cannot be lowered, a veto, expiry that is
//! never approval), what an approval covers and its uses, and escalation ladders; through the
//! CLI, HTTP, MCP and SQL.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::mcp_post;
use crate::support::Home;
use crate::support::server::Server;

const CONFIG: &str = "agent_id: claude-agent
executors:
  - id: ana
    capabilities: [look]
  - id: ben
    capabilities: [look]
  - id: cy
    capabilities: [look, finance]
  - id: dee
    capabilities: [look]
  - id: eve
    capabilities: [look]
  - id: fay
    capabilities: [look]
  - id: boss
    capabilities: [manage]
";

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A response whose structured answer is `{open: VALUE}`, as `who`.
fn answer(home: &Home, who: &str, r: &str, open: bool) -> String {
    home.send_as(
        who,
        &format!("MESS:\n  - response:\n      re: {r}\n      content:\n        - structured: {{open: {open}}}\n"),
    )
}

fn status_json(home: &Home, r: &str) -> Value {
    json(&home.ok(&["status", r, "--format", "json"]))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn several_answers_take_one_slot_each_and_end_with_the_aggregate() {
    let home = Home::with_config(CONFIG);
    let r = home
        .ok(&[
            "request",
            "is the corner shop open?",
            "--requires",
            "look",
            "--assignments",
            "3",
            "--agree",
            "open=2",
        ])
        .trim()
        .to_owned();
    home.ok(&["claim", &r, "--as", "ana"]);
    let again = home.fails(&["claim", &r, "--as", "ana"], 1);
    assert!(again.contains("already hold slot 1"), "{again}");
    home.ok(&["claim", &r, "--as", "ben"]);
    home.ok(&["claim", &r, "--as", "cy"]);
    let full = home.fails(&["claim", &r, "--as", "dee"], 1);
    assert!(full.contains("all 3 of its slots are taken"), "{full}");
    assert_eq!(status_json(&home, &r)["status"], "claimed");

    answer(&home, "ana", &r, true);
    // An answer is given once.
    let twice = home.send_refused(
        "ana",
        &format!("MESS:\n  - response:\n      re: {r}\n      content: [changed my mind]\n"),
    );
    assert!(twice.contains("each executor answers once"), "{twice}");
    // A slot given back opens again, to someone else.
    home.ok(&[
        "update", &r, "--as", "ben", "--status", "declined", "--reason", "too far",
    ]);
    let back = home.fails(&["claim", &r, "--as", "ben"], 1);
    assert!(back.contains("already declined"), "{back}");
    assert_eq!(status_json(&home, &r)["status"], "pending");
    home.ok(&["claim", &r, "--as", "dee"]);
    answer(&home, "dee", &r, false);
    assert_eq!(status_json(&home, &r)["status"], "claimed");
    answer(&home, "cy", &r, true);

    let done = status_json(&home, &r);
    assert_eq!(done["status"], "completed", "{done}");
    let slots = done["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 4, "{done}");
    assert_eq!(slots[1]["status"], "declined");
    // The final response is the exchange's aggregate: every answer, and the agreement.
    let aggregate = done["response"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c.get("structured"))
        .unwrap_or_else(|| panic!("{done}"));
    assert_eq!(aggregate["answered"], 3, "{aggregate}");
    assert_eq!(aggregate["agreement"]["reached"], true);
    assert_eq!(aggregate["agreement"]["value"], "true");
    assert_eq!(aggregate["agreement"]["tally"]["true"], 2);
    let who: Vec<&str> = aggregate["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["executor"].as_str().unwrap())
        .collect();
    assert_eq!(who, ["ana", "cy", "dee"]);

    // SQL sees every slot, and each slot counts for its executor.
    let rows = json(&home.ok(&[
        "query",
        &format!("SELECT slot, executor, status, \"value\" FROM assignments WHERE ref = '{r}' ORDER BY slot"),
        "--format",
        "json",
    ]))["rows"]
        .clone();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows[3]["executor"], "dee");
    assert_eq!(rows[3]["value"], "false");
    let stats = json(&home.ok(&[
        "query",
        "SELECT executor, completed, declined FROM executor_stats ORDER BY executor",
        "--format",
        "json",
    ]))["rows"]
        .clone();
    let of = |x: &str| {
        stats
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["executor"] == x)
            .cloned()
            .unwrap_or_else(|| panic!("{x}: {stats}"))
    };
    assert_eq!(of("ana")["completed"], 1);
    assert_eq!(of("ben")["declined"], 1);
    // The file replays to the same envelope: fsck finds nothing to mend.
    let fsck = home.ok(&["fsck"]);
    assert!(!fsck.contains("differs"), "{fsck}");
}

#[test]
fn the_last_slot_goes_to_exactly_one_of_many_racing_executors() {
    let home = Home::with_config(CONFIG);
    let r = home
        .ok(&[
            "request",
            "count the bikes",
            "--requires",
            "look",
            "--assignments",
            "2",
        ])
        .trim()
        .to_owned();
    home.ok(&["claim", &r, "--as", "ana"]);
    let racers = ["ben", "cy", "dee", "eve", "fay"];
    let children: Vec<_> = racers
        .iter()
        .map(|who| {
            home.command(&["claim", &r, "--as", who])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outcomes: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    assert_eq!(outcomes.iter().filter(|o| o.status.success()).count(), 1);
    for lost in outcomes.iter().filter(|o| !o.status.success()) {
        let err = String::from_utf8_lossy(&lost.stderr);
        assert!(
            err.contains("slots are taken") || err.contains("no longer open"),
            "{err}"
        );
    }
    let done = status_json(&home, &r);
    assert_eq!(done["slots"].as_array().unwrap().len(), 2, "{done}");
    assert_eq!(done["status"], "claimed");
}

#[test]
fn the_deadline_ends_several_answers_partial_with_what_came() {
    let home = Home::with_config(CONFIG);
    let ask = |intent: &str| {
        home.ok(&[
            "request",
            intent,
            "--requires",
            "look",
            "--assignments",
            "3",
            "--needed-by",
            "2s",
        ])
        .trim()
        .to_owned()
    };
    let some = ask("is the bakery open?");
    let none = ask("is the library open?");
    home.ok(&["claim", &some, "--as", "ana"]);
    answer(&home, "ana", &some, true);
    home.ok(&["claim", &some, "--as", "ben"]);
    std::thread::sleep(Duration::from_millis(2500));
    let partial = status_json(&home, &some);
    assert_eq!(partial["status"], "partial", "{partial}");
    assert!(
        partial["partial"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("1 of 3 answers came before the deadline"),
        "{partial}"
    );
    let aggregate = partial["response"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c.get("structured"))
        .unwrap();
    assert_eq!(aggregate["answered"], 1);
    let expired = status_json(&home, &none);
    assert_eq!(expired["status"], "expired", "{expired}");
}

/// A server over `home` with an agent key and a key for each executor named.
fn approvals_server(home: &Home) -> (Server, String) {
    let agent = home.token("agent", "claude-agent");
    (Server::start(home), agent)
}

fn request_ref(body: &str) -> String {
    json(body)["MESS"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|p| p["ack"]["ref"].as_str())
        .unwrap_or_else(|| panic!("no ack in {body}"))
        .to_owned()
}

fn decide_yaml(r: &str, approve: bool, why: &str) -> String {
    format!(
        "MESS:\n  - response:\n      re: {r}\n      content:\n        - confirmation: {{confirmed: {approve}, details: {why}}}\n"
    )
}

/// An initialised MCP session over HTTP for `key`; its id.
fn mcp_session(port: u16, key: &str) -> String {
    let (status, head, body) = mcp_post(
        port,
        key,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hands-test","version":"1"}}}"#,
    );
    assert_eq!(status, 200, "{head}\n{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no session id in {head}"))
        .to_owned();
    mcp_post(
        port,
        key,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    session
}

fn mcp_tool(port: u16, key: &str, session: &str, name: &str, args: Value) -> Value {
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": name, "arguments": args}});
    let (status, _, body) = mcp_post(port, key, Some(session), &call.to_string());
    assert_eq!(status, 200, "{body}");
    // A JSON answer, or an event stream whose answer is the data line with an id.
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| d.contains("\"id\""))
        .unwrap_or(&body);
    json(data.trim())["result"].clone()
}

#[test]
fn every_vote_counts_once_whichever_channel_it_comes_by() {
    let home = Home::with_config(CONFIG);
    let keys: Vec<(String, String)> = ["ana", "ben", "dee"]
        .iter()
        .map(|id| (id.to_string(), home.token("executor", id)))
        .collect();
    let key = |id: &str| keys.iter().find(|(k, _)| k == id).unwrap().1.clone();
    let (server, agent) = approvals_server(&home);
    // The agent asks over MCP: two of ana, ben and whoever holds `finance` (cy).
    let session = mcp_session(server.port, &agent);
    let made = mcp_tool(
        server.port,
        &agent,
        &session,
        "mess_do",
        serde_json::json!({"intent": "pay invoice 42", "approval": {"from": ["ana", "ben", "finance"], "need": 2}}),
    );
    let r = made["structuredContent"]["ref"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| {
            made.to_string()
                .split("\"ref\":\"")
                .nth(1)
                .map(|s| s[..14].to_owned())
        })
        .unwrap_or_else(|| panic!("{made}"));

    // Ana decides through the page's link...
    let link = home.ok(&["link", &r, "--executor", "ana"]);
    let token = link.trim().rsplit("token=").next().unwrap().to_owned();
    let (status, body) = server.send(
        "POST",
        &format!("/thread/{r}?token={token}"),
        &[("Content-Type", "application/yaml")],
        decide_yaml(&r, true, "matches the order").as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    // ...and again through the API, MCP and the CLI: each is refused, naming the first.
    let (status, body) = server.post_yaml(&key("ana"), &decide_yaml(&r, true, "again"));
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("ana already decided"), "{body}");
    let ana_mcp = mcp_session(server.port, &key("ana"));
    let again = mcp_tool(
        server.port,
        &key("ana"),
        &ana_mcp,
        "mess_decide",
        serde_json::json!({"re": r, "approve": false, "reason": "second thoughts"}),
    );
    assert_eq!(again["isError"], true, "{again}");
    assert!(again.to_string().contains("already decided"), "{again}");
    let cli = home.fails(&["deny", &r, "--as", "ana", "--reason", "no"], 1);
    assert!(cli.contains("already decided"), "{cli}");
    // One approval of two: still waiting, and it says for whom.
    let (status, body) = server.get(&format!("/approvals/{r}"), &agent);
    assert_eq!(status, 200, "{body}");
    let view = json(&body);
    assert_eq!(view["state"], "pending", "{view}");
    assert_eq!(view["decisions"].as_array().unwrap().len(), 1);
    assert_eq!(view["waiting_for"], serde_json::json!(["ben", "cy"]));
    // Someone the approval does not name cannot decide, and cannot see it.
    let (status, body) = server.post_yaml(&key("dee"), &decide_yaml(&r, true, "sure"));
    assert_eq!(status, 404, "{body}");
    let (status, _) = server.get(&format!("/approvals/{r}"), &key("dee"));
    assert_eq!(status, 404);
    // Ben's approval over MCP makes two: approved.
    let ben_mcp = mcp_session(server.port, &key("ben"));
    let yes = mcp_tool(
        server.port,
        &key("ben"),
        &ben_mcp,
        "mess_decide",
        serde_json::json!({"re": r, "approve": true}),
    );
    assert_ne!(yes["isError"], true, "{yes}");
    let (_, body) = server.get(&format!("/approvals/{r}"), &agent);
    let view = json(&body);
    assert_eq!(view["state"], "approved", "{view}");
    let channels: Vec<&str> = view["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["channel"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(channels, ["link", "mcp"], "{view}");
    // Every decision is in SQL with who, when and how.
    let rows = json(&home.ok(&[
        "query",
        &format!(
            "SELECT \"by\", decision, channel, reason FROM decisions WHERE ref = '{r}' ORDER BY seq"
        ),
        "--format",
        "json",
    ]))["rows"]
        .clone();
    assert_eq!(rows[0]["by"], "ana");
    assert_eq!(rows[0]["reason"], "matches the order");
    assert_eq!(rows[1]["by"], "ben");
    assert_eq!(rows.as_array().unwrap().len(), 2);
}

#[test]
fn a_quorum_is_never_lowered_a_veto_ends_it_and_silence_expires() {
    let home = Home::with_config(CONFIG);
    let (server, agent) = approvals_server(&home);
    // Three approvals from two people can never come: refused, not quietly made one.
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: open the safe\n      approval: {from: [ana, ben], need: 3}\n",
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("approval.need"), "{body}");
    assert!(body.contains("only 2"), "{body}");
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: open the safe\n      approval: {from: [ana, ben], need: 0}\n",
    );
    assert_eq!(status, 422, "{body}");

    // A veto: one denial ends it declined, with who and why.
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: wire 5000 EUR\n      approval: {from: [ana, ben, cy], need: 2, deny_vetoes: true}\n",
    );
    assert_eq!(status, 200, "{body}");
    let vetoed = request_ref(&body);
    home.ok(&["approve", &vetoed, "--as", "ana"]);
    home.ok(&[
        "deny",
        &vetoed,
        "--as",
        "cy",
        "--reason",
        "not in the budget",
    ]);
    let v = status_json(&home, &vetoed);
    assert_eq!(v["status"], "declined", "{v}");
    assert_eq!(v["declined"]["reason"]["type"], "vetoed", "{v}");
    let late = home.fails(&["approve", &vetoed, "--as", "ben"], 1);
    assert!(late.contains("already declined"), "{late}");

    // The quorum in a hand-edited envelope is not obeyed: the request's stands.
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: order a new boiler\n      approval: {from: [ana, ben], need: 2}\n",
    );
    assert_eq!(status, 200, "{body}");
    let fixed = request_ref(&body);
    let path = home
        .path()
        .join("state=received")
        .join(format!("{fixed}.messe-af.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("need: 2", "need: 1", 1)).unwrap();
    home.ok(&["approve", &fixed, "--as", "ana"]);
    assert_eq!(status_json(&home, &fixed)["status"], "pending");
    home.ok(&["approve", &fixed, "--as", "ben"]);
    assert_eq!(status_json(&home, &fixed)["status"], "completed");

    // Silence until `expires` is expiry, never approval and never a refusal.
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: repaint the hall\n      approval: {from: [ana, ben], need: 2, expires: 2s}\n",
    );
    assert_eq!(status, 200, "{body}");
    let quiet = request_ref(&body);
    home.ok(&["approve", &quiet, "--as", "ana"]);
    std::thread::sleep(Duration::from_millis(2500));
    let e = status_json(&home, &quiet);
    assert_eq!(e["status"], "expired", "{e}");
    assert!(
        e["expired"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("1 of the 2 approvals needed; not approved"),
        "{e}"
    );
    let (_, body) = server.get(
        &format!("/approvals/{quiet}?intent=repaint%20the%20hall"),
        &agent,
    );
    let view = json(&body);
    assert_eq!(view["state"], "expired", "{view}");
    assert_eq!(view["covers"], false, "{view}");
}

#[test]
fn an_approval_covers_only_its_scope_and_only_as_often_as_it_says() {
    let home = Home::with_config(CONFIG);
    let (server, agent) = approvals_server(&home);
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: pay invoice 42\n      approval:\n        from: [finance]\n        scope: {parameters: {invoice: 42, payee: ACME}, amount: 120, uses: 1, valid_for: 1h}\n",
    );
    assert_eq!(status, 200, "{body}");
    let r = request_ref(&body);
    // Before it is approved it covers nothing.
    let q = |query: &str| {
        let (status, body) = server.get(&format!("/approvals/{r}?{query}"), &agent);
        assert_eq!(status, 200, "{body}");
        json(&body)
    };
    let params = "parameters=%7B%22payee%22%3A%22ACME%22%2C%22invoice%22%3A42%7D";
    assert_eq!(
        q(&format!("intent=pay%20invoice%2042&{params}&amount=100"))["covers"],
        false
    );
    home.ok(&["approve", &r, "--as", "cy", "--reason", "budgeted"]);
    let yes = q(&format!("intent=pay%20invoice%2042&{params}&amount=100"));
    assert_eq!(yes["covers"], true, "{yes}");
    assert!(
        yes["scope"]["parameters_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{yes}"
    );
    for (query, why) in [
        (format!("intent=pay%20invoice%2042&{params}&amount=130"), "more than the 120"),
        (
            "intent=pay%20invoice%2042&parameters=%7B%22invoice%22%3A43%2C%22payee%22%3A%22ACME%22%7D&amount=100".to_owned(),
            "parameters differ",
        ),
        (format!("intent=pay%20invoice%2043&{params}&amount=100"), "is for"),
        ("intent=pay%20invoice%2042&amount=100".to_owned(), "name them"),
    ] {
        let no = q(&query);
        assert_eq!(no["covers"], false, "{query}: {no}");
        assert!(no["why"].as_str().unwrap().contains(why), "{query}: {no}");
    }
    // One use: the first takes it, the second is refused.
    let use_body = r#"{"intent": "pay invoice 42", "parameters": {"invoice": 42, "payee": "ACME"}, "amount": 120}"#;
    let post = || {
        server.send(
            "POST",
            &format!("/approvals/{r}/use"),
            &[
                ("Authorization", &format!("Bearer {agent}")),
                ("Content-Type", "application/json"),
            ],
            use_body.as_bytes(),
        )
    };
    let (status, body) = post();
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["used_now"], true);
    let (status, body) = post();
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("all are used"), "{body}");
    // MCP asks the same question and hears the same answer.
    let session = mcp_session(server.port, &agent);
    let asked = mcp_tool(
        server.port,
        &agent,
        &session,
        "mess_approved",
        serde_json::json!({"re": r, "intent": "pay invoice 42", "parameters": {"invoice": 42, "payee": "ACME"}, "amount": 50}),
    );
    assert!(asked.to_string().contains("all are used"), "{asked}");
    // The use is in the thread's history.
    let show = home.ok(&["show", &r]);
    assert!(show.contains("action: approval used"), "{show}");
}

#[test]
fn an_escalation_ladder_climbs_and_its_end_is_expiry() {
    let home = Home::with_config(CONFIG);
    let server = Server::start_with(&home, &[("MESS_ROUTE_RETRY_MS", "200")]);
    let agent = home.token("agent", "claude-agent");
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: fix the door\n      requires: [look]\n      escalate: [{after: 1s, to: [boss]}, {after: 3s}]\n",
    );
    assert_eq!(status, 200, "{body}");
    let r = request_ref(&body);
    // The boss lacks `look`, so it may not take the work until the ladder reaches it.
    let early = home.fails(&["claim", &r, "--as", "boss"], 1);
    assert!(
        early.contains("no thread") || early.contains("lacks"),
        "{early}"
    );
    wait_until("the first rung", || {
        home.ok(&["show", &r]).contains("rung 1 of 2")
    });
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: fix the gate\n      requires: [look]\n      escalate: [{after: 1s, to: [boss]}, {after: 2s}]\n",
    );
    assert_eq!(status, 200, "{body}");
    let unclaimed = request_ref(&body);
    home.ok(&["claim", &r, "--as", "boss"]);
    wait_until("the end of the ladder", || {
        status_json(&home, &unclaimed)["status"] == "expired"
    });
    let e = status_json(&home, &unclaimed);
    assert!(
        e["expired"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("escalation ladder ended"),
        "{e}"
    );
    let show = home.ok(&["show", &unclaimed]);
    assert!(
        show.contains("rung 1 of 2 after 1s: offered to boss"),
        "{show}"
    );
}

/// The page of `r` for `who` through a fresh link.
fn open_page(
    home: &Home,
    server: &Server,
    browser: &crate::support::browser::Browser,
    r: &str,
    who: &str,
) {
    let link = home.ok(&["link", r, "--executor", who]);
    let token = link.trim().rsplit("token=").next().unwrap().to_owned();
    browser.open(&format!(
        "http://127.0.0.1:{}/respond?ref={r}&token={token}",
        server.port
    ));
    browser.find("#intent");
}

#[test]
#[ignore = "drives Chromium (chromium, chromium-driver); .ci/test runs it"]
fn approvers_decide_and_slot_holders_answer_on_the_page() {
    use crate::support::browser::Browser;
    assert!(
        Browser::available(),
        "chromium and chromium-driver are needed"
    );
    let home = Home::with_config(CONFIG);
    let (server, agent) = approvals_server(&home);
    let b = Browser::start();
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: lend the van to the school\n      approval: {from: [ana, ben], need: 2}\n",
    );
    assert_eq!(status, 200, "{body}");
    let r = request_ref(&body);
    open_page(&home, &server, &b, &r, "ana");
    assert!(
        b.text("#approval-need").contains("0 of 2 approvals"),
        "{}",
        b.text("main")
    );
    // A denial needs a reason: the page asks for one before sending anything.
    b.click("#deny");
    assert!(home.ok(&["show", &r]).matches("confirmation").count() == 0);
    b.type_into("#decision-reason", "insured until Friday");
    b.click("#approve");
    assert!(
        crate::web::wait_until(&b, "return !!document.getElementById('decided')"),
        "{}",
        b.text("main")
    );
    assert!(
        b.text("#decisions").contains("You approved"),
        "{}",
        b.text("#decisions")
    );
    open_page(&home, &server, &b, &r, "ben");
    b.click("#approve");
    assert_eq!(crate::web::wait_status(&b, "completed"), "completed");
    assert!(
        b.text("#final").contains("Approved"),
        "{}",
        b.text("#final")
    );
    let rows = json(&home.ok(&[
        "query",
        &format!("SELECT \"by\", channel, reason FROM decisions WHERE ref = '{r}' ORDER BY seq"),
        "--format",
        "json",
    ]))["rows"]
        .clone();
    assert_eq!(rows[0]["reason"], "insured until Friday", "{rows}");
    assert_eq!(rows[1]["channel"], "link", "{rows}");

    // Several answers: each person takes a place and answers on their own.
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: is the playground open?\n      requires: [look]\n      assignments: 2\n",
    );
    assert_eq!(status, 200, "{body}");
    let s = request_ref(&body);
    let late = home.ok(&["link", &s, "--executor", "cy"]);
    open_page(&home, &server, &b, &s, "ana");
    assert!(
        b.text("#slots").contains("2 places open"),
        "{}",
        b.text("main")
    );
    b.click("#claim");
    assert!(
        crate::web::wait_until(
            &b,
            "return (document.getElementById('slots') || {}).textContent.indexOf('1 place open') >= 0"
        ),
        "{}",
        b.text("main")
    );
    home.ok(&["claim", &s, "--as", "ben"]);
    // A link made while places were open reads nothing once every place is taken.
    let token = late.trim().rsplit("token=").next().unwrap().to_owned();
    b.open(&format!(
        "http://127.0.0.1:{}/respond?ref={s}&token={token}",
        server.port
    ));
    assert!(
        b.wait_text("main", "Nothing more")
            .contains("Nothing more to do here"),
        "{}",
        b.text("main")
    );
}

#[test]
fn confirm_before_by_named_people_needs_them_all_and_the_requestor_cannot_stand_in() {
    let home = Home::with_config(CONFIG);
    let (server, agent) = approvals_server(&home);
    // More confirmations than the named people can give: refused at the door.
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: shut the water off\n      requires: [look]\n      confirm_before: true\n      confirm_by: {from: [ben], need: 2}\n",
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("confirm_by.need"), "{body}");
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: shut the water off\n      confirm_by: {from: [ben, finance], need: 2}\n",
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("set confirm_before: true"), "{body}");
    let (status, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: shut the water off\n      requires: [look]\n      confirm_before: true\n      confirm_by: {from: [ben, finance], need: 2}\n",
    );
    assert_eq!(status, 200, "{body}");
    let r = request_ref(&body);
    home.ok(&["claim", &r, "--as", "ana"]);
    // Before anyone asks, nobody confirms.
    let early = home.fails(&["approve", &r, "--as", "ben"], 1);
    assert!(
        early.contains("not found") || early.contains("no confirmation"),
        "{early}"
    );
    home.send_as(
        "ana",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: needs_confirmation\n      action: close the main valve\n"),
    );
    let (status, body) = server.post_yaml(
        &home.token("executor", "ana"),
        &format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n"),
    );
    assert_eq!(status, 409, "the work waits: {body}");
    // The requestor cannot confirm in the named people's place.
    let (status, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - reply:\n      re: {r}\n      confirm: true\n"),
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("yourself"), "{body}");
    // Someone it does not name cannot (dee could have taken the work, so learns why); boss
    // could never see it.
    let (status, body) =
        server.post_yaml(&home.token("executor", "dee"), &decide_yaml(&r, true, "ok"));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not among its confirmers"), "{body}");
    let (status, _) = server.post_yaml(
        &home.token("executor", "boss"),
        &decide_yaml(&r, true, "ok"),
    );
    assert_eq!(status, 404);
    // Ben confirms from the CLI; again over HTTP is refused, naming the first.
    home.ok(&[
        "approve",
        &r,
        "--as",
        "ben",
        "--reason",
        "valve is labelled",
    ]);
    let (status, body) = server.post_yaml(
        &home.token("executor", "ben"),
        &decide_yaml(&r, true, "again"),
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("ben already decided"), "{body}");
    assert_eq!(status_json(&home, &r)["confirmation"], "requested");
    // Cy holds `finance`: the second confirmation lets the work go ahead.
    let (status, body) = server.post_yaml(
        &home.token("executor", "cy"),
        &decide_yaml(&r, true, "fine"),
    );
    assert_eq!(status, 200, "{body}");
    let env = status_json(&home, &r);
    assert_eq!(env["confirmation"], "confirmed", "{env}");
    let by: Vec<&str> = env["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["by"].as_str().unwrap())
        .collect();
    assert_eq!(by, ["ben", "cy"]);
    let (status, body) = server.post_yaml(
        &home.token("executor", "ana"),
        &format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n"),
    );
    assert_eq!(status, 200, "{body}");

    // A denial that vetoes refuses the confirmation: the claimant may only cancel or hold.
    let (_, body) = server.post_yaml(
        &agent,
        "MESS:\n  - request:\n      intent: open the safe\n      requires: [look]\n      confirm_before: true\n      confirm_by: {from: [ben, cy], need: 2, deny_vetoes: true}\n",
    );
    let r = request_ref(&body);
    home.ok(&["claim", &r, "--as", "ana"]);
    home.send_as(
        "ana",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: needs_confirmation\n      action: drill the lock\n"),
    );
    home.ok(&["deny", &r, "--as", "cy", "--reason", "call a locksmith"]);
    let env = status_json(&home, &r);
    assert_eq!(env["confirmation"], "rejected", "{env}");
    let (status, _) = server.post_yaml(
        &home.token("executor", "ana"),
        &format!("MESS:\n  - status:\n      re: {r}\n      code: in_progress\n"),
    );
    assert_eq!(status, 409);
}
