//! Pooled connections that keep their prepared statements: every statement is parsed and
//! planned once per connection and then only executed, which halves the round trips of each
//! statement (no separate prepare) and spares the server its parsing; measured under load, the
//! database's time went mostly to parsing and round trips.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, Error, GenericClient, NoTls, Row, Statement};

/// Statements one connection keeps at most; past that it starts again (the statements the
/// exchange runs are far fewer).
const KEPT: usize = 256;

/// How recently a connection must have answered to be handed out without a check.
const RECENT: std::time::Duration = std::time::Duration::from_secs(1);

/// Makes the pool's connections.
#[derive(Debug)]
pub(crate) struct Manager {
    config: postgres::Config,
}

impl Manager {
    pub(crate) fn new(config: postgres::Config) -> Manager {
        Manager { config }
    }
}

/// Why a connection could not be made or kept, as the pool reports it: PostgreSQL's own words
/// and SQLSTATE (a plain `postgres::Error` shows only `db error`).
#[derive(Debug)]
pub(crate) struct ConnectError(Error);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&super::describe(&self.0))
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Session;
    type Error = ConnectError;

    fn connect(&self) -> Result<Session, ConnectError> {
        Ok(Session {
            client: super::with_retries(|| self.config.connect(NoTls)).map_err(ConnectError)?,
            statements: Statements::default(),
        })
    }

    /// A connection used within the last second answered then; asking again would cost a
    /// round trip per checkout. One idle for longer (a database that restarted meanwhile) is
    /// asked, and replaced when it does not answer.
    fn is_valid(&self, conn: &mut Session) -> Result<(), ConnectError> {
        if conn.statements.used.is_some_and(|t| t.elapsed() < RECENT) {
            return Ok(());
        }
        conn.client.simple_query("").map_err(ConnectError)?;
        conn.statements.used = Some(std::time::Instant::now());
        Ok(())
    }

    fn has_broken(&self, conn: &mut Session) -> bool {
        conn.client.is_closed()
    }
}

/// A connection with its prepared statements.
pub(crate) struct Session {
    client: Client,
    statements: Statements,
}

/// A connection's prepared statements, and when it last ran one.
#[derive(Default)]
struct Statements {
    prepared: HashMap<String, Statement>,
    used: Option<std::time::Instant>,
}

impl Statements {
    /// The statement of `sql`, prepared through `client` the first time.
    fn get(&mut self, client: &mut impl GenericClient, sql: &str) -> Result<Statement, Error> {
        self.used = Some(std::time::Instant::now());
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = client.prepare(sql)?;
        if self.prepared.len() >= KEPT {
            self.prepared.clear();
        }
        self.prepared.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Running statements on a session or in a transaction, each prepared once per connection.
pub(crate) trait Run {
    /// The rows of `sql`.
    fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, Error>;
    /// The one row of `sql` (an error for none or several).
    fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, Error>;
    /// The row of `sql`, if any (an error for several).
    fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, Error>;
    /// Runs `sql`; the number of rows it changed.
    fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, Error>;
}

/// Implements [`Run`] for a type with a client field and a statements field; `$again` wraps
/// each statement: on a session (each statement its own transaction) a statement PostgreSQL
/// rolled back for a passing reason is run again ([`super::with_retries`]); in a transaction
/// it is not, as the transaction is lost with it.
macro_rules! run_with_statements {
    ($ty:ty, $client:ident, $statements:ident, $again:path) => {
        impl Run for $ty {
            fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, Error> {
                $again(|| {
                    let s = self.$statements.get(&mut self.$client, sql)?;
                    self.$client.query(&s, params)
                })
            }

            fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, Error> {
                $again(|| {
                    let s = self.$statements.get(&mut self.$client, sql)?;
                    self.$client.query_one(&s, params)
                })
            }

            fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, Error> {
                $again(|| {
                    let s = self.$statements.get(&mut self.$client, sql)?;
                    self.$client.query_opt(&s, params)
                })
            }

            fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, Error> {
                $again(|| {
                    let s = self.$statements.get(&mut self.$client, sql)?;
                    self.$client.execute(&s, params)
                })
            }
        }
    };
}

/// Runs `op` once: a statement of a transaction is not repeated on its own.
fn once<T>(mut op: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    op()
}

run_with_statements!(Session, client, statements, super::with_retries);
run_with_statements!(Tx<'_>, inner, statements, once);

impl Session {
    /// Begins a transaction (rolled back when dropped uncommitted).
    pub(crate) fn transaction(&mut self) -> Result<Tx<'_>, Error> {
        Ok(Tx {
            inner: self.client.transaction()?,
            statements: &mut self.statements,
        })
    }

    /// Runs statements without parameters as one batch (not prepared).
    pub(crate) fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.client.batch_execute(sql)
    }

    /// Runs statements without parameters in one round trip (one implicit transaction);
    /// the rows they return, as text.
    pub(crate) fn simple_query(
        &mut self,
        sql: &str,
    ) -> Result<Vec<postgres::SimpleQueryMessage>, Error> {
        self.client.simple_query(sql)
    }
}

/// A transaction on a [`Session`], sharing its statements.
pub(crate) struct Tx<'a> {
    inner: postgres::Transaction<'a>,
    statements: &'a mut Statements,
}

impl Tx<'_> {
    /// Commits.
    pub(crate) fn commit(self) -> Result<(), Error> {
        self.inner.commit()
    }

    /// A nested transaction (a savepoint).
    pub(crate) fn transaction(&mut self) -> Result<Tx<'_>, Error> {
        Ok(Tx {
            inner: self.inner.transaction()?,
            statements: self.statements,
        })
    }

    /// Runs statements without parameters as one batch (not prepared).
    pub(crate) fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.inner.batch_execute(sql)
    }
}
