//! Routing at the edge: the native exchange's capability rule (the SQL macro `route_for`) for
//! the executors the Worker can register, which have no schedules, places, environments,
//! capability metadata or routing rules. Eligible: every registered executor holding each
//! required capability; `on_demand` executors only when nobody else is. Ranked least loaded
//! first (threads it holds in `executing`), then by id. The reason reads as the macro's.

use std::collections::BTreeMap;

use mess_protocol::access::Roster;

use crate::home::EdgeRoster;

/// One executor a request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// The executor.
    pub executor: String,
    /// Why, in the native router's words.
    pub reason: String,
}

/// The executors a request requiring `requires` goes to, best first.
pub fn route(
    requires: &[String],
    roster: &EdgeRoster,
    load: &BTreeMap<String, usize>,
) -> Vec<Routed> {
    let capable: Vec<(&String, bool)> = roster
        .executors
        .iter()
        .filter(|(id, _)| roster.missing(id, requires).is_empty())
        .map(|(id, spec)| (id, spec.availability.as_deref() == Some("on_demand")))
        .collect();
    let all_on_demand = capable.iter().all(|(_, on_demand)| *on_demand);
    let mut eligible: Vec<(&String, bool)> = capable
        .into_iter()
        .filter(|(_, on_demand)| !on_demand || all_on_demand)
        .collect();
    eligible.sort_by_key(|(id, _)| (load.get(*id).copied().unwrap_or(0), (*id).clone()));
    let holds = if requires.is_empty() {
        "no capability required".to_owned()
    } else {
        format!("holds {}", requires.join(", "))
    };
    eligible
        .into_iter()
        .map(|(id, on_demand)| Routed {
            executor: id.clone(),
            reason: if on_demand {
                format!("{holds} (on demand: no other executor is eligible)")
            } else {
                holds.clone()
            },
        })
        .collect()
}
