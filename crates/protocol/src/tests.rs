//! Protocol tests: every spec example parses and round-trips, invalid messages fail naming the
//! field, every (status, status, actor) transition is pinned, and YAML writing is lossless.

use std::path::PathBuf;

use crate::emit;
use crate::envelope::{self, ConfirmState, Envelope, MessageDoc};
use crate::error::{ProtocolError, Refusal};
use crate::machine::{self, Actor, Step};
use crate::message::Message;
use crate::status::{State, Status};
use crate::time;
use crate::value::{Map, Value};
use crate::yaml::{self, Limits};

/// The repository, from the folder cargo runs the tests in. The folder compiled in is a
/// fallback only: a build shared by two checkouts (one target folder) names the one that
/// built it, which may be gone.
fn repo_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..")
}

fn fixtures(sub: &str) -> Vec<PathBuf> {
    let dir = repo_root().join("tests/fixtures").join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

/// Parses a document as a message (or a MESSE-AF message document) and checks that writing it
/// and reading it back gives the same message, and that nothing was lost on the way in.
fn round_trip(doc: Value, origin: &str) {
    let is_doc = doc.as_map().is_some_and(|m| m.contains_key("from"));
    let (typed, written) = if is_doc {
        let d = MessageDoc::from_value(doc.clone(), "").unwrap_or_else(|e| panic!("{origin}: {e}"));
        let v = d.to_value();
        let again = MessageDoc::from_value(reparse(&v), "").unwrap();
        assert_eq!(
            d, again,
            "{origin}: message document changed on the round trip"
        );
        (format!("{d:?}"), v)
    } else {
        let m = Message::from_value(doc.clone()).unwrap_or_else(|e| panic!("{origin}: {e}"));
        let v = m.to_value();
        let again = Message::from_value(reparse(&v)).unwrap();
        assert_eq!(m, again, "{origin}: message changed on the round trip");
        (format!("{m:?}"), v)
    };
    assert!(!typed.is_empty());
    if !is_doc {
        assert_eq!(
            strip_nulls(doc),
            written,
            "{origin}: parsing lost or changed fields"
        );
    }
}

fn reparse(v: &Value) -> Value {
    yaml::parse_document(&emit::to_yaml(v), &Limits::DEFAULT).unwrap()
}

/// Optional fields written as `key: null` are read as absent.
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Map(m) => Value::Map(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Seq(s) => Value::Seq(s.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

#[test]
fn every_spec_example_parses_and_round_trips() {
    let mut count = 0;
    let mut failures = Vec::new();
    for path in fixtures("messages/valid") {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let docs = match yaml::parse_documents(&text, &Limits::DEFAULT) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        for (i, doc) in docs.into_iter().enumerate().filter(|(_, d)| !d.is_null()) {
            let origin = format!("{name} document {}", i + 1);
            if let Err(e) = std::panic::catch_unwind(|| round_trip(doc, &origin)) {
                failures.push(e.downcast_ref::<String>().cloned().unwrap_or(origin));
            }
            count += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(count >= 60, "only {count} example messages");
}

/// One of the spec's example thread files: its documents, its envelope and its messages.
fn fixture_thread(name: &str) -> (Vec<Value>, Envelope, Vec<MessageDoc>) {
    let path = repo_root().join(format!("tests/fixtures/threads/{name}.messe-af.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let values: Vec<Value> = yaml::split_documents(&text)
        .iter()
        .map(|s| yaml::parse_document(&text[s.start..s.end], &Limits::DEFAULT).unwrap())
        .collect();
    let stored = Envelope::from_value(values[0].clone()).unwrap();
    let docs: Vec<MessageDoc> = values[1..]
        .iter()
        .map(|v| MessageDoc::from_value(v.clone(), "").unwrap())
        .collect();
    (values, stored, docs)
}

#[test]
fn spec_thread_files_parse_and_their_envelopes_match_their_messages() {
    for name in ["complete-example", "needs-input-example", "format-example"] {
        let (values, stored, docs) = fixture_thread(name);
        for (i, v) in values.iter().enumerate().skip(1) {
            round_trip(v.clone(), &format!("{name} document {}", i + 1));
        }
        let rebuilt = envelope::rebuild(&stored.thread_ref, Some(&stored), &docs).unwrap();
        assert!(
            !envelope::differs_in_state(&stored, &rebuilt),
            "{name}: replay disagrees\nstored: {stored:#?}\nrebuilt: {rebuilt:#?}"
        );
        let again = Envelope::from_value(reparse(&stored.to_value())).unwrap();
        assert_eq!(stored, again, "{name}: envelope round trip");
    }
}

#[test]
fn an_exchange_entry_written_late_is_the_same_state_and_a_lost_one_is_named() {
    let (_, mut stored, docs) = fixture_thread("complete-example");
    // A routing pass took its clock before a message arrived and wrote after it: its entry
    // comes last in the file though it is earlier than the message.
    let first = stored.history[0].at;
    stored.record(
        "dispatched",
        first,
        "exchange",
        Some("routed to a robot".into()),
    );
    let rebuilt = envelope::rebuild(&stored.thread_ref, Some(&stored), &docs).unwrap();
    assert_eq!(envelope::state_difference(&stored, &rebuilt), None);
    // A lost status entry is a difference, and the words say which entry.
    let mut lost = stored.clone();
    let at = lost
        .history
        .iter()
        .rposition(|h| h.action != "dispatched")
        .unwrap();
    let gone = lost.history.remove(at);
    let said = envelope::state_difference(&lost, &rebuilt).unwrap();
    assert!(said.contains(&gone.action), "{said}");
}

/// Runs one invalid input and returns the error text.
fn invalid(text: &str) -> String {
    match yaml::parse_documents(text, &Limits::DEFAULT) {
        Err(e) => ProtocolError::from(e).to_string(),
        Ok(docs) => {
            let errors: Vec<String> = docs
                .into_iter()
                .filter_map(|d| Message::from_value(d).err())
                .map(|e| e.to_string())
                .collect();
            assert!(!errors.is_empty(), "accepted invalid input:\n{text}");
            errors.join("; ")
        }
    }
}

#[test]
fn invalid_fixtures_fail_with_the_expected_message() {
    for path in fixtures("messages/invalid") {
        let text = std::fs::read_to_string(&path).unwrap();
        let expected = text
            .lines()
            .find_map(|l| l.strip_prefix("# error: "))
            .unwrap_or_else(|| panic!("{}: no `# error:` line", path.display()));
        let got = invalid(&text);
        assert!(
            got.contains(expected),
            "{}:\n  expected: {expected}\n  got: {got}",
            path.display()
        );
    }
}

#[test]
fn hostile_yaml_is_refused_with_a_clear_error() {
    let cases: Vec<(String, &str)> = vec![
        (
            "MESS:\n  - request:\n      intent: a\0b\n".into(),
            "NUL byte at line 3",
        ),
        (
            format!(
                "MESS:\n  - request:\n      intent: x\n      context:\n        - json: {}{}\n",
                "[".repeat(200),
                "]".repeat(200)
            ),
            "nesting deeper than 64 levels",
        ),
        (
            format!(
                "MESS:\n  - request:\n      intent: x\n      context:\n        - json: {}1{}\n",
                "{a: ".repeat(70),
                "}".repeat(70)
            ),
            "nesting deeper than 64 levels",
        ),
        (billion_laughs(), "too many alias expansions"),
        ("MESS: [\n".into(), "invalid YAML"),
        ("a: 1\na: 2\n".into(), "duplicate key"),
    ];
    for (text, expected) in cases {
        let got = invalid(&text);
        assert!(got.contains(expected), "expected {expected:?}, got {got:?}");
    }
}

#[test]
fn the_node_budget_counts_expanded_aliases() {
    let text = "a: &x [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: [*x, *x, *x, *x, *x]\n";
    let tight = Limits {
        max_depth: 64,
        max_nodes: 40,
        estimate_first: false,
    };
    let err = yaml::parse_document(text, &tight).unwrap_err();
    assert!(
        err.message
            .contains("more than 40 nodes after expanding aliases"),
        "{}",
        err.message
    );
    assert!(yaml::parse_document(text, &Limits::DEFAULT).is_ok());
}

fn billion_laughs() -> String {
    let mut s = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        s.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    s.push_str("MESS:\n  - request:\n      intent: *a8\n");
    s
}

#[test]
fn writing_yaml_keeps_every_tricky_string() {
    let strings = [
        "",
        " ",
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "n",
        "~",
        "null",
        "Null",
        "true",
        "False",
        "001",
        "0o17",
        "0x1F",
        "0b101",
        "1_000",
        "1e3",
        "-1",
        "+1",
        "1.0",
        ".5",
        "-.inf",
        ".NaN",
        "1:30",
        "12:30:00",
        "1.0.0",
        "2026-01-31",
        "2026-01-31T17:00:00-08:00",
        " leading",
        "trailing ",
        "a: b",
        "a:",
        ":a",
        "#x",
        "x #y",
        "x#y",
        "- x",
        "-x",
        "--- x",
        "---",
        "...",
        "? x",
        "@x",
        "`x",
        "%x",
        "!x",
        "&x",
        "*x",
        "|x",
        ">x",
        "[x",
        "{x",
        "x]",
        "x, y",
        "'q'",
        "\"q\"",
        "back\\slash",
        "tab\there",
        "bell\u{7}",
        "nel\u{85}",
        "ls\u{2028}",
        "bom\u{feff}",
        "ünïcödé ✓",
        "multi\nline",
        "multi\nline\n",
        "ends\n\n",
        "\nstarts",
        " indented\nsecond",
        "a\n  b\n",
        "trailing space \nx",
        "cr\r\nlf",
        "<<",
        "=",
        "Note: chicken expires tomorrow",
    ];
    for s in strings {
        let mut m = Map::new();
        m.insert("k", Value::str(s));
        m.insert(
            s,
            Value::Seq(vec![
                Value::str(s),
                Value::Map({
                    let mut inner = Map::new();
                    inner.insert("deep", Value::str(s));
                    inner
                }),
            ]),
        );
        let v = Value::Map(m);
        let text = emit::to_yaml(&v);
        let back = yaml::parse_document(&text, &Limits::DEFAULT)
            .unwrap_or_else(|e| panic!("{s:?}: {e}\n{text}"));
        assert_eq!(back, v, "{s:?} did not survive:\n{text}");
    }
    let numbers = Value::Seq(vec![
        Value::Int(0),
        Value::Int(-7),
        Value::Int(i64::MAX),
        Value::Float(1.0),
        Value::Float(-0.25),
        Value::Float(1e300),
        Value::Bool(true),
        Value::Null,
        Value::Seq(vec![]),
        Value::Map(Map::new()),
    ]);
    let back = yaml::parse_document(&emit::to_yaml(&numbers), &Limits::DEFAULT).unwrap();
    assert_eq!(back, numbers);
    assert!(
        matches!(back.as_seq().unwrap()[3], Value::Float(_)),
        "1.0 must stay a float"
    );
}

#[test]
fn timestamps_accept_yaml_forms_and_require_an_offset_on_input() {
    let ok = [
        ("2026-01-31T17:00:00-08:00", "2026-02-01T01:00:00Z"),
        ("2026-01-31T17:00:00Z", "2026-01-31T17:00:00Z"),
        ("2026-01-31t17:00:00z", "2026-01-31T17:00:00Z"),
        ("2026-01-31 17:00:00 -08:00", "2026-02-01T01:00:00Z"),
        ("2026-01-31T17:00:00.5+05:30", "2026-01-31T11:30:00.500Z"),
        ("2026-01-31T17:00:00-0800", "2026-02-01T01:00:00Z"),
        ("2026-01-31T17:00:00-8", "2026-02-01T01:00:00Z"),
        ("2026-01-31T17:00-08:00", "2026-02-01T01:00:00Z"),
    ];
    for (input, utc) in ok {
        let t = time::parse_timestamp(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(
            time::format_timestamp(&time::utc(t.to_utc())),
            utc,
            "{input}"
        );
    }
    for bad in [
        "2026-01-31T17:00:00",
        "2026-02-30T00:00:00Z",
        "tomorrow",
        "2026-01-31",
        "2026-01-31T25:00:00Z",
    ] {
        assert!(time::parse_timestamp(bad).is_err(), "{bad} accepted");
    }
    assert_eq!(
        time::format_timestamp(&time::parse_timestamp_lenient("2026-01-31 17:00:00").unwrap()),
        "2026-01-31T17:00:00Z"
    );
    let kept = time::parse_timestamp("2026-01-31T17:00:00.123456-08:00").unwrap();
    assert_eq!(
        time::format_timestamp(&kept),
        "2026-01-31T17:00:00.123-08:00",
        "offsets are kept"
    );
}

#[test]
fn durations_parse_iso_and_short_forms() {
    let secs = |s: &str| time::parse_any_duration(s).map(|d| d.length.num_seconds());
    assert_eq!(secs("PT45M"), Ok(2700));
    assert_eq!(secs("PT2H"), Ok(7200));
    assert_eq!(secs("P1D"), Ok(86400));
    assert_eq!(secs("P1W"), Ok(604_800));
    assert_eq!(secs("P1DT2H30M15S"), Ok(95415));
    assert_eq!(secs("PT0.5S").map(|_| ()), Ok(()));
    assert_eq!(secs("45m"), Ok(2700));
    assert_eq!(secs("2h15m"), Ok(8100));
    assert_eq!(secs("1d"), Ok(86400));
    assert_eq!(secs("P1M"), Ok(30 * 86400), "a month counts as 30 days");
    assert_eq!(secs("P1Y2M"), Ok(425 * 86400));
    for bad in [
        "P", "PT", "P1DT", "PT1H2", "PTH", "45", "banana", "PT1M1H", "1x", "P-1D", "P1D1Y",
    ] {
        assert!(time::parse_any_duration(bad).is_err(), "{bad} accepted");
    }
    assert!(
        time::parse_iso_duration("45m").is_err(),
        "the short form is not ISO 8601"
    );
}

/// Every status change each actor may make, written out by hand from the lifecycle rules (docs/protocol.md) and
/// the protocol's state machine. Rows are `from`; the list names the allowed `to` statuses.
fn allowed(actor: Actor, from: Status) -> Vec<Status> {
    use Status::*;
    let working = [
        InProgress,
        Waiting,
        Held,
        Retrying,
        NeedsInput,
        NeedsConfirmation,
    ];
    let finishing = [
        Completed, Partial, Failed, Declined, Cancelled, Superseded, Delegated,
    ];
    match (actor, from) {
        (_, Completed | Failed | Declined | Expired | Cancelled | Superseded | Delegated) => vec![],
        (Actor::Exchange, Pending) => vec![Failed, Expired, Cancelled],
        (Actor::Exchange, Waiting | Held) => vec![Expired],
        (Actor::Exchange, _) => vec![],
        (Actor::Requestor, Partial) => vec![],
        (Actor::Requestor, _) => vec![Cancelled],
        (Actor::Executor, Pending) => vec![Claimed],
        (Actor::Executor, _) => vec![],
        (Actor::Claimant, Pending) => vec![],
        (Actor::Claimant, Partial) => vec![Completed],
        (Actor::Claimant, Waiting | Held) => [&working[..], &finishing[..], &[Expired]].concat(),
        (Actor::Claimant, _) => [&working[..], &finishing[..]].concat(),
    }
}

#[test]
fn transition_table_covers_every_pair_and_actor() {
    let mut checked = 0;
    for actor in Actor::ALL {
        for from in Status::ALL {
            let expected = allowed(actor, from);
            for to in Status::ALL {
                let got = machine::check_transition("T", from, to, actor);
                assert_eq!(
                    got.is_ok(),
                    expected.contains(&to),
                    "{actor:?}: {from} -> {to}: {got:?}"
                );
                if let Err(e) = got {
                    assert!(
                        e.to_string().contains('T'),
                        "error must name the thread: {e}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 16 * 16);
}

#[test]
fn refusals_say_conflict_or_forbidden() {
    let kind = |r: Result<(), ProtocolError>| match r {
        Err(ProtocolError::Refused { kind, .. }) => Some(kind),
        _ => None,
    };
    assert_eq!(
        kind(machine::check_transition(
            "T",
            Status::Claimed,
            Status::Claimed,
            Actor::Executor
        )),
        Some(Refusal::Conflict)
    );
    assert_eq!(
        kind(machine::check_transition(
            "T",
            Status::Claimed,
            Status::Completed,
            Actor::Executor
        )),
        Some(Refusal::Forbidden)
    );
    assert_eq!(
        kind(machine::check_transition(
            "T",
            Status::Pending,
            Status::Completed,
            Actor::Requestor
        )),
        Some(Refusal::Forbidden)
    );
    assert_eq!(
        kind(machine::check_transition(
            "T",
            Status::Completed,
            Status::Failed,
            Actor::Claimant
        )),
        Some(Refusal::Conflict)
    );
}

#[test]
fn confirmation_gate_follows_v1_1() {
    use ConfirmState::*;
    let ok = |before: bool, state: Option<ConfirmState>, step: Step| {
        machine::check_confirmation("T", before, state, step).is_ok()
    };
    for step in [
        Step::Response,
        Step::Status(Status::InProgress),
        Step::Status(Status::Completed),
        Step::Status(Status::Partial),
    ] {
        assert!(!ok(true, None, step), "{step:?} before asking");
        assert!(!ok(true, Some(Requested), step), "{step:?} while asked");
        assert!(ok(true, Some(Confirmed), step), "{step:?} after confirm");
        assert!(ok(false, None, step), "{step:?} without confirm_before");
        assert!(!ok(false, Some(Rejected), step), "{step:?} after refusal");
    }
    for step in [
        Step::Status(Status::NeedsConfirmation),
        Step::Status(Status::Held),
        Step::Status(Status::Failed),
        Step::Status(Status::Declined),
    ] {
        assert!(
            ok(true, None, step),
            "{step:?} is allowed before confirmation"
        );
    }
    assert!(ok(true, Some(Rejected), Step::Status(Status::Cancelled)));
    assert!(ok(true, Some(Rejected), Step::Status(Status::Held)));
    assert!(!ok(true, Some(Rejected), Step::Status(Status::Failed)));
    assert!(
        !ok(false, None, Step::Status(Status::Cancelled)),
        "executors cancel only after a refusal"
    );
    let reply = |status, state, answers, confirms| {
        machine::check_reply("T", status, state, answers, confirms).map_err(|e| e.to_string())
    };
    assert!(
        reply(Status::InProgress, None, false, true).is_err(),
        "confirm with nothing asked"
    );
    assert!(reply(Status::NeedsConfirmation, Some(Requested), false, true).is_ok());
    assert!(reply(Status::Held, Some(Rejected), false, true).is_ok());
    assert!(reply(Status::Completed, None, false, false).is_err());
    assert!(
        reply(Status::Partial, None, false, false).is_ok(),
        "a reply that answers nothing (an acceptance) still reaches partial work"
    );
    // Answers to finished work are refused alike, whether it completed or delivered a part.
    let completed = reply(Status::Completed, None, true, false).unwrap_err();
    let partial = reply(Status::Partial, None, true, false).unwrap_err();
    assert!(completed.starts_with("cannot reply to T: it is completed, which is final"));
    assert!(
        partial.starts_with("cannot reply to T: it is partial, which is final"),
        "{partial}"
    );
    assert!(reply(Status::Partial, Some(Requested), false, true).is_err());
    // A second confirmation says it was given, not that none was asked for.
    let again = reply(Status::InProgress, Some(Confirmed), false, true).unwrap_err();
    assert_eq!(
        again,
        "cannot confirm T: it was already confirmed (it is in_progress)"
    );
}

#[test]
fn statuses_map_to_the_messe_af_folders() {
    let expect = [
        (State::Received, "pending"),
        (
            State::Executing,
            "claimed in_progress waiting held retrying needs_input needs_confirmation",
        ),
        (State::Finished, "completed partial"),
        (
            State::Canceled,
            "failed declined expired cancelled superseded delegated",
        ),
    ];
    let mut seen = 0;
    for (state, words) in expect {
        for w in words.split(' ') {
            assert_eq!(Status::parse(w).unwrap().state(), state, "{w}");
            seen += 1;
        }
    }
    assert_eq!(seen, Status::ALL.len());
    assert_eq!(Status::parse("received"), Some(Status::Pending));
    assert_eq!(Status::parse("done"), None);
}

#[test]
fn unknown_fields_and_payloads_survive() {
    let text = "MESS:\n  - v: 1.1.0\n  - request:\n      intent: x\n      shiny: {a: [1, 2]}\n      constraints:\n        depends_on: [a]\n        mood: calm\n  - review:\n      re: x\n      rating: 5\n";
    let v = yaml::parse_document(text, &Limits::DEFAULT).unwrap();
    let m = Message::from_value(v.clone()).unwrap();
    assert_eq!(m.to_value(), v);
    let out = emit::to_yaml(&m.to_value());
    assert!(
        out.contains("shiny:") && out.contains("mood: calm") && out.contains("review:"),
        "{out}"
    );
}

#[test]
fn split_documents_finds_markers_only_at_line_starts() {
    let text = "a: 1\n---\nb: \"--- not a marker\"\nc: |\n  ---\n---  \nd: 1\n...\n--- e\n";
    let spans = yaml::split_documents(text);
    let docs: Vec<&str> = spans.iter().map(|s| &text[s.start..s.end]).collect();
    assert_eq!(docs.len(), 4, "{docs:?}");
    assert!(docs[1].contains("not a marker") && docs[1].contains("c: |"));
    assert_eq!(yaml::split_documents("---\na: 1\n").len(), 1);
    assert_eq!(
        yaml::split_documents("# only a comment\n---\na: 1\n").len(),
        1
    );
}

#[test]
fn real_timestamps_stay_plain_and_broken_ones_are_quoted() {
    let line = |s: &str| emit::to_yaml(&Value::str(s));
    assert_eq!(
        line("2026-01-31T17:00:00-08:00"),
        "2026-01-31T17:00:00-08:00\n"
    );
    assert_eq!(line("2026-01-31"), "2026-01-31\n");
    assert_eq!(line("2026-13-45"), "\"2026-13-45\"\n");
    assert_eq!(line("2026-01-31T99:00:00Z"), "\"2026-01-31T99:00:00Z\"\n");
}

#[test]
fn refs_and_other_date_prefixed_text_stay_plain() {
    for s in [
        "2026-02-01-002",
        "2026-01-31-1000",
        "2026-1-5",
        "2026-01-31 notes",
    ] {
        assert_eq!(emit::to_yaml(&Value::str(s)), format!("{s}\n"), "{s}");
    }
}

#[test]
fn absurd_flow_nesting_is_refused_before_parsing() {
    let text = format!(
        "MESS: [{{request: {{intent: x, extra: {}{}}}}}]",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let started = std::time::Instant::now();
    let err = yaml::parse_documents(&text, &Limits::DEFAULT).unwrap_err();
    assert!(
        err.message.contains("nesting deeper than 1000 brackets"),
        "{}",
        err.message
    );
    assert!(started.elapsed().as_secs() < 2, "refused quickly");
    let quoted = format!(
        "MESS:\n  - request:\n      intent: \"{}\"\n",
        "[".repeat(5000)
    );
    assert!(
        yaml::parse_documents(&quoted, &Limits::DEFAULT).is_ok(),
        "brackets in quotes do not count"
    );
    let err = invalid(&format!(
        "MESS:\n  - request:\n      intent: x\n      extra: {}1{}\n",
        "[".repeat(900),
        "]".repeat(900)
    ));
    assert!(err.len() < 400, "long paths are shortened: {err}");
}

#[test]
fn schedules_take_month_and_day_names_and_refuse_other_dialects() {
    use crate::cron::check_schedule;
    for ok in [
        "0 8-22 * * *",
        "0 8-22 * * mon-fri",
        "0 8-22 * * MON-FRI",
        "*/30 9-17 1,15 jan-mar,Dec sun",
        "0-29 * * * fri-sun",
        "0 8 * * sat,sun",
        "5,35 * 13 * fri",
    ] {
        assert_eq!(check_schedule(ok), Ok(()), "{ok}");
    }
    for (bad, why) in [
        (
            "0 8 * * monday",
            "day of week field \"monday\": \"monday\" is not a name",
        ),
        ("0 8 jan * *", "day of month field \"jan\""),
        ("0 8 * * 1#2", "day of week field \"1#2\""),
        ("0 8 ? * *", "day of month field \"?\""),
        ("@daily", "has 1 field(s)"),
        ("0 8 * dec-jan *", "the range 12-1 runs backwards"),
        ("0 8 * * sun-sat/0", "a step must be at least 1"),
    ] {
        let e = check_schedule(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn time_zones_are_known_iana_names_in_their_exact_spelling() {
    use crate::tz::{self, ZONES};
    assert!(
        ZONES.windows(2).all(|w| w[0].0 < w[1].0),
        "sorted and unique, as rule() searches"
    );
    assert_eq!(
        tz::rule("Europe/Berlin"),
        Some("CET-1CEST,M3.5.0,M10.5.0/3")
    );
    assert_eq!(tz::rule("UTC"), Some("UTC0"));
    assert_eq!(tz::check_timezone("America/New_York"), Ok(()));
    let e = tz::check_timezone("europe/berlin").unwrap_err();
    assert!(e.contains("did you mean \"Europe/Berlin\""), "{e}");
    let e = tz::check_timezone("Mars/Olympus_Mons").unwrap_err();
    assert!(e.contains("not a known IANA time zone"), "{e}");
    assert!(tz::check_timezone("").is_err());
}

#[test]
fn executor_entries_name_the_field_of_a_bad_zone_or_area() {
    use crate::config::ExecutorSpec;
    let check = |body: &str| -> Result<(), String> {
        let value = yaml::parse_document(body, &Limits::DEFAULT).unwrap();
        ExecutorSpec::from_entry("arm", value, "executors.arm")
            .and_then(|e| e.check("executor arm"))
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        check(
            "capabilities: [x]\navailability: schedule\nschedule: '0 8-22 * * mon-fri'\ntimezone: Europe/Berlin\naccess: [home/kitchen]\nlocation: {lat: 37.97, lng: -122.56, radius_km: 5}\nenvironment: [indoor]\n"
        ),
        Ok(())
    );
    assert_eq!(check("capabilities: [x]\nlocation: home\n"), Ok(()));
    for (body, want) in [
        (
            "timezone: Europe/Berln\n",
            "executor arm.timezone: \"Europe/Berln\" is not a known IANA time zone",
        ),
        ("timezone: 5\n", "executors.arm.timezone: expected a string"),
        (
            "location: {lat: 91, lng: 0}\n",
            "executor arm.location: lat 91 is outside -90..90",
        ),
        (
            "location: {lat: 1}\n",
            "executor arm.location: an area needs lng",
        ),
        (
            "location: {lat: 1, lng: 2, radius_km: -1}\n",
            "executor arm.location: radius_km -1 is negative",
        ),
        (
            "location: {lat: north, lng: 2}\n",
            "executor arm.location: lat must be a number",
        ),
        (
            "location: [1, 2]\n",
            "executor arm.location: expected a place (text) or an area",
        ),
        (
            "access: {home: yes}\n",
            "executors.arm.access: expected a list",
        ),
        (
            "environment: [{x: 1}]\n",
            "executors.arm.environment[0]: expected a string",
        ),
    ] {
        let e = check(body).unwrap_err();
        assert!(e.starts_with(want), "{body}: {e}");
    }
}

#[test]
fn the_capability_rule_gives_the_known_answers() {
    use crate::route::{Candidate, KNOWN_ANSWERS, by_capability, dispatched_note};
    for (executors, requires, want) in KNOWN_ANSWERS {
        let candidates: Vec<Candidate<'_>> = executors
            .iter()
            .map(|(id, caps, on_demand, load)| Candidate {
                id,
                capabilities: caps.to_vec(),
                on_demand: *on_demand,
                load: *load,
            })
            .collect();
        let requires: Vec<String> = requires.iter().map(|r| (*r).to_owned()).collect();
        let routed = by_capability(&requires, &candidates);
        let got = (!routed.is_empty()).then(|| dispatched_note(&routed));
        assert_eq!(got.as_deref(), *want, "{executors:?} {requires:?}");
    }
}
