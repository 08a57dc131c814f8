//! `GET|POST /query`: read-only SQL over the exchange's views (the same lock-down as `mess
//! query`), as JSON, CSV or an Arrow IPC stream.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::db::query::QueryLimits;
use crate::exchange::Exchange;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::body;
use crate::http::error::ApiError;

/// The parameters of a query, from the query string or a JSON body.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct QueryParams {
    /// The statement.
    sql: Option<String>,
    /// `json` (default), `csv` or `arrow`.
    format: Option<String>,
    /// Most rows (default 1000, at most 10000).
    limit: Option<usize>,
}

/// Most rows a client may ask for.
const MAX_LIMIT: usize = 10_000;

/// `GET /query?sql=&format=&limit=`.
pub(crate) async fn get(
    State(state): State<AppState>,
    Caller(caller): Caller,
    params: Result<Query<QueryParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::malformed(e.body_text()))?;
    run(state, caller.id, params).await
}

/// `POST /query`: the statement as the body (plain text), or a JSON object
/// `{"sql", "format", "limit"}`; query-string parameters fill what the body leaves out.
pub(crate) async fn post(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    params: Result<Query<QueryParams>, QueryRejection>,
    request: Body,
) -> Result<Response, ApiError> {
    let Query(mut params) = params.map_err(|e| ApiError::malformed(e.body_text()))?;
    let holder = format!("{}:{}", caller.role, caller.id);
    let text = body::text(&headers, request, 1024 * 1024, &state.bodies, &holder)
        .await?
        .text;
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if is_json {
        let from_body: QueryParams = serde_json::from_str(&text)
            .map_err(|e| ApiError::malformed(format!("the JSON body: {e}")))?;
        params.sql = from_body.sql.or(params.sql);
        params.format = from_body.format.or(params.format);
        params.limit = from_body.limit.or(params.limit);
    } else if !text.trim().is_empty() {
        params.sql = Some(text);
    }
    run(state, caller.id, params).await
}

/// Runs the query as `viewer`, who sees only the threads they may see.
async fn run(state: AppState, viewer: String, params: QueryParams) -> Result<Response, ApiError> {
    let sql = params
        .sql
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ApiError::malformed("a query needs `sql`"))?;
    let limits = QueryLimits {
        max_rows: params.limit.unwrap_or(1000).clamp(1, MAX_LIMIT),
        ..state.exchange.sql().query_limits()
    };
    let format = params.format.as_deref().unwrap_or("json").to_owned();
    let ex = state.exchange.clone();
    match format.as_str() {
        "json" | "csv" => {
            let result = state
                .blocking(move || ex.sql().query(&sql, &limits, Some(&viewer)))
                .await?
                .map_err(query_error(&state.exchange))?;
            let (kind, text) = if format == "csv" {
                ("text/csv; charset=utf-8", result.to_csv())
            } else {
                ("application/json", result.to_json())
            };
            let mut response =
                (StatusCode::OK, [(header::CONTENT_TYPE, kind)], text).into_response();
            if result.truncated {
                response
                    .headers_mut()
                    .insert("x-mess-truncated", header::HeaderValue::from_static("true"));
            }
            Ok(response)
        }
        "arrow" => {
            let result = state
                .blocking(move || ex.sql().query_arrow(&sql, &limits, Some(&viewer)))
                .await?
                .map_err(query_error(&state.exchange))?;
            let mut response = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/vnd.apache.arrow.stream")],
                result.ipc,
            )
                .into_response();
            if result.truncated {
                response
                    .headers_mut()
                    .insert("x-mess-truncated", header::HeaderValue::from_static("true"));
            }
            Ok(response)
        }
        other => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            format!("format: {other:?} is not one of json, csv, arrow"),
        )),
    }
}

/// Query errors keep DuckDB's message, which names the problem, with the exchange's home
/// written as `<home>`: a file that does not parse is named, but no server path leaves.
fn query_error(ex: &Exchange) -> impl Fn(crate::exchange::error::Error) -> ApiError + '_ {
    move |e| {
        let message = ex.public_message(&e);
        ApiError::from(e).map_message(|_| message)
    }
}
