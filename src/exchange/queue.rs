//! The open threads, kept in memory by a process that follows the home's changes (`mess
//! serve`, `mess mcp`): where each waiting request stands in the queue, which threads have a
//! deadline and when, which wait to be routed or escalated. Fed by every change the process
//! announces and rebuilt from the store now and then on a thread of its own (in case a change
//! went by unseen), it lets a create, the expiry sweeper and the router's periodic pass work
//! on the threads concerned instead of reading every open thread. Other processes count from
//! the store.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
pub(crate) const REBUILD_EVERY: Duration = Duration::from_secs(600);

/// The open threads, once a follower keeps them.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    state: Mutex<Queued>,
}

#[derive(Debug, Default)]
struct Queued {
    /// Whether this process sees every change (it follows the home).
    following: bool,
    /// The index and when it was built; `None` until the first is built.
    index: Option<(Index, Instant)>,
    /// While a rebuild lists the store: the changes noted meanwhile, applied to the new index
    /// before it is installed (the listing may have read a thread before its change).
    replay: Option<Vec<Envelope>>,
}

/// What the index keeps of one open thread.
#[derive(Debug, Clone)]
struct Entry {
    /// Its place in the queue, while pending.
    key: Option<Key>,
    /// When it expires (pending, waiting or held with `needed_by` or `expires`).
    deadline: Option<Timestamp>,
    /// Pending and never dispatched: the router's periodic pass looks at it again.
    unrouted: bool,
    /// Pending, dispatched at this time and not yet escalated.
    dispatched: Option<Timestamp>,
    /// Held until then (`not_before`): nobody is offered it before, so it stands in nobody's
    /// way in the queue.
    not_before: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct Index {
    order: BTreeSet<Key>,
    /// The pending threads held until a time (`not_before`), by their place: a rank counts
    /// the places ahead and takes away those still held, instead of looking every thread
    /// ahead up (13,000 lookups a create on a 100,000-thread home).
    held: BTreeMap<Key, Timestamp>,
    deadlines: BTreeSet<(Timestamp, ThreadRef)>,
    open: HashMap<ThreadRef, Entry>,
}

impl Index {
    fn of(open: &[Envelope]) -> Index {
        let mut index = Index::default();
        for e in open {
            index.note(e);
        }
        index
    }

    fn note(&mut self, env: &Envelope) {
        let thread = &env.thread_ref;
        if let Some(old) = self.open.remove(thread) {
            if let Some(key) = old.key {
                self.order.remove(&key);
                self.held.remove(&key);
            }
            if let Some(at) = old.deadline {
                self.deadlines.remove(&(at, thread.clone()));
            }
        }
        if env.status.is_terminal() {
            return;
        }
        let pending = env.status == Status::Pending;
        let entry = Entry {
            key: pending.then(|| key_of(env)),
            deadline: env.deadline().map(|(t, _)| t),
            unrouted: pending && !env.dispatched(),
            dispatched: if pending && !env.history.iter().any(|h| h.action == "escalated") {
                env.history
                    .iter()
                    .find(|h| h.action == "dispatched")
                    .map(|h| h.at)
            } else {
                None
            },
            not_before: env.not_before,
        };
        if let Some(key) = &entry.key {
            self.order.insert(key.clone());
            if let Some(at) = entry.not_before {
                self.held.insert(key.clone(), at);
            }
        }
        if let Some(at) = entry.deadline {
            self.deadlines.insert((at, thread.clone()));
        }
        self.open.insert(thread.clone(), entry);
    }

    fn in_order(&self, keep: impl Fn(&Entry) -> bool) -> Vec<ThreadRef> {
        self.order
            .iter()
            .filter(|k| self.open.get(&k.2).is_some_and(&keep))
            .map(|k| k.2.clone())
            .collect()
    }
}

fn key_of(env: &Envelope) -> Key {
    (Reverse(env.priority), env.created, env.thread_ref.clone())
}

/// What the sweeper has to do now, by the index.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// Threads whose deadline has passed.
    pub(crate) overdue: Vec<ThreadRef>,
    /// The earliest deadline still ahead.
    pub(crate) next: Option<Timestamp>,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// From now on this process sees every change of the home; `open` lists the open threads
    /// from the store, for the first index (built here, before requests need it).
    pub(crate) fn follow(&self, open: impl FnOnce() -> Vec<Envelope>) {
        self.lock().following = true;
        self.rebuild(open);
    }

    /// Builds the index from `open` (the open threads listed from the store), then applies
    /// the changes noted while it was listed.
    pub(crate) fn rebuild(&self, open: impl FnOnce() -> Vec<Envelope>) {
        {
            let mut state = self.lock();
            if state.replay.is_some() {
                return;
            }
            state.replay = Some(Vec::new());
        }
        let mut index = Index::of(&open());
        let mut state = self.lock();
        for env in state.replay.take().unwrap_or_default() {
            index.note(&env);
        }
        state.index = Some((index, Instant::now()));
    }

    /// Whether the index is due to be rebuilt (or was never built) and no rebuild is running.
    pub(crate) fn stale(&self) -> bool {
        let state = self.lock();
        state.replay.is_none()
            && state
                .index
                .as_ref()
                .is_none_or(|(_, built)| built.elapsed() >= REBUILD_EVERY)
    }

    /// Records a change this process announced.
    pub(crate) fn note(&self, env: &Envelope) {
        let mut state = self.lock();
        if let Some(replay) = state.replay.as_mut() {
            replay.push(env.clone());
        }
        if let Some((index, _)) = state.index.as_mut() {
            index.note(env);
        }
    }

    /// The index, when this process follows the home and has built one.
    fn with_index<T>(&self, f: impl FnOnce(&Index) -> T) -> Option<T> {
        let state = self.lock();
        if !state.following {
            return None;
        }
        state.index.as_ref().map(|(index, _)| f(index))
    }

    /// The overdue threads at `now` and the next deadline; `None` without an index.
    pub(crate) fn due(&self, now: Timestamp) -> Option<Due> {
        self.with_index(|index| {
            let mut due = Due::default();
            for (at, thread) in &index.deadlines {
                if *at <= now {
                    due.overdue.push(thread.clone());
                } else {
                    due.next = Some(*at);
                    break;
                }
            }
            due
        })
    }

    /// The pending threads never dispatched, in queue order; `None` without an index.
    pub(crate) fn unrouted(&self) -> Option<Vec<ThreadRef>> {
        self.with_index(|index| index.in_order(|e| e.unrouted))
    }

    /// The pending threads dispatched and not escalated for which `due(priority, dispatched
    /// at)` holds, in queue order; `None` without an index.
    pub(crate) fn escalation_due(
        &self,
        due: impl Fn(Priority, Timestamp) -> bool,
    ) -> Option<Vec<ThreadRef>> {
        self.with_index(|index| {
            index.in_order(
                |e| matches!((&e.key, e.dispatched), (Some(k), Some(at)) if due(k.0.0, at)),
            )
        })
    }

    /// `env`'s place among the pending threads (1 for the first), with `waiting` listing the
    /// pending threads from the store when this process does not follow the home (or has no
    /// index yet).
    pub(crate) fn position(
        &self,
        env: &Envelope,
        now: Timestamp,
        waiting: impl FnOnce() -> Vec<Envelope>,
    ) -> i64 {
        let mut state = self.lock();
        if state.following
            && let Some((index, _)) = state.index.as_mut()
        {
            index.note(env);
            return rank(index, env, now);
        }
        drop(state);
        let pending: Vec<Envelope> = waiting()
            .into_iter()
            .filter(|e| e.status == Status::Pending)
            .collect();
        rank(&Index::of(&pending), env, now)
    }
}

/// Where `env` stands among the waiting threads offered by `now`: threads held until later
/// (`not_before`) are not ahead of anyone.
fn rank(index: &Index, env: &Envelope, now: Timestamp) -> i64 {
    let key = key_of(env);
    let places = index.order.range(..&key).count();
    let still_held = index
        .held
        .range(..&key)
        .filter(|(_, at)| **at > now)
        .count();
    i64::try_from(places - still_held)
        .unwrap_or(i64::MAX)
        .saturating_add(1)
}
