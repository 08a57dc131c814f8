//! The presigned-link routes (`GET|POST /thread/{ref}?token=`): read one thread, or post a MESS
//! message as the link's executor, with no API key. The token is checked against the thread
//! in the path, so a link works only for its own thread.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use crate::exchange::Exchange;
use crate::exchange::error::Error;
use crate::http::AppState;
use crate::http::body::{self, Format};
use crate::http::error::ApiError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::value::{Map, Value};

/// The `token` query parameter.
#[derive(Debug, Deserialize)]
pub(crate) struct Token {
    token: Option<String>,
}

pub(crate) fn decode(
    reference: Result<Path<String>, PathRejection>,
    token: Result<Query<Token>, QueryRejection>,
) -> Result<(ThreadRef, String), ApiError> {
    let Path(reference) = reference.map_err(|e| ApiError::malformed(e.body_text()))?;
    let Query(token) = token.map_err(|e| ApiError::malformed(e.body_text()))?;
    let token = token
        .token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::unauthorized("this route needs a link token (?token=)"))?;
    // A ref that cannot be one is refused before it is used anywhere.
    let thread = ThreadRef::parse(&reference).map_err(|e| ApiError::from(Error::from(e)))?;
    Ok((thread, token))
}

/// `GET /thread/{ref}?token=`: the thread, for a link that allows `read`.
pub(crate) async fn read(
    State(state): State<AppState>,
    headers: HeaderMap,
    reference: Result<Path<String>, PathRejection>,
    token: Result<Query<Token>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (thread, token) = decode(reference, token)?;
    let ex = state.exchange.clone();
    let value = state
        .blocking(move || read_value(&ex, &token, &thread))
        .await??;
    Ok(body::render(Format::of(&headers), StatusCode::OK, &value))
}

/// The thread a link reads, with who the link acts as and what it allows (so a page offers
/// only what can work).
pub(crate) fn read_value(ex: &Exchange, token: &str, thread: &ThreadRef) -> Result<Value, Error> {
    let (file, grant) = ex.access().read_with_link(token, thread)?;
    let mut out = Map::new();
    out.insert("envelope", file.envelope.to_value());
    if let Some(until) = crate::exchange::view::held_until(ex, &file.envelope) {
        out.insert(
            "held_until",
            Value::str(crate::protocol::time::format_timestamp(&until)),
        );
    }
    out.insert("link", grant.view());
    out.insert(
        "messages",
        Value::Seq(file.messages()?.iter().map(|m| m.to_value()).collect()),
    );
    // What its `ref:` entries name, as far as the link's executor may see it: the page opens
    // the summary of each.
    let refs = ex.access().references_for(&file, &grant.executor)?;
    if !refs.is_empty() {
        out.insert("refs", Value::Map(refs));
    }
    Ok(Value::Map(out))
}

/// `POST /thread/{ref}?token=`: one MESS message (status and response payloads about this
/// thread) as the link's executor.
pub(crate) async fn post(
    State(state): State<AppState>,
    headers: HeaderMap,
    reference: Result<Path<String>, PathRejection>,
    token: Result<Query<Token>, QueryRejection>,
    request: Body,
) -> Result<Response, ApiError> {
    let (thread, token) = decode(reference, token)?;
    // The token is checked before a byte of the body is read: without a valid link, nobody
    // makes the server buffer a message.
    let ex = state.exchange.clone();
    let grant = state
        .blocking(move || ex.auth().check_link(&token, &thread))
        .await??;
    let json = body::sent_as_json(&headers);
    let limit = state.exchange.settings().max_message_bytes;
    let holder = format!("link:{}", grant.executor);
    let body = body::text(&headers, request, limit, &state.bodies, &holder).await?;
    let ex = state.exchange.clone();
    let reply = state
        .blocking(move || -> Result<Value, Error> {
            ex.intake().take_body(&body.text, json, |message| {
                Ok(ex.auth().submit_with_link(message, &grant)?.to_value())
            })
        })
        .await??;
    Ok(body::render(Format::of(&headers), StatusCode::OK, &reply))
}
