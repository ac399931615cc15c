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
    /// What makes another subscription a duplicate of this one (see
    /// [`duplicate_key`]).
    pub duplicate_key: String,
}

/// Reads an `ARBCreateSubscriptionRequest`'s `subscription`.
pub fn create(sub: &Map<String, Json>, location_id: &str) -> Result<NewSubscription, Refusal> {
    // A subscription of a customer profile: the emulator keeps no
    // customer profiles (the profile ids its subscriptions answer name
    // none), so it is their answer to an account without CIM.
    if ["profile.customerProfileId", "profile.customerPaymentProfileId"]
        .iter()
        .any(|p| tree::text(sub, p).is_some())
    {
        return Err((api::NO_CIM.0, api::NO_CIM.1.to_string()));
    }
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
    t("billTo.lastName").ok_or_else(|| missing("billTo.lastName is required."))?;
    let mut contact = bill_to(sub);
    contact.insert("location_id".into(), json!(location_id));
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
        duplicate_key: duplicate_key(sub, location_id, cents, &number_of(sub)),
    })
}

fn number_of(sub: &Map<String, Json>) -> String {
    tree::text(sub, "payment.creditCard.cardNumber").unwrap_or_default()
}

/// The key of a new subscription that Authorize.Net's duplicate check
/// (E00012) compares: the merchant (our location), the card (first six
/// and last four digits), `customer.id`, the `billTo` name, company and
/// address, the amount, the invoice number, the start date and the
/// interval, each as sent (an unsent one is a value of its own). Their
/// check ignores the name, `refId` and occurrences, so a resent create
/// with another name is still a duplicate. A digest, so the keys table
/// holds no card digits.
pub fn duplicate_key(sub: &Map<String, Json>, location_id: &str, cents: i64, card_number: &str) -> String {
    use sha2::{Digest, Sha256};
    let t = |path: &str| tree::text(sub, path);
    let first_six = card_number.get(..6).unwrap_or(card_number);
    let last_four = card_number
        .get(card_number.len().saturating_sub(4)..)
        .unwrap_or_default();
    let mut parts = vec![
        Some(location_id.to_string()),
        Some(first_six.to_string()),
        Some(last_four.to_string()),
        Some(cents.to_string()),
    ];
    for path in [
        "customer.id",
        "billTo.firstName",
        "billTo.lastName",
        "billTo.company",
        "billTo.address",
        "billTo.city",
        "billTo.state",
        "billTo.zip",
        "order.invoiceNumber",
        "paymentSchedule.startDate",
        "paymentSchedule.interval.length",
        "paymentSchedule.interval.unit",
    ] {
        parts.push(t(path));
    }
    let mut digest = Sha256::new();
    for part in parts {
        // Length-prefixed, none sent apart from empty: no two lists of
        // parts read the same.
        match part {
            Some(p) => {
                digest.update([1]);
                digest.update((p.len() as u64).to_be_bytes());
                digest.update(p.as_bytes());
            }
            None => digest.update([0]),
        }
    }
    format!("arb:{}", hex::encode(digest.finalize()))
}

/// The contact fields of a `billTo` (name, company and address) that
/// were sent; what does not fit a field's form (a state that is not two
/// letters, say) is left out rather than refusing the subscription over
/// it. They have no country field.
fn bill_to(sub: &Map<String, Json>) -> Map<String, Json> {
    let t = |path: &str| tree::text(sub, &format!("billTo.{path}"));
    let mut contact = Map::new();
    for (theirs, ours, max) in [
        ("firstName", "first_name", 64),
        ("lastName", "last_name", 64),
        ("company", "company_name", 64),
        ("address", "address", 255),
        ("city", "city", 100),
    ] {
        if let Some(value) = t(theirs) {
            contact.insert(ours.into(), json!(fit(&value, max)));
        }
    }
    if let Some(state) = t("state").filter(|s| s.len() == 2 && s.chars().all(|c| c.is_ascii_alphabetic())) {
        contact.insert("state".into(), json!(state.to_ascii_uppercase()));
    }
    if let Some(zip) = t("zip").filter(|z| {
        (4..=12).contains(&z.len())
            && z.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-')
    }) {
        contact.insert("zip".into(), json!(zip));
    }
    contact
}

/// What an `ARBUpdateSubscriptionRequest` changes: recurring fields, the
/// contact's name and address (`billTo`) and, when a card is sent, a new
/// vault for the subscription's contact.
#[derive(Debug)]
pub struct Change {
    pub recurring: Map<String, Json>,
    pub contact: Map<String, Json>,
    pub vault: Option<Map<String, Json>>,
}

pub fn update(sub: &Map<String, Json>, location_id: &str) -> Result<Change, Refusal> {
    no_trial(sub)?;
    let t = |path: &str| tree::text(sub, path);
    if tree::at(sub, "paymentSchedule.interval").is_some() {
        let (code, text) = api::INTERVAL_FIXED;
        return Err((code, text.to_string()));
    }
    for fixed in ["paymentSchedule.startDate", "paymentSchedule.totalOccurrences"] {
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
        contact: bill_to(sub),
        vault: card(sub, location_id)?,
    })
}

/// Refuses a trial: `trialOccurrences` above 0. Without trial
/// occurrences there is no trial, so `trialAmount` alone means nothing
/// (their schema uses it only with occurrences; the official Node.js
/// sample sends 0 occurrences with a random amount) and is ignored.
fn no_trial(sub: &Map<String, Json>) -> Result<(), Refusal> {
    let occurrences = tree::text(sub, "paymentSchedule.trialOccurrences").unwrap_or_default();
    let zero = occurrences.is_empty() || occurrences.trim().trim_start_matches('0').is_empty();
    if !zero {
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

/// The numbers a subscription's records answer as: their
/// `customerProfileId` (the contact) and `customerPaymentProfileId` (the
/// card's vault).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileNumbers {
    pub contact: i64,
    pub vault: i64,
}

impl ProfileNumbers {
    /// `customerProfileIdType`, as create and update answer it.
    pub fn to_out(self) -> Out {
        Out::Node(vec![
            ("customerProfileId", Out::text(self.contact.to_string())),
            ("customerPaymentProfileId", Out::text(self.vault.to_string())),
        ])
    }
}

/// `ARBGetSubscriptionResponse`'s `subscription` (`ARBSubscriptionMaskedType`),
/// with `arbTransactions` when `payments` are asked for.
pub fn subscription(
    recurring: &Json,
    vault: &Json,
    contact: &Json,
    numbers: ProfileNumbers,
    payments: Option<&[Payment]>,
) -> Out {
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
    for (theirs, ours) in [
        ("firstName", "first_name"),
        ("lastName", "last_name"),
        ("company", "company_name"),
        ("address", "address"),
        ("city", "city"),
        ("state", "state"),
        ("zip", "zip"),
    ] {
        if !s(contact, ours).is_empty() {
            bill.push((theirs, Out::text(s(contact, ours))));
        }
    }
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
            Out::Node(vec![
                ("customerProfileId", Out::text(numbers.contact.to_string())),
                (
                    "paymentProfile",
                    Out::Node(vec![
                        ("billTo", Out::Node(bill)),
                        ("customerPaymentProfileId", Out::text(numbers.vault.to_string())),
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
                ),
            ]),
        ),
    ]);
    if let Some(payments) = payments {
        fields.push(("arbTransactions", arb_transactions(payments)));
    }
    Out::Node(fields)
}

/// One payment of a subscription (a run of our recurring), oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payment {
    pub trans_id: i64,
    /// Our "yyyy-mm-dd hh:mm:ss" UTC.
    pub timestamp: String,
    pub status_id: i64,
    pub reason_code_id: i64,
    /// The billing period of the schedule it was made for, from 0 (its
    /// first try on the period's date, retries of a declined one after).
    pub period: i64,
}

/// Each payment's (`payNum`, `attemptNum`): the scheduled payment it is,
/// by its billing period from 1 (a period whose payment declined for good
/// still counts, so the next period's payment is the next number), and
/// which try at that period's payment (a declined one is tried again).
pub fn pay_numbers(payments: &[Payment]) -> Vec<(i64, i64)> {
    let mut last: Option<(i64, i64)> = None;
    payments
        .iter()
        .map(|p| {
            let pay_num = p.period.max(0) + 1;
            let attempt = match last {
                Some((n, a)) if n == pay_num => a + 1,
                _ => 1,
            };
            last = Some((pay_num, attempt));
            (pay_num, attempt)
        })
        .collect()
}

/// `arbTransactions`: the subscription's payments in the schema's
/// (`arbTransaction`) order.
pub fn arb_transactions(payments: &[Payment]) -> Out {
    let items = payments
        .iter()
        .zip(pay_numbers(payments))
        .map(|(p, (pay_num, attempt))| {
            let mut reason = super::codes::of_reason(p.reason_code_id);
            if p.status_id == 301 && reason.response == super::codes::ResponseCode::Approved {
                reason = super::codes::DECLINED;
            }
            Out::Node(vec![
                ("transId", Out::text(p.trans_id.to_string())),
                ("response", Out::text(reason.text)),
                (
                    "submitTimeUTC",
                    Out::text(format!("{}Z", p.timestamp.replacen(' ', "T", 1))),
                ),
                ("payNum", Out::text(pay_num.to_string())),
                ("attemptNum", Out::text(attempt.to_string())),
            ])
        })
        .collect();
    Out::List("arbTransaction", items)
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
    fn duplicates_are_the_same_card_customer_amount_and_schedule() {
        let key = |v: Json| create(&sub(v), "loc").unwrap().duplicate_key;
        let first = key(base());
        let mut renamed = base();
        renamed["name"] = json!("Another name");
        assert_eq!(key(renamed), first, "the name is not compared");
        for (path, value) in [
            ("amount", json!("9.98")),
            ("billTo", json!({"firstName": "Pat", "lastName": "Dee"})),
            ("order", json!({"invoiceNumber": "INV-2"})),
            ("customer", json!({"id": "C-1"})),
        ] {
            let mut other = base();
            other[path] = value;
            assert_ne!(key(other), first, "{path}");
        }
        let mut other_start = base();
        other_start["paymentSchedule"]["startDate"] = json!("2030-01-16");
        assert_ne!(key(other_start), first);
        let mut other_card = base();
        other_card["payment"]["creditCard"]["cardNumber"] = json!("5454545454545454");
        assert_ne!(key(other_card), first);
        assert_ne!(create(&sub(base()), "loc2").unwrap().duplicate_key, first);
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
    fn payments_are_numbered_by_their_billing_period() {
        let payment = |period, status_id| Payment {
            trans_id: 1,
            timestamp: String::new(),
            status_id,
            reason_code_id: 1000,
            period,
        };
        // Approved; declined and retried three times without success;
        // the next period's payment is number 3 whatever came of 2.
        let runs = [
            payment(0, 101),
            payment(1, 301),
            payment(1, 301),
            payment(1, 301),
            payment(1, 301),
            payment(2, 101),
            payment(3, 201),
        ];
        assert_eq!(
            pay_numbers(&runs),
            vec![(1, 1), (2, 1), (2, 2), (2, 3), (2, 4), (3, 1), (4, 1)]
        );
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
        // No trial occurrences: no trial, whatever trialAmount says (the
        // official Node.js sample sends a random one).
        let mut amount_only = base();
        amount_only["trialAmount"] = json!("4.27");
        assert!(create(&sub(amount_only.clone()), "loc").is_ok());
        amount_only["paymentSchedule"]["trialOccurrences"] = json!("00");
        assert!(create(&sub(amount_only), "loc").is_ok());
        let mut ach = base();
        ach["payment"] = json!({"bankAccount": {"accountNumber": "123"}});
        assert!(create(&sub(ach), "loc").is_err());
    }
}
