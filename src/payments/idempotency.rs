//! `Idempotency-Key`: the first response to a key is kept for 24 hours
//! and replayed to every repeat; the same key with another request is
//! refused. Keys belong to the user who sent them.
//!
//! A key is claimed (a row without a response) before any work starts, so
//! concurrent repeats see it: they get 409 while the first runs. The
//! transaction's own completion stores the response in the same database
//! transaction as the outcome, so a crash cannot leave an approved charge
//! without its replay. A key whose transaction a restart reconciled is
//! released: the charge was reversed and a retry may run again.

use crate::db::{Conn, Sql, Store};
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

/// How long a response is replayed.
pub const TTL_SECS: i64 = 24 * 3600;
/// A claim with no transaction behind it after this long was abandoned
/// (the process died before starting the work).
const ABANDONED_SECS: i64 = 60;

/// Checks an `Idempotency-Key` as sent: 1-255 visible ASCII characters.
pub fn check_key(raw: &[u8]) -> ApiResult<String> {
    let text = std::str::from_utf8(raw).unwrap_or_default();
    if text.is_empty() || text.len() > 255 || !text.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(ApiError::BadRequest(
            "Idempotency-Key must be 1 to 255 visible ASCII characters.".into(),
        ));
    }
    Ok(text.to_string())
}

/// The digest that tells a repeat from another request under one key.
pub fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b" ");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(body);
    hex::encode(h.finalize())
}

pub enum Claim {
    /// The key is ours: do the work.
    Fresh,
    /// Answer with the stored response.
    Replay(u16, Json),
}

fn in_progress() -> ApiError {
    let mut e = crate::error::FieldErrors::new();
    e.add(
        "idempotency_key",
        "A request with this Idempotency-Key is still being processed; retry shortly.",
    );
    ApiError::Conflict(e)
}

/// Claims `key` for this request, or finds its earlier response.
pub async fn claim(store: &Store, cx: &Cx, key: &str, print: &str) -> ApiResult<Claim> {
    let (user, key, print, now) = (cx.user_id.clone(), key.to_string(), print.to_string(), cx.now);
    store
        .write(move |conn| {
            // On PostgreSQL concurrent repeats run this job in parallel: all
            // may find no row, and only one insert wins. The others' insert
            // then does nothing (after the winner commits) and the second
            // look finds the winner's claim.
            for _ in 0..2 {
                let row = conn.query_one(&Sql::with(
                    "SELECT request_hash, status, response, created_ts, transaction_id FROM idempotency_keys \
                     WHERE user_id = ? AND idem_key = ?",
                    vec![user.clone().into(), key.clone().into()],
                ))?;
                if let Some(row) = row {
                    let created = row[3].as_int().unwrap_or(0);
                    let abandoned = row[1].is_null() && row[4].is_null() && created < now - ABANDONED_SECS;
                    if created >= now - TTL_SECS && !abandoned {
                        if row[0].as_str() != Some(print.as_str()) {
                            return Err(ApiError::field(
                                "idempotency_key",
                                "This Idempotency-Key was used with a different request; use a new key.",
                            ));
                        }
                        return match (row[1].as_int(), row[2].as_str()) {
                            (Some(status), Some(body)) => Ok(Claim::Replay(
                                status as u16,
                                serde_json::from_str(body).unwrap_or(Json::Null),
                            )),
                            _ => Err(in_progress()),
                        };
                    }
                    release_in(conn, &user, &key)?;
                }
                let inserted = conn.execute(&Sql::with(
                    "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, created_ts) VALUES (?, ?, ?, ?) \
                     ON CONFLICT DO NOTHING",
                    vec![user.clone().into(), key.clone().into(), print.clone().into(), now.into()],
                ))?;
                if inserted == 1 {
                    return Ok(Claim::Fresh);
                }
            }
            Err(in_progress())
        })
        .await
}

/// The answer already kept under `key` for this request, without claiming
/// the key: for work that must not start twice (a terminal prompting the
/// cardholder again) before the key is claimed for the payment itself.
/// The same key with another request is refused, as [`claim`] does.
pub async fn peek(store: &Store, cx: &Cx, key: &str, print: &str) -> ApiResult<Option<(u16, Json)>> {
    let (user, key, print, now) = (cx.user_id.clone(), key.to_string(), print.to_string(), cx.now);
    store
        .read(move |conn| {
            let Some(row) = conn.query_one(&Sql::with(
                "SELECT request_hash, status, response, created_ts FROM idempotency_keys \
                 WHERE user_id = ? AND idem_key = ?",
                vec![user.into(), key.into()],
            ))?
            else {
                return Ok(None);
            };
            if row[3].as_int().unwrap_or(0) < now - TTL_SECS {
                return Ok(None);
            }
            if row[0].as_str() != Some(print.as_str()) {
                return Err(ApiError::field(
                    "idempotency_key",
                    "This Idempotency-Key was used with a different request; use a new key.",
                ));
            }
            Ok(match (row[1].as_int(), row[2].as_str()) {
                (Some(status), Some(body)) => {
                    Some((status as u16, serde_json::from_str(body).unwrap_or(Json::Null)))
                }
                _ => None,
            })
        })
        .await
}

/// Ties the claim to the transaction it created (same job as the insert,
/// which it may go ahead of: nothing reads its answer).
pub fn link(conn: &mut dyn Conn, user: &str, key: &str, transaction_id: &str) -> ApiResult<()> {
    conn.execute_unread(&Sql::with(
        "UPDATE idempotency_keys SET transaction_id = ? WHERE user_id = ? AND idem_key = ?",
        vec![transaction_id.into(), user.into(), key.into()],
    ))?;
    Ok(())
}

/// Stores the response of a claimed key.
pub fn finish(conn: &mut dyn Conn, user: &str, key: &str, status: u16, body: &Json) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "UPDATE idempotency_keys SET status = ?, response = ? WHERE user_id = ? AND idem_key = ?",
        vec![
            (status as i64).into(),
            body.to_string().into(),
            user.into(),
            key.into(),
        ],
    ))?;
    Ok(())
}

fn release_in(conn: &mut dyn Conn, user: &str, key: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM idempotency_keys WHERE user_id = ? AND idem_key = ?",
        vec![user.into(), key.into()],
    ))?;
    Ok(())
}

/// Settles a claim whose request failed: a 4xx answer is kept when
/// `keep_refusal` (a repeat gets the same refusal); anything else frees
/// the key for a retry. Only a claim still bare is touched: once a
/// transaction is linked the outcome may already be at the processor (or
/// committed, with its answer lost in transit), so the key stays until
/// the answer is stored or reconciliation reverses the charge and frees it.
pub async fn fail(store: &Store, cx: &Cx, key: &str, error: &ApiError, keep_refusal: bool) {
    let (user, key) = (cx.user_id.clone(), key.to_string());
    let status = error.status().as_u16();
    let body = error.body();
    let result = store
        .write(move |conn| {
            if keep_refusal && (400..500).contains(&status) {
                conn.execute(&Sql::with(
                    "UPDATE idempotency_keys SET status = ?, response = ? \
                     WHERE user_id = ? AND idem_key = ? AND status IS NULL AND transaction_id IS NULL",
                    vec![
                        (status as i64).into(),
                        body.to_string().into(),
                        user.into(),
                        key.into(),
                    ],
                ))?;
            } else {
                conn.execute(&Sql::with(
                    "DELETE FROM idempotency_keys \
                     WHERE user_id = ? AND idem_key = ? AND status IS NULL AND transaction_id IS NULL",
                    vec![user.into(), key.into()],
                ))?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "an idempotency key could not be settled");
    }
}

/// Frees the keys whose transaction was reconciled after a crash.
pub fn release_for_transaction(conn: &mut dyn Conn, transaction_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM idempotency_keys WHERE transaction_id = ? AND status IS NULL",
        vec![transaction_id.into()],
    ))?;
    Ok(())
}

/// Deletes responses older than the replay window.
pub fn expire(conn: &mut dyn Conn, now: i64) -> ApiResult<u64> {
    Ok(conn.execute(&Sql::with(
        "DELETE FROM idempotency_keys WHERE created_ts < ?",
        vec![(now - TTL_SECS).into()],
    ))?)
}
