//! Data keys: which keys have sealed values in the database, and
//! `ferrogate keys rotate`, which re-encrypts every sealed value under the
//! current key.

use crate::crypto::Keyring;
use crate::db::{Conn, Sql, Store, Value};
use crate::error::{ApiError, ApiResult};
use crate::resources::ALL;
use std::collections::BTreeSet;

/// Checks that this process's data keys can open what the database holds,
/// then records the current key as in use (see [`register`]). Run by every
/// command that reads or writes sealed values, before anything else.
pub async fn check(store: &Store, keyring: std::sync::Arc<Keyring>) -> anyhow::Result<()> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        store
            .write_blocking(move |conn| register(conn, &keyring, crate::clock::Clock::system().now_ts()))
            .map_err(|e| match e {
                // The message is the operator's instruction: no prefix.
                ApiError::Internal(internal) => anyhow::anyhow!("{internal}"),
                other => anyhow::anyhow!("{other}"),
            })
    })
    .await?
}

/// Rows handled per transaction.
const BATCH: i64 = 500;

/// Refuses a keyring that cannot open values already sealed in the
/// database (a node started with another key would read secrets back as
/// nothing); otherwise records the current key as in use.
pub fn register(conn: &mut dyn Conn, keyring: &Keyring, now: i64) -> ApiResult<()> {
    let retired = conn.query_one(&Sql::with(
        "SELECT 1 FROM data_keys WHERE key_id = ? AND retired_ts IS NOT NULL",
        vec![keyring.current_key_id().into()],
    ))?;
    if retired.is_some() {
        return Err(ApiError::internal(format!(
            "data key {} was retired by a rotation: start with the current FERROGATE_DATA_KEY",
            keyring.current_key_id()
        )));
    }
    seal_values_kept_in_clear(conn, keyring)?;
    let mut in_use: BTreeSet<String> = conn
        .query(&Sql::new("SELECT key_id FROM data_keys WHERE retired_ts IS NULL"))?
        .iter()
        .filter_map(|r| r[0].as_str().map(str::to_string))
        .collect();
    // The values themselves: a node that kept sealing with a key after a
    // rotation retired it leaves values only this scan finds.
    for (table, column) in sealed_columns() {
        let mut sql = Sql::new("SELECT DISTINCT substr(");
        sql.push(column)
            .push(", 1, 8) FROM ")
            .push(table)
            .push(" WHERE ")
            .push(column)
            .push(" IS NOT NULL");
        for row in conn.query(&sql)? {
            if let Some(kid) = row[0].as_str() {
                in_use.insert(kid.to_string());
            }
        }
    }
    let unknown: Vec<String> = in_use.into_iter().filter(|kid| !keyring.knows(kid)).collect();
    if !unknown.is_empty() {
        return Err(ApiError::internal(format!(
            "this database holds values sealed with data key(s) {} which this process does not have: \
             set FERROGATE_DATA_KEY to the database's key (and FERROGATE_DATA_KEY_PREVIOUS during a rotation)",
            unknown.join(", ")
        )));
    }
    conn.execute(&Sql::with(
        "INSERT INTO data_keys (key_id, created_ts) VALUES (?, ?) ON CONFLICT (key_id) DO NOTHING",
        vec![keyring.current_key_id().into(), now.into()],
    ))?;
    Ok(())
}

/// Columns sealed since a release that kept them in clear, with the
/// longest value they take: anything that short is a clear value (a
/// sealed one is a key id, a colon and at least 40 characters of base64).
const SEALED_LATER: &[(&str, &str, i64)] = &[("locations", "dda", 32)];

/// Seals the values a column sealed later still holds in clear (written
/// before it was sealed), so that nothing reads them back as damage and
/// no bank number stays in clear at rest.
fn seal_values_kept_in_clear(conn: &mut dyn Conn, keyring: &Keyring) -> ApiResult<()> {
    for (table, column, longest) in SEALED_LATER {
        let mut sql = Sql::new("SELECT id, ");
        sql.push(column)
            .push(" FROM ")
            .push(table)
            .push(" WHERE ")
            .push(column)
            .push(" IS NOT NULL AND length(")
            .push(column)
            .push(") <= ")
            .bind(*longest);
        for row in conn.query(&sql)? {
            let (Some(id), Some(clear)) = (row[0].as_str(), row[1].as_str()) else {
                continue;
            };
            let mut update = Sql::new("UPDATE ");
            update
                .push(table)
                .push(" SET ")
                .push(column)
                .push(" = ")
                .bind(keyring.encrypt(clear))
                .push(" WHERE id = ")
                .bind(id.to_string());
            conn.execute(&update)?;
        }
    }
    Ok(())
}

/// Every (table, column) holding sealed values, from the declarations.
pub fn sealed_columns() -> Vec<(&'static str, &'static str)> {
    let mut out = BTreeSet::new();
    for res in ALL {
        for f in res.fields.iter().filter(|f| f.encrypted && f.stored) {
            out.insert((res.table, f.column));
        }
    }
    out.extend(crate::boarding::SEALED_COLUMNS.iter().copied());
    out.into_iter().collect()
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct RotationReport {
    pub key_id: String,
    pub rewritten: u64,
    pub columns: Vec<String>,
    pub retired_key_ids: Vec<String>,
    /// Values still under another key after the last pass (a node still
    /// writing with an old key): the old keys are then not retired.
    pub remaining: u64,
}

/// How many full passes a rotation makes before it gives up retiring.
const PASSES: usize = 5;

fn remaining(store: &Store, prefix: &str) -> ApiResult<u64> {
    let mut total = 0;
    for (table, column) in sealed_columns() {
        let prefix = prefix.to_string();
        total += store.write_blocking(move |conn| {
            let mut count = Sql::new("SELECT COUNT(*) FROM ");
            count
                .push(table)
                .push(" WHERE ")
                .push(column)
                .push(" IS NOT NULL AND ")
                .push(column)
                .push(" NOT LIKE ")
                .bind(format!("{prefix}%"));
            Ok(conn.query_int(&count)? as u64)
        })?;
    }
    Ok(total)
}

/// Re-encrypts every value not yet under the current key, then retires
/// the other keys. Runs beside live servers configured with the new key
/// and `FERROGATE_DATA_KEY_PREVIOUS`: each batch is its own short
/// transaction, and a row is rewritten only if it still holds the
/// ciphertext that was read (compare-and-set), so concurrent writes win.
pub fn rotate(store: &Store, keyring: std::sync::Arc<Keyring>, now: i64) -> ApiResult<RotationReport> {
    let mut report = RotationReport {
        key_id: keyring.current_key_id().to_string(),
        ..Default::default()
    };
    let prefix = format!("{}:", keyring.current_key_id());
    report.columns = sealed_columns().iter().map(|(t, c)| format!("{t}.{c}")).collect();
    // Writers still on an old key can add values behind a pass: passes
    // repeat until one finds nothing left.
    for _ in 0..PASSES {
        report.rewritten += rotate_pass(store, &keyring, &prefix)?;
        report.remaining = remaining(store, &prefix)?;
        if report.remaining == 0 {
            break;
        }
    }
    if report.remaining > 0 {
        return Ok(report);
    }
    let current = keyring.current_key_id().to_string();
    report.retired_key_ids = store.write_blocking(move |conn| {
        let retired: Vec<String> = conn
            .query(&Sql::with(
                "SELECT key_id FROM data_keys WHERE retired_ts IS NULL AND key_id <> ?",
                vec![current.clone().into()],
            ))?
            .into_iter()
            .filter_map(|r| r[0].as_str().map(str::to_string))
            .collect();
        conn.execute(&Sql::with(
            "UPDATE data_keys SET retired_ts = ? WHERE retired_ts IS NULL AND key_id <> ?",
            vec![now.into(), current.into()],
        ))?;
        Ok(retired)
    })?;
    Ok(report)
}

/// One pass over every sealed column; returns how many values it rewrote.
fn rotate_pass(store: &Store, keyring: &std::sync::Arc<Keyring>, prefix: &str) -> ApiResult<u64> {
    let mut total = 0;
    for (table, column) in sealed_columns() {
        // Rewritten rows leave the `NOT LIKE` selection, so each pass makes
        // progress and the loop ends.
        loop {
            let keyring = keyring.clone();
            let prefix = prefix.to_string();
            let (seen, rewritten) = store.write_blocking(move |conn| {
                let mut select = Sql::new("SELECT id, ");
                select
                    .push(column)
                    .push(" FROM ")
                    .push(table)
                    .push(" WHERE ")
                    .push(column)
                    .push(" IS NOT NULL AND ")
                    .push(column)
                    .push(" NOT LIKE ")
                    .bind(format!("{prefix}%"))
                    .push(" ORDER BY id LIMIT ")
                    .bind(BATCH);
                let rows = conn.query(&select)?;
                let mut rewritten = 0u64;
                for row in &rows {
                    let (Some(id), Some(sealed)) = (row[0].as_str(), row[1].as_str()) else {
                        continue;
                    };
                    let plain = keyring.decrypt(sealed).map_err(|e| {
                        ApiError::internal(format!(
                            "{table}.{column} of {id}: {e} (is its key in FERROGATE_DATA_KEY_PREVIOUS?)"
                        ))
                    })?;
                    let mut update = Sql::new("UPDATE ");
                    update
                        .push(table)
                        .push(" SET ")
                        .push(column)
                        .push(" = ")
                        .bind(keyring.encrypt(&plain))
                        .push(" WHERE id = ")
                        .bind(id.to_string())
                        .push(" AND ")
                        .push(column)
                        .push(" = ")
                        .bind(Value::Text(sealed.to_string()));
                    rewritten += conn.execute(&update)?;
                }
                Ok((rows.len() as i64, rewritten))
            })?;
            total += rewritten;
            // A full batch that nothing could rewrite is being written
            // under us: leave it to the next pass.
            if seen < BATCH || rewritten == 0 {
                break;
            }
        }
    }
    Ok(total)
}
