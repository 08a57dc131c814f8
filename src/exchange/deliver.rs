//! Notifying executors: routing decisions become deliveries in the durable outbox (one per
//! executor and `notify:` channel), and a server's delivery worker sends them with retries,
//! exponential backoff and jitter, records a final failure in the thread's history, and tells
//! the other notified executors when someone takes the thread (where the channel can update
//! its message). Deliveries are files, so a restart resumes them all.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::exchange::backoff;
use crate::exchange::directory::{Directory, Origin};
use crate::exchange::{Error, Exchange, access, callbacks, escrow, peers, robots, suggestions};
use crate::links::Action;
use crate::notify::{
    Channel, ClaimantEvent, Notice, NoticeKind, Notifier, NotifyError, Reach, Sent,
};
use crate::protocol::envelope::EXCHANGE;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::Status;
use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::store::error::StoreError;
use crate::store::outbox::{Attempt, Delivery, Shelf};
use crate::store::{Edit, IndexKey};

/// Deliveries in flight at once.
const PARALLEL: usize = 16;
/// How long records of finished deliveries are kept in `done/`.
const KEEP_DONE: Duration = Duration::from_secs(14 * 24 * 3600);
/// How often old records are swept.
const SWEEP_DONE: Duration = Duration::from_secs(3600);

/// How often at most sent notices are followed up: the threads that changed meanwhile are
/// looked at together (under load, one lookup for many changes instead of one each).
const FOLLOW_UP_EVERY: Duration = Duration::from_millis(100);

/// How often the worker looks at the outbox even when nothing woke it (deliveries queued by
/// other processes, such as a `mess request` on the command line).
const LOOK_AGAIN: Duration = Duration::from_secs(2);

impl Exchange {
    /// Queues a `kind` notice (`new`, `escalated`) of `thread` for each of `executors` on each
    /// of their `notify:` channels; returns how many were queued (a notice queued before is
    /// not queued again).
    pub fn queue_notices(
        &self,
        thread: &ThreadRef,
        executors: &[String],
        kind: &str,
        now: Timestamp,
    ) -> Result<usize, Error> {
        let mut queued = 0;
        for delivery in self.notices(thread, executors, kind, now)? {
            if self.store().enqueue(&delivery)? {
                queued += 1;
            }
        }
        if queued > 0 {
            self.deliveries.notify_one();
        }
        Ok(queued)
    }

    /// Wakes this process's delivery worker (after a change queued notices with it).
    pub(crate) fn wake_deliveries(&self) {
        self.deliveries.notify_one();
    }

    /// The `kind` notices of `thread` for each of `executors` on each of their `notify:`
    /// channels, to queue (with [`Exchange::queue_notices`], or with the change that decides
    /// them: a routing decision's [`Edit`]). Notes each executor's last offered thread, which
    /// `re: last` names when it answers.
    pub(crate) fn notices(
        &self,
        thread: &ThreadRef,
        executors: &[String],
        kind: &str,
        now: Timestamp,
    ) -> Result<Vec<Delivery>, Error> {
        let directory = self.directory();
        let mut out = Vec::new();
        for id in executors {
            let Some(spec) = directory.executor(id) else {
                continue;
            };
            // What `re: last` names when this executor sends it: the thread it was offered last.
            self.store().remember(id, &[(IndexKey::LastWork, thread)])?;
            // A forwarding executor's one "channel" is its peer exchange.
            if let Some(peer) = spec.extra.get("exchange") {
                let mut target = Map::new();
                if let Some(url) = peer.as_map().and_then(|m| m.get("url")) {
                    target.insert("url", url.clone());
                }
                out.push(Delivery::new(
                    thread.as_str(),
                    id,
                    peers::CHANNEL,
                    Value::Map(target),
                    kind,
                    now,
                ));
                continue;
            }
            // A robot that speaks MCP is called, not notified; only offers are calls.
            if let Some(entry) = spec.extra.get("mcp") {
                if matches!(kind, "new" | "escalated") {
                    let mut target = Map::new();
                    if let Some(url) = entry.as_map().and_then(|m| m.get("url")) {
                        target.insert("url", url.clone());
                    }
                    out.push(Delivery::new(
                        thread.as_str(),
                        id,
                        robots::CHANNEL,
                        Value::Map(target),
                        kind,
                        now,
                    ));
                }
                continue;
            }
            let Some(notify) = spec.extra.get("notify") else {
                continue;
            };
            let (channels, problems) = Channel::all_of(notify);
            for p in problems {
                tracing::warn!(executor = %id, problem = %p, "notify entry skipped");
            }
            for channel in channels {
                let name = channel.name();
                let mut target = notify
                    .as_map()
                    .and_then(|m| m.get(name))
                    .cloned()
                    .unwrap_or(Value::Null);
                // Signing keys stay in the configuration; the delivery file names the address.
                if let Value::Map(m) = &mut target {
                    m.remove("secret");
                }
                out.push(Delivery::new(thread.as_str(), id, name, target, kind, now));
            }
        }
        Ok(out)
    }

    /// The link a notice carries: the web page for this thread and executor, with every action.
    fn link_for(&self, thread: &ThreadRef, executor: &str, via: &str) -> Option<String> {
        let d = &self.settings().dispatch;
        match self.mint_link_via(
            thread,
            executor,
            &Action::ALL,
            d.link_ttl_seconds,
            Some(via),
        ) {
            // A text message carries a short link: the code maps to the token server-side
            // and lives as long as it.
            Ok(token) if via == "sms" => {
                let exp = self.now().timestamp().saturating_add(d.link_ttl_seconds);
                match self.store().save_short_link(&token, exp) {
                    Ok(code) => Some(format!("{}/r/{code}", d.public_url)),
                    Err(e) => {
                        tracing::warn!(error = %e, "no short link; the notice carries the long one");
                        Some(format!(
                            "{}/respond?ref={thread}&token={token}",
                            d.public_url
                        ))
                    }
                }
            }
            Ok(token) => Some(format!(
                "{}/respond?ref={thread}&token={token}",
                d.public_url
            )),
            Err(e) => {
                tracing::warn!(error = %e, "no link in the notice");
                None
            }
        }
    }

    /// The key that signs `executor`'s webhooks: its own (`webhook: {url, secret}`), else
    /// `dispatch.webhook.secret`, else the home's generated key. `${ENV}` in its own key is
    /// expanded only in config.yaml's entries: a registration's value is literal, or a key
    /// holder could make the server sign with (and so reveal) its environment's secrets.
    fn webhook_secret(
        &self,
        executor: &str,
        directory: &Directory,
    ) -> Result<crate::notify::Secret, Error> {
        let own = directory
            .executor(executor)
            .and_then(|e| e.extra.get("notify"))
            .and_then(Channel::webhook_secret_in);
        if let Some(raw) = own {
            if directory.origin(executor) != Some(&Origin::ConfigFile) {
                return Ok(crate::notify::Secret(raw));
            }
            let secret = (self.settings().dispatch.expand)(&raw);
            if secret.trim().is_empty() || secret.contains("${") {
                return Err(Error::Misconfigured {
                    message: format!(
                        "the webhook secret of {executor} ({raw}) is empty once expanded: set the variable for mess serve"
                    ),
                });
            }
            return Ok(crate::notify::Secret(secret));
        }
        self.shared_webhook_secret()
    }

    /// The exchange's own webhook signing key: `dispatch.webhook.secret`, else the home's
    /// generated one.
    pub(crate) fn shared_webhook_secret(&self) -> Result<crate::notify::Secret, Error> {
        if let Some(shared) = &self.settings().dispatch.webhook_secret {
            return Ok(shared.clone());
        }
        let generated = self.store().webhook_secret()?;
        Ok(crate::notify::Secret(
            String::from_utf8_lossy(&generated).into_owned(),
        ))
    }

    /// The key that signs webhooks without their own key when `dispatch.webhook.secret` is
    /// unset: the home's generated key (made now if it does not exist yet), for the operator to
    /// give to receivers. `None` when the configured key signs instead.
    pub fn generated_webhook_secret(&self) -> Result<Option<String>, Error> {
        if self.settings().dispatch.webhook_secret.is_some() {
            return Ok(None);
        }
        let key = self.store().webhook_secret()?;
        Ok(Some(String::from_utf8_lossy(&key).into_owned()))
    }

    /// Executors whose `notify:` names a channel that lacks its settings, one line each: the
    /// delivery would fail, so `mess serve`, `mess status` and `mess fsck` say so first.
    pub fn channel_problems(&self) -> Vec<String> {
        let unconfigured = &self.settings().dispatch.unconfigured;
        if unconfigured.is_empty() {
            return Vec::new();
        }
        let directory = self.directory();
        let mut problems = Vec::new();
        for executor in &directory.executors {
            let Some(notify) = executor.extra.get("notify") else {
                continue;
            };
            let (channels, _) = Channel::all_of(notify);
            for channel in channels {
                if let Some((name, what)) = unconfigured
                    .iter()
                    .find(|(name, _)| *name == channel.name())
                {
                    problems.push(format!(
                        "executor {} notifies on {name}, but {what} is not set: those notices will fail",
                        executor.id
                    ));
                }
            }
        }
        problems
    }

    /// What to send for `delivery` now, or `None` when it is moot (the thread is gone, or a
    /// `new` notice for a thread no longer pending), in which case it is shelved as done.
    fn prepare(&self, delivery: &Delivery) -> Result<Option<Prepared>, Error> {
        let moot = |why: String| -> Result<Option<Prepared>, Error> {
            let mut d = delivery.clone();
            d.outcome = Some(format!("moot: {why}"));
            self.store().shelve(&d, Shelf::Queue, Shelf::Done)?;
            Ok(None)
        };
        let Ok(thread) = ThreadRef::parse(&delivery.thread) else {
            return moot("not a thread".to_owned());
        };
        let file = match self.store().read(&thread) {
            Ok(f) => f,
            // A one-shot command queues its notices just before it writes the thread.
            Err(StoreError::NotFound { .. })
                if self.now() - delivery.created < chrono::TimeDelta::seconds(30) =>
            {
                let mut d = delivery.clone();
                d.due = self.now() + chrono::TimeDelta::seconds(1);
                self.store().requeue(&d)?;
                return Ok(None);
            }
            Err(StoreError::NotFound { .. }) => return moot("the thread is gone".to_owned()),
            Err(e) => return Err(e.into()),
        };
        let env = &file.envelope;
        // A claimant's notices repeat (one per answer), so their kind carries a sequence number.
        let base = delivery.kind.split('.').next().unwrap_or_default();
        let kind = match base {
            "taken" => NoticeKind::Taken {
                by: env.executor.clone().unwrap_or_else(|| "someone".to_owned()),
            },
            "escalated" => NoticeKind::Escalated,
            "closed" => NoticeKind::Closed {
                status: env.status.to_string(),
            },
            other => match ClaimantEvent::parse(other) {
                Some(e) => NoticeKind::ForClaimant(e),
                None => NoticeKind::New,
            },
        };
        match kind {
            NoticeKind::ForClaimant(_)
                if env.executor.as_deref() != Some(delivery.executor.as_str()) =>
            {
                return moot("the thread is no longer the executor's".to_owned());
            }
            NoticeKind::ForClaimant(_) => {}
            _ if !kind.is_update() && env.status != Status::Pending => {
                return moot(format!("the thread is {}", env.status));
            }
            _ => {}
        }
        // Only a webhook's sending depends on who chose it (and reading the directory costs
        // milliseconds in a large home, so the other channels skip it).
        let (channel, reach) = match Channel::parse(&delivery.channel, &delivery.target) {
            Ok(Channel::Webhook { url, .. }) => {
                let directory = self.directory();
                let channel = Channel::Webhook {
                    secret: Some(self.webhook_secret(&delivery.executor, &directory)?),
                    url,
                };
                (channel, reach_of(directory.origin(&delivery.executor)))
            }
            Ok(Channel::Mail(mailbox)) if mailbox != delivery.executor => {
                // Another session's mailbox: only if the operator chose it.
                let by_key = matches!(
                    reach_of(self.directory().origin(&delivery.executor)),
                    Reach::KeyHolder
                );
                if !access::may_notify_mailbox(&delivery.executor, &mailbox, by_key) {
                    return moot(format!(
                        "a registration made with a key notifies only its own mailbox, not {mailbox}"
                    ));
                }
                (Channel::Mail(mailbox), Reach::Operator)
            }
            Ok(c) => (c, Reach::Operator),
            Err(p) => return moot(p.to_string()),
        };
        let link = if kind.is_update() {
            None
        } else {
            self.link_for(&thread, &delivery.executor, &delivery.channel)
        };
        let notice = Notice {
            delivery: delivery.id.clone(),
            kind,
            thread: thread.to_string(),
            intent: env.intent.clone(),
            priority: env.priority.as_str().to_owned(),
            needed_by: env.needed_by.map(|t| time::format_timestamp(&t)),
            requires: env.requires.clone(),
            link,
            thread_yaml: file.text().to_owned(),
            previous: delivery.previous.clone(),
            at: self.now().timestamp(),
        };
        Ok(Some(Prepared {
            channel,
            notice,
            reach,
        }))
    }

    /// Records how an attempt went: shelves a sent delivery (on `sent/` while a taken notice
    /// may follow), requeues a retryable failure with backoff, or gives up and says so in the
    /// thread's history. Returns the delivery as requeued when it goes back for another try.
    fn record_attempt(
        &self,
        delivery: &Delivery,
        updatable: bool,
        outcome: Result<Sent, NotifyError>,
    ) -> Result<Option<Delivery>, Error> {
        let now = self.now();
        let mut d = delivery.clone();
        match outcome {
            Ok(sent) => {
                d.provider_ref = sent.provider_ref;
                d.outcome = Some(format!("sent {}", time::format_timestamp(&now)));
                // Offers are kept on sent/ so a `taken` update can follow where the channel
                // edits messages in place; everything else is done once sent.
                let offer = matches!(d.kind.as_str(), "new" | "escalated");
                let follow = offer && updatable;
                // A callback is the requestor's own: its thread's history does not note it.
                if !matches!(d.kind.as_str(), "taken" | "closed") && d.channel != callbacks::CHANNEL
                {
                    // Recorded before it is shelved: a crash in between notes it twice at worst.
                    self.record_notified(&d, now);
                }
                let shelf = if follow { Shelf::Sent } else { Shelf::Done };
                self.store().shelve(&d, Shelf::Queue, shelf)?;
                Ok(None)
            }
            Err(e) => {
                d.attempts.push(Attempt {
                    at: now,
                    error: e.to_string(),
                });
                let tries = d.attempts.len() as u32;
                let policy = &self.settings().dispatch;
                if matches!(e, NotifyError::Retry { .. }) && tries < policy.attempts {
                    d.due = now + self.backoff(tries);
                    self.store().requeue(&d)?;
                    return Ok(Some(d));
                }
                d.outcome = Some(e.to_string());
                // The thread hears of it first: a crash in between retries the delivery once
                // more rather than losing the note.
                self.record_failure(&d, tries, &e)?;
                self.store().shelve(&d, Shelf::Queue, Shelf::Failed)?;
                Ok(None)
            }
        }
    }

    /// Writes a `notified` history entry into the delivery's thread, as MESSE-AF's history
    /// shows (`notified teague-phone via slack`). A thread that cannot take it (gone, full) only
    /// loses the note; the delivery stays sent.
    fn record_notified(&self, d: &Delivery, now: Timestamp) {
        let Ok(thread) = ThreadRef::parse(&d.thread) else {
            return;
        };
        let what = d.kind.split('.').next().unwrap_or_default();
        let note = match what {
            "new" => format!("notified {} via {}", d.executor, d.channel),
            other => format!("notified {} via {} ({other})", d.executor, d.channel),
        };
        let written = self.store().modify(&thread, |t| -> Result<_, Error> {
            let mut envelope = t.envelope.clone();
            envelope.record("notified", now, EXCHANGE, Some(note.clone()));
            Ok((
                Some(Edit {
                    envelope,
                    append: Vec::new(),
                    deliveries: Vec::new(),
                }),
                (),
            ))
        });
        if let Err(e) = written {
            tracing::warn!(thread = %thread, error = %e, "cannot note the notice in the thread");
        }
    }

    /// The wait after the `tries`-th failure under the notice policy, with noise drawn from the
    /// store's random source (the middle of the range when it cannot give any).
    fn backoff(&self, tries: u32) -> chrono::TimeDelta {
        let policy = &self.settings().dispatch;
        let noise = self
            .store()
            .random_bytes(2)
            .map(|b| f64::from(u16::from_le_bytes([b[0], b[1]])) / f64::from(u16::MAX))
            .unwrap_or(0.5);
        let wait = backoff::backoff(tries, policy.first_retry, policy.max_retry, noise);
        chrono::TimeDelta::from_std(wait).unwrap_or(chrono::TimeDelta::seconds(1))
    }

    /// Writes a `notify_failed` history entry into the delivery's thread. The requestor and the
    /// executor read it, so a key-made registration's failure gets one text whatever happened
    /// (refused, no connection, a timeout, a TLS error, any HTTP status, a service's refusal)
    /// and no attempt count: the note must not tell which ports are open or what a host or a
    /// service answered. The details stay in the server log and the outbox record. The
    /// operator's own entries say what happened: the operator chose those addresses, and the
    /// note helps to fix them (it never holds a token or an answer's body).
    fn record_failure(&self, d: &Delivery, tries: u32, e: &NotifyError) -> Result<(), Error> {
        let Ok(thread) = ThreadRef::parse(&d.thread) else {
            return Ok(());
        };
        let now = self.now();
        let reach = reach_of(self.directory().origin(&d.executor));
        let note = match reach {
            Reach::KeyHolder => format!("{} to {} failed: {UNDELIVERED}", d.channel, d.executor),
            Reach::Operator => format!(
                "{} to {} failed after {tries} attempt{}: {e}",
                d.channel,
                d.executor,
                if tries == 1 { "" } else { "s" }
            ),
        };
        let written = self.store().modify(&thread, |t| -> Result<_, Error> {
            let mut envelope = t.envelope.clone();
            envelope.record("notify_failed", now, EXCHANGE, Some(note.clone()));
            Ok((
                Some(Edit {
                    envelope,
                    append: Vec::new(),
                    deliveries: Vec::new(),
                }),
                (),
            ))
        });
        match written {
            // A thread that is gone or cannot be read (fsck's business) gets no note.
            Ok(())
            | Err(Error::Store(
                StoreError::NotFound { .. }
                | StoreError::Malformed { .. }
                | StoreError::Torn { .. },
            )) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Delivers `notice` as agent mail into `mailbox`: a `task` from `exchange` with the thread
    /// as tag and conversation id, the details and the link as its body.
    fn mail_notice(&self, mailbox: &str, notice: &Notice) -> Result<Sent, NotifyError> {
        let mut body = format!(
            "## {}\n\n{}",
            notice.headline(),
            notice.details().join("\n")
        );
        if let Some(link) = &notice.link {
            body.push_str(&format!("\n\nRespond: {link}"));
        }
        let letter = crate::mail::Letter {
            from: EXCHANGE.to_owned(),
            to: mailbox.to_owned(),
            kind: match notice.kind {
                NoticeKind::Taken { .. } | NoticeKind::Closed { .. } => "status",
                _ => "task",
            }
            .to_owned(),
            timestamp: self.now(),
            needs_response: !notice.kind.is_update(),
            priority: match notice.priority.as_str() {
                "urgent" | "elevated" => "urgent",
                "background" => "low",
                _ => "normal",
            }
            .to_owned(),
            tags: vec![notice.thread.clone()],
            in_reply_to: None,
            thread_id: Some(notice.thread.clone()),
            expires: None,
            read_at: None,
            body,
        };
        match self.mail().send(&letter) {
            Ok(file) => Ok(Sent {
                provider_ref: Some(format!("{mailbox}/{file}")),
            }),
            Err(crate::mail::MailError::Invalid { message }) => Err(NotifyError::Fail {
                message: format!("mail: {message}"),
            }),
            Err(e) => Err(NotifyError::Retry {
                message: format!("mail: {e}"),
            }),
        }
    }

    /// For every sent notice (of the threads in `only`, or all) whose thread is no longer pending: queues a `taken` notice to
    /// update it (unless its executor took the thread) and moves it to `done/`. Returns how
    /// many were settled.
    pub fn follow_up_sent(&self, only: Option<&HashSet<String>>) -> Result<usize, Error> {
        let now = self.now();
        let (sent, _) = self.store().deliveries_of(Shelf::Sent, only);
        let mut settled = 0;
        for d in sent {
            let status = ThreadRef::parse(&d.thread)
                .ok()
                .and_then(|t| self.store().envelope(&t).ok())
                .map(|(env, _)| env);
            if status
                .as_ref()
                .is_some_and(|env| env.status == Status::Pending)
            {
                continue;
            }
            let taker = status.as_ref().and_then(|env| env.executor.clone());
            // Taken by someone else, or ended untaken: the message is updated; the taker's own
            // message stays as it is.
            let kind = match (&status, &taker) {
                (Some(_), Some(t)) if *t != d.executor => Some("taken"),
                (Some(_), None) => Some("closed"),
                _ => None,
            };
            if let Some(kind) = kind {
                let follow = Delivery {
                    id: format!("{}.update", d.id),
                    kind: kind.to_owned(),
                    created: now,
                    due: now,
                    attempts: Vec::new(),
                    previous: d.provider_ref.clone(),
                    provider_ref: None,
                    outcome: None,
                    ..d.clone()
                };
                if self.store().enqueue(&follow)? {
                    self.deliveries.notify_one();
                }
            }
            self.store().shelve(&d, Shelf::Sent, Shelf::Done)?;
            settled += 1;
        }
        Ok(settled)
    }
}

/// Runs the delivery worker until `stop`: sends due deliveries (at most `PARALLEL` at once),
/// reads the queue again when deliveries are queued in this process, when a retry is
/// requeued, and every `LOOK_AGAIN` (for other processes' deliveries), and follows up sent
/// notices when threads change.
pub fn run(
    ex: Exchange,
    notifier: Notifier,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let notifier = Arc::new(notifier);
        let mut changes = ex.subscribe();
        let mut in_flight: HashSet<String> = HashSet::new();
        let mut tasks: tokio::task::JoinSet<(String, Attempted)> = tokio::task::JoinSet::new();
        let mut ids: std::collections::HashMap<tokio::task::Id, String> =
            std::collections::HashMap::new();
        let mut waiting: Vec<Delivery> = Vec::new();
        let (mut follow_all, mut reload) = (true, true);
        // Threads whose sent notices may need an update.
        let mut follow: HashSet<String> = HashSet::new();
        // Deliveries this process will not try again (sent but unrecorded, or panicked);
        // they take no slot, so they cannot stall the others.
        let mut stuck: HashSet<String> = HashSet::new();
        let mut looked = tokio::time::Instant::now();
        let mut swept: Option<tokio::time::Instant> = None;
        let mut followed: Option<tokio::time::Instant> = None;
        loop {
            if swept.is_none_or(|t| t.elapsed() >= SWEEP_DONE) {
                swept = Some(tokio::time::Instant::now());
                let worker = ex.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let _ = worker.store().prune_done(KEEP_DONE);
                    worker.store().prune_short_links(worker.now().timestamp())
                })
                .await;
            }
            let follow_due = followed.is_none_or(|t| t.elapsed() >= FOLLOW_UP_EVERY);
            if (follow_all || !follow.is_empty()) && follow_due {
                followed = Some(tokio::time::Instant::now());
                let only = (!follow_all).then(|| std::mem::take(&mut follow));
                follow_all = false;
                follow.clear();
                let worker = ex.clone();
                match tokio::task::spawn_blocking(move || worker.follow_up_sent(only.as_ref()))
                    .await
                {
                    Ok(Err(e)) => tracing::warn!(error = %e, "following up sent notices failed"),
                    Err(e) => tracing::error!(error = %e, "following up sent notices panicked"),
                    Ok(Ok(_)) => {}
                }
            }
            if reload || looked.elapsed() >= LOOK_AGAIN {
                reload = false;
                looked = tokio::time::Instant::now();
                let worker = ex.clone();
                let mut fresh = tokio::task::spawn_blocking(move || worker.store().queued())
                    .await
                    .map(|(q, _)| q)
                    .unwrap_or_default();
                // On a database a look leases only what nobody holds: the deliveries this node
                // leased earlier and has not sent yet (all slots busy) stay in its list, or
                // they would wait out their lease unsent.
                if ex.store().is_shared_by_nodes() {
                    let listed: HashSet<String> = fresh.iter().map(|d| d.id.clone()).collect();
                    fresh.extend(waiting.drain(..).filter(|d| !listed.contains(&d.id)));
                }
                waiting = fresh;
                waiting.retain(|d| !in_flight.contains(&d.id) && !stuck.contains(&d.id));
            }
            let now = ex.now();
            let mut next = looked + LOOK_AGAIN;
            if let Some(t) = followed
                && (follow_all || !follow.is_empty())
            {
                next = next.min(t + FOLLOW_UP_EVERY);
            }
            let mut later = Vec::with_capacity(waiting.len());
            for d in waiting.drain(..) {
                if d.due > now {
                    let ahead = (d.due - now).to_std().unwrap_or(Duration::ZERO);
                    next = next.min(tokio::time::Instant::now() + ahead);
                    later.push(d);
                    continue;
                }
                // Due, but the slots are full: it goes when a task finishes.
                if in_flight.len() >= PARALLEL {
                    later.push(d);
                    continue;
                }
                in_flight.insert(d.id.clone());
                let (ex, notifier) = (ex.clone(), notifier.clone());
                let id = d.id.clone();
                let task = tasks.spawn(async move {
                    let attempted = attempt(&ex, &notifier, &d).await;
                    (d.id, attempted)
                });
                ids.insert(task.id(), id);
            }
            waiting = later;
            tokio::select! {
                () = stop.cancelled() => break,
                done = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let (id, attempted) = match done {
                        Some(Ok((task, (id, attempted)))) => {
                            ids.remove(&task);
                            (id, attempted)
                        }
                        Some(Err(e)) => {
                            tracing::error!(error = %e, "a delivery task panicked; it waits for a restart");
                            (ids.remove(&e.id()).unwrap_or_default(), Attempted::Stuck)
                        }
                        None => continue,
                    };
                    in_flight.remove(&id);
                    // A sent notice may have landed on sent/ after its thread was taken.
                    if let Some(thread) = id.split('.').next() {
                        follow.insert(thread.to_owned());
                    }
                    match attempted {
                        Attempted::Finished => {}
                        Attempted::Requeued(d) => waiting.push(*d),
                        Attempted::Stuck => {
                            stuck.insert(id);
                        }
                    }
                }
                () = ex.deliveries.notified() => reload = true,
                () = tokio::time::sleep_until(next) => {}
                change = changes.recv() => match change {
                    Ok(c) if c.status != Status::Pending => {
                        follow.insert(c.thread.to_string());
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => follow_all = true,
                    Err(RecvError::Closed) => break,
                },
            }
        }
        // Attempts in flight finish (each is bounded by the channel timeout) and record.
        while tasks.join_next().await.is_some() {}
    })
}

/// A notice ready to send: where, what, and who chose the address (for webhooks; the other
/// channels send alike whoever chose them).
struct Prepared {
    channel: Channel,
    notice: Notice,
    reach: Reach,
}

/// The one text a failed notice of a key-made registration leaves in thread history.
const UNDELIVERED: &str = "the notice was not delivered (the server log has the details)";

/// Who chose the addresses of an executor declared at `origin`: config.yaml's entries and
/// registrations the operator made locally are the operator's; any other registration (made
/// with a key, or by a version that did not record how) is a key holder's.
fn reach_of(origin: Option<&Origin>) -> Reach {
    match origin {
        Some(Origin::ConfigFile | Origin::Registration { by_key: false, .. }) => Reach::Operator,
        Some(Origin::Registration { by_key: true, .. }) | None => Reach::KeyHolder,
    }
}

/// How one attempt ended, for the worker's bookkeeping.
enum Attempted {
    /// Shelved (sent, moot or failed): nothing more to do.
    Finished,
    /// Back in the queue, as written (a retry, or a notice waiting for its thread).
    Requeued(Box<Delivery>),
    /// Sent, or perhaps sent, but not recorded: not tried again by this process, so a broken
    /// disk cannot turn one notice into a message every few seconds.
    Stuck,
}

/// One attempt to forward a thread to the peer exchange its executor stands for, recorded as
/// any delivery's attempt (retries with backoff; a final failure noted in the thread).
async fn forward(ex: &Exchange, d: &Delivery) -> Attempted {
    let outcome = match peers::forward(ex, d).await {
        peers::Forwarded::Sent(sent) => Ok(sent),
        peers::Forwarded::Failed(e) => Err(e),
        peers::Forwarded::Moot(why) => return moot(ex, d, why).await,
    };
    recorded(ex, d, outcome).await
}

/// Finishes carrying out an accepted suggestion (its new threads, the other originals) when
/// the process that accepted it stopped first; a no-op when it did not.
async fn finish_suggestion(ex: &Exchange, d: &Delivery) -> Attempted {
    let Ok(anchor) = ThreadRef::parse(&d.thread) else {
        return moot(ex, d, "not a thread".to_owned()).await;
    };
    let worker = ex.clone();
    let now = ex.now();
    match tokio::task::spawn_blocking(move || suggestions::carry_out(&worker, &anchor, now)).await {
        Ok(Ok(made)) => done(ex, d, format!("carried out: {}", made.join(", "))).await,
        Ok(Err(e)) => {
            let message = ex.scrub_home(&e.to_string());
            recorded(ex, d, Err(NotifyError::Retry { message })).await
        }
        Err(_) => Attempted::Stuck,
    }
}

/// One attempt to call a requestor's callback, recorded as any delivery's attempt.
async fn call_back(ex: &Exchange, notifier: &Notifier, d: &Delivery) -> Attempted {
    let (worker, delivery) = (ex.clone(), d.clone());
    let prepared = tokio::task::spawn_blocking(move || worker.callback_notice(&delivery)).await;
    let outcome = match prepared {
        Ok(Ok(Some((channel, notice)))) => callbacks::send(notifier, &channel, &notice).await,
        Ok(Ok(None)) => return moot(ex, d, "the thread is gone".to_owned()).await,
        Ok(Err(e)) => Err(NotifyError::Retry {
            message: ex.scrub_home(&e.to_string()),
        }),
        Err(_) => return Attempted::Stuck,
    };
    recorded(ex, d, outcome).await
}

/// Shelves `d` as done with nothing sent, saying why.
async fn moot(ex: &Exchange, d: &Delivery, why: String) -> Attempted {
    done(ex, d, format!("moot: {why}")).await
}

/// Shelves `d` as done, with `outcome`.
async fn done(ex: &Exchange, d: &Delivery, outcome: String) -> Attempted {
    let (worker, mut delivery) = (ex.clone(), d.clone());
    delivery.outcome = Some(outcome);
    let _ = tokio::task::spawn_blocking(move || {
        worker.store().shelve(&delivery, Shelf::Queue, Shelf::Done)
    })
    .await;
    Attempted::Finished
}

/// Records how an attempt of `d` (a channel with no message to update later) went.
async fn recorded(ex: &Exchange, d: &Delivery, outcome: Result<Sent, NotifyError>) -> Attempted {
    if let Err(e) = &outcome {
        tracing::info!(delivery = %d.id, error = %e, "delivery attempt failed");
    }
    let (worker, delivery) = (ex.clone(), d.clone());
    match tokio::task::spawn_blocking(move || worker.record_attempt(&delivery, false, outcome))
        .await
    {
        Ok(Ok(Some(requeued))) => Attempted::Requeued(Box::new(requeued)),
        Ok(Ok(None)) => Attempted::Finished,
        _ => Attempted::Stuck,
    }
}

/// Whether deliveries of `channel` are the exchange's own work (settling a request's shells,
/// carrying out an accepted suggestion) rather than a message to someone: any process can
/// finish them, one-shot commands included, and they need nobody to be reached.
pub(crate) fn is_internal(channel: &str) -> bool {
    channel == escrow::CHANNEL || channel == suggestions::CHANNEL
}

impl Exchange {
    /// Finishes the exchange's own queued work ([`is_internal`]) here and now, when no
    /// long-running process works on this home: what a one-shot command queued (a settlement
    /// or a suggestion's carrying out that it could not finish inline) or an earlier command
    /// left. Each step is idempotent, so one that a server also runs changes nothing twice.
    /// Returns how many it finished; one that fails stays queued for the next command.
    pub fn finish_internal_work(&self) -> Result<usize, Error> {
        let store = self.store();
        if !store.has_deliveries(Shelf::Queue) || store.worker_alive().unwrap_or(true) {
            return Ok(0);
        }
        let (queued, _) = store.deliveries(Shelf::Queue);
        let mut finished = 0;
        for mut d in queued.into_iter().filter(|d| is_internal(&d.channel)) {
            let Ok(thread) = ThreadRef::parse(&d.thread) else {
                continue;
            };
            let outcome = if d.channel == escrow::CHANNEL {
                self.settle_escrow(&thread).map(|moved| {
                    format!(
                        "settled ({})",
                        if moved { "now" } else { "nothing to move" }
                    )
                })
            } else {
                suggestions::carry_out(self, &thread, self.now())
                    .map(|made| format!("carried out: {}", made.join(", ")))
            };
            match outcome {
                Ok(outcome) => {
                    d.outcome = Some(outcome);
                    store.shelve(&d, Shelf::Queue, Shelf::Done)?;
                    finished += 1;
                }
                Err(e) => {
                    tracing::warn!(delivery = %d.id, error = %e, "internal work left for later");
                }
            }
        }
        Ok(finished)
    }
}

/// One attempt of one delivery: prepare and record off the async workers, send on them.
async fn attempt(ex: &Exchange, notifier: &Notifier, d: &Delivery) -> Attempted {
    if d.channel == peers::CHANNEL {
        return forward(ex, d).await;
    }
    if d.channel == callbacks::CHANNEL {
        return call_back(ex, notifier, d).await;
    }
    if d.channel == suggestions::CHANNEL {
        return finish_suggestion(ex, d).await;
    }
    if d.channel == escrow::CHANNEL {
        let Ok(thread) = ThreadRef::parse(&d.thread) else {
            return moot(ex, d, "not a thread".to_owned()).await;
        };
        let worker = ex.clone();
        return match tokio::task::spawn_blocking(move || worker.settle_escrow(&thread)).await {
            Ok(Ok(moved)) => {
                done(
                    ex,
                    d,
                    format!(
                        "settled ({})",
                        if moved { "now" } else { "nothing to move" }
                    ),
                )
                .await
            }
            Ok(Err(e)) => {
                let message = ex.scrub_home(&e.to_string());
                recorded(ex, d, Err(NotifyError::Retry { message })).await
            }
            Err(_) => Attempted::Stuck,
        };
    }
    if d.channel == robots::CHANNEL {
        let outcome = match robots::call(ex, d).await {
            robots::Called::Sent(sent) => Ok(sent),
            robots::Called::Failed(e) => Err(e),
            robots::Called::Moot(why) => return moot(ex, d, why).await,
        };
        return recorded(ex, d, outcome).await;
    }
    let (worker, delivery) = (ex.clone(), d.clone());
    let prepared = tokio::task::spawn_blocking(move || worker.prepare(&delivery)).await;
    let (channel, outcome) = match prepared {
        Ok(Ok(Some(Prepared {
            channel,
            notice,
            reach,
        }))) => {
            let outcome = match &channel {
                // Agent mail is a file in this home, written like any other.
                Channel::Mail(mailbox) => {
                    let (worker, mailbox, letter) = (ex.clone(), mailbox.clone(), notice.clone());
                    tokio::task::spawn_blocking(move || worker.mail_notice(&mailbox, &letter))
                        .await
                        .unwrap_or_else(|e| {
                            Err(NotifyError::Retry {
                                message: format!("mail: {e}"),
                            })
                        })
                }
                _ => notifier.send(&channel, &notice, reach).await,
            };
            (Some(channel), outcome)
        }
        // Shelved as moot, or requeued to wait for its thread: the worker rereads the queue.
        Ok(Ok(None)) => return Attempted::Finished,
        // The notice could not be prepared: an attempt that failed, with backoff.
        Ok(Err(e)) => {
            // Thread history is read by the requestor: no server paths in it.
            let message = ex.scrub_home(&e.to_string());
            // Only the operator can fix a misconfiguration; anything else may pass.
            let failure = if matches!(e, Error::Misconfigured { .. }) {
                NotifyError::Fail { message }
            } else {
                NotifyError::Retry { message }
            };
            (None, Err(failure))
        }
        Err(e) => {
            tracing::error!(delivery = %d.id, error = %e, "preparing the notice panicked");
            return Attempted::Stuck;
        }
    };
    let sent = outcome.is_ok();
    if let Err(e) = &outcome {
        tracing::info!(delivery = %d.id, error = %e, "delivery attempt failed");
    }
    let updatable = channel.as_ref().is_some_and(Channel::updates_in_place);
    let (worker, delivery) = (ex.clone(), d.clone());
    let recorded =
        tokio::task::spawn_blocking(move || worker.record_attempt(&delivery, updatable, outcome))
            .await;
    match recorded {
        Ok(Ok(Some(requeued))) => Attempted::Requeued(Box::new(requeued)),
        Ok(Ok(None)) => Attempted::Finished,
        Ok(Err(e)) => {
            tracing::error!(delivery = %d.id, sent, error = %e, "cannot record the delivery; it waits for a restart");
            Attempted::Stuck
        }
        Err(e) => {
            tracing::error!(delivery = %d.id, error = %e, "recording the delivery panicked");
            Attempted::Stuck
        }
    }
}
