//! Recurrings: a schedule that charges an account vault every interval,
//! ongoing (`o`) or for a number of installments (`i`). This module holds
//! the declaration and the rules of create, PUT and delete; the state
//! machine is `billing::transitions`, the runs `billing::scheduler`.

use crate::billing::calendar::{date_text, local_date, parse_date, Unit};
use crate::billing::{self, transitions};
use crate::db::{Conn, Value};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::{blank, CreateInput, UpdateInput};
use crate::engine::{query, render, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::Value as Json;

use super::product_transactions::default_for;
use super::transactions::MAX_AMOUNT;
use super::{ACCOUNT_VAULT, CONTACT, LOCATION, PRODUCT_TRANSACTION, TRANSACTION, USER};

pub static RECURRING: Resource = Resource {
    name: "recurring",
    plural: "recurrings",
    table: "recurrings",
    model: "Recurring",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("account_vault_id")
            .pu()
            .exact()
            .refers(&ACCOUNT_VAULT)
            .doc("required unless account_vault_api_id is sent; the vault must belong to a contact"),
        Field::text("account_vault_api_id", 1, 64).pu().transient().doc(
            "the vault by its api id, at the recurring's location (account_vault_id wins when both are sent)",
        ),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION),
        Field::id("contact_id").exact().doc("the vault's contact"),
        Field::id("product_transaction_id")
            .pu()
            .exact()
            .refers(&PRODUCT_TRANSACTION)
            .doc("the location's default for the payment method when not sent"),
        Field::text("payment_method", 2, 3)
            .post()
            .exact()
            .one_of(super::PAYMENT_METHODS)
            .doc("the vault's"),
        Field::money("transaction_amount", MAX_AMOUNT)
            .pu()
            .required()
            .filter()
            .sort(),
        Field::int("interval", 1, 999)
            .post()
            .required()
            .filter()
            .column("interval_count")
            .doc("intervals between runs"),
        Field::text("interval_type", 1, 1)
            .post()
            .required()
            .exact()
            .one_of(&["d", "w", "m"])
            .doc("d (days), w (weeks) or m (months)"),
        Field::date("start_date")
            .post()
            .required()
            .filter()
            .sort()
            .doc("the first run, today or later (the location's date)"),
        Field::date("end_date")
            .pu()
            .zero_when_unset()
            .filter()
            .sort()
            .doc("last day a run may fall on; derived for installments; 0000-00-00 when unset"),
        Field::date("next_run_date")
            .put()
            .zero_when_unset()
            .filter()
            .sort()
            .doc("0000-00-00 while on hold or ended"),
        Field::text("description", 0, 36).pu().filter(),
        Field::int("notification_days", 0, 99)
            .pu()
            .doc("days before a run to email the contact; the location's default when not sent"),
        Field::int("installment_total_count", 0, 99)
            .post()
            .filter()
            .doc("sets an installment recurring"),
        Field::money("installment_amount_total", i64::MAX).doc("what the installments collect"),
        Field::int("active", 0, 1)
            .pu()
            .filter()
            .doc("PUT 0 holds an ongoing recurring, 1 resumes it; ignored for installments; placeOnHold leaves it as it is (status tells the state)"),
        Field::text("recurring_type_id", 1, 1)
            .pu()
            .exact()
            .one_of(&["o", "i"])
            .doc("o (ongoing) or i (installment), derived from installment_total_count"),
        Field::text("recurring_c1", 0, 128).pu().filter(),
        Field::text("recurring_c2", 0, 128).pu().filter(),
        Field::text("recurring_c3", 0, 128).pu().filter(),
        Field::tags("tags")
            .pu()
            .filter()
            .doc("tag titles; its runs carry them"),
        Field::text("status", 1, 16)
            .exact()
            .sort()
            .doc("active, on hold or ended"),
        Field::int("skip_count", 0, i64::MAX).doc("payments skipped"),
        Field::int("defer_count", 0, i64::MAX).doc("payments deferred"),
        Field::int("retry_count", 0, i64::MAX).doc("declined tries of the current payment"),
        Field::int("payment_count", 0, i64::MAX).doc("approved runs"),
        Field::date("last_run_date").filter(),
        Field::text("last_run_status", 0, 32)
            .exact()
            .doc("approved, declined_retrying or declined"),
        Field::id("last_transaction_id"),
        Field::text("ended_reason", 0, 32)
            .exact()
            .doc("end_date_passed, installments_collected or account_vault_deleted"),
        Field::date("anchor_date").hidden(),
        Field::int("period", 0, i64::MAX).hidden(),
        Field::int("run_seq", 0, i64::MAX).hidden(),
        Field::date("notified_date").hidden(),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("next_run_date", false),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::BelongsTo {
            name: "account_vault",
            target: &ACCOUNT_VAULT,
            column: "account_vault_id",
        },
        Expand::HasMany {
            name: "transactions",
            target: &TRANSACTION,
            column: "recurring_id",
        },
        Expand::CustomRecords {
            name: "signature",
            permission: "signatures.read",
            many: false,
        },
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "contact",
            target: &CONTACT,
            column: "contact_id",
        },
        Expand::Custom("tags"),
        Expand::BelongsTo {
            name: "product_transaction",
            target: &PRODUCT_TRANSACTION,
            column: "product_transaction_id",
        },
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &RecurringRules,
    search: None,
    cascades: &[],
    // Not a postback resource (the spec names four); the transactions
    // of its runs are.
    postback: None,
    api: Api::PLAIN,
    doc: "A schedule charging an account vault every interval: ongoing, or a number of installments.",
};

struct RecurringRules;

/// The vault a recurring charges, found in scope and checked: at the
/// recurring's location, with a contact.
fn vault(
    cx: &Cx,
    conn: &mut dyn Conn,
    location_id: &str,
    id: Option<&str>,
    api_id: Option<&str>,
) -> ApiResult<Record> {
    let (field, found) = match (id, api_id) {
        (Some(id), _) => (
            "account_vault_id",
            query::find(conn, &ACCOUNT_VAULT, &cx.scope, id)?,
        ),
        (None, Some(api_id)) => (
            "account_vault_api_id",
            query::find_by_api_id(conn, &ACCOUNT_VAULT, &cx.scope, location_id, api_id)?,
        ),
        (None, None) => return Err(ApiError::field("account_vault_id", blank("account_vault_id"))),
    };
    let mut vault = found.ok_or_else(|| ApiError::field(field, format!("{field} provided is not valid")))?;
    if vault.text("location_id") != Some(location_id) {
        return Err(ApiError::field(
            field,
            "The account vault belongs to another location than the recurring.",
        ));
    }
    if vault.text("contact_id").is_none() {
        return Err(ApiError::field(field, NO_CONTACT));
    }
    if vault.int("active") == Some(0) {
        return Err(ApiError::field(field, "The account vault is not active."));
    }
    // Read unlocked above: held now, and read again, so that neither the
    // vault nor its contact is deleted under the schedule.
    match billing::hold_for_billing(conn, vault.id())? {
        None => Err(ApiError::field(field, format!("{field} provided is not valid"))),
        Some(None) => Err(ApiError::field(field, NO_CONTACT)),
        Some(Some(contact_id)) => {
            vault.set("contact_id", contact_id);
            Ok(vault)
        }
    }
}

/// Why a vault without a contact cannot be billed.
const NO_CONTACT: &str =
    "The account vault has no contact: a recurring charges a contact's vault (set its contact_id first).";

/// The product transaction that runs the payments: the one named (same
/// method, same location) or the location's default for the method.
fn product_transaction(
    cx: &Cx,
    conn: &mut dyn Conn,
    location_id: &str,
    method: &str,
    named: Option<&str>,
    errors: &mut FieldErrors,
) -> ApiResult<Option<String>> {
    let pt = match named {
        Some(id) => query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, id)?,
        None => default_for(conn, cx, location_id, method)?,
    };
    let Some(pt) = pt else {
        errors.add(
            "product_transaction_id",
            format!("The location has no {method} product transaction to run the payments."),
        );
        return Ok(None);
    };
    if pt.text("payment_method") != Some(method) {
        errors.add(
            "product_transaction_id",
            format!("The product transaction is not a {method} one, like the account vault."),
        );
    } else if pt.text("location_id") != Some(location_id) {
        errors.add(
            "product_transaction_id",
            "The product transaction belongs to another location than the recurring.",
        );
    } else if pt.int("active") == Some(0) {
        errors.add("product_transaction_id", "The product transaction is not active.");
    }
    Ok(Some(pt.id().to_string()))
}

fn today(cx: &Cx, conn: &mut dyn Conn, location_id: &str) -> ApiResult<chrono::NaiveDate> {
    let (tz, _) = billing::location_zone(conn, location_id)?;
    Ok(local_date(cx.now, tz))
}

impl Rules for RecurringRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let location_id = input.record.text("location_id").unwrap_or_default().to_string();
        let api_id = input
            .transient
            .get("account_vault_api_id")
            .and_then(Json::as_str)
            .map(str::to_string);
        let record = &mut input.record;
        let vault = vault(
            cx,
            conn,
            &location_id,
            record.text("account_vault_id"),
            api_id.as_deref(),
        )?;
        let mut errors = FieldErrors::new();
        let method = vault.text("payment_method").unwrap_or("cc").to_string();
        if let Some(sent) = record.text("payment_method") {
            if sent != method {
                errors.add(
                    "payment_method",
                    format!("The account vault is a {method} account; payment_method must be {method}."),
                );
            }
        }
        record.set("payment_method", method.clone());
        record.set("account_vault_id", vault.id().to_string());
        record.set("contact_id", vault.text("contact_id").map(str::to_string));
        let named = record.text("product_transaction_id").map(str::to_string);
        if let Some(pt) = product_transaction(cx, conn, &location_id, &method, named.as_deref(), &mut errors)?
        {
            record.set("product_transaction_id", pt);
        }
        if record.int("transaction_amount").is_some_and(|a| a <= 0) {
            errors.add("transaction_amount", "Transaction Amount must be greater than 0.");
        }
        if record.text("interval_type").and_then(Unit::parse).is_none() {
            errors.add(
                "interval_type",
                "Interval Type must be d (days), w (weeks) or m (months).",
            );
        }
        let today = today(cx, conn, &location_id)?;
        let start = record.text("start_date").and_then(parse_date);
        if start.is_some_and(|s| s < today) {
            errors.add(
                "start_date",
                format!(
                    "Start Date cannot be in the past (today is {} at the location).",
                    date_text(today)
                ),
            );
        }
        let count = record.int("installment_total_count").filter(|c| *c > 0);
        let kind = if count.is_some() { "i" } else { "o" };
        match record.text("recurring_type_id") {
            None => {}
            Some(sent) if sent == kind => {}
            Some("i") => errors.add(
                "installment_total_count",
                "An installment recurring (recurring_type_id i) needs installment_total_count.",
            ),
            Some("o") => errors.add(
                "recurring_type_id",
                "An ongoing recurring (o) takes no installment_total_count.",
            ),
            Some(_) => errors.add("recurring_type_id", "Recurring Type Id must be o or i."),
        }
        record.set("recurring_type_id", kind);
        if count.is_none() {
            record.set("installment_total_count", Value::Null);
        }
        match (kind, record.text("end_date").and_then(parse_date)) {
            ("i", Some(_)) => errors.add(
                "end_date",
                "An installment recurring's end_date is derived from installment_total_count; do not send it.",
            ),
            ("o", Some(end)) if start.is_some_and(|s| end < s) => {
                errors.add("end_date", "End Date cannot be before start_date.")
            }
            _ => {}
        }
        errors.into_result()?;
        if record.get("notification_days").is_null() {
            let default = billing::notification_days_default(conn, &location_id)?;
            record.set("notification_days", default);
        }
        let on_hold = record.int("active") == Some(0);
        transitions::start(record, on_hold);
        if transitions::past_the_calendar(record) {
            return Err(ApiError::field(
                "start_date",
                "Start Date puts the schedule past 9999-12-31.",
            ));
        }
        Ok(None)
    }

    fn after_create(&self, _cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        billing::after_change(conn, record, None)
    }

    /// PUT `account_vault_api_id`: the vault by its api id, unless
    /// `account_vault_id` is sent too (it wins, as on create).
    fn update_transient(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        old: &Record,
        new: &mut Record,
        input: &UpdateInput,
    ) -> ApiResult<()> {
        let by_id = input.changes.iter().any(|(f, _)| f.name == "account_vault_id");
        let api_id = input.transient.get("account_vault_api_id").and_then(Json::as_str);
        if let (false, Some(api_id)) = (by_id, api_id) {
            let location_id = old.text("location_id").unwrap_or_default();
            let v = vault(cx, conn, location_id, None, Some(api_id))?;
            new.set("account_vault_id", v.id().to_string());
        }
        // PUT active 1 resumes a schedule that placeOnHold held: that
        // keeps active 1, so the change of the flag `before_update` acts
        // on is not there to see.
        let resume = input
            .changes
            .iter()
            .any(|(f, v)| f.name == "active" && v.as_int() == Some(1));
        let held = old.text("status") == Some(transitions::ON_HOLD) && old.int("active") == Some(1);
        if resume && held && old.text("recurring_type_id") != Some("i") {
            if input.changes.iter().any(|(f, _)| f.name == "next_run_date") {
                return Err(ApiError::field(
                    "next_run_date",
                    "The recurring is on hold: resume it (active 1) first, then move its next run.",
                ));
            }
            let today = today(cx, conn, old.text("location_id").unwrap_or_default())?;
            *new = transitions::activate(new, today)?;
        }
        Ok(())
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        billing::refuse_while_running(conn, old.id())?;
        if old.text("status") == Some(transitions::ENDED) {
            return Err(ApiError::field(
                "status",
                "The recurring has ended; it can no longer change.",
            ));
        }
        let location_id = old.text("location_id").unwrap_or_default().to_string();
        let method = old.text("payment_method").unwrap_or("cc").to_string();
        let installment = old.text("recurring_type_id") == Some("i");
        let mut errors = FieldErrors::new();
        if new.get("account_vault_id") != old.get("account_vault_id") {
            let v = vault(cx, conn, &location_id, new.text("account_vault_id"), None)?;
            if v.text("payment_method") != Some(method.as_str()) {
                errors.add(
                    "account_vault_id",
                    format!("The recurring charges a {method} account; the new vault must be one too."),
                );
            }
            new.set("contact_id", v.text("contact_id").map(str::to_string));
        }
        if new.get("product_transaction_id") != old.get("product_transaction_id") {
            // null: back to the location's default for the method.
            let named = new.text("product_transaction_id").map(str::to_string);
            if let Some(pt) =
                product_transaction(cx, conn, &location_id, &method, named.as_deref(), &mut errors)?
            {
                new.set("product_transaction_id", pt);
            }
        }
        if new.get("recurring_type_id") != old.get("recurring_type_id") {
            errors.add(
                "recurring_type_id",
                "The type of a recurring cannot change; create a new recurring instead.",
            );
        }
        match new.int("transaction_amount") {
            Some(a) if a > 0 => {}
            _ => errors.add("transaction_amount", "Transaction Amount must be greater than 0."),
        }
        let today = today(cx, conn, &location_id)?;
        if new.get("end_date") != old.get("end_date") {
            let start = old.text("start_date").and_then(parse_date);
            if installment {
                errors.add(
                    "end_date",
                    "An installment recurring's end_date follows its installments; use deferPayment or skipPayment.",
                );
            } else if let Some(end) = new.text("end_date").and_then(parse_date) {
                if end < today {
                    errors.add("end_date", "End Date cannot be in the past.");
                } else if start.is_some_and(|s| end < s) {
                    // As on create: a schedule cannot end before it starts.
                    errors.add("end_date", "End Date cannot be before start_date.");
                }
            }
        }
        // A schedule this PUT resumed (`update_transient`) took its next
        // run from the resumption, not from the client.
        let resumed = old.text("status") == Some(transitions::ON_HOLD)
            && new.text("status") == Some(transitions::ACTIVE);
        let moved_to = (!resumed && new.get("next_run_date") != old.get("next_run_date"))
            .then(|| new.text("next_run_date").and_then(parse_date));
        if let Some(date) = moved_to {
            match (date, old.text("status")) {
                (_, Some(transitions::ON_HOLD)) => errors.add(
                    "next_run_date",
                    "The recurring is on hold; activate it before moving its next run.",
                ),
                (None, _) => errors.add("next_run_date", blank("next_run_date")),
                (Some(d), _) if d < today => {
                    errors.add("next_run_date", "Next Run Date cannot be in the past.")
                }
                // The day of the last run was charged (or tried) already:
                // moving the next run onto it would charge it twice.
                (Some(d), _)
                    if old
                        .text("last_run_date")
                        .and_then(parse_date)
                        .is_some_and(|last| d <= last) =>
                {
                    errors.add(
                        "next_run_date",
                        format!(
                            "Next Run Date must be after the last run ({}).",
                            old.text("last_run_date").unwrap_or_default()
                        ),
                    )
                }
                _ => {}
            }
        }
        errors.into_result()?;
        let (was, now) = (
            old.int("transaction_amount").unwrap_or(0),
            new.int("transaction_amount").unwrap_or(0),
        );
        if installment && was != now {
            // installment_amount_total: what ran stays counted at the amount
            // it ran for; the installments left follow the new amount.
            let left = transitions::Plan::of(old).remaining().unwrap_or(0);
            let total = old.int("installment_amount_total").unwrap_or(0);
            new.set("installment_amount_total", total + left * (now - was));
        }
        let mut next = new.clone();
        if let Some(Some(date)) = moved_to {
            next = transitions::move_next_run(&next, date);
        }
        // PUT active: 0 holds, 1 resumes, ongoing recurrings only. A
        // schedule put on hold by placeOnHold keeps active 1, so 0 may
        // find it on hold already (then only the flag changes).
        let wanted = new.int("active");
        if wanted != old.int("active") {
            next.set("active", old.int("active").unwrap_or(1));
            if !installment {
                let status = next.text("status").map(str::to_string);
                next = match (wanted, status.as_deref()) {
                    (Some(0), Some(transitions::ON_HOLD)) => next,
                    // Refuses an ended schedule.
                    (Some(0), _) => transitions::place_on_hold(&next)?,
                    (_, Some(transitions::ACTIVE)) => next,
                    // Resumes a held schedule, refuses an ended one.
                    _ => transitions::activate(&next, today)?,
                };
                next.set("active", wanted.unwrap_or(1));
            }
        }
        if let Some(end) = next.text("end_date").and_then(parse_date) {
            if next.text("status") == Some(transitions::ACTIVE)
                && next
                    .text("next_run_date")
                    .and_then(parse_date)
                    .is_some_and(|d| d > end)
            {
                transitions::end(&mut next, transitions::ENDED_END_DATE);
            }
        }
        if transitions::past_the_calendar(&next) {
            return Err(ApiError::field(
                "next_run_date",
                "Next Run Date puts the schedule past 9999-12-31.",
            ));
        }
        *new = next;
        Ok(())
    }

    fn after_update(&self, _cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &Record) -> ApiResult<()> {
        billing::after_change(conn, new, Some(old))
    }

    fn before_delete(&self, _cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        billing::refuse_while_running(conn, record.id())?;
        billing::refresh_vault(
            conn,
            record.text("account_vault_id").unwrap_or_default(),
            Some(record.id()),
        )
    }

    fn expand(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match name {
            "tags" => super::tags::expand_of(record),
            "signature" => super::signatures::latest(cx, conn, "Recurring", record.id())?,
            _ => Json::Null,
        })
    }
}

/// The recurring of a transaction (its `recurring` expand).
pub fn of_transaction(cx: &Cx, conn: &mut dyn Conn, transaction: &Record) -> ApiResult<Json> {
    match transaction.text("recurring_id") {
        Some(id) => Ok(query::find(conn, &RECURRING, &cx.scope, id)?
            .map(|r| Json::Object(render(cx, &r)))
            .unwrap_or(Json::Null)),
        None => Ok(Json::Null),
    }
}
