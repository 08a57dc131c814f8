//! The outbox's typed jobs: each kind keeps its own retry policy (a message is given up after
//! the `dispatch:` attempts and its failure noted in the thread; the exchange's own work is
//! retried until done and never reported as a notice), and operators see jobs by kind.

use crate::exchange::outcome::{JobError, Outcome};
use crate::exchange::tests::escrow::expired_without_settling;
use crate::exchange::tests::{EXECUTORS, Fixture, fixture};
use crate::notify::NotifyError;
use crate::protocol::ids::ThreadRef;
use crate::store::outbox::{Delivery, Job, Shelf};

/// The queued job of `kind` about thread `r`.
fn queued(f: &Fixture, r: &str, kind: &str) -> Option<Delivery> {
    f.ex.store()
        .deliveries(Shelf::Queue)
        .0
        .into_iter()
        .find(|d| d.thread == r && d.job.kind() == kind)
}

fn history_has(f: &Fixture, r: &str, what: &str) -> bool {
    f.env(r).history.iter().any(|h| h.action == what)
}

#[test]
fn a_settlement_that_keeps_failing_is_retried_until_done_and_never_noted_as_a_notice() {
    let f = fixture(EXECUTORS);
    f.ex.marketplace()
        .grant_shells("claude-agent", 50, None)
        .unwrap();
    let r = f.request(
        "claude-agent",
        "intent: vacuum\nrequires: [vacuum-floor]\ncompensation: {shells: 10}",
    );
    expired_without_settling(&f, &ThreadRef::parse(&r).unwrap());
    let mut job = queued(&f, &r, "settlement").expect("a settlement is queued");
    assert_eq!(job.job, Job::Settlement);
    // Far more failures than a notice may have: it goes back to the queue each time, with
    // the latest attempts kept and a wait that grows.
    for n in 0..40 {
        let outcome = Outcome::Failed(JobError::Unsettled(format!("the disk is full ({n})")));
        job =
            f.ex.outbox()
                .record_attempt(&job, outcome)
                .unwrap()
                .expect("requeued, never given up");
    }
    assert_eq!(job.attempts.len(), 16, "only the latest attempts are kept");
    assert!(job.attempts[15].error.contains("(39)"));
    assert!(job.due > f.ex.now() + chrono::TimeDelta::seconds(60));
    assert!(!history_has(&f, &r, "notify_failed"));
    let report = f.ex.outbox().jobs();
    let settlements = &report.kinds["settlement"];
    assert_eq!(
        (settlements.queued, settlements.retrying, settlements.failed),
        (1, 1, 0)
    );
    assert_eq!(
        settlements.last_error.as_ref().map(|(_, e)| e.as_str()),
        Some("settling: the disk is full (39)")
    );
    // Once it can, it settles, whenever it is next tried.
    assert_eq!(f.ex.outbox().finish_internal_work().unwrap(), 1);
    assert!(queued(&f, &r, "settlement").is_none());
    let report = f.ex.outbox().jobs();
    assert_eq!(report.kinds["settlement"].done, 1);
}

#[test]
fn a_notice_is_given_up_after_its_policys_attempts_and_its_failure_noted_in_the_thread() {
    let f = fixture(EXECUTORS);
    // The default rule offers it to teague-phone, whose one channel is slack.
    let r = f.request("claude-agent", "intent: look in the fridge");
    let mut job = queued(&f, &r, "notice").expect("a notice is queued");
    assert_eq!(job.job, Job::Notice("slack".to_owned()));
    let most = f.ex.outbox().retry_policy(&job.job).attempts.unwrap();
    for n in 1..most {
        job =
            f.ex.outbox()
                .record_attempt(
                    &job,
                    Outcome::undelivered(NotifyError::Retry {
                        message: format!("slack: 503 ({n})"),
                    }),
                )
                .unwrap()
                .expect("retried while attempts remain");
        assert!(!history_has(&f, &r, "notify_failed"));
    }
    let last = Outcome::undelivered(NotifyError::Retry {
        message: "slack: 503 (last)".to_owned(),
    });
    assert!(f.ex.outbox().record_attempt(&job, last).unwrap().is_none());
    assert!(queued(&f, &r, "notice").is_none());
    let (failed, _) = f.ex.store().deliveries(Shelf::Failed);
    assert_eq!(failed.len(), 1);
    assert!(history_has(&f, &r, "notify_failed"));
    assert_eq!(f.ex.outbox().jobs().kinds["notice"].failed, 1);
}

#[test]
fn a_refusal_that_trying_again_cannot_change_gives_a_notice_up_at_once() {
    let f = fixture(EXECUTORS);
    let r = f.request("claude-agent", "intent: look in the fridge");
    let job = queued(&f, &r, "notice").unwrap();
    let refused = Outcome::undelivered(NotifyError::Fail {
        message: "slack: channel_not_found".to_owned(),
    });
    assert!(
        f.ex.outbox()
            .record_attempt(&job, refused)
            .unwrap()
            .is_none()
    );
    assert!(history_has(&f, &r, "notify_failed"));
}

#[test]
fn every_kind_has_its_policy_and_only_the_exchanges_own_work_is_unbounded() {
    let f = fixture(EXECUTORS);
    let kinds = [
        Job::Notice("webhook".to_owned()),
        Job::Forward,
        Job::Callback,
        Job::RobotCall,
        Job::CarryOut,
        Job::Settlement,
    ];
    for job in &kinds {
        let policy = f.ex.outbox().retry_policy(job);
        assert_eq!(policy.attempts.is_none(), job.is_internal(), "{job:?}");
        assert!(Job::KINDS.contains(&job.kind()));
    }
    let named: std::collections::HashSet<&str> = kinds.iter().map(Job::kind).collect();
    assert_eq!(named.len(), Job::KINDS.len(), "one kind per variant");
}
