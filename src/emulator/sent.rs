//! What an Authorize.Net client sent for a payment the emulator made, and
//! our transaction row cannot tell (table `emulator_transactions`): their
//! transaction type, since an authorization and a sale are both our type
//! 20 and a captured, voided or declined authorization no longer shows it
//! was one; and whether an invoice number was sent, since the payments
//! core numbers orders sent without one.

use super::transaction::Kind;
use crate::db::{Conn, Sql};
use crate::error::ApiResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    pub kind: Kind,
    pub invoice_sent: bool,
}

/// Records a new payment's request; written with its number, once.
pub fn record(conn: &mut dyn Conn, transaction_id: &str, sent: Sent) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "INSERT INTO emulator_transactions (transaction_id, transaction_type, invoice_sent) \
         VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        vec![
            transaction_id.into(),
            sent.kind.api_name().into(),
            i64::from(sent.invoice_sent).into(),
        ],
    ))?;
    Ok(())
}

/// What was sent for a transaction; `None` for one the emulator did not
/// make (or made before this was recorded).
pub fn of(conn: &mut dyn Conn, transaction_id: &str) -> ApiResult<Option<Sent>> {
    let row = conn.query_one(&Sql::with(
        "SELECT transaction_type, invoice_sent FROM emulator_transactions WHERE transaction_id = ?",
        vec![transaction_id.into()],
    ))?;
    Ok(row.and_then(|r| {
        Some(Sent {
            kind: Kind::parse(r.first()?.as_str()?)?,
            invoice_sent: r.get(1)?.as_int()? == 1,
        })
    }))
}
