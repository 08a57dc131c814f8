//! Acting where people are: Claim / Approve / Deny buttons in Slack, Telegram and Discord
//! messages, ntfy's http actions, email's act links and replies in a Matrix room, each against
//! a local server that plays the platform (its signature scheme included): a press acts as
//! the notified executor with the platform recorded as the channel, the message is updated
//! to say what happened, and a forged, stale or replayed press is refused and changes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::routing::{get, put};
use serde_json::{Value, json};

use crate::support::Home;
use crate::support::recorder::{Hit, Recorder, SmtpRecorder};
use crate::support::server::Server;

const SLACK_SECRET: &str = "slack-signing-secret-for-tests";
const TELEGRAM_SECRET: &str = "telegram-secret-token-for-tests";
/// The Discord application's key pair (a fixed seed: the test plays Discord's side).
const DISCORD_SEED: [u8; 32] = [7; 32];

fn discord_keys() -> ring::signature::Ed25519KeyPair {
    ring::signature::Ed25519KeyPair::from_seed_unchecked(&DISCORD_SEED).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn config(services: &str, smtp: u16, homeserver: &str) -> String {
    use ring::signature::KeyPair;
    let public = hex(discord_keys().public_key().as_ref());
    format!(
        "agent_id: claude-agent
dispatch:
  public_url: https://mess.example
  timeout: 2s
  retry: {{attempts: 3, first: 0.1s}}
  slack: {{bot_token: xoxb-test, signing_secret: {SLACK_SECRET}, base_url: {services}/slack}}
  telegram: {{bot_token: '123:tg', secret_token: {TELEGRAM_SECRET}, base_url: {services}/telegram}}
  discord: {{application_id: '555', public_key: {public}, bot_token: discord-bot, base_url: {services}/discord}}
  ntfy: {{base_url: {services}/ntfy}}
  email: {{smtp_host: 127.0.0.1, smtp_port: {smtp}, security: none, from: mess@example.org}}
  matrix: {{homeserver: {homeserver}, access_token: mx-token, room: '!room:hs.test'}}
executors:
  ana:
    capabilities: [look]
    notify: {{slack: U0ANA, telegram: '1001'}}
  ben:
    capabilities: [look]
    notify: {{discord: '123456789012345678', email: ben@example.org}}
  cy:
    capabilities: [look]
    notify: {{ntfy: cy-topic, matrix: default}}
"
    )
}

/// Every platform played locally, and an exchange notifying ana, ben and cy on them.
struct Stage {
    services: Recorder,
    smtp: SmtpRecorder,
    hs: Homeserver,
    home: Home,
    agent: String,
    server: Server,
}

impl Stage {
    fn start() -> Stage {
        let services = Recorder::start();
        let smtp = SmtpRecorder::start();
        let (hs, hs_url) = Homeserver::start();
        let home = Home::with_config(&config(&services.url, smtp.port, &hs_url));
        let agent = home.token("agent", "claude-agent");
        let server = Server::start(&home);
        Stage {
            services,
            smtp,
            hs,
            home,
            agent,
            server,
        }
    }
}

pub(crate) fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the platforms received once a new request's notices reached every channel of the
/// stage that answers at once (Slack, Telegram, ntfy, Discord).
fn heard_on_every_channel(services: &Recorder) -> Vec<Hit> {
    services.wait_for(Duration::from_secs(15), |h| {
        [
            "/slack/chat.postMessage",
            "/telegram/bot123:tg/sendMessage",
            "/ntfy/cy-topic",
            "/discord/channels/123456789012345678/messages",
        ]
        .iter()
        .all(|path| !hits_at(h, path).is_empty())
    })
}

fn hits_at<'a>(hits: &'a [Hit], path: &str) -> Vec<&'a Hit> {
    hits.iter().filter(|h| h.path.contains(path)).collect()
}

fn create(server: &Server, agent: &str, yaml: &str) -> String {
    let (status, body) = server.post_yaml(agent, yaml);
    assert_eq!(status, 200, "{body}");
    json_of(&body)["MESS"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|p| p["ack"]["ref"].as_str())
        .unwrap()
        .to_owned()
}

fn status_of(home: &Home, r: &str) -> Value {
    json_of(&home.ok(&["status", r, "--format", "json"]))
}

/// A Slack interaction as Slack posts it: the form, its timestamp and its `v0` signature.
pub(crate) fn slack_press(
    server: &Server,
    value: &str,
    at: i64,
    secret: &str,
) -> (u16, String, Vec<u8>) {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U0ANA", "username": "ana"},
        "container": {"type": "message", "channel_id": "C0123", "message_ts": "1769882400.000100"},
        "actions": [{"action_id": "mess_approve", "value": value, "type": "button"}],
    });
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish();
    let (status, answer) = send_slack(server, body.as_bytes(), at, secret);
    (status, answer, body.into_bytes())
}

fn send_slack(server: &Server, body: &[u8], at: i64, secret: &str) -> (u16, String) {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{at}:").as_bytes());
    mac.update(body);
    let signature = format!("v0={}", hex(&mac.finalize().into_bytes()));
    server.send(
        "POST",
        "/hooks/slack",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("X-Slack-Request-Timestamp", &at.to_string()),
            ("X-Slack-Signature", &signature),
        ],
        body,
    )
}

fn telegram_press(server: &Server, id: &str, data: &str, secret: &str) -> (u16, String) {
    let update = json!({"update_id": 1, "callback_query": {
        "id": id, "from": {"id": 1001, "username": "ana"}, "data": data,
        "message": {"message_id": 42, "chat": {"id": 1001}}}});
    server.send(
        "POST",
        "/hooks/telegram",
        &[
            ("Content-Type", "application/json"),
            ("X-Telegram-Bot-Api-Secret-Token", secret),
        ],
        update.to_string().as_bytes(),
    )
}

fn discord_send(
    server: &Server,
    interaction: &Value,
    at: i64,
    keys: &ring::signature::Ed25519KeyPair,
) -> (u16, String) {
    let body = interaction.to_string();
    let signed = format!("{at}{body}");
    let signature = hex(keys.sign(signed.as_bytes()).as_ref());
    server.send(
        "POST",
        "/hooks/discord",
        &[
            ("Content-Type", "application/json"),
            ("X-Signature-Ed25519", &signature),
            ("X-Signature-Timestamp", &at.to_string()),
        ],
        body.as_bytes(),
    )
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The code in a button's data (`verb:CODE`) or act address (`/r/CODE/verb`).
fn code_in(text: &str, after: &str) -> String {
    let at = text
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in {text}"))
        + after.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect()
}

/// A Matrix homeserver as far as the bot uses it: who it is, a sync that hands out the events
/// a test puts in a room, events by id, and sends (recorded, each given an event id).
#[derive(Clone, Default)]
struct Homeserver {
    state: Arc<Mutex<Rooms>>,
}

#[derive(Default)]
struct Rooms {
    /// Every event by id: the bot's sends and what the test put in.
    events: HashMap<String, Value>,
    /// What the bot sent, in order: (room, event id, content).
    sent: Vec<(String, String, Value)>,
    /// Events waiting for the next sync: (room, event).
    waiting: Vec<(String, Value)>,
    batch: u64,
}

const BOT: &str = "@mess:hs.test";

impl Homeserver {
    fn start() -> (Homeserver, String) {
        let hs = Homeserver::default();
        let port = crate::support::recorder::serve(
            axum::Router::new()
                .route(
                    "/_matrix/client/v3/account/whoami",
                    get(|| async { axum::Json(json!({"user_id": BOT})) }),
                )
                .route("/_matrix/client/v3/sync", get(sync))
                .route("/_matrix/client/v3/rooms/{room}/event/{id}", get(event))
                .route(
                    "/_matrix/client/v3/rooms/{room}/send/{kind}/{txn}",
                    put(send),
                )
                .with_state(hs.clone()),
        );
        (hs, format!("http://127.0.0.1:{port}"))
    }

    fn sent(&self) -> Vec<(String, String, Value)> {
        self.state.lock().unwrap().sent.clone()
    }

    /// Puts `event` into `room` (from someone else), for the next sync.
    fn post(&self, room: &str, id: &str, sender: &str, kind: &str, content: Value) {
        let event = json!({"event_id": id, "sender": sender, "type": kind, "content": content});
        let mut s = self.state.lock().unwrap();
        s.events.insert(id.to_owned(), event.clone());
        s.waiting.push((room.to_owned(), event));
    }
}

async fn sync(
    State(hs): State<Homeserver>,
    Query(q): Query<HashMap<String, String>>,
) -> axum::Json<Value> {
    // A long poll: the first sync answers at once, later ones wait a little for events.
    if q.contains_key("since") {
        for _ in 0..10 {
            if !hs.state.lock().unwrap().waiting.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut s = hs.state.lock().unwrap();
    s.batch += 1;
    let mut join = serde_json::Map::new();
    for (room, event) in std::mem::take(&mut s.waiting) {
        let entry = join
            .entry(room)
            .or_insert_with(|| json!({"timeline": {"events": []}}));
        entry["timeline"]["events"]
            .as_array_mut()
            .unwrap()
            .push(event);
    }
    axum::Json(json!({"next_batch": format!("s{}", s.batch), "rooms": {"join": join}}))
}

async fn event(
    State(hs): State<Homeserver>,
    Path((_room, id)): Path<(String, String)>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match hs.state.lock().unwrap().events.get(&id) {
        Some(e) => axum::Json(e.clone()).into_response(),
        None => (axum::http::StatusCode::NOT_FOUND, "{}").into_response(),
    }
}

async fn send(
    State(hs): State<Homeserver>,
    Path((room, _kind, txn)): Path<(String, String, String)>,
    axum::Json(content): axum::Json<Value>,
) -> axum::Json<Value> {
    let mut s = hs.state.lock().unwrap();
    // A transaction sent again is the same event, as Matrix has it.
    if let Some((_, id, _)) = s.sent.iter().find(|(_, id, _)| id == &format!("$t-{txn}")) {
        return axum::Json(json!({"event_id": id}));
    }
    let id = format!("$t-{txn}");
    s.events.insert(
        id.clone(),
        json!({"event_id": id, "sender": BOT, "type": "m.room.message", "content": content}),
    );
    s.sent.push((room, id.clone(), content));
    axum::Json(json!({"event_id": id}))
}

#[test]
fn approvals_are_decided_from_slack_email_and_matrix_and_a_second_press_or_a_forgery_changes_nothing()
 {
    let Stage {
        services,
        smtp,
        hs,
        home,
        agent,
        server,
    } = Stage::start();
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: pay invoice 42\n      approval: {from: [ana, ben, cy], need: 2}\n",
    );
    // Every approver hears with Approve and Deny, on every channel.
    let hits = heard_on_every_channel(&services);
    let slack = json_of(&hits_at(&hits, "/slack/chat.postMessage")[0].body);
    let buttons = &slack["blocks"][2]["elements"];
    assert_eq!(buttons[0]["text"]["text"], "Approve", "{slack}");
    assert_eq!(buttons[1]["text"]["text"], "Deny", "{slack}");
    assert_eq!(buttons[2]["text"]["text"], "Open", "{slack}");
    let approve = buttons[0]["value"].as_str().unwrap().to_owned();
    assert!(approve.starts_with("approve:"), "{approve}");
    let telegram = json_of(&hits_at(&hits, "/sendMessage")[0].body);
    let tg_approve = telegram["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(tg_approve.len() <= 64, "{tg_approve}");

    // Forged, stale and replayed presses are refused and change nothing.
    let (status, _, _) = slack_press(&server, &approve, now(), "not-the-secret");
    assert_eq!(status, 401);
    let (status, body, _) = slack_press(&server, &approve, now() - 600, SLACK_SECRET);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("five minutes"), "{body}");
    assert_eq!(
        status_of(&home, &r)["decisions"],
        Value::Null,
        "nothing decided yet"
    );

    // Ana approves in Slack: recorded as hers, through slack; her message says so.
    let at = now();
    let (status, body, sent) = slack_press(&server, &approve, at, SLACK_SECRET);
    assert_eq!(status, 200, "{body}");
    let (status, body) = send_slack(&server, &sent, at, SLACK_SECRET);
    assert_eq!(status, 401, "the same request again is a replay: {body}");
    let env = status_of(&home, &r);
    let decisions = env["decisions"]
        .as_array()
        .unwrap_or_else(|| panic!("{env}"));
    assert_eq!(decisions.len(), 1, "{env}");
    assert_eq!(decisions[0]["by"], "ana");
    assert_eq!(decisions[0]["channel"], "slack");
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        !hits_at(h, "/slack/chat.update").is_empty()
    });
    let update = json_of(&hits_at(&hits, "/slack/chat.update")[0].body);
    assert_eq!(update["channel"], "C0123");
    assert!(
        update["text"]
            .as_str()
            .unwrap()
            .starts_with("Approved by ana (1 of 2 approvals)"),
        "{update}"
    );

    // Ana again, from Telegram: the same person decides once, whatever the channel.
    let (status, body) = telegram_press(&server, "cb-1", &tg_approve, "wrong");
    assert_eq!(status, 401, "{body}");
    let (status, _) = telegram_press(&server, "cb-2", &tg_approve, TELEGRAM_SECRET);
    assert_eq!(status, 200);
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        !hits_at(h, "/answerCallbackQuery").is_empty()
    });
    let answer = json_of(&hits_at(&hits, "/answerCallbackQuery")[0].body);
    assert_eq!(answer["show_alert"], true, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("ana already decided"),
        "{answer}"
    );
    assert_eq!(
        status_of(&home, &r)["decisions"].as_array().unwrap().len(),
        1
    );

    // Ben's mail links: opening one shows what it would do and changes nothing; the form's
    // POST denies, with his reason.
    wait_until("ben's mail", || !smtp.mails().is_empty());
    let mail = smtp.mails()[0].data.clone();
    assert!(mail.contains("Approve: https://mess.example/r/"), "{mail}");
    let code = code_in(&mail, "Deny: https://mess.example/r/");
    let (status, page) = server.send("GET", &format!("/r/{code}/deny"), &[], b"");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("pay invoice 42") && page.contains("<form method=\"post\">"),
        "{page}"
    );
    assert_eq!(
        status_of(&home, &r)["decisions"].as_array().unwrap().len(),
        1
    );
    let (status, page) = server.send(
        "POST",
        &format!("/r/{code}/deny"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"reason=the+amount+is+wrong",
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Denied by ben (1 of 2 approvals)"), "{page}");
    let (status, _) = server.send("GET", "/r/AAAAAAAAAAAA/deny", &[], b"");
    assert_eq!(status, 404, "a code that is not ours");

    // Cy replies in the Matrix room: "approve" makes two of two.
    wait_until("the Matrix notice", || !hs.sent().is_empty());
    let (room, notice, content) = hs.sent()[0].clone();
    assert_eq!(room, "!room:hs.test");
    assert!(
        content["body"]
            .as_str()
            .unwrap()
            .contains("Reply to this message with approve or deny"),
        "{content}"
    );
    // A reply to a message the bot did not send is nobody's press.
    hs.post(
        &room,
        "$fake",
        "@mallory:hs.test",
        "m.room.message",
        json!({"body": "approve", "mess": content["mess"]}),
    );
    hs.post(
        &room,
        "$r0",
        "@mallory:hs.test",
        "m.room.message",
        json!({"body": "approve", "m.relates_to": {"m.in_reply_to": {"event_id": "$fake"}}}),
    );
    hs.post(
        &room,
        "$r1",
        "@cy:hs.test",
        "m.room.message",
        json!({"body": format!("> <{BOT}> Your approval is needed\n\napprove"),
               "m.relates_to": {"m.in_reply_to": {"event_id": notice}}}),
    );
    wait_until("cy's approval", || {
        status_of(&home, &r)["status"] == "completed"
    });
    let env = status_of(&home, &r);
    let channels: Vec<(&str, &str)> = env["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["by"].as_str().unwrap(), d["channel"].as_str().unwrap()))
        .collect();
    assert_eq!(
        channels,
        [("ana", "slack"), ("ben", "email"), ("cy", "matrix")],
        "{env}"
    );
    assert_eq!(env["decisions"][1]["reason"], "the amount is wrong");
    // The bot edits its notice to say what happened, and answers the reply.
    wait_until("the Matrix answer", || hs.sent().len() >= 3);
    let sent = hs.sent();
    let edit = sent
        .iter()
        .find(|(_, _, c)| c["m.relates_to"]["rel_type"] == "m.replace")
        .unwrap();
    assert_eq!(edit.2["m.relates_to"]["event_id"], notice.as_str());
    assert!(
        edit.2["m.new_content"]["body"]
            .as_str()
            .unwrap()
            .starts_with("Approved by cy (2 of 2 approvals; approved)"),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .all(|(_, _, c)| c["m.relates_to"]["m.in_reply_to"]["event_id"] != "$r0"),
        "the forged reply got no answer: {sent:?}"
    );
}

#[test]
fn claims_come_from_discord_ntfy_and_telegram_and_the_others_messages_follow() {
    let Stage {
        services,
        home,
        agent,
        server,
        ..
    } = Stage::start();
    let keys = discord_keys();
    // Discord checks the endpoint with a PING; a bad signature must be refused.
    let ping = json!({"id": "i0", "type": 1, "application_id": "555"});
    let (status, body) = discord_send(&server, &ping, now(), &keys);
    assert_eq!((status, json_of(&body)), (200, json!({"type": 1})));
    let other = ring::signature::Ed25519KeyPair::from_seed_unchecked(&[9; 32]).unwrap();
    let (status, _) = discord_send(&server, &ping, now(), &other);
    assert_eq!(status, 401);

    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: check the mailbox\n      requires: [look]\n",
    );
    let hits = heard_on_every_channel(&services);
    let discord = hits_at(&hits, "/discord/channels/123456789012345678/messages")[0];
    assert_eq!(discord.method, "POST");
    assert_eq!(discord.headers["authorization"], "Bot discord-bot");
    let message = json_of(&discord.body);
    let row = &message["components"][0]["components"];
    assert_eq!(row[0]["label"], "Claim", "{message}");
    assert_eq!(row[1]["style"], 5, "a link button to the page: {message}");
    assert_eq!(row[1]["label"], "Answer", "{message}");
    let custom_id = row[0]["custom_id"].as_str().unwrap().to_owned();
    let ntfy = hits_at(&hits, "/ntfy/cy-topic")[0];
    let actions = &ntfy.headers["x-actions"];
    assert!(
        actions.starts_with("http, Claim, https://mess.example/r/"),
        "{actions}"
    );
    assert!(actions.contains("method=POST"), "{actions}");
    let ntfy_code = code_in(actions, "https://mess.example/r/");
    let telegram = json_of(&hits_at(&hits, "/sendMessage")[0].body);
    let tg_claim = telegram["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();

    // A press signed long ago is a replay.
    let press = json!({"id": "i1", "type": 3, "application_id": "555",
        "member": {"user": {"id": "42", "username": "ben"}},
        "data": {"custom_id": custom_id, "component_type": 2}});
    let (status, _) = discord_send(&server, &press, now() - 3600, &keys);
    assert_eq!(status, 401);
    assert_eq!(status_of(&home, &r)["status"], "pending");
    // Ben claims from Discord: the answer updates his message in place.
    let at = now();
    let (status, body) = discord_send(&server, &press, at, &keys);
    assert_eq!(status, 200, "{body}");
    let answer = json_of(&body);
    assert_eq!(answer["type"], 7, "{answer}");
    assert!(
        answer["data"]["content"]
            .as_str()
            .unwrap()
            .contains("Claimed by ben"),
        "{answer}"
    );
    assert_eq!(answer["data"]["components"], json!([]));
    let (status, _) = discord_send(&server, &press, at, &keys);
    assert_eq!(status, 401, "the same interaction again");
    let env = status_of(&home, &r);
    assert_eq!(
        (env["status"].as_str(), env["executor"].as_str()),
        (Some("claimed"), Some("ben"))
    );

    // The others' messages say it was taken.
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        !hits_at(h, "/slack/chat.update").is_empty() && !hits_at(h, "/editMessageText").is_empty()
    });
    let update = json_of(&hits_at(&hits, "/slack/chat.update")[0].body);
    assert!(
        update["text"].as_str().unwrap().starts_with("Taken by ben"),
        "{update}"
    );
    let edit = json_of(&hits_at(&hits, "/editMessageText")[0].body);
    assert_eq!(
        edit["reply_markup"]["inline_keyboard"],
        json!([]),
        "its buttons go: {edit}"
    );

    // Cy's ntfy action and Ana's Telegram button come too late: nothing changes, and they hear why.
    let (status, page) = server.send("POST", &format!("/r/{ntfy_code}/claim"), &[], b"");
    assert_eq!(status, 409, "{page}");
    let (status, _) = telegram_press(&server, "cb-9", &tg_claim, TELEGRAM_SECRET);
    assert_eq!(status, 200);
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        !hits_at(h, "/answerCallbackQuery").is_empty()
    });
    let alert = json_of(&hits_at(&hits, "/answerCallbackQuery")[0].body);
    assert_eq!(alert["show_alert"], true, "{alert}");
    // Telegram repeats an update it thinks was lost: the repeat is taken once.
    let (status, _) = telegram_press(&server, "cb-9", &tg_claim, TELEGRAM_SECRET);
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(hits_at(&services.hits(), "/answerCallbackQuery").len(), 1);
    let env = status_of(&home, &r);
    assert_eq!(env["executor"], "ben", "{env}");
}

#[test]
fn without_their_secrets_the_hooks_do_not_exist_and_notices_carry_no_buttons() {
    let services = Recorder::start();
    let home = Home::with_config(&format!(
        "agent_id: claude-agent
dispatch:
  public_url: https://mess.example
  slack: {{bot_token: xoxb-test, base_url: {url}/slack}}
executors:
  ana: {{capabilities: [look], notify: {{slack: U0ANA}}}}
",
        url = services.url
    ));
    let agent = home.token("agent", "claude-agent");
    let server = Server::start(&home);
    for hook in ["/hooks/slack", "/hooks/telegram", "/hooks/discord"] {
        let (status, _) = server.send("POST", hook, &[("Content-Type", "application/json")], b"{}");
        assert_eq!(status, 404, "{hook}");
    }
    create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: look outside\n      requires: [look]\n",
    );
    let hits = services.wait_for(Duration::from_secs(10), |h| !h.is_empty());
    let slack = json_of(&hits_at(&hits, "/slack/chat.postMessage")[0].body);
    let elements = slack["blocks"][2]["elements"].as_array().unwrap();
    assert_eq!(elements.len(), 1, "only the page's button: {slack}");
    assert_eq!(elements[0]["text"]["text"], "Respond");
}

#[test]
fn a_confirmation_asked_of_named_people_is_given_from_their_discord_message() {
    let Stage {
        services,
        home,
        agent,
        server,
        ..
    } = Stage::start();
    let r = create(
        &server,
        &agent,
        "MESS:\n  - request:\n      intent: shut the water off\n      requires: [look]\n      confirm_before: true\n      confirm_by: {from: [ben], need: 1}\n",
    );
    home.ok(&["claim", &r, "--as", "ana"]);
    home.send_as(
        "ana",
        &format!("MESS:\n  - status:\n      re: {r}\n      code: needs_confirmation\n      action: close the main valve\n"),
    );
    // Ben hears that his confirmation is needed, with Approve and Deny.
    let hits = services.wait_for(Duration::from_secs(15), |h| {
        hits_at(h, "/discord/channels/")
            .iter()
            .any(|x| x.body.contains("confirmation is needed"))
    });
    let asked = hits_at(&hits, "/discord/channels/")
        .into_iter()
        .find(|x| x.body.contains("confirmation is needed"))
        .unwrap_or_else(|| panic!("{hits:#?}"));
    let message = json_of(&asked.body);
    let row = &message["components"][0]["components"];
    assert_eq!(
        (row[0]["label"].as_str(), row[1]["label"].as_str()),
        (Some("Approve"), Some("Deny")),
        "{message}"
    );
    let press = json!({"id": "c1", "type": 3, "application_id": "555",
        "member": {"user": {"id": "42"}}, "data": {"custom_id": row[0]["custom_id"]}});
    let (status, body) = discord_send(&server, &press, now(), &discord_keys());
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("Approved by ben (1 of 1 approvals; approved)"),
        "{body}"
    );
    let env = json_of(&home.ok(&["status", &r, "--format", "json"]));
    assert_eq!(env["confirmation"], "confirmed", "{env}");
    assert_eq!(env["decisions"][0]["channel"], "discord", "{env}");
    // Ana, who holds the work, hears she may go ahead.
    services.wait_for(Duration::from_secs(10), |h| {
        hits_at(h, "/slack/chat.postMessage")
            .iter()
            .any(|x| x.body.contains("Confirmed, go ahead"))
    });
    assert!(
        hits_at(&services.hits(), "/slack/chat.postMessage")
            .iter()
            .any(|x| x.body.contains("Confirmed, go ahead"))
    );
}
