//! `mess sql init`: prints a setup script for the duckdb CLI (and Python `duckdb`): load the
//! `mess_yaml` extension, then create the macros and views over this home, the same text the
//! embedded connection runs.

use std::path::PathBuf;

use crate::cli::{CliError, Context, output};
use crate::db::assets;

/// Arguments of `mess sql`.
#[derive(Debug, clap::Args)]
pub(crate) struct SqlArgs {
    #[command(subcommand)]
    command: SqlCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SqlCommand {
    /// Print the duckdb CLI setup for this home: `duckdb -unsigned -init <(mess sql init)`
    Init {
        /// The built extension file (from extensions/mess_yaml/build); without it the script
        /// loads an installed `mess_yaml`
        #[arg(long, value_name = "PATH")]
        extension: Option<PathBuf>,
    },
}

pub(crate) fn run(cx: &Context, args: SqlArgs) -> Result<(), CliError> {
    let SqlCommand::Init { extension } = args.command;
    let home = cx.config.home.to_string_lossy().into_owned();
    let load = match &extension {
        Some(p) => {
            let p = std::fs::canonicalize(p)
                .map_err(|e| CliError::new(format!("--extension {}: {e}", p.display())))?;
            format!("LOAD '{}';", p.to_string_lossy().replace('\'', "''"))
        }
        None => "LOAD mess_yaml;".to_owned(),
    };
    output::raw(&format!(
        "-- mess: duckdb setup for the exchange at {home}\n\
         -- Start the CLI with unsigned extensions allowed: duckdb -unsigned -init <(mess sql init)\n\
         -- Build the extension once with extensions/mess_yaml/build; `INSTALL '<that file>'` lets\n\
         -- `LOAD mess_yaml` find it later, or pass --extension to load the file directly.\n\
         SET autoinstall_known_extensions = false;\n\
         SET autoload_known_extensions = false;\n\
         {load}\n"
    ));
    for (name, sql) in assets::render(&home) {
        output::raw(&format!("-- {name}\n{}\n", sql.trim_end()));
    }
    Ok(())
}
