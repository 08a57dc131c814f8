//! Mail on real files: the format's file names and frontmatter, every operation, refusals of
//! bad names, concurrent claims of one message (exactly one reader wins), per-reader reads of
//! `__broadcast`, and expiry and archive pruning (time is an argument).

use std::sync::Arc;

use tempfile::TempDir;

use crate::mail::{ARCHIVE_KEEP_DAYS, BROADCAST, Folder, Letter, Mail, MailError, parse_expires};
use crate::protocol::time::{self, Timestamp};

fn at(s: &str) -> Timestamp {
    time::parse_timestamp(s).unwrap()
}

/// Shortly after the test letters were written.
fn soon() -> Timestamp {
    at("2026-01-28T16:00:00Z")
}

fn letter(from: &str, to: &str, kind: &str) -> Letter {
    Letter {
        from: from.to_owned(),
        to: to.to_owned(),
        kind: kind.to_owned(),
        timestamp: time::parse_timestamp("2026-01-28T15:30:00Z").unwrap(),
        needs_response: false,
        priority: "normal".to_owned(),
        tags: vec!["BUG-069".to_owned(), "fugue".to_owned()],
        in_reply_to: None,
        thread_id: None,
        expires: None,
        read_at: None,
        body: "## Status Update\n\nRoot cause identified.".to_owned(),
    }
}

#[test]
fn messages_are_written_as_the_format_says_and_read_back() {
    let dir = TempDir::new().unwrap();
    let mail = Mail::of(&crate::store::testing::store_in(dir.path()));
    let file = mail
        .send(&letter("worker-bug-069", "orchestrator", "status"))
        .unwrap();
    assert_eq!(file, "20260128T153000Z_worker-bug-069_status.md");
    if crate::store::testing::on_files() {
        let path = dir.path().join(".mail/orchestrator").join(&file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("---\nfrom: worker-bug-069\nto: orchestrator\ntype: status\ntimestamp: 2026-01-28T15:30:00"), "{text}");
        assert!(text.contains("needs_response: false\npriority: normal\ntags:\n  - BUG-069\n  - fugue\n---\n\n## Status Update"), "{text}");
    }
    // The same second, sender and type again: a second file, not an overwrite.
    let again = mail
        .send(&letter("worker-bug-069", "orchestrator", "status"))
        .unwrap();
    assert_eq!(again, "20260128T153000Z_worker-bug-069-2_status.md");

    let (unread, problems) = mail
        .list("orchestrator", Folder::Unread, Some("orchestrator"), soon())
        .unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(unread.len(), 2);
    assert_eq!(
        unread[0].letter,
        letter("worker-bug-069", "orchestrator", "status")
    );

    let read = mail
        .mark_read("orchestrator", &file, "orchestrator", soon())
        .unwrap();
    assert_eq!(read.folder, Folder::Read);
    assert!(read.letter.read_at.is_some());
    if crate::store::testing::on_files() {
        assert!(
            dir.path()
                .join(".mail/orchestrator/read")
                .join(&file)
                .exists()
        );
    }
    let read_as = |file: &str| mail.read("orchestrator", file, Some("orchestrator"), soon());
    assert_eq!(read_as(&file).unwrap().folder, Folder::Read);
    mail.archive("orchestrator", &file).unwrap();
    assert_eq!(read_as(&file).unwrap().folder, Folder::Archive);
    assert_eq!(
        mail.list(
            "orchestrator",
            Folder::Archive,
            Some("orchestrator"),
            soon()
        )
        .unwrap()
        .0
        .len(),
        1
    );
    assert!(matches!(
        read_as("20260128T153000Z_nobody_status.md"),
        Err(MailError::NotFound { .. })
    ));

    // A name stays taken after its message moved on: the next one never lands on it.
    let third = mail
        .send(&letter("worker-bug-069", "orchestrator", "status"))
        .unwrap();
    assert_eq!(third, "20260128T153000Z_worker-bug-069-3_status.md");
    mail.send(&letter("nexus", BROADCAST, "report")).unwrap();
    assert_eq!(
        mail.list(BROADCAST, Folder::Unread, Some("w1"), soon())
            .unwrap()
            .0
            .len(),
        1
    );
}

#[test]
fn bad_names_types_and_paths_are_refused_and_write_nothing() {
    let dir = TempDir::new().unwrap();
    let mail = Mail::of(&crate::store::testing::store_in(dir.path()));
    for (l, want) in [
        (letter("w", "../etc", "status"), "to \"../etc\""),
        (letter("w/x", "o", "status"), "from \"w/x\""),
        (letter("w", "read", "status"), "to \"read\""),
        (letter("w", "o", "../gossip"), "type \"../gossip\""),
        (letter("w", "o", "Status"), "type \"Status\""),
        (letter("w", "o", "a_b"), "type \"a_b\""),
        (letter("w", "o", ""), "type \"\""),
        (
            letter("w", "o", &"x".repeat(33)),
            "not a usable message type",
        ),
    ] {
        let e = mail.send(&l).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    let mut late = letter("w", "o", "status");
    late.expires = Some(at("2026-01-28T15:00:00Z"));
    let e = mail.send(&late).unwrap_err().to_string();
    assert!(e.contains("expires"), "{e}");
    for file in ["../../config.yaml", "20260128T153000Z_a/../b.md", "x.md"] {
        assert!(
            matches!(
                mail.read("o", file, Some("o"), soon()),
                Err(MailError::Invalid { .. })
            ),
            "{file}"
        );
    }
    assert!(matches!(
        mail.mark_read(BROADCAST, "20260128T153000Z_a_status.md", "../x", soon()),
        Err(MailError::Invalid { .. })
    ));
    assert!(
        !dir.path().join(".mail").exists()
            || std::fs::read_dir(dir.path().join(".mail")).unwrap().count() == 0
    );
}

#[test]
fn of_many_readers_claiming_one_message_exactly_one_wins() {
    let dir = TempDir::new().unwrap();
    let mail = Arc::new(Mail::of(&crate::store::testing::store_in(dir.path())));
    let file = mail.send(&letter("orch", "worker", "task")).unwrap();
    let now = soon();
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let (mail, file) = (mail.clone(), file.clone());
            std::thread::spawn(move || mail.mark_read("worker", &file, &format!("w{i}"), now))
        })
        .collect();
    let outcomes: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1);
    assert!(
        outcomes
            .iter()
            .filter_map(|o| o.as_ref().err())
            .all(|e| matches!(e, MailError::Claimed { .. })),
        "{outcomes:?}"
    );
}

#[test]
fn the_format_s_announcement_and_unknown_types_are_kept() {
    let dir = TempDir::new().unwrap();
    let mail = Mail::of(&crate::store::testing::store_in(dir.path()));
    let file = mail
        .send(&letter("nexus", BROADCAST, "announcement"))
        .unwrap();
    assert_eq!(file, "20260128T153000Z_nexus_announcement.md");
    let file = mail.send(&letter("nexus", "orch", "digest-2")).unwrap();
    assert_eq!(file, "20260128T153000Z_nexus_digest-2.md");
    let found = mail.read("orch", &file, Some("orch"), soon()).unwrap();
    assert_eq!(found.letter.kind, "digest-2");
}

#[test]
fn reading_a_broadcast_message_marks_it_read_for_that_reader_only() {
    let dir = TempDir::new().unwrap();
    let mail = Arc::new(Mail::of(&crate::store::testing::store_in(dir.path())));
    let file = mail
        .send(&letter("nexus", BROADCAST, "announcement"))
        .unwrap();
    let unread = |reader: &str| {
        mail.list(BROADCAST, Folder::Unread, Some(reader), soon())
            .unwrap()
            .0
            .len()
    };
    let read = mail.mark_read(BROADCAST, &file, "w1", soon()).unwrap();
    assert_eq!(read.folder, Folder::Read);
    assert_eq!(read.letter.read_at, Some(soon()));
    assert_eq!((unread("w1"), unread("w2"), unread("w3")), (0, 1, 1));
    // w1's record is the message with its read_at, under read/w1/; the message itself stays.
    if crate::store::testing::on_files() {
        let record = dir.path().join(".mail/__broadcast/read/w1").join(&file);
        let text = std::fs::read_to_string(&record).unwrap();
        assert!(text.contains("read_at: 2026-01-28T16:00:00Z"), "{text}");
        assert!(dir.path().join(".mail/__broadcast").join(&file).exists());
    }
    let (mine, _) = mail
        .list(BROADCAST, Folder::Read, Some("w1"), soon())
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert!(
        mail.list(BROADCAST, Folder::Read, Some("w2"), soon())
            .unwrap()
            .0
            .is_empty()
    );
    assert_eq!(
        mail.read(BROADCAST, &file, Some("w1"), soon())
            .unwrap()
            .folder,
        Folder::Read
    );
    assert_eq!(
        mail.read(BROADCAST, &file, Some("w2"), soon())
            .unwrap()
            .folder,
        Folder::Unread
    );
    assert!(matches!(
        mail.mark_read(BROADCAST, &file, "w1", soon()),
        Err(MailError::Claimed { .. })
    ));

    // Many sessions at once: each reads it once; one session racing itself reads it once.
    let spawn = |reader: String| {
        let (mail, file) = (mail.clone(), file.clone());
        std::thread::spawn(move || mail.mark_read(BROADCAST, &file, &reader, soon()))
    };
    let others: Vec<_> = (0..8).map(|i| spawn(format!("s{i}"))).collect();
    assert!(others.into_iter().all(|t| t.join().unwrap().is_ok()));
    let twins: Vec<_> = (0..8).map(|_| spawn("w2".to_owned())).collect();
    let outcomes: Vec<_> = twins.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(unread("w3"), 1);
}

#[test]
fn expired_mail_is_never_served_and_old_archive_goes() {
    let dir = TempDir::new().unwrap();
    let mail = Mail::of(&crate::store::testing::store_in(dir.path()));
    let expires = at("2026-01-29T00:00:00Z");
    let mut short = letter("orch", "worker", "task");
    short.expires = Some(expires);
    let file = mail.send(&short).unwrap();
    if crate::store::testing::on_files() {
        let text = std::fs::read_to_string(dir.path().join(".mail/worker").join(&file)).unwrap();
        assert!(text.contains("expires: 2026-01-29T00:00:00Z"), "{text}");
    }
    let mut broadcast = short.clone();
    broadcast.to = BROADCAST.to_owned();
    let shout = mail.send(&broadcast).unwrap();
    mail.mark_read(BROADCAST, &shout, "w1", soon()).unwrap();
    let kept = mail.send(&letter("orch", "worker", "report")).unwrap();

    let before = at("2026-01-28T23:59:59Z");
    assert_eq!(
        mail.list("worker", Folder::Unread, Some("worker"), before)
            .unwrap()
            .0
            .len(),
        2
    );
    // From the moment it expires, nobody is served it, and listing deletes it.
    let (left, _) = mail
        .list("worker", Folder::Unread, Some("worker"), expires)
        .unwrap();
    assert_eq!(
        left.iter().map(|f| f.file.as_str()).collect::<Vec<_>>(),
        [kept.as_str()]
    );
    assert!(!dir.path().join(".mail/worker").join(&file).exists());
    for result in [
        mail.read(BROADCAST, &shout, Some("w2"), expires),
        mail.mark_read(BROADCAST, &shout, "w2", expires),
        mail.read(BROADCAST, &shout, Some("w1"), expires),
    ] {
        assert!(
            matches!(result, Err(MailError::NotFound { .. })),
            "{result:?}"
        );
    }

    // Archive is kept ARCHIVE_KEEP_DAYS from its timestamp; prune reaches every folder.
    mail.archive("worker", &kept).unwrap();
    let mut other = letter("orch", "worker", "status");
    other.expires = Some(expires);
    let unread_expired = mail.send(&other).unwrap();
    let day_before = at("2026-01-28T15:30:00Z") + chrono::TimeDelta::days(ARCHIVE_KEEP_DAYS - 1);
    // Files drop expired mail as soon as a listing meets it, so only the message expired
    // since is left to prune; the database keeps expired rows (never served) for the sweep:
    // both messages, the broadcast and its reader's record.
    let pruned = if crate::store::testing::on_files() {
        1
    } else {
        4
    };
    assert_eq!(mail.prune(day_before).unwrap(), pruned, "{unread_expired}");
    assert_eq!(
        mail.list("worker", Folder::Archive, Some("worker"), day_before)
            .unwrap()
            .0
            .len(),
        1,
        "the archived message stays until its days are up"
    );
    let day_after = day_before + chrono::TimeDelta::days(1);
    assert_eq!(
        mail.list("worker", Folder::Archive, Some("worker"), day_after)
            .unwrap()
            .0
            .len(),
        0
    );
    // As above: files dropped the old archive when it was listed; the database's sweep does.
    let pruned = if crate::store::testing::on_files() {
        assert!(!dir.path().join(".mail/worker/archive").join(&kept).exists());
        0
    } else {
        1
    };
    assert_eq!(mail.prune(day_after).unwrap(), pruned);
}

#[test]
fn prune_deletes_expired_records_of_broadcast_readers() {
    let dir = TempDir::new().unwrap();
    let mail = Mail::of(&crate::store::testing::store_in(dir.path()));
    let mut shout = letter("nexus", BROADCAST, "alert");
    shout.expires = Some(at("2026-01-29T00:00:00Z"));
    let file = mail.send(&shout).unwrap();
    mail.mark_read(BROADCAST, &file, "w1", soon()).unwrap();
    mail.mark_read(BROADCAST, &file, "w2", soon()).unwrap();
    assert_eq!(mail.prune(soon()).unwrap(), 0);
    assert_eq!(mail.prune(at("2026-01-29T00:00:00Z")).unwrap(), 3);
    for path in ["", "read/w1", "read/w2"] {
        assert!(
            !dir.path()
                .join(".mail/__broadcast")
                .join(path)
                .join(&file)
                .exists()
        );
    }
}

#[test]
fn expiry_is_a_time_or_a_duration_ahead() {
    let now = soon();
    assert_eq!(parse_expires("", now).unwrap(), None);
    assert_eq!(
        parse_expires("7d", now).unwrap(),
        Some(at("2026-02-04T16:00:00Z"))
    );
    assert_eq!(
        parse_expires("PT30M", now).unwrap(),
        Some(at("2026-01-28T16:30:00Z"))
    );
    assert_eq!(
        parse_expires("2026-02-01T00:00:00+01:00", now).unwrap(),
        Some(at("2026-01-31T23:00:00Z"))
    );
    for (bad, want) in [
        ("2026-01-28T15:00:00Z", "not in the future"),
        ("soon", "expires:"),
        ("0s", "not in the future"),
    ] {
        let e = parse_expires(bad, now).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
}
