//! Property tests of the protocol layer (proptest, seeded by proptest's own persistence, a
//! bounded number of cases): the parser never panics and never lets a text's parser events
//! outgrow the pre-parse estimate, values survive a write and a read, the validators accept
//! exactly their documented forms, and message reading never panics on hostile shapes.

use proptest::prelude::*;

use crate::emit;
use crate::message::Message;
use crate::value::{Map, Value};
use crate::yaml::{self, Limits};
use crate::{cron, ids};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

/// Scalars as YAML and JSON both carry them (floats finite: YAML has no literal for NaN that
/// every reader agrees on).
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        (-1.0e12f64..1.0e12).prop_map(Value::Float),
        "[ -~]{0,12}".prop_map(Value::String),
        "\\PC{0,8}".prop_map(Value::String),
    ]
}

/// Value trees a few levels deep, with short keys that may repeat across levels.
fn tree() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Seq),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..6).prop_map(|m| {
                let mut map = Map::new();
                for (k, v) in m {
                    map.insert(k, v);
                }
                Value::Map(map)
            }),
        ]
    })
}

/// The parser events a tree costs: one per scalar, two per collection (start and end).
fn events(v: &Value) -> usize {
    match v {
        Value::Seq(items) => 2 + items.iter().map(events).sum::<usize>(),
        Value::Map(m) => 2 + m.iter().map(|(_, v)| 1 + events(v)).sum::<usize>(),
        _ => 1,
    }
}

/// YAML-ish text: the structural characters, words, quotes and breaks in any order.
fn structural_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("- ".to_owned()),
            Just(": ".to_owned()),
            Just(":".to_owned()),
            Just(", ".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("\n".to_owned()),
            Just("\n  ".to_owned()),
            Just("? ".to_owned()),
            Just("&a ".to_owned()),
            Just("*a".to_owned()),
            Just("'".to_owned()),
            Just("\"".to_owned()),
            Just(" # c".to_owned()),
            Just("\r".to_owned()),
            Just("\r\n".to_owned()),
            Just("\u{85}".to_owned()),
            Just("\u{2028}".to_owned()),
            Just("\u{2029}".to_owned()),
            Just("-".to_owned()),
            Just("?".to_owned()),
            Just("---\n".to_owned()),
            Just("|\n  ".to_owned()),
            "[a-z0-9]{1,4}",
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_tree_reads_back_as_written(v in tree()) {
        let text = emit::to_yaml(&v);
        let back = yaml::parse_document(&text, &Limits::DEFAULT)
            .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert_eq!(back, v, "{}", text);
    }

    #[test]
    fn the_estimate_bounds_the_events_of_block_and_flow_text(v in tree()) {
        for text in [emit::to_yaml(&v), serde_json::to_string(&v).unwrap_or_default()] {
            let parsed = yaml::parse_document(&text, &Limits::DEFAULT)
                .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            prop_assert!(
                events(&parsed) + 4 <= yaml::estimate_events(&text),
                "{} events, estimate {}: {}", events(&parsed) + 4, yaml::estimate_events(&text), text
            );
        }
    }

    #[test]
    fn the_estimate_bounds_whatever_parses(text in structural_text()) {
        // Whatever the parser accepts, the estimate was at least its events (aliases are
        // replayed, not buffered, so their expansion is the node budget's business).
        if !text.contains('*')
            && let Some(total) = yaml::count_events(&text)
        {
            prop_assert!(total <= yaml::estimate_events(&text), "{} > {}: {:?}", total, yaml::estimate_events(&text), text);
        }
    }

    #[test]
    fn hostile_text_never_panics_the_parser_or_the_reader(text in "\\PC{0,200}", structural in structural_text()) {
        for t in [&text, &structural] {
            if let Ok(docs) = yaml::parse_documents(t, &Limits::message(t.len())) {
                for d in docs {
                    let _ = Message::from_value(d);
                }
            }
        }
    }

    #[test]
    fn messages_of_any_shape_are_read_or_refused_without_panicking(v in tree(), kind in "request|status|response|reply|cancel|query|config|suggestion|ack|v") {
        let mut payload = Map::new();
        payload.insert(kind, v);
        let mut m = Map::new();
        m.insert("MESS", Value::Seq(vec![Value::Map(payload)]));
        let _ = Message::from_value(Value::Map(m));
    }

    #[test]
    fn capability_ids_are_exactly_the_documented_set(id in "\\PC{0,20}|[A-Za-z0-9][A-Za-z0-9._:/+-]{0,140}") {
        let documented = !id.is_empty()
            && id.len() <= 128
            && id.starts_with(|c: char| c.is_ascii_alphanumeric())
            && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/+".contains(c));
        prop_assert_eq!(ids::check_capability_id(&id).is_ok(), documented, "{:?}", id);
    }

    #[test]
    fn cron_fields_are_accepted_only_within_range(
        minute in "\\*|[0-9]{1,2}|[0-9]{1,2}-[0-9]{1,2}|\\*/[0-9]{1,2}",
        hour in "\\*|[0-9]{1,2}|[0-9]{1,2}-[0-9]{1,2}(/[0-9])?|\\*/[0-9]",
        rest in "(\\*|[0-9]{1,2}) (\\*|[0-9]{1,2}) (\\*|[0-9])",
    ) {
        let schedule = format!("{minute} {hour} {rest}");
        let numbers = |f: &str| -> Vec<u32> {
            f.split(['-', '/']).filter_map(|n| n.parse().ok()).collect()
        };
        let accepted = cron::check_schedule(&schedule).is_ok();
        if accepted {
            // Every plain number of the minute and hour fields is inside its field.
            prop_assert!(numbers(&minute).iter().all(|n| *n <= 59), "{}", schedule);
            let hour_numbers = numbers(&hour);
            let step = hour.split_once('/').map(|(_, s)| s);
            prop_assert!(step.is_none_or(|s| s != "0"), "{}", schedule);
            prop_assert!(hour_numbers.iter().all(|n| *n <= 23), "{}", schedule);
        }
    }
}

#[test]
fn line_breaks_of_every_kind_count() {
    for text in [
        "?\u{85}".repeat(1000),
        "-\u{85}".repeat(1000),
        "-\u{2028}".repeat(1000),
        "- a\r".repeat(1000),
    ] {
        if let Some(events) = yaml::count_events(&text) {
            assert!(
                events <= yaml::estimate_events(&text),
                "{events} > {}",
                yaml::estimate_events(&text)
            );
        }
        assert!(yaml::estimate_events(&text) >= 2000, "{:?}", &text[..12]);
    }
}

#[test]
fn a_flow_sequence_of_millions_is_refused_before_the_parser_runs() {
    let text = format!("[{}]", vec!["1"; 2_000_000].join(","));
    let limits = Limits::message(text.len());
    let err = yaml::parse_documents(&text, &limits).unwrap_err();
    assert!(err.message.contains("too many values"), "{}", err.message);
    // A data URI of the same size is one value.
    let uri = format!(
        "context:\n  - file: data:text/plain;base64,{}\n",
        "A".repeat(4_000_000)
    );
    assert!(yaml::parse_documents(&uri, &Limits::message(uri.len())).is_ok());
}
