//! Who may see a thread: its requestor, the executor that claimed it, and, while it is pending,
//! every registered executor that holds what it requires. The API and MCP filter by this, so
//! nobody reads threads they have no part in.

use crate::exchange::directory::Directory;
use crate::exchange::{Error, Exchange};
use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::{State, Status};
use crate::store::thread::ThreadFile;

/// Whether `who` may see the thread of `env`, given the executors in effect.
pub fn visible_to(who: &str, env: &Envelope, directory: &Directory) -> bool {
    if env.requestor == who || env.executor.as_deref() == Some(who) {
        return true;
    }
    env.status == Status::Pending
        && directory
            .executor(who)
            .is_some_and(|spec| directory.missing(spec, &env.requires).is_empty())
}

/// Whether `who` may address a message to the thread of `env` and hear why it is refused: a
/// party to it, or an executor able to take it whatever its status (one that lost a claim race
/// learns who won, as contract section 2 promises it a conflict, not silence).
pub fn may_address(who: &str, env: &Envelope, directory: &Directory) -> bool {
    env.requestor == who
        || env.executor.as_deref() == Some(who)
        || directory
            .executor(who)
            .is_some_and(|spec| directory.missing(spec, &env.requires).is_empty())
}

impl Exchange {
    /// The thread `reference` names for `who`, if `who` may see it; a thread they may not see
    /// is reported as not found, so its existence does not leak.
    pub fn thread_for(&self, reference: &str, who: &str) -> Result<ThreadFile, Error> {
        let thread = self.thread(reference, who)?;
        let directory = Directory::load(self.store());
        if visible_to(who, &thread.envelope, &directory) {
            Ok(thread)
        } else {
            Err(Error::not_found(format!("no thread {reference}")))
        }
    }

    /// The envelopes `who` may see in `states` (newest `updated` first).
    pub fn threads_for(&self, who: &str, states: &[State]) -> Result<Vec<Envelope>, Error> {
        let (listing, _) = self.list(states, false)?;
        let directory = Directory::load(self.store());
        let mut out: Vec<Envelope> = listing
            .into_iter()
            .map(|(env, _)| env)
            .filter(|env| visible_to(who, env, &directory))
            .collect();
        out.sort_by(|a, b| {
            b.updated
                .cmp(&a.updated)
                .then_with(|| b.thread_ref.cmp(&a.thread_ref))
        });
        Ok(out)
    }

    /// Whether `who` may see the thread of `env` (for filtering change events).
    pub fn sees(&self, who: &str, env: &Envelope) -> bool {
        visible_to(who, env, &Directory::load(self.store()))
    }

    /// Whether `who` may see `thread` (for filtering change events).
    pub fn may_see(&self, who: &str, thread: &ThreadRef) -> bool {
        let directory = Directory::load(self.store());
        self.store()
            .envelope(thread)
            .is_ok_and(|(env, _)| visible_to(who, &env, &directory))
    }
}
