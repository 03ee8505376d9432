//! The one check that a path lies under allowed directories (docs/SECURITY.md).
//!
//! The host resolves every path argument with it before a worker sees the path, the
//! worker checks again in the process that opens the file (a host bug or a symlink
//! swapped in between cannot make it read elsewhere), and both sides check a batch
//! manifest's paths with it ([`crate::batch::BatchManifest::check`]). Also the one way
//! host and worker replace a file whole ([`write_replacing`]).

use std::path::{Path, PathBuf};

/// Why a path is not readable.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The path does not resolve (missing, dangling symlink, no permission).
    #[error("cannot resolve {path}: {source}", path = .path.display())]
    Unresolved {
        /// The path as given.
        path: PathBuf,
        /// Why it does not resolve.
        source: std::io::Error,
    },
    /// The path resolves outside every allowed directory.
    #[error("{path} is outside the allowed directories", path = .path.display())]
    Outside {
        /// The path as given.
        path: PathBuf,
        /// Where it resolves (symlinks followed, `..` removed).
        resolved: PathBuf,
    },
}

/// `path` resolved (symlinks followed, `..` removed) if the result lies under one of
/// `dirs`. Each directory is resolved too; one that does not resolve holds nothing, and
/// no directories means nothing is allowed.
///
/// # Errors
/// [`Refusal::Unresolved`] when `path` does not resolve, [`Refusal::Outside`] when it
/// resolves outside every directory.
pub fn resolve_under<D: AsRef<Path>>(path: &Path, dirs: &[D]) -> Result<PathBuf, Refusal> {
    let resolved = path.canonicalize().map_err(|source| Refusal::Unresolved {
        path: path.to_path_buf(),
        source,
    })?;
    let inside = dirs.iter().any(|dir| {
        dir.as_ref()
            .canonicalize()
            .is_ok_and(|dir| resolved.starts_with(dir))
    });
    if inside {
        Ok(resolved)
    } else {
        Err(Refusal::Outside {
            path: path.to_path_buf(),
            resolved,
        })
    }
}

/// Writes `bytes` to `target` through `tmp` and a rename, so a reader sees the old file or
/// the whole new one, never a part; `tmp` (on the same file system, a name no one else
/// writes) is removed when the write or the rename fails.
///
/// # Errors
/// The write's or the rename's.
pub fn write_replacing(target: &Path, tmp: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(tmp, bytes)
        .and_then(|()| std::fs::rename(tmp, target))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(tmp);
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacing_write_is_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("reticle-replace-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (target, tmp) = (dir.join("a.json"), dir.join(".a.json.tmp"));
        std::fs::write(&target, b"old").unwrap();
        write_replacing(&target, &tmp, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!tmp.exists());
        // A target that cannot be replaced (a directory): the error, and no temporary left.
        let sub = dir.join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("x"), b"x").unwrap();
        assert!(write_replacing(&sub, &tmp, b"new").is_err());
        assert!(!tmp.exists());
        assert_eq!(std::fs::read(sub.join("x")).unwrap(), b"x");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn inside_outside_symlink_and_dotdot() {
        let base = std::env::temp_dir().join(format!("reticle-paths-{}", std::process::id()));
        let (allowed, outside) = (base.join("allowed"), base.join("outside"));
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(allowed.join("a.gds"), b"x").unwrap();
        std::fs::write(outside.join("secret"), b"s").unwrap();
        let _ = std::fs::remove_file(allowed.join("escape"));
        std::os::unix::fs::symlink(outside.join("secret"), allowed.join("escape")).unwrap();
        let dirs = [&allowed];

        let ok = resolve_under(&allowed.join("a.gds"), &dirs).unwrap();
        assert_eq!(ok, allowed.join("a.gds").canonicalize().unwrap());
        for escape in [
            outside.join("secret"),
            allowed.join("escape"),
            allowed.join("../outside/secret"),
        ] {
            assert!(
                matches!(resolve_under(&escape, &dirs), Err(Refusal::Outside { .. })),
                "{} must be refused",
                escape.display()
            );
        }
        assert!(matches!(
            resolve_under(&allowed.join("missing"), &dirs),
            Err(Refusal::Unresolved { .. })
        ));
        let none: [&Path; 0] = [];
        assert!(resolve_under(&allowed.join("a.gds"), &none).is_err());
        let gone = [base.join("gone")];
        assert!(resolve_under(&allowed.join("a.gds"), &gone).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }
}
