//! The interactive viewer (issue 30 item 4, MCP Apps `io.modelcontextprotocol/ui`, D205):
//! one `ui://` resource of MIME type `text/html;profile=mcp-app`, linked from the
//! `tools/list` entries of `evaluate`, `optimize` and `render_view` through
//! `_meta.ui.resourceUri`.
//!
//! The page (`viewer.html`, compiled in) speaks the app side of the extension over
//! `postMessage`: `ui/initialize`, then the host's `tool-input` and `tool-result`
//! notifications; it draws the heat map (read through the host with `resources/read`)
//! and the violation boxes, pans and zooms, lists the violations in view, shows a record
//! on click, and calls `optimize` through the host for "fix this" (the record) and "fix
//! this region" (the visible area), showing the metrics before and after and the
//! optimized mask. Everything is inline and its CSP declares no outside origin; a client
//! without MCP Apps gets the same text, structured content, images and links.

use serde_json::{Value, json};

/// The viewer's resource URI.
pub const URI: &str = "ui://reticle/viewer";
/// The MCP Apps HTML MIME type.
pub const MIME: &str = "text/html;profile=mcp-app";
/// The page.
pub const HTML: &str = include_str!("viewer.html");

/// The viewer's `_meta.ui` (no outside origin in any CSP list).
fn ui_meta() -> Value {
    json!({"ui": {
        "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
        "prefersBorder": true,
    }})
}

/// Its entry in `resources/list`.
#[must_use]
pub fn resource() -> Value {
    json!({
        "uri": URI,
        "name": "reticle viewer",
        "title": "reticle: layout, heat map and violations",
        "description": "Interactive viewer (MCP Apps) of evaluate, optimize and render_view results: \
                        pan and zoom, the violations in view, fix this / fix this region.",
        "mimeType": MIME,
        "size": HTML.len(),
        "_meta": ui_meta(),
    })
}

/// Its `resources/read` answer.
#[must_use]
pub fn read() -> Value {
    json!({"contents": [{"uri": URI, "mimeType": MIME, "text": HTML, "_meta": ui_meta()}]})
}

/// The `_meta.ui` of a tool the viewer shows.
#[must_use]
pub fn tool_meta() -> Value {
    json!({"resourceUri": URI, "visibility": ["model", "app"]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_self_contained() {
        assert!(HTML.starts_with("<!DOCTYPE html>"));
        for outside in [
            "http://",
            "https://",
            "//cdn",
            "src=\"http",
            "@import",
            "url(",
        ] {
            assert!(
                !HTML.contains(outside),
                "the viewer names an outside origin: {outside}"
            );
        }
        let csp = &read()["contents"][0]["_meta"]["ui"]["csp"];
        assert!(
            csp.as_object()
                .unwrap()
                .values()
                .all(|v| v.as_array().unwrap().is_empty())
        );
    }
}
