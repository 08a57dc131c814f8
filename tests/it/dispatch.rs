//! Dispatch end to end: `mess serve` notifies routed executors on every channel against local
//! stand-ins of the services (content, link, signature), updates the others' messages when
//! one takes the thread, retries failures with backoff, records a final failure, and resumes
//! its queue after a restart.

use std::time::Duration;

use serde_json::Value;

use crate::support::Home;
use crate::support::recorder::{Hit, Recorder, Script, SmtpRecorder};
use crate::support::server::Server;

const WEBHOOK_SECRET: &str = "webhook-signing-key-for-tests-0123456789";

fn config(services: &str, smtp: u16, executors: &str, retry: &str) -> String {
    format!(
        "agent_id: claude-agent
dispatch:
  public_url: https://mess.example
  timeout: 1s
  retry: {retry}
  webhook: {{secret: {WEBHOOK_SECRET}}}
  slack: {{bot_token: xoxb-test-token, base_url: {services}/slack}}
  telegram: {{bot_token: '123:telegram-token', base_url: {services}/telegram}}
  twilio: {{account_sid: AC0001, auth_token: twilio-token, from: '+15550000', base_url: {services}/twilio}}
  ntfy: {{base_url: {services}/ntfy}}
  email: {{smtp_host: 127.0.0.1, smtp_port: {smtp}, security: none, from: mess@example.org}}
executors:
{executors}"
    )
}

fn key(home: &Home, role: &str, id: &str) -> String {
    home.ok(&["token", role, id]).trim().to_owned()
}

fn create(server: &Server, agent: &str, yaml: &str) -> String {
    let (status, body) = server.post_yaml(agent, yaml);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned()
}

fn find<'a>(hits: &'a [Hit], path: &str) -> Vec<&'a Hit> {
    hits.iter().filter(|h| h.path.contains(path)).collect()
}

#[test]
fn routed_executors_hear_on_every_channel_and_the_others_learn_when_it_is_taken() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        smtp.port,
        &format!(
            "  teague-phone:
    capabilities: [take-photo]
    notify:
      slack: U0TEAGUE
      telegram: '1001'
      sms: '+15551234567'
      ntfy: teague-topic
      email: teague@example.org
      webhook: {url}/robot
  sam-phone:
    capabilities: [take-photo]
    notify:
      slack: U0SAM
      telegram: '2002'
      ntfy: sam-topic
"
        ),
        "{attempts: 3, first: 0.1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    let teague = key(&home, "executor", "teague-phone");
    let server = Server::start(&home);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: photo of the fridge shelves\n      requires: [take-photo]\n      priority: elevated\n",
    );
    let hits = services.wait_for(Duration::from_secs(10), |h| h.len() >= 8);
    let link = format!("https://mess.example/respond?ref={r}&token=ey");

    let slack = find(&hits, "/slack/chat.postMessage");
    assert_eq!(slack.len(), 2, "{hits:#?}");
    for h in &slack {
        assert_eq!(h.method, "POST");
        assert_eq!(h.headers["authorization"], "Bearer xoxb-test-token");
        let body: Value = serde_json::from_str(&h.body).unwrap();
        assert!(
            body["text"]
                .as_str()
                .unwrap()
                .contains("photo of the fridge shelves")
        );
        let button = &body["blocks"][2]["elements"][0];
        assert_eq!(button["text"]["text"], "Respond");
        assert!(button["url"].as_str().unwrap().starts_with(&link), "{body}");
    }
    let telegram = find(&hits, "/telegram/bot123:telegram-token/sendMessage");
    assert_eq!(telegram.len(), 2, "{hits:#?}");
    let tg: Value = serde_json::from_str(&telegram[0].body).unwrap();
    assert!(
        tg["reply_markup"]["inline_keyboard"][0][0]["url"]
            .as_str()
            .unwrap()
            .starts_with(&link)
    );

    let sms = find(&hits, "/twilio/2010-04-01/Accounts/AC0001/Messages.json");
    assert_eq!(sms.len(), 1, "{hits:#?}");
    assert!(sms[0].headers["authorization"].starts_with("Basic "));
    assert!(sms[0].body.contains("To=%2B15551234567"), "{}", sms[0].body);
    // A text message carries the reference design's short link; the server maps its code to the
    // token.
    let short = "https%3A%2F%2Fmess.example%2Fr%2F";
    let at = sms[0]
        .body
        .find(short)
        .unwrap_or_else(|| panic!("{}", sms[0].body))
        + short.len();
    let code: String = sms[0].body[at..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    assert_eq!(code.len(), 12, "{}", sms[0].body);
    let (status, head) = server.send_head("GET", &format!("/r/{code}"));
    assert_eq!(status, 303, "{head}");
    assert!(
        head.contains(&format!("location: /respond?ref={r}&token=ey")),
        "{head}"
    );
    assert_eq!(server.send_head("GET", "/r/AAAAAAAAAAAA").0, 404);
    assert_eq!(server.send_head("GET", "/r/..%2Fsecret").0, 404);

    let ntfy = find(&hits, "/ntfy/");
    assert_eq!(ntfy.len(), 2, "{hits:#?}");
    let teague_ntfy = ntfy
        .iter()
        .find(|h| h.path == "/ntfy/teague-topic")
        .unwrap();
    assert_eq!(teague_ntfy.headers["x-priority"], "4", "elevated maps to 4");
    assert!(teague_ntfy.headers["x-click"].starts_with(&link));
    assert_eq!(teague_ntfy.headers["x-sequence-id"], format!("mess-{r}"));

    let webhook = find(&hits, "/robot");
    assert_eq!(webhook.len(), 1, "{hits:#?}");
    let w = webhook[0];
    assert!(
        w.body.starts_with(&format!("ref: {r}")),
        "the thread file: {}",
        w.body
    );
    let stamp: i64 = w.headers["x-mess-timestamp"].parse().unwrap();
    assert_eq!(
        w.headers["x-mess-signature"],
        mess::notify::sign(
            WEBHOOK_SECRET.as_bytes(),
            stamp,
            &w.headers["x-mess-delivery"],
            w.body.as_bytes()
        ),
        "the signature checks out"
    );
    assert_eq!(
        w.headers["x-mess-delivery"],
        format!("{r}.teague-phone.webhook.new")
    );

    let until = std::time::Instant::now() + Duration::from_secs(10);
    while smtp.mails().is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(25));
    }
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1);
    assert!(mails[0].to[0].contains("teague@example.org"));
    assert!(mails[0].from.contains("mess@example.org"));
    assert!(
        mails[0]
            .data
            .contains("Subject: MESS request: photo of the fridge shelves")
    );
    assert!(
        mails[0]
            .data
            .contains("Respond: https://mess.example/respond?ref=")
    );

    // Teague takes it: Sam's Slack and Telegram messages are edited, Sam's ntfy message
    // replaced (same sequence id); Teague hears nothing more.
    let (status, body) = server.post_yaml(
        &teague,
        &format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
    );
    assert_eq!(status, 200, "{body}");
    let hits = services.wait_for(Duration::from_secs(10), |h| h.len() >= 11);
    let update = find(&hits, "/slack/chat.update");
    assert_eq!(update.len(), 1, "{hits:#?}");
    let u: Value = serde_json::from_str(&update[0].body).unwrap();
    assert_eq!(u["ts"], "1769882400.000100");
    assert!(
        u["text"]
            .as_str()
            .unwrap()
            .starts_with("Taken by teague-phone")
    );
    assert!(!update[0].body.contains("Respond"), "no button once taken");
    let edit = find(&hits, "/editMessageText");
    assert_eq!(edit.len(), 1, "{hits:#?}");
    let e: Value = serde_json::from_str(&edit[0].body).unwrap();
    assert_eq!(
        (e["chat_id"].as_str(), e["message_id"].as_i64()),
        (Some("777"), Some(42))
    );
    let sam_ntfy = find(&hits, "/ntfy/sam-topic");
    assert_eq!(sam_ntfy.len(), 2, "{hits:#?}");
    assert_eq!(sam_ntfy[1].headers["x-sequence-id"], format!("mess-{r}"));
    assert_eq!(find(&hits, "/ntfy/teague-topic").len(), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        services.hits().len(),
        11,
        "nothing else: {:#?}",
        services.hits()
    );
}

#[test]
fn failures_are_retried_with_backoff_and_a_final_one_is_recorded_in_the_thread() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        smtp.port,
        &format!(
            "  flaky-robot:
    capabilities: [vacuum-floor]
    notify:
      webhook: {url}/flaky
  dead-robot:
    capabilities: [mop-floor]
    notify:
      webhook: {url}/dead
"
        ),
        "{attempts: 3, first: 0.2s, max: 1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    // Two 500s, then a reply slower than the 1 s timeout, then success.
    services.script(
        "/flaky",
        vec![
            Script::Status(500),
            Script::Status(503),
            Script::Delay(Duration::from_secs(2)),
        ],
    );
    services.script(
        "/dead",
        vec![
            Script::Status(500),
            Script::Status(500),
            Script::Status(500),
        ],
    );
    let server = Server::start(&home);
    let flaky = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n",
    );
    let dead = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: mop\n      requires: [mop-floor]\n",
    );
    let hits = services.wait_for(Duration::from_secs(15), |h| {
        find(h, "/dead").len() >= 3 && find(h, "/flaky").len() >= 3
    });
    let dead_hits = find(&hits, "/dead");
    assert_eq!(dead_hits.len(), 3, "exactly `attempts` tries");
    assert_eq!(find(&hits, "/flaky").len(), 3, "{hits:#?}");
    // The flaky robot's third try timed out: with 3 attempts it is given up too; the failure
    // is in both threads' history, each naming the channel, the executor and the last error.
    let text = |r: &str| {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let t = home.ok(&["show", r]);
            if t.contains("notify_failed") || std::time::Instant::now() > until {
                return t;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let dead_thread = text(&dead);
    assert!(
        dead_thread.contains("webhook to dead-robot failed after 3 attempts: webhook: HTTP 500"),
        "{dead_thread}"
    );
    let flaky_thread = text(&flaky);
    assert!(
        flaky_thread.contains("webhook to flaky-robot failed after 3 attempts: webhook: timed out"),
        "{flaky_thread}"
    );
    let failed = home.path().join(".mess/outbox/failed");
    let record =
        std::fs::read_to_string(failed.join(format!("{dead}.dead-robot.webhook.new.yaml")))
            .unwrap();
    assert_eq!(
        record.matches("- at:").count(),
        3,
        "each attempt recorded: {record}"
    );
}

#[test]
fn a_restart_in_the_middle_of_retries_loses_no_delivery() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        smtp.port,
        &format!(
            "  robot:
    capabilities: [vacuum-floor]
    notify:
      webhook: {url}/robot
"
        ),
        "{attempts: 8, first: 1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    services.script("/robot", vec![Script::Status(500)]);
    let mut server = Server::start(&home);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n",
    );
    services.wait_for(Duration::from_secs(10), |h| find(h, "/robot").len() == 1);
    assert!(server.terminate(Duration::from_secs(5)));
    let queued = home
        .path()
        .join(format!(".mess/outbox/queue/{r}.robot.webhook.new.yaml"));
    let record = std::fs::read_to_string(&queued).unwrap();
    assert!(
        record.contains("HTTP 500"),
        "the failed attempt is on file: {record}"
    );

    let _server = Server::start(&home);
    let hits = services.wait_for(Duration::from_secs(10), |h| find(h, "/robot").len() >= 2);
    assert_eq!(find(&hits, "/robot").len(), 2, "{hits:#?}");
    let done = home
        .path()
        .join(format!(".mess/outbox/done/{r}.robot.webhook.new.yaml"));
    let until = std::time::Instant::now() + Duration::from_secs(5);
    // The record is written to done/ first and then removed from queue/: wait for both.
    while (queued.exists() || !done.exists()) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(25));
    }
    let record = std::fs::read_to_string(&done).unwrap();
    assert!(
        record.contains("outcome: sent") && record.contains("HTTP 500"),
        "{record}"
    );
    assert!(!queued.exists());
}

#[test]
fn an_unclaimed_request_is_escalated_to_the_default_rule_once() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let url = &services.url;
    let text = config(
        url,
        smtp.port,
        &format!(
            "  roomba-kitchen:
    capabilities: [vacuum-floor]
    notify:
      webhook: {url}/roomba
  teague-phone:
    capabilities: [vacuum-floor, take-photo]
    notify:
      webhook: {url}/teague
routing:
  - match: {{capability: vacuum-floor}}
    prefer: [roomba-kitchen]
  - default:
    prefer: [teague-phone]
"
        ),
        "{attempts: 3, first: 0.1s}",
    )
    .replace("  timeout: 1s\n", "  timeout: 1s\n  escalate_after: 1s\n");
    let home = Home::with_config(&text);
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start_with(&home, &[("MESS_ROUTE_RETRY_MS", "300")]);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: vacuum the hall\n      requires: [vacuum-floor]\n",
    );
    let hits = services.wait_for(Duration::from_secs(10), |h| !find(h, "/teague").is_empty());
    assert_eq!(find(&hits, "/roomba").len(), 1, "{hits:#?}");
    let teague = find(&hits, "/teague");
    assert_eq!(teague.len(), 1, "{hits:#?}");
    assert_eq!(teague[0].headers["x-mess-event"], "escalated");
    // The notice is queued before the history entry is written: wait for both.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let thread = loop {
        let t = home.ok(&["show", &r]);
        if t.contains("action: escalated") || std::time::Instant::now() > until {
            break t;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    assert!(
        thread.contains("action: escalated")
            && thread.contains("unclaimed; offered to teague-phone"),
        "{thread}"
    );
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(find(&services.hits(), "/teague").len(), 1, "escalated once");
}

#[test]
fn the_mail_channel_leaves_a_task_in_the_executors_mailbox() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let home = Home::with_config(&config(
        &services.url,
        smtp.port,
        "  scribe-agent:\n    capabilities: [summarise]\n    notify:\n      mail: scribe\n",
        "{attempts: 3, first: 0.1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: summarise the week\n      requires: [summarise]\n      priority: urgent\n",
    );
    let mailbox = home.path().join(".mail/scribe");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let file = loop {
        let found = std::fs::read_dir(&mailbox)
            .ok()
            // A name with a leading dot is a write in progress (its temp file).
            .and_then(|mut d| {
                d.find_map(|e| {
                    e.ok().filter(|e| {
                        e.path().is_file() && !e.file_name().to_string_lossy().starts_with('.')
                    })
                })
            });
        if let Some(f) = found {
            break f.path();
        }
        assert!(std::time::Instant::now() < until, "no mail arrived");
        std::thread::sleep(Duration::from_millis(25));
    };
    assert!(
        file.to_string_lossy().ends_with("_exchange_task.md"),
        "{file:?}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("---\nfrom: exchange\nto: scribe\ntype: task\n"),
        "{text}"
    );
    assert!(
        text.contains("priority: urgent") && text.contains(&format!("thread_id: {r}")),
        "{text}"
    );
    assert!(
        text.contains("## MESS request: summarise the week"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Respond: https://mess.example/respond?ref={r}&token="
        )),
        "{text}"
    );
    let listed = home.ok(&["--as", "scribe", "mail", "list"]);
    assert!(listed.contains("exchange"), "{listed}");
}

#[test]
fn a_request_cancelled_before_anyone_took_it_updates_the_messages_to_say_so() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let home = Home::with_config(&config(
        &services.url,
        smtp.port,
        "  teague-phone:\n    capabilities: [take-photo]\n    notify:\n      slack: U0TEAGUE\n",
        "{attempts: 3, first: 0.1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: photo of the porch\n      requires: [take-photo]\n",
    );
    services.wait_for(Duration::from_secs(10), |h| {
        !find(h, "/chat.postMessage").is_empty()
    });
    let (status, body) = server.post_yaml(&agent, &format!("MESS:\n  - cancel:\n      re: {r}\n"));
    assert_eq!(status, 200, "{body}");
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        !find(h, "/chat.update").is_empty()
    });
    let update = find(&hits, "/chat.update");
    assert_eq!(update.len(), 1, "{hits:#?}");
    let u: Value = serde_json::from_str(&update[0].body).unwrap();
    assert_eq!(
        u["text"], "No longer needed (cancelled): photo of the porch",
        "{u}"
    );
}

/// An executor declared with `entry` (its webhook key a `${OWN_HOOK_KEY}` reference) is
/// notified with a signature made with the expanded key, which never reaches the outbox.
fn signs_with_its_own_key(entry: &str) {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        smtp.port,
        &entry.replace("URL", url),
        "{attempts: 3, first: 0.1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    let own_key = "the-robots-own-signing-key-0123456789";
    let server = Server::start_with(&home, &[("OWN_HOOK_KEY", own_key)]);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: vacuum\n      requires: [vacuum-floor]\n",
    );
    let hits = services.wait_for(Duration::from_secs(10), |h| !find(h, "/robot").is_empty());
    let w = find(&hits, "/robot")[0];
    let stamp: i64 = w.headers["x-mess-timestamp"].parse().unwrap();
    assert_eq!(
        w.headers["x-mess-signature"],
        mess::notify::sign(
            own_key.as_bytes(),
            stamp,
            &w.headers["x-mess-delivery"],
            w.body.as_bytes()
        ),
        "signed with the expanded key, not the shared one nor the literal reference"
    );
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let done = home
        .path()
        .join(format!(".mess/outbox/done/{r}.robot.webhook.new.yaml"));
    while !done.exists() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(25));
    }
    let record = std::fs::read_to_string(&done).unwrap();
    assert!(
        !record.contains("secret") && !record.contains(own_key),
        "{record}"
    );
}

#[test]
fn an_executors_own_webhook_key_comes_from_the_environment_and_stays_out_of_the_outbox() {
    signs_with_its_own_key(
        "  robot:\n    capabilities: [vacuum-floor]\n    notify:\n      webhook: {url: URL/robot, secret: \"${OWN_HOOK_KEY}\"}\n",
    );
}

#[test]
fn an_executor_listed_as_a_sequence_signs_with_its_own_expanded_key_too() {
    signs_with_its_own_key(
        "  - id: robot\n    capabilities: [vacuum-floor]\n    notify:\n      webhook: {url: URL/robot, secret: \"${OWN_HOOK_KEY}\"}\n",
    );
}

#[test]
fn the_claimant_hears_answers_and_cancels_and_link_answers_name_their_channel() {
    let services = Recorder::start();
    let smtp = SmtpRecorder::start();
    let home = Home::with_config(&config(
        &services.url,
        smtp.port,
        "  teague-phone:\n    capabilities: [take-photo]\n    notify:\n      slack: U0TEAGUE\n",
        "{attempts: 3, first: 0.1s}",
    ));
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: photo of the fridge\n      requires: [take-photo]\n",
    );
    let posted = |n: usize| {
        services.wait_for(Duration::from_secs(10), |h| {
            find(h, "/slack/chat.postMessage").len() >= n
        })
    };
    let hits = posted(1);
    let body: Value =
        serde_json::from_str(&find(&hits, "/slack/chat.postMessage")[0].body).unwrap();
    let url = body["blocks"][2]["elements"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = url.split("token=").nth(1).unwrap().to_owned();
    // The executor answers through the link from Slack: the message says it came by slack.
    let through_link = |yaml: String| {
        let (status, body) = server.send(
            "POST",
            &format!("/thread/{r}?token={token}"),
            &[("content-type", "application/yaml")],
            yaml.as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
    };
    through_link(format!(
        "MESS:\n  - status:\n      re: {r}\n      code: needs_input\n      questions:\n        - field: shelf\n          question: Which shelf?\n"
    ));
    let shown = home.ok(&["show", &r]);
    assert!(shown.contains("channel: slack"), "{shown}");
    assert!(
        shown.contains("notified teague-phone via slack"),
        "the notice is in the history:\n{shown}"
    );
    // The requestor answers: the claimant hears of it on its channel.
    let (status, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - reply:\n      re: {r}\n      answers:\n        shelf: top\n"),
    );
    assert_eq!(status, 200, "{body}");
    let hits = posted(2);
    let second: Value =
        serde_json::from_str(&find(&hits, "/slack/chat.postMessage")[1].body).unwrap();
    assert!(
        second["text"]
            .as_str()
            .unwrap()
            .contains("Your questions were answered: photo of the fridge"),
        "{second}"
    );
    // And when the requestor cancels.
    let (status, body) = server.post_yaml(
        &agent,
        &format!("MESS:\n  - cancel:\n      re: {r}\n      reason: not needed\n"),
    );
    assert_eq!(status, 200, "{body}");
    let hits = posted(3);
    let third: Value =
        serde_json::from_str(&find(&hits, "/slack/chat.postMessage")[2].body).unwrap();
    assert!(
        third["text"]
            .as_str()
            .unwrap()
            .contains("Cancelled by the requestor: photo of the fridge"),
        "{third}"
    );
}
