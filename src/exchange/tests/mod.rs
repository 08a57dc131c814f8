//! Exchange tests on a temp home with a fixed clock, one file per topic; this file holds what
//! they share: the executors config most tests use and the `Fixture` that sends messages as a
//! principal and reads thread files back.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tempfile::TempDir;

use crate::exchange::clock::FixedClock;
use crate::exchange::directory::Directory;
use crate::exchange::error::{Error, ErrorKind};
use crate::exchange::route::{Pass, PassScope};
use crate::exchange::view::ThreadView;
use crate::exchange::{Exchange, Sender, Settings};
use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::status::{State, Status};
use crate::protocol::time;
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};
use crate::store::layout::Location;

mod config;
mod escrow;
mod examples;
mod expiry_and_dependencies;
mod jobs;
mod lifecycle;
mod peers;
mod queue;
mod reputation;
mod routing;
mod submission;
mod suggestions;
mod views_and_access;

pub(super) const EXECUTORS: &str = "
agent_id: claude-agent
executors:
  teague-phone:
    name: Teague's Phone
    capabilities: [take-photo, check-visual]
    notify:
      slack: U04XXXXXX
  roomba-kitchen:
    capabilities: [vacuum-floor, home-kitchen-access]
  kitchen-robot:
    capabilities: [vacuum-floor, precision-knife-work, home-kitchen-access]
routing:
  - match: { capability: vacuum-floor }
    prefer: [roomba-kitchen]
  - default:
    prefer: [teague-phone]
";

pub(super) struct Fixture {
    pub(super) dir: TempDir,
    pub(super) ex: Exchange,
    pub(super) clock: Arc<FixedClock>,
    /// On the postgres backend, the node's follower of the change feed, passed after every
    /// message the fixture sends (see [`Fixture::follow`]).
    following: Option<std::sync::Mutex<crate::store::Following>>,
}

fn at(s: &str) -> DateTime<Utc> {
    time::parse_timestamp(s).unwrap().to_utc()
}

pub(super) fn fixture(config: &str) -> Fixture {
    fixture_with(config, Settings::defaults())
}

pub(super) fn fixture_with(config: &str, settings: Settings) -> Fixture {
    let dir = TempDir::new().unwrap();
    if !config.is_empty() {
        std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    }
    let clock = Arc::new(FixedClock::new(at("2026-01-31T17:00:00-08:00")));
    let ex = Exchange::new(
        crate::store::testing::store_in(dir.path()),
        settings,
        clock.clone(),
    );
    let following = ex.store().following().unwrap().map(std::sync::Mutex::new);
    Fixture {
        dir,
        ex,
        clock,
        following,
    }
}

impl Fixture {
    pub(super) fn send_via(&self, who: &str, channel: &str, yaml: &str) -> Result<Message, Error> {
        let sent = self
            .ex
            .intake()
            .submit_text(yaml, &Sender::new(who, channel));
        self.follow();
        let mut answers = sent?;
        Ok(answers.remove(0))
    }

    /// The stored registration of executor `id`, as YAML (on either backend).
    pub(super) fn registration(&self, id: &str) -> String {
        let (files, _) = self.ex.store().registry();
        let (_, value) = files
            .registrations
            .iter()
            .find(|(path, _)| path.file_stem().is_some_and(|s| s == id))
            .unwrap_or_else(|| panic!("no registration of {id}"));
        crate::protocol::emit::to_yaml(value)
    }

    /// What a node's follower does after a write, at once: on the postgres backend, reads the
    /// change feed, announces each change (with its cursor) and writes the mirror, as
    /// `mess serve` does on its own thread; on files, where each write announces itself and
    /// is its own file, nothing.
    pub(super) fn follow(&self) {
        let Some(following) = &self.following else {
            return;
        };
        let mut following = following.lock().unwrap();
        for (envelope, cursor) in following.pass().unwrap() {
            self.ex.changes().announce_envelope(envelope, Some(cursor));
        }
        following.write().unwrap();
    }

    pub(super) fn send(&self, who: &str, yaml: &str) -> Result<Message, Error> {
        self.send_via(who, "cli", yaml)
    }

    pub(super) fn ok(&self, who: &str, yaml: &str) -> Message {
        self.send(who, yaml)
            .unwrap_or_else(|e| panic!("{who} sending\n{yaml}\nfailed: {e}"))
    }

    pub(super) fn refused(&self, who: &str, yaml: &str, kind: ErrorKind, text: &str) {
        match self.send(who, yaml) {
            Ok(a) => panic!("accepted:\n{yaml}\nanswer: {a:?}"),
            Err(e) => {
                assert_eq!(e.kind(), kind, "{e}");
                assert!(e.to_string().contains(text), "expected {text:?} in {e:?}");
            }
        }
    }

    /// Submits a request and returns its ref.
    pub(super) fn request(&self, who: &str, body: &str) -> String {
        let answer = self.ok(who, &format!("MESS:\n  - request:\n{}", indent(body, 6)));
        match answer.content().next().unwrap() {
            Payload::Ack(a) => a.thread_ref.clone().unwrap(),
            other => panic!("no ack: {other:?}"),
        }
    }

    pub(super) fn status(&self, who: &str, r: &str, body: &str) -> Result<Message, Error> {
        self.send(
            who,
            &format!("MESS:\n  - status:\n      re: {r}\n{}", indent(body, 6)),
        )
    }

    pub(super) fn env(&self, r: &str) -> Envelope {
        self.ex
            .store()
            .read(&ThreadRef::parse(r).unwrap())
            .unwrap()
            .envelope
    }

    pub(super) fn location(&self, r: &str) -> Location {
        self.ex
            .store()
            .read(&ThreadRef::parse(r).unwrap())
            .unwrap()
            .location
    }

    pub(super) fn text(&self, r: &str) -> String {
        self.ex
            .store()
            .read(&ThreadRef::parse(r).unwrap())
            .unwrap()
            .text()
            .to_owned()
    }
}

pub(super) fn indent(body: &str, n: usize) -> String {
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{}{}\n", " ".repeat(n), l))
        .collect()
}

/// Runs a server's delivery worker on `f`'s exchange until `done` holds (at most 20 seconds,
/// else the test fails naming `what`).
pub(super) fn deliver_until(f: &Fixture, what: &str, done: impl Fn() -> bool) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let notifier = crate::notify::Notifier::new(crate::notify::Settings::defaults()).unwrap();
    runtime.block_on(async {
        let worker = crate::exchange::jobs::run(f.ex.clone(), notifier, stop.clone());
        let started = std::time::Instant::now();
        // `done` reads the store, which blocks (a database client must not run on the
        // runtime's own threads).
        while !tokio::task::block_in_place(&done) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "never {what}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        stop.cancel();
        let _ = worker.await;
    });
}
