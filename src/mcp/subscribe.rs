//! Resource update notifications: which committed change concerns which resource URI, for
//! both protocol eras (legacy `resources/subscribe` and modern `subscriptions/listen`), and the
//! legacy subscriptions of one session, ended with it.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::exchange::{Exchange, ThreadChange, access};

/// Whether a change concerns a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Concern {
    /// It does not.
    No,
    /// It does, and the caller is a party to the thread.
    Yes,
    /// It names the subscribed thread, but the caller is not its requestor or claimant: it
    /// concerns them only while they may see the thread (an eligible executor, say).
    IfVisible,
}

/// Most resource subscriptions one session holds (legacy and modern alike).
pub(crate) const MAX_SUBSCRIPTIONS: usize = 64;

/// Whether `uri` is a resource a session may subscribe to: `mess://pending`,
/// `mess://history`, or one thread's (`mess://request/{id}`, `thread://{ref}`) with a
/// reference of a sane shape (the thread itself is checked where it can be).
pub(crate) fn known(uri: &str) -> bool {
    match uri {
        "mess://pending" | "mess://history" => true,
        _ => thread_of(uri).is_some_and(|id| {
            !id.is_empty() && id.len() <= 128 && !id.chars().any(char::is_control)
        }),
    }
}

/// The thread a resource URI names (`mess://request/{id}`, `thread://{ref}`), if any.
pub(crate) fn thread_of(uri: &str) -> Option<&str> {
    uri.strip_prefix("mess://request/")
        .or_else(|| uri.strip_prefix("thread://"))
}

/// Whether `change` concerns resource `uri` as `who` sees it.
pub(crate) fn concerns(uri: &str, change: &ThreadChange, who: &str) -> Concern {
    let env = &change.envelope;
    let mine = access::party(who, env);
    let named = match uri {
        "mess://pending" | "mess://history" => mine,
        _ => thread_of(uri).is_some_and(|id| {
            id == change.thread.as_str() || (mine && env.client_id.as_deref() == Some(id))
        }),
    };
    match (named, mine) {
        (false, _) => Concern::No,
        (true, true) => Concern::Yes,
        (true, false) => Concern::IfVisible,
    }
}

/// Whether `who` is to hear of `change` for `uri` (the visibility check runs off the async
/// workers: it reads the executors in effect).
pub(crate) async fn notify(ex: &Exchange, uri: &str, change: &ThreadChange, who: &str) -> bool {
    match concerns(uri, change, who) {
        Concern::No => false,
        Concern::Yes => true,
        Concern::IfVisible => {
            if let Some(verdict) = access::quick_verdict(who, &change.envelope) {
                return verdict;
            }
            let (ex, env, who) = (ex.clone(), change.envelope.clone(), who.to_owned());
            tokio::task::spawn_blocking(move || ex.access().may_see(&who, &env))
                .await
                .unwrap_or(false)
        }
    }
}

/// The legacy subscriptions of one session, by URI; their forwarding tasks end with it.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    tasks: Mutex<HashMap<String, tokio::task::AbortHandle>>,
}

impl Subscriptions {
    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, tokio::task::AbortHandle>> {
        match self.tasks.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Whether one more subscription (to a URI not yet held) would pass the session's limit.
    pub(crate) fn full(&self, uri: &str) -> bool {
        let tasks = self.tasks();
        !tasks.contains_key(uri) && tasks.len() >= MAX_SUBSCRIPTIONS
    }

    /// Records the task forwarding updates of `uri`, ending the one it replaces.
    pub(crate) fn insert(&self, uri: String, task: tokio::task::AbortHandle) {
        if let Some(old) = self.tasks().insert(uri, task) {
            old.abort();
        }
    }

    /// Ends the forwarding of `uri`.
    pub(crate) fn remove(&self, uri: &str) {
        if let Some(task) = self.tasks().remove(uri) {
            task.abort();
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for (_, task) in self.tasks().drain() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_resources_and_a_bounded_number_of_them() {
        for uri in [
            "mess://pending",
            "mess://history",
            "thread://2026-01-01-001",
            "mess://request/shop",
        ] {
            assert!(known(uri), "{uri}");
        }
        for uri in ["x://1", "thread://", "mess://request/a\nb", "mess://other"] {
            assert!(!known(uri), "{uri}");
        }
        let long = format!("thread://{}", "a".repeat(200));
        assert!(!known(&long));
        let subscriptions = Subscriptions::default();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            for i in 0..MAX_SUBSCRIPTIONS {
                let task = tokio::spawn(std::future::pending::<()>());
                assert!(!subscriptions.full(&format!("thread://t{i}")));
                subscriptions.insert(format!("thread://t{i}"), task.abort_handle());
            }
            assert!(subscriptions.full("thread://one-more"));
            // Renewing one already held is not one more.
            assert!(!subscriptions.full("thread://t0"));
        });
    }
}
