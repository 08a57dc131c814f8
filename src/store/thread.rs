//! One thread file in memory: its text, its document boundaries, and its parsed envelope.
//!
//! Message documents are kept as the exact bytes on disk; a rewrite replaces document 1 and
//! appends new documents, so earlier messages are never re-serialized (append-only in meaning
//! and in bytes).

use std::path::{Path, PathBuf};

use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::error::ProtocolError;
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, DocSpan, Limits};
use crate::store::error::StoreError;
use crate::store::layout::Location;

pub use crate::protocol::thread_text::{
    Freshness, MARK, compose_text, freshness, is_empty_doc, new_thread_text, pieces,
};

/// A thread file read from disk.
#[derive(Debug, Clone)]
pub struct ThreadFile {
    /// Where the file is.
    pub path: PathBuf,
    /// Which folder it is in.
    pub location: Location,
    /// The parsed envelope (document 1).
    pub envelope: Envelope,
    text: String,
    spans: Vec<DocSpan>,
}

impl ThreadFile {
    /// Parses the envelope of `text` (the file at `path`); message documents are parsed on demand.
    pub fn parse(path: &Path, location: Location, text: String) -> Result<ThreadFile, StoreError> {
        let spans: Vec<DocSpan> = yaml::split_documents(&text);
        let Some(first) = spans.first() else {
            return Err(StoreError::malformed(
                path,
                ProtocolError::invalid("envelope", "the file is empty"),
            ));
        };
        let envelope = parse_envelope(path, &text[first.start..first.end])?;
        Ok(ThreadFile {
            path: path.to_owned(),
            location,
            envelope,
            text,
            spans,
        })
    }

    /// The whole file as text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the envelope still accounts for every message (see [`Freshness`]).
    pub fn freshness(&self) -> Freshness {
        let tail = self.spans.get(1).map_or(self.text.len(), |s| s.start);
        freshness(&self.text[..tail], self.text.len() - tail)
    }

    /// The envelope replayed from the messages through the exchange's own rules
    /// ([`Envelope::apply`], as when each arrived), keeping what only the envelope knows.
    /// `Err` when a document is not a MESS message: the envelope then stays as it is, and no
    /// byte of the file is lost.
    pub fn replayed(&self) -> Result<Envelope, StoreError> {
        let messages = self.messages()?;
        crate::protocol::envelope::rebuild(
            &self.envelope.thread_ref,
            Some(&self.envelope),
            &messages,
        )
        .map_err(|e| StoreError::malformed(&self.path, e))
    }

    /// The same file with `envelope` in place of its own (for a rewrite under the lock).
    pub(crate) fn with_envelope(mut self, envelope: Envelope) -> ThreadFile {
        self.envelope = envelope;
        self
    }

    /// Number of message documents (documents after the envelope), empty ones not counted.
    pub fn message_count(&self) -> usize {
        self.spans[1..]
            .iter()
            .filter(|s| !is_empty_doc(&self.text[s.start..s.end]))
            .count()
    }

    /// Parses every message document, in order.
    pub fn messages(&self) -> Result<Vec<MessageDoc>, StoreError> {
        let mut out = Vec::new();
        for (i, span) in self.spans.iter().enumerate().skip(1) {
            if let Some(doc) = self.parse_message(i, span)? {
                out.push(doc);
            }
        }
        Ok(out)
    }

    /// Parses message documents from the last one backwards, lazily, for callers that want
    /// only the most recent ones.
    pub fn messages_rev(&self) -> impl Iterator<Item = Result<MessageDoc, StoreError>> + '_ {
        self.spans
            .iter()
            .enumerate()
            .skip(1)
            .rev()
            .filter_map(|(i, span)| self.parse_message(i, span).transpose())
    }

    fn parse_message(
        &self,
        index: usize,
        span: &DocSpan,
    ) -> Result<Option<MessageDoc>, StoreError> {
        let raw = &self.text[span.start..span.end];
        let value = yaml::parse_document(raw, &Limits::DEFAULT).map_err(|e| {
            StoreError::malformed(
                &self.path,
                ProtocolError::invalid(format!("document {}", index + 1), e.message),
            )
        })?;
        if value.is_null() {
            return Ok(None);
        }
        MessageDoc::from_value(value, &format!("document {}", index + 1))
            .map(Some)
            .map_err(|e| StoreError::malformed(&self.path, e))
    }

    /// Checks that the last document is complete: the last message parses. Writers that
    /// append in place (`cat >>`) can leave a cut-off document; a last document that parses
    /// without a final line break is whole (other MESSE-AF writers end files so), and the next
    /// rewrite adds the line break.
    pub fn check_tail(&self) -> Result<(), StoreError> {
        if self.spans.len() > 1 {
            let last = self.spans.len() - 1;
            self.parse_message(last, &self.spans[last])
                .map_err(|_| StoreError::Torn {
                    path: self.path.clone(),
                })?;
        }
        Ok(())
    }

    /// The text of the file with a new envelope and `appended` documents added at the end.
    pub fn compose(&self, envelope: &Envelope, appended: &[MessageDoc]) -> String {
        let rest = match self.spans.get(1) {
            Some(span) => &self.text[span.start..],
            None => "",
        };
        compose_text(envelope, rest, appended)
    }
}

/// Parses a standalone value as one YAML document, for registrations and config files.
pub(crate) fn parse_yaml_file(path: &Path, text: &str) -> Result<Value, StoreError> {
    yaml::parse_document(text, &Limits::DEFAULT).map_err(|e| StoreError::malformed(path, e.into()))
}

/// The envelope whose YAML text is `text` (of the file at `path`, for errors). Parsed once per
/// text in this process: a listing reads every waiting thread's envelope each time (a queue's
/// workers list many times a second), and nearly all of them are the text already parsed the
/// last time; YAML parsing was most of a listing's CPU.
pub(crate) fn parse_envelope(path: &Path, text: &str) -> Result<Envelope, StoreError> {
    parsed_envelopes::get_or_parse(text, |text| {
        let value = yaml::parse_document(text, &Limits::DEFAULT)
            .map_err(|e| StoreError::malformed(path, e.into()))?;
        Envelope::from_value(value).map_err(|e| StoreError::malformed(path, e))
    })
}

/// Envelopes already parsed, by their text. The key is the text's length and a keyed hash of
/// it (a per-process random key, so a sender cannot craft a text that collides with another
/// thread's); only good envelopes are kept, so a broken file is judged again each time.
/// Two generations bound it: once the newer holds 8,192 envelopes it becomes the older and
/// the older is dropped, so texts no longer read (threads rewritten since, or
/// moved) age out, and at most twice that many are kept (about 10 MiB).
mod parsed_envelopes {
    use std::collections::HashMap;
    use std::hash::{BuildHasher as _, RandomState};
    use std::sync::{Mutex, OnceLock};

    use crate::protocol::envelope::Envelope;

    const GENERATION: usize = 8192;

    type Key = (u64, usize);

    #[derive(Default)]
    struct Generations {
        newer: HashMap<Key, Envelope>,
        older: HashMap<Key, Envelope>,
    }

    impl Generations {
        fn keep(&mut self, key: Key, envelope: Envelope) {
            if self.newer.len() >= GENERATION {
                self.older = std::mem::take(&mut self.newer);
            }
            self.newer.insert(key, envelope);
        }
    }

    static PARSED: OnceLock<(RandomState, Mutex<Generations>)> = OnceLock::new();

    pub(super) fn get_or_parse<E>(
        text: &str,
        parse: impl FnOnce(&str) -> Result<Envelope, E>,
    ) -> Result<Envelope, E> {
        let (hasher, generations) = PARSED.get_or_init(Default::default);
        let key = (hasher.hash_one(text), text.len());
        {
            let mut g = match generations.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            if let Some(envelope) = g.newer.get(&key) {
                return Ok(envelope.clone());
            }
            if let Some(envelope) = g.older.remove(&key) {
                let out = envelope.clone();
                g.keep(key, envelope);
                return Ok(out);
            }
        }
        let envelope = parse(text)?;
        let mut g = match generations.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.keep(key, envelope.clone());
        Ok(envelope)
    }
}
