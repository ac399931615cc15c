//! Change events, written in the same transaction as the change itself:
//! a change log row (with the old value of every changed field for
//! updates), then whatever the event sink of the context writes (the
//! postback outbox rows), so no committed change can lose its event and no
//! rolled-back change can emit one.

use super::record::Record;
use super::Cx;
use crate::db::{Conn, Sql, Value};
use crate::error::ApiResult;
use crate::ids::new_id;

/// Receives every change the engine records, inside the transaction of the
/// change and after its change log row. The layer above chooses the sink
/// (postbacks implement it); the engine knows only this trait.
///
/// Called for every change of every resource: a sink returns at once for
/// records nobody listens to, without allocating or querying.
pub trait EventSink: Send + Sync {
    fn record(&self, conn: &mut dyn Conn, cx: &Cx, action: Action, record: &Record) -> ApiResult<()>;

    /// `record`, created earlier in this same job, changed before the job
    /// ends (a sale moved to the next batch): what [`EventSink::record`]
    /// wrote for its creation is written again from the record as it is
    /// now. A sink that keeps no copy of the record does nothing.
    fn created_again(&self, _conn: &mut dyn Conn, _cx: &Cx, _record: &Record) -> ApiResult<()> {
        Ok(())
    }
}

/// A sink that ignores every change, for contexts whose changes nobody can
/// be subscribed to yet (a location being created) and for tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSink;

impl EventSink for NoSink {
    fn record(&self, _: &mut dyn Conn, _: &Cx, _: Action, _: &Record) -> ApiResult<()> {
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "CREATE",
            Action::Update => "UPDATE",
            Action::Delete => "DELETE",
        }
    }
}

/// One changed field: name, old value and new value as text. Secrets are
/// logged as a mask, never in clear.
pub struct Change {
    pub field: &'static str,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// A secret's value as a change log shows it: that there is one.
fn mask(value: &Option<String>) -> Option<String> {
    value.as_ref().map(|_| "********".to_string())
}

pub fn record(
    conn: &mut dyn Conn,
    cx: &Cx,
    action: Action,
    record: &Record,
    changes: &[Change],
) -> ApiResult<()> {
    let id = new_id();
    let location_id = super::location_of(record).unwrap_or_default();
    conn.execute_unread(&Sql::with(
        "INSERT INTO changelogs (id, location_id, model, model_id, action, user_id, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
        vec![
            id.clone().into(),
            location_id.into(),
            record.res.model.into(),
            record.id().into(),
            action.as_str().into(),
            Value::from(cx.user_id.clone()),
            cx.now.into(),
        ],
    ))?;
    // A hidden field is internal bookkeeping (a settle's attempt count, a
    // key's digest): it never shows in a change log, nor in the postbacks
    // that carry one; unless it is a sealed key whose change is news
    // (shown under its public name, masked).
    let shown = changes.iter().filter_map(|c| match record.res.field(c.field) {
        Some(f) if f.hidden && f.logged_as.is_empty() => None,
        Some(f) if f.hidden => Some((f.logged_as, mask(&c.old), mask(&c.new))),
        _ => Some((c.field, c.old.clone(), c.new.clone())),
    });
    for (field, old, new) in shown {
        conn.execute_unread(&Sql::with(
            "INSERT INTO changelog_details (id, changelog_id, field, old_value, new_value) VALUES (?, ?, ?, ?, ?)",
            vec![
                new_id().into(),
                id.clone().into(),
                field.into(),
                old.into(),
                new.into(),
            ],
        ))?;
    }
    // After the change log, so a `changelogs` expand includes this entry.
    cx.sink.record(conn, cx, action, record)
}
