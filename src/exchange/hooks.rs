//! The platforms' side of notification buttons: a press posted by Slack, Telegram or Discord
//! is checked for what the platform signs it with (Slack's `v0` HMAC with the signing secret,
//! Telegram's secret-token header, Discord's Ed25519 signature with the application's public
//! key), refused when stale or seen before, acted on through [`buttons::press`], and the
//! message that held the button is updated through the platform's API. A platform without
//! its secret configured has no hook. The HTTP adapter only hands over headers and the body.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::exchange::Exchange;
use crate::exchange::buttons;
use crate::notify::Notifier;
use crate::protocol::buttons::{Verb, parse_data};
use crate::protocol::notice::{self, Outbound};

/// How old a signed press may be (Slack's and Discord's timestamps).
pub const FRESH_SECONDS: i64 = 300;

/// How many recent presses a node remembers to refuse repeats.
const REMEMBERED: usize = 10_000;

/// A platform that posts presses back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `POST /hooks/slack`.
    Slack,
    /// `POST /hooks/telegram`.
    Telegram,
    /// `POST /hooks/discord`.
    Discord,
}

/// Why a press was refused at the door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The platform's hook is not configured: it does not exist.
    NoHook,
    /// The signature or secret does not match, or the press is stale or a repeat.
    Unauthorized(String),
    /// The body is not what the platform sends.
    Malformed(String),
}

/// What to answer the platform.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// 200 with nothing to say.
    Empty,
    /// 200 with this JSON (Telegram's `{}`, Discord's interaction response).
    Json(Value),
}

/// Presses this node took in the last minutes (a signature, a callback or interaction id), to
/// refuse the same request played again while its timestamp is still fresh. Bounded: the
/// oldest go first.
#[derive(Debug, Default)]
struct Seen {
    inner: Mutex<(HashMap<String, i64>, VecDeque<String>)>,
}

impl Seen {
    /// Records `id` at `now`; false when it was seen within the freshness window.
    fn first(&self, id: &str, now: i64) -> bool {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (at, order) = &mut *guard;
        while let Some(old) = order.front() {
            let stale = at.get(old).is_none_or(|t| now - t > FRESH_SECONDS);
            if stale || order.len() >= REMEMBERED {
                let old = order.pop_front().unwrap_or_default();
                at.remove(&old);
            } else {
                break;
            }
        }
        if at.contains_key(id) {
            return false;
        }
        at.insert(id.to_owned(), now);
        order.push_back(id.to_owned());
        true
    }
}

/// The hooks of one server: the notifier that updates messages, and the presses seen lately.
#[derive(Debug)]
pub struct Hooks {
    notifier: Notifier,
    seen: Seen,
}

/// A timestamp (Unix seconds) within [`FRESH_SECONDS`] of `now`.
fn fresh(timestamp: Option<&str>, now: i64) -> Result<(), Refused> {
    let at: i64 = timestamp
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| Refused::Unauthorized("the request carries no timestamp".to_owned()))?;
    if (now - at).abs() > FRESH_SECONDS {
        return Err(Refused::Unauthorized(
            "the request's timestamp is more than five minutes away: refused as a replay"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Slack's signature of `body` sent at `timestamp`: `v0=` and the hex of
/// HMAC-SHA256(signing secret, `v0:{timestamp}:{body}`).
pub(crate) fn slack_signature(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex(&mac.finalize().into_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Discord's public key from its hex form (32 bytes), or `None`.
pub(crate) fn discord_key(hex: &str) -> Option<[u8; 32]> {
    decode_hex(hex.trim())?.try_into().ok()
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The verb and code of button data, if it is a mess button's.
fn pressed_data(data: &Value) -> Option<(Verb, String)> {
    data.as_str()
        .and_then(parse_data)
        .map(|(v, c)| (v, c.to_owned()))
}

impl Hooks {
    /// Hooks that update messages through `notifier`.
    pub fn new(notifier: Notifier) -> Hooks {
        Hooks {
            notifier,
            seen: Seen::default(),
        }
    }

    /// Whether `platform`'s hook exists (its secret is configured); checked before a body is
    /// read.
    pub fn open(&self, platform: Platform) -> Result<(), Refused> {
        let s = self.notifier.settings();
        let configured = match platform {
            Platform::Slack => s.slack.signing_secret.is_some(),
            Platform::Telegram => {
                s.telegram.secret_token.is_some() && s.telegram.bot_token.is_some()
            }
            Platform::Discord => s
                .discord
                .public_key
                .as_deref()
                .and_then(discord_key)
                .is_some(),
        };
        if configured {
            Ok(())
        } else {
            Err(Refused::NoHook)
        }
    }

    /// Calls a platform's API (a message update, an answer to a callback) in the background:
    /// the press is already done, and a failed update only leaves the message as it was.
    fn call(&self, base: String, out: Outbound) {
        let notifier = self.notifier.clone();
        tokio::spawn(async move {
            if let Err(e) = notifier.send_outbound(&base, out).await {
                tracing::warn!(error = %e, "could not update the message after a press");
            }
        });
    }

    /// A Slack `block_actions` press: `body` as posted, with its timestamp and signature
    /// headers. The message is replaced with what happened, or the presser alone hears why
    /// nothing did.
    pub async fn slack(
        &self,
        ex: &Exchange,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &str,
    ) -> Result<Answer, Refused> {
        self.open(Platform::Slack)?;
        let settings = self.notifier.settings().slack.clone();
        let secret = settings.signing_secret.clone().ok_or(Refused::NoHook)?;
        let now = ex.now().timestamp();
        fresh(timestamp, now)?;
        let expected = slack_signature(
            secret.expose().as_bytes(),
            timestamp.unwrap_or_default(),
            body.as_bytes(),
        );
        let given = signature.unwrap_or_default();
        if !bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
            return Err(Refused::Unauthorized(
                "the Slack signature does not match".to_owned(),
            ));
        }
        if !self.seen.first(&format!("slack {given}"), now) {
            return Err(Refused::Unauthorized(
                "this request was received before: refused as a replay".to_owned(),
            ));
        }
        let payload: Value = form_urlencoded::parse(body.as_bytes())
            .find(|(k, _)| k == "payload")
            .and_then(|(_, v)| serde_json::from_str(&v).ok())
            .ok_or_else(|| {
                Refused::Malformed("expected a form with a JSON `payload`".to_owned())
            })?;
        // A link button (it opens the page) also posts here; there is nothing to do.
        let Some((verb, code)) = pressed_data(&payload["actions"][0]["value"]) else {
            return Ok(Answer::Empty);
        };
        let text_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let channel = text_of(match &payload["container"]["channel_id"] {
            Value::Null => &payload["channel"]["id"],
            v => v,
        });
        let ts = text_of(match &payload["container"]["message_ts"] {
            Value::Null => &payload["message"]["ts"],
            v => v,
        });
        let user = text_of(&payload["user"]["id"]);
        let outcome = buttons::press_off_thread(ex, code, verb, None, &user).await;
        let Some(token) = settings.bot_token.clone() else {
            return Ok(Answer::Empty);
        };
        let (method, update) = match &outcome {
            Ok(p) => {
                let text = format!("{}: {}", p.text, p.intent);
                (
                    "chat.update",
                    json!({"channel": channel, "ts": ts, "text": text,
                        "blocks": [{"type": "section", "text": {"type": "plain_text", "text": text}}]}),
                )
            }
            // Only the one who pressed hears why nothing happened.
            Err(why) => (
                "chat.postEphemeral",
                json!({"channel": channel, "user": user, "text": why.text}),
            ),
        };
        self.call(
            settings.base_url.clone(),
            notice::slack_call(token.expose(), method, update, &channel),
        );
        Ok(Answer::Empty)
    }

    /// A Telegram update carrying a callback query, with the secret-token header. The query
    /// is answered (an alert when nothing changed) and the message edited, its buttons gone.
    pub async fn telegram(
        &self,
        ex: &Exchange,
        secret_header: Option<&str>,
        body: &str,
    ) -> Result<Answer, Refused> {
        self.open(Platform::Telegram)?;
        let settings = self.notifier.settings().telegram.clone();
        let (Some(secret), Some(token)) = (&settings.secret_token, &settings.bot_token) else {
            return Err(Refused::NoHook);
        };
        let given = secret_header.unwrap_or_default();
        if !bool::from(secret.expose().as_bytes().ct_eq(given.as_bytes())) {
            return Err(Refused::Unauthorized(
                "the X-Telegram-Bot-Api-Secret-Token header does not match".to_owned(),
            ));
        }
        let update: Value = serde_json::from_str(body)
            .map_err(|_| Refused::Malformed("expected a JSON update".to_owned()))?;
        let query = &update["callback_query"];
        let empty = Answer::Json(json!({}));
        // Other updates (messages to the bot) are not presses.
        let Some(id) = query["id"].as_str() else {
            return Ok(empty);
        };
        // Telegram repeats an update it thinks was lost; it must hear 200 to stop.
        if !self
            .seen
            .first(&format!("telegram {id}"), ex.now().timestamp())
        {
            return Ok(empty);
        }
        let Some((verb, code)) = pressed_data(&query["data"]) else {
            return Ok(empty);
        };
        let who = query["from"]["id"].to_string();
        let outcome = buttons::press_off_thread(ex, code, verb, None, &who).await;
        let outbound =
            |method: &str, body: Value| notice::telegram_call(token.expose(), method, body, "");
        let answer = match &outcome {
            Ok(p) => p.text.clone(),
            Err(why) => why.text.clone(),
        };
        self.call(
            settings.base_url.clone(),
            outbound(
                "answerCallbackQuery",
                json!({"callback_query_id": id, "text": answer, "show_alert": outcome.is_err()}),
            ),
        );
        if let (Ok(p), Some(chat), Some(message)) = (
            &outcome,
            query["message"]["chat"]["id"].as_i64(),
            query["message"]["message_id"].as_i64(),
        ) {
            self.call(
                settings.base_url.clone(),
                outbound(
                    "editMessageText",
                    json!({"chat_id": chat, "message_id": message,
                        "text": format!("{}: {}", p.text, p.intent),
                        "reply_markup": {"inline_keyboard": []}}),
                ),
            );
        }
        Ok(empty)
    }

    /// A Discord interaction with its Ed25519 signature and timestamp headers: a PING, or a
    /// button press answered in the response (the message updated, or an ephemeral refusal).
    pub async fn discord(
        &self,
        ex: &Exchange,
        signature: Option<&str>,
        timestamp: Option<&str>,
        body: &str,
    ) -> Result<Answer, Refused> {
        self.open(Platform::Discord)?;
        let settings = self.notifier.settings().discord.clone();
        let key = settings
            .public_key
            .as_deref()
            .and_then(discord_key)
            .ok_or(Refused::NoHook)?;
        let signature = signature.and_then(decode_hex).ok_or_else(|| {
            Refused::Unauthorized("the request carries no Ed25519 signature".to_owned())
        })?;
        let timestamp = timestamp.unwrap_or_default();
        let mut signed = timestamp.as_bytes().to_vec();
        signed.extend_from_slice(body.as_bytes());
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key)
            .verify(&signed, &signature)
            .map_err(|_| {
                Refused::Unauthorized("the Discord signature does not match".to_owned())
            })?;
        let now = ex.now().timestamp();
        fresh(Some(timestamp), now)?;
        let interaction: Value = serde_json::from_str(body)
            .map_err(|_| Refused::Malformed("expected a JSON interaction".to_owned()))?;
        if let (Some(ours), Some(theirs)) = (
            settings.application_id.as_deref(),
            interaction["application_id"].as_str(),
        ) && ours != theirs
        {
            return Err(Refused::Unauthorized(
                "the interaction is for another application".to_owned(),
            ));
        }
        match interaction["type"].as_i64() {
            // PING: Discord checks the endpoint before it sends anything else.
            Some(1) => return Ok(Answer::Json(json!({"type": 1}))),
            Some(3) => {}
            _ => {
                return Err(Refused::Malformed(
                    "not an interaction mess answers".to_owned(),
                ));
            }
        }
        let id = interaction["id"].as_str().unwrap_or_default();
        if !self.seen.first(&format!("discord {id}"), now) {
            return Err(Refused::Unauthorized(
                "this interaction was received before: refused as a replay".to_owned(),
            ));
        }
        let Some((verb, code)) = pressed_data(&interaction["data"]["custom_id"]) else {
            return Err(Refused::Malformed("not a mess button".to_owned()));
        };
        let who = interaction["member"]["user"]["id"].to_string();
        Ok(Answer::Json(
            match buttons::press_off_thread(ex, code, verb, None, &who).await {
                // UPDATE_MESSAGE: the message says what happened and its buttons go.
                Ok(p) => json!({"type": 7, "data": {
                    "content": format!("**{}**: {}", p.text, p.intent),
                    "components": [],
                }}),
                // A message only the one who pressed sees (flag 64: ephemeral).
                Err(why) => json!({"type": 4, "data": {"content": why.text, "flags": 64}}),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_press_is_taken_once_within_the_window_and_the_memory_stays_bounded() {
        let seen = Seen::default();
        assert!(seen.first("a", 1_000));
        assert!(!seen.first("a", 1_100));
        assert!(seen.first("b", 1_100));
        // Past the window, the old entry is let go (its timestamp would be refused anyway).
        assert!(seen.first("a", 1_000 + FRESH_SECONDS + 1));
        for i in 0..REMEMBERED + 10 {
            seen.first(&i.to_string(), 5_000);
        }
        assert!(seen.inner.lock().unwrap().1.len() <= REMEMBERED);
    }

    #[test]
    fn slack_signatures_follow_slacks_documented_example() {
        // The example of Slack's "Verifying requests from Slack" page.
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            slack_signature(
                b"8f742231b10e8888abcd99yyyzzz85a5",
                "1531420618",
                body.as_bytes()
            ),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn keys_are_read_from_hex() {
        assert_eq!(discord_key(&"ab".repeat(32)), Some([0xab; 32]));
        assert_eq!(discord_key("abc"), None);
        assert_eq!(discord_key(&"zz".repeat(32)), None);
    }
}
