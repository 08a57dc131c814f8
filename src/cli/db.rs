//! `mess db init|migrate|status`: the schema of a tier-1 database (`--database` /
//! `MESS_DATABASE_URL`).

use crate::cli::{CliError, Context, output};
use crate::store::postgres::Pg;
use crate::store::postgres::schema;

/// Arguments of `mess db`.
#[derive(Debug, clap::Args)]
pub(crate) struct DbArgs {
    #[command(subcommand)]
    action: DbAction,
}

#[derive(Debug, clap::Subcommand)]
enum DbAction {
    /// Create the mess schema in an empty database (the same as migrate on a new one)
    Init,
    /// Apply the migrations this mess knows and the database lacks, in order
    Migrate,
    /// Print the schema version of the database, the version this mess needs, and its threads
    Status,
}

pub(crate) fn run(cx: &Context, args: DbArgs) -> Result<(), CliError> {
    let db = database(cx, "mess db")?;
    match args.action {
        DbAction::Init | DbAction::Migrate => {
            let applied = db.migrate()?;
            if applied.is_empty() {
                output::line(&format!(
                    "the database is at schema version {} already; nothing to do",
                    schema::latest()
                ));
            } else {
                for v in &applied {
                    let name = schema::MIGRATIONS
                        .iter()
                        .find(|m| m.version == *v)
                        .map_or("", |m| m.name);
                    output::line(&format!("applied migration {v}: {name}"));
                }
                output::line(&format!(
                    "the database is at schema version {}",
                    schema::latest()
                ));
            }
        }
        DbAction::Status => {
            let status = db.schema_status()?;
            for (version, name, at) in &status.applied {
                output::line(&format!("migration {version} applied {at}: {name}"));
            }
            output::line(&format!(
                "schema version {} (this mess needs {}); {} thread(s)",
                status.version(),
                status.known,
                status.threads
            ));
            if status.version() < status.known {
                return Err(CliError::with_hint(
                    "the database's schema is behind this mess",
                    "run `mess db migrate`",
                ));
            }
        }
    }
    Ok(())
}

/// The database of a command that only makes sense with one.
pub(crate) fn database<'a>(cx: &'a Context, command: &str) -> Result<&'a Pg, CliError> {
    cx.database.as_ref().ok_or_else(|| {
        CliError::usage(
            format!("{command} works on a database, and none is named"),
            "pass --database postgres://USER@HOST:PORT/DB or set MESS_DATABASE_URL",
        )
    })
}
