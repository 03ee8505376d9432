//! `tasks/list` paging: oldest first, with opaque cursors (submission time and id of
//! the last task of a page).

use std::time::SystemTime;

use reticle_protocol::sync::lock;

use super::{JobView, Jobs};

/// A `tasks/list` cursor that names no position in the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor")]
pub struct InvalidCursor;

impl Jobs {
    /// One page of jobs, oldest first, after `cursor` (from a previous page's
    /// `next`), at most `limit` long, with the cursor of the next page if any.
    ///
    /// # Errors
    /// [`InvalidCursor`] when the cursor is not one this table issued.
    pub fn list_page(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<JobView>, Option<String>), InvalidCursor> {
        self.prune();
        let after = cursor.map(decode_cursor).transpose()?;
        let entries = lock(&self.entries);
        let mut views: Vec<JobView> = entries.values().map(|e| self.view_of(e)).collect();
        drop(entries);
        views.sort_by_key(cursor_key);
        let start = match &after {
            None => 0,
            Some(key) => views.partition_point(|v| cursor_key(v) <= *key),
        };
        let page: Vec<JobView> = views.into_iter().skip(start).take(limit + 1).collect();
        if page.len() > limit {
            let mut page = page;
            page.truncate(limit);
            let next = page.last().map(|v| encode_cursor(&cursor_key(v)));
            Ok((page, next))
        } else {
            Ok((page, None))
        }
    }
}

/// Sort key of `tasks/list`: submission time, then id (ids are unique).
fn cursor_key(view: &JobView) -> (u128, String) {
    let nanos = view
        .created_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos, view.job_id.clone())
}

fn encode_cursor((nanos, id): &(u128, String)) -> String {
    format!("{nanos}.{id}")
}

fn decode_cursor(cursor: &str) -> Result<(u128, String), InvalidCursor> {
    let (nanos, id) = cursor.split_once('.').ok_or(InvalidCursor)?;
    let nanos = nanos.parse().map_err(|_| InvalidCursor)?;
    if !id.starts_with("job_") {
        return Err(InvalidCursor);
    }
    Ok((nanos, id.to_owned()))
}
