//! Keys of config.yaml that mess does not read: each is reported with the known key it most
//! likely meant (`limits.max_mesage_bytes: unknown key; did you mean max_message_bytes?`),
//! because a misspelt key is otherwise silently ignored. Executor entries may carry fields of
//! their own (the protocol is extensible), so there only near misses of known fields are
//! reported; and a phone number YAML read as a number (an unquoted `+1555...`) is caught.

use crate::protocol::value::{Map, Value};

/// The top-level keys, including the reference design's names mess reads.
const TOP: &[&str] = &[
    "agent_id",
    "executors",
    "routing",
    "capabilities",
    "limits",
    "dispatch",
    "http",
    "secret",
    "timezone",
    "exchanges",
    "metrics",
];

const LIMITS: &[&str] = &[
    "max_message_bytes",
    "max_thread_bytes",
    "query_memory",
    "queries",
    "queries_per_key",
    "query_timeout",
    "query_grace",
];

const DISPATCH: &[&str] = &[
    "public_url",
    "link_ttl",
    "escalate_after",
    "retry",
    "timeout",
    "webhook",
    "slack",
    "telegram",
    "twilio",
    "ntfy",
    "email",
    "discord",
    "matrix",
];

const HTTP: &[&str] = &["enabled", "port", "secret", "cors_origins"];

const METRICS: &[&str] = &["listen"];

/// Fields of an executor entry that mess reads.
const EXECUTOR: &[&str] = &[
    "id",
    "name",
    "description",
    "capabilities",
    "availability",
    "schedule",
    "timezone",
    "notify",
    "exchange",
    "mcp",
    "tags",
    "access",
    "location",
    "environment",
];

/// The channels of an executor's `notify:`.
const NOTIFY: &[&str] = &[
    "webhook", "slack", "telegram", "sms", "ntfy", "email", "mail", "discord", "matrix",
];

/// One line per key of `config` (config.yaml's parsed text) that mess would not read.
pub(crate) fn problems(config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(top) = config.as_map() else {
        return out;
    };
    unknown(top, TOP, "", true, &mut out);
    for (section, known) in [
        ("limits", LIMITS),
        ("dispatch", DISPATCH),
        ("http", HTTP),
        ("metrics", METRICS),
    ] {
        if let Some(m) = top.get(section).and_then(Value::as_map) {
            unknown(m, known, &format!("{section}."), true, &mut out);
        }
    }
    let entries: Vec<(String, &Value)> = match top.get("executors") {
        Some(Value::Map(m)) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Some(Value::Seq(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("[{i}]"), v))
            .collect(),
        _ => Vec::new(),
    };
    for (id, entry) in entries {
        let Some(m) = entry.as_map() else { continue };
        let at = if id.starts_with('[') {
            format!("executors{id}.")
        } else {
            format!("executors.{id}.")
        };
        unknown(m, EXECUTOR, &at, false, &mut out);
        if let Some(notify) = m.get("notify").and_then(Value::as_map) {
            unknown(notify, NOTIFY, &format!("{at}notify."), true, &mut out);
            if let Some(Value::Int(n)) = notify.get("sms") {
                out.push(format!(
                    "config.yaml: {at}notify.sms: {n} was read as a number, which drops a leading +; quote it: '+{n}'"
                ));
            }
        }
    }
    out
}

/// Reports the keys of `map` not in `known`: all of them when `strict`, else only those close
/// to a known one (a likely misspelling).
fn unknown(map: &Map, known: &[&str], at: &str, strict: bool, out: &mut Vec<String>) {
    for key in map.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let guess = closest(key, known);
        match guess {
            Some(g) => out.push(format!(
                "config.yaml: {at}{key}: unknown key; did you mean {g}?"
            )),
            None if strict => out.push(format!(
                "config.yaml: {at}{key}: unknown key (known here: {})",
                known.join(", ")
            )),
            None => {}
        }
    }
}

/// The known key nearest to `key`, if it is near enough to be a misspelling of it.
fn closest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 5) && *d < k.len())
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::problems;
    use crate::protocol::yaml::{self, Limits};

    fn of(text: &str) -> Vec<String> {
        problems(&yaml::parse_document(text, &Limits::DEFAULT).unwrap())
    }

    #[test]
    fn misspelt_and_unknown_keys_are_named_with_a_guess() {
        let found = of(
            "agent_id: a\nlimts:\n  queries: 2\nlimits:\n  max_mesage_bytes: 10\ndispatch:\n  publc_url: x\n  color: red\nhttp:\n  port: 8420\n  enabled: true\nsecret: s\n",
        );
        assert_eq!(
            found,
            vec![
                "config.yaml: limts: unknown key; did you mean limits?".to_owned(),
                "config.yaml: limits.max_mesage_bytes: unknown key; did you mean max_message_bytes?".to_owned(),
                "config.yaml: dispatch.publc_url: unknown key; did you mean public_url?".to_owned(),
                "config.yaml: dispatch.color: unknown key (known here: public_url, link_ttl, escalate_after, retry, timeout, webhook, slack, telegram, twilio, ntfy, email, discord, matrix)".to_owned(),
            ]
        );
    }

    #[test]
    fn executor_entries_keep_their_own_fields_but_near_misses_and_numbers_are_reported() {
        let found = of(
            "executors:\n  robot:\n    capabilites: [x]\n    firmware: 2.1\n    notify:\n      sms: +15551234567\n      slak: U1\n",
        );
        assert_eq!(
            found,
            vec![
                "config.yaml: executors.robot.capabilites: unknown key; did you mean capabilities?".to_owned(),
                "config.yaml: executors.robot.notify.slak: unknown key; did you mean slack?".to_owned(),
                "config.yaml: executors.robot.notify.sms: 15551234567 was read as a number, which drops a leading +; quote it: '+15551234567'".to_owned(),
            ]
        );
        assert!(of("executors:\n  - id: r\n    notify: {sms: '+1555'}\n").is_empty());
        // `environment` (what the executors view reads) is known: its near misses are caught.
        assert!(of("executors:\n  r:\n    environment: [indoor]\n").is_empty());
        assert_eq!(
            of("executors:\n  r:\n    enviroment: [indoor]\n"),
            ["config.yaml: executors.r.enviroment: unknown key; did you mean environment?"]
        );
        // Other exchanges by name are a top-level key.
        assert!(of("exchanges:\n  house: {type: remote, url: 'http://h'}\n").is_empty());
    }
}
