//! `createTransactionRequest` (and AIM, which reads into the same shape):
//! an Authorize.Net transaction request as one of our payment requests,
//! and our stored transaction as their `transactionResponse`.

use super::codes::{self, Reason, ResponseCode};
use super::sent::Sent;
use super::tree::{self, Out};
use crate::engine::validate::is_email;
use crate::money;
use crate::resources::transactions::MAX_AMOUNT;
use serde_json::{json, Map, Value as Json};

/// The transaction types the emulator takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AuthCapture,
    AuthOnly,
    PriorAuthCapture,
    CaptureOnly,
    Refund,
    Void,
}

impl Kind {
    pub fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "authCaptureTransaction" => Kind::AuthCapture,
            "authOnlyTransaction" => Kind::AuthOnly,
            "priorAuthCaptureTransaction" => Kind::PriorAuthCapture,
            "captureOnlyTransaction" => Kind::CaptureOnly,
            "refundTransaction" => Kind::Refund,
            "voidTransaction" => Kind::Void,
            _ => return None,
        })
    }

    /// The AIM `x_type` and the name AIM answers in field 12.
    pub fn aim(self) -> (&'static str, &'static str) {
        match self {
            Kind::AuthCapture => ("AUTH_CAPTURE", "auth_capture"),
            Kind::AuthOnly => ("AUTH_ONLY", "auth_only"),
            Kind::PriorAuthCapture => ("PRIOR_AUTH_CAPTURE", "prior_auth_capture"),
            Kind::CaptureOnly => ("CAPTURE_ONLY", "capture_only"),
            Kind::Refund => ("CREDIT", "credit"),
            Kind::Void => ("VOID", "void"),
        }
    }

    pub fn api_name(self) -> &'static str {
        match self {
            Kind::AuthCapture => "authCaptureTransaction",
            Kind::AuthOnly => "authOnlyTransaction",
            Kind::PriorAuthCapture => "priorAuthCaptureTransaction",
            Kind::CaptureOnly => "captureOnlyTransaction",
            Kind::Refund => "refundTransaction",
            Kind::Void => "voidTransaction",
        }
    }

    /// Works on an existing transaction of ours (PUT), rather than
    /// making a new one.
    pub fn follows_up(self) -> bool {
        matches!(self, Kind::PriorAuthCapture | Kind::Void)
    }

    /// Charges or checks the card it carries (so AVS and CVV apply).
    fn checks_card(self) -> bool {
        matches!(self, Kind::AuthCapture | Kind::AuthOnly)
    }
}

/// A request the emulator refuses before it reaches the payments core,
/// answered as their error transaction response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    /// Replaces the reason's text when set (which field, what is wrong).
    pub detail: Option<String>,
}

impl Refusal {
    pub fn new(reason: Reason) -> Refusal {
        Refusal { reason, detail: None }
    }
    pub fn with(reason: Reason, detail: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            detail: Some(detail.into()),
        }
    }
    pub fn text(&self) -> String {
        self.detail
            .clone()
            .unwrap_or_else(|| self.reason.text.to_string())
    }
}

/// A transaction request as ours: the body for `actions::parse` (POST for
/// new payments, PUT for follow-ups) and the transaction it refers to.
#[derive(Debug)]
pub struct Plan {
    pub kind: Kind,
    pub body: Map<String, Json>,
    /// `refTransId` as sent: one of the numbers we answered.
    pub reference: Option<String>,
    /// A refund's card, as its last four digits.
    pub refund_last_four: Option<String>,
}

/// Reads a `transactionRequest` (their element names, as XML or JSON
/// gives them, or as AIM's fields are renamed into them).
pub fn plan(request: &Map<String, Json>) -> Result<Plan, Refusal> {
    let t = |path: &str| tree::text(request, path);
    let type_name = t("transactionType").unwrap_or_default();
    let kind = Kind::parse(&type_name).ok_or_else(|| {
        Refusal::with(
            codes::BAD_TYPE,
            format!(
                "{} '{}' is not one of authCaptureTransaction, authOnlyTransaction, \
                 priorAuthCaptureTransaction, captureOnlyTransaction, refundTransaction or voidTransaction.",
                codes::BAD_TYPE.text,
                short(&type_name)
            ),
        )
    })?;
    if tree::at(request, "payment.bankAccount").is_some() {
        return Err(Refusal::new(codes::NO_ACH));
    }
    if let Some(other) = ["trackData", "encryptedTrackData", "payPal", "opaqueData"]
        .iter()
        .find(|p| tree::at(request, &format!("payment.{p}")).is_some())
    {
        return Err(Refusal::with(
            codes::TRY_AGAIN,
            format!("Payment by {other} is not supported: send payment.creditCard."),
        ));
    }
    let mut body = Map::new();
    let action = match kind {
        Kind::AuthCapture => "sale",
        Kind::AuthOnly => "authonly",
        Kind::CaptureOnly => "force",
        Kind::Refund => "refund",
        Kind::PriorAuthCapture => "authcomplete",
        Kind::Void => "void",
    };
    body.insert("action".into(), json!(action));
    let amount = match t("amount") {
        Some(raw) => Some(money::parse_text(&raw, MAX_AMOUNT).map_err(|_| Refusal::new(codes::BAD_AMOUNT))?),
        None => None,
    };
    if let Some(cents) = amount {
        if cents <= 0 && kind != Kind::Void {
            return Err(Refusal::new(codes::BAD_AMOUNT));
        }
    }
    let reference = t("refTransId");
    let mut refund_last_four = None;
    match kind {
        Kind::PriorAuthCapture | Kind::Void | Kind::Refund if reference.is_none() => {
            return Err(Refusal::new(codes::BAD_TRANS_ID));
        }
        _ => {}
    }
    match kind {
        Kind::Void => {}
        Kind::PriorAuthCapture => {
            if let Some(cents) = amount {
                body.insert("transaction_amount".into(), json!(money::format(cents)));
            }
        }
        Kind::AuthCapture | Kind::AuthOnly | Kind::CaptureOnly | Kind::Refund => {
            let cents = amount.ok_or_else(|| Refusal::new(codes::BAD_AMOUNT))?;
            body.insert("payment_method".into(), json!("cc"));
            body.insert("transaction_amount".into(), json!(money::format(cents)));
            if kind == Kind::Refund {
                refund_last_four = Some(refund_card(request)?);
            } else {
                card(request, &mut body)?;
            }
            if let (true, Some(allow)) = (kind.checks_card(), setting(request, "allowPartialAuth")) {
                // Per request, over the product transaction's setting.
                body.insert(
                    "allow_partial_authorization_override".into(),
                    json!(is_on(&allow)),
                );
            }
            if kind == Kind::CaptureOnly {
                // Their reason 12, as Authorize.Net answers a capture
                // without its authorization code.
                let code = t("authCode")
                    .filter(|c| !c.trim().is_empty())
                    .ok_or_else(|| Refusal::new(codes::NO_AUTH_CODE))?;
                if code.chars().count() != 6 {
                    return Err(Refusal::with(
                        codes::NO_AUTH_CODE,
                        "The authorization code (authCode) must be six characters.",
                    ));
                }
                body.insert("auth_code".into(), json!(code));
            }
            customer(request, &mut body);
            if kind != Kind::Refund {
                // Their tax is part of the amount, as ours is; one that
                // does not fit it is left out rather than refused.
                if let Some(tax) = t("tax.amount")
                    .and_then(|raw| money::parse_text(&raw, MAX_AMOUNT).ok())
                    .filter(|tax| (1..=cents).contains(tax))
                {
                    body.insert("tax".into(), json!(money::format(tax)));
                }
            }
        }
    }
    Ok(Plan {
        kind,
        body,
        reference,
        refund_last_four,
    })
}

/// The last four digits of a refund's card, which must be the referenced
/// transaction's: their clients send the last four, the full number or
/// the masked number we answered (`XXXX1111`). Without one Authorize.Net
/// issues no credit.
fn refund_card(request: &Map<String, Json>) -> Result<String, Refusal> {
    let refused = || {
        Refusal::with(
            codes::NO_CREDIT,
            format!(
                "{} A refund needs the card's number or its last four digits (payment.creditCard.cardNumber).",
                codes::NO_CREDIT.text
            ),
        )
    };
    let number = tree::text(request, "payment.creditCard.cardNumber").ok_or_else(refused)?;
    let digits = number.trim_start_matches(['X', 'x']);
    if digits.len() < 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused());
    }
    Ok(digits[digits.len() - 4..].to_string())
}

/// A `transactionSettings` setting of the request, by name
/// (`testRequest`, `duplicateWindow`, ...): one `setting` element or a
/// list of them, each a `settingName` and a `settingValue`.
pub fn setting(request: &Map<String, Json>, name: &str) -> Option<String> {
    let settings = request.get("transactionSettings")?.as_object()?.get("setting")?;
    let all: Vec<&Json> = match settings {
        Json::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    all.into_iter().filter_map(Json::as_object).find_map(|s| {
        (tree::text(s, "settingName")?.eq_ignore_ascii_case(name))
            .then(|| tree::text(s, "settingValue"))
            .flatten()
    })
}

/// Whether a setting is on (`true`, `1`, ...).
pub fn setting_on(request: &Map<String, Json>, name: &str) -> bool {
    setting(request, name).is_some_and(|v| is_on(&v))
}

fn is_on(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "t" | "1" | "yes" | "y" | "on"
    )
}

/// How far back an identical new payment counts as a duplicate:
/// `duplicateWindow` seconds, 120 unless sent, at most 28800 (their
/// bounds); 0 turns the check off.
pub fn duplicate_window(request: &Map<String, Json>) -> i64 {
    setting(request, "duplicateWindow")
        .and_then(|v| v.parse::<i64>().ok())
        .map(|s| s.clamp(0, crate::payments::DuplicateGuard::LONGEST_WINDOW_SECS))
        .unwrap_or(120)
}

/// The first characters of what a client sent, for a message.
fn short(s: &str) -> String {
    s.chars().take(40).collect()
}

/// The card: number, expiry as MMYY, card code.
fn card(request: &Map<String, Json>, body: &mut Map<String, Json>) -> Result<(), Refusal> {
    let t = |path: &str| tree::text(request, path);
    let number = t("payment.creditCard.cardNumber").ok_or_else(|| Refusal::new(codes::BAD_CARD))?;
    if !number.bytes().all(|b| b.is_ascii_digit()) || !(13..=19).contains(&number.len()) {
        return Err(Refusal::new(codes::BAD_CARD));
    }
    let expiry = t("payment.creditCard.expirationDate").ok_or_else(|| Refusal::new(codes::BAD_EXPIRY))?;
    let mmyy = exp_mmyy(&expiry).ok_or_else(|| Refusal::new(codes::BAD_EXPIRY))?;
    body.insert("account_number".into(), json!(number));
    body.insert("exp_date".into(), json!(mmyy));
    if let Some(code) = t("payment.creditCard.cardCode") {
        if !code.bytes().all(|b| b.is_ascii_digit()) || !(3..=4).contains(&code.len()) {
            return Err(Refusal::new(codes::BAD_CVV));
        }
        body.insert("cvv".into(), json!(code));
    }
    Ok(())
}

/// Their expiration formats as our MMYY: `YYYY-MM`, `MM/YY`, `MMYY`,
/// `MM-YYYY`, `MMYYYY`, `YYYYMM` is not one of theirs.
pub fn exp_mmyy(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let digits: String = raw.chars().filter(char::is_ascii_digit).collect();
    if raw.chars().any(|c| !c.is_ascii_digit() && c != '/' && c != '-') {
        return None;
    }
    let (mm, yy) = match (raw.find(['-', '/']), digits.len()) {
        // 2025-12
        (Some(4), 6) => (digits[4..6].to_string(), digits[2..4].to_string()),
        // 12/25, 12-25
        (Some(2), 4) => (digits[0..2].to_string(), digits[2..4].to_string()),
        // 12/2025, 12-2025
        (Some(2), 6) => (digits[0..2].to_string(), digits[4..6].to_string()),
        (None, 4) => (digits[0..2].to_string(), digits[2..4].to_string()),
        (None, 6) => (digits[0..2].to_string(), digits[4..6].to_string()),
        _ => return None,
    };
    let month: u32 = mm.parse().ok()?;
    (1..=12).contains(&month).then(|| format!("{mm}{yy}"))
}

/// Fits `s` in `max` characters.
fn fit(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// The bill-to, order and customer details we keep, where they fit our
/// fields; what does not fit a field's form is left out rather than
/// refusing the payment over an ancillary detail.
fn customer(request: &Map<String, Json>, body: &mut Map<String, Json>) {
    let t = |path: &str| tree::text(request, path);
    let name = [t("billTo.firstName"), t("billTo.lastName")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if !name.is_empty() {
        body.insert("account_holder_name".into(), json!(fit(&name, 32)));
    }
    if let Some(street) = t("billTo.address") {
        body.insert("billing_street".into(), json!(fit(&street, 32)));
    }
    if let Some(city) = t("billTo.city") {
        body.insert("billing_city".into(), json!(fit(&city, 36)));
    }
    if let Some(state) =
        t("billTo.state").filter(|s| s.len() == 2 && s.chars().all(|c| c.is_ascii_alphabetic()))
    {
        body.insert("billing_state".into(), json!(state.to_ascii_uppercase()));
    }
    if let Some(zip) = t("billTo.zip").filter(|z| {
        (4..=12).contains(&z.len())
            && z.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-')
    }) {
        body.insert("billing_zip".into(), json!(zip));
    }
    if let Some(invoice) = t("order.invoiceNumber").filter(|s| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || " -_./#".contains(c))
    }) {
        body.insert("order_num".into(), json!(fit(&invoice, 32)));
    }
    if let Some(description) = t("order.description") {
        body.insert("description".into(), json!(fit(&description, 64)));
    }
    if let Some(po) = t("poNumber") {
        body.insert("po_number".into(), json!(fit(&po, 24)));
    }
    if let Some(ip) = t("customerIP") {
        body.insert("customer_ip".into(), json!(fit(&ip, 39)));
    }
    if let Some(id) = t("customer.id") {
        body.insert("customer_id".into(), json!(fit(&id, 64)));
    }
    // Their customer's email is where the receipt goes: our notification
    // address (the payment's receipt is sent to it).
    if let Some(email) = t("customer.email").filter(|e| (3..=128).contains(&e.len()) && is_email(e)) {
        body.insert("notification_email_address".into(), json!(email));
    }
}

// ---------------------------------------------------------------------
// The answer

/// What a transaction request came to, in their terms: the fields of
/// `transactionResponse` and of AIM's delimited answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub kind: Option<Kind>,
    pub reason: Reason,
    /// The reason's text, or a more precise one.
    pub text: String,
    pub auth_code: String,
    pub avs: &'static str,
    pub cvv: &'static str,
    /// Our number for the transaction; "0" when none was made.
    pub trans_id: String,
    pub ref_trans_id: String,
    /// `XXXX` and the last four digits.
    pub account_number: String,
    pub account_type: String,
    pub amount: String,
    /// Answered to a request in test mode: nothing was charged.
    pub test: bool,
    /// A partial approval's split tender: its id and amounts.
    pub split_tender: Option<SplitTender>,
    /// The request's `userFields`, echoed (name, value).
    pub user_fields: Vec<(String, String)>,
}

/// What a partial approval answers besides the approved amount: the
/// split tender the rest of the order joins (`splitTenderId`), and their
/// `prePaidCard`. Amounts as their decimal text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitTender {
    pub id: String,
    pub requested_amount: String,
    pub approved_amount: String,
    /// The card's balance after the approval: none left, since it did
    /// not cover the amount.
    pub balance_on_card: String,
}

impl SplitTender {
    pub fn new(id: i64, requested_cents: i64, approved_cents: i64) -> SplitTender {
        SplitTender {
            id: id.to_string(),
            requested_amount: money::format(requested_cents),
            approved_amount: money::format(approved_cents),
            balance_on_card: money::format(0),
        }
    }
}

impl Outcome {
    pub fn refused(kind: Option<Kind>, refusal: &Refusal) -> Outcome {
        Outcome {
            kind,
            reason: refusal.reason,
            text: refusal.text(),
            auth_code: String::new(),
            avs: "P",
            cvv: "",
            trans_id: "0".into(),
            ref_trans_id: String::new(),
            account_number: String::new(),
            account_type: String::new(),
            amount: String::new(),
            test: false,
            split_tender: None,
            user_fields: Vec::new(),
        }
    }

    /// A request in test mode (`testRequest`): checked like any other,
    /// answered approved with transaction id 0, and never charged.
    pub fn test_mode(kind: Kind, body: &Map<String, Json>) -> Outcome {
        let number = body
            .get("account_number")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let last_four = number.get(number.len().saturating_sub(4)..).unwrap_or_default();
        Outcome {
            kind: Some(kind),
            reason: codes::TEST_MODE,
            text: codes::TEST_MODE.text.to_string(),
            auth_code: "000000".into(),
            avs: "P",
            cvv: "",
            trans_id: "0".into(),
            ref_trans_id: String::new(),
            account_number: if last_four.is_empty() {
                String::new()
            } else {
                format!("XXXX{last_four}")
            },
            account_type: String::new(),
            amount: body
                .get("transaction_amount")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string(),
            test: true,
            split_tender: None,
            user_fields: Vec::new(),
        }
    }

    /// Our stored transaction (`{"transaction": {...}}`'s inner object).
    pub fn of(kind: Kind, tx: &Json, trans_id: i64, ref_trans_id: Option<i64>) -> Outcome {
        let s = |k: &str| tx[k].as_str().map(str::to_string);
        let status = tx["status_id"].as_i64().unwrap_or(0);
        let reason_code = tx["reason_code_id"].as_i64().unwrap_or(0);
        let mut reason = codes::of_reason(reason_code);
        if status == 301 && reason.response == ResponseCode::Approved {
            reason = codes::DECLINED;
        }
        // A partial approval (held) has its authorization code too.
        let approved = matches!(reason.response, ResponseCode::Approved | ResponseCode::Held);
        Outcome {
            kind: Some(kind),
            reason,
            text: reason.text.to_string(),
            // Their authorization codes are upper case.
            auth_code: s("auth_code")
                .filter(|_| approved)
                .map(|c| c.to_ascii_uppercase())
                .unwrap_or_default(),
            avs: if kind.checks_card() {
                codes::avs(tx["avs_enhanced"].as_str())
            } else {
                "P"
            },
            cvv: if kind.checks_card() {
                codes::cvv(tx["cvv_response"].as_str())
            } else {
                ""
            },
            trans_id: trans_id.to_string(),
            ref_trans_id: ref_trans_id.map(|n| n.to_string()).unwrap_or_default(),
            account_number: s("last_four").map(|l| format!("XXXX{l}")).unwrap_or_default(),
            account_type: codes::card_type(tx["account_type"].as_str()).to_string(),
            amount: s("transaction_amount").unwrap_or_default(),
            test: false,
            split_tender: None,
            user_fields: Vec::new(),
        }
    }

    /// Whether the top-level result is Ok (approved or held).
    pub fn ok(&self) -> bool {
        matches!(self.reason.response, ResponseCode::Approved | ResponseCode::Held)
    }

    /// Their `transactionResponse`, elements in the schema's order.
    pub fn to_out(&self) -> Out {
        let mut fields = vec![
            ("responseCode", Out::text(self.reason.response.code().to_string())),
            ("authCode", Out::text(&self.auth_code)),
            ("avsResultCode", Out::text(self.avs)),
            ("cvvResultCode", Out::text(self.cvv)),
            ("cavvResultCode", Out::text("")),
            ("transId", Out::text(&self.trans_id)),
            ("refTransID", Out::text(&self.ref_trans_id)),
            ("transHash", Out::text("")),
            ("testRequest", Out::text(if self.test { "1" } else { "0" })),
            ("accountNumber", Out::text(&self.account_number)),
            ("accountType", Out::text(&self.account_type)),
        ];
        if let Some(split) = &self.split_tender {
            fields.push(("splitTenderId", Out::text(&split.id)));
            fields.push((
                "prePaidCard",
                Out::Node(vec![
                    ("requestedAmount", Out::text(&split.requested_amount)),
                    ("approvedAmount", Out::text(&split.approved_amount)),
                    ("balanceOnCard", Out::text(&split.balance_on_card)),
                ]),
            ));
        }
        let code = self.reason.code.to_string();
        if self.ok() {
            fields.push((
                "messages",
                Out::List(
                    "message",
                    vec![Out::Node(vec![
                        ("code", Out::text(code)),
                        ("description", Out::text(&self.text)),
                    ])],
                ),
            ));
        } else {
            fields.push((
                "errors",
                Out::List(
                    "error",
                    vec![Out::Node(vec![
                        ("errorCode", Out::text(code)),
                        ("errorText", Out::text(&self.text)),
                    ])],
                ),
            ));
        }
        if !self.user_fields.is_empty() {
            let items = self
                .user_fields
                .iter()
                .map(|(name, value)| Out::Node(vec![("name", Out::text(name)), ("value", Out::text(value))]))
                .collect();
            fields.push(("userFields", Out::List("userField", items)));
        }
        Out::Node(fields)
    }
}

/// The request's `userFields` (one `userField` or a list, each a `name`
/// and a `value`): Authorize.Net echoes them in the answer. At most 20,
/// their schema's limit.
pub fn user_fields(request: &Map<String, Json>) -> Vec<(String, String)> {
    let Some(list) = request
        .get("userFields")
        .and_then(Json::as_object)
        .and_then(|u| u.get("userField"))
    else {
        return Vec::new();
    };
    let all: Vec<&Json> = match list {
        Json::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    all.into_iter()
        .filter_map(Json::as_object)
        .filter_map(|f| Some((tree::text(f, "name")?, tree::text(f, "value").unwrap_or_default())))
        .take(20)
        .collect()
}

/// What `getTransactionDetails` and the transaction lists show besides
/// our transaction row, looked up beside it (a list looks up only what
/// its summary shows: the number, what was sent, the names and the
/// subscription).
#[derive(Clone, Debug, Default)]
pub struct DetailFacts {
    pub trans_id: i64,
    pub ref_trans_id: Option<i64>,
    /// What the client sent, for a payment the emulator made.
    pub sent: Option<Sent>,
    /// The bill-to first and last names, where they are known apart: as
    /// sent, else the transaction's contact's (a subscription's payment
    /// is its bill-to's). `None` shows the holder name whole.
    pub names: Option<(String, String)>,
    /// An ARB payment's subscription number and its payment number.
    pub subscription: Option<(i64, i64)>,
    /// A settled transaction's batch: its number and when it closed.
    pub batch: Option<(i64, Option<i64>)>,
    /// The transaction's Level 3 data (`level3_data`).
    pub level3: Option<Json>,
    /// A partial approval's split tender number.
    pub split_tender: Option<i64>,
}

/// Their `transactionType` of a transaction the emulator did not record:
/// what its state still shows.
fn inferred_kind(tx: &Json) -> Kind {
    if tx["type_id"].as_i64() == Some(30) {
        Kind::Refund
    } else if tx["reason_code_id"].as_i64() == Some(1002) {
        Kind::CaptureOnly
    } else if tx["status_id"].as_i64() == Some(102) {
        Kind::AuthOnly
    } else {
        Kind::AuthCapture
    }
}

/// The schema's dateTime of our "yyyy-mm-dd hh:mm:ss" UTC text: UTC
/// (with `Z`) and local (we keep no merchant time zone: the same time).
pub fn date_times(utc: &str) -> (String, String) {
    let local = utc.replacen(' ', "T", 1);
    (format!("{local}Z"), local)
}

/// `extendedAmountType`: an amount (our money text) and nothing else.
fn extended_amount(amount: &str) -> Out {
    Out::Node(vec![("amount", Out::text(amount))])
}

/// A stored amount worth showing: present and not zero.
fn nonzero(amount: Option<&str>) -> Option<&str> {
    amount.filter(|a| !a.is_empty() && money::parse_text(a, i64::MAX / 100).is_ok_and(|c| c > 0))
}

/// Level 3 line items as their `lineItem`s (the fields both have).
fn line_items(items: &[Json]) -> Vec<Out> {
    let text = |item: &Json, k: &str| item[k].as_str().unwrap_or_default().to_string();
    items
        .iter()
        .map(|item| {
            let description = text(item, "description");
            let mut fields = vec![
                ("itemId", Out::text(fit(&text(item, "product_code"), 31))),
                ("name", Out::text(fit(&description, 31))),
                ("description", Out::text(description)),
                ("quantity", Out::text(text(item, "quantity"))),
                ("unitPrice", Out::text(text(item, "unit_cost"))),
            ];
            if !text(item, "unit_code").is_empty() {
                fields.push(("unitOfMeasure", Out::text(text(item, "unit_code"))));
            }
            if !text(item, "tax_amount").is_empty() {
                fields.push(("taxAmount", Out::text(text(item, "tax_amount"))));
            }
            Out::Node(fields)
        })
        .collect()
}

/// `getTransactionDetailsResponse`'s `transaction`, from our stored
/// transaction and what was looked up beside it, in the schema's
/// (`transactionDetailsType`) order, each optional element only where we
/// have its data.
pub fn details(tx: &Json, facts: &DetailFacts) -> Out {
    let s = |k: &str| tx[k].as_str().unwrap_or_default().to_string();
    let status = tx["status_id"].as_i64().unwrap_or(0);
    let kind = facts
        .sent
        .as_ref()
        .map_or_else(|| inferred_kind(tx), |sent| sent.kind);
    let outcome = Outcome::of(kind, tx, facts.trans_id, facts.ref_trans_id);
    let (submitted_utc, submitted_local) = date_times(&s("timestamp"));
    let amount = amount_of(tx);
    // A declined payment's authAmount is the amount asked for, as theirs
    // shows it (settleAmount is 0.00); ours keeps 0 authorized.
    let auth_amount = match tx["auth_amount"].as_str() {
        Some(a) if status != 301 => a.to_string(),
        _ => amount.clone(),
    };
    let level3 = facts.level3.as_ref().unwrap_or(&Json::Null);
    let mut fields = vec![("transId", Out::text(facts.trans_id.to_string()))];
    if let Some(r) = facts.ref_trans_id {
        fields.push(("refTransId", Out::text(r.to_string())));
    }
    if let Some(split) = facts.split_tender {
        fields.push(("splitTenderId", Out::text(split.to_string())));
    }
    fields.extend([
        ("submitTimeUTC", Out::text(submitted_utc)),
        ("submitTimeLocal", Out::text(submitted_local)),
        ("transactionType", Out::text(kind.api_name())),
        ("transactionStatus", Out::text(status_name(tx))),
        (
            "responseCode",
            Out::text(outcome.reason.response.code().to_string()),
        ),
        ("responseReasonCode", Out::text(outcome.reason.code.to_string())),
    ]);
    if let Some((id, pay_num)) = facts.subscription {
        fields.push((
            "subscription",
            Out::Node(vec![
                ("id", Out::text(id.to_string())),
                ("payNum", Out::text(pay_num.to_string())),
            ]),
        ));
    }
    fields.push(("responseReasonDescription", Out::text(outcome.reason.text)));
    if !outcome.auth_code.is_empty() {
        fields.push(("authCode", Out::text(&outcome.auth_code)));
    }
    fields.push(("AVSResponse", Out::text(outcome.avs)));
    if !outcome.cvv.is_empty() {
        fields.push(("cardCodeResponse", Out::text(outcome.cvv)));
    }
    if let (true, Some((batch_id, closed))) = (settled(tx), facts.batch) {
        let mut batch = vec![("batchId", Out::text(batch_id.to_string()))];
        if let Some(closed) = closed {
            let (utc, local) = date_times(&crate::clock::timestamp_text(closed));
            batch.push(("settlementTimeUTC", Out::text(utc)));
            batch.push(("settlementTimeLocal", Out::text(local)));
        }
        batch.push(("settlementState", Out::text("settledSuccessfully")));
        fields.push(("batch", Out::Node(batch)));
    }
    let mut order = Vec::new();
    for (name, value) in [
        ("invoiceNumber", invoice_number(tx, facts)),
        ("description", s("description")),
        ("purchaseOrderNumber", s("po_number")),
    ] {
        if !value.is_empty() {
            order.push((name, Out::text(value)));
        }
    }
    if !order.is_empty() {
        fields.push(("order", Out::Node(order)));
    }
    fields.extend([
        ("authAmount", Out::text(auth_amount)),
        ("settleAmount", Out::text(settle_amount(tx))),
    ]);
    for (name, value) in [
        ("tax", nonzero(tx["tax"].as_str())),
        ("shipping", nonzero(level3["freight_amount"].as_str())),
        ("duty", nonzero(level3["duty_amount"].as_str())),
    ] {
        if let Some(amount) = value {
            fields.push((name, extended_amount(amount)));
        }
    }
    if let Some(items) = level3["line_items"].as_array().filter(|i| !i.is_empty()) {
        fields.push(("lineItems", Out::List("lineItem", line_items(items))));
    }
    if let Some(exempt) = level3["tax_exempt"].as_str() {
        fields.push(("taxExempt", Out::text((exempt == "1").to_string())));
    }
    fields.push((
        "payment",
        Out::Node(vec![(
            "creditCard",
            Out::Node(vec![
                ("cardNumber", Out::text(&outcome.account_number)),
                ("expirationDate", Out::text("XXXX")),
                ("cardType", Out::text(&outcome.account_type)),
            ]),
        )]),
    ));
    let mut customer = Vec::new();
    for (name, value) in [
        ("id", s("customer_id")),
        ("email", s("notification_email_address")),
    ] {
        if !value.is_empty() {
            customer.push((name, Out::text(value)));
        }
    }
    if !customer.is_empty() {
        fields.push(("customer", Out::Node(customer)));
    }
    let (first, last) = names(tx, facts);
    if !first.is_empty() || !last.is_empty() || !s("billing_zip").is_empty() {
        let mut bill = Vec::new();
        for (name, value) in [
            ("firstName", first),
            ("lastName", last),
            ("address", s("billing_street")),
            ("city", s("billing_city")),
            ("state", s("billing_state")),
            ("zip", s("billing_zip")),
        ] {
            if !value.is_empty() {
                bill.push((name, Out::text(value)));
            }
        }
        fields.push(("billTo", Out::Node(bill)));
    }
    if let Some(zip) = level3["shipto_zip_code"].as_str().filter(|z| !z.is_empty()) {
        fields.push(("shipTo", Out::Node(vec![("zip", Out::text(zip))])));
    }
    let recurring = tx["is_recurring"].as_i64() == Some(1) || tx["is_recurring"] == json!(true);
    fields.push(("recurringBilling", Out::text(recurring.to_string())));
    if !s("customer_ip").is_empty() {
        fields.push(("customerIP", Out::text(s("customer_ip"))));
    }
    Out::Node(fields)
}

/// Their `transactionStatus` of our transaction.
fn status_name(tx: &Json) -> &'static str {
    let refund = tx["type_id"].as_i64() == Some(30);
    match tx["status_id"].as_i64().unwrap_or(0) {
        301 => "declined",
        201 => "voided",
        102 => "authorizedPendingCapture",
        _ if refund && settled(tx) => "refundSettledSuccessfully",
        _ if refund => "refundPendingSettlement",
        _ if settled(tx) => "settledSuccessfully",
        _ => "capturedPendingSettlement",
    }
}

/// Whether the transaction's batch settled (it has a settle date).
fn settled(tx: &Json) -> bool {
    tx["settle_date"]
        .as_str()
        .is_some_and(|d| !d.is_empty() && d != "0000-00-00")
}

/// The amount as their decimal text; 0.00 when none is stored.
fn amount_of(tx: &Json) -> String {
    match tx["transaction_amount"].as_str() {
        Some(a) if !a.is_empty() => a.to_string(),
        _ => "0.00".to_string(),
    }
}

/// `settleAmount`: nothing settles of a declined, voided or only
/// authorized transaction.
fn settle_amount(tx: &Json) -> String {
    if matches!(tx["status_id"].as_i64(), Some(301 | 201 | 102)) {
        "0.00".to_string()
    } else {
        amount_of(tx)
    }
}

/// The invoice number as the client sent it; empty when it sent none.
/// The core numbers an order sent without one, and a subscription's
/// payments never carry one of the client's.
fn invoice_number(tx: &Json, facts: &DetailFacts) -> String {
    let sent = match &facts.sent {
        Some(sent) => sent.invoice_sent,
        None => tx["recurring_id"].as_str().is_none_or(str::is_empty),
    };
    match tx["order_num"].as_str() {
        Some(n) if sent => n.to_string(),
        _ => String::new(),
    }
}

/// The bill-to first and last names: as known apart, else the holder
/// name whole as the last name. A name is never split at a space: "Ellen
/// Van Dyke" may be Ellen and Van Dyke, or Ellen Van and Dyke.
fn names(tx: &Json, facts: &DetailFacts) -> (String, String) {
    match &facts.names {
        Some(names) => names.clone(),
        None => (
            String::new(),
            tx["account_holder_name"].as_str().unwrap_or_default().to_string(),
        ),
    }
}

/// A transaction of a list (`transactionSummaryType`), in the schema's
/// order: what `details` shows of it, summed up.
pub fn summary(tx: &Json, facts: &DetailFacts) -> Out {
    let (submitted_utc, submitted_local) = date_times(tx["timestamp"].as_str().unwrap_or_default());
    let mut fields = vec![
        ("transId", Out::text(facts.trans_id.to_string())),
        ("submitTimeUTC", Out::text(submitted_utc)),
        ("submitTimeLocal", Out::text(submitted_local)),
        ("transactionStatus", Out::text(status_name(tx))),
    ];
    let invoice = invoice_number(tx, facts);
    if !invoice.is_empty() {
        fields.push(("invoiceNumber", Out::text(invoice)));
    }
    let (first, last) = names(tx, facts);
    if !first.is_empty() {
        fields.push(("firstName", Out::text(first)));
    }
    if !last.is_empty() {
        fields.push(("lastName", Out::text(last)));
    }
    let last_four = tx["last_four"].as_str().unwrap_or_default();
    fields.extend([
        (
            "accountType",
            Out::text(codes::card_type(tx["account_type"].as_str())),
        ),
        (
            "accountNumber",
            Out::text(if last_four.is_empty() {
                String::new()
            } else {
                format!("XXXX{last_four}")
            }),
        ),
        ("settleAmount", Out::text(settle_amount(tx))),
    ]);
    if let Some((id, pay_num)) = facts.subscription {
        fields.push((
            "subscription",
            Out::Node(vec![
                ("id", Out::text(id.to_string())),
                ("payNum", Out::text(pay_num.to_string())),
            ]),
        ));
    }
    Out::Node(fields)
}

/// A bill-to name as sent (`firstName`, `lastName`), within their 50
/// characters.
pub fn bill_to_name(request: &Map<String, Json>, which: &str) -> Option<String> {
    tree::text(request, &format!("billTo.{which}")).map(|n| fit(&n, 50))
}

/// A payment by customer profile (`profile.customerProfileId` or
/// `profile.paymentProfile`): there are no customer profiles to charge.
pub fn pays_by_profile(request: &Map<String, Json>) -> bool {
    tree::text(request, "profile.customerProfileId").is_some()
        || tree::at(request, "profile.paymentProfile").is_some()
}

/// `profile.createProfile`: a customer profile asked of the payment.
pub fn asks_for_profile(request: &Map<String, Json>) -> bool {
    tree::text(request, "profile.createProfile").is_some_and(|v| is_on(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn expiry_formats() {
        assert_eq!(exp_mmyy("2030-12").as_deref(), Some("1230"));
        assert_eq!(exp_mmyy("12/30").as_deref(), Some("1230"));
        assert_eq!(exp_mmyy("1230").as_deref(), Some("1230"));
        assert_eq!(exp_mmyy("122030").as_deref(), Some("1230"));
        assert_eq!(exp_mmyy("12/2030").as_deref(), Some("1230"));
        assert_eq!(exp_mmyy("1330"), None);
        assert_eq!(exp_mmyy("XXXX"), None);
        assert_eq!(exp_mmyy("2030/1"), None);
    }

    #[test]
    fn a_sale_becomes_our_sale() {
        let p = plan(&request(json!({
            "transactionType": "authCaptureTransaction", "amount": "12.5",
            "payment": {"creditCard": {"cardNumber": "4111111111111111", "expirationDate": "2030-12", "cardCode": "999"}},
            "order": {"invoiceNumber": "INV-1", "description": "Tea"},
            "billTo": {"firstName": "Pat", "lastName": "Doe", "zip": "32606", "state": "Florida"}
        })))
        .unwrap();
        assert_eq!(p.kind, Kind::AuthCapture);
        assert_eq!(p.body["action"], "sale");
        assert_eq!(p.body["transaction_amount"], "12.50");
        assert_eq!(p.body["exp_date"], "1230");
        assert_eq!(p.body["account_holder_name"], "Pat Doe");
        assert!(!p.body.contains_key("billing_state"));
        assert!(!p.body.contains_key("tax"));
    }

    #[test]
    fn their_tax_is_ours_where_it_fits_the_amount() {
        let tax_of = |tax: &str| {
            plan(&request(json!({
                "transactionType": "authCaptureTransaction", "amount": "10.00",
                "payment": {"creditCard": {"cardNumber": "4111111111111111", "expirationDate": "2030-12"}},
                "tax": {"amount": tax, "name": "state"}
            })))
            .unwrap()
            .body
            .get("tax")
            .cloned()
        };
        assert_eq!(tax_of("0.80"), Some(json!("0.80")));
        assert_eq!(tax_of("10.01"), None, "more than the amount");
        assert_eq!(tax_of("x"), None);
    }

    /// The element names of `transactionDetailsType`, in the schema's order.
    const DETAILS_ORDER: &[&str] = &[
        "transId",
        "refTransId",
        "splitTenderId",
        "submitTimeUTC",
        "submitTimeLocal",
        "transactionType",
        "transactionStatus",
        "responseCode",
        "responseReasonCode",
        "subscription",
        "responseReasonDescription",
        "authCode",
        "AVSResponse",
        "cardCodeResponse",
        "CAVVResponse",
        "FDSFilterAction",
        "FDSFilters",
        "batch",
        "order",
        "requestedAmount",
        "authAmount",
        "settleAmount",
        "tax",
        "shipping",
        "duty",
        "lineItems",
        "prepaidBalanceRemaining",
        "taxExempt",
        "payment",
        "customer",
        "billTo",
        "shipTo",
        "recurringBilling",
        "customerIP",
    ];

    #[test]
    fn details_keep_their_type_and_the_schemas_order() {
        let tx = json!({
            "status_id": 101, "type_id": 20, "reason_code_id": 1000, "transaction_amount": "10.00",
            "auth_amount": "10.00", "timestamp": "2030-01-02 03:04:05", "settle_date": "2030-01-03",
            "order_num": "123456789012", "description": "Tea", "po_number": "PO-9", "tax": "0.80",
            "customer_id": "C-7", "notification_email_address": "pat@example.com", "last_four": "1111",
            "account_type": "visa", "account_holder_name": "Ellen Van Dyke", "billing_zip": "32606",
            "recurring_id": "r1", "is_recurring": 1, "auth_code": "abc123"
        });
        let facts = DetailFacts {
            trans_id: 12345678901,
            ref_trans_id: None,
            sent: Some(Sent {
                kind: Kind::AuthOnly,
                invoice_sent: false,
                first_name: Some("Ellen".into()),
                last_name: Some("Van Dyke".into()),
            }),
            names: Some(("Ellen".into(), "Van Dyke".into())),
            subscription: Some((22222222222, 3)),
            batch: Some((33333333333, Some(1_893_639_600))),
            level3: Some(json!({
                "freight_amount": "1.50", "duty_amount": "0.25", "tax_exempt": "0", "shipto_zip_code": "10001",
                "line_items": [{ "description": "Widget", "product_code": "WID-1", "quantity": "2",
                    "unit_code": "EA", "unit_cost": "4.25", "tax_amount": "0.80" }]
            })),
            split_tender: Some(44444444444),
        };
        let out = details(&tx, &facts);
        let Out::Node(fields) = &out else { panic!("a node") };
        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        let positions: Vec<usize> = names
            .iter()
            .map(|n| {
                DETAILS_ORDER
                    .iter()
                    .position(|o| o == n)
                    .unwrap_or_else(|| panic!("{n} not in the schema"))
            })
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        let v = tree::to_json(&out);
        assert_eq!(
            v["transactionType"], "authOnlyTransaction",
            "the type sent, not the status's"
        );
        assert_eq!(
            v["order"],
            json!({"description": "Tea", "purchaseOrderNumber": "PO-9"}),
            "no invoice sent"
        );
        assert_eq!(v["subscription"], json!({"id": "22222222222", "payNum": "3"}));
        assert_eq!(v["splitTenderId"], "44444444444");
        assert_eq!(
            v["batch"],
            json!({"batchId": "33333333333", "settlementTimeUTC": "2030-01-03T03:00:00Z",
                "settlementTimeLocal": "2030-01-03T03:00:00", "settlementState": "settledSuccessfully"})
        );
        assert_eq!(v["tax"], json!({"amount": "0.80"}));
        assert_eq!(v["shipping"], json!({"amount": "1.50"}));
        assert_eq!(v["duty"], json!({"amount": "0.25"}));
        assert_eq!(
            v["lineItems"],
            json!([{"itemId": "WID-1", "name": "Widget", "description": "Widget", "quantity": "2",
                "unitPrice": "4.25", "unitOfMeasure": "EA", "taxAmount": "0.80"}])
        );
        assert_eq!(v["customer"], json!({"id": "C-7", "email": "pat@example.com"}));
        assert_eq!(v["shipTo"], json!({"zip": "10001"}));
        assert_eq!(
            (&v["billTo"]["firstName"], &v["billTo"]["lastName"]),
            (&json!("Ellen"), &json!("Van Dyke")),
            "the names as sent, not the holder name split at its last space"
        );
        assert_eq!(v["payment"]["creditCard"]["cardNumber"], "XXXX1111");
        // Without a record of what was sent: the status's guess, and a
        // subscription's payment carries no client invoice.
        let guessed = tree::to_json(&details(
            &json!({"status_id": 102, "order_num": "1", "recurring_id": "r"}),
            &DetailFacts::default(),
        ));
        assert_eq!(guessed["transactionType"], "authOnlyTransaction");
        assert!(guessed.get("order").is_none(), "{guessed}");
        // Names not known apart: the holder name whole, never split.
        let unsplit = tree::to_json(&details(
            &json!({"status_id": 101, "account_holder_name": "Ellen Van Dyke"}),
            &DetailFacts::default(),
        ));
        assert_eq!(unsplit["billTo"], json!({"lastName": "Ellen Van Dyke"}));
    }

    /// The element names of `transactionSummaryType`, in the schema's order.
    const SUMMARY_ORDER: &[&str] = &[
        "transId",
        "submitTimeUTC",
        "submitTimeLocal",
        "transactionStatus",
        "invoiceNumber",
        "firstName",
        "lastName",
        "accountType",
        "accountNumber",
        "settleAmount",
        "marketType",
        "product",
        "mobileDeviceId",
        "subscription",
        "hasReturnedItems",
        "fraudInformation",
        "profile",
    ];

    #[test]
    fn a_summary_is_in_the_schemas_order() {
        let tx = json!({
            "status_id": 101, "type_id": 30, "transaction_amount": "4.00", "timestamp": "2030-01-02 03:04:05",
            "settle_date": "2030-01-03", "order_num": "INV-3", "last_four": "1111", "account_type": "mc",
            "account_holder_name": "Ellen Van Dyke"
        });
        let facts = DetailFacts {
            trans_id: 12345678901,
            sent: Some(Sent {
                kind: Kind::Refund,
                invoice_sent: true,
                first_name: Some("Ellen".into()),
                last_name: Some("Van Dyke".into()),
            }),
            names: Some(("Ellen".into(), "Van Dyke".into())),
            subscription: Some((2222222, 1)),
            ..DetailFacts::default()
        };
        let out = summary(&tx, &facts);
        let Out::Node(fields) = &out else { panic!("a node") };
        let positions: Vec<usize> = fields
            .iter()
            .map(|(n, _)| SUMMARY_ORDER.iter().position(|o| o == n).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{fields:?}");
        let v = tree::to_json(&out);
        assert_eq!(v["transactionStatus"], "refundSettledSuccessfully");
        assert_eq!(v["invoiceNumber"], "INV-3");
        assert_eq!(
            (&v["firstName"], &v["lastName"]),
            (&json!("Ellen"), &json!("Van Dyke"))
        );
        assert_eq!(
            (&v["accountType"], &v["accountNumber"]),
            (&json!("MasterCard"), &json!("XXXX1111"))
        );
        assert_eq!(v["settleAmount"], "4.00");
        assert_eq!(v["subscription"], json!({"id": "2222222", "payNum": "1"}));
    }

    #[test]
    fn a_customers_email_is_the_receipt_address() {
        let body = |email: &str| {
            plan(&request(json!({
                "transactionType": "authCaptureTransaction", "amount": "1.00",
                "payment": {"creditCard": {"cardNumber": "4111111111111111", "expirationDate": "2030-12"}},
                "customer": {"id": "C-9", "email": email}
            })))
            .unwrap()
            .body
        };
        assert_eq!(body("a@b.example")["notification_email_address"], "a@b.example");
        assert!(!body("not an address").contains_key("notification_email_address"));
    }

    #[test]
    fn profiles_are_recognised() {
        let r = |v: Json| request(v);
        assert!(pays_by_profile(&r(json!({"profile": {"customerProfileId": "1",
            "paymentProfile": {"paymentProfileId": "2"}}}))));
        assert!(pays_by_profile(&r(
            json!({"profile": {"paymentProfile": {"paymentProfileId": "2"}}})
        )));
        assert!(!pays_by_profile(&r(
            json!({"profile": {"createProfile": "true"}})
        )));
        assert!(asks_for_profile(&r(
            json!({"profile": {"createProfile": "true"}})
        )));
        assert!(!asks_for_profile(&r(
            json!({"profile": {"createProfile": "false"}})
        )));
    }

    #[test]
    fn refusals_use_their_reason_codes() {
        let code = |v: Json| plan(&request(v)).unwrap_err().reason.code;
        assert_eq!(
            code(
                json!({"transactionType": "authCaptureTransaction", "amount": "1.00",
            "payment": {"bankAccount": {"accountNumber": "1"}}})
            ),
            18
        );
        assert_eq!(
            code(json!({"transactionType": "authCaptureTransaction", "amount": "1.001"})),
            5
        );
        assert_eq!(
            code(
                json!({"transactionType": "authCaptureTransaction", "amount": "1.00",
            "payment": {"creditCard": {"cardNumber": "41x1", "expirationDate": "2030-12"}}})
            ),
            6
        );
        assert_eq!(code(json!({"transactionType": "voidTransaction"})), 15);
        assert_eq!(code(json!({"transactionType": "bogus"})), 69);
    }
}
