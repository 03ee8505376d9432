//! A file a job wrote into its artifact directory, as every result names one (issue 27
//! item 4, D232): `{path, sha256, bytes}`, the worker's `artifacts::write` and
//! `violations.jsonl`'s writer answer it, the host reads it (a region optimize's
//! `state_after`, the `resource_link` blocks of `media`).

use serde::{Deserialize, Serialize};

/// A file a result names: where it is, its SHA-256 and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Absolute path.
    pub path: String,
    /// Its SHA-256 (hex).
    pub sha256: String,
    /// Its size (bytes).
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_writes_path_sha256_bytes_in_that_order() {
        let f = FileRef {
            path: "/jobs/a/x.png".into(),
            sha256: "ab".into(),
            bytes: 3,
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"path":"/jobs/a/x.png","sha256":"ab","bytes":3}"#
        );
    }
}
