//! Who may see and act on a thread, from its envelope and the executors in effect. The pure
//! half of the exchange's access rules: every exchange build (native or Worker) asks these, and
//! the native exchange's `access` module adds what needs its store (links, mail, listings).

use crate::envelope::Envelope;
use crate::status::{State, Status};
use crate::value::Value;

/// What the access rules and the thread rules need to know of the executors in effect.
pub trait Roster {
    /// Whether `id` is a registered executor.
    fn is_executor(&self, id: &str) -> bool;
    /// The capabilities of `requires` that executor `id` lacks (all of them when `id` is no
    /// registered executor).
    fn missing(&self, id: &str, requires: &[String]) -> Vec<String>;
}

// A roster shared between threads is still a roster (the native exchange keeps its directory
// in an `Arc`).
impl<T: Roster + ?Sized> Roster for std::sync::Arc<T> {
    fn is_executor(&self, id: &str) -> bool {
        (**self).is_executor(id)
    }

    fn missing(&self, id: &str, requires: &[String]) -> Vec<String> {
        (**self).missing(id, requires)
    }
}

/// The envelope field that names the one executor a thread is offered to (a delegation
/// accepted by its requestor); nobody else may take it.
pub const OFFERED_TO: &str = "offered_to";

/// Whether `who` is a party to the thread of `env`: its requestor or its claimant.
///
/// On a request asking for several answers every slot holder is a party, and on an
/// approval every approver who decided.
pub fn party(who: &str, env: &Envelope) -> bool {
    env.requestor == who
        || env.executor.as_deref() == Some(who)
        || env.hands.slot_of(who).is_some()
        || env.hands.decision_of(who).is_some()
}

/// How many rungs of the thread's escalation ladder the offer has reached (the exchange
/// records each in history as it climbs).
pub fn rungs_reached(env: &Envelope) -> usize {
    env.history
        .iter()
        .filter(|h| h.action == "escalated" && h.extra.contains_key("rung"))
        .count()
}

/// Whether `who` is named, by id or by a capability it holds, on the approval of `env` or on
/// a rung of its ladder the offer has reached.
pub fn named(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    if !roster.is_executor(who) {
        return false;
    }
    let holds = |cap: &str| roster.missing(who, &[cap.to_owned()]).is_empty();
    env.hands.names(who, rungs_reached(env), &holds)
}

/// Whether `who` may decide on the approval of `env`: it asks for approval and names `who`.
pub fn may_decide(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    env.hands.approval.is_some() && named(who, env, roster)
}

/// Whether `who` may confirm the claimant's `needs_confirmation` on a `confirm_by` request now:
/// the question is open and `confirm_by` names `who` (by id or a capability it holds).
pub fn may_confirm(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    env.confirmation == Some(crate::envelope::ConfirmState::Requested)
        && !env.status.is_terminal()
        && roster.is_executor(who)
        && env.hands.names_confirmer(who, &|cap| {
            roster.missing(who, &[cap.to_owned()]).is_empty()
        })
}

/// Whether `who` is a registered executor holding every capability the thread requires (and
/// the one it is offered to, when it is offered to one).
pub fn eligible(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    if let Some(only) = env.extra.get(OFFERED_TO).and_then(Value::scalar_text)
        && only != who
    {
        return false;
    }
    // An approval is offered to its approvers alone; a rung of a ladder the offer reached
    // opens the work to those it names, whatever the request requires.
    if env.hands.approval.is_some() {
        return may_decide(who, env, roster);
    }
    if !env.hands.escalate.is_empty() && named(who, env, roster) {
        return true;
    }
    roster.is_executor(who) && roster.missing(who, &env.requires).is_empty()
}

/// Whether `who` may see the thread of `env`, given the executors in effect.
pub fn may_see(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    party(who, env)
        || (env.status == Status::Pending && eligible(who, env, roster))
        || may_confirm(who, env, roster)
}

/// What can be said about a change without reading the roster: `Some` when the answer is
/// known from the envelope alone (a party sees it; nobody else sees a thread that is no longer
/// pending), `None` when it depends on the executors in effect.
pub fn quick_verdict(who: &str, env: &Envelope) -> Option<bool> {
    if party(who, env) {
        Some(true)
    } else if env.status != Status::Pending {
        Some(false)
    } else {
        None
    }
}

/// Whether `who` may address a message to the thread of `env` and hear why it is refused: a
/// party to it, or an executor able to take it while the thread is open (one that lost a claim
/// race learns that it lost, as the lifecycle rules promise it a conflict, not silence). A
/// thread that has ended is its parties' alone, so nobody can probe which ended threads exist.
pub fn may_address(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    party(who, env)
        || (!env.status.is_terminal() && eligible(who, env, roster))
        || may_confirm(who, env, roster)
}

/// Whether `who` may act on the thread of `env` now as an executor (a suggestion): its
/// claimant while it holds it, or, while the thread is pending, an executor able to take it.
pub fn may_act_now(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    if env.status == Status::Pending {
        return eligible(who, env, roster);
    }
    !env.status.is_terminal()
        && (env.executor.as_deref() == Some(who)
            || env
                .hands
                .slot_of(who)
                .is_some_and(|(_, s)| !s.status.is_terminal()))
}

/// Whether a request may depend on the thread of `env`: only on threads its sender may see.
pub fn may_depend_on(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    may_see(who, env, roster)
}

/// Whether the holder of a link for `executor` may still read the thread of `env`: while
/// nobody has taken it, and afterwards only if `executor` is the one who took it.
///
/// On a request with several slots or an approval, nobody "takes" the whole thread: a link
/// reads it while it is open to all, and afterwards only for a slot holder or a decider.
pub fn link_reads(executor: &str, env: &Envelope) -> bool {
    if env.hands.multi() || env.hands.approval.is_some() {
        return env.status == Status::Pending || party(executor, env);
    }
    // A confirmer named by id reads the thread while its confirmation is asked (a link cannot
    // tell which capabilities its holder has; those confirm through a key or the CLI).
    if env.confirmation == Some(crate::envelope::ConfirmState::Requested)
        && env
            .hands
            .confirm_by
            .as_ref()
            .is_some_and(|c| c.from.iter().any(|x| x == executor))
    {
        return true;
    }
    env.executor
        .as_deref()
        .is_none_or(|taker| taker == executor)
}

/// The order of every thread listing: work waiting for an executor first, in queue order
/// (urgent first, then the oldest), then the rest, most recently changed first.
pub fn listing_order(a: &Envelope, b: &Envelope) -> std::cmp::Ordering {
    let waiting = |e: &Envelope| e.status == Status::Pending;
    match (waiting(a), waiting(b)) {
        (true, true) => a.queue_key().cmp(&b.queue_key()),
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => b
            .updated
            .cmp(&a.updated)
            .then(b.thread_ref.cmp(&a.thread_ref)),
    }
}

/// Which of the threads a caller may see a listing returns (`GET /threads`).
#[derive(Debug, Clone, Default)]
pub struct ThreadFilter {
    /// Only this status.
    pub status: Option<Status>,
    /// Only these folders (all when `None`).
    pub states: Option<Vec<State>>,
    /// Only threads claimed by this executor.
    pub executor: Option<String>,
    /// Only threads of this requestor.
    pub requestor: Option<String>,
    /// Only threads requiring this capability.
    pub capability: Option<String>,
    /// At most this many.
    pub limit: usize,
}

impl ThreadFilter {
    /// The folders a listing reads: those asked for, and of them only the one a wanted
    /// status lives in (a queue's workers asking for waiting work read only `received`).
    pub fn folders(&self) -> Vec<State> {
        let mut folders = self.states.clone().unwrap_or_else(|| State::ALL.to_vec());
        if let Some(status) = self.status {
            folders.retain(|f| *f == status.state());
        }
        folders
    }

    /// Whether `e` passes the filters (the caller checks who may see it).
    pub fn matches(&self, e: &Envelope) -> bool {
        self.status.is_none_or(|s| e.status == s)
            && self
                .executor
                .as_deref()
                .is_none_or(|x| e.executor.as_deref() == Some(x))
            && self.requestor.as_deref().is_none_or(|r| e.requestor == r)
            && self
                .capability
                .as_deref()
                .is_none_or(|c| e.requires.iter().any(|r| r == c))
    }
}
