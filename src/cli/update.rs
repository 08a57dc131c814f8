//! `mess update`: an executor reports a status with the code's fields.

use crate::cli::{CliError, Context, message_of, one_of, output, when};
use crate::protocol::status::{Status, WaitingKind};
use crate::protocol::time;
use crate::protocol::value::{Map, Value};

/// Arguments of `mess update`.
#[derive(Debug, clap::Args)]
pub(crate) struct UpdateArgs {
    /// The request's ref
    re: String,
    /// The status code
    #[arg(long, value_name = "CODE", value_parser = one_of(Status::ALL.iter().map(|s| s.as_str())))]
    status: String,
    /// A human-readable message
    #[arg(long)]
    message: Option<String>,
    /// Why (failed, declined, held, cancelled, partial, delegated; merge|split|replace for superseded)
    #[arg(long)]
    reason: Option<String>,
    /// Percent done, 0 to 100 (in_progress)
    #[arg(long, value_name = "PCT")]
    progress: Option<f64>,
    /// Expected time to complete: a duration (30m, PT2H) or the time it will take until
    /// (claimed, in_progress)
    #[arg(long, value_name = "DURATION")]
    estimate: Option<String>,
    /// When it will be done: a duration from now (45m) or a time (RFC 3339, `today 17:00`)
    #[arg(long, value_name = "TIME")]
    eta: Option<String>,
    /// A question, `field: question` with optional `[option|option]` (needs_input; repeatable)
    #[arg(long = "question", value_name = "Q")]
    questions: Vec<String>,
    /// The action to confirm (needs_confirmation)
    #[arg(long)]
    action: Option<String>,
    /// What confirming will cause (needs_confirmation)
    #[arg(long)]
    consequences: Option<String>,
    /// Whether the action can be undone (needs_confirmation)
    #[arg(long)]
    reversible: Option<bool>,
    /// What blocks the work (waiting)
    #[arg(long, value_name = "TYPE", value_parser = one_of(WaitingKind::ALL.iter().map(|k| k.as_str())))]
    waiting_for: Option<String>,
    /// The condition waited for (waiting)
    #[arg(long)]
    condition: Option<String>,
    /// The resource waited for (waiting)
    #[arg(long)]
    resource: Option<String>,
    /// When work can resume: a time (RFC 3339, `tomorrow 8:00`) or a duration from now
    /// (waiting on schedule)
    #[arg(long, value_name = "TIME")]
    available_at: Option<String>,
    /// A note (waiting)
    #[arg(long)]
    note: Option<String>,
    /// Something done (partial; repeatable)
    #[arg(long = "completed", value_name = "ITEM")]
    completed: Vec<String>,
    /// Something left (partial; repeatable)
    #[arg(long = "remaining", value_name = "ITEM")]
    remaining: Vec<String>,
    /// Whether trying again may work (failed)
    #[arg(long)]
    recoverable: Option<bool>,
    /// What would help (failed)
    #[arg(long)]
    suggestion: Option<String>,
    /// Who the work was passed to (delegated)
    #[arg(long)]
    delegated_to: Option<String>,
    /// The request that replaces this one (superseded)
    #[arg(long)]
    superseded_by: Option<String>,
    /// Attempt number (retrying)
    #[arg(long)]
    attempt: Option<i64>,
    /// Attempts allowed (retrying)
    #[arg(long)]
    max_attempts: Option<i64>,
    /// When the next attempt happens: a time or a duration from now (retrying)
    #[arg(long, value_name = "TIME")]
    next_attempt: Option<String>,
}

/// Refuses flags that belong to another status code, instead of storing them as unknown fields.
fn check_flags(a: &UpdateArgs) -> Result<(), CliError> {
    let given: [(&str, bool, &[&str]); 22] = [
        (
            "--reason",
            a.reason.is_some(),
            &[
                "held",
                "failed",
                "declined",
                "cancelled",
                "partial",
                "delegated",
                "superseded",
            ],
        ),
        ("--progress", a.progress.is_some(), &["in_progress"]),
        (
            "--estimate",
            a.estimate.is_some(),
            &["claimed", "in_progress"],
        ),
        ("--eta", a.eta.is_some(), &["claimed", "in_progress"]),
        ("--question", !a.questions.is_empty(), &["needs_input"]),
        ("--action", a.action.is_some(), &["needs_confirmation"]),
        (
            "--consequences",
            a.consequences.is_some(),
            &["needs_confirmation"],
        ),
        (
            "--reversible",
            a.reversible.is_some(),
            &["needs_confirmation"],
        ),
        ("--waiting-for", a.waiting_for.is_some(), &["waiting"]),
        ("--condition", a.condition.is_some(), &["waiting"]),
        ("--resource", a.resource.is_some(), &["waiting"]),
        ("--available-at", a.available_at.is_some(), &["waiting"]),
        ("--note", a.note.is_some(), &["waiting"]),
        ("--completed", !a.completed.is_empty(), &["partial"]),
        ("--remaining", !a.remaining.is_empty(), &["partial"]),
        ("--recoverable", a.recoverable.is_some(), &["failed"]),
        ("--suggestion", a.suggestion.is_some(), &["failed"]),
        ("--delegated-to", a.delegated_to.is_some(), &["delegated"]),
        (
            "--superseded-by",
            a.superseded_by.is_some(),
            &["superseded"],
        ),
        ("--attempt", a.attempt.is_some(), &["retrying"]),
        ("--max-attempts", a.max_attempts.is_some(), &["retrying"]),
        ("--next-attempt", a.next_attempt.is_some(), &["retrying"]),
    ];
    for (flag, set, codes) in given {
        if set && !codes.contains(&a.status.as_str()) {
            return Err(CliError::usage(
                format!("{flag} does not apply to --status {}", a.status),
                format!("{flag} goes with --status {}", codes.join(" or ")),
            ));
        }
    }
    if (a.condition.is_some()
        || a.resource.is_some()
        || a.available_at.is_some()
        || a.note.is_some())
        && a.waiting_for.is_none()
    {
        return Err(CliError::usage(
            "--condition, --resource, --available-at and --note describe --waiting-for",
            "add --waiting-for dependency|condition|resource|access|schedule",
        ));
    }
    Ok(())
}

pub(crate) fn run(cx: &Context, a: UpdateArgs) -> Result<(), CliError> {
    check_flags(&a)?;
    let mut s = Map::new();
    s.insert("re", Value::str(&a.re));
    s.insert("code", Value::str(&a.status));
    let text = |v: Option<String>| v.map(Value::String);
    s.insert_opt("message", text(a.message));
    s.insert_opt("reason", text(a.reason));
    s.insert_opt("progress_pct", a.progress.map(Value::Float));
    let now = cx.exchange.now().with_timezone(&chrono::Utc);
    let estimate = a
        .estimate
        .map(|e| when::span("--estimate", &e, now, when::Toward::Future))
        .transpose()?;
    s.insert_opt("estimate", estimate.map(|d| Value::str(when::iso(&d))));
    let eta = a
        .eta
        .map(|e| when::duration_or_time_text("--eta", &e, now))
        .transpose()?;
    s.insert_opt("eta", text(eta));
    if !a.questions.is_empty() {
        let qs = a
            .questions
            .iter()
            .map(|q| parse_question(q))
            .collect::<Result<Vec<_>, _>>()?;
        s.insert("questions", Value::Seq(qs));
    }
    s.insert_opt("action", text(a.action));
    s.insert_opt("consequences", text(a.consequences));
    s.insert_opt("reversible", a.reversible.map(Value::Bool));
    if let Some(kind) = a.waiting_for {
        let mut w = Map::new();
        w.insert("type", Value::str(kind));
        w.insert_opt("condition", text(a.condition));
        w.insert_opt("resource", text(a.resource));
        let at = a
            .available_at
            .map(|t| when::instant_text("--available-at", &t, now))
            .transpose()?;
        w.insert_opt("available_at", text(at));
        w.insert_opt("note", text(a.note));
        s.insert("waiting_for", Value::Map(w));
    }
    let list = |v: Vec<String>| {
        (!v.is_empty()).then(|| Value::Seq(v.into_iter().map(Value::String).collect()))
    };
    s.insert_opt("completed", list(a.completed));
    s.insert_opt("remaining", list(a.remaining));
    s.insert_opt("recoverable", a.recoverable.map(Value::Bool));
    s.insert_opt("suggestion", text(a.suggestion));
    s.insert_opt("delegated_to", text(a.delegated_to));
    s.insert_opt("superseded_by", text(a.superseded_by));
    s.insert_opt("attempt", a.attempt.map(Value::Int));
    s.insert_opt("max_attempts", a.max_attempts.map(Value::Int));
    let next = a
        .next_attempt
        .map(|t| when::instant_text("--next-attempt", &t, now))
        .transpose()?;
    s.insert_opt("next_attempt", text(next));
    if a.status == "expired" && !s.contains_key("expired_at") {
        s.insert(
            "expired_at",
            Value::str(time::format_timestamp(&cx.exchange.now())),
        );
    }
    let answer = cx.submit(message_of("update", "status", s)?)?;
    output::answer_lines(&answer);
    Ok(())
}

/// Parses `field: question [a|b|c]`.
fn parse_question(raw: &str) -> Result<Value, CliError> {
    let Some((field, rest)) = raw.split_once(':') else {
        return Err(CliError::usage(
            format!("--question {raw:?} has no field"),
            "write `field: question`, optionally ending in [option|option]",
        ));
    };
    let mut q = Map::new();
    q.insert("field", Value::str(field.trim()));
    let rest = rest.trim();
    match rest.rfind('[') {
        Some(open) if rest.ends_with(']') => {
            q.insert("question", Value::str(rest[..open].trim()));
            let opts = rest[open + 1..rest.len() - 1]
                .split('|')
                .map(|o| Value::str(o.trim()))
                .collect();
            q.insert("options", Value::Seq(opts));
        }
        _ => q.insert("question", Value::str(rest)),
    }
    Ok(Value::Map(q))
}
