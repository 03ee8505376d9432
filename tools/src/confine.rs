//! Which files an agent may make reticle read (issue 10, `docs/SECURITY.md`).
//!
//! Every path a tool reads is normalized (`file://` URIs, `~`, relative to the
//! working directory), resolved with symlinks followed, and must then lie
//! inside an allowed root. The roots are the client's MCP roots when it offers
//! them, else `RETICLE_ALLOWED_ROOTS` (colon-separated), else the working
//! directory.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use reticle_protocol::paths::{Refusal, resolve_under};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::json;

use reticle_config::Config;

/// Where the current roots came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootsSource {
    /// The client's `roots/list`.
    Client,
    /// `RETICLE_ALLOWED_ROOTS`.
    Environment,
    /// The server's working directory.
    WorkingDirectory,
    /// The bearer token's `allowed_roots` (Streamable HTTP, issue 21).
    Token,
}

/// The allowed roots, replaceable when the client's roots change.
#[derive(Debug)]
pub struct AllowedRoots {
    current: RwLock<(Vec<PathBuf>, RootsSource)>,
    fallback: (Vec<PathBuf>, RootsSource),
    /// The client's roots may only narrow the fallback (a client of a shared host
    /// cannot widen what its token allows); over stdio the client is the user, and its
    /// roots replace the configured ones.
    narrow_only: bool,
    /// `HOME`, for `~` in a path argument.
    home: Option<OsString>,
}

fn canonical_roots(paths: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = paths
        .into_iter()
        .filter_map(|p| match p.canonicalize() {
            Ok(root) => Some(root),
            Err(e) => {
                tracing::warn!(root = %p.display(), error = %e, "ignoring an allowed root that does not resolve");
                None
            }
        })
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

impl AllowedRoots {
    /// Roots from `RETICLE_ALLOWED_ROOTS` ([`reticle_config::ToolSettings`]), else the
    /// working directory; `~` is `HOME` of `config`.
    pub fn configured(config: &Config) -> Self {
        let fallback = match &config.tools.allowed_roots {
            Some(list) => (
                canonical_roots(std::env::split_paths(list)),
                RootsSource::Environment,
            ),
            None => (
                canonical_roots(std::env::current_dir().ok()),
                RootsSource::WorkingDirectory,
            ),
        };
        Self {
            current: RwLock::new(fallback.clone()),
            fallback,
            narrow_only: false,
            home: config.process.home.clone(),
        }
    }

    /// Fixed roots (tests); `~` is not expanded.
    pub fn fixed(roots: Vec<PathBuf>) -> Self {
        let fallback = (canonical_roots(roots), RootsSource::Environment);
        Self {
            current: RwLock::new(fallback.clone()),
            fallback,
            narrow_only: false,
            home: None,
        }
    }

    /// The roots of one client of a shared host: its token's roots when the token names
    /// some, else the configured ones; the client's own `roots/list` can only narrow them.
    pub fn for_token(token_roots: Option<&[PathBuf]>, config: &Config) -> Self {
        let mut roots = match token_roots {
            Some(list) => Self {
                fallback: (canonical_roots(list.to_vec()), RootsSource::Token),
                home: config.process.home.clone(),
                ..Self::fixed(Vec::new())
            },
            None => Self::configured(config),
        };
        roots.narrow_only = true;
        roots.current = RwLock::new(roots.fallback.clone());
        roots
    }

    /// Adopts the client's roots (`file://` URIs). An empty or unusable list
    /// falls back to the configured roots.
    pub fn set_client_roots(&self, uris: &[String]) {
        let paths = uris
            .iter()
            .filter_map(|uri| libmcp::normalize_local_path(uri, None).ok())
            .filter(|p| p.is_absolute());
        let mut roots = canonical_roots(paths);
        if self.narrow_only {
            roots.retain(|root| {
                self.fallback
                    .0
                    .iter()
                    .any(|allowed| root.starts_with(allowed))
            });
        }
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = if roots.is_empty() {
            self.fallback.clone()
        } else {
            (roots, RootsSource::Client)
        };
        tracing::info!(roots = ?current.0, source = ?current.1, "allowed roots updated");
    }

    /// Puts back roots a reexec snapshot carried: the client's (a client does not send
    /// `roots/list` again to a server it believes it already told). Other sources are
    /// re-read from the configuration instead.
    pub fn restore(&self, roots: Vec<PathBuf>, source: RootsSource) {
        if source != RootsSource::Client {
            return;
        }
        let roots = canonical_roots(roots);
        if roots.is_empty() {
            return;
        }
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (roots, source);
    }

    /// The roots in force and their source.
    pub fn snapshot(&self) -> (Vec<PathBuf>, RootsSource) {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Resolves a caller-supplied path for reading.
    ///
    /// # Errors
    /// `INVALID_INPUT` for an unusable path, `FILE_NOT_FOUND` when it does not
    /// exist, `PATH_NOT_ALLOWED` (naming the roots) when it resolves outside them.
    pub fn resolve_read(&self, raw: &str) -> Result<PathBuf, ToolError> {
        let expanded = expand_home(raw, self.home.as_deref());
        let cwd = std::env::current_dir().ok();
        let path = libmcp::normalize_local_path(&expanded, cwd.as_deref()).map_err(|e| {
            ToolError::new(
                ErrorCode::InvalidInput,
                format!("unusable path {raw:?}: {e}"),
            )
            .with_details(json!({"path": raw}))
        })?;
        let (roots, source) = self.snapshot();
        resolve_under(&path, &roots).map_err(|refusal| match refusal {
            Refusal::Unresolved { source: e, .. } => ToolError::new(
                ErrorCode::FileNotFound,
                format!("cannot open {}: {e}", path.display()),
            )
            .with_details(json!({"path": path})),
            Refusal::Outside { resolved, .. } => ToolError::new(
                ErrorCode::PathNotAllowed,
                format!("{} is outside the allowed roots", path.display()),
            )
            .with_details(json!({"path": path, "resolved": resolved, "allowed_roots": roots, "roots_source": source}))
            .recoverable(false),
        })
    }
}

/// `raw` with a leading `~` (alone or `~/…`) replaced by `home`, when there is one.
pub(crate) fn expand_home(raw: &str, home: Option<&OsStr>) -> String {
    match (raw.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => Path::new(home).join(rest).display().to_string(),
        (None, Some(home)) if raw == "~" => Path::new(home).display().to_string(),
        _ => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confines_reads_to_the_roots() {
        let allowed = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let inside_file = allowed.path().join("a.gds");
        std::fs::write(&inside_file, b"x").unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"s").unwrap();
        std::os::unix::fs::symlink(&secret, allowed.path().join("escape")).unwrap();
        let roots = AllowedRoots::fixed(vec![allowed.path().to_path_buf()]);

        assert_eq!(
            roots.resolve_read(inside_file.to_str().unwrap()).unwrap(),
            inside_file.canonicalize().unwrap()
        );
        let uri = format!("file://{}", inside_file.display());
        assert!(roots.resolve_read(&uri).is_ok());
        let code = |raw: &str| roots.resolve_read(raw).unwrap_err().code;
        assert_eq!(code(secret.to_str().unwrap()), ErrorCode::PathNotAllowed);
        assert_eq!(
            code(allowed.path().join("escape").to_str().unwrap()),
            ErrorCode::PathNotAllowed,
            "symlink escape"
        );
        // Both temp dirs share a parent, so `<allowed>/../<outside>/secret` exists.
        let dotdot = allowed
            .path()
            .join("..")
            .join(outside.path().file_name().unwrap())
            .join("secret");
        assert_eq!(
            code(dotdot.to_str().unwrap()),
            ErrorCode::PathNotAllowed,
            "`..` escape"
        );
        assert_eq!(
            code(allowed.path().join("missing").to_str().unwrap()),
            ErrorCode::FileNotFound
        );
        assert_eq!(code(" padded"), ErrorCode::InvalidInput);
        let err = roots.resolve_read(secret.to_str().unwrap()).unwrap_err();
        assert_eq!(
            err.details["allowed_roots"][0],
            json!(allowed.path().canonicalize().unwrap())
        );
    }

    #[test]
    fn client_roots_replace_and_fall_back() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let roots = AllowedRoots::fixed(vec![a.path().to_path_buf()]);
        roots.set_client_roots(&[format!("file://{}", b.path().display())]);
        assert_eq!(
            roots.snapshot(),
            (vec![b.path().canonicalize().unwrap()], RootsSource::Client)
        );
        roots.set_client_roots(&["https://example.com/".into()]);
        assert_eq!(roots.snapshot().1, RootsSource::Environment);
    }
}
