//! Quick invoices (reference 6.9): what an invoice owes, what its
//! payments have paid, when its reminders fall due and what a payment
//! through its pay page may be. The `quickinvoice` resource is declared in
//! `resources::quickinvoices`; mail is written by [`mail`]; the pay page
//! is served by `http::quickinvoices` and pays through `payments`.
//!
//! Statuses and what counts (ADR 0017):
//! - `status_id` (the reference's values): 1 open, 0 closed (paid in
//!   full, `is_active` 0, or past its `expire_date`).
//! - `payment_status_id` (the reference's values): 1 unpaid, 2 paid (in
//!   full or more), 3 partially paid.
//! - A payment pays its goods: a card's surcharge is not counted.
//! - A payment counts while it is approved or on its way (card sales
//!   101, ACH debits 131 to 134); voids, declines, returns and rejects do
//!   not. Refunds are the merchant's business and leave the invoice as is.

pub mod attachments;
pub mod mail;

use crate::billing::calendar::{local_midnight, parse_date};
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::money::Money;
use chrono::Days;
use chrono_tz::Tz;
use serde_json::{Map, Value as Json};

/// `status_id`, the reference's values: open (payable) or closed (paid
/// in full, inactive or expired).
pub const STATUS_OPEN: i64 = 1;
pub const STATUS_CLOSED: i64 = 0;
/// `payment_status_id`, the reference's values (an overpaid invoice is
/// paid).
pub const PAYMENT_UNPAID: i64 = 1;
pub const PAYMENT_PAID: i64 = 2;
pub const PAYMENT_PARTIAL: i64 = 3;

/// The transaction statuses that count as paid.
pub const PAID_STATUSES: &[i64] = &[101, 131, 132, 133, 134];

/// The largest amount a single payment may be by default (9999999.99).
pub const DEFAULT_MAX_PAYMENT: i64 = 999_999_999;

/// Reminders go out at this hour of the location's day.
const REMINDER_HOUR_S: i64 = 9 * 3600;

/// Reads `item_list`: an object of item name to amount (a number or a
/// numeric string). Answers the items in order with their cents.
pub fn items(item_list: &Json) -> Result<Vec<(String, i64)>, String> {
    let Json::Object(map) = item_list else {
        return Err("item_list must be an object of item name to amount.".into());
    };
    if map.is_empty() {
        return Err("item_list needs at least one item.".into());
    }
    let mut out = Vec::with_capacity(map.len());
    for (name, amount) in map {
        if name.trim().is_empty() {
            return Err("item_list names cannot be blank.".into());
        }
        let cents = crate::money::parse(amount, 99_999_999_999)
            .map_err(|m| format!("The amount of item '{name}' {m}."))?;
        out.push((name.clone(), cents));
    }
    Ok(out)
}

/// The sum of the items.
pub fn amount_due(item_list: &Json) -> Result<i64, String> {
    items(item_list)?
        .iter()
        .try_fold(0i64, |sum, (_, c)| sum.checked_add(*c))
        .ok_or_else(|| "item_list adds up to more than an amount can be.".into())
}

/// What a payment pays an invoice: its amount without the card's
/// surcharge (a surcharge outside 0 to the amount, which no payment can
/// store now, counts as none).
const GOODS: &str = "CASE WHEN surcharge_amount BETWEEN 0 AND transaction_amount \
     THEN transaction_amount - surcharge_amount ELSE transaction_amount END";

/// What the invoice's payments have paid, in cents, and how many payments
/// of any status are linked to it. A card's surcharge pays the card's
/// cost, not the invoice: it is not counted.
pub fn paid(conn: &mut dyn Conn, invoice_id: &str) -> ApiResult<(i64, i64)> {
    let mut sql = Sql::new("SELECT CAST(COALESCE(SUM(CASE WHEN type_id IN (20, 50) AND status_id IN (");
    sql.bind_list(PAID_STATUSES.iter().copied())
        .push(") THEN ")
        .push(GOODS)
        .push(" ELSE 0 END), 0) AS BIGINT), COUNT(*) FROM transactions WHERE quick_invoice_id = ")
        .bind(invoice_id.to_string());
    let row = conn.query_one(&sql)?;
    Ok(row
        .map(|r| (r[0].as_int().unwrap_or(0), r[1].as_int().unwrap_or(0)))
        .unwrap_or((0, 0)))
}

/// The balance fields of an invoice that owes `amount_due` and has been
/// paid `paid`.
pub fn balance(amount_due: i64, paid: i64, active: bool, expired: bool) -> (i64, i64, i64) {
    let remaining = (amount_due - paid).max(0);
    let payment_status = if paid == 0 {
        PAYMENT_UNPAID
    } else if paid < amount_due {
        PAYMENT_PARTIAL
    } else {
        PAYMENT_PAID
    };
    let paid_in_full = paid >= amount_due && amount_due > 0;
    let status = if paid_in_full || !active || expired {
        STATUS_CLOSED
    } else {
        STATUS_OPEN
    };
    (remaining, payment_status, status)
}

/// Whether `expire_date` has passed on the location's `today`.
pub fn expired(record: &Record, today: &str) -> bool {
    record.text("expire_date").is_some_and(|e| e < today)
}

/// The caller an invoice's pay link pays as: the user who created it
/// (ADR 0017), while active and allowed to take payments; `None` once
/// that user is disabled, deleted or lost the permission (the link then
/// takes no payment, and no mail offers it).
pub fn link_payer(conn: &mut dyn Conn, created_user_id: &str) -> ApiResult<Option<crate::auth::Caller>> {
    match crate::auth::caller_of_user(conn, None, created_user_id) {
        Ok(caller) if caller.perms.allows("transactions.create") => Ok(Some(caller)),
        Ok(_) | Err(ApiError::Unauthorized(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether invoice `r`'s pay link can take a payment now, as far as its
/// user goes (see [`link_payer`]).
fn link_works(conn: &mut dyn Conn, r: &Record) -> ApiResult<bool> {
    match r.text("created_user_id") {
        Some(user) => Ok(link_payer(conn, user)?.is_some()),
        None => Ok(false),
    }
}

/// Sets an invoice's balance fields from its payments and its next
/// reminder (the invoice as the record `r` holds it).
pub fn refresh(conn: &mut dyn Conn, r: &mut Record, tz: Tz, now: i64) -> ApiResult<()> {
    let (paid, _) = paid(conn, r.id())?;
    let today = crate::clock::date_text(now, tz);
    let (remaining, payment_status, status) = balance(
        r.int("amount_due").unwrap_or(0),
        paid,
        r.int("is_active") != Some(0),
        expired(r, &today),
    );
    r.set("remaining_balance", remaining);
    r.set("payment_status_id", payment_status);
    r.set("status_id", status);
    Ok(())
}

/// Locks invoice `id` for the rest of the write job on PostgreSQL (SQLite
/// has one writer): what its payments and files add up to is read and
/// written by one job at a time.
pub fn lock(conn: &mut dyn Conn, id: &str) -> ApiResult<()> {
    if conn.dialect() == crate::db::Dialect::Postgres {
        conn.query(&Sql::with(
            "SELECT id FROM quick_invoices WHERE id = ? FOR UPDATE",
            vec![id.into()],
        ))?;
    }
    Ok(())
}

/// Locks payment `id` (a transaction) for the rest of the write job on
/// PostgreSQL, before its invoice (the order a payment's follow-up takes
/// them in): which invoice it pays is read and changed under it.
pub fn lock_payment(conn: &mut dyn Conn, id: &str) -> ApiResult<()> {
    if conn.dialect() == crate::db::Dialect::Postgres {
        conn.query(&Sql::with(
            "SELECT id FROM transactions WHERE id = ? FOR UPDATE",
            vec![id.into()],
        ))?;
    }
    Ok(())
}

/// Links payment `tx` to invoice `invoice_id` (or unlinks it, `None`)
/// as any update of a transaction is made: with its `modified_ts`, its
/// change log entry and its UPDATE event (a postback), so a receiver that
/// ties payments to invoices learns of it. The invoice's balance is the
/// caller's to refresh.
pub fn link_payment(
    cx: &crate::engine::Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    invoice_id: Option<&str>,
) -> ApiResult<Record> {
    let mut linked = tx.clone();
    linked.set(
        "quick_invoice_id",
        crate::db::Value::from(invoice_id.map(str::to_string)),
    );
    crate::engine::save_record(cx, conn, tx, linked)
}

/// Writes what [`refresh`] computes for the stored invoice `id`, outside
/// the generic update (a payment, addTransaction, removeTransaction).
pub fn refresh_stored(conn: &mut dyn Conn, id: &str, now: i64) -> ApiResult<Option<Record>> {
    lock(conn, id)?;
    let Some(mut r) = crate::engine::query::find_unscoped(conn, &crate::resources::QUICK_INVOICE, id)? else {
        return Ok(None);
    };
    let (tz, _) = crate::billing::location_zone(conn, r.text("location_id").unwrap_or_default())?;
    refresh(conn, &mut r, tz, now)?;
    let remind = next_reminder(&r, tz, now);
    conn.execute(&Sql::with(
        "UPDATE quick_invoices SET remaining_balance = ?, payment_status_id = ?, status_id = ?, remind_ts = ?, \
         modified_ts = ? WHERE id = ?",
        vec![
            r.int("remaining_balance").into(),
            r.int("payment_status_id").into(),
            r.int("status_id").into(),
            remind.into(),
            now.into(),
            id.into(),
        ],
    ))?;
    r.set("modified_ts", now);
    Ok(Some(r))
}

/// Brings an invoice up to date after a change to one of its payments:
/// its balance always, and a thank-you for a new payment that counts.
pub fn payment_changed(
    cx: &crate::engine::Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    new_payment: bool,
) -> ApiResult<()> {
    let Some(invoice_id) = tx.text("quick_invoice_id") else {
        return Ok(());
    };
    let Some(invoice) = refresh_stored(conn, invoice_id, cx.now)? else {
        return Ok(());
    };
    let counts = tx.int("status_id").is_some_and(|s| PAID_STATUSES.contains(&s));
    if new_payment && counts {
        let link = link_of(&cx.public_url, &invoice);
        mail::queue(
            conn,
            cx.now,
            &invoice,
            mail::Kind::Thanks,
            &link,
            tx.int("transaction_amount"),
        )?;
    }
    Ok(())
}

/// Writes the reminder of invoice `id` that is due at `now` (its
/// location's time) and schedules the next one. Answers whether a
/// message was written.
pub fn remind(conn: &mut dyn Conn, id: &str, now: i64, public_url: &str) -> ApiResult<bool> {
    let Some(mut r) = crate::engine::query::find_unscoped(conn, &crate::resources::QUICK_INVOICE, id)? else {
        return Ok(false);
    };
    let (tz, _) = crate::billing::location_zone(conn, r.text("location_id").unwrap_or_default())?;
    refresh(conn, &mut r, tz, now)?;
    // A link that cannot take the payment is not mailed again.
    let sent = if r.int("status_id") == Some(STATUS_OPEN) && link_works(conn, &r)? {
        let today = crate::billing::calendar::local_date(now, tz);
        let link = link_of(public_url, &r);
        mail::queue(conn, now, &r, reminder_kind(&r, today), &link, None)?
    } else {
        false
    };
    conn.execute(&Sql::with(
        "UPDATE quick_invoices SET remind_ts = ?, status_id = ? WHERE id = ?",
        vec![
            next_reminder(&r, tz, now).into(),
            r.int("status_id").into(),
            id.into(),
        ],
    ))?;
    Ok(sent)
}

/// The reminder days of an invoice around its due date: before (days
/// before), on (0), after (days after), in time order.
fn reminder_dates(r: &Record) -> Vec<chrono::NaiveDate> {
    let Some(due) = r.text("due_date").and_then(parse_date) else {
        return Vec::new();
    };
    let mut dates = Vec::new();
    if let Some(before) = r.int("notification_days_before_due_date").filter(|d| *d > 0) {
        dates.extend(due.checked_sub_days(Days::new(before as u64)));
    }
    if r.int("notification_on_due_date") == Some(1) {
        dates.push(due);
    }
    if let Some(after) = r.int("notification_days_after_due_date").filter(|d| *d > 0) {
        dates.extend(due.checked_add_days(Days::new(after as u64)));
    }
    dates
}

/// The location-time second after `now` at which an open invoice next
/// needs the scheduler (`remind_ts`): its next reminder (only invoices
/// with an address are reminded) or the start of the day after its
/// `expire_date`, when [`remind`] finds it expired and sets status 3, so
/// the status is true without a change to the invoice.
pub fn next_reminder(r: &Record, tz: Tz, now: i64) -> Option<i64> {
    if r.int("status_id") != Some(STATUS_OPEN) {
        return None;
    }
    let reminder = reminder_dates(r)
        .into_iter()
        .map(|d| local_midnight(d, tz) + REMINDER_HOUR_S)
        .find(|ts| *ts > now)
        .filter(|_| r.text("email").is_some_and(|e| !e.is_empty()));
    let expiry = r
        .text("expire_date")
        .and_then(parse_date)
        .and_then(|d| d.succ_opt())
        .map(|d| local_midnight(d, tz))
        .filter(|ts| *ts > now);
    [reminder, expiry].into_iter().flatten().min()
}

/// Which reminder a date is, for its wording.
pub fn reminder_kind(r: &Record, today: chrono::NaiveDate) -> mail::Kind {
    match r.text("due_date").and_then(parse_date) {
        Some(due) if today < due => mail::Kind::Upcoming,
        Some(due) if today == due => mail::Kind::DueToday,
        _ => mail::Kind::Overdue,
    }
}

/// Checks a payment of `amount` (cents) made through the pay page against
/// the invoice's rules.
pub fn check_payment(r: &Record, amount: i64, today: &str) -> Result<(), FieldErrors> {
    let mut errors = FieldErrors::new();
    let remaining = r.int("remaining_balance").unwrap_or(0);
    let text = |c: i64| Money::from_cents(c).to_text();
    if r.int("is_active") == Some(0) || expired(r, today) {
        errors.add("quick_invoice", "This invoice can no longer be paid.");
    } else if r.int("status_id") == Some(STATUS_CLOSED) && r.int("payment_status_id") == Some(PAYMENT_PAID) {
        errors.add("quick_invoice", "This invoice is paid in full.");
    } else if r.int("status_id") == Some(STATUS_CLOSED) {
        errors.add("quick_invoice", "This invoice can no longer be paid.");
    } else if amount <= 0 {
        errors.add("transaction_amount", "The amount must be above zero.");
    } else {
        let min = r.int("single_payment_min_amount").unwrap_or(0);
        let max = r.int("single_payment_max_amount").unwrap_or(DEFAULT_MAX_PAYMENT);
        let overpay = r.int("allow_overpayment") == Some(1);
        let partial = r.int("allow_partial_pay") == Some(1);
        if !partial && amount < remaining {
            errors.add(
                "transaction_amount",
                format!("This invoice is paid in one payment of {}.", text(remaining)),
            );
        } else if amount < min.min(remaining) {
            errors.add(
                "transaction_amount",
                format!("A payment must be at least {}.", text(min)),
            );
        } else if !overpay && amount > remaining {
            // Before the maximum: without overpayment the maximum is the
            // invoice's amount, and the balance is the sharper limit.
            errors.add(
                "transaction_amount",
                format!(
                    "A payment can be at most the remaining balance, {}.",
                    text(remaining)
                ),
            );
        } else if amount > max {
            errors.add(
                "transaction_amount",
                format!("A payment can be at most {}.", text(max)),
            );
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Checks a new payment of `amount` (without a surcharge) against invoice `id` inside the
/// payment's own write job, counting payments still pending, so that two
/// payments at once cannot both take the last of the balance (the row is
/// locked on PostgreSQL; SQLite has one writer).
pub fn check_new_payment(
    conn: &mut dyn Conn,
    id: &str,
    location_id: &str,
    amount: i64,
    now: i64,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    lock(conn, id)?;
    let Some(mut invoice) = crate::engine::query::find_unscoped(conn, &crate::resources::QUICK_INVOICE, id)?
        .filter(|r| r.text("location_id") == Some(location_id))
    else {
        errors.add("quick_invoice_id", "The invoice does not exist at this location.");
        return Ok(());
    };
    let mut sql = Sql::new(&format!(
        "SELECT CAST(COALESCE(SUM({GOODS}), 0) AS BIGINT) FROM transactions WHERE quick_invoice_id = "
    ));
    sql.bind(id.to_string())
        .push(" AND (state = 'pending' OR (type_id IN (20, 50) AND status_id IN (")
        .bind_list(PAID_STATUSES.iter().copied())
        .push(")))");
    let paid = conn.query_int(&sql)?;
    let (tz, _) = crate::billing::location_zone(conn, location_id)?;
    let today = crate::clock::date_text(now, tz);
    let (remaining, payment_status, status) = balance(
        invoice.int("amount_due").unwrap_or(0),
        paid,
        invoice.int("is_active") != Some(0),
        expired(&invoice, &today),
    );
    invoice.set("remaining_balance", remaining);
    invoice.set("payment_status_id", payment_status);
    invoice.set("status_id", status);
    if let Err(found) = check_payment(&invoice, amount, &today) {
        for (field, messages) in found.0 {
            for m in messages {
                errors.add(field.clone(), m);
            }
        }
    }
    Ok(())
}

/// The invoice's items for pages and mail: name and amount text.
pub fn item_lines(r: &Record) -> Vec<(String, String)> {
    let list = r
        .text("item_list")
        .and_then(|t| serde_json::from_str::<Json>(t).ok())
        .unwrap_or(Json::Object(Map::new()));
    items(&list)
        .unwrap_or_default()
        .into_iter()
        .map(|(n, c)| (n, Money::from_cents(c).to_text()))
        .collect()
}

/// The pay page's address for a pay token.
pub fn pay_link(public_url: &str, token: &str) -> String {
    format!("{}/quickinvoice/pay/{token}", public_url.trim_end_matches('/'))
}

/// The pay page of invoice `r`.
pub fn link_of(public_url: &str, r: &Record) -> String {
    pay_link(public_url, r.text("pay_token").unwrap_or_default())
}

/// Mails the invoice itself (on creation with `send_email`, on resend);
/// an invoice without an address is a 422 on `email`, one whose link
/// cannot take a payment (its user may no longer) a 422 saying so.
pub fn send(conn: &mut dyn Conn, now: i64, public_url: &str, r: &Record) -> ApiResult<()> {
    if !link_works(conn, r)? {
        return Err(ApiError::field(
            "created_user_id",
            "The invoice's pay link takes payments as the user who created it, who can no longer take \
             payments (disabled, deleted, or without the transactions.create permission): it is not mailed.",
        ));
    }
    if mail::queue(conn, now, r, mail::Kind::Invoice, &link_of(public_url, r), None)? {
        Ok(())
    } else {
        Err(ApiError::field(
            "email",
            "The invoice needs an email address (email, or a contact that has one).",
        ))
    }
}

/// Refuses a pay token that is not one we issue (before any lookup).
pub fn check_token(token: &str) -> ApiResult<()> {
    if token.len() == 40 && token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err(ApiError::NotFound("This invoice link is not valid.".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_add_up_in_cents() {
        assert_eq!(
            amount_due(&json!({"item1xx": 10, "item2yy": "11"})).unwrap(),
            2100
        );
        assert_eq!(amount_due(&json!({"a": "0.10", "b": 0.2})).unwrap(), 30);
        assert!(amount_due(&json!({})).is_err());
        assert!(amount_due(&json!({"a": "ten"})).is_err());
        assert!(amount_due(&json!(["a"])).is_err());
    }

    #[test]
    fn balance_and_statuses() {
        assert_eq!(balance(2100, 0, true, false), (2100, PAYMENT_UNPAID, STATUS_OPEN));
        assert_eq!(
            balance(2100, 1000, true, false),
            (1100, PAYMENT_PARTIAL, STATUS_OPEN)
        );
        assert_eq!(balance(2100, 2100, true, false), (0, PAYMENT_PAID, STATUS_CLOSED));
        assert_eq!(balance(2100, 2500, true, false), (0, PAYMENT_PAID, STATUS_CLOSED));
        assert_eq!(
            balance(2100, 0, false, false),
            (2100, PAYMENT_UNPAID, STATUS_CLOSED)
        );
        assert_eq!(
            balance(2100, 100, true, true),
            (2000, PAYMENT_PARTIAL, STATUS_CLOSED)
        );
    }
}
