//! Automated Recurring Billing on our recurrings. A subscription is three
//! records of ours: a contact (the bill-to name), an account vault (the
//! card) and a recurring (amount and schedule). Its runs are our
//! recurring runs: payments through the payments core, in batches, with
//! postbacks. Trials are not supported (as in the reference).

use super::codes::api;
use super::transaction::exp_mmyy;
use super::tree::{self, Out};
use crate::money;
use crate::resources::transactions::MAX_AMOUNT;
use serde_json::{json, Map, Value as Json};

/// A refusal: a top-level message code and its text.
pub type Refusal = (&'static str, String);

fn invalid(text: impl Into<String>) -> Refusal {
    (api::INVALID_FIELD, text.into())
}

fn missing(text: impl Into<String>) -> Refusal {
    (api::MISSING_FIELD, text.into())
}

/// `totalOccurrences` of an ongoing subscription.
pub const ONGOING: i64 = 9999;

/// The records a new subscription becomes (the vault's `contact_id` and
/// the recurring's `account_vault_id` are set as they are created).
#[derive(Debug)]
pub struct NewSubscription {
    pub contact: Map<String, Json>,
    pub vault: Map<String, Json>,
    pub recurring: Map<String, Json>,
}

/// Reads an `ARBCreateSubscriptionRequest`'s `subscription`.
pub fn create(sub: &Map<String, Json>, location_id: &str) -> Result<NewSubscription, Refusal> {
    no_trial(sub)?;
    let t = |path: &str| tree::text(sub, path);
    let mut recurring = Map::new();
    recurring.insert("location_id".into(), json!(location_id));
    let cents = amount(sub)?.ok_or_else(|| missing("amount is required."))?;
    recurring.insert("transaction_amount".into(), json!(money::format(cents)));
    let length = t("paymentSchedule.interval.length")
        .ok_or_else(|| missing("paymentSchedule.interval.length is required."))?;
    let length: i64 = length
        .parse()
        .ok()
        .filter(|n: &i64| n.abs() <= 999)
        .ok_or_else(|| invalid("paymentSchedule.interval.length must be a whole number from 1 to 999."))?;
    let (unit, allowed) = match t("paymentSchedule.interval.unit").as_deref() {
        Some("months") => ("m", 1..=12),
        Some("days") => ("d", 7..=365),
        _ => return Err(invalid("paymentSchedule.interval.unit must be days or months.")),
    };
    // Their bounds, with their code for an interval outside them.
    if !allowed.contains(&length) {
        return Err((api::BAD_INTERVAL.0, api::BAD_INTERVAL.1.to_string()));
    }
    recurring.insert("interval".into(), json!(length));
    recurring.insert("interval_type".into(), json!(unit));
    let start =
        t("paymentSchedule.startDate").ok_or_else(|| missing("paymentSchedule.startDate is required."))?;
    recurring.insert("start_date".into(), json!(start));
    let total = t("paymentSchedule.totalOccurrences")
        .ok_or_else(|| missing("paymentSchedule.totalOccurrences is required."))?;
    match total.parse::<i64>() {
        Ok(ONGOING) => {}
        Ok(n) if (1..=99).contains(&n) => {
            recurring.insert("installment_total_count".into(), json!(n));
        }
        _ => {
            return Err(invalid(
                "paymentSchedule.totalOccurrences must be 1 to 99, or 9999 for a subscription without end.",
            ))
        }
    }
    if let Some(name) = t("name") {
        recurring.insert("description".into(), json!(fit(&name, 36)));
    }
    let last = t("billTo.lastName").ok_or_else(|| missing("billTo.lastName is required."))?;
    let first = t("billTo.firstName");
    let mut contact = Map::new();
    contact.insert("location_id".into(), json!(location_id));
    contact.insert("last_name".into(), json!(fit(&last, 64)));
    if let Some(f) = &first {
        contact.insert("first_name".into(), json!(fit(f, 64)));
    }
    let vault = card(sub, location_id)?.ok_or_else(|| missing("payment.creditCard is required."))?;
    // Their E00018: a card that expires before the first payment.
    let exp = vault.get("exp_date").and_then(Json::as_str).unwrap_or_default();
    if let (Some(mm), Some(yy)) = (exp.get(..2), exp.get(2..4)) {
        let card_ends = format!("20{yy}-{mm}-31");
        if card_ends.as_str() < start.as_str() {
            let (code, text) = super::codes::api::CARD_EXPIRES_FIRST;
            return Err((code, text.to_string()));
        }
    }
    Ok(NewSubscription {
        contact,
        vault,
        recurring,
    })
}

/// What an `ARBUpdateSubscriptionRequest` changes: recurring fields and,
/// when a card is sent, a new vault for the subscription's contact.
#[derive(Debug)]
pub struct Change {
    pub recurring: Map<String, Json>,
    pub vault: Option<Map<String, Json>>,
}

pub fn update(sub: &Map<String, Json>, location_id: &str) -> Result<Change, Refusal> {
    no_trial(sub)?;
    let t = |path: &str| tree::text(sub, path);
    for fixed in [
        "paymentSchedule.interval.length",
        "paymentSchedule.interval.unit",
        "paymentSchedule.startDate",
        "paymentSchedule.totalOccurrences",
    ] {
        if t(fixed).is_some() {
            return Err(invalid(format!(
                "{fixed} cannot be changed here: cancel the subscription and create another."
            )));
        }
    }
    let mut recurring = Map::new();
    if let Some(cents) = amount(sub)? {
        recurring.insert("transaction_amount".into(), json!(money::format(cents)));
    }
    if let Some(name) = t("name") {
        recurring.insert("description".into(), json!(fit(&name, 36)));
    }
    Ok(Change {
        recurring,
        vault: card(sub, location_id)?,
    })
}

fn no_trial(sub: &Map<String, Json>) -> Result<(), Refusal> {
    let occurrences = tree::text(sub, "paymentSchedule.trialOccurrences").unwrap_or_default();
    let trial_amount = tree::text(sub, "trialAmount").unwrap_or_default();
    let zero = |s: &str| {
        s.is_empty()
            || s.trim_start_matches('0')
                .trim_start_matches('.')
                .trim_matches('0')
                .is_empty()
    };
    if !zero(&occurrences) || !zero(&trial_amount) {
        return Err(invalid("Trial periods are not supported."));
    }
    Ok(())
}

fn amount(sub: &Map<String, Json>) -> Result<Option<i64>, Refusal> {
    match tree::text(sub, "amount") {
        None => Ok(None),
        Some(raw) => match money::parse_text(&raw, MAX_AMOUNT) {
            Ok(c) if c > 0 => Ok(Some(c)),
            _ => Err(invalid(
                "amount must be a positive amount with at most 2 decimals.",
            )),
        },
    }
}

/// The vault of a `payment.creditCard`, if one is sent.
fn card(sub: &Map<String, Json>, location_id: &str) -> Result<Option<Map<String, Json>>, Refusal> {
    if tree::at(sub, "payment.bankAccount").is_some() {
        return Err(invalid(
            "ACH subscriptions are not supported: pay by payment.creditCard.",
        ));
    }
    let t = |path: &str| tree::text(sub, path);
    let Some(number) = t("payment.creditCard.cardNumber") else {
        return Ok(None);
    };
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("payment.creditCard.cardNumber is invalid."));
    }
    let exp = t("payment.creditCard.expirationDate")
        .as_deref()
        .and_then(exp_mmyy)
        .ok_or_else(|| invalid("payment.creditCard.expirationDate is invalid."))?;
    let mut vault = Map::new();
    vault.insert("location_id".into(), json!(location_id));
    vault.insert("payment_method".into(), json!("cc"));
    vault.insert("account_number".into(), json!(number));
    vault.insert("exp_date".into(), json!(exp));
    let name = [t("billTo.firstName"), t("billTo.lastName")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if !name.is_empty() {
        vault.insert("account_holder_name".into(), json!(fit(&name, 32)));
    }
    Ok(Some(vault))
}

fn fit(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Their status of our recurring: active, suspended (on hold), canceled
/// (ended by a cancel request) or expired (ended otherwise).
pub fn status(recurring: &Json) -> &'static str {
    match recurring["status"].as_str().unwrap_or_default() {
        "active" => "active",
        "ended" if recurring["ended_reason"] == json!(CANCELED) => "canceled",
        "ended" => "expired",
        _ => "suspended",
    }
}

/// Our `ended_reason` for a subscription canceled through ARB.
pub const CANCELED: &str = "canceled";

/// `ARBGetSubscriptionResponse`'s `subscription`.
pub fn subscription(recurring: &Json, vault: &Json, contact: &Json, vault_number: i64) -> Out {
    let s = |v: &Json, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let unit = if recurring["interval_type"] == json!("d") {
        "days"
    } else {
        "months"
    };
    let mut length = recurring["interval"].as_i64().unwrap_or(1);
    if recurring["interval_type"] == json!("w") {
        length *= 7;
    }
    let total = match recurring["installment_total_count"].as_i64() {
        Some(n) if n > 0 => n,
        _ => ONGOING,
    };
    let mut fields = Vec::new();
    let name = s(recurring, "description");
    if !name.is_empty() {
        fields.push(("name", Out::text(name)));
    }
    let mut bill = Vec::new();
    if !s(contact, "first_name").is_empty() {
        bill.push(("firstName", Out::text(s(contact, "first_name"))));
    }
    bill.push(("lastName", Out::text(s(contact, "last_name"))));
    fields.extend([
        (
            "paymentSchedule",
            Out::Node(vec![
                (
                    "interval",
                    Out::Node(vec![
                        ("length", Out::text(length.to_string())),
                        ("unit", Out::text(unit)),
                    ]),
                ),
                ("startDate", Out::text(s(recurring, "start_date"))),
                ("totalOccurrences", Out::text(total.to_string())),
                ("trialOccurrences", Out::text("0")),
            ]),
        ),
        ("amount", Out::text(s(recurring, "transaction_amount"))),
        ("trialAmount", Out::text("0.00")),
        ("status", Out::text(status(recurring))),
        (
            "profile",
            Out::Node(vec![(
                "paymentProfile",
                Out::Node(vec![
                    ("billTo", Out::Node(bill)),
                    ("customerPaymentProfileId", Out::text(vault_number.to_string())),
                    (
                        "payment",
                        Out::Node(vec![(
                            "creditCard",
                            Out::Node(vec![
                                ("cardNumber", Out::text(format!("XXXX{}", s(vault, "last_four")))),
                                ("expirationDate", Out::text("XXXX")),
                                (
                                    "cardType",
                                    Out::text(super::codes::card_type(vault["account_type"].as_str())),
                                ),
                            ]),
                        )]),
                    ),
                ]),
            )]),
        ),
    ]);
    Out::Node(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    fn base() -> Json {
        json!({
            "name": "Tea club", "amount": "9.99",
            "paymentSchedule": {"interval": {"length": "1", "unit": "months"},
                "startDate": "2030-01-15", "totalOccurrences": "12", "trialOccurrences": "0"},
            "payment": {"creditCard": {"cardNumber": "4111111111111111", "expirationDate": "2031-12"}},
            "billTo": {"firstName": "Pat", "lastName": "Doe"}
        })
    }

    #[test]
    fn a_subscription_is_a_contact_a_vault_and_a_recurring() {
        let n = create(&sub(base()), "loc").unwrap();
        assert_eq!(n.recurring["installment_total_count"], 12);
        assert_eq!(n.recurring["interval_type"], "m");
        assert_eq!(n.vault["exp_date"], "1231");
        assert_eq!(n.contact["last_name"], "Doe");
        let mut ongoing = base();
        ongoing["paymentSchedule"]["totalOccurrences"] = json!("9999");
        assert!(!create(&sub(ongoing), "loc")
            .unwrap()
            .recurring
            .contains_key("installment_total_count"));
    }

    #[test]
    fn intervals_outside_their_bounds_are_e00022() {
        for (length, unit, ok) in [
            ("7", "days", true),
            ("365", "days", true),
            ("6", "days", false),
            ("366", "days", false),
            ("1", "months", true),
            ("12", "months", true),
            ("0", "months", false),
            ("13", "months", false),
        ] {
            let mut v = base();
            v["paymentSchedule"]["interval"] = json!({"length": length, "unit": unit});
            let got = create(&sub(v), "loc").map(|_| ()).map_err(|e| e.0);
            let want = if ok { Ok(()) } else { Err("E00022") };
            assert_eq!(got, want, "{length} {unit}");
        }
    }

    #[test]
    fn trials_and_ach_are_refused() {
        let mut trial = base();
        trial["paymentSchedule"]["trialOccurrences"] = json!("1");
        trial["trialAmount"] = json!("1.00");
        assert_eq!(create(&sub(trial), "loc").unwrap_err().0, api::INVALID_FIELD);
        let mut zero_trial = base();
        zero_trial["trialAmount"] = json!("0.00");
        assert!(create(&sub(zero_trial), "loc").is_ok());
        let mut ach = base();
        ach["payment"] = json!({"bankAccount": {"accountNumber": "123"}});
        assert!(create(&sub(ach), "loc").is_err());
    }
}
