//! Running transactions. Every money-moving request goes in three steps:
//!
//! 1. **prepare** (one write job): resolve and check everything, reserve
//!    what must not be taken twice (an api id, a refund's remainder, a
//!    velocity slot), and store the transaction as `pending` (or mark the
//!    record a PUT action works on). The processor is not called here.
//! 2. **call** the processor on a blocking thread, outside any database
//!    transaction, then await the answer's delay.
//! 3. **complete** (one write job): record the outcome, enter the batch,
//!    save the vault, write the change log and the idempotent response.
//!
//! A crash between 1 and 3 leaves a `pending` row naming its node; the
//! reconciler reverses it at the processor and declines it (`reconcile`).

use super::actions::{Action, Parsed};
use super::source::{self, Resolved, Source};
use super::state::{self, Facts, DONE, PENDING};
use super::velocity::{self, Class};
use super::{batches, idempotency};
use crate::clock::{date_text, timestamp_text};
use crate::db::{Conn, Sql, Value};
use crate::engine::events::{self, Action as EventAction};
use crate::engine::record::Record;
use crate::engine::validate::{blank, for_create, UpdateInput};
use crate::engine::{insert, query, render, update_record, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::ids::new_id;
use crate::processor::*;
use crate::resources::product_transactions::{ach_profiles, check_identity, default_for, settings};
use crate::resources::{ACCOUNT_VAULT, CONTACT, LOCATION, PRODUCT_TRANSACTION, TRANSACTION};
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

/// The processor request a prepared transaction needs.
#[derive(Clone, Debug)]
pub enum Call {
    Authorize(AuthorizeRequest),
    Force(ForceRequest),
    AvsOnly(AvsOnlyRequest),
    Refund(RefundRequest),
    Credit(CreditRequest),
    AchDebit(AchRequest),
    AchCredit(AchRequest),
    Capture(CaptureRequest),
    Increment(IncrementRequest),
    Void(VoidRequest),
    PartialReversal(PartialReversalRequest),
    /// Refused by the gateway itself (a velocity limit): a decline with
    /// this reason and text, no processor call.
    Decline(ReasonCode, String),
    /// Nothing to ask (tipadjust, edit).
    Nothing,
}

impl Call {
    pub fn run(&self, p: &dyn Processor) -> ProcessorResult {
        match self {
            Call::Authorize(r) => p.authorize(r),
            Call::Force(r) => p.force(r),
            Call::AvsOnly(r) => p.avs_only(r),
            Call::Refund(r) => p.refund(r),
            Call::Credit(r) => p.credit(r),
            Call::AchDebit(r) => p.ach_debit(r),
            Call::AchCredit(r) => p.ach_credit(r),
            Call::Capture(r) => p.capture(r),
            Call::Increment(r) => p.increment(r),
            Call::Void(r) => p.void(r),
            Call::PartialReversal(r) => p.partial_reversal(r),
            Call::Decline(reason, text) => Ok(local_decline(*reason, text)),
            Call::Nothing => Err(ProcessorError::Unsupported("nothing to call")),
        }
    }
}

/// A decline decided by the gateway.
pub fn local_decline(reason: ReasonCode, text: &str) -> ProcessorResponse {
    ProcessorResponse {
        status_id: StatusId::Declined,
        reason_code_id: reason,
        verbiage: text.chars().take(64).collect(),
        response_message: text.to_string(),
        auth_code: None,
        approved_amount: 0,
        avs: None,
        avs_enhanced: None,
        cvv_response: None,
        processor_reference: String::new(),
        delay: std::time::Duration::ZERO,
        timed_out: false,
    }
}

/// What completion needs beyond the processor's answer.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub id: String,
    pub action: Action,
    pub call: Call,
    /// Store a vault from the card or account (save_account).
    pub save_account: Option<SaveAccount>,
    /// PUT actions: the new amount the action asks for.
    pub new_amount: Option<i64>,
    /// PUT actions: other fields the body changes.
    pub extra: Vec<(&'static str, Value)>,
}

#[derive(Clone, Debug)]
pub struct SaveAccount {
    pub contact_id: String,
    pub title: Option<String>,
    pub source: Source,
}

fn location_tz(conn: &mut dyn Conn, location_id: &str) -> ApiResult<chrono_tz::Tz> {
    let tz = conn
        .query_one(&Sql::with(
            "SELECT tz FROM locations WHERE id = ?",
            vec![location_id.into()],
        ))?
        .and_then(|r| r[0].as_str().and_then(|s| s.parse().ok()));
    Ok(tz.unwrap_or(chrono_tz::UTC))
}

/// The product transaction a new transaction runs on: the one named, or
/// the location's default for the payment method.
fn product_transaction(
    cx: &Cx,
    conn: &mut dyn Conn,
    record: &Record,
    method: &str,
    location_id: &str,
    errors: &mut FieldErrors,
) -> ApiResult<Option<Record>> {
    let pt = match record.text("product_transaction_id") {
        Some(id) => query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, id)?,
        None if method == "ach" => None,
        None => default_for(conn, cx, location_id, method)?,
    };
    let Some(pt) = pt else {
        let message = match record.text("product_transaction_id") {
            Some(_) => "product_transaction_id provided is not valid".to_string(),
            None => blank("product_transaction_id"),
        };
        errors.add("product_transaction_id", message);
        return Ok(None);
    };
    if pt.text("location_id") != Some(location_id) {
        errors.add(
            "product_transaction_id",
            "The product transaction belongs to another location.",
        );
        return Ok(None);
    }
    if pt.text("payment_method") != Some(method) {
        errors.add(
            "product_transaction_id",
            format!("The product transaction does not take {method} payments."),
        );
        return Ok(None);
    }
    if pt.int("active") == Some(0) {
        errors.add("product_transaction_id", "The product transaction is not active.");
        return Ok(None);
    }
    Ok(Some(pt))
}

/// Checks an ACH request against its product transaction's profile.
fn check_ach(
    settings: &Json,
    action: Action,
    record: &Record,
    parsed: &Parsed,
    bank: &mut AchData,
    errors: &mut FieldErrors,
) {
    if bank.sec_code.is_empty() {
        errors.add("ach_sec_code", blank("ach_sec_code"));
        return;
    }
    if let Err(msg) = crate::cards::check_sec_code(&bank.sec_code) {
        errors.add("ach_sec_code", msg);
        return;
    }
    if action == Action::Credit && bank.sec_code != "CCD" {
        errors.add("ach_sec_code", "Merchant-initiated credits use SEC code CCD.");
        return;
    }
    let profiles = ach_profiles(settings);
    let Some(profile) = profiles.iter().find(|p| p.sec_code == bank.sec_code) else {
        let codes: Vec<&str> = profiles.iter().map(|p| p.sec_code.as_str()).collect();
        errors.add(
            "ach_sec_code",
            format!(
                "The product transaction takes SEC codes {} only.",
                codes.join(", ")
            ),
        );
        return;
    };
    if !profile.actions.iter().any(|a| a == action.name()) {
        errors.add(
            "action",
            format!(
                "The {} ACH profile of this product transaction does not allow {}.",
                bank.sec_code,
                action.name()
            ),
        );
    }
    let has = |f: &str| !record.get(f).is_null() || parsed.text(f).is_some();
    check_identity(&profile.required, has, errors);
    if profile.required.iter().any(|f| f == "check_number") && bank.check_number.is_none() {
        errors.add("check_number", blank("check_number"));
    }
    if let Some(date) = &bank.effective_date {
        if *date < date_text(record.int("created_ts").unwrap_or(0), chrono_tz::UTC) {
            errors.add("effective_date", "Effective Date cannot be in the past.");
        }
    }
}

fn order_num() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..12)
        .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
        .collect()
}

fn flag_setting(settings: &Json, name: &str) -> bool {
    matches!(&settings[name], Json::Bool(true)) || settings[name].as_i64() == Some(1)
}

/// Step 1 of POST /v2/transactions.
pub fn prepare_create(
    cx: &Cx,
    conn: &mut dyn Conn,
    parsed: Parsed,
    node: &str,
    idem_key: Option<&str>,
) -> ApiResult<Prepared> {
    let action = parsed.action;
    let mut record = parsed.input.record.clone();
    let mut errors = FieldErrors::new();
    let method = record.text("payment_method").unwrap_or("cc").to_string();
    let id = new_id();
    record.set("id", id.clone());
    record.set("created_ts", cx.now);
    record.set("modified_ts", cx.now);
    record.set("created_user_id", cx.user_id.clone());
    record.set("modified_user_id", cx.user_id.clone());
    record.set("timestamp", timestamp_text(cx.now));
    record.set("state", PENDING);
    record.set("pending_node", node.to_string());
    record.set("refunded_amount", 0);
    record.set("trx_source_id", 12);
    record.set("is_recurring", 0);
    record.set("notification_email_sent", 0);

    // Where.
    let location_id = record
        .text("location_id")
        .map(str::to_string)
        .unwrap_or_else(|| cx.scope.location_id.clone());
    if query::find(conn, &LOCATION, &cx.scope, &location_id)?.is_none() {
        return Err(ApiError::field(
            "location_id",
            "location_id provided is not valid",
        ));
    }
    record.set("location_id", location_id.clone());
    let pt = product_transaction(cx, conn, &record, &method, &location_id, &mut errors)?;
    let settings = pt.as_ref().map(settings).unwrap_or(Json::Null);
    if let Some(pt) = &pt {
        record.set("product_transaction_id", pt.id().to_string());
    }

    // Who.
    let contact = match (
        record.text("contact_id").map(str::to_string),
        parsed.text("contact_api_id"),
    ) {
        (Some(id), _) => {
            let c = query::find(conn, &CONTACT, &cx.scope, &id)?;
            if c.is_none() {
                errors.add("contact_id", "contact_id provided is not valid");
            }
            c
        }
        (None, Some(api_id)) => {
            let c = query::find_by_api_id(conn, &CONTACT, &cx.scope, &location_id, &api_id)?;
            if c.is_none() {
                errors.add("contact_api_id", "contact_api_id provided is not valid");
            }
            c
        }
        _ => None,
    };

    // With what.
    let resolved = source::resolve(cx, conn, &parsed, &method, &location_id, &mut errors)?;
    let Some(Resolved {
        mut source,
        vault,
        previous,
    }) = resolved
    else {
        errors.into_result()?;
        return Err(ApiError::field("account_number", blank("account_number")));
    };
    let contact_id = contact.as_ref().map(|c| c.id().to_string()).or_else(|| {
        vault
            .as_ref()
            .and_then(|v| v.text("contact_id").map(str::to_string))
    });
    record.set("contact_id", contact_id.clone());
    if let Some(v) = &vault {
        record.set("account_vault_id", v.id().to_string());
        record.set("is_accountvault", 1);
    } else {
        record.set("is_accountvault", 0);
    }
    if let Some(p) = &previous {
        record.set("previous_transaction_id", p.id().to_string());
    }
    let (number, type_id) = match &mut source {
        Source::Card(card) => {
            record.set("account_type", card.account_type);
            record.set("exp_date", card.data.exp_date.clone());
            if record.get("account_holder_name").is_null() {
                record.set("account_holder_name", card.data.account_holder_name.clone());
            }
            record.set(
                "entry_mode_id",
                card.data.entry_mode.unwrap_or(EntryMode::Keyed).code(),
            );
            if record.get("billing_street").is_null() {
                record.set("billing_street", card.data.billing_street.clone());
            }
            if record.get("billing_zip").is_null() {
                record.set("billing_zip", card.data.billing_zip.clone());
            }
            let t = match action {
                Action::AvsOnly => TypeId::AvsOnly,
                Action::Refund => TypeId::Refund,
                _ => TypeId::Sale,
            };
            (card.data.pan.clone(), t)
        }
        Source::Bank(bank) => {
            if let Some(s) = record.text("ach_sec_code") {
                bank.sec_code = s.to_string();
            }
            if bank.effective_date.is_none() {
                let hold = velocity::debit_hold_days(&settings["velocity_settings"]);
                bank.effective_date = Some(date_text(cx.now + hold * 86_400, chrono_tz::UTC));
            }
            // Without a valid product transaction there is no profile to
            // check against (its own error already says so).
            if pt.is_some() {
                check_ach(&settings, action, &record, &parsed, bank, &mut errors);
            }
            record.set("account_type", bank.account_type.as_str());
            record.set("routing", bank.routing.clone());
            record.set("ach_sec_code", bank.sec_code.clone());
            record.set("effective_date", bank.effective_date.clone());
            if record.get("account_holder_name").is_null() {
                record.set("account_holder_name", bank.account_holder_name.clone());
            }
            let t = match action {
                Action::Refund => TypeId::Refund,
                Action::Credit => TypeId::Credit,
                _ => TypeId::Debit,
            };
            (bank.account_number.clone(), t)
        }
    };
    record.set("type_id", type_id.code() as i64);
    if method == "cc" {
        record.set("first_six", number.get(..6).map(str::to_string));
    }
    if number.len() >= 8 || method == "cc" {
        record.set(
            "last_four",
            number.get(number.len().saturating_sub(4)..).map(str::to_string),
        );
    }
    record.set("account_number", cx.keyring.encrypt(&number));
    if record.get("order_num").is_null() {
        record.set("order_num", order_num());
    }

    // The product transaction's virtual-terminal requirements.
    if method == "cc" && action != Action::Refund {
        for (setting, field) in [
            ("vt_require_street", "billing_street"),
            ("vt_require_zip", "billing_zip"),
        ] {
            if flag_setting(&settings, setting) && record.get(field).is_null() {
                errors.add(field, blank(field));
            }
        }
        if flag_setting(&settings, "vt_require_cvv")
            && vault.is_none()
            && previous.is_none()
            && parsed.text("cvv").is_none()
        {
            errors.add("cvv", blank("cvv"));
        }
    }
    // Lodging dates.
    if let (Some(a), Some(b)) = (record.text("checkin_date"), record.text("checkout_date")) {
        let parse = |s: &str| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
        if let (Some(a), Some(b)) = (parse(a), parse(b)) {
            let nights = (b - a).num_days();
            if !(0..=99).contains(&nights) {
                errors.add(
                    "checkout_date",
                    "Checkout Date must be 0 to 99 days after checkin_date.",
                );
            }
        }
    }
    let save = parsed.flag("save_account") == Some(true);
    if save && contact_id.is_none() {
        errors.add(
            "contact_id",
            "Contact Id cannot be blank. (save_account stores the account on a contact.)",
        );
    }
    // The api id is unique per location; the index catches a lost race.
    if let Some(api_id) = record.text("transaction_api_id") {
        if query::find_by_api_id(conn, &TRANSACTION, &cx.scope, &location_id, api_id)?.is_some() {
            errors.add(
                "transaction_api_id",
                "Transaction Api Id has already been taken at this location.",
            );
        }
    }
    let amount = record.int("transaction_amount").unwrap_or(0);

    // A referenced refund: the original must allow it, and its remainder
    // is reserved now so concurrent refunds cannot exceed it.
    if action == Action::Refund {
        if let Some(orig) = &previous {
            let facts = Facts::load(conn, orig)?;
            if let Err(msg) = state::refundable(orig, &facts) {
                errors.add("previous_transaction_id", msg);
            } else if method == "ach" && amount != orig.int("transaction_amount").unwrap_or(0) {
                errors.add(
                    "transaction_amount",
                    "ACH debits are refunded in full only; send a credit for a partial amount.",
                );
            } else if amount > state::remaining(orig) {
                errors.add(
                    "transaction_amount",
                    format!(
                        "Transaction Amount cannot exceed the amount left to refund ({}).",
                        crate::money::format(state::remaining(orig))
                    ),
                );
            } else {
                let hold = velocity::refund_hold_days(&settings["velocity_settings"]);
                if hold > 0 && orig.int("created_ts").unwrap_or(0) + hold * 86_400 > cx.now {
                    errors.add(
                        "previous_transaction_id",
                        format!("Refunds are held for {hold} days after the original transaction."),
                    );
                }
            }
        }
    }
    errors.into_result()?;
    if action == Action::Refund {
        if let Some(orig) = &previous {
            let reserved = conn.execute(&Sql::with(
                "UPDATE transactions SET refunded_amount = refunded_amount + ? \
                 WHERE id = ? AND transaction_amount - refunded_amount >= ?",
                vec![amount.into(), orig.id().into(), amount.into()],
            ))?;
            if reserved == 0 {
                return Err(ApiError::field(
                    "transaction_amount",
                    "Transaction Amount cannot exceed the amount left to refund.",
                ));
            }
        }
    }

    // Velocity: PostgreSQL serialises the product transaction's writers
    // while a limit is set, so two requests cannot both take the last slot.
    let class = match type_id {
        TypeId::Refund => Some(Class::Refund),
        TypeId::Credit => Some(Class::Credit),
        TypeId::Sale | TypeId::Debit => Some(Class::Debit),
        _ => None,
    };
    let mut breach = None;
    if let (Some(class), Some(pt)) = (class, &pt) {
        if velocity::any_limit(&settings["velocity_settings"], class) {
            if conn.dialect() == crate::db::Dialect::Postgres {
                conn.query(&Sql::with(
                    "SELECT id FROM product_transactions WHERE id = ? FOR UPDATE",
                    vec![pt.id().into()],
                ))?;
            }
            let tz = location_tz(conn, &location_id)?;
            breach = velocity::check(
                conn,
                &settings["velocity_settings"],
                pt.id(),
                class,
                amount,
                cx.now,
                tz,
            )?;
        }
    }

    insert(conn, &record).map_err(|e| match e {
        crate::db::DbError::Unique(_) => ApiError::field(
            "transaction_api_id",
            "Transaction Api Id has already been taken at this location.",
        ),
        other => other.into(),
    })?;
    if let Some(key) = idem_key {
        idempotency::link(conn, &cx.user_id, key, &id)?;
    }

    let options = AuthOptions {
        allow_partial: parsed
            .flag("allow_partial_authorization_override")
            .unwrap_or_else(|| flag_setting(&settings, "allow_partial_authorization")),
        auto_decline_cvv: parsed
            .flag("auto_decline_cvv_override")
            .unwrap_or_else(|| flag_setting(&settings, "auto_decline_cvv")),
        auto_decline_street: parsed
            .flag("auto_decline_street_override")
            .unwrap_or_else(|| flag_setting(&settings, "auto_decline_street")),
        auto_decline_zip: parsed
            .flag("auto_decline_zip_override")
            .unwrap_or_else(|| flag_setting(&settings, "auto_decline_zip")),
    };
    let gateway_id = id.clone();
    let call = if let Some(b) = breach {
        Call::Decline(b.reason, b.message)
    } else {
        match (&source, action, &previous) {
            // A referenced refund, card or ACH, names its original.
            (_, Action::Refund, Some(orig)) => Call::Refund(RefundRequest {
                gateway_id,
                original: processor_ref(orig),
                amount,
            }),
            (Source::Card(card), Action::Sale | Action::AuthOnly, _) => Call::Authorize(AuthorizeRequest {
                gateway_id,
                amount,
                card: card.data.clone(),
                capture: action == Action::Sale,
                options,
            }),
            (Source::Card(card), Action::Force, _) => Call::Force(ForceRequest {
                gateway_id,
                amount,
                card: card.data.clone(),
                auth_code: record.text("auth_code").unwrap_or_default().to_string(),
            }),
            (Source::Card(card), Action::AvsOnly, _) => Call::AvsOnly(AvsOnlyRequest {
                card: card.data.clone(),
            }),
            (Source::Card(card), Action::Refund, None) => Call::Credit(CreditRequest {
                gateway_id,
                amount,
                card: card.data.clone(),
            }),
            (Source::Bank(bank), Action::Debit, _) => Call::AchDebit(AchRequest {
                gateway_id,
                amount,
                account: bank.clone(),
            }),
            (Source::Bank(bank), _, _) => Call::AchCredit(AchRequest {
                gateway_id,
                amount,
                account: bank.clone(),
            }),
            (Source::Card(_), _, _) => {
                return Err(ApiError::field("action", "This action does not take a card."));
            }
        }
    };
    let save_account = match (save, &contact_id) {
        (true, Some(contact_id)) => Some(SaveAccount {
            contact_id: contact_id.clone(),
            title: parsed.text("save_account_title"),
            source,
        }),
        _ => None,
    };
    Ok(Prepared {
        id,
        action,
        call,
        save_account,
        new_amount: None,
        extra: Vec::new(),
    })
}

pub fn processor_ref(tx: &Record) -> ProcessorRef {
    ProcessorRef {
        reference: tx.text("processor_reference").unwrap_or_default().to_string(),
        auth_code: tx.text("auth_code").map(str::to_string),
        method: if tx.text("payment_method") == Some("ach") {
            PaymentMethod::Ach
        } else {
            PaymentMethod::Cc
        },
    }
}

/// The transaction with this id, outside any scope: for completing work
/// this process started on a record it already found in scope.
fn load(conn: &mut dyn Conn, id: &str) -> ApiResult<Record> {
    let mut sql = query::select_unscoped(&TRANSACTION);
    sql.push(" AND t.id = ").bind(id.to_string());
    conn.query_one(&sql)?
        .map(|r| Record::from_row(&TRANSACTION, r))
        .ok_or_else(|| ApiError::not_found("transaction"))
}

/// Writes the columns of `record` that differ from `before` (the row as
/// read in this job), if the row is still `pending`. Only changed columns:
/// SQLite rewrites the entry of every index whose columns appear in the
/// SET list, changed or not, and the completion changes none of the
/// location, api id, previous or velocity keys.
fn store_pending(conn: &mut dyn Conn, before: &Record, record: &Record) -> ApiResult<bool> {
    let mut sql = Sql::new("UPDATE transactions SET ");
    let mut first = true;
    for ((field, value), old) in record.fields().zip(&before.values) {
        // `state` always goes in: it is what the completion changes.
        if field.name == "id" || (value == old && field.name != "state") {
            continue;
        }
        if !first {
            sql.push(", ");
        }
        first = false;
        sql.push(field.column).push(" = ").bind(value.clone());
    }
    sql.push(" WHERE id = ")
        .bind(record.id().to_string())
        .push(" AND state = ")
        .bind(PENDING);
    Ok(conn.execute(&sql)? == 1)
}

/// `{"transaction": <record as rendered>}`, built in place: `json!` would
/// copy the whole rendered map once more, inside the write job.
fn transaction_body(cx: &Cx, record: &Record) -> Json {
    let mut body = Map::with_capacity(1);
    body.insert("transaction".into(), Json::Object(render(cx, record)));
    Json::Object(body)
}

/// The fields a processor answer sets on a transaction.
fn apply_answer(record: &mut Record, answer: &ProcessorResponse, method: &str) {
    record.set("status_id", answer.status_id.code() as i64);
    record.set("reason_code_id", answer.reason_code_id.code() as i64);
    record.set("verbiage", answer.verbiage.chars().take(64).collect::<String>());
    record.set(
        "response_message",
        answer.response_message.chars().take(255).collect::<String>(),
    );
    if let Some(code) = &answer.auth_code {
        record.set("auth_code", code.clone());
    }
    if !answer.processor_reference.is_empty() {
        record.set("processor_reference", answer.processor_reference.clone());
    }
    if method == "cc" {
        record.set("avs", answer.avs.map(|a| a.code()));
        record.set("avs_enhanced", answer.avs_enhanced.map(|a| a.code()));
        record.set("cvv_response", answer.cvv_response.map(|c| c.code()));
    }
}

/// Step 3 of POST /v2/transactions. Returns the completed record.
pub fn complete_create(
    cx: &Cx,
    conn: &mut dyn Conn,
    prepared: &Prepared,
    answer: &ProcessorResponse,
    idem_key: Option<&str>,
) -> ApiResult<Json> {
    let before = load(conn, &prepared.id)?;
    let mut record = before.clone();
    if record.text("state") != Some(PENDING) {
        return Err(ApiError::Unavailable(
            "The transaction was interrupted and has been reversed; look it up by id or transaction_api_id."
                .into(),
        ));
    }
    let method = record.text("payment_method").unwrap_or("cc").to_string();
    let requested = record.int("transaction_amount").unwrap_or(0);
    apply_answer(&mut record, answer, &method);
    let approved = answer.is_approved();
    match prepared.action {
        Action::AvsOnly => {
            record.set("transaction_amount", 0);
            record.set("auth_amount", 0);
        }
        _ if approved => {
            // A partial approval settles what was approved.
            let amount = if answer.approved_amount > 0 && answer.approved_amount < requested {
                answer.approved_amount
            } else {
                requested
            };
            record.set("transaction_amount", amount);
            record.set("auth_amount", amount);
        }
        _ => record.set("auth_amount", 0),
    }
    record.set("state", DONE);
    record.set("pending_node", Value::Null);
    record.set("modified_ts", cx.now);

    if approved && method == "cc" {
        let amount = record.int("transaction_amount").unwrap_or(0);
        match (prepared.action, answer.status_id) {
            (Action::Sale | Action::Force, StatusId::Approved) => {
                batches::enter(cx, conn, &mut record, amount)?
            }
            (Action::Refund, StatusId::Refunded) => batches::enter(cx, conn, &mut record, -amount)?,
            _ => {}
        }
    }
    if !approved && prepared.action == Action::Refund {
        release_refund(conn, &record)?;
    }
    if let (true, Some(save)) = (approved, &prepared.save_account) {
        // The charge stands even if the account cannot be kept.
        match save_vault(cx, conn, &record, save) {
            Ok(vault_id) => {
                if record.get("account_vault_id").is_null() {
                    record.set("account_vault_id", vault_id);
                }
            }
            Err(ApiError::Validation(e)) => {
                tracing::warn!(transaction_id = record.id(), errors = ?e.0.keys().collect::<Vec<_>>(), "save_account: the vault was refused")
            }
            Err(other) => return Err(other),
        }
    }
    if !store_pending(conn, &before, &record)? {
        return Err(ApiError::Unavailable(
            "The transaction was interrupted and has been reversed; look it up by id or transaction_api_id."
                .into(),
        ));
    }
    events::record(conn, cx, EventAction::Create, &record, &[])?;
    let body = transaction_body(cx, &record);
    if let Some(key) = idem_key {
        idempotency::finish(conn, &cx.user_id, key, 201, &body)?;
    }
    Ok(body)
}

/// Gives back a refund's reservation on its original.
pub fn release_refund(conn: &mut dyn Conn, refund: &Record) -> ApiResult<()> {
    if let Some(orig) = refund.text("previous_transaction_id") {
        conn.execute(&Sql::with(
            "UPDATE transactions SET refunded_amount = refunded_amount - ? WHERE id = ? AND refunded_amount >= ?",
            vec![
                refund.int("transaction_amount").unwrap_or(0).into(),
                orig.into(),
                refund.int("transaction_amount").unwrap_or(0).into(),
            ],
        ))?;
    }
    Ok(())
}

/// Stores the transaction's account as a vault on the contact.
fn save_vault(cx: &Cx, conn: &mut dyn Conn, tx: &Record, save: &SaveAccount) -> ApiResult<String> {
    let mut body = Map::new();
    body.insert("location_id".into(), json!(tx.text("location_id")));
    body.insert("contact_id".into(), json!(save.contact_id));
    if let Some(t) = &save.title {
        body.insert("title".into(), json!(t));
    }
    match &save.source {
        Source::Card(card) => {
            body.insert("payment_method".into(), json!("cc"));
            body.insert("account_number".into(), json!(card.data.pan));
            body.insert("exp_date".into(), json!(card.data.exp_date));
            body.insert(
                "account_holder_name".into(),
                json!(tx.text("account_holder_name")),
            );
            body.insert("billing_zip".into(), json!(tx.text("billing_zip")));
            body.insert("billing_address".into(), json!(tx.text("billing_street")));
        }
        Source::Bank(bank) => {
            body.insert("payment_method".into(), json!("ach"));
            body.insert("account_number".into(), json!(bank.account_number));
            body.insert("routing".into(), json!(bank.routing));
            body.insert("account_type".into(), json!(bank.account_type.as_str()));
            body.insert("account_holder_name".into(), json!(bank.account_holder_name));
            body.insert("is_company".into(), json!(bank.sec_code == "CCD"));
            body.insert("ach_sec_code".into(), json!(bank.sec_code));
        }
    }
    let body: Map<String, Json> = body.into_iter().filter(|(_, v)| !v.is_null()).collect();
    let input = for_create(&ACCOUNT_VAULT, &body).map_err(|e| {
        let mut errors = FieldErrors::new();
        for (field, messages) in e.0 {
            for m in messages {
                errors.add("save_account", format!("{field}: {m}"));
            }
        }
        ApiError::Validation(errors)
    })?;
    let (vault, _) = crate::engine::create(cx, conn, &ACCOUNT_VAULT, input)?;
    Ok(vault.id().to_string())
}

/// Step 1 of PUT /v2/transactions/{id}: checks the action against the
/// transaction's state and, when the processor is involved, marks the
/// transaction so no other action runs on it meanwhile.
pub fn prepare_update(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    parsed: Parsed,
    node: &str,
) -> ApiResult<Prepared> {
    let action = parsed.action;
    let facts = Facts::load(conn, tx)?;
    let refuse = |msg: String| ApiError::field("action", msg);
    let sent = parsed.input.record.int("transaction_amount");
    let current = tx.int("transaction_amount").unwrap_or(0);
    let mut extra: Vec<(&'static str, Value)> = Vec::new();
    for name in &parsed.input.present {
        let Some(field) = TRANSACTION.field(name) else {
            continue;
        };
        let value = parsed.input.record.get(name).clone();
        match *name {
            "action" | "transaction_amount" | "contact_id" => {}
            "payment_method" if value.as_str() != tx.text("payment_method") => {
                return Err(ApiError::field(
                    "payment_method",
                    format!(
                        "Payment Method does not match the transaction ({}).",
                        tx.text("payment_method").unwrap_or_default()
                    ),
                ));
            }
            "payment_method" => {}
            // Set once: a transaction without one may take one now.
            "transaction_api_id" => match (tx.text("transaction_api_id"), value.as_str()) {
                (Some(have), Some(sent)) if have == sent => {}
                (None, Some(sent)) => {
                    let location = tx.text("location_id").unwrap_or_default();
                    if query::find_by_api_id(conn, &TRANSACTION, &cx.scope, location, sent)?.is_some() {
                        return Err(ApiError::field(
                            "transaction_api_id",
                            "Transaction Api Id has already been taken at this location.",
                        ));
                    }
                    extra.push((field.name, value));
                }
                (_, None) => {}
                (Some(_), Some(_)) => {
                    return Err(ApiError::field(
                        "transaction_api_id",
                        "Transaction Api Id is already set and cannot change.",
                    ))
                }
            },
            _ if field.stored => extra.push((field.name, value)),
            _ => {}
        }
    }
    let (call, new_amount) = match action {
        Action::AuthComplete => {
            state::completable(tx, &facts).map_err(refuse)?;
            let authorized = tx.int("auth_amount").unwrap_or(current);
            let amount = sent.unwrap_or(current);
            if amount > authorized {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount cannot exceed the authorized amount ({}).",
                        crate::money::format(authorized)
                    ),
                ));
            }
            (
                Call::Capture(CaptureRequest {
                    original: processor_ref(tx),
                    authorized_amount: authorized,
                    amount,
                }),
                Some(amount),
            )
        }
        Action::AuthIncrement => {
            state::completable(tx, &facts).map_err(refuse)?;
            let amount = sent.unwrap_or(0);
            if amount <= current {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount is the new authorized total and must be above the current {}.",
                        crate::money::format(current)
                    ),
                ));
            }
            (
                Call::Increment(IncrementRequest {
                    original: processor_ref(tx),
                    authorized_amount: tx.int("auth_amount").unwrap_or(current),
                    amount,
                }),
                Some(amount),
            )
        }
        Action::Void => {
            state::voidable(tx, &facts).map_err(refuse)?;
            if let Some(a) = sent {
                if a != current {
                    return Err(ApiError::field(
                        "transaction_amount",
                        "A void cancels the whole amount; use partialreversal to lower it.",
                    ));
                }
            }
            (
                Call::Void(VoidRequest {
                    original: processor_ref(tx),
                }),
                Some(0),
            )
        }
        Action::PartialReversal => {
            state::reversible(tx, &facts).map_err(refuse)?;
            let amount = sent.unwrap_or(0);
            if amount >= current {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount is the reduced final amount and must be below {}.",
                        crate::money::format(current)
                    ),
                ));
            }
            (
                Call::PartialReversal(PartialReversalRequest {
                    original: processor_ref(tx),
                    original_amount: current,
                    new_amount: amount,
                    captured: state::status(tx) == Some(StatusId::Approved),
                }),
                Some(amount),
            )
        }
        Action::TipAdjust => {
            state::tip_adjustable(tx, &facts).map_err(refuse)?;
            let base = current - tx.int("tip_amount").unwrap_or(0);
            let amount = sent.unwrap_or(0);
            if amount < base {
                return Err(ApiError::field(
                    "transaction_amount",
                    format!(
                        "Transaction Amount is the new total with the tip and cannot be below {}.",
                        crate::money::format(base)
                    ),
                ));
            }
            (Call::Nothing, Some(amount))
        }
        Action::Edit => {
            if tx.text("state") == Some(PENDING) {
                return Err(refuse(
                    "The transaction is still being processed; retry shortly.".into(),
                ));
            }
            (Call::Nothing, None)
        }
        _ => return Err(refuse(format!("The {} action runs with POST.", action.name()))),
    };
    if !matches!(call, Call::Nothing) {
        let marked = conn.execute(&Sql::with(
            "UPDATE transactions SET pending_action = ?, pending_node = ? \
             WHERE id = ? AND state = ? AND pending_action IS NULL",
            vec![action.name().into(), node.into(), tx.id().into(), DONE.into()],
        ))?;
        if marked == 0 {
            return Err(refuse(
                "Another action on this transaction is in progress; retry shortly.".into(),
            ));
        }
    }
    let mut prepared = Prepared {
        id: tx.id().to_string(),
        action,
        call,
        save_account: None,
        new_amount,
        extra,
    };
    if action == Action::Edit {
        // contact_id "" detaches; contact_api_id names one at the location.
        let contact = match (parsed.present("contact_id"), parsed.text("contact_api_id")) {
            (true, _) => match parsed.input.record.text("contact_id") {
                None => Some(Value::Null),
                Some(id) => match query::find(conn, &CONTACT, &cx.scope, id)? {
                    Some(c) if c.text("location_id") == tx.text("location_id") => Some(Value::from(id)),
                    _ => return Err(ApiError::field("contact_id", "contact_id provided is not valid")),
                },
            },
            (false, Some(api_id)) => {
                let location = tx.text("location_id").unwrap_or_default();
                match query::find_by_api_id(conn, &CONTACT, &cx.scope, location, &api_id)? {
                    Some(c) => Some(Value::from(c.id())),
                    None => {
                        return Err(ApiError::field(
                            "contact_api_id",
                            "contact_api_id provided is not valid",
                        ))
                    }
                }
            }
            _ => None,
        };
        if let Some(c) = contact {
            prepared.extra.push(("contact_id", c));
        }
        let move_vault = parsed.flag("move_account_vault") == Some(true);
        let move_txs = parsed.flag("move_account_vault_transactions") == Some(true);
        if (move_vault || move_txs) && tx.get("account_vault_id").is_null() {
            return Err(ApiError::field(
                "move_account_vault",
                "The transaction was not paid with an account vault.",
            ));
        }
        if move_vault {
            prepared.extra.push(("move_account_vault", Value::Int(1)));
        }
        if move_txs {
            prepared
                .extra
                .push(("move_account_vault_transactions", Value::Int(1)));
        }
    }
    Ok(prepared)
}

/// Step 3 of PUT /v2/transactions/{id}. `answer` is None for actions that
/// do not call the processor.
pub fn complete_update(
    cx: &Cx,
    conn: &mut dyn Conn,
    prepared: &Prepared,
    answer: Option<&ProcessorResponse>,
    idem_key: Option<&str>,
) -> ApiResult<Json> {
    if answer.is_some() && clear_mark(conn, &prepared.id, Some(prepared.action))? == 0 {
        return Err(ApiError::Unavailable(
            "The action was interrupted; look the transaction up and retry.".into(),
        ));
    }
    // Read after the mark is gone: the row as this action found it.
    let old = load(conn, &prepared.id)?;
    let mut changes: Vec<(&'static str, Value)> = Vec::new();
    let current = old.int("transaction_amount").unwrap_or(0);
    let mut batch_change: Option<(i64, i64)> = None;
    let mut vault_moves: Option<(bool, bool)> = None;
    match (prepared.action, answer) {
        (Action::Edit, _) => {
            let mut mv = (false, false);
            for (name, value) in &prepared.extra {
                match *name {
                    "move_account_vault" => mv.0 = true,
                    "move_account_vault_transactions" => mv.1 = true,
                    _ => changes.push((name, value.clone())),
                }
            }
            vault_moves = Some(mv);
        }
        (Action::TipAdjust, _) => {
            let new = prepared.new_amount.unwrap_or(current);
            let base = current - old.int("tip_amount").unwrap_or(0);
            changes.push(("transaction_amount", new.into()));
            changes.push(("tip_amount", (new - base).into()));
            batch_change = Some((0, new - current));
        }
        (action, Some(answer)) => {
            for (name, value) in &prepared.extra {
                changes.push((name, value.clone()));
            }
            // A void answers 201 (Voided): only a decline is a refusal.
            if !matches!(answer.status_id, StatusId::Declined | StatusId::Rejected) {
                let new = prepared.new_amount.unwrap_or(current);
                changes.push(("status_id", (answer.status_id.code() as i64).into()));
                changes.push(("reason_code_id", (answer.reason_code_id.code() as i64).into()));
                changes.push(("verbiage", answer.verbiage.clone().into()));
                changes.push(("response_message", answer.response_message.clone().into()));
                match action {
                    Action::Void => {
                        changes.push(("transaction_amount", 0.into()));
                        changes.push(("void_date", timestamp_text(cx.now).into()));
                        if old.text("transaction_batch_id").is_some() {
                            let signed = if state::type_id(&old) == Some(TypeId::Refund) {
                                -current
                            } else {
                                current
                            };
                            batch_change = Some((-1, -signed));
                        }
                        if state::type_id(&old) == Some(TypeId::Refund) {
                            release_refund(conn, &old)?;
                        }
                    }
                    Action::AuthComplete => {
                        changes.push(("transaction_amount", new.into()));
                    }
                    Action::AuthIncrement => {
                        changes.push(("transaction_amount", new.into()));
                        changes.push(("auth_amount", new.into()));
                    }
                    Action::PartialReversal => {
                        changes.push(("transaction_amount", new.into()));
                        changes.push(("auth_amount", new.into()));
                        batch_change = Some((0, new - current));
                    }
                    _ => {}
                }
            } else {
                // A declined follow-up leaves the transaction as it was and
                // says why.
                changes.push(("reason_code_id", (answer.reason_code_id.code() as i64).into()));
                changes.push(("response_message", answer.response_message.clone().into()));
            }
        }
        (_, None) => {}
    }
    let input = UpdateInput::named(&TRANSACTION, changes)?;
    let mut record = update_record(cx, conn, old.clone(), input)?;
    if let Some((count, amount)) = batch_change {
        batches::adjust(conn, cx, &record, count, amount)?;
    }
    // A completed authorization enters the batch now.
    if prepared.action == Action::AuthComplete
        && answer.is_some_and(|a| a.is_approved())
        && record.get("transaction_batch_id").is_null()
    {
        let amount = record.int("transaction_amount").unwrap_or(0);
        let before = record.clone();
        batches::enter(cx, conn, &mut record, amount)?;
        let input = UpdateInput::named(
            &TRANSACTION,
            ["transaction_batch_id", "batch", "batch_seq"].map(|n| (n, record.get(n).clone())),
        )?;
        record = update_record(cx, conn, before, input)?;
    }
    if let Some((move_vault, move_txs)) = vault_moves {
        move_with_vault(cx, conn, &record, move_vault, move_txs)?;
    }
    let body = transaction_body(cx, &record);
    if let Some(key) = idem_key {
        idempotency::finish(conn, &cx.user_id, key, 200, &body)?;
    }
    Ok(body)
}

/// edit's `move_account_vault` (the vault follows the transaction's
/// contact) and `move_account_vault_transactions` (the vault's other
/// transactions follow too).
fn move_with_vault(
    cx: &Cx,
    conn: &mut dyn Conn,
    tx: &Record,
    move_vault: bool,
    move_txs: bool,
) -> ApiResult<()> {
    let Some(vault_id) = tx.text("account_vault_id") else {
        return Ok(());
    };
    let contact = tx.get("contact_id").clone();
    if move_vault {
        if let Some(vault) = query::find(conn, &ACCOUNT_VAULT, &cx.scope, vault_id)? {
            let input = UpdateInput::named(&ACCOUNT_VAULT, [("contact_id", contact.clone())])?;
            update_record(cx, conn, vault, input)?;
        }
    }
    if move_txs {
        let mut sql = query::select(&TRANSACTION, &cx.scope);
        sql.push(" AND t.account_vault_id = ")
            .bind(vault_id.to_string())
            .push(" AND t.id <> ")
            .bind(tx.id().to_string())
            .push(" LIMIT 5000");
        for row in conn.query(&sql)? {
            let other = Record::from_row(&TRANSACTION, row);
            let input = UpdateInput::named(&TRANSACTION, [("contact_id", contact.clone())])?;
            update_record(cx, conn, other, input)?;
        }
    }
    Ok(())
}

/// Clears the mark of a PUT action whose processor call failed outright.
pub fn abandon_update(conn: &mut dyn Conn, prepared: &Prepared) -> ApiResult<()> {
    clear_mark(conn, &prepared.id, Some(prepared.action))?;
    Ok(())
}

/// Removes a PUT action's mark: `action`'s own, or any (reconciliation).
/// Returns how many rows changed (0: someone else cleared it).
pub fn clear_mark(conn: &mut dyn Conn, id: &str, action: Option<Action>) -> ApiResult<u64> {
    let mut sql = Sql::new("UPDATE transactions SET pending_action = NULL, pending_node = NULL WHERE id = ");
    sql.bind(id.to_string());
    match action {
        Some(a) => sql.push(" AND pending_action = ").bind(a.name()),
        None => sql.push(" AND pending_action IS NOT NULL"),
    };
    Ok(conn.execute(&sql)?)
}

/// Shared handles of the payment service.
#[derive(Clone)]
pub struct Payments {
    pub processor: Arc<dyn Processor>,
    /// This process's id in `pending_node`.
    pub node_id: Arc<str>,
    /// Set after the first reconciliation pass.
    pub started: Arc<std::sync::atomic::AtomicBool>,
}

impl Payments {
    pub fn new(processor: Arc<dyn Processor>) -> Payments {
        Payments {
            processor,
            node_id: Arc::from(format!("node-{}", new_id()).as_str()),
            started: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }
}
