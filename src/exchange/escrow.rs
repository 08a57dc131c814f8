//! Escrow of a request's compensation in shells (docs/guide/marketplace.md#escrow): taken from
//! the requestor when the request is created, carried into the new threads when an accepted
//! suggestion moves the work (a delegation, a merge, the parts of a split), and settled once
//! when the outcome is known: to the executor (less the delegators' shares the request states)
//! or back to the requestor. A sweep refunds an escrow whose thread was never written.

use crate::exchange::Error;
use crate::exchange::shells::Marketplace;
use crate::protocol::envelope::{EXCHANGE, Envelope};
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Payload;
use crate::protocol::request::Request;
use crate::protocol::status::Status;
use crate::protocol::time::Timestamp;
use crate::protocol::value::{Map, Value};
use crate::store::ledger::{Balances, Movement};
use crate::store::thread::ThreadFile;

/// The envelope field that records a request's escrow (see [`Held`]).
pub(crate) const ESCROW: &str = "escrow";

/// How old an escrow without a thread must be before the sweep refunds it: the thread is
/// written right after its escrow, so one this old was left by a process that stopped between.
const ORPHANED_AFTER_SECONDS: i64 = 300;

/// The most a delegator's share may be, in percent: below 100, so the executor that does the
/// work is always paid something.
const MOST_SHARE: i64 = 99;

/// The shells a request offers (`compensation.shells`, above zero), if any.
pub(crate) fn offered(request: &Request) -> Option<i64> {
    match compensation(request)?.get("shells")? {
        Value::Int(n) if *n > 0 => Some(*n),
        _ => None,
    }
}

fn compensation(request: &Request) -> Option<&Map> {
    request.compensation.as_ref()?.as_map()
}

fn escrow_terms(request: &Request) -> Option<&Map> {
    compensation(request)?.get("escrow")?.as_map()
}

/// The moments an escrow may be released at (`compensation.escrow.release_on`): when the work
/// is completed (the default) or when a review accepts it.
const RELEASE_ON: [&str; 2] = ["completed", "reviewed"];

/// Where a request states when its escrow is released.
const RELEASE_FIELD: &str = "compensation.escrow.release_on";

/// When a request's escrow goes to its executor: `completed` (the default) or `reviewed`
/// (`compensation.escrow.release_on`); [`check_terms`] refuses any other word at the door.
fn release_on(request: &Request) -> &'static str {
    match release_term(request) {
        Ok(Some(on)) => on,
        _ => RELEASE_ON[0],
    }
}

/// The release moment a request states, if any, or why the value is refused: the field is
/// closed, so a misspelt `reviewd` never silently pays on completion.
fn release_term(request: &Request) -> Result<Option<&'static str>, String> {
    let Some(v) = escrow_terms(request).and_then(|e| e.get("release_on")) else {
        return Ok(None);
    };
    if matches!(v, Value::Null) {
        return Ok(None);
    }
    let word = v.scalar_text().unwrap_or_default();
    RELEASE_ON
        .iter()
        .find(|on| **on == word.trim())
        .map(|on| Some(*on))
        .ok_or_else(|| {
            format!(
                "unknown release_on {} (expected one of: {})",
                crate::protocol::emit::to_yaml(v).trim(),
                RELEASE_ON.join(", ")
            )
        })
}

/// Where a request states the share of each executor that delegates the work.
pub(crate) const SHARE_FIELD: &str = "compensation.escrow.delegator_share";

/// Checks the terms a request states for shells before anything is written: `shells` a whole
/// number (0 or more), `escrow` a mapping, `escrow.release_on` one of [`RELEASE_ON`] and
/// `escrow.delegator_share` a percent; the field and why otherwise.
pub(crate) fn check_terms(request: &Request) -> Result<(), (&'static str, String)> {
    if let Some(shells) = compensation(request).and_then(|c| c.get("shells")) {
        match shells {
            Value::Int(n) if *n >= 0 => {}
            Value::Null => {}
            other => {
                return Err((
                    "compensation.shells",
                    format!(
                        "{} is not a whole number of shells (0 or more)",
                        crate::protocol::emit::to_yaml(other).trim()
                    ),
                ));
            }
        }
    }
    if let Some(terms) = compensation(request).and_then(|c| c.get("escrow"))
        && !matches!(terms, Value::Map(_) | Value::Null)
    {
        return Err((
            "compensation.escrow",
            "expected a mapping of escrow terms (release_on, delegator_share)".to_owned(),
        ));
    }
    release_term(request).map_err(|why| (RELEASE_FIELD, why))?;
    delegator_share(request)
        .map(|_| ())
        .map_err(|why| (SHARE_FIELD, why))
}

/// The percent of the shells each executor that delegates the work keeps
/// (`compensation.escrow.delegator_share`, 0 when unstated), or why the figure is refused.
pub(crate) fn delegator_share(request: &Request) -> Result<i64, String> {
    match escrow_terms(request).and_then(|e| e.get("delegator_share")) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Int(n)) if (0..=MOST_SHARE).contains(n) => Ok(*n),
        Some(other) => Err(format!(
            "{} is not a share in percent (0 to {MOST_SHARE})",
            crate::protocol::emit::to_yaml(other).trim()
        )),
    }
}

/// What a thread's escrow holds and on what terms, as its envelope records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// The shells taken into it.
    pub(crate) shells: i64,
    /// `completed` or `reviewed`.
    pub(crate) release_on: String,
    /// The percent each delegator keeps on release.
    pub(crate) share: i64,
    /// The executors that delegated the work here, first first.
    pub(crate) delegators: Vec<String>,
}

impl Held {
    /// The escrow `env` records, if any.
    pub(crate) fn of(env: &Envelope) -> Option<Held> {
        let m = env.extra.get(ESCROW)?.as_map()?;
        let Some(Value::Int(shells)) = m.get("shells") else {
            return None;
        };
        Some(Held {
            shells: *shells,
            release_on: m
                .get("release_on")
                .and_then(Value::scalar_text)
                .unwrap_or_else(|| "completed".to_owned()),
            share: match m.get("delegator_share") {
                Some(Value::Int(n)) => (*n).clamp(0, MOST_SHARE),
                _ => 0,
            },
            delegators: m
                .get("delegators")
                .and_then(Value::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(Value::scalar_text)
                .collect(),
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("shells", Value::Int(self.shells));
        m.insert("release_on", Value::str(&self.release_on));
        if self.share > 0 {
            m.insert("delegator_share", Value::Int(self.share));
        }
        if !self.delegators.is_empty() {
            m.insert(
                "delegators",
                Value::Seq(self.delegators.iter().map(Value::str).collect()),
            );
        }
        Value::Map(m)
    }
}

/// What a thread made by an accepted suggestion takes over: shells from the escrows of the
/// threads it replaces, on the terms it holds them.
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    /// Each source thread and the shells taken from its escrow.
    pub(crate) from: Vec<(ThreadRef, i64)>,
    pub(crate) terms: Held,
}

/// Whether `file` ended because an accepted suggestion moved its work to other threads
/// (superseded or delegated by the exchange's verdict): its escrow goes with the work.
pub(crate) fn moved_on(file: &ThreadFile) -> Result<bool, Error> {
    if !matches!(file.envelope.status, Status::Superseded | Status::Delegated) {
        return Ok(false);
    }
    for doc in file.messages_rev() {
        let doc = doc?;
        if doc.from != EXCHANGE {
            continue;
        }
        for p in &doc.message.payloads {
            if let Payload::Status(s) = p
                && s.extra.contains_key("suggestion")
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Adds to `edit` of the thread `before` the delivery that settles its escrow when the edit
/// may decide it (the thread ends, or a review arrives), in the same write.
pub(crate) fn queue(before: &ThreadFile, edit: &mut crate::store::Edit) {
    let after = &edit.envelope;
    if !after.extra.contains_key(ESCROW) {
        return;
    }
    let ends = after.status.is_terminal() && !before.envelope.status.is_terminal();
    let reviewed = edit.append.iter().any(|d| {
        d.message
            .payloads
            .iter()
            .any(|p| matches!(p, Payload::Review(_)))
    });
    if !(ends || reviewed) {
        return;
    }
    // One delivery per change that may decide it, named by the thread's length after it: a
    // delivery's id is made from its kind, and one id is queued once ever, so a later change
    // (a review after the completion) needs its own.
    edit.deliveries.push(crate::store::outbox::Delivery::new(
        after.thread_ref.as_str(),
        EXCHANGE,
        crate::store::outbox::Job::Settlement,
        Value::Null,
        &format!(
            "settle-{}",
            crate::store::thread::pieces(before.text()).1.len() + edit.append.len()
        ),
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

impl Marketplace<'_> {
    /// Takes `request`'s shells from `requestor` into the escrow of `thread` (once), refused
    /// when the balance is short; the envelope field to record it, or `None` when the request
    /// offers no shells.
    pub(crate) fn escrow(
        &self,
        thread: &ThreadRef,
        request: &Request,
        requestor: &str,
        now: Timestamp,
    ) -> Result<Option<Value>, Error> {
        let Some(shells) = offered(request) else {
            return Ok(None);
        };
        let share =
            delegator_share(request).map_err(|why| ProtocolError::invalid(SHARE_FIELD, why))?;
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
        let taken = self.record(&movement, &move |b: &Balances| {
            let held = b.get(&who).copied().unwrap_or_default();
            if held >= shells {
                Ok(())
            } else {
                Err(format!(
                    "the request offers {shells} shells and {who} holds {held} (the operator grants shells: mess shells grant {who} N)"
                ))
            }
        })?;
        if !taken {
            // The ref was escrowed before (its counter lost): this thread holds nothing.
            return Err(ProtocolError::conflict(format!(
                "the ledger already holds an escrow for {thread}; nothing was written (run mess fsck)"
            ))
            .into());
        }
        Ok(Some(
            Held {
                shells,
                release_on: release_on(request).to_owned(),
                share,
                delegators: Vec::new(),
            }
            .to_value(),
        ))
    }

    /// Moves what `carried` names from the source escrows into the escrow of `fresh`, each
    /// movement once; the envelope field for `fresh`, or `None` when it holds nothing.
    pub(crate) fn carry_escrow(
        &self,
        carried: &Carried,
        fresh: &ThreadRef,
        now: Timestamp,
    ) -> Result<Option<Value>, Error> {
        let mut total = 0;
        for (source, shells) in carried.from.iter().filter(|(_, n)| *n > 0) {
            let movement = Movement {
                id: format!("carry-{source}-{fresh}"),
                at: now,
                from: format!("escrow:{source}"),
                to: format!("escrow:{fresh}"),
                shells: *shells,
                kind: "carry".to_owned(),
                thread: Some(fresh.to_string()),
                note: Some(format!("carried from {source} by an accepted suggestion")),
            };
            self.record(&movement, &|_| Ok(()))?;
            total += shells;
        }
        if total == 0 {
            return Ok(None);
        }
        let held = Held {
            shells: total,
            ..carried.terms.clone()
        };
        Ok(Some(held.to_value()))
    }

    /// What the escrow of `source` had for the work an accepted suggestion moved on: what was
    /// taken into it less what was paid out before (work paid and then redone has nothing
    /// left), whatever the suggestion has carried or refunded since.
    pub(crate) fn available(&self, source: &ThreadRef) -> Result<i64, Error> {
        let account = format!("escrow:{source}");
        let rest = format!("rest-{source}");
        let mut available = 0;
        for m in self.ex.store().ledger()? {
            if m.to == account {
                available += m.shells;
            } else if m.from == account && m.kind != "carry" && m.id != rest {
                available -= m.shells;
            }
        }
        Ok(available.max(0))
    }

    /// Refunds to `requestor` what the escrow of `source` still holds once an accepted
    /// suggestion carried what it carries (a split that gave its parts less): `rest-REF`.
    pub(crate) fn refund_rest(
        &self,
        source: &ThreadRef,
        requestor: &str,
        now: Timestamp,
    ) -> Result<bool, Error> {
        let account = format!("escrow:{source}");
        let rest = self
            .shell_balances()?
            .get(&account)
            .copied()
            .unwrap_or_default();
        if rest <= 0 {
            return Ok(false);
        }
        let movement = Movement {
            id: format!("rest-{source}"),
            at: now,
            from: account.clone(),
            to: requestor.to_owned(),
            shells: rest,
            kind: "refund".to_owned(),
            thread: Some(source.to_string()),
            note: Some("what the accepted suggestion did not carry".to_owned()),
        };
        self.record(&movement, &move |b: &Balances| match b
            .get(&account)
            .copied()
            .unwrap_or_default()
        {
            held if held == rest => Ok(()),
            held => Err(format!(
                "{account} now holds {held}, not {rest}; settled again later"
            )),
        })
    }

    /// Settles the escrow of `thread` once its outcome is known, once: to its executor when it
    /// completed (with `release_on: reviewed`, once a review accepts it), less each delegator's
    /// share, or back to its requestor when it ended any other way or a review rejected it.
    /// Work an accepted suggestion moved on carries its escrow with it and is not settled
    /// here. Returns whether it moved shells now.
    pub(crate) fn settle_escrow(&self, thread: &ThreadRef) -> Result<bool, Error> {
        let file = match self.ex.store().read(thread) {
            Ok(f) => f,
            Err(crate::store::error::StoreError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let env = &file.envelope;
        let Some(held) = Held::of(env) else {
            return Ok(false);
        };
        if moved_on(&file)? {
            return Ok(false);
        }
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
        // A release interrupted after a delegator's share was paid goes on as a release,
        // whatever happened since: the retry decides as the first attempt did.
        let shares_paid = {
            let prefix = format!("share-{thread}-");
            self.ex
                .store()
                .ledger()?
                .iter()
                .any(|m| m.id.starts_with(&prefix))
        };
        let to_executor = match env.status {
            _ if shares_paid => true,
            Status::Completed | Status::Partial if held.release_on != "reviewed" => true,
            Status::Completed | Status::Partial => match verdict {
                Some(accepted) => accepted,
                None => return Ok(false),
            },
            s if s.is_terminal() => false,
            _ => return Ok(false),
        };
        let now = self.ex.now();
        let from = format!("escrow:{thread}");
        let mut rest = held.shells;
        let (to, kind) = match (to_executor, env.executor.clone()) {
            (true, Some(x)) => {
                for (n, delegator) in held.delegators.iter().enumerate() {
                    let cut =
                        i64::try_from(i128::from(rest) * i128::from(held.share) / 100).unwrap_or(0);
                    if cut == 0 {
                        continue;
                    }
                    rest -= cut;
                    let share = Movement {
                        id: format!("share-{thread}-{}", n + 1),
                        at: now,
                        from: from.clone(),
                        to: delegator.clone(),
                        shells: cut,
                        kind: "share".to_owned(),
                        thread: Some(thread.to_string()),
                        note: Some(format!("{}% for delegating the work", held.share)),
                    };
                    self.record(&share, &|_| Ok(()))?;
                }
                (x, "release")
            }
            _ => (env.requestor.clone(), "refund"),
        };
        let movement = Movement {
            id: format!("settle-{thread}"),
            at: now,
            from,
            to,
            shells: rest,
            kind: kind.to_owned(),
            thread: Some(thread.to_string()),
            note: Some(format!("the request is {}", env.status)),
        };
        let moved = self.record(&movement, &|_| Ok(()))?;
        if moved {
            self.shelve_settlement(thread);
        }
        Ok(moved)
    }

    /// Settled: the deliveries queued in case of a crash have nothing left to do.
    fn shelve_settlement(&self, thread: &ThreadRef) {
        use crate::store::outbox::Shelf;
        let only: std::collections::HashSet<String> = [thread.to_string()].into();
        let (waiting, _) = self.ex.store().deliveries_of(Shelf::Queue, Some(&only));
        for mut queued in waiting
            .into_iter()
            .filter(|d| d.job == crate::store::outbox::Job::Settlement)
        {
            queued.outcome = Some("settled".to_owned());
            let _ = self.ex.store().shelve(&queued, Shelf::Queue, Shelf::Done);
        }
    }

    /// Refunds every escrow whose thread was never written (its process stopped between the
    /// two) once it is old enough that no writer is still on its way; the refs refunded.
    pub fn sweep_orphan_escrows(&self) -> Result<Vec<String>, Error> {
        let now = self.ex.now();
        let ledger = self.ex.store().ledger()?;
        let balances = crate::store::ledger::balances_of(&ledger);
        let mut refunded = Vec::new();
        for m in ledger.iter().filter(|m| m.kind == "escrow") {
            let Some(thread) =
                m.id.strip_prefix("escrow-")
                    .and_then(|r| ThreadRef::parse(r).ok())
            else {
                continue;
            };
            let held = balances
                .get(&format!("escrow:{thread}"))
                .copied()
                .unwrap_or_default();
            if held <= 0 || (now - m.at).num_seconds() < ORPHANED_AFTER_SECONDS {
                continue;
            }
            if !self.ex.store().find(&thread)?.is_empty() {
                continue;
            }
            let refund = Movement {
                id: format!("settle-{thread}"),
                at: now,
                from: format!("escrow:{thread}"),
                to: m.from.clone(),
                shells: held,
                kind: "refund".to_owned(),
                thread: Some(thread.to_string()),
                note: Some("the request was never written; refunded by the sweep".to_owned()),
            };
            if self.record(&refund, &|_| Ok(()))? {
                tracing::info!(thread = %thread, shells = held, "refunded an escrow whose request was never written");
                refunded.push(thread.to_string());
            }
        }
        Ok(refunded)
    }
}
