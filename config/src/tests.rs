use std::ffi::OsString;
use std::time::Duration;

use super::*;

fn config(pairs: &[(&str, &str)]) -> Config {
    let pairs: Vec<(String, OsString)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(*v)))
        .collect();
    Config::from_lookup(move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
}

fn setting<'a>(config: &'a Config, name: &str) -> &'a Setting {
    config
        .settings()
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} not listed"))
}

#[test]
fn defaults_are_listed_with_their_source() {
    let c = config(&[]);
    assert_eq!(c.serve.drain, Duration::from_secs(30));
    assert_eq!(c.serve.eof_grace, Duration::from_millis(500));
    assert_eq!(c.serve.job_ttl, Duration::from_secs(600));
    assert_eq!(c.workers.workers, 1);
    assert_eq!(c.workers.job_timeout, Some(Duration::from_secs(600)));
    assert_eq!(c.workers.memory_limit_bytes, Some(8 << 30));
    assert_eq!(c.tools.drc_timeout, Duration::from_secs(600));
    assert_eq!(c.tools.klayout_bin, "klayout");
    assert!(c.tools.artifact_root.is_absolute());
    assert!(c.tools.artifact_root.ends_with(".artifacts"));
    assert_eq!(c.limits, crate::limits::HostLimits::default());
    assert!(!c.serve.debug_tools);
    assert_eq!(
        setting(&c, "RETICLE_DRAIN_MS").source,
        SettingSource::Default
    );
    assert_eq!(setting(&c, "RETICLE_MAX_SHAPES").value, "5000000");
    assert_eq!(setting(&c, "RETICLE_BACKEND").read_by, "workers");
    assert_eq!(c.errors_of(ConfigSeverity::Fatal).count(), 0);
    assert!(c.worker_settings().is_ok());
}

#[test]
fn values_are_typed_with_their_units_and_zero_means_no_limit() {
    let c = config(&[
        ("RETICLE_DRAIN_MS", "250"),
        ("RETICLE_EOF_GRACE_MS", "5000"),
        ("RETICLE_JOB_TIMEOUT_S", "0"),
        ("RETICLE_WORKER_MEMORY_MB", "64"),
        ("RETICLE_WORKERS", " 3 "),
        ("RETICLE_LAZY_WORKERS", "true"),
        ("RETICLE_EVENTS_MAX_BYTES", "10"),
        ("RETICLE_MAX_SESSIONS", "3"),
        ("KLAYOUT_MCP_SESSION_TTL_SECONDS", "7"),
    ]);
    assert_eq!(c.serve.drain, Duration::from_millis(250));
    assert_eq!(c.serve.eof_grace, Duration::from_millis(900), "capped");
    assert_eq!(c.workers.job_timeout, None);
    assert_eq!(c.workers.memory_limit_bytes, Some(64 << 20));
    assert_eq!(c.workers.workers, 3);
    assert!(c.serve.lazy_workers);
    assert_eq!(c.serve.events_max_bytes, 4096, "floor");
    assert_eq!(c.limits.max_sessions, 3);
    assert_eq!(c.tools.session_ttl, Duration::from_secs(7));
    assert_eq!(setting(&c, "RETICLE_WORKERS").source, SettingSource::Env);
}

#[test]
fn an_old_name_is_accepted_and_the_new_one_wins() {
    let old = config(&[("RETICLE_DRC_TIMEOUT_SECONDS", "42")]);
    assert_eq!(old.tools.drc_timeout, Duration::from_secs(42));
    assert_eq!(
        setting(&old, "RETICLE_DRC_TIMEOUT_S").source,
        SettingSource::OldName("RETICLE_DRC_TIMEOUT_SECONDS")
    );
    let both = config(&[
        ("RETICLE_DRC_TIMEOUT_SECONDS", "42"),
        ("RETICLE_DRC_TIMEOUT_S", "7"),
    ]);
    assert_eq!(both.tools.drc_timeout, Duration::from_secs(7));
}

#[test]
fn malformed_values_stop_what_they_always_stopped() {
    let c = config(&[("RETICLE_MAX_SHAPES", "0")]);
    let fatal: Vec<_> = c.errors_of(ConfigSeverity::Fatal).collect();
    assert_eq!(fatal.len(), 1);
    assert!(fatal[0].message.contains("RETICLE_MAX_SHAPES"), "{fatal:?}");

    let c = config(&[("RETICLE_WORKERS", "many")]);
    assert_eq!(c.errors_of(ConfigSeverity::Fatal).count(), 0);
    assert_eq!(
        c.worker_settings().unwrap_err(),
        "RETICLE_WORKERS=\"many\" is not a number"
    );
    let c = config(&[("RETICLE_WORKER_MEMORY_MB", "-1")]);
    assert_eq!(
        c.worker_settings().unwrap_err(),
        "RETICLE_WORKER_MEMORY_MB=\"-1\" is not a non-negative integer"
    );

    let c = config(&[("RETICLE_DRAIN_MS", "soon")]);
    assert_eq!(c.errors_of(ConfigSeverity::Serve).count(), 1);

    // The event log and the session TTL fall back to their defaults with a warning.
    let c = config(&[
        ("RETICLE_EVENTS_KEEP", "lots"),
        ("KLAYOUT_MCP_SESSION_TTL_SECONDS", "1h"),
    ]);
    assert_eq!(c.serve.events_keep, 4);
    assert_eq!(c.tools.session_ttl, Duration::from_secs(3600));
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert_eq!(
        setting(&c, "RETICLE_EVENTS_KEEP").source,
        SettingSource::Invalid
    );
}

#[test]
fn the_table_names_every_setting_once() {
    let c = config(&[("RETICLE_CHECK_OUTPUT", "1")]);
    let table = c.settings_table();
    for s in c.settings() {
        assert_eq!(
            c.settings().iter().filter(|t| t.name == s.name).count(),
            1,
            "{} listed twice",
            s.name
        );
        assert!(table.contains(s.name));
    }
    assert!(table.contains("RETICLE_CHECK_OUTPUT"));
    assert!(c.settings_json().as_array().is_some_and(|a| a.len() > 30));
}

#[test]
fn http_settings_are_read_and_the_tokens_never_printed() {
    let c = config(&[
        ("RETICLE_HTTP_TOKENS", "alice=s3cret-token-value"),
        ("RETICLE_HTTP_MAX_SESSIONS", "3"),
        ("RETICLE_HTTP_IDLE_S", "60"),
    ]);
    assert_eq!(
        c.serve.http.tokens.as_deref(),
        Some("alice=s3cret-token-value")
    );
    assert_eq!(c.serve.http.max_sessions, 3);
    assert_eq!(c.serve.http.idle, Duration::from_secs(60));
    assert_eq!(c.serve.http.resume_grace, Duration::from_millis(750));
    assert_eq!(setting(&c, "RETICLE_HTTP_TOKENS").value, "(set, hidden)");
    assert!(!c.settings_table().contains("s3cret"));
    assert!(!c.settings_json().to_string().contains("s3cret"));
}
