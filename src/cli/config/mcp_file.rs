//! The agent host's MCP configuration the reference design names,
//! `~/.config/mess-mcp/config.yaml` (`$XDG_CONFIG_HOME/mess-mcp/config.yaml` when that is set):
//! `agent_id`, `exchange: {type: local, path}`, other `exchanges:`, and the home settings it
//! may carry.

use std::path::{Path, PathBuf};

use crate::cli::config::{ConfigError, expand_home, interpolate};
use crate::protocol::value::{Map, Value};
use crate::protocol::yaml::{self, Limits};

/// What `mess mcp` reads from the MCP configuration file.
#[derive(Debug, Clone, Default)]
pub(crate) struct McpFile {
    /// The identity the MCP session acts as.
    pub(crate) agent_id: Option<String>,
    /// The home of the local exchange (`exchange.path`, `~` expanded).
    pub(crate) home: Option<PathBuf>,
    /// Home settings written here as the reference design's example does (`dispatch`, `http`, `secret`,
    /// `limits`); the home's config.yaml wins key by key.
    pub(crate) shared: Map,
    /// Lines to report: keys that mean nothing here.
    pub(crate) problems: Vec<String>,
}

impl McpFile {
    /// The top-level keys that are the home's settings.
    pub(crate) const SHARED: [&'static str; 5] =
        ["dispatch", "http", "secret", "limits", "exchanges"];

    /// Where the file is looked for: `$XDG_CONFIG_HOME/mess-mcp/config.yaml`, else
    /// `$HOME/.config/mess-mcp/config.yaml`.
    pub(crate) fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("mess-mcp").join("config.yaml"))
    }

    /// Reads the file at [`McpFile::default_path`]; `None` when there is none.
    pub(crate) fn find() -> Result<Option<McpFile>, ConfigError> {
        match McpFile::default_path() {
            Some(path) => McpFile::read(&path),
            None => Ok(None),
        }
    }

    /// Reads the file at `path`; `None` when it does not exist.
    pub(crate) fn read(path: &Path) -> Result<Option<McpFile>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ConfigError {
                    path: path.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        McpFile::parse(path, &interpolate(&text)).map(Some)
    }

    fn parse(path: &Path, text: &str) -> Result<McpFile, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.to_owned(),
            message,
        };
        let map = match yaml::parse_document(text, &Limits::DEFAULT).map_err(|e| err(e.message))? {
            Value::Map(m) => m,
            Value::Null => Map::new(),
            other => return Err(err(format!("expected a mapping, found {}", other.kind()))),
        };
        let mut file = McpFile::default();
        for (key, value) in map.iter() {
            match key.as_str() {
                "agent_id" => {
                    let id = match value {
                        Value::Null => None,
                        v => Some(
                            v.scalar_text()
                                .ok_or_else(|| err("agent_id must be a string".to_owned()))?,
                        ),
                    };
                    file.agent_id = id.filter(|s| !s.trim().is_empty());
                }
                "exchange" => file.home = exchange_path(value).map_err(err)?,
                k if McpFile::SHARED.contains(&k) => file.shared.insert(k, value.clone()),
                // The reference design's comment names later settings; they are reported, not failed on.
                other => file.problems.push(format!(
                    "{}: unknown key {other:?} (known: agent_id, exchange, exchanges, dispatch, http, secret, limits)",
                    path.display()
                )),
            }
        }
        Ok(file)
    }
}

/// Reads `exchange: {type: local, path: ~/.mess}`: the only kind of exchange `mess mcp`
/// serves is a local home.
fn exchange_path(value: &Value) -> Result<Option<PathBuf>, String> {
    let map = match value {
        Value::Null => return Ok(None),
        Value::Map(m) => m,
        other => {
            return Err(format!(
                "exchange must be a mapping, found {}",
                other.kind()
            ));
        }
    };
    match map.get("type").and_then(Value::scalar_text).as_deref() {
        None | Some("local") => {}
        Some(other) => {
            return Err(format!(
                "exchange.type {other:?} is not supported: mess mcp serves a local home (type: local)"
            ));
        }
    }
    for key in map.keys() {
        if key != "type" && key != "path" {
            return Err(format!("exchange.{key}: unknown key (known: type, path)"));
        }
    }
    match map.get("path") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(p)) if !p.trim().is_empty() => {
            Ok(Some(expand_home(Path::new(p.trim()))))
        }
        Some(_) => Err("exchange.path must be a folder path".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_plans_example() {
        let text = "agent_id: claude-agent\nexchange:\n  type: local\n  path: /tmp/h\ndispatch:\n  slack:\n    bot_token: x\nhttp:\n  enabled: true\n  port: 8420\nexchanges:\n  moltbook:\n    type: remote\n    url: https://moltbook.net/mess\n    api_key: k\nmoltbook: 1\n";
        let f = McpFile::parse(Path::new("c.yaml"), text).unwrap();
        assert_eq!(f.agent_id.as_deref(), Some("claude-agent"));
        assert_eq!(f.home.as_deref(), Some(Path::new("/tmp/h")));
        assert!(f.shared.contains_key("dispatch") && f.shared.contains_key("http"));
        // The reference design's `exchanges:` is the home's setting too (for `mess mcp`'s tools).
        assert!(f.shared.contains_key("exchanges"));
        assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
        assert!(f.problems[0].contains("\"moltbook\""));
    }

    #[test]
    fn refuses_other_exchange_types() {
        let e =
            McpFile::parse(Path::new("c.yaml"), "exchange: {type: remote, url: x}\n").unwrap_err();
        assert!(e.message.contains("exchange.type \"remote\""), "{e}");
    }
}
