//! Replies in Matrix rooms: Matrix has no buttons, so the bot's notice asks for a reply
//! (`claim`, `approve`, `deny REASON`) or a reaction (👍 / 👎), and this loop reads the rooms
//! with the homeserver's long-polling sync. A reply or reaction counts only when it answers a
//! message the bot itself sent that carries button codes (`mess.actions`), read back from the
//! homeserver, so nobody in the room can make one up; the press then goes through
//! `exchange::buttons` like any platform's. Run by the process that holds the worker lock
//! (one per home, one node in tier 1), so a reply is acted on once. After a restart the
//! first sync reads the rooms' recent messages again: what was already done is refused by
//! the rules (one claim, one decision each) and stays quiet.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::exchange::{Exchange, buttons};
use crate::notify::Notifier;
use crate::notify::matrix::MatrixClient;
use crate::protocol::buttons::{Verb, is_code, parse_reply, reaction_verb};

/// The longest pause between attempts while the homeserver fails.
const MOST_BACKOFF: Duration = Duration::from_secs(60);

/// Reads replies until `stop`, when `dispatch.matrix` is configured.
pub(crate) fn run(
    ex: Exchange,
    notifier: Notifier,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(client) = notifier.matrix() else {
            return;
        };
        let mut backoff = Duration::from_secs(1);
        let pause = |backoff: &mut Duration| {
            let now = *backoff;
            *backoff = (*backoff * 2).min(MOST_BACKOFF);
            now
        };
        let me = loop {
            match client.whoami().await {
                Ok(me) => break me,
                Err(e) => {
                    tracing::warn!(error = %e, "matrix: cannot learn the bot's user id; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(pause(&mut backoff)) => {}
                    }
                }
            }
        };
        let mut since: Option<String> = None;
        let mut done: HashSet<String> = HashSet::new();
        loop {
            let synced = tokio::select! {
                () = stop.cancelled() => return,
                s = client.sync(since.as_deref()) => s,
            };
            let batch = match synced {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "matrix: sync failed; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(pause(&mut backoff)) => {}
                    }
                    continue;
                }
            };
            backoff = Duration::from_secs(1);
            let catching_up = since.is_none();
            if let Some(rooms) = batch["rooms"]["join"].as_object() {
                for (room, joined) in rooms {
                    for event in joined["timeline"]["events"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        let id = event["event_id"].as_str().unwrap_or_default();
                        // A sync never repeats an event, but a restart's first one reads the
                        // recent ones again; within one run each is taken once.
                        if id.is_empty() || !done.insert(id.to_owned()) {
                            continue;
                        }
                        take(&ex, &client, &me, room, event, catching_up).await;
                    }
                }
            }
            if done.len() > 10_000 {
                done.clear();
            }
            since = batch["next_batch"].as_str().map(str::to_owned).or(since);
        }
    })
}

/// What an event asks, if it answers one of the bot's notices: the event it answers, the verb
/// and a denial's reason.
fn asked(event: &Value, me: &str) -> Option<(String, Asked)> {
    if event["sender"].as_str() == Some(me) {
        return None;
    }
    let content = &event["content"];
    match event["type"].as_str()? {
        "m.room.message" => {
            let to = content["m.relates_to"]["m.in_reply_to"]["event_id"].as_str()?;
            let (verb, reason) = parse_reply(&without_fallback(content["body"].as_str()?))?;
            Some((to.to_owned(), Asked::Verb(verb, reason)))
        }
        "m.reaction" => {
            let relates = &content["m.relates_to"];
            if relates["rel_type"].as_str() != Some("m.annotation") {
                return None;
            }
            Some((
                relates["event_id"].as_str()?.to_owned(),
                Asked::Reaction(relates["key"].as_str()?.to_owned()),
            ))
        }
        _ => None,
    }
}

/// A reply or a reaction.
enum Asked {
    Verb(Verb, Option<String>),
    Reaction(String),
}

/// A reply's own text: clients quote the message they answer in lines starting `> `, then
/// a blank line.
fn without_fallback(body: &str) -> String {
    let mut lines = body.lines().peekable();
    if lines.peek().is_some_and(|l| l.starts_with("> ")) {
        while lines.next_if(|l| l.starts_with('>')).is_some() {}
        while lines.next_if(|l| l.trim().is_empty()).is_some() {}
    }
    lines.collect::<Vec<_>>().join("\n")
}

/// Acts on one event of `room` when it answers one of the bot's notices.
async fn take(
    ex: &Exchange,
    client: &MatrixClient,
    me: &str,
    room: &str,
    event: &Value,
    catching_up: bool,
) {
    let Some((to, asked)) = asked(event, me) else {
        return;
    };
    // The codes come from the bot's own message, as the homeserver has it.
    let Ok(original) = client.event(room, &to).await else {
        return;
    };
    if original["sender"].as_str() != Some(me) {
        return;
    }
    let actions = &original["content"]["mess"]["actions"];
    let offered: Vec<Verb> = actions
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter_map(|k| Verb::parse(k))
        .collect();
    // Claim or approve first: a thumbs up takes the first offered.
    let mut offered = offered;
    offered.sort_by_key(|v| *v == Verb::Deny);
    let (verb, reason) = match asked {
        Asked::Verb(v, reason) => (v, reason),
        Asked::Reaction(key) => match reaction_verb(&key, &offered) {
            Some(v) => (v, None),
            None => return,
        },
    };
    let Some(code) = actions[verb.as_str()]
        .as_str()
        .filter(|c| is_code(c))
        .map(str::to_owned)
    else {
        return;
    };
    let who = event["sender"].as_str().unwrap_or_default().to_owned();
    let pressed = buttons::press_off_thread(ex, code, verb, reason, &who).await;
    let event_id = event["event_id"].as_str().unwrap_or_default();
    let reply = match pressed {
        Ok(p) => {
            // The notice now says what happened, and the reply thread hears it too.
            let text = format!("{}: {}", p.text, p.intent);
            let edit = json!({
                "msgtype": "m.text",
                "body": format!("* {text}"),
                "m.new_content": {"msgtype": "m.text", "body": text},
                "m.relates_to": {"rel_type": "m.replace", "event_id": to},
            });
            if let Err(e) = client
                .send(room, &format!("mess-edit-{event_id}"), edit)
                .await
            {
                tracing::warn!(error = %e, "matrix: could not update the notice");
            }
            text
        }
        // A restart reads recent replies again; those already acted on stay quiet.
        Err(_) if catching_up => return,
        Err(why) => why.text,
    };
    let content = json!({
        "msgtype": "m.notice",
        "body": reply,
        "m.relates_to": {"m.in_reply_to": {"event_id": event_id}},
    });
    if let Err(e) = client
        .send(room, &format!("mess-reply-{event_id}"), content)
        .await
    {
        tracing::warn!(error = %e, "matrix: could not answer a reply");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_read_without_its_quote_and_only_when_it_answers_someone_else() {
        assert_eq!(
            without_fallback("> <@mess:hs> Your approval is needed\n> more\n\ndeny too much"),
            "deny too much"
        );
        assert_eq!(without_fallback("approve"), "approve");
        let reply = json!({"type": "m.room.message", "sender": "@sam:hs", "event_id": "$r",
            "content": {"body": "> quoted\n\nclaim", "m.relates_to": {"m.in_reply_to": {"event_id": "$n"}}}});
        assert!(
            matches!(asked(&reply, "@mess:hs"), Some((to, Asked::Verb(Verb::Claim, None))) if to == "$n")
        );
        assert!(
            asked(&reply, "@sam:hs").is_none(),
            "the bot's own messages are not answers"
        );
        let plain =
            json!({"type": "m.room.message", "sender": "@sam:hs", "content": {"body": "claim"}});
        assert!(
            asked(&plain, "@mess:hs").is_none(),
            "a message that answers nothing"
        );
        let reaction = json!({"type": "m.reaction", "sender": "@sam:hs",
            "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$n", "key": "👍"}}});
        assert!(matches!(asked(&reaction, "@mess:hs"), Some((_, Asked::Reaction(k))) if k == "👍"));
    }
}
