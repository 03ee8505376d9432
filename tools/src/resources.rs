//! A client's artifacts as MCP resources (issue 30, D200–D202).
//!
//! Every file a job or a layout session of this client wrote under the artifact root is
//! a resource `reticle://artifacts/<jobs|sessions>/<dir>/<path>`: PNGs, GDSII/OASIS,
//! `.npy`, `violations.jsonl`, reports. Which directories are the client's is what its
//! [`ClientScope`] knows: its live layout sessions and the job directories it made
//! ([`crate::sessions::Sessions::artifact_dirs`]). A resource lives as long as its
//! directory: a closed or expired session, a job directory past the artifact TTL, is
//! gone from the list and reads as unknown. Another client's URI (over HTTP, another
//! token or session) is refused with exactly the answer an unknown URI gets. A job's
//! directory stops being a resource when the job leaves the client's job table
//! (`RETICLE_JOB_TTL_MS` after it ended), even while the file waits for the sweep.
//!
//! `resources/read` returns a whole file up to [`READ_MAX_BYTES`]; a larger one is the
//! typed error `RESOURCE_TOO_LARGE`, which names the way to read it in parts:
//! `<uri>?offset=N&length=M` (a byte range, as a blob, with the next offset in `_meta`).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use reticle_dispatch::jobs::Jobs;

use reticle_transport::era::RpcError;
use reticle_transport::jsonrpc::INVALID_PARAMS;
use serde_json::{Value, json};

use crate::scope::ClientScope;

/// The scheme and authority of every artifact resource.
pub const URI_PREFIX: &str = "reticle://artifacts/";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 100;
/// The most bytes one `resources/read` returns (a whole file, or one part).
pub const READ_MAX_BYTES: u64 = 4 << 20;
/// The 2025-11-25 "Resource not found" code (2026-07-28 answers -32602).
pub const LEGACY_NOT_FOUND: i64 = -32002;
/// Files a directory holds that are the host's bookkeeping, not artifacts.
const HIDDEN: [&str; 1] = ["host.pid"];
/// How deep a directory is walked (a session's `drc/<run>/crops/` is three levels).
const MAX_DEPTH: u8 = 4;
/// `_meta` key of a part's range.
pub const META_PART: &str = "reticle/part";

/// One artifact file of the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The file.
    pub path: PathBuf,
    /// Its resource URI.
    pub uri: String,
    /// Its name in listings: `<dir>/<path inside it>`.
    pub name: String,
    /// Its MIME type (from the extension).
    pub mime: &'static str,
    /// Its size in bytes.
    pub bytes: u64,
}

impl Artifact {
    /// The `Resource` of `resources/list` (a `resource_link` block adds `type`).
    #[must_use]
    pub fn resource(&self) -> Value {
        let kind = if self.uri[URI_PREFIX.len()..].starts_with("jobs/") {
            "job"
        } else {
            "layout session"
        };
        json!({
            "uri": self.uri,
            "name": self.name,
            "description": format!("{kind} artifact ({} bytes)", self.bytes),
            "mimeType": self.mime,
            "size": self.bytes,
        })
    }

    /// Whether the file is text (read as `text`, not `blob`).
    #[must_use]
    pub fn is_text(&self) -> bool {
        is_text_mime(self.mime)
    }
}

/// The MIME type of an artifact, from its extension.
#[must_use]
pub fn mime_of(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "png" => "image/png",
        "json" => "application/json",
        "jsonl" => "application/jsonl",
        "gds" | "gds2" | "gdsii" => "application/vnd.gds",
        "oas" | "oasis" => "application/vnd.oasis",
        "npy" => "application/x-npy",
        "lyrdb" | "xml" => "application/xml",
        "txt" | "log" | "drc" | "lydrc" | "rb" | "py" => "text/plain",
        "csv" => "text/csv",
        "html" => "text/html",
        _ => "application/octet-stream",
    }
}

fn is_text_mime(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/jsonl" | "application/xml"
        )
}

/// The client's artifact that `path` names, if `path` is a file inside one of its
/// artifact directories (links are not followed out of it).
#[must_use]
pub fn artifact_of(scope: &ClientScope, path: &Path) -> Option<Artifact> {
    Owned::of(scope)?.artifact(path)
}

/// The client's artifact directories at one moment (the artifact root and the
/// directories), to look many paths up at the cost of one.
#[derive(Debug)]
pub struct Owned<'a> {
    root: &'a Path,
    dirs: Vec<PathBuf>,
}

impl<'a> Owned<'a> {
    /// The directories of the client of `scope` now; `None` before it has an artifact root.
    #[must_use]
    pub fn of(scope: &'a ClientScope) -> Option<Self> {
        Some(Self {
            root: scope.sessions.root().ok()?,
            dirs: scope.sessions.artifact_dirs(),
        })
    }

    /// The same, less the job directories whose job the client's `jobs` table no longer
    /// holds: a job directory is the client's resource while its job runs (its guard
    /// lives) or while the finished job's result names a file in it (D200). A session's
    /// directory lives with the session.
    #[must_use]
    pub fn live(scope: &'a ClientScope, jobs: &Jobs) -> Option<Self> {
        let mut owned = Self::of(scope)?;
        let job_root = owned.root.join("jobs");
        let mut live: BTreeSet<PathBuf> = scope.sessions.running_job_dirs().into_iter().collect();
        let mut cursor: Option<String> = None;
        while let Ok((page, next)) = jobs.list_page(cursor.as_deref(), 500) {
            for view in &page {
                if let Some(result) = &view.result {
                    named_dirs(result, &job_root, &mut live);
                }
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        owned
            .dirs
            .retain(|d| !d.starts_with(&job_root) || live.contains(d));
        Some(owned)
    }

    /// The artifact `path` names, if it is a file inside one of the directories.
    #[must_use]
    pub fn artifact(&self, path: &Path) -> Option<Artifact> {
        let dir = self.dirs.iter().find(|d| path.starts_with(d))?;
        describe(self.root, dir, path)
    }
}

/// Adds to `dirs` every directory `jobs/<dir>` (under `job_root`) that a string of
/// `value` names a path in.
fn named_dirs(value: &Value, job_root: &Path, dirs: &mut BTreeSet<PathBuf>) {
    match value {
        Value::String(text) => {
            if let Ok(rest) = Path::new(text).strip_prefix(job_root)
                && let Some(Component::Normal(dir)) = rest.components().next()
            {
                dirs.insert(job_root.join(dir));
            }
        }
        Value::Array(items) => items.iter().for_each(|v| named_dirs(v, job_root, dirs)),
        Value::Object(map) => map.values().for_each(|v| named_dirs(v, job_root, dirs)),
        _ => {}
    }
}

/// The artifact at `path` (inside `dir`, under `root`), or `None` for anything that is
/// not a plain visible file there.
fn describe(root: &Path, dir: &Path, path: &Path) -> Option<Artifact> {
    let inside = path.strip_prefix(dir).ok()?;
    let plain = inside.components().all(|c| match c {
        Component::Normal(name) => name.to_str().is_some_and(|n| !n.starts_with('.')),
        _ => false,
    });
    let file_name = inside.file_name()?.to_str()?;
    if !plain || HIDDEN.contains(&file_name) {
        return None;
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    // No link on the way: the canonical file is the path itself.
    if path.canonicalize().ok()? != path {
        return None;
    }
    let rel = path.strip_prefix(root).ok()?.to_str()?.to_owned();
    let dir_name = dir.file_name()?.to_str()?;
    Some(Artifact {
        uri: format!("{URI_PREFIX}{rel}"),
        name: format!("{dir_name}/{}", inside.to_str()?),
        mime: mime_of(path),
        bytes: meta.len(),
        path: path.to_owned(),
    })
}

/// Every artifact of the client (of `scope`, whose jobs are `jobs`), sorted by URI.
#[must_use]
pub fn artifacts(scope: &ClientScope, jobs: &Jobs) -> Vec<Artifact> {
    let Some(owned) = Owned::live(scope, jobs) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for dir in &owned.dirs {
        walk(owned.root, dir, dir, MAX_DEPTH, &mut found);
    }
    found.sort_by(|a, b| a.uri.cmp(&b.uri));
    found.dedup_by(|a, b| a.uri == b.uri);
    found
}

fn walk(root: &Path, dir: &Path, at: &Path, depth: u8, found: &mut Vec<Artifact>) {
    let Ok(read) = std::fs::read_dir(at) else {
        return;
    };
    for entry in read.filter_map(Result::ok) {
        let path = entry.path();
        // Hidden entries (temporary files, a job's `.tiles/`, D190) are not artifacts.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() && depth > 0 {
            walk(root, dir, &path, depth - 1, found);
        } else if let Some(artifact) = describe(root, dir, &path) {
            found.push(artifact);
        }
    }
}

/// `resources/list`: one page of the viewer and the client's artifacts.
///
/// # Errors
/// `-32602` for a cursor this server did not hand out.
pub fn list(scope: &ClientScope, jobs: &Jobs, cursor: Option<&Value>) -> Result<Value, RpcError> {
    let start = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => c
            .strip_prefix("a:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| RpcError::invalid_params("invalid cursor"))?,
        Some(_) => return Err(RpcError::invalid_params("invalid cursor")),
    };
    // The viewer (a `ui://` resource, D205) first, then the client's artifacts.
    let all: Vec<Value> = std::iter::once(crate::viewer::resource())
        .chain(artifacts(scope, jobs).iter().map(Artifact::resource))
        .collect();
    let page: Vec<Value> = all.iter().skip(start).take(PAGE_SIZE).cloned().collect();
    let mut result = json!({"resources": page});
    if start + PAGE_SIZE < all.len() {
        result["nextCursor"] = json!(format!("a:{}", start + PAGE_SIZE));
    }
    Ok(result)
}

/// `resources/templates/list`: the shapes of the URIs (jobs, sessions, parts).
#[must_use]
pub fn templates() -> Value {
    json!({"resourceTemplates": [
        {
            "uriTemplate": format!("{URI_PREFIX}jobs/{{job_dir}}/{{file}}"),
            "name": "job artifact",
            "description": "A file a job wrote (evaluate: violations.jsonl, heatmap.png; simulate: \
                            .npy and .png images; optimize: the mask as GDSII and PNG). job_dir is \
                            the job's artifact directory (artifacts.dir in its result).",
            "mimeType": "application/octet-stream",
        },
        {
            "uriTemplate": format!("{URI_PREFIX}sessions/{{session_id}}/{{+path}}"),
            "name": "layout session artifact",
            "description": "A file a layout session wrote: session.json, renders/*.png, \
                            drc/<run_id>/ (report, markers, crops).",
            "mimeType": "application/octet-stream",
        },
        {
            "uriTemplate": format!("{URI_PREFIX}{{+path}}{{?offset,length}}"),
            "name": "artifact part",
            "description": format!("A byte range of an artifact (a blob), for files over {READ_MAX_BYTES} \
                            bytes; _meta[\"{META_PART}\"].next_offset says where the next part starts."),
            "mimeType": "application/octet-stream",
        },
    ]})
}

/// The error for a URI that is not one of the caller's resources, whatever the reason
/// (unknown, expired, another client's): one answer, so nothing leaks (2025-11-25:
/// -32002; 2026-07-28: -32602).
#[must_use]
pub fn not_found(uri: &str, modern: bool) -> RpcError {
    RpcError {
        code: if modern {
            INVALID_PARAMS
        } else {
            LEGACY_NOT_FOUND
        },
        message: "Resource not found".into(),
        data: Some(json!({"uri": uri})),
    }
}

/// A read's range: `?offset=N&length=M` after the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Part {
    offset: u64,
    length: u64,
}

fn parse(uri: &str) -> Option<(PathBuf, Option<Part>)> {
    let rest = uri.strip_prefix(URI_PREFIX)?;
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let rel = Path::new(path);
    let plain = rel
        .components()
        .all(|c| matches!(c, Component::Normal(n) if !n.to_string_lossy().starts_with('.')));
    let top = rel.components().next()?.as_os_str().to_str()?;
    if !plain || !["jobs", "sessions"].contains(&top) {
        return None;
    }
    let part = match query {
        None => None,
        Some(query) => {
            let mut part = Part {
                offset: 0,
                length: READ_MAX_BYTES,
            };
            for pair in query.split('&') {
                let (key, value) = pair.split_once('=')?;
                let value: u64 = value.parse().ok()?;
                match key {
                    "offset" => part.offset = value,
                    "length" => part.length = value,
                    _ => return None,
                }
            }
            Some(part)
        }
    };
    Some((rel.to_owned(), part))
}

/// `resources/read` of `uri` for the client of `scope`.
///
/// # Errors
/// [`not_found`] for anything that is not the caller's; `-32602` with
/// `data.code = "RESOURCE_TOO_LARGE"` for a whole file over [`READ_MAX_BYTES`] (its
/// data names the part URI to read instead) or a part longer than that; `-32603` when
/// the file cannot be read.
pub fn read(scope: &ClientScope, jobs: &Jobs, uri: &str, modern: bool) -> Result<Value, RpcError> {
    let unknown = || not_found(uri, modern);
    if uri == crate::viewer::URI {
        return Ok(crate::viewer::read());
    }
    let (rel, part) = parse(uri).ok_or_else(unknown)?;
    let owned = Owned::live(scope, jobs).ok_or_else(unknown)?;
    let artifact = owned.artifact(&owned.root.join(rel)).ok_or_else(unknown)?;
    let base = uri.split('?').next().unwrap_or(uri);
    let Some(part) = part else {
        if artifact.bytes > READ_MAX_BYTES {
            return Err(too_large(base, artifact.bytes, READ_MAX_BYTES));
        }
        let bytes = std::fs::read(&artifact.path).map_err(|e| internal(uri, &e))?;
        let mut contents = json!({"uri": base, "mimeType": artifact.mime});
        match String::from_utf8(bytes) {
            Ok(text) if artifact.is_text() => contents["text"] = json!(text),
            Ok(text) => contents["blob"] = json!(base64(text.as_bytes())),
            Err(e) => contents["blob"] = json!(base64(e.as_bytes())),
        }
        return Ok(json!({"contents": [contents]}));
    };
    if part.length > READ_MAX_BYTES {
        return Err(too_large(uri, part.length, READ_MAX_BYTES));
    }
    let offset = part.offset.min(artifact.bytes);
    let length = part.length.min(artifact.bytes - offset);
    let bytes = read_range(&artifact.path, offset, length).map_err(|e| internal(uri, &e))?;
    let end = offset + bytes.len() as u64;
    Ok(json!({"contents": [{
        "uri": uri,
        "mimeType": artifact.mime,
        "blob": base64(&bytes),
        "_meta": {META_PART: {
            "offset": offset,
            "length": bytes.len(),
            "total_bytes": artifact.bytes,
            "next_offset": (end < artifact.bytes).then_some(end),
        }},
    }]}))
}

fn read_range(path: &Path, offset: u64, length: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(length).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn too_large(uri: &str, bytes: u64, max: u64) -> RpcError {
    let base = uri.split('?').next().unwrap_or(uri);
    RpcError {
        code: INVALID_PARAMS,
        message: format!(
            "Resource too large: {bytes} bytes, the limit of one read is {max}; read it in parts: \
             {base}?offset=0&length={max}"
        ),
        data: Some(json!({
            "code": "RESOURCE_TOO_LARGE",
            "uri": uri,
            "bytes": bytes,
            "max_bytes": max,
            "first_part": format!("{base}?offset=0&length={max}"),
        })),
    }
}

fn internal(uri: &str, e: &std::io::Error) -> RpcError {
    RpcError {
        code: reticle_transport::jsonrpc::INTERNAL_ERROR,
        message: format!("cannot read the resource: {e}"),
        data: Some(json!({"uri": uri})),
    }
}

/// Standard base64 of `bytes` (a `blob`, an image block's `data`).
#[must_use]
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests;
