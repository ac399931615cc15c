//! The ACH update (`POST /v2/transactions/{id}/achupdate`, ADR 0014): a
//! POP or C21 debit whose check was misread (its MICR line) or keyed with
//! the wrong amount is voided and run again, the same day, as one
//! operation. It is a void ([`follow_up`]) and a new debit ([`create`])
//! prepared in one write job and completed in another; between them the
//! processor voids the original, then takes the new debit.

use super::actions::{self, Action, Parsed};
use super::pending::Prepared;
use super::request::{Origin, TransactionId};
use super::state::{self, PENDING};
use super::{create, follow_up};
use crate::clock::date_text;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::validate::blank;
use crate::engine::{query, render, Cx};
use crate::error::{ApiError, ApiResult};
use crate::resources::TRANSACTION;
use serde_json::{Map, Value as Json};

/// What the new debit takes over from the one it replaces; the MICR line
/// (routing, account and check number) and the amount come from the
/// request. Identity fields (dl_*, ssn4, dob_year) are never stored, so a
/// profile that verifies identity cannot be updated.
const CARRIED_OVER: &[&str] = &[
    "product_transaction_id",
    "location_id",
    "ach_sec_code",
    "account_type",
    "account_holder_name",
    "ach_identifier",
    "contact_id",
    "description",
    "order_num",
    "po_number",
    "customer_id",
    "clerk_number",
    "billing_street",
    "billing_city",
    "billing_state",
    "billing_zip",
    "billing_phone",
    "notification_email_address",
    "transaction_c1",
    "transaction_c2",
    "transaction_c3",
];

/// Checks the request body: `track_data` (the corrected MICR line) and
/// `transaction_amount`, both required, nothing else.
pub fn parse(body: &Map<String, Json>) -> ApiResult<Parsed> {
    let parsed = actions::parse_for(Action::AchUpdate, body)?;
    if parsed.text("track_data").is_none() {
        return Err(ApiError::field("track_data", blank("track_data")));
    }
    Ok(parsed)
}

/// Step 1 (one write job): the original is checked (POP or C21 debit,
/// voidable, made today in its location's calendar) and marked for its
/// void, and the new debit is checked like any `POST /v2/transactions`
/// and stored pending. Any refusal rolls both back.
pub fn prepare(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &super::KeptConfig,
    id: &TransactionId,
    update: &Parsed,
    node: &str,
    idem_key: Option<&str>,
) -> ApiResult<(Prepared, Prepared)> {
    let original = query::find(conn, &TRANSACTION, &cx.scope, id.as_str())?
        .ok_or_else(|| ApiError::not_found("transaction"))?;
    let tz = create::location_tz(conn, original.text("location_id").unwrap_or_default())?;
    let made_on = date_text(original.int("created_ts").unwrap_or(0), tz);
    state::updatable(&original, &made_on, &date_text(cx.now, tz))
        .map_err(|m| ApiError::field("action", m))?;
    let void = follow_up::prepare(
        cx,
        conn,
        &original,
        &actions::parse_for(Action::Void, &Map::new())?,
        node,
    )?;
    let debit = new_debit(cx, &original, update)?;
    let origin = Origin {
        replaces: Some(id.clone()),
        ..Origin::api()
    };
    // Last: storing the new debit commits the job.
    let debit = create::prepare(cx, conn, kept, &debit, &origin, node, idem_key)?;
    Ok((void, debit))
}

/// The body of the new debit: the original's details with the corrected
/// MICR line and amount, checked as a debit.
fn new_debit(cx: &Cx, original: &Record, update: &Parsed) -> ApiResult<Parsed> {
    let rendered = render(cx, original);
    let mut body: Map<String, Json> = CARRIED_OVER
        .iter()
        .filter_map(|name| {
            let value = rendered.get(*name).filter(|v| !v.is_null())?;
            Some((name.to_string(), value.clone()))
        })
        .collect();
    body.insert("action".into(), "debit".into());
    body.insert("payment_method".into(), "ach".into());
    let amount = update.input.record.int("transaction_amount").unwrap_or(0);
    body.insert("transaction_amount".into(), crate::money::format(amount).into());
    body.insert(
        "track_data".into(),
        update.text("track_data").unwrap_or_default().into(),
    );
    actions::parse(&body, false)
}

/// After a void the processor refused: the original loses its mark and
/// the new debit, never sent, is removed, as if nothing had been asked.
/// A debit a reconciler has claimed (it took this node for dead) is left
/// to it: it reverses the debit, which is harmless, and declines it.
pub fn abandon(conn: &mut dyn Conn, void: &Prepared, debit_id: &str) -> ApiResult<()> {
    follow_up::abandon(conn, void)?;
    conn.execute(&Sql::with(
        "DELETE FROM transactions WHERE id = ? AND state = ? AND pending_node = ?",
        vec![debit_id.into(), PENDING.into(), void.node.clone().into()],
    ))?;
    Ok(())
}
