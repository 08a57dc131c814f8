//! Timestamps and durations as MESS uses them: RFC 3339 instants, ISO 8601 durations
//! (`PT45M`, v1.1 `estimate`) and the v1.0 short form (`2h`, `45m`, `2h15m`).

use chrono::{
    DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, SecondsFormat, TimeDelta, Timelike,
    Utc,
};

/// An instant with the offset it was written with.
pub type Timestamp = DateTime<FixedOffset>;

/// Formats an instant as RFC 3339 with the offset it carries (`Z` for UTC), whole seconds unless
/// it has milliseconds. The exchange's own instants are UTC, so it writes `...Z`.
pub fn format_timestamp(t: &Timestamp) -> String {
    let millis = t.nanosecond() / 1_000_000 * 1_000_000;
    let truncated = t.with_nanosecond(millis).unwrap_or(*t);
    truncated.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Formats an instant exactly (all fractional digits, its own offset); for instants that came in
/// a message and are written back.
pub fn format_exact(t: &Timestamp) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Converts a UTC instant into a [`Timestamp`] with a zero offset.
pub fn utc(t: DateTime<Utc>) -> Timestamp {
    t.fixed_offset()
}

/// Parses a timestamp that must carry a UTC offset (`2026-01-31T17:00:00-08:00`, `...Z`).
///
/// Accepts what YAML timestamps allow: `t` or a space as separator, fractional seconds, `z`,
/// `+hh`, `+hhmm` and `+hh:mm` offsets, and a space before the offset.
pub fn parse_timestamp(s: &str) -> Result<Timestamp, String> {
    let (naive, offset) = split_timestamp(s)?;
    match offset {
        Some(off) => naive
            .and_local_timezone(off)
            .single()
            .ok_or_else(|| format!("invalid timestamp {s:?}")),
        None => Err(format!(
            "timestamp {s:?} has no UTC offset (write e.g. {}Z or {}-08:00)",
            naive.format("%Y-%m-%dT%H:%M:%S"),
            naive.format("%Y-%m-%dT%H:%M:%S")
        )),
    }
}

/// Parses a timestamp, reading a missing offset as UTC; for files written by hand or by other tools.
pub fn parse_timestamp_lenient(s: &str) -> Result<Timestamp, String> {
    let (naive, offset) = split_timestamp(s)?;
    let off = offset.unwrap_or_else(|| FixedOffset::east_opt(0).expect("zero offset is valid"));
    naive
        .and_local_timezone(off)
        .single()
        .ok_or_else(|| format!("invalid timestamp {s:?}"))
}

fn split_timestamp(raw: &str) -> Result<(NaiveDateTime, Option<FixedOffset>), String> {
    let bad = || format!("invalid timestamp {raw:?} (expected e.g. 2026-01-31T17:00:00-08:00)");
    let s = raw.trim();
    if s.len() < 10 || !s.is_char_boundary(10) {
        return Err(bad());
    }
    let date = NaiveDate::parse_from_str(&s[..10], "%Y-%m-%d").map_err(|_| bad())?;
    let rest = &s[10..];
    let rest = rest
        .strip_prefix(['T', 't'])
        .or_else(|| rest.strip_prefix(' ').map(str::trim_start))
        .ok_or_else(bad)?;
    // The time runs up to the first character that can start an offset.
    let time_end = rest.find(['Z', 'z', '+', '-', ' ']).unwrap_or(rest.len());
    let time_text = &rest[..time_end];
    let time = NaiveTime::parse_from_str(time_text, "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(time_text, "%H:%M"))
        .map_err(|_| bad())?;
    let off_text = rest[time_end..].trim_start();
    let offset = if off_text.is_empty() {
        None
    } else if off_text.eq_ignore_ascii_case("z") {
        Some(FixedOffset::east_opt(0).ok_or_else(bad)?)
    } else {
        Some(parse_offset(off_text).ok_or_else(bad)?)
    };
    Ok((date.and_time(time), offset))
}

fn parse_offset(s: &str) -> Option<FixedOffset> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m) = match digits.len() {
        1 | 2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits[..2].parse::<i32>().ok()?,
            digits[2..].parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

/// A duration as written in a message, with its parsed length.
#[derive(Debug, Clone, PartialEq)]
pub struct Duration {
    /// The text as written (`PT45M`, `2h15m`).
    pub text: String,
    /// The length it denotes.
    pub length: TimeDelta,
}

/// Parses an ISO 8601 duration (`PT30M`, `PT2H`, `P1D`, `P1W`, `P1DT2H30M15.5S`, `P1M`).
///
/// A duration has no start date here, so a month counts as 30 days and a year as 365.
pub fn parse_iso_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| {
        format!("invalid ISO 8601 duration {s:?}: {why} (expected e.g. PT45M, PT2H, P1D)")
    };
    let body = s
        .strip_prefix(['P', 'p'])
        .ok_or_else(|| bad("it must start with P"))?;
    if body.is_empty() {
        return Err(bad("no components"));
    }
    let mut total = 0f64;
    let mut in_time = false;
    let mut time_components = 0;
    let mut number = String::new();
    let mut components = 0;
    // Components must come in order: Y M W D, then T, then H M S.
    let mut last_rank = 0;
    for c in body.chars() {
        match c.to_ascii_uppercase() {
            'T' if !in_time && number.is_empty() => {
                in_time = true;
                last_rank = 10;
            }
            d if d.is_ascii_digit() || d == '.' || d == ',' => {
                number.push(if d == ',' { '.' } else { d })
            }
            unit => {
                if number.is_empty() {
                    return Err(bad("a unit without a number"));
                }
                let n: f64 = number.parse().map_err(|_| bad("bad number"))?;
                number.clear();
                let (secs, rank) = match (unit, in_time) {
                    ('Y', false) => (365.0 * 86_400.0, 1),
                    ('M', false) => (30.0 * 86_400.0, 2),
                    ('W', false) => (604_800.0, 3),
                    ('D', false) => (86_400.0, 4),
                    ('H', true) => (3_600.0, 11),
                    ('M', true) => (60.0, 12),
                    ('S', true) => (1.0, 13),
                    _ => return Err(bad(&format!("unexpected unit {unit:?}"))),
                };
                if rank <= last_rank {
                    return Err(bad("components out of order"));
                }
                last_rank = rank;
                total += n * secs;
                components += 1;
                if in_time {
                    time_components += 1;
                }
            }
        }
    }
    if !number.is_empty() {
        return Err(bad("a number without a unit"));
    }
    if components == 0 {
        return Err(bad("no components"));
    }
    if in_time && time_components == 0 {
        return Err(bad("a T must be followed by hours, minutes or seconds"));
    }
    to_duration(s, total).map_err(|e| bad(&e))
}

/// Parses the v1.0 short form (`45m`, `2h`, `2h15m`, `1d`, `30s`, `1w`) or, failing that, ISO 8601.
pub fn parse_any_duration(s: &str) -> Result<Duration, String> {
    if s.starts_with(['P', 'p']) {
        return parse_iso_duration(s);
    }
    let bad = || format!("invalid duration {s:?} (expected e.g. 45m, 2h15m, 1d or PT45M)");
    let mut total = 0f64;
    let mut number = String::new();
    let mut components = 0;
    for c in s.trim().chars() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let secs = match c.to_ascii_lowercase() {
            'w' => 604_800.0,
            'd' => 86_400.0,
            'h' => 3_600.0,
            'm' => 60.0,
            's' => 1.0,
            ' ' if number.is_empty() => continue,
            _ => return Err(bad()),
        };
        let n: f64 = number.parse().map_err(|_| bad())?;
        number.clear();
        total += n * secs;
        components += 1;
    }
    if components == 0 || !number.is_empty() {
        return Err(bad());
    }
    to_duration(s, total).map_err(|_| bad())
}

fn to_duration(text: &str, secs: f64) -> Result<Duration, String> {
    if !secs.is_finite() || !(0.0..=1e11).contains(&secs) {
        return Err("out of range".into());
    }
    let whole = secs.trunc() as i64;
    let nanos = ((secs - secs.trunc()) * 1e9).round() as u32;
    let length = TimeDelta::new(whole, nanos.min(999_999_999)).ok_or("out of range")?;
    Ok(Duration {
        text: text.to_owned(),
        length,
    })
}
