//! The thread routes: submit a MESS message (`POST /mess`), list the threads the caller may see
//! (`GET /threads`), read one (`GET /threads/{ref}`).

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use crate::exchange::access::ThreadFilter;
use crate::exchange::{Exchange, Sender};
use crate::http::AppState;
use crate::http::auth::{Caller, Credential};
use crate::http::body::{self, Format};
use crate::http::error::ApiError;
use crate::http::link;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State as Folder;
use crate::protocol::status::Status;
use crate::protocol::value::{Map, Value};

/// `POST /mess`: one MESS message (JSON or YAML) as the caller; answers with the exchange's
/// reply. The caller is an API key's principal, or a presigned link's executor (the reference design's
/// page posts with the link's token as its bearer token: status and response payloads about
/// the link's thread only, checked before the body is read).
pub(crate) async fn submit(
    State(state): State<AppState>,
    credential: Credential,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let format = Format::of(&headers);
    let json = body::sent_as_json(&headers);
    let limit = state.exchange.settings().max_message_bytes;
    let ex = state.exchange.clone();
    let reply = match credential {
        Credential::Key(caller) => {
            let holder = format!("{}:{}", caller.role, caller.id);
            let body = body::text(&headers, body, limit, &state.bodies, &holder).await?;
            state
                .blocking(move || -> Result<Value, crate::exchange::error::Error> {
                    let sender = Sender::principal(&caller, "http");
                    ex.intake().take_body(&body.text, json, |message| {
                        Ok(ex.intake().submit(message, &sender)?.to_value())
                    })
                })
                .await??
        }
        Credential::Link(token) => {
            let check = ex.clone();
            let grant = state
                .blocking(move || check.auth().check_link_token(&token))
                .await??;
            let holder = format!("link:{}", grant.executor);
            let body = body::text(&headers, body, limit, &state.bodies, &holder).await?;
            state
                .blocking(move || -> Result<Value, crate::exchange::error::Error> {
                    ex.intake().take_body(&body.text, json, |message| {
                        Ok(ex.auth().submit_with_link(message, &grant)?.to_value())
                    })
                })
                .await??
        }
    };
    Ok(body::render(format, StatusCode::OK, &reply))
}

/// `GET /mess/{ref}`: the reference design's read of one thread, with an API key (as
/// `GET /threads/{ref}`) or a presigned link's token as the bearer token (as
/// `GET /thread/{ref}?token=`).
pub(crate) async fn read(
    State(state): State<AppState>,
    credential: Credential,
    headers: HeaderMap,
    reference: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(reference) = reference.map_err(|e| ApiError::malformed(e.body_text()))?;
    let ex = state.exchange.clone();
    let value = match credential {
        Credential::Key(caller) => {
            state
                .blocking(move || thread_value(&ex, &reference, &caller.id))
                .await??
        }
        Credential::Link(token) => {
            let thread = ThreadRef::parse(&reference)
                .map_err(|e| ApiError::from(crate::exchange::error::Error::from(e)))?;
            state
                .blocking(move || link::read_value(&ex, &token, &thread))
                .await??
        }
    };
    Ok(body::render(Format::of(&headers), StatusCode::OK, &value))
}

/// Filters of `GET /threads`.
#[derive(Debug, Deserialize)]
pub(crate) struct ListParams {
    status: Option<String>,
    state: Option<String>,
    executor: Option<String>,
    requestor: Option<String>,
    capability: Option<String>,
    limit: Option<usize>,
}

/// Most threads one listing returns.
const MAX_LIMIT: usize = 1000;

/// `GET /threads`: the envelopes the caller may see, newest `updated` first.
pub(crate) async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    filter: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(filter) = filter.map_err(|e| ApiError::malformed(e.body_text()))?;
    let status = match &filter.status {
        Some(s) => Some(Status::parse(s).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!("status: unknown status {s:?}"),
            )
        })?),
        None => None,
    };
    let states = match &filter.state {
        Some(s) => Some(vec![Folder::parse(s).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!("state: unknown state {s:?} (received, executing, finished, canceled)"),
            )
        })?]),
        None => None,
    };
    let wanted = ThreadFilter {
        status,
        states,
        executor: filter.executor,
        requestor: filter.requestor,
        capability: filter.capability,
        limit: filter.limit.unwrap_or(100).min(MAX_LIMIT),
    };
    let ex = state.exchange.clone();
    let envelopes = state
        .blocking(move || ex.access().threads_matching(&caller.id, &wanted))
        .await??;
    let items: Vec<Value> = envelopes.iter().map(|e| e.to_value()).collect();
    let mut out = Map::new();
    out.insert("threads", Value::Seq(items));
    Ok(body::render(
        Format::of(&headers),
        StatusCode::OK,
        &Value::Map(out),
    ))
}

/// The representation `GET /threads/{ref}` answers with.
#[derive(Debug, Deserialize)]
pub(crate) struct OneParams {
    /// `messe-af`: the thread file's text, byte for byte (what `mess show` prints).
    format: Option<String>,
}

/// `GET /threads/{ref}`: the envelope and the messages of a thread the caller may see; with
/// `?format=messe-af`, the thread file itself (a remote `mess show` and `mess status` read it).
pub(crate) async fn one(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    reference: Result<Path<String>, PathRejection>,
    params: Result<Query<OneParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Path(reference) = reference.map_err(|e| ApiError::malformed(e.body_text()))?;
    let Query(params) = params.map_err(|e| ApiError::malformed(e.body_text()))?;
    let ex = state.exchange.clone();
    match params.format.as_deref() {
        None => {}
        Some("messe-af") => {
            let text = state
                .blocking(move || {
                    ex.access()
                        .thread_for(&reference, &caller.id)
                        .map(|t| t.text().to_owned())
                })
                .await??;
            return Ok(Response::builder()
                .header(
                    axum::http::header::CONTENT_TYPE,
                    "application/yaml; charset=utf-8",
                )
                .body(Body::from(text))
                .unwrap_or_default());
        }
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!(
                    "format: unknown format {other:?} (messe-af, or none for the envelope and messages)"
                ),
            ));
        }
    }
    let value = state
        .blocking(move || thread_value(&ex, &reference, &caller.id))
        .await??;
    Ok(body::render(Format::of(&headers), StatusCode::OK, &value))
}

/// One thread as `who` may read it: its envelope and messages, and the threads its `ref:`
/// entries name that `who` may see (`refs`).
fn thread_value(
    ex: &Exchange,
    reference: &str,
    who: &str,
) -> Result<Value, crate::exchange::error::Error> {
    let thread = ex.access().thread_for(reference, who)?;
    let messages = thread.messages()?;
    let mut out = Map::new();
    out.insert("envelope", thread.envelope.to_value());
    out.insert(
        "messages",
        Value::Seq(messages.iter().map(|m| m.to_value()).collect()),
    );
    // The threads its `ref:` entries name, as far as `who` may see them.
    let refs = ex.access().references_for(&thread, who)?;
    if !refs.is_empty() {
        out.insert("refs", Value::Map(refs));
    }
    Ok(Value::Map(out))
}
