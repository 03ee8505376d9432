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
