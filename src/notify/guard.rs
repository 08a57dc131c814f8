//! Where a webhook may lead. An address in config.yaml or in a registration the operator made
//! is the operator's choice; an address a key holder registered is not, so it may reach only
//! public addresses and what the operator lists in `dispatch.webhook.allow`. The rule is
//! checked on the URL when a registration arrives (a literal address, or a name such as
//! `localhost`), and again when sending: the literal address before the request, and a name
//! through `Resolver`, which drops every address the rule refuses, so DNS answers (a name
//! that resolves to loopback, or to an address inside) cannot lead a notice inside.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// What `dispatch.webhook.allow` lets key-made webhooks reach beyond public addresses: networks
/// (a CIDR, or one address) and host names (matched exactly, whatever they resolve to).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allow {
    nets: Vec<IpNet>,
    hosts: Vec<String>,
}

impl Allow {
    /// Public addresses only (the default).
    pub fn public_only() -> Allow {
        Allow::default()
    }

    /// Reads the entries of `dispatch.webhook.allow`: a CIDR (`10.0.0.0/8`, `fd00::/8`), an
    /// address (`127.0.0.1`, `::1`, `[::1]`) or a host name (`robot.lan`).
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allow, String> {
        let mut allow = Allow::default();
        for (i, entry) in entries.iter().enumerate() {
            let raw = entry.as_ref().trim();
            let bare = raw.trim_start_matches('[').trim_end_matches(']');
            if let Ok(net) = raw.parse::<IpNet>() {
                allow.nets.push(net.trunc());
            } else if let Ok(ip) = bare.parse::<IpAddr>() {
                allow.nets.push(IpNet::from(ip.to_canonical()));
            } else if let Some(host) = host_name(raw) {
                allow.hosts.push(host);
            } else {
                return Err(format!(
                    "dispatch.webhook.allow[{i}]: {raw:?} is not an address, a CIDR or a host name"
                ));
            }
        }
        Ok(allow)
    }

    /// Whether a key-made webhook may connect to `ip`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        is_public(ip) || self.nets.iter().any(|n| n.contains(&ip))
    }

    /// Whether `host` (a name, lower case, no trailing dot) is listed, and so may lead anywhere.
    fn lists(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h == host)
    }

    /// Checks a key-made webhook's URL when it is registered: [`webhook_url`]'s rules, then its
    /// host must be a permitted address, or a name that is not a local one (`localhost`,
    /// `*.localhost`, ...) unless it is listed. Names are checked again, address by address,
    /// when sending.
    pub fn check(&self, raw: &str) -> Result<Url, String> {
        let url = self.check_address(raw)?;
        match host_of(&url) {
            Some(Host::Name(name)) if is_local_name(&name) && !self.lists(&name) => Err(format!(
                "{name} names this machine; the operator may allow it in dispatch.webhook.allow"
            )),
            _ => Ok(url),
        }
    }

    /// Checks a key-made webhook's URL when sending: [`webhook_url`]'s rules, and a literal
    /// address must be permitted. A name is left to `Resolver`, which sees what it resolves
    /// to now (a literal address never reaches a resolver).
    pub fn check_address(&self, raw: &str) -> Result<Url, String> {
        let url = webhook_url(raw)?;
        match host_of(&url) {
            Some(Host::Address(ip)) if !self.permits(ip) => Err(format!(
                "{ip} is not a public address (loopback, private, link-local, multicast or reserved); the operator may allow it in dispatch.webhook.allow"
            )),
            Some(_) => Ok(url),
            None => Err("the URL has no host".to_owned()),
        }
    }
}

/// The host of a URL: an address or a name (lower case, without a trailing dot).
enum Host {
    Address(IpAddr),
    Name(String),
}

fn host_of(url: &Url) -> Option<Host> {
    let host = url.host_str()?;
    // IPv6 literals come bracketed; IPv4 ones already normalised (`0x7f.1` is 127.0.0.1).
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    Some(match bare.parse::<IpAddr>() {
        Ok(ip) => Host::Address(ip),
        Err(_) => Host::Name(host.trim_end_matches('.').to_ascii_lowercase()),
    })
}

/// A host name as listed: letters, digits, `-` and `.`, lower case, no trailing dot.
fn host_name(raw: &str) -> Option<String> {
    let name = raw.trim_end_matches('.').to_ascii_lowercase();
    let fine = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    fine.then_some(name)
}

/// Checks a webhook URL's form, for every webhook: `http` or `https`, a host, and no spaces or
/// control characters (the URL parser would drop a line break silently; here it is refused).
pub fn webhook_url(raw: &str) -> Result<Url, String> {
    if let Some(c) = raw.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "the URL holds {c:?}; spaces and control characters are not allowed"
        ));
    }
    let url = Url::parse(raw).map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{}: is not allowed; webhooks are http or https",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".to_owned());
    }
    Ok(url)
}

pub use crate::protocol::net::{is_local_name, is_public};

/// The resolver of the client that sends key-made webhooks: the system's answers, less every
/// address the allow-list refuses; a name left with none fails to resolve.
#[derive(Debug, Clone)]
pub(crate) struct Resolver {
    pub(crate) allow: Arc<Allow>,
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let listed = allow.lists(&host);
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| listed || allow.permits(a.ip()))
                .collect();
            if kept.is_empty() {
                return Err(Box::new(Refused(format!(
                    "{host} resolves only to addresses webhooks may not reach"
                )))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// A name the resolver left without addresses (for the server log: which name, not the URL).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(String);

impl Refused {
    /// The refusal behind a failed request, if the resolver refused its name.
    pub(crate) fn in_chain<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
        let mut cause = Some(e);
        while let Some(c) = cause {
            if let Some(r) = c.downcast_ref::<Refused>() {
                return Some(r);
            }
            cause = c.source();
        }
        None
    }
}
