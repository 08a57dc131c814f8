//! One reading of every time and duration flag (`--needed-by`, `--eta`, `--available-at`,
//! `--next-attempt`, `--estimate`, `--older-than`, `--ttl`, `mess mail --expires`): an RFC 3339
//! time, a duration (`2h`, `1h30m`, `P1D`: the protocol's own forms), or a phrase such as
//! `tomorrow 9:00`, `friday 17:00` or `3 days ago`, read by the `interim` crate in this
//! machine's time zone. Times are written into messages as RFC 3339 with their offset, so what
//! is stored never depends on how it was typed.

use chrono::{DateTime, Local, Utc};

use crate::cli::CliError;
use crate::protocol::time::{self, Duration, Timestamp};

/// What every time flag accepts, for error hints.
const FORMS: &str = "a time (2026-12-01T09:00:00+01:00, 2026-12-01 09:00, tomorrow 9:00, \
    friday 17:00) or a duration from now (2h, 45m, 1h30m, P1D)";

/// Which way from now a duration flag's time lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Toward {
    /// A time to come (`--ttl`, `--estimate`): `tomorrow 9:00` is the time until then.
    Future,
    /// A time gone by (`--older-than`): `2026-11-01` is the time since then.
    Past,
}

/// The time `text` names, as an instant with the offset it was written in (or this machine's,
/// for phrases); a duration counts from `now`.
pub(crate) fn instant(flag: &str, text: &str, now: DateTime<Utc>) -> Result<Timestamp, CliError> {
    let text = text.trim();
    if let Ok(t) = time::parse_timestamp(text) {
        return Ok(t);
    }
    if let Ok(d) = time::parse_any_duration(text) {
        return Ok((now + d.length).with_timezone(&Local).fixed_offset());
    }
    phrase(text, now).ok_or_else(|| bad(flag, text))
}

/// The time `text` names, as a message carries it: RFC 3339 text as typed, anything else as
/// the RFC 3339 text of the instant it names.
pub(crate) fn instant_text(flag: &str, text: &str, now: DateTime<Utc>) -> Result<String, CliError> {
    if time::parse_timestamp(text.trim()).is_ok() {
        return Ok(text.trim().to_owned());
    }
    instant(flag, text, now).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// A field that takes a duration or a time (`eta`): a duration as written (the protocol reads
/// it from the message's time), anything else as [`instant_text`].
pub(crate) fn duration_or_time_text(
    flag: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<String, CliError> {
    if time::parse_any_duration(text.trim()).is_ok() {
        return Ok(text.trim().to_owned());
    }
    instant_text(flag, text, now)
}

/// The length `text` names: a duration as written, or the time from `now` to a time to come
/// (`toward` future) or from a time gone by to `now` (`toward` past).
pub(crate) fn span(
    flag: &str,
    text: &str,
    now: DateTime<Utc>,
    toward: Toward,
) -> Result<Duration, CliError> {
    let text = text.trim();
    if let Ok(d) = time::parse_any_duration(text) {
        return Ok(d);
    }
    let at = time::parse_timestamp(text)
        .ok()
        .or_else(|| phrase(text, now))
        .ok_or_else(|| bad(flag, text))?
        .with_timezone(&Utc);
    let seconds = match toward {
        Toward::Future => (at - now).num_seconds(),
        Toward::Past => (now - at).num_seconds(),
    };
    if seconds <= 0 {
        let side = match toward {
            Toward::Future => "to come",
            Toward::Past => "gone by",
        };
        return Err(CliError::usage(
            format!("{flag}: {text:?} is not a time {side}"),
            format!("{flag} takes {FORMS}"),
        ));
    }
    time::parse_any_duration(&format!("{seconds}s")).map_err(|e| CliError::usage(e, FORMS))
}

/// The ISO 8601 form of `span`, for fields the protocol reads as ISO durations (`estimate`).
pub(crate) fn iso(d: &Duration) -> String {
    if d.text.starts_with(['P', 'p']) {
        return d.text.clone();
    }
    let s = d.length.num_seconds();
    let (days, rest) = (s / 86_400, s % 86_400);
    let (h, m, sec) = (rest / 3600, rest % 3600 / 60, rest % 60);
    let mut out = String::from("P");
    if days > 0 {
        out.push_str(&format!("{days}D"));
    }
    if rest > 0 || days == 0 {
        out.push('T');
        for (n, unit) in [(h, 'H'), (m, 'M'), (sec, 'S')] {
            if n > 0 {
                out.push_str(&format!("{n}{unit}"));
            }
        }
        if rest == 0 {
            out.push_str("0S");
        }
    }
    out
}

/// A phrase (`tomorrow 9:00`, `friday 17:00`, `3 days ago`, `2026-12-01 09:00`) in this
/// machine's time zone; day-first where a date is ambiguous (`01/12`), as RFC 3339 is.
fn phrase(text: &str, now: DateTime<Utc>) -> Option<Timestamp> {
    let local = now.with_timezone(&Local);
    interim::parse_date_string(text, local, interim::Dialect::Uk)
        .ok()
        .map(|t| t.fixed_offset())
}

fn bad(flag: &str, text: &str) -> CliError {
    CliError::usage(
        format!("{flag}: cannot read {text:?} as a time or a duration"),
        format!("{flag} takes {FORMS}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-28T20:00:00Z".parse().unwrap()
    }

    #[test]
    fn rfc3339_keeps_its_offset_and_text() {
        let t = instant("--needed-by", "2026-12-01T09:00:00-08:00", now()).unwrap();
        assert_eq!(t.offset().local_minus_utc(), -8 * 3600);
        assert_eq!(
            instant_text("--needed-by", " 2026-12-01T09:00:00-08:00 ", now()).unwrap(),
            "2026-12-01T09:00:00-08:00"
        );
    }

    #[test]
    fn durations_count_from_now_and_phrases_name_a_day() {
        let t = instant("--eta", "2h", now()).unwrap();
        assert_eq!(t.with_timezone(&Utc), now() + chrono::TimeDelta::hours(2));
        let t = instant("--eta", "P1D", now()).unwrap();
        assert_eq!(t.with_timezone(&Utc), now() + chrono::TimeDelta::days(1));
        let local = now().with_timezone(&Local).date_naive();
        let t = instant("--needed-by", "tomorrow 9:00", now()).unwrap();
        assert_eq!(
            t.with_timezone(&Local).date_naive(),
            local.succ_opt().unwrap()
        );
        assert_eq!(t.with_timezone(&Local).format("%H:%M").to_string(), "09:00");
        let ago = instant("--x", "3 days ago", now()).unwrap();
        assert_eq!(ago.with_timezone(&Utc), now() - chrono::TimeDelta::days(3));
    }

    #[test]
    fn spans_read_durations_as_written_and_times_by_their_side_of_now() {
        assert_eq!(
            span("--ttl", "24h", now(), Toward::Future).unwrap().text,
            "24h"
        );
        let d = span("--older-than", "2026-11-18T20:00:00Z", now(), Toward::Past).unwrap();
        assert_eq!(d.length, chrono::TimeDelta::days(10));
        let d = span("--ttl", "2026-11-29T20:00:00Z", now(), Toward::Future).unwrap();
        assert_eq!(d.length, chrono::TimeDelta::days(1));
        let e = span("--ttl", "2026-11-01T00:00:00Z", now(), Toward::Future).unwrap_err();
        assert!(e.message.contains("not a time to come"), "{}", e.message);
    }

    #[test]
    fn nonsense_names_the_flag_and_the_forms() {
        for text in ["soonish", "", "12 parsecs", "2026-13-45"] {
            let e = instant("--needed-by", text, now()).unwrap_err();
            assert!(
                e.message.starts_with("--needed-by: cannot read"),
                "{}",
                e.message
            );
            assert!(e.hint.as_deref().unwrap().contains("tomorrow 9:00"));
            assert_eq!(e.code, 2);
        }
    }

    #[test]
    fn iso_forms_of_spans() {
        let iso_of = |t: &str| iso(&time::parse_any_duration(t).unwrap());
        assert_eq!(iso_of("PT45M"), "PT45M");
        assert_eq!(iso_of("45m"), "PT45M");
        assert_eq!(iso_of("1d2h"), "P1DT2H");
        assert_eq!(iso_of("2d"), "P2D");
        assert_eq!(iso_of("90s"), "PT1M30S");
        assert_eq!(iso_of("0s"), "PT0S");
    }
}
