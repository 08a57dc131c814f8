//! Who is calling: API keys for agents and executors (shown once, stored as SHA-256 hashes,
//! compared in constant time) and presigned links for one executor on one thread.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::exchange::{Error, Exchange, Sender};
use crate::links::{self, Action, Grant, LinkError};
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Message;
use crate::store::Store;
use crate::store::keys::{KeyRecord, KeysStamp};

pub use crate::protocol::rules::Role;

/// The role an operator key's record names (`mess token operator ID`).
pub const OPERATOR_ROLE: &str = "operator";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The agent or executor id it acts as.
    pub id: String,
    /// What it is.
    pub role: Role,
    /// Where the requests it makes report their changes when they name no callback of their
    /// own (an agent key made with `--callback`).
    pub callback: Option<String>,
}

/// The key records as last read, with the stamp of the file they came from: a server checks
/// keys on every request, and re-reading the file each time cost more than the request.
#[derive(Debug, Default)]
pub(crate) struct KeyCache {
    last: Mutex<Option<Cached>>,
}

/// Records with the stamp they were read at, and when that stamp was last confirmed.
type Cached = (KeysStamp, Arc<Vec<KeyRecord>>, Instant);

/// Who a caller is: API keys issued and checked, and presigned links minted, checked and
/// followed (short links too). One of the parts `Exchange` hands out ([`Exchange::auth`]).
#[derive(Clone, Copy)]
pub struct Auth<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// Keys and links: who a caller is.
    pub fn auth(&self) -> Auth<'_> {
        Auth { ex: self }
    }
}

/// With a database, how long the records are used without asking whether they changed: asking
/// is a round trip per request. A key issued meanwhile is found at once (a key no record matches
/// makes the next look fresh), and a record deleted by hand stops working within this time.
const DATABASE_KEYS_FRESH: Duration = Duration::from_secs(1);

impl KeyCache {
    /// The current records: the cached ones while the file's stamp is unchanged (with a
    /// database, checked at most every [`DATABASE_KEYS_FRESH`] unless `fresh`).
    fn records(&self, store: &Store, fresh: bool) -> Result<Arc<Vec<KeyRecord>>, Error> {
        let lock = || match self.last.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !fresh
            && store.is_shared_by_nodes()
            && let Some((_, records, checked)) = lock().as_ref()
            && checked.elapsed() < DATABASE_KEYS_FRESH
        {
            return Ok(records.clone());
        }
        // Stamp first: a file replaced between the two reads is read again next time.
        let Some(stamp) = store.keys_stamp()? else {
            return Ok(Arc::new(Vec::new()));
        };
        let mut last = lock();
        if let Some((seen, records, checked)) = last.as_mut()
            && *seen == stamp
        {
            *checked = Instant::now();
            return Ok(records.clone());
        }
        let records = Arc::new(store.key_records()?);
        *last = Some((stamp, records.clone(), Instant::now()));
        Ok(records)
    }
}

/// The prefix of every key, so that secret scanners and people recognise one.
const KEY_PREFIX: &str = "mess_";
/// Random bytes in a key.
const KEY_BYTES: usize = 32;

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key_hash(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

fn link_error(e: LinkError) -> Error {
    match e {
        LinkError::OtherThread => Error::Forbidden {
            message: e.to_string(),
        },
        LinkError::WeakSecret => Error::Misconfigured {
            message: "the link secret (MESS_SECRET) is shorter than 32 bytes; set a longer one, or unset it to use the home's generated secret".to_owned(),
        },
        LinkError::Expired | LinkError::Invalid => Error::Unauthorized {
            message: e.to_string(),
        },
    }
}

impl Auth<'_> {
    /// Makes an API key for `id` acting as `role`; the key is returned once and only its hash
    /// is kept.
    pub fn issue_key(&self, role: Role, id: &str) -> Result<String, Error> {
        self.issue_key_with(role, id, None)
    }

    /// [`Auth::issue_key`] for an agent key whose requests report their changes to
    /// `callback` unless they name their own; the URL is held to the operator's allow-list
    /// as a request's `callback` is.
    pub fn issue_key_with(
        &self,
        role: Role,
        id: &str,
        callback: Option<&str>,
    ) -> Result<String, Error> {
        self.issue_record(role.as_str(), id, callback)
    }

    /// Makes an operator key for `id`: it opens the operator's routes (`/metrics`, the
    /// dashboard's API) and nothing else; agent and executor routes answer it as an unknown key.
    pub fn issue_operator_key(&self, id: &str) -> Result<String, Error> {
        self.issue_record(OPERATOR_ROLE, id, None)
    }

    fn issue_record(&self, role: &str, id: &str, callback: Option<&str>) -> Result<String, Error> {
        let callback = callback.map(str::trim).filter(|c| !c.is_empty());
        if let Some(url) = callback {
            if role != Role::Agent.as_str() {
                return Err(ProtocolError::invalid(
                    "callback",
                    "only an agent key has a callback (executors hear of work through notify)",
                )
                .into());
            }
            self.ex
                .settings()
                .dispatch
                .webhook_allow
                .check(url)
                .map_err(|why| ProtocolError::invalid("callback", why))?;
        }
        if crate::store::ledger::reserved_account(id) {
            return Err(ProtocolError::invalid(
                "id",
                format!("{id:?} names an account of the shells ledger; choose another id"),
            )
            .into());
        }
        if ThreadRef::parse(id).is_err() {
            return Err(ProtocolError::invalid(
                "id",
                format!("{id:?} is not a usable {role} id (letters, digits, '.', '_', ':' and '-', starting with a letter or digit)"),
            )
            .into());
        }
        let key = format!(
            "{KEY_PREFIX}{}",
            hex(&self.ex.store().random_bytes(KEY_BYTES)?)
        );
        self.ex.store().add_key_record(KeyRecord {
            hash: key_hash(&key),
            principal: id.to_owned(),
            role: role.to_owned(),
            created: crate::protocol::time::format_timestamp(&self.ex.now()),
            callback: callback.map(str::to_owned),
        })?;
        Ok(key)
    }

    /// The principal of an API key, or `None` for a key the exchange never issued. Every stored
    /// hash is compared, in constant time, whether or not one matched already.
    pub fn authenticate(&self, key: &str) -> Result<Option<Principal>, Error> {
        Ok(self.record_of(key)?.and_then(|record| {
            Role::parse(&record.role).map(|role| Principal {
                id: record.principal,
                role,
                callback: record.callback,
            })
        }))
    }

    /// The operator id of an operator key (see [`Auth::issue_operator_key`]), or `None` for
    /// any other key.
    pub fn authenticate_operator(&self, key: &str) -> Result<Option<String>, Error> {
        Ok(self
            .record_of(key)?
            .filter(|r| r.role == OPERATOR_ROLE)
            .map(|r| r.principal))
    }

    /// The record of the key `key`. Every stored hash is compared, in constant time, whether
    /// or not one matched already; in tier 1 a key another node issued since the records were
    /// last read is looked up afresh.
    fn record_of(&self, key: &str) -> Result<Option<KeyRecord>, Error> {
        let presented = key_hash(key.trim());
        let find = |records: &[KeyRecord]| {
            let mut found = None;
            for record in records {
                let same: bool = record.hash.as_bytes().ct_eq(presented.as_bytes()).into();
                if same && found.is_none() {
                    found = Some(record.clone());
                }
            }
            found
        };
        match find(&self.ex.keys.records(self.ex.store(), false)?) {
            Some(found) => Ok(Some(found)),
            None if self.ex.store().is_shared_by_nodes() => {
                Ok(find(&self.ex.keys.records(self.ex.store(), true)?))
            }
            None => Ok(None),
        }
    }

    /// Mints a presigned link token for `executor` on `thread`, valid for `ttl_seconds`.
    pub fn mint_link(
        &self,
        thread: &ThreadRef,
        executor: &str,
        actions: &[Action],
        ttl_seconds: i64,
    ) -> Result<String, Error> {
        self.mint_link_via(thread, executor, actions, ttl_seconds, None)
    }

    /// [`Auth::mint_link`] for a link sent through `via` (a notification channel), which
    /// the messages sent through it name as their `channel`.
    pub fn mint_link_via(
        &self,
        thread: &ThreadRef,
        executor: &str,
        actions: &[Action],
        ttl_seconds: i64,
        via: Option<&str>,
    ) -> Result<String, Error> {
        // The thread must exist: a link to nothing helps nobody.
        self.ex.store().envelope(thread)?;
        if ttl_seconds <= 0 {
            return Err(ProtocolError::invalid("ttl", "must be positive").into());
        }
        let now = self.ex.now().timestamp();
        let grant = Grant {
            thread: thread.to_string(),
            executor: executor.to_owned(),
            actions: if actions.is_empty() {
                Action::ALL.to_vec()
            } else {
                actions.to_vec()
            },
            exp: now.saturating_add(ttl_seconds),
            iat: now,
            via: via.map(str::to_owned),
            iss: Some(self.ex.settings().dispatch.issuer().to_owned()),
            aud: self.ex.store().exchange_id()?,
        };
        links::mint(&self.link_secret()?, &grant).map_err(link_error)
    }

    /// Whose links this exchange accepts: those it issues under its public URL (`iss`) for its
    /// exchange id (`aud`).
    fn link_issuer<'a>(&'a self, audience: &'a str) -> links::Expected<'a> {
        links::Expected {
            issuer: self.ex.settings().dispatch.issuer(),
            audience,
        }
    }

    /// Checks a presigned link token for `thread` and returns what it grants.
    pub fn check_link(&self, token: &str, thread: &ThreadRef) -> Result<Grant, Error> {
        let audience = self.ex.store().exchange_id()?;
        links::verify(
            &self.link_secret()?,
            &self.link_issuer(&audience),
            token,
            thread.as_str(),
            self.ex.now().timestamp(),
        )
        .map_err(link_error)
    }

    /// Checks a presigned link's token on its own (signature, expiry) and returns its grant,
    /// for the reference design's client calls that carry it as a bearer token
    /// (`POST /mess`, `GET /mess/{ref}`).
    pub fn check_link_token(&self, token: &str) -> Result<Grant, Error> {
        let audience = self.ex.store().exchange_id()?;
        links::verify_any(
            &self.link_secret()?,
            &self.link_issuer(&audience),
            token,
            self.ex.now().timestamp(),
        )
        .map_err(link_error)
    }

    /// Follows a short link (`/r/{code}`, sent by SMS): the thread and the token its code
    /// stands for. Unknown, expired and malformed codes, and codes whose token no longer
    /// checks, get one answer.
    pub fn follow_short_link(&self, code: &str) -> Result<(String, String), Error> {
        let gone = || Error::not_found("no such link (it may have expired)");
        let token = self
            .ex
            .store()
            .short_link(code, self.ex.now().timestamp())?
            .ok_or_else(gone)?;
        let grant = self.check_link_token(&token).map_err(|_| gone())?;
        Ok((grant.thread, token))
    }

    /// Submits `message` through a presigned link: every payload must be a status or a
    /// response about the link's thread, of an action the link allows, and it is sent as the
    /// link's executor. The exchange's own rules (eligibility, transitions) then apply as for
    /// any executor.
    pub fn submit_with_link(&self, message: Message, grant: &Grant) -> Result<Message, Error> {
        grant.check_message(&message)?;
        self.ex.intake().submit(
            message,
            &Sender::principal(
                &Principal {
                    id: grant.executor.clone(),
                    role: Role::Executor,
                    callback: None,
                },
                // Only names the exchange itself signed reach a thread file.
                grant.channel(),
            ),
        )
    }

    /// `MESS_SECRET` when set (the settings carry it), else the home's generated secret.
    pub(super) fn link_secret(&self) -> Result<Vec<u8>, Error> {
        match self.ex.settings().link_secret() {
            Some(s) => Ok(s.as_bytes().to_vec()),
            None => Ok(self.ex.store().link_secret()?),
        }
    }
}
