//! What the CLI prints and takes from its surroundings: results on stdout (YAML, JSON, aligned
//! tables, one-line summaries), warnings on stderr with control characters escaped, the log
//! subscriber, and millisecond settings from `MESS_*` variables.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::CliError;
use crate::protocol::emit;
use crate::protocol::message::{Message, Payload};
use crate::protocol::value::Value;

/// Output formats of `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for people.
    Table,
    /// YAML documents.
    Yaml,
    /// JSON.
    Json,
}

/// Set once stdout's reader has gone (`mess status | head`): the rest of the output is
/// dropped and the command ends quietly instead of failing on every later write.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout. A reader that stopped reading (a closed pipe) is not an error of the
/// command: what follows is dropped, and [`stdout_closed`] tells the caller to end quietly.
pub(crate) fn out(text: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Whether stdout's reader went away while the command was printing.
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Writes `text` to stderr; a closed stderr loses it and nothing else.
pub(crate) fn err(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

pub(crate) fn line(text: &str) {
    out(&format!("{}\n", printable(text)));
}

/// Prints a warning on stderr (it does not change the exit code).
pub(crate) fn warn(text: &str) {
    err(&format!("warning: {}\n", escape_controls(text)));
}

/// Shows control characters (an escape sequence in an intent, say) as escapes instead of
/// letting them act on the terminal; line breaks and tabs stay.
pub(crate) fn printable(text: &str) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

pub(crate) fn raw(text: &str) {
    out(text);
}

pub(crate) fn yaml(value: &Value) {
    out(&emit::to_yaml(value));
}

pub(crate) fn json(value: &Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::new(format!("cannot write JSON: {e}")))?;
    out(&format!("{text}\n"));
    Ok(())
}

/// Prints rows under a header. On a terminal the table fits its width (long cells wrap
/// within their column, comfy-table); otherwise (a pipe, a file) columns are padded to their
/// widest cell and the last is free, so each row stays one line for scripts.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) {
    if std::io::stdout().is_terminal()
        && let Some((_, columns)) = console::Term::stdout().size_checked()
    {
        out(&fitted(header, rows, columns));
        return;
    }
    plain_table(header, rows);
}

/// The table of `rows` under `header`, no wider than `width` characters.
fn fitted(header: &[&str], rows: &[Vec<String>], width: u16) -> String {
    use comfy_table::{ContentArrangement, Table, presets};
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_HORIZONTAL_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width)
        .set_header(header.iter().copied());
    for row in rows {
        table.add_row(row.iter().map(|c| printable(c)));
    }
    format!("{table}\n")
}

/// [`table`] for a pipe or a file.
fn plain_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let render = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    (*c).to_owned()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut text = render(header.to_vec());
    text.push('\n');
    for row in rows {
        text.push_str(&printable(&render(
            row.iter().map(String::as_str).collect(),
        )));
        text.push('\n');
    }
    out(&text);
}

/// One line per thread status in an answer: `<ref> <status>`.
pub(crate) fn answer_lines(answer: &Message) {
    for p in answer.content() {
        match p {
            Payload::Status(s) => {
                let who = s
                    .executor
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default();
                out(&format!("{} {}{who}\n", s.re.items().join(","), s.code));
            }
            Payload::Ack(a) => {
                if let Some(r) = &a.thread_ref {
                    out(&format!("{r}\n"));
                }
                for e in &a.requests {
                    out(&format!("{}\n", e.thread_ref));
                }
            }
            other => out(&emit::to_yaml(&other.to_value())),
        }
    }
}

/// Shortens text to `max` characters for table cells.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// How log lines are written (`--log-format`, `MESS_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One line per event for people; coloured on a terminal.
    #[default]
    Text,
    /// One JSON object per line (tracing-subscriber's JSON), with the request's span fields.
    Json,
}

static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Sets the format [`start_logging`] uses (from the command line, once).
pub(crate) fn set_log_format(format: LogFormat) {
    let _ = LOG_FORMAT.set(format);
}

/// Logs to stderr at `default` level unless `MESS_LOG` (else `RUST_LOG`) says otherwise
/// (long-running commands only; stdout stays for their answers), as text or JSON.
pub(crate) fn start_logging(default: &str) {
    let mut filter = None;
    for name in ["MESS_LOG", "RUST_LOG"] {
        let Some(value) = std::env::var(name).ok().filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        match tracing_subscriber::EnvFilter::try_new(&value) {
            Ok(f) => {
                filter = Some(f);
                break;
            }
            Err(e) => warn(&format!(
                "{name}={value} is not a log filter ({e}); ignored"
            )),
        }
    }
    let filter = filter.unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match LOG_FORMAT.get().copied().unwrap_or_default() {
        // serde_json escapes every control character in the values it writes.
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .try_init(),
        LogFormat::Text => {
            // Logged values come from callers (paths, ids, messages): every control character
            // is escaped, so no value can start a line of its own or move a terminal's cursor;
            // on a terminal, colour sequences (and only those) pass.
            let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder
                .with_ansi(colour)
                .with_writer(move || EscapedLines {
                    inner: std::io::stderr(),
                    colour,
                })
                .try_init()
        }
    };
}

/// A writer that keeps each log event on one line: the formatter writes an event at once, ending
/// in a line break; every other control character in it is written escaped (`\n`, `\u{1b}`),
/// except, with `colour`, the colour sequences (`ESC [ digits ; m`) the formatter writes.
struct EscapedLines<W: std::io::Write> {
    inner: W,
    colour: bool,
}

impl<W: std::io::Write> std::io::Write for EscapedLines<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let mut out = String::with_capacity(buf.len() + 8);
        let mut rest = body;
        while !rest.is_empty() {
            let colour_len = if self.colour {
                colour_sequence(rest)
            } else {
                0
            };
            if colour_len > 0 {
                out.push_str(&rest[..colour_len]);
                rest = &rest[colour_len..];
                continue;
            }
            // Up to the next escape character, escaped as usual.
            let next = rest
                .char_indices()
                .skip(1)
                .find(|(_, c)| *c == '\u{1b}')
                .map_or(rest.len(), |(i, _)| i);
            out.push_str(&escape_controls(&rest[..next]));
            rest = &rest[next..];
        }
        if body.len() < text.len() {
            out.push('\n');
        }
        self.inner.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The length of the colour (SGR) sequence `text` starts with (`ESC [ 1;32 m`), or 0: it sets
/// colours and weights only, never the cursor or the screen.
fn colour_sequence(text: &str) -> usize {
    let Some(params) = text.strip_prefix("\u{1b}[") else {
        return 0;
    };
    let len = params
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    if params.as_bytes().get(len) == Some(&b'm') && len <= 16 {
        2 + len + 1
    } else {
        0
    }
}

/// `text` with every control character but the tab written as an escape, and the characters
/// some viewers take as line breaks or as a change of direction (U+2028, U+2029, the bidi
/// embeddings, overrides and isolates).
pub(crate) fn escape_controls(text: &str) -> String {
    let escaped = |c: char| {
        (c.is_control() && c != '\t')
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(escaped) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if escaped(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A positive number of milliseconds from the environment variable `name` (tuning knobs that
/// tests shorten), if set.
pub(crate) fn env_millis(name: &str) -> Option<std::time::Duration> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(std::time::Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::fitted;

    #[test]
    fn a_table_fits_the_width_it_is_given() {
        let rows = vec![
            vec![
                "2026-11-28-001".to_owned(),
                "what is in the fridge, and is the milk still good? ".repeat(4),
                "teague-phone".to_owned(),
            ],
            vec![
                "2026-11-28-002".to_owned(),
                "vacuum".to_owned(),
                "roomba".to_owned(),
            ],
        ];
        let text = fitted(&["ref", "intent", "executor"], &rows, 60);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 60,
                "{line:?} ({})",
                line.chars().count()
            );
        }
        // The long intent wraps inside its column; nothing is lost.
        let joined: String = text.split_whitespace().collect();
        assert!(joined.contains("milk"), "{text}");
        assert!(
            text.contains("2026-11-28-002") && text.contains("teague-phone"),
            "{text}"
        );
    }
}
