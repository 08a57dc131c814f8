//! Mail on real files: the format's file names and frontmatter, every operation, refusals of
//! bad names, and concurrent claims of one message (exactly one reader wins).

use std::sync::Arc;

use tempfile::TempDir;

use crate::mail::{BROADCAST, Folder, Letter, Mail, MailError};
use crate::protocol::time;

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
    let mail = Mail::open(dir.path());
    let file = mail
        .send(&letter("worker-bug-069", "orchestrator", "status"))
        .unwrap();
    assert_eq!(file, "20260128T153000Z_worker-bug-069_status.md");
    let path = dir.path().join(".mail/orchestrator").join(&file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("---\nfrom: worker-bug-069\nto: orchestrator\ntype: status\ntimestamp: 2026-01-28T15:30:00"), "{text}");
    assert!(text.contains("needs_response: false\npriority: normal\ntags:\n  - BUG-069\n  - fugue\n---\n\n## Status Update"), "{text}");
    // The same second, sender and type again: a second file, not an overwrite.
    let again = mail
        .send(&letter("worker-bug-069", "orchestrator", "status"))
        .unwrap();
    assert_eq!(again, "20260128T153000Z_worker-bug-069-2_status.md");

    let (unread, problems) = mail.list("orchestrator", Folder::Unread).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(unread.len(), 2);
    assert_eq!(
        unread[0].letter,
        letter("worker-bug-069", "orchestrator", "status")
    );

    let read = mail
        .mark_read(
            "orchestrator",
            &file,
            time::parse_timestamp("2026-01-28T16:00:00Z").unwrap(),
        )
        .unwrap();
    assert_eq!(read.folder, Folder::Read);
    assert!(read.letter.read_at.is_some());
    assert!(
        dir.path()
            .join(".mail/orchestrator/read")
            .join(&file)
            .exists()
    );
    assert_eq!(
        mail.read("orchestrator", &file).unwrap().folder,
        Folder::Read
    );
    mail.archive("orchestrator", &file).unwrap();
    assert_eq!(
        mail.read("orchestrator", &file).unwrap().folder,
        Folder::Archive
    );
    assert_eq!(
        mail.list("orchestrator", Folder::Archive).unwrap().0.len(),
        1
    );
    assert!(matches!(
        mail.read("orchestrator", "20260128T153000Z_nobody_status.md"),
        Err(MailError::NotFound { .. })
    ));

    // A name stays taken after its message moved on: the next one never lands on it.
    let third = mail
        .send(&letter("worker-bug-069", "orchestrator", "status"))
        .unwrap();
    assert_eq!(third, "20260128T153000Z_worker-bug-069-3_status.md");
    mail.send(&letter("nexus", BROADCAST, "report")).unwrap();
    assert_eq!(mail.list(BROADCAST, Folder::Unread).unwrap().0.len(), 1);
}

#[test]
fn bad_names_types_and_paths_are_refused_and_write_nothing() {
    let dir = TempDir::new().unwrap();
    let mail = Mail::open(dir.path());
    for (l, want) in [
        (letter("w", "../etc", "status"), "to \"../etc\""),
        (letter("w/x", "o", "status"), "from \"w/x\""),
        (letter("w", "read", "status"), "to \"read\""),
        (letter("w", "o", "gossip"), "type \"gossip\""),
    ] {
        let e = mail.send(&l).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    for file in ["../../config.yaml", "20260128T153000Z_a/../b.md", "x.md"] {
        assert!(
            matches!(mail.read("o", file), Err(MailError::Invalid { .. })),
            "{file}"
        );
    }
    assert!(
        !dir.path().join(".mail").exists()
            || std::fs::read_dir(dir.path().join(".mail")).unwrap().count() == 0
    );
}

#[test]
fn of_many_readers_claiming_one_message_exactly_one_wins() {
    let dir = TempDir::new().unwrap();
    let mail = Arc::new(Mail::open(dir.path()));
    let file = mail.send(&letter("orch", "worker", "task")).unwrap();
    let now = time::parse_timestamp("2026-01-28T16:00:00Z").unwrap();
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (mail, file) = (mail.clone(), file.clone());
            std::thread::spawn(move || mail.mark_read("worker", &file, now))
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
