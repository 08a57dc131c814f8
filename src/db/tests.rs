//! Read-model tests: every asset loads, and the views and macros answer over fixture homes.

use std::path::Path;

use tempfile::TempDir;

use crate::db::Db;

#[test]
fn every_asset_loads_on_an_empty_home() {
    let dir = TempDir::new().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let con = db.lock();
    for view in [
        "threads",
        "messages",
        "thread_history",
        "executors",
        "routing_rules",
        "capabilities",
        "pending_by_capability",
        "executor_availability",
        "executor_stats",
    ] {
        let n: i64 = con
            .query_row(&format!("SELECT count(*) FROM {view}"), [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{view}: {e}"));
        assert_eq!(n, 0, "{view}");
    }
    let _ = Path::new("");
}
