//! The ready file of seed 001: `<pid> <ISO8601>\n`, present exactly while the
//! RPC loop runs.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Removes the ready file when dropped (also on panic unwinding), unless kept.
#[derive(Debug)]
pub struct ReadyFile {
    path: PathBuf,
    keep: bool,
}

impl ReadyFile {
    /// Writes the file atomically (temp file + rename) so readers never see a partial line.
    pub fn create(path: &Path) -> io::Result<Self> {
        Self::create_with(path, None)
    }

    /// Like [`Self::create`], with a second line: the MCP endpoint's URL of an HTTP host
    /// (so a client started with port 0 learns the port).
    pub fn create_with(path: &Path, url: Option<&str>) -> io::Result<Self> {
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(io::Error::other)?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        writeln!(tmp, "{} {now}", std::process::id())?;
        if let Some(url) = url {
            writeln!(tmp, "{url}")?;
        }
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(Self {
            path: path.to_path_buf(),
            keep: false,
        })
    }

    /// Leaves the file in place (a reexec: same pid, the next image rewrites it).
    pub fn keep(mut self) {
        self.keep = true;
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ReadyFile {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        // Only remove the file if it is still ours (another instance may have replaced it).
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| s.split_whitespace().next().map(str::to_owned))
            .is_some_and(|pid| pid == std::process::id().to_string());
        if ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not remove the ready file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_then_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.ready");
        {
            let ready = ReadyFile::create(&path).unwrap();
            let text = std::fs::read_to_string(ready.path()).unwrap();
            let (pid, stamp) = text.trim_end().split_once(' ').unwrap();
            assert_eq!(pid, std::process::id().to_string());
            assert!(text.ends_with('\n'));
            time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339)
                .unwrap();
        }
        assert!(!path.exists());
    }
}
