//! Settings resolution: built-in defaults, then `<home>/config.yaml` (with `${ENV}`
//! references expanded), then `MESS_*` environment variables and flags (read by clap in `cli`;
//! `MESS_SECRET` is read here, so that no flag ever carries it).
//! Executors and routing rules are exchange data, read through the store, not settings.

use std::path::{Path, PathBuf};

use crate::exchange::{Secret, Settings};
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};

/// The resolved settings of one run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The exchange home.
    pub home: PathBuf,
    /// Default identity for commands that act for a principal (`agent_id` in config.yaml).
    pub agent_id: Option<String>,
    /// The exchange's slice.
    pub exchange: Settings,
}

/// A configuration problem, reported before any work starts.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct ConfigError {
    /// The file at fault.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

impl Config {
    /// Resolves the settings for `home` (from `--home`/`MESS_HOME`, else `~/.mess`).
    pub fn resolve(home: Option<PathBuf>) -> Result<Config, ConfigError> {
        let home = match home {
            Some(h) => expand_home(&h),
            None => default_home(),
        };
        let home = absolute(&home);
        let mut config = Config {
            home: home.clone(),
            agent_id: None,
            exchange: Settings::defaults(),
        };
        // A secret belongs in the environment, never on a command line where `ps` shows it.
        config.exchange.link_secret = std::env::var("MESS_SECRET")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .map(Secret);
        let path = home.join("config.yaml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(config),
            Err(e) => {
                return Err(ConfigError {
                    path,
                    message: e.to_string(),
                });
            }
        };
        let err = |message: String| ConfigError {
            path: path.clone(),
            message,
        };
        let value = yaml::parse_document(&interpolate(&text), &Limits::DEFAULT)
            .map_err(|e| err(e.message))?;
        let map = match value {
            Value::Map(m) => m,
            Value::Null => return Ok(config),
            other => return Err(err(format!("expected a mapping, found {}", other.kind()))),
        };
        match map.get("agent_id") {
            // `agent_id: ${MESS_AGENT}` with the variable unset reads as empty: no default.
            None | Some(Value::Null) => {}
            Some(v) => {
                let id = v
                    .scalar_text()
                    .ok_or_else(|| err("agent_id must be a string".to_owned()))?;
                config.agent_id = Some(id).filter(|s| !s.trim().is_empty());
            }
        }
        if let Some(limits) = map.get("limits").and_then(Value::as_map)
            && let Some(v) = limits.get("max_message_bytes")
        {
            match v {
                Value::Int(n) if *n > 0 => config.exchange.max_message_bytes = *n as usize,
                _ => {
                    return Err(err(
                        "limits.max_message_bytes must be a positive integer".to_owned()
                    ));
                }
            }
        }
        Ok(config)
    }
}

fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".mess"),
        None => PathBuf::from(".mess"),
    }
}

fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(h)) => PathBuf::from(h).join(rest),
        _ => p.to_owned(),
    }
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_owned();
    }
    std::env::current_dir().map_or_else(|_| p.to_owned(), |d| d.join(p))
}

/// Replaces `${NAME}` with the environment variable `NAME` (empty when unset); `$${` escapes.
pub fn interpolate(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("${") {
        if pos > 0 && rest.as_bytes()[pos - 1] == b'$' {
            out.push_str(&rest[..pos - 1]);
            out.push_str("${");
            rest = &rest[pos + 2..];
            continue;
        }
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        match after.find('}') {
            Some(end)
                if after[..end]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                out.push_str(&std::env::var(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The commented example `config.yaml` that `mess init` writes.
pub const EXAMPLE_CONFIG: &str = r#"# mess exchange configuration.
# Precedence: built-in defaults < this file < environment (MESS_HOME, MESS_AGENT_ID) < flags.
# ${NAME} is replaced by the environment variable NAME.

# Default identity for commands that act for someone (`mess request`, `mess reply`, ...).
# Overridden by --as or MESS_AGENT_ID.
agent_id: claude-agent

# Executors: who can do what. Requests are routed by capability: an executor is eligible when it
# holds every capability a request `requires`. `config` messages can add executors at runtime
# (they are stored under executors/).
executors:
  teague-phone:
    name: "Teague's Phone"
    capabilities: [take-photo, check-visual, home-access, local-errands]
    availability: always
    notify:
      slack: U04XXXXXX
  roomba-kitchen:
    name: Kitchen Roomba
    capabilities: [vacuum-floor, home-kitchen-access]
    availability: always
    notify:
      webhook: http://localhost:8080/roomba/mess

# Routing rules, tried in order; `default` applies when no `match` names an eligible executor.
# Without rules, every eligible executor is offered the work. Rules sent in a `config` message
# are stored in routing.yaml and replace these; delete routing.yaml to use these again.
routing:
  - match: { capability: vacuum-floor }
    prefer: [roomba-kitchen]
  - default:
    prefer: [teague-phone]

# Limits on incoming messages.
limits:
  max_message_bytes: 16777216
"#;
