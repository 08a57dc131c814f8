//! Work for many hands (mess's extension of the request): several answers to one request
//! (`assignments`, `agree`), approvals by M of N named people (`approval`) and escalation
//! ladders (`escalate`). How a request asks for them, what the envelope keeps of them (the
//! slots, the decisions, the uses of an approval), and what the exchange writes when enough
//! people have answered: one set of rules for every build.

use crate::content::ContentEntry;
use crate::envelope::{EXCHANGE, Envelope, MessageDoc};
use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::message::{Message, Payload, Response};
use crate::request::Request;
use crate::status::{Status, StatusDetails, StatusMsg};
use crate::time::{self, Duration, Timestamp};
use crate::value::{Map, Value};

/// Most answers one request may ask for.
pub const MAX_ASSIGNMENTS: u32 = 50;
/// Most entries of `approval.from` and of one rung's `to`.
pub const MAX_APPROVERS: usize = 50;
/// Most rungs of an escalation ladder.
pub const MAX_RUNGS: usize = 10;
/// Most uses one approval may allow.
pub const MAX_USES: u32 = 1000;

/// The exchange's payload that records one use of an approval (`mess_approved` with `use`);
/// applied only from the exchange.
pub const APPROVAL_USE: &str = "approval_use";

/// What a request asked of many hands, and where that stands (kept in the envelope).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hands {
    /// `assignments: N`: how many answers, each from a different executor (0 when not asked:
    /// one answer, the usual way).
    pub assignments: u32,
    /// `agree:` the answers agree when `need` of them give one value of `field`.
    pub agree: Option<Agree>,
    /// `approval:` who decides and how many must approve.
    pub approval: Option<Approval>,
    /// `confirm_by:` who confirms a `needs_confirmation` of a `confirm_before` request, and how
    /// many must (in place of the requestor's own `confirm`).
    pub confirm_by: Option<Approval>,
    /// `escalate:` the ladder the offer climbs while nobody takes it.
    pub escalate: Vec<Rung>,
    /// One slot per executor that took one (in the order they took them).
    pub slots: Vec<Slot>,
    /// One decision per approver (the first each sent).
    pub decisions: Vec<Decision>,
    /// How many times the approval was used.
    pub used: u32,
}

/// `agree: {field, need}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Agree {
    /// The key of the answers' structured content compared.
    pub field: String,
    /// How many answers must give the same value.
    pub need: u32,
}

/// `approval: {from, need, deny_vetoes, expires}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    /// Executor ids or capability ids: who may decide.
    pub from: Vec<String>,
    /// Approvals needed; fixed when the request is written.
    pub need: u32,
    /// Whether one denial ends the request `declined`.
    pub deny_vetoes: bool,
    /// When the request ends `expired` if the approvals have not come.
    pub expires: Option<Timestamp>,
}

/// One rung of an escalation ladder: `{after, to}`; a rung without `to` ends the ladder.
#[derive(Debug, Clone, PartialEq)]
pub struct Rung {
    /// How long after the request was received the offer reaches this rung.
    pub after: Duration,
    /// Executor ids or capability ids offered the work on this rung (empty: the ladder ends
    /// here and the request expires).
    pub to: Vec<String>,
}

/// One executor's slot of a request asking for several answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    /// Who holds it.
    pub executor: String,
    /// Where its work stands (the status that executor last reported).
    pub status: Status,
    /// When it last changed.
    pub at: Timestamp,
    /// The value its answer gave the `agree` field, as text.
    pub value: Option<String>,
}

/// One approver's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Who decided.
    pub by: String,
    /// Approve (true) or deny.
    pub approved: bool,
    /// When the exchange received it.
    pub at: Timestamp,
    /// Through which channel (`http`, `page`, `slack`, `mcp`, `cli`, ...).
    pub channel: Option<String>,
    /// The reason given.
    pub reason: Option<String>,
}

impl Hands {
    /// Reads what `request` asks of many hands (`assignments`, `agree`, `approval`,
    /// `escalate`, kept among its unknown fields), checked; `path` names the request.
    pub fn read(request: &Request, received: Timestamp, path: &str) -> Result<Hands> {
        let mut hands = Hands::default();
        let extra = &request.extra;
        if let Some(v) = extra.get("assignments") {
            let at = format!("{path}.assignments");
            let n = match v {
                Value::Int(n) => *n,
                other => {
                    return Err(ProtocolError::invalid(
                        at,
                        format!("expected a whole number, found {}", other.kind()),
                    ));
                }
            };
            if !(1..=i64::from(MAX_ASSIGNMENTS)).contains(&n) {
                return Err(ProtocolError::invalid(
                    at,
                    format!("{n} answers; ask for 1 to {MAX_ASSIGNMENTS}"),
                ));
            }
            hands.assignments = n as u32;
        }
        if let Some(v) = extra.get("agree") {
            let at = format!("{path}.agree");
            let mut f = Fields::new(v.clone(), &at, "agree")?;
            let field_name = f.req_str("field")?;
            if field_name.trim().is_empty() {
                return Err(ProtocolError::invalid(
                    f.at("field"),
                    "name the answers' field to compare",
                ));
            }
            let need_at = f.at("need");
            let need = f.req_int("need")?;
            let most = i64::from(hands.assignments.max(1));
            if need < 1 || need > most {
                return Err(ProtocolError::invalid(
                    need_at,
                    format!(
                        "{need} must agree, but the request asks for {most} answer{} (set assignments: to at least {need})",
                        if most == 1 { "" } else { "s" }
                    ),
                ));
            }
            no_other_keys(f)?;
            hands.agree = Some(Agree {
                field: field_name,
                need: need as u32,
            });
        }
        if let Some(v) = extra.get("approval") {
            hands.approval = Some(read_approval(
                v.clone(),
                &format!("{path}.approval"),
                received,
            )?);
            if hands.assignments > 1 || hands.agree.is_some() {
                return Err(ProtocolError::invalid(
                    format!("{path}.approval"),
                    "a request asks either for approval or for several answers, not both; send two requests",
                ));
            }
            if request.confirm_before == Some(true) {
                return Err(ProtocolError::invalid(
                    format!("{path}.confirm_before"),
                    "an approval request is itself the confirmation; leave out confirm_before",
                ));
            }
        }
        if let Some(v) = extra.get("confirm_by") {
            let at = format!("{path}.confirm_by");
            if let Value::Map(m) = v
                && let Some(key) = ["expires", "scope"].into_iter().find(|k| m.contains_key(k))
            {
                return Err(ProtocolError::invalid(
                    format!("{at}.{key}"),
                    "confirm_by takes from, need and deny_vetoes (the request's needed_by bounds the wait)",
                ));
            }
            if request.confirm_before != Some(true) {
                return Err(ProtocolError::invalid(
                    at,
                    "confirm_by names who confirms before work starts; set confirm_before: true too",
                ));
            }
            if hands.approval.is_some() {
                return Err(ProtocolError::invalid(
                    at,
                    "an approval request is itself the confirmation; leave out confirm_by",
                ));
            }
            hands.confirm_by = Some(read_approval(v.clone(), &at, received)?);
        }
        if hands.multi() && request.confirm_before == Some(true) {
            return Err(ProtocolError::invalid(
                format!("{path}.confirm_before"),
                "confirm_before holds one executor's work; a request with several answers cannot use it yet",
            ));
        }
        if let Some(v) = extra.get("escalate") {
            hands.escalate = read_ladder(v.clone(), &format!("{path}.escalate"))?;
        }
        Ok(hands)
    }

    /// Whether several answers were asked for (more than one, or an agreement rule).
    pub fn multi(&self) -> bool {
        self.assignments > 1 || self.agree.is_some()
    }

    /// How many answers are asked for.
    pub fn wanted(&self) -> u32 {
        self.assignments.max(1)
    }

    /// The slot `who` holds, with its number (1-based).
    pub fn slot_of(&self, who: &str) -> Option<(usize, &Slot)> {
        self.slots
            .iter()
            .enumerate()
            .find(|(_, s)| s.executor == who)
            .map(|(i, s)| (i + 1, s))
    }

    /// Slots held and not given up (declined, failed, cancelled).
    pub fn taken(&self) -> usize {
        self.slots.iter().filter(|s| !released(s.status)).count()
    }

    /// Slots still free for another executor.
    pub fn open(&self) -> usize {
        (self.wanted() as usize).saturating_sub(self.taken())
    }

    /// Slots whose answer is in.
    pub fn answered(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.status == Status::Completed)
            .count()
    }

    /// The decision `who` made, if any.
    pub fn decision_of(&self, who: &str) -> Option<&Decision> {
        self.decisions.iter().find(|d| d.by == who)
    }

    /// Approvals and denials so far.
    pub fn tally(&self) -> (u32, u32) {
        let yes = self.decisions.iter().filter(|d| d.approved).count() as u32;
        (yes, self.decisions.len() as u32 - yes)
    }

    /// When the ladder ends (a rung without `to`), counted from `created`.
    pub fn ladder_end(&self, created: Timestamp) -> Option<Timestamp> {
        self.escalate
            .iter()
            .find(|r| r.to.is_empty())
            .map(|r| created + r.after.length)
    }

    /// Whether `id` is named on the approval or on a rung the offer has reached (`reached`
    /// rungs, counted from the first), either by id or by a capability `holds` says it has.
    pub fn names(&self, id: &str, reached: usize, holds: &dyn Fn(&str) -> bool) -> bool {
        let named = |list: &[String]| list.iter().any(|x| x == id || holds(x));
        self.approval.as_ref().is_some_and(|a| named(&a.from))
            || self.escalate.iter().take(reached).any(|r| named(&r.to))
    }

    /// Whether `confirm_by` names `id`, by id or by a capability it holds (`holds`).
    pub fn names_confirmer(&self, id: &str, holds: &dyn Fn(&str) -> bool) -> bool {
        self.confirm_by
            .as_ref()
            .is_some_and(|c| c.from.iter().any(|x| x == id || holds(x)))
    }

    /// The approval or the confirmation that decisions count towards.
    pub fn decided_by(&self) -> Option<&Approval> {
        self.approval.as_ref().or(self.confirm_by.as_ref())
    }

    /// Writes the request-side fields and the state into the envelope map.
    pub(crate) fn put(&self, m: &mut Map) {
        if self.assignments > 0 {
            m.insert("assignments", Value::Int(i64::from(self.assignments)));
        }
        if let Some(a) = &self.agree {
            let mut g = Map::new();
            g.insert("field", Value::str(&a.field));
            g.insert("need", Value::Int(i64::from(a.need)));
            m.insert("agree", Value::Map(g));
        }
        for (key, a) in [
            ("approval", &self.approval),
            ("confirm_by", &self.confirm_by),
        ] {
            let Some(a) = a else { continue };
            let mut g = Map::new();
            g.insert("from", Value::Seq(a.from.iter().map(Value::str).collect()));
            g.insert("need", Value::Int(i64::from(a.need)));
            if a.deny_vetoes {
                g.insert("deny_vetoes", Value::Bool(true));
            }
            g.insert_opt(
                "expires",
                a.expires
                    .as_ref()
                    .map(|t| Value::str(time::format_timestamp(t))),
            );
            m.insert(key, Value::Map(g));
        }
        if !self.escalate.is_empty() {
            m.insert(
                "escalate",
                Value::Seq(
                    self.escalate
                        .iter()
                        .map(|r| {
                            let mut g = Map::new();
                            g.insert("after", Value::str(&r.after.text));
                            if !r.to.is_empty() {
                                g.insert("to", Value::Seq(r.to.iter().map(Value::str).collect()));
                            }
                            Value::Map(g)
                        })
                        .collect(),
                ),
            );
        }
        if !self.slots.is_empty() {
            m.insert(
                "slots",
                Value::Seq(
                    self.slots
                        .iter()
                        .map(|s| {
                            let mut g = Map::new();
                            g.insert("executor", Value::str(&s.executor));
                            g.insert("status", Value::str(s.status.as_str()));
                            g.insert("at", Value::str(time::format_timestamp(&s.at)));
                            field::put_str(&mut g, "value", &s.value);
                            Value::Map(g)
                        })
                        .collect(),
                ),
            );
        }
        if !self.decisions.is_empty() {
            m.insert(
                "decisions",
                Value::Seq(
                    self.decisions
                        .iter()
                        .map(|d| {
                            let mut g = Map::new();
                            g.insert("by", Value::str(&d.by));
                            g.insert(
                                "decision",
                                Value::str(if d.approved { "approved" } else { "denied" }),
                            );
                            g.insert("at", Value::str(time::format_timestamp(&d.at)));
                            field::put_str(&mut g, "channel", &d.channel);
                            field::put_str(&mut g, "reason", &d.reason);
                            Value::Map(g)
                        })
                        .collect(),
                ),
            );
        }
        if self.used > 0 {
            m.insert("approval_used", Value::Int(i64::from(self.used)));
        }
    }

    /// Reads what [`Hands::put`] wrote, leniently: an envelope is a cache, rebuilt from the
    /// messages by `fsck`, so a field that does not read is left out rather than failing the
    /// thread.
    pub(crate) fn take(f: &mut Fields) -> Hands {
        let mut h = Hands::default();
        if let Some(Value::Int(n)) = f.take("assignments") {
            h.assignments = n.clamp(0, i64::from(MAX_ASSIGNMENTS)) as u32;
        }
        if let Some(Value::Map(g)) = f.take("agree") {
            let field = g.get("field").and_then(Value::scalar_text);
            let need = g.get("need").and_then(int);
            if let (Some(field), Some(need)) = (field, need) {
                h.agree = Some(Agree { field, need });
            }
        }
        let approval_in = |g: Map| Approval {
            from: texts(g.get("from")),
            need: g.get("need").and_then(int).unwrap_or(1),
            deny_vetoes: g.get("deny_vetoes") == Some(&Value::Bool(true)),
            expires: g.get("expires").and_then(instant),
        };
        if let Some(Value::Map(g)) = f.take("approval") {
            h.approval = Some(approval_in(g));
        }
        if let Some(Value::Map(g)) = f.take("confirm_by") {
            h.confirm_by = Some(approval_in(g));
        }
        if let Some(Value::Seq(rungs)) = f.take("escalate") {
            h.escalate = rungs
                .iter()
                .filter_map(|r| {
                    let m = r.as_map()?;
                    let after = time::parse_any_duration(&m.get("after")?.scalar_text()?).ok()?;
                    Some(Rung {
                        after,
                        to: texts(m.get("to")),
                    })
                })
                .collect();
        }
        if let Some(Value::Seq(slots)) = f.take("slots") {
            h.slots = slots
                .iter()
                .filter_map(|s| {
                    let m = s.as_map()?;
                    Some(Slot {
                        executor: m.get("executor")?.scalar_text()?,
                        status: Status::parse(&m.get("status")?.scalar_text()?)?,
                        at: instant(m.get("at")?)?,
                        value: m.get("value").and_then(Value::scalar_text),
                    })
                })
                .collect();
        }
        if let Some(Value::Seq(ds)) = f.take("decisions") {
            h.decisions = ds
                .iter()
                .filter_map(|d| {
                    let m = d.as_map()?;
                    Some(Decision {
                        by: m.get("by")?.scalar_text()?,
                        approved: m.get("decision")?.as_str()? == "approved",
                        at: instant(m.get("at")?)?,
                        channel: m.get("channel").and_then(Value::scalar_text),
                        reason: m.get("reason").and_then(Value::scalar_text),
                    })
                })
                .collect();
        }
        if let Some(Value::Int(n)) = f.take("approval_used") {
            h.used = n.clamp(0, i64::from(MAX_USES)) as u32;
        }
        h
    }
}

fn int(v: &Value) -> Option<u32> {
    match v {
        Value::Int(n) => u32::try_from(*n).ok(),
        _ => None,
    }
}

fn instant(v: &Value) -> Option<Timestamp> {
    time::parse_timestamp_lenient(v.as_str()?).ok()
}

fn texts(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Seq(items)) => items.iter().filter_map(Value::scalar_text).collect(),
        Some(other) => other.scalar_text().into_iter().collect(),
        None => Vec::new(),
    }
}

/// True for slot statuses that give the slot back (the executor cannot take another).
pub fn released(status: Status) -> bool {
    matches!(
        status,
        Status::Declined | Status::Failed | Status::Cancelled | Status::Expired
    )
}

fn no_other_keys(f: Fields) -> Result<()> {
    let rest = f.rest();
    match rest.keys().next() {
        None => Ok(()),
        Some(k) => Err(ProtocolError::invalid(
            k.clone(),
            "unknown key here".to_owned(),
        )),
    }
}

/// Reads `approval:`; `expires` may be an instant or a duration from `received`.
fn read_approval(v: Value, path: &str, received: Timestamp) -> Result<Approval> {
    let mut f = Fields::new(v, path, "approval")?;
    let from_at = f.at("from");
    let mut from: Vec<String> = Vec::new();
    for id in f.list("from", field::id_text)? {
        if !from.contains(&id) {
            from.push(id);
        }
    }
    if from.is_empty() {
        return Err(ProtocolError::invalid(
            from_at,
            "name who decides: executor ids or capability ids",
        ));
    }
    if from.len() > MAX_APPROVERS {
        return Err(ProtocolError::invalid(
            from_at,
            format!("{} approvers; name at most {MAX_APPROVERS}", from.len()),
        ));
    }
    let need_at = f.at("need");
    let need = f.opt_int("need")?.unwrap_or(1);
    if need < 1 || need > MAX_APPROVERS as i64 {
        return Err(ProtocolError::invalid(
            need_at,
            format!("{need} approvals; need 1 to {MAX_APPROVERS}"),
        ));
    }
    let deny_vetoes = f.opt_bool("deny_vetoes")?.unwrap_or(false);
    let expires_at = f.at("expires");
    let expires = match f.take("expires") {
        None => None,
        Some(Value::String(s)) => Some(match time::parse_timestamp(&s) {
            Ok(t) => t,
            Err(_) => match time::parse_any_duration(&s) {
                Ok(d) => received + d.length,
                Err(_) => {
                    return Err(ProtocolError::invalid(
                        expires_at,
                        format!(
                            "{s:?} is neither a timestamp with an offset nor a duration (PT1H, 2h)"
                        ),
                    ));
                }
            },
        }),
        Some(other) => {
            return Err(ProtocolError::invalid(
                expires_at,
                format!("expected a timestamp or a duration, found {}", other.kind()),
            ));
        }
    };
    if let Some(t) = expires
        && t <= received
    {
        return Err(ProtocolError::invalid(
            expires_at,
            format!("{} has already passed", time::format_timestamp(&t)),
        ));
    }
    // What an approval covers is read from the request when asked (`scope`); checked here so
    // a request is refused for a scope no check could use.
    if let Some(scope) = f.take("scope") {
        Scope::read(scope, &format!("{path}.scope"))?;
    }
    no_other_keys(f)?;
    Ok(Approval {
        from,
        need: need as u32,
        deny_vetoes,
        expires,
    })
}

/// Reads `escalate:`: rungs in rising `after`, at most one without `to`, and that one last.
fn read_ladder(v: Value, path: &str) -> Result<Vec<Rung>> {
    let items = match v {
        Value::Seq(items) => items,
        other => {
            return Err(ProtocolError::invalid(
                path,
                format!("expected a list of {{after, to}}, found {}", other.kind()),
            ));
        }
    };
    if items.is_empty() || items.len() > MAX_RUNGS {
        return Err(ProtocolError::invalid(
            path,
            format!("{} rungs; give 1 to {MAX_RUNGS}", items.len()),
        ));
    }
    let count = items.len();
    let mut rungs: Vec<Rung> = Vec::with_capacity(count);
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("{path}[{i}]");
        let mut f = Fields::new(item, &at, "a rung")?;
        let after_at = f.at("after");
        let text = f.req_str("after")?;
        let after =
            time::parse_any_duration(&text).map_err(|e| ProtocolError::invalid(&after_at, e))?;
        if after.length <= chrono::TimeDelta::zero() {
            return Err(ProtocolError::invalid(after_at, "must be longer than zero"));
        }
        if let Some(prev) = rungs.last()
            && prev.after.length >= after.length
        {
            return Err(ProtocolError::invalid(
                after_at,
                format!(
                    "{text} comes no later than the rung before ({}); each rung comes later",
                    prev.after.text
                ),
            ));
        }
        let to_at = f.at("to");
        let to = f.list("to", field::id_text)?;
        if to.len() > MAX_APPROVERS {
            return Err(ProtocolError::invalid(
                to_at,
                format!("{} entries; name at most {MAX_APPROVERS}", to.len()),
            ));
        }
        if to.is_empty() && i + 1 != count {
            return Err(ProtocolError::invalid(
                to_at,
                "only the last rung may leave out `to` (it ends the ladder)",
            ));
        }
        no_other_keys(f)?;
        rungs.push(Rung { after, to });
    }
    Ok(rungs)
}

/// What an approval covers, from the request's `approval.scope`: the parameters approved
/// (their digest is what is compared), an amount not to exceed, how many uses, and for how
/// long after it was granted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scope {
    /// The parameters approved, as written.
    pub parameters: Option<Value>,
    /// The most an action may spend or count.
    pub amount: Option<f64>,
    /// How many actions it covers (1 unless it says otherwise).
    pub uses: u32,
    /// How long after it was granted it covers actions.
    pub valid_for: Option<Duration>,
}

impl Scope {
    /// How long an approval covers actions when its scope does not say.
    pub const DEFAULT_VALID_FOR_HOURS: i64 = 24;

    /// Reads `approval.scope`.
    pub fn read(v: Value, path: &str) -> Result<Scope> {
        let mut f = Fields::new(v, path, "scope")?;
        let parameters = f.take("parameters");
        let amount = f.opt_number("amount")?;
        if let Some(a) = amount
            && !(a.is_finite() && a >= 0.0)
        {
            return Err(ProtocolError::invalid(
                f.at("amount"),
                "must be a number of zero or more",
            ));
        }
        let uses_at = f.at("uses");
        let uses = f.opt_int("uses")?.unwrap_or(1);
        if uses < 1 || uses > i64::from(MAX_USES) {
            return Err(ProtocolError::invalid(
                uses_at,
                format!("{uses} uses; allow 1 to {MAX_USES}"),
            ));
        }
        let valid_at = f.at("valid_for");
        let valid_for = match f.opt_str("valid_for")? {
            None => None,
            Some(t) => Some(
                time::parse_any_duration(&t).map_err(|e| ProtocolError::invalid(valid_at, e))?,
            ),
        };
        no_other_keys(f)?;
        Ok(Scope {
            parameters,
            amount,
            uses: uses as u32,
            valid_for,
        })
    }

    /// The scope `request` asked for (the defaults when it named none).
    pub fn of(request: &Request) -> Scope {
        request
            .extra
            .get("approval")
            .and_then(Value::as_map)
            .and_then(|m| m.get("scope"))
            .and_then(|v| Scope::read(v.clone(), "scope").ok())
            .unwrap_or(Scope {
                uses: 1,
                ..Scope::default()
            })
    }

    /// How long the approval covers actions once granted.
    pub fn window(&self) -> chrono::TimeDelta {
        self.valid_for
            .as_ref()
            .map(|d| d.length)
            .unwrap_or_else(|| chrono::TimeDelta::hours(Self::DEFAULT_VALID_FOR_HOURS))
    }
}

/// The canonical text of parameters that a digest is taken of: JSON with keys sorted, so the
/// same parameters written in another order or as YAML give the same digest.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Map(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push(':');
                    write(v, out);
                }
                out.push('}');
            }
            Value::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                out.push_str(&(*f as i64).to_string());
            }
            other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// The decision a response carries: its confirmation entry (`confirmed`) and the reason
/// (`details`, else the response's first text). `None` when it has no confirmation entry.
pub fn decision_in(r: &Response) -> Option<(bool, Option<String>)> {
    let (approved, details) = r.content.iter().find_map(|c| match c {
        ContentEntry::Confirmation(c) => Some((
            c.confirmed(),
            match c {
                crate::content::Confirmation::Long { details, .. } => details.clone(),
                crate::content::Confirmation::Short(_) => None,
            },
        )),
        _ => None,
    })?;
    let reason = details.or_else(|| {
        r.content
            .iter()
            .find_map(|c| c.as_text().map(str::to_owned))
    });
    Some((approved, reason.filter(|t| !t.trim().is_empty())))
}

/// The value an answer gives `field`: the first structured entry that has it, as text.
pub fn answer_value(r: &Response, field_name: &str) -> Option<String> {
    r.content.iter().find_map(|c| match c {
        ContentEntry::Structured(Value::Map(m)) => m.get(field_name).and_then(Value::scalar_text),
        _ => None,
    })
}

impl Envelope {
    /// Applies a document to a thread that asked for several answers or for approval, where
    /// it changes a slot or records a decision instead of the thread's status; false when the
    /// document is not of that kind (the caller applies it as usual).
    pub(crate) fn apply_hands(&mut self, doc: &MessageDoc) -> Option<bool> {
        if doc.from == EXCHANGE || doc.from == self.requestor {
            return None;
        }
        if self.hands.approval.is_some() {
            let open = !self.status.is_terminal();
            return Some(self.record_decisions(doc, open));
        }
        let decides = |p: &Payload| matches!(p, Payload::Response(r) if decision_in(r).is_some());
        if self.hands.confirm_by.is_some()
            && self.executor.as_deref() != Some(doc.from.as_str())
            && self.confirmation.is_some()
            && doc.message.payloads.iter().any(decides)
        {
            // A confirmer's decision, while the claimant's question is open.
            let open = self.confirmation == Some(crate::envelope::ConfirmState::Requested);
            return Some(self.record_decisions(doc, open));
        }
        if !self.hands.multi() {
            return None;
        }
        let mut changed = false;
        let has_status = doc
            .message
            .payloads
            .iter()
            .any(|p| matches!(p, Payload::Status(_)));
        for p in &doc.message.payloads {
            match p {
                Payload::Status(s) => {
                    changed |= self.slot_step(
                        &doc.from,
                        s.code,
                        doc.received,
                        s.message
                            .clone()
                            .or_else(|| crate::envelope::reason_note(&s.details)),
                    );
                }
                Payload::Response(r) => {
                    changed |= self.slot_step(&doc.from, Status::Claimed, doc.received, None);
                    if let Some(a) = &self.hands.agree
                        && let Some(v) = answer_value(r, &a.field)
                        && let Some(slot) =
                            self.hands.slots.iter_mut().find(|s| s.executor == doc.from)
                    {
                        slot.value = Some(v);
                        changed = true;
                    }
                    if !has_status {
                        changed |= self.slot_step(
                            &doc.from,
                            Status::Completed,
                            doc.received,
                            Some("answered".to_owned()),
                        );
                    }
                }
                _ => {}
            }
        }
        Some(changed)
    }

    /// Moves `who`'s slot to `code` (taking a slot first when it holds none), and the thread
    /// with it: pending while a slot is free, claimed when every slot is taken.
    /// Records the first decision of `doc`'s sender (a response holding a confirmation entry)
    /// while the decision is `open`; whether one was recorded.
    fn record_decisions(&mut self, doc: &MessageDoc, open: bool) -> bool {
        let mut changed = false;
        for p in &doc.message.payloads {
            if let Payload::Response(r) = p
                && let Some((approved, reason)) = decision_in(r)
                && self.hands.decision_of(&doc.from).is_none()
                && open
            {
                self.hands.decisions.push(Decision {
                    by: doc.from.clone(),
                    approved,
                    at: doc.received,
                    channel: doc.channel.clone(),
                    reason: reason.clone(),
                });
                let action = if approved { "approved" } else { "denied" };
                self.record(action, doc.received, &doc.from, reason);
                changed = true;
            }
        }
        changed
    }

    fn slot_step(&mut self, who: &str, code: Status, at: Timestamp, note: Option<String>) -> bool {
        if self.status.is_terminal() {
            return false;
        }
        let wanted = self.hands.wanted();
        let mut changed = false;
        if self.hands.slot_of(who).is_none() {
            if !(code == Status::Claimed || code.implies_claim()) || self.hands.open() == 0 {
                return false;
            }
            self.hands.slots.push(Slot {
                executor: who.to_owned(),
                status: Status::Claimed,
                at,
                value: None,
            });
            let n = self.hands.slots.len();
            self.record("claimed", at, who, Some(format!("slot {n} of {wanted}")));
            changed = true;
        }
        let Some((n, slot)) = self.hands.slot_of(who) else {
            return changed;
        };
        if code != Status::Claimed && slot.status != code && !slot.status.is_terminal() {
            let prefix = format!("slot {n}");
            if let Some(s) = self.hands.slots.iter_mut().find(|s| s.executor == who) {
                s.status = code;
                s.at = at;
            }
            let note = Some(match note {
                Some(t) => format!("{prefix}: {t}"),
                None => prefix,
            });
            self.record(code.as_str(), at, who, note);
            changed = true;
        }
        let status = if self.hands.open() > 0 {
            Status::Pending
        } else {
            Status::Claimed
        };
        if status != self.status {
            self.status = status;
            changed = true;
        }
        if changed && at > self.updated {
            self.updated = at;
        }
        changed
    }
}

/// One answer of a thread asking for several: the slot holder's last response and where it
/// is in the thread.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Who answered.
    pub executor: String,
    /// The message document's place in the thread (2 is the first message after the envelope).
    pub document: usize,
    /// When it came.
    pub at: Timestamp,
    /// Its content.
    pub content: Vec<ContentEntry>,
}

/// The answers in a thread's messages: each completed slot's last response.
pub fn answers(env: &Envelope, docs: &[MessageDoc]) -> Vec<Answer> {
    let mut out: Vec<Answer> = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let Some((_, slot)) = env.hands.slot_of(&doc.from) else {
            continue;
        };
        if slot.status != Status::Completed {
            continue;
        }
        for p in &doc.message.payloads {
            if let Payload::Response(r) = p {
                out.retain(|a| a.executor != doc.from);
                out.push(Answer {
                    executor: doc.from.clone(),
                    document: i + 2,
                    at: doc.received,
                    content: r.content.clone(),
                });
            }
        }
    }
    out.sort_by_key(|a| env.hands.slot_of(&a.executor).map(|(n, _)| n));
    out
}

/// How the values of the agreed field stand: each value with its count, most first.
pub fn agreement(env: &Envelope) -> Vec<(String, u32)> {
    let mut counts: Vec<(String, u32)> = Vec::new();
    for s in env
        .hands
        .slots
        .iter()
        .filter(|s| s.status == Status::Completed)
    {
        if let Some(v) = &s.value {
            match counts.iter_mut().find(|(k, _)| k == v) {
                Some((_, n)) => *n += 1,
                None => counts.push((v.clone(), 1)),
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
}

/// What the exchange writes when a thread asking for several answers is decided: `completed`
/// when every answer is in or enough agree, or at its deadline (`deadline`) `partial` with the
/// answers that came; always with the aggregate as the final response. `None` while it waits.
pub fn settle_answers(
    env: &Envelope,
    docs: &[MessageDoc],
    deadline: bool,
    now: Timestamp,
) -> Option<MessageDoc> {
    let h = &env.hands;
    if !h.multi() || env.status.is_terminal() {
        return None;
    }
    let tally = agreement(env);
    let agreed = h
        .agree
        .as_ref()
        .and_then(|a| tally.first().filter(|(_, n)| *n >= a.need).cloned());
    let all_in = h.answered() >= h.wanted() as usize;
    let (code, message) = if agreed.is_some() {
        (Status::Completed, "enough answers agree".to_owned())
    } else if all_in {
        (
            Status::Completed,
            format!("all {} answers are in", h.wanted()),
        )
    } else if deadline && h.answered() > 0 {
        (
            Status::Partial,
            format!(
                "{} of {} answers came before the deadline",
                h.answered(),
                h.wanted()
            ),
        )
    } else {
        return None;
    };
    let list = answers(env, docs);
    let mut structured = Map::new();
    structured.insert("assignments", Value::Int(i64::from(h.wanted())));
    structured.insert("answered", Value::Int(list.len() as i64));
    structured.insert(
        "answers",
        Value::Seq(
            list.iter()
                .map(|a| {
                    let mut m = Map::new();
                    m.insert("executor", Value::str(&a.executor));
                    m.insert(
                        "slot",
                        Value::Int(h.slot_of(&a.executor).map_or(0, |(n, _)| n) as i64),
                    );
                    m.insert("at", Value::str(time::format_timestamp(&a.at)));
                    m.insert("document", Value::Int(a.document as i64));
                    m.insert(
                        "content",
                        Value::Seq(
                            a.content
                                .iter()
                                .filter(|c| {
                                    matches!(
                                        c,
                                        ContentEntry::Text(_)
                                            | ContentEntry::Structured(_)
                                            | ContentEntry::Confirmation(_)
                                    )
                                })
                                .map(ContentEntry::to_value)
                                .collect(),
                        ),
                    );
                    Value::Map(m)
                })
                .collect(),
        ),
    );
    if let Some(a) = &h.agree {
        let mut g = Map::new();
        g.insert("field", Value::str(&a.field));
        g.insert("need", Value::Int(i64::from(a.need)));
        g.insert("reached", Value::Bool(agreed.is_some()));
        g.insert_opt("value", agreed.as_ref().map(|(v, _)| Value::str(v)));
        let mut counts = Map::new();
        for (v, n) in &tally {
            counts.insert(v.clone(), Value::Int(i64::from(*n)));
        }
        g.insert("tally", Value::Map(counts));
        structured.insert("agreement", Value::Map(g));
    }
    let mut summary = format!("{} of {} answers", list.len(), h.wanted());
    if let Some((v, n)) = &agreed {
        summary.push_str(&format!("; {n} agree: {v}"));
    }
    let details = if code == Status::Completed {
        StatusDetails::Completed
    } else {
        StatusDetails::Partial {
            completed: Vec::new(),
            remaining: Vec::new(),
            reason: Some(Value::str("the deadline passed before every answer came")),
        }
    };
    Some(exchange_doc(
        env, code, details, message, summary, structured, now,
    ))
}

/// The confirmation of a `confirm_by` request, once its confirmers have decided it: the
/// exchange's `reply` with `confirm: true` when `need` confirmed, or `confirm: false` on a
/// veto or when `need` can no longer be reached (`possible` people may decide). `None` while
/// it is open, and when no confirmation is asked.
pub fn settle_confirmation(env: &Envelope, possible: usize, now: Timestamp) -> Option<MessageDoc> {
    let c = env.hands.confirm_by.as_ref()?;
    if env.status.is_terminal()
        || env.confirmation != Some(crate::envelope::ConfirmState::Requested)
    {
        return None;
    }
    let (yes, no) = env.hands.tally();
    let undecided = possible.saturating_sub(env.hands.decisions.len()) as u32;
    let veto = env
        .hands
        .decisions
        .iter()
        .find(|d| c.deny_vetoes && !d.approved);
    let (confirm, reason) = if let Some(d) = veto {
        (
            false,
            format!(
                "denied by {}, whose denial vetoes{}",
                d.by,
                d.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        )
    } else if yes >= c.need {
        (true, format!("confirmed by {yes} of the {} needed", c.need))
    } else if yes + undecided < c.need {
        (
            false,
            format!(
                "{yes} confirmed and {no} denied; {undecided} left to decide cannot make the {} needed",
                c.need
            ),
        )
    } else {
        return None;
    };
    let reply = crate::message::Reply {
        re: crate::ids::Re::One(env.thread_ref.to_string()),
        answers: None,
        confirm: Some(confirm),
        accept: None,
        reason: Some(reason),
        context: Vec::new(),
        extra: Map::new(),
    };
    Some(MessageDoc {
        from: EXCHANGE.to_owned(),
        received: now,
        channel: None,
        message: Message::new(vec![Payload::Reply(reply)]),
        extra: Map::new(),
    })
}

/// What the exchange writes when an approval is decided: `completed` (approved) when `need`
/// approvals are in; `declined` on a veto or when the approvals can no longer come (`possible`
/// approvers in all, those who decided included). `None` while it waits.
pub fn settle_approval(
    env: &Envelope,
    possible: usize,
    scope: Option<Value>,
    now: Timestamp,
) -> Option<MessageDoc> {
    let a = env.hands.approval.as_ref()?;
    if env.status.is_terminal() {
        return None;
    }
    let (yes, no) = env.hands.tally();
    let undecided = possible.saturating_sub(env.hands.decisions.len()) as u32;
    let veto = if a.deny_vetoes {
        env.hands.decisions.iter().find(|d| !d.approved)
    } else {
        None
    };
    let mut structured = Map::new();
    let people = |approved: bool| {
        Value::Seq(
            env.hands
                .decisions
                .iter()
                .filter(|d| d.approved == approved)
                .map(|d| {
                    let mut m = Map::new();
                    m.insert("by", Value::str(&d.by));
                    m.insert("at", Value::str(time::format_timestamp(&d.at)));
                    field::put_str(&mut m, "channel", &d.channel);
                    field::put_str(&mut m, "reason", &d.reason);
                    Value::Map(m)
                })
                .collect(),
        )
    };
    structured.insert("need", Value::Int(i64::from(a.need)));
    structured.insert("approvals", people(true));
    structured.insert("denials", people(false));
    let (code, details, message) = if let Some(d) = veto {
        (
            Status::Declined,
            StatusDetails::Declined {
                reason: reason_value(
                    "vetoed",
                    format!(
                        "{} denied{}",
                        d.by,
                        d.reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                ),
            },
            format!("denied by {}, whose denial vetoes", d.by),
        )
    } else if yes >= a.need {
        (
            Status::Completed,
            StatusDetails::Completed,
            format!("approved by {yes} of the {} needed", a.need),
        )
    } else if yes + undecided < a.need {
        (
            Status::Declined,
            StatusDetails::Declined {
                reason: reason_value(
                    "approval_unreachable",
                    format!(
                        "{yes} approved and {no} denied; {undecided} left to decide cannot make the {} needed",
                        a.need
                    ),
                ),
            },
            format!("{} approvals can no longer come", a.need),
        )
    } else {
        return None;
    };
    structured.insert("approved", Value::Bool(code == Status::Completed));
    if code == Status::Completed {
        structured.insert_opt("scope", scope);
    }
    let summary = message.clone();
    let mut wrapped = Map::new();
    wrapped.insert("approval", Value::Map(structured));
    let mut doc = exchange_doc(env, code, details, message, summary, Map::new(), now);
    // The approval's record rides in its own key.
    if let Some(Payload::Response(r)) = doc.message.payloads.get_mut(1) {
        r.content
            .push(ContentEntry::Structured(Value::Map(wrapped)));
    }
    Some(doc)
}

fn reason_value(kind: &str, detail: String) -> Value {
    let mut m = Map::new();
    m.insert("type", Value::str(kind));
    m.insert("detail", Value::str(detail));
    Value::Map(m)
}

/// An exchange document with a status and a response carrying `summary` and `structured`.
fn exchange_doc(
    env: &Envelope,
    code: Status,
    details: StatusDetails,
    message: String,
    summary: String,
    structured: Map,
    now: Timestamp,
) -> MessageDoc {
    debug_assert_eq!(details.code(), code);
    let mut status = StatusMsg::new(env.thread_ref.as_str(), details);
    status.message = Some(message);
    let mut content = vec![ContentEntry::Text(summary)];
    if !structured.is_empty() {
        content.push(ContentEntry::Structured(Value::Map(structured)));
    }
    let response = Response {
        re: crate::ids::Re::One(env.thread_ref.as_str().to_owned()),
        content,
        executor: None,
        completed_at: None,
        notes: None,
        extra: Map::new(),
    };
    MessageDoc {
        from: EXCHANGE.to_owned(),
        received: now,
        channel: None,
        message: Message::new(vec![Payload::Status(status), Payload::Response(response)]),
        extra: Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Roster;
    use crate::ids::ThreadRef;
    use crate::rules::{Context, check_group};

    struct People;
    impl Roster for People {
        fn is_executor(&self, id: &str) -> bool {
            ["ana", "ben", "cy", "dee"].contains(&id)
        }
        fn missing(&self, id: &str, requires: &[String]) -> Vec<String> {
            let holds: &[&str] = match id {
                "cy" => &["look", "finance"],
                "ana" | "ben" | "dee" => &["look"],
                _ => &[],
            };
            requires
                .iter()
                .filter(|r| !holds.contains(&r.as_str()))
                .cloned()
                .collect()
        }
    }

    fn at(s: u32) -> Timestamp {
        time::parse_timestamp("2026-11-29T10:00:00Z").unwrap()
            + chrono::TimeDelta::seconds(i64::from(s))
    }

    fn doc(from: &str, yaml: &str, s: u32) -> MessageDoc {
        MessageDoc {
            from: from.to_owned(),
            received: at(s),
            channel: Some("http".to_owned()),
            message: crate::read::one_message(yaml).unwrap(),
            extra: Map::new(),
        }
    }

    fn thread(request: &str) -> (Envelope, Vec<MessageDoc>) {
        let first = doc("agent", &format!("MESS:\n  - request:\n{request}"), 0);
        let Payload::Request(r) = &first.message.payloads[0] else {
            panic!()
        };
        let env = Envelope::create(
            ThreadRef::parse("2026-11-29-001").unwrap(),
            r,
            &first,
            Vec::new(),
        );
        (env, vec![first])
    }

    /// Checks `d` as the rules do, then applies it; the check's refusal when refused.
    fn send(
        env: &mut Envelope,
        docs: &mut Vec<MessageDoc>,
        d: MessageDoc,
    ) -> std::result::Result<(), String> {
        let cx = Context {
            sender: &d.from,
            roster: &People,
            dependencies: &[],
            now: d.received,
        };
        check_group(env, &d.message.payloads, &cx).map_err(|e| e.to_string())?;
        env.apply(&d);
        docs.push(d);
        Ok(())
    }

    fn request_error(request: &str) -> String {
        let d = doc("agent", &format!("MESS:\n  - request:\n{request}"), 0);
        let Payload::Request(r) = &d.message.payloads[0] else {
            panic!()
        };
        Hands::read(r, at(0), "MESS[0].request")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_requests_are_refused_naming_the_field() {
        for (request, wanted) in [
            (
                "      intent: x\n      assignments: 51\n",
                "assignments: 51 answers",
            ),
            (
                "      intent: x\n      assignments: two\n",
                "assignments: expected a whole number",
            ),
            (
                "      intent: x\n      assignments: 2\n      agree: {field: open, need: 3}\n",
                "agree.need",
            ),
            (
                "      intent: x\n      approval: {from: [], need: 1}\n",
                "approval.from",
            ),
            (
                "      intent: x\n      approval: {from: [ana], need: 1, quorum: 1}\n",
                "quorum: unknown key",
            ),
            (
                "      intent: x\n      approval: {from: [ana]}\n      assignments: 2\n",
                "either for approval",
            ),
            (
                "      intent: x\n      escalate: [{after: 1h, to: [ana]}, {after: 10m, to: [ben]}]\n",
                "each rung comes later",
            ),
            (
                "      intent: x\n      escalate: [{after: 1h}, {after: 2h, to: [ben]}]\n",
                "only the last rung",
            ),
            (
                "      intent: x\n      approval: {from: [ana], scope: {uses: 0}}\n",
                "scope.uses",
            ),
        ] {
            let e = request_error(request);
            assert!(e.contains(wanted), "{request}: {e}");
        }
    }

    #[test]
    fn slots_fill_once_each_and_replay_to_the_same_envelope() {
        let (mut env, mut docs) = thread(
            "      intent: open?\n      requires: [look]\n      assignments: 2\n      agree: {field: open, need: 2}\n",
        );
        let r = "2026-11-29-001";
        let claim = |who: &str, s| {
            doc(
                who,
                &format!("MESS:\n  - status: {{re: {r}, code: claimed}}\n"),
                s,
            )
        };
        let yes = |who: &str, v: bool, s| {
            doc(
                who,
                &format!(
                    "MESS:\n  - response: {{re: {r}, content: [{{structured: {{open: {v}}}}}]}}\n"
                ),
                s,
            )
        };
        send(&mut env, &mut docs, claim("ana", 1)).unwrap();
        assert!(
            send(&mut env, &mut docs, claim("ana", 2))
                .unwrap_err()
                .contains("already hold slot 1")
        );
        send(&mut env, &mut docs, yes("ben", true, 3)).unwrap();
        assert_eq!(env.status, Status::Claimed);
        assert!(
            send(&mut env, &mut docs, claim("cy", 4))
                .unwrap_err()
                .contains("slots are taken")
        );
        send(&mut env, &mut docs, yes("ana", true, 5)).unwrap();
        assert_eq!(env.hands.answered(), 2);
        let verdict = settle_answers(&env, &docs[1..], false, at(5)).expect("decided");
        env.apply(&verdict);
        docs.push(verdict);
        assert_eq!(env.status, Status::Completed);
        // The envelope is a cache: the messages alone give it back.
        let rebuilt = crate::envelope::rebuild(&env.thread_ref, None, &docs).unwrap();
        assert_eq!(rebuilt.hands, env.hands);
        assert_eq!(rebuilt.status, env.status);
        assert!(crate::envelope::state_difference(&env, &rebuilt).is_none());
    }

    #[test]
    fn a_quorum_counts_each_approver_once_and_says_why_it_ended() {
        let (mut env, mut docs) =
            thread("      intent: pay\n      approval: {from: [ana, ben, finance], need: 2}\n");
        let r = "2026-11-29-001";
        let decide = |who: &str, ok: bool, s| {
            doc(
                who,
                &format!(
                    "MESS:\n  - response: {{re: {r}, content: [{{confirmation: {{confirmed: {ok}, details: why}}}}]}}\n"
                ),
                s,
            )
        };
        send(&mut env, &mut docs, decide("ana", true, 1)).unwrap();
        assert!(
            send(&mut env, &mut docs, decide("ana", true, 2))
                .unwrap_err()
                .contains("ana already decided")
        );
        assert!(
            send(&mut env, &mut docs, decide("dee", true, 2))
                .unwrap_err()
                .contains("not among its approvers")
        );
        let status = doc(
            "ben",
            &format!("MESS:\n  - status: {{re: {r}, code: claimed}}\n"),
            3,
        );
        assert!(
            send(&mut env, &mut docs, status)
                .unwrap_err()
                .contains("decide with a response")
        );
        assert_eq!(env.hands.tally(), (1, 0));
        assert!(settle_approval(&env, 3, None, at(3)).is_none());
        send(&mut env, &mut docs, decide("ben", false, 4)).unwrap();
        // cy (finance) may still make two.
        assert!(settle_approval(&env, 3, None, at(4)).is_none());
        send(&mut env, &mut docs, decide("cy", false, 5)).unwrap();
        let verdict = settle_approval(&env, 3, None, at(5)).expect("decided");
        env.apply(&verdict);
        assert_eq!(env.status, Status::Declined);
        let Payload::Status(s) = &verdict.message.payloads[0] else {
            panic!()
        };
        assert!(format!("{:?}", s.details).contains("approval_unreachable"));
        // Silence is expiry, never approval.
        let (mut quiet, _) =
            thread("      intent: pay\n      approval: {from: [ana, ben], need: 2, expires: 1h}\n");
        quiet.hands.decisions.push(Decision {
            by: "ana".into(),
            approved: true,
            at: at(1),
            channel: None,
            reason: None,
        });
        let expired = crate::machine::expiry(&quiet, at(3601)).expect("due");
        quiet.apply(&expired);
        assert_eq!(quiet.status, Status::Expired);
    }

    #[test]
    fn a_confirmation_by_named_people_is_theirs_and_replays_to_the_same_envelope() {
        assert!(
            request_error("      intent: x\n      confirm_by: {from: [ana]}\n")
                .contains("set confirm_before: true")
        );
        assert!(
            request_error(
                "      intent: x\n      confirm_before: true\n      confirm_by: {from: [ana], expires: 1h}\n"
            )
            .contains("confirm_by.expires")
        );
        let (mut env, mut docs) = thread(
            "      intent: shut the water\n      requires: [look]\n      confirm_before: true\n      confirm_by: {from: [ben, finance], need: 2}\n",
        );
        let r = "2026-11-29-001";
        let decide = |who: &str, ok: bool, s| {
            doc(
                who,
                &format!(
                    "MESS:\n  - response: {{re: {r}, content: [{{confirmation: {{confirmed: {ok}}}}}]}}\n"
                ),
                s,
            )
        };
        let step = |code: &str, s| {
            doc(
                "ana",
                &format!("MESS:\n  - status: {{re: {r}, code: {code}}}\n"),
                s,
            )
        };
        send(&mut env, &mut docs, step("claimed", 1)).unwrap();
        assert!(
            send(&mut env, &mut docs, decide("ben", true, 2))
                .unwrap_err()
                .contains("no confirmation is asked now")
        );
        send(
            &mut env,
            &mut docs,
            step("needs_confirmation, action: close it", 3),
        )
        .unwrap();
        let confirm = doc(
            "agent",
            &format!("MESS:\n  - reply: {{re: {r}, confirm: true}}\n"),
            4,
        );
        assert!(
            send(&mut env, &mut docs, confirm)
                .unwrap_err()
                .contains("yourself")
        );
        send(&mut env, &mut docs, decide("ben", true, 5)).unwrap();
        assert!(settle_confirmation(&env, 2, at(5)).is_none(), "one of two");
        assert!(
            send(&mut env, &mut docs, step("in_progress", 6))
                .unwrap_err()
                .contains("requires confirmation")
        );
        send(&mut env, &mut docs, decide("cy", true, 7)).unwrap();
        let verdict = settle_confirmation(&env, 2, at(7)).expect("decided");
        env.apply(&verdict);
        docs.push(verdict);
        assert_eq!(
            env.confirmation,
            Some(crate::envelope::ConfirmState::Confirmed)
        );
        send(&mut env, &mut docs, step("in_progress", 8)).unwrap();
        let rebuilt = crate::envelope::rebuild(&env.thread_ref, None, &docs).unwrap();
        assert_eq!(rebuilt.hands, env.hands);
        assert!(crate::envelope::state_difference(&env, &rebuilt).is_none());
    }

    #[test]
    fn the_digest_ignores_key_order_and_number_form() {
        let a = crate::yaml::parse_document(
            "{invoice: 42, payee: ACME}",
            &crate::yaml::Limits::DEFAULT,
        )
        .unwrap();
        let b = crate::yaml::parse_document(
            "{\"payee\": \"ACME\", \"invoice\": 42.0}",
            &crate::yaml::Limits::DEFAULT,
        )
        .unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"invoice":42,"payee":"ACME"}"#);
    }
}
