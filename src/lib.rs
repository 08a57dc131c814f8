//! mess: a MESS exchange. Agents submit MESS messages, each request becomes a MESSE-AF thread file
//! in a `state=` folder, executors move it through its lifecycle, and everything is queryable.
//!
//! Modules in reading order: `protocol` (pure types and rules), `store` (thread files on disk),
//! `db` (the DuckDB read model over the files), `links` (presigned link tokens), `mail` (agent
//! mail), `notify` (the notification channels), `exchange` (the use cases that combine them, and
//! the one place that decides access), then the adapters: `http` (the HTTP API and the human
//! page), `mcp` (the MCP server) and `cli` (the `mess` command and its settings).

#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cli;
pub mod db;
pub mod exchange;
mod http;
mod links;
mod mail;
mod mcp;
pub mod notify;
/// The MESS protocol and the MESSE-AF format, from the `mess-protocol` crate (`crates/protocol`).
pub use mess_protocol as protocol;
mod remote;
pub mod store;

/// What `mess --version` and `/healthz` say of this build: the crate version, the commit it was
/// built from and the day (build.rs).
pub const BUILD: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MESS_COMMIT"),
    ", built ",
    env!("MESS_BUILT"),
    ")"
);
