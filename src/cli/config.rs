//! Settings resolution: built-in defaults, then `<home>/config.yaml` (with `${ENV}`
//! references expanded), then `MESS_*` environment variables and flags (read by clap in `cli`;
//! `MESS_SECRET` is read here, so that no flag ever carries it).
//! Executors and routing rules are exchange data, read through the store, not settings.

use std::path::{Path, PathBuf};

use crate::exchange::{Secret, Settings};
use crate::notify;
use crate::protocol::time;
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};

mod mcp_file;

pub(crate) use mcp_file::McpFile;

/// The resolved settings of one run.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The exchange home.
    pub(crate) home: PathBuf,
    /// Default identity for commands that act for a principal (`agent_id` in config.yaml).
    pub(crate) agent_id: Option<String>,
    /// The exchange's slice.
    pub(crate) exchange: Settings,
    /// The notification channels' settings (`dispatch:`).
    pub(crate) notify: notify::Settings,
    /// The port `mess serve` listens on without `--addr` (`http.port`, the reference design's name).
    pub(crate) http_port: Option<u16>,
    /// Whether the exchange's address in links was given (`MESS_PUBLIC_URL` or
    /// `dispatch.public_url`); otherwise it is where `mess serve` listens.
    pub(crate) public_url_given: bool,
    /// Whether `mess mcp` also serves the HTTP API and the human page (`http.enabled`, the
    /// reference design's switch for the human client's endpoint); `mess serve` serves them
    /// regardless.
    pub(crate) http_enabled: bool,
    /// Origins whose pages may call the API from a browser (`http.cors_origins`, each
    /// `scheme://host[:port]`): a human page hosted elsewhere, as the reference design's `exchange=` allows.
    pub(crate) http_cors_origins: Vec<String>,
    /// Other exchanges by name (`exchanges:`), for `--exchange NAME`.
    pub(crate) exchanges: Vec<(String, ExchangeEntry)>,
    /// A second address where `mess serve` answers `GET /metrics` to anyone who reaches it
    /// (`metrics.listen`), for a Prometheus that holds no key.
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
}

/// One entry of `exchanges:`: another home on this machine, or a `mess serve` elsewhere.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum ExchangeEntry {
    /// `{type: local, path: DIR}`.
    Local(PathBuf),
    /// `{type: remote, url: URL, api_key: KEY}` (the key may be left to `MESS_API_KEY`).
    Remote {
        url: String,
        api_key: Option<String>,
    },
}

impl std::fmt::Debug for ExchangeEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExchangeEntry::Local(path) => f.debug_tuple("Local").field(path).finish(),
            // Never the key, nor credentials someone wrote into the URL.
            ExchangeEntry::Remote { url, api_key } => f
                .debug_struct("Remote")
                .field("url", &crate::remote::redact_url(url))
                .field("api_key", &api_key.as_ref().map(|_| "[redacted]"))
                .finish(),
        }
    }
}

/// Where `mess serve` records the address it listens on, for the links other commands print.
pub(crate) const SERVE_URL_FILE: &str = ".mess/serve-url";

/// The exchange's address when nobody gave one: where this home's `mess serve` listens (as it
/// last recorded it), else `http.port` on 127.0.0.1, else 127.0.0.1:8420.
pub(crate) fn listening_url(home: &Path, http_port: Option<u16>) -> String {
    let recorded = std::fs::read_to_string(home.join(SERVE_URL_FILE))
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|u| {
            u.len() <= 200
                && (u.starts_with("http://") || u.starts_with("https://"))
                && !u.chars().any(|c| c.is_control() || c.is_whitespace())
        });
    recorded.unwrap_or_else(|| format!("http://127.0.0.1:{}", http_port.unwrap_or(8420)))
}

/// A configuration problem, reported before any work starts.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub(crate) struct ConfigError {
    /// The file at fault.
    pub(crate) path: PathBuf,
    /// What is wrong.
    pub(crate) message: String,
}

impl Config {
    /// Resolves the settings for `home` (from `--home`/`MESS_HOME`, else `~/.mess`), with an
    /// agent host's MCP file, when there is one, under them: its `exchange.path` is the home unless one is given, its `agent_id`
    /// outranks the home's, and its `dispatch`, `http`, `secret` and `limits` apply where the
    /// home's config.yaml has no such key.
    pub(crate) fn resolve_with(
        home: Option<PathBuf>,
        mcp: Option<&McpFile>,
    ) -> Result<Config, ConfigError> {
        let home = home.or_else(|| mcp.and_then(|m| m.home.clone()));
        let mut config = Config::read(home, mcp)?;
        if !config.public_url_given {
            // Links point where the server listens; they name (and are checked against) the
            // address without a server's, which does not move when the server does.
            let issuer = format!("http://127.0.0.1:{}", config.http_port.unwrap_or(8420));
            config.exchange.dispatch.public_url = listening_url(&config.home, config.http_port);
            config.exchange.dispatch.link_issuer = Some(issuer);
        }
        // The exchange reports executors whose channels cannot send, so it learns which.
        config.exchange.dispatch.unconfigured = notify::Channel::NAMES
            .into_iter()
            .filter_map(|name| config.notify.missing(name).map(|what| (name, what)))
            .collect();
        Ok(config)
    }

    /// Defaults, then config.yaml, then the environment variables read here.
    fn read(home: Option<PathBuf>, mcp: Option<&McpFile>) -> Result<Config, ConfigError> {
        let home = match home {
            Some(h) => expand_home(&h),
            None => default_home(),
        };
        let home = absolute(&home);
        let mut config = Config {
            home: home.clone(),
            agent_id: None,
            exchange: Settings::defaults(),
            notify: notify::Settings::defaults(),
            http_port: None,
            public_url_given: false,
            http_enabled: false,
            http_cors_origins: Vec::new(),
            exchanges: Vec::new(),
            metrics_listen: None,
        };
        // Values the exchange reads from config.yaml later (an executor's webhook key) are
        // expanded with the same environment.
        config.exchange.dispatch.expand = interpolate;
        // A secret belongs in the environment, never on a command line where `ps` shows it.
        config.exchange.link_secret = std::env::var("MESS_SECRET")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .map(Secret);
        // Query workers get `HOME` and nothing else of the environment, so that `~` in a
        // `read_yaml_auto` pattern means what it means here.
        config.exchange.queries.user_home = std::env::var_os("HOME").map(PathBuf::from);
        let public_url = std::env::var("MESS_PUBLIC_URL")
            .ok()
            .filter(|s| !s.trim().is_empty());
        if let Some(url) = &public_url {
            config.exchange.dispatch.public_url = url.trim_end_matches('/').to_owned();
            config.public_url_given = true;
        }
        let path = home.join("config.yaml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
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
        let mut map = match value {
            Value::Map(m) => m,
            Value::Null => crate::protocol::value::Map::new(),
            other => return Err(err(format!("expected a mapping, found {}", other.kind()))),
        };
        if let Some(mcp) = mcp {
            for key in McpFile::SHARED {
                if let (false, Some(v)) = (map.contains_key(key), mcp.shared.get(key)) {
                    map.insert(key, v.clone());
                }
            }
            if let Some(id) = &mcp.agent_id {
                map.insert("agent_id", Value::str(id.clone()));
            }
        }
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
        read_http(&map, &mut config).map_err(err)?;
        if let Some(exchanges) = map.get("exchanges") {
            config.exchanges = read_exchanges(exchanges).map_err(err)?;
        }
        if let Some(limits) = map.get("limits") {
            read_limits(limits, &mut config).map_err(err)?;
        }
        if let Some(dispatch) = map.get("dispatch") {
            read_dispatch(dispatch, &mut config).map_err(err)?;
            if let Some(url) = public_url {
                // The environment outranks the file.
                config.exchange.dispatch.public_url = url.trim_end_matches('/').to_owned();
            }
        }
        Ok(config)
    }
}

/// Reads `exchanges:`, a mapping of names to `{type: local, path}` or
/// `{type: remote, url, api_key}` (the reference design's shape).
fn read_exchanges(value: &Value) -> Result<Vec<(String, ExchangeEntry)>, String> {
    let map = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Seq(items) if items.is_empty() => return Ok(Vec::new()),
        Value::Map(m) => m,
        other => {
            return Err(format!(
                "exchanges must be a mapping of names to exchanges, found {}",
                other.kind()
            ));
        }
    };
    let mut out = Vec::new();
    for (name, entry) in map.iter() {
        let Value::Map(entry) = entry else {
            return Err(format!(
                "exchanges.{name} must be a mapping (type, path or url)"
            ));
        };
        let text = |key: &str| -> Result<Option<String>, String> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .scalar_text()
                    .map(|t| Some(t.trim().to_owned()).filter(|t| !t.is_empty()))
                    .ok_or_else(|| format!("exchanges.{name}.{key} must be text")),
            }
        };
        let kind = text("type")?;
        let known: &[&str] = match kind.as_deref() {
            Some("local") => &["type", "path"],
            Some("remote") => &["type", "url", "api_key"],
            Some(other) => {
                return Err(format!(
                    "exchanges.{name}.type {other:?} is not a kind of exchange (local, remote)"
                ));
            }
            None => {
                return Err(format!(
                    "exchanges.{name}.type is missing (local or remote)"
                ));
            }
        };
        if let Some(key) = entry.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!(
                "exchanges.{name}.{key}: unknown key (known: {})",
                known.join(", ")
            ));
        }
        let parsed = if kind.as_deref() == Some("local") {
            let path = text("path")?
                .ok_or_else(|| format!("exchanges.{name}.path is missing (a home folder)"))?;
            ExchangeEntry::Local(expand_home(Path::new(&path)))
        } else {
            let url = text("url")?.ok_or_else(|| format!("exchanges.{name}.url is missing"))?;
            ExchangeEntry::Remote {
                url,
                api_key: text("api_key")?,
            }
        };
        out.push((name.clone(), parsed));
    }
    Ok(out)
}

/// The smallest memory ceiling allowed for a query worker: the program, a DuckDB instance with
/// the views and the first query of an empty home need about 90 MiB of it (measured).
const MIN_QUERY_MEMORY: u64 = 128 * 1024 * 1024;

/// Reads the reference design's names for the HTTP side: `http: {port, secret}` and a top-level `secret:`.
/// A secret here signs presigned links (JWTs), as `MESS_SECRET` does (which wins); the key
/// that signs webhooks is `dispatch.webhook.secret`, a different key.
fn read_http(map: &crate::protocol::value::Map, config: &mut Config) -> Result<(), String> {
    let http = match map.get("http") {
        None | Some(Value::Null) => None,
        Some(Value::Map(m)) => Some(m),
        Some(other) => return Err(format!("http must be a mapping, found {}", other.kind())),
    };
    match http.and_then(|h| h.get("enabled")) {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => config.http_enabled = *b,
        Some(_) => return Err("http.enabled must be true or false".to_owned()),
    }
    match http.and_then(|h| h.get("cors_origins")) {
        None | Some(Value::Null) => {}
        Some(Value::Seq(items)) => {
            for item in items {
                let text = item.scalar_text().unwrap_or_default();
                config.http_cors_origins.push(origin(&text).ok_or_else(|| {
                    format!(
                        "http.cors_origins: {text:?} is not an origin (https://host or http://host:port, no path; \"*\" is not allowed)"
                    )
                })?);
            }
        }
        Some(_) => return Err("http.cors_origins must be a list of origins".to_owned()),
    }
    match map.get("metrics") {
        None | Some(Value::Null) => {}
        Some(Value::Map(m)) => match m.get("listen") {
            None | Some(Value::Null) => {}
            Some(v) => {
                let text = v.scalar_text().unwrap_or_default();
                config.metrics_listen = Some(text.trim().parse().map_err(|_| {
                    format!(
                        "metrics.listen: {text:?} is not an address to listen on (e.g. 127.0.0.1:9464)"
                    )
                })?);
            }
        },
        Some(other) => return Err(format!("metrics must be a mapping, found {}", other.kind())),
    }
    if let Some(port) = http.and_then(|h| h.get("port")) {
        match port {
            Value::Int(n) if (1..=65535).contains(n) => config.http_port = Some(*n as u16),
            Value::Null => {}
            _ => return Err("http.port must be a port number (1 to 65535)".to_owned()),
        }
    }
    let secret = [
        map.get("secret").map(|v| ("secret", v)),
        http.and_then(|h| h.get("secret"))
            .map(|v| ("http.secret", v)),
    ];
    for (name, value) in secret.into_iter().flatten() {
        let text = match value {
            Value::Null => continue,
            Value::String(s) => s.trim().to_owned(),
            _ => return Err(format!("{name} must be text (use ${{MESS_SECRET}})")),
        };
        // An unset ${VAR} expands to nothing: the home's generated secret stays in use.
        if text.is_empty() || config.exchange.link_secret.is_some() {
            continue;
        }
        config.exchange.link_secret = Some(Secret(text));
    }
    Ok(())
}

/// `text` as a browser sends it in `Origin` (`scheme://host[:port]`, lower case), if it is one.
fn origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/');
    let (scheme, authority) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let host_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']');
    ((scheme == "http" || scheme == "https")
        && !authority.is_empty()
        && authority.chars().all(host_ok))
    .then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// Reads `limits:` (message size; queries: memory, how many at once, time) into `config`.
fn read_limits(v: &Value, config: &mut Config) -> Result<(), String> {
    let Some(l) = v.as_map() else {
        return match v {
            Value::Null => Ok(()),
            other => Err(format!("limits must be a mapping, found {}", other.kind())),
        };
    };
    let count = |key: &str| -> Result<Option<usize>, String> {
        match l.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Int(n)) if *n > 0 => Ok(Some(*n as usize)),
            Some(_) => Err(format!("limits.{key} must be a positive integer")),
        }
    };
    let duration = |key: &str| -> Result<Option<std::time::Duration>, String> {
        let Some(raw) = l.get(key).and_then(Value::scalar_text) else {
            return Ok(None);
        };
        time::parse_any_duration(raw.trim())
            .ok()
            .and_then(|d| d.length.to_std().ok())
            .filter(|d| !d.is_zero())
            .map(Some)
            .ok_or_else(|| format!("limits.{key}: {raw:?} is not a positive duration (10s, 1m)"))
    };
    if let Some(n) = count("max_message_bytes")? {
        config.exchange.max_message_bytes = n;
    }
    if let Some(n) = count("max_thread_bytes")? {
        config.exchange.max_thread_bytes = n;
    }
    let q = &mut config.exchange.queries;
    if let Some(v) = l.get("query_memory").filter(|v| !matches!(v, Value::Null)) {
        let bytes = v
            .scalar_text()
            .and_then(|t| parse_size(&t))
            .ok_or_else(|| {
                "limits.query_memory must be a size in bytes or with a unit (256MiB, 1GiB)"
                    .to_owned()
            })?;
        if bytes < MIN_QUERY_MEMORY {
            return Err(format!(
                "limits.query_memory must be at least {} MiB",
                MIN_QUERY_MEMORY / (1024 * 1024)
            ));
        }
        q.memory = bytes;
    }
    if let Some(n) = count("queries")? {
        q.total = n;
    }
    if let Some(n) = count("queries_per_key")? {
        q.per_key = n;
    }
    if let Some(d) = duration("query_timeout")? {
        q.timeout = d;
    }
    if let Some(d) = duration("query_grace")? {
        q.grace = d;
    }
    Ok(())
}

/// A size: bytes, or a number with KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of
/// 1024).
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000 * 1000,
        "gb" => 1000 * 1000 * 1000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// Reads `dispatch:` (channels, links, retries, escalation) into `config`.
fn read_dispatch(v: &Value, config: &mut Config) -> Result<(), String> {
    let Some(d) = v.as_map() else {
        return match v {
            Value::Null => Ok(()),
            other => Err(format!(
                "dispatch must be a mapping, found {}",
                other.kind()
            )),
        };
    };
    let section = |name: &str| -> Result<Option<&crate::protocol::value::Map>, String> {
        match d.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Map(m)) => Ok(Some(m)),
            Some(other) => Err(format!(
                "dispatch.{name} must be a mapping, found {}",
                other.kind()
            )),
        }
    };
    // `${VAR}` of an unset variable reads as empty: the same as not set.
    let text = |m: &crate::protocol::value::Map, key: &str| {
        m.get(key)
            .and_then(Value::scalar_text)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let secret = |m: &crate::protocol::value::Map, key: &str| text(m, key).map(Secret);
    let duration = |key: &str, raw: &str| {
        time::parse_any_duration(raw)
            .map_err(|e| format!("dispatch.{key}: {e}"))
            .and_then(|d| {
                d.length
                    .to_std()
                    .map_err(|_| format!("dispatch.{key}: must be positive"))
            })
    };
    if let Some(url) = text(d, "public_url") {
        config.exchange.dispatch.public_url = url.trim_end_matches('/').to_owned();
        config.public_url_given = true;
    }
    let ex = &mut config.exchange.dispatch;
    if let Some(raw) = text(d, "link_ttl") {
        ex.link_ttl_seconds = duration("link_ttl", &raw)?.as_secs() as i64;
    }
    match d.get("escalate_after") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(false)) => ex.escalate_after = None,
        Some(v) => {
            let raw = v.scalar_text().unwrap_or_default();
            ex.escalate_after = Some(duration("escalate_after", &raw)?);
        }
    }
    if let Some(r) = section("retry")? {
        if let Some(n) = r.get("attempts") {
            match n {
                Value::Int(n) if *n >= 1 => ex.attempts = *n as u32,
                _ => return Err("dispatch.retry.attempts must be a positive integer".to_owned()),
            }
        }
        if let Some(raw) = text(r, "first") {
            ex.first_retry = duration("retry.first", &raw)?;
        }
        if let Some(raw) = text(r, "max") {
            ex.max_retry = duration("retry.max", &raw)?;
        }
    }
    let n = &mut config.notify;
    if let Some(raw) = text(d, "timeout") {
        n.timeout = duration("timeout", &raw)?;
    }
    if let Some(w) = section("webhook")? {
        config.exchange.dispatch.webhook_secret = secret(w, "secret");
        let entries: Vec<String> = match w.get("allow") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Seq(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.scalar_text().ok_or_else(|| {
                        format!(
                            "dispatch.webhook.allow[{i}] must be an address, a CIDR or a host name"
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(v) => match v.scalar_text() {
                Some(one) => vec![one],
                None => {
                    return Err(
                        "dispatch.webhook.allow must be a list of addresses, CIDRs or host names"
                            .to_owned(),
                    );
                }
            },
        };
        let allow = notify::Allow::parse(&entries)?;
        n.webhook_allow = allow.clone();
        config.exchange.dispatch.webhook_allow = allow;
    }
    if let Some(s) = section("slack")? {
        n.slack.bot_token = secret(s, "bot_token");
        n.slack.signing_secret = secret(s, "signing_secret");
        if let Some(u) = text(s, "base_url") {
            n.slack.base_url = u;
        }
    }
    if let Some(t) = section("telegram")? {
        n.telegram.bot_token = secret(t, "bot_token");
        n.telegram.secret_token = secret(t, "secret_token");
        if let Some(u) = text(t, "base_url") {
            n.telegram.base_url = u;
        }
    }
    if let Some(d) = section("discord")? {
        n.discord.bot_token = secret(d, "bot_token");
        n.discord.application_id = text(d, "application_id");
        n.discord.public_key = text(d, "public_key");
        if let Some(key) = &n.discord.public_key
            && crate::exchange::hooks::discord_key(key).is_none()
        {
            return Err(
                "dispatch.discord.public_key must be the application's public key: 64 hex digits"
                    .to_owned(),
            );
        }
        if let Some(u) = text(d, "base_url") {
            n.discord.base_url = u;
        }
    }
    if let Some(m) = section("matrix")? {
        n.matrix.homeserver = text(m, "homeserver");
        n.matrix.access_token = secret(m, "access_token");
        n.matrix.room = text(m, "room");
        if let Some(room) = &n.matrix.room {
            notify::check_matrix(room).map_err(|e| format!("dispatch.matrix.room: {e}"))?;
        }
    }
    if let Some(t) = section("twilio")? {
        n.twilio.account_sid = text(t, "account_sid");
        n.twilio.auth_token = secret(t, "auth_token");
        n.twilio.from = text(t, "from");
        if let Some(u) = text(t, "base_url") {
            n.twilio.base_url = u;
        }
    }
    if let Some(t) = section("ntfy")? {
        n.ntfy.token = secret(t, "token");
        if let Some(u) = text(t, "base_url") {
            n.ntfy.base_url = u;
        }
    }
    if let Some(e) = section("email")? {
        n.email.smtp_host = text(e, "smtp_host");
        if let Some(p) = e.get("smtp_port") {
            match p {
                Value::Int(p) if (1..=65535).contains(p) => n.email.smtp_port = *p as u16,
                _ => return Err("dispatch.email.smtp_port must be a port number".to_owned()),
            }
        }
        if let Some(sec) = text(e, "security") {
            if !matches!(sec.as_str(), "starttls" | "tls" | "none") {
                return Err(format!(
                    "dispatch.email.security: {sec:?} is not one of starttls, tls, none"
                ));
            }
            n.email.security = sec;
        }
        n.email.from = text(e, "from");
        n.email.username = text(e, "username");
        n.email.password = secret(e, "password");
    }
    Ok(())
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
pub(crate) fn interpolate(text: &str) -> String {
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
pub(crate) const EXAMPLE_CONFIG: &str = r#"# mess exchange configuration.
# Precedence: built-in defaults < this file < environment (MESS_HOME, MESS_AGENT_ID) < flags.
# ${NAME} is replaced by the environment variable NAME.

# Default identity for commands that act for someone (`mess request`, `mess reply`, ...).
# Overridden by --as or MESS_AGENT_ID.
agent_id: claude-agent

# The time zone cron schedules are read in when an executor names none (an IANA name).
timezone: America/Los_Angeles

# Executors: who can do what. Requests are routed by capability: an executor is eligible when it
# holds every capability a request `requires`. `config` messages can add executors at runtime
# (they are stored under executors/).
executors:
  teague-phone:
    name: "Teague's Phone"
    capabilities: [take-photo, check-visual, home-access, local-errands]
    # always | schedule (with `schedule`, a cron line, read in `timezone`, else the top-level
    # one, else UTC) | on_demand (offered work only when nobody else can take it)
    availability: always
    # availability: schedule
    # schedule: "0 8-22 * * *"        # a minute field of one number: 8:00 to 22:59
    # timezone: America/Los_Angeles
    access: [home, san_anselmo]       # places it can reach: a request's constraints.location
    notify:                           #   `home/kitchen` goes to executors with `home` here
      mail: teague-phone              # a task in .mail/teague-phone/ (`mess mail list --as teague-phone`)
      # slack: U04XXXXXX              # with dispatch.slack.bot_token (SLACK_BOT_TOKEN) set below
  roomba-kitchen:
    name: Kitchen Roomba
    # Metadata a request's `requires` can ask for: `vacuum-floor: {areas: [kitchen]}`.
    capabilities:
      - vacuum-floor: { areas: [kitchen, living_room] }
      - home-kitchen-access
    availability: always
    access: [home/kitchen, home/living_room]
    environment: [indoor]             # a request's constraints.environment must be listed here
    # notify:                         # uncomment once the robot's endpoint listens
    #   webhook: http://localhost:8080/roomba/mess

# Routing rules, tried in order; `default` applies when no `match` names an eligible executor.
# Without rules, every eligible executor is offered the work. Rules sent in a `config` message
# are stored in routing.yaml and replace these; delete routing.yaml to use these again.
routing:
  - match: { capability: vacuum-floor }
    prefer: [roomba-kitchen]
  - default:
    prefer: [teague-phone]

# The key that signs presigned links (JWTs); MESS_SECRET in the environment wins. Without
# either, a key generated into .mess/ is used. Links work only on this home whatever the key.
# secret: "${MESS_SECRET}"
# The HTTP side: `port` is where `mess serve` listens without --addr; `enabled: true` makes an
# agent host's `mess mcp` serve the API and the human page there too; `cors_origins` lists the
# origins whose pages may call the API from a browser.
# http: { enabled: false, port: 8420, cors_origins: [] }

# Limits on incoming messages and on SQL queries (`mess query`, /query, mess_query). Each
# query runs in a worker process whose memory is capped at query_memory; a query needing more
# is stopped with an error. At most `queries` run at once (`queries_per_key` for one API key);
# beyond that /query answers 429. Worst case for queries: queries x query_memory.
limits:
  max_message_bytes: 16777216
  max_thread_bytes: 67108864        # a message that would grow a thread file past this is refused
  query_memory: 256MiB
  queries: 4
  queries_per_key: 2
  query_timeout: 10s

# Notifications: the exchange (`mess serve`, or an agent host's `mess mcp` when no server runs)
# tells routed executors on their `notify:` channels (webhook,
# slack, telegram, sms, ntfy, email). Tokens come from the environment through ${NAME}; never
# write them here. Every base_url can point elsewhere (a proxy, a local test server).
dispatch:
  # How executors' browsers reach this exchange, for links (MESS_PUBLIC_URL wins over it); without
  # either, links point where `mess serve` listens (its --addr, else http.port on 127.0.0.1).
  # public_url: https://mess.example.org
  link_ttl: 24h                       # how long the link in a notification works
  escalate_after: 15m                 # unclaimed that long: offer it to the default rule's executors too
  retry: { attempts: 8, first: 2s, max: 10m }
  timeout: 10s
  # Webhooks are signed with HMAC-SHA256: with this key, else one generated into .mess/ (print it
  # with `mess webhook-secret`). Webhooks registered with an API key reach public addresses only,
  # plus what `allow` lists (addresses, CIDRs, host names); config.yaml's own are not limited.
  webhook: { secret: "${MESS_WEBHOOK_SECRET}", allow: [] }
  # With a signing secret (Slack) or secret token (Telegram's setWebhook), notices carry Claim /
  # Approve / Deny buttons; presses come back to /hooks/slack and /hooks/telegram.
  slack: { bot_token: "${SLACK_BOT_TOKEN}", signing_secret: "${SLACK_SIGNING_SECRET}" }
  telegram: { bot_token: "${TELEGRAM_BOT_TOKEN}", secret_token: "${TELEGRAM_SECRET_TOKEN}" }
  # discord: { application_id: "${DISCORD_APP_ID}", public_key: "${DISCORD_PUBLIC_KEY}", bot_token: "${DISCORD_BOT_TOKEN}" }
  # matrix: { homeserver: https://matrix.example.org, access_token: "${MATRIX_TOKEN}", room: "!abc:example.org" }
  twilio: { account_sid: "${TWILIO_ACCOUNT_SID}", auth_token: "${TWILIO_AUTH_TOKEN}", from: "${TWILIO_FROM}" }
  ntfy: { base_url: https://ntfy.sh, token: "${NTFY_TOKEN}" }
  email: { smtp_host: "${SMTP_HOST}", smtp_port: 587, security: starttls, from: "${SMTP_FROM}", username: "${SMTP_USER}", password: "${SMTP_PASSWORD}" }
"#;
