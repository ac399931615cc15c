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
//! then runs what came due. A move runs what falls due on the way in
//! order, stepping the clock to each due moment (recurring runs and their
//! retries, notices and reminders, postback and mail retries) so every
//! run and attempt happens at its own time: a postback retried every
//! minute is tried ten times in ten minutes of clock. Clocks only move
//! forward.

use crate::billing::scheduler::Schedules;
use crate::clock::{Clock, MAX_ADVANCE_S};
use crate::db::Store;
use crate::db::{Conn, Sql};
use crate::engine::query::{self, TenantScope};
use crate::error::{ApiError, ApiResult};
use crate::mail::smtp::Mailer;
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
    // Location writes take the tree lock first (one lock order with moves).
    crate::resources::locations::lock_tree(conn)?;
    let before = offset(scope, conn, location_id)?;
    conn.execute(&Sql::with(
        "UPDATE locations SET clock_offset_s = clock_offset_s + ? WHERE id = ?",
        vec![seconds.into(), location_id.into()],
    ))?;
    crate::postbacks::schedule::shift_due(conn, location_id, seconds)?;
    // Mail retries come due as if the time had passed, too.
    conn.execute(&Sql::with(
        "UPDATE mail_outbox SET due_ms = due_ms - ? WHERE location_id = ? AND status = 'pending'",
        vec![seconds.saturating_mul(1000).into(), location_id.into()],
    ))?;
    let offset_s = before + seconds;
    Ok(TestClock {
        location_id: location_id.to_string(),
        offset_s,
        now: wall_now.saturating_add(offset_s),
    })
}

/// The background work a clock move runs.
pub struct Workers<'a> {
    pub deliveries: &'a Deliveries,
    pub schedules: &'a Schedules,
    pub mailer: &'a Mailer,
}

/// What a clock move ran, counted from the location's records (before
/// and after the move), so work a background worker took on the way,
/// on this node or another, is counted too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    /// Postback delivery attempts made on the location's events.
    pub postback_attempts: i64,
    /// Recurring runs recorded (approved, declined, refused, or
    /// interrupted and made again).
    pub recurring_runs: i64,
    /// Recurring notices and quick-invoice reminders written to the mail
    /// outbox.
    pub notices: i64,
    /// Mail delivery attempts (0 without SMTP).
    pub mail_attempts: i64,
}

impl Ran {
    pub fn to_json(&self) -> Json {
        json!({
            "postback_attempts": self.postback_attempts,
            "recurring_runs": self.recurring_runs,
            "notices": self.notices,
            "mail_attempts": self.mail_attempts,
        })
    }

    /// What has been done for `location_id` so far: the totals a move's
    /// report is the difference of.
    fn so_far(conn: &mut dyn Conn, location_id: &str) -> ApiResult<Ran> {
        let total = |conn: &mut dyn Conn, sql: &str| -> ApiResult<i64> {
            Ok(conn
                .query_one(&Sql::with(sql, vec![location_id.into()]))?
                .and_then(|r| r[0].as_int())
                .unwrap_or(0))
        };
        Ok(Ran {
            postback_attempts: crate::postbacks::schedule::attempts_made(conn, location_id)?,
            recurring_runs: total(
                conn,
                "SELECT CAST(COALESCE(SUM(run_seq), 0) AS BIGINT) FROM recurrings WHERE location_id = ?",
            )?,
            notices: total(
                conn,
                "SELECT COUNT(*) FROM mail_outbox WHERE location_id = ? \
                 AND kind IN ('recurring_notice', 'quick_invoice_reminder')",
            )?,
            mail_attempts: total(
                conn,
                "SELECT CAST(COALESCE(SUM(attempts), 0) AS BIGINT) FROM mail_outbox WHERE location_id = ?",
            )?,
        })
    }

    /// What was done between `before` and `self`.
    fn since(self, before: Ran) -> Ran {
        Ran {
            postback_attempts: (self.postback_attempts - before.postback_attempts).max(0),
            recurring_runs: (self.recurring_runs - before.recurring_runs).max(0),
            notices: (self.notices - before.notices).max(0),
            mail_attempts: (self.mail_attempts - before.mail_attempts).max(0),
        }
    }
}

/// Moves the clock (see [`advance`]) in steps: to each moment something
/// of the location falls due on the way (a recurring run, a retry, a
/// notice, a postback or mail retry), running it there, in order, so
/// that a year of monthly billing is a year of runs, each at its own
/// date; then to the target. Postbacks and mail of the location that
/// come due are delivered at every step (only the location's: another
/// tenant's receivers never hold up this move).
pub async fn advance_and_run(
    store: &Store,
    workers: Workers<'_>,
    scope: TenantScope,
    location_id: String,
    seconds: i64,
    clock: &Clock,
) -> ApiResult<(TestClock, Ran)> {
    if !(0..=MAX_ADVANCE_S).contains(&seconds) {
        return Err(ApiError::field(
            "seconds",
            format!("Seconds must be between 0 and {MAX_ADVANCE_S} (clocks only move forward)."),
        ));
    }
    let wall = clock.now_ts();
    let (before, start) = {
        let (scope, location) = (scope.clone(), location_id.clone());
        store
            .read(move |conn| {
                let start = offset(&scope, conn, &location)?;
                Ok((Ran::so_far(conn, &location)?, start))
            })
            .await?
    };
    let target = start + seconds;
    let mut current = start;
    let mut moved = show_at(&location_id, current, wall);
    // Bounded: ten years of daily runs and their notices, with room for
    // retries; a move that still has steps left then jumps to its target.
    for _ in 0..MAX_STEPS {
        workers.schedules.run_once(Some(&location_id)).await?;
        workers.deliveries.run_once(Some(&location_id)).await?;
        workers.mailer.run_once(Some(&location_id)).await?;
        // The next moment something falls due, as an offset from `wall`.
        let due = [
            workers.schedules.next_due(&location_id).await?,
            workers.deliveries.next_due(&location_id).await?,
            workers.mailer.next_due(&location_id).await?,
        ];
        let next = due
            .into_iter()
            .flatten()
            .map(|due| due - wall)
            .filter(|due| *due > current)
            .min();
        let step_to = match next {
            Some(due) if due < target => due,
            _ if current < target => target,
            _ => break,
        };
        let (scope, location, step) = (scope.clone(), location_id.clone(), step_to - current);
        moved = store
            .write(move |conn| advance(&scope, conn, &location, step, wall))
            .await?;
        current = step_to;
    }
    if current < target {
        let (scope, location, step) = (scope.clone(), location_id.clone(), target - current);
        moved = store
            .write(move |conn| advance(&scope, conn, &location, step, wall))
            .await?;
        current = target;
        workers.schedules.run_once(Some(&location_id)).await?;
        workers.deliveries.run_once(Some(&location_id)).await?;
        workers.mailer.run_once(Some(&location_id)).await?;
    }
    // Sessions the move made expire are swept, as the background sweep
    // would in a minute (so a test sees the table without waiting).
    let sweep_clock = clock.clone();
    store
        .write(move |conn| crate::sessions::sweep(conn, &sweep_clock))
        .await?;
    let location = location_id.clone();
    let ran = store
        .read(move |conn| Ran::so_far(conn, &location))
        .await?
        .since(before);
    moved.offset_s = current;
    moved.now = wall.saturating_add(current);
    Ok((moved, ran))
}

/// The most steps one move takes: ten years of daily runs and their
/// notices, and as many retries again.
const MAX_STEPS: usize = 4 * 3_700 + 10;

fn show_at(location_id: &str, offset_s: i64, wall: i64) -> TestClock {
    TestClock {
        location_id: location_id.to_string(),
        offset_s,
        now: wall.saturating_add(offset_s),
    }
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
