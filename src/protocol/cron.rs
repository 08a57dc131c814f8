//! Cron schedules of executors (`availability: schedule`): the five fields `minute hour
//! day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`,
//! or a comma list of those, with every number inside its field's range and every step at
//! least 1. This is exactly what the SQL macro `cron_field_matches` evaluates, so a schedule
//! that passes here is one routing can evaluate; names (`MON`, `JAN`) and the extensions of
//! other cron dialects (`L`, `W`, `#`, `?`) are refused with the reason.

/// A field's name and the values it allows (day of week: 0 and 7 are Sunday).
const FIELDS: [(&str, u32, u32); 5] = [
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
];

/// Checks a cron schedule; the `Err` names the field and the problem.
pub fn check_schedule(schedule: &str) -> Result<(), String> {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "schedule {schedule:?} has {} field(s); cron needs 5: minute hour day-of-month month day-of-week",
            fields.len()
        ));
    }
    for (text, (name, low, high)) in fields.iter().zip(FIELDS) {
        check_field(text, low, high)
            .map_err(|why| format!("schedule {schedule:?}: {name} field {text:?}: {why}"))?;
    }
    Ok(())
}

fn check_field(field: &str, low: u32, high: u32) -> Result<(), String> {
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
        let (from, to) = match range.split_once('-') {
            Some((from, to)) => (number(from)?, number(to)?),
            None => {
                let n = number(range)?;
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

fn number(text: &str) -> Result<u32, String> {
    if text.is_empty() {
        return Err("a number is missing".to_owned());
    }
    if !text.chars().all(|c| c.is_ascii_digit()) || text.len() > 2 {
        return Err(format!(
            "{text:?} is not a number of the field (names and other cron dialects' symbols are not supported)"
        ));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not a number of the field"))
}
