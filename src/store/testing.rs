//! Stores for unit tests, so every suite written against the storage contract runs on both
//! backends from one body: files unless `MESS_TEST_BACKEND=postgres`, and then each store is a
//! fresh database of the server `MESS_TEST_DATABASE_URL` names (`.ci/test` starts one and runs
//! the unit tests a second time so). A plain `cargo test` runs the files backend.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::store::Store;
use crate::store::postgres::Pg;

/// The backend the unit tests run on: `files` or `postgres`.
pub(crate) fn backend() -> &'static str {
    match std::env::var("MESS_TEST_BACKEND").as_deref() {
        Ok("postgres") => "postgres",
        _ => "files",
    }
}

/// Whether the unit tests run on the files backend: assertions about the files themselves
/// (names, modes, hand edits, torn moves) hold only there; what they stand for on PostgreSQL is
/// the cluster tests' (`tests/it/cluster.rs`), which compare each mirror with the database.
pub(crate) fn on_files() -> bool {
    !on_postgres()
}

/// Whether the unit tests run on the postgres backend.
pub(crate) fn on_postgres() -> bool {
    backend() == "postgres"
}

/// A store for a test, with `home` as its home (files backend) or its mirror (postgres).
pub(crate) fn store_in(home: &Path) -> Store {
    if !on_postgres() {
        return Store::open(home);
    }
    Store::on_database(home, fresh_database())
}

/// The store `store` is over, as another process would open it: the same home and backend,
/// without the first one's observer and hooks.
pub(crate) fn reopen(store: &Store) -> Store {
    store.reopened()
}

/// A new, migrated database of the test server, for one store.
fn fresh_database() -> Pg {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let admin = std::env::var("MESS_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!("MESS_TEST_BACKEND=postgres needs MESS_TEST_DATABASE_URL (a server to make databases on; .ci/test starts one)")
    });
    let name = format!(
        "mess_unit_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut client = ::postgres::Client::connect(&admin, ::postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "the test database server at {admin}: {}",
            crate::store::postgres::describe(&e)
        )
    });
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| {
            panic!(
                "CREATE DATABASE {name}: {}",
                crate::store::postgres::describe(&e)
            )
        });
    let (base, _) = admin.rsplit_once('/').unwrap_or((admin.as_str(), ""));
    let pg = Pg::open(&format!("{base}/{name}")).unwrap();
    pg.migrate().unwrap();
    pg
}
