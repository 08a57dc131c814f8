//! yaml_scan: `read_yaml_auto`, YAML files as DuckDB rows, and `yaml_to_json`, YAML text as JSON. One implementation serves the
//! embedded DuckDB of `mess` and the `mess_yaml` loadable extension for the duckdb CLI.
//!
//! It knows YAML, Arrow and DuckDB, not MESS: rows are generic (one per mapping document, with
//! optional hive, `filename` and `document_index` columns); the SQL views give them meaning.
//!
//! Reading order: `parse` (files into documents of `node`s), `packed` (the compact form the
//! cache keeps), `types` (the union schema),
//! `build` (Arrow arrays), `scan` (a bound scan), `vtab` (the DuckDB table function), with
//! `glob` and `cache` beside them.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod build;
mod cache;
mod glob;
mod json;
mod node;
mod packed;
mod parse;
mod scan;
mod types;
mod vtab;

#[cfg(test)]
mod tests;

pub use cache::{
    cache_budget, cached_bytes, cached_files, clear_cache, parsed_files, set_cache_budget,
};
pub use glob::escape as escape_glob;
pub use json::{register_scalars, yaml_to_json};
pub use scan::{Mode, Options, Plan, THREAD_SUFFIXES, defining, is_thread_name};
pub use vtab::{Confinement, ReadYaml, register, register_confined, register_within};
