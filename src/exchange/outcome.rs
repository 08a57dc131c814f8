//! What one attempt of an outbox job came to, in the terms every kind's handler reports it
//! (the notices of `deliver`, `peers`' forwards, `callbacks`, `robots`' calls, and the
//! exchange's own work in `jobs`), so the job worker records them all in one place.

use crate::notify::{NotifyError, Sent};

/// How one attempt of a job failed, in its kind's terms.
#[derive(Debug)]
pub(crate) enum JobError {
    /// A notice, forward, callback or robot call was not sent: the channel's own error, which
    /// says whether another try may help. Its last one is noted in the thread.
    Undelivered(NotifyError),
    /// A settlement did not finish (the ledger or the thread could not be written).
    Unsettled(String),
    /// An accepted suggestion's carrying out did not finish.
    NotCarriedOut(String),
}

impl JobError {
    /// Whether another attempt may succeed. The exchange's own work is made of idempotent
    /// steps, so it always may.
    pub(crate) fn retryable(&self) -> bool {
        match self {
            JobError::Undelivered(e) => matches!(e, NotifyError::Retry { .. }),
            JobError::Unsettled(_) | JobError::NotCarriedOut(_) => true,
        }
    }
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobError::Undelivered(e) => write!(f, "{e}"),
            JobError::Unsettled(m) => write!(f, "settling: {m}"),
            JobError::NotCarriedOut(m) => write!(f, "carrying out: {m}"),
        }
    }
}

/// What one attempt of a job came to, as its handler reports it.
pub(crate) enum Outcome {
    /// A message went out; `updatable` when its channel can edit it once the thread is taken.
    Sent { sent: Sent, updatable: bool },
    /// Nothing (more) to do, and why: `moot: the thread is gone`, `settled (now)`.
    Done(String),
    /// The attempt failed.
    Failed(JobError),
    /// The handler already put the job where it belongs (requeued to wait for its thread, or
    /// shelved as moot): the worker rereads the queue.
    Placed,
    /// The handler stopped without an answer (it panicked): whether anything was sent is
    /// unknown, so this process does not try it again.
    Unknown,
}

impl Outcome {
    /// Nothing to send or do, and why.
    pub(crate) fn moot(why: impl std::fmt::Display) -> Outcome {
        Outcome::Done(format!("moot: {why}"))
    }

    /// Not sent, for the channel's reason `e`.
    pub(crate) fn undelivered(e: NotifyError) -> Outcome {
        Outcome::Failed(JobError::Undelivered(e))
    }

    /// What a channel's answer comes to, for a channel that never edits its messages later.
    pub(crate) fn of_sending(answer: Result<Sent, NotifyError>) -> Outcome {
        match answer {
            Ok(sent) => Outcome::Sent {
                sent,
                updatable: false,
            },
            Err(e) => Outcome::undelivered(e),
        }
    }
}
