//! The one integration-test binary: the real `mess` binary on temp homes, several processes at
//! once, writers killed mid-write, and the tidy checks of the house style.

#![allow(clippy::unwrap_used)]

mod buttons;
mod callbacks;
mod cli;
mod cluster;
mod concurrency;
mod crash;
mod dashboard;
mod dispatch;
mod docs;
mod duckdb_cli;
mod edge;
mod http;
mod inspector;
mod links_plan;
mod mail_spec;
mod many_hands;
mod mcp;
mod mcp_plan;
mod mcp_python;
mod mcp_tasks;
mod metrics;
mod no_server;
mod notebooks;
mod operators;
mod outbound;
mod packaging;
mod peers;
mod query;
mod query_limits;
mod remote;
mod reviews;
mod robots;
mod shells;
mod spec_replay;
mod suggestions;
mod support;
mod tidy;
mod tidy_modules;
mod trust;
mod web;
