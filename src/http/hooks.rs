//! Presses of notification buttons, where the platforms post them: `POST /hooks/slack`,
//! `POST /hooks/telegram` and `POST /hooks/discord` hand the headers the platform signs with
//! and the body to `exchange::hooks`, which checks and acts; and the act address
//! `/r/{code}/{verb}` that ntfy's http actions POST to and email links open (a GET only shows
//! what a POST would do, so a mail scanner that opens every link acts for nobody).

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::exchange::buttons;
use crate::exchange::hooks::{Answer, Platform, Refused};
use crate::http::AppState;
use crate::http::body;
use crate::http::error::ApiError;
use crate::protocol::buttons::Verb;

/// The largest press body read: the platforms' payloads are a few KiB.
const MAX_HOOK_BYTES: usize = 64 * 1024;

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> ApiError {
        match r {
            // A hook whose platform is not configured answers like a route that does not exist.
            Refused::NoHook => ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route"),
            Refused::Unauthorized(why) => ApiError::unauthorized(why),
            Refused::Malformed(why) => ApiError::malformed(why),
        }
    }
}

fn answer(a: Answer) -> Response {
    match a {
        Answer::Empty => StatusCode::OK.into_response(),
        Answer::Json(v) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            v.to_string(),
        )
            .into_response(),
    }
}

/// The hook's body, once the platform's hook is known to exist, within the hook limit and the
/// server's body budget.
async fn read_body(
    state: &AppState,
    platform: Platform,
    headers: &HeaderMap,
    request: Body,
) -> Result<String, ApiError> {
    state.hooks.open(platform)?;
    let holder = format!("hook:{platform:?}");
    Ok(
        body::text(headers, request, MAX_HOOK_BYTES, &state.bodies, &holder)
            .await?
            .text,
    )
}

/// `POST /hooks/slack`: an interactive message's button (`block_actions`).
pub(crate) async fn slack(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let text = read_body(&state, Platform::Slack, &headers, request).await?;
    let done = state
        .hooks
        .slack(
            &state.exchange,
            header(&headers, "x-slack-request-timestamp"),
            header(&headers, "x-slack-signature"),
            &text,
        )
        .await?;
    Ok(answer(done))
}

/// `POST /hooks/telegram`: a callback query from an inline keyboard.
pub(crate) async fn telegram(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let text = read_body(&state, Platform::Telegram, &headers, request).await?;
    let done = state
        .hooks
        .telegram(
            &state.exchange,
            header(&headers, "x-telegram-bot-api-secret-token"),
            &text,
        )
        .await?;
    Ok(answer(done))
}

/// `POST /hooks/discord`: an interaction (a PING when the endpoint is registered, then
/// button presses), answered in the response itself.
pub(crate) async fn discord(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let text = read_body(&state, Platform::Discord, &headers, request).await?;
    let done = state
        .hooks
        .discord(
            &state.exchange,
            header(&headers, "x-signature-ed25519"),
            header(&headers, "x-signature-timestamp"),
            &text,
        )
        .await?;
    Ok(answer(done))
}

/// The code and verb of `/r/{code}/{verb}`, when they have their forms.
fn act_path(path: Result<Path<(String, String)>, PathRejection>) -> Option<(String, Verb)> {
    let Path((code, verb)) = path.ok()?;
    let verb = Verb::parse(&verb)?;
    crate::protocol::buttons::is_code(&code).then_some((code, verb))
}

/// What an act address that is not ours (or expired) shows: the same whichever it is.
fn gone() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Not found",
        "No such link (it may have expired).",
        None,
    )
}

/// `GET /r/{code}/{verb}`: what the link would do, with a button that does it. A GET changes
/// nothing, so a mail scanner that follows every link acts on nobody's behalf.
pub(crate) async fn ask(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let Some((code, verb)) = act_path(path) else {
        return gone();
    };
    let ex = state.exchange.clone();
    let looked = state.blocking(move || buttons::describe(&ex, &code)).await;
    let Ok(Ok((thread, intent))) = looked else {
        return gone();
    };
    let reason = if verb == Verb::Deny {
        "<p><label>Why (optional)<br><textarea name=\"reason\" rows=\"3\" cols=\"40\"></textarea></label></p>"
    } else {
        ""
    };
    let form = format!(
        "<form method=\"post\">{reason}<p><button type=\"submit\">{}</button></p></form>",
        verb.label()
    );
    page(
        StatusCode::OK,
        &format!("{}?", verb.label()),
        &format!("{}: {} ({})", verb.label(), intent, thread),
        Some(&form),
    )
}

/// `POST /r/{code}/{verb}`: does it (ntfy's http action, the form of [`ask`]); a `reason`
/// form field goes with a denial.
pub(crate) async fn act(
    State(state): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    request: Body,
) -> Response {
    let Some((code, verb)) = act_path(path) else {
        return gone();
    };
    let text = match body::text(&headers, request, MAX_HOOK_BYTES, &state.bodies, "hook:act").await
    {
        Ok(t) => t.text,
        Err(e) => return e.into_response(),
    };
    let reason = form_urlencoded::parse(text.as_bytes())
        .find(|(k, _)| k == "reason")
        .map(|(_, v)| v.into_owned());
    match buttons::press_off_thread(&state.exchange, code, verb, reason, "act link").await {
        Ok(p) => page(
            StatusCode::OK,
            "Done",
            &format!("{}: {}", p.text, p.intent),
            None,
        ),
        Err(why) if why.gone => gone(),
        Err(why) => page(StatusCode::CONFLICT, "Nothing changed", &why.text, None),
    }
}

/// A small HTML page (no script, no outside resources).
fn page(status: StatusCode, title: &str, text: &str, form: Option<&str>) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><meta name=\"referrer\" content=\"no-referrer\"><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p>{form}</body></html>",
        title = escape(title),
        text = escape(text),
        form = form.unwrap_or_default(),
    );
    let mut response = (status, Html(html)).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("default-src 'none'; form-action 'self'"),
    );
    response
}

/// Text for HTML.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_escaped() {
        assert_eq!(escape("<a href='x'>&"), "&lt;a href=&#39;x&#39;&gt;&amp;");
    }
}
