use std::time::Duration;

use super::*;
use crate::confine::AllowedRoots;
use crate::sessions::Sessions;
use crate::violation_cache::ViolationCache;
use reticle_dispatch::jobs::Jobs;

fn scope(root: &Path) -> ClientScope {
    ClientScope {
        roots: AllowedRoots::fixed(vec![root.to_owned()]),
        sessions: Sessions::new(root.to_owned(), Duration::from_secs(3600)),
        violations: ViolationCache::default(),
    }
}

fn blob(read: &Value) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(read["contents"][0]["blob"].as_str().unwrap())
        .unwrap()
}

#[test]
fn a_client_lists_and_reads_its_own_artifacts_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(Duration::from_secs(600));
    let (alice, bob) = (scope(tmp.path()), scope(tmp.path()));
    let dir = alice.sessions.new_job_dir("opt").unwrap();
    let png = [0x89u8, b'P', b'N', b'G', 13, 10, 26, 10, 0, 255];
    std::fs::write(dir.path().join("mask.png"), png).unwrap();
    std::fs::write(dir.path().join("violations.jsonl"), "{\"a\":1}\n").unwrap();
    std::fs::write(dir.path().join(".mask.png.1.tmp"), "partial").unwrap();
    let bob_dir = bob.sessions.new_job_dir("sim").unwrap();
    std::fs::write(bob_dir.path().join("aerial.npy"), [1u8; 10]).unwrap();

    let page = list(&alice, &jobs, None).unwrap();
    let uris: Vec<&str> = page["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .filter(|u| *u != crate::viewer::URI)
        .collect();
    assert_eq!(
        uris.len(),
        2,
        "{uris:?}: the temporary file is not an artifact"
    );
    assert!(
        uris.iter()
            .all(|u| u.starts_with(URI_PREFIX) && u.contains("/opt_"))
    );
    let png_uri = uris.iter().find(|u| u.ends_with("mask.png")).unwrap();
    let read_png = read(&alice, &jobs, png_uri, false).unwrap();
    assert_eq!(read_png["contents"][0]["mimeType"], "image/png");
    assert_eq!(blob(&read_png), png);
    let jsonl = uris.iter().find(|u| u.ends_with(".jsonl")).unwrap();
    assert_eq!(
        read(&alice, &jobs, jsonl, true).unwrap()["contents"][0]["text"],
        "{\"a\":1}\n"
    );

    // Bob: another client's URI answers exactly as an unknown one.
    let foreign = read(&bob, &jobs, png_uri, false).unwrap_err();
    let unknown = read(
        &bob,
        &jobs,
        &png_uri.replace("mask.png", "nothing.png"),
        false,
    )
    .unwrap_err();
    assert_eq!(foreign.code, LEGACY_NOT_FOUND);
    assert_eq!(
        (foreign.code, &foreign.message),
        (unknown.code, &unknown.message)
    );
    assert_eq!(
        read(&bob, &jobs, png_uri, true).unwrap_err().code,
        INVALID_PARAMS
    );
    let bobs = list(&bob, &jobs, None).unwrap();
    assert_eq!(
        bobs["resources"].as_array().unwrap().len(),
        2,
        "the viewer and Bob's own file"
    );
    // Escapes and hidden files are unknown too.
    for uri in [
        format!("{URI_PREFIX}jobs/../sessions"),
        format!(
            "{URI_PREFIX}jobs/{}/.mask.png.1.tmp",
            dir.path().file_name().unwrap().to_str().unwrap()
        ),
        "file:///etc/passwd".to_owned(),
        format!("{URI_PREFIX}etc/passwd"),
    ] {
        assert_eq!(
            read(&alice, &jobs, &uri, false).unwrap_err().message,
            "Resource not found",
            "{uri}"
        );
    }

    // Expiry: the directory gone, the resource is gone.
    std::fs::remove_dir_all(dir.path()).unwrap();
    assert_eq!(
        list(&alice, &jobs, None).unwrap()["resources"],
        json!([crate::viewer::resource()]),
        "only the viewer is left"
    );
    assert_eq!(
        read(&alice, &jobs, png_uri, false).unwrap_err().code,
        LEGACY_NOT_FOUND
    );
}

#[test]
fn a_large_file_is_a_typed_error_and_reads_in_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(Duration::from_secs(600));
    let alice = scope(tmp.path());
    let dir = alice.sessions.new_job_dir("sim").unwrap();
    let bytes: Vec<u8> = (0..READ_MAX_BYTES + 1000)
        .map(|i| (i % 251) as u8)
        .collect();
    std::fs::write(dir.path().join("big.npy"), &bytes).unwrap();
    let uri = list(&alice, &jobs, None).unwrap()["resources"][1]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let error = read(&alice, &jobs, &uri, false).unwrap_err();
    assert_eq!(error.code, INVALID_PARAMS);
    let data = error.data.unwrap();
    assert_eq!(data["code"], "RESOURCE_TOO_LARGE");
    assert_eq!(data["bytes"], bytes.len());
    let mut got = Vec::new();
    let mut next = Some(0u64);
    while let Some(offset) = next {
        let part = read(
            &alice,
            &jobs,
            &format!("{uri}?offset={offset}&length=1000000"),
            false,
        )
        .unwrap();
        got.extend(blob(&part));
        next = part["contents"][0]["_meta"][META_PART]["next_offset"].as_u64();
    }
    assert_eq!(got, bytes, "the parts put together are the file");
    assert_eq!(
        read(
            &alice,
            &jobs,
            &format!("{uri}?offset=0&length={}", READ_MAX_BYTES + 1),
            false
        )
        .unwrap_err()
        .data
        .unwrap()["code"],
        "RESOURCE_TOO_LARGE"
    );
}

#[test]
fn the_list_is_paged() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(Duration::from_secs(600));
    let alice = scope(tmp.path());
    let dir = alice.sessions.new_job_dir("eval").unwrap();
    for i in 0..(PAGE_SIZE + 5) {
        std::fs::write(dir.path().join(format!("tile_{i:03}.json")), "{}").unwrap();
    }
    let first = list(&alice, &jobs, None).unwrap();
    assert_eq!(first["resources"].as_array().unwrap().len(), PAGE_SIZE);
    let second = list(&alice, &jobs, Some(&first["nextCursor"])).unwrap();
    assert_eq!(
        second["resources"].as_array().unwrap().len(),
        6,
        "105 files and the viewer"
    );
    assert!(second.get("nextCursor").is_none());
    assert!(list(&alice, &jobs, Some(&json!("bogus"))).is_err());
}

#[test]
fn a_reexec_keeps_the_job_directories_a_client_made() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(Duration::from_secs(600));
    let before = scope(tmp.path());
    let dir = before.sessions.new_job_dir("sim").unwrap();
    std::fs::write(dir.path().join("aerial.png"), [1u8; 4]).unwrap();
    finish_job(
        &jobs,
        json!({"images": {"path": dir.path().join("aerial.png")}}),
    );
    drop(dir);
    let exported = before.sessions.export();
    let after = scope(tmp.path());
    assert!(
        artifacts(&after, &jobs).is_empty(),
        "a fresh scope owns nothing"
    );
    after.sessions.import(&exported);
    let names: Vec<String> = artifacts(&after, &jobs)
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with("/aerial.png"), "{names:?}");
}

/// Runs a job of `jobs` to completion with `payload` as its result.
fn finish_job(jobs: &std::sync::Arc<Jobs>, payload: Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut rx = jobs.submit("simulate", move |_reporter| async move { Ok(payload) });
        while !rx.borrow().status.is_terminal() {
            rx.changed().await.unwrap();
        }
    });
}

#[test]
fn a_job_directory_is_a_resource_while_its_job_runs_or_is_remembered() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(Duration::from_millis(300));
    let alice = scope(tmp.path());
    let dir = alice.sessions.new_job_dir("opt").unwrap();
    let file = dir.path().join("optimized_mask.png");
    std::fs::write(&file, [9u8; 8]).unwrap();
    let uris = |jobs: &Jobs| -> Vec<String> {
        list(&alice, jobs, None).unwrap()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| {
                r["uri"]
                    .as_str()
                    .filter(|u| u.starts_with(URI_PREFIX))
                    .map(str::to_owned)
            })
            .collect()
    };
    assert_eq!(uris(&jobs).len(), 1, "running: its guard lives");
    drop(dir);
    assert!(
        uris(&jobs).is_empty(),
        "ended, and no job of the table names it"
    );
    finish_job(&jobs, json!({"state_after": {"mask_png": {"path": file}}}));
    let listed = uris(&jobs);
    assert_eq!(listed.len(), 1, "the finished job's result names it");
    assert!(read(&alice, &jobs, &listed[0], false).is_ok());
    // The job leaves the table after its TTL: its files are no longer resources, though
    // the directory waits for the artifact sweep.
    std::thread::sleep(Duration::from_millis(400));
    assert!(uris(&jobs).is_empty());
    assert!(file.exists());
    assert_eq!(
        read(&alice, &jobs, &listed[0], false).unwrap_err().message,
        "Resource not found"
    );
}
