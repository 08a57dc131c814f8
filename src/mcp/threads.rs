//! The thread views that tools and resources both answer with (`mess_status` and the
//! `mess://` resources): one thread's status for its requestor, and the open or all threads of
//! a principal.

use crate::exchange::Exchange;
use crate::exchange::error::Error;
use crate::exchange::view::{self, ThreadView};
use crate::protocol::envelope::Envelope;
use crate::protocol::status::State;
use crate::protocol::time;
use crate::protocol::value::{Map, Value};

/// The status of one thread for its requestor: envelope, current status, response, and the
/// threads its `ref:` entries name (`refs`).
pub(crate) fn status_of(ex: &Exchange, who: &str, re: &str) -> Result<Value, Error> {
    let thread = ex.access().thread_for(re, who)?;
    let mut view = with_queue_position(ex, &thread.envelope, ThreadView::of(&thread)?.to_value());
    // The threads its `ref:` entries name, as far as `who` may see them.
    let refs = ex.access().references_for(&thread, who)?;
    if let (Value::Map(m), false) = (&mut view, refs.is_empty()) {
        m.insert("refs", Value::Map(refs));
    }
    Ok(view)
}

/// A status view with where the thread waits: held until its `not_before`, or its place in
/// the queue while it waits for an executor.
pub(crate) fn with_queue_position(ex: &Exchange, env: &Envelope, view: Value) -> Value {
    view::with_waiting(ex, env, view)
}

/// Every thread `who` may see, finished ones too, newest first.
pub(crate) fn all_threads(ex: &Exchange, who: &str) -> Result<Value, Error> {
    let list = ex.access().threads_for(who, &State::ALL)?;
    let mut out = Map::new();
    out.insert(
        "threads",
        Value::Seq(list.iter().map(view::thread_summary).collect()),
    );
    Ok(Value::Map(out))
}

/// The open threads of `who` (pending and in progress), newest first.
pub(crate) fn open_threads(ex: &Exchange, who: &str) -> Result<Value, Error> {
    let list = ex
        .access()
        .threads_for(who, &[State::Received, State::Executing])?;
    let mut out = Map::new();
    out.insert(
        "threads",
        Value::Seq(
            list.iter()
                .map(|env| {
                    let mut summary = view::thread_summary(env);
                    // A held request says so: it is not late, it is not offered yet.
                    if let (Value::Map(m), Some(until)) = (&mut summary, view::held_until(ex, env))
                    {
                        m.insert("held_until", Value::str(time::format_timestamp(&until)));
                    }
                    summary
                })
                .collect(),
        ),
    );
    Ok(Value::Map(out))
}
