//! The durable delivery queue under `.mess/outbox/`: one small YAML file per notification to
//! send, moved between shelves as it goes (`queue/` to send, `sent/` waiting for the thread to
//! be taken so the message can be updated, `done/`, `failed/`). Every move is a crash-safe
//! write before a removal, so a restart finds each delivery on at least one shelf and loses none.
//! In tier 1 the same records are rows of the database (`postgres::outbox`), leased to the node
//! sending them. Each record is a job of one [`Job`] kind; the exchange's job worker
//! (`exchange::jobs`) gives each kind its handler and retry policy.

use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};

/// What a job in the outbox does. Its record names it in the `channel` field, with the names
/// records have always carried (a notice by its channel, the others by a fixed word), so
/// records written by any version read the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Job {
    /// A notice to an executor on one of its `notify:` channels (`webhook`, `slack`,
    /// `telegram`, `sms`, `ntfy`, `email`, `mail`), named here as written there.
    Notice(String),
    /// A thread forwarded to the peer exchange a forwarding executor stands for.
    Forward,
    /// A requestor's callback URL told of a change of its thread.
    Callback,
    /// An offer made to a robot by calling its MCP tool.
    RobotCall,
    /// The rest of an accepted suggestion carried out (its new threads, the other originals).
    CarryOut,
    /// A request's escrowed shells settled (paid to the executor, or refunded).
    Settlement,
}

impl Job {
    /// Every kind, in the order operators see them listed.
    pub const KINDS: [&'static str; 6] = [
        "notice",
        "forward",
        "callback",
        "robot call",
        "carry-out",
        "settlement",
    ];

    /// The job a record's `channel` names.
    pub fn named(name: &str) -> Job {
        match name {
            "exchange" => Job::Forward,
            "callback" => Job::Callback,
            "mcp" => Job::RobotCall,
            "suggestion" => Job::CarryOut,
            "shells" => Job::Settlement,
            channel => Job::Notice(channel.to_owned()),
        }
    }

    /// The name its record carries (the notice's channel, or the kind's word); ids are made
    /// of it.
    pub fn name(&self) -> &str {
        match self {
            Job::Notice(channel) => channel,
            Job::Forward => "exchange",
            Job::Callback => "callback",
            Job::RobotCall => "mcp",
            Job::CarryOut => "suggestion",
            Job::Settlement => "shells",
        }
    }

    /// The kind, as operators see it listed (one of [`Job::KINDS`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Job::Notice(_) => "notice",
            Job::Forward => "forward",
            Job::Callback => "callback",
            Job::RobotCall => "robot call",
            Job::CarryOut => "carry-out",
            Job::Settlement => "settlement",
        }
    }

    /// Whether it is the exchange's own work rather than a message to someone: any process
    /// can finish it, one-shot commands included, and nobody needs to be reached.
    pub fn is_internal(&self) -> bool {
        matches!(self, Job::CarryOut | Job::Settlement)
    }
}

/// One job of the outbox: a notification of one executor on one channel, or one of the
/// other [`Job`] kinds about one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// `<thread>.<executor>.<job name>.<kind>`: the same notice is never queued twice.
    pub id: String,
    /// The thread it is about.
    pub thread: String,
    /// The executor notified (the exchange itself for its own work).
    pub executor: String,
    /// What it does.
    pub job: Job,
    /// The executor's `notify:` entry for the channel (an address, or a map with one).
    pub target: Value,
    /// `new` (please take this), `taken` (someone else took it), `escalated`.
    pub kind: String,
    /// When it was queued.
    pub created: Timestamp,
    /// When it is next tried.
    pub due: Timestamp,
    /// Failed attempts so far, oldest first.
    pub attempts: Vec<Attempt>,
    /// What the channel calls the message sent (a Slack `ts`), to update it later.
    pub provider_ref: Option<String>,
    /// The provider ref of the earlier message this one updates.
    pub previous: Option<String>,
    /// How it ended (`sent`, `moot: ...`, the last error).
    pub outcome: Option<String>,
}

impl Delivery {
    /// A fresh `kind` job of `thread` for `executor` (to `target`), due `now`; its id is
    /// `<thread>.<executor>.<job name>.<kind>`.
    pub fn new(
        thread: &str,
        executor: &str,
        job: Job,
        target: Value,
        kind: &str,
        now: Timestamp,
    ) -> Delivery {
        Delivery {
            id: format!("{thread}.{executor}.{}.{kind}", job.name()),
            thread: thread.to_owned(),
            executor: executor.to_owned(),
            job,
            target,
            kind: kind.to_owned(),
            created: now,
            due: now,
            attempts: Vec::new(),
            provider_ref: None,
            previous: None,
            outcome: None,
        }
    }
}

/// One failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// When.
    pub at: Timestamp,
    /// What went wrong (no secrets: channel errors are built without them).
    pub error: String,
}

/// Where a delivery is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shelf {
    /// To be sent (when due).
    Queue,
    /// Sent; kept until its thread is taken, to update or follow up the message.
    Sent,
    /// Finished.
    Done,
    /// Given up after the last retry.
    Failed,
}

impl Shelf {
    pub(crate) const ALL: [Shelf; 4] = [Shelf::Queue, Shelf::Sent, Shelf::Done, Shelf::Failed];

    /// The shelf's name (its folder, or its value in the database).
    pub(crate) fn dir_name(self) -> &'static str {
        match self {
            Shelf::Queue => "queue",
            Shelf::Sent => "sent",
            Shelf::Done => "done",
            Shelf::Failed => "failed",
        }
    }
}

impl Delivery {
    pub(crate) fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("id", Value::str(&self.id));
        m.insert("thread", Value::str(&self.thread));
        m.insert("executor", Value::str(&self.executor));
        m.insert("channel", Value::str(self.job.name()));
        m.insert("target", self.target.clone());
        m.insert("kind", Value::str(&self.kind));
        m.insert("created", Value::str(time::format_timestamp(&self.created)));
        m.insert("due", Value::str(time::format_timestamp(&self.due)));
        if !self.attempts.is_empty() {
            m.insert(
                "attempts",
                Value::Seq(
                    self.attempts
                        .iter()
                        .map(|a| {
                            let mut e = Map::new();
                            e.insert("at", Value::str(time::format_timestamp(&a.at)));
                            e.insert("error", Value::str(&a.error));
                            Value::Map(e)
                        })
                        .collect(),
                ),
            );
        }
        m.insert_opt("provider_ref", self.provider_ref.as_deref().map(Value::str));
        m.insert_opt("previous", self.previous.as_deref().map(Value::str));
        m.insert_opt("outcome", self.outcome.as_deref().map(Value::str));
        Value::Map(m)
    }

    pub(crate) fn from_value(v: &Value) -> Option<Delivery> {
        let m = v.as_map()?;
        let text = |k: &str| m.get(k).and_then(Value::scalar_text);
        let at = |k: &str| text(k).and_then(|t| time::parse_timestamp(&t).ok());
        Some(Delivery {
            id: text("id")?,
            thread: text("thread")?,
            executor: text("executor")?,
            job: Job::named(&text("channel")?),
            target: m.get("target").cloned().unwrap_or(Value::Null),
            kind: text("kind")?,
            created: at("created")?,
            due: at("due")?,
            attempts: m
                .get("attempts")
                .and_then(Value::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(|a| {
                    let a = a.as_map()?;
                    Some(Attempt {
                        at: time::parse_timestamp(&a.get("at")?.scalar_text()?).ok()?,
                        error: a.get("error")?.scalar_text()?,
                    })
                })
                .collect(),
            provider_ref: text("provider_ref"),
            previous: text("previous"),
            outcome: text("outcome"),
        })
    }
}

/// Whether `id` is safe as a file name (it is built from a ref, an executor id and two words).
pub(crate) fn usable_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

#[cfg(test)]
mod tests {
    use tempfile::TempDir;

    use crate::protocol::time;
    use crate::protocol::value::Value;

    use crate::store::outbox::{Delivery, Job, Shelf};

    fn delivery(id: &str) -> Delivery {
        let at = time::parse_timestamp("2026-01-31T12:00:00Z").unwrap();
        Delivery {
            id: id.to_owned(),
            thread: "2026-01-31-001".to_owned(),
            executor: "robot".to_owned(),
            job: Job::Notice("webhook".to_owned()),
            target: Value::str("http://127.0.0.1:9/robot"),
            kind: "new".to_owned(),
            created: at,
            due: at,
            attempts: Vec::new(),
            provider_ref: None,
            previous: None,
            outcome: None,
        }
    }

    #[test]
    fn every_job_reads_back_as_the_kind_its_record_names() {
        for job in [
            Job::Notice("slack".to_owned()),
            Job::Forward,
            Job::Callback,
            Job::RobotCall,
            Job::CarryOut,
            Job::Settlement,
        ] {
            let mut d = delivery("x");
            d.job = job.clone();
            let back = Delivery::from_value(&d.to_value()).unwrap();
            assert_eq!(back.job, job);
        }
        // Records written before jobs had kinds name them by the same words.
        let old = crate::protocol::yaml::parse_document(
            "id: a\nthread: 2026-01-31-001\nexecutor: exchange\nchannel: shells\nkind: settle-3\ncreated: 2026-01-31T12:00:00Z\ndue: 2026-01-31T12:00:00Z\n",
            &crate::protocol::yaml::Limits::DEFAULT,
        );
        let old = Delivery::from_value(&old.unwrap()).unwrap();
        assert_eq!((old.job.kind(), old.job.name()), ("settlement", "shells"));
    }

    #[test]
    fn a_delivery_is_queued_once_moves_between_shelves_and_survives_a_torn_move() {
        let dir = TempDir::new().unwrap();
        let store = crate::store::testing::store_in(dir.path());
        let d = delivery("2026-01-31-001.robot.webhook.new");
        assert!(store.enqueue(&d).unwrap());
        assert!(!store.enqueue(&d).unwrap(), "queued twice is queued once");
        assert_eq!(store.queued().0, vec![d.clone()]);
        assert!(store.enqueue(&delivery("../escape")).is_err());

        if crate::store::testing::on_postgres() {
            // One row moves between shelves in one statement: nothing is left to drop.
            store.shelve(&d, Shelf::Queue, Shelf::Done).unwrap();
            assert!(store.queued().0.is_empty());
            assert!(
                !store.enqueue(&d).unwrap(),
                "a finished delivery is not queued again"
            );
            assert_eq!(store.prune_done(std::time::Duration::from_secs(3600)), 0);
            assert_eq!(store.deliveries(Shelf::Done).0, vec![d.clone()]);
            return;
        }
        // A crash between writing the new shelf and removing the old one: the queue copy is
        // dropped on load, not sent again.
        let done = dir
            .path()
            .join(".mess/outbox/done/2026-01-31-001.robot.webhook.new.yaml");
        std::fs::create_dir_all(done.parent().unwrap()).unwrap();
        std::fs::copy(
            dir.path()
                .join(".mess/outbox/queue/2026-01-31-001.robot.webhook.new.yaml"),
            &done,
        )
        .unwrap();
        assert!(store.queued().0.is_empty());
        assert!(
            !store.enqueue(&d).unwrap(),
            "a finished delivery is not queued again"
        );

        // Old records of finished deliveries are swept; recent ones stay.
        assert_eq!(store.prune_done(std::time::Duration::from_secs(3600)), 0);
        let month_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 86_400);
        std::fs::File::options()
            .write(true)
            .open(&done)
            .unwrap()
            .set_modified(month_ago)
            .unwrap();
        assert_eq!(store.prune_done(std::time::Duration::from_secs(3600)), 1);
        assert!(store.deliveries(Shelf::Done).0.is_empty());
    }
}
