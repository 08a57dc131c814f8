//! Shells, the exchange's own currency (docs/guide/marketplace.md#shells): the operator grants
//! them to agents and executors, and every movement is a line of the ledger
//! (`store::ledger`). Grants and balances are here; escrow of a request's compensation builds
//! on them.

use crate::exchange::{Error, Exchange};
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::store::ledger::{Balances, Movement, OPERATOR, Refused};

/// Most shells one grant may give.
pub(crate) const MOST_GRANTED: i64 = 1_000_000_000;

impl Exchange {
    /// Grants `shells` from the operator to the account of `to` (an agent or executor id).
    pub fn grant_shells(
        &self,
        to: &str,
        shells: i64,
        note: Option<&str>,
    ) -> Result<Movement, Error> {
        let to = to.trim();
        if ThreadRef::parse(to).is_err() || to == OPERATOR {
            return Err(ProtocolError::invalid(
                "id",
                format!(
                    "{to:?} is not an account shells can be granted to (an agent or executor id)"
                ),
            )
            .into());
        }
        if !(1..=MOST_GRANTED).contains(&shells) {
            return Err(ProtocolError::invalid(
                "shells",
                format!("{shells} is not a number of shells to grant (1 to {MOST_GRANTED})"),
            )
            .into());
        }
        let now = self.now();
        let nonce: String = self
            .store()
            .random_bytes(4)?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let movement = Movement {
            id: format!("grant-{}-{nonce}", now.timestamp_millis()),
            at: now,
            from: OPERATOR.to_owned(),
            to: to.to_owned(),
            shells,
            kind: "grant".to_owned(),
            thread: None,
            note: note
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        };
        self.record(&movement, &|_| Ok(()))?;
        Ok(movement)
    }

    /// Every account's balance.
    pub fn shell_balances(&self) -> Result<Balances, Error> {
        Ok(self.store().balances()?)
    }

    /// Records `movement` once (see [`crate::store::FileStore::record_movement`]).
    fn record(
        &self,
        movement: &Movement,
        check: crate::store::ledger::Check<'_>,
    ) -> Result<bool, Error> {
        // A node's home is a mirror in tier 1: a ledger there would be this node's alone.
        if self.store().database().is_some() {
            return Err(Error::Misconfigured {
                message: "shells are kept in the home's ledger; with a database (tier 1) they are not available yet".to_owned(),
            });
        }
        match self.store().record_movement(movement, check) {
            Ok(recorded) => Ok(recorded),
            Err(Refused::Check(why)) => Err(ProtocolError::invalid("shells", why).into()),
            Err(Refused::Store(e)) => Err(e.into()),
        }
    }
}

/// The delivery channel that settles a request's escrow.
pub(crate) const CHANNEL: &str = "shells";

/// The envelope field that records a request's escrow: `{shells, release_on}`.
pub(crate) const ESCROW: &str = "escrow";

/// The shells a request offers (`compensation.shells`, above zero), if any.
pub(crate) fn offered(request: &crate::protocol::request::Request) -> Option<i64> {
    let shells = request.compensation.as_ref()?.as_map()?.get("shells")?;
    match shells {
        crate::protocol::value::Value::Int(n) if *n > 0 => Some(*n),
        _ => None,
    }
}

/// When a request's escrow goes to its executor: `completed` (the default) or `reviewed`
/// (`compensation.escrow.release_on`).
fn release_on(request: &crate::protocol::request::Request) -> &'static str {
    let on = request
        .compensation
        .as_ref()
        .and_then(|c| c.as_map())
        .and_then(|c| c.get("escrow"))
        .and_then(|e| e.as_map())
        .and_then(|e| e.get("release_on"))
        .and_then(crate::protocol::value::Value::scalar_text);
    match on.as_deref() {
        Some("reviewed") => "reviewed",
        _ => "completed",
    }
}

impl Exchange {
    /// Takes `request`'s shells from `requestor` into the escrow of `thread` (once), refused
    /// when the balance is short; the envelope field to record it, or `None` when the request
    /// offers no shells.
    pub(crate) fn escrow(
        &self,
        thread: &ThreadRef,
        request: &crate::protocol::request::Request,
        requestor: &str,
        now: crate::protocol::time::Timestamp,
    ) -> Result<Option<crate::protocol::value::Value>, Error> {
        use crate::protocol::value::{Map, Value};
        let Some(shells) = offered(request) else {
            return Ok(None);
        };
        let movement = Movement {
            id: format!("escrow-{thread}"),
            at: now,
            from: requestor.to_owned(),
            to: format!("escrow:{thread}"),
            shells,
            kind: "escrow".to_owned(),
            thread: Some(thread.to_string()),
            note: None,
        };
        let who = requestor.to_owned();
        self.record(&movement, &move |b: &Balances| {
            let held = b.get(&who).copied().unwrap_or_default();
            if held >= shells {
                Ok(())
            } else {
                Err(format!(
                    "the request offers {shells} shells and {who} holds {held} (the operator grants shells: mess shells grant {who} N)"
                ))
            }
        })?;
        let mut m = Map::new();
        m.insert("shells", Value::Int(shells));
        m.insert("release_on", Value::str(release_on(request)));
        Ok(Some(Value::Map(m)))
    }
}

/// Adds to `edit` of the thread `before` the delivery that settles its escrow when the edit
/// may decide it (the thread ends, or a review arrives), in the same write.
pub(crate) fn queue(before: &crate::store::thread::ThreadFile, edit: &mut crate::store::Edit) {
    let after = &edit.envelope;
    if !after.extra.contains_key(ESCROW) {
        return;
    }
    let ends = after.status.is_terminal() && !before.envelope.status.is_terminal();
    let reviewed = edit.append.iter().any(|d| {
        d.message
            .payloads
            .iter()
            .any(|p| matches!(p, crate::protocol::message::Payload::Review(_)))
    });
    if !(ends || reviewed) {
        return;
    }
    edit.deliveries.push(crate::store::outbox::Delivery::new(
        after.thread_ref.as_str(),
        crate::protocol::envelope::EXCHANGE,
        CHANNEL,
        crate::protocol::value::Value::Null,
        "settle",
        after.updated,
    ));
}

/// How a review of escrowed work decides it: accepted (accept, 3 stars or more), rejected
/// (reject, 1-2 stars), or open (a redo, or no rating).
fn review_verdict(r: &crate::protocol::review::Review) -> Option<bool> {
    use crate::protocol::review::Rating;
    if r.request_redo == Some(true) {
        return None;
    }
    match r.rating? {
        Rating::Accept => Some(true),
        Rating::Reject => Some(false),
        Rating::Stars(n) => Some(n >= 3),
    }
}

impl Exchange {
    /// Settles the escrow of `thread` once its outcome is known, once: to its executor when it
    /// completed (with `release_on: reviewed`, once a review accepts it), back to its requestor
    /// when it ended any other way or a review rejected it. Returns whether it moved shells now.
    pub(crate) fn settle_escrow(&self, thread: &ThreadRef) -> Result<bool, Error> {
        use crate::protocol::message::Payload;
        use crate::protocol::status::Status;
        use crate::protocol::value::Value;
        let file = match self.store().read(thread) {
            Ok(f) => f,
            Err(crate::store::error::StoreError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let env = &file.envelope;
        let Some(escrow) = env.extra.get(ESCROW).and_then(Value::as_map) else {
            return Ok(false);
        };
        let Some(Value::Int(shells)) = escrow.get("shells").cloned() else {
            return Ok(false);
        };
        let on_review = escrow
            .get("release_on")
            .and_then(Value::scalar_text)
            .as_deref()
            == Some("reviewed");
        let verdict = file
            .messages()?
            .iter()
            .filter(|d| d.from == env.requestor)
            .flat_map(|d| d.message.payloads.iter())
            .filter_map(|p| match p {
                Payload::Review(r) => Some(review_verdict(r)),
                _ => None,
            })
            .next_back()
            .flatten();
        let executor = env.executor.clone();
        let to_executor = match env.status {
            Status::Completed | Status::Partial if !on_review => true,
            Status::Completed | Status::Partial => match verdict {
                Some(accepted) => accepted,
                None => return Ok(false),
            },
            s if s.is_terminal() => false,
            _ => return Ok(false),
        };
        let (to, kind) = match (to_executor, executor) {
            (true, Some(x)) => (x, "release"),
            _ => (env.requestor.clone(), "refund"),
        };
        let movement = Movement {
            id: format!("settle-{thread}"),
            at: self.now(),
            from: format!("escrow:{thread}"),
            to,
            shells,
            kind: kind.to_owned(),
            thread: Some(thread.to_string()),
            note: Some(format!("the request is {}", env.status)),
        };
        let moved = self.record(&movement, &|_| Ok(()))?;
        // Settled: the delivery queued for a crash has nothing left to do.
        let mut queued = crate::store::outbox::Delivery::new(
            thread.as_str(),
            crate::protocol::envelope::EXCHANGE,
            CHANNEL,
            Value::Null,
            "settle",
            self.now(),
        );
        let only: std::collections::HashSet<String> = [thread.to_string()].into();
        let (waiting, _) = self
            .store()
            .deliveries_of(crate::store::outbox::Shelf::Queue, Some(&only));
        if moved && waiting.iter().any(|d| d.id == queued.id) {
            queued.outcome = Some("settled".to_owned());
            let _ = self.store().shelve(
                &queued,
                crate::store::outbox::Shelf::Queue,
                crate::store::outbox::Shelf::Done,
            );
        }
        Ok(moved)
    }
}
