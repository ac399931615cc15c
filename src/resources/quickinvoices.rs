//! Quick invoices (reference 6.9): an invoice a customer is emailed, with
//! a link to a page where they pay it. The balance and reminder rules
//! live in `invoices`; the pay page in `http::quickinvoices`.

use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::{parse_flag, CreateInput, UpdateInput};
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::invoices::{self, DEFAULT_MAX_PAYMENT};
use serde_json::{json, Map, Value as Json};

use super::{CONTACT, LOCATION, PRODUCT_TRANSACTION, TRANSACTION, USER};

const MAX_AMOUNT: i64 = DEFAULT_MAX_PAYMENT;

pub static QUICK_INVOICE: Resource = Resource {
    name: "quickinvoice",
    plural: "quickinvoices",
    table: "quick_invoices",
    model: "QuickInvoice",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION)
            .doc("not updatable"),
        Field::id("contact_id").pu().filter().refers(&CONTACT),
        Field::text("invoice_number", 0, 64).pu().filter().sort(),
        Field::text("title", 1, 64).pu().required().filter().sort(),
        Field::text("item_header", 0, 250).pu(),
        Field::json("item_list", 4000)
            .pu()
            .required()
            .doc("object of item name to amount (number or numeric string); amount_due is their sum"),
        Field::text("item_footer", 0, 250).pu(),
        Field::int("status_id", 0, 1)
            .put()
            .filter()
            .sort()
            .doc("1 open, 0 closed (paid in full, inactive or expired); a PUT closes (0) or reopens (1) it, as is_active does"),
        Field::int("payment_status_id", 1, 3)
            .filter()
            .sort()
            .doc("1 unpaid, 2 paid (in full or more), 3 partially paid"),
        Field::money("amount_due", 99_999_999_999).filter().sort(),
        Field::money("remaining_balance", 99_999_999_999).filter().sort(),
        Field::date("due_date").pu().required().filter().sort(),
        Field::date("expire_date")
            .pu()
            .filter()
            .sort()
            .doc("the pay link stops working after this day"),
        Field::text("email", 5, 128).pu().filter().pattern(Pattern::Email),
        Field::flag("allow_partial_pay").numbered().pu().filter(),
        Field::money("single_payment_min_amount", MAX_AMOUNT).pu(),
        Field::money("single_payment_max_amount", MAX_AMOUNT).pu(),
        Field::flag("allow_overpayment").numbered().pu().filter(),
        Field::int("notification_days_before_due_date", 0, 99).pu(),
        Field::flag("notification_on_due_date").numbered().pu(),
        Field::int("notification_days_after_due_date", 0, 99).pu(),
        Field::id("cc_product_transaction_id")
            .pu()
            .filter()
            .refers(&PRODUCT_TRANSACTION)
            .doc("the location's default_cc when not sent; changeable while no payment exists"),
        Field::id("ach_product_transaction_id")
            .pu()
            .filter()
            .refers(&PRODUCT_TRANSACTION)
            .doc("the location's default_ach when not sent; changeable while no payment exists"),
        Field::flag("is_active").numbered().pu().filter(),
        Field::text("note", 0, 200).pu(),
        Field::text("notification_email", 0, 128)
            .pu()
            .pattern(Pattern::Email),
        Field::flag("attach_files_to_email").numbered().pu(),
        Field::text("customer_id", 0, 64).pu().filter(),
        Field::tags("tags").post().filter().doc("tag titles, on creation"),
        Field::flag("send_email")
            .post()
            .transient()
            .doc("email the invoice on creation"),
        Field::text("contact_api_id", 1, 64)
            .post()
            .transient()
            .doc("the contact by its api id"),
        Field::flag("active")
            .pu()
            .transient()
            .doc("is_active, as some samples name it"),
        // Accepted for ACH payers, as the reference's create takes them;
        // an invoice stores no identity data.
        Field::text("dl_number", 0, 32).post().transient(),
        Field::text("dl_state", 0, 2).post().transient(),
        Field::int("dob_year", 1900, 2100).post().transient(),
        Field::text("ssn4", 0, 4).post().transient().secret(),
        Field::text("pay_token", 40, 40).hidden(),
        Field::id("created_user_id"),
        Field::id("modified_user_id"),
        Field::ts("created_ts").filter().sort(),
        Field::ts("modified_ts").filter().sort(),
    ],
    default_sort: ("created_ts", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::BelongsTo {
            name: "contact",
            target: &CONTACT,
            column: "contact_id",
        },
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::CustomRecords {
            name: "transactions",
            permission: "transactions.read",
            many: true,
        },
        Expand::Custom("tags"),
        Expand::Custom("files"),
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &QuickInvoiceRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "An invoice emailed to a customer with a link to pay it; its payments are transactions naming it.",
};

struct QuickInvoiceRules;

/// The item list as sent (an object), its sum into `amount_due`.
fn check_items(record: &mut Record, errors: &mut FieldErrors) {
    let Some(text) = record.text("item_list").map(str::to_string) else {
        return;
    };
    if text.chars().count() < 5 {
        errors.add("item_list", "item_list should contain at least 5 characters.");
        return;
    }
    let list: Json = serde_json::from_str(&text).unwrap_or(Json::Null);
    match invoices::amount_due(&list) {
        Ok(0) => errors.add("item_list", "The items must add up to more than zero."),
        Ok(cents) => record.set("amount_due", cents),
        Err(m) => errors.add("item_list", m),
    }
}

/// A product transaction of the invoice's location for `method`: the one
/// named, or the location's default.
fn product_transaction(
    conn: &mut dyn Conn,
    cx: &Cx,
    record: &mut Record,
    field: &str,
    method: &str,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    let location = record.text("location_id").unwrap_or_default().to_string();
    match record.text(field).map(str::to_string) {
        Some(id) => {
            let found = query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, &id)?;
            let fits = found.is_some_and(|pt| {
                pt.text("payment_method") == Some(method) && pt.text("location_id") == Some(location.as_str())
            });
            if !fits {
                errors.add(
                    field,
                    format!("{field} must be a {method} product transaction of the invoice's location."),
                );
            }
        }
        None => {
            if let Some(pt) = super::product_transactions::default_for(conn, cx, &location, method)? {
                record.set(field, pt.id().to_string());
            }
        }
    }
    Ok(())
}

/// The largest single payment when none is set: the invoice's amount
/// unless it allows overpayment (the reference's rule).
fn default_max_payment(record: &Record) -> i64 {
    match record.int("allow_overpayment") {
        Some(1) => DEFAULT_MAX_PAYMENT,
        _ => record.int("amount_due").unwrap_or(DEFAULT_MAX_PAYMENT),
    }
}

fn check_amounts(record: &Record, errors: &mut FieldErrors) {
    let min = record.int("single_payment_min_amount").unwrap_or(0);
    let max = record
        .int("single_payment_max_amount")
        .unwrap_or(DEFAULT_MAX_PAYMENT);
    if min > max {
        errors.add(
            "single_payment_min_amount",
            "single_payment_min_amount cannot be above single_payment_max_amount.",
        );
    }
    if let (Some(due), Some(expire)) = (record.text("due_date"), record.text("expire_date")) {
        if expire < due {
            errors.add("expire_date", "expire_date cannot be before due_date.");
        }
    }
}

fn location_tz(conn: &mut dyn Conn, record: &Record) -> ApiResult<chrono_tz::Tz> {
    Ok(crate::billing::location_zone(conn, record.text("location_id").unwrap_or_default())?.0)
}

/// A contact's email, for an invoice that names the contact but no address.
fn contact_email(conn: &mut dyn Conn, contact_id: &str) -> ApiResult<Option<String>> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT email FROM contacts WHERE id = ?",
            vec![contact_id.into()],
        ))?
        .and_then(|r| r[0].as_str().map(str::to_string))
        .filter(|e| !e.is_empty()))
}

impl Rules for QuickInvoiceRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let transient = input.transient.clone();
        let record = &mut input.record;
        let mut errors = FieldErrors::new();
        if let Some(Json::String(api_id)) = transient.get("contact_api_id") {
            if record.text("contact_id").is_some() {
                errors.add("contact_api_id", "Send contact_id or contact_api_id, not both.");
            } else {
                let location = record.text("location_id").unwrap_or_default().to_string();
                match query::find_by_api_id(conn, &CONTACT, &cx.scope, &location, api_id)? {
                    Some(c) => record.set("contact_id", c.id().to_string()),
                    None => errors.add("contact_api_id", "contact_api_id provided is not valid"),
                }
            }
        }
        if let Some(active) = transient.get("active").and_then(parse_flag) {
            record.set("is_active", active as i64);
        }
        check_items(record, &mut errors);
        product_transaction(conn, cx, record, "cc_product_transaction_id", "cc", &mut errors)?;
        product_transaction(conn, cx, record, "ach_product_transaction_id", "ach", &mut errors)?;
        if record.text("cc_product_transaction_id").is_none()
            && record.text("ach_product_transaction_id").is_none()
        {
            errors.add(
                "cc_product_transaction_id",
                "The invoice needs a card or an ACH product transaction, and the location has no default.",
            );
        }
        let defaults: [(&str, i64); 7] = [
            ("allow_partial_pay", 0),
            ("allow_overpayment", 0),
            ("single_payment_min_amount", 0),
            ("notification_days_before_due_date", 3),
            ("notification_on_due_date", 1),
            ("notification_days_after_due_date", 7),
            ("attach_files_to_email", 0),
        ];
        for (name, value) in defaults {
            if record.get(name).is_null() {
                record.set(name, value);
            }
        }
        if record.get("is_active").is_null() {
            record.set("is_active", 1i64);
        }
        if record.get("single_payment_max_amount").is_null() {
            record.set("single_payment_max_amount", default_max_payment(record));
        }
        check_amounts(record, &mut errors);
        errors.into_result()?;
        if record.text("email").is_none() {
            if let Some(contact) = record.text("contact_id").map(str::to_string) {
                if let Some(email) = contact_email(conn, &contact)? {
                    record.set("email", email);
                }
            }
        }
        record.set("pay_token", crate::crypto::random_secret(40));
        record.set("remaining_balance", record.int("amount_due").unwrap_or(0));
        record.set("payment_status_id", invoices::PAYMENT_UNPAID);
        let tz = location_tz(conn, record)?;
        let (remaining, payment, status) = invoices::balance(
            record.int("amount_due").unwrap_or(0),
            0,
            record.int("is_active") != Some(0),
            invoices::expired(record, &crate::clock::date_text(cx.now, tz)),
        );
        record.set("remaining_balance", remaining);
        record.set("payment_status_id", payment);
        record.set("status_id", status);
        let send = transient.get("send_email").and_then(parse_flag) == Some(true);
        if send {
            invoices::send(conn, cx.now, &cx.public_url, record)?;
        }
        Ok(None)
    }

    fn after_create(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        let tz = location_tz(conn, record)?;
        conn.execute(&Sql::with(
            "UPDATE quick_invoices SET remind_ts = ? WHERE id = ?",
            vec![
                invoices::next_reminder(record, tz, cx.now).into(),
                record.id().into(),
            ],
        ))?;
        Ok(())
    }

    fn update_transient(
        &self,
        _cx: &Cx,
        _conn: &mut dyn Conn,
        _old: &Record,
        new: &mut Record,
        input: &UpdateInput,
    ) -> ApiResult<()> {
        for (name, value) in &input.transient {
            match (name.as_str(), parse_flag(value)) {
                ("active", Some(active)) => new.set("is_active", active as i64),
                _ => {
                    return Err(ApiError::field(
                        name.clone(),
                        format!("{name} cannot be changed."),
                    ))
                }
            }
        }
        // A merchant closes (0) or reopens (1) an invoice through its
        // status as through is_active, whatever the status is now; the
        // status itself is then worked out again (a paid invoice stays
        // closed).
        let sent_status = input
            .changes
            .iter()
            .find(|(f, _)| f.name == "status_id")
            .and_then(|(_, v)| v.as_int());
        if let Some(status) = sent_status {
            let active = (status == invoices::STATUS_OPEN) as i64;
            let sent_active = input.changes.iter().any(|(f, _)| f.name == "is_active")
                || input.transient.contains_key("active");
            if sent_active && new.int("is_active") != Some(active) {
                return Err(ApiError::field(
                    "status_id",
                    "Status Id and is_active disagree: send one of them.",
                ));
            }
            new.set("is_active", active);
        }
        Ok(())
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        let mut errors = FieldErrors::new();
        if new.get("item_list") != old.get("item_list") {
            check_items(new, &mut errors);
        }
        let products_changed = ["cc_product_transaction_id", "ach_product_transaction_id"]
            .iter()
            .any(|f| new.get(f) != old.get(f));
        if products_changed {
            let (_, payments) = invoices::paid(conn, old.id())?;
            if payments > 0 {
                errors.add(
                    "cc_product_transaction_id",
                    "The product transactions cannot change once the invoice has a payment.",
                );
            }
            for (field, method) in [
                ("cc_product_transaction_id", "cc"),
                ("ach_product_transaction_id", "ach"),
            ] {
                if new.get(field) != old.get(field) && new.text(field).is_some() {
                    product_transaction(conn, cx, new, field, method, &mut errors)?;
                }
            }
            if new.text("cc_product_transaction_id").is_none()
                && new.text("ach_product_transaction_id").is_none()
            {
                errors.add(
                    "cc_product_transaction_id",
                    "The invoice needs a card or an ACH product transaction.",
                );
            }
        }
        // A maximum that was the default follows what the default is now.
        let max = "single_payment_max_amount";
        if new.get(max) == old.get(max) && old.int(max) == Some(default_max_payment(old)) {
            new.set(max, default_max_payment(new));
        }
        check_amounts(new, &mut errors);
        errors.into_result()?;
        let tz = location_tz(conn, new)?;
        invoices::refresh(conn, new, tz, cx.now)
    }

    fn after_update(&self, cx: &Cx, conn: &mut dyn Conn, _old: &Record, new: &Record) -> ApiResult<()> {
        let tz = location_tz(conn, new)?;
        conn.execute(&Sql::with(
            "UPDATE quick_invoices SET remind_ts = ? WHERE id = ?",
            vec![invoices::next_reminder(new, tz, cx.now).into(), new.id().into()],
        ))?;
        Ok(())
    }

    fn before_delete(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        // Its payments stay; they no longer name an invoice that is gone,
        // each changed as any update is (change log, UPDATE postback).
        let mut sql = query::select_unscoped(&TRANSACTION);
        sql.push(" AND t.quick_invoice_id = ")
            .bind(record.id().to_string())
            .push(" ORDER BY t.id");
        let payments: Vec<Record> = conn
            .query(&sql)?
            .into_iter()
            .map(|row| Record::from_row(&TRANSACTION, row))
            .collect();
        for payment in payments {
            invoices::lock_payment(conn, payment.id())?;
            // As it is now, under the lock.
            if let Some(now) = query::find_unscoped(conn, &TRANSACTION, payment.id())?
                .filter(|t| t.text("quick_invoice_id") == Some(record.id()))
            {
                invoices::link_payment(cx, conn, &now, None)?;
            }
        }
        // Its file rows go; the bytes stay in the store (a queued mail may
        // still carry them).
        conn.execute(&Sql::with(
            "DELETE FROM quick_invoice_files WHERE quick_invoice_id = ?",
            vec![record.id().into()],
        ))?;
        Ok(())
    }

    fn render(&self, cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        out.insert(
            "active".into(),
            out.get("is_active").cloned().unwrap_or(Json::Null),
        );
        // The page the customer pays on, for merchants who send the link
        // themselves.
        if let (Some(token), Some(Json::Object(links))) = (record.text("pay_token"), out.get_mut("_links")) {
            links.insert(
                "pay".into(),
                json!({ "href": invoices::pay_link(&cx.public_url, token) }),
            );
        }
    }

    fn expand(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        match name {
            "transactions" => transactions(cx, conn, record.id()),
            "tags" => Ok(super::tags::expand_of(record)),
            "files" => Ok(Json::Array(
                invoices::attachments::list(conn, record.id())?
                    .iter()
                    .map(|f| f.to_json())
                    .collect(),
            )),
            _ => Ok(Json::Null),
        }
    }
}

/// The invoice a payment pays, as `GET /v2/quickinvoices/{id}` shows it
/// to the reader (null when it pays none, or one out of the reader's
/// scope): a transaction's `quick_invoice` expand, in postbacks too.
pub fn of_transaction(cx: &Cx, conn: &mut dyn Conn, transaction: &Record) -> ApiResult<Json> {
    match transaction.text("quick_invoice_id") {
        Some(id) => Ok(query::find(conn, &QUICK_INVOICE, &cx.scope, id)?
            .map(|r| Json::Object(crate::engine::render_embedded(cx, &r)))
            .unwrap_or(Json::Null)),
        None => Ok(Json::Null),
    }
}

/// The invoice's payments as the API renders transactions, oldest first.
pub fn transactions(cx: &Cx, conn: &mut dyn Conn, invoice_id: &str) -> ApiResult<Json> {
    let mut sql = query::select(&TRANSACTION, &cx.scope);
    sql.push(" AND t.quick_invoice_id = ")
        .bind(invoice_id.to_string())
        .push(" ORDER BY t.created_ts, t.id");
    let rows = conn.query(&sql)?;
    Ok(Json::Array(
        rows.into_iter()
            .map(|row| Json::Object(crate::engine::render(cx, &Record::from_row(&TRANSACTION, row))))
            .collect(),
    ))
}
