//! Sandbox test clocks: a location's time moved forward on demand, like
//! Stripe's test clocks, so integrators and our tests see a day, a month
//! or a year pass without waiting. Only served with a test processor.
//!
//! A clock is an offset in seconds on the location (`clock_offset_s`).
//! The location's users get `now` = wall time + offset in every request
//! (authentication reads it with the user), so the records they write,
//! the `_ts` keyword filters, batches and velocity windows all follow it.
//! Background work keeps wall-clock due times; moving a clock moves the
//! location's pending due times back by the same amount, and the caller
//! then runs what came due (postback retries now; schedules and reminders
//! as they arrive). Clocks only move forward.

use crate::clock::{Clock, MAX_ADVANCE_S};
use crate::db::Store;
use crate::db::{Conn, Sql};
use crate::engine::query::{self, TenantScope};
use crate::error::{ApiError, ApiResult};
use crate::postbacks::worker::Deliveries;
use crate::resources::LOCATION;
use serde_json::{json, Value as Json};

/// A location's clock as answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestClock {
    pub location_id: String,
    pub offset_s: i64,
    /// The location's "now" (epoch seconds).
    pub now: i64,
}

impl TestClock {
    pub fn to_json(&self) -> Json {
        json!({
            "location_id": self.location_id,
            "offset_seconds": self.offset_s,
            "now": self.now,
            "now_text": crate::clock::timestamp_text(self.now),
        })
    }
}

/// Everything: the operator's scope, for the command line.
pub fn operator_scope() -> TenantScope {
    let root = crate::ids::ROOT_LOCATION_ID;
    TenantScope {
        location_id: root.to_string(),
        path: format!("/{root}/"),
        tz: chrono_tz::UTC,
        leaf: false,
    }
}

/// The clock of `location_id` (in `scope`).
pub fn show(
    scope: &TenantScope,
    conn: &mut dyn Conn,
    location_id: &str,
    wall_now: i64,
) -> ApiResult<TestClock> {
    let offset_s = offset(scope, conn, location_id)?;
    Ok(TestClock {
        location_id: location_id.to_string(),
        offset_s,
        now: wall_now.saturating_add(offset_s),
    })
}

/// Moves the clock of `location_id` `seconds` forward (0 to ten years),
/// with the location's pending work.
pub fn advance(
    scope: &TenantScope,
    conn: &mut dyn Conn,
    location_id: &str,
    seconds: i64,
    wall_now: i64,
) -> ApiResult<TestClock> {
    if !(0..=MAX_ADVANCE_S).contains(&seconds) {
        return Err(ApiError::field(
            "seconds",
            format!("Seconds must be between 0 and {MAX_ADVANCE_S} (clocks only move forward)."),
        ));
    }
    let before = offset(scope, conn, location_id)?;
    conn.execute(&Sql::with(
        "UPDATE locations SET clock_offset_s = clock_offset_s + ? WHERE id = ?",
        vec![seconds.into(), location_id.into()],
    ))?;
    crate::postbacks::schedule::shift_due(conn, location_id, seconds)?;
    let offset_s = before + seconds;
    Ok(TestClock {
        location_id: location_id.to_string(),
        offset_s,
        now: wall_now.saturating_add(offset_s),
    })
}

/// Moves the clock (see [`advance`]), then delivers the postbacks that
/// came due and waits for them. Returns the clock and the number of
/// delivery attempts made on the location's events meanwhile (by this
/// call or by a background worker that took a row first).
pub async fn advance_and_run(
    store: &Store,
    deliveries: &Deliveries,
    scope: TenantScope,
    location_id: String,
    seconds: i64,
    clock: &Clock,
) -> ApiResult<(TestClock, i64)> {
    let wall = clock.now_ts();
    let (moved, before) = store
        .write(move |conn| {
            let before = crate::postbacks::schedule::attempts_made(conn, &location_id)?;
            let moved = advance(&scope, conn, &location_id, seconds, wall)?;
            Ok((moved, before))
        })
        .await?;
    deliveries.run_once(Some(&moved.location_id)).await?;
    let location = moved.location_id.clone();
    let after = store
        .read(move |conn| crate::postbacks::schedule::attempts_made(conn, &location))
        .await?;
    Ok((moved, (after - before).max(0)))
}

fn offset(scope: &TenantScope, conn: &mut dyn Conn, location_id: &str) -> ApiResult<i64> {
    if query::find(conn, &LOCATION, scope, location_id)?.is_none() {
        return Err(ApiError::not_found("location"));
    }
    Ok(conn
        .query_one(&Sql::with(
            "SELECT clock_offset_s FROM locations WHERE id = ?",
            vec![location_id.into()],
        ))?
        .and_then(|r| r[0].as_int())
        .unwrap_or(0))
}
