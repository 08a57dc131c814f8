//! Property tests of the read model over hostile files (proptest, a bounded number of cases):
//! `read_yaml_auto` and the views answer, or fail with an error, for any YAML text a writer
//! may leave in a home (never a crash, never a panic); with `ignore_errors` they always
//! answer; and every cron schedule the exchange accepts is one the SQL macros evaluate, in
//! every time zone.

use proptest::prelude::*;
use tempfile::TempDir;

use crate::db::Db;
use crate::protocol::cron;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

/// YAML-ish text: structure, scalars of every kind, quotes, anchors, tags and breaks.
fn hostile_yaml() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("- ".to_owned()),
            Just(": ".to_owned()),
            Just(", ".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("\n".to_owned()),
            Just("\n  ".to_owned()),
            Just("---\n".to_owned()),
            Just("&a ".to_owned()),
            Just("*a".to_owned()),
            Just("!tag ".to_owned()),
            Just("'q'".to_owned()),
            Just("\"x\\u00e9\"".to_owned()),
            Just("2026-01-31T17:00:00Z".to_owned()),
            Just("2026-01-31".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("1.5e3".to_owned()),
            Just("-7".to_owned()),
            Just("{}".to_owned()),
            Just("[]".to_owned()),
            "[a-z]{1,6}",
            "\\PC{1,4}",
        ],
        0..48,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn read_yaml_auto_answers_or_errs_on_any_files(files in prop::collection::vec(hostile_yaml(), 1..4)) {
        let dir = TempDir::new().unwrap();
        let folder = dir.path().join("state=received");
        std::fs::create_dir_all(&folder).unwrap();
        for (i, text) in files.iter().enumerate() {
            std::fs::write(folder.join(format!("2026-01-01-{i:03}.messe-af.yaml")), text).unwrap();
        }
        let db = Db::open(dir.path()).unwrap();
        let glob = format!("{}/state=*/*.yaml", dir.path().display());
        // Either rows or an error: the process survives whatever the files hold.
        let _ = db.rows(&format!("SELECT * FROM read_yaml_auto('{glob}')"));
        let _ = db.rows("SELECT * FROM threads");
        let _ = db.rows("SELECT * FROM messages");
        let tolerant = db.rows(&format!(
            "SELECT count(*) FROM read_yaml_auto('{glob}', ignore_errors := true, allow_empty := true)"
        ));
        prop_assert!(tolerant.is_ok(), "{:?}", tolerant);
    }

}

proptest! {
    // Each case opens a read model (about half a second): fewer cases than the file test.
    #![proptest_config(ProptestConfig { cases: 24, ..config() })]

    #[test]
    fn every_accepted_schedule_evaluates(
        fields in prop::collection::vec(
            "\\*|[0-9]{1,2}|[0-9]{1,2}-[0-9]{1,2}|\\*/[0-9]{1,2}|[0-9]{1,2}-[0-9]{1,2}/[0-9]|(jan|Feb|mar|dec|sun|Mon|fri|sat)(-(sun|sat|dec|jun))?|[a-z]{1,4}",
            5..=5),
        zone in prop::sample::select(crate::protocol::tz::ZONES.iter().map(|(z, _)| *z).collect::<Vec<_>>()),
        hour in 0u32..24,
        minute in 0u32..60,
        day in 1u32..29,
    ) {
        let schedule = fields.join(" ");
        let db = Db::open(TempDir::new().unwrap().path()).unwrap();
        let at = format!("2026-03-{day:02}T{hour:02}:{minute:02}:00Z");
        let verdict = db.rows(&format!(
            "SELECT schedule_allows(schedule_fields('{schedule}'), local_time('{at}'::TIMESTAMPTZ, '{zone}')), \
                    available_at('schedule', '{schedule}', '{at}'::TIMESTAMPTZ, tz_name := '{zone}')"
        ));
        // Whatever the schedule, the macros answer: a bad one allows nothing, never an error.
        let verdict = verdict.map_err(|e| TestCaseError::fail(format!("{schedule}: {e}")))?;
        prop_assert!(verdict[0][1].is_some(), "{} in {} gave NULL", schedule, zone);
        if cron::check_schedule(&schedule).is_ok() {
            prop_assert!(verdict[0][0].is_some(), "{} in {} gave NULL", schedule, zone);
        }
    }
}
