//! `mess request`: builds a request from flags, submits it, and prints the ref.

use crate::cli::{CliError, Context, one_of, output, when};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::request::Priority;
use crate::protocol::status::Status;
use crate::protocol::value::{Map, Value};

/// Arguments of `mess request`.
#[derive(Debug, clap::Args)]
pub(crate) struct RequestArgs {
    /// What needs doing, in plain language
    intent: String,
    /// A line of context (repeatable)
    #[arg(long = "context", value_name = "TEXT")]
    context: Vec<String>,
    /// A capability the executor must hold (repeatable)
    #[arg(long = "requires", value_name = "CAPABILITY")]
    requires: Vec<String>,
    /// How urgent it is
    #[arg(long, value_parser = one_of(Priority::ALL.iter().map(|p| p.as_str())))]
    priority: Option<String>,
    /// When the request goes stale: a time (RFC 3339, `tomorrow 9:00`) or a duration from now
    /// (`2h`)
    #[arg(long, value_name = "TIME")]
    needed_by: Option<String>,
    /// Require the executor to ask for confirmation before acting
    #[arg(long)]
    confirm_before: bool,
    /// Your own id for the request (re-sending it returns the same open thread)
    #[arg(long)]
    id: Option<String>,
    /// A request that must complete first, by ref or client id (repeatable)
    #[arg(long = "depends-on", value_name = "RE")]
    depends_on: Vec<String>,
    /// A URL that hears of every change of the request: a signed POST of the thread, as
    /// executor webhooks get (only where dispatch.webhook.allow permits)
    #[arg(long, value_name = "URL")]
    callback: Option<String>,
    /// Ask for N answers, each from a different executor
    #[arg(long, value_name = "N")]
    assignments: Option<u32>,
    /// With --assignments: done when M answers give one value of FIELD (`FIELD=M`)
    #[arg(long, value_name = "FIELD=M")]
    agree: Option<String>,
    /// Ask for approval from this executor or capability (repeatable)
    #[arg(long = "approver", value_name = "ID")]
    approvers: Vec<String>,
    /// With --confirm-before: this executor or capability confirms the step instead of you
    /// (repeatable; `mess approve` / `mess deny`)
    #[arg(long = "confirmer", value_name = "ID")]
    confirmers: Vec<String>,
    /// With --approver or --confirmer: approvals or confirmations needed (default 1)
    #[arg(long, value_name = "M")]
    need: Option<u32>,
    /// With --approver or --confirmer: one denial ends the request or refuses the step
    #[arg(long)]
    deny_vetoes: bool,
    /// With --approver: when the approval expires undecided (a time or a duration from now)
    #[arg(long, value_name = "TIME")]
    approval_expires: Option<String>,
    /// A rung of the escalation ladder: `AFTER=ID,ID` offers the work to those after AFTER
    /// (from now) unclaimed; `AFTER` alone ends the ladder then (repeatable, in order)
    #[arg(long = "escalate", value_name = "AFTER=TO")]
    escalate: Vec<String>,
}

pub(crate) fn run(cx: &Context, args: RequestArgs) -> Result<(), CliError> {
    let mut req = Map::new();
    if let Some(id) = args.id {
        req.insert("id", Value::str(id));
    }
    req.insert("intent", Value::str(args.intent));
    let strings = |v: Vec<String>| Value::Seq(v.into_iter().map(Value::String).collect());
    if !args.requires.is_empty() {
        req.insert("requires", strings(args.requires));
    }
    if !args.context.is_empty() {
        req.insert("context", strings(args.context));
    }
    if !args.depends_on.is_empty() {
        let mut c = Map::new();
        c.insert("depends_on", strings(args.depends_on));
        req.insert("constraints", Value::Map(c));
    }
    if let Some(p) = args.priority {
        req.insert("priority", Value::str(p));
    }
    if let Some(t) = args.needed_by {
        let t = when::instant_text(
            "--needed-by",
            &t,
            cx.exchange.now().with_timezone(&chrono::Utc),
        )?;
        req.insert("needed_by", Value::str(t));
    }
    if args.confirm_before {
        req.insert("confirm_before", Value::Bool(true));
    }
    if let Some(url) = args.callback {
        req.insert("callback", Value::str(url));
    }
    if let Some(n) = args.assignments {
        req.insert("assignments", Value::Int(i64::from(n)));
    }
    if let Some(rule) = args.agree {
        let (field, need) = rule
            .split_once('=')
            .and_then(|(f, m)| Some((f.trim().to_owned(), m.trim().parse::<i64>().ok()?)))
            .ok_or_else(|| {
                CliError::usage(
                    format!("--agree {rule:?}: write FIELD=M, e.g. verdict=2"),
                    "see `mess request --help`",
                )
            })?;
        let mut agree = Map::new();
        agree.insert("field", Value::str(field));
        agree.insert("need", Value::Int(need));
        req.insert("agree", Value::Map(agree));
    }
    if !args.confirmers.is_empty() {
        req.insert("confirm_before", Value::Bool(true));
        let mut by = Map::new();
        by.insert("from", strings(args.confirmers));
        by.insert("need", Value::Int(i64::from(args.need.unwrap_or(1))));
        if args.deny_vetoes {
            by.insert("deny_vetoes", Value::Bool(true));
        }
        req.insert("confirm_by", Value::Map(by));
    }
    if !args.approvers.is_empty() {
        let mut approval = Map::new();
        approval.insert("from", strings(args.approvers));
        approval.insert("need", Value::Int(i64::from(args.need.unwrap_or(1))));
        if args.deny_vetoes {
            approval.insert("deny_vetoes", Value::Bool(true));
        }
        if let Some(t) = args.approval_expires {
            let t = when::instant_text(
                "--approval-expires",
                &t,
                cx.exchange.now().with_timezone(&chrono::Utc),
            )?;
            approval.insert("expires", Value::str(t));
        }
        req.insert("approval", Value::Map(approval));
    } else if args.approval_expires.is_some()
        || (req.get("confirm_by").is_none() && (args.need.is_some() || args.deny_vetoes))
    {
        return Err(CliError::usage(
            "--need and --deny-vetoes go with --approver or --confirmer; --approval-expires with --approver",
            "name who approves with --approver ID, or who confirms with --confirmer ID (repeatable)",
        ));
    }
    if !args.escalate.is_empty() {
        let rungs = args
            .escalate
            .iter()
            .map(|rung| {
                let (after, to) = rung.split_once('=').unwrap_or((rung.as_str(), ""));
                let mut m = Map::new();
                m.insert("after", Value::str(after.trim()));
                let to: Vec<Value> = to
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(Value::str)
                    .collect();
                if !to.is_empty() {
                    m.insert("to", Value::Seq(to));
                }
                Value::Map(m)
            })
            .collect();
        req.insert("escalate", Value::Seq(rungs));
    }
    let answer = cx.submit(super::message_of("request", "request", req)?)?;
    output::answer_lines(&answer);
    if cx.remote.is_none() {
        warn_if_unrouted(cx, &answer);
    }
    Ok(())
}

/// Tells the requestor when no executor was found, so a request does not wait unnoticed.
fn warn_if_unrouted(cx: &Context, answer: &Message) {
    for p in &answer.payloads {
        let Payload::Ack(ack) = p else { continue };
        let Some(r) = ack
            .thread_ref
            .as_deref()
            .and_then(|r| ThreadRef::parse(r).ok())
        else {
            continue;
        };
        if let Ok(env) = cx.exchange.envelope(&r)
            && env.status == Status::Pending
            && env.depends_on.is_empty()
            && !env.dispatched()
        {
            let needs = if env.requires.is_empty() {
                "no executor is registered".to_owned()
            } else {
                format!("no registered executor holds {}", env.requires.join(", "))
            };
            output::warn(&format!(
                "{r}: {needs}; it waits until one registers (executors: in config.yaml)"
            ));
        }
    }
}
