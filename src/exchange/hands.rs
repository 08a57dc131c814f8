//! Work for many hands in the exchange: what it writes when enough people have answered or
//! decided (the rules are `mess-protocol`'s `hands`), who may decide an approval, and what an
//! approval covers: its scope, whether an action falls within it, and the record of each use.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::exchange::Exchange;
use crate::exchange::directory::Directory;
use crate::exchange::error::Error;
use crate::protocol::access;
use crate::protocol::envelope::{EXCHANGE, Envelope, MessageDoc};
use crate::protocol::hands::{self, APPROVAL_USE, Hands, Scope};
use crate::protocol::message::{Message, Payload};
use crate::protocol::request::Request;
use crate::protocol::status::Status;
use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::store::Edit;
use crate::store::thread::ThreadFile;

/// The executors who may decide the approval of `env`: those it names by id, and those
/// holding a capability it names (rungs of its ladder the offer reached included).
pub(crate) fn approvers(env: &Envelope, directory: &Directory) -> Vec<String> {
    if env.hands.approval.is_none() {
        return Vec::new();
    }
    named(&env.hands, access::rungs_reached(env), directory)
}

/// The registered executors `confirm_by` names (by id or by a capability they hold), who
/// confirm the claimant's `needs_confirmation`; the claimant itself never counts.
pub(crate) fn confirmers(env: &Envelope, directory: &Directory) -> Vec<String> {
    let mut people = named_confirmers(&env.hands, directory);
    people.retain(|id| env.executor.as_deref() != Some(id.as_str()));
    people
}

/// The registered executors `hands`'s `confirm_by` names, by id or by a capability they hold.
pub(crate) fn named_confirmers(hands: &Hands, directory: &Directory) -> Vec<String> {
    directory
        .executors
        .iter()
        .filter(|e| {
            let caps = e.capability_ids();
            hands.names_confirmer(&e.id, &|c: &str| caps.contains(&c))
        })
        .map(|e| e.id.clone())
        .collect()
}

/// The registered executors `hands` names on its approval or on its first `reached` rungs,
/// by id or by a capability they hold.
pub(crate) fn named(hands: &Hands, reached: usize, directory: &Directory) -> Vec<String> {
    directory
        .executors
        .iter()
        .filter(|e| {
            let caps = e.capability_ids();
            hands.names(&e.id, reached, &|c: &str| caps.contains(&c))
        })
        .map(|e| e.id.clone())
        .collect()
}

/// What the exchange writes after `appended` took `envelope` where it is now, when that
/// decides the thread: the aggregate of several answers, or an approval's outcome. `file` is
/// the thread before `appended`.
pub(crate) fn settle(
    envelope: &Envelope,
    file: &ThreadFile,
    appended: &[MessageDoc],
    directory: &Directory,
    now: Timestamp,
) -> Result<Option<MessageDoc>, Error> {
    if envelope.status.is_terminal() {
        return Ok(None);
    }
    if envelope.hands.decided_by().is_some() {
        if appended.iter().all(|d| d.from == EXCHANGE) {
            return Ok(None);
        }
        let able = if envelope.hands.approval.is_some() {
            approvers(envelope, directory)
        } else {
            confirmers(envelope, directory)
        };
        let possible = able
            .into_iter()
            .chain(envelope.hands.decisions.iter().map(|d| d.by.clone()))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        // The number needed is the request's, as written: the envelope is a cache, and a cache
        // edited to ask for fewer approvals or confirmations is not obeyed.
        let request = first_request(file)?;
        let written = Hands::read(&request, envelope.created, "request").map_err(Error::from)?;
        let mut decided = envelope.clone();
        decided.hands.approval = written.approval;
        decided.hands.confirm_by = written.confirm_by;
        return Ok(if decided.hands.approval.is_some() {
            let scope = scope_record(&request, envelope, now);
            hands::settle_approval(&decided, possible, Some(scope), now)
        } else {
            hands::settle_confirmation(&decided, possible, now)
        });
    }
    if envelope.hands.multi() {
        let mut docs = file.messages()?;
        docs.extend(appended.iter().cloned());
        return Ok(hands::settle_answers(envelope, &docs, false, now));
    }
    Ok(None)
}

/// What a thread asking for several answers writes at its deadline: `partial` with the
/// answers in, or `None` when none came (it expires as usual).
pub(crate) fn at_deadline(
    envelope: &Envelope,
    file: &ThreadFile,
    now: Timestamp,
) -> Result<Option<MessageDoc>, Error> {
    if !envelope.hands.multi() || envelope.hands.answered() == 0 {
        return Ok(None);
    }
    let docs = file.messages()?;
    Ok(hands::settle_answers(envelope, &docs, true, now))
}

/// The thread's request.
fn first_request(file: &ThreadFile) -> Result<Request, Error> {
    for doc in file.messages()? {
        for p in doc.message.payloads {
            if let Payload::Request(r) = p {
                return Ok(r);
            }
        }
    }
    Err(Error::Protocol(
        crate::protocol::error::ProtocolError::invalid("MESS", "the thread has no request"),
    ))
}

/// The body of the response that decides an approval: the protocol's confirmation entry,
/// `confirmation: {confirmed, details}`, for every adapter that decides.
pub fn decision_body(re: &str, approve: bool, reason: Option<String>) -> Map {
    let mut confirmation = Map::new();
    confirmation.insert("confirmed", Value::Bool(approve));
    confirmation.insert_opt("details", reason.map(Value::String));
    let mut entry = Map::new();
    entry.insert("confirmation", Value::Map(confirmation));
    let mut response = Map::new();
    response.insert("re", Value::str(re));
    response.insert("content", Value::Seq(vec![Value::Map(entry)]));
    response
}

/// The digest of approved parameters: `sha256:` and the hex of their canonical JSON.
pub fn parameters_digest(parameters: &Value) -> String {
    let digest = Sha256::digest(hands::canonical_json(parameters).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The record of what an approval granted at `granted` covers, as the final response holds it.
fn scope_record(request: &Request, env: &Envelope, granted: Timestamp) -> Value {
    let scope = Scope::of(request);
    let mut m = Map::new();
    m.insert("intent", Value::str(&env.intent));
    m.insert_opt(
        "parameters_digest",
        scope
            .parameters
            .as_ref()
            .map(|p| Value::str(parameters_digest(p))),
    );
    m.insert_opt("amount", scope.amount.map(Value::Float));
    m.insert("uses", Value::Int(i64::from(scope.uses)));
    m.insert("valid_from", Value::str(time::format_timestamp(&granted)));
    m.insert(
        "valid_until",
        Value::str(time::format_timestamp(&(granted + scope.window()))),
    );
    Value::Map(m)
}

/// An action an agent asks an approval about.
#[derive(Debug, Clone, Default)]
pub struct Action {
    /// The action's intent; must equal the approved request's intent when given.
    pub intent: Option<String>,
    /// The action's parameters; their digest must equal the approved one's.
    pub parameters: Option<Value>,
    /// What it spends or counts; at most the approved amount.
    pub amount: Option<f64>,
}

impl Action {
    /// Whether the agent named anything to check.
    pub fn is_empty(&self) -> bool {
        self.intent.is_none() && self.parameters.is_none() && self.amount.is_none()
    }
}

/// One decision, as an approval's record shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionView {
    /// Who decided.
    pub by: String,
    /// `approved` or `denied`.
    pub decision: &'static str,
    /// When.
    pub at: String,
    /// Through which channel.
    pub channel: Option<String>,
    /// The reason given.
    pub reason: Option<String>,
}

/// What an approval is and covers (`GET /approvals/{ref}`, `mess_approved`).
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalView {
    /// The thread.
    #[serde(rename = "ref")]
    pub thread: String,
    /// `pending`, `approved`, `denied` (declined, vetoed or unreachable), `expired` or
    /// `cancelled`.
    pub state: &'static str,
    /// Approvals needed.
    pub need: u32,
    /// Whether one denial ends it.
    pub deny_vetoes: bool,
    /// When it expires if undecided.
    pub expires: Option<String>,
    /// Every decision, in order.
    pub decisions: Vec<DecisionView>,
    /// Who may still decide (while pending).
    pub waiting_for: Vec<String>,
    /// What it covers (once approved).
    pub scope: Option<ScopeView>,
    /// Whether it covers the action asked about (`None` when no action was named).
    pub covers: Option<bool>,
    /// Why it does not cover it.
    pub why: Option<String>,
    /// Whether this call used it (`use`).
    pub used_now: bool,
}

impl ApprovalView {
    /// The view as a value, for YAML and JSON answers.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or(Value::Null)
    }
}

/// An approval's scope as granted.
#[derive(Debug, Clone, Serialize)]
pub struct ScopeView {
    /// The approved request's intent.
    pub intent: String,
    /// The digest of the approved parameters.
    pub parameters_digest: Option<String>,
    /// The most an action may spend or count.
    pub amount: Option<f64>,
    /// How many actions it covers.
    pub uses: u32,
    /// How many it has covered.
    pub used: u32,
    /// From when.
    pub valid_from: String,
    /// Until when.
    pub valid_until: String,
}

/// Approvals: what one is, whether it covers an action, and recording a use. One of the
/// parts `Exchange` hands out ([`Exchange::approvals`]).
#[derive(Clone, Copy)]
pub struct Approvals<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// Approvals: their record, scope and uses.
    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { ex: self }
    }
}

impl Approvals<'_> {
    /// The approval `reference` names for `who` (who must be able to see its thread), and
    /// whether it covers `action`; with `use_it`, a covered action uses it once (only its
    /// requestor may), written before the answer.
    pub fn check(
        &self,
        reference: &str,
        who: &str,
        action: &Action,
        use_it: bool,
    ) -> Result<ApprovalView, Error> {
        let file = self.ex.access().thread_for(reference, who)?;
        if file.envelope.hands.approval.is_none() {
            return Err(Error::NotFound {
                message: format!("{} does not ask for approval", file.envelope.thread_ref),
            });
        }
        if use_it && file.envelope.requestor != who {
            return Err(Error::Forbidden {
                message: format!(
                    "only the requestor of {} may use its approval",
                    file.envelope.thread_ref
                ),
            });
        }
        let now = self.ex.now();
        let directory = self.ex.directory();
        let view = self.view(&file, action, now, &directory)?;
        if !use_it || view.covers != Some(true) {
            if use_it && view.covers.is_none() {
                return Err(crate::protocol::error::ProtocolError::invalid(
                    "use",
                    "name the action to use the approval for (intent, parameters, amount)",
                )
                .into());
            }
            return Ok(view);
        }
        let thread = file.envelope.thread_ref.clone();
        let noted = describe(action);
        let used = self.ex.store().modify(&thread, |t| -> Result<_, Error> {
            // Decided again on the thread as it is now: two uses at once cannot both take the
            // last one.
            let fresh = self.view(t, action, now, &directory)?;
            if fresh.covers != Some(true) {
                return Ok((None, fresh));
            }
            let mut body = Map::new();
            body.insert("action", Value::str(&noted));
            let doc = MessageDoc {
                from: EXCHANGE.to_owned(),
                received: now,
                channel: None,
                message: Message::new(vec![Payload::Unknown {
                    kind: APPROVAL_USE.to_owned(),
                    body: Value::Map(body),
                }]),
                extra: Map::new(),
            };
            let mut envelope = t.envelope.clone();
            envelope.apply(&doc);
            let mut after = fresh;
            after.used_now = true;
            if let Some(s) = after.scope.as_mut() {
                s.used += 1;
            }
            Ok((
                Some(Edit {
                    envelope,
                    append: vec![doc],
                    deliveries: Vec::new(),
                }),
                after,
            ))
        })?;
        Ok(used)
    }

    fn view(
        &self,
        file: &ThreadFile,
        action: &Action,
        now: Timestamp,
        directory: &Directory,
    ) -> Result<ApprovalView, Error> {
        let env = &file.envelope;
        let a = env.hands.approval.as_ref().ok_or_else(|| Error::NotFound {
            message: format!("{} does not ask for approval", env.thread_ref),
        })?;
        let state = match env.status {
            Status::Pending => "pending",
            Status::Completed => "approved",
            Status::Declined => "denied",
            Status::Expired => "expired",
            _ => "cancelled",
        };
        let decisions = env
            .hands
            .decisions
            .iter()
            .map(|d| DecisionView {
                by: d.by.clone(),
                decision: if d.approved { "approved" } else { "denied" },
                at: time::format_timestamp(&d.at),
                channel: d.channel.clone(),
                reason: d.reason.clone(),
            })
            .collect();
        let waiting_for = if env.status == Status::Pending {
            approvers(env, directory)
                .into_iter()
                .filter(|id| env.hands.decision_of(id).is_none())
                .collect()
        } else {
            Vec::new()
        };
        let granted = if env.status == Status::Completed {
            env.history
                .iter()
                .rev()
                .find(|h| h.action == "completed")
                .map(|h| h.at)
        } else {
            None
        };
        let scope = match granted {
            Some(at) => {
                let request = first_request(file)?;
                let s = Scope::of(&request);
                Some((
                    s.clone(),
                    ScopeView {
                        intent: env.intent.clone(),
                        parameters_digest: s.parameters.as_ref().map(parameters_digest),
                        amount: s.amount,
                        uses: s.uses,
                        used: env.hands.used,
                        valid_from: time::format_timestamp(&at),
                        valid_until: time::format_timestamp(&(at + s.window())),
                    },
                    at,
                ))
            }
            None => None,
        };
        let (covers, why) = if action.is_empty() {
            (None, None)
        } else {
            match covers(env, scope.as_ref(), action, now) {
                Ok(()) => (Some(true), None),
                Err(why) => (Some(false), Some(why)),
            }
        };
        Ok(ApprovalView {
            thread: env.thread_ref.to_string(),
            state,
            need: a.need,
            deny_vetoes: a.deny_vetoes,
            expires: a.expires.as_ref().map(time::format_timestamp),
            decisions,
            waiting_for,
            scope: scope.map(|(_, v, _)| v),
            covers,
            why,
            used_now: false,
        })
    }
}

/// Whether an approval (its scope as granted at its instant) covers `action` at `now`; the
/// reason when it does not. Never yes outside the scope: not approved, outside the window,
/// used up, another intent, other parameters, or a larger amount.
fn covers(
    env: &Envelope,
    scope: Option<&(Scope, ScopeView, Timestamp)>,
    action: &Action,
    now: Timestamp,
) -> Result<(), String> {
    let Some((scope, view, granted)) = scope else {
        return Err(format!(
            "{} is {}, not approved",
            env.thread_ref,
            env.status.as_str()
        ));
    };
    if now < *granted || now >= *granted + scope.window() {
        return Err(format!("the approval was valid until {}", view.valid_until));
    }
    if env.hands.used >= scope.uses {
        return Err(format!(
            "the approval covered {} use{} and all are used",
            scope.uses,
            if scope.uses == 1 { "" } else { "s" }
        ));
    }
    if let Some(intent) = &action.intent
        && intent.trim() != env.intent.trim()
    {
        return Err(format!(
            "the approval is for {:?}, not {intent:?}",
            env.intent
        ));
    }
    match (&scope.parameters, &action.parameters) {
        (Some(_), None) => {
            return Err("the approval covers particular parameters: name them".to_owned());
        }
        (Some(approved), Some(asked))
            if parameters_digest(approved) != parameters_digest(asked) =>
        {
            return Err(format!(
                "the parameters differ from those approved ({} is not {})",
                parameters_digest(asked),
                parameters_digest(approved)
            ));
        }
        (None, Some(_)) => {
            return Err("the approval names no parameters, so it covers none".to_owned());
        }
        _ => {}
    }
    match (scope.amount, action.amount) {
        (Some(_), None) => Err("the approval covers an amount: name the action's".to_owned()),
        (Some(most), Some(asked)) if asked > most => {
            Err(format!("{asked} is more than the {most} approved"))
        }
        (None, Some(_)) => Err("the approval names no amount, so it covers none".to_owned()),
        _ => Ok(()),
    }
}

fn describe(action: &Action) -> String {
    let mut parts = Vec::new();
    if let Some(i) = &action.intent {
        parts.push(i.clone());
    }
    if let Some(p) = &action.parameters {
        parts.push(parameters_digest(p));
    }
    if let Some(a) = action.amount {
        parts.push(format!("amount {a}"));
    }
    parts.join("; ")
}
