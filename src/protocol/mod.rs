//! The MESS protocol in code: message types, validation, the thread state machine and the
//! MESSE-AF envelope. Pure: no files, no clock, no network; time arrives as an argument.
//!
//! Read `message` first (the `MESS:` list and its payloads), then `status` and `machine`.
//! `yaml` is the only place that knows the YAML library; `emit` writes YAML for thread files.

#![warn(missing_docs)]

pub mod content;
pub mod cron;
pub mod emit;
pub mod envelope;
pub mod error;
pub(crate) mod field;
pub mod ids;
pub mod machine;
pub mod message;
pub mod request;
pub mod review;
pub mod status;
pub mod time;
pub mod tz;
pub mod value;
pub mod yaml;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;
