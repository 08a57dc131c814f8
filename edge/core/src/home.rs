//! The Worker's exchange home: thread files, index entries, ref counters, keys and executor
//! registrations in the Durable Object's key-value storage, laid out so that each thread file
//! is one entry (written whole, as the native exchange writes a file) and the open threads'
//! envelopes can be listed without reading whole files. Every thread file written is also
//! named for R2 under the native layout (`state=received/REF.messe-af.yaml`, ...).

use std::collections::BTreeMap;

use mess_protocol::access::Roster;
use mess_protocol::config::ExecutorSpec;
use mess_protocol::envelope::Envelope;
use mess_protocol::error::ProtocolError;
use mess_protocol::ids::ThreadRef;
use mess_protocol::resolve::{IndexKey, Threads};
use mess_protocol::status::State;
use mess_protocol::thread_text;
use mess_protocol::value::Value;
use mess_protocol::yaml::{self, Limits};

use crate::failure::Failure;
use crate::kv::Kv;

/// `t/REF`: the folder (`received`, ...), a line break, then the whole thread file.
const THREAD: &str = "t/";
/// `o/REF`: for a thread in `received` or `executing`, its folder, a line break and its
/// envelope document (what listings and queue positions read).
const OPEN: &str = "o/";
/// `n/YYYY-MM-DD`: the last serial handed out that day.
const SERIAL: &str = "n/";
/// `i/WHO\u{1f}ENTRY`: a sender's index entry (as the native exchange names them).
const INDEX: &str = "i/";
/// `k/SHA256`: a key's role and principal (`agent alice`).
const KEY: &str = "k/";
/// `x/ID`: an executor's registration, as YAML.
const EXECUTOR: &str = "x/";
/// `e/id`: this exchange's id, the audience of its presigned links (made with the first link).
const EXCHANGE_ID: &str = "e/id";
/// `d/SECONDS REF`: a thread whose deadline falls then (seconds since the epoch, 12 digits, so
/// the keys sort by time), written with the thread while its deadline applies.
const DEADLINE: &str = "d/";
/// `d-next`: the earliest deadline in `d/` (seconds), so a request learns in one read whether
/// any is due.
const DEADLINE_NEXT: &str = "d-next";

/// What R2 must hold after this request: thread files to put, and keys to delete (a thread
/// that moved to another folder).
#[derive(Debug, Default)]
pub struct Mirror {
    /// (R2 key, file text).
    pub put: Vec<(String, String)>,
    /// R2 keys.
    pub delete: Vec<String>,
}

/// The home over one request's storage.
pub struct Home<'a> {
    kv: &'a mut dyn Kv,
    /// What R2 must be told.
    pub mirror: Mirror,
    /// The notices this request owes (the Durable Object queues them once it commits).
    pub notices: Vec<crate::notice::Delivery>,
    /// The Worker's settings for notices.
    pub dispatch: crate::notice::Dispatch,
    /// The exchange's public URL (links in notices point there).
    pub issuer: String,
    /// This request's random hex (for an exchange id made on the way).
    pub entropy: String,
}

/// The R2 key of thread `r` in `state`: the native home's relative path.
pub fn object_key(state: State, r: &ThreadRef) -> String {
    format!("state={}/{}.messe-af.yaml", state.as_str(), r.as_str())
}

fn state_named(name: &str) -> Option<State> {
    State::ALL.into_iter().find(|s| s.as_str() == name)
}

fn index_key(who: &str, key: IndexKey<'_>) -> String {
    let entry = match key {
        IndexKey::Last => "last".to_owned(),
        IndexKey::LastWork => "work-last".to_owned(),
        IndexKey::Held => "work-held".to_owned(),
        IndexKey::WorkId(id) => format!("wid-{id}"),
        IndexKey::ClientId(id) => format!("id-{id}"),
        IndexKey::Suggestion(id) => format!("sug-{id}"),
    };
    // The separator cannot occur in ids (control characters are refused in messages).
    format!("{INDEX}{who}\u{1f}{entry}")
}

/// The envelope of a thread file's text (its first document).
pub fn envelope_of(text: &str) -> Result<Envelope, Failure> {
    let (head, _) = thread_text::pieces(text);
    let value = yaml::parse_document(head, &Limits::DEFAULT).map_err(ProtocolError::from)?;
    Ok(Envelope::from_value(value)?)
}

impl<'a> Home<'a> {
    /// The home in `kv`.
    pub fn new(kv: &'a mut dyn Kv) -> Home<'a> {
        Home {
            kv,
            mirror: Mirror::default(),
            notices: Vec::new(),
            dispatch: crate::notice::Dispatch::default(),
            issuer: String::new(),
            entropy: String::new(),
        }
    }

    /// The folder and text of thread `r`.
    pub fn read(&self, r: &ThreadRef) -> Option<(State, String)> {
        let stored = self.kv.get(&format!("{THREAD}{}", r.as_str()))?;
        let (folder, text) = stored.split_once('\n')?;
        Some((state_named(folder)?, text.to_owned()))
    }

    /// Writes thread `r` whole: its file in the folder its status belongs in, its open entry,
    /// and what R2 must do (put the file, drop it from the folder it left).
    pub fn write(&mut self, envelope: &Envelope, text: String) {
        let r = &envelope.thread_ref;
        let state = envelope.status.state();
        if let Some((before, _)) = self.read(r)
            && before != state
        {
            self.mirror.delete.push(object_key(before, r));
        }
        self.kv.put(
            &format!("{THREAD}{}", r.as_str()),
            &format!("{}\n{text}", state.as_str()),
        );
        let open_key = format!("{OPEN}{}", r.as_str());
        if matches!(state, State::Received | State::Executing) {
            let (head, _) = thread_text::pieces(&text);
            self.kv
                .put(&open_key, &format!("{}\n{head}", state.as_str()));
        } else {
            self.kv.delete(&open_key);
        }
        self.mirror.put.push((object_key(state, r), text));
        // A deadline that applies in this status is kept where the next sweep finds it.
        if let Some((at, _)) = envelope.deadline() {
            let at = at.timestamp().max(0);
            self.kv
                .put(&format!("{DEADLINE}{at:012} {}", r.as_str()), r.as_str());
            if self.next_deadline().is_none_or(|next| at < next) {
                self.kv.put(DEADLINE_NEXT, &at.to_string());
            }
        }
    }

    /// The earliest deadline kept (seconds since the epoch), if any.
    pub fn next_deadline(&self) -> Option<i64> {
        self.kv.get(DEADLINE_NEXT)?.parse().ok()
    }

    /// Takes the threads whose deadlines are due at `now` (seconds) out of the deadline index,
    /// and moves the earliest deadline left to the front.
    pub fn take_due(&mut self, now: i64) -> Vec<ThreadRef> {
        if self.next_deadline().is_none_or(|next| next > now) {
            return Vec::new();
        }
        let mut due = Vec::new();
        let mut next = None;
        for (key, thread) in self.kv.scan(DEADLINE) {
            let at = key[DEADLINE.len()..]
                .split(' ')
                .next()
                .and_then(|t| t.parse::<i64>().ok());
            match at {
                Some(at) if at > now => {
                    // Keys sort by time: this is the earliest one left.
                    next = Some(at);
                    break;
                }
                _ => {
                    self.kv.delete(&key);
                    if let Ok(r) = ThreadRef::parse(&thread) {
                        due.push(r);
                    }
                }
            }
        }
        match next {
            Some(at) => self.kv.put(DEADLINE_NEXT, &at.to_string()),
            None => self.kv.delete(DEADLINE_NEXT),
        }
        due
    }

    /// The next `n` refs of `date` (`YYYY-MM-DD-NNN`).
    pub fn allocate_refs(&mut self, date: chrono::NaiveDate, n: usize) -> Vec<ThreadRef> {
        let key = format!("{SERIAL}{}", date.format("%Y-%m-%d"));
        let mut last: u64 = self
            .kv
            .get(&key)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut refs = Vec::with_capacity(n);
        while refs.len() < n {
            last += 1;
            let candidate = ThreadRef::from_serial(date, last);
            if self.read(&candidate).is_none() {
                refs.push(candidate);
            }
        }
        self.kv.put(&key, &last.to_string());
        refs
    }

    /// Points index entries of `who` at `thread`; `last` only ever moves forward.
    pub fn remember(&mut self, who: &str, entries: &[(IndexKey<'_>, &ThreadRef)]) {
        for (key, thread) in entries {
            let k = index_key(who, *key);
            if matches!(key, IndexKey::Last | IndexKey::LastWork)
                && let Some(current) = self.kv.get(&k)
                && current.as_str() > thread.as_str()
            {
                continue;
            }
            self.kv.put(&k, thread.as_str());
        }
    }

    /// The principal of a key's hash: (role, id).
    pub fn key_holder(&self, hash: &str) -> Option<(String, String)> {
        let v = self.kv.get(&format!("{KEY}{hash}"))?;
        let (role, id) = v.split_once(' ')?;
        Some((role.to_owned(), id.to_owned()))
    }

    /// Stores a key's hash for `role` and `id`.
    pub fn put_key(&mut self, hash: &str, role: &str, id: &str) {
        self.kv
            .put(&format!("{KEY}{hash}"), &format!("{role} {id}"));
    }

    /// This exchange's id, once a link has been made.
    pub fn exchange_id(&self) -> Option<String> {
        self.kv.get(EXCHANGE_ID)
    }

    /// This exchange's id, made from `fresh` (random hex) the first time.
    pub fn exchange_id_or_new(&mut self, fresh: &str) -> String {
        if let Some(id) = self.exchange_id() {
            return id;
        }
        let id = format!("edge-{}", &fresh[..fresh.len().min(16)]);
        self.kv.put(EXCHANGE_ID, &id);
        id
    }

    /// The stored registration of executor `id`.
    pub fn registration(&self, id: &str) -> Option<Value> {
        let text = self.kv.get(&format!("{EXECUTOR}{id}"))?;
        yaml::parse_document(&text, &Limits::DEFAULT).ok()
    }

    /// Stores an executor's registration.
    pub fn put_registration(&mut self, id: &str, value: &Value) {
        self.kv.put(
            &format!("{EXECUTOR}{id}"),
            &mess_protocol::emit::to_yaml(value),
        );
    }

    /// The executors registered here.
    pub fn roster(&self) -> EdgeRoster {
        let mut executors = BTreeMap::new();
        for (key, text) in self.kv.scan(EXECUTOR) {
            let id = &key[EXECUTOR.len()..];
            let Ok(value) = yaml::parse_document(&text, &Limits::DEFAULT) else {
                continue;
            };
            if let Ok(spec) = ExecutorSpec::from_entry(id, value, "executor") {
                executors.insert(id.to_owned(), spec);
            }
        }
        EdgeRoster { executors }
    }

    /// The envelopes of the open threads in `states` (`received`, `executing`).
    pub fn open_envelopes(&self, states: &[State]) -> Vec<Envelope> {
        let mut out = Vec::new();
        for (_, v) in self.kv.scan(OPEN) {
            let Some((folder, head)) = v.split_once('\n') else {
                continue;
            };
            if !state_named(folder).is_some_and(|s| states.contains(&s)) {
                continue;
            }
            if let Ok(value) = yaml::parse_document(head, &Limits::DEFAULT)
                && let Ok(env) = Envelope::from_value(value)
            {
                out.push(env);
            }
        }
        out
    }

    /// The envelopes of every thread in `states`: the open ones from their entries, the
    /// others from their files.
    pub fn envelopes(&self, states: &[State]) -> Vec<Envelope> {
        let open: Vec<State> = states
            .iter()
            .copied()
            .filter(|s| matches!(s, State::Received | State::Executing))
            .collect();
        let mut out = self.open_envelopes(&open);
        if states
            .iter()
            .any(|s| matches!(s, State::Finished | State::Canceled))
        {
            for (_, stored) in self.kv.scan(THREAD) {
                let Some((folder, text)) = stored.split_once('\n') else {
                    continue;
                };
                if state_named(folder).is_some_and(|s| !open.contains(&s) && states.contains(&s))
                    && !matches!(
                        state_named(folder),
                        Some(State::Received | State::Executing)
                    )
                    && let Ok(env) = envelope_of(text)
                {
                    out.push(env);
                }
            }
        }
        out
    }

    /// Threads in `executing` held by each executor (the load routing ranks by).
    pub fn active_claims(&self) -> BTreeMap<String, usize> {
        let mut load = BTreeMap::new();
        for env in self.open_envelopes(&[State::Executing]) {
            if let Some(x) = env.executor {
                *load.entry(x).or_insert(0) += 1;
            }
        }
        load
    }
}

impl Threads for Home<'_> {
    type Error = Failure;

    fn lookup(&self, who: &str, key: IndexKey<'_>) -> Result<Option<ThreadRef>, Failure> {
        Ok(self
            .kv
            .get(&index_key(who, key))
            .and_then(|r| ThreadRef::parse(&r).ok()))
    }

    fn envelope(&self, r: &ThreadRef) -> Result<Option<Envelope>, Failure> {
        match self.read(r) {
            Some((_, text)) => Ok(Some(envelope_of(&text)?)),
            None => Ok(None),
        }
    }

    fn exists(&self, r: &ThreadRef) -> Result<bool, Failure> {
        Ok(self.kv.get(&format!("{THREAD}{}", r.as_str())).is_some())
    }

    fn open(&self, states: &[State]) -> Result<Vec<Envelope>, Failure> {
        Ok(self.open_envelopes(states))
    }

    fn not_found(message: String) -> Failure {
        Failure::not_found(message)
    }

    fn is_not_found(e: &Failure) -> bool {
        e.status == 404
    }

    fn in_payload(e: Failure, path: &str) -> Failure {
        if e.status == 404 {
            Failure::not_found(format!("{path}: {}", e.message))
        } else {
            e
        }
    }
}

/// The executors registered at the edge, as the rules and routing see them.
#[derive(Debug, Default)]
pub struct EdgeRoster {
    /// By id.
    pub executors: BTreeMap<String, ExecutorSpec>,
}

impl Roster for EdgeRoster {
    fn is_executor(&self, id: &str) -> bool {
        self.executors.contains_key(id)
    }

    fn missing(&self, id: &str, requires: &[String]) -> Vec<String> {
        let offered = self
            .executors
            .get(id)
            .map(ExecutorSpec::capability_ids)
            .unwrap_or_default();
        requires
            .iter()
            .filter(|r| !offered.contains(&r.as_str()))
            .cloned()
            .collect()
    }
}
