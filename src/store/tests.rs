//! The files backend's own suite, on real files: thread files moved between folders, hand
//! edits, torn documents, duplicate copies, fsck, temp files, ref allocation, indexes, the
//! archive, and concurrent writers. The contract-level suites (exchange, mail, outbox, ledger,
//! short links) run on both backends: see `store::testing`.

use std::fs;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use tempfile::TempDir;

use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status};
use crate::protocol::time;
use crate::protocol::yaml::{self, Limits};
use crate::store::layout::Location;
use crate::store::{Edit, IndexKey, Store};

fn doc(from: &str, at: &str, mess: &str) -> MessageDoc {
    let v = yaml::parse_document(mess, &Limits::DEFAULT).unwrap();
    MessageDoc {
        from: from.into(),
        received: time::parse_timestamp(at).unwrap(),
        channel: Some("cli".into()),
        message: Message::from_value(v).unwrap(),
        extra: Default::default(),
    }
}

fn new_thread(store: &Store, r: &str) -> ThreadRef {
    let thread = ThreadRef::parse(r).unwrap();
    let d = doc(
        "agent",
        "2026-01-31T17:00:00Z",
        "MESS:\n  - request:\n      intent: check the fridge\n",
    );
    let Payload::Request(req) = &d.message.payloads[0] else {
        unreachable!()
    };
    let env = Envelope::create(thread.clone(), req, &d, vec![]);
    store.create(&env, &[d]).unwrap();
    store
        .remember("agent", &[(IndexKey::Last, &thread)])
        .unwrap();
    thread
}

/// Appends a status from `who` through the store, the way the exchange does.
fn report(store: &Store, thread: &ThreadRef, who: &str, at: &str, code: &str) {
    let d = doc(
        who,
        at,
        &format!("MESS:\n  - status:\n      re: {thread}\n      code: {code}\n"),
    );
    store
        .modify(thread, |t| -> Result<_, crate::store::error::StoreError> {
            let mut envelope = t.envelope.clone();
            envelope.apply(&d);
            Ok((
                Some(Edit {
                    envelope,
                    append: vec![d.clone()],
                    deliveries: Vec::new(),
                }),
                (),
            ))
        })
        .unwrap();
}

fn home() -> (TempDir, Store) {
    let dir = TempDir::new().unwrap();
    let store = Store::open(dir.path());
    store.init().unwrap();
    (dir, store)
}

fn path(store: &Store, state: State, r: &str) -> PathBuf {
    store
        .layout()
        .thread_path(&Location::State(state), &ThreadRef::parse(r).unwrap())
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_status_change_moves_the_file_and_leaves_one_copy() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    assert!(path(&store, State::Received, "2026-01-31-001").exists());
    report(&store, &t, "robot", "2026-01-31T17:01:00Z", "claimed");
    assert!(!path(&store, State::Received, "2026-01-31-001").exists());
    let text = fs::read_to_string(path(&store, State::Executing, "2026-01-31-001")).unwrap();
    assert!(text.starts_with("ref: 2026-01-31-001\n") && text.contains("status: claimed"));
    report(&store, &t, "robot", "2026-01-31T17:02:00Z", "completed");
    assert_eq!(store.find(&t).unwrap().len(), 1);
    assert_eq!(
        store.read(&t).unwrap().location,
        Location::State(State::Finished)
    );
    assert_eq!(store.read(&t).unwrap().messages().unwrap().len(), 3);
    for s in State::ALL {
        assert!(
            names(&store.layout().state_dir(s))
                .iter()
                .all(|n| !n.starts_with('.')),
            "no temp files left"
        );
    }
    assert!(
        store
            .create(&store.read(&t).unwrap().envelope, &[])
            .is_err(),
        "a ref is created once"
    );
}

#[test]
fn earlier_messages_keep_their_exact_bytes() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    // Another writer's message with comments and its own layout, appended by hand.
    let mut text = fs::read_to_string(&p).unwrap();
    text.push_str("---\n# hand-written\nfrom: agent\nreceived: 2026-01-31 17:00:30 +01:00\nMESS: [{reply: {re: last, reason: 'see note'}}]\n");
    fs::write(&p, &text).unwrap();
    report(&store, &t, "robot", "2026-01-31T17:01:00Z", "claimed");
    let after = store.read(&t).unwrap();
    assert!(after.text().contains("---\n# hand-written\nfrom: agent\nreceived: 2026-01-31 17:00:30 +01:00\nMESS: [{reply: {re: last, reason: 'see note'}}]\n---\n"));
}

#[test]
fn duplicates_after_an_interrupted_move_resolve_to_the_newer_copy() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let old = fs::read_to_string(path(&store, State::Received, "2026-01-31-001")).unwrap();
    report(&store, &t, "robot", "2026-01-31T17:01:00Z", "claimed");
    // The move wrote the new copy; the old one survived a crash before its unlink.
    fs::write(path(&store, State::Received, "2026-01-31-001"), &old).unwrap();
    assert_eq!(store.find(&t).unwrap().len(), 2);
    assert_eq!(store.read(&t).unwrap().envelope.status, Status::Claimed);
    assert_eq!(store.envelope(&t).unwrap().0.status, Status::Claimed);
    let report_ = store.fsck(false, &mut |_, _| {}).unwrap();
    assert_eq!(report_.unrepaired(), 1, "{:?}", report_.findings);
    assert!(report_.findings[0].problem.contains("duplicate copy"));
    let fixed = store.fsck(true, &mut |_, _| {}).unwrap();
    assert_eq!(fixed.unrepaired(), 0);
    assert_eq!(store.find(&t).unwrap().len(), 1);
    assert_eq!(store.fsck(false, &mut |_, _| {}).unwrap().findings.len(), 0);
}

#[test]
fn a_torn_last_document_is_refused_then_repaired_by_fsck() {
    let (d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    let good = fs::read_to_string(&p).unwrap();
    fs::write(&p, format!("{good}---\nfrom: robot\nreceived: 2026-01-31T17:01:00Z\nMESS:\n  - status:\n      re: 2026-01-31-001\n      co")).unwrap();
    let err = store
        .modify(
            &t,
            |_| -> Result<(Option<Edit>, ()), crate::store::error::StoreError> { Ok((None, ())) },
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("the last document is incomplete"),
        "{err}"
    );
    let r = store.fsck(true, &mut |_, _| {}).unwrap();
    assert!(
        r.findings
            .iter()
            .any(|f| f.problem.starts_with("torn last document") && f.repaired),
        "{:?}",
        r.findings
    );
    assert_eq!(fs::read_to_string(&p).unwrap(), good);
    let quarantined = names(&d.path().join(".mess/quarantine"));
    assert_eq!(quarantined, vec!["2026-01-31-001.1.yaml"]);
    report(&store, &t, "robot", "2026-01-31T17:02:00Z", "claimed");
}

#[test]
fn fsck_rebuilds_a_stale_envelope_and_moves_the_file() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    // A writer that appends with `cat >>` and dies before updating the envelope.
    let mut text = fs::read_to_string(&p).unwrap();
    text.push_str("---\nfrom: robot\nreceived: 2026-01-31T17:01:00Z\nchannel: webhook\nMESS:\n  - status:\n      re: 2026-01-31-001\n      code: claimed\n      estimate: PT5M\n");
    fs::write(&p, text).unwrap();
    let r = store.fsck(false, &mut |_, _| {}).unwrap();
    let problems: Vec<&str> = r.findings.iter().map(|f| f.problem.as_str()).collect();
    assert!(
        problems.iter().any(|p| p.contains("envelope out of date")
            && p.contains("says pending, messages say claimed")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("claimed thread is in state=received, expected state=executing")),
        "{problems:?}"
    );
    store.fsck(true, &mut |_, _| {}).unwrap();
    let fixed = store.read(&t).unwrap();
    assert_eq!(fixed.location, Location::State(State::Executing));
    assert_eq!(fixed.envelope.status, Status::Claimed);
    assert_eq!(fixed.envelope.executor.as_deref(), Some("robot"));
    assert_eq!(fixed.envelope.estimate.as_deref(), Some("PT5M"));
    assert!(fixed.envelope.history.iter().any(|h| h.action == "claimed"));
    assert!(
        store
            .fsck(false, &mut |_, _| {})
            .unwrap()
            .findings
            .is_empty()
    );
}

#[test]
fn fsck_removes_abandoned_temp_files_and_rebuilds_indexes() {
    let (d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    store
        .remember("agent", &[(IndexKey::ClientId("fridge"), &t)])
        .unwrap();
    let tmp = store
        .layout()
        .state_dir(State::Received)
        .join(".2026-01-31-001.messe-af.yaml.tmp-123-456");
    fs::write(&tmp, "partial").unwrap();
    fs::remove_dir_all(d.path().join(".mess/index")).unwrap();
    let r = store.fsck(false, &mut |_, _| {}).unwrap();
    assert_eq!(r.unrepaired(), 2, "{:?}", r.findings);
    store.fsck(true, &mut |_, _| {}).unwrap();
    assert!(!tmp.exists());
    assert_eq!(store.lookup("agent", IndexKey::Last).unwrap(), Some(t));
}

#[test]
fn refs_count_up_per_day_and_never_reuse_a_file_on_disk() {
    let (d, store) = home();
    let day = NaiveDate::from_ymd_opt(2026, 1, 31).unwrap();
    let got: Vec<String> = store
        .allocate_refs(day, 3)
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, ["2026-01-31-001", "2026-01-31-002", "2026-01-31-003"]);
    // A lost counter restarts after the highest serial on disk, archive included.
    let archived = d.path().join("archive/2026-01");
    fs::create_dir_all(&archived).unwrap();
    fs::write(archived.join("2026-01-31-007.messe-af.yaml"), "x").unwrap();
    fs::remove_file(d.path().join(".mess/refs/2026-01-31")).unwrap();
    assert_eq!(
        store.allocate_refs(day, 1).unwrap()[0].as_str(),
        "2026-01-31-008"
    );
    // A counter that lags behind the files skips refs that exist.
    fs::write(d.path().join(".mess/refs/2026-01-31"), "2\n").unwrap();
    fs::write(path(&store, State::Finished, "2026-01-31-003"), "x").unwrap();
    assert_eq!(
        store
            .allocate_refs(day, 2)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["2026-01-31-004", "2026-01-31-005"]
    );
    let big = store
        .allocate_refs(NaiveDate::from_ymd_opt(2026, 2, 1).unwrap(), 1000)
        .unwrap();
    assert_eq!(
        big.last().unwrap().as_str(),
        "2026-02-01-1000",
        "serials grow past three digits"
    );
    // A new day starts without listing folders, and still skips a file placed by hand.
    fs::write(path(&store, State::Received, "2026-02-02-001"), "x").unwrap();
    let next_day = NaiveDate::from_ymd_opt(2026, 2, 2).unwrap();
    assert_eq!(
        store.allocate_refs(next_day, 1).unwrap()[0].as_str(),
        "2026-02-02-002"
    );
}

#[test]
fn the_archive_keeps_threads_findable() {
    let (d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let fresh = new_thread(&store, "2026-01-31-002");
    for r in [&t, &fresh] {
        report(&store, r, "robot", "2026-01-31T17:01:00Z", "claimed");
    }
    report(&store, &t, "robot", "2026-01-31T17:02:00Z", "completed");
    report(
        &store,
        &fresh,
        "robot",
        "2026-03-01T00:00:00Z",
        "failed\n      reason: broke",
    );
    let cutoff = time::parse_timestamp("2026-02-15T00:00:00Z").unwrap();
    let rep = store.archive(cutoff, &mut |_, _| {});
    assert_eq!(rep.moved, vec![(t.clone(), "2026-01".to_owned())]);
    assert!(
        d.path()
            .join("archive/2026-01/2026-01-31-001.messe-af.yaml")
            .exists()
    );
    assert_eq!(
        store.read(&t).unwrap().location,
        Location::Archive("2026-01".into())
    );
    let (listed, _) = store.list(&State::ALL, true);
    assert_eq!(listed.len(), 2);
    assert!(
        store
            .fsck(false, &mut |_, _| {})
            .unwrap()
            .findings
            .is_empty()
    );
}

#[test]
fn the_spec_example_threads_are_read_as_written() {
    let (d, store) = home();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/threads");
    for (name, state) in [
        ("complete-example", State::Finished),
        ("needs-input-example", State::Executing),
    ] {
        let text = fs::read_to_string(fixtures.join(format!("{name}.messe-af.yaml"))).unwrap();
        let env = Envelope::from_value(
            yaml::parse_document(&text[..text.find("\n---").unwrap()], &Limits::DEFAULT).unwrap(),
        )
        .unwrap();
        fs::write(
            store
                .layout()
                .state_dir(state)
                .join(format!("{}.messe-af.yaml", env.thread_ref)),
            &text,
        )
        .unwrap();
    }
    let r = store.fsck(false, &mut |_, _| {}).unwrap();
    assert_eq!(r.threads, 2);
    let problems: Vec<&str> = r.findings.iter().map(|f| f.problem.as_str()).collect();
    assert_eq!(
        problems,
        ["1 index entries (client ids, `last`, suggestions, dependencies) missing or stale"],
        "files copied in by hand have no index entries yet"
    );
    store.fsck(true, &mut |_, _| {}).unwrap();
    assert!(
        store
            .fsck(false, &mut |_, _| {})
            .unwrap()
            .findings
            .is_empty()
    );
    let t = ThreadRef::parse("2026-01-31-002").unwrap();
    assert_eq!(store.envelope(&t).unwrap().0.status, Status::InProgress);
    assert_eq!(store.read(&t).unwrap().messages().unwrap().len(), 5);
    let _ = d;
}

#[test]
fn envelopes_are_read_without_reading_large_messages() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    let mut text = fs::read_to_string(&p).unwrap();
    text.push_str(&format!("---\nfrom: agent\nreceived: 2026-01-31T17:00:30Z\nMESS:\n  - reply:\n      re: last\n      context:\n        - image: data:image/png;base64,{}\n", "A".repeat(3_000_000)));
    fs::write(&p, text).unwrap();
    let env = crate::store::read_envelope_file(&p).unwrap().unwrap();
    assert_eq!(env.thread_ref, t);
}

#[test]
fn concurrent_writers_in_one_process_lose_nothing() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    report(&store, &t, "robot", "2026-01-31T17:01:00Z", "claimed");
    std::thread::scope(|s| {
        for i in 0..8 {
            let (store, t) = (store.clone(), t.clone());
            s.spawn(move || {
                for j in 0..5 {
                    report(
                        &store,
                        &t,
                        "robot",
                        &format!("2026-01-31T17:{:02}:{:02}Z", 10 + i, j),
                        "in_progress",
                    );
                }
            });
        }
    });
    assert_eq!(store.read(&t).unwrap().messages().unwrap().len(), 2 + 40);
}

#[test]
fn a_later_updated_written_by_another_tool_is_not_a_problem() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    let text = fs::read_to_string(&p).unwrap().replace(
        "updated: 2026-01-31T17:00:00Z",
        "updated: 2026-01-31T18:00:00Z",
    );
    fs::write(&p, text).unwrap();
    assert!(
        store
            .fsck(false, &mut |_, _| {})
            .unwrap()
            .findings
            .is_empty()
    );
    assert_eq!(
        store.envelope(&t).unwrap().0.updated,
        time::parse_timestamp("2026-01-31T18:00:00Z").unwrap()
    );
}

#[test]
fn listings_show_a_thread_once_even_with_a_stale_copy() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let old = fs::read_to_string(path(&store, State::Received, "2026-01-31-001")).unwrap();
    report(&store, &t, "robot", "2026-01-31T17:01:00Z", "claimed");
    fs::write(path(&store, State::Received, "2026-01-31-001"), &old).unwrap();
    let (all, errors) = store.list(&State::ALL, true);
    assert!(errors.is_empty());
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0.status, Status::Claimed);
}

#[test]
fn a_claim_in_the_same_instant_as_the_dispatch_is_not_a_problem() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    store
        .modify(&t, |f| -> Result<_, crate::store::error::StoreError> {
            let mut envelope = f.envelope.clone();
            envelope.record(
                "dispatched",
                envelope.created,
                "exchange",
                Some("routed".into()),
            );
            Ok((
                Some(Edit {
                    envelope,
                    append: vec![],
                    deliveries: Vec::new(),
                }),
                (),
            ))
        })
        .unwrap();
    report(&store, &t, "robot", "2026-01-31T17:00:00Z", "claimed");
    let findings = store.fsck(false, &mut |_, _| {}).unwrap().findings;
    assert!(findings.is_empty(), "{findings:?}");
}

fn append(p: &Path, doc: &str) {
    use std::io::Write;
    let mut f = fs::OpenOptions::new().append(true).open(p).unwrap();
    f.write_all(doc.as_bytes()).unwrap();
}

const HAND_CLAIM: &str = "---\nfrom: robot\nreceived: 2026-01-31T17:01:00Z\nchannel: http\nMESS:\n  - status:\n      re: 2026-01-31-001\n      code: claimed\n";
const HAND_DONE: &str = "---\nfrom: robot\nreceived: 2026-01-31T17:05:00Z\nchannel: http\nMESS:\n  - status:\n      re: 2026-01-31-001\n      code: completed\n  - response:\n      re: 2026-01-31-001\n      content:\n        - the fridge holds milk\n";

#[test]
fn a_hand_appended_message_takes_effect_on_the_next_read() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    // MESSE-AF's recipe: `cat >>` a message, without touching the envelope or moving the file.
    append(&p, HAND_CLAIM);
    append(&p, HAND_DONE);
    let (env, location) = store.envelope(&t).unwrap();
    assert_eq!(env.status, Status::Completed);
    assert_eq!(env.executor.as_deref(), Some("robot"));
    assert_eq!(location, Location::State(State::Finished));
    let actions: Vec<&str> = env.history.iter().map(|h| h.action.as_str()).collect();
    assert_eq!(actions, ["created", "claimed", "completed"]);
    // Rewritten once, into its new folder, with every message byte kept.
    assert_eq!(store.find(&t).unwrap().len(), 1);
    let text = fs::read_to_string(path(&store, State::Finished, "2026-01-31-001")).unwrap();
    assert!(text.ends_with(HAND_DONE), "{text}");
    assert!(text.contains(HAND_CLAIM));
    let (listed, errors) = store.list(&State::ALL, false);
    assert!(errors.is_empty());
    assert_eq!(listed[0].0.status, Status::Completed);
    assert!(
        store
            .fsck(false, &mut |_, _| {})
            .unwrap()
            .findings
            .is_empty()
    );
}

#[test]
fn listings_and_writes_see_hand_edits_too() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    append(&path(&store, State::Received, "2026-01-31-001"), HAND_CLAIM);
    let (listed, _) = store.list(&State::ALL, false);
    assert_eq!(listed[0].0.status, Status::Claimed);
    assert_eq!(listed[0].1, Location::State(State::Executing));
    // A write decides on the envelope the messages give.
    append(&path(&store, State::Executing, "2026-01-31-001"), HAND_DONE);
    let seen = store
        .modify(&t, |t| -> Result<_, crate::store::error::StoreError> {
            Ok((None, t.envelope.status))
        })
        .unwrap();
    assert_eq!(seen, Status::Completed);
    assert_eq!(
        store.read(&t).unwrap().location,
        Location::State(State::Finished)
    );
}

#[test]
fn a_hand_appended_document_that_is_not_mess_is_left_as_it_is() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let p = path(&store, State::Received, "2026-01-31-001");
    append(&p, "---\nnotes: bought milk\n");
    let before = fs::read_to_string(&p).unwrap();
    assert_eq!(store.envelope(&t).unwrap().0.status, Status::Pending);
    assert_eq!(store.read(&t).unwrap().envelope.status, Status::Pending);
    assert_eq!(fs::read_to_string(&p).unwrap(), before);
    let problems: Vec<String> = store
        .fsck(false, &mut |_, _| {})
        .unwrap()
        .findings
        .into_iter()
        .map(|f| f.problem)
        .collect();
    assert!(
        problems.iter().any(|p| p.contains("not a MESS message")),
        "{problems:?}"
    );
}

#[test]
fn messe_af_files_are_read_moved_and_archived() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let ours = path(&store, State::Received, "2026-01-31-001");
    let theirs = store
        .layout()
        .state_dir(State::Received)
        .join("2026-01-31-001.messe-af");
    fs::rename(&ours, &theirs).unwrap();
    assert_eq!(store.read(&t).unwrap().path, theirs);
    assert_eq!(store.list(&State::ALL, false).0.len(), 1);
    // A ref whose file has the other suffix is taken.
    let refs = store
        .allocate_refs(NaiveDate::from_ymd_opt(2026, 1, 31).unwrap(), 1)
        .unwrap();
    assert_eq!(refs[0].as_str(), "2026-01-31-002");
    report(&store, &t, "robot", "2026-01-31T17:01:00Z", "claimed");
    assert!(!theirs.exists());
    assert!(path(&store, State::Executing, "2026-01-31-001").exists());
    report(&store, &t, "robot", "2026-01-31T17:02:00Z", "completed");
    let done = path(&store, State::Finished, "2026-01-31-001");
    let finished = store
        .layout()
        .state_dir(State::Finished)
        .join("2026-01-31-001.messe-af");
    fs::rename(&done, &finished).unwrap();
    let cutoff = time::parse_timestamp("2026-03-01T00:00:00Z").unwrap();
    let archived = store.archive(cutoff, &mut |_, _| {});
    assert_eq!(archived.moved.len(), 1, "{:?}", archived.errors);
    assert_eq!(
        store.read(&t).unwrap().location,
        Location::Archive("2026-01".into())
    );
}

#[test]
fn two_files_for_one_ref_are_an_fsck_finding() {
    let (_d, store) = home();
    let t = new_thread(&store, "2026-01-31-001");
    let ours = path(&store, State::Received, "2026-01-31-001");
    let theirs = store
        .layout()
        .state_dir(State::Received)
        .join("2026-01-31-001.messe-af");
    fs::copy(&ours, &theirs).unwrap();
    append(&ours, HAND_CLAIM);
    assert_eq!(store.read(&t).unwrap().envelope.status, Status::Claimed);
    // Reading healed the copy with more messages and removed the other.
    assert_eq!(store.find(&t).unwrap().len(), 1);
    fs::copy(
        path(&store, State::Executing, "2026-01-31-001"),
        store
            .layout()
            .state_dir(State::Executing)
            .join("2026-01-31-001.messe-af"),
    )
    .unwrap();
    let r = store.fsck(false, &mut |_, _| {}).unwrap();
    assert!(
        r.findings
            .iter()
            .any(|f| f.problem.contains("second file for 2026-01-31-001")),
        "{:?}",
        r.findings
    );
    store.fsck(true, &mut |_, _| {}).unwrap();
    assert_eq!(store.find(&t).unwrap().len(), 1);
    assert!(
        store
            .fsck(false, &mut |_, _| {})
            .unwrap()
            .findings
            .is_empty()
    );
}

#[test]
fn a_listing_sees_an_envelope_edited_by_hand_and_a_broken_one_each_time() {
    let (_dir, store) = home();
    let thread = new_thread(&store, "2026-01-31-001");
    let file = path(&store, State::Received, "2026-01-31-001");
    let intents = |store: &Store| -> (Vec<String>, usize) {
        let (listed, errors) = store.list(&[State::Received], false);
        (
            listed.into_iter().map(|(env, _, _)| env.intent).collect(),
            errors.len(),
        )
    };
    // Listed twice: the second answer (from envelopes parsed before) is the same.
    assert_eq!(intents(&store), (vec!["check the fridge".to_owned()], 0));
    assert_eq!(intents(&store), (vec!["check the fridge".to_owned()], 0));
    // The envelope's text changed by hand: the listing parses the new text.
    let text = fs::read_to_string(&file).unwrap();
    fs::write(
        &file,
        text.replacen("check the fridge", "check the freezer", 1),
    )
    .unwrap();
    assert_eq!(intents(&store), (vec!["check the freezer".to_owned()], 0));
    // Back to the first text: the first envelope again, not the last one parsed.
    fs::write(&file, &text).unwrap();
    assert_eq!(intents(&store), (vec!["check the fridge".to_owned()], 0));
    // A broken envelope is an error at every listing, never an envelope kept from before.
    let broken = text.replacen("status: pending", "status: [pending", 1);
    assert_ne!(broken, text);
    fs::write(&file, &broken).unwrap();
    assert_eq!(intents(&store), (vec![], 1));
    assert_eq!(intents(&store), (vec![], 1));
    assert_eq!(store.envelope(&thread).map(|(e, _)| e.intent).ok(), None);
}

#[test]
fn index_entries_are_rewritten_in_place_and_a_read_racing_a_write_sees_one_whole_ref() {
    use crate::store::index::{self, Key};
    let (_dir, store) = home();
    let layout = store.layout().clone();
    let entry = layout.index_dir().join("claude-agent").join("last");
    let at = |r: &str| ThreadRef::parse(r).unwrap();
    // A file from before (the ref alone) still reads.
    fs::create_dir_all(entry.parent().unwrap()).unwrap();
    fs::write(&entry, "2026-01-31-007\n").unwrap();
    assert_eq!(
        index::get(&layout, "claude-agent", Key::Last).unwrap(),
        Some(at("2026-01-31-007"))
    );
    // Refs of growing width, each overwriting the last in place.
    for r in [
        "2026-01-31-999",
        "2026-01-31-1000",
        "2026-01-31-12345",
        "2026-01-31-1",
    ] {
        index::put_exact(&layout, "claude-agent", Key::Last, &at(r)).unwrap();
        assert_eq!(
            index::get(&layout, "claude-agent", Key::Last).unwrap(),
            Some(at(r))
        );
    }
    // A record whose check does not match its ref names nothing.
    let text = fs::read_to_string(&entry).unwrap();
    fs::write(&entry, text.replacen("2026-01-31-1 ", "2026-01-31-2 ", 1)).unwrap();
    assert_eq!(
        index::get(&layout, "claude-agent", Key::Last).unwrap(),
        None
    );

    // One writer flips between two refs of different widths; readers only ever see one of them.
    let (a, b) = (at("2026-01-31-099"), at("2026-01-31-1234"));
    index::put_exact(&layout, "claude-agent", Key::Last, &a).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..400 {
                let r = if i % 2 == 0 { &b } else { &a };
                index::put_exact(&layout, "claude-agent", Key::Last, r).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let seen = index::get(&layout, "claude-agent", Key::Last).unwrap();
                    assert!(
                        seen.as_ref().is_some_and(|r| *r == a || *r == b),
                        "{seen:?}"
                    );
                }
            });
        }
    });
}
