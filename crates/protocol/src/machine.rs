//! The thread state machine (docs/protocol.md) as pure functions: which status changes each
//! kind of actor may make, and the v1.1 confirmation gate.

use crate::envelope::ConfirmState;
use crate::error::ProtocolError;
use crate::status::Status;

/// The role of whoever sends a status change, relative to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// The agent that created the thread.
    Requestor,
    /// The executor that claimed the thread.
    Claimant,
    /// Any other registered executor.
    Executor,
    /// The exchange itself (expiry, dependency failure).
    Exchange,
}

impl Actor {
    /// Every actor kind.
    pub const ALL: [Actor; 4] = [
        Actor::Requestor,
        Actor::Claimant,
        Actor::Executor,
        Actor::Exchange,
    ];
}

/// Something an executor wants to do that the confirmation handshake may hold back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Report this status.
    Status(Status),
    /// Deliver a response.
    Response,
}

/// Checks that `actor` may move thread `thread` from `from` to `to`.
///
/// Terminal statuses are final, except that `partial` may still become `completed`. Repeating an
/// ongoing status (`in_progress` with new progress, `waiting`, `held`, `retrying`, `needs_input`,
/// `needs_confirmation`) is an update, not a change, and is allowed to the claimant.
pub fn check_transition(
    thread: &str,
    from: Status,
    to: Status,
    actor: Actor,
) -> Result<(), ProtocolError> {
    use Status::*;
    if from.is_terminal() {
        return Err(ProtocolError::conflict(format!(
            "cannot set {thread} to {to}: it is already {from}, which is final"
        )));
    }
    if to == Pending {
        return Err(ProtocolError::conflict(format!(
            "cannot set {thread} to received: only the exchange reports receipt"
        )));
    }
    let refuse = |why: &str| {
        Err(ProtocolError::conflict(format!(
            "cannot move {thread} from {from} to {to}: {why}"
        )))
    };
    let forbid = |why: &str| {
        Err(ProtocolError::forbidden(format!(
            "cannot move {thread} from {from} to {to}: {why}"
        )))
    };
    match actor {
        Actor::Exchange => match (from, to) {
            (Pending, Expired | Failed | Cancelled) => Ok(()),
            (Waiting | Held, Expired) => Ok(()),
            _ => refuse("the exchange only expires, fails or cancels threads nobody has claimed"),
        },
        Actor::Requestor => match (from, to) {
            (Pending, Cancelled) => Ok(()),
            (f, Cancelled) if f.is_active() => Ok(()),
            (Partial, Cancelled) => {
                refuse("a partial result was delivered; it can only become completed")
            }
            _ => forbid("the requestor may only cancel; status is reported by the executor"),
        },
        Actor::Executor => match (from, to) {
            (Pending, Claimed) => Ok(()),
            // A decline is final for everyone, so it takes the claim first; an executor that
            // does not want the work simply leaves it for others.
            (Pending, Declined) => {
                refuse("claim it first (declining ends the request for every executor)")
            }
            (Pending, _) => refuse("claim it first"),
            (_, Claimed) => refuse("it is already claimed"),
            _ => forbid("only the executor that claimed it may update it"),
        },
        Actor::Claimant => match (from, to) {
            (Pending, _) => refuse("it is not claimed"),
            (Partial, Completed) => Ok(()),
            (Partial, _) => refuse("a partial result was delivered; it can only become completed"),
            (_, Claimed) => refuse("it is already claimed"),
            (Waiting | Held, Expired) => Ok(()),
            (_, Expired) => refuse("only waiting or held work expires"),
            (Claimed, InProgress | Waiting | Held | Retrying | NeedsInput | NeedsConfirmation) => {
                Ok(())
            }
            (InProgress | Waiting | Held | Retrying | NeedsInput | NeedsConfirmation, _)
                if to.is_active() =>
            {
                Ok(())
            }
            (_, Completed | Partial | Failed | Declined | Cancelled | Superseded | Delegated) => {
                Ok(())
            }
            _ => refuse("not a valid step"),
        },
    }
}

/// Checks the v1.1 confirmation rules for an executor step on a thread.
///
/// With `confirm_before`, `in_progress`, `completed`, `partial` and responses wait for the
/// requestor's `confirm: true` to an earlier `needs_confirmation`. After `confirm: false`, only
/// `cancelled` or `held` are accepted, on any thread. `cancelled` from an executor is accepted
/// only in that case: otherwise an executor that gives up reports `failed` or `declined`.
pub fn check_confirmation(
    thread: &str,
    confirm_before: bool,
    state: Option<ConfirmState>,
    step: Step,
) -> Result<(), ProtocolError> {
    if state == Some(ConfirmState::Rejected) {
        return match step {
            Step::Status(Status::Cancelled | Status::Held) => Ok(()),
            _ => Err(ProtocolError::conflict(format!(
                "cannot {} {thread}: the requestor refused confirmation; only cancelled or held are accepted",
                describe(step)
            ))),
        };
    }
    if step == Step::Status(Status::Cancelled) {
        return Err(ProtocolError::conflict(format!(
            "cannot set {thread} to cancelled: executors report failed or declined (cancelled follows a refused confirmation)"
        )));
    }
    let gated = matches!(
        step,
        Step::Response | Step::Status(Status::InProgress | Status::Completed | Status::Partial)
    );
    if confirm_before && gated && state != Some(ConfirmState::Confirmed) {
        let how = match state {
            Some(ConfirmState::Requested) => "wait for the requestor to reply confirm: true",
            _ => "send needs_confirmation first and wait for the requestor's confirm: true",
        };
        return Err(ProtocolError::conflict(format!(
            "cannot {} {thread}: it requires confirmation before work starts; {how}",
            describe(step)
        )));
    }
    Ok(())
}

/// Checks that the requestor may reply to a thread now; `answers` and `confirms` say whether the
/// reply carries answers to questions or a confirmation.
///
/// A final thread takes no reply. A `partial` thread may still become `completed`, but its
/// executor has delivered and asks nothing more, so answers and confirmations are refused as on
/// a final thread (other replies, such as an acceptance of a suggestion, still reach it). A
/// confirmation answers an open `needs_confirmation`, so one sent after the thread was
/// confirmed is refused as already given.
pub fn check_reply(
    thread: &str,
    status: Status,
    state: Option<ConfirmState>,
    answers: bool,
    confirms: bool,
) -> Result<(), ProtocolError> {
    if status.is_terminal() || (status == Status::Partial && (answers || confirms)) {
        return Err(ProtocolError::conflict(format!(
            "cannot reply to {thread}: it is {status}, which is final{}",
            if status == Status::Partial {
                " for answers and confirmations (a partial result was delivered)"
            } else {
                ""
            }
        )));
    }
    if confirms {
        match state {
            Some(ConfirmState::Requested | ConfirmState::Rejected) => {}
            Some(ConfirmState::Confirmed) => {
                return Err(ProtocolError::conflict(format!(
                    "cannot confirm {thread}: it was already confirmed (it is {status})"
                )));
            }
            None => {
                return Err(ProtocolError::conflict(format!(
                    "cannot confirm {thread}: no confirmation was asked for (it is {status}); confirm answers a needs_confirmation"
                )));
            }
        }
    }
    Ok(())
}

/// Checks that the requestor may review a thread now: the work is over (completed, partial
/// or failed) and an executor did it. A redo (`request_redo`) reopens completed or partial
/// work to the same executor: the one transition out of a final status, and the requestor's
/// alone.
pub fn check_review(
    thread: &str,
    status: Status,
    has_executor: bool,
    redo: bool,
) -> Result<(), ProtocolError> {
    if !matches!(status, Status::Completed | Status::Partial | Status::Failed) {
        return Err(ProtocolError::conflict(format!(
            "cannot review {thread}: it is {status}; a review follows finished work (completed, partial or failed)"
        )));
    }
    if !has_executor {
        return Err(ProtocolError::conflict(format!(
            "cannot review {thread}: no executor worked on it"
        )));
    }
    if redo && status == Status::Failed {
        return Err(ProtocolError::conflict(format!(
            "cannot ask for {thread} again: it failed; send a new request instead"
        )));
    }
    Ok(())
}

fn describe(step: Step) -> String {
    match step {
        Step::Status(s) => format!("set to {s}"),
        Step::Response => "deliver a response for".to_owned(),
    }
}

/// What the exchange writes into a thread whose deadline (`expires`, else `needed_by`) has
/// passed at `now` while it still waited (pending, waiting or held): an `expired` status naming
/// the deadline and the stage it ended in. `None` while the deadline is ahead or no longer
/// applies. One rule for every build, so their thread files agree byte for byte.
pub fn expiry(
    env: &crate::envelope::Envelope,
    now: crate::time::Timestamp,
) -> Option<crate::envelope::MessageDoc> {
    use crate::status::{StatusDetails, StatusMsg};
    let (at, which) = env.deadline().filter(|(t, _)| *t <= now)?;
    let stage = env.status;
    let mut status = StatusMsg::new(
        env.thread_ref.as_str(),
        StatusDetails::Expired {
            expired_at: at,
            stage: Some(stage.as_str().to_owned()),
        },
    );
    status.message = Some(match (&env.hands.approval, which, stage) {
        (Some(a), _, _) => format!(
            "{which} passed with {} of the {} approvals needed; not approved",
            env.hands.tally().0,
            a.need
        ),
        (None, "escalate", _) => "the escalation ladder ended with nobody taking it".to_owned(),
        (None, _, Status::Pending) if env.hands.multi() => format!(
            "{which} passed with no answer in ({} of {} slots taken)",
            env.hands.taken(),
            env.hands.wanted()
        ),
        (None, _, Status::Pending) => format!("{which} passed before anyone claimed it"),
        (None, _, other) => format!("{which} passed while it was {other}"),
    });
    Some(crate::envelope::MessageDoc {
        from: crate::envelope::EXCHANGE.to_owned(),
        received: now,
        channel: None,
        message: crate::message::Message::new(vec![crate::message::Payload::Status(status)]),
        extra: crate::value::Map::new(),
    })
}
