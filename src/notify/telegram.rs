//! Telegram: `sendMessage` with the intent, the details and a "Respond" button carrying the
//! presigned link; when someone else takes the thread, `editMessageText` replaces it.

use serde_json::json;

use crate::notify::{Notice, NotifyError, Sent, TelegramSettings, endpoint, json_of};

/// The Bot API method's URL (`<base>/bot<token>/<method>`); the chat goes in the body.
pub(crate) fn url(base: &str, token: &str, method: &str) -> Result<reqwest::Url, String> {
    endpoint(base, &[&format!("bot{token}"), method])
}

pub(crate) async fn send(
    http: &reqwest::Client,
    settings: &TelegramSettings,
    chat: &str,
    notice: &Notice,
) -> Result<Sent, NotifyError> {
    let what = "telegram";
    let Some(token) = &settings.bot_token else {
        return Err(NotifyError::not_configured("dispatch.telegram.bot_token"));
    };
    let text = format!("{}\n{}", notice.headline(), notice.details().join("\n"));
    let (method, mut body) = match (
        &notice.kind,
        notice.previous.as_deref().and_then(|p| p.rsplit_once(':')),
    ) {
        (kind, Some((chat, id))) if kind.is_update() => (
            "editMessageText",
            json!({"chat_id": chat, "message_id": id.parse::<i64>().unwrap_or_default()}),
        ),
        _ => ("sendMessage", json!({"chat_id": chat})),
    };
    body["text"] = json!(text);
    if let (Some(link), false) = (&notice.link, notice.kind.is_update()) {
        body["reply_markup"] = json!({"inline_keyboard": [[{"text": "Respond", "url": link}]]});
    }
    // The token is part of the path: errors below never include the URL.
    let url = url(&settings.base_url, token.expose(), method)
        .map_err(|_| NotifyError::endpoint(what, "check dispatch.telegram".to_owned()))?;
    let response = http
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|e| NotifyError::from_reqwest(what, &e))?;
    let answer = json_of(what, response).await?;
    if answer["ok"] != json!(true) {
        return Err(NotifyError::Fail {
            message: format!(
                "telegram {method}: {}",
                answer["description"].as_str().unwrap_or("refused")
            ),
        });
    }
    let id = &answer["result"]["message_id"];
    let chat_id = match &answer["result"]["chat"]["id"] {
        serde_json::Value::Null => chat.to_owned(),
        other => other.to_string().trim_matches('"').to_owned(),
    };
    Ok(Sent {
        provider_ref: id.as_i64().map(|id| format!("{chat_id}:{id}")),
    })
}
