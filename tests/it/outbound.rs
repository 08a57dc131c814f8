//! Outbound requests go only where the operator allows: webhooks registered with a key reach
//! public addresses or `dispatch.webhook.allow` (checked at the door and again when sending, so
//! a name that resolves to loopback gets nowhere), no client follows redirects, a failed
//! key-made webhook's note says nothing of the network, channel values cannot reshape a
//! request, `${VAR}` is expanded only in config.yaml, webhooks are signed out of the box, and a
//! channel without its settings is reported before anything is sent.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Home;
use crate::support::recorder::{Hit, Recorder, Script};
use crate::support::server::Server;

const WEBHOOK_SECRET: &str = "outbound-webhook-key-for-tests-0123456789";

/// A config.yaml sending to `services` (ntfy there too), with `webhook` as `dispatch.webhook`
/// and `executors` as the executors section.
fn config(services: &str, webhook: &str, executors: &str) -> String {
    format!(
        "agent_id: claude-agent
dispatch:
  public_url: https://mess.example
  timeout: 1s
  retry: {{attempts: 2, first: 0.1s, max: 0.2s}}
  webhook: {webhook}
  ntfy: {{base_url: {services}/ntfy}}
executors:
{executors}"
    )
}

fn key(home: &Home, role: &str, id: &str) -> String {
    home.ok(&["token", role, id]).trim().to_owned()
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or(Value::Null)
}

fn message(body: &str) -> String {
    json(body)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn create(server: &Server, agent: &str, requires: &str) -> String {
    let (status, body) = server.post_yaml(
        agent,
        &format!("MESS:\n  - request:\n      intent: do it\n      requires: [{requires}]\n"),
    );
    assert_eq!(status, 200, "{body}");
    json(&body)["MESS"][1]["ack"]["ref"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn find<'a>(hits: &'a [Hit], path: &str) -> Vec<&'a Hit> {
    hits.iter().filter(|h| h.path.contains(path)).collect()
}

/// Registers `id` (offering `{id}-work`) with `notify` (a YAML flow mapping) over HTTP with
/// `key`.
fn register(server: &Server, key: &str, id: &str, notify: &str) -> (u16, String) {
    register_for(server, key, id, &format!("{id}-work"), notify)
}

/// Registers `id` offering `capability` with `notify` over HTTP with `key`.
fn register_for(
    server: &Server,
    key: &str,
    id: &str,
    capability: &str,
    notify: &str,
) -> (u16, String) {
    server.post_yaml(
        key,
        &format!(
            "MESS:\n  - config:\n      executor:\n        id: {id}\n        capabilities: [{capability}]\n        notify: {notify}\n"
        ),
    )
}

/// The `notify_failed` notes of thread `r`, waiting until there are `n`.
fn failure_notes(home: &Home, r: &str, n: usize) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let text = home.ok(&["show", r]);
        let notes: Vec<String> = text
            .split("- action: notify_failed")
            .skip(1)
            .filter_map(|entry| {
                entry
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("note: "))
                    .map(|n| n.trim_matches(|c| c == '\'' || c == '"').to_owned())
            })
            .collect();
        if notes.len() >= n || Instant::now() > until {
            assert_eq!(notes.len(), n, "{text}");
            return notes;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_key_cannot_point_a_webhook_at_private_addresses_but_the_operator_and_the_allow_list_can() {
    let services = Recorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}}}"),
        "  {}\n",
    ));
    let robo = key(&home, "executor", "robo");
    let server = Server::start(&home);
    for target in [
        url.as_str(),
        "http://localhost:8080/hook",
        "http://LOCALHOST./hook",
        "http://printer.localhost/hook",
        "http://[::1]:9/hook",
        "http://[::]/hook",
        "http://0.0.0.0/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/hook",
        "http://224.0.0.1/hook",
        "http://[fd00::1]/hook",
        "http://[fe80::1]/hook",
        "http://[ff02::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://0x7f.1/hook",
        "http://2130706433/hook",
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "not a url",
    ] {
        let (status, reply) = register(&server, &robo, "robo", &format!("{{webhook: '{target}'}}"));
        assert_eq!(status, 422, "{target}: {reply}");
        assert!(
            message(&reply).starts_with("MESS[0].config.executor.notify.webhook"),
            "{target}: {reply}"
        );
        // The map form is checked the same way.
        let (status, reply) = register(
            &server,
            &robo,
            "robo",
            &format!("{{webhook: {{url: '{target}', secret: s}}}}"),
        );
        assert_eq!(status, 422, "{target}: {reply}");
    }
    assert!(!home.path().join("executors/robo.yaml").exists());
    // A public address is fine for a key; the registration records how it came, whatever
    // the message claims.
    let (status, reply) = server.post_yaml(
        &robo,
        "MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [robo-work]\n        registered_with: operator\n        notify: {webhook: 'https://93.184.215.14/hook'}\n",
    );
    assert_eq!(status, 200, "{reply}");
    let stored = std::fs::read_to_string(home.path().join("executors/robo.yaml")).unwrap();
    assert!(
        stored.contains("registered_with: key") && !stored.contains("registered_with: operator"),
        "{stored}"
    );

    // The operator, registering locally without a key, may point anywhere, and it is sent.
    let message_file = home.path().join("register.yaml");
    std::fs::write(
        &message_file,
        format!(
            "MESS:\n  - config:\n      executor:\n        id: local-robot\n        capabilities: [local-work]\n        notify: {{webhook: '{url}/local'}}\n"
        ),
    )
    .unwrap();
    home.ok(&[
        "send",
        message_file.to_str().unwrap(),
        "--as",
        "local-robot",
    ]);
    let stored = std::fs::read_to_string(home.path().join("executors/local-robot.yaml")).unwrap();
    assert!(stored.contains("registered_with: operator"), "{stored}");
    let agent = key(&home, "agent", "claude-agent");
    create(&server, &agent, "local-work");
    let hits = services.wait_for(Duration::from_secs(10), |h| !find(h, "/local").is_empty());
    assert_eq!(find(&hits, "/local").len(), 1, "{hits:#?}");
    drop(server);

    // With the recorder's address on the allow-list, a key may register it, and it is sent.
    let allowed = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}, allow: [127.0.0.1]}}"),
        "  {}\n",
    ));
    let robo = key(&allowed, "executor", "robo");
    let agent = key(&allowed, "agent", "claude-agent");
    let server = Server::start(&allowed);
    let (status, reply) = register(
        &server,
        &robo,
        "robo",
        &format!("{{webhook: '{url}/robo'}}"),
    );
    assert_eq!(status, 200, "{reply}");
    // The allow-list names addresses, not everything private.
    let (status, reply) = register(&server, &robo, "robo", "{webhook: 'http://10.0.0.1/hook'}");
    assert_eq!(status, 422, "{reply}");
    create(&server, &agent, "robo-work");
    let hits = services.wait_for(Duration::from_secs(10), |h| !find(h, "/robo").is_empty());
    assert_eq!(find(&hits, "/robo").len(), 1, "{hits:#?}");
}

#[test]
fn names_and_addresses_that_lead_inside_are_refused_when_sending_with_one_note_for_every_failure() {
    let services = Recorder::start();
    let url = &services.url;
    let port = url.rsplit(':').next().unwrap();
    // A closed port: bind one, then let it go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}}}"),
        "  {}\n",
    ));
    // Registrations already on disk (an older version wrote them; no `registered_with`, so they
    // count as key-made): the door never saw them, the sender must refuse them.
    std::fs::create_dir_all(home.path().join("executors")).unwrap();
    let on_disk = |id: &str, hook: &str| {
        std::fs::write(
            home.path().join(format!("executors/{id}.yaml")),
            format!("id: {id}\ncapabilities: [inside-work]\nnotify:\n  webhook: '{hook}'\nregistered_by: {id}\n"),
        )
        .unwrap();
    };
    on_disk("by-name", &format!("http://localhost:{port}/by-name"));
    on_disk("by-address", &format!("{url}/by-address"));
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let r = create(&server, &agent, "inside-work");
    let notes = failure_notes(&home, &r, 2);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        services.hits().is_empty(),
        "nothing reached the recorder: {:#?}",
        services.hits()
    );
    // The operator's record says which check refused each: the name by its resolved
    // addresses, the literal address before any connection.
    let record = |id: &str| {
        std::fs::read_to_string(
            home.path()
                .join(format!(".mess/outbox/failed/{r}.{id}.webhook.new.yaml")),
        )
        .unwrap()
    };
    let by_name = record("by-name");
    assert!(
        by_name.contains("localhost resolves only to addresses webhooks may not reach"),
        "{by_name}"
    );
    let by_address = record("by-address");
    assert!(
        by_address.contains("127.0.0.1 is not a public address"),
        "{by_address}"
    );
    drop(server);

    // Allowed, so the network answers differently each time; the notes do not.
    let allowed = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}, allow: [127.0.0.1, '::1/128']}}"),
        "  {}\n",
    ));
    let agent = key(&allowed, "agent", "claude-agent");
    let server = Server::start(&allowed);
    services.script(
        "/status-404",
        vec![Script::Status(404), Script::Status(404)],
    );
    services.script(
        "/status-500",
        vec![Script::Status(500), Script::Status(500)],
    );
    services.script(
        "/slow",
        vec![
            Script::Delay(Duration::from_secs(2)),
            Script::Delay(Duration::from_secs(2)),
        ],
    );
    for (id, hook) in [
        ("closed", format!("http://127.0.0.1:{closed}/closed")),
        ("missing", format!("{url}/status-404")),
        ("broken", format!("{url}/status-500")),
        ("slow", format!("{url}/slow")),
        ("plain", format!("http://[::1]:{port}/v6")),
    ] {
        let robot = key(&allowed, "executor", id);
        let (status, reply) = register_for(
            &server,
            &robot,
            id,
            "any-work",
            &format!("{{webhook: '{hook}'}}"),
        );
        assert_eq!(status, 200, "{id}: {reply}");
    }
    let r2 = create(&server, &agent, "any-work");
    let more = failure_notes(&allowed, &r2, 5);
    let mut all = notes;
    all.extend(more);
    let shapes: Vec<String> = all
        .iter()
        .map(|n| {
            let (head, tail) = n.split_once(" failed").unwrap_or((n, ""));
            assert!(head.starts_with("webhook to "), "{n}");
            tail.to_owned()
        })
        .collect();
    for s in &shapes {
        assert_eq!(s, &shapes[0], "one text for every failure: {all:#?}");
    }
    for word in [
        "HTTP",
        "404",
        "500",
        "connect",
        "timed",
        "refused",
        "resolve",
        "127.0.0.1",
        "localhost",
    ] {
        assert!(!shapes[0].contains(word), "{word} in {all:#?}");
    }
}

#[test]
fn no_channel_follows_a_redirect() {
    let services = Recorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}, allow: [127.0.0.1]}}"),
        &format!(
            "  hook-robot:\n    capabilities: [hop]\n    notify:\n      webhook: {url}/hook\n      ntfy: hop-topic\n"
        ),
    ));
    services.script(
        "/hook",
        vec![
            Script::Redirect("/elsewhere"),
            Script::Redirect("/elsewhere"),
        ],
    );
    services.script(
        "/ntfy/hop-topic",
        vec![
            Script::Redirect("/elsewhere"),
            Script::Redirect("/elsewhere"),
        ],
    );
    services.script(
        "/keyed",
        vec![
            Script::Redirect("/elsewhere"),
            Script::Redirect("/elsewhere"),
        ],
    );
    let agent = key(&home, "agent", "claude-agent");
    let keyed = key(&home, "executor", "keyed");
    let server = Server::start(&home);
    let (status, reply) = register(
        &server,
        &keyed,
        "keyed",
        &format!("{{webhook: '{url}/keyed'}}"),
    );
    assert_eq!(status, 200, "{reply}");
    let r = create(&server, &agent, "hop");
    let k = create(&server, &agent, "keyed-work");
    failure_notes(&home, &r, 2);
    failure_notes(&home, &k, 1);
    let hits = services.hits();
    assert!(find(&hits, "/elsewhere").is_empty(), "{hits:#?}");
    // A redirect is an answer like any other: final for the operator's channels, retried like
    // every failure of a key-made webhook.
    assert_eq!(find(&hits, "/hook").len(), 1, "{hits:#?}");
    assert_eq!(find(&hits, "/ntfy/hop-topic").len(), 1, "{hits:#?}");
    assert_eq!(find(&hits, "/keyed").len(), 2, "{hits:#?}");
    // The operator's own channels say what happened.
    let shown = home.ok(&["show", &r]);
    assert!(shown.contains("webhook: HTTP 302"), "{shown}");
}

#[test]
fn channel_values_that_could_reshape_a_request_are_refused_or_skipped() {
    let services = Recorder::start();
    let url = &services.url;
    let home = Home::with_config(
        &config(
            url,
            &format!("{{secret: {WEBHOOK_SECRET}}}"),
            "  good-phone:
    capabilities: [look]
    notify:
      ntfy: good-topic
  half-phone:
    capabilities: [look]
    notify:
      ntfy: 'half/../../admin?x=1'
      email: \"half@example.org\\r\\nBcc: all@example.org\"
      webhook: URL/half
",
        )
        .replace("URL", url),
    );
    let robo = key(&home, "executor", "robo");
    let server = Server::start(&home);
    for (notify, field) in [
        ("{ntfy: 'a/../b'}", "ntfy"),
        ("{ntfy: 'topic?auth=x'}", "ntfy"),
        ("{ntfy: 'topic#x'}", "ntfy"),
        ("{ntfy: 'x', telegram: '12/../sendMessage'}", "telegram"),
        ("{telegram: '@a'}", "telegram"),
        ("{sms: '+1555 0100'}", "sms"),
        ("{sms: \"+15550100\\r\\nX-Injected: 1\"}", "sms"),
        ("{email: \"a@example.org\\nBcc: b@example.org\"}", "email"),
        ("{email: 'Alice <a@example.org>'}", "email"),
        ("{slack: 'C01/../../admin'}", "slack"),
        ("{slack: 'U0 X'}", "slack"),
        (
            "{webhook: \"https://example.com/\\r\\nX-Injected: 1\"}",
            "webhook",
        ),
    ] {
        let (status, reply) = register(&server, &robo, "robo", notify);
        assert_eq!(status, 422, "{notify}: {reply}");
        assert!(
            message(&reply).starts_with(&format!("MESS[0].config.executor.notify.{field}")),
            "{notify}: {reply}"
        );
    }
    assert!(!home.path().join("executors/robo.yaml").exists());
    // Accepted forms.
    let (status, reply) = register(
        &server,
        &robo,
        "robo",
        "{ntfy: robo_Topic-1, telegram: '-1001234567890', sms: '+15550100', email: robo@example.org, slack: '#robots'}",
    );
    assert_eq!(status, 200, "{reply}");

    // On disk already: reported by status and fsck, skipped; the rest is sent.
    let out = home.run(&["status"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("executor half-phone: notify.ntfy"),
        "{stderr}"
    );
    assert!(
        stderr.contains("executor half-phone: notify.email"),
        "{stderr}"
    );
    let out = home.run(&["fsck"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("executor half-phone: notify.ntfy"),
        "{stderr}"
    );
    let agent = key(&home, "agent", "claude-agent");
    create(&server, &agent, "look");
    let hits = services.wait_for(Duration::from_secs(10), |h| {
        !find(h, "/ntfy/good-topic").is_empty() && !find(h, "/half").is_empty()
    });
    assert_eq!(find(&hits, "/ntfy/good-topic").len(), 1, "{hits:#?}");
    assert_eq!(find(&hits, "/half").len(), 1, "{hits:#?}");
    std::thread::sleep(Duration::from_millis(300));
    let hits = services.hits();
    assert!(
        hits.iter()
            .all(|h| !h.path.contains("admin") && !h.path.contains("half/")),
        "{hits:#?}"
    );
    assert_eq!(hits.len(), 2, "{hits:#?}");
}

#[test]
fn a_registrations_secret_is_taken_literally_not_expanded_from_the_servers_environment() {
    let services = Recorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}, allow: [127.0.0.1]}}"),
        "  {}\n",
    ));
    let robo = key(&home, "executor", "robo");
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start_with(&home, &[("SERVER_ONLY_SECRET", "the-servers-own-secret")]);
    let (status, reply) = register(
        &server,
        &robo,
        "robo",
        &format!("{{webhook: {{url: '{url}/robo', secret: '${{SERVER_ONLY_SECRET}}'}}}}"),
    );
    assert_eq!(status, 200, "{reply}");
    let r = create(&server, &agent, "robo-work");
    let hits = services.wait_for(Duration::from_secs(10), |h| !find(h, "/robo").is_empty());
    let w = find(&hits, "/robo")[0];
    let stamp: i64 = w.headers["x-mess-timestamp"].parse().unwrap();
    let signed_with = |secret: &str| {
        mess::notify::sign(
            secret.as_bytes(),
            stamp,
            &w.headers["x-mess-delivery"],
            w.body.as_bytes(),
        )
    };
    assert_ne!(
        w.headers["x-mess-signature"],
        signed_with("the-servers-own-secret"),
        "the server's environment was used"
    );
    assert_eq!(
        w.headers["x-mess-signature"],
        signed_with("${SERVER_ONLY_SECRET}"),
        "the registration's value, as written"
    );
    assert!(w.body.starts_with(&format!("ref: {r}")));
}

#[test]
fn webhooks_are_signed_out_of_the_box_with_a_generated_key_the_operator_can_print() {
    let services = Recorder::start();
    let url = &services.url;
    let home = Home::with_config(&config(
        url,
        "{secret: '${UNSET_WEBHOOK_SECRET_FOR_TESTS}'}",
        &format!(
            "  robot:\n    capabilities: [vacuum-floor]\n    notify:\n      webhook: {url}/robot\n"
        ),
    ));
    let agent = key(&home, "agent", "claude-agent");
    let server = Server::start(&home);
    let r = create(&server, &agent, "vacuum-floor");
    let hits = services.wait_for(Duration::from_secs(10), |h| !find(h, "/robot").is_empty());
    let w = find(&hits, "/robot")[0];
    let printed = home.ok(&["webhook-secret"]);
    let generated = printed.trim();
    assert!(generated.len() >= 32, "{printed}");
    let file = home.path().join(".mess/webhook-secret");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), generated);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let stamp: i64 = w.headers["x-mess-timestamp"].parse().unwrap();
    assert_eq!(
        w.headers["x-mess-signature"],
        mess::notify::sign(
            generated.as_bytes(),
            stamp,
            &w.headers["x-mess-delivery"],
            w.body.as_bytes()
        ),
        "signed with the generated key"
    );
    assert_eq!(
        w.headers["x-mess-delivery"],
        format!("{r}.robot.webhook.new")
    );
    // The same key every time.
    assert_eq!(home.ok(&["webhook-secret"]), printed);
    let help = home.ok(&["--help"]);
    assert!(help.contains("webhook-secret"), "{help}");

    // With a configured key in effect, the generated one is not what signs: the command says so.
    let configured = Home::with_config(&config(
        url,
        &format!("{{secret: {WEBHOOK_SECRET}}}"),
        "  {}\n",
    ));
    let stderr = configured.fails(&["webhook-secret"], 1);
    assert!(stderr.contains("dispatch.webhook.secret"), "{stderr}");
}

#[test]
fn channels_without_their_settings_are_reported_before_anything_is_sent() {
    let home = Home::with_config(
        "agent_id: claude-agent
executors:
  teague-phone:
    capabilities: [take-photo]
    notify:
      slack: U0TEAGUE
      telegram: '1001'
      sms: '+15551234567'
      email: teague@example.org
      ntfy: teague-topic
      webhook: http://127.0.0.1:9/hook
",
    );
    let expected = [
        "teague-phone notifies on slack, but dispatch.slack.bot_token is not set",
        "teague-phone notifies on telegram, but dispatch.telegram.bot_token is not set",
        "teague-phone notifies on sms, but dispatch.twilio",
        "teague-phone notifies on email, but dispatch.email",
    ];
    for args in [["status"], ["fsck"]] {
        let out = home.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        for line in expected {
            assert!(stderr.contains(line), "{args:?}: {line}\n{stderr}");
        }
        assert!(
            !stderr.contains("on ntfy") && !stderr.contains("on webhook"),
            "{stderr}"
        );
    }
    let mut child = home
        .command(&["serve", "--addr", "127.0.0.1:0"])
        .env("MESS_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on"), "{line}");
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in expected {
        assert!(stderr.contains(line), "serve: {line}\n{stderr}");
    }
}
