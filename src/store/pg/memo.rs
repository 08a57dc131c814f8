//! A use case's memo of the thread heads it read from the database: one request resolves a
//! reference, checks who may see the thread, checks its payloads and writes, and each step
//! asks for the same head. On files that is a cheap read; here each is a round trip, so
//! within one [`HeadMemo`] a head is read once and then kept, updated by the writes made
//! under it. Every decision that matters is taken again inside the writing transaction on the
//! locked row, so the memo changes what is read, never what is allowed.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::protocol::ids::ThreadRef;
use crate::store::layout::Location;

thread_local! {
    /// The heads read on this OS thread while a memo is open; `None` when none is.
    static HEADS: RefCell<Option<HashMap<ThreadRef, (String, Location)>>> =
        const { RefCell::new(None) };
}

/// While alive, heads read on this OS thread are remembered (a use case runs on one blocking
/// thread from start to end); dropping it forgets them. Memos nest: only the outermost counts.
#[derive(Debug)]
pub struct HeadMemo {
    outermost: bool,
}

impl HeadMemo {
    /// Opens a memo on this thread, unless one is open already.
    pub fn open() -> HeadMemo {
        HEADS.with(|h| {
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
            HEADS.with(|h| *h.borrow_mut() = None);
        }
    }
}

/// The remembered head of `thread`, if a memo is open and holds it.
pub(crate) fn get(thread: &ThreadRef) -> Option<(String, Location)> {
    HEADS.with(|h| h.borrow().as_ref().and_then(|m| m.get(thread).cloned()))
}

/// Remembers `head` of `thread` if a memo is open.
pub(crate) fn put(thread: &ThreadRef, head: &str, location: &Location) {
    HEADS.with(|h| {
        if let Some(m) = h.borrow_mut().as_mut() {
            m.insert(thread.clone(), (head.to_owned(), location.clone()));
        }
    });
}

/// Forgets the head of `thread` (a write whose result is not known here).
pub(crate) fn forget(thread: &ThreadRef) {
    HEADS.with(|h| {
        if let Some(m) = h.borrow_mut().as_mut() {
            m.remove(thread);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::status::State;

    #[test]
    fn heads_are_kept_only_while_a_memo_is_open_and_outermost() {
        let thread = ThreadRef::parse("2026-11-27-001").unwrap();
        let here = Location::State(State::Received);
        put(&thread, "a", &here);
        assert!(get(&thread).is_none(), "no memo open: nothing kept");
        let memo = HeadMemo::open();
        put(&thread, "a", &here);
        {
            let _inner = HeadMemo::open();
            put(&thread, "b", &here);
        }
        assert_eq!(get(&thread).map(|h| h.0).as_deref(), Some("b"));
        forget(&thread);
        assert!(get(&thread).is_none());
        put(&thread, "c", &here);
        drop(memo);
        assert!(get(&thread).is_none(), "closing the memo forgets");
        let other = std::thread::spawn(move || {
            let _memo = HeadMemo::open();
            get(&thread).is_none()
        });
        assert!(other.join().unwrap(), "each OS thread has its own memo");
    }
}
