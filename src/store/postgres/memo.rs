//! A use case's memo of the threads it read from the database: one request resolves a
//! reference, checks who may see the thread, checks its payloads and writes, and each step
//! asks for the same thread. On files that is a cheap read; here each is a round trip, so
//! within one [`HeadMemo`] a thread is read once (whole, with its row version) and then kept,
//! updated by the writes made under it. A write starts from the kept text and commits only if
//! the row is still at the kept version, and every decision that matters is taken again on
//! what it writes over, so the memo changes what is read, never what is allowed.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::protocol::ids::ThreadRef;
use crate::store::postgres::Stored;

/// A kept thread: its text and folder, and the version of its row when known.
pub(crate) type Kept = (Stored, Option<String>);

thread_local! {
    /// The threads read on this OS thread while a memo is open; `None` when none is.
    static THREADS: RefCell<Option<HashMap<ThreadRef, Kept>>> = const { RefCell::new(None) };
}

/// While alive, threads read on this OS thread are remembered (a use case runs on one
/// blocking thread from start to end); dropping it forgets them. Memos nest: only the
/// outermost counts.
#[derive(Debug)]
pub struct HeadMemo {
    outermost: bool,
}

impl HeadMemo {
    /// Opens a memo on this thread, unless one is open already.
    pub fn open() -> HeadMemo {
        THREADS.with(|h| {
            let mut h = h.borrow_mut();
            let outermost = h.is_none();
            if outermost {
                *h = Some(HashMap::new());
            }
            HeadMemo { outermost }
        })
    }
}

impl Drop for HeadMemo {
    fn drop(&mut self) {
        if self.outermost {
            THREADS.with(|h| *h.borrow_mut() = None);
        }
    }
}

/// Whether a memo is open on this thread.
pub(crate) fn open() -> bool {
    THREADS.with(|h| h.borrow().is_some())
}

/// The kept copy of `thread`, if a memo is open and holds it.
pub(crate) fn get(thread: &ThreadRef) -> Option<Kept> {
    THREADS.with(|h| h.borrow().as_ref().and_then(|m| m.get(thread).cloned()))
}

/// Keeps `stored` (at row `version`, if known) as `thread`, if a memo is open.
pub(crate) fn put(thread: &ThreadRef, stored: &Stored, version: Option<&str>) {
    THREADS.with(|h| {
        if let Some(m) = h.borrow_mut().as_mut() {
            m.insert(thread.clone(), (stored.clone(), version.map(str::to_owned)));
        }
    });
}

/// Forgets `thread` (a write whose result is not known here).
pub(crate) fn forget(thread: &ThreadRef) {
    THREADS.with(|h| {
        if let Some(m) = h.borrow_mut().as_mut() {
            m.remove(thread);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::status::State;
    use crate::store::layout::Location;

    fn stored(text: &str) -> Stored {
        Stored {
            text: text.to_owned(),
            location: Location::State(State::Received),
            seq: 0,
        }
    }

    #[test]
    fn threads_are_kept_only_while_a_memo_is_open_and_outermost() {
        let thread = ThreadRef::parse("2026-11-27-001").unwrap();
        put(&thread, &stored("a"), None);
        assert!(get(&thread).is_none(), "no memo open: nothing kept");
        let memo = HeadMemo::open();
        put(&thread, &stored("a"), None);
        {
            let _inner = HeadMemo::open();
            put(&thread, &stored("b"), Some("7"));
        }
        let kept = get(&thread).unwrap();
        assert_eq!((kept.0.text.as_str(), kept.1.as_deref()), ("b", Some("7")));
        forget(&thread);
        assert!(get(&thread).is_none());
        put(&thread, &stored("c"), None);
        drop(memo);
        assert!(get(&thread).is_none(), "closing the memo forgets");
        assert!(!open());
        let other = std::thread::spawn(move || {
            let _memo = HeadMemo::open();
            get(&thread).is_none()
        });
        assert!(other.join().unwrap(), "each OS thread has its own memo");
    }
}
