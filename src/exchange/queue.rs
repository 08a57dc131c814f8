//! Where each waiting request stands in the queue, without reading every waiting thread: a
//! process that follows the home's changes (`mess serve`, `mess mcp`) keeps the queue keys of
//! the pending threads in memory, fed by every change it announces, and rebuilds them from the
//! store now and then in case a change went by unseen. Other processes count from the store.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::request::Priority;
use crate::protocol::status::Status;
use crate::protocol::time::Timestamp;

/// A pending thread's place: urgent first, then the oldest, then by ref.
type Key = (Reverse<Priority>, Timestamp, ThreadRef);

/// How long a built index is used before it is rebuilt from the store.
const REBUILD_EVERY: Duration = Duration::from_secs(60);

/// The pending threads in queue order, once a follower keeps them.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    state: Mutex<Queued>,
}

#[derive(Debug, Default)]
struct Queued {
    /// Whether this process sees every change (it follows the home).
    following: bool,
    /// The index and when it was built; `None` until first needed.
    index: Option<(Index, Instant)>,
    /// Whether a request is rebuilding the index now.
    rebuilding: bool,
}

#[derive(Debug, Default)]
struct Index {
    order: BTreeSet<Key>,
    keys: HashMap<ThreadRef, Key>,
}

impl Index {
    fn of(waiting: &[Envelope]) -> Index {
        let mut index = Index::default();
        for e in waiting {
            index.note(e);
        }
        index
    }

    fn note(&mut self, env: &Envelope) {
        if let Some(old) = self.keys.remove(&env.thread_ref) {
            self.order.remove(&old);
        }
        if env.status == Status::Pending {
            let key = key_of(env);
            self.order.insert(key.clone());
            self.keys.insert(env.thread_ref.clone(), key);
        }
    }
}

fn key_of(env: &Envelope) -> Key {
    (Reverse(env.priority), env.created, env.thread_ref.clone())
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// From now on this process sees every change of the home; `waiting` lists the pending
    /// threads from the store, for the first index (built here, before requests need it).
    pub(crate) fn follow(&self, waiting: impl FnOnce() -> Vec<Envelope>) {
        self.lock().following = true;
        self.rebuild(waiting);
    }

    /// Builds the index from `waiting` unless another caller is building it.
    fn rebuild(&self, waiting: impl FnOnce() -> Vec<Envelope>) {
        {
            let mut state = self.lock();
            if state.rebuilding {
                return;
            }
            state.rebuilding = true;
        }
        let index = Index::of(&waiting());
        let mut state = self.lock();
        state.index = Some((index, Instant::now()));
        state.rebuilding = false;
    }

    /// Records a change this process announced.
    pub(crate) fn note(&self, env: &Envelope) {
        if let Some((index, _)) = self.lock().index.as_mut() {
            index.note(env);
        }
    }

    /// `env`'s place among the pending threads (1 for the first), with `waiting` listing the
    /// pending threads from the store when the index is rebuilt, or every time when this
    /// process does not follow the home. The listing runs without the lock (it reads every
    /// waiting thread); a change between it and the install is caught at the next rebuild.
    pub(crate) fn position(&self, env: &Envelope, waiting: impl FnOnce() -> Vec<Envelope>) -> i64 {
        let (following, stale) = {
            let state = self.lock();
            let stale = state
                .index
                .as_ref()
                .is_none_or(|(_, built)| built.elapsed() >= REBUILD_EVERY);
            (state.following, stale)
        };
        let mut waiting = Some(waiting);
        let mut list = || waiting.take().map(|w| w()).unwrap_or_default();
        if !following {
            return rank(&Index::of(&list()), env);
        }
        if stale {
            // Another request may be rebuilding it: then the old index serves meanwhile.
            self.rebuild(&mut list);
        }
        let mut state = self.lock();
        match state.index.as_mut() {
            Some((index, _)) => {
                index.note(env);
                rank(index, env)
            }
            // The first index is still being built: count this once from the store.
            None => {
                drop(state);
                rank(&Index::of(&list()), env)
            }
        }
    }
}

fn rank(index: &Index, env: &Envelope) -> i64 {
    let ahead = index.order.range(..key_of(env)).count();
    i64::try_from(ahead).unwrap_or(i64::MAX).saturating_add(1)
}
