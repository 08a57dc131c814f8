//! Reputation from reviews, and `strategy: best_rated`, as known answers: a small history of
//! claims, completions, estimates and reviews, then `executor_reputation` and the routing it
//! drives, over the views and over the routing snapshot alike.

use chrono::TimeDelta;

use crate::exchange::directory::Directory;
use crate::exchange::tests::{Fixture, fixture};
use crate::protocol::time;

const CONFIG: &str = "
agent_id: claude-agent
executors:
  a-bot:
    capabilities: [tidy]
  b-bot:
    capabilities: [tidy]
  c-bot:
    capabilities: [tidy]
  d-bot:
    capabilities: [tidy]
routing:
  - default:
      prefer: best_rated
";

/// One request done by `who`: claimed (with `estimate`), completed after `took` minutes, and
/// reviewed with `rating` (and a redo, done again, when `redo`).
fn work(
    f: &Fixture,
    who: &str,
    extra: &str,
    estimate: Option<&str>,
    took: i64,
    rating: &str,
    redo: bool,
) {
    let r = f.request(
        "claude-agent",
        &format!("intent: tidy up\nrequires: [tidy]\n{extra}"),
    );
    let claim = match estimate {
        Some(e) => format!("code: claimed\nestimate: {e}"),
        None => "code: claimed".to_owned(),
    };
    f.status(who, &r, &claim).unwrap();
    f.clock.advance(TimeDelta::minutes(took));
    f.status(who, &r, "code: completed").unwrap();
    let redo_line = if redo {
        "\n      request_redo: true"
    } else {
        ""
    };
    f.ok(
        "claude-agent",
        &format!("MESS:\n  - review:\n      re: {r}\n      rating: {rating}{redo_line}\n"),
    );
    if redo {
        f.status(who, &r, "code: completed").unwrap();
    }
}

#[test]
fn reputation_and_best_rated_routing_have_known_answers() {
    let f = fixture(CONFIG);
    work(
        &f,
        "a-bot",
        "needed_by: 2099-01-01T00:00:00Z\n",
        Some("PT1H"),
        10,
        "5",
        false,
    );
    work(&f, "a-bot", "", None, 20, "5", false);
    work(&f, "a-bot", "", None, 30, "4", false);
    work(&f, "b-bot", "", None, 5, "2", false);
    work(&f, "b-bot", "", None, 5, "reject", true);
    work(&f, "d-bot", "", Some("PT1M"), 2, "accept", false);
    let db = f.ex.db().unwrap();
    let query = |sql: &str| {
        crate::db::query::run(
            f.dir.path(),
            sql,
            &crate::db::query::QueryLimits::defaults(),
            &crate::db::query::Scope::All,
        )
        .unwrap()
        .rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|c| c.unwrap_or_else(|| "-".to_owned()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
    };
    assert_eq!(
        query(
            "SELECT executor, worked, completed, reviews, rated, avg_rating, accepted, rejected,
                    acceptance_rate, redo_rate, on_time_rate, on_estimate_rate, score
             FROM executor_reputation WHERE capability IS NULL ORDER BY executor"
        ),
        [
            "a-bot 3 3 3 3 4.67 3 0 1.0 0.0 1.0 1.0 4.33",
            "b-bot 2 2 2 2 1.5 0 2 0.0 0.5 - - 3.0",
            "d-bot 1 1 1 1 5.0 1 0 1.0 0.0 - 0.0 4.25",
        ]
    );
    // Per capability too: all of this work required `tidy`.
    assert_eq!(
        query("SELECT count(*) FROM executor_reputation WHERE capability = 'tidy'"),
        ["3"]
    );

    // Routing an hour on (the snapshot's statistics are taken by the hour): the best score
    // first, the executor nobody rated yet at 4.00 between, the badly rated last.
    f.clock.advance(TimeDelta::hours(1));
    let now = f.ex.now();
    let requires = vec!["tidy".to_owned()];
    let views: Vec<String> = db
        .route(&requires, None, None, &now, None)
        .unwrap()
        .into_iter()
        .map(|r| format!("{}: {}", r.executor, r.reason))
        .collect();
    assert_eq!(
        views,
        [
            "a-bot: rule 1 (default) strategy best_rated: score 4.33 (3 rated, mean 4.67)",
            "d-bot: rule 1 (default) strategy best_rated: score 4.25 (1 rated, mean 5.00)",
            "c-bot: rule 1 (default) strategy best_rated: not rated yet: scored 4.00",
            "b-bot: rule 1 (default) strategy best_rated: score 3.00 (2 rated, mean 1.50)",
        ]
    );
    let directory = Directory::load(f.ex.store()).routing();
    let snapshot: Vec<String> = db
        .route(&requires, None, None, &now, Some(&directory))
        .unwrap()
        .into_iter()
        .map(|r| format!("{}: {}", r.executor, r.reason))
        .collect();
    assert_eq!(snapshot, views, "at {}", time::format_timestamp(&now));
}
