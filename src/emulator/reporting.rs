//! Their Transaction Reporting API on our batches and transactions:
//! getSettledBatchList, getBatchStatistics, getTransactionList (a settled
//! batch's transactions) and getUnsettledTransactionList.
//!
//! A batch of theirs is a settled batch of ours (`processing_status_id`
//! 2), numbered as getTransactionDetails numbers it; its settlement time
//! is our `batch_close_ts`. A transaction is one `shown` shows, in the
//! caller's scope: the lists show what getTransactionDetails would. What
//! their schema refuses (a value of the wrong type, a required element
//! missing) is their E00003; what their rules refuse (a date range) is
//! E00013.

use super::codes::{self, api};
use super::numbers::{self, Kind as Number};
use super::shown::{self, Depth};
use super::transaction;
use super::tree::{self, Out, NAMESPACE};
use crate::db::Conn;
use crate::engine::record::Record;
use crate::engine::{self, query, Cx};
use crate::error::ApiResult;
use crate::processor::{ProcessingStatus, StatusId, TypeId};
use crate::resources::{TRANSACTION, TRANSACTION_BATCH};
use chrono::{DateTime, NaiveDateTime};
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// A refusal: a top-level message code and its text.
pub type Refusal = (&'static str, String);

/// Their schema check of an element's value (E00003). The value itself
/// is never repeated.
fn invalid_value(element: &str, what: &str) -> Refusal {
    (
        api::UNREADABLE,
        format!("The '{NAMESPACE}:{element}' element is invalid: {what}"),
    )
}

/// Their schema check of a required element (E00003).
pub fn missing(method: &str, element: &str) -> Refusal {
    (
        api::UNREADABLE,
        format!(
            "The element '{method}' in namespace '{NAMESPACE}' has incomplete content. \
             List of possible elements expected: '{element}' in namespace '{NAMESPACE}'."
        ),
    )
}

/// Their rules on a valid value (E00013).
fn invalid(text: &str) -> Refusal {
    (api::INVALID_FIELD, text.to_string())
}

/// The text of an element sent, `Ok(None)` when it is not sent, and a
/// refusal when it is sent empty or as a list (their schema's value check
/// fails on both).
fn sent_text(body: &Map<String, Json>, path: &str, what: &str) -> Result<Option<String>, Refusal> {
    match (tree::at(body, path), tree::text(body, path)) {
        (None, _) => Ok(None),
        (Some(_), Some(text)) => Ok(Some(text)),
        (Some(_), None) => Err(invalid_value(path, what)),
    }
}

/// A `numericString` element: digits.
pub fn number(body: &Map<String, Json>, path: &str) -> Result<Option<String>, Refusal> {
    const WHAT: &str = "it must be digits (numericString).";
    match sent_text(body, path, WHAT)? {
        Some(n) if n.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
        Some(_) => Err(invalid_value(path, WHAT)),
        None => Ok(None),
    }
}

/// An `xs:boolean` element: true, false, 1 or 0.
pub fn boolean(body: &Map<String, Json>, path: &str) -> Result<Option<bool>, Refusal> {
    const WHAT: &str = "it must be true or false (boolean).";
    match sent_text(body, path, WHAT)?.as_deref() {
        Some("true" | "1") => Ok(Some(true)),
        Some("false" | "0") => Ok(Some(false)),
        Some(_) => Err(invalid_value(path, WHAT)),
        None => Ok(None),
    }
}

/// An `xs:dateTime` element as epoch seconds: with a zone (`Z`,
/// `+hh:mm`) as it says, without one as UTC, the time our answers call
/// local too.
pub fn date_time(body: &Map<String, Json>, path: &str) -> Result<Option<i64>, Refusal> {
    const WHAT: &str = "it must be a date and time such as 2030-01-31T23:59:59Z (dateTime).";
    let Some(text) = sent_text(body, path, WHAT)? else {
        return Ok(None);
    };
    DateTime::parse_from_rfc3339(&text)
        .map(|d| d.timestamp())
        .or_else(|_| {
            NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f").map(|d| d.and_utc().timestamp())
        })
        .map(Some)
        .map_err(|_| invalid_value(path, WHAT))
}

/// The settlement times a settled batch list covers, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub first: i64,
    pub last: i64,
}

/// Longest window a batch list may ask for: 31 days.
pub const LONGEST_WINDOW_SECS: i64 = 31 * 86_400;

/// `firstSettlementDate` and `lastSettlementDate`: both or neither (the
/// last 24 hours), the first not after the last, at most 31 days apart.
pub fn settlement_window(body: &Map<String, Json>, now: i64) -> Result<Window, Refusal> {
    let first = date_time(body, "firstSettlementDate")?;
    let last = date_time(body, "lastSettlementDate")?;
    let window = match (first, last) {
        (None, None) => Window {
            first: now - 86_400,
            last: now,
        },
        (Some(first), Some(last)) => Window { first, last },
        _ => {
            return Err(invalid(
                "firstSettlementDate and lastSettlementDate must be sent together.",
            ))
        }
    };
    if window.first > window.last {
        return Err(invalid(
            "firstSettlementDate must not be after lastSettlementDate.",
        ));
    }
    if window.last - window.first > LONGEST_WINDOW_SECS {
        return Err(invalid("The date range cannot exceed 31 days."));
    }
    Ok(window)
}

/// A transaction list's `sorting` and `paging`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listing {
    /// By transaction id (their number), else by submit time.
    pub by_id: bool,
    pub descending: bool,
    /// `paging.limit`: transactions per page, 1 to 1000.
    pub limit: usize,
    /// `paging.offset`: the page, from 1 (their offset counts pages of
    /// `limit`, not transactions), at most 100000.
    pub page: usize,
}

/// Without sorting, by submit time, oldest first; without paging, the
/// first 1000.
pub fn listing(body: &Map<String, Json>) -> Result<Listing, Refusal> {
    let mut listing = Listing {
        by_id: false,
        descending: false,
        limit: 1000,
        page: 1,
    };
    if tree::at(body, "sorting").is_some() {
        listing.by_id =
            match sent_text(body, "sorting.orderBy", "it must be id or submitTimeUTC.")?.as_deref() {
                Some("id") => true,
                Some("submitTimeUTC") => false,
                Some(_) => {
                    return Err(invalid_value(
                        "sorting.orderBy",
                        "it must be id or submitTimeUTC.",
                    ))
                }
                None => return Err(missing("sorting", "orderBy")),
            };
        listing.descending =
            boolean(body, "sorting.orderDescending")?.ok_or_else(|| missing("sorting", "orderDescending"))?;
    }
    if tree::at(body, "paging").is_some() {
        let bounded = |name: &str, max: usize| -> Result<usize, Refusal> {
            let path = format!("paging.{name}");
            let what = format!("it must be a whole number from 1 to {max}.");
            let text = sent_text(body, &path, &what)?.ok_or_else(|| missing("paging", name))?;
            text.parse::<usize>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| invalid_value(&path, &what))
        };
        listing.limit = bounded("limit", 1000)?;
        listing.page = bounded("offset", 100_000)?;
    }
    Ok(listing)
}

/// `status` of getUnsettledTransactionList: `any` (or none) is every
/// unsettled transaction; `pendingApproval` those held for the merchant's
/// review, which no card payment of ours is (their fraud filters hold
/// payments; ours decline or approve). `Ok(true)` for pendingApproval.
pub fn pending_approval_only(body: &Map<String, Json>) -> Result<bool, Refusal> {
    const WHAT: &str = "it must be any or pendingApproval.";
    match sent_text(body, "status", WHAT)?.as_deref() {
        None | Some("any") => Ok(false),
        Some("pendingApproval") => Ok(true),
        Some(_) => Err(invalid_value("status", WHAT)),
    }
}

// ---------------------------------------------------------------------
// Batches

/// The caller's settled batch a number names.
pub fn settled_batch(conn: &mut dyn Conn, cx: &Cx, number: &str) -> ApiResult<Option<Record>> {
    let Some(id) = numbers::record_of(conn, Number::Batch, number)? else {
        return Ok(None);
    };
    Ok(query::find(conn, &TRANSACTION_BATCH, &cx.scope, &id)?
        .filter(|b| b.int("processing_status_id") == Some(ProcessingStatus::Settled.code() as i64)))
}

/// The caller's batches settled within the window, oldest first, as their
/// `batch`es (with statistics when asked).
pub fn settled_batches(
    conn: &mut dyn Conn,
    cx: &Cx,
    window: Window,
    statistics: bool,
) -> ApiResult<Vec<Out>> {
    let mut sql = query::select(&TRANSACTION_BATCH, &cx.scope);
    sql.push(" AND t.processing_status_id = ")
        .bind(ProcessingStatus::Settled.code() as i64)
        .push(" AND t.batch_close_ts >= ")
        .bind(window.first)
        .push(" AND t.batch_close_ts <= ")
        .bind(window.last)
        .push(" ORDER BY t.batch_close_ts, t.id");
    let batches: Vec<Record> = conn
        .query(&sql)?
        .into_iter()
        .map(|row| Record::from_row(&TRANSACTION_BATCH, row))
        .collect();
    batches
        .iter()
        .map(|batch| batch_out(conn, cx, batch, statistics))
        .collect()
}

/// A settled batch as their `batchDetailsType`, in the schema's order.
pub fn batch_out(conn: &mut dyn Conn, cx: &Cx, batch: &Record, statistics: bool) -> ApiResult<Out> {
    let mut fields = vec![(
        "batchId",
        Out::text(numbers::number_of(conn, Number::Batch, batch.id())?.to_string()),
    )];
    if let Some(closed) = batch.int("batch_close_ts") {
        let (utc, local) = transaction::date_times(&crate::clock::timestamp_text(closed));
        fields.push(("settlementTimeUTC", Out::text(utc)));
        fields.push(("settlementTimeLocal", Out::text(local)));
    }
    fields.push(("settlementState", Out::text("settledSuccessfully")));
    fields.push(("paymentMethod", Out::text("creditCard")));
    if statistics {
        fields.push(("statistics", batch_statistics(conn, cx, batch.id())?));
    }
    Ok(Out::Node(fields))
}

/// Counts and amounts of one card brand in a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    charge_cents: i64,
    charges: i64,
    refund_cents: i64,
    refunds: i64,
    voids: i64,
    declines: i64,
}

/// A batch's `statistics`: one `statistic` per card brand of its shown
/// transactions (by brand name): charges and refunds as they settled,
/// voids and declines counted. Errors never enter a batch of ours.
fn batch_statistics(conn: &mut dyn Conn, cx: &Cx, batch_id: &str) -> ApiResult<Out> {
    let mut sql = query::select(&TRANSACTION, &cx.scope);
    sql.push(" AND t.transaction_batch_id = ").bind(batch_id);
    shown::push_shown(&mut sql);
    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    for row in conn.query(&sql)? {
        let tx = Record::from_row(&TRANSACTION, row);
        let tally = tallies
            .entry(codes::card_type(tx.text("account_type")))
            .or_default();
        let cents = tx.int("transaction_amount").unwrap_or(0);
        match (
            tx.int("status_id").map(|s| s as u16),
            tx.int("type_id").map(|t| t as u16),
        ) {
            (Some(s), _) if s == StatusId::Voided.code() => tally.voids += 1,
            (Some(s), _) if s == StatusId::Declined.code() => tally.declines += 1,
            (_, Some(t)) if t == TypeId::Refund.code() => {
                tally.refunds += 1;
                tally.refund_cents += cents;
            }
            _ => {
                tally.charges += 1;
                tally.charge_cents += cents;
            }
        }
    }
    let items = tallies
        .into_iter()
        .map(|(brand, t)| {
            Out::Node(vec![
                ("accountType", Out::text(brand)),
                ("chargeAmount", Out::text(crate::money::format(t.charge_cents))),
                ("chargeCount", Out::text(t.charges.to_string())),
                ("refundAmount", Out::text(crate::money::format(t.refund_cents))),
                ("refundCount", Out::text(t.refunds.to_string())),
                ("voidCount", Out::text(t.voids.to_string())),
                ("declineCount", Out::text(t.declines.to_string())),
                ("errorCount", Out::text("0")),
            ])
        })
        .collect();
    Ok(Out::List("statistic", items))
}

// ---------------------------------------------------------------------
// Transactions

/// The transactions of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Which {
    /// Those of a settled batch (our id).
    Batch(String),
    /// Those in no settled batch: not yet in a batch (authorizations,
    /// declines), or in one that has not settled.
    Unsettled,
}

/// One page of a list, as their `transaction`s, and how many the whole
/// list holds. By id is by their number: every transaction of the list
/// is numbered first (once; a number is kept).
pub fn transactions(
    conn: &mut dyn Conn,
    cx: &Cx,
    which: &Which,
    listing: Listing,
) -> ApiResult<(Vec<Out>, usize)> {
    let mut sql = query::select_columns(&TRANSACTION, &cx.scope, "t.id");
    shown::push_shown(&mut sql);
    match which {
        Which::Batch(batch_id) => {
            sql.push(" AND t.transaction_batch_id = ").bind(batch_id.clone());
        }
        Which::Unsettled => {
            sql.push(
                " AND NOT EXISTS (SELECT 1 FROM transaction_batches b \
                 WHERE b.id = t.transaction_batch_id AND b.processing_status_id = ",
            )
            .bind(ProcessingStatus::Settled.code() as i64)
            .push(")");
        }
    }
    sql.push(" ORDER BY t.created_ts, t.id");
    let ids: Vec<String> = conn
        .query(&sql)?
        .into_iter()
        .filter_map(|row| row.first().and_then(|v| v.as_str()).map(str::to_string))
        .collect();
    let total = ids.len();
    let mut ordered = if listing.by_id {
        let mut numbered = Vec::with_capacity(total);
        for id in ids {
            numbered.push((numbers::number_of(conn, Number::Transaction, &id)?, id));
        }
        numbered.sort();
        numbered.into_iter().map(|(_, id)| id).collect()
    } else {
        ids
    };
    if listing.descending {
        ordered.reverse();
    }
    let page: Vec<String> = ordered
        .into_iter()
        .skip((listing.page - 1).saturating_mul(listing.limit))
        .take(listing.limit)
        .collect();
    let mut out = Vec::with_capacity(page.len());
    for tx in shown::records(conn, &cx.scope, &page)? {
        let facts = shown::facts(conn, &cx.scope, &tx, Depth::Summary)?;
        out.push(transaction::summary(
            &Json::Object(engine::render(cx, &tx)),
            &facts,
        ));
    }
    Ok((out, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn settlement_windows() {
        let now = 2_000_000_000;
        assert_eq!(
            settlement_window(&body(json!({})), now),
            Ok(Window {
                first: now - 86_400,
                last: now
            }),
            "the last 24 hours"
        );
        let w = settlement_window(
            &body(json!({"firstSettlementDate": "2030-01-01T00:00:00Z",
                "lastSettlementDate": "2030-01-31T12:00:00.000+02:00"})),
            now,
        )
        .unwrap();
        assert_eq!((w.first, w.last), (1_893_456_000, 1_896_084_000));
        // Without a zone: UTC.
        let w = settlement_window(
            &body(json!({"firstSettlementDate": "2030-01-01T00:00:00",
                "lastSettlementDate": "2030-01-02T00:00:00"})),
            now,
        )
        .unwrap();
        assert_eq!(w.first, 1_893_456_000);
        let code = |v: Json| settlement_window(&body(v), now).unwrap_err().0;
        assert_eq!(
            code(json!({"firstSettlementDate": "2030-01-01T00:00:00Z"})),
            "E00013"
        );
        assert_eq!(
            code(
                json!({"firstSettlementDate": "2030-01-01T00:00:00Z", "lastSettlementDate": "2030-02-01T00:00:01Z"})
            ),
            "E00013",
            "more than 31 days"
        );
        assert_eq!(
            code(
                json!({"firstSettlementDate": "2030-01-02T00:00:00Z", "lastSettlementDate": "2030-01-01T00:00:00Z"})
            ),
            "E00013"
        );
        let (code, text) = settlement_window(
            &body(json!({"firstSettlementDate": "4111111111111111", "lastSettlementDate": "2030-01-01T00:00:00Z"})),
            now,
        )
        .unwrap_err();
        assert_eq!(code, "E00003");
        assert!(!text.contains("4111"), "{text}");
        assert!(
            settlement_window(
                &body(json!({"firstSettlementDate": "2030-01-01T00:00:00Z", "lastSettlementDate": "2030-02-01T00:00:00Z"})),
                now
            )
            .is_ok(),
            "31 days exactly"
        );
    }

    #[test]
    fn sorting_and_paging() {
        assert_eq!(
            listing(&body(json!({}))),
            Ok(Listing {
                by_id: false,
                descending: false,
                limit: 1000,
                page: 1
            })
        );
        assert_eq!(
            listing(&body(
                json!({"sorting": {"orderBy": "id", "orderDescending": "true"},
                "paging": {"limit": "10", "offset": "2"}})
            )),
            Ok(Listing {
                by_id: true,
                descending: true,
                limit: 10,
                page: 2
            })
        );
        let code = |v: Json| listing(&body(v)).unwrap_err().0;
        for bad in [
            json!({"paging": {"limit": "0", "offset": "1"}}),
            json!({"paging": {"limit": "1001", "offset": "1"}}),
            json!({"paging": {"limit": "10", "offset": "100001"}}),
            json!({"paging": {"limit": "10"}}),
            json!({"sorting": {"orderBy": "amount", "orderDescending": "false"}}),
            json!({"sorting": {"orderBy": "id"}}),
            json!({"sorting": {"orderBy": "id", "orderDescending": "maybe"}}),
        ] {
            assert_eq!(code(bad.clone()), "E00003", "{bad}");
        }
    }

    #[test]
    fn numbers_and_flags_are_checked_as_their_schema_checks_them() {
        assert_eq!(
            number(&body(json!({"batchId": "123"})), "batchId"),
            Ok(Some("123".into()))
        );
        assert_eq!(number(&body(json!({})), "batchId"), Ok(None));
        assert_eq!(
            number(&body(json!({"batchId": ""})), "batchId").unwrap_err().0,
            "E00003"
        );
        assert_eq!(
            number(&body(json!({"batchId": "12a"})), "batchId").unwrap_err().0,
            "E00003"
        );
        assert_eq!(boolean(&body(json!({"f": true})), "f"), Ok(Some(true)));
        assert_eq!(boolean(&body(json!({"f": "0"})), "f"), Ok(Some(false)));
        assert_eq!(boolean(&body(json!({"f": "yes"})), "f").unwrap_err().0, "E00003");
        assert_eq!(
            pending_approval_only(&body(json!({"status": "pendingApproval"}))),
            Ok(true)
        );
        assert_eq!(pending_approval_only(&body(json!({"status": "any"}))), Ok(false));
        assert_eq!(
            pending_approval_only(&body(json!({"status": "held"})))
                .unwrap_err()
                .0,
            "E00003"
        );
    }
}
