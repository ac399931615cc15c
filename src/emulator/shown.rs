//! Which of our transactions the emulator shows, by what number, and
//! what it shows beside each row. One place for getTransactionDetails and
//! the transaction lists, so a list never shows a transaction its details
//! would not, nor the other way round.
//!
//! Shown: card transactions the caller's tenant scope holds (their API
//! has no tender of ours but cards: `payment.creditCard` is all it
//! takes), of the types their transaction types can say (our sales and
//! refunds: authorizations, captures, forces and voids are sales of ours),
//! whose outcome is recorded (not a payment still at the processor).

use super::arb::{self, Payment};
use super::numbers::{self, Kind as Number};
use super::sent;
use super::transaction::DetailFacts;
use crate::billing::transitions;
use crate::db::{Conn, Sql};
use crate::engine::query::{self, TenantScope};
use crate::engine::record::Record;
use crate::error::ApiResult;
use crate::payments::state::DONE;
use crate::processor::{ReasonCode, TypeId};
use crate::resources::{CONTACT, RECURRING, TRANSACTION};

/// Narrows a scoped select of transactions (alias `t`) to those shown.
pub fn push_shown(sql: &mut Sql) {
    sql.push(" AND t.payment_method = ")
        .bind("cc")
        .push(" AND t.type_id IN (")
        .bind_list([TypeId::Sale.code() as i64, TypeId::Refund.code() as i64])
        .push(") AND t.state = ")
        .bind(DONE);
}

/// The shown transaction a number names, in the caller's scope.
pub fn find(conn: &mut dyn Conn, scope: &TenantScope, number: &str) -> ApiResult<Option<Record>> {
    let Some(id) = numbers::record_of(conn, Number::Transaction, number)? else {
        return Ok(None);
    };
    Ok(records(conn, scope, &[id])?.pop())
}

/// The shown transactions of these ids in the caller's scope, in the
/// order of the ids.
pub fn records(conn: &mut dyn Conn, scope: &TenantScope, ids: &[String]) -> ApiResult<Vec<Record>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = query::select(&TRANSACTION, scope);
    sql.push(" AND t.id IN (")
        .bind_list(ids.iter().cloned())
        .push(")");
    push_shown(&mut sql);
    let mut found: Vec<Record> = conn
        .query(&sql)?
        .into_iter()
        .map(|row| Record::from_row(&TRANSACTION, row))
        .collect();
    found.sort_by_key(|r| ids.iter().position(|id| id == r.id()));
    Ok(found)
}

/// How much a caller is shown of each transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// A list's summary: the number, what was sent, the names and the
    /// subscription.
    Summary,
    /// getTransactionDetails: also the referenced transaction, the batch,
    /// Level 3 data and a split tender.
    Details,
}

/// What is shown beside a transaction's row. Numbers the transaction
/// (and its subscription, reference and batch) on first use.
pub fn facts(conn: &mut dyn Conn, scope: &TenantScope, tx: &Record, depth: Depth) -> ApiResult<DetailFacts> {
    let sent = sent::of(conn, tx.id())?;
    let sent_names = sent
        .as_ref()
        .filter(|s| s.first_name.is_some() || s.last_name.is_some())
        .map(|s| {
            (
                s.first_name.clone().unwrap_or_default(),
                s.last_name.clone().unwrap_or_default(),
            )
        });
    let names = match (sent_names, tx.text("contact_id")) {
        (Some(names), _) => Some(names),
        (None, Some(contact_id)) => query::find(conn, &CONTACT, scope, contact_id)?.map(|c| {
            (
                c.text("first_name").unwrap_or_default().to_string(),
                c.text("last_name").unwrap_or_default().to_string(),
            )
        }),
        (None, None) => None,
    };
    let recurring = match tx.text("recurring_id") {
        Some(recurring_id) => query::find(conn, &RECURRING, scope, recurring_id)?,
        None => None,
    };
    let subscription = match recurring {
        Some(recurring) => {
            let payments = subscription_payments(conn, &recurring)?;
            let own = payments.iter().position(|(id, _)| id == tx.id());
            let numbers: Vec<_> = payments.into_iter().map(|(_, p)| p).collect();
            match own {
                Some(i) => Some((
                    numbers::number_of(conn, Number::Subscription, recurring.id())?,
                    arb::pay_numbers(&numbers)[i].0,
                )),
                None => None,
            }
        }
        None => None,
    };
    let mut facts = DetailFacts {
        trans_id: numbers::number_of(conn, Number::Transaction, tx.id())?,
        sent,
        names,
        subscription,
        ..DetailFacts::default()
    };
    if depth == Depth::Summary {
        return Ok(facts);
    }
    facts.ref_trans_id = match tx.text("previous_transaction_id") {
        Some(p) => Some(numbers::number_of(conn, Number::Transaction, p)?),
        None => None,
    };
    facts.batch = match tx.text("transaction_batch_id") {
        Some(batch_id) => {
            let closed = conn
                .query_one(&Sql::with(
                    "SELECT batch_close_ts FROM transaction_batches WHERE id = ?",
                    vec![batch_id.into()],
                ))?
                .and_then(|r| r.first().and_then(|v| v.as_int()));
            Some((numbers::number_of(conn, Number::Batch, batch_id)?, closed))
        }
        None => None,
    };
    facts.level3 = conn
        .query_one(&Sql::with(
            "SELECT level3_data FROM transaction_level3s WHERE transaction_id = ?",
            vec![tx.id().into()],
        ))?
        .and_then(|r| r.first().and_then(|v| v.as_str()).map(str::to_string))
        .and_then(|data| serde_json::from_str(&data).ok());
    // A partial approval opened a split tender (numbered when answered).
    facts.split_tender = if tx.int("reason_code_id") == Some(i64::from(ReasonCode::PARTIAL_APPROVAL.code())) {
        Some(numbers::number_of(conn, Number::SplitTender, tx.id())?)
    } else {
        None
    };
    Ok(facts)
}

/// A recurring's finished runs (a subscription's payments), oldest
/// first, each by our id and as their ARB payment. A run's billing period
/// is the last one whose date (in the recurring location's time zone) is
/// on or before the day it ran: the scheduler runs a period on its date
/// and retries a declined one before the next period's.
pub fn subscription_payments(conn: &mut dyn Conn, recurring: &Record) -> ApiResult<Vec<(String, Payment)>> {
    let plan = transitions::Plan::of(recurring);
    let tz = conn
        .query_one(&Sql::with(
            "SELECT tz FROM locations WHERE id = ?",
            vec![recurring.text("location_id").unwrap_or_default().into()],
        ))?
        .and_then(|r| r.into_iter().next())
        .and_then(|v| v.as_str().and_then(|t| t.parse::<chrono_tz::Tz>().ok()))
        .unwrap_or(chrono_tz::UTC);
    let rows = conn.query(&Sql::with(
        "SELECT id, timestamp, status_id, reason_code_id, created_ts FROM transactions \
         WHERE recurring_id = ? AND state = ? ORDER BY created_ts, id",
        vec![recurring.id().into(), DONE.into()],
    ))?;
    let mut payments = Vec::new();
    for row in rows {
        let id = row[0].as_str().unwrap_or_default().to_string();
        let ran_on = crate::billing::calendar::local_date(row[4].as_int().unwrap_or(0), tz);
        let payment = Payment {
            trans_id: numbers::number_of(conn, Number::Transaction, &id)?,
            timestamp: row[1].as_str().unwrap_or_default().to_string(),
            status_id: row[2].as_int().unwrap_or(0),
            reason_code_id: row[3].as_int().unwrap_or(0),
            period: plan.interval.periods_through(plan.anchor, ran_on) - 1,
        };
        payments.push((id, payment));
    }
    Ok(payments)
}
