//! The thread views that tools and resources both answer with (`mess_status` and the
//! `mess://` resources): one thread's status for its requestor, and the open or all threads of
//! a principal.

use crate::exchange::Exchange;
use crate::exchange::error::Error;
use crate::exchange::view::{self, ThreadView};
use crate::protocol::envelope::Envelope;
use crate::protocol::status::State;
use crate::protocol::value::{Map, Value};

/// The status of one thread for its requestor: envelope, current status, response.
pub(crate) fn status_of(ex: &Exchange, who: &str, re: &str) -> Result<Value, Error> {
    let thread = ex.thread_for(re, who)?;
    Ok(with_queue_position(
        ex,
        &thread.envelope,
        ThreadView::of(&thread)?.to_value(),
    ))
}

/// A status view with the thread's place in the queue while it waits for an executor.
pub(crate) fn with_queue_position(ex: &Exchange, env: &Envelope, view: Value) -> Value {
    match (view, view::queue_position(ex, env)) {
        (Value::Map(mut m), Some(p)) => {
            m.insert("queue_position", Value::Int(p));
            Value::Map(m)
        }
        (v, _) => v,
    }
}

/// Every thread `who` may see, finished ones too, newest first.
pub(crate) fn all_threads(ex: &Exchange, who: &str) -> Result<Value, Error> {
    let list = ex.threads_for(who, &State::ALL)?;
    let mut out = Map::new();
    out.insert(
        "threads",
        Value::Seq(list.iter().map(view::thread_summary).collect()),
    );
    Ok(Value::Map(out))
}

/// The open threads of `who` (pending and in progress), newest first.
pub(crate) fn open_threads(ex: &Exchange, who: &str) -> Result<Value, Error> {
    let list = ex.threads_for(who, &[State::Received, State::Executing])?;
    let mut out = Map::new();
    out.insert(
        "threads",
        Value::Seq(list.iter().map(view::thread_summary).collect()),
    );
    Ok(Value::Map(out))
}
