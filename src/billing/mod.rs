//! Recurring billing: the schedule dates ([`calendar`]), the state
//! machine ([`transitions`]) and the scheduler that charges what is due
//! through the payments core ([`scheduler`]). The `recurring` resource
//! itself is declared in `resources::recurrings`.
//!
//! Besides the declared fields, a schedule row carries its due times in
//! real time (`due_ts`, `notify_ts`: the local midnights of the next run
//! and of its notice) and its lease; they are kept here, outside the
//! declaration, so they never show in responses or change logs.

pub mod calendar;
pub mod scheduler;
pub mod transitions;

use crate::db::{Conn, Dialect, Sql, Value};
use crate::engine::record::Record;
use crate::error::{ApiError, ApiResult, FieldErrors};
use calendar::{local_midnight, parse_date};
use chrono::Days;
use chrono_tz::Tz;

/// A location's time zone and test clock offset.
pub fn location_zone(conn: &mut dyn Conn, location_id: &str) -> ApiResult<(Tz, i64)> {
    let row = conn.query_one(&Sql::with(
        "SELECT tz, clock_offset_s FROM locations WHERE id = ?",
        vec![location_id.into()],
    ))?;
    Ok(match row {
        Some(r) => (
            r[0].as_str()
                .and_then(|t| t.parse().ok())
                .unwrap_or(chrono_tz::UTC),
            r[1].as_int().unwrap_or(0),
        ),
        None => (chrono_tz::UTC, 0),
    })
}

/// The location's `recurring_notification_days_default` (0: none).
pub fn notification_days_default(conn: &mut dyn Conn, location_id: &str) -> ApiResult<i64> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT recurring_notification_days_default FROM locations WHERE id = ?",
            vec![location_id.into()],
        ))?
        .and_then(|r| r[0].as_int())
        .unwrap_or(0))
}

/// When the next run and the next notice of `r` fall due (epoch seconds,
/// real time), given its location's zone.
pub fn due_times(r: &Record, tz: Tz) -> (Option<i64>, Option<i64>) {
    if r.text("status") != Some(transitions::ACTIVE) {
        return (None, None);
    }
    let Some(next) = r.text("next_run_date").and_then(parse_date) else {
        return (None, None);
    };
    let due = local_midnight(next, tz);
    let days = r.int("notification_days").unwrap_or(0);
    let notified = r.text("notified_date").and_then(parse_date) == Some(next);
    let notify = (days > 0 && !notified && r.int("retry_count").unwrap_or(0) == 0)
        .then(|| next.checked_sub_days(Days::new(days as u64)))
        .flatten()
        .map(|d| local_midnight(d, tz));
    (Some(due), notify)
}

/// Refuses a change of schedule `recurring_id` (an update, an action, a
/// delete) while a run holds it: the scheduler charges from the copy it
/// leased, and records its outcome onto the row, so an amount, a vault,
/// a hold or a deletion made meanwhile would be charged past or
/// overwritten. A run holds its lease from its claim to its record
/// (seconds); the answer is a 409 to retry. On PostgreSQL the row is
/// locked for the rest of the job, so a claim cannot slip in between.
pub fn refuse_while_running(conn: &mut dyn Conn, recurring_id: &str) -> ApiResult<()> {
    let lock = match conn.dialect() {
        Dialect::Postgres => " FOR UPDATE",
        Dialect::Sqlite => "",
    };
    let held = conn
        .query_one(&Sql::with(
            &format!("SELECT lease_owner FROM recurrings WHERE id = ?{lock}"),
            vec![recurring_id.into()],
        ))?
        .is_some_and(|r| !r[0].is_null());
    if held {
        let mut errors = FieldErrors::new();
        errors.add(
            "id",
            "A payment of this recurring is running; try again in a moment.",
        );
        return Err(ApiError::Conflict(errors));
    }
    Ok(())
}

/// Keeps the row's due times and the vaults' `has_recurring` true after
/// `new` was written (`old`: the record before, for a change of vault).
pub fn after_change(conn: &mut dyn Conn, new: &Record, old: Option<&Record>) -> ApiResult<()> {
    let (tz, _) = location_zone(conn, new.text("location_id").unwrap_or_default())?;
    let (due, notify) = due_times(new, tz);
    conn.execute(&Sql::with(
        "UPDATE recurrings SET due_ts = ?, notify_ts = ? WHERE id = ?",
        vec![Value::from(due), Value::from(notify), new.id().into()],
    ))?;
    // The vault's flag changes only with the status or the vault (a run
    // that leaves the schedule active writes nothing to the vault's row,
    // which every schedule of a vault would otherwise contend for).
    let vault = new.text("account_vault_id").unwrap_or_default();
    let (status_changed, old_vault) = match old {
        Some(o) => (o.get("status") != new.get("status"), o.text("account_vault_id")),
        None => (true, None),
    };
    if status_changed || old_vault != Some(vault) {
        refresh_vault(conn, vault, None)?;
    }
    if let Some(old_vault) = old_vault.filter(|v| *v != vault) {
        refresh_vault(conn, old_vault, None)?;
    }
    Ok(())
}

/// Sets the vault's `has_recurring`: whether an active recurring charges
/// it (`leaving`: a recurring about to be deleted, not counted).
pub fn refresh_vault(conn: &mut dyn Conn, vault_id: &str, leaving: Option<&str>) -> ApiResult<()> {
    // Written only when it changes: schedules created on one vault do not
    // queue on its row lock (PostgreSQL locks only rows it updates).
    conn.execute(&Sql::with(
        "UPDATE account_vaults SET has_recurring = 1 - has_recurring WHERE id = ? AND has_recurring <> \
         CASE WHEN EXISTS (SELECT 1 FROM recurrings r WHERE r.account_vault_id = ? AND r.status = 'active' \
         AND r.id <> ?) THEN 1 ELSE 0 END",
        vec![
            vault_id.into(),
            vault_id.into(),
            leaving.unwrap_or_default().into(),
        ],
    ))?;
    Ok(())
}

/// A deleted vault ends the recurrings that charged it (only held ones
/// can remain: a vault with an active recurring cannot be deleted).
pub fn end_for_vault(cx: &crate::engine::Cx, conn: &mut dyn Conn, vault_id: &str) -> ApiResult<()> {
    end_where(
        cx,
        conn,
        "account_vault_id",
        vault_id,
        transitions::ENDED_VAULT_DELETED,
    )
}

/// `mode` on PostgreSQL; nothing on SQLite, whose writer runs one job at
/// a time.
fn row_lock(conn: &dyn Conn, mode: &'static str) -> &'static str {
    match conn.dialect() {
        Dialect::Postgres => mode,
        Dialect::Sqlite => "",
    }
}

/// A schedule about to bill `vault_id` (created on it, moved to it): the
/// vault's contact as it is now, with the vault and the contact held to
/// the end of the job, so that neither is deleted under the new schedule.
/// On PostgreSQL both rows are locked `FOR KEY SHARE`: schedules of one
/// vault do not wait for each other; a delete of either waits for this
/// job and then sees its schedule ([`end_for_contact`],
/// [`refuse_vault_delete_if_billed`]); a delete that committed first is
/// seen here. `None`: the vault is gone. `Some(None)`: it has no contact,
/// or its contact is gone.
pub fn hold_for_billing(conn: &mut dyn Conn, vault_id: &str) -> ApiResult<Option<Option<String>>> {
    let share = row_lock(conn, " FOR KEY SHARE");
    let Some(vault) = conn.query_one(&Sql::with(
        &format!("SELECT contact_id FROM account_vaults WHERE id = ?{share}"),
        vec![vault_id.into()],
    ))?
    else {
        return Ok(None);
    };
    let Some(contact_id) = vault[0].as_str().map(str::to_string) else {
        return Ok(Some(None));
    };
    let contact = conn.query_one(&Sql::with(
        &format!("SELECT 1 FROM contacts WHERE id = ?{share}"),
        vec![contact_id.clone().into()],
    ))?;
    Ok(Some(contact.map(|_| contact_id)))
}

/// A vault being deleted, once its held schedules have ended
/// ([`end_for_vault`]): refused if a schedule still bills it, one set up
/// since the vault was read. On PostgreSQL the vault is locked first
/// (`FOR UPDATE`), so a job setting up a schedule on it
/// ([`hold_for_billing`]) is waited for and its schedule seen, and one
/// that comes later waits for the delete and finds the vault gone. The
/// vault is locked after its schedules, in the order a change of a
/// schedule takes them (its row, then its vault's `has_recurring`).
pub fn refuse_vault_delete_if_billed(conn: &mut dyn Conn, vault_id: &str) -> ApiResult<()> {
    let lock = row_lock(conn, " FOR UPDATE");
    conn.query_one(&Sql::with(
        &format!("SELECT 1 FROM account_vaults WHERE id = ?{lock}"),
        vec![vault_id.into()],
    ))?;
    let billed = conn.query_one(&Sql::with(
        "SELECT status FROM recurrings WHERE account_vault_id = ? AND status <> 'ended' LIMIT 1",
        vec![vault_id.into()],
    ))?;
    match billed.as_ref().and_then(|r| r[0].as_str()) {
        None => Ok(()),
        Some(transitions::ACTIVE) => Err(ApiError::field("id", VAULT_BILLED)),
        Some(_) => Err(ApiError::field(
            "id",
            "A recurring payment was set up on the account vault meanwhile; try again.",
        )),
    }
}

/// Why a vault that an active recurring charges cannot be deleted.
pub const VAULT_BILLED: &str =
    "The account vault is used by an active recurring payment; delete the recurring or put it on hold first.";

/// A contact being deleted: refused while an active recurring bills it
/// (as its vault could not be deleted), and its held ones end with it,
/// so that nothing can resume billing a customer who is gone. On
/// PostgreSQL the contact is locked first (`FOR UPDATE`), so a job setting
/// up a schedule on one of its vaults ([`hold_for_billing`]) is waited
/// for and its schedule seen, and one that comes later waits for the
/// delete and finds the contact gone.
pub fn end_for_contact(cx: &crate::engine::Cx, conn: &mut dyn Conn, contact_id: &str) -> ApiResult<()> {
    let lock = row_lock(conn, " FOR UPDATE");
    conn.query_one(&Sql::with(
        &format!("SELECT 1 FROM contacts WHERE id = ?{lock}"),
        vec![contact_id.into()],
    ))?;
    let active = conn.query_one(&Sql::with(
        "SELECT 1 FROM recurrings WHERE contact_id = ? AND status = 'active'",
        vec![contact_id.into()],
    ))?;
    if active.is_some() {
        return Err(ApiError::field(
            "id",
            "The contact is billed by an active recurring payment; delete the recurring or put it on hold first.",
        ));
    }
    end_where(
        cx,
        conn,
        "contact_id",
        contact_id,
        transitions::ENDED_CONTACT_DELETED,
    )
}

fn end_where(
    cx: &crate::engine::Cx,
    conn: &mut dyn Conn,
    column: &str,
    id: &str,
    reason: &str,
) -> ApiResult<()> {
    let mut sql = crate::engine::query::select_unscoped(&crate::resources::RECURRING);
    sql.push(" AND t.")
        .push(column)
        .push(" = ")
        .bind(id.to_string())
        .push(" AND t.status <> 'ended'");
    for row in conn.query(&sql)? {
        let old = Record::from_row(&crate::resources::RECURRING, row);
        let mut new = old.clone();
        transitions::end(&mut new, reason);
        let new = crate::engine::save_record(cx, conn, &old, new)?;
        after_change(conn, &new, None)?;
    }
    Ok(())
}
