//! Transactions: the record of every card and ACH operation. Creation and
//! the PUT actions run through `payments` (processor calls, batches,
//! idempotency); this declaration drives reads, filters, rendering and
//! the OpenAPI document.

use super::PAYMENT_METHODS;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Postback, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::Cx;
use crate::error::ApiResult;
use crate::payments::state::{self, Facts};
use crate::processor::{EntryMode, ReasonCode, StatusId, TypeId};
use serde_json::{json, Map, Value as Json};

use super::{ACCOUNT_VAULT, CONTACT, LOCATION, PRODUCT_TRANSACTION, TRANSACTION_BATCH, USER};

/// Largest amount: ten characters, `9999999.99`.
pub const MAX_AMOUNT: i64 = 999_999_999;

pub static TRANSACTION: Resource = Resource {
    name: "transaction",
    plural: "transactions",
    table: "transactions",
    model: "Transaction",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::text("action", 1, 24)
            .post()
            .required()
            .transient()
            .doc("sale, authonly, avsonly, force, refund, debit, credit (POST); authcomplete, authincrement, void, partialreversal, tipadjust, edit (PUT)"),
        Field::text("payment_method", 2, 3)
            .post()
            .exact()
            .sort()
            .one_of(PAYMENT_METHODS),
        Field::id("account_vault_id").post().exact(),
        Field::text("account_vault_api_id", 1, 36).post().transient(),
        Field::id("recurring_id").exact(),
        Field::text("first_six", 0, 6).filter(),
        Field::text("last_four", 0, 4).filter(),
        Field::text("account_holder_name", 1, 32).post().filter().sort(),
        Field::money("transaction_amount", MAX_AMOUNT)
            .post()
            .filter()
            .sort()
            .doc("the amount to settle; a|b range filter"),
        Field::text("description", 1, 64).post().filter(),
        Field::text("transaction_code", 0, 32),
        Field::text("avs", 0, 8).filter(),
        Field::text("avs_enhanced", 0, 1).exact(),
        Field::text("batch", 0, 16).exact(),
        Field::text("item", 0, 32),
        Field::text("order_num", 1, 32).post().filter().pattern(Pattern::Reference),
        Field::text("timestamp", 0, 19).doc("creation time, yyyy-mm-dd hh:mm:ss UTC"),
        Field::text("verbiage", 0, 64).filter(),
        Field::text("transaction_settlement_status", 0, 32).doc("deprecated; null"),
        Field::date("effective_date").post().filter().doc("ach; today when not given"),
        Field::text("routing", 9, 9).post().exact().pattern(Pattern::Digits),
        Field::date("return_date").filter(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
        Field::text("transaction_api_id", 1, 64)
            .post()
            .exact()
            .doc("unique per location: the safe-retry lookup"),
        Field::flag("terms_agree").post(),
        Field::text("notification_email_address", 3, 128)
            .post()
            .filter()
            .pattern(Pattern::Email),
        Field::flag("notification_email_sent"),
        Field::text("response_message", 0, 255),
        Field::money("auth_amount", MAX_AMOUNT).filter(),
        Field::text("auth_code", 1, 16)
            .post()
            .exact()
            .doc("force: the voice authorization's 6 characters"),
        Field::int("status_id", 0, 999).filter().sort(),
        Field::int("type_id", 0, 99).filter().sort(),
        Field::int("reason_code_id", 0, 9999).filter().sort(),
        Field::id("location_id").post().filter(),
        Field::id("contact_id").post().exact(),
        Field::text("contact_api_id", 1, 64).post().transient(),
        Field::id("product_transaction_id").post().filter(),
        Field::text("billing_zip", 4, 12).post().filter().pattern(Pattern::Zip),
        Field::text("billing_street", 1, 32).post().filter(),
        Field::text("billing_phone", 1, 10)
            .post()
            .filter()
            .pattern(Pattern::Digits),
        Field::text("billing_city", 1, 36).post().filter(),
        Field::text("billing_state", 2, 2)
            .post()
            .filter()
            .pattern(Pattern::State),
        Field::money("tax", MAX_AMOUNT).post().filter().doc("included in transaction_amount"),
        Field::money("tip_amount", MAX_AMOUNT).post().filter().doc("included in transaction_amount"),
        Field::text("customer_ip", 1, 39).post().filter(),
        Field::text("customer_id", 1, 64).post().filter(),
        Field::text("po_number", 1, 24).post().filter(),
        Field::text("cvv_response", 0, 1).exact(),
        Field::text("clerk_number", 1, 16).post().filter(),
        Field::id("created_user_id").exact(),
        Field::id("modified_user_id").exact(),
        Field::text("ach_identifier", 1, 1)
            .post()
            .exact()
            .one_of(&["P"])
            .doc("P: payroll (SEC codes POP and C21)"),
        Field::text("check_number", 1, 15).post().filter(),
        Field::date("settle_date").filter().sort(),
        Field::date("charge_back_date").filter(),
        Field::text("void_date", 0, 19).filter(),
        Field::text("account_type", 1, 32)
            .post()
            .exact()
            .doc("ach: checking or savings; cc: derived brand"),
        Field::flag("is_recurring").filter(),
        Field::flag("is_accountvault").filter(),
        Field::text("transaction_c1", 1, 128).post().filter(),
        Field::text("transaction_c2", 1, 128).post().filter(),
        Field::text("transaction_c3", 1, 128).post().filter(),
        Field::tags("tags")
            .post()
            .filter()
            .doc("tag titles; the edit action replaces them"),
        Field::json("additional_amounts", 512)
            .post()
            .doc("[{type, amount}]: 4S healthcare, 4U prescription, 4V vision, 4W clinic, 4X dental"),
        Field::text("terminal_serial_number", 1, 24).post().filter(),
        Field::text("entry_mode_id", 0, 1).exact(),
        Field::id("terminal_id").exact(),
        Field::id("quick_invoice_id").exact(),
        Field::text("ach_sec_code", 3, 3)
            .post()
            .exact()
            .one_of(crate::cards::ACH_SEC_CODES),
        Field::json("custom_data", 512).post(),
        Field::id("hosted_payment_page_id").exact(),
        Field::int("trx_source_id", 1, 15).filter(),
        Field::id("transaction_batch_id").exact(),
        Field::text("recurring_flag", 0, 16),
        Field::int("recurring_number", 0, 9999),
        Field::flag("bill_payment").post().filter().doc("a bill payment"),
        Field::text("service_address", 1, 32).post().doc("Mastercard service address"),
        Field::text("service_city", 1, 36).post(),
        Field::text("service_state", 1, 26).post(),
        Field::text("service_zip", 4, 12).post().pattern(Pattern::Zip),
        Field::text("service_country", 1, 3)
            .post()
            .pattern(Pattern::Digits)
            .doc("ISO 3166 numeric (840 for the USA)"),
        Field::date("checkin_date").post(),
        Field::date("checkout_date").post(),
        Field::text("room_num", 1, 12).post(),
        Field::money("room_rate", MAX_AMOUNT).post(),
        Field::flag("advance_deposit").post(),
        Field::flag("no_show").post(),
        Field::text("folio_num", 0, 32),
        Field::json("emv_receipt_data", 512),
        Field::id("previous_transaction_id").post().exact(),
        Field::text("previous_transaction_api_id", 1, 64).post().transient(),
        Field::money("subtotal_amount", MAX_AMOUNT).post(),
        Field::money("surcharge_amount", MAX_AMOUNT).post(),
        Field::flag("card_present").post(),
        // Inputs that are never shown. The card or bank number is kept
        // sealed so the transaction can act as a token later.
        Field::text("account_number", 4, 19)
            .post()
            .secret()
            .hidden()
            .pattern(Pattern::Digits),
        Field::text("exp_date", 4, 4)
            .post()
            .hidden()
            .pattern(Pattern::Digits)
            .doc("MMYY"),
        Field::text("cvv", 3, 4)
            .post()
            .transient()
            .pattern(Pattern::Digits)
            .doc("never stored"),
        Field::text("track_data", 1, 256)
            .post()
            .transient()
            .doc("cc: swiped track 1 and/or 2; ach POP and C21: the check's MICR line, T<routing>T <account>O <check number>"),
        // Check 21 images go to the processor only: 64 KB each would
        // weigh on every row, and a check image shows the account number.
        Field::text("image_front", 4, 65535)
            .post()
            .transient()
            .pattern(Pattern::Base64)
            .doc("ach C21: the check's front, base64; never stored or shown"),
        Field::text("image_back", 4, 65535)
            .post()
            .transient()
            .pattern(Pattern::Base64)
            .doc("ach C21: the check's back, base64; never stored or shown"),
        Field::flag("save_account").post().transient(),
        Field::text("save_account_title", 1, 16).post().transient(),
        Field::flag("allow_partial_authorization_override").post().transient(),
        Field::flag("auto_decline_cvv_override").post().transient(),
        Field::flag("auto_decline_street_override").post().transient(),
        Field::flag("auto_decline_zip_override").post().transient(),
        Field::text("dl_number", 1, 50).post().transient(),
        Field::text("dl_state", 2, 2).post().transient().pattern(Pattern::State),
        Field::text("dob_year", 4, 4).post().transient().pattern(Pattern::Digits),
        Field::text("ssn4", 4, 4).post().transient().pattern(Pattern::Digits),
        Field::flag("move_account_vault").post().transient(),
        Field::flag("move_account_vault_transactions").post().transient(),
        // Bookkeeping of the gateway itself.
        Field::text("state", 1, 16).hidden(),
        Field::text("pending_node", 1, 64).hidden(),
        Field::text("pending_action", 1, 24).hidden(),
        Field::text("recurring_run", 1, 80).hidden(),
        Field::text("processor_reference", 1, 128).hidden(),
        Field::money("refunded_amount", MAX_AMOUNT).hidden(),
        Field::int("batch_seq", 0, i64::MAX).hidden(),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: Some("transaction_api_id"),
    unique: Some("transaction_api_id"),
    expands: &[
        Expand::BelongsTo {
            name: "account_vault",
            target: &ACCOUNT_VAULT,
            column: "account_vault_id",
        },
        Expand::Changelogs { users: &USER },
        Expand::BelongsTo {
            name: "contact",
            target: &CONTACT,
            column: "contact_id",
        },
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::Custom("entrymode"),
        Expand::Custom("is_completable"),
        Expand::Custom("is_refundable"),
        Expand::Custom("is_reversible"),
        Expand::Custom("is_settled"),
        Expand::Custom("is_voidable"),
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "product_transaction",
            target: &PRODUCT_TRANSACTION,
            column: "product_transaction_id",
        },
        Expand::CustomRecords {
            name: "quick_invoice",
            permission: "quickinvoices.read",
            many: false,
        },
        Expand::Custom("reason_code"),
        Expand::CustomRecords {
            name: "recurring",
            permission: "recurrings.read",
            many: false,
        },
        Expand::CustomRecords {
            name: "signature",
            permission: "signatures.read",
            many: false,
        },
        Expand::Custom("status"),
        Expand::Custom("surcharge"),
        Expand::Custom("tags"),
        Expand::BelongsTo {
            name: "transaction_batch",
            target: &TRANSACTION_BATCH,
            column: "transaction_batch_id",
        },
        Expand::Custom("transaction_histories"),
        Expand::CustomRecords {
            name: "transaction_level3",
            permission: "transactionlevel3s.read",
            many: false,
        },
        Expand::Custom("type"),
    ],
    list_params: &[],
    computed: &[
        (
            "level3_indicator",
            "boolean",
            "whether Level 3 data can be attached (approved or authorized card sale)",
        ),
        ("code", "string", "AUTH when the card was authorized, else null"),
        ("is_surcharge", "boolean", "true when a surcharge was added, else null"),
        ("auth_surcharge_rate", "string", "null (internal to the reference)"),
        ("auth_surcharge_fee", "string", "null (internal to the reference)"),
        ("recaptcha_score", "number", "null: no reCAPTCHA check is made"),
        ("online_payment_cryptogram", "string", "null: wallets are not supported"),
        ("digital_payment_cryptogram", "string", "null: wallets are not supported"),
        ("ecommerce_indicator", "string", "null: 3-D Secure is not supported"),
        ("installment_number", "integer", "null"),
        ("installment_total_count", "integer", "null"),
        ("external_recurring_flag", "string", "no"),
        ("external_installment_number", "integer", "null"),
        ("external_installment_total_count", "integer", "null"),
        ("external_recurring_number", "integer", "null"),
        ("tlid", "string", "null"),
    ],
    rules: &TransactionRules,
    search: None,
    cascades: &[],
    postback: Some(Postback { by_product_transaction: true }),
    api: Api {
        update_takes_create_body: true,
        ..Api::PLAIN
    },
    doc: "A card or ACH transaction. POST runs sale, authonly, avsonly, force, refund, debit or credit; \
          PUT /{id} runs authcomplete, authincrement, void, partialreversal, tipadjust or edit.",
};

struct TransactionRules;

/// `{id, title}` of a code table entry, as the reference embeds them.
fn code_entry(id: Json, title: Option<&str>) -> Json {
    match title {
        Some(t) => json!({ "id": id, "title": t }),
        None => Json::Null,
    }
}

impl Rules for TransactionRules {
    /// In an export, a voided transaction is its original line followed by
    /// the void, and an ACH return is its original followed by the return,
    /// whose id ends in `cb` (as the reference's exports show them). The
    /// original carries the status its kind starts with: 101 for a card
    /// charge, 111 a refund, 121 an AVS check, 131 a pending ACH entry
    /// (134 once an ACH entry has settled), and a voided one the amount it
    /// had authorized.
    fn export_rows(&self, record: &Record, rendered: Map<String, Json>) -> Vec<Map<String, Json>> {
        let status = record.int("status_id");
        let voided = status == Some(StatusId::Voided.code() as i64);
        let returned = status == Some(StatusId::ChargedBack.code() as i64);
        if !voided && !returned {
            return vec![rendered];
        }
        let started = match (record.text("payment_method"), record.int("type_id")) {
            (Some("ach"), _) if returned && !record.get("settle_date").is_null() => StatusId::AchSettled,
            (Some("ach"), _) => StatusId::PendingOrigination,
            (_, Some(t)) if t == TypeId::Refund.code() as i64 => StatusId::Refunded,
            (_, Some(t)) if t == TypeId::AvsOnly.code() as i64 => StatusId::AvsOnly,
            _ => StatusId::Approved,
        };
        let mut original = rendered.clone();
        original.insert("status_id".into(), json!(started.code()));
        if voided {
            // A void leaves the amount at 0; the original had what was
            // authorized.
            if let Some(amount) = original.get("auth_amount").cloned() {
                original.insert("transaction_amount".into(), amount);
            }
        }
        original.insert("void_date".into(), Json::Null);
        original.insert("return_date".into(), Json::Null);
        let mut reversal = rendered;
        if returned {
            let id = format!("{}cb", record.id());
            reversal.insert("id".into(), json!(id));
        }
        vec![original, reversal]
    }

    fn render(&self, _cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        // Keys of the reference's samples this gateway has no value for
        // are there, null (or their documented constant).
        let authorized = record.text("payment_method") == Some("cc")
            && matches!(
                record.int("status_id"),
                Some(s) if s == StatusId::Approved.code() as i64 || s == StatusId::AuthOnly.code() as i64
            );
        out.insert("code".into(), if authorized { json!("AUTH") } else { Json::Null });
        let surcharged = record.int("surcharge_amount").is_some_and(|a| a > 0);
        out.insert(
            "is_surcharge".into(),
            if surcharged { json!(true) } else { Json::Null },
        );
        for key in [
            "auth_surcharge_rate",
            "auth_surcharge_fee",
            "recaptcha_score",
            "online_payment_cryptogram",
            "digital_payment_cryptogram",
            "ecommerce_indicator",
            "installment_number",
            "installment_total_count",
            "external_installment_number",
            "external_installment_total_count",
            "external_recurring_number",
            "tlid",
        ] {
            out.insert(key.into(), Json::Null);
        }
        out.insert("external_recurring_flag".into(), json!("no"));
        out.insert(
            "level3_indicator".into(),
            Json::Bool(state::level3_eligible(record)),
        );
        if record.text("state") == Some(state::PENDING) {
            out.insert("verbiage".into(), Json::String("Processing".into()));
        }
    }

    fn expand(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        if name.starts_with("is_") {
            let facts = Facts::load(conn, record)?;
            let answer = match name {
                "is_voidable" => state::voidable(record, &facts).is_ok(),
                "is_refundable" => state::refundable(record, &facts).is_ok(),
                "is_completable" => state::completable(record, &facts).is_ok(),
                "is_reversible" => state::reversible(record, &facts).is_ok(),
                _ => facts.settled,
            };
            return Ok(Json::Bool(answer));
        }
        Ok(match name {
            "status" => {
                let id = record.int("status_id");
                let label = id
                    .and_then(|i| StatusId::from_code(i as u16))
                    .map(StatusId::label);
                code_entry(json!(id), label)
            }
            "type" => {
                let id = record.int("type_id");
                let label = id.and_then(|i| TypeId::from_code(i as u16)).map(TypeId::label);
                code_entry(json!(id), label)
            }
            "reason_code" => {
                let id = record.int("reason_code_id");
                let label = id.map(|i| ReasonCode(i as u16).label());
                code_entry(json!(id), label)
            }
            "entrymode" => {
                let id = record.text("entry_mode_id");
                let label = EntryMode::ALL
                    .iter()
                    .find(|m| Some(m.code()) == id)
                    .map(|m| m.label());
                code_entry(json!(id), label)
            }
            "transaction_histories" => histories(conn, record)?,
            "surcharge" => match record.int("surcharge_amount").filter(|a| *a > 0) {
                Some(surcharge) => json!({
                    "surcharge_amount": crate::money::Money::from_cents(surcharge).to_text(),
                    "subtotal_amount": record
                        .int("subtotal_amount")
                        .map(|s| crate::money::Money::from_cents(s).to_text()),
                    "surcharge_type": "percentage",
                }),
                None => Json::Null,
            },
            "transaction_level3" => crate::payments::level3::embedded(cx, conn, record)?,
            "tags" => super::tags::expand_of(record),
            "recurring" => super::recurrings::of_transaction(cx, conn, record)?,
            "signature" => super::signatures::latest(cx, conn, "Transaction", record.id())?,
            "quick_invoice" => super::quickinvoices::of_transaction(cx, conn, record)?,
            _ => Json::Null,
        })
    }
}

/// The status changes of a transaction, oldest first, from its change log.
fn histories(conn: &mut dyn Conn, record: &Record) -> ApiResult<Json> {
    let rows = conn.query(&Sql::with(
        "SELECT c.id, c.created_ts, c.user_id, d.new_value, d.old_value FROM changelogs c \
         JOIN changelog_details d ON d.changelog_id = c.id \
         WHERE c.model_id = ? AND d.field = 'status_id' ORDER BY c.id ASC LIMIT 500",
        vec![record.id().into()],
    ))?;
    Ok(Json::Array(
        rows.into_iter()
            .map(|r| {
                json!({
                    "id": r[0].as_str(),
                    "transaction_id": record.id(),
                    "created_ts": r[1].as_int(),
                    "user_id": r[2].as_str(),
                    "status_id": r[3].as_str().and_then(|s| s.parse::<i64>().ok()),
                    "previous_status_id": r[4].as_str().and_then(|s| s.parse::<i64>().ok()),
                })
            })
            .collect(),
    ))
}
