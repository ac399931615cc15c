//! Hosted payment pages (reference 7.3): a location's saved payment page
//! for one product transaction, with its form settings and the key its
//! links are encrypted with. The page itself is served at
//! `/hostedpaymentpage` (`http::hosted`).

use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::Cx;
use crate::error::{ApiResult, FieldErrors};
use serde_json::{Map, Value as Json};

use super::{LOCATION, PRODUCT_TRANSACTION, USER};

const MAX_AMOUNT: i64 = 99_999_999_999;

pub static HOSTED_PAYMENT_PAGE: Resource = Resource {
    name: "hostedpaymentpage",
    plural: "hostedpaymentpages",
    table: "hosted_payment_pages",
    model: "HostedPaymentPage",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION)
            .doc("not updatable"),
        Field::id("product_transaction_id")
            .pu()
            .required()
            .filter()
            .refers(&PRODUCT_TRANSACTION)
            .doc("a product transaction of the page's location"),
        Field::text("title", 1, 64).pu().required().filter().sort(),
        Field::text("encryption_key", 36, 36)
            .encrypted()
            .doc("system generated: encrypts the page's links (OpenSSL enc -aes-256-cbc -md md5)"),
        Field::text("redirect_url_on_approve", 0, 256).pu(),
        Field::text("redirect_url_on_decline", 0, 256).pu(),
        Field::int("redirect_url_delay", 0, 600).pu().doc("seconds"),
        Field::money("min_payment_amount", MAX_AMOUNT).pu(),
        Field::money("max_payment_amount", MAX_AMOUNT).pu(),
        Field::flag("parent_send_message").pu(),
        Field::text("stylesheet_url", 0, 256).pu(),
        Field::flag("active").pu().filter(),
        Field::id("created_user_id").filter(),
        Field::id("modified_user_id"),
        Field::ts("created_ts").filter().sort(),
        Field::ts("modified_ts").filter().sort(),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
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
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &HostedPaymentPageRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A saved hosted payment page: payers pay at /hostedpaymentpage?id=...&data=... with links encrypted under its key.",
};

struct HostedPaymentPageRules;

/// URLs are absolute http(s); the product transaction is the location's
/// own; a minimum is not above the maximum.
fn check(conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    for name in [
        "redirect_url_on_approve",
        "redirect_url_on_decline",
        "stylesheet_url",
    ] {
        if let Some(url) = record.text(name).filter(|u| !u.is_empty()) {
            if let Err(m) = crate::hosted::form::check_url(url) {
                errors.add(name, format!("{name} {m}."));
            }
        }
    }
    if let (Some(pt), Some(location)) = (record.text("product_transaction_id"), record.text("location_id")) {
        let found = conn.query_one(&Sql::with(
            "SELECT 1 FROM product_transactions WHERE id = ? AND location_id = ?",
            vec![pt.into(), location.into()],
        ))?;
        if found.is_none() {
            errors.add(
                "product_transaction_id",
                "The product transaction must belong to the page's location.",
            );
        }
    }
    if let (Some(min), Some(max)) = (record.int("min_payment_amount"), record.int("max_payment_amount")) {
        if min > max {
            errors.add(
                "min_payment_amount",
                "min_payment_amount cannot be above max_payment_amount.",
            );
        }
    }
    errors.into_result()
}

impl Rules for HostedPaymentPageRules {
    fn before_create(
        &self,
        _cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        input
            .record
            .set("encryption_key", uuid::Uuid::new_v4().to_string());
        if input.record.get("active").is_null() {
            input.record.set("active", 1i64);
        }
        if input.record.get("parent_send_message").is_null() {
            input.record.set("parent_send_message", 0i64);
        }
        check(conn, &input.record)?;
        Ok(None)
    }

    fn before_update(&self, _cx: &Cx, conn: &mut dyn Conn, _old: &Record, new: &mut Record) -> ApiResult<()> {
        check(conn, new)
    }

    fn render(&self, cx: &Cx, _record: &Record, out: &mut Map<String, Json>) {
        // The key makes links that charge: only those who may change the
        // page see it.
        if !cx.perms.allows("hostedpaymentpages.update") {
            out.insert("encryption_key".into(), Json::Null);
        }
    }
}
