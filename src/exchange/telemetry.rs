//! Prometheus metrics through the `metrics` facade: every name is here, with its help text, so
//! the list an operator reads (docs/guide/operations.md) and the code agree. Counters and
//! histograms are recorded where things happen; what is a level rather than an event (queue
//! depths, jobs due, query workers) is read when `/metrics` is scraped. Without a recorder
//! (one-shot commands) every record is a no-op.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::exchange::Exchange;

/// MESS messages by payload type and outcome (`ok`, or the error kind that refused them).
pub const MESSAGES: &str = "mess_messages_total";
/// HTTP requests by method, route (its pattern, never a raw path) and status class.
pub const HTTP_SECONDS: &str = "mess_http_request_duration_seconds";
/// Claims by outcome (`won`, `lost`: another executor holds the thread).
pub const CLAIMS: &str = "mess_claims_total";
/// Routing passes, and how long each took.
pub const ROUTING_PASSES: &str = "mess_routing_passes_total";
pub const ROUTING_SECONDS: &str = "mess_routing_pass_duration_seconds";
/// Threads offered to executors by routing passes.
pub const ROUTED: &str = "mess_routed_threads_total";
/// Job attempts (notices by channel, and the other kinds) by outcome: `sent`, `done`,
/// `retry`, `failed`.
pub const DELIVERIES: &str = "mess_deliveries_total";
/// Queries by outcome, and how long they ran.
pub const QUERIES: &str = "mess_queries_total";
pub const QUERY_SECONDS: &str = "mess_query_duration_seconds";
/// Tier 1: how long after a thread changed this node's follower read the change.
pub const FOLLOWER_LAG: &str = "mess_follower_lag_seconds";
/// Tier 1: when this node's follower last read the change feed (seconds since the epoch).
pub const FOLLOWER_PASS: &str = "mess_follower_last_pass_timestamp_seconds";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the recorder (once per process; later calls return the same handle).
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        // Buckets from a millisecond to a minute: request latencies and routing passes alike.
        let buckets = [
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            60.0,
        ];
        let handle = PrometheusBuilder::new()
            .set_buckets(&buckets)
            .expect("the bucket list is not empty")
            .install_recorder()
            .unwrap_or_else(|_| {
                // Another recorder came first (a test process): render into one of our own
                // that nothing records into, rather than failing the server.
                PrometheusBuilder::new().build_recorder().handle()
            });
        describe();
        handle
    })
}

fn describe() {
    describe_counter!(MESSAGES, "MESS messages by payload type and outcome");
    describe_histogram!(
        HTTP_SECONDS,
        Unit::Seconds,
        "HTTP requests by route, method and status"
    );
    describe_counter!(CLAIMS, "Claims by outcome (won, lost)");
    describe_counter!(ROUTING_PASSES, "Routing passes over waiting threads");
    describe_histogram!(
        ROUTING_SECONDS,
        Unit::Seconds,
        "How long a routing pass took"
    );
    describe_counter!(ROUTED, "Threads offered to executors by routing passes");
    describe_counter!(DELIVERIES, "Job attempts by job, channel and outcome");
    describe_counter!(QUERIES, "SQL queries by outcome");
    describe_histogram!(QUERY_SECONDS, Unit::Seconds, "How long a SQL query ran");
    describe_histogram!(
        FOLLOWER_LAG,
        Unit::Seconds,
        "Tier 1: from a thread's change to this node reading it"
    );
    describe_gauge!(
        FOLLOWER_PASS,
        Unit::Seconds,
        "Tier 1: when the follower last read the change feed"
    );
    describe_gauge!(
        "mess_open_threads",
        "Open threads by state (received, executing)"
    );
    describe_gauge!(
        "mess_pending_threads",
        "Pending threads by required capability ('(any)' for none)"
    );
    describe_gauge!("mess_jobs_queued", "Jobs waiting in the outbox, by kind");
    describe_gauge!("mess_jobs_due", "Jobs due now, by kind");
    describe_gauge!("mess_jobs_failed", "Jobs given up, by kind");
    describe_gauge!(
        "mess_query_workers_busy",
        "Query workers running a query now"
    );
    describe_gauge!("mess_executors", "Registered executors");
    describe_gauge!("mess_build_info", "1, labelled with the version and commit");
}

/// The metric label of a payload's type: the protocol's words, and `other` for any type it
/// does not define (whose names a sender chooses, so they never become labels).
pub fn payload_type(p: &crate::protocol::message::Payload) -> &'static str {
    p.known_kind().unwrap_or("other")
}

/// The metric label of an error kind.
pub fn error_kind(kind: crate::exchange::error::ErrorKind) -> &'static str {
    use crate::exchange::error::ErrorKind as K;
    match kind {
        K::Malformed => "malformed",
        K::Invalid => "invalid",
        K::Unauthorized => "unauthorized",
        K::Forbidden => "forbidden",
        K::NotFound => "not_found",
        K::Conflict => "conflict",
        K::TooLarge => "too_large",
        K::Busy => "busy",
        K::Unavailable => "unavailable",
        K::Internal => "internal",
    }
}

/// One MESS payload handled.
pub fn message(kind: &'static str, outcome: &'static str) {
    counter!(MESSAGES, "type" => kind, "outcome" => outcome).increment(1);
}

/// One HTTP request served by the route `route` (its pattern).
pub fn http(method: &str, route: &str, status: u16, took: Duration) {
    let class = match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    // A client may send any method word; only the standard ones become labels.
    let method = match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        _ => "other",
    };
    histogram!(HTTP_SECONDS, "method" => method, "route" => route.to_owned(), "status" => class)
        .record(took.as_secs_f64());
}

/// One claim, won or lost.
pub fn claim(won: bool) {
    counter!(CLAIMS, "outcome" => if won { "won" } else { "lost" }).increment(1);
}

/// One routing pass that offered `routed` threads.
pub fn routing_pass(took: Duration, routed: usize) {
    counter!(ROUTING_PASSES).increment(1);
    histogram!(ROUTING_SECONDS).record(took.as_secs_f64());
    counter!(ROUTED).increment(routed as u64);
}

/// One job attempt.
pub fn delivery(job: &'static str, channel: &str, outcome: &'static str) {
    counter!(DELIVERIES, "job" => job, "channel" => channel.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// One query, with how long it ran.
pub fn query(ok: bool, took: Duration) {
    counter!(QUERIES, "outcome" => if ok { "ok" } else { "failed" }).increment(1);
    histogram!(QUERY_SECONDS).record(took.as_secs_f64());
}

/// Changes the tier-1 follower read, each `lag` after its thread changed.
pub fn follower_pass(lags: impl IntoIterator<Item = f64>) {
    for lag in lags {
        histogram!(FOLLOWER_LAG).record(lag.max(0.0));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    gauge!(FOLLOWER_PASS).set(now);
}

/// The metrics as Prometheus text, with the levels read now from `ex`.
pub fn render(ex: &Exchange) -> String {
    let handle = install();
    gauge!("mess_build_info", "version" => env!("CARGO_PKG_VERSION"), "commit" => env!("MESS_COMMIT"))
        .set(1.0);
    let levels = ex.levels();
    for (state, n) in &levels.threads {
        gauge!("mess_open_threads", "state" => *state).set(*n as f64);
    }
    for (capability, n) in &levels.pending {
        gauge!("mess_pending_threads", "capability" => capability.clone()).set(*n as f64);
    }
    let jobs = ex.outbox().jobs();
    for kind in crate::store::outbox::Job::KINDS {
        let counts = jobs.kinds.get(kind).cloned().unwrap_or_default();
        gauge!("mess_jobs_queued", "kind" => kind).set(counts.queued as f64);
        gauge!("mess_jobs_due", "kind" => kind).set(counts.due as f64);
        gauge!("mess_jobs_failed", "kind" => kind).set(counts.failed as f64);
    }
    gauge!("mess_query_workers_busy").set(levels.queries_running as f64);
    gauge!("mess_executors").set(ex.directory().executors.len() as f64);
    handle.render()
}
