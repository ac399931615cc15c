//! What a transaction's state allows: the rules behind the refusals of the
//! PUT actions and refunds, and behind the `is_voidable`, `is_refundable`,
//! `is_completable`, `is_reversible` and `is_settled` expands. One place,
//! so the expands never disagree with what the actions do.

use crate::cards::{CHECK_SEC_CODES, OVERRIDE_SEC_CODES};
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::error::ApiResult;
use crate::processor::{ProcessingStatus, ReasonCode, StatusId, TypeId};

/// `state` of a transaction written before its processor call.
pub const PENDING: &str = "pending";
/// `state` of a transaction whose outcome is recorded.
pub const DONE: &str = "done";

/// Facts about a transaction that live outside its row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts {
    /// Card: its batch settled. ACH: status 134.
    pub settled: bool,
    /// Its batch is being settled right now.
    pub batch_processing: bool,
}

impl Facts {
    pub fn load(conn: &mut dyn Conn, record: &Record) -> ApiResult<Facts> {
        let mut facts = Facts::default();
        if record.text("payment_method") == Some("ach") {
            facts.settled = status(record) == Some(StatusId::AchSettled);
            return Ok(facts);
        }
        if let Some(batch) = record.text("transaction_batch_id") {
            let row = conn.query_one(&Sql::with(
                "SELECT processing_status_id FROM transaction_batches WHERE id = ?",
                vec![batch.into()],
            ))?;
            let ps = row.and_then(|r| r[0].as_int()).unwrap_or(1);
            facts.settled = ps == ProcessingStatus::Settled.code() as i64;
            facts.batch_processing = ps == ProcessingStatus::Processing.code() as i64;
        }
        Ok(facts)
    }
}

pub fn status(record: &Record) -> Option<StatusId> {
    record
        .int("status_id")
        .and_then(|s| StatusId::from_code(s as u16))
}

pub fn type_id(record: &Record) -> Option<TypeId> {
    record.int("type_id").and_then(|s| TypeId::from_code(s as u16))
}

fn is_card(record: &Record) -> bool {
    record.text("payment_method") == Some("cc")
}

/// Refusal text when another action is in flight or the outcome is not
/// recorded yet.
fn not_in_flight(record: &Record) -> Result<(), String> {
    if record.text("state") == Some(PENDING) {
        return Err("The transaction is still being processed; retry shortly.".into());
    }
    if let Some(action) = record.text("pending_action") {
        return Err(format!(
            "The {action} of this transaction is still in progress; retry shortly."
        ));
    }
    Ok(())
}

fn status_text(record: &Record) -> String {
    match status(record) {
        Some(s) => format!("{} ({})", s.label(), s.code()),
        None => "unknown".into(),
    }
}

/// void: card sales, authorizations and refunds before settlement; ACH
/// debits, credits and refunds before origination.
pub fn voidable(record: &Record, facts: &Facts) -> Result<(), String> {
    not_in_flight(record)?;
    let s = status(record);
    if is_card(record) {
        if !matches!(
            s,
            Some(StatusId::Approved | StatusId::AuthOnly | StatusId::Refunded)
        ) {
            return Err(format!(
                "Only approved, authorized or refunded card transactions can be voided; this one is {}.",
                status_text(record)
            ));
        }
        if facts.settled {
            return Err("The transaction is settled; refund it instead.".into());
        }
        if facts.batch_processing {
            return Err("The transaction's batch is being settled; retry shortly.".into());
        }
        return Ok(());
    }
    if s != Some(StatusId::PendingOrigination) {
        return Err(format!(
            "Only ACH transactions pending origination (131) can be voided; this one is {}.",
            status_text(record)
        ));
    }
    Ok(())
}

/// override: an ACH debit held for a manager's approval (1663, status 301)
/// on a profile that takes overrides (TEL, POP, C21). Once overridden its
/// reason is no longer 1663, so a second override is refused.
pub fn overridable(record: &Record) -> Result<(), String> {
    not_in_flight(record)?;
    let codes = OVERRIDE_SEC_CODES.join(", ");
    if is_card(record) {
        return Err(format!(
            "Only ACH transactions (SEC codes {codes}) can be overridden."
        ));
    }
    let sec = record.text("ach_sec_code").unwrap_or_default();
    if !OVERRIDE_SEC_CODES.contains(&sec) {
        return Err(format!(
            "Only ACH transactions with SEC codes {codes} can be overridden; this one is {sec}."
        ));
    }
    let reason = record.int("reason_code_id").unwrap_or(0);
    if status(record) != Some(StatusId::Declined) || reason != ReasonCode::MANAGER_NEEDED.code() as i64 {
        return Err(format!(
            "Only transactions waiting for a manager's approval (reason 1663) can be overridden; \
             this one is {} with reason {reason}.",
            status_text(record)
        ));
    }
    Ok(())
}

/// achupdate: a POP or C21 debit that can still be voided, on the calendar
/// day (`today`, the location's) it was made (`made_on`).
pub fn updatable(record: &Record, made_on: &str, today: &str) -> Result<(), String> {
    not_in_flight(record)?;
    let codes = CHECK_SEC_CODES.join(" and ");
    let sec = record.text("ach_sec_code").unwrap_or_default();
    let refusal = |what: String| {
        Err(format!(
            "Only ACH debits with SEC codes {codes} can be updated; {what}."
        ))
    };
    if is_card(record) {
        return refusal("this is a card transaction".into());
    }
    if type_id(record) != Some(TypeId::Debit) {
        return refusal("this is not a debit".into());
    }
    if !CHECK_SEC_CODES.contains(&sec) {
        return refusal(format!("this one is {sec}"));
    }
    if made_on != today {
        return Err(format!(
            "An ACH update is possible on the day of the debit only ({made_on}); today is {today}. \
             Refund it and send a new debit instead."
        ));
    }
    voidable(record, &Facts::default())
}

/// refund: settled card sales (and completions, forces) with something
/// left to refund; settled ACH debits, in full.
pub fn refundable(record: &Record, facts: &Facts) -> Result<(), String> {
    not_in_flight(record)?;
    let s = status(record);
    if is_card(record) {
        if type_id(record) != Some(TypeId::Sale) || s != Some(StatusId::Approved) {
            return Err(format!(
                "Only approved card sales can be refunded; this one is {}.",
                status_text(record)
            ));
        }
        if !facts.settled {
            return Err("The transaction is not settled yet; void it instead.".into());
        }
        if remaining(record) <= 0 {
            return Err("The transaction has been refunded in full.".into());
        }
        return Ok(());
    }
    if type_id(record) != Some(TypeId::Debit) {
        return Err("Only ACH debits can be refunded; send a credit instead.".into());
    }
    if s != Some(StatusId::AchSettled) {
        return Err(format!(
            "Only settled ACH debits (134) can be refunded; this one is {}.",
            status_text(record)
        ));
    }
    if record.int("refunded_amount").unwrap_or(0) > 0 {
        return Err("The debit has already been refunded.".into());
    }
    Ok(())
}

/// What is left to refund, in cents.
pub fn remaining(record: &Record) -> i64 {
    record.int("transaction_amount").unwrap_or(0) - record.int("refunded_amount").unwrap_or(0)
}

/// authcomplete and authincrement: open card authorizations.
pub fn completable(record: &Record, _facts: &Facts) -> Result<(), String> {
    not_in_flight(record)?;
    if !is_card(record) || status(record) != Some(StatusId::AuthOnly) {
        return Err(format!(
            "Only open card authorizations (authonly, 102) can be completed or incremented; this one is {}.",
            status_text(record)
        ));
    }
    Ok(())
}

/// partialreversal: card sales and authorizations before settlement.
pub fn reversible(record: &Record, facts: &Facts) -> Result<(), String> {
    not_in_flight(record)?;
    if !is_card(record)
        || type_id(record) != Some(TypeId::Sale)
        || !matches!(status(record), Some(StatusId::Approved | StatusId::AuthOnly))
    {
        return Err(format!(
            "Only approved or authorized card sales can be partially reversed; this one is {}.",
            status_text(record)
        ));
    }
    if facts.settled {
        return Err("The transaction is settled; refund it instead.".into());
    }
    if facts.batch_processing {
        return Err("The transaction's batch is being settled; retry shortly.".into());
    }
    Ok(())
}

/// tipadjust: approved card sales before settlement.
pub fn tip_adjustable(record: &Record, facts: &Facts) -> Result<(), String> {
    not_in_flight(record)?;
    if !is_card(record) || type_id(record) != Some(TypeId::Sale) || status(record) != Some(StatusId::Approved)
    {
        return Err(format!(
            "Only approved card sales can take a tip adjustment; this one is {}.",
            status_text(record)
        ));
    }
    if facts.settled {
        return Err("The transaction is settled; its tip can no longer change.".into());
    }
    if facts.batch_processing {
        return Err("The transaction's batch is being settled; retry shortly.".into());
    }
    Ok(())
}

/// Level 3 data can be attached to approved or authorized card sales.
pub fn level3_eligible(record: &Record) -> bool {
    is_card(record)
        && record.text("state") == Some(DONE)
        && type_id(record) == Some(TypeId::Sale)
        && matches!(status(record), Some(StatusId::Approved | StatusId::AuthOnly))
}
