//! Unit tests of the session table.

use super::*;

fn open(s: &Sessions) -> SessionInfo {
    s.create(
        PathBuf::from("/x.gds"),
        "gds",
        "00".into(),
        "TOP".into(),
        &json!({}),
    )
    .unwrap()
}

#[test]
fn closed_ids_are_the_close_probes_evidence_and_survive_a_reexec() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Sessions::new(tmp.path().join("a"), Duration::from_secs(60));
    let kept = open(&s);
    let gone = open(&s);
    assert!(s.is_live(&gone.id) && !s.was_closed(&gone.id));
    assert_eq!(s.close(&gone.id), (true, true));
    assert!(!s.is_live(&gone.id) && s.was_closed(&gone.id));
    assert_eq!(s.close("ses_000000000000"), (false, false));
    assert!(
        !s.was_closed("ses_000000000000"),
        "an unknown id was never closed"
    );
    assert_eq!(
        s.state(&gone.id),
        json!({"session_id": gone.id, "open": false, "live_sessions": 1})
    );
    assert_eq!(s.state(&kept.id)["open"], true);
    let next = Sessions::new(tmp.path().join("a"), Duration::from_secs(60));
    next.import(&s.export());
    assert!(next.was_closed(&gone.id) && next.is_live(&kept.id));
    assert!(!next.was_closed(&kept.id));
}

#[test]
fn live_sessions_are_capped_and_closing_frees_a_place() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Sessions::new(tmp.path().join("a"), Duration::from_secs(60)).with_max_live(2);
    let first = open(&s);
    let _second = open(&s);
    let refused = s.check_capacity().unwrap_err();
    assert_eq!(refused.code, ErrorCode::ToolLimitExceeded);
    assert!(refused.recoverable);
    assert_eq!(refused.details["setting"], "RETICLE_MAX_SESSIONS");
    let before = std::fs::read_dir(tmp.path().join("a/sessions"))
        .unwrap()
        .count();
    let err = s
        .create(
            PathBuf::from("/x.gds"),
            "gds",
            "00".into(),
            "TOP".into(),
            &json!({}),
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolLimitExceeded);
    let after = std::fs::read_dir(tmp.path().join("a/sessions"))
        .unwrap()
        .count();
    assert_eq!(before, after, "a refused session leaves no directory");
    assert_eq!(s.close(&first.id), (true, true));
    assert!(s.check_capacity().is_ok());
    open(&s);
}

#[test]
fn ids_dirs_close_and_expiry() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Sessions::new(tmp.path().join("a"), Duration::from_millis(50));
    let info = open(&s);
    assert!(
        info.id.starts_with("ses_") && info.id.len() == 16,
        "{}",
        info.id
    );
    assert!(
        info.id[4..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert!(info.dir.join("session.json").is_file());
    assert!(info.dir.join("renders").is_dir());
    assert!(info.dir.is_absolute());
    assert_eq!(s.get(&info.id).unwrap().id, info.id);
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(s.get(&info.id).unwrap_err().code, ErrorCode::SessionExpired);
    assert!(!info.dir.exists(), "swept sessions lose their directory");
    assert_eq!(
        s.get("ses_000000000000").unwrap_err().code,
        ErrorCode::SessionNotFound
    );

    let s = Sessions::new(tmp.path().join("b"), Duration::from_secs(60));
    let info = open(&s);
    assert_eq!(s.close(&info.id), (true, true));
    assert!(!info.dir.exists());
    assert_eq!(s.close(&info.id), (false, false));
}

#[test]
fn locators_are_per_session_and_unknown_ids_are_invalid_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Sessions::new(tmp.path().to_path_buf(), Duration::from_secs(60));
    let a = open(&s);
    let b = open(&s);
    s.record_locators(
        &a.id,
        BTreeMap::from([("shp_1".to_owned(), json!({"k": 1}))]),
    );
    assert_eq!(s.locators(&a.id, &["shp_1".into()]).unwrap().len(), 1);
    assert_eq!(
        s.locators(&b.id, &["shp_1".into()]).unwrap_err().code,
        ErrorCode::InvalidTarget
    );
}

#[test]
fn artifact_names_are_plain() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(write_artifact(tmp.path(), "../x", b"").is_err());
    assert!(write_artifact(tmp.path(), "a/b", b"").is_err());
    assert!(write_artifact(tmp.path(), ".hidden", b"").is_err());
    let p = write_artifact(tmp.path(), "rnd_00.png", b"x").unwrap();
    assert_eq!(std::fs::read(p).unwrap(), b"x");
}

#[test]
fn close_all_deletes_every_live_session_and_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Sessions::new(tmp.path().join("a"), Duration::from_secs(60));
    let (one, two) = (open(&s), open(&s));
    assert!(one.dir.is_dir() && two.dir.is_dir());
    assert_eq!(s.close_all(), 2);
    assert!(!one.dir.exists() && !two.dir.exists());
    assert!(s.was_closed(&one.id) && !s.is_live(&two.id));
    assert_eq!(s.close_all(), 0);
}

/// A session directory as a host that is gone left it: `session.json`, and `host.pid`
/// naming `owner` when given.
fn leave_session_dir(root: &Path, id: &str, owner: Option<u32>) -> PathBuf {
    let dir = root.join("sessions").join(id);
    std::fs::create_dir_all(dir.join("renders")).unwrap();
    std::fs::write(dir.join("session.json"), b"{}").unwrap();
    if let Some(pid) = owner {
        std::fs::write(dir.join(orphans::OWNER_FILE), pid.to_string()).unwrap();
    }
    dir
}

#[test]
fn directories_of_hosts_that_are_gone_are_collected_after_the_ttl() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a");
    let ttl = Duration::from_millis(300);
    // A running process that is not this one: its sessions are not ours to delete.
    let mut other_host = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let mut dead_host = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead_host.id();
    dead_host.wait().unwrap();

    let crashed = leave_session_dir(&root, "ses_00000000000a", Some(dead_pid));
    let before_owner_files = leave_session_dir(&root, "ses_00000000000b", None);
    let alive_elsewhere = leave_session_dir(&root, "ses_00000000000c", Some(other_host.id()));
    let not_a_session = root.join("sessions").join("notes");
    std::fs::create_dir_all(&not_a_session).unwrap();
    let old_job = root.join("jobs").join("sim_0000000000000000");
    std::fs::create_dir_all(&old_job).unwrap();
    std::fs::write(old_job.join("image.npy"), b"x").unwrap();

    let s = Sessions::new(root.clone(), ttl);
    let ours = open(&s);
    assert!(ours.dir.join(orphans::OWNER_FILE).is_file());
    assert_eq!(
        std::fs::read_to_string(ours.dir.join(orphans::OWNER_FILE)).unwrap(),
        std::process::id().to_string()
    );
    // Younger than the TTL: everything stays.
    s.collect_orphans();
    for dir in [&crashed, &before_owner_files, &alive_elsewhere, &old_job] {
        assert!(dir.is_dir(), "{} went before its TTL", dir.display());
    }

    std::thread::sleep(ttl + Duration::from_millis(100));
    // Another session table of this process (another HTTP client's scope on the same
    // artifact root) collects at once, and leaves this process's sessions alone.
    let next = Sessions::new(root.clone(), ttl);
    next.collect_orphans();
    assert!(
        ours.dir.is_dir(),
        "a session of this running host was deleted"
    );
    assert!(!crashed.exists(), "a crashed host's session stays");
    assert!(
        !before_owner_files.exists(),
        "a session without host.pid stays"
    );
    assert!(!old_job.exists(), "a gone host's job directory stays");
    assert!(
        alive_elsewhere.is_dir(),
        "a running host's session was deleted"
    );
    assert!(
        not_a_session.is_dir(),
        "a directory that is not a session was deleted"
    );
    other_host.kill().unwrap();
    other_host.wait().unwrap();
}

#[test]
fn a_live_session_is_never_collected_as_an_orphan() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a");
    let s = Sessions::new(root, Duration::from_secs(3600));
    let info = open(&s);
    // Its files are old by the orphan rule's clock, but it is live here.
    s.collect_orphans();
    assert!(info.dir.is_dir());
    let orphaned = orphans::collect(
        &s.root().unwrap().join("sessions"),
        &[info.id.clone()].into_iter().collect(),
        Duration::ZERO,
    );
    assert_eq!(orphaned, 0);
    assert!(info.dir.is_dir());
}
