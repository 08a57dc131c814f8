//! Slack: `chat.postMessage` with the intent, the details and a "Respond" button carrying the
//! presigned link; when someone else takes the thread, `chat.update` replaces the message.

use serde_json::json;

use crate::notify::{Notice, NotifyError, Sent, SlackSettings, endpoint, json_of};

/// The Web API method's URL; the conversation goes in the body, never in the URL.
pub(crate) fn url(base: &str, method: &str) -> Result<reqwest::Url, String> {
    endpoint(base, &[method])
}

pub(crate) async fn send(
    http: &reqwest::Client,
    settings: &SlackSettings,
    to: &str,
    notice: &Notice,
) -> Result<Sent, NotifyError> {
    let what = "slack";
    let Some(token) = &settings.bot_token else {
        return Err(NotifyError::not_configured("dispatch.slack.bot_token"));
    };
    let mut blocks = vec![
        json!({"type": "section", "text": {"type": "plain_text", "text": notice.headline()}}),
        json!({"type": "context", "elements": [{"type": "plain_text", "text": notice.details().join(" · ")}]}),
    ];
    if let (Some(link), false) = (&notice.link, notice.kind.is_update()) {
        blocks.push(json!({"type": "actions", "elements": [{
            "type": "button",
            "text": {"type": "plain_text", "text": "Respond"},
            "url": link,
            "action_id": "mess_respond",
        }]}));
    }
    // A taken notice updates the message it follows, when there is one.
    let (method, mut body) = match (
        &notice.kind,
        notice.previous.as_deref().and_then(|p| p.split_once(':')),
    ) {
        (kind, Some((channel, ts))) if kind.is_update() => {
            ("chat.update", json!({"channel": channel, "ts": ts}))
        }
        _ => ("chat.postMessage", json!({"channel": to})),
    };
    body["text"] = json!(notice.headline());
    body["blocks"] = json!(blocks);
    let url = url(&settings.base_url, method).map_err(|e| NotifyError::endpoint(what, e))?;
    let response = http
        .post(url)
        .bearer_auth(token.expose())
        .json(&body)
        .send()
        .await
        .map_err(|e| NotifyError::from_reqwest(what, &e))?;
    let answer = json_of(what, response).await?;
    if answer["ok"] != json!(true) {
        let error = answer["error"]
            .as_str()
            .unwrap_or("unknown error")
            .to_owned();
        let message = format!("slack {method}: {error}");
        return Err(if error == "ratelimited" || error.starts_with("internal") {
            NotifyError::Retry { message }
        } else {
            NotifyError::Fail { message }
        });
    }
    let channel = answer["channel"].as_str().unwrap_or(to);
    Ok(Sent {
        provider_ref: answer["ts"].as_str().map(|ts| format!("{channel}:{ts}")),
    })
}
