//! What an Authorize.Net client sent for a payment the emulator made, and
//! our transaction row cannot tell (table `emulator_transactions`): their
//! transaction type, since an authorization and a sale are both our type
//! 20 and a captured, voided or declined authorization no longer shows it
//! was one; whether an invoice number was sent, since the payments core
//! numbers orders sent without one; and the bill-to first and last names,
//! which our row keeps as one holder name.

use super::transaction::Kind;
use crate::db::{Conn, Sql};
use crate::error::ApiResult;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub kind: Kind,
    pub invoice_sent: bool,
    /// `billTo.firstName` and `billTo.lastName`, as sent.
    pub first_name: Option<String>,
    pub last_name: Option<String>,
}

/// Records a new payment's request; written with its number, once.
pub fn record(conn: &mut dyn Conn, transaction_id: &str, sent: &Sent) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "INSERT INTO emulator_transactions (transaction_id, transaction_type, invoice_sent, first_name, last_name) \
         VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        vec![
            transaction_id.into(),
            sent.kind.api_name().into(),
            i64::from(sent.invoice_sent).into(),
            sent.first_name.clone().into(),
            sent.last_name.clone().into(),
        ],
    ))?;
    Ok(())
}

/// What was sent for a transaction; `None` for one the emulator did not
/// make (or made before this was recorded).
pub fn of(conn: &mut dyn Conn, transaction_id: &str) -> ApiResult<Option<Sent>> {
    let row = conn.query_one(&Sql::with(
        "SELECT transaction_type, invoice_sent, first_name, last_name FROM emulator_transactions \
         WHERE transaction_id = ?",
        vec![transaction_id.into()],
    ))?;
    let name = |v: Option<&crate::db::Value>| v.and_then(|v| v.as_str()).map(str::to_string);
    Ok(row.and_then(|r| {
        Some(Sent {
            kind: Kind::parse(r.first()?.as_str()?)?,
            invoice_sent: r.get(1)?.as_int()? == 1,
            first_name: name(r.get(2)),
            last_name: name(r.get(3)),
        })
    }))
}
