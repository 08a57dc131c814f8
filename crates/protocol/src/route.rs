//! The capability rule of routing, for executors that declare no schedule, place, environment
//! or capability metadata and an exchange without routing rules: what the native exchange's SQL
//! (`route_for`) decides for them, written for builds without DuckDB (the Worker). Eligible:
//! every executor holding each required capability; `on_demand` executors only when nobody else
//! is. Ranked least loaded first (threads it holds in `executing`), then by id. The reasons read
//! as the SQL's. [`KNOWN_ANSWERS`] is run against both, which must agree.

/// An executor as this rule sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// Its id.
    pub id: &'a str,
    /// The capability ids it holds.
    pub capabilities: Vec<&'a str>,
    /// Whether it is `availability: on_demand`.
    pub on_demand: bool,
    /// Threads it holds in `executing`.
    pub load: usize,
}

/// One executor a request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// The executor.
    pub executor: String,
    /// Why, in the native router's words.
    pub reason: String,
}

/// The executors a request requiring `requires` goes to, best first.
pub fn by_capability(requires: &[String], candidates: &[Candidate<'_>]) -> Vec<Routed> {
    let capable: Vec<&Candidate<'_>> = candidates
        .iter()
        .filter(|c| {
            requires
                .iter()
                .all(|r| c.capabilities.contains(&r.as_str()))
        })
        .collect();
    let all_on_demand = capable.iter().all(|c| c.on_demand);
    let mut eligible: Vec<&Candidate<'_>> = capable
        .into_iter()
        .filter(|c| !c.on_demand || all_on_demand)
        .collect();
    eligible.sort_by(|a, b| a.load.cmp(&b.load).then(a.id.cmp(b.id)));
    let holds = if requires.is_empty() {
        "no capability required".to_owned()
    } else {
        format!("holds {}", requires.join(", "))
    };
    eligible
        .into_iter()
        .map(|c| Routed {
            executor: c.id.to_owned(),
            reason: if c.on_demand {
                format!("{holds} (on demand: no other executor is eligible)")
            } else {
                holds.clone()
            },
        })
        .collect()
}

/// The note of a routing decision in a thread's history (`dispatched`).
pub fn dispatched_note(routed: &[Routed]) -> String {
    let each: Vec<String> = routed
        .iter()
        .map(|r| format!("{}: {}", r.executor, r.reason))
        .collect();
    format!("routed to {}", each.join("; "))
}

/// One known answer: executors (`id`, capabilities, on demand, threads held), what a request
/// requires, and the note routing writes (`None`: nobody is eligible).
pub type KnownAnswer = (
    &'static [(&'static str, &'static [&'static str], bool, usize)],
    &'static [&'static str],
    Option<&'static str>,
);

/// Cases both routers must answer alike (the native exchange's SQL and [`by_capability`]).
pub const KNOWN_ANSWERS: &[KnownAnswer] = &[
    (
        &[("robo", &["vacuum-floor"], false, 0)],
        &["vacuum-floor"],
        Some("routed to robo: holds vacuum-floor"),
    ),
    (
        &[("robo", &["vacuum-floor"], false, 0)],
        &["take-photo"],
        None,
    ),
    (
        &[
            ("b-robo", &["vacuum-floor", "take-photo"], false, 0),
            ("a-robo", &["vacuum-floor"], false, 0),
        ],
        &["vacuum-floor"],
        Some("routed to a-robo: holds vacuum-floor; b-robo: holds vacuum-floor"),
    ),
    (
        &[
            ("a-robo", &["vacuum-floor"], false, 2),
            ("b-robo", &["vacuum-floor"], false, 1),
            ("c-robo", &["vacuum-floor"], false, 0),
        ],
        &["vacuum-floor"],
        Some(
            "routed to c-robo: holds vacuum-floor; b-robo: holds vacuum-floor; a-robo: holds vacuum-floor",
        ),
    ),
    (
        &[
            ("phone", &["take-photo"], true, 0),
            ("robo", &["take-photo", "vacuum-floor"], false, 0),
        ],
        &["take-photo"],
        Some("routed to robo: holds take-photo"),
    ),
    (
        &[
            ("phone", &["take-photo", "order-groceries"], true, 0),
            ("robo", &["take-photo"], false, 0),
        ],
        &["take-photo", "order-groceries"],
        Some(
            "routed to phone: holds take-photo, order-groceries (on demand: no other executor is eligible)",
        ),
    ),
    (
        &[
            ("z-robo", &["mop"], false, 0),
            ("a-phone", &["take-photo"], true, 0),
        ],
        &[],
        Some("routed to z-robo: no capability required"),
    ),
    (&[], &["mop"], None),
];
