//! An action on an existing transaction (authcomplete, authincrement,
//! void, partialreversal, tipadjust, edit, and the ACH override): step 1, [`prepare`], checks
//! the action against the transaction's state and, when the processor is
//! involved, marks the transaction so no other action runs on it
//! meanwhile; step 3, [`complete`], records the outcome.

use super::actions::{Action, Parsed};
use super::batches;
use super::call::Call;
use super::pending::{clear_mark, load, processor_ref, release_refund, Completed, Prepared};
use super::state::{self, Facts, DONE, PENDING};
use crate::clock::timestamp_text;
use crate::db::{Conn, DbError, Dialect, Sql, Value};
use crate::engine::record::Record;
use crate::engine::validate::UpdateInput;
use crate::engine::{query, update_record, Cx};
use crate::error::{ApiError, ApiResult};
use crate::processor::*;
use crate::resources::{ACCOUNT_VAULT, CONTACT, TRANSACTION};

/// Step 1 of a follow-up action on `tx` (found in the caller's scope).
pub fn prepare(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    parsed: &Parsed,
    node: &str,
) -> ApiResult<Prepared> {
    let action = parsed.action;
    let held;
    let tx = match action {
        // An edit changes nothing a batch settles, and holding the batch
        // through a move of many transactions would stall its sales.
        Action::Edit => tx,
        _ => {
            held = hold_batch(conn, tx)?;
            &held
        }
    };
    let facts = Facts::load(conn, tx)?;
    let extra = carried_fields(cx, conn, tx, parsed)?;
    let (call, new_amount) = action_call(tx, parsed, &facts)?;
    if matches!(
        action,
        Action::AuthComplete | Action::AuthIncrement | Action::PartialReversal
    ) {
        let mut errors = crate::error::FieldErrors::new();
        let current = tx.int("transaction_amount").unwrap_or(0);
        let new_total = new_amount.map(Money::cents).unwrap_or(current);
        super::surcharge::check_follow_up(
            conn,
            tx,
            &parsed.input.record,
            &parsed.input.present,
            new_total,
            &mut errors,
        )?;
        // Tax and tip sent with the action are parts of its new amount,
        // with the stored ones it does not send (as `complete` fits them).
        let sent = |name: &str| {
            parsed
                .present(name)
                .then(|| parsed.input.record.int(name))
                .flatten()
        };
        let (tax, tip) = (sent("tax"), sent("tip_amount"));
        let (stored_tax, _) = super::parts::fit_tax_and_tip(tx.int("tax"), None, new_total);
        let stored_tax = stored_tax.unwrap_or(0);
        if tax.is_some_and(|tax| tax > new_total) {
            errors.add("tax", "Tax is part of Transaction Amount and cannot exceed it.");
        } else if tip.is_some_and(|tip| tax.unwrap_or(stored_tax) + tip > new_total) {
            errors.add(
                "tip_amount",
                "Tip Amount is part of Transaction Amount and, with the tax, cannot exceed it.",
            );
        }
        errors.into_result()?;
    }
    if !matches!(call, Call::Nothing) {
        mark(cx, conn, tx, action, node, claimed_api_id(&extra))?;
    }
    let mut prepared = Prepared {
        id: tx.id().to_string(),
        action,
        call,
        save_account: None,
        new_amount,
        extra,
        stored: None,
        node: node.to_string(),
    };
    if action == Action::Edit {
        edit_links(cx, conn, tx, parsed, &mut prepared)?;
    }
    Ok(prepared)
}

/// On PostgreSQL, holds the batch `tx` is in (see [`batches::hold`]) and
/// its row, and answers the transaction as it is now: `tx` was read before, and an
/// action that committed since may have changed it, even put it in a
/// batch. On SQLite the job that read `tx` is this one, and no other job
/// runs meanwhile.
fn hold_batch(conn: &mut dyn Conn, tx: &Record) -> ApiResult<Record> {
    if conn.dialect() != Dialect::Postgres {
        return Ok(tx.clone());
    }
    for _ in 0..3 {
        let held = batches::hold(conn, tx.id())?;
        // The row too, after its batch (the order every writer takes
        // them): an action that completed since `tx` was read, or an ACH
        // status change, must be seen by this action's checks, and none
        // may start until this job's mark is committed. If the row moved
        // into a batch while this job waited for it (a capture completed),
        // the row is let go again (its savepoint) before that batch is
        // held: holding a row while waiting for its batch deadlocks with
        // the next action, which holds them the other way round.
        conn.execute(&Sql::new("SAVEPOINT hold_row"))?;
        conn.query(&Sql::with(
            "SELECT id FROM transactions WHERE id = ? FOR UPDATE",
            vec![tx.id().into()],
        ))?;
        let now = load(conn, tx.id())?;
        if now.text("transaction_batch_id") == held.as_deref() {
            conn.execute(&Sql::new("RELEASE SAVEPOINT hold_row"))?;
            return Ok(now);
        }
        conn.execute(&Sql::new("ROLLBACK TO SAVEPOINT hold_row"))?;
    }
    Err(ApiError::Unavailable(
        "The transaction is changing; retry shortly.".into(),
    ))
}

fn refuse(msg: String) -> ApiError {
    ApiError::field("action", msg)
}

/// The other fields the body sets (stored ones), checked: the payment
/// method must match, a `transaction_api_id` is set once.
fn carried_fields(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    parsed: &Parsed,
) -> ApiResult<Vec<(&'static str, Value)>> {
    let mut extra: Vec<(&'static str, Value)> = Vec::new();
    for name in &parsed.input.present {
        let Some(field) = TRANSACTION.field(name) else {
            continue;
        };
        let value = parsed.input.record.get(name).clone();
        match *name {
            "action" | "transaction_amount" | "contact_id" => {}
            "payment_method" if value.as_str() != tx.text("payment_method") => {
                return Err(ApiError::field(
                    "payment_method",
                    format!(
                        "Payment Method does not match the transaction ({}).",
                        tx.text("payment_method").unwrap_or_default()
                    ),
                ));
            }
            "payment_method" => {}
            // Set once: a transaction without one may take one now.
            "transaction_api_id" => match (tx.text("transaction_api_id"), value.as_str()) {
                (Some(have), Some(sent)) if have == sent => {}
                (None, Some(sent)) => {
                    let location = tx.text("location_id").unwrap_or_default();
                    if query::find_by_api_id(conn, &TRANSACTION, &cx.scope, location, sent)?.is_some() {
                        return Err(ApiError::field(
                            "transaction_api_id",
                            "Transaction Api Id has already been taken at this location.",
                        ));
                    }
                    extra.push((field.name, value));
                }
                (_, None) => {}
                (Some(_), Some(_)) => {
                    return Err(ApiError::field(
                        "transaction_api_id",
                        "Transaction Api Id is already set and cannot change.",
                    ))
                }
            },
            _ if field.stored => extra.push((field.name, value)),
            _ => {}
        }
    }
    Ok(extra)
}

/// What the action asks of the processor, and the amount it leads to,
/// if the transaction's state allows it.
fn action_call(tx: &Record, parsed: &Parsed, facts: &Facts) -> ApiResult<(Call, Option<Money>)> {
    let action = parsed.action;
    let sent = parsed
        .input
        .record
        .int("transaction_amount")
        .map(Money::from_cents);
    let current = Money::from_cents(tx.int("transaction_amount").unwrap_or(0));
    let (call, new_amount) = match action {
        Action::AuthComplete => {
            state::completable(tx, facts).map_err(refuse)?;
            let authorized = tx.int("auth_amount").map(Money::from_cents).unwrap_or(current);
            let amount = sent.unwrap_or(current);
            if amount > authorized {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount cannot exceed the authorized amount ({}).",
                        authorized
                    ),
                ));
            }
            (
                Call::Capture(CaptureRequest {
                    original: processor_ref(tx),
                    authorized_amount: authorized,
                    amount,
                }),
                Some(amount),
            )
        }
        Action::AuthIncrement => {
            state::completable(tx, facts).map_err(refuse)?;
            let amount = sent.unwrap_or(Money::ZERO);
            if amount <= current {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount is the new authorized total and must be above the current {}.",
                        current
                    ),
                ));
            }
            (
                Call::Increment(IncrementRequest {
                    original: processor_ref(tx),
                    authorized_amount: tx.int("auth_amount").map(Money::from_cents).unwrap_or(current),
                    amount,
                }),
                Some(amount),
            )
        }
        Action::Void => {
            state::voidable(tx, facts).map_err(refuse)?;
            if let Some(a) = sent {
                if a != current {
                    return Err(ApiError::field(
                        "transaction_amount",
                        "A void cancels the whole amount; use partialreversal to lower it.",
                    ));
                }
            }
            (
                Call::Void(VoidRequest {
                    original: processor_ref(tx),
                }),
                Some(Money::ZERO),
            )
        }
        Action::PartialReversal => {
            state::reversible(tx, facts).map_err(refuse)?;
            let amount = sent.unwrap_or(Money::ZERO);
            if amount >= current {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount is the reduced final amount and must be below {}.",
                        current
                    ),
                ));
            }
            (
                Call::PartialReversal(PartialReversalRequest {
                    original: processor_ref(tx),
                    original_amount: current,
                    new_amount: amount,
                    captured: state::status(tx) == Some(StatusId::Approved),
                }),
                Some(amount),
            )
        }
        Action::TipAdjust => {
            state::tip_adjustable(tx, facts).map_err(refuse)?;
            let base = current - Money::from_cents(tx.int("tip_amount").unwrap_or(0));
            let amount = sent.unwrap_or(Money::ZERO);
            if amount < base {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount is the new total with the tip and cannot be below {}.",
                        base
                    ),
                ));
            }
            (Call::Nothing, Some(amount))
        }
        Action::Override => {
            state::overridable(tx).map_err(refuse)?;
            (
                Call::AchOverride(OverrideRequest {
                    original: processor_ref(tx),
                    amount: current,
                }),
                Some(current),
            )
        }
        Action::Edit => {
            if tx.text("state") == Some(PENDING) {
                return Err(refuse(
                    "The transaction is still being processed; retry shortly.".into(),
                ));
            }
            (Call::Nothing, None)
        }
        _ => return Err(refuse(format!("The {} action runs with POST.", action.name()))),
    };
    Ok((call, new_amount))
}

/// The `transaction_api_id` an action gives a transaction that had none.
fn claimed_api_id<'a>(extra: &'a [(&'static str, Value)]) -> Option<&'a Value> {
    extra
        .iter()
        .find(|(name, _)| *name == "transaction_api_id")
        .map(|(_, value)| value)
}

/// Marks the transaction as having `action` in flight on `node`, since
/// now: reconciliation takes a mark its own node left for two minutes as
/// an orphan, and must not take one whose call is under way. A new
/// `transaction_api_id` is written with the mark, before the processor is
/// called: the location's unique index then refuses the loser of two
/// actions claiming the same one now, not after its call went through.
fn mark(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    action: Action,
    node: &str,
    api_id: Option<&Value>,
) -> ApiResult<()> {
    let mut sql = Sql::new("UPDATE transactions SET pending_action = ");
    sql.bind(action.name())
        .push(", pending_node = ")
        .bind(node)
        .push(", modified_ts = ")
        .bind(cx.now);
    if let Some(api_id) = api_id {
        sql.push(", transaction_api_id = ").bind(api_id.clone());
    }
    sql.push(" WHERE id = ")
        .bind(tx.id())
        .push(" AND state = ")
        .bind(DONE)
        .push(" AND pending_action IS NULL");
    let marked = conn.execute(&sql).map_err(|e| match e {
        DbError::Unique(_) => ApiError::field(
            "transaction_api_id",
            "Transaction Api Id has already been taken at this location.",
        ),
        e => e.into(),
    })?;
    if marked == 0 {
        return Err(refuse(
            "Another action on this transaction is in progress; retry shortly.".into(),
        ));
    }
    Ok(())
}

/// edit: the contact to link (`contact_id` "" detaches; `contact_api_id`
/// names one at the location) and whether the vault and its other
/// transactions move with it.
fn edit_links(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    parsed: &Parsed,
    prepared: &mut Prepared,
) -> ApiResult<()> {
    // contact_id "" detaches; contact_api_id names one at the location.
    let contact = match (parsed.present("contact_id"), parsed.text("contact_api_id")) {
        (true, _) => match parsed.input.record.text("contact_id") {
            None => Some(Value::Null),
            Some(id) => match query::find(conn, &CONTACT, &cx.scope, id)? {
                Some(c) if c.text("location_id") == tx.text("location_id") => Some(Value::from(id)),
                _ => return Err(ApiError::field("contact_id", "contact_id provided is not valid")),
            },
        },
        (false, Some(api_id)) => {
            let location = tx.text("location_id").unwrap_or_default();
            match query::find_by_api_id(conn, &CONTACT, &cx.scope, location, &api_id)? {
                Some(c) => Some(Value::from(c.id())),
                None => {
                    return Err(ApiError::field(
                        "contact_api_id",
                        "contact_api_id provided is not valid",
                    ))
                }
            }
        }
        _ => None,
    };
    if let Some(c) = contact {
        prepared.extra.push(("contact_id", c));
    }
    if parsed.present("tags") {
        prepared
            .extra
            .push(("tags", parsed.input.record.get("tags").clone()));
    }
    let move_vault = parsed.flag("move_account_vault") == Some(true);
    let move_txs = parsed.flag("move_account_vault_transactions") == Some(true);
    if (move_vault || move_txs) && tx.get("account_vault_id").is_null() {
        return Err(ApiError::field(
            "move_account_vault",
            "The transaction was not paid with an account vault.",
        ));
    }
    if move_vault {
        prepared.extra.push(("move_account_vault", Value::Int(1)));
    }
    if move_txs {
        prepared
            .extra
            .push(("move_account_vault_transactions", Value::Int(1)));
    }
    Ok(())
}

/// Step 3 of a follow-up action. `answer` is None for actions that
/// do not call the processor.
pub fn complete(
    cx: &Cx,
    conn: &mut dyn Conn,
    prepared: &Prepared,
    answer: Option<&ProcessorResponse>,
    idem_key: Option<&str>,
) -> ApiResult<Completed> {
    // Actions without a processor call held the batch in `prepare`, in
    // this same job. The others hold it again, before their transaction:
    // it cannot have changed batch since, its mark kept every other
    // action away.
    if answer.is_some() {
        batches::hold(conn, &prepared.id)?;
        if clear_mark(conn, &prepared.id, prepared.action, &prepared.node)? == 0 {
            return Err(ApiError::Unavailable(
                "The action was interrupted; look the transaction up and retry.".into(),
            ));
        }
    }
    // Read after the mark is gone: the row as this action found it.
    let old = load(conn, &prepared.id)?;
    let mut changes: Vec<(&'static str, Value)> = Vec::new();
    let current = old.int("transaction_amount").unwrap_or(0);
    let mut batch_change: Option<(i64, i64)> = None;
    let mut vault_moves: Option<(bool, bool)> = None;
    match (prepared.action, answer) {
        (Action::Edit, _) => {
            let mut mv = (false, false);
            for (name, value) in &prepared.extra {
                match *name {
                    "move_account_vault" => mv.0 = true,
                    "move_account_vault_transactions" => mv.1 = true,
                    _ => changes.push((name, value.clone())),
                }
            }
            vault_moves = Some(mv);
        }
        (Action::TipAdjust, _) => {
            let new = prepared.new_amount.map(Money::cents).unwrap_or(current);
            let base = current - old.int("tip_amount").unwrap_or(0);
            changes.push(("transaction_amount", new.into()));
            changes.push(("tip_amount", (new - base).into()));
            batch_change = Some((0, new - current));
        }
        (action, Some(answer)) => {
            for (name, value) in &prepared.extra {
                changes.push((name, value.clone()));
            }
            // A void answers 201 (Voided): only a decline is a refusal.
            if !matches!(answer.status_id, StatusId::Declined | StatusId::Rejected) {
                let new = prepared.new_amount.map(Money::cents).unwrap_or(current);
                changes.push(("status_id", (answer.status_id.code() as i64).into()));
                changes.push(("reason_code_id", (answer.reason_code_id.code() as i64).into()));
                changes.push(("verbiage", answer.verbiage.clone().into()));
                changes.push(("response_message", answer.response_message.clone().into()));
                match action {
                    Action::Void => {
                        changes.push(("transaction_amount", 0.into()));
                        changes.push(("void_date", timestamp_text(cx.now).into()));
                        if old.text("transaction_batch_id").is_some() {
                            let signed = if state::type_id(&old) == Some(TypeId::Refund) {
                                -current
                            } else {
                                current
                            };
                            batch_change = Some((-1, -signed));
                        }
                        if state::type_id(&old) == Some(TypeId::Refund) {
                            release_refund(conn, &old)?;
                        }
                    }
                    Action::AuthComplete => {
                        changes.push(("transaction_amount", new.into()));
                        fit_parts(&old, &prepared.extra, new, &mut changes);
                    }
                    Action::AuthIncrement => {
                        changes.push(("transaction_amount", new.into()));
                        changes.push(("auth_amount", new.into()));
                    }
                    Action::PartialReversal => {
                        changes.push(("transaction_amount", new.into()));
                        changes.push(("auth_amount", new.into()));
                        fit_parts(&old, &prepared.extra, new, &mut changes);
                        batch_change = Some((0, new - current));
                    }
                    // The held debit is now the approved one: it takes the
                    // approval's code and the processor's handle.
                    Action::Override => {
                        changes.push(("auth_amount", new.into()));
                        changes.push(("auth_code", answer.auth_code.clone().into()));
                        changes.push(("processor_reference", answer.processor_reference.clone().into()));
                    }
                    _ => {}
                }
            } else {
                // A declined follow-up leaves the transaction as it was and
                // says why.
                changes.push(("reason_code_id", (answer.reason_code_id.code() as i64).into()));
                changes.push(("response_message", answer.response_message.clone().into()));
            }
        }
        (_, None) => {}
    }
    let input = UpdateInput::named(&TRANSACTION, changes)?;
    let mut record = update_record(cx, conn, old.clone(), input)?;
    if let Some((count, amount)) = batch_change {
        batches::adjust(conn, cx, &record, count, amount)?;
    }
    // A completed authorization enters the batch now.
    if prepared.action == Action::AuthComplete
        && answer.is_some_and(|a| a.is_approved())
        && record.get("transaction_batch_id").is_null()
    {
        let amount = record.int("transaction_amount").unwrap_or(0);
        let before = record.clone();
        batches::enter(cx, conn, &mut record, amount)?;
        let input = UpdateInput::named(
            &TRANSACTION,
            ["transaction_batch_id", "batch", "batch_seq"].map(|n| (n, record.get(n).clone())),
        )?;
        record = update_record(cx, conn, before, input)?;
    }
    if let Some((move_vault, move_txs)) = vault_moves {
        move_with_vault(cx, conn, &record, move_vault, move_txs)?;
    }
    crate::invoices::payment_changed(cx, conn, &record, false)?;
    Completed::answer(cx, conn, record, idem_key, 200)
}

/// Tax and tip are parts of the amount: a stored one the action did not
/// set is lowered to fit a smaller amount (see [`super::parts`];
/// `prepare` checked the ones it set).
fn fit_parts(
    old: &Record,
    extra: &[(&'static str, Value)],
    amount: i64,
    changes: &mut Vec<(&'static str, Value)>,
) {
    let set = |part: &str| {
        extra
            .iter()
            .find(|(name, _)| *name == part)
            .map(|(_, value)| value.as_int().unwrap_or(0))
    };
    let (sent_tax, sent_tip) = (set("tax"), set("tip_amount"));
    let tip = if sent_tip.is_some() {
        None
    } else {
        old.int("tip_amount")
    };
    let (tax, tip) = super::parts::fit_tax_and_tip(sent_tax.or(old.int("tax")), tip, amount);
    for (part, fitted) in [("tax", tax), ("tip_amount", tip)] {
        let sent = if part == "tax" { sent_tax } else { sent_tip };
        if sent.is_none() && fitted.is_some() && fitted != old.int(part) {
            changes.push((part, fitted.into()));
        }
    }
}

/// edit's `move_account_vault` (the vault follows the transaction's
/// contact) and `move_account_vault_transactions` (the vault's other
/// transactions follow too).
fn move_with_vault(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    move_vault: bool,
    move_txs: bool,
) -> ApiResult<()> {
    let Some(vault_id) = tx.text("account_vault_id") else {
        return Ok(());
    };
    let contact = tx.get("contact_id").clone();
    if move_vault {
        if let Some(vault) = query::find(conn, &ACCOUNT_VAULT, &cx.scope, vault_id)? {
            let input = UpdateInput::named(&ACCOUNT_VAULT, [("contact_id", contact.clone())])?;
            update_record(cx, conn, vault, input)?;
        }
    }
    if move_txs {
        let mut sql = query::select(&TRANSACTION, &cx.scope);
        sql.push(" AND t.account_vault_id = ")
            .bind(vault_id.to_string())
            .push(" AND t.id <> ")
            .bind(tx.id().to_string())
            .push(" LIMIT 5000");
        for row in conn.query(&sql)? {
            let other = Record::from_row(&TRANSACTION, row);
            let input = UpdateInput::named(&TRANSACTION, [("contact_id", contact.clone())])?;
            update_record(cx, conn, other, input)?;
        }
    }
    Ok(())
}

/// Clears the mark of a PUT action whose processor call failed outright.
/// The api id the mark claimed goes with it: the action did nothing.
pub fn abandon(conn: &mut dyn Conn, prepared: &Prepared) -> ApiResult<()> {
    if clear_mark(conn, &prepared.id, prepared.action, &prepared.node)? > 0 {
        if let Some(api_id) = claimed_api_id(&prepared.extra) {
            let mut sql = Sql::new("UPDATE transactions SET transaction_api_id = NULL WHERE id = ");
            sql.bind(prepared.id.clone())
                .push(" AND transaction_api_id = ")
                .bind(api_id.clone());
            conn.execute(&sql)?;
        }
    }
    Ok(())
}
