//! The settings of `reticle serve --http` (docs/HTTP.md), read like every other setting.

use std::time::Duration;

use super::super::HttpSettings;
use super::{NON_NEGATIVE, OnError, SettingSource, SettingsReader, Spec, spec};
use crate::ConfigSeverity;

impl SettingsReader<'_> {
    /// A secret string setting (`None` when unset): recorded as set or not, never its value.
    fn secret(&mut self, spec: &Spec) -> Option<String> {
        let raw = self.raw(spec);
        let value = raw.as_ref().map(|(v, _)| v.to_string_lossy().into_owned());
        let source = raw.map_or(SettingSource::Default, |(_, s)| s);
        let shown = if value.is_some() { "(set, hidden)" } else { "" };
        self.record(spec, shown.to_owned(), source, "host");
        value
    }
}

pub(super) fn read_http(r: &mut SettingsReader<'_>) -> HttpSettings {
    let stop = OnError::Stop(ConfigSeverity::Serve, NON_NEGATIVE);
    HttpSettings {
        tokens_file: r.path(&spec(
            "RETICLE_HTTP_TOKENS_FILE",
            "serve --http: the bearer tokens file (JSON)",
        )),
        tokens: r.secret(&spec(
            "RETICLE_HTTP_TOKENS",
            "serve --http: bearer tokens as name=token,name=token",
        )),
        public_url: r.text(&spec(
            "RETICLE_HTTP_PUBLIC_URL",
            "serve --http: the endpoint URL as clients reach it (behind a TLS proxy)",
        )),
        max_sessions: usize::try_from(r.integer(
            &spec("RETICLE_HTTP_MAX_SESSIONS", "serve --http: client sessions at once"),
            64,
            "sessions",
            stop,
        ))
        .unwrap_or(usize::MAX)
        .max(1),
        idle: Duration::from_secs(
            r.integer(
                &spec(
                    "RETICLE_HTTP_IDLE_S",
                    "serve --http: a client with nothing in flight expires after this long",
                ),
                1800,
                "seconds",
                stop,
            )
            .max(1),
        ),
        resume_grace: Duration::from_millis(
            r.integer(
                &spec(
                    "RETICLE_HTTP_RESUME_GRACE_MS",
                    "serve --http: how long a dropped legacy stream may be resumed before its request is cancelled (max 60000)",
                ),
                750,
                "milliseconds",
                stop,
            )
            .min(60_000),
        ),
    }
}
