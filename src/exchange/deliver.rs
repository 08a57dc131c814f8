//! Notifying executors: routing decisions become notice jobs in the durable outbox (one per
//! executor and `notify:` channel; a forwarding executor's forward, an MCP robot's call),
//! which the job worker (`jobs`) sends with this module's handler. A final failure is noted
//! in the thread's history, and the other notified executors hear when someone takes the
//! thread (where the channel can update its message).

use std::collections::HashSet;

use crate::exchange::directory::{Directory, Origin};
use crate::exchange::jobs::Outbox;
use crate::exchange::outcome::Outcome;
use crate::exchange::{Error, Exchange, access};
use crate::links::Action;
use crate::notify::{
    Channel, ClaimantEvent, Notice, NoticeKind, Notifier, NotifyError, Reach, Sent,
};
use crate::protocol::buttons::{Buttons, Verb};
use crate::protocol::envelope::EXCHANGE;
use crate::protocol::ids::ThreadRef;
use crate::protocol::notice::Asks;
use crate::protocol::status::Status;
use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::store::error::StoreError;
use crate::store::outbox::{Delivery, Job, Shelf};
use crate::store::{Edit, IndexKey};

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

/// One attempt of notice job `d`: prepared off the async workers (it reads the thread), sent
/// on them (agent mail, a file in this home, off them too).
async fn send_notice(ex: &Exchange, notifier: &Notifier, d: &Delivery) -> Outcome {
    let (worker, delivery) = (ex.clone(), d.clone());
    let prepared = tokio::task::spawn_blocking(move || worker.outbox().prepare(&delivery)).await;
    match prepared {
        Ok(Ok(Some(Prepared {
            channel,
            notice,
            reach,
        }))) => {
            let answer = match &channel {
                // Agent mail is a file in this home, written like any other.
                Channel::Mail(mailbox) => {
                    let (worker, mailbox, letter) = (ex.clone(), mailbox.clone(), notice.clone());
                    tokio::task::spawn_blocking(move || {
                        worker.outbox().mail_notice(&mailbox, &letter)
                    })
                    .await
                    .unwrap_or_else(|e| {
                        Err(NotifyError::Retry {
                            message: format!("mail: {e}"),
                        })
                    })
                }
                _ => notifier.send(&channel, &notice, reach).await,
            };
            match answer {
                Ok(sent) => Outcome::Sent {
                    sent,
                    updatable: channel.updates_in_place(),
                },
                Err(e) => Outcome::undelivered(e),
            }
        }
        // Shelved as moot, or requeued to wait for its thread.
        Ok(Ok(None)) => Outcome::Placed,
        // The notice could not be prepared: an attempt that failed, with backoff.
        Ok(Err(e)) => {
            // Thread history is read by the requestor: no server paths in it.
            let message = ex.scrub_home(&e.to_string());
            // Only the operator can fix a misconfiguration; anything else may pass.
            Outcome::undelivered(if matches!(e, Error::Misconfigured { .. }) {
                NotifyError::Fail { message }
            } else {
                NotifyError::Retry { message }
            })
        }
        Err(e) => {
            tracing::error!(delivery = %d.id, error = %e, "preparing the notice panicked");
            Outcome::Unknown
        }
    }
}

impl Outbox<'_> {
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
            if self.ex.store().enqueue(&delivery)? {
                queued += 1;
            }
        }
        if queued > 0 {
            self.ex.deliveries.notify_one();
        }
        Ok(queued)
    }

    /// Wakes this process's delivery worker (after a change queued notices with it).
    pub(crate) fn wake_deliveries(&self) {
        self.ex.deliveries.notify_one();
    }

    /// The `kind` notices of `thread` for each of `executors` on each of their `notify:`
    /// channels, to queue (with [`Outbox::queue_notices`](crate::exchange::jobs::Outbox::queue_notices), or with the change that decides
    /// them: a routing decision's [`Edit`]). Notes each executor's last offered thread, which
    /// `re: last` names when it answers.
    pub(crate) fn notices(
        &self,
        thread: &ThreadRef,
        executors: &[String],
        kind: &str,
        now: Timestamp,
    ) -> Result<Vec<Delivery>, Error> {
        let directory = self.ex.directory();
        let mut out = Vec::new();
        for id in executors {
            let Some(spec) = directory.executor(id) else {
                continue;
            };
            // What `re: last` names when this executor sends it: the thread it was offered last.
            self.ex
                .store()
                .remember(id, &[(IndexKey::LastWork, thread)])?;
            // A forwarding executor's one "channel" is its peer exchange.
            if let Some(peer) = spec.extra.get("exchange") {
                let mut target = Map::new();
                if let Some(url) = peer.as_map().and_then(|m| m.get("url")) {
                    target.insert("url", url.clone());
                }
                out.push(Delivery::new(
                    thread.as_str(),
                    id,
                    Job::Forward,
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
                        Job::RobotCall,
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
                out.push(Delivery::new(
                    thread.as_str(),
                    id,
                    Job::Notice(name.to_owned()),
                    target,
                    kind,
                    now,
                ));
            }
        }
        Ok(out)
    }

    /// The link a notice carries (the web page for this thread and executor, with every
    /// action) and, where `asks` can be answered by a button on the channel `via`, the buttons:
    /// a short code for the same token, so a press acts exactly as the link would.
    fn link_for(
        &self,
        thread: &ThreadRef,
        executor: &str,
        via: &str,
        asks: Option<Asks>,
    ) -> (Option<String>, Option<Buttons>) {
        let d = &self.ex.settings().dispatch;
        let token = match self.ex.auth().mint_link_via(
            thread,
            executor,
            &Action::ALL,
            d.link_ttl_seconds,
            Some(via),
        ) {
            Ok(token) => token,
            Err(e) => {
                tracing::warn!(error = %e, "no link in the notice");
                return (None, None);
            }
        };
        let long = || crate::protocol::link::page_url(&d.public_url, thread.as_str(), &token);
        // A code maps to the token server-side and lives as long as it.
        let exp = self.ex.now().timestamp().saturating_add(d.link_ttl_seconds);
        let short = || match self.ex.store().save_short_link(&token, exp) {
            Ok(code) => Some(code),
            Err(e) => {
                tracing::warn!(error = %e, "no short link; the notice carries the long one");
                None
            }
        };
        // A text message carries a short link.
        let link = if via == "sms" {
            short().map_or_else(long, |code| format!("{}/r/{code}", d.public_url))
        } else {
            long()
        };
        let buttons = asks
            .filter(|_| Channel::takes_buttons(via))
            .and_then(|asks| {
                short().map(|code| Buttons {
                    act_url: format!("{}/r/{code}", d.public_url),
                    code,
                    verbs: Verb::offered(asks),
                })
            });
        (Some(link), buttons)
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
            let secret = (self.ex.settings().dispatch.expand)(&raw);
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
        if let Some(shared) = &self.ex.settings().dispatch.webhook_secret {
            return Ok(shared.clone());
        }
        let generated = self.ex.store().webhook_secret()?;
        Ok(crate::notify::Secret(
            String::from_utf8_lossy(&generated).into_owned(),
        ))
    }

    /// The key that signs webhooks without their own key when `dispatch.webhook.secret` is
    /// unset: the home's generated key (made now if it does not exist yet), for the operator to
    /// give to receivers. `None` when the configured key signs instead.
    pub fn generated_webhook_secret(&self) -> Result<Option<String>, Error> {
        if self.ex.settings().dispatch.webhook_secret.is_some() {
            return Ok(None);
        }
        let key = self.ex.store().webhook_secret()?;
        Ok(Some(String::from_utf8_lossy(&key).into_owned()))
    }

    /// Executors whose `notify:` names a channel that lacks its settings, one line each: the
    /// delivery would fail, so `mess serve`, `mess status` and `mess fsck` say so first.
    pub fn channel_problems(&self) -> Vec<String> {
        let unconfigured = &self.ex.settings().dispatch.unconfigured;
        if unconfigured.is_empty() {
            return Vec::new();
        }
        let directory = self.ex.directory();
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
            self.ex.store().shelve(&d, Shelf::Queue, Shelf::Done)?;
            Ok(None)
        };
        let Ok(thread) = ThreadRef::parse(&delivery.thread) else {
            return moot("not a thread".to_owned());
        };
        let file = match self.ex.store().read(&thread) {
            Ok(f) => f,
            // A one-shot command queues its notices just before it writes the thread.
            Err(StoreError::NotFound { .. })
                if self.ex.now() - delivery.created < chrono::TimeDelta::seconds(30) =>
            {
                let mut d = delivery.clone();
                d.due = self.ex.now() + chrono::TimeDelta::seconds(1);
                self.ex.store().requeue(&d)?;
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
            "confirm" => NoticeKind::ConfirmationAsked,
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
            // A confirmer's notice counts while the claimant's question is open.
            NoticeKind::ConfirmationAsked
                if env.status.is_terminal()
                    || env.confirmation
                        != Some(crate::protocol::envelope::ConfirmState::Requested) =>
            {
                return moot("no confirmation is asked now".to_owned());
            }
            NoticeKind::ConfirmationAsked => {}
            _ if !kind.is_update() && env.status != Status::Pending => {
                return moot(format!("the thread is {}", env.status));
            }
            _ => {}
        }
        // Only a webhook's sending depends on who chose it (and reading the directory costs
        // milliseconds in a large home, so the other channels skip it).
        let (channel, reach) = match Channel::parse(delivery.job.name(), &delivery.target) {
            Ok(Channel::Webhook { url, .. }) => {
                let directory = self.ex.directory();
                let channel = Channel::Webhook {
                    secret: Some(self.webhook_secret(&delivery.executor, &directory)?),
                    url,
                };
                (channel, reach_of(directory.origin(&delivery.executor)))
            }
            Ok(Channel::Mail(mailbox)) if mailbox != delivery.executor => {
                // Another session's mailbox: only if the operator chose it.
                let by_key = matches!(
                    reach_of(self.ex.directory().origin(&delivery.executor)),
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
        let asks = match (&kind, &env.hands.confirm_by) {
            (NoticeKind::ConfirmationAsked, Some(c)) => Asks::Approval(c.need),
            _ => Asks::of(&env.hands),
        };
        // Buttons on what offers the work (a new request, an escalation) or asks for a
        // decision, never on what only tells a claimant something.
        let pressable = matches!(
            kind,
            NoticeKind::New | NoticeKind::Escalated | NoticeKind::ConfirmationAsked
        )
        .then_some(asks);
        let (link, buttons) = if kind.is_update() {
            (None, None)
        } else {
            self.link_for(&thread, &delivery.executor, delivery.job.name(), pressable)
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
            at: self.ex.now().timestamp(),
            asks,
            buttons,
        };
        Ok(Some(Prepared {
            channel,
            notice,
            reach,
        }))
    }

    /// Writes a `notified` history entry into the delivery's thread, as MESSE-AF's history
    /// shows (`notified teague-phone via slack`). A thread that cannot take it (gone, full) only
    /// loses the note; the delivery stays sent.
    pub(crate) fn record_notified(&self, d: &Delivery, now: Timestamp) {
        let Ok(thread) = ThreadRef::parse(&d.thread) else {
            return;
        };
        let what = d.kind.split('.').next().unwrap_or_default();
        let note = match what {
            "new" => format!("notified {} via {}", d.executor, d.job.name()),
            other => format!("notified {} via {} ({other})", d.executor, d.job.name()),
        };
        let written = self.ex.store().modify(&thread, |t| -> Result<_, Error> {
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

    /// Writes a `notify_failed` history entry into the delivery's thread. The requestor and the
    /// executor read it, so a key-made registration's failure gets one text whatever happened
    /// (refused, no connection, a timeout, a TLS error, any HTTP status, a service's refusal)
    /// and no attempt count: the note must not tell which ports are open or what a host or a
    /// service answered. The details stay in the server log and the outbox record. The
    /// operator's own entries say what happened: the operator chose those addresses, and the
    /// note helps to fix them (it never holds a token or an answer's body).
    pub(crate) fn record_failure(
        &self,
        d: &Delivery,
        tries: u32,
        e: &NotifyError,
    ) -> Result<(), Error> {
        let Ok(thread) = ThreadRef::parse(&d.thread) else {
            return Ok(());
        };
        let now = self.ex.now();
        let reach = reach_of(self.ex.directory().origin(&d.executor));
        let note = match reach {
            Reach::KeyHolder => format!("{} to {} failed: {UNDELIVERED}", d.job.name(), d.executor),
            Reach::Operator => format!(
                "{} to {} failed after {tries} attempt{}: {e}",
                d.job.name(),
                d.executor,
                if tries == 1 { "" } else { "s" }
            ),
        };
        let written = self.ex.store().modify(&thread, |t| -> Result<_, Error> {
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
            timestamp: self.ex.now(),
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
        match self.ex.mail().send(&letter) {
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
        let now = self.ex.now();
        let (sent, _) = self.ex.store().deliveries_of(Shelf::Sent, only);
        let mut settled = 0;
        for d in sent {
            let status = ThreadRef::parse(&d.thread)
                .ok()
                .and_then(|t| self.ex.store().envelope(&t).ok())
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
                if self.ex.store().enqueue(&follow)? {
                    self.ex.deliveries.notify_one();
                }
            }
            self.ex.store().shelve(&d, Shelf::Sent, Shelf::Done)?;
            settled += 1;
        }
        Ok(settled)
    }

    /// One attempt of notice job `d`: prepared off the async workers (it reads the thread),
    /// sent on them (agent mail, a file in this home, off them too).
    pub(crate) async fn send_notice(&self, notifier: &Notifier, d: &Delivery) -> Outcome {
        send_notice(self.ex, notifier, d).await
    }
}
