//! Who may see and act on a thread, from its envelope and the executors in effect. The pure
//! half of the exchange's access rules: every exchange build (native or Worker) asks these, and
//! the native exchange's `access` module adds what needs its store (links, mail, listings).

use crate::envelope::Envelope;
use crate::status::Status;
use crate::value::Value;

/// What the access rules and the thread rules need to know of the executors in effect.
pub trait Roster {
    /// Whether `id` is a registered executor.
    fn is_executor(&self, id: &str) -> bool;
    /// The capabilities of `requires` that executor `id` lacks (all of them when `id` is no
    /// registered executor).
    fn missing(&self, id: &str, requires: &[String]) -> Vec<String>;
}

/// The envelope field that names the one executor a thread is offered to (a delegation
/// accepted by its requestor); nobody else may take it.
pub const OFFERED_TO: &str = "offered_to";

/// Whether `who` is a party to the thread of `env`: its requestor or its claimant.
pub fn party(who: &str, env: &Envelope) -> bool {
    env.requestor == who || env.executor.as_deref() == Some(who)
}

/// Whether `who` is a registered executor holding every capability the thread requires (and
/// the one it is offered to, when it is offered to one).
pub fn eligible(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    if let Some(only) = env.extra.get(OFFERED_TO).and_then(Value::scalar_text)
        && only != who
    {
        return false;
    }
    roster.is_executor(who) && roster.missing(who, &env.requires).is_empty()
}

/// Whether `who` may see the thread of `env`, given the executors in effect.
pub fn may_see(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    party(who, env) || (env.status == Status::Pending && eligible(who, env, roster))
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
    party(who, env) || (!env.status.is_terminal() && eligible(who, env, roster))
}

/// Whether `who` may act on the thread of `env` now as an executor (a suggestion): its
/// claimant while it holds it, or, while the thread is pending, an executor able to take it.
pub fn may_act_now(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    if env.status == Status::Pending {
        return eligible(who, env, roster);
    }
    env.executor.as_deref() == Some(who) && !env.status.is_terminal()
}

/// Whether a request may depend on the thread of `env`: only on threads its sender may see.
pub fn may_depend_on(who: &str, env: &Envelope, roster: &dyn Roster) -> bool {
    may_see(who, env, roster)
}

/// Whether the holder of a link for `executor` may still read the thread of `env`: while
/// nobody has taken it, and afterwards only if `executor` is the one who took it.
pub fn link_reads(executor: &str, env: &Envelope) -> bool {
    env.executor
        .as_deref()
        .is_none_or(|taker| taker == executor)
}
