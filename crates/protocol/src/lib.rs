//! The MESS protocol in code: message types, validation, the thread state machine and the
//! MESSE-AF envelope. Pure: no files, no clock, no network; time arrives as an argument.
//!
//! Its own crate so that it builds for any target (a phone, a browser, a robot's controller)
//! and so that nothing else can creep into it: the `mess` crate re-exports it as
//! `mess::protocol`, and a tidy test there checks this crate's dependency list.
//!
//! Read `message` first (the `MESS:` list and its payloads), then `status` and `machine`.
//! `yaml` is the only place that knows the YAML library; `emit` writes YAML for thread files.

#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod access;
pub mod answer;
pub mod buttons;
pub mod config;
pub mod content;
pub mod cron;
pub mod emit;
pub mod envelope;
pub mod error;
pub(crate) mod field;
pub mod hands;
pub mod ids;
pub mod link;
pub mod machine;
pub mod message;
pub mod net;
pub mod notice;
pub mod read;
pub mod request;
pub mod resolve;
pub mod review;
pub mod route;
pub mod rules;
pub mod status;
pub mod thread_text;
pub mod time;
pub mod tz;
pub mod value;
pub mod yaml;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;
