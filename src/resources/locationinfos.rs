//! Location infos: a read-only aggregate of a location with its product
//! transactions (velocity settings, ACH requirements) and related records.

use crate::db::{Conn, Sql};
use crate::engine::query;
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::{render, Cx};
use crate::error::{ApiError, ApiResult};
use serde_json::{json, Map, Value as Json};

use super::PRODUCT_TRANSACTION;

pub static LOCATION_INFO: Resource = Resource {
    name: "locationinfo",
    plural: "locationinfos",
    table: "locations",
    model: "Location",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::text("name", 1, 64).filter().sort(),
        Field::text("address1", 0, 32).filter(),
        Field::text("address2", 0, 32),
        Field::text("city", 0, 100).filter(),
        Field::text("state", 0, 100).filter(),
        Field::text("zip", 0, 10).column("zip_code").filter(),
        Field::text("office_phone", 0, 10),
        Field::text("office_ext_phone", 0, 10),
        Field::text("fax", 0, 10),
        Field::text("tz", 0, 24),
        Field::text("branding_domain_url", 0, 255),
        Field::id("default_cc"),
        Field::id("default_ach"),
        Field::flag("contact_email_trx_receipt_default"),
        Field::flag("show_contact_notes"),
        Field::flag("show_contact_files"),
        Field::id("parent_id").hidden().filter(),
        Field::ts("created_ts").hidden(),
    ],
    default_sort: ("created_ts", true),
    page_size: 20,
    scope: Scope::Location,
    api_id: None,
    unique: None,
    expands: &[Expand::Custom("terminals")],
    list_params: &["relationship", "product_transaction_active", "location_api_id"],
    computed: &[
        (
            "product_transactions",
            "array",
            "the location's deposit accounts with their settings",
        ),
        ("product_file", "object", "null until file products exist"),
        (
            "product_accountvault",
            "object",
            "null until vault products exist",
        ),
        (
            "product_recurring",
            "object",
            "null until recurring products exist",
        ),
        ("branding_domain", "object", "null until branding domains exist"),
        ("terminals", "array", "the location's terminals"),
        ("tags", "array", "the location's tags"),
    ],
    rules: &LocationInfoRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A location with its product transactions and related settings (read only).",
};

struct LocationInfoRules;

/// `relationship`: direct = the caller's own location; child = the
/// locations below it; all = both. Direct unless the list looks a
/// location up by its `location_api_id`, then all.
fn relationship(extra: &[(String, String)]) -> &str {
    let default = if location_api_id(extra).is_some() {
        "all"
    } else {
        "direct"
    };
    extra
        .iter()
        .rev()
        .find(|(k, _)| k == "relationship")
        .map(|(_, v)| v.as_str())
        .unwrap_or(default)
}

/// `?location_api_id=`: the location an integrator named (the
/// reference's lookup sample).
fn location_api_id(extra: &[(String, String)]) -> Option<&str> {
    extra
        .iter()
        .rev()
        .find(|(k, _)| k == "location_api_id")
        .map(|(_, v)| v.as_str())
}

fn active_filter(extra: &[(String, String)]) -> Option<i64> {
    extra
        .iter()
        .rev()
        .find(|(k, _)| k == "product_transaction_active")
        .and_then(|(_, v)| v.parse().ok())
}

impl Rules for LocationInfoRules {
    fn check_list_params(&self, extra: &[(String, String)]) -> ApiResult<()> {
        if !matches!(relationship(extra), "direct" | "child" | "all") {
            return Err(ApiError::field(
                "relationship",
                "Relationship must be one of all, direct, child.",
            ));
        }
        for (k, v) in extra {
            if k == "product_transaction_active" && !matches!(v.as_str(), "0" | "1") {
                return Err(ApiError::field(
                    k.clone(),
                    "Product Transaction Active must be 1 or 0.",
                ));
            }
        }
        Ok(())
    }

    fn list_conditions(&self, cx: &Cx, extra: &[(String, String)], sql: &mut Sql) {
        if let Some(api_id) = location_api_id(extra) {
            sql.push(" AND t.location_api_id = ").bind(api_id.to_string());
        }
        match relationship(extra) {
            "direct" => {
                sql.push(" AND t.id = ").bind(cx.scope.location_id.clone());
            }
            "child" => {
                sql.push(" AND t.id <> ").bind(cx.scope.location_id.clone());
            }
            _ => {}
        }
    }

    /// A location info is the whole aggregate, alone or in a list.
    fn render_read(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        record: &Record,
        extra: &[(String, String)],
        expand: &[String],
    ) -> ApiResult<Option<Json>> {
        info(cx, conn, record, extra, expand).map(Some)
    }

    fn render(&self, cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        if let Some(Json::Object(links)) = out.get_mut("_links") {
            links.insert(
                "location".into(),
                json!({ "href": cx.href(&format!("/v2/locations/{}", record.id())) }),
            );
        }
    }
}

/// The whole aggregate of one location.
fn info(
    cx: &Cx,
    conn: &mut dyn Conn,
    record: &Record,
    q_extra: &[(String, String)],
    expand: &[String],
) -> ApiResult<Json> {
    let mut out = render(cx, record);
    let mut sql = query::select(&PRODUCT_TRANSACTION, &cx.scope);
    sql.push(" AND t.location_id = ").bind(record.id().to_string());
    if let Some(active) = active_filter(q_extra) {
        sql.push(" AND t.active = ").bind(active);
    }
    sql.push(" ORDER BY t.id ASC");
    let with_terminals = expand.iter().any(|e| e == "terminals");
    let terminals = super::terminals::of_location(cx, conn, record.id())?;
    let products: Vec<Json> = conn
        .query(&sql)?
        .into_iter()
        .map(|row| {
            let product = Record::from_row(&PRODUCT_TRANSACTION, row);
            let mut p = render(cx, &product);
            let batch = crate::payments::batches::current_number(conn, product.id())?;
            p.insert("current_batch".into(), json!(batch));
            p.remove("location_id");
            p.remove("created_ts");
            p.remove("modified_ts");
            if with_terminals {
                // Terminals take cards: each card product transaction
                // lists the location's terminals.
                let card = p.get("payment_method").and_then(Json::as_str) == Some("cc");
                let listed = if card { terminals.clone() } else { Vec::new() };
                p.insert("terminals".into(), Json::Array(listed));
            }
            Ok(Json::Object(p))
        })
        .collect::<ApiResult<_>>()?;
    out.insert("product_transactions".into(), Json::Array(products));
    // Not modelled yet: absent values are null, absent lists empty.
    out.insert("product_file".into(), Json::Null);
    out.insert("product_accountvault".into(), Json::Null);
    out.insert("product_recurring".into(), Json::Null);
    out.insert("branding_domain".into(), Json::Null);
    out.insert("terminals".into(), Json::Array(terminals));
    out.insert(
        "tags".into(),
        Json::Array(super::tags::of_location(cx, conn, record.id())?),
    );
    Ok(Json::Object(out))
}
