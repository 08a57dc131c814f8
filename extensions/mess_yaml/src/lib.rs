//! mess_yaml: the DuckDB loadable extension that gives the duckdb CLI and Python `duckdb` the
//! same `read_yaml_auto` as the embedded DuckDB of `mess` (the scanner lives in `yaml_scan`).
//! Build it with `extensions/mess_yaml/build`, which also appends DuckDB's metadata trailer.

// The entry-point macro expands to the C ABI glue DuckDB calls, which is unsafe by nature.
#![allow(unsafe_code)]

use std::error::Error;

use duckdb::{Connection, duckdb_entrypoint_c_api};

/// Registers `read_yaml_auto` and `yaml_to_json` when DuckDB loads the extension.
#[duckdb_entrypoint_c_api(ext_name = "mess_yaml", min_duckdb_version = "v1.2.0")]
pub fn entry(con: Connection) -> Result<(), Box<dyn Error>> {
    yaml_scan::register(&con)?;
    yaml_scan::register_scalars(&con)?;
    Ok(())
}
