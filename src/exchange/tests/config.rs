//! Config messages and config.yaml: registering executors and rules, who owns a registration,
//! problems reported rather than fatal, webhook targets and channel settings.

use super::*;

#[test]
fn config_messages_register_executors_and_rules_at_once() {
    let f = fixture("");
    let r = f.request(
        "claude-agent",
        "intent: print a clip\nrequires: [3d-print-fdm]",
    );
    assert!(f.status("prusa", &r, "code: claimed").is_err());
    let answer = f.ok(
        "admin",
        "MESS:
  - config:
      executor:
        id: prusa
        name: Prusa MK4
        capabilities:
          - 3d-print-fdm: { level: expert }
        availability: always
        notify: { webhook: http://127.0.0.1:9/prusa }
  - config:
      routing:
        rules:
          - match: { capability: 3d-print-fdm }
            prefer: [prusa]
",
    );
    assert_eq!(answer.content().count(), 2);
    let stored = f.registration("prusa");
    assert!(
        stored.contains("notify:") && stored.contains("level: expert"),
        "unknown fields kept:\n{stored}"
    );
    f.status("prusa", &r, "code: claimed").unwrap();
    let next = f.request("claude-agent", "intent: another\nrequires: [3d-print-fdm]");
    assert!(
        f.env(&next)
            .history
            .iter()
            .any(|h| h.note.as_deref().is_some_and(|n| n.contains("rule 1")))
    );
}

#[test]
fn a_refused_request_leaves_the_config_of_the_same_message_unwritten() {
    let f = fixture("");
    f.refused(
        "claude-agent",
        "MESS:\n  - config:\n      executor:\n        id: sneaky\n  - request:\n      id: a\n      intent: x\n  - request:\n      id: a\n      intent: y\n",
        ErrorKind::Invalid,
        "ids in one message must differ",
    );
    assert!(!f.dir.path().join("executors/sneaky.yaml").exists());
}

#[test]
fn registrations_belong_to_their_registrant_and_config_yaml_to_its_owner() {
    let f = fixture(EXECUTORS);
    let msg = |id: &str, cap: &str| {
        format!(
            "MESS:\n  - config:\n      executor:\n        id: {id}\n        capabilities: [{cap}]\n"
        )
    };
    f.refused(
        "random-agent",
        &msg("teague-phone", "nothing"),
        ErrorKind::Forbidden,
        "defined in config.yaml",
    );
    f.ok("admin", &msg("prusa", "3d-print-fdm"));
    f.refused(
        "random-agent",
        &msg("prusa", "nothing"),
        ErrorKind::Forbidden,
        "registered by admin",
    );
    f.ok("prusa", &msg("prusa", "3d-print-resin"));
    f.ok("admin", &msg("prusa", "3d-print-fdm"));
    let stored = f.registration("prusa");
    assert!(stored.contains("registered_by: admin"), "{stored}");
    f.refused(
        "admin",
        &msg("../escape", "x"),
        ErrorKind::Invalid,
        "MESS[0].config.executor.id",
    );
}

#[test]
fn config_problems_are_reported_not_fatal() {
    let f = fixture(
        "executors:\n  good:\n    capabilities: [a]\n    notify: {pager: '555'}\n  \"../bad\":\n    capabilities: [a]\nrouting:\n  - match: {capability: a}\n    prefer: [nobody]\n  - match: {intent: x}\n    prefer: [good]\n",
    );
    let problems = f.ex.config_problems();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("routing rule 2: match on intent is not understood")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("\"../bad\"")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("prefers nobody")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("executor good: notify.pager: unknown channel")),
        "{problems:?}"
    );
    let r = f.request("claude-agent", "intent: x\nrequires: [a]");
    f.status("good", &r, "code: claimed").unwrap();
}

#[test]
fn a_keys_registration_may_point_webhooks_only_where_allowed_and_records_how_it_came() {
    use crate::exchange::auth::Role;
    use crate::exchange::directory::Origin;
    let keyed = Sender {
        id: "robo".to_owned(),
        channel: "http".to_owned(),
        role: Some(Role::Executor),
        callback: None,
    };
    let register = |f: &Fixture, who: &Sender, hook: &str| {
        f.ex.intake().submit_text(
            &format!("MESS:\n  - config:\n      executor:\n        id: robo\n        capabilities: [x]\n        notify: {{ntfy: robo-topic, webhook: '{hook}'}}\n"),
            who,
        )
    };
    let f = fixture("");
    let e = register(&f, &keyed, "http://127.0.0.1:9/hook").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(
        e.to_string().starts_with(
            "MESS[0].config.executor.notify.webhook: 127.0.0.1 is not a public address"
        ),
        "{e}"
    );
    let e = register(&f, &keyed, "https://robot.example/a b").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("MESS[0].config.executor.notify.webhook"),
        "{e}"
    );
    assert!(!f.dir.path().join("executors/robo.yaml").exists());
    // The operator on this machine (no key) may point anywhere.
    register(&f, &Sender::new("robo", "cli"), "http://127.0.0.1:9/hook").unwrap();
    assert_eq!(
        Directory::load(f.ex.store()).origin("robo"),
        Some(&Origin::Registration {
            by: Some("robo".to_owned()),
            by_key: false
        })
    );

    let mut settings = Settings::defaults();
    settings.dispatch.webhook_allow = crate::notify::Allow::parse(&["127.0.0.0/8"]).unwrap();
    let g = fixture_with("", settings);
    register(&g, &keyed, "http://127.0.0.1:9/hook").unwrap();
    let stored = g.registration("robo");
    assert!(stored.contains("registered_with: key"), "{stored}");
    // A file without the field (an older version's) counts as key-made.
    if crate::store::testing::on_files() {
        std::fs::write(
            g.dir.path().join("executors/robo.yaml"),
            stored.replace("registered_with: key\n", ""),
        )
        .unwrap();
        assert!(matches!(
            Directory::load(g.ex.store()).origin("robo"),
            Some(Origin::Registration { by_key: true, .. })
        ));
    }
}

#[test]
fn executors_on_channels_without_their_settings_are_config_problems() {
    let mut settings = Settings::defaults();
    settings.dispatch.unconfigured = vec![("slack", "dispatch.slack.bot_token")];
    let f = fixture_with(EXECUTORS, settings);
    let problems = f.ex.config_problems();
    assert_eq!(
        problems,
        vec![
            "executor teague-phone notifies on slack, but dispatch.slack.bot_token is not set: those notices will fail"
                .to_owned()
        ]
    );
    assert!(fixture(EXECUTORS).ex.config_problems().is_empty());
}
