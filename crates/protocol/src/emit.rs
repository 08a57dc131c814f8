//! Writes [`Value`] trees as block-style YAML in the layout of the MESSE-AF examples.
//!
//! Strings are written plain only when every YAML 1.2 parser reads them back as the same
//! string. Text that YAML 1.1 parsers would take for a number, boolean or null (`yes`, `001`,
//! `1:30`) is quoted as well; text shaped like a date or timestamp stays plain on purpose, as
//! MESSE-AF writes timestamps unquoted, so 1.1 readers (PyYAML) type it as a date. Everything
//! else is double-quoted with escapes, or a literal block for multi-line text.

use std::fmt::Write;

use crate::time;
use crate::value::{Map, Value};

/// Renders one document (no `---` marker), ending with a newline.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Map(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Seq(s) if !s.is_empty() => write_seq(&mut out, s, 0),
        other => {
            write_scalar_inline(&mut out, other, 0);
            out.push('\n');
        }
    }
    out
}

/// Renders several documents separated by `---` lines.
pub fn to_yaml_documents(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&to_yaml(v));
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn write_map(out: &mut String, map: &Map, level: usize) {
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            indent(out, level);
        }
        write_key(out, k);
        out.push(':');
        write_value_after(out, v, level);
    }
}

fn write_seq(out: &mut String, seq: &[Value], level: usize) {
    for (i, item) in seq.iter().enumerate() {
        if i > 0 {
            indent(out, level);
        }
        out.push_str("- ");
        match item {
            Value::Map(m) if !m.is_empty() => write_map(out, m, level + 2),
            Value::Seq(s) if !s.is_empty() => write_seq(out, s, level + 2),
            other => {
                write_scalar_inline(out, other, level + 2);
                out.push('\n');
            }
        }
    }
}

/// Writes what follows `key:`: a scalar on the same line, or a nested block on the next lines.
fn write_value_after(out: &mut String, v: &Value, level: usize) {
    match v {
        Value::Map(m) if !m.is_empty() => {
            out.push('\n');
            indent(out, level + 2);
            write_map(out, m, level + 2);
        }
        Value::Seq(s) if !s.is_empty() => {
            out.push('\n');
            indent(out, level + 2);
            write_seq(out, s, level + 2);
        }
        other => {
            out.push(' ');
            write_scalar_inline(out, other, level + 2);
            out.push('\n');
        }
    }
}

/// Writes a scalar (or an empty collection); `block_indent` is where a literal block's lines go.
fn write_scalar_inline(out: &mut String, v: &Value, block_indent: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => write_float(out, *f),
        Value::String(s) => write_string(out, s, block_indent),
        Value::Seq(_) => out.push_str("[]"),
        Value::Map(_) => out.push_str("{}"),
    }
}

fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str(".nan");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { ".inf" } else { "-.inf" });
    } else {
        // Debug formatting keeps a `.0` on whole numbers, so the value reads back as a float.
        let _ = write!(out, "{f:?}");
    }
}

fn write_key(out: &mut String, k: &str) {
    if is_plain_safe(k) && !k.contains('\n') {
        out.push_str(k);
    } else {
        write_double_quoted(out, k);
    }
}

fn write_string(out: &mut String, s: &str, block_indent: usize) {
    if is_plain_safe(s) {
        out.push_str(s);
    } else if literal_block_ok(s) {
        write_literal(out, s, block_indent);
    } else {
        write_double_quoted(out, s);
    }
}

fn write_literal(out: &mut String, s: &str, block_indent: usize) {
    let trailing = s.len() - s.trim_end_matches('\n').len();
    out.push('|');
    match trailing {
        0 => out.push('-'),
        1 => {}
        _ => out.push('+'),
    }
    let body = s.trim_end_matches('\n');
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            indent(out, block_indent);
            out.push_str(line);
        }
    }
    for _ in 1..trailing {
        out.push('\n');
    }
}

/// A literal block keeps text exactly only when no line starts with a space (the first line
/// decides the indentation) and no line ends in whitespace or holds control characters.
fn literal_block_ok(s: &str) -> bool {
    if !s.contains('\n') || s.starts_with([' ', '\t']) || s.trim_end_matches('\n').is_empty() {
        return false;
    }
    s.trim_end_matches('\n').split('\n').all(|line| {
        !line.ends_with([' ', '\t'])
            && !line.starts_with(' ')
            && line.chars().all(|c| c == '\t' || !needs_escape(c))
    }) && s.split('\n').next().is_some_and(|l| !l.starts_with(' '))
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}' | '\u{85}')
}

fn write_double_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Reports whether `s` can be written as a plain scalar that every YAML 1.2 reader reads back as
/// this same string, and that YAML 1.1 readers do not take for a number, boolean or null.
pub(crate) fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if s != s.trim() || s.contains('\n') || s.contains('\t') {
        return false;
    }
    if s.chars().any(needs_escape) {
        return false;
    }
    // Indicator characters change the meaning of a scalar that starts with them.
    if matches!(
        first,
        '-' | '?'
            | ':'
            | ','
            | '['
            | ']'
            | '{'
            | '}'
            | '#'
            | '&'
            | '*'
            | '!'
            | '|'
            | '>'
            | '\''
            | '"'
            | '%'
            | '@'
            | '`'
    ) {
        // `-5` and `-.5` are numbers and handled below; other leading dashes are indicators.
        if !(first == '-' && s.len() > 1 && !s[1..].starts_with(' ')) {
            return false;
        }
        if first == '-' && s.starts_with("---") {
            return false;
        }
    }
    if s.contains(": ") || s.ends_with(':') || s.contains(" #") {
        return false;
    }
    if s.starts_with("...") || s == "<<" || s == "=" {
        return false;
    }
    !is_reserved_word(s) && !looks_numeric(s) && !is_broken_timestamp(s)
}

/// True for text that a YAML 1.1 reader (PyYAML) takes for a timestamp by its shape but that
/// is not a real date or instant (`2026-13-45`, `2026-01-31T99:00:00Z`): such readers fail on
/// it unquoted. Real timestamps stay plain on purpose, as MESSE-AF writes them.
fn is_broken_timestamp(s: &str) -> bool {
    yaml11_timestamp_shape(s) && time::parse_timestamp_lenient(s).is_err() && {
        let date_only = s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok();
        !date_only
    }
}

/// Matches YAML 1.1's timestamp pattern: `YYYY-MM-DD`, or `YYYY-M-D` followed by `T` or blanks,
/// `H:MM:SS`, an optional fraction and an optional `Z` or offset.
fn yaml11_timestamp_shape(s: &str) -> bool {
    fn digits(s: &str, min: usize, max: usize) -> Option<(&str, &str)> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (min..=max).contains(&n).then(|| s.split_at(n))
    }
    let Some((_, rest)) = digits(s, 4, 4) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix('-') else {
        return false;
    };
    let Some((month, rest)) = digits(rest, 1, 2) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix('-') else {
        return false;
    };
    let Some((day, rest)) = digits(rest, 1, 2) else {
        return false;
    };
    if rest.is_empty() {
        return month.len() == 2 && day.len() == 2;
    }
    let rest = match rest.strip_prefix(['T', 't']) {
        Some(r) => r,
        None if rest.starts_with([' ', '\t']) => rest.trim_start_matches([' ', '\t']),
        None => return false,
    };
    let Some((_, rest)) = digits(rest, 1, 2) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix(':') else {
        return false;
    };
    let Some((_, rest)) = digits(rest, 2, 2) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix(':') else {
        return false;
    };
    let Some((_, mut rest)) = digits(rest, 2, 2) else {
        return false;
    };
    if let Some(frac) = rest.strip_prefix('.') {
        rest = frac.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    if rest.is_empty() || rest == "Z" {
        return true;
    }
    let Some(off) = rest.strip_prefix(['+', '-']) else {
        return false;
    };
    let Some((_, off)) = digits(off, 1, 2) else {
        return false;
    };
    off.is_empty()
        || off
            .strip_prefix(':')
            .is_some_and(|m| m.len() == 2 && m.bytes().all(|c| c.is_ascii_digit()))
}

fn is_reserved_word(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n",
    ];
    let lower = s.to_ascii_lowercase();
    WORDS.contains(&lower.as_str())
        || matches!(
            lower.as_str(),
            ".inf" | "-.inf" | "+.inf" | ".nan" | "inf" | "nan"
        )
}

/// True for anything a YAML 1.1 or 1.2 reader could take as a number (ints with underscores,
/// leading zeros, hex/octal/binary, exponents, 1.1 sexagesimal `1:30`).
fn looks_numeric(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body.is_empty() {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    for prefix in ["0x", "0o", "0b"] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            return !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '_');
        }
    }
    let (mantissa, exponent) = match lower.find('e') {
        Some(i) => (&lower[..i], Some(&lower[i + 1..])),
        None => (lower.as_str(), None),
    };
    let mantissa_ok = mantissa.chars().any(|c| c.is_ascii_digit())
        && mantissa
            .chars()
            .all(|c| c.is_ascii_digit() || c == '_' || c == '.' || c == ':')
        && mantissa.matches('.').count() <= 1;
    match exponent {
        None => mantissa_ok,
        Some(e) => {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            mantissa_ok && !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
        }
    }
}
