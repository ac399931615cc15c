//! The outbox: one delivery row per config that wants an event, written in
//! the transaction of the change. A committed change cannot lose its
//! event; a rolled-back change takes its rows with it.

use crate::db::{Conn, Sql, Value};
use crate::engine::events::Action;
use crate::engine::record::Record;
use crate::engine::{location_of, render_expanded, Cx};
use crate::error::ApiResult;
use crate::ids::new_id;
use crate::resources::postbackconfigs::subscribable;
use serde_json::Value as Json;
use std::sync::OnceLock;
use tokio::sync::Notify;

/// Rung when events are written, so this process's worker looks at once
/// instead of at its next poll.
pub fn wake() -> &'static Notify {
    static WAKE: OnceLock<Notify> = OnceLock::new();
    WAKE.get_or_init(Notify::new)
}

/// Writes the delivery rows of one event. Records of other resources, and
/// events no active config wants, cost one indexed lookup or nothing.
pub fn enqueue(conn: &mut dyn Conn, cx: &Cx, action: Action, record: &Record) -> ApiResult<()> {
    let res = record.res;
    if subscribable(res.name).is_none() {
        return Ok(());
    }
    let Some(location_id) = location_of(record) else {
        return Ok(());
    };
    let wanted = match action {
        Action::Create => "on_create",
        Action::Update => "on_update",
        Action::Delete => "on_delete",
    };
    let mut sql = Sql::new("SELECT id, expands FROM postback_configs WHERE location_id = ");
    sql.bind(location_id.clone())
        .push(" AND resource = ")
        .bind(res.name)
        .push(" AND is_active = 1 AND ")
        .push(wanted)
        .push(" = 1");
    if matches!(res.name, "transaction" | "transactionbatch") {
        sql.push(" AND product_transaction_id = ").bind(Value::from(
            record.text("product_transaction_id").map(str::to_string),
        ));
    }
    sql.push(" ORDER BY id");
    let configs = conn.query(&sql)?;
    if configs.is_empty() {
        return Ok(());
    }
    let now_ms = crate::clock::Clock::system().now_ms();
    // Configs asking for the same expands share one rendering.
    let mut rendered: Vec<(String, String)> = Vec::new();
    for config in configs {
        let config_id = config[0].as_str().unwrap_or_default().to_string();
        let expands = config[1].as_str().unwrap_or_default().to_string();
        let payload = match rendered.iter().find(|(e, _)| *e == expands) {
            Some((_, p)) => p.clone(),
            None => {
                let p = data(cx, conn, record, &expands)?;
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
    wake().notify_one();
    Ok(())
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
