//! Private per-worker runtime directories (mode 0700) that hold the worker sockets.
//!
//! Only our uid can enter the directory, so only our processes can reach the socket
//! before the worker connects; the socket file is unlinked once it has.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::SupervisorError;

/// Longest socket path `sockaddr_un` holds (108 bytes with the terminating NUL on Linux).
const MAX_SOCKET_PATH: usize = 107;

/// A directory removed (with its contents) when dropped.
#[derive(Debug)]
pub struct RuntimeDir {
    path: PathBuf,
}

impl RuntimeDir {
    /// Creates `<base>/reticle-<host pid>-<slot>-<random>` with mode 0700 and checks
    /// that what exists there is a directory we own that nobody else can enter.
    /// `base` defaults to `/tmp` (the configured supervisor passes `$XDG_RUNTIME_DIR`).
    pub fn create(base: Option<&Path>, slot: usize) -> Result<Self, SupervisorError> {
        let base = base.map_or_else(default_base, Path::to_path_buf);
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("reticle-{}-{slot}-{}", std::process::id(), &nonce[..12]);
        let path = base.join(name);
        let fail = |message: String| SupervisorError::RuntimeDir {
            path: path.display().to_string(),
            message,
        };
        // Room for `w<generation>.sock`.
        if path.as_os_str().len() + 24 > MAX_SOCKET_PATH {
            return Err(fail("path too long for a Unix socket".to_owned()));
        }
        DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| fail(e.to_string()))?;
        // The umask may have narrowed the mode; never widen past 0700.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| fail(e.to_string()))?;
        let dir = Self { path };
        dir.verify()
            .map_err(|message| SupervisorError::RuntimeDir {
                path: dir.path.display().to_string(),
                message,
            })?;
        Ok(dir)
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Socket path for a worker generation.
    #[must_use]
    pub fn socket_path(&self, generation: u64) -> PathBuf {
        self.path.join(format!("w{generation}.sock"))
    }

    fn verify(&self) -> Result<(), String> {
        let meta = std::fs::symlink_metadata(&self.path).map_err(|e| e.to_string())?;
        if !meta.file_type().is_dir() {
            return Err("not a directory".to_owned());
        }
        let uid = nix::unistd::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(format!("owned by uid {}, not {uid}", meta.uid()));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode != 0o700 {
            return Err(format!("mode {mode:o}, not 700"));
        }
        Ok(())
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "runtime dir not removed");
        }
    }
}

fn default_base() -> PathBuf {
    PathBuf::from("/tmp")
}
