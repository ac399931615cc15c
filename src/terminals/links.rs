//! What the router keeps in the database (ADR 0020): which node holds
//! each connected device (`terminal_links`), and the messages between
//! nodes too long for a notification (`router_messages`).

use crate::db::{Sql, Store};
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

/// Removes the row naming `node` as the device's holder (a node that
/// finds it no longer has the link the row names).
pub async fn release_node(store: &Store, terminal_id: &str, node: &str) -> ApiResult<()> {
    let (terminal, node) = (terminal_id.to_string(), node.to_string());
    store
        .write(move |conn| {
            conn.execute(&Sql::with(
                "DELETE FROM terminal_links WHERE terminal_id = ? AND node_id = ?",
                vec![terminal.into(), node.into()],
            ))?;
            Ok(())
        })
        .await
}

/// How long a parked message waits for its reader.
const PARKED_FOR_S: i64 = 3600;

/// Keeps a message too long for a notification; returns its id. Messages
/// nobody read within the hour are removed on the way.
pub async fn park(store: &Store, payload: String, now: i64) -> ApiResult<String> {
    let id = crate::ids::new_id();
    let row = id.clone();
    store
        .write(move |conn| {
            conn.execute(&Sql::with(
                "DELETE FROM router_messages WHERE created_ts < ?",
                vec![(now - PARKED_FOR_S).into()],
            ))?;
            conn.execute(&Sql::with(
                "INSERT INTO router_messages (id, payload, created_ts) VALUES (?, ?, ?)",
                vec![row.into(), payload.into(), now.into()],
            ))?;
            Ok(())
        })
        .await?;
    Ok(id)
}

/// Takes a parked message (once).
pub async fn unpark(store: &Store, id: &str) -> ApiResult<Option<String>> {
    let id = id.to_string();
    store
        .write(move |conn| {
            let payload = conn
                .query_one(&Sql::with(
                    "SELECT payload FROM router_messages WHERE id = ?",
                    vec![id.clone().into()],
                ))?
                .and_then(|r| r[0].as_str().map(str::to_string));
            conn.execute(&Sql::with(
                "DELETE FROM router_messages WHERE id = ?",
                vec![id.into()],
            ))?;
            Ok(payload)
        })
        .await
}
