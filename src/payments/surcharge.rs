//! Surcharges: a card product transaction may add a percentage of the
//! subtotal (at most 3%, percentage only, as new configurations are in the
//! reference) to credit card sales and authorizations. Debit cards must
//! not be surcharged: when the BIN lookup says a card is debit (or
//! prepaid), nothing is added. The record shows `subtotal_amount` (what
//! the goods cost, without tax), `surcharge_amount` and the total in
//! `transaction_amount`.
//!
//! A request may send only the total-to-be (the subtotal plus any tax):
//! the surcharge is added to it. Or it may send `subtotal_amount` (and
//! `surcharge_amount`) itself: then they must agree with the rate and
//! the total.
//!
//! Terminal payments and the Authorize.Net emulator's take no surcharge
//! ([`Origin::takes_surcharge`]): their amount is the one the cardholder
//! or the cart approved.

use crate::bins;
use crate::db::Conn;
use crate::engine::record::Record;
use crate::error::{ApiResult, FieldErrors};
use crate::money::Money;
use crate::payments::request::Origin;
use serde_json::{json, Value as Json};

/// The highest rate, in basis points (3.00%).
pub const MAX_RATE_BP: i64 = 300;

/// The rate a product transaction's settings carry, in basis points:
/// `{"surcharge": {"surcharge_rate": "3.00", "surcharge_type": "percentage"}}`.
pub fn rate_bp(settings: &Json) -> Option<i64> {
    let rate = &settings["surcharge"]["surcharge_rate"];
    let cents = crate::money::parse(rate, MAX_RATE_BP).ok()?;
    (cents > 0).then_some(cents)
}

/// The settings member for a rate given as a percentage with at most two
/// decimals (`"3"`, `"2.5"`); `"0"` turns surcharging off.
pub fn setting(percent: &str) -> Result<Json, String> {
    let bp = crate::money::parse(&json!(percent), MAX_RATE_BP)
        .map_err(|why| format!("The surcharge rate {why} (a percentage of at most 3.00)."))?;
    Ok(if bp == 0 {
        Json::Null
    } else {
        json!({ "surcharge_rate": Money::from_cents(bp).to_text(), "surcharge_type": "percentage" })
    })
}

/// Sets (or with `"0"` removes) the surcharge of a card product
/// transaction, an operator's act (`ferrogate surcharge`); answers the
/// product transaction's new `surcharge` member.
pub fn configure(conn: &mut dyn Conn, product_transaction_id: &str, percent: &str) -> ApiResult<Json> {
    use crate::db::Sql;
    use crate::error::ApiError;
    let surcharge = setting(percent).map_err(|m| ApiError::field("percent", m))?;
    let row = conn
        .query_one(&Sql::with(
            "SELECT payment_method, settings FROM product_transactions WHERE id = ?",
            vec![product_transaction_id.into()],
        ))?
        .ok_or_else(|| ApiError::not_found("producttransaction"))?;
    if row[0].as_str() != Some("cc") {
        return Err(ApiError::field(
            "product_transaction_id",
            "Only card product transactions take a surcharge.",
        ));
    }
    let mut settings: Json = row[1]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| json!({}));
    settings["surcharge"] = surcharge.clone();
    conn.execute(&Sql::with(
        "UPDATE product_transactions SET settings = ? WHERE id = ?",
        vec![settings.to_string().into(), product_transaction_id.into()],
    ))?;
    Ok(json!({ "product_transaction_id": product_transaction_id, "surcharge": surcharge }))
}

/// The surcharge on `subtotal` cents at `bp` basis points, rounded half up.
pub fn amount(subtotal: i64, bp: i64) -> i64 {
    (subtotal * bp + 5_000) / 10_000
}

/// Whether the card is one that must not be surcharged.
fn is_debit(conn: &mut dyn Conn, pan: &str) -> ApiResult<bool> {
    let found = bins::lookup(conn, pan.get(..8).unwrap_or(pan))?;
    Ok(found.range.is_some_and(|r| {
        r.prepaid == Some(true)
            || r.card_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("debit"))
    }))
}

/// The surcharge rate of a product transaction now, in basis points (0
/// for none).
pub fn product_rate(conn: &mut dyn Conn, product_transaction_id: &str) -> ApiResult<i64> {
    let settings = conn
        .query_one(&crate::db::Sql::with(
            "SELECT settings FROM product_transactions WHERE id = ?",
            vec![product_transaction_id.into()],
        ))?
        .and_then(|row| row[0].as_str().and_then(|s| serde_json::from_str::<Json>(s).ok()))
        .unwrap_or(Json::Null);
    Ok(rate_bp(&settings).unwrap_or(0))
}

/// The subtotal and surcharge of a surcharged `total` (tax included) at
/// `bp`: the parts that add up to it exactly, when some do.
pub fn split(total: i64, tax: i64, bp: i64) -> Option<(i64, i64)> {
    let goods = total - tax;
    if goods <= 0 {
        return None;
    }
    let guess = (goods * 10_000 + (10_000 + bp) / 2) / (10_000 + bp);
    (guess - 1..=guess + 1)
        .filter(|s| *s > 0)
        .find(|s| s + amount(*s, bp) == goods)
        .map(|s| (s, amount(s, bp)))
}

/// Refuses a `surcharge_amount` other than `expected`, the rate `bp`'s
/// share of `subtotal` (nothing for a debit card).
fn refuse_surcharge(errors: &mut FieldErrors, expected: i64, bp: i64, subtotal: i64, debit: bool) {
    errors.add(
        "surcharge_amount",
        format!(
            "Surcharge Amount must be {} ({}% of {}{}).",
            Money::from_cents(expected),
            Money::from_cents(bp),
            Money::from_cents(subtotal),
            if debit {
                ": debit cards are not surcharged"
            } else {
                ""
            }
        ),
    );
}

/// Applies the product transaction's surcharge to a card charge being
/// created (`record` holds the validated amounts).
pub fn apply(
    conn: &mut dyn Conn,
    settings: &Json,
    origin: &Origin,
    pan: &str,
    record: &mut Record,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    let bp = match rate_bp(settings) {
        Some(bp) if origin.takes_surcharge() => bp,
        rate => {
            // No surcharge is charged here, so none may be claimed.
            if record.int("surcharge_amount").is_some_and(|s| s != 0) {
                errors.add(
                    "surcharge_amount",
                    if rate.is_some() {
                        "Surcharge Amount must be 0: payments on a terminal or through the Authorize.Net emulator take no surcharge."
                    } else {
                        "Surcharge Amount must be 0: this account takes no surcharge."
                    },
                );
            }
            return Ok(());
        }
    };
    let total = record.int("transaction_amount").unwrap_or(0);
    let tax = record.int("tax").unwrap_or(0);
    let sent_subtotal = record.int("subtotal_amount");
    let sent_surcharge = record.int("surcharge_amount");
    let subtotal = sent_subtotal.unwrap_or(total - tax);
    if subtotal <= 0 {
        // Nothing to surcharge, so no surcharge may be claimed.
        if sent_surcharge.is_some_and(|s| s != 0) {
            refuse_surcharge(errors, 0, bp, subtotal.max(0), false);
        }
        return Ok(());
    }
    let debit = is_debit(conn, pan)?;
    let surcharge = if debit { 0 } else { amount(subtotal, bp) };
    if let Some(sent) = sent_surcharge {
        if sent != surcharge {
            refuse_surcharge(errors, surcharge, bp, subtotal, debit);
            return Ok(());
        }
    }
    let new_total = if sent_subtotal.is_some() {
        let expected = subtotal + tax + surcharge;
        if total != expected {
            errors.add(
                "transaction_amount",
                format!(
                    "Transaction Amount must be the subtotal plus tax plus surcharge ({}).",
                    Money::from_cents(expected)
                ),
            );
            return Ok(());
        }
        total
    } else {
        total + surcharge
    };
    if new_total > crate::resources::transactions::MAX_AMOUNT {
        errors.add(
            "transaction_amount",
            "Transaction Amount with the surcharge is above the largest amount.",
        );
        return Ok(());
    }
    record.set("subtotal_amount", subtotal);
    record.set("surcharge_amount", surcharge);
    record.set("transaction_amount", new_total);
    Ok(())
}

/// The amounts of a surcharged card transaction whose total an action
/// changes (authcomplete, authincrement, partialreversal). As the
/// reference asks, a changed total comes with its `subtotal_amount`,
/// `surcharge_amount` and `tax`, and, as on a sale, they must agree with
/// the product transaction's rate and the new total, so the record never
/// shows a surcharge other than the one charged. A transaction without a
/// surcharge cannot gain one.
pub fn check_follow_up(
    conn: &mut dyn Conn,
    tx: &Record,
    sent: &Record,
    present: &[&str],
    new_total: i64,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    let given = |name: &str| present.contains(&name).then(|| sent.int(name).unwrap_or(0));
    let (sent_subtotal, sent_surcharge, sent_tax) =
        (given("subtotal_amount"), given("surcharge_amount"), given("tax"));
    let stored_surcharge = tx.int("surcharge_amount").unwrap_or(0);
    if stored_surcharge <= 0 {
        if sent_surcharge.is_some_and(|s| s != 0) {
            errors.add(
                "surcharge_amount",
                "Surcharge Amount cannot be added: the transaction carries no surcharge.",
            );
        }
        return Ok(());
    }
    if new_total != tx.int("transaction_amount").unwrap_or(0) {
        for (name, value) in [
            ("subtotal_amount", sent_subtotal),
            ("surcharge_amount", sent_surcharge),
            ("tax", sent_tax),
        ] {
            if value.is_none() {
                errors.add(
                    name,
                    format!(
                        "{} is required when the amount of a surcharged transaction changes.",
                        crate::engine::validate::label(name)
                    ),
                );
            }
        }
        if !errors.is_empty() {
            return Ok(());
        }
    } else if sent_subtotal.is_none() && sent_surcharge.is_none() && sent_tax.is_none() {
        return Ok(());
    }
    let subtotal = sent_subtotal.or(tx.int("subtotal_amount")).unwrap_or(0);
    let tax = sent_tax.or(tx.int("tax")).unwrap_or(0);
    let surcharge = sent_surcharge.unwrap_or(stored_surcharge);
    let bp = product_rate(conn, tx.text("product_transaction_id").unwrap_or_default())?;
    let expected = amount(subtotal, bp);
    if surcharge != expected {
        refuse_surcharge(errors, expected, bp, subtotal, false);
    } else if new_total != subtotal + tax + surcharge {
        errors.add(
            "transaction_amount",
            format!(
                "Transaction Amount must be the subtotal plus tax plus surcharge ({}).",
                Money::from_cents(subtotal + tax + surcharge)
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_rounding() {
        assert_eq!(
            rate_bp(&json!({ "surcharge": { "surcharge_rate": "3.00" } })),
            Some(300)
        );
        assert_eq!(
            rate_bp(&json!({ "surcharge": { "surcharge_rate": "3.01" } })),
            None
        );
        assert_eq!(rate_bp(&json!({ "surcharge": null })), None);
        assert_eq!(amount(1_000, 300), 30);
        assert_eq!(amount(1_050, 250), 26); // 26.25 rounds down
        assert_eq!(amount(1_100, 250), 28); // 27.5 rounds up
        assert_eq!(setting("2.5").unwrap()["surcharge_rate"], "2.50");
        assert!(setting("3.5").is_err());
        assert_eq!(setting("0").unwrap(), Json::Null);
        // Parts of a surcharged total, when some add up to it.
        assert_eq!(split(1_030, 0, 300), Some((1_000, 30)));
        assert_eq!(split(1_130, 100, 300), Some((1_000, 30)));
        assert_eq!(split(824, 0, 300), Some((800, 24)));
        for total in 1..5_000 {
            if let Some((s, c)) = split(total, 0, 300) {
                assert_eq!(s + c, total);
                assert_eq!(c, amount(s, 300));
            }
        }
        assert_eq!(split(50, 60, 300), None);
    }
}
