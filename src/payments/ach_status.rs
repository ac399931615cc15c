//! The sandbox's ACH status changes: on a real network an ACH debit is
//! originated, settles or comes back days after the request. A test
//! processor's [`Simulator`] says which changes its flow allows; this
//! records one on the transaction (only `status_id` and what goes with it).

use super::state;
use crate::clock::{date_text, timestamp_text};
use crate::db::{Conn, Value};
use crate::engine::record::Record;
use crate::engine::validate::UpdateInput;
use crate::engine::{query, update_record, Cx};
use crate::error::{ApiError, ApiResult};
use crate::processor::{Simulator, StatusId, TypeId};
use crate::resources::TRANSACTION;

/// Moves ACH transaction `id` to status `to`, if the simulator's flow
/// allows it from where it is.
pub fn apply(
    cx: &Cx,
    conn: &mut dyn Conn,
    simulator: &dyn Simulator,
    id: &str,
    to: StatusId,
) -> ApiResult<Record> {
    let tx =
        query::find(conn, &TRANSACTION, &cx.scope, id)?.ok_or_else(|| ApiError::not_found("transaction"))?;
    // On PostgreSQL another job may be acting on it: hold its row and read
    // it again, so an action's mark or a void committed meanwhile is seen.
    let tx = if conn.dialect() == crate::db::Dialect::Postgres {
        conn.query(&crate::db::Sql::with(
            "SELECT id FROM transactions WHERE id = ? FOR UPDATE",
            vec![tx.id().into()],
        ))?;
        super::pending::load(conn, tx.id())?
    } else {
        tx
    };
    if tx.text("payment_method") != Some("ach") {
        return Err(ApiError::field(
            "status_id",
            "Only ACH transactions change status here.",
        ));
    }
    let from = state::status(&tx)
        .ok_or_else(|| ApiError::field("status_id", "The transaction has no status yet."))?;
    if tx.text("pending_action").is_some() {
        return Err(ApiError::field(
            "status_id",
            "Another action on this transaction is in progress.",
        ));
    }
    let amount = tx.int("transaction_amount").unwrap_or(0);
    let change = simulator
        .ach_status_change(from, to, amount)
        .map_err(|message| ApiError::field("status_id", message))?;
    let today = date_text(cx.now, chrono_tz::UTC);
    let mut changes: Vec<(&'static str, Value)> =
        vec![("status_id", Value::Int(change.status_id.code() as i64))];
    if let Some(reason) = change.reason {
        changes.push(("reason_code_id", (reason.code() as i64).into()));
        // What the processor said last, as on any answer of theirs.
        changes.push(("response_message", reason.label().into()));
    }
    match change.status_id {
        StatusId::AchSettled => changes.push(("settle_date", today.into())),
        StatusId::ChargedBack => {
            changes.push(("charge_back_date", today.clone().into()));
            changes.push(("return_date", today.into()));
            if let Some(v) = change.reason.and_then(|r| r.ach_return_verbiage()) {
                changes.push(("verbiage", v.into()));
            }
        }
        // As a void action: nothing is left to move.
        StatusId::Voided => {
            changes.push(("void_date", timestamp_text(cx.now).into()));
            changes.push(("transaction_amount", 0.into()));
            changes.push(("verbiage", StatusId::Voided.label().into()));
        }
        _ => {}
    }
    let refund = state::type_id(&tx) == Some(TypeId::Refund);
    if change.status_id == StatusId::Voided && refund {
        super::pending::release_refund(conn, &tx)?;
    }
    // ACH transactions are in no batch: nothing to take out of one.
    let input = UpdateInput::named(&TRANSACTION, changes)?;
    let record = update_record(cx, conn, tx, input)?;
    crate::invoices::payment_changed(cx, conn, &record, false)?;
    Ok(record)
}
