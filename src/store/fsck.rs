//! What `mess fsck` reports on either backend (findings, counts), and what it learns of the
//! indexes from the threads it reads (`IndexFacts`); the checks themselves are each backend's
//! (`files::fsck`, `postgres::mirror::fsck`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Payload;
use crate::protocol::status::State;
use crate::store::layout::Location;
use crate::store::thread::{self, ThreadFile};

/// One problem found.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The file concerned.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: String,
    /// Whether `--repair` fixed it.
    pub repaired: bool,
}

/// The result of a check.
#[derive(Debug, Default)]
pub struct FsckReport {
    /// Thread files examined.
    pub files: usize,
    /// Distinct threads.
    pub threads: usize,
    /// Problems, in the order found.
    pub findings: Vec<Finding>,
}

impl FsckReport {
    /// Problems that are still there.
    pub fn unrepaired(&self) -> usize {
        self.findings.iter().filter(|f| !f.repaired).count()
    }

    pub(crate) fn note(&mut self, path: &Path, problem: impl Into<String>, repaired: bool) {
        self.findings.push(Finding {
            path: path.to_owned(),
            problem: problem.into(),
            repaired,
        });
    }
}

/// What the index should hold, gathered while checking threads.
#[derive(Default)]
pub(crate) struct IndexFacts {
    /// (requestor, client id) -> newest thread.
    pub(crate) client_ids:
        BTreeMap<(String, String), (chrono::DateTime<chrono::FixedOffset>, ThreadRef)>,
    /// requestor -> newest thread.
    pub(crate) last: BTreeMap<String, (chrono::DateTime<chrono::FixedOffset>, ThreadRef)>,
    /// (requestor, suggestion id) -> thread.
    pub(crate) suggestions: Vec<(String, String, ThreadRef)>,
    /// dependency -> dependents.
    pub(crate) deps: Vec<(String, ThreadRef)>,
    /// date -> highest serial.
    pub(crate) serials: BTreeMap<NaiveDate, u64>,
}

/// A thread file parsed as far as possible.
pub(crate) struct Loaded {
    pub(crate) envelope: Option<Envelope>,
    pub(crate) messages: Vec<MessageDoc>,
    /// Offset where document 2 starts.
    pub(crate) rest_start: usize,
    /// Bytes worth keeping: everything before a torn last document.
    pub(crate) kept_len: usize,
    /// Why the last document was dropped, if it was.
    pub(crate) torn: Option<String>,
    /// Why the last document, whole YAML, is not a message (kept; reported, not repaired).
    pub(crate) invalid_last: Option<String>,
}

impl Loaded {
    pub(crate) fn message_text<'a>(&self, text: &'a str) -> &'a str {
        &text[self.rest_start..self.kept_len]
    }
}

pub(crate) fn load(path: &Path, text: &str) -> Result<Loaded, String> {
    let parsed = ThreadFile::parse(path, Location::State(State::Received), text.to_owned());
    let spans = crate::protocol::yaml::split_documents(text);
    let Some(first) = spans.first() else {
        return Err("empty file".to_owned());
    };
    let envelope = parsed.as_ref().ok().map(|t| t.envelope.clone());
    let rest_start = spans.get(1).map_or(text.len(), |s| s.start);
    let mut messages = Vec::new();
    let mut kept_len = text.len();
    let mut torn = None;
    let mut invalid_last = None;
    let last = spans.len() - 1;
    for (i, span) in spans.iter().enumerate().skip(1) {
        let raw = &text[span.start..span.end];
        if thread::is_empty_doc(raw) {
            continue;
        }
        // Only bytes that do not parse are torn: a last document without a final line break
        // (other MESSE-AF writers end files so) that reads as a whole message is a message,
        // and one that reads as YAML but not as MESS is kept for a person to look at.
        let yaml =
            crate::protocol::yaml::parse_document(raw, &crate::protocol::yaml::Limits::DEFAULT);
        match yaml {
            Ok(v) => match MessageDoc::from_value(v, &format!("document {}", i + 1)) {
                Ok(doc) => messages.push(doc),
                Err(e) if i == last => invalid_last = Some(e.to_string()),
                Err(e) => return Err(format!("document {} is not a message: {e}", i + 1)),
            },
            Err(e) if i == last => {
                torn = Some(e.message);
                kept_len = span.start;
            }
            Err(e) => return Err(format!("document {} does not parse: {}", i + 1, e.message)),
        }
    }
    if envelope.is_none() && first.end == text.len() {
        return Err(parsed.err().map(|e| e.to_string()).unwrap_or_default());
    }
    Ok(Loaded {
        envelope,
        messages,
        rest_start,
        kept_len: kept_len.max(rest_start),
        torn,
        invalid_last,
    })
}

pub(crate) fn gather(thread: &ThreadRef, loaded: &Loaded, facts: &mut IndexFacts) {
    if let Some(env) = &loaded.envelope {
        facts.add(thread, env, &loaded.messages);
    }
}

impl IndexFacts {
    /// Adds what one thread says about the indexes: its client id, its requestor's newest
    /// request, its dependencies, its suggestion ids and its ref's serial.
    pub(crate) fn add(&mut self, thread: &ThreadRef, env: &Envelope, messages: &[MessageDoc]) {
        gather_facts(thread, env, messages, self);
    }
}

fn gather_facts(
    thread: &ThreadRef,
    env: &Envelope,
    messages: &[MessageDoc],
    facts: &mut IndexFacts,
) {
    if let Some((date, serial)) = thread.date_serial() {
        let e = facts.serials.entry(date).or_insert(0);
        *e = (*e).max(serial);
    }
    // Refs are allocated in creation order, so the highest ref is the newest request (the
    // clock reading can race between processes; the ref counter cannot).
    let order = |r: &ThreadRef| (r.date_serial(), r.clone());
    let newer = |slot: &Option<&(chrono::DateTime<chrono::FixedOffset>, ThreadRef)>| {
        slot.is_none_or(|(_, r)| order(thread) > order(r))
    };
    if let Some(id) = &env.client_id {
        let key = (env.requestor.clone(), id.clone());
        if newer(&facts.client_ids.get(&key)) {
            facts.client_ids.insert(key, (env.created, thread.clone()));
        }
    }
    if newer(&facts.last.get(&env.requestor)) {
        facts
            .last
            .insert(env.requestor.clone(), (env.created, thread.clone()));
    }
    for dep in &env.depends_on {
        facts.deps.push((dep.clone(), thread.clone()));
    }
    for doc in messages {
        for p in &doc.message.payloads {
            if let Payload::Suggestion(s) = p
                && let Some(id) = &s.id
            {
                facts
                    .suggestions
                    .push((env.requestor.clone(), id.clone(), thread.clone()));
            }
        }
    }
}
