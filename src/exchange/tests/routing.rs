//! Routing: rules, default and capability; the background router's passes; zone, place,
//! environment and metadata matching and schedules in time zones.

use super::*;

#[test]
fn routing_follows_rules_then_default_then_capability() {
    let f = fixture(EXECUTORS);
    let note = |r: &str| {
        let env = f.env(r);
        env.history
            .iter()
            .find(|h| h.action == "dispatched")
            .and_then(|h| h.note.clone())
    };
    let vac = f.request("claude-agent", "intent: vacuum\nrequires: [vacuum-floor]");
    assert_eq!(
        note(&vac).unwrap(),
        "routed to roomba-kitchen: rule 1 (match capability vacuum-floor) prefers roomba-kitchen"
    );
    let photo = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    assert_eq!(
        note(&photo).unwrap(),
        "routed to teague-phone: rule 2 (default) prefers teague-phone"
    );
    let knife = f.request(
        "claude-agent",
        "intent: dice\nrequires: [precision-knife-work]",
    );
    assert_eq!(
        note(&knife).unwrap(),
        "routed to kitchen-robot: holds precision-knife-work"
    );
    let nobody = f.request("claude-agent", "intent: fly\nrequires: [flight]");
    assert_eq!(
        note(&nobody),
        None,
        "no eligible executor, nothing dispatched"
    );
    let meta = f.request(
        "claude-agent",
        "intent: print\nrequires:\n  - vacuum-floor: {areas: [kitchen]}",
    );
    assert_eq!(
        note(&meta),
        None,
        "capability metadata must be satisfied, and no executor here declares areas"
    );
}

fn background() -> Settings {
    Settings {
        route_in_background: true,
        ..Settings::defaults()
    }
}

fn dispatched_note(f: &Fixture, r: &str) -> Option<String> {
    f.env(r)
        .history
        .iter()
        .find(|h| h.action == "dispatched")
        .and_then(|h| h.note.clone())
}

fn refs(v: &[ThreadRef]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

#[test]
fn background_routing_acks_first_then_one_pass_routes_like_the_synchronous_path() {
    let now = fixture(EXECUTORS);
    let later = fixture_with(EXECUTORS, background());
    let bodies = [
        "intent: vacuum\nrequires: [vacuum-floor]",
        "intent: photo\nrequires: [take-photo]",
        "intent: dice\nrequires: [precision-knife-work]",
        "intent: anything",
        "intent: hurry\nrequires: [take-photo]\nconstraints:\n  timing:\n    urgency: now",
    ];
    let mut deferred = Vec::new();
    for body in bodies {
        let sync = now.request("claude-agent", body);
        let r = later.request("claude-agent", body);
        assert_eq!(
            dispatched_note(&later, &r),
            None,
            "acknowledged before routing"
        );
        deferred.push((dispatched_note(&now, &sync).unwrap(), r));
    }
    let pass = later.ex.routing().route_waiting(PassScope::All).unwrap();
    assert_eq!(pass.routed.len(), bodies.len());
    assert!(pass.waiting.is_empty());
    for (expected, r) in &deferred {
        assert_eq!(dispatched_note(&later, r).as_ref(), Some(expected), "{r}");
    }
    let again = later.ex.routing().route_waiting(PassScope::All).unwrap();
    assert_eq!(
        again,
        Pass::default(),
        "a routed thread is not routed twice"
    );
}

#[test]
fn the_router_skips_claimed_threads_and_retries_unroutable_ones() {
    let f = fixture_with(EXECUTORS, background());
    let taken = f.request("claude-agent", "intent: photo\nrequires: [take-photo]");
    let nobody = f.request("claude-agent", "intent: fly\nrequires: [flight]");
    f.status("teague-phone", &taken, "code: claimed").unwrap();
    let pass =
        f.ex.routing()
            .route_waiting(PassScope::Threads(vec![
                ThreadRef::parse(&taken).unwrap(),
                ThreadRef::parse(&nobody).unwrap(),
            ]))
            .unwrap();
    assert!(pass.routed.is_empty(), "{pass:?}");
    assert_eq!(refs(&pass.waiting), vec![nobody.clone()]);
    assert_eq!(dispatched_note(&f, &taken), None, "claimed before routing");

    // A pilot registers later: the next full pass routes the waiting thread.
    f.ok(
        "admin",
        "MESS:\n  - config:\n      executor:\n        id: pilot\n        capabilities: [flight]\n",
    );
    let pass = f.ex.routing().route_waiting(PassScope::All).unwrap();
    assert_eq!(refs(&pass.routed), vec![nobody.clone()]);
    assert_eq!(
        dispatched_note(&f, &nobody).unwrap(),
        "routed to pilot: holds flight"
    );
}

#[test]
fn the_router_routes_dependents_when_their_dependency_completes() {
    let f = fixture_with(EXECUTORS, background());
    let first = f.request(
        "claude-agent",
        "id: a\nintent: first\nrequires: [take-photo]",
    );
    let second = f.request(
        "claude-agent",
        "intent: second\nrequires: [vacuum-floor]\nconstraints:\n  depends_on: [a]",
    );
    let pass = f.ex.routing().route_waiting(PassScope::All).unwrap();
    assert_eq!(
        refs(&pass.routed),
        vec![first.clone()],
        "the dependent waits"
    );
    f.status("teague-phone", &first, "code: claimed").unwrap();
    f.status("teague-phone", &first, "code: completed").unwrap();
    assert_eq!(dispatched_note(&f, &second), None, "left to the router");
    let pass =
        f.ex.routing()
            .route_waiting(PassScope::Threads(vec![ThreadRef::parse(&first).unwrap()]))
            .unwrap();
    assert_eq!(refs(&pass.routed), vec![second.clone()]);
    assert!(
        dispatched_note(&f, &second)
            .unwrap()
            .contains("roomba-kitchen")
    );
}

#[test]
fn the_router_leaves_overdue_threads_to_expiry() {
    let f = fixture_with(EXECUTORS, background());
    let r = f.request(
        "claude-agent",
        "intent: soon\nrequires: [take-photo]\nneeded_by: 2026-01-31T17:30:00-08:00",
    );
    f.clock.advance(TimeDelta::hours(1));
    let pass = f.ex.routing().route_waiting(PassScope::All).unwrap();
    assert!(
        pass.routed.is_empty() && pass.waiting.is_empty(),
        "{pass:?}"
    );
    assert_eq!(dispatched_note(&f, &r), None);
}

#[test]
fn routing_over_the_checked_directory_decides_as_the_views_do() {
    let f = fixture(
        "
executors:
  teague-phone:
    capabilities: [take-photo, {check-visual: {camera: rear}}]
  roomba-kitchen:
    capabilities: [vacuum-floor]
    availability: schedule
    schedule: '0 8-22 * * 1-5'
  night-robot:
    capabilities: [vacuum-floor, mop-floor]
    availability: schedule
    schedule: '0 0-7,23 * * *'
  helper:
    capabilities: [vacuum-floor, take-photo]
    availability: on_demand
routing:
  - match: { capability: vacuum-floor, urgency: now }
    prefer: lower_latency
  - match: { capability: take-photo }
    prefer: [helper, teague-phone]
  - match: { capability: mop-floor, colour: red }
    prefer: [night-robot]
  - default:
    prefer: [teague-phone]
",
    );
    let db = f.ex.db().unwrap();
    let directory = Directory::load(f.ex.store()).routing();
    assert_eq!(directory.executors.len(), 4);
    for instant in [
        "2026-01-30T12:00:00Z",
        "2026-01-31T12:00:00Z",
        "2026-01-31T23:30:00Z",
    ] {
        let now = time::parse_timestamp(instant).unwrap();
        for (requires, urgency) in [
            (vec!["vacuum-floor"], None),
            (vec!["vacuum-floor"], Some("now")),
            (vec!["take-photo"], None),
            (vec!["check-visual"], None),
            (vec!["mop-floor"], None),
            (vec![], None),
            (vec!["flight"], None),
        ] {
            let requires: Vec<String> = requires.iter().map(|s| s.to_string()).collect();
            let views = db.route(&requires, None, urgency, &now, None).unwrap();
            let checked = db
                .route(&requires, None, urgency, &now, Some(&directory))
                .unwrap();
            assert_eq!(checked, views, "{requires:?} {urgency:?} at {instant}");
        }
    }
}

#[test]
fn requests_route_by_zone_place_environment_and_metadata_as_the_views_route_them() {
    // The fixture's clock: Saturday 2026-01-31 17:00 in Los Angeles, Sunday 02:00 in Berlin.
    let f = fixture(
        "timezone: America/Los_Angeles
executors:
  la-phone:
    capabilities: [take-photo, fetch]
    availability: schedule
    schedule: '0 8-22 * * sat,sun'
  berlin-phone:
    capabilities: [take-photo, fetch]
    availability: schedule
    schedule: '0 8-22 * * *'
    timezone: Europe/Berlin
  kitchen-arm:
    capabilities:
      - vacuum-floor: {areas: [kitchen]}
      - fetch
    access: [home/kitchen]
    environment: [indoor]
  roomba:
    capabilities: [vacuum-floor]
",
    );
    assert_eq!(f.ex.config_problems(), Vec::<String>::new());
    let note = |r: &str| {
        f.env(r)
            .history
            .iter()
            .find(|h| h.action == "dispatched")
            .and_then(|h| h.note.clone())
    };
    let mut threads = Vec::new();
    for (body, routed) in [
        (
            "intent: photo\nrequires: [take-photo]",
            Some("routed to la-phone: holds take-photo"),
        ),
        (
            "intent: vacuum\nrequires:\n  - vacuum-floor: {areas: [kitchen]}",
            Some("routed to kitchen-arm: holds vacuum-floor"),
        ),
        (
            "intent: vacuum\nrequires:\n  - vacuum-floor: {areas: [garage]}",
            None,
        ),
        (
            "intent: fetch\nrequires: [fetch]\nconstraints: {location: home/garage}",
            Some("routed to la-phone: holds fetch"),
        ),
        (
            "intent: fetch\nrequires: [fetch]\nconstraints: {environment: [outdoor]}",
            Some("routed to la-phone: holds fetch"),
        ),
        (
            "intent: fetch\nrequires: [fetch]\nconstraints: {location: home/kitchen/sink, environment: [indoor]}",
            Some("routed to kitchen-arm: holds fetch; la-phone: holds fetch"),
        ),
    ] {
        let r = f.request("claude-agent", body);
        assert_eq!(note(&r).as_deref(), routed, "{body}");
        threads.push(r);
    }
    // The same requests over the checked directory and over the views, at other hours and
    // across both zones' changes to daylight saving time.
    let db = f.ex.db().unwrap();
    let directory = Directory::load(f.ex.store()).routing();
    for instant in [
        "2026-02-01T16:00:00Z",
        "2026-03-08T09:59:00Z",
        "2026-03-08T15:00:00Z",
        "2026-03-08T16:00:00Z",
        "2026-03-29T00:59:00Z",
        "2026-03-29T06:00:00Z",
    ] {
        let now = time::parse_timestamp(instant).unwrap();
        for r in &threads {
            let file = f.ex.store().read(&ThreadRef::parse(r).unwrap()).unwrap();
            let wanted = crate::exchange::lifecycle::route_input(&file)
                .unwrap()
                .wanted(r.clone());
            assert_eq!(
                db.route_wanted(&wanted, &now, Some(&directory)).unwrap(),
                db.route_wanted(&wanted, &now, None).unwrap(),
                "{r} at {instant}"
            );
        }
    }
}

#[test]
fn unknown_time_zones_are_reported_and_their_schedules_allow_nothing() {
    let f = fixture(
        "timezone: Europe/Berln
executors:
  zoned:
    capabilities: [x]
    availability: schedule
    schedule: '* * * * *'
    timezone: Mars/Base
  defaulted:
    capabilities: [x]
    availability: schedule
    schedule: '* * * * *'
  always:
    capabilities: [x]
",
    );
    let problems = f.ex.config_problems();
    assert!(
        problems.iter().any(|p| p
            .starts_with("config.yaml: timezone: \"Europe/Berln\" is not a known IANA time zone")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p
            .starts_with("executor zoned.timezone: \"Mars/Base\" is not a known IANA time zone")
            && p.ends_with("that executor is skipped")),
        "{problems:?}"
    );
    let r = f.request("claude-agent", "intent: x\nrequires: [x]");
    assert_eq!(
        f.env(&r)
            .history
            .iter()
            .find(|h| h.action == "dispatched")
            .and_then(|h| h.note.clone())
            .as_deref(),
        Some("routed to always: holds x")
    );
}

/// The known answers of the capability rule (`protocol::route`, which the Worker build routes
/// with) give the same notes through the exchange's SQL routing.
#[test]
fn the_sql_router_gives_the_capability_rules_known_answers() {
    for (executors, requires, want) in crate::protocol::route::KNOWN_ANSWERS {
        let mut config = String::from("executors:\n");
        for (id, caps, on_demand, _) in *executors {
            config.push_str(&format!(
                "  {id}:\n    capabilities: [{}]\n",
                caps.join(", ")
            ));
            if *on_demand {
                config.push_str("    availability: on_demand\n");
            }
        }
        let f = fixture(if executors.is_empty() { "" } else { &config });
        // Each executor's load: threads it claimed (requests anyone may take).
        for (id, _, _, load) in *executors {
            for n in 0..*load {
                let r = f.request("claude-agent", &format!("intent: load {n} of {id}"));
                f.status(id, &r, "code: claimed").unwrap();
            }
        }
        let r = f.request(
            "claude-agent",
            &format!("intent: the case\nrequires: [{}]", requires.join(", ")),
        );
        assert_eq!(
            dispatched_note(&f, &r).as_deref(),
            *want,
            "{executors:?} requiring {requires:?}"
        );
    }
}
