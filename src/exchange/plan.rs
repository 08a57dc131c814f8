//! Turning the thread-directed payloads of a message (status, response, reply, cancel,
//! suggestion) into checked per-thread groups: reference resolution, roles, and the rules each
//! payload must pass against the thread's current state.

use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::exchange::{Exchange, Sender};
use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Payload;
use crate::protocol::resolve;
use crate::protocol::status::{State, Status};
use crate::store::IndexKey;
use crate::store::error::StoreError;

pub(crate) use crate::protocol::resolve::Group;

/// The exchange's threads as reference resolution reads them (`protocol::resolve`).
pub(crate) struct StoreThreads<'a>(pub(crate) &'a Exchange);

impl resolve::Threads for StoreThreads<'_> {
    type Error = Error;

    fn lookup(&self, who: &str, key: IndexKey<'_>) -> Result<Option<ThreadRef>, Error> {
        Ok(self.0.store().lookup(who, key)?)
    }

    fn envelope(&self, r: &ThreadRef) -> Result<Option<Envelope>, Error> {
        match self.0.store().envelope(r) {
            Ok((env, _)) => Ok(Some(env)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    // Existence alone needs no envelope read: index entries are checked on every resolve.
    fn exists(&self, r: &ThreadRef) -> Result<bool, Error> {
        Ok(!self.0.store().find(r)?.is_empty())
    }

    fn open(&self, states: &[State]) -> Result<Vec<Envelope>, Error> {
        let (open, _) = self.0.store().list(states, false);
        Ok(open.into_iter().map(|(env, _, _)| env).collect())
    }

    fn not_found(message: String) -> Error {
        Error::NotFound { message }
    }

    fn is_not_found(e: &Error) -> bool {
        matches!(e, Error::NotFound { .. })
    }

    fn in_payload(e: Error, path: &str) -> Error {
        match e {
            Error::NotFound { message } => Error::NotFound {
                message: format!("{path}: {message}"),
            },
            other => other,
        }
    }
}

fn who<'a>(sender: &'a Sender) -> resolve::Sender<'a> {
    resolve::Sender {
        id: &sender.id,
        role: sender.role,
    }
}

/// Resolves a reference for `sender`: `last`, a ref, or one of the sender's client or
/// suggestion ids. Index entries are trusted only if their thread still exists.
pub(crate) fn resolve(ex: &Exchange, reference: &str, sender: &str) -> Result<ThreadRef, Error> {
    resolve::resolve(&StoreThreads(ex), reference, sender)
}

/// Resolves a reference for `sender` and checks that `rule` (one of `access`'s) lets it reach
/// the thread; a thread it may not reach is reported exactly as one that does not exist. The
/// operator (no role) reaches every thread.
pub(crate) fn resolve_for(
    ex: &Exchange,
    reference: &str,
    sender: &Sender,
    directory: &Directory,
    rule: resolve::Rule,
) -> Result<ThreadRef, Error> {
    resolve::resolve_for(&StoreThreads(ex), reference, &who(sender), directory, rule)
}

/// Groups thread-directed payloads by the thread they name, keeping message order; a key
/// holder reaches only the threads `access::may_address` lets it address.
pub(crate) fn group(
    ex: &Exchange,
    payloads: &[(usize, Payload)],
    sender: &Sender,
    directory: &Directory,
) -> Result<Vec<Group>, Error> {
    resolve::group(&StoreThreads(ex), payloads, &who(sender), directory)
}

pub(crate) use crate::protocol::rules::{Context, check_group};

/// The current status of each dependency of `env` (`None` when its file is gone).
pub(crate) fn dependency_statuses(
    ex: &Exchange,
    env: &Envelope,
) -> Result<Vec<(String, Option<Status>)>, Error> {
    env.depends_on
        .iter()
        .map(|d| {
            let status = match ThreadRef::parse(d) {
                Ok(r) => match ex.store().envelope(&r) {
                    Ok((e, _)) => Some(e.status),
                    Err(StoreError::NotFound { .. }) => None,
                    Err(e) => return Err(e.into()),
                },
                Err(_) => None,
            };
            Ok((d.clone(), status))
        })
        .collect()
}
