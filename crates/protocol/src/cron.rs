//! Cron schedules of executors (`availability: schedule`): the five fields `minute hour
//! day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`,
//! or a comma list of those, with every number inside its field's range and every step at
//! least 1; months and days of the week may be named (`jan`-`dec`, `sun`-`sat`, any letter
//! case, `sun` ending a range is 7: `fri-sun`). This is exactly what the SQL macros
//! (`schedule_fields`, `cron_names`, `cron_field_matches`) evaluate, so a schedule that passes
//! here is one routing can evaluate; the extensions of other cron dialects (`L`, `W`, `#`, `?`,
//! `@daily`) are refused with the reason. How a schedule is read (time zone, minutes, days)
//! is `schedule_allows`'s header.

/// A field's name, the values it allows (day of week: 0 and 7 are Sunday) and the names it
/// accepts for its values, from the lowest.
const FIELDS: [(&str, u32, u32, &[&str]); 5] = [
    ("minute", 0, 59, &[]),
    ("hour", 0, 23, &[]),
    ("day of month", 1, 31, &[]),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
];

/// Month names, January first (month 1).
const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Day names, Sunday first (day 0).
const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// Checks a cron schedule; the `Err` names the field and the problem.
pub fn check_schedule(schedule: &str) -> Result<(), String> {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "schedule {schedule:?} has {} field(s); cron needs 5: minute hour day-of-month month day-of-week",
            fields.len()
        ));
    }
    for (text, (name, low, high, names)) in fields.iter().zip(FIELDS) {
        check_field(text, low, high, names)
            .map_err(|why| format!("schedule {schedule:?}: {name} field {text:?}: {why}"))?;
    }
    Ok(())
}

fn check_field(field: &str, low: u32, high: u32, names: &[&str]) -> Result<(), String> {
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        if let Some(step) = step {
            let n = number(step)?;
            if n == 0 {
                return Err("a step must be at least 1".to_owned());
            }
            if n > high {
                return Err(format!("step {n} is larger than {high}"));
            }
            if range != "*" && !range.contains('-') {
                return Err(format!(
                    "a step goes with `*` or a range (`*/{n}`, `{range}-{high}/{n}`)"
                ));
            }
        }
        if range == "*" {
            continue;
        }
        let value = |text: &str| value(text, low, names);
        let (from, to) = match range.split_once('-') {
            // Sunday ends a range of days as 7, so `fri-sun` runs forward.
            Some((from, to)) if names == DAYS && to.eq_ignore_ascii_case("sun") => {
                (value(from)?, 7)
            }
            Some((from, to)) => (value(from)?, value(to)?),
            None => {
                let n = value(range)?;
                (n, n)
            }
        };
        for n in [from, to] {
            if n < low || n > high {
                return Err(format!("{n} is outside {low}-{high}"));
            }
        }
        if from > to {
            return Err(format!("the range {from}-{to} runs backwards"));
        }
    }
    Ok(())
}

/// A value of a field: a number, or one of the field's names.
fn value(text: &str, low: u32, names: &[&str]) -> Result<u32, String> {
    match names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
        Some(i) => Ok(low + i as u32),
        None if !names.is_empty() && text.chars().any(|c| c.is_ascii_alphabetic()) => Err(format!(
            "{text:?} is not a name of the field (expected {})",
            names.join(", ")
        )),
        None => number(text),
    }
}

fn number(text: &str) -> Result<u32, String> {
    if text.is_empty() {
        return Err("a number is missing".to_owned());
    }
    if !text.chars().all(|c| c.is_ascii_digit()) || text.len() > 2 {
        return Err(format!(
            "{text:?} is not a number of the field (names only in the month and day-of-week fields; other cron dialects' symbols are not supported)"
        ));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not a number of the field"))
}
