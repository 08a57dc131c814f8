//! The approval routes: what an approval is and covers (`GET /approvals/{ref}`, with an action
//! to check in the query), and using it once for an action (`POST /approvals/{ref}/use`).

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use crate::exchange::hands::Action;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::body::{self, Format};
use crate::http::error::ApiError;
use crate::protocol::value::Value;

/// The action an agent asks about, in the query string (`parameters` as JSON text).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionParams {
    intent: Option<String>,
    parameters: Option<String>,
    amount: Option<f64>,
}

impl ActionParams {
    fn action(self) -> Result<Action, ApiError> {
        let parameters = match self.parameters {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<Value>(&text)
                    .map_err(|e| ApiError::malformed(format!("parameters: {e}")))?,
            ),
        };
        Ok(Action {
            intent: self.intent,
            parameters,
            amount: self.amount,
        })
    }
}

/// `GET /approvals/{ref}`: the approval's decisions, who it waits for, its scope once granted,
/// and, when the query names an action, whether it covers it (`covers`, `why`).
pub(crate) async fn one(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    reference: Result<Path<String>, PathRejection>,
    params: Result<Query<ActionParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Path(reference) = reference.map_err(|e| ApiError::malformed(e.body_text()))?;
    let Query(params) = params.map_err(|e| ApiError::malformed(e.body_text()))?;
    let action = params.action()?;
    let ex = state.exchange.clone();
    let view = state
        .blocking(move || ex.approvals().check(&reference, &caller.id, &action, false))
        .await??;
    Ok(body::render(
        Format::of(&headers),
        StatusCode::OK,
        &view.to_value(),
    ))
}

/// The body of `POST /approvals/{ref}/use`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UseBody {
    intent: Option<String>,
    parameters: Option<serde_json::Value>,
    amount: Option<f64>,
}

/// `POST /approvals/{ref}/use`: uses the approval once for the action in the body (JSON:
/// `intent`, `parameters`, `amount`) when it covers it; 409 with the reason when it does not.
pub(crate) async fn use_once(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    reference: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let Path(reference) = reference.map_err(|e| ApiError::malformed(e.body_text()))?;
    let holder = format!("{}:{}", caller.role, caller.id);
    let text = body::text(&headers, body, 64 * 1024, &state.bodies, &holder).await?;
    let asked: UseBody = if text.text.trim().is_empty() {
        UseBody::default()
    } else {
        serde_json::from_str(&text.text).map_err(|e| ApiError::malformed(format!("body: {e}")))?
    };
    let parameters = match asked.parameters {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<Value>(v)
                .map_err(|e| ApiError::malformed(format!("parameters: {e}")))?,
        ),
    };
    let action = Action {
        intent: asked.intent,
        parameters,
        amount: asked.amount,
    };
    let ex = state.exchange.clone();
    let view = state
        .blocking(move || ex.approvals().check(&reference, &caller.id, &action, true))
        .await??;
    let status = if view.used_now {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    if status == StatusCode::CONFLICT {
        return Err(ApiError::new(
            status,
            "conflict",
            format!(
                "{} does not cover this action: {}",
                view.thread,
                view.why.unwrap_or_default()
            ),
        ));
    }
    Ok(body::render(Format::of(&headers), status, &view.to_value()))
}
