//! Velocity limits of a product transaction (`velocity_settings`, 0 = no
//! limit). Three classes of items are counted: debits (card sales,
//! authorizations and forces, ACH debits), refunds and credits. Days and
//! months are those of the transaction's location time zone; items in
//! flight count, declined and voided ones do not.
//!
//! `*_hold_days`: a refund is refused until the original transaction is
//! `refund_hold_days` days old; an ACH debit's effective date is at least
//! `debit_hold_days` days ahead.

use crate::db::{Conn, Sql};
use crate::error::ApiResult;
use crate::processor::{ReasonCode, StatusId, TypeId};
use chrono::{Datelike, NaiveDate, TimeZone};
use chrono_tz::Tz;
use serde_json::Value as Json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Debit,
    Refund,
    Credit,
}

impl Class {
    fn prefix(self) -> &'static str {
        match self {
            Class::Debit => "debit",
            Class::Refund => "refund",
            Class::Credit => "credit",
        }
    }
    /// The `type_id`s the class counts.
    fn types(self) -> &'static [TypeId] {
        match self {
            Class::Debit => &[TypeId::Sale, TypeId::Debit],
            Class::Refund => &[TypeId::Refund],
            Class::Credit => &[TypeId::Credit],
        }
    }
}

/// A limit that a new item would break.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    pub setting: String,
    pub limit: i64,
    pub reason: ReasonCode,
    pub message: String,
}

/// A count limit (items, days); 0 when absent or unreadable.
fn limit(settings: &Json, name: &str) -> i64 {
    match &settings[name] {
        Json::Number(n) => n.as_i64().unwrap_or(0),
        Json::String(s) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

/// Amount limits are whole currency units in the settings.
fn amount_limit(settings: &Json, name: &str) -> i64 {
    match &settings[name] {
        Json::Number(n) => n.as_i64().map(|v| v.saturating_mul(100)).unwrap_or(0),
        Json::String(s) => crate::money::parse_text(s, i64::MAX).unwrap_or(0),
        _ => 0,
    }
}

/// Whether any limit of the class is set (so the caller may lock).
pub fn any_limit(settings: &Json, class: Class) -> bool {
    let p = class.prefix();
    ["items_per_day", "items_per_month"]
        .iter()
        .any(|s| limit(settings, &format!("{p}_{s}")) > 0)
        || ["daily_aggregate", "monthly_aggregate", "largest_item"]
            .iter()
            .any(|s| amount_limit(settings, &format!("{p}_{s}")) > 0)
}

/// Start of the day and of the month containing `now`, in `tz`.
fn periods(now: i64, tz: Tz) -> (i64, i64) {
    let local = tz.timestamp_opt(now, 0).single().map(|t| t.date_naive());
    let Some(date) = local else {
        return (now - 86_400, now - 31 * 86_400);
    };
    let start = |d: NaiveDate| {
        tz.from_local_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default())
            .earliest()
            .map(|t| t.timestamp())
            .unwrap_or(now)
    };
    let month = NaiveDate::from_ymd_opt(date.year(), date.month(), 1).unwrap_or(date);
    (start(date), start(month))
}

/// (items, amount in cents) of the class since `since`.
fn counted(
    conn: &mut dyn Conn,
    product_transaction_id: &str,
    class: Class,
    since: i64,
) -> ApiResult<(i64, i64)> {
    let mut sql = Sql::new(
        "SELECT COUNT(*), CAST(COALESCE(SUM(transaction_amount), 0) AS BIGINT) FROM transactions WHERE product_transaction_id = ",
    );
    sql.bind(product_transaction_id.to_string())
        .push(" AND type_id IN (")
        .bind_list(class.types().iter().map(|t| t.code() as i64))
        .push(") AND created_ts >= ")
        .bind(since)
        .push(" AND (status_id IS NULL OR status_id NOT IN (")
        .bind(StatusId::Declined.code() as i64)
        .push(", ")
        .bind(StatusId::Voided.code() as i64)
        .push("))");
    let row = conn.query_one(&sql)?.unwrap_or_default();
    Ok((
        row.first().and_then(|v| v.as_int()).unwrap_or(0),
        row.get(1).and_then(|v| v.as_int()).unwrap_or(0),
    ))
}

/// The first limit a new item of `amount` cents would break.
pub fn check(
    conn: &mut dyn Conn,
    settings: &Json,
    product_transaction_id: &str,
    class: Class,
    amount: i64,
    now: i64,
    tz: Tz,
) -> ApiResult<Option<Breach>> {
    if !any_limit(settings, class) {
        return Ok(None);
    }
    let p = class.prefix();
    let largest = amount_limit(settings, &format!("{p}_largest_item"));
    if largest > 0 && amount > largest {
        return Ok(Some(Breach {
            setting: format!("{p}_largest_item"),
            limit: largest,
            reason: ReasonCode(1619),
            message: format!(
                "Velocity limit: the amount is above {p}_largest_item ({}).",
                crate::money::format(largest)
            ),
        }));
    }
    let (day, month) = periods(now, tz);
    for (since, period) in [(day, "day"), (month, "month")] {
        let (items, total) = counted(conn, product_transaction_id, class, since)?;
        let items_name = format!("{p}_items_per_{period}");
        let max_items = limit(settings, &items_name);
        if max_items > 0 && items + 1 > max_items {
            return Ok(Some(Breach {
                setting: items_name.clone(),
                limit: max_items,
                reason: ReasonCode::ACH_THROTTLE,
                message: format!("Velocity limit: {items_name} ({max_items}) reached."),
            }));
        }
        let aggregate_name = format!(
            "{p}_{}_aggregate",
            if period == "day" { "daily" } else { "monthly" }
        );
        let max_total = amount_limit(settings, &aggregate_name);
        if max_total > 0 && total + amount > max_total {
            return Ok(Some(Breach {
                setting: aggregate_name.clone(),
                limit: max_total,
                reason: ReasonCode(1619),
                message: format!(
                    "Velocity limit: {aggregate_name} ({}) would be exceeded.",
                    crate::money::format(max_total)
                ),
            }));
        }
    }
    Ok(None)
}

/// Whole days a refund must wait after its original (`refund_hold_days`).
pub fn refund_hold_days(settings: &Json) -> i64 {
    limit(settings, "refund_hold_days")
}

/// Days an ACH debit's effective date lies ahead (`debit_hold_days`).
pub fn debit_hold_days(settings: &Json) -> i64 {
    limit(settings, "debit_hold_days")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_read_whole_units() {
        let s =
            json!({"debit_largest_item": 50, "debit_items_per_day": "3", "refund_daily_aggregate": "12.50"});
        assert_eq!(amount_limit(&s, "debit_largest_item"), 5000);
        assert_eq!(limit(&s, "debit_items_per_day"), 3);
        assert_eq!(amount_limit(&s, "refund_daily_aggregate"), 1250);
        assert!(any_limit(&s, Class::Debit));
        assert!(!any_limit(&s, Class::Credit));
        // An amount limit below one unit is still a limit.
        assert!(any_limit(&json!({"credit_largest_item": "0.50"}), Class::Credit));
    }

    #[test]
    fn periods_follow_the_time_zone() {
        // 2024-03-15 03:00 UTC is still the 14th in New York.
        let now = 1_710_471_600;
        let (day, month) = periods(now, chrono_tz::America::New_York);
        assert_eq!(day, 1_710_388_800); // 2024-03-14 00:00 EDT
        assert_eq!(month, 1_709_269_200); // 2024-03-01 00:00 EST
        let (day_utc, _) = periods(now, chrono_tz::UTC);
        assert_eq!(day_utc, 1_710_460_800);
    }
}
