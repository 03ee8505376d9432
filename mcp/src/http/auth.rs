//! Who may use a shared reticle (issue 21): bearer tokens checked on every request, the
//! OAuth 2.0 Protected Resource Metadata (RFC 9728) a client discovers the resource by,
//! the `WWW-Authenticate` challenge of a 401, and the `Origin`/`Host` checks that stop
//! DNS rebinding.
//!
//! Tokens are opaque secrets from a file or `RETICLE_HTTP_TOKENS`; the host keeps only
//! their SHA-256 digests, so a lookup compares digests (no timing signal about the
//! token itself) and a memory dump shows no secret.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, header};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The client behind a token: its name (logs, session ownership) and the roots its
/// tools may read (`None`: the server's roots).
#[derive(Debug)]
pub struct Principal {
    /// The token's name in the tokens file (or `anonymous`).
    pub name: String,
    /// Where this client's tools may read; `None` for the server's allowed roots.
    pub roots: Option<Vec<PathBuf>>,
}

/// The tokens file: `{"tokens": [{"name", "token", "allowed_roots"?}]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    token: String,
    #[serde(default)]
    allowed_roots: Option<Vec<PathBuf>>,
}

/// Why a request was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A bearer token that is not one of ours (or a malformed header).
    Invalid,
}

/// The accepted tokens, by digest.
#[derive(Debug)]
pub struct Tokens {
    by_digest: HashMap<[u8; 32], Arc<Principal>>,
    /// Set with `--anonymous` (loopback only): every request is this principal.
    anonymous: Option<Arc<Principal>>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl Tokens {
    /// Tokens from `file` (JSON) and `env` (`name=token,name=token`). With `anonymous`
    /// and no token at all, every request is let in as `anonymous`.
    ///
    /// # Errors
    /// An unreadable or malformed file, an empty or repeated name or token, or no token
    /// at all without `anonymous`.
    pub fn load(file: Option<&Path>, env: Option<&str>, anonymous: bool) -> anyhow::Result<Self> {
        let mut entries = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("cannot read the tokens file {}: {e}", path.display())
            })?;
            let parsed: TokensFile = serde_json::from_str(&text).map_err(|e| {
                anyhow::anyhow!("the tokens file {} is not valid: {e}", path.display())
            })?;
            warn_if_readable_by_others(path);
            entries.extend(parsed.tokens);
        }
        for pair in env
            .unwrap_or_default()
            .split(',')
            .filter(|p| !p.trim().is_empty())
        {
            let Some((name, token)) = pair.split_once('=') else {
                anyhow::bail!(
                    "RETICLE_HTTP_TOKENS entries are name=token; got an entry without '='"
                );
            };
            entries.push(TokenEntry {
                name: name.trim().to_owned(),
                token: token.trim().to_owned(),
                allowed_roots: None,
            });
        }
        let mut by_digest = HashMap::new();
        let mut names = std::collections::HashSet::new();
        for entry in entries {
            if entry.name.is_empty() || entry.token.is_empty() {
                anyhow::bail!("a token and its name must not be empty");
            }
            if entry.token.len() < 16 {
                tracing::warn!(name = %entry.name, "a bearer token shorter than 16 characters is easy to guess");
            }
            if !names.insert(entry.name.clone()) {
                anyhow::bail!("the token name {:?} appears twice", entry.name);
            }
            let principal = Arc::new(Principal {
                name: entry.name,
                roots: entry.allowed_roots,
            });
            if by_digest
                .insert(digest(entry.token.as_bytes()), principal)
                .is_some()
            {
                anyhow::bail!("two token entries have the same token");
            }
        }
        if by_digest.is_empty() && !anonymous {
            anyhow::bail!(
                "no bearer token configured: give --tokens-file FILE or RETICLE_HTTP_TOKENS=name=token, \
                 or --anonymous to serve loopback clients without authorization"
            );
        }
        let anonymous = (by_digest.is_empty() && anonymous).then(|| {
            Arc::new(Principal {
                name: "anonymous".into(),
                roots: None,
            })
        });
        Ok(Self {
            by_digest,
            anonymous,
        })
    }

    /// Whether requests need no token (`--anonymous` with no token configured).
    pub fn is_anonymous(&self) -> bool {
        self.anonymous.is_some()
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// The principal of a request's `Authorization` header.
    ///
    /// # Errors
    /// [`AuthFailure::Missing`] without a bearer header, [`AuthFailure::Invalid`] for a
    /// token we do not know.
    pub fn check(&self, headers: &HeaderMap) -> Result<Arc<Principal>, AuthFailure> {
        if let Some(anonymous) = &self.anonymous {
            return Ok(Arc::clone(anonymous));
        }
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(AuthFailure::Missing);
        };
        let value = value.to_str().map_err(|_| AuthFailure::Invalid)?;
        let Some((scheme, token)) = value.split_once(' ') else {
            return Err(AuthFailure::Invalid);
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthFailure::Missing);
        }
        self.by_digest
            .get(&digest(token.trim().as_bytes()))
            .cloned()
            .ok_or(AuthFailure::Invalid)
    }
}

fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(path = %path.display(), "the tokens file is readable by other users; chmod 600 it");
    }
}

/// Where the resource and its metadata live, as clients address them.
#[derive(Debug, Clone)]
pub struct Resource {
    /// The MCP endpoint's public URL (`resource` in the metadata).
    pub url: String,
    /// The metadata document's URL (in `WWW-Authenticate`).
    pub metadata_url: String,
    /// Authorization servers that issue our tokens, when there are any.
    pub authorization_servers: Vec<String>,
}

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";
/// The RFC 9728 well-known path for the endpoint (the path-suffixed form RFC 9728 §3.1
/// prescribes for a resource with a path), and the bare form older clients try.
pub const METADATA_PATHS: [&str; 2] = [
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource",
];

impl Resource {
    /// The resource at `public_url` (default: `http://ADDR/mcp`).
    pub fn new(
        addr: SocketAddr,
        public_url: Option<&str>,
        authorization_servers: Vec<String>,
    ) -> Self {
        let url = public_url.map_or_else(
            || format!("http://{addr}{MCP_PATH}"),
            |u| u.trim_end_matches('/').to_owned(),
        );
        let origin = origin_of(&url);
        Self {
            metadata_url: format!("{origin}{}", METADATA_PATHS[0]),
            url,
            authorization_servers,
        }
    }

    /// The RFC 9728 metadata document.
    pub fn metadata(&self) -> Value {
        let mut doc = json!({
            "resource": self.url,
            "bearer_methods_supported": ["header"],
            "resource_name": "reticle",
        });
        if !self.authorization_servers.is_empty() {
            doc["authorization_servers"] = json!(self.authorization_servers);
        }
        doc
    }

    /// The `WWW-Authenticate` value of a 401 (RFC 6750 §3, RFC 9728 §5.1).
    pub fn challenge(&self, failure: AuthFailure) -> HeaderValue {
        let value = match failure {
            AuthFailure::Missing => format!(
                "Bearer realm=\"reticle\", resource_metadata=\"{}\"",
                self.metadata_url
            ),
            AuthFailure::Invalid => format!(
                "Bearer realm=\"reticle\", error=\"invalid_token\", error_description=\"the bearer token is not valid\", resource_metadata=\"{}\"",
                self.metadata_url
            ),
        };
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => &url[..after_scheme + slash],
        None => url,
    }
}

/// Which `Origin` and `Host` headers a request may carry (DNS-rebinding defence).
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    /// Origins allowed besides loopback ones (`--allowed-origin`), lower case.
    allowed_origins: Vec<String>,
    /// The server listens on loopback only: a `Host` that is not a loopback name is a
    /// rebinding attempt (a browser tricked into calling 127.0.0.1 under another name).
    loopback: bool,
    /// The public URL's host (allowed in `Host` when a proxy forwards it).
    public_host: Option<String>,
}

/// Whether `host` (without port) names this machine's loopback interface.
fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host part of `host[:port]` (IPv6 in brackets kept whole).
fn host_part(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |i| &authority[..=i]);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

impl OriginPolicy {
    /// The policy of a server bound to `addr`, reached at `public_url`.
    pub fn new(addr: SocketAddr, allowed_origins: &[String], public_url: &str) -> Self {
        let authority = origin_of(public_url)
            .split_once("://")
            .map_or("", |(_, a)| a);
        Self {
            allowed_origins: allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            loopback: addr.ip().is_loopback(),
            public_host: Some(host_part(authority).to_ascii_lowercase()).filter(|h| !h.is_empty()),
        }
    }

    /// `Err(reason)` when the request's `Origin` or `Host` is not allowed.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin
                .to_str()
                .map_err(|_| "the Origin header is not ASCII".to_owned())?
                .trim_end_matches('/')
                .to_ascii_lowercase();
            let loopback_origin = origin.split_once("://").is_some_and(|(scheme, authority)| {
                matches!(scheme, "http" | "https") && is_loopback_name(host_part(authority))
            });
            if !loopback_origin && !self.allowed_origins.contains(&origin) {
                return Err(format!("Origin {origin} is not allowed"));
            }
        }
        if self.loopback {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(|h| host_part(h).to_ascii_lowercase());
            match host {
                Some(host)
                    if is_loopback_name(&host)
                        || self.public_host.as_deref() == Some(host.as_str()) => {}
                Some(host) => return Err(format!("Host {host} is not this loopback server")),
                None => return Err("no Host header".to_owned()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn tokens_are_checked_by_digest() {
        let tokens = Tokens::load(
            None,
            Some("alice=aaaaaaaaaaaaaaaa, bob=bbbbbbbbbbbbbbbb"),
            false,
        )
        .unwrap();
        assert_eq!(tokens.len(), 2);
        let alice = tokens
            .check(&headers(&[("authorization", "Bearer aaaaaaaaaaaaaaaa")]))
            .unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(
            tokens
                .check(&headers(&[("authorization", "Bearer nope")]))
                .unwrap_err(),
            AuthFailure::Invalid
        );
        assert_eq!(
            tokens.check(&HeaderMap::new()).unwrap_err(),
            AuthFailure::Missing
        );
        assert_eq!(
            tokens
                .check(&headers(&[("authorization", "Basic YTpi")]))
                .unwrap_err(),
            AuthFailure::Missing
        );
    }

    #[test]
    fn no_token_needs_anonymous_and_duplicates_are_refused() {
        assert!(Tokens::load(None, None, false).is_err());
        assert!(Tokens::load(None, None, true).unwrap().is_anonymous());
        assert!(Tokens::load(None, Some("a=x,a=y"), false).is_err());
        assert!(Tokens::load(None, Some("a=x,b=x"), false).is_err());
        assert!(Tokens::load(None, Some("novalue"), false).is_err());
    }

    #[test]
    fn origins_and_hosts_against_rebinding() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let policy = OriginPolicy::new(
            addr,
            &["https://lab.example".into()],
            "http://127.0.0.1:8080/mcp",
        );
        assert!(
            policy
                .check(&headers(&[("host", "127.0.0.1:8080")]))
                .is_ok()
        );
        assert!(
            policy
                .check(&headers(&[
                    ("host", "localhost:8080"),
                    ("origin", "http://localhost:3000")
                ]))
                .is_ok()
        );
        assert!(policy.check(&headers(&[("host", "[::1]:8080")])).is_ok());
        assert!(
            policy
                .check(&headers(&[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "https://lab.example")
                ]))
                .is_ok()
        );
        assert!(
            policy
                .check(&headers(&[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://evil.example.com")
                ]))
                .is_err()
        );
        assert!(
            policy
                .check(&headers(&[("host", "evil.example.com")]))
                .is_err()
        );
        assert!(policy.check(&HeaderMap::new()).is_err());
    }

    #[test]
    fn the_challenge_names_the_metadata() {
        let r = Resource::new("127.0.0.1:9".parse().unwrap(), None, vec![]);
        assert_eq!(r.url, "http://127.0.0.1:9/mcp");
        assert_eq!(
            r.metadata_url,
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"
        );
        let c = r.challenge(AuthFailure::Invalid);
        let c = c.to_str().unwrap();
        assert!(
            c.starts_with("Bearer ")
                && c.contains("error=\"invalid_token\"")
                && c.contains(&r.metadata_url),
            "{c}"
        );
        assert_eq!(r.metadata()["resource"], "http://127.0.0.1:9/mcp");
        assert!(r.metadata().get("authorization_servers").is_none());
    }
}
