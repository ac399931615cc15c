//! The outbox: one delivery row per config that wants an event, written in
//! the transaction of the change. A committed change cannot lose its
//! event; a rolled-back change takes its rows with it.

use crate::auth::Perms;
use crate::clock::Clock;
use crate::db::{Conn, Row, Sql, Value};
use crate::engine::events::{Action, EventSink};
use crate::engine::kept::Kept;
use crate::engine::query::{self, TenantScope};
use crate::engine::record::Record;
use crate::engine::{location_of, render_expanded, Cx};
use crate::error::ApiResult;
use crate::ids::new_id;
use serde_json::Value as Json;
use std::sync::Arc;
use tokio::sync::Notify;

/// The event sink that writes postback deliveries: the one every context
/// gets whose changes configs may subscribe to. New rows are due at once
/// (wall time of the clock) and ring `wake`, so this process's worker
/// looks at once instead of at its next poll.
#[derive(Clone, Default)]
pub struct Outbox {
    clock: Clock,
    wake: Arc<Notify>,
    configs: Arc<KeptSubscriptions>,
    scopes: Arc<KeptScopes>,
}

/// The active configs that want one kind of event, kept under the epoch
/// (see [`crate::engine::kept`], ADR 0024): most events of a busy
/// location are wanted by the same few configs, or by none.
type KeptSubscriptions = Kept<ConfigsKey, Vec<Row>>;

/// Location, resource, the event's flag column, and the product
/// transaction for resources whose configs name one.
type ConfigsKey = (String, &'static str, &'static str, Option<String>);

/// The scope of each location whose events configs want, kept under the
/// epoch (locations move it): a payload is rendered in it.
type KeptScopes = Kept<String, TenantScope>;

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

impl Outbox {
    /// `wake` is the delivery worker's (`worker::Deliveries`).
    pub fn new(clock: Clock, wake: Arc<Notify>) -> Outbox {
        Outbox {
            clock,
            wake,
            configs: Arc::default(),
            scopes: Arc::default(),
        }
    }
}

impl EventSink for Outbox {
    fn record(&self, conn: &mut dyn Conn, cx: &Cx, action: Action, record: &Record) -> ApiResult<()> {
        let kept = Subscriptions {
            configs: &self.configs,
            scopes: &self.scopes,
        };
        if enqueue(conn, cx, action, record, self.clock.now_ms(), &kept)? {
            self.wake.notify_one();
        }
        Ok(())
    }

    fn created_again(&self, conn: &mut dyn Conn, cx: &Cx, record: &Record) -> ApiResult<()> {
        // A record created in this job has no create deliveries but this
        // job's, and none of them has gone out: it is not committed yet.
        conn.execute(&Sql::with(
            "DELETE FROM postback_deliveries WHERE record_id = ? AND resource = ? AND event_type = ?",
            vec![
                record.id().into(),
                record.res.name.into(),
                Action::Create.as_str().into(),
            ],
        ))?;
        self.record(conn, cx, Action::Create, record)
    }
}

/// What [`enqueue`] keeps under the epoch between events.
pub struct Subscriptions<'a> {
    configs: &'a KeptSubscriptions,
    scopes: &'a KeptScopes,
}

/// Writes the delivery rows of one event. Records of resources that
/// declare no `postback` cost nothing; events no active config wants, one
/// indexed lookup, or none when the configs are kept under the request's
/// epoch (`kept`). Returns whether any row was written.
///
/// The payload is rendered as the config's location sees the record, not
/// as whoever made the change does (ADR 0027): in that location's scope,
/// with [`Perms::reader`]. A parent's admin, the system's own jobs and the
/// location's clerks all give it the same payload.
pub fn enqueue(
    conn: &mut dyn Conn,
    cx: &Cx,
    action: Action,
    record: &Record,
    now_ms: i64,
    kept: &Subscriptions,
) -> ApiResult<bool> {
    let res = record.res;
    let Some(postback) = res.postback else {
        return Ok(false);
    };
    let Some(location_id) = location_of(record) else {
        return Ok(false);
    };
    let wanted = match action {
        Action::Create => "on_create",
        Action::Update => "on_update",
        Action::Delete => "on_delete",
    };
    let product_transaction = postback
        .by_product_transaction
        .then(|| record.text("product_transaction_id").map(str::to_string))
        .flatten();
    let key = (location_id.clone(), res.name, wanted, product_transaction.clone());
    let configs = kept.configs.get_or_read(key, cx.epoch, || {
        let mut sql = Sql::new("SELECT id, expands FROM postback_configs WHERE location_id = ");
        sql.bind(location_id.clone())
            .push(" AND resource = ")
            .bind(res.name)
            .push(" AND is_active = 1 AND ")
            .push(wanted)
            .push(" = 1");
        if postback.by_product_transaction {
            sql.push(" AND product_transaction_id = ")
                .bind(Value::from(product_transaction));
        }
        sql.push(" ORDER BY id");
        conn.query(&sql)
    })?;
    if configs.is_empty() {
        return Ok(false);
    }
    // Configs live at the record's location: one viewer for all of them.
    let scope = kept
        .scopes
        .get_or_find(location_id.clone(), cx.epoch, || {
            query::location_scope(conn, &location_id)
        })?
        // A location gone in this very change: nothing beyond it.
        .unwrap_or_else(|| TenantScope {
            location_id: location_id.clone(),
            path: String::new(),
            tz: cx.scope.tz,
            leaf: true,
        });
    let viewer = Cx {
        scope,
        perms: Arc::new(Perms::reader()),
        ..cx.clone()
    };
    // Configs asking for the same expands share one rendering.
    let mut rendered: Vec<(String, String)> = Vec::new();
    for config in configs {
        let config_id = config[0].as_str().unwrap_or_default().to_string();
        let expands = config[1].as_str().unwrap_or_default().to_string();
        let payload = match rendered.iter().find(|(e, _)| *e == expands) {
            Some((_, p)) => p.clone(),
            None => {
                let p = data(&viewer, conn, record, &expands)?;
                rendered.push((expands, p.clone()));
                p
            }
        };
        conn.execute(&Sql::with(
            "INSERT INTO postback_deliveries (id, postback_config_id, location_id, resource, event_type, record_id, payload, \
             status, attempts, due_ms, event_ms, created_ts, modified_ts) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)",
            vec![
                new_id().into(),
                config_id.into(),
                location_id.clone().into(),
                res.name.into(),
                action.as_str().into(),
                record.id().into(),
                payload.into(),
                now_ms.into(),
                now_ms.into(),
                cx.now.into(),
                cx.now.into(),
            ],
        ))?;
    }
    Ok(true)
}

/// The `data` parameter: the record as the API returns it, with the
/// config's expands and without `_links`.
fn data(cx: &Cx, conn: &mut dyn Conn, record: &Record, expands: &str) -> ApiResult<String> {
    let names: Vec<String> = expands
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let mut json = render_expanded(cx, conn, record, &names)?;
    if let Json::Object(map) = &mut json {
        crate::engine::embedded_keys(record.res, map);
    }
    strip_links(&mut json);
    Ok(json.to_string())
}

/// Removes `_links` at every depth (embedded records carry them too).
fn strip_links(json: &mut Json) {
    match json {
        Json::Object(map) => {
            map.remove("_links");
            map.values_mut().for_each(strip_links);
        }
        Json::Array(items) => items.iter_mut().for_each(strip_links),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::Keyring;
    use crate::db::{DbError, Dialect, Row, Store};
    use crate::engine::{self, validate};
    use crate::error::ApiError;
    use crate::ids::ROOT_LOCATION_ID;
    use crate::resources::{CONTACT, NOTE};
    use std::sync::{Arc, Mutex};

    fn cx(location_id: &str, user_id: &str, sink: Arc<dyn EventSink>) -> Cx {
        Cx {
            user_id: user_id.to_string(),
            scope: TenantScope {
                location_id: location_id.to_string(),
                path: format!("/{ROOT_LOCATION_ID}/{location_id}/"),
                tz: chrono_tz::UTC,
                leaf: false,
            },
            now: 1_700_000_000,
            outbound: Default::default(),
            keyring: Arc::new(Keyring::new(&[7; 32], &[])),
            public_url: Arc::from(""),
            perms: Arc::new(Perms {
                admin: true,
                ..Default::default()
            }),
            sink,
            user_receipts: None,
            epoch: None,
        }
    }

    /// Remembers what it was told and how many change log rows of the
    /// record it could see then; fails when asked to.
    struct Probe {
        seen: Mutex<Vec<(Action, &'static str, i64)>>,
        fail: bool,
    }

    impl EventSink for Probe {
        fn record(&self, conn: &mut dyn Conn, _cx: &Cx, action: Action, record: &Record) -> ApiResult<()> {
            let logs = conn.query_int(&Sql::with(
                "SELECT COUNT(*) FROM changelogs WHERE model_id = ?",
                vec![record.id().into()],
            ))?;
            self.seen
                .lock()
                .map_err(|e| ApiError::internal(e.to_string()))?
                .push((action, record.res.name, logs));
            if self.fail {
                return Err(ApiError::internal("the sink refused"));
            }
            Ok(())
        }
    }

    fn count(store: &Store, table: &'static str) -> i64 {
        store
            .write_blocking(move |conn| {
                Ok(conn.query_int(&Sql::new(&format!("SELECT COUNT(*) FROM {table}")))?)
            })
            .unwrap()
    }

    /// The engine tells the context's sink of each change inside the
    /// change's transaction, after its change log row: a sink that fails
    /// takes the change and its log with it.
    #[test]
    fn the_sink_runs_inside_the_change_transaction() {
        let path = std::env::temp_dir().join(format!("ferrogate-sink-{}.db", new_id()));
        let store = Store::open(&format!("sqlite://{}", path.display()), 2).unwrap();
        store.migrate().unwrap();
        let creds = crate::bootstrap::run(&store, Arc::new(Keyring::new(&[7; 32], &[])), None, 1_700_000_000)
            .unwrap();
        let body = serde_json::json!({ "location_id": creds.location_id, "last_name": "Sink" });
        let body = body.as_object().unwrap().clone();

        for fail in [false, true] {
            let probe = Arc::new(Probe {
                seen: Mutex::new(Vec::new()),
                fail,
            });
            let cx = cx(&creds.location_id, &creds.user_id, probe.clone());
            let (contacts, logs) = (count(&store, "contacts"), count(&store, "changelogs"));
            let input = validate::for_create(&CONTACT, &body).unwrap();
            let result = store.write_blocking(move |conn| engine::create(&cx, conn, &CONTACT, input));
            assert_eq!(result.is_err(), fail);
            assert_eq!(
                *probe.seen.lock().unwrap(),
                [(Action::Create, "contact", 1)],
                "told once, after the change log row"
            );
            let grown = i64::from(!fail);
            assert_eq!(count(&store, "contacts"), contacts + grown);
            assert_eq!(count(&store, "changelogs"), logs + grown);
        }
        store.shutdown();
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    /// A connection that must not be used.
    struct Untouched;

    impl Conn for Untouched {
        fn query(&mut self, _: &Sql) -> Result<Vec<Row>, DbError> {
            panic!("queried")
        }
        fn execute(&mut self, _: &Sql) -> Result<u64, DbError> {
            panic!("executed")
        }
        fn dialect(&self) -> Dialect {
            Dialect::Sqlite
        }
    }

    /// Changes of resources that declare no postback cost the outbox no
    /// statement.
    #[test]
    fn records_without_postbacks_cost_nothing() {
        let cx = cx("l", "u", Arc::new(Outbox::default()));
        let note = Record::empty(&NOTE);
        for action in [Action::Create, Action::Update, Action::Delete] {
            Outbox::default()
                .record(&mut Untouched, &cx, action, &note)
                .unwrap();
        }
    }
}
