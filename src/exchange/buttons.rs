//! A press of a notification's button (Slack, Telegram, Discord, a Matrix reply, ntfy's http
//! action, an email's act link): the button's code is a short link to the executor's
//! presigned link token, so a press is the message that link would send (claim, approve or
//! deny), submitted through it and under the same rules; the platform that carried it is the
//! channel the thread records. What it did comes back in words for the message that held
//! the button.

use crate::exchange::{Error, Exchange, hands};
use crate::protocol::buttons::Verb;
use crate::protocol::message::Message;
use crate::protocol::status::Status;
use crate::protocol::value::{Map, Value};

/// What a press did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pressed {
    /// The thread it acted on.
    pub thread: String,
    /// The executor it acted as.
    pub executor: String,
    /// The request's intent (the updated message repeats it).
    pub intent: String,
    /// What it did, for the message that held the button ("Approved by sam (1 of 2)").
    pub text: String,
}

/// Why a press did nothing, in words for the one who pressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code is not ours, or its link expired.
    pub gone: bool,
    /// What to show.
    pub text: String,
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Refusal {
        use crate::exchange::error::ErrorKind;
        let text = match e.kind() {
            // What the store or the database said stays in the log.
            ErrorKind::Internal | ErrorKind::Unavailable => {
                tracing::warn!(error = %e, "a press failed");
                "the exchange could not do it now; try again shortly".to_owned()
            }
            _ => e.to_string(),
        };
        Refusal {
            gone: e.kind() == ErrorKind::NotFound,
            text,
        }
    }
}

/// The thread a button code stands for and its intent, for a page that asks before it acts;
/// a code that is not ours or expired is not found.
pub fn describe(ex: &Exchange, code: &str) -> Result<(String, String), Error> {
    let (thread, _) = ex.auth().follow_short_link(code)?;
    let (env, _) = ex
        .store()
        .envelope(&crate::protocol::ids::ThreadRef::parse(&thread)?)?;
    Ok((thread, env.intent))
}

/// Acts on `verb` for the button code `code`, with `reason` for a denial. A code that is not
/// ours, or whose link expired, is not found; what the rules refuse (a slot already held,
/// a second decision) comes back as the error they give.
pub fn press(
    ex: &Exchange,
    code: &str,
    verb: Verb,
    reason: Option<String>,
) -> Result<Pressed, Error> {
    let (_, token) = ex.auth().follow_short_link(code)?;
    let grant = ex.auth().check_link_token(&token)?;
    let thread = grant.thread.clone();
    let (kind, body) = match verb {
        Verb::Claim => {
            let mut status = Map::new();
            status.insert("re", Value::str(&thread));
            status.insert("code", Value::str(Status::Claimed.as_str()));
            ("status", status)
        }
        Verb::Approve => ("response", hands::decision_body(&thread, true, None)),
        Verb::Deny => (
            "response",
            hands::decision_body(&thread, false, reason.filter(|r| !r.trim().is_empty())),
        ),
    };
    let message = Message::single(kind, body)?;
    ex.auth().submit_with_link(message, &grant)?;
    let (env, _) = ex
        .store()
        .envelope(&crate::protocol::ids::ThreadRef::parse(&thread)?)?;
    let who = &grant.executor;
    let text = match verb {
        Verb::Claim if env.hands.multi() => format!(
            "Taken by {who}: {} of {} places filled",
            env.hands.slots.len(),
            env.hands.wanted()
        ),
        Verb::Claim => format!("Claimed by {who}: open the page to answer"),
        Verb::Approve | Verb::Deny => {
            let approved = env.hands.decisions.iter().filter(|d| d.approved).count();
            let need = env.hands.decided_by().map_or(1, |a| a.need);
            let word = if verb == Verb::Approve {
                "Approved"
            } else {
                "Denied"
            };
            use crate::protocol::envelope::ConfirmState;
            let outcome = match (env.hands.confirm_by.is_some(), env.status, env.confirmation) {
                (false, Status::Completed, _) | (true, _, Some(ConfirmState::Confirmed)) => {
                    "; approved"
                }
                (false, Status::Declined, _) | (true, _, Some(ConfirmState::Rejected)) => {
                    "; not approved"
                }
                _ => "",
            };
            format!("{word} by {who} ({approved} of {need} approvals{outcome})")
        }
    };
    Ok(Pressed {
        thread,
        executor: grant.executor,
        intent: env.intent,
        text,
    })
}

/// [`press`] off the async workers, for the adapters and loops that take presses: logs who
/// pressed on the platform (`who`, never stored in the thread), and turns every failure into
/// the words the presser sees.
pub async fn press_off_thread(
    ex: &Exchange,
    code: String,
    verb: Verb,
    reason: Option<String>,
    who: &str,
) -> Result<Pressed, Refusal> {
    let ex = ex.clone();
    let pressed = tokio::task::spawn_blocking(move || press(&ex, &code, verb, reason))
        .await
        .map_err(|_| Refusal {
            gone: false,
            text: "the exchange could not do it now; try again shortly".to_owned(),
        })?;
    match pressed {
        Ok(p) => {
            tracing::info!(thread = %p.thread, executor = %p.executor, platform_user = %who, verb = verb.as_str(), "button pressed");
            Ok(p)
        }
        Err(e) => Err(Refusal::from(e)),
    }
}
