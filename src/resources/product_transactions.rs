//! Product transactions: the deposit accounts a location holds, each with
//! one payment method. Display and processing settings are kept as one
//! JSON document; queries only need the columns.

use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::blank;
use crate::engine::{query, Cx};
use crate::error::{ApiResult, FieldErrors};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::LOCATION;

pub static PRODUCT_TRANSACTION: Resource = Resource {
    name: "producttransaction",
    plural: "producttransactions",
    table: "product_transactions",
    model: "ProductTransaction",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id").filter().refers(&LOCATION),
        Field::text("payment_method", 2, 3).filter().doc("cc or ach"),
        Field::text("processor", 1, 64).filter(),
        Field::text("title", 1, 64).filter().sort(),
        Field::flag("active").filter(),
        Field::text("settings", 0, 65536).hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[Expand::BelongsTo {
        name: "location",
        target: &LOCATION,
        column: "location_id",
    }],
    list_params: &[],
    computed: &[
        ("velocity_settings", "object", "velocity limits (0: no limit)"),
        (
            "processor_data",
            "object",
            "ach: terminals[] with terminal_id, sec_code, actions[], required[]",
        ),
        (
            "current_batch",
            "integer",
            "batch_num of the batch new transactions go into: the open one, else the next",
        ),
    ],
    rules: &ProductTransactionRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A deposit account of a location (read only here; created by bootstrap).",
};

struct ProductTransactionRules;

impl Rules for ProductTransactionRules {
    fn render_read(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        record: &Record,
        _extra: &[(String, String)],
        expand: &[String],
    ) -> ApiResult<Option<Json>> {
        let mut out = crate::engine::render_expanded(cx, conn, record, expand)?;
        out["current_batch"] = json!(crate::payments::batches::current_number(conn, record.id())?);
        Ok(Some(out))
    }

    fn render(&self, _cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        let settings = record
            .text("settings")
            .and_then(|s| serde_json::from_str::<Map<String, Json>>(s).ok())
            .unwrap_or_default();
        for (k, v) in settings {
            out.entry(k).or_insert(v);
        }
    }
}

/// The velocity limits of a product transaction; 0 means no limit.
pub fn default_velocity() -> Json {
    let names = [
        "debit_hold_days",
        "debit_items_per_day",
        "debit_daily_aggregate",
        "debit_items_per_month",
        "debit_monthly_aggregate",
        "refund_largest_item",
        "refund_items_per_day",
        "refund_daily_aggregate",
        "refund_items_per_month",
        "refund_monthly_aggregate",
        "refund_hold_days",
        "credit_largest_item",
        "credit_daily_aggregate",
        "credit_items_per_day",
        "credit_items_per_month",
        "credit_monthly_aggregate",
    ];
    Json::Object(names.iter().map(|n| (n.to_string(), json!(0))).collect())
}

/// Settings of a new sandbox product transaction. ACH accounts carry five
/// terminal profiles of the reference's ACH processor (3.4), one per SEC
/// code; the request's `ach_sec_code` picks one:
///
/// - WEB block 2310 and CCD block 2910 (CCD adds credit: merchant-initiated
///   credits use SEC code CCD), with the base requirements;
/// - TEL block 2210: the base requirements and `check_number`;
/// - POP block 1110: `account_type` and the check's MICR line
///   (`track_data`), no holder (no identity verification in the block);
/// - C21 block 1610: POP's and the check's `image_front`, `image_back`.
///
/// POP and C21 list avsonly as the reference's table does (an ACH
/// verification, not served by this gateway yet).
pub fn default_settings(payment_method: &str) -> Json {
    let mut s = json!({
        "receipt_header": null,
        "receipt_footer": null,
        "receipt_add_account_above_signature": false,
        "receipt_add_recurring_above_signature": false,
        "receipt_logo": null,
        "receipt_show_contact_name": true,
        "industry_type": "ecommerce",
        "partner": "ferrogate",
        "vt_cvv": payment_method == "cc",
        "vt_street": payment_method == "cc",
        "vt_zip": payment_method == "cc",
        "vt_order_num": false,
        "display_avs": payment_method == "cc",
        "vt_enable": true,
        "vt_enable_tip": false,
        "surcharge": null,
        "default_transaction_type": if payment_method == "cc" { "sale" } else { "debit" },
        "vt_require_street": false,
        "vt_require_zip": false,
        "vt_enable_sales_tax": false,
        "vt_override_sales_tax_allowed": false,
        "current_batch": null,
        "vt_billing_phone": false,
        "vt_clerk_number": false,
        "quick_invoice_allow": true,
        "hosted_payment_page_max_allowed": 5,
        "hosted_payment_page_allow": true,
        "auto_decline_cvv": false,
        "level3_allow": payment_method == "cc",
        "level3_default": null,
        "tax_surcharge_config": 0,
        "velocity_settings": default_velocity(),
    });
    if payment_method == "ach" {
        let base = ["account_holder_name", "routing", "account_number", "account_type"];
        let check = ["account_type", "track_data"];
        let tel = [&base[..], &["check_number"]].concat();
        let c21 = [&check[..], &["image_front", "image_back"]].concat();
        s["processor_data"] = json!({
            "terminals": [{
                "terminal_id": "2310",
                "sec_code": "WEB",
                "actions": ["debit", "refund", "void"],
                "required": base,
            }, {
                "terminal_id": "2910",
                "sec_code": "CCD",
                "actions": ["debit", "credit", "refund", "void"],
                "required": base,
            }, {
                "terminal_id": "2210",
                "sec_code": "TEL",
                "actions": ["debit", "refund", "void"],
                "required": tel,
            }, {
                "terminal_id": "1110",
                "sec_code": "POP",
                "actions": ["debit", "refund", "void", "avsonly"],
                "required": check,
            }, {
                "terminal_id": "1610",
                "sec_code": "C21",
                "actions": ["debit", "refund", "void", "avsonly"],
                "required": c21,
            }]
        });
    }
    s
}

/// The parsed settings document of a product transaction (null if absent).
pub fn settings(pt: &Record) -> Json {
    pt.text("settings")
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Json::Null)
}

/// [`settings`], parsed once per version of the document: every payment
/// reads its product transaction's settings (one to two kilobytes of
/// JSON), and they change rarely. Kept per product transaction, so the
/// cache holds as many documents as there are product transactions.
pub fn settings_shared(pt: &Record) -> Arc<Json> {
    type Parsed = HashMap<String, (String, Arc<Json>)>;
    static PARSED: OnceLock<Mutex<Parsed>> = OnceLock::new();
    let Some(text) = pt.text("settings") else {
        return Arc::new(Json::Null);
    };
    let mut parsed = PARSED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some((seen, doc)) = parsed.get(pt.id()) {
        if seen == text {
            return doc.clone();
        }
    }
    let doc = Arc::new(serde_json::from_str(text).unwrap_or(Json::Null));
    parsed.insert(pt.id().to_string(), (text.to_string(), doc.clone()));
    doc
}

/// The location's default product transaction for a payment method
/// (`default_cc` / `default_ach`), if it is in the caller's scope.
pub fn default_for(
    conn: &mut dyn Conn,
    cx: &Cx,
    location_id: &str,
    method: &str,
) -> ApiResult<Option<Record>> {
    let column = if method == "ach" {
        "default_ach"
    } else {
        "default_cc"
    };
    let mut sql = Sql::new("SELECT ");
    sql.push(column)
        .push(" FROM locations WHERE id = ")
        .bind(location_id.to_string());
    let id = conn
        .query_one(&sql)?
        .and_then(|r| r[0].as_str().map(str::to_string));
    match id {
        Some(id) => Ok(query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, &id)?),
        None => Ok(None),
    }
}

/// One ACH terminal profile of `processor_data.terminals[]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AchProfile {
    pub sec_code: String,
    pub actions: Vec<String>,
    pub required: Vec<String>,
}

/// The ACH terminal profiles of a product transaction's settings, in order.
pub fn ach_profiles(settings: &Json) -> Vec<AchProfile> {
    let list = |t: &Json, k: &str| -> Vec<String> {
        t[k].as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    settings["processor_data"]["terminals"]
        .as_array()
        .map(|terminals| {
            terminals
                .iter()
                .map(|t| AchProfile {
                    sec_code: t["sec_code"].as_str().unwrap_or_default().to_string(),
                    actions: list(t, "actions"),
                    required: list(t, "required"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The identity requirements of an ACH profile, with the messages vaults
/// and transactions share: `driver_license` (dl_number and dl_state) and
/// `identity_verification` (ssn4 or dob_year). `has` tells whether the
/// request carries a field.
pub fn check_identity(required: &[String], has: impl Fn(&str) -> bool, errors: &mut FieldErrors) {
    for need in required {
        match need.as_str() {
            "driver_license" => {
                for f in ["dl_number", "dl_state"] {
                    if !has(f) {
                        errors.add(f, format!("{} (driver's licence is required here).", blank(f)));
                    }
                }
            }
            "identity_verification" => match (has("ssn4"), has("dob_year")) {
                (false, false) => errors.add(
                    "ssn4",
                    "Ssn4 or dob_year is required here (identity verification).",
                ),
                (true, true) => errors.add("dob_year", "Send ssn4 or dob_year, not both."),
                _ => {}
            },
            _ => {}
        }
    }
}
