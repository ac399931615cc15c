//! Changes to when deliveries are due, made outside the worker: a failed
//! delivery sent again, and a location's test clock moving ahead.

use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult};
use crate::resources::POSTBACK_DELIVERY;

/// A failed delivery is due again now, from its first attempt; its
/// record's later events wait for it again.
pub fn redeliver(cx: &Cx, conn: &mut dyn Conn, id: &str, now_ms: i64) -> ApiResult<Record> {
    let delivery = query::find(conn, &POSTBACK_DELIVERY, &cx.scope, id)?
        .ok_or_else(|| ApiError::not_found("postbackdelivery"))?;
    let status = delivery.text("status").unwrap_or_default().to_string();
    if status != "failed" {
        return Err(ApiError::field(
            "status",
            format!("Only a failed delivery can be redelivered; this one is {status}."),
        ));
    }
    // `next_attempt_ts` on the location's clock, as the worker writes it.
    conn.execute(&Sql::with(
        "UPDATE postback_deliveries SET status = 'pending', attempts = 0, due_ms = ?, \
         next_attempt_ts = ? + COALESCE((SELECT clock_offset_s FROM locations WHERE id = postback_deliveries.location_id), 0), \
         lease_owner = NULL, lease_until_ms = NULL, modified_ts = ? WHERE id = ? AND status = 'failed'",
        vec![
            now_ms.into(),
            now_ms.div_euclid(1000).into(),
            cx.now.into(),
            delivery.id().into(),
        ],
    ))?;
    query::find(conn, &POSTBACK_DELIVERY, &cx.scope, delivery.id())?
        .ok_or_else(|| ApiError::not_found("postbackdelivery"))
}

/// A location's test clock moved `seconds` ahead: its pending deliveries
/// come due that much sooner in wall time (`due_ms`), as if the time had
/// passed. `next_attempt_ts` is on the location's clock, which moved with
/// them: it stays. Returns how many deliveries moved.
pub fn shift_due(conn: &mut dyn Conn, location_id: &str, seconds: i64) -> ApiResult<u64> {
    Ok(conn.execute(&Sql::with(
        "UPDATE postback_deliveries SET due_ms = due_ms - ? WHERE location_id = ? AND status = 'pending'",
        vec![seconds.saturating_mul(1000).into(), location_id.into()],
    ))?)
}

/// Delivery attempts recorded so far for the events of `location_id`:
/// compared before and after a test clock's move, what the move caused.
pub fn attempts_made(conn: &mut dyn Conn, location_id: &str) -> ApiResult<i64> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT CAST(COALESCE(SUM(attempts), 0) AS BIGINT) FROM postback_deliveries WHERE location_id = ?",
            vec![location_id.into()],
        ))?
        .and_then(|r| r[0].as_int())
        .unwrap_or(0))
}
