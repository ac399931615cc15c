//! A new payment (sale, authonly, avsonly, force, refund, debit, credit),
//! step 1 and step 3 of the three in `payments` (the call is step 2).
//!
//! Step 1, [`prepare`], reads top to bottom as the questions a cashier
//! asks: **where** (location, product transaction), **who** (the
//! contact), **with what** (the money's source), whether the **rules**
//! allow it (requirements, refund remainder, velocity), then it records
//! the payment as pending and says which **processor call** it needs.
//! Step 3, [`complete`], records the processor's answer.

use super::actions::{Action, Parsed};
use super::call::Call;
use super::pending::{
    apply_answer, load, processor_ref, release_refund, save_vault, store_pending, Completed, Prepared,
    SaveAccount,
};
use super::request::Origin;
use super::source::{self, Resolved, Source};
use super::state::{self, Facts, DONE, PENDING};
use super::velocity::{self, Breach, Class};
use super::{batches, idempotency, KeptConfig};
use crate::cards::PAYROLL_SEC_CODES;
use crate::clock::{date_text, timestamp_text};
use crate::db::{Conn, Sql, Value};
use crate::engine::events::{self, Action as EventAction};
use crate::engine::record::Record;
use crate::engine::validate::blank;
use crate::engine::validate::label;
use crate::engine::{insert_sql, query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::ids::new_id;
use crate::processor::*;
use crate::resources::product_transactions::{ach_profiles, check_identity, settings_shared, AchProfile};
use crate::resources::{CONTACT, LOCATION, PRODUCT_TRANSACTION, TRANSACTION};
use serde_json::Value as Json;

pub(super) fn location_tz(conn: &mut dyn Conn, location_id: &str) -> ApiResult<chrono_tz::Tz> {
    let tz = conn
        .query_one(&Sql::with(
            "SELECT tz FROM locations WHERE id = ?",
            vec![location_id.into()],
        ))?
        .and_then(|r| r[0].as_str().and_then(|s| s.parse().ok()));
    Ok(tz.unwrap_or(chrono_tz::UTC))
}

/// The product transaction a new transaction runs on: the one named, or
/// the location's default for the payment method (`default_id`).
fn product_transaction(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &KeptConfig,
    record: &Record,
    method: &str,
    default_id: Option<&str>,
) -> ApiResult<Option<Record>> {
    let id = match (record.text("product_transaction_id"), default_id) {
        (Some(id), _) => id,
        (None, Some(id)) if method != "ach" => id,
        (None, _) => return Ok(None),
    };
    Ok(kept.product_transactions.get_or_find(
        (cx.scope.location_id.clone(), id.to_string()),
        cx.epoch,
        || query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, id),
    )?)
}

/// `pt` ([`product_transaction`]) if a transaction at `location_id` by
/// `method` may run on it; else why not, in `errors`.
fn usable_product_transaction(
    pt: Option<Record>,
    record: &Record,
    method: &str,
    location_id: &str,
    errors: &mut FieldErrors,
) -> Option<Record> {
    let Some(pt) = pt else {
        let message = match record.text("product_transaction_id") {
            Some(_) => "product_transaction_id provided is not valid".to_string(),
            None => blank("product_transaction_id"),
        };
        errors.add("product_transaction_id", message);
        return None;
    };
    if pt.text("location_id") != Some(location_id) {
        errors.add(
            "product_transaction_id",
            "The product transaction belongs to another location.",
        );
        return None;
    }
    if pt.text("payment_method") != Some(method) {
        errors.add(
            "product_transaction_id",
            format!("The product transaction does not take {method} payments."),
        );
        return None;
    }
    if pt.int("active") == Some(0) {
        errors.add("product_transaction_id", "The product transaction is not active.");
        return None;
    }
    Some(pt)
}

/// Checks an ACH request against its product transaction's profile.
/// `replacing`: an ACH update, whose check images are the original's.
fn check_ach(
    settings: &Json,
    action: Action,
    record: &Record,
    parsed: &Parsed,
    bank: &mut AchData,
    replacing: bool,
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
    check_entry(profile, record, parsed, bank, replacing, errors);
    if let Some(date) = &bank.effective_date {
        if *date < date_text(record.int("created_ts").unwrap_or(0), chrono_tz::UTC) {
            errors.add("effective_date", "Effective Date cannot be in the past.");
        }
    }
}

/// What a profile asks of the entry itself: TEL's check number, the MICR
/// line of a check read at the till (POP, C21) and C21's images, none of
/// them where the profile has no use for them; and payroll checks
/// (`ach_identifier` P) only where the processor takes them.
fn check_entry(
    profile: &AchProfile,
    record: &Record,
    parsed: &Parsed,
    bank: &AchData,
    replacing: bool,
    errors: &mut FieldErrors,
) {
    let sec = bank.sec_code.as_str();
    let required = |field: &str| profile.required.iter().any(|r| r == field);
    if required("check_number") && bank.check_number.is_none() {
        errors.add("check_number", blank("check_number"));
    }
    if required("account_holder_name") && bank.account_holder_name.is_empty() {
        errors.add("account_holder_name", blank("account_holder_name"));
    }
    for field in ["track_data", "image_front", "image_back"] {
        let sent = parsed.text(field).is_some();
        let images_kept = replacing && field != "track_data";
        if required(field) && !sent && !images_kept {
            errors.add(field, blank(field));
        } else if sent && !required(field) {
            errors.add(
                field,
                format!("{} is not taken with SEC code {sec}.", label(field)),
            );
        }
    }
    if record.text("ach_identifier") == Some("P") && !PAYROLL_SEC_CODES.contains(&sec) {
        errors.add(
            "ach_identifier",
            format!(
                "Payroll (ach_identifier P) is for SEC codes {} only; this one is {sec}.",
                PAYROLL_SEC_CODES.join(" and ")
            ),
        );
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

/// Where a payment happens.
struct Place {
    location_id: String,
    /// `None` when the request named none that fits (its error is recorded).
    product_transaction: Option<Record>,
    /// The product transaction's settings (`Json::Null` without one).
    settings: std::sync::Arc<Json>,
}

/// What pays.
struct Funding {
    source: Source,
    vault: Option<Record>,
    previous: Option<Record>,
    type_id: TypeId,
}

/// What the checks of a new payment found: the row to be stored, where
/// and with what it pays, and every problem, field by field.
struct Examined {
    record: Record,
    place: Place,
    /// `None` when no source of the money was found (`errors` says why).
    funding: Option<Funding>,
    contact_id: Option<String>,
    errors: FieldErrors,
}

/// Every check of a new payment, in the order a cashier asks: where, who,
/// with what, and whether the rules allow it. Reads only: nothing is
/// reserved or stored, so [`prepare`] and [`dry_run`] share it.
fn examine(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &KeptConfig,
    parsed: &Parsed,
    origin: &Origin,
    node: &str,
) -> ApiResult<Examined> {
    let action = parsed.action;
    let mut errors = FieldErrors::new();
    let mut record = draft(cx, parsed, origin, node);
    let method =
        PaymentMethod::parse(record.text("payment_method").unwrap_or("cc")).unwrap_or(PaymentMethod::Cc);

    let place = locate(cx, conn, kept, &mut record, method, &mut errors)?;
    let contact_id = identify_payer(cx, conn, parsed, &place, &mut errors)?;
    let Some(mut funding) = fund(cx, conn, parsed, method, &place, &mut errors)? else {
        return Ok(Examined {
            record,
            place,
            funding: None,
            contact_id,
            errors,
        });
    };
    let contact_id = contact_id.or_else(|| {
        funding
            .vault
            .as_ref()
            .and_then(|v| v.text("contact_id").map(str::to_string))
    });
    record.set("contact_id", contact_id.clone());
    if let Some(original) = &origin.replaces {
        record.set("previous_transaction_id", original.to_string());
    }
    let replacing = origin.replaces.is_some();
    describe_funding(
        cx,
        parsed,
        &mut record,
        &mut funding,
        &place,
        replacing,
        &mut errors,
    );
    if let Some(read) = &origin.terminal {
        record.set("entry_mode_id", read.entry_mode.code());
        // The card was in the terminal's reader (reference: card_present
        // is 1 for a retail card read, 0 for a no-show charge); a number
        // keyed on the terminal is not a card read.
        let read_physically = matches!(
            read.entry_mode,
            EntryMode::Chip | EntryMode::Contactless | EntryMode::Swiped | EntryMode::Fallback
        );
        let no_show = parsed.flag("no_show") == Some(true);
        record.set("card_present", i64::from(read_physically && !no_show));
    }
    if let (Source::Card(card), Action::Sale | Action::AuthOnly) = (&funding.source, action) {
        super::surcharge::apply(
            conn,
            &place.settings,
            origin,
            &card.data.pan,
            &mut record,
            &mut errors,
        )?;
    }

    check_requirements(
        parsed,
        &record,
        &funding,
        method,
        &place,
        origin.terminal.is_some(),
        &mut errors,
    );
    let on_terminal = origin.terminal.is_some();
    check_save_account(parsed, contact_id.as_deref(), on_terminal, &mut errors);
    check_api_id(cx, conn, &record, &place, &mut errors)?;
    let amount = record.int("transaction_amount").unwrap_or(0);
    if action == Action::Refund {
        check_refund(cx, conn, &funding, method, amount, &place, &mut errors)?;
    }
    if let Some(invoice) = &origin.quick_invoice_id {
        // An invoice is paid by the goods: a card's surcharge comes on top.
        let goods = amount - record.int("surcharge_amount").unwrap_or(0);
        crate::invoices::check_new_payment(
            conn,
            invoice.as_str(),
            &place.location_id,
            goods,
            cx.now,
            &mut errors,
        )?;
    }
    Ok(Examined {
        record,
        place,
        funding: Some(funding),
        contact_id,
        errors,
    })
}

/// The checks of a new payment ([`examine`]) without the payment: what
/// would be refused, field by field. For a hosted form, run when it opens
/// on its data with stand-ins for what the payer will type, so that what
/// only the integrator can fix is refused to the integrator.
pub fn dry_run(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &KeptConfig,
    parsed: &Parsed,
    origin: &Origin,
) -> ApiResult<FieldErrors> {
    Ok(examine(cx, conn, kept, parsed, origin, "")?.errors)
}

/// Step 1 of a new payment: every check, the reservations that must not
/// be taken twice, and the row stored as pending. No processor call.
/// Storing the row commits the job (see [`record_pending`]): a caller
/// sends nothing after it in the same job.
pub fn prepare(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &KeptConfig,
    parsed: &Parsed,
    origin: &Origin,
    node: &str,
    idem_key: Option<&str>,
) -> ApiResult<Prepared> {
    let action = parsed.action;
    let Examined {
        record,
        place,
        funding,
        contact_id,
        errors,
    } = examine(cx, conn, kept, parsed, origin, node)?;
    let Some(funding) = funding else {
        errors.into_result()?;
        return Err(ApiError::field("account_number", blank("account_number")));
    };
    errors.into_result()?;
    let save = parsed.flag("save_account") == Some(true);
    let amount = record.int("transaction_amount").unwrap_or(0);

    if action == Action::Refund {
        reserve_refund(conn, &funding, amount)?;
    }
    let breach = velocity_breach(cx, conn, &funding, amount, &place)?;
    let call = match breach {
        Some(b) => Call::Decline(b.reason, b.message),
        None => {
            let replaces = match &origin.replaces {
                Some(original) => Some(processor_ref(&load(conn, original.as_str())?)),
                None => None,
            };
            processor_call(parsed, &record, &funding, &place, replaces)?
        }
    };
    if let Some(guard) = &origin.duplicate_guard {
        take_duplicate_guard(cx, conn, guard, record.id())?;
    }
    record_pending(cx, conn, &record, idem_key)?;
    let id = record.id().to_string();
    let save_account = match (save, contact_id) {
        (true, Some(contact_id)) => Some(SaveAccount {
            contact_id,
            title: parsed.text("save_account_title"),
            source: funding.source,
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
        stored: Some(Box::new(record)),
        node: node.to_string(),
    })
}

/// The checks of [`prepare`] that need no account, for a payment whose
/// card a terminal has yet to read: where (location, product
/// transaction), who (the contact), the api id and the request's own
/// rules ([`check_request_rules`]). What is left to [`prepare`] depends
/// on the card (its number and expiry, the vault it is saved to) or on
/// the moment (velocity, which records a decline rather than refusing).
/// A read job: nothing is reserved, and [`prepare`] checks everything
/// again once the card is there.
pub fn precheck(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &KeptConfig,
    parsed: &Parsed,
    origin: &Origin,
) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    let mut record = draft(cx, parsed, origin, "");
    let method =
        PaymentMethod::parse(record.text("payment_method").unwrap_or("cc")).unwrap_or(PaymentMethod::Cc);
    let place = locate(cx, conn, kept, &mut record, method, &mut errors)?;
    // A named contact must exist; a terminal's save_account needs none
    // (see check_save_account).
    identify_payer(cx, conn, parsed, &place, &mut errors)?;
    check_api_id(cx, conn, &record, &place, &mut errors)?;
    check_request_rules(&record, &mut errors);
    errors.into_result()
}

/// Tax and tip are parts of the amount charged, never more than it.
fn check_parts(record: &Record, errors: &mut FieldErrors) {
    let amount = record.int("transaction_amount").unwrap_or(0);
    if record.int("surcharge_amount").is_some_and(|s| s > amount) {
        errors.add(
            "surcharge_amount",
            "Surcharge Amount is part of Transaction Amount and cannot exceed it.",
        );
    }
    let tax = record.int("tax").unwrap_or(0);
    if tax > amount {
        errors.add("tax", "Tax is part of Transaction Amount and cannot exceed it.");
    } else if tax + record.int("tip_amount").unwrap_or(0) > amount {
        errors.add(
            "tip_amount",
            "Tip Amount is part of Transaction Amount and, with the tax, cannot exceed it.",
        );
    }
}

/// `save_account` stores the account on a contact: one must be named. A
/// router transaction's `save_account` stores the card only when a
/// contact is given (spec, router table), so without one it is ignored:
/// the reference's router samples send it alone.
fn check_save_account(
    parsed: &Parsed,
    contact_id: Option<&str>,
    on_terminal: bool,
    errors: &mut FieldErrors,
) {
    if parsed.flag("save_account") == Some(true) && contact_id.is_none() && !on_terminal {
        errors.add(
            "contact_id",
            "Contact Id cannot be blank. (save_account stores the account on a contact.)",
        );
    }
}

/// The api id is unique per location (the index catches a lost race).
fn check_api_id(
    cx: &Cx,
    conn: &mut dyn Conn,
    record: &Record,
    place: &Place,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    if let Some(api_id) = record.text("transaction_api_id") {
        if query::find_by_api_id(conn, &TRANSACTION, &cx.scope, &place.location_id, api_id)?.is_some() {
            errors.add(
                "transaction_api_id",
                "Transaction Api Id has already been taken at this location.",
            );
        }
    }
    Ok(())
}

/// The pending row's own fields, before anything is looked up.
fn draft(cx: &Cx, parsed: &Parsed, origin: &Origin, node: &str) -> Record {
    let mut record = parsed.input.record.clone();
    record.set("id", new_id());
    record.set("created_ts", cx.now);
    record.set("modified_ts", cx.now);
    record.set("created_user_id", cx.user_id.clone());
    record.set("modified_user_id", cx.user_id.clone());
    record.set("timestamp", timestamp_text(cx.now));
    record.set("state", PENDING);
    record.set("pending_node", node.to_string());
    record.set("refunded_amount", 0);
    record.set("trx_source_id", origin.source.code());
    record.set(
        "recurring_id",
        origin.recurring_id.as_ref().map(|r| r.to_string()),
    );
    record.set("is_recurring", i64::from(origin.recurring_id.is_some()));
    record.set("recurring_run", origin.recurring_run.clone());
    record.set(
        "quick_invoice_id",
        origin.quick_invoice_id.as_ref().map(|q| q.to_string()),
    );
    record.set("notification_email_sent", 0);
    record.set("hosted_payment_page_id", origin.hosted_payment_page_id.clone());
    if let Some(read) = &origin.terminal {
        record.set("terminal_id", read.terminal_id.clone());
        record.set("terminal_serial_number", read.serial_number.clone());
        record.set("emv_receipt_data", read.emv_receipt_data.clone());
    }
    record
}

/// Where: the location (the caller's own unless named) and the product
/// transaction (the one named, or the location's default for the method).
fn locate(
    cx: &Cx,
    conn: &mut dyn Conn,
    kept: &KeptConfig,
    record: &mut Record,
    method: PaymentMethod,
    errors: &mut FieldErrors,
) -> ApiResult<Place> {
    // A follow-up payment (a refund) is made where its original was,
    // unless the request names the location.
    let location_id = match (record.text("location_id"), record.text("previous_transaction_id")) {
        (Some(id), _) => id.to_string(),
        (None, Some(original)) => query::find(conn, &TRANSACTION, &cx.scope, original)?
            .and_then(|t| t.text("location_id").map(str::to_string))
            .unwrap_or_else(|| cx.scope.location_id.clone()),
        (None, None) => cx.scope.location_id.clone(),
    };
    // One look: the location is the caller's, and its default product
    // transaction for the method.
    let default_column = if method == PaymentMethod::Ach {
        "t.default_ach"
    } else {
        "t.default_cc"
    };
    let key = (cx.scope.location_id.clone(), location_id.clone(), method.as_str());
    let found = kept.defaults.get_or_find(key, cx.epoch, || {
        query::find_columns(conn, &LOCATION, &cx.scope, &location_id, default_column)
    })?;
    let Some(row) = found else {
        return Err(ApiError::field(
            "location_id",
            "location_id provided is not valid",
        ));
    };
    record.set("location_id", location_id.clone());
    let found = product_transaction(cx, conn, kept, record, method.as_str(), row[0].as_str())?;
    let pt = usable_product_transaction(found, record, method.as_str(), &location_id, errors);
    let settings = pt
        .as_ref()
        .map(settings_shared)
        .unwrap_or_else(|| std::sync::Arc::new(Json::Null));
    if let Some(pt) = &pt {
        record.set("product_transaction_id", pt.id().to_string());
    }
    Ok(Place {
        location_id,
        product_transaction: pt,
        settings,
    })
}

/// Who: the contact named by id or by its api id at the location.
fn identify_payer(
    cx: &Cx,
    conn: &mut dyn Conn,
    parsed: &Parsed,
    place: &Place,
    errors: &mut FieldErrors,
) -> ApiResult<Option<String>> {
    let record = &parsed.input.record;
    let contact = match (record.text("contact_id"), parsed.text("contact_api_id")) {
        (Some(id), _) => {
            let c = query::find(conn, &CONTACT, &cx.scope, id)?;
            match &c {
                None => errors.add("contact_id", "contact_id provided is not valid"),
                Some(c) if c.text("location_id") != Some(place.location_id.as_str()) => {
                    errors.add("contact_id", "The contact belongs to another location.")
                }
                Some(_) => {}
            }
            c
        }
        (None, Some(api_id)) => {
            let c = query::find_by_api_id(conn, &CONTACT, &cx.scope, &place.location_id, &api_id)?;
            if c.is_none() {
                errors.add("contact_api_id", "contact_api_id provided is not valid");
            }
            c
        }
        _ => None,
    };
    Ok(contact.map(|c| c.id().to_string()))
}

/// With what: the one source of the money (`source::resolve`), and the
/// transaction type it makes for this action.
fn fund(
    cx: &Cx,
    conn: &mut dyn Conn,
    parsed: &Parsed,
    method: PaymentMethod,
    place: &Place,
    errors: &mut FieldErrors,
) -> ApiResult<Option<Funding>> {
    let resolved = source::resolve(cx, conn, parsed, method.as_str(), &place.location_id, errors)?;
    let Some(Resolved {
        source,
        vault,
        previous,
    }) = resolved
    else {
        return Ok(None);
    };
    let type_id = match (&source, parsed.action) {
        (Source::Card(_), Action::AvsOnly) => TypeId::AvsOnly,
        (_, Action::Refund) => TypeId::Refund,
        (Source::Card(_), _) => TypeId::Sale,
        (Source::Bank(_), Action::Credit) => TypeId::Credit,
        (Source::Bank(_), _) => TypeId::Debit,
    };
    Ok(Some(Funding {
        source,
        vault,
        previous,
        type_id,
    }))
}

/// Copies what the source says about the account onto the record (brand,
/// expiry, holder, bank details; the number sealed, only its first six
/// and last four in clear) and checks an ACH request against its profile.
fn describe_funding(
    cx: &Cx,
    parsed: &Parsed,
    record: &mut Record,
    funding: &mut Funding,
    place: &Place,
    replacing: bool,
    errors: &mut FieldErrors,
) {
    if let Some(v) = &funding.vault {
        record.set("account_vault_id", v.id().to_string());
        record.set("is_accountvault", 1);
    } else {
        record.set("is_accountvault", 0);
    }
    if let Some(p) = &funding.previous {
        record.set("previous_transaction_id", p.id().to_string());
    }
    let number = match &mut funding.source {
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
            record.set("first_six", card.data.pan.get(..6).map(str::to_string));
            card.data.pan.clone()
        }
        Source::Bank(bank) => {
            if let Some(s) = record.text("ach_sec_code") {
                bank.sec_code = s.to_string();
            }
            if bank.effective_date.is_none() {
                let hold = velocity::debit_hold_days(&place.settings["velocity_settings"]);
                bank.effective_date = Some(date_text(cx.now + hold * 86_400, chrono_tz::UTC));
            }
            // Without a valid product transaction there is no profile to
            // check against (its own error already says so).
            if place.product_transaction.is_some() {
                check_ach(
                    &place.settings,
                    parsed.action,
                    record,
                    parsed,
                    bank,
                    replacing,
                    errors,
                );
            }
            record.set("check_number", bank.check_number.clone());
            record.set("account_type", bank.account_type.as_str());
            record.set("routing", bank.routing.clone());
            record.set("ach_sec_code", bank.sec_code.clone());
            record.set("effective_date", bank.effective_date.clone());
            // A check read at the till may name no holder (POP, C21).
            if record.get("account_holder_name").is_null() && !bank.account_holder_name.is_empty() {
                record.set("account_holder_name", bank.account_holder_name.clone());
            }
            bank.account_number.clone()
        }
    };
    record.set("type_id", funding.type_id.code() as i64);
    if number.len() >= 8 || matches!(funding.source, Source::Card(_)) {
        record.set(
            "last_four",
            number.get(number.len().saturating_sub(4)..).map(str::to_string),
        );
    }
    record.set("account_number", cx.keyring.encrypt(&number));
    if record.get("order_num").is_null() {
        record.set("order_num", order_num());
    }
}

/// The product transaction's virtual-terminal requirements and the
/// lodging dates. The virtual-terminal requirements (street, zip, CVV)
/// are for keyed cards: a card read by a terminal (`card_present`) is
/// verified by its chip, stripe or PIN instead.
fn check_requirements(
    parsed: &Parsed,
    record: &Record,
    funding: &Funding,
    method: PaymentMethod,
    place: &Place,
    card_present: bool,
    errors: &mut FieldErrors,
) {
    if method == PaymentMethod::Cc && parsed.action != Action::Refund && !card_present {
        for (setting, field) in [
            ("vt_require_street", "billing_street"),
            ("vt_require_zip", "billing_zip"),
        ] {
            if flag_setting(&place.settings, setting) && record.get(field).is_null() {
                errors.add(field, blank(field));
            }
        }
        if flag_setting(&place.settings, "vt_require_cvv")
            && funding.vault.is_none()
            && funding.previous.is_none()
            && parsed.text("cvv").is_none()
        {
            errors.add("cvv", blank("cvv"));
        }
    }
    check_request_rules(record, errors);
}

/// The rules a request meets on its own, whatever account pays: tax and
/// tip within the amount, the lodging dates' window. [`prepare`] checks
/// them with the rest, and [`precheck`] before a terminal prompts anyone:
/// one list, so a rule added here reaches both.
fn check_request_rules(record: &Record, errors: &mut FieldErrors) {
    check_parts(record, errors);
    check_lodging_dates(record, errors);
}

/// Checkout is 0 to 99 nights after checkin.
fn check_lodging_dates(record: &Record, errors: &mut FieldErrors) {
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
}

/// A referenced refund: the original must allow it, within what is left
/// to refund and past the product transaction's refund hold.
fn check_refund(
    cx: &Cx,
    conn: &mut dyn Conn,
    funding: &Funding,
    method: PaymentMethod,
    amount: i64,
    place: &Place,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    let Some(orig) = &funding.previous else {
        return Ok(());
    };
    let facts = Facts::load(conn, orig)?;
    if let Err(msg) = state::refundable(orig, &facts) {
        errors.add("previous_transaction_id", msg);
    } else if method == PaymentMethod::Ach && amount != orig.int("transaction_amount").unwrap_or(0) {
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
        let hold = velocity::refund_hold_days(&place.settings["velocity_settings"]);
        if hold > 0 && orig.int("created_ts").unwrap_or(0) + hold * 86_400 > cx.now {
            errors.add(
                "previous_transaction_id",
                format!("Refunds are held for {hold} days after the original transaction."),
            );
        }
    }
    Ok(())
}

/// Reserves a referenced refund's amount on its original by
/// compare-and-set, so concurrent refunds cannot exceed what is left.
fn reserve_refund(conn: &mut dyn Conn, funding: &Funding, amount: i64) -> ApiResult<()> {
    let Some(orig) = &funding.previous else {
        return Ok(());
    };
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
    Ok(())
}

/// The velocity limit this payment would break, if any. PostgreSQL
/// serialises the product transaction's writers while a limit is set, so
/// two requests cannot both take the last slot.
fn velocity_breach(
    cx: &Cx,
    conn: &mut dyn Conn,
    funding: &Funding,
    amount: i64,
    place: &Place,
) -> ApiResult<Option<Breach>> {
    let class = match funding.type_id {
        TypeId::Refund => Class::Refund,
        TypeId::Credit => Class::Credit,
        TypeId::Sale | TypeId::Debit => Class::Debit,
        _ => return Ok(None),
    };
    let Some(pt) = &place.product_transaction else {
        return Ok(None);
    };
    let limits = &place.settings["velocity_settings"];
    if !velocity::any_limit(limits, class) {
        return Ok(None);
    }
    if conn.dialect() == crate::db::Dialect::Postgres {
        conn.query(&Sql::with(
            "SELECT id FROM product_transactions WHERE id = ? FOR UPDATE",
            vec![pt.id().into()],
        ))?;
    }
    let tz = location_tz(conn, &place.location_id)?;
    velocity::check(conn, limits, pt.id(), class, amount, cx.now, tz)
}

/// Takes the payment's [`DuplicateGuard`] in the job that stores it: one
/// upsert, which changes nothing while another payment holds the key
/// within the window. Concurrent takers of one key queue on its row
/// (PostgreSQL) or on the single writer (SQLite), so one of them wins.
fn take_duplicate_guard(
    cx: &Cx,
    conn: &mut dyn Conn,
    guard: &super::DuplicateGuard,
    transaction_id: &str,
) -> ApiResult<()> {
    let free_if_taken_before = if guard.window_secs > 0 {
        cx.now - guard.window_secs
    } else {
        i64::MAX
    };
    let taken = conn.execute(&Sql::with(
        "INSERT INTO duplicate_guards (guard_key, transaction_id, taken_ts) VALUES (?, ?, ?) \
         ON CONFLICT (guard_key) DO UPDATE SET transaction_id = excluded.transaction_id, \
         taken_ts = excluded.taken_ts WHERE duplicate_guards.taken_ts < ?",
        vec![
            guard.key.clone().into(),
            transaction_id.into(),
            cx.now.into(),
            free_if_taken_before.into(),
        ],
    ))?;
    if taken == 0 {
        let mut errors = FieldErrors::new();
        errors.add(
            super::DuplicateGuard::REFUSED_FIELD,
            "A payment like this one was made within the duplicate window.",
        );
        return Err(ApiError::Conflict(errors));
    }
    Ok(())
}

/// The payment holding a [`DuplicateGuard`] key, if any (the original of
/// a refused repeat).
pub fn duplicate_guard_holder(conn: &mut dyn Conn, key: &str) -> ApiResult<Option<String>> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT transaction_id FROM duplicate_guards WHERE guard_key = ?",
            vec![key.into()],
        ))?
        .and_then(|r| r.into_iter().next())
        .and_then(|v| v.as_str().map(str::to_string)))
}

/// Frees a [`DuplicateGuard`] key while `transaction_id` still holds it:
/// the caller answered that payment in a way that asks for a retry.
pub fn release_duplicate_guard(conn: &mut dyn Conn, key: &str, transaction_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM duplicate_guards WHERE guard_key = ? AND transaction_id = ?",
        vec![key.into(), transaction_id.into()],
    ))?;
    Ok(())
}

/// Stores the row as pending (and ties the idempotency key to it), as
/// the job's last statement: the job commits with it (see
/// [`Conn::execute_and_commit`]), and then the processor may be called.
fn record_pending(cx: &Cx, conn: &mut dyn Conn, record: &Record, idem_key: Option<&str>) -> ApiResult<()> {
    if let Some(key) = idem_key {
        idempotency::link(conn, &cx.user_id, key, record.id())?;
    }
    conn.execute_and_commit(&insert_sql(record))
        .map_err(|e| match e {
            // A schedule's attempt (its run key) has a transaction already:
            // another node is charging this run, or has charged it. A
            // conflict, not a refusal of the payment: the scheduler must
            // not take it for a declined run and charge the period again.
            crate::db::DbError::Unique(index) if index.contains("recurring_run") => {
                let mut errors = FieldErrors::new();
                errors.add(
                    "recurring_id",
                    "This run of the recurring schedule is already being charged.",
                );
                ApiError::Conflict(errors)
            }
            crate::db::DbError::Unique(_) => ApiError::field(
                "transaction_api_id",
                "Transaction Api Id has already been taken at this location.",
            ),
            other => other.into(),
        })?;
    Ok(())
}

/// The processor request this payment needs.
fn processor_call(
    parsed: &Parsed,
    record: &Record,
    funding: &Funding,
    place: &Place,
    replaces: Option<ProcessorRef>,
) -> ApiResult<Call> {
    let action = parsed.action;
    let settings = &place.settings;
    let option = |name: &str, setting: &str| {
        parsed
            .flag(name)
            .unwrap_or_else(|| flag_setting(settings, setting))
    };
    let options = AuthOptions {
        allow_partial: option(
            "allow_partial_authorization_override",
            "allow_partial_authorization",
        ),
        auto_decline_cvv: option("auto_decline_cvv_override", "auto_decline_cvv"),
        auto_decline_street: option("auto_decline_street_override", "auto_decline_street"),
        auto_decline_zip: option("auto_decline_zip_override", "auto_decline_zip"),
    };
    let gateway_id = record.id().to_string();
    let amount = Money::from_cents(record.int("transaction_amount").unwrap_or(0));
    Ok(match (&funding.source, action, &funding.previous) {
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
            replaces,
        }),
        (Source::Bank(bank), _, _) => Call::AchCredit(AchRequest {
            gateway_id,
            amount,
            account: bank.clone(),
            replaces: None,
        }),
        (Source::Card(_), _, _) => {
            return Err(ApiError::field("action", "This action does not take a card."));
        }
    })
}

/// Step 3 of a new payment: the processor's answer recorded, the batch
/// entered, the account saved, the events and the idempotent answer
/// written, in one database transaction.
pub fn complete(
    cx: &Cx,
    conn: &mut dyn Conn,
    prepared: &Prepared,
    answer: &ProcessorResponse,
    idem_key: Option<&str>,
) -> ApiResult<Completed> {
    let before = match &prepared.stored {
        Some(stored) => (**stored).clone(),
        None => load(conn, &prepared.id)?,
    };
    let mut record = before.clone();
    // A row read back here (none stored) may have been claimed by a
    // reconciler since; the stored one is checked by the write below.
    if record.text("state") != Some(PENDING) || record.text("pending_node") != Some(prepared.node.as_str()) {
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
            let approved = answer.approved_amount.cents();
            let amount = if approved > 0 && approved < requested {
                approved
            } else {
                requested
            };
            if amount < requested {
                super::parts::refit_partial(&mut record, amount);
            }
            record.set("transaction_amount", amount);
            record.set("auth_amount", amount);
        }
        _ => record.set("auth_amount", 0),
    }
    record.set("state", DONE);
    record.set("pending_node", Value::Null);
    record.set("modified_ts", cx.now);

    // The batch is named now and counted last (see `batches::count`).
    let batch_amount = match (approved && method == "cc", prepared.action, answer.status_id) {
        (true, Action::Sale | Action::Force, StatusId::Approved) => record.int("transaction_amount"),
        (true, Action::Refund, StatusId::Refunded) => record.int("transaction_amount").map(|a| -a),
        _ => None,
    };
    if batch_amount.is_some() {
        batches::place(cx, conn, &mut record)?;
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
    crate::mail::receipts::queue(cx, conn, &mut record)?;
    events::record(conn, cx, EventAction::Create, &record, &[])?;
    // Late, so that the tally stripe it updates (which other sales of the
    // product transaction may share) is held for as short a time as
    // possible: on PostgreSQL until the commit. The events above named
    // the batch `place` found; if it began settling since (or the hint
    // was stale), the sale went to the next one, and they are written
    // again to say so.
    let stored = match batch_amount {
        Some(amount) => batches::count_and_store(cx, conn, &before, &mut record, amount)?,
        None => store_pending(conn, &before, &record)?.then_some(batches::Counted::AsPlaced),
    };
    match stored {
        None => return Err(ApiError::Unavailable(
            "The transaction was interrupted and has been reversed; look it up by id or transaction_api_id."
                .into(),
        )),
        Some(batches::Counted::Moved) => cx.sink.created_again(conn, cx, &record)?,
        Some(batches::Counted::AsPlaced) => {}
    }
    crate::invoices::payment_changed(cx, conn, &record, true)?;
    Completed::answer(cx, conn, record, idem_key, 201)
}
