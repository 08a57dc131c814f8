//! ntfy: a message on the executor's topic, its priority mapped from the request's, tapping it
//! opens the presigned link. Every notice of one thread shares a sequence id, so a server that
//! supports updates (ntfy 2.16 and later) replaces the message when the thread is taken.

use crate::notify::{
    Notice, NoticeKind, NotifyError, NtfySettings, Sent, check_ntfy_topic, endpoint, json_of,
};

/// The topic's URL (`<base>/<topic>`), for a topic [`check_ntfy_topic`] accepts.
pub(crate) fn url(base: &str, topic: &str) -> Result<reqwest::Url, String> {
    check_ntfy_topic(topic)?;
    endpoint(base, &[topic])
}

/// ntfy's priority (1 min .. 5 max) for a request's (`background`, `normal`, `elevated`,
/// `urgent`).
fn priority(p: &str) -> &'static str {
    match p {
        "background" => "2",
        "elevated" => "4",
        "urgent" => "5",
        _ => "3",
    }
}

pub(crate) async fn send(
    http: &reqwest::Client,
    settings: &NtfySettings,
    topic: &str,
    notice: &Notice,
) -> Result<Sent, NotifyError> {
    let what = "ntfy";
    let sequence = format!("mess-{}", notice.thread);
    let url = url(&settings.base_url, topic).map_err(|e| NotifyError::endpoint(what, e))?;
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
    let mut request = http
        .post(url)
        .header("x-title", title)
        .header("x-sequence-id", &sequence);
    match &notice.kind {
        NoticeKind::Taken { .. } | NoticeKind::Closed { .. } => {
            request = request
                .header("x-priority", "2")
                .header("x-tags", "white_check_mark");
        }
        _ => {
            request = request.header("x-priority", priority(&notice.priority));
            if let Some(link) = &notice.link {
                request = request.header("x-click", link.as_str());
                body.push_str("\nRespond: ");
                body.push_str(link);
            }
        }
    }
    if let Some(token) = &settings.token {
        request = request.bearer_auth(token.expose());
    }
    let response = request
        .body(body)
        .send()
        .await
        .map_err(|e| NotifyError::from_reqwest(what, &e))?;
    json_of(what, response).await?;
    Ok(Sent {
        provider_ref: Some(sequence),
    })
}
