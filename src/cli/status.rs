//! `mess status`: one thread's state with its latest response, questions or pending
//! confirmation; or a table of the open threads (all threads with `--all`); or, with
//! `--jobs`, the outbox's jobs by kind.

use crate::cli::output::{self, Format};
use crate::cli::{CliError, Context};
use crate::exchange::view::{self, ThreadView};
use crate::protocol::content::ContentEntry;
use crate::protocol::status::{State, StatusDetails};
use crate::protocol::time;
use crate::protocol::value::Value;

/// Arguments of `mess status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// A ref, one of your client ids, or `last`; without it, list threads
    re: Option<String>,
    /// List finished, canceled and archived threads too
    #[arg(long)]
    all: bool,
    /// Show the outbox's jobs by kind (notices, forwards, callbacks, robot calls,
    /// carry-outs, settlements) instead of threads
    #[arg(long, conflicts_with_all = ["re", "all"])]
    jobs: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub(crate) fn run(cx: &Context, args: StatusArgs) -> Result<(), CliError> {
    if args.jobs {
        return jobs(cx, args.format);
    }
    match &args.re {
        Some(re) => one(cx, re, args.format),
        None => list(cx, args.all, args.format),
    }
}

fn one(cx: &Context, re: &str, format: Format) -> Result<(), CliError> {
    let thread = cx.thread(re)?;
    let v = ThreadView::of(&thread)?;
    // A remote exchange's queue is its own: only a local one tells the position.
    let (queued, held) = match cx.remote {
        None => (
            view::queue_position(&cx.exchange, &thread.envelope),
            view::held_until(&cx.exchange, &thread.envelope),
        ),
        Some(_) => (None, None),
    };
    if cx.remote.is_none()
        && let Some(note) = cx.exchange.outbox().notices_stalled()
    {
        output::warn(&note);
    }
    let value = || match cx.remote {
        None => view::with_waiting(&cx.exchange, &thread.envelope, v.to_value()),
        Some(_) => v.to_value(),
    };
    match format {
        Format::Yaml => output::yaml(&value()),
        Format::Json => output::json(&value())?,
        Format::Table => {
            human(&v);
            if let Some(until) = held {
                output::line(&format!("{:<12} {}", "waiting", view::held_text(&until)));
            } else if let Some(p) = queued {
                output::line(&format!("{:<12} {p}", "in queue"));
            }
        }
    }
    Ok(())
}

fn human(v: &ThreadView) {
    let e = &v.envelope;
    let mut rows: Vec<(&str, String)> = vec![
        ("ref", e.thread_ref.to_string()),
        ("status", format!("{} ({})", e.status, v.location)),
        ("intent", e.intent.clone()),
        ("requestor", e.requestor.clone()),
    ];
    if let Some(id) = &e.client_id {
        rows.push(("client id", id.clone()));
    }
    if let Some(x) = &e.executor {
        rows.push(("executor", x.clone()));
    }
    if !e.requires.is_empty() {
        rows.push(("requires", e.requires.join(", ")));
    }
    if let Some(t) = &e.expires {
        rows.push(("expires", time::format_timestamp(t)));
    }
    if let Some(est) = &e.estimate {
        rows.push(("estimate", est.clone()));
    }
    if e.confirm_before {
        rows.push((
            "confirmation",
            e.confirmation
                .map_or("required, not yet asked".to_owned(), |c| {
                    c.as_str().to_owned()
                }),
        ));
    }
    if !e.depends_on.is_empty() {
        rows.push(("depends on", e.depends_on.join(", ")));
    }
    let h = &e.hands;
    if h.multi() {
        rows.push((
            "answers",
            format!(
                "{} of {} in, {} slot{} open{}",
                h.answered(),
                h.wanted(),
                h.open(),
                if h.open() == 1 { "" } else { "s" },
                h.agree
                    .as_ref()
                    .map(|a| format!("; done when {} agree on {}", a.need, a.field))
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(a) = &h.approval {
        let (yes, no) = h.tally();
        rows.push((
            "approval",
            format!(
                "{yes} of {} approvals, {no} denied{}{}",
                a.need,
                if a.deny_vetoes {
                    "; a denial vetoes"
                } else {
                    ""
                },
                a.expires
                    .map(|t| format!("; expires {}", time::format_timestamp(&t)))
                    .unwrap_or_default()
            ),
        ));
    }
    rows.push(("updated", time::format_timestamp(&e.updated)));
    for (k, val) in rows {
        output::line(&format!("{k:<12} {val}"));
    }
    for (n, slot) in h.slots.iter().enumerate() {
        output::line(&format!(
            "  slot {:<5} {} {}{}",
            n + 1,
            slot.executor,
            slot.status,
            slot.value
                .as_deref()
                .map(|v| format!(" ({v})"))
                .unwrap_or_default()
        ));
    }
    for d in &h.decisions {
        output::line(&format!(
            "  {:<10} {} at {}{}{}",
            if d.approved { "approved" } else { "denied" },
            d.by,
            time::format_timestamp(&d.at),
            d.channel
                .as_deref()
                .map(|c| format!(" via {c}"))
                .unwrap_or_default(),
            d.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    if let Some(cur) = &v.current {
        if let Some(m) = &cur.message {
            output::line(&format!("{:<12} {m}", "message"));
        }
        match &cur.details {
            StatusDetails::NeedsInput { questions } => {
                output::line("questions:");
                for q in questions {
                    let opts: Vec<String> =
                        q.options.iter().filter_map(Value::scalar_text).collect();
                    let opts = if opts.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", opts.join(" | "))
                    };
                    output::line(&format!("  {}: {}{opts}", q.field, q.question));
                }
            }
            StatusDetails::NeedsConfirmation {
                action,
                consequences,
                reversible,
            } => {
                output::line(&format!("{:<12} {action}", "to confirm"));
                if let Some(c) = consequences {
                    output::line(&format!("{:<12} {c}", "consequences"));
                }
                if let Some(r) = reversible {
                    output::line(&format!("{:<12} {r}", "reversible"));
                }
            }
            StatusDetails::Failed { reason, .. } | StatusDetails::Declined { reason } => {
                output::line(&format!(
                    "{:<12} {}",
                    "reason",
                    output::clip(&describe(reason), 200)
                ));
            }
            _ => {}
        }
    }
    if let Some(r) = &v.response {
        output::line("response:");
        for entry in &r.content {
            output::line(&format!("  {}", entry_line(entry)));
        }
        if let Some(n) = &r.notes {
            output::line(&format!("  notes: {n}"));
        }
        if !v.unmet_hints.is_empty() {
            output::line(&format!(
                "{:<12} {}",
                "not answered",
                v.unmet_hints.join(", ")
            ));
        }
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn entry_line(entry: &ContentEntry) -> String {
    match entry {
        ContentEntry::Text(t) | ContentEntry::ExplicitText(t) => t.trim_end().replace('\n', "\n  "),
        ContentEntry::Image(m)
        | ContentEntry::Audio(m)
        | ContentEntry::Video(m)
        | ContentEntry::File(m) => {
            let kind = match entry {
                ContentEntry::Image(_) => "image",
                ContentEntry::Audio(_) => "audio",
                ContentEntry::Video(_) => "video",
                _ => "file",
            };
            let uri = m.uri();
            let shown = if uri.starts_with("data:") {
                format!(
                    "{} ({} bytes inline)",
                    uri.split(',').next().unwrap_or("data:"),
                    uri.len()
                )
            } else {
                uri.to_owned()
            };
            format!("{kind}: {shown}")
        }
        other => output::clip(&describe(&other.to_value()), 200),
    }
}

/// The outbox by kind of job: counts per shelf, when the earliest queued one is due, and the
/// latest error of a queued one (what an operator needs to see a kind that keeps failing).
fn jobs(cx: &Context, format: Format) -> Result<(), CliError> {
    if cx.remote.is_some() {
        return Err(CliError::usage(
            "a remote exchange's jobs are its own",
            "run `mess status --jobs` on its host",
        ));
    }
    let report = cx.exchange.outbox().jobs();
    let stamp = |t: &Option<time::Timestamp>| t.as_ref().map(time::format_timestamp);
    match format {
        Format::Table => {
            let rows: Vec<Vec<String>> = report
                .kinds
                .iter()
                .map(|(kind, c)| {
                    vec![
                        (*kind).to_owned(),
                        c.queued.to_string(),
                        c.due.to_string(),
                        c.retrying.to_string(),
                        c.sent.to_string(),
                        c.done.to_string(),
                        c.failed.to_string(),
                        stamp(&c.oldest_due).unwrap_or_else(|| "-".into()),
                        c.last_error
                            .as_ref()
                            .map_or("-".into(), |(_, e)| output::clip(e, 60)),
                    ]
                })
                .collect();
            output::table(
                &[
                    "KIND",
                    "QUEUED",
                    "DUE",
                    "RETRYING",
                    "SENT",
                    "DONE",
                    "FAILED",
                    "NEXT DUE",
                    "LAST ERROR",
                ],
                &rows,
            );
        }
        Format::Yaml | Format::Json => {
            let mut kinds = crate::protocol::value::Map::new();
            for (kind, c) in &report.kinds {
                let mut row = crate::protocol::value::Map::new();
                for (name, n) in [
                    ("queued", c.queued),
                    ("due", c.due),
                    ("retrying", c.retrying),
                    ("sent", c.sent),
                    ("done", c.done),
                    ("failed", c.failed),
                ] {
                    row.insert(name, Value::Int(n as i64));
                }
                row.insert_opt("next_due", stamp(&c.oldest_due).map(Value::str));
                if let Some((at, e)) = &c.last_error {
                    row.insert("last_error", Value::str(e));
                    row.insert("last_error_at", Value::str(time::format_timestamp(at)));
                }
                kinds.insert(*kind, Value::Map(row));
            }
            let mut top = crate::protocol::value::Map::new();
            top.insert("jobs", Value::Map(kinds));
            top.insert("unreadable", Value::Int(report.unreadable.len() as i64));
            let top = Value::Map(top);
            if format == Format::Yaml {
                output::yaml(&top);
            } else {
                output::json(&top)?;
            }
        }
    }
    if !report.unreadable.is_empty() {
        output::warn(&format!(
            "{} job record(s) could not be read; `mess fsck` names them",
            report.unreadable.len()
        ));
    }
    Ok(())
}

/// Threads a remote listing asks for per folder (the HTTP API's most).
const REMOTE_LIMIT: usize = 1000;

fn list(cx: &Context, all: bool, format: Format) -> Result<(), CliError> {
    let states: &[State] = if all {
        &State::ALL
    } else {
        &[State::Received, State::Executing]
    };
    let (items, errors) = match &cx.remote {
        Some(r) => {
            let envelopes = r.run(r.remote.threads(states, REMOTE_LIMIT))?;
            (envelopes.into_iter().map(|e| (e, ())).collect(), Vec::new())
        }
        None => {
            for problem in cx.exchange.config_problems() {
                output::warn(&problem);
            }
            if let Some(note) = cx.exchange.outbox().notices_stalled() {
                output::warn(&note);
            }
            let (items, errors) = cx.exchange.list(states, all)?;
            (
                items.into_iter().map(|(e, _)| (e, ())).collect::<Vec<_>>(),
                errors,
            )
        }
    };
    match format {
        Format::Table => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|(e, _)| {
                    let status = match cx.remote {
                        None => view::held_until(&cx.exchange, e).map(|until| {
                            format!(
                                "{} (held until {})",
                                e.status,
                                time::format_timestamp(&until)
                            )
                        }),
                        Some(_) => None,
                    };
                    vec![
                        e.thread_ref.to_string(),
                        status.unwrap_or_else(|| e.status.to_string()),
                        e.executor.clone().unwrap_or_else(|| "-".into()),
                        time::format_timestamp(&e.updated),
                        output::clip(&e.intent, 60),
                    ]
                })
                .collect();
            output::table(&["REF", "STATUS", "EXECUTOR", "UPDATED", "INTENT"], &rows);
        }
        Format::Yaml | Format::Json => {
            let list = Value::Seq(items.iter().map(|(e, _)| view::thread_summary(e)).collect());
            if format == Format::Yaml {
                output::yaml(&list);
            } else {
                output::json(&list)?;
            }
        }
    }
    if !errors.is_empty() {
        let first = errors[0].to_string();
        return Err(CliError::with_hint(
            format!(
                "{} thread file(s) could not be read, e.g. {first}",
                errors.len()
            ),
            "run `mess fsck` for details",
        ));
    }
    Ok(())
}
