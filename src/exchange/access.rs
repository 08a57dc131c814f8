//! Who may see and do what: the one place that decides it. A thread is seen by its requestor,
//! the executor that claimed it, and, while it is pending, every registered executor that holds
//! what it requires; messages, dependencies, suggestions, presigned links and mailboxes each
//! have their rule here. `http`, `mcp` and `cli` ask these functions and never decide
//! themselves (a tidy test keeps it so), and whatever a caller may not see answers exactly
//! like something that does not exist.

use crate::exchange::auth::Role;
use crate::exchange::directory::Origin;
use crate::exchange::{Error, Exchange, Sender};
use crate::links::{Action, Grant};
use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::protocol::value::Value;
use crate::store::thread::ThreadFile;

/// What a caller may see and do, decided in one place: threads read, listed and matched for
/// a principal or a link holder, mailboxes, and mail. One of the parts `Exchange` hands out
/// ([`Exchange::access`]).
#[derive(Clone, Copy)]
pub struct Access<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// Access: what a caller may see and do.
    pub fn access(&self) -> Access<'_> {
        Access { ex: self }
    }
}

pub use crate::protocol::access::{
    OFFERED_TO, ThreadFilter, link_reads, may_act_now, may_address, may_depend_on, may_see, party,
    quick_verdict,
};

/// Whether an executor's notices may be written into `mailbox` (its `notify: {mail: ...}`): an
/// entry the operator chose may name any mailbox; one a key holder registered only the
/// executor's own, so nobody can leave tasks in another session's mailbox.
pub fn may_notify_mailbox(executor: &str, mailbox: &str, by_key: bool) -> bool {
    !by_key || mailbox == executor
}

/// Most unread letters one principal may leave in one mailbox.
pub const MAX_UNREAD_FROM_ONE: usize = 100;

/// What a mail tool does with a mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailUse {
    /// List or read without moving anything.
    Read,
    /// Mark a message read: in a session or tag mailbox the claim (it moves to `read/`), in
    /// `__broadcast` a record for the reader alone.
    Claim,
    /// Move a message to `archive/`.
    Archive,
}

/// The viewer a query runs as: nobody for the operator (local, no role), who sees the whole
/// home, else the principal, who sees only its threads.
pub fn query_viewer(who: &Sender) -> Option<&str> {
    who.role.map(|_: Role| who.id.as_str())
}

impl Access<'_> {
    /// The thread `reference` names for `who`, if `who` may see it; a thread they may not see
    /// is reported exactly as one that does not exist.
    pub fn thread_for(&self, reference: &str, who: &str) -> Result<ThreadFile, Error> {
        let _heads = crate::store::HeadMemo::open();
        // Who may see it is decided on the envelope, before the thread is settled or read in
        // full: a hidden thread costs no more, and fails no differently, than an absent one.
        let thread = self.ex.resolve(reference, who)?;
        let directory = self.ex.directory();
        match self.ex.store().envelope(&thread) {
            Ok((env, _)) if may_see(who, &env, &directory) => {}
            Ok(_) | Err(crate::store::error::StoreError::NotFound { .. }) => {
                return Err(Error::no_thread(reference));
            }
            Err(_) => return Err(Error::no_thread(reference)),
        }
        let file = self.ex.thread(thread.as_str(), who)?;
        // Reading settles an overdue thread first, which may hide it (an expired thread is no
        // longer pending); look again at what was read.
        if may_see(who, &file.envelope, &directory) {
            Ok(file)
        } else {
            Err(Error::no_thread(reference))
        }
    }

    /// The envelopes `who` may see in `states` (waiting work first in queue order, then the
    /// rest newest `updated` first).
    pub fn threads_for(&self, who: &str, states: &[State]) -> Result<Vec<Envelope>, Error> {
        let (listing, _) = self.ex.list(states, false)?;
        let directory = self.ex.directory();
        let mut out: Vec<Envelope> = listing
            .into_iter()
            .map(|(env, _)| env)
            .filter(|env| may_see(who, env, &directory))
            .collect();
        out.sort_by(crate::protocol::access::listing_order);
        Ok(out)
    }

    /// The envelopes `who` may see that match `filter`, in listing order, at most
    /// `filter.limit` of them.
    pub fn threads_matching(
        &self,
        who: &str,
        filter: &ThreadFilter,
    ) -> Result<Vec<Envelope>, Error> {
        let folders = filter.folders();
        Ok(self
            .threads_for(who, &folders)?
            .into_iter()
            .filter(|e| filter.matches(e))
            .take(filter.limit)
            .collect())
    }

    /// Whether `who` may see the thread of `env` (for filtering change events); callers with
    /// an async context ask [`quick_verdict`] first and call this off the async workers only
    /// when it has no answer.
    pub fn may_see(&self, who: &str, env: &Envelope) -> bool {
        quick_verdict(who, env).unwrap_or_else(|| may_see(who, env, &self.ex.directory()))
    }

    /// Checks a presigned link for reading `thread`: valid, allowing `read`, and its executor
    /// still one who may read the thread (nobody else took it). A link whose executor may no
    /// longer read answers like a thread that does not exist.
    pub fn link_for_reading(&self, token: &str, thread: &ThreadRef) -> Result<Grant, Error> {
        let grant = self.ex.auth().check_link(token, thread)?;
        if !grant.allows(Action::Read) {
            return Err(Error::Forbidden {
                message: "this link does not allow read".to_owned(),
            });
        }
        let (env, _) = self.ex.store().envelope(thread)?;
        if !link_reads(&grant.executor, &env) {
            return Err(Error::no_thread(thread.as_str()));
        }
        Ok(grant)
    }

    /// The thread a presigned link reads, with what the link grants (see
    /// [`Access::link_for_reading`]).
    pub fn read_with_link(
        &self,
        token: &str,
        thread: &ThreadRef,
    ) -> Result<(ThreadFile, Grant), Error> {
        let grant = self.link_for_reading(token, thread)?;
        let file = self.ex.thread(thread.as_str(), &grant.executor)?;
        // Settling on read may have changed hands; look again at what was read.
        if !link_reads(&grant.executor, &file.envelope) {
            return Err(Error::no_thread(thread.as_str()));
        }
        Ok((file, grant))
    }

    /// Whether a presigned link for `executor` on `thread` would work, for the operator about to
    /// make one (`mess link`): the executor must be registered (a misspelt id gets the nearest
    /// registered one as a suggestion) and one who may see the thread: its taker, or, while
    /// nobody holds it, one holding what it requires. Otherwise its "Take this" would answer
    /// like a thread that does not exist.
    pub fn check_link_holder(&self, thread: &ThreadRef, executor: &str) -> Result<(), Error> {
        let directory = self.ex.directory();
        if directory.executor(executor).is_none() {
            let nearest = directory
                .executors
                .iter()
                .map(|e| (strsim::jaro_winkler(executor, &e.id), e.id.as_str()))
                .filter(|(score, _)| *score > 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, id)| format!("; did you mean {id}?"))
                .unwrap_or_default();
            return Err(Error::NotFound {
                message: format!("no executor named {executor:?} is registered{nearest}"),
            });
        }
        let (env, _) = self.ex.store().envelope(thread)?;
        if may_see(executor, &env, &*directory) {
            return Ok(());
        }
        let message = match env.executor.as_deref() {
            Some(taker) if taker != executor => {
                format!("{thread} is held by {taker}: a link for {executor} would not open it")
            }
            _ if env.status != crate::protocol::status::Status::Pending => format!(
                "{thread} is {} and {executor} never held it: a link would not open it",
                env.status.as_str()
            ),
            _ => {
                let lacks = directory.missing(
                    directory.executor(executor).expect("checked above"),
                    &env.requires,
                );
                format!(
                    "{executor} cannot take {thread}: it lacks {}",
                    if lacks.is_empty() {
                        "what the request requires".to_owned()
                    } else {
                        lacks.join(", ")
                    }
                )
            }
        };
        Err(Error::Forbidden { message })
    }

    /// Whether the holder of a link for `executor` may still follow `env`'s thread (its event
    /// stream ends when this turns false).
    pub fn link_follows(&self, executor: &str, env: &Envelope) -> bool {
        link_reads(executor, env)
    }

    /// The mailbox a mail tool acts on for `who` (its own when `mailbox` is empty). The operator
    /// (no role) reaches every mailbox. A principal with a role (a key, or `mess mcp` started as
    /// an agent) reaches its own mailbox, the tag mailboxes its registration names
    /// ([`Access::mail_tags`]; as the mail format's tag mailboxes, shared: reading one claims
    /// the message for all), and `__broadcast`, whose messages are for every session: each
    /// reader marks them read for itself alone, and none archives them. A mailbox `who` may not
    /// reach is refused with a reason: mailbox names are not secret, their messages are.
    pub fn mailbox_for(&self, who: &Sender, mailbox: &str, use_: MailUse) -> Result<String, Error> {
        let mailbox = if mailbox.trim().is_empty() {
            who.id.clone()
        } else {
            mailbox.trim().to_owned()
        };
        let Some(role) = who.role else {
            return Ok(mailbox);
        };
        let broadcast = crate::mail::BROADCAST;
        if mailbox == broadcast {
            if use_ == MailUse::Archive {
                return Err(Error::Forbidden {
                    message: format!(
                        "{broadcast} messages are for every session: read them and mark them read (for you alone), do not archive them"
                    ),
                });
            }
            return Ok(mailbox);
        }
        if mailbox == who.id || self.mail_tags(&who.id)?.contains(&mailbox) {
            return Ok(mailbox);
        }
        Err(Error::Forbidden {
            message: format!(
                "{} ({role}) may read only its own mailbox, {broadcast} and the tag mailboxes its registration names (tags:)",
                who.id
            ),
        })
    }

    /// The tag mailboxes `who` shares (the mail format's "sessions tagged worker read
    /// `.mail/worker/`"): the `tags:` of its executor entry, when the operator chose that entry
    /// (in `config.yaml`, or registered without a key), since a key holder who could tag itself
    /// could join any shared mailbox and take its tasks. A tag that is some principal's own name
    /// (a registered executor, or the holder of a key) is that principal's mailbox, as the
    /// format resolves names, and is never shared; nor is `__broadcast`, which needs no tag.
    pub fn mail_tags(&self, who: &str) -> Result<Vec<String>, Error> {
        let directory = self.ex.directory();
        let Some(spec) = directory.executor(who) else {
            return Ok(Vec::new());
        };
        if !matches!(
            directory.origin(who),
            Some(Origin::ConfigFile | Origin::Registration { by_key: false, .. })
        ) {
            return Ok(Vec::new());
        }
        let tags: Vec<String> = spec
            .extra
            .get("tags")
            .and_then(Value::as_seq)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::scalar_text)
            .filter(|t| {
                t != who
                    && t != crate::mail::BROADCAST
                    && crate::mail::check_mailbox(t).is_ok()
                    && directory.executor(t).is_none()
            })
            .collect();
        if tags.is_empty() {
            return Ok(tags);
        }
        let keys = self.ex.store().key_records()?;
        Ok(tags
            .into_iter()
            .filter(|t| keys.iter().all(|k| &k.principal != t))
            .collect())
    }

    /// Leaves `letter` in its mailbox for `who`. Anyone may write to any mailbox (that is what
    /// mail is for), but a principal with a role leaves at most [`MAX_UNREAD_FROM_ONE`] unread
    /// letters in one mailbox, so no key can fill another session's mailbox (or the disk).
    pub fn send_mail(&self, who: &Sender, letter: &crate::mail::Letter) -> Result<String, Error> {
        if who.role.is_some()
            && self.ex.mail().unread_from(&letter.to, &letter.from)? >= MAX_UNREAD_FROM_ONE
        {
            return Err(Error::Forbidden {
                message: format!(
                    "{} already has {MAX_UNREAD_FROM_ONE} unread messages from {} waiting; wait until they are read",
                    letter.to, letter.from
                ),
            });
        }
        Ok(self.ex.mail().send(letter)?)
    }
}
