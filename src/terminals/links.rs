//! Which node holds each connected device (`terminal_links`, ADR 0019),
//! and what a device's registration writes on its terminal.

use crate::db::{Sql, Store, Value};
use crate::error::ApiResult;

/// Records that `node` holds the device's connection `link_id`; returns
/// the node and link it replaces, if any.
pub async fn claim(
    store: &Store,
    terminal_id: &str,
    node: &str,
    link_id: &str,
    now: i64,
) -> ApiResult<Option<(String, String)>> {
    let (terminal, node, link) = (terminal_id.to_string(), node.to_string(), link_id.to_string());
    store
        .write(move |conn| {
            let previous = conn
                .query_one(&Sql::with(
                    "SELECT node_id, link_id FROM terminal_links WHERE terminal_id = ?",
                    vec![terminal.clone().into()],
                ))?
                .and_then(|r| Some((r[0].as_str()?.to_string(), r[1].as_str()?.to_string())));
            conn.execute(&Sql::with(
                "INSERT INTO terminal_links (terminal_id, node_id, link_id, connected_ts) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (terminal_id) DO UPDATE SET node_id = excluded.node_id, \
                 link_id = excluded.link_id, connected_ts = excluded.connected_ts",
                vec![terminal.into(), node.into(), link.into(), now.into()],
            ))?;
            Ok(previous)
        })
        .await
}

/// The node and link holding the device, if a row says so.
pub async fn find(store: &Store, terminal_id: &str) -> ApiResult<Option<(String, String)>> {
    let terminal = terminal_id.to_string();
    store
        .read(move |conn| {
            Ok(conn
                .query_one(&Sql::with(
                    "SELECT node_id, link_id FROM terminal_links WHERE terminal_id = ?",
                    vec![terminal.into()],
                ))?
                .and_then(|r| Some((r[0].as_str()?.to_string(), r[1].as_str()?.to_string()))))
        })
        .await
}

/// Removes the row of one connection (not a newer one of the device).
pub async fn release(store: &Store, terminal_id: &str, link_id: &str) -> ApiResult<()> {
    let (terminal, link) = (terminal_id.to_string(), link_id.to_string());
    store
        .write(move |conn| {
            conn.execute(&Sql::with(
                "DELETE FROM terminal_links WHERE terminal_id = ? AND link_id = ?",
                vec![terminal.into(), link.into()],
            ))?;
            Ok(())
        })
        .await
}

/// Removes every row: on SQLite, one process serves the database, so the
/// rows a previous process left name connections that are gone.
pub async fn forget_all(store: &Store) -> ApiResult<()> {
    store
        .write(|conn| {
            conn.execute(&Sql::new("DELETE FROM terminal_links"))?;
            Ok(())
        })
        .await
}

/// What a device's registration writes on its terminal: the time, the
/// address it reports on the merchant's network (kept only when it is an
/// IPv4 address, as the field holds) and that it is provisioned.
pub async fn registered(
    store: &Store,
    terminal_id: &str,
    local_ip: Option<String>,
    now: i64,
) -> ApiResult<()> {
    let terminal = terminal_id.to_string();
    let ip = local_ip.filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok());
    store
        .write(move |conn| {
            conn.execute(&Sql::with(
                "UPDATE terminals SET last_registration_ts = ?, is_provisioned = 1, \
                 local_ip_address = COALESCE(?, local_ip_address) WHERE id = ?",
                vec![
                    now.into(),
                    ip.map(Value::Text).unwrap_or(Value::Null),
                    terminal.into(),
                ],
            ))?;
            Ok(())
        })
        .await
}
