//! `mess query`: one read-only SQL statement over the exchange's views, as a table, CSV or JSON.

use std::time::Duration;

use crate::cli::{CliError, Context, output};
use crate::db::query::QueryLimits;

/// Output formats of `mess query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum QueryFormat {
    /// Aligned columns.
    Table,
    /// Comma-separated values with a header line.
    Csv,
    /// `{"columns": [...], "rows": [{...}], "truncated": false}`.
    Json,
}

/// Arguments of `mess query`.
#[derive(Debug, clap::Args)]
pub(crate) struct QueryArgs {
    /// The statement: SELECT, WITH, DESCRIBE, SUMMARIZE or SHOW, over the views (threads,
    /// messages, requests, statuses, claims, responses, thread_history, executors, capabilities,
    /// routing_rules, pending_by_capability, executor_availability, executor_stats) or
    /// read_yaml_auto on the home
    #[arg(allow_hyphen_values = true)]
    sql: String,
    /// Output format
    #[arg(long, value_enum, default_value_t = QueryFormat::Table)]
    format: QueryFormat,
    /// Most rows to return
    #[arg(long, default_value_t = 1000)]
    max_rows: usize,
    /// Seconds before the query is interrupted (default: limits.query_timeout, 10 s)
    #[arg(long)]
    timeout: Option<u64>,
}

pub(crate) fn run(cx: &Context, args: QueryArgs) -> Result<(), CliError> {
    let defaults = cx.exchange.sql().query_limits();
    let limits = QueryLimits {
        max_rows: args.max_rows,
        timeout: args.timeout.map_or(defaults.timeout, Duration::from_secs),
        ..defaults
    };
    let result = cx.exchange.sql().query(&args.sql, &limits, None)?;
    match args.format {
        QueryFormat::Table => {
            let rows: Vec<Vec<String>> = result
                .rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|c| c.clone().unwrap_or_else(|| "NULL".to_owned()))
                        .collect()
                })
                .collect();
            let header: Vec<&str> = result.columns.iter().map(String::as_str).collect();
            output::table(&header, &rows);
        }
        QueryFormat::Csv => output::raw(&result.to_csv()),
        QueryFormat::Json => output::raw(&format!("{}\n", result.to_json())),
    }
    if let Some(w) = &result.warning {
        output::warn(w);
    }
    Ok(())
}
