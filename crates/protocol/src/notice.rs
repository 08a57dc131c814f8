//! Notices to executors: what one says (a request is new, was taken, closed, or something its
//! claimant must hear), the forms a channel's address takes, and how each service is asked to
//! show it and what its answer means (Slack, Telegram, SMS through Twilio, ntfy). Pure: a
//! channel's request comes out as an [`Outbound`] (path segments under the operator's base URL,
//! headers, credentials and body), which the native exchange sends with its HTTP client and the
//! Worker build with `fetch`, and both read the answer with [`Outbound::read`]; so both builds
//! send the same bytes and take the same answers the same way. Discord and Matrix are the
//! native exchange's only.

use serde_json::json;

use crate::buttons::Verb;

/// What a notice is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeKind {
    /// A request the executor may take.
    New,
    /// Someone else took it (updates the earlier message where the channel allows).
    Taken {
        /// Who took it.
        by: String,
    },
    /// Nobody took it in time; the executor is asked as a fallback.
    Escalated,
    /// The claimant asks for confirmation before it works, and the request's `confirm_by`
    /// names the executor among those who confirm.
    ConfirmationAsked,
    /// It ended before anyone took it (cancelled, expired, failed): the earlier message is
    /// updated to say so.
    Closed {
        /// The status it ended with.
        status: String,
    },
    /// Something the executor holding the thread must hear: the requestor answered its
    /// questions, confirmed or refused, or cancelled; or the thread ended without it.
    ForClaimant(ClaimantEvent),
    /// For a requestor's callback: its thread changed (a new status, or a message from
    /// someone else).
    Changed {
        /// The status it has now.
        status: String,
    },
}

/// What happened on a thread its claimant is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimantEvent {
    /// The requestor answered the claimant's questions.
    Answered,
    /// The requestor confirmed: the work may go ahead.
    Confirmed,
    /// The requestor refused the confirmation.
    Refused,
    /// The requestor cancelled the request.
    Cancelled,
    /// The thread expired or failed while the claimant held it.
    Ended,
    /// The requestor reviewed the finished work.
    Reviewed,
    /// The requestor asked for the work again (a review with `request_redo`).
    Redo,
}

impl ClaimantEvent {
    /// The event's name in delivery kinds and webhook headers.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimantEvent::Answered => "answered",
            ClaimantEvent::Confirmed => "confirmed",
            ClaimantEvent::Refused => "refused",
            ClaimantEvent::Cancelled => "cancelled",
            ClaimantEvent::Ended => "ended",
            ClaimantEvent::Reviewed => "reviewed",
            ClaimantEvent::Redo => "redo",
        }
    }

    /// The event a delivery kind names.
    pub fn parse(kind: &str) -> Option<ClaimantEvent> {
        [
            ClaimantEvent::Answered,
            ClaimantEvent::Confirmed,
            ClaimantEvent::Refused,
            ClaimantEvent::Cancelled,
            ClaimantEvent::Ended,
            ClaimantEvent::Reviewed,
            ClaimantEvent::Redo,
        ]
        .into_iter()
        .find(|e| e.as_str() == kind)
    }
}

impl NoticeKind {
    /// Whether it updates an earlier message rather than asking for work (no link, no button).
    pub fn is_update(&self) -> bool {
        matches!(self, NoticeKind::Taken { .. } | NoticeKind::Closed { .. })
    }

    /// The kind's name in delivery ids and webhook headers.
    pub fn as_str(&self) -> &'static str {
        match self {
            NoticeKind::New => "new",
            NoticeKind::Taken { .. } => "taken",
            NoticeKind::Closed { .. } => "closed",
            NoticeKind::Escalated => "escalated",
            NoticeKind::ConfirmationAsked => "confirm",
            NoticeKind::ForClaimant(e) => e.as_str(),
            NoticeKind::Changed { .. } => "changed",
        }
    }
}

/// One notice to one executor, with everything a channel needs to render it.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The delivery id (receivers use it to drop repeats).
    pub delivery: String,
    /// What it is about.
    pub kind: NoticeKind,
    /// The thread's ref.
    pub thread: String,
    /// The request's intent.
    pub intent: String,
    /// `background`, `normal`, `elevated` or `urgent`.
    pub priority: String,
    /// When it is needed by (RFC 3339), if anyone said.
    pub needed_by: Option<String>,
    /// The capabilities it requires.
    pub requires: Vec<String>,
    /// A presigned link to the human web page for this executor and thread.
    pub link: Option<String>,
    /// The whole thread file (webhooks post it).
    pub thread_yaml: String,
    /// The provider ref of the earlier message this notice updates.
    pub previous: Option<String>,
    /// When this attempt is made (Unix seconds, from the exchange's clock): webhooks sign it.
    pub at: i64,
    /// What the request asks of many hands: the notice says so.
    pub asks: Asks,
    /// Buttons that act from the message itself (claim, approve, deny), on the channels that
    /// can post a press back to the exchange.
    pub buttons: Option<crate::buttons::Buttons>,
}

/// What a request asks of the people it is offered to, as a notice tells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Asks {
    /// One executor does the work (the usual request).
    #[default]
    One,
    /// Several answers, each from a different executor.
    Answers(u32),
    /// An approval, of which this many are needed.
    Approval(u32),
}

impl Asks {
    /// What the request of `hands` asks.
    pub fn of(hands: &crate::hands::Hands) -> Asks {
        match &hands.approval {
            Some(a) => Asks::Approval(a.need),
            None if hands.multi() => Asks::Answers(hands.wanted()),
            None => Asks::One,
        }
    }

    /// The words of the button that opens the page.
    pub fn button(self) -> &'static str {
        match self {
            Asks::Approval(_) => "Approve or deny",
            _ => "Respond",
        }
    }
}

impl Notice {
    /// A one-line headline.
    pub fn headline(&self) -> String {
        match &self.kind {
            NoticeKind::New if matches!(self.asks, Asks::Approval(_)) => {
                format!("Your approval is needed: {}", self.intent)
            }
            NoticeKind::New => format!("MESS request: {}", self.intent),
            NoticeKind::Taken { by } => format!("Taken by {by}: {}", self.intent),
            NoticeKind::Escalated => format!("Still waiting for someone: {}", self.intent),
            NoticeKind::ConfirmationAsked => {
                format!(
                    "Your confirmation is needed before work starts: {}",
                    self.intent
                )
            }
            NoticeKind::Closed { status } => {
                format!("No longer needed ({status}): {}", self.intent)
            }
            NoticeKind::ForClaimant(e) => match e {
                ClaimantEvent::Answered => format!("Your questions were answered: {}", self.intent),
                ClaimantEvent::Confirmed => format!("Confirmed, go ahead: {}", self.intent),
                ClaimantEvent::Refused => format!("Confirmation refused: {}", self.intent),
                ClaimantEvent::Cancelled => format!("Cancelled by the requestor: {}", self.intent),
                ClaimantEvent::Ended => format!("Ended while you held it: {}", self.intent),
                ClaimantEvent::Reviewed => format!("Your work was reviewed: {}", self.intent),
                ClaimantEvent::Redo => format!("Please do it again: {}", self.intent),
            },
            NoticeKind::Changed { status } => format!("Now {status}: {}", self.intent),
        }
    }

    /// The details under the headline, one per line (no link).
    pub fn details(&self) -> Vec<String> {
        let mut lines = vec![format!("{} · priority {}", self.thread, self.priority)];
        match self.asks {
            Asks::One => {}
            Asks::Answers(n) => lines.push(format!("{n} people answer, each on their own")),
            Asks::Approval(need) => lines.push(format!(
                "{need} approval{} needed",
                if need == 1 { "" } else { "s" }
            )),
        }
        if let Some(by) = &self.needed_by {
            lines.push(format!("needed by {by}"));
        }
        if !self.requires.is_empty() {
            lines.push(format!("requires {}", self.requires.join(", ")));
        }
        lines
    }

    /// Each button's verb and the data it posts back (none on an update).
    pub fn pressable(&self) -> impl Iterator<Item = (Verb, String)> + '_ {
        self.buttons
            .iter()
            .filter(|_| !self.kind.is_update())
            .flat_map(|b| b.verbs.iter().map(move |v| (*v, b.data(*v))))
    }

    /// The words of the button that opens the page: beside Claim, the page is where the answer
    /// is written; beside Approve and Deny it only shows more.
    pub fn link_label(&self) -> &'static str {
        match (&self.buttons, self.asks) {
            (None, asks) => asks.button(),
            (Some(_), Asks::Approval(_)) => "Open",
            (Some(_), _) => "Answer",
        }
    }

    /// Headline, details and link as plain text (SMS, email, ntfy).
    pub fn plain_text(&self) -> String {
        let mut text = self.headline();
        for line in self.details() {
            text.push('\n');
            text.push_str(&line);
        }
        if let (Some(link), false) = (&self.link, self.kind.is_update()) {
            text.push_str("\nRespond: ");
            text.push_str(link);
        }
        if let (Some(buttons), false) = (&self.buttons, self.kind.is_update()) {
            for verb in &buttons.verbs {
                text.push_str(&format!("\n{}: {}", verb.label(), buttons.url(*verb)));
            }
        }
        text
    }
}

/// An ntfy topic: `[A-Za-z0-9_-]{1,64}` (what ntfy.sh accepts), so it is one path segment.
pub fn check_ntfy_topic(topic: &str) -> Result<(), String> {
    let fine = (1..=64).contains(&topic.len())
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{topic:?} is not an ntfy topic (1 to 64 letters, digits, '-' or '_')"
        ))
    }
}

/// A Telegram chat: a numeric id (`-?` and 1 to 20 digits) or a public username (`@`, a letter,
/// then 4 to 31 letters, digits or `_`).
pub fn check_telegram(chat: &str) -> Result<(), String> {
    let digits = chat.strip_prefix('-').unwrap_or(chat);
    let numeric = (1..=20).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
    let username = chat.strip_prefix('@').is_some_and(|u| {
        (5..=32).contains(&u.len())
            && u.starts_with(|c: char| c.is_ascii_alphabetic())
            && u.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if numeric || username {
        Ok(())
    } else {
        Err(format!(
            "{chat:?} is not a Telegram chat (a numeric id such as -1001234567890, or @username)"
        ))
    }
}

/// A phone number in E.164: `+`, then 7 to 15 digits, the first not 0.
pub fn check_phone(number: &str) -> Result<(), String> {
    let fine = number.strip_prefix('+').is_some_and(|d| {
        (7..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0')
    });
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{number:?} is not an E.164 number ('+' and 7 to 15 digits, such as +15551234567)"
        ))
    }
}

/// A Slack conversation: an id (`C0123ABCD`, `U04XXXXXX`: 2 to 32 upper-case letters and
/// digits) or a channel name (`#robots` or `robots`: lower case letters, digits, `-`, `_`, `.`,
/// at most 80).
pub fn check_slack(to: &str) -> Result<(), String> {
    let id = (2..=32).contains(&to.len())
        && to
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    let name = to.strip_prefix('#').unwrap_or(to);
    let named = (1..=80).contains(&name.len())
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
        && name.bytes().any(|b| b != b'.');
    if id || named {
        Ok(())
    } else {
        Err(format!(
            "{to:?} is not a Slack id (C0123ABCD, U04XXXXXX) or channel name (#robots)"
        ))
    }
}

/// A sent notice: what the channel calls it, to update it later.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sent {
    /// The channel's id for the message (Slack `channel:ts`, Telegram `chat:message_id`, the
    /// ntfy sequence id).
    pub provider_ref: Option<String>,
}

/// A notice that was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// Worth trying again later (timeouts, 5xx, rate limits).
    #[error("{message}")]
    Retry {
        /// What happened (never a secret).
        message: String,
    },
    /// Trying again would not help (a bad address, a refused token, missing configuration).
    #[error("{message}")]
    Fail {
        /// What happened (never a secret).
        message: String,
    },
}

impl NotifyError {
    /// An HTTP answer that is not a success: 5xx, 429 and 408 are worth another attempt.
    pub fn from_status(what: &str, status: u16) -> NotifyError {
        // Only the status: the body comes from wherever a notify address points, and the
        // message ends up in thread history that others read.
        let message = format!("{what}: HTTP {status}");
        if status >= 500 || status == 429 || status == 408 {
            NotifyError::Retry { message }
        } else {
            NotifyError::Fail { message }
        }
    }

    /// A URL that cannot be built from the configuration and the channel's value.
    pub fn endpoint(what: &str, problem: String) -> NotifyError {
        NotifyError::Fail {
            message: format!("{what}: cannot build the address: {problem}"),
        }
    }

    /// A setting the channel needs and nobody gave.
    pub fn not_configured(what: &str) -> NotifyError {
        NotifyError::Fail {
            message: format!("{what} is not configured"),
        }
    }
}

/// Whether `segment` can be one path segment of a service's URL as it is: not empty, `.` or
/// `..`, and without `%` or control characters, which a URL parser would drop or reinterpret.
pub fn check_segment(segment: &str) -> Result<(), String> {
    if segment.is_empty()
        || segment == "."
        || segment == ".."
        || segment.contains('%')
        || segment.chars().any(char::is_control)
    {
        return Err(format!("{segment:?} cannot be a path segment"));
    }
    Ok(())
}

/// The URL of a service's method: the operator's `base` (http or https; any query or fragment
/// dropped) with `segments` appended, each checked ([`check_segment`]) and percent-encoded as
/// one path segment, so a `/`, `?` or `#` in one stays inside it. Both builds parse the result
/// with the same URL parser before they send.
pub fn service_url<S: AsRef<str>>(base: &str, segments: &[S]) -> Result<String, String> {
    let scheme_ok = ["http://", "https://"].iter().any(|s| {
        base.get(..s.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(s))
    });
    if !scheme_ok {
        return Err(format!("base_url {base:?}: not http or https"));
    }
    let end = base.find(['?', '#']).unwrap_or(base.len());
    let mut url = base[..end].trim_end_matches('/').to_owned();
    for segment in segments {
        let segment = segment.as_ref();
        check_segment(segment)?;
        url.push('/');
        for c in segment.chars() {
            // What a URL parser encodes in a path segment, and the separators (a backslash is
            // one in http URLs).
            if c.is_ascii()
                && !matches!(
                    c,
                    ' ' | '"' | '#' | '<' | '>' | '?' | '`' | '{' | '}' | '/' | '\\'
                )
            {
                url.push(c);
            } else {
                let mut bytes = [0u8; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    url.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    Ok(url)
}

/// How a request to a service proves who sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Nothing (the credential is in the path, or the service needs none).
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// HTTP Basic with a user and a password.
    Basic {
        /// The user (Twilio's account SID).
        user: String,
        /// The password (Twilio's auth token).
        password: String,
    },
}

/// A request's body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// JSON (`application/json`).
    Json(serde_json::Value),
    /// A form (`application/x-www-form-urlencoded`), its pairs in order.
    Form(Vec<(String, String)>),
    /// Plain text, sent as it is.
    Text(String),
}

/// How a service's answer is read (sent along with the request, so the one who sends it can
/// read the answer without building the request again).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading {
    /// `{"ok": true, "channel", "ts"}` from a Web API method.
    Slack {
        /// `chat.postMessage` or `chat.update`.
        method: String,
        /// The conversation it was sent to.
        to: String,
    },
    /// `{"ok": true, "result": {"message_id", "chat": {"id"}}}` from a Bot API method.
    Telegram {
        /// `sendMessage` or `editMessageText`.
        method: String,
        /// The chat it was sent to.
        chat: String,
    },
    /// `{"sid"}` from the Messages API.
    Twilio,
    /// `{"id", "channel_id"}` from Discord's Create or Edit Message.
    Discord {
        /// The channel it was sent to.
        channel: String,
    },
    /// `{"event_id"}` from Matrix's send-event endpoint.
    Matrix {
        /// The room it was sent to.
        room: String,
    },
    /// Any JSON; the message is known by the sequence id sent with it.
    Ntfy {
        /// The sequence id sent.
        sequence: String,
    },
}

/// One POST to a channel's service, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    /// The channel (`slack`, `telegram`, `sms`, `ntfy`), for messages.
    pub what: &'static str,
    /// The HTTP method (`POST`; Matrix sends with `PUT`, Discord edits with `PATCH`).
    pub method: &'static str,
    /// Path segments to append, each as one segment, to the service's base URL.
    pub path: Vec<String>,
    /// Whether a path segment holds a credential (Telegram's bot token): errors about the
    /// address must not show it.
    pub secret_in_path: bool,
    /// Headers besides the body's content type and the credentials.
    pub headers: Vec<(String, String)>,
    /// The credentials.
    pub auth: Auth,
    /// The body.
    pub body: Body,
    /// How its answer is read.
    pub reading: Reading,
}

impl Outbound {
    /// What the service's answer (`status`, `body`) means ([`Reading::read`]).
    pub fn read(&self, status: u16, body: &str) -> Result<Sent, NotifyError> {
        self.reading.read(status, body)
    }
}

impl Reading {
    /// The channel whose answer this reads.
    pub fn what(&self) -> &'static str {
        match self {
            Reading::Slack { .. } => "slack",
            Reading::Telegram { .. } => "telegram",
            Reading::Twilio => "sms",
            Reading::Ntfy { .. } => "ntfy",
            Reading::Discord { .. } => "discord",
            Reading::Matrix { .. } => "matrix",
        }
    }

    /// What the service's answer (`status`, `body`) means: sent, with the id to update the
    /// message later, or why not and whether another attempt may help.
    pub fn read(&self, status: u16, body: &str) -> Result<Sent, NotifyError> {
        let what = self.what();
        if !(200..300).contains(&status) {
            return Err(NotifyError::from_status(what, status));
        }
        let answer: serde_json::Value =
            serde_json::from_str(body).map_err(|_| NotifyError::Retry {
                message: format!("{what}: the answer is not JSON"),
            })?;
        match self {
            Reading::Slack { method, to } => {
                if answer["ok"] != json!(true) {
                    let error = answer["error"].as_str().unwrap_or("unknown error");
                    let message = format!("slack {method}: {error}");
                    return Err(if error == "ratelimited" || error.starts_with("internal") {
                        NotifyError::Retry { message }
                    } else {
                        NotifyError::Fail { message }
                    });
                }
                let channel = answer["channel"].as_str().unwrap_or(to.as_str());
                Ok(Sent {
                    provider_ref: answer["ts"].as_str().map(|ts| format!("{channel}:{ts}")),
                })
            }
            Reading::Telegram { method, chat } => {
                if answer["ok"] != json!(true) {
                    return Err(NotifyError::Fail {
                        message: format!(
                            "telegram {method}: {}",
                            answer["description"].as_str().unwrap_or("refused")
                        ),
                    });
                }
                let chat_id = match &answer["result"]["chat"]["id"] {
                    serde_json::Value::Null => chat.clone(),
                    other => other.to_string().trim_matches('"').to_owned(),
                };
                Ok(Sent {
                    provider_ref: answer["result"]["message_id"]
                        .as_i64()
                        .map(|id| format!("{chat_id}:{id}")),
                })
            }
            Reading::Twilio => Ok(Sent {
                provider_ref: answer["sid"].as_str().map(str::to_owned),
            }),
            Reading::Ntfy { sequence } => Ok(Sent {
                provider_ref: Some(sequence.clone()),
            }),
            Reading::Discord { channel } => Ok(Sent {
                provider_ref: answer["id"].as_str().map(|id| {
                    let channel = answer["channel_id"].as_str().unwrap_or(channel);
                    format!("{channel}:{id}")
                }),
            }),
            // Room ids hold `:`, so a space (which neither id may hold) separates the two.
            Reading::Matrix { room } => Ok(Sent {
                provider_ref: answer["event_id"]
                    .as_str()
                    .map(|event| format!("{room} {event}")),
            }),
        }
    }
}

/// Slack: `chat.postMessage` with the headline, the details and a "Respond" button carrying
/// the link; an update (taken, closed) of a message sent earlier is a `chat.update` of it.
pub fn slack(token: &str, to: &str, notice: &Notice) -> Outbound {
    let mut blocks = vec![
        json!({"type": "section", "text": {"type": "plain_text", "text": notice.headline()}}),
        json!({"type": "context", "elements": [{"type": "plain_text", "text": notice.details().join(" · ")}]}),
    ];
    if !notice.kind.is_update() {
        let mut elements: Vec<serde_json::Value> = notice
            .pressable()
            .map(|(verb, data)| {
                let mut button = json!({
                    "type": "button",
                    "text": {"type": "plain_text", "text": verb.label()},
                    "action_id": format!("mess_{}", verb.as_str()),
                    "value": data,
                });
                button["style"] = json!(if verb == Verb::Deny {
                    "danger"
                } else {
                    "primary"
                });
                button
            })
            .collect();
        if let Some(link) = &notice.link {
            elements.push(json!({
                "type": "button",
                "text": {"type": "plain_text", "text": notice.link_label()},
                "url": link,
                "action_id": "mess_respond",
            }));
        }
        if !elements.is_empty() {
            blocks.push(json!({"type": "actions", "elements": elements}));
        }
    }
    let (method, mut body) = match (
        notice.kind.is_update(),
        notice.previous.as_deref().and_then(|p| p.split_once(':')),
    ) {
        (true, Some((channel, ts))) => ("chat.update", json!({"channel": channel, "ts": ts})),
        _ => ("chat.postMessage", json!({"channel": to})),
    };
    body["text"] = json!(notice.headline());
    body["blocks"] = json!(blocks);
    slack_call(token, method, body, to)
}

/// A call of Slack Web API `method` with a JSON `body`, about conversation `to`.
pub fn slack_call(token: &str, method: &str, body: serde_json::Value, to: &str) -> Outbound {
    Outbound {
        what: "slack",
        method: "POST",
        path: vec![method.to_owned()],
        secret_in_path: false,
        headers: Vec::new(),
        auth: Auth::Bearer(token.to_owned()),
        body: Body::Json(body),
        reading: Reading::Slack {
            method: method.to_owned(),
            to: to.to_owned(),
        },
    }
}

/// Telegram: `sendMessage` with the headline, the details and a "Respond" button carrying the
/// link; an update of a message sent earlier is an `editMessageText` of it. The bot token is
/// part of the path (`bot<token>/<method>`), as the Bot API has it.
pub fn telegram(token: &str, chat: &str, notice: &Notice) -> Outbound {
    let text = format!("{}\n{}", notice.headline(), notice.details().join("\n"));
    let (method, mut body) = match (
        notice.kind.is_update(),
        notice.previous.as_deref().and_then(|p| p.rsplit_once(':')),
    ) {
        (true, Some((chat, id))) => (
            "editMessageText",
            json!({"chat_id": chat, "message_id": id.parse::<i64>().unwrap_or_default()}),
        ),
        _ => ("sendMessage", json!({"chat_id": chat})),
    };
    body["text"] = json!(text);
    if !notice.kind.is_update() {
        let mut rows = Vec::new();
        let pressed: Vec<_> = notice
            .pressable()
            .map(|(verb, data)| json!({"text": verb.label(), "callback_data": data}))
            .collect();
        if !pressed.is_empty() {
            rows.push(json!(pressed));
        }
        if let Some(link) = &notice.link {
            rows.push(json!([{"text": notice.link_label(), "url": link}]));
        }
        if !rows.is_empty() {
            body["reply_markup"] = json!({ "inline_keyboard": rows });
        }
    } else {
        // The buttons of the message it updates go with it.
        body["reply_markup"] = json!({ "inline_keyboard": [] });
    }
    telegram_call(token, method, body, chat)
}

/// A call of Telegram Bot API `method` with a JSON `body`, about `chat` (the token is part
/// of the path, as the Bot API has it).
pub fn telegram_call(token: &str, method: &str, body: serde_json::Value, chat: &str) -> Outbound {
    Outbound {
        what: "telegram",
        method: "POST",
        path: vec![format!("bot{token}"), method.to_owned()],
        secret_in_path: true,
        headers: Vec::new(),
        auth: Auth::None,
        body: Body::Json(body),
        reading: Reading::Telegram {
            method: method.to_owned(),
            chat: chat.to_owned(),
        },
    }
}

/// SMS through Twilio's Messages API of account `sid`: the headline, the details and the link
/// in one text, sent from `from` to `to`.
pub fn sms(sid: &str, token: &str, from: &str, to: &str, notice: &Notice) -> Outbound {
    Outbound {
        what: "sms",
        method: "POST",
        path: ["2010-04-01", "Accounts", sid, "Messages.json"]
            .map(str::to_owned)
            .to_vec(),
        secret_in_path: false,
        headers: Vec::new(),
        auth: Auth::Basic {
            user: sid.to_owned(),
            password: token.to_owned(),
        },
        body: Body::Form(vec![
            ("To".to_owned(), to.to_owned()),
            ("From".to_owned(), from.to_owned()),
            ("Body".to_owned(), notice.plain_text()),
        ]),
        reading: Reading::Twilio,
    }
}

/// ntfy's priority (1 min .. 5 max) for a request's (`background`, `normal`, `elevated`,
/// `urgent`).
fn ntfy_priority(p: &str) -> &'static str {
    match p {
        "background" => "2",
        "elevated" => "4",
        "urgent" => "5",
        _ => "3",
    }
}

/// ntfy: a message on `topic`, its priority mapped from the request's; tapping it opens the
/// link. Every notice of one thread shares a sequence id, so a server that supports updates
/// (ntfy 2.16 and later) replaces the message when the thread is taken.
pub fn ntfy(token: Option<&str>, topic: &str, notice: &Notice) -> Result<Outbound, String> {
    check_ntfy_topic(topic)?;
    let sequence = format!("mess-{}", notice.thread);
    let mut body = notice.details().join("\n");
    // Header values are one line of visible ASCII; other titles go in the body, under a
    // plain one.
    let headline: String = notice
        .headline()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let title = if headline.is_ascii() {
        headline
    } else {
        body = format!("{headline}\n{body}");
        "MESS".to_owned()
    };
    let mut headers = vec![
        ("x-title".to_owned(), title),
        ("x-sequence-id".to_owned(), sequence.clone()),
    ];
    if notice.kind.is_update() {
        headers.push(("x-priority".to_owned(), "2".to_owned()));
        headers.push(("x-tags".to_owned(), "white_check_mark".to_owned()));
    } else {
        headers.push((
            "x-priority".to_owned(),
            ntfy_priority(&notice.priority).to_owned(),
        ));
        if let Some(link) = &notice.link {
            headers.push(("x-click".to_owned(), link.clone()));
            body.push_str("\nRespond: ");
            body.push_str(link);
        }
        // A tap on an http action is a POST from the phone to the exchange's act address
        // (ntfy shows at most three actions: two verbs and the page fit).
        let mut actions: Vec<String> = notice
            .buttons
            .iter()
            .flat_map(|b| b.verbs.iter().map(move |v| (*v, b.url(*v))))
            .map(|(verb, url)| format!("http, {}, {url}, method=POST, clear=true", verb.label()))
            .collect();
        if let (Some(link), false) = (&notice.link, actions.is_empty()) {
            actions.push(format!("view, {}, {link}", notice.link_label()));
        }
        if !actions.is_empty() {
            headers.push(("x-actions".to_owned(), actions.join("; ")));
        }
    }
    Ok(Outbound {
        what: "ntfy",
        method: "POST",
        path: vec![topic.to_owned()],
        secret_in_path: false,
        headers,
        auth: token.map_or(Auth::None, |t| Auth::Bearer(t.to_owned())),
        body: Body::Text(body),
        reading: Reading::Ntfy { sequence },
    })
}

/// A Discord channel id: a snowflake (17 to 20 digits).
pub fn check_discord(channel: &str) -> Result<(), String> {
    if (17..=20).contains(&channel.len()) && channel.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(format!(
            "{channel:?} is not a Discord channel id (17 to 20 digits, such as 1234567890123456789)"
        ))
    }
}

/// A Matrix room id (`!opaque:server.name`), or `default` for `dispatch.matrix.room`.
pub fn check_matrix(room: &str) -> Result<(), String> {
    let id = room.strip_prefix('!').and_then(|r| r.split_once(':'));
    let fine = room == "default"
        || (room.len() <= 255
            && id.is_some_and(|(opaque, server)| {
                !opaque.is_empty()
                    && !server.is_empty()
                    && room
                        .chars()
                        .all(|c| c.is_ascii_graphic() && !matches!(c, '/' | '?' | '#' | '%'))
            }));
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{room:?} is not a Matrix room id (!abc123:example.org) or `default`"
        ))
    }
}

/// Discord: a bot message in `channel` (Create Message) with the headline and details, a
/// button per verb (the interaction comes back to `POST /hooks/discord`) and a link button to
/// the page; an update is an Edit Message (`PATCH`) that replaces the text and drops the
/// buttons.
pub fn discord(token: &str, channel: &str, notice: &Notice) -> Outbound {
    let content = format!("**{}**\n{}", notice.headline(), notice.details().join("\n"));
    let (method, path) = match (
        notice.kind.is_update(),
        notice.previous.as_deref().and_then(|p| p.split_once(':')),
    ) {
        (true, Some((channel, id))) => (
            "PATCH",
            vec![
                "channels".to_owned(),
                channel.to_owned(),
                "messages".to_owned(),
                id.to_owned(),
            ],
        ),
        _ => (
            "POST",
            vec![
                "channels".to_owned(),
                channel.to_owned(),
                "messages".to_owned(),
            ],
        ),
    };
    let mut row: Vec<serde_json::Value> = notice
        .pressable()
        .map(|(verb, data)| {
            // Styles: 1 primary, 3 success, 4 danger, 5 link.
            let style = match verb {
                Verb::Claim => 1,
                Verb::Approve => 3,
                Verb::Deny => 4,
            };
            json!({"type": 2, "style": style, "label": verb.label(), "custom_id": data})
        })
        .collect();
    if let (Some(link), false) = (&notice.link, notice.kind.is_update()) {
        row.push(json!({"type": 2, "style": 5, "label": notice.link_label(), "url": link}));
    }
    let components = if row.is_empty() {
        json!([])
    } else {
        json!([{"type": 1, "components": row}])
    };
    Outbound {
        what: "discord",
        method,
        path,
        secret_in_path: false,
        headers: vec![("authorization".to_owned(), format!("Bot {token}"))],
        auth: Auth::None,
        body: Body::Json(json!({
            "content": content,
            "components": components,
            // Nobody is pinged by what a request's intent says.
            "allowed_mentions": {"parse": []},
        })),
        reading: Reading::Discord {
            channel: channel.to_owned(),
        },
    }
}

/// Matrix: an `m.room.message` in `room`, sent with `PUT` under the delivery id as the
/// transaction id (so a retried attempt is the same event, never a second message). Matrix has
/// no buttons: the message says how to answer (reply `claim`, `approve`, `deny REASON`, or
/// react 👍 / 👎), and carries the codes in a `mess` field the exchange reads back from its own
/// event. An update replaces the earlier message (`m.replace`).
pub fn matrix(token: &str, room: &str, notice: &Notice) -> Outbound {
    let mut text = format!("{}\n{}", notice.headline(), notice.details().join("\n"));
    let mut content = json!({"msgtype": "m.text"});
    if !notice.kind.is_update() {
        if let Some(buttons) = &notice.buttons {
            let words: Vec<&str> = buttons.verbs.iter().map(|v| v.as_str()).collect();
            text.push_str(&format!(
                "\nReply to this message with {} (or react 👍{}).",
                words.join(" or "),
                if buttons.verbs.contains(&Verb::Deny) {
                    " / 👎; a denial may give its reason after the word"
                } else {
                    ""
                }
            ));
            let codes: serde_json::Map<String, serde_json::Value> = buttons
                .verbs
                .iter()
                .map(|v| (v.as_str().to_owned(), json!(buttons.code)))
                .collect();
            content["mess"] = json!({"thread": notice.thread, "actions": codes});
        }
        if let Some(link) = &notice.link {
            text.push_str(&format!("\nOpen: {link}"));
        }
    }
    content["body"] = json!(text);
    if let (true, Some((_, event))) = (
        notice.kind.is_update(),
        notice.previous.as_deref().and_then(|p| p.split_once(' ')),
    ) {
        let new_content = json!({"msgtype": "m.text", "body": text});
        content["body"] = json!(format!("* {text}"));
        content["m.new_content"] = new_content;
        content["m.relates_to"] = json!({"rel_type": "m.replace", "event_id": event});
    }
    Outbound {
        what: "matrix",
        method: "PUT",
        path: [
            "_matrix",
            "client",
            "v3",
            "rooms",
            room,
            "send",
            "m.room.message",
            &notice.delivery,
        ]
        .map(str::to_owned)
        .to_vec(),
        secret_in_path: false,
        headers: Vec::new(),
        auth: Auth::Bearer(token.to_owned()),
        body: Body::Json(content),
        reading: Reading::Matrix {
            room: room.to_owned(),
        },
    }
}
