//! Callbacks for agents: a request may name a `callback` URL, and every change of its thread
//! that the requestor would want to hear of (a new status, or a message from someone else: a
//! question, a response, a suggestion) queues a signed POST of the thread to it, in the same
//! write as the change, through the durable delivery queue executor webhooks use. So an agent
//! process can sleep instead of holding `mess_wait` open.

use crate::exchange::Exchange;
use crate::exchange::outcome::Outcome;
use crate::notify::{Channel, Notice, NoticeKind, Notifier, NotifyError, Reach};
use crate::protocol::envelope::EXCHANGE;
use crate::protocol::ids::ThreadRef;
use crate::protocol::time;
use crate::protocol::value::{Map, Value};
use crate::store::Edit;
use crate::store::outbox::{Delivery, Job};
use crate::store::thread::ThreadFile;

/// The request (and envelope) field that names the callback URL.
pub(crate) const FIELD: &str = "callback";

/// Adds to `edit` of the thread `before` the callback it calls for, if any: the thread has a
/// callback, and its status changes or someone other than the requestor adds a message. The
/// delivery id names the thread's version, so the same change never queues two.
pub(crate) fn queue(before: &ThreadFile, edit: &mut Edit) {
    let after = &edit.envelope;
    let Some(url) = after.extra.get(FIELD).and_then(Value::scalar_text) else {
        return;
    };
    let heard = after.status != before.envelope.status
        || edit
            .append
            .iter()
            .any(|d| d.from != after.requestor && d.from != EXCHANGE);
    if !heard {
        return;
    }
    let version = before.message_count() + edit.append.len();
    let mut target = Map::new();
    target.insert("url", Value::str(url));
    edit.deliveries.push(Delivery::new(
        after.thread_ref.as_str(),
        &after.requestor,
        Job::Callback,
        Value::Map(target),
        &format!("changed.{version}"),
        after.updated,
    ));
}

/// The notice of callback delivery `d`: the thread as it is now, signed with the
/// exchange's shared webhook key. `None` when the thread is gone.
fn callback_notice(
    ex: &Exchange,
    d: &Delivery,
) -> Result<Option<(Channel, Notice)>, crate::exchange::Error> {
    let Ok(thread) = ThreadRef::parse(&d.thread) else {
        return Ok(None);
    };
    let file = match ex.store().read(&thread) {
        Ok(f) => f,
        Err(crate::store::error::StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let url = d
        .target
        .as_map()
        .and_then(|m| m.get("url"))
        .and_then(Value::scalar_text)
        .unwrap_or_default();
    let env = &file.envelope;
    let notice = Notice {
        delivery: d.id.clone(),
        kind: NoticeKind::Changed {
            status: env.status.to_string(),
        },
        thread: thread.to_string(),
        intent: env.intent.clone(),
        priority: env.priority.as_str().to_owned(),
        needed_by: env.needed_by.map(|t| time::format_timestamp(&t)),
        requires: env.requires.clone(),
        link: None,
        thread_yaml: file.text().to_owned(),
        previous: None,
        at: ex.now().timestamp(),
        asks: crate::protocol::notice::Asks::of(&env.hands),
        buttons: None,
    };
    let channel = Channel::Webhook {
        url,
        secret: Some(ex.outbox().shared_webhook_secret()?),
    };
    Ok(Some((channel, notice)))
}

/// One attempt of callback job `d`: the thread as it is now, POSTed as a webhook that an agent
/// named, so only to addresses the operator's allow-list permits (as a key holder's webhook).
pub(crate) async fn call_back(ex: &Exchange, notifier: &Notifier, d: &Delivery) -> Outcome {
    let (worker, delivery) = (ex.clone(), d.clone());
    let prepared = tokio::task::spawn_blocking(move || callback_notice(&worker, &delivery)).await;
    match prepared {
        Ok(Ok(Some((channel, notice)))) => {
            Outcome::of_sending(notifier.send(&channel, &notice, Reach::KeyHolder).await)
        }
        Ok(Ok(None)) => Outcome::moot("the thread is gone"),
        Ok(Err(e)) => Outcome::undelivered(NotifyError::Retry {
            message: ex.scrub_home(&e.to_string()),
        }),
        Err(_) => Outcome::Unknown,
    }
}
