//! Recurring billing: the resource's field rules, the state machine, the
//! scheduler (test clock, month ends and leap years, declines, a restart
//! during a run, two nodes) and the mail it sends.

use crate::engine_tests;
use crate::support::db::{db, wait_for_lock_wait};
use crate::support::receiver::{self, Receiver};
use crate::support::smtp::SmtpSink;
use crate::support::wait::wait_until;
use crate::support::{error_fields, fields, str_of, Engine, Tenant, TestApp};
use chrono::{Datelike, Days, Months, NaiveDate};
use serde_json::{json, Value};
use std::time::Duration;

engine_tests!(
    created_like_the_reference,
    field_rules_refuse_clearly,
    actions_follow_the_state_machine,
    skips_and_deferrals_stay_on_the_calendar,
    put_rules,
    changes_after_runs,
    vault_rules,
    lists_filter_sort_and_expand,
    a_year_of_monthly_billing,
    declines_are_retried_then_given_up,
    a_run_refused_before_the_processor,
    zones_and_restarts_of_the_clock,
    held_periods_are_not_charged,
    a_leap_day_anchor,
    restart_during_a_run,
    mail_by_smtp,
    mail_over_starttls,
    development_mailbox,
    users_receipts_follow_their_settings,
    no_change_while_a_run_is_under_way,
    the_last_run_day_is_not_charged_again,
    a_contact_billed_by_a_recurring,
    a_run_being_charged_elsewhere_is_not_declined,
    a_recurring_set_up_while_its_vault_or_contact_goes_is_refused,
    a_delete_waits_for_a_recurring_being_set_up,
);

/// The location's date (its test clock included; bootstrap locations are UTC).
fn today(t: &Tenant) -> NaiveDate {
    let now = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    chrono::DateTime::from_timestamp(now, 0).unwrap().date_naive()
}

fn dump(v: &Value) -> String {
    v.to_string()
}

/// Changes the tenant's location (a location PUT names its parent and name).
fn set_location(t: &Tenant, fields: Value) {
    let loc = t
        .get(&format!("/v2/locations/{}", t.location_id()))
        .expect(200)
        .body["location"]
        .clone();
    let mut body = json!({ "name": loc["name"], "parent_id": loc["parent_id"] });
    for (k, v) in fields.as_object().unwrap() {
        body[k] = v.clone();
    }
    t.put(
        &format!("/v2/locations/{}", t.location_id()),
        json!({ "location": body }),
    )
    .expect(200);
}

fn text(d: NaiveDate) -> String {
    d.format("%Y-%m-%d").to_string()
}

fn plus_days(d: NaiveDate, n: u64) -> NaiveDate {
    d.checked_add_days(Days::new(n)).unwrap()
}

/// Moves the tenant's clock `seconds` forward; returns the answer.
fn advance(t: &Tenant, seconds: i64) -> Value {
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": seconds } }),
    )
    .expect(200)
    .body["testclock"]
        .clone()
}

/// Moves the clock to `hour` o'clock (UTC) of `date`.
fn advance_to(t: &Tenant, date: NaiveDate, hour: u32) -> Value {
    let now = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let target = date.and_hms_opt(hour, 0, 0).unwrap().and_utc().timestamp();
    assert!(target >= now, "the clock only moves forward");
    advance(t, target - now)
}

/// A contact with an email and a card vault of it.
fn customer(t: &Tenant, receipts: bool) -> (String, String) {
    customer_with(t, receipts, "patcard")
}

/// A contact and its card vault, whose `account_vault_api_id` is `api_id`.
fn customer_with(t: &Tenant, receipts: bool, api_id: &str) -> (String, String) {
    let contact = t.contact(json!({ "first_name": "Pat", "email": "pat@example.com",
        "email_trx_receipt": u8::from(receipts) }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "contact_id": contact, "account_number": "4111111111111111", "exp_date": "1239",
                "account_vault_api_id": api_id } }),
        )
        .expect(201)
        .body["accountvault"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (contact, vault)
}

fn plan(t: &Tenant, vault: &str, extra: Value) -> Value {
    let mut r = json!({ "location_id": t.location_id(), "account_vault_id": vault,
        "transaction_amount": "9.00", "interval": 1, "interval_type": "m",
        "start_date": text(plus_days(today(t), 1)) });
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    json!({ "recurring": r })
}

fn create(t: &Tenant, vault: &str, extra: Value) -> Value {
    t.post("/v2/recurrings", plan(t, vault, extra)).expect(201).body["recurring"].clone()
}

fn get(t: &Tenant, id: &str) -> Value {
    t.get(&format!("/v2/recurrings/{id}")).expect(200).body["recurring"].clone()
}

fn count(t: &Tenant) -> i64 {
    t.get("/v2/recurrings").expect(200).body["meta"]["pagination"]["totalCount"]
        .as_i64()
        .unwrap()
}

/// The transactions of a recurring, oldest first.
fn runs(t: &Tenant, id: &str) -> Vec<Value> {
    t.get(&format!(
        "/v2/transactions?recurring_id={id}&sort=created_ts&page_size=100"
    ))
    .expect(200)
    .body["transactions"]
        .as_array()
        .unwrap()
        .clone()
}

fn date_of(tx: &Value) -> String {
    let ts = tx["created_ts"].as_i64().unwrap();
    text(chrono::DateTime::from_timestamp(ts, 0).unwrap().date_naive())
}

fn has_recurring(t: &Tenant, vault: &str) -> bool {
    t.get(&format!("/v2/accountvaults/{vault}")).expect(200).body["accountvault"]["has_recurring"]
        .as_bool()
        .unwrap()
}

fn created_like_the_reference(app: &TestApp) {
    let t = app.bootstrap();
    let (contact, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    let r = create(
        &t,
        &vault,
        json!({ "description": "Gym", "notification_days": "3" }),
    );
    assert_eq!(r["next_run_date"], json!(text(start)));
    assert_eq!(r["start_date"], json!(text(start)));
    assert_eq!(
        r["end_date"],
        json!("0000-00-00"),
        "end_date shown as 0000-00-00 when unset"
    );
    assert_eq!(r["status"], json!("active"));
    assert_eq!(r["active"], json!(1));
    assert_eq!(r["recurring_type_id"], json!("o"));
    assert_eq!(r["interval"], json!(1), "interval is an integer");
    assert_eq!(
        r["notification_days"],
        json!(3),
        "notification_days is an integer"
    );
    assert_eq!(r["transaction_amount"], json!("9.00"));
    assert_eq!(r["payment_method"], json!("cc"));
    assert_eq!(r["contact_id"], json!(contact));
    assert_eq!(
        r["product_transaction_id"],
        json!(t.cred("cc_product_transaction_id"))
    );
    assert!(r["installment_amount_total"].is_null());
    assert!(r["_links"]["self"]["href"]
        .as_str()
        .unwrap()
        .ends_with(r["id"].as_str().unwrap()));
    for hidden in [
        "anchor_date",
        "period",
        "run_seq",
        "notified_date",
        "due_ts",
        "lease_owner",
    ] {
        assert!(r.get(hidden).is_none(), "{hidden} is internal");
    }
    assert!(
        has_recurring(&t, &vault),
        "the vault knows it is charged on a schedule"
    );

    // Installments: the reference's sample, 20 monthly payments of 10.00,
    // moved to a start in the future with the same day of month.
    let start = NaiveDate::from_ymd_opt(today(&t).year() + 1, 2, 23).unwrap();
    let i = create(
        &t,
        &vault,
        json!({ "installment_total_count": 20, "transaction_amount": 10, "start_date": text(start),
            "account_vault_id": null, "account_vault_api_id": "patcard" }),
    );
    assert_eq!(i["recurring_type_id"], json!("i"));
    assert_eq!(i["installment_total_count"], json!(20));
    assert_eq!(i["installment_amount_total"], json!("200.00"));
    let end = start
        .checked_add_months(Months::new(20))
        .unwrap()
        .pred_opt()
        .unwrap();
    assert_eq!(i["end_date"], json!(text(end)), "start + 20 months - 1 day");
    assert_eq!(
        i["account_vault_id"],
        json!(vault),
        "account_vault_api_id names the vault"
    );
    // Read back the same.
    assert_eq!(get(&t, i["id"].as_str().unwrap()), i);
}

fn field_rules_refuse_clearly(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let loose = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239" } }),
        )
        .expect(201)
        .body["accountvault"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let yesterday = text(today(&t).pred_opt().unwrap());
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "account_vault_id": null }), "account_vault_id"),
        (json!({ "account_vault_id": loose }), "account_vault_id"),
        (
            json!({ "account_vault_id": null, "account_vault_api_id": "nosuch" }),
            "account_vault_api_id",
        ),
        (json!({ "interval_type": "y" }), "interval_type"),
        (json!({ "interval": 0 }), "interval"),
        (json!({ "interval": 1000 }), "interval"),
        (json!({ "start_date": yesterday }), "start_date"),
        (json!({ "start_date": "2031-02-30" }), "start_date"),
        (json!({ "start_date": null }), "start_date"),
        (json!({ "transaction_amount": "0.00" }), "transaction_amount"),
        (json!({ "transaction_amount": "1.234" }), "transaction_amount"),
        (json!({ "transaction_amount": -1 }), "transaction_amount"),
        (json!({ "payment_method": "ach" }), "payment_method"),
        (
            json!({ "product_transaction_id": t.cred("ach_product_transaction_id") }),
            "product_transaction_id",
        ),
        (
            json!({ "installment_total_count": 5, "end_date": "2035-01-01" }),
            "end_date",
        ),
        (json!({ "recurring_type_id": "i" }), "installment_total_count"),
        (
            json!({ "recurring_type_id": "o", "installment_total_count": 3 }),
            "recurring_type_id",
        ),
        (json!({ "end_date": "2020-01-01" }), "end_date"),
        (json!({ "description": "x".repeat(37) }), "description"),
        (json!({ "notification_days": 100 }), "notification_days"),
        (json!({ "notification_days": -1 }), "notification_days"),
        (
            json!({ "installment_total_count": 100 }),
            "installment_total_count",
        ),
        (
            json!({ "installment_total_count": "x" }),
            "installment_total_count",
        ),
        (
            json!({ "transaction_amount": "10000000.00" }),
            "transaction_amount",
        ),
        (json!({ "recurring_c1": "x".repeat(129) }), "recurring_c1"),
        (json!({ "active": 2 }), "active"),
        (json!({ "recurring_type_id": "x" }), "recurring_type_id"),
        (json!({ "location_id": null }), "location_id"),
        (json!({ "interval": null }), "interval"),
        (json!({ "interval_type": null }), "interval_type"),
        (json!({ "transaction_amount": null }), "transaction_amount"),
        (
            json!({ "installment_amount_total": "5.00" }),
            "installment_amount_total",
        ),
        (json!({ "skip_count": 1 }), "skip_count"),
        (json!({ "status": "ended" }), "status"),
        (json!({ "next_run_date": "2031-01-01" }), "next_run_date"),
    ];
    for (extra, field) in cases {
        let r = t.post("/v2/recurrings", plan(&t, &vault, extra.clone()));
        assert_eq!(r.status, 422, "{extra}: {:?}", r.body);
        assert!(
            error_fields(&r).contains(field),
            "{extra}: expected an error on {field}, got {:?}",
            r.body
        );
    }
    assert_eq!(count(&t), 0, "no refused create left a record");
    assert!(!has_recurring(&t, &vault));
    // Malformed bodies.
    for body in ["", "{", "[]", "{\"recurring\": 3}"] {
        let r = t.send("POST", "/v2/recurrings", Some(body));
        assert!((400..500).contains(&r.status), "{body:?} -> {}", r.status);
    }
    assert_eq!(count(&t), 0);
}

fn actions_follow_the_state_machine(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = NaiveDate::from_ymd_opt(today(&t).year() + 1, 1, 31).unwrap();
    let r = create(&t, &vault, json!({ "start_date": text(start) }));
    let id = r["id"].as_str().unwrap();
    let act = |path: &str| t.post(&format!("/v2/recurrings/{id}/{path}"), json!({}));

    // Hold: no next run; twice is refused; the vault is free.
    let held = act("placeOnHold").expect(200).body["recurring"].clone();
    assert_eq!(held["status"], json!("on hold"));
    assert_eq!(held["next_run_date"], json!("0000-00-00"));
    // The state is status: active stays "1", as the reference's
    // placeOnHold sample answers it.
    assert_eq!(held["active"], json!(1));
    assert_eq!(get(&t, id)["active"], json!(1));
    assert!(!has_recurring(&t, &vault));
    let again = act("placeOnHold").expect(422);
    assert!(again.errors("status")[0].contains("already on hold"));
    // A PUT of active 1 resumes it as activate does (its flag was 1
    // already), and a PUT without active leaves it held.
    let put = |body: Value| t.put(&format!("/v2/recurrings/{id}"), json!({ "recurring": body }));
    let still = put(json!({ "description": "held" })).expect(200).body["recurring"].clone();
    assert_eq!(still["status"], json!("on hold"));
    let resumed = put(json!({ "active": 1 })).expect(200).body["recurring"].clone();
    assert_eq!(resumed["status"], json!("active"));
    assert_eq!(resumed["next_run_date"], json!(text(start)));
    act("placeOnHold").expect(200);
    assert!(error_fields(&act("skipPayment?skip_count=1").expect(422)).contains("status"));
    // Activate before the first run: back to the first period.
    let back = act("activate").expect(200).body["recurring"].clone();
    assert_eq!(back["status"], json!("active"));
    assert_eq!(back["next_run_date"], json!(text(start)));
    assert!(has_recurring(&t, &vault));
    assert!(act("activate").expect(422).errors("status")[0].contains("already active"));

    // Skip two: Jan 31 + 2 months = Mar 31 (counted from the anchor).
    let skipped = act("skipPayment?skip_count=2").expect(200).body["recurring"].clone();
    assert_eq!(
        skipped["next_run_date"],
        json!(text(start.checked_add_months(Months::new(2)).unwrap()))
    );
    assert_eq!(skipped["skip_count"], json!(2));
    // Then one more: Apr 30.
    let skipped = act("skipPayment?skip_count=1").expect(200).body["recurring"].clone();
    assert_eq!(
        skipped["next_run_date"],
        json!(text(start.checked_add_months(Months::new(3)).unwrap()))
    );
    for bad in [
        "skipPayment",
        "skipPayment?skip_count=0",
        "skipPayment?skip_count=abc",
        "skipPayment?skip_count=100",
    ] {
        let r = act(bad).expect(422);
        assert!(error_fields(&r).contains("skip_count"), "{bad}: {:?}", r.body);
    }
    assert!(error_fields(&act("skipPayment?skip=1").expect(422)).contains("skip"));
    // Defer is for installments only.
    let r = act("deferPayment?defer_count=1").expect(422);
    assert!(error_fields(&r).contains("recurring_type_id"), "{:?}", r.body);
    // The count may also come in a body.
    let r = t.post(
        &format!("/v2/recurrings/{id}/skipPayment"),
        json!({ "skip_count": 1 }),
    );
    assert_eq!(r.expect(200).body["recurring"]["skip_count"], json!(4));

    // Installments: 6 monthly from the 15th.
    let start = NaiveDate::from_ymd_opt(today(&t).year() + 1, 3, 15).unwrap();
    let i = create(
        &t,
        &vault,
        json!({ "installment_total_count": 6, "transaction_amount": "25.00", "start_date": text(start) }),
    );
    let iid = i["id"].as_str().unwrap();
    let iact = |path: &str| t.post(&format!("/v2/recurrings/{iid}/{path}"), json!({}));
    assert_eq!(
        i["end_date"],
        json!(text(NaiveDate::from_ymd_opt(start.year(), 9, 14).unwrap()))
    );
    let deferred = iact("deferPayment?defer_count=2").expect(200).body["recurring"].clone();
    assert_eq!(
        deferred["next_run_date"],
        json!(text(NaiveDate::from_ymd_opt(start.year(), 5, 15).unwrap()))
    );
    assert_eq!(
        deferred["end_date"],
        json!(text(NaiveDate::from_ymd_opt(start.year(), 11, 14).unwrap()))
    );
    assert_eq!(
        deferred["installment_amount_total"],
        json!("150.00"),
        "a deferral keeps the count"
    );
    assert_eq!(deferred["defer_count"], json!(2));
    let skipped = iact("skipPayment?skip_count=1").expect(200).body["recurring"].clone();
    assert_eq!(
        skipped["next_run_date"],
        json!(text(NaiveDate::from_ymd_opt(start.year(), 6, 15).unwrap()))
    );
    assert_eq!(skipped["end_date"], deferred["end_date"], "a skip keeps the end");
    assert_eq!(
        skipped["installment_amount_total"],
        json!("125.00"),
        "a skip collects one payment less"
    );
    // Five periods remain: skipping five would skip them all.
    assert!(iact("skipPayment?skip_count=5").expect(422).errors("skip_count")[0].contains("remain"));
    assert!(error_fields(&iact("deferPayment?defer_count=0").expect(422)).contains("defer_count"));
    assert!(error_fields(&iact("deferPayment").expect(422)).contains("defer_count"));

    // Unknown and absent recurrings.
    let ghost = uuid::Uuid::new_v4().to_string();
    t.post(&format!("/v2/recurrings/{ghost}/placeOnHold"), json!({}))
        .expect(404);
    t.get(&format!("/v2/recurrings/{id}/placeOnHold")).expect(405);

    // Delete: 204, then 404; the vault's flag follows.
    t.delete(&format!("/v2/recurrings/{iid}")).expect(204);
    t.delete(&format!("/v2/recurrings/{iid}")).expect(404);
    t.delete(&format!("/v2/recurrings/{id}")).expect(204);
    assert!(!has_recurring(&t, &vault));
}

/// A skip or deferral that would move the schedule past 9999-12-31 is
/// refused, as create and PUT refuse such dates: the record is left as it
/// was, and stays updatable.
fn skips_and_deferrals_stay_on_the_calendar(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let installments = create(
        &t,
        &vault,
        json!({ "installment_total_count": 2, "interval": 999, "interval_type": "m" }),
    );
    let ongoing = create(&t, &vault, json!({ "interval": 999, "interval_type": "m" }));
    for (plan, action, field) in [
        (&installments, "deferPayment?defer_count=99", "defer_count"),
        (&ongoing, "skipPayment?skip_count=99", "skip_count"),
    ] {
        let id = plan["id"].as_str().unwrap();
        let r = t.post(&format!("/v2/recurrings/{id}/{action}"), json!({}));
        assert_eq!(r.status, 422, "{action}: {}", r.text);
        assert!(r.errors(field)[0].contains("9999-12-31"), "{action}: {}", r.text);
        let now = get(&t, id);
        for kept in ["next_run_date", "end_date", "skip_count", "defer_count", "status"] {
            assert_eq!(now[kept], plan[kept], "{action}: {kept} unchanged");
        }
        let r = t.put(
            &format!("/v2/recurrings/{id}"),
            json!({ "recurring": { "description": "Still editable" } }),
        );
        assert_eq!(r.status, 200, "{action}: {}", r.text);
    }
    // A move that stays within the calendar still works.
    let id = installments["id"].as_str().unwrap();
    let r = t.post(
        &format!("/v2/recurrings/{id}/deferPayment?defer_count=1"),
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

fn put_rules(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = NaiveDate::from_ymd_opt(today(&t).year() + 1, 1, 31).unwrap();
    let r = create(&t, &vault, json!({ "start_date": text(start) }));
    let id = r["id"].as_str().unwrap();
    let put = |fields: Value| t.put(&format!("/v2/recurrings/{id}"), json!({ "recurring": fields }));

    let changed = put(
        json!({ "transaction_amount": "12.50", "description": "Premium", "notification_days": 5,
        "end_date": text(start.checked_add_months(Months::new(12)).unwrap()) }),
    )
    .expect(200)
    .body["recurring"]
        .clone();
    assert_eq!(changed["transaction_amount"], json!("12.50"));
    let defaulted = put(json!({ "product_transaction_id": null })).expect(200).body["recurring"].clone();
    assert_eq!(
        defaulted["product_transaction_id"],
        json!(t.cred("cc_product_transaction_id")),
        "null goes back to the location's default"
    );
    assert_eq!(changed["description"], json!("Premium"));
    // Moving the next run re-anchors the schedule: later runs count from it.
    let moved_to = NaiveDate::from_ymd_opt(start.year(), 2, 10).unwrap();
    let moved = put(json!({ "next_run_date": text(moved_to) })).expect(200).body["recurring"].clone();
    assert_eq!(moved["next_run_date"], json!(text(moved_to)));
    assert_eq!(moved["start_date"], json!(text(start)), "start_date is history");
    for (fields, field) in [
        (json!({ "next_run_date": "2020-01-01" }), "next_run_date"),
        (json!({ "end_date": "2020-01-01" }), "end_date"),
        (json!({ "transaction_amount": "0" }), "transaction_amount"),
        (json!({ "recurring_type_id": "i" }), "recurring_type_id"),
        (json!({ "interval": 2 }), "interval"),
        (json!({ "start_date": "2035-01-01" }), "start_date"),
        (json!({ "status": "ended" }), "status"),
        (json!({ "installment_total_count": 3 }), "installment_total_count"),
        (
            json!({ "product_transaction_id": t.cred("ach_product_transaction_id") }),
            "product_transaction_id",
        ),
    ] {
        let r = put(fields.clone());
        assert_eq!(r.status, 422, "{fields}: {:?}", r.body);
        assert!(error_fields(&r).contains(field), "{fields}: {:?}", r.body);
    }
    assert_eq!(
        get(&t, id)["transaction_amount"],
        json!("12.50"),
        "refused PUTs changed nothing"
    );
    // The record as read, sent back whole (0000-00-00 dates included),
    // changes nothing; 0000-00-00 clears an ongoing end_date.
    let mut whole = get(&t, id);
    let obj = whole.as_object_mut().unwrap();
    obj.retain(|k, _| {
        [
            "account_vault_id",
            "product_transaction_id",
            "transaction_amount",
            "end_date",
            "next_run_date",
            "description",
            "notification_days",
            "active",
            "recurring_type_id",
            "recurring_c1",
        ]
        .contains(&k.as_str())
    });
    let same = put(whole.clone()).expect(200).body["recurring"].clone();
    assert_eq!(same["next_run_date"], json!(text(moved_to)));
    let cleared = put(json!({ "end_date": "0000-00-00" })).expect(200).body["recurring"].clone();
    assert_eq!(cleared["end_date"], json!("0000-00-00"));
    // active 0 holds an ongoing recurring, 1 resumes it.
    let held = put(json!({ "active": 0 })).expect(200).body["recurring"].clone();
    assert_eq!(held["status"], json!("on hold"));
    assert_eq!(held["active"], json!(0));
    let r = put(json!({ "next_run_date": text(moved_to) })).expect(422);
    assert!(r.errors("next_run_date")[0].contains("on hold"));
    let resumed = put(json!({ "active": "1" })).expect(200).body["recurring"].clone();
    assert_eq!(resumed["status"], json!("active"));
    assert_eq!(resumed["active"], json!(1));
    assert_eq!(resumed["next_run_date"], json!(text(moved_to)));
    // Held by placeOnHold (active stays 1), active 0 only sets the flag,
    // and activate resumes it with active 1.
    let action = |name: &str| {
        t.post(&format!("/v2/recurrings/{id}/{name}"), json!({}))
            .expect(200)
            .body["recurring"]
            .clone()
    };
    assert_eq!(action("placeOnHold")["active"], json!(1));
    let flagged = put(json!({ "active": 0 })).expect(200).body["recurring"].clone();
    assert_eq!(
        (flagged["status"].clone(), flagged["active"].clone()),
        (json!("on hold"), json!(0))
    );
    let back = action("activate");
    assert_eq!(
        (back["status"].clone(), back["active"].clone()),
        (json!("active"), json!(1))
    );
    assert_eq!(back["next_run_date"], json!(text(moved_to)));

    // Another vault of the contact, named by its api id; the flags follow.
    let contact = get(&t, id)["contact_id"].clone();
    let vault2 = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "contact_id": contact, "account_number": "5454545454545454", "exp_date": "1239",
                "account_vault_api_id": "patcard2" } }),
        )
        .expect(201)
        .body["accountvault"]["id"]
        .clone();
    let vault2 = vault2.as_str().unwrap();
    let switched = put(json!({ "account_vault_api_id": "patcard2" }))
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(switched["account_vault_id"], json!(vault2));
    assert!(switched.get("account_vault_api_id").is_none(), "{switched}");
    assert!(has_recurring(&t, vault2) && !has_recurring(&t, &vault));
    let r = put(json!({ "account_vault_api_id": "nosuch" })).expect(422);
    assert!(error_fields(&r).contains("account_vault_api_id"), "{:?}", r.body);
    // account_vault_id wins when both are sent, as on create.
    let back = put(json!({ "account_vault_id": vault, "account_vault_api_id": "patcard2" }))
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(back["account_vault_id"], json!(vault));
    assert!(has_recurring(&t, &vault) && !has_recurring(&t, vault2));

    // Installments: active is ignored, end_date follows the installments.
    let i = create(&t, &vault, json!({ "installment_total_count": 3 }));
    let iid = i["id"].as_str().unwrap();
    let same = t
        .put(
            &format!("/v2/recurrings/{iid}"),
            json!({ "recurring": { "active": 0 } }),
        )
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(
        same["status"],
        json!("active"),
        "active is ignored for installments"
    );
    assert_eq!(same["active"], json!(1));
    let r = t
        .put(
            &format!("/v2/recurrings/{iid}"),
            json!({ "recurring": { "end_date": "2040-01-01" } }),
        )
        .expect(422);
    assert!(error_fields(&r).contains("end_date"));
    // A new amount changes what the installments collect.
    let more = t
        .put(
            &format!("/v2/recurrings/{iid}"),
            json!({ "recurring": { "transaction_amount": "10.00" } }),
        )
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(more["installment_amount_total"], json!("30.00"));
    // Moving an installment plan's next run keeps its three payments: the
    // end moves with it.
    let moved_to = plus_days(today(&t), 10);
    let moved = t
        .put(
            &format!("/v2/recurrings/{iid}"),
            json!({ "recurring": { "next_run_date": text(moved_to) } }),
        )
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(moved["next_run_date"], json!(text(moved_to)));
    assert_eq!(
        moved["end_date"],
        json!(text(
            moved_to
                .checked_add_months(Months::new(3))
                .unwrap()
                .pred_opt()
                .unwrap()
        ))
    );
    assert_eq!(moved["installment_amount_total"], json!("30.00"));
    // A next run past what yyyy-mm-dd can say is refused, and nothing moves.
    let r = t
        .put(
            &format!("/v2/recurrings/{iid}"),
            json!({ "recurring": { "next_run_date": "9999-12-31" } }),
        )
        .expect(422);
    assert!(error_fields(&r).contains("next_run_date"), "{}", r.text);
    assert_eq!(get(&t, iid)["next_run_date"], json!(text(moved_to)));
    // Changes are logged.
    let logs = t
        .get(&format!("/v2/recurrings/{id}?expand=changelogs"))
        .expect(200)
        .body["recurring"]["changelogs"]
        .as_array()
        .unwrap()
        .len();
    assert!(logs >= 4, "{logs} change log entries");
}

fn vault_rules(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let r = create(&t, &vault, json!({}));
    let id = r["id"].as_str().unwrap();
    // A vault charged by an active recurring cannot be deleted.
    let refused = t.delete(&format!("/v2/accountvaults/{vault}")).expect(422);
    assert!(dump(&refused.body).contains("recurring"), "{:?}", refused.body);
    // Held, it can; the recurring ends with it.
    t.post(&format!("/v2/recurrings/{id}/placeOnHold"), json!({}))
        .expect(200);
    t.delete(&format!("/v2/accountvaults/{vault}")).expect(204);
    let ended = get(&t, id);
    assert_eq!(ended["status"], json!("ended"));
    assert_eq!(ended["ended_reason"], json!("account_vault_deleted"));
    assert_eq!(ended["next_run_date"], json!("0000-00-00"));
    // Ended is final: no action, no change.
    for action in ["activate", "placeOnHold", "skipPayment?skip_count=1"] {
        let r = t
            .post(&format!("/v2/recurrings/{id}/{action}"), json!({}))
            .expect(422);
        assert!(r.errors("status")[0].contains("ended"), "{action}: {:?}", r.body);
    }
    let r = t
        .put(
            &format!("/v2/recurrings/{id}"),
            json!({ "recurring": { "description": "again" } }),
        )
        .expect(422);
    assert!(r.errors("status")[0].contains("ended"));
    // The transitions are in the change log.
    let log = t
        .get(&format!("/v2/recurrings/{id}?expand=changelogs"))
        .expect(200)
        .body;
    assert!(dump(&log).contains("account_vault_deleted"));
}

fn lists_filter_sort_and_expand(app: &TestApp) {
    let t = app.bootstrap();
    let (contact, vault) = customer(&t, false);
    let base = today(&t);
    let later = create(
        &t,
        &vault,
        json!({ "start_date": text(plus_days(base, 20)), "description": "later" }),
    );
    let sooner = create(
        &t,
        &vault,
        json!({ "start_date": text(plus_days(base, 5)), "description": "sooner" }),
    );
    let middle = create(
        &t,
        &vault,
        json!({ "start_date": text(plus_days(base, 10)), "description": "middle",
        "installment_total_count": 2 }),
    );
    let list = t.get("/v2/recurrings").expect(200).body;
    let order: Vec<&str> = list["recurrings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["description"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["sooner", "middle", "later"],
        "default sort: next_run_date asc"
    );
    assert_eq!(list["meta"]["sort"]["attributes"]["next_run_date"], json!("asc"));
    let desc = t.get("/v2/recurrings?sort=-next_run_date").expect(200).body;
    assert_eq!(desc["recurrings"][0]["id"], later["id"]);
    let only = t.get("/v2/recurrings?recurring_type_id=i").expect(200).body;
    assert_eq!(only["recurrings"].as_array().unwrap().len(), 1);
    assert_eq!(only["recurrings"][0]["id"], middle["id"]);
    let by_contact = t
        .get(&format!("/v2/recurrings?contact_id={contact}"))
        .expect(200)
        .body;
    assert_eq!(by_contact["meta"]["pagination"]["totalCount"], json!(3));
    let by_vault = t
        .get(&format!(
            "/v2/recurrings?account_vault_id={vault}&transaction_amount=9.00"
        ))
        .expect(200)
        .body;
    assert_eq!(by_vault["meta"]["pagination"]["totalCount"], json!(3));
    let other_vault = uuid::Uuid::new_v4().to_string();
    let none = t
        .get(&format!("/v2/recurrings?account_vault_id={other_vault}"))
        .expect(200)
        .body;
    assert_eq!(none["meta"]["pagination"]["totalCount"], json!(0));
    let on_date = t
        .get(&format!(
            "/v2/recurrings?next_run_date={}",
            text(plus_days(base, 10))
        ))
        .expect(200)
        .body;
    assert_eq!(on_date["recurrings"].as_array().unwrap().len(), 1);
    assert_eq!(on_date["recurrings"][0]["id"], middle["id"]);
    let sid = sooner["id"].as_str().unwrap();
    t.post(&format!("/v2/recurrings/{sid}/placeOnHold"), json!({}))
        .expect(200);
    let held = t.get("/v2/recurrings?status=on%20hold").expect(200).body;
    assert_eq!(held["recurrings"].as_array().unwrap().len(), 1);
    let expanded = t
        .get(&format!(
            "/v2/recurrings/{sid}?expand=account_vault,contact,location,product_transaction,transactions,created_user,tags,signature"
        ))
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(expanded["account_vault"]["id"], json!(vault));
    assert_eq!(
        expanded["account_vault"]["account_number"],
        json!("XXXXXXXXXXXX1111")
    );
    assert_eq!(expanded["contact"]["id"], json!(contact));
    assert_eq!(expanded["location"]["id"], json!(t.location_id()));
    assert_eq!(
        expanded["product_transaction"]["id"],
        json!(t.cred("cc_product_transaction_id"))
    );
    assert_eq!(expanded["transactions"], json!([]));
    assert_eq!(expanded["tags"], json!([]));
    assert_eq!(expanded["created_user"]["id"], json!(t.cred("user_id")));
    assert!(expanded["signature"].is_null(), "{expanded}");
    assert!(!dump(&expanded).contains("4111111111111111"));
    let r = t.get("/v2/recurrings?expand=nosuch").expect(422);
    assert!(error_fields(&r).contains("expand"));
    assert_eq!(
        error_fields(&t.get("/v2/recurrings?sort=nosuch").expect(422)),
        fields(&["sort"])
    );
}

/// Monthly from January 31: February 28, March 31, ... and February 29
/// in the leap year, each run at its own date, with notices and receipts
/// by mail and a postback for every transaction.
fn a_year_of_monthly_billing(app: &TestApp) {
    let t = app.bootstrap();
    let hook = Receiver::start("/billing");
    let config = receiver::config(
        &t,
        json!({ "resource": "transaction", "url": hook.url, "on_update": 0, "on_delete": 0,
            "product_transaction_id": t.cred("cc_product_transaction_id") }),
    );
    let (_, vault) = customer(&t, true);
    let mut year = today(&t).year() + 1;
    while !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) {
        year += 1;
    }
    // January 31 of the year before a leap year.
    let start = NaiveDate::from_ymd_opt(year - 1, 1, 31).unwrap();
    let r = create(
        &t,
        &vault,
        json!({ "start_date": text(start), "notification_days": 3, "transaction_amount": "19.99" }),
    );
    let id = r["id"].as_str().unwrap();
    let clock = advance_to(&t, NaiveDate::from_ymd_opt(year, 3, 1).unwrap(), 12);
    assert_eq!(clock["ran"]["recurring_runs"], json!(14), "{clock}");
    assert_eq!(clock["ran"]["notices"], json!(14), "{clock}");
    let expected: Vec<String> = [
        (year - 1, 1, 31),
        (year - 1, 2, 28),
        (year - 1, 3, 31),
        (year - 1, 4, 30),
        (year - 1, 5, 31),
        (year - 1, 6, 30),
        (year - 1, 7, 31),
        (year - 1, 8, 31),
        (year - 1, 9, 30),
        (year - 1, 10, 31),
        (year - 1, 11, 30),
        (year - 1, 12, 31),
        (year, 1, 31),
        (year, 2, 29),
    ]
    .iter()
    .map(|(y, m, d)| text(NaiveDate::from_ymd_opt(*y, *m, *d).unwrap()))
    .collect();
    let txs = runs(&t, id);
    let dates: Vec<String> = txs.iter().map(date_of).collect();
    assert_eq!(dates, expected, "one charge per period, each on its date");
    for tx in &txs {
        assert_eq!(tx["trx_source_id"], json!(13));
        assert_eq!(tx["is_recurring"], json!(true));
        assert_eq!(tx["recurring_id"], json!(id));
        assert_eq!(tx["status_id"], json!(101));
        assert_eq!(tx["transaction_amount"], json!("19.99"));
        assert_eq!(tx["account_vault_id"], json!(vault));
    }
    let after = get(&t, id);
    assert_eq!(after["payment_count"], json!(14));
    assert_eq!(after["last_run_status"], json!("approved"));
    assert_eq!(after["last_run_date"], json!(expected[13]));
    assert_eq!(
        after["next_run_date"],
        json!(text(NaiveDate::from_ymd_opt(year, 3, 31).unwrap()))
    );
    assert_eq!(after["last_transaction_id"], txs[13]["id"]);
    let expanded = t
        .get(&format!("/v2/recurrings/{id}?expand=transactions"))
        .expect(200)
        .body;
    assert_eq!(
        expanded["recurring"]["transactions"].as_array().unwrap().len(),
        14
    );
    let tx = t
        .get(&format!(
            "/v2/transactions/{}?expand=recurring",
            txs[0]["id"].as_str().unwrap()
        ))
        .expect(200)
        .body;
    assert_eq!(tx["transaction"]["recurring"]["id"], json!(id));

    // Mail: a notice 3 days before each run and a receipt for each charge.
    let mail = t.get("/dev/mail?format=json").expect(200).body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let notices: Vec<&Value> = mail.iter().filter(|m| m["kind"] == "recurring_notice").collect();
    let receipts: Vec<&Value> = mail.iter().filter(|m| m["kind"] == "receipt").collect();
    assert_eq!((notices.len(), receipts.len()), (14, 14));
    for date in &expected {
        assert!(
            notices
                .iter()
                .any(|n| n["subject"].as_str().unwrap().contains(date.as_str())),
            "a notice for {date}"
        );
    }
    let notice = notices[0];
    assert_eq!(notice["recipient"], json!("pat@example.com"));
    assert!(notice["text"].as_str().unwrap().contains("19.99"));
    assert!(notice["text"].as_str().unwrap().contains("Visa ending in 1111"));
    assert!(
        !dump(&json!(mail)).contains("4111111111111111"),
        "never a full card number"
    );

    // A postback for every transaction the scheduler made.
    let log = receiver::wait_log(
        &t,
        config["id"].as_str().unwrap(),
        Duration::from_secs(30),
        |log| log.iter().filter(|d| d["status"] == "delivered").count() >= 14,
    );
    assert_eq!(log.len(), 14);
    let received = hook.wait_for(14, Duration::from_secs(10));
    let mut delivered: Vec<String> = received
        .iter()
        .map(|r| r.data()["id"].as_str().unwrap().to_string())
        .collect();
    delivered.sort();
    let mut made: Vec<String> = txs
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    made.sort();
    assert_eq!(delivered, made);
}

fn declines_are_retried_then_given_up(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    // 5.00 is the sandbox's decline.
    let r = create(
        &t,
        &vault,
        json!({ "start_date": text(start), "transaction_amount": "5.00" }),
    );
    let id = r["id"].as_str().unwrap();
    advance_to(&t, start, 6);
    let once = get(&t, id);
    assert_eq!(once["retry_count"], json!(1));
    assert_eq!(once["last_run_status"], json!("declined_retrying"));
    assert_eq!(once["next_run_date"], json!(text(plus_days(start, 1))));
    assert_eq!(runs(&t, id).len(), 1);
    advance_to(&t, plus_days(start, 8), 6);
    let txs = runs(&t, id);
    let dates: Vec<String> = txs.iter().map(date_of).collect();
    assert_eq!(
        dates,
        [0, 1, 3, 5].map(|d| text(plus_days(start, d))),
        "the run and its retries 1, 3 and 5 days later"
    );
    assert!(txs.iter().all(|tx| tx["status_id"] == json!(301)));
    let given_up = get(&t, id);
    assert_eq!(given_up["retry_count"], json!(0));
    assert_eq!(given_up["last_run_status"], json!("declined"));
    assert_eq!(given_up["payment_count"], json!(0));
    assert_eq!(given_up["status"], json!("active"));
    assert_eq!(
        given_up["next_run_date"],
        json!(text(start.checked_add_months(Months::new(1)).unwrap()))
    );
    // An installment run that is declined still consumes its installment.
    let i = create(
        &t,
        &vault,
        json!({ "start_date": text(plus_days(today(&t), 1)), "transaction_amount": "5.00",
            "installment_total_count": 1, "interval": 1, "interval_type": "d" }),
    );
    advance(&t, 3 * 86_400);
    let ended = get(&t, i["id"].as_str().unwrap());
    assert_eq!(ended["status"], json!("ended"));
    assert_eq!(ended["ended_reason"], json!("installments_collected"));
    assert_eq!(
        runs(&t, i["id"].as_str().unwrap()).len(),
        1,
        "no retry fits in a daily period"
    );
}

/// A payment the payments core refuses before the processor (here: the
/// product transaction was deactivated) is a declined run without a
/// transaction, retried like a decline; a retry that gets through is an
/// approved run of the same period.
fn a_run_refused_before_the_processor(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    let r = create(&t, &vault, json!({ "start_date": text(start) }));
    let id = r["id"].as_str().unwrap();
    let pt = t.cred("cc_product_transaction_id");
    let mut sql = db(app);
    let set_active = |sql: &mut crate::support::db::Db, on: bool| {
        let statement = format!(
            "UPDATE product_transactions SET active = {} WHERE id = ?",
            u8::from(on)
        );
        assert_eq!(sql.exec(&statement, &[&pt]), 1);
    };
    set_active(&mut sql, false);
    advance_to(&t, start, 6);
    let once = get(&t, id);
    assert_eq!(once["last_run_status"], json!("declined_retrying"), "{once}");
    assert_eq!(once["retry_count"], json!(1));
    assert!(once["last_transaction_id"].is_null(), "{once}");
    assert_eq!(once["last_run_date"], json!(text(start)));
    assert_eq!(once["next_run_date"], json!(text(plus_days(start, 1))));
    advance_to(&t, plus_days(start, 1), 6);
    let twice = get(&t, id);
    assert_eq!(twice["retry_count"], json!(2));
    assert_eq!(twice["next_run_date"], json!(text(plus_days(start, 3))));
    assert!(runs(&t, id).is_empty(), "nothing reached the processor");
    // The second retry gets through: the period is paid.
    set_active(&mut sql, true);
    advance_to(&t, plus_days(start, 3), 6);
    let paid = get(&t, id);
    assert_eq!(paid["last_run_status"], json!("approved"));
    assert_eq!(paid["retry_count"], json!(0));
    assert_eq!(paid["payment_count"], json!(1));
    assert_eq!(
        paid["next_run_date"],
        json!(text(start.checked_add_months(Months::new(1)).unwrap()))
    );
    let txs = runs(&t, id);
    assert_eq!(txs.len(), 1);
    assert_eq!(date_of(&txs[0]), text(plus_days(start, 3)));
    assert_eq!(paid["last_transaction_id"], txs[0]["id"]);
}

/// Runs fall due at the local midnight of their date, in the location's
/// zone; ongoing schedules end after end_date.
fn zones_and_restarts_of_the_clock(app: &TestApp) {
    let t = app.bootstrap();
    set_location(&t, json!({ "tz": "Pacific/Auckland" }));
    let (_, vault) = customer(&t, false);
    // Auckland is ahead of UTC: its "tomorrow" begins on our today.
    let now = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let zone: chrono_tz::Tz = "Pacific/Auckland".parse().unwrap();
    let local_today = chrono::DateTime::from_timestamp(now, 0)
        .unwrap()
        .with_timezone(&zone)
        .date_naive();
    let start = plus_days(local_today, 2);
    let r = create(
        &t,
        &vault,
        json!({ "start_date": text(start), "interval": 1, "interval_type": "w",
            "end_date": text(plus_days(start, 14)) }),
    );
    let id = r["id"].as_str().unwrap();
    use chrono::TimeZone;
    let midnight = zone
        .from_local_datetime(&start.and_hms_opt(0, 0, 0).unwrap())
        .earliest()
        .unwrap()
        .timestamp();
    advance(&t, midnight - now - 60);
    assert_eq!(
        runs(&t, id).len(),
        0,
        "a minute before the local midnight: not yet"
    );
    advance(&t, 120);
    assert_eq!(runs(&t, id).len(), 1, "just after it: charged");
    // Weekly, ending after start + 14 days: three runs, then ended.
    advance(&t, 30 * 86_400);
    assert_eq!(runs(&t, id).len(), 3);
    let ended = get(&t, id);
    assert_eq!(ended["status"], json!("ended"));
    assert_eq!(ended["ended_reason"], json!("end_date_passed"));
    assert!(!has_recurring(&t, &vault));
}

/// The activate rule (ADR 0009): periods that fall while a schedule is on
/// hold are not charged; activating resumes at the first period on or
/// after the location's today, and an installment plan's end moves later
/// by the missed periods so it still collects its count. Then the ways
/// into `ended`: installments collected, and a PUT end_date before the
/// next run.
fn held_periods_are_not_charged(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    let month = |n: u32| start.checked_add_months(Months::new(n)).unwrap();
    let o = create(&t, &vault, json!({ "start_date": text(start) }));
    let i = create(
        &t,
        &vault,
        json!({ "start_date": text(start), "installment_total_count": 3, "transaction_amount": "20.00" }),
    );
    let (oid, iid) = (o["id"].as_str().unwrap(), i["id"].as_str().unwrap());
    assert_eq!(i["end_date"], json!(text(month(3).pred_opt().unwrap())));
    let act = |id: &str, path: &str| t.post(&format!("/v2/recurrings/{id}/{path}"), json!({}));
    act(oid, "placeOnHold").expect(200);
    act(iid, "placeOnHold").expect(200);
    assert!(!has_recurring(&t, &vault), "only held plans: the vault is free");
    // Held: no deferral, no skip (activate first).
    for path in ["deferPayment?defer_count=1", "skipPayment?skip_count=1"] {
        let r = act(iid, path).expect(422);
        assert!(r.errors("status")[0].contains("on hold"), "{path}: {:?}", r.body);
    }

    // Three periods (start, +1 and +2 months) fall while held.
    let clock = advance_to(&t, plus_days(month(2), 5), 12);
    assert_eq!(clock["ran"]["recurring_runs"], json!(0), "{clock}");
    assert!(runs(&t, oid).is_empty() && runs(&t, iid).is_empty());
    assert_eq!(get(&t, oid)["next_run_date"], json!("0000-00-00"));

    // Activate: the first period on or after today, nothing charged at once.
    let back = act(oid, "activate").expect(200).body["recurring"].clone();
    assert_eq!(back["status"], json!("active"));
    assert_eq!(back["next_run_date"], json!(text(month(3))));
    let iback = act(iid, "activate").expect(200).body["recurring"].clone();
    assert_eq!(iback["next_run_date"], json!(text(month(3))));
    assert_eq!(
        iback["end_date"],
        json!(text(month(6).pred_opt().unwrap())),
        "the end moves three periods later: the count is still collected"
    );
    assert_eq!(iback["installment_amount_total"], json!("60.00"));
    assert!(has_recurring(&t, &vault));
    assert!(runs(&t, oid).is_empty() && runs(&t, iid).is_empty());

    // Three runs each; the installment plan then ends, collected.
    advance_to(&t, plus_days(month(5), 1), 12);
    let dates = |id: &str| runs(&t, id).iter().map(date_of).collect::<Vec<_>>();
    let expected: Vec<String> = (3..6).map(|n| text(month(n))).collect();
    assert_eq!(dates(oid), expected);
    assert_eq!(dates(iid), expected);
    let done = get(&t, iid);
    assert_eq!(done["status"], json!("ended"));
    assert_eq!(done["ended_reason"], json!("installments_collected"));
    assert_eq!(done["payment_count"], json!(3));
    assert_eq!(done["next_run_date"], json!("0000-00-00"));
    assert_eq!(done["active"], json!(0));
    assert!(has_recurring(&t, &vault), "the ongoing plan still charges it");

    // PUT end_date before the next run: the ongoing plan ends now.
    let ongoing = get(&t, oid);
    assert_eq!(ongoing["next_run_date"], json!(text(month(6))));
    let ended = t
        .put(
            &format!("/v2/recurrings/{oid}"),
            json!({ "recurring": { "end_date": text(plus_days(month(5), 10)) } }),
        )
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(ended["status"], json!("ended"));
    assert_eq!(ended["ended_reason"], json!("end_date_passed"));
    assert_eq!(ended["next_run_date"], json!("0000-00-00"));
    assert!(!has_recurring(&t, &vault));
    let clock = advance_to(&t, plus_days(month(7), 1), 12);
    assert_eq!(clock["ran"]["recurring_runs"], json!(0), "{clock}");
    assert_eq!(runs(&t, oid).len(), 3, "an ended plan charges no more");
    // Ended is final for activate and deferPayment too.
    assert!(act(oid, "activate").expect(422).errors("status")[0].contains("ended"));
    assert!(act(iid, "deferPayment?defer_count=1")
        .expect(422)
        .errors("status")[0]
        .contains("ended"));
    // An ended plan's vault can go; the plan keeps its reason.
    t.delete(&format!("/v2/accountvaults/{vault}")).expect(204);
    assert_eq!(get(&t, oid)["ended_reason"], json!("end_date_passed"));
}

/// Yearly (12 months) from February 29: February 28 in common years,
/// February 29 again in the next leap year.
fn a_leap_day_anchor(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let is_leap = |y: i32| y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let mut year = today(&t).year();
    while !(is_leap(year) && NaiveDate::from_ymd_opt(year, 2, 29).unwrap() > today(&t)) {
        year += 1;
    }
    let start = NaiveDate::from_ymd_opt(year, 2, 29).unwrap();
    let r = create(
        &t,
        &vault,
        json!({ "start_date": text(start), "interval": 12, "interval_type": "m" }),
    );
    let id = r["id"].as_str().unwrap();
    advance_to(&t, NaiveDate::from_ymd_opt(year + 4, 3, 1).unwrap(), 12);
    let dates: Vec<String> = runs(&t, id).iter().map(date_of).collect();
    let expected: Vec<String> = [
        (year, 2, 29),
        (year + 1, 2, 28),
        (year + 2, 2, 28),
        (year + 3, 2, 28),
        (year + 4, 2, 29),
    ]
    .iter()
    .map(|(y, m, d)| text(NaiveDate::from_ymd_opt(*y, *m, *d).unwrap()))
    .collect();
    assert_eq!(
        dates, expected,
        "counted from the anchor, never drifting to the 28th"
    );
    assert_eq!(
        get(&t, id)["next_run_date"],
        json!(text(NaiveDate::from_ymd_opt(year + 5, 2, 28).unwrap()))
    );
}

/// SIGKILL while a run is charging hundreds of schedules: after the
/// restart each schedule is charged exactly once for its date.
fn restart_during_a_run(app: &mut TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    // Enough schedules that the kill, sent once the first charge is
    // recorded, lands while the run goes on, even on a stalled machine.
    const N: usize = 600;
    for n in 0..N {
        t.post(
            "/v2/recurrings",
            plan(
                &t,
                &vault,
                json!({ "start_date": text(start), "description": format!("plan {n}") }),
            ),
        )
        .expect(201);
    }
    let mut sql = db(app);
    let mover = {
        let t = t.clone();
        std::thread::spawn(move || {
            t.post(
                "/v2/developer/testclock/advance",
                json!({ "testclock": { "seconds": 86_400 + 3_600 } }),
            )
            .status
        })
    };
    wait_until("a run under way", Duration::from_secs(60), || {
        (sql.count(
            "SELECT COUNT(*) FROM transactions WHERE recurring_id IS NOT NULL",
            &[],
        ) >= 1)
            .then_some(())
    });
    app.kill();
    let _ = mover.join();
    let charged_before = sql.count(
        "SELECT COUNT(*) FROM transactions WHERE recurring_id IS NOT NULL",
        &[],
    );
    assert!(
        charged_before < N as i64,
        "the kill landed during the run ({charged_before} of {N})"
    );
    app.spawn();
    let t = Tenant {
        base: app.base.clone(),
        ..t
    };
    // The clock already stands past the run date; run what is due.
    advance(&t, 0);
    wait_until("every schedule charged", Duration::from_secs(120), || {
        (sql.count("SELECT COUNT(*) FROM recurrings WHERE payment_count = 1", &[]) == N as i64).then_some(())
    });
    let approved = sql.count(
        "SELECT COUNT(*) FROM transactions WHERE recurring_id IS NOT NULL AND status_id = 101",
        &[],
    );
    assert_eq!(approved, N as i64, "exactly one approved charge per schedule");
    let doubled = sql.count(
        "SELECT COUNT(*) FROM (SELECT recurring_id FROM transactions WHERE status_id = 101 \
         AND recurring_id IS NOT NULL GROUP BY recurring_id HAVING COUNT(*) > 1) d",
        &[],
    );
    assert_eq!(doubled, 0);
    // Anything else is an attempt the crash interrupted, reversed.
    let other = sql.count(
        "SELECT COUNT(*) FROM transactions WHERE recurring_id IS NOT NULL AND status_id <> 101 AND reason_code_id <> 1531",
        &[],
    );
    assert_eq!(other, 0);
    assert_eq!(
        sql.count(
            "SELECT COUNT(*) FROM recurrings WHERE lease_owner IS NOT NULL",
            &[]
        ),
        0,
        "no lease left behind"
    );
}

/// Receipts, notices and refusals through a real SMTP dialogue.
/// A card sale whose receipt goes to `address`.
fn sale_with_receipt(t: &Tenant, amount: &str, address: &str) {
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": amount,
            "account_number": "4111111111111111", "exp_date": "1239",
            "notification_email_address": address } }),
    )
    .expect(201);
}

/// The outbox message to `recipient`, once `ready` holds for it.
fn outbox_message(t: &Tenant, recipient: &str, ready: impl Fn(&Value) -> bool) -> Value {
    wait_until(
        &format!("the message to {recipient}"),
        Duration::from_secs(20),
        || {
            let list = t.get("/dev/mail?format=json").expect(200).body["messages"].clone();
            list.as_array()?
                .iter()
                .find(|m| m["recipient"] == recipient && ready(m))
                .cloned()
        },
    )
}

fn mail_by_smtp(app: &mut TestApp) {
    let sink = SmtpSink::start();
    app.extra_env.push(("FERROGATE_SMTP_URL".into(), sink.url()));
    app.extra_env
        .push(("FERROGATE_MAIL_FROM".into(), "billing@ferrogate.test".into()));
    app.kill();
    app.spawn();
    let t = app.bootstrap();
    set_location(
        &t,
        json!({ "name": "Corner Bakery", "email_reply_to": "help@bakery.example" }),
    );
    let (_, vault) = customer(&t, true);
    let sale = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "12.34",
                "account_vault_id": vault, "notification_email_address": "buyer@example.com",
                "description": "Sourdough" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    assert_eq!(sale["notification_email_sent"], json!(true));
    let mails = sink.wait_for(2, Duration::from_secs(20));
    let mut to: Vec<String> = mails.iter().flat_map(|m| m.to.clone()).collect();
    to.sort();
    assert_eq!(
        to,
        ["buyer@example.com", "pat@example.com"],
        "the address named and the contact"
    );
    for m in &mails {
        assert_eq!(
            m.auth,
            Some(("sink-user".into(), "sink-secret".into())),
            "credentials from the URL"
        );
        assert_eq!(m.from, "billing@ferrogate.test");
        assert!(
            m.header("From").unwrap().contains("Corner Bakery"),
            "{:?}",
            m.header("From")
        );
        assert_eq!(m.header("Reply-To").as_deref(), Some("help@bakery.example"));
        assert!(m.header("Subject").unwrap().contains("12.34"));
        let body = m.decoded();
        assert!(
            body.contains("text/plain") && body.contains("text/html"),
            "plain text and HTML"
        );
        assert!(body.contains("Visa ending in 1111"));
        assert!(body.contains("Sourdough"));
        assert!(body.contains(sale["id"].as_str().unwrap()));
        assert!(!body.contains("4111111111111111"), "never a full card number");
    }
    // A transaction without an address and a contact without receipts
    // sends nothing; a declined one says so.
    let decline = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "5.00",
                "account_number": "4111111111111111", "exp_date": "1239",
                "notification_email_address": "buyer@example.com" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    assert_eq!(decline["status_id"], json!(301));
    let mails = sink.wait_for(3, Duration::from_secs(20));
    assert!(mails[2].decoded().contains("not approved"));
    let quiet = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "1.00",
                "account_number": "4111111111111111", "exp_date": "1239" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    assert_eq!(quiet["notification_email_sent"], json!(false));

    // A recipient the server refuses (550): failed at once, not retried.
    sink.answer_rcpt(Some("550 5.1.1 no such user"));
    sale_with_receipt(&t, "2.00", "nobody@example.com");
    let failed = outbox_message(&t, "nobody@example.com", |m| m["status"] == "failed");
    assert!(failed["last_error"].as_str().unwrap().contains("550"));
    // A transient refusal (451) is retried; moving the clock past the
    // retry delay delivers it.
    sink.answer_rcpt(Some("451 4.3.0 try again later"));
    sale_with_receipt(&t, "3.00", "later@example.com");
    let refused = outbox_message(&t, "later@example.com", |m| m["last_error"].is_string());
    assert_eq!(refused["status"], json!("pending"));
    sink.answer_rcpt(None);
    let clock = advance(&t, 120);
    assert!(clock["ran"]["mail_attempts"].as_i64().unwrap() >= 1, "{clock}");
    let mails = sink.mails();
    assert!(mails.iter().any(|m| m.to == ["later@example.com"]));

    // A due message that another worker holds: the clock's mail step
    // waits for it (here the lease ends half a second on, and the step
    // then sends it itself), so it is delivered when the move answers.
    sink.answer_rcpt(Some("451 4.3.0 try again later"));
    sale_with_receipt(&t, "3.50", "held@example.com");
    outbox_message(&t, "held@example.com", |m| m["last_error"].is_string());
    sink.answer_rcpt(None);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let held = db(app).exec(
        &format!(
            "UPDATE mail_outbox SET lease_owner = 'another-node', lease_until_ms = {}, due_ms = {now_ms} \
             WHERE recipient = ? AND status = 'pending'",
            now_ms + 500
        ),
        &["held@example.com"],
    );
    assert_eq!(held, 1);
    advance(&t, 0);
    assert!(
        sink.mails().iter().any(|m| m.to == ["held@example.com"]),
        "delivered before the move answered"
    );

    // A recurring notice, 2 days before the run.
    let start = plus_days(today(&t), 5);
    create(
        &t,
        &vault,
        json!({ "start_date": text(start), "notification_days": 2, "transaction_amount": "7.77" }),
    );
    let before = sink.mails().len();
    advance_to(&t, plus_days(start, 0).pred_opt().unwrap().pred_opt().unwrap(), 1);
    let mails = sink.wait_for(before + 1, Duration::from_secs(20));
    let notice = mails.last().unwrap();
    assert_eq!(notice.to, ["pat@example.com"]);
    assert!(notice.header("Subject").unwrap().contains(&text(start)));
    assert!(notice.decoded().contains("7.77"));

    // The clock now stands days ahead of real time: receipts still go out
    // at once, a sale's and the run's (to the contact).
    let before = sink.mails().len();
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "8.88",
            "account_number": "4111111111111111", "exp_date": "1239",
            "notification_email_address": "ahead@example.com" } }),
    )
    .expect(201);
    let mails = sink.wait_for(before + 1, Duration::from_secs(20));
    assert!(mails.iter().any(|m| m.to == ["ahead@example.com"]));
    let before = mails.len();
    advance_to(&t, start, 6);
    let mails = sink.wait_for(before + 1, Duration::from_secs(20));
    let receipt = mails
        .iter()
        .find(|m| m.header("Subject").unwrap().contains("receipt for 7.77"))
        .unwrap_or_else(|| panic!("the run's receipt: {mails:?}"));
    assert_eq!(receipt.to, ["pat@example.com"]);
    assert!(receipt.decoded().contains("Visa ending in 1111"));
}

/// STARTTLS with credentials, the server's certificate checked against
/// a private CA (`FERROGATE_SMTP_CA`).
fn mail_over_starttls(app: &mut TestApp) {
    let sink = SmtpSink::start_tls();
    let ca = app.dir.join("smtp-ca.pem");
    std::fs::write(&ca, sink.ca_pem.as_ref().unwrap()).unwrap();
    app.extra_env.push((
        "FERROGATE_SMTP_URL".into(),
        format!(
            "smtp://sink-user:sink-secret@127.0.0.1:{}?tls=required",
            sink.port
        ),
    ));
    app.extra_env
        .push(("FERROGATE_SMTP_CA".into(), ca.display().to_string()));
    app.kill();
    app.spawn();
    let t = app.bootstrap();
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "6.50",
            "account_number": "4111111111111111", "exp_date": "1239",
            "notification_email_address": "secure@example.com" } }),
    )
    .expect(201);
    let mails = sink.wait_for(1, Duration::from_secs(20));
    assert_eq!(mails[0].to, ["secure@example.com"]);
    assert!(mails[0].secure, "sent after STARTTLS");
    assert_eq!(mails[0].auth, Some(("sink-user".into(), "sink-secret".into())));
    assert!(mails[0].decoded().contains("6.50"));
}

/// Without SMTP, mail stays in the outbox and the development mailbox
/// shows it to the tenant that wrote it, and to no one else.
fn development_mailbox(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let sale = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "4.20",
                "account_number": "4111111111111111", "exp_date": "1239",
                "notification_email_address": "pat@example.com" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    assert_eq!(sale["notification_email_sent"], json!(true));
    let list = t.get("/dev/mail?format=json").expect(200).body["messages"].clone();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    let m = &list[0];
    assert_eq!(m["status"], json!("pending"), "kept in the outbox without SMTP");
    assert_eq!(m["resource_id"], sale["id"]);
    assert!(m["html"].as_str().unwrap().contains("<table"));
    let id = m["id"].as_str().unwrap();
    // The pages.
    let page = t.get("/dev/mail");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.text.contains(m["subject"].as_str().unwrap()));
    assert!(page.text.contains("<caption>"));
    let one = t.get(&format!("/dev/mail/{id}"));
    assert_eq!(one.status, 200);
    assert!(one.text.contains("srcdoc="));
    assert!(!one.text.contains("4111111111111111"));
    // Another tenant sees nothing of it.
    assert_eq!(
        other.get("/dev/mail?format=json").expect(200).body["messages"],
        json!([])
    );
    assert_eq!(other.get(&format!("/dev/mail/{id}")).status, 404);
    // No credentials: a page asking for them.
    let anonymous = app.client().send("GET", "/dev/mail", &[], None);
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.header("www-authenticate").unwrap().starts_with("Basic"));
    // HTTP Basic with the developer id in the query, as a browser signs in.
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        t.cred("user_id"),
        t.cred("user_api_key")
    ));
    let signed_in = app.client().send(
        "GET",
        &format!("/dev/mail?developer-id={}", t.cred("developer_id")),
        &[("authorization", &format!("Basic {basic}"))],
        None,
    );
    assert_eq!(signed_in.status, 200);
    assert!(
        signed_in.text.contains(&format!("/dev/mail/{id}?developer-id=")),
        "links keep the developer id: {}",
        signed_in.text
    );
}

/// A user who wants receipts of the payments they make gets one for each,
/// and stops getting them with the very next payment after turning them
/// off (the address comes with the authenticated caller, which a change
/// to the user renews).
fn users_receipts_follow_their_settings(app: &TestApp) {
    let t = app.bootstrap();
    let me = t.user_id();
    let sale = |amount: &str| {
        t.post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": amount,
                "account_number": "4111111111111111", "exp_date": "1239" } }),
        )
        .expect(201);
    };
    let to_clerk = || {
        let list = t.get("/dev/mail?format=json").expect(200).body["messages"].clone();
        list.as_array()
            .unwrap()
            .iter()
            .filter(|m| m["recipient"] == json!("clerk@example.com"))
            .count()
    };
    sale("1.01");
    assert_eq!(to_clerk(), 0, "no address yet");
    t.put(
        &format!("/v2/users/{me}"),
        json!({ "user": { "email": "clerk@example.com", "email_trx_receipt": true } }),
    )
    .expect(200);
    sale("1.02");
    sale("1.03");
    assert_eq!(to_clerk(), 2);
    t.put(
        &format!("/v2/users/{me}"),
        json!({ "user": { "email_trx_receipt": false } }),
    )
    .expect(200);
    sale("1.04");
    assert_eq!(to_clerk(), 2, "turned off: none for the next sale");
}

/// Two `serve` nodes on one PostgreSQL database, both running their
/// schedulers: 1,000 due schedules are charged exactly 1,000 times.
#[test]
fn two_nodes_charge_each_schedule_once() {
    crate::support::run_on(Engine::Postgres, |app| {
        let t = app.bootstrap();
        let b = crate::nodes::Node::start(app);
        let (_, vault) = customer(&t, false);
        let tb = b.tenant(&t);
        let today = text(today(&t));
        const N: usize = 1_000;
        // Which nodes hold leases while the schedules are charged: both
        // must take part, or exactly once would prove nothing.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let (mut sql, stop) = (db(app), stop.clone());
            std::thread::spawn(move || {
                let mut owners = std::collections::BTreeSet::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    for q in ["MIN", "MAX"] {
                        let owner = sql.text(
                            &format!("SELECT COALESCE({q}(lease_owner), '') FROM recurrings"),
                            &[],
                        );
                        if !owner.is_empty() {
                            owners.insert(owner);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                owners
            })
        };
        let mut makers = Vec::new();
        for part in 0..4 {
            let (t, tb, vault, today) = (t.clone(), tb.clone(), vault.clone(), today.clone());
            makers.push(std::thread::spawn(move || {
                for n in 0..N / 4 {
                    let via = if n % 2 == 0 { &t } else { &tb };
                    via.post(
                        "/v2/recurrings",
                        plan(
                            via,
                            &vault,
                            json!({ "start_date": today, "description": format!("p{part}-{n}") }),
                        ),
                    )
                    .expect(201);
                }
            }));
        }
        for m in makers {
            m.join().unwrap();
        }
        let mut sql = db(app);
        wait_until("every schedule charged", Duration::from_secs(180), || {
            (sql.count("SELECT COUNT(*) FROM recurrings WHERE payment_count >= 1", &[]) == N as i64)
                .then_some(())
        });
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let owners = sampler.join().unwrap();
        assert_eq!(owners.len(), 2, "both nodes claimed schedules: {owners:?}");
        // No node is in the middle of a run (a run holds its lease until
        // recorded): anything charged twice would show now.
        wait_until("every lease released", Duration::from_secs(60), || {
            (sql.count(
                "SELECT COUNT(*) FROM recurrings WHERE lease_owner IS NOT NULL",
                &[],
            ) == 0)
                .then_some(())
        });
        assert_eq!(
            sql.count(
                "SELECT COUNT(*) FROM transactions WHERE recurring_id IS NOT NULL",
                &[]
            ),
            N as i64,
            "exactly one charge per schedule"
        );
        assert_eq!(
            sql.count(
                "SELECT COUNT(DISTINCT recurring_id) FROM transactions WHERE status_id = 101",
                &[]
            ),
            N as i64
        );
        assert_eq!(
            sql.count("SELECT COUNT(*) FROM recurrings WHERE payment_count > 1", &[]),
            0
        );
    });
}

/// What a PUT does to a schedule that has run: a new amount counts from
/// the next installment on, and an ongoing schedule cannot be made to end
/// before it started.
fn changes_after_runs(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    let i = create(
        &t,
        &vault,
        json!({ "installment_total_count": 3, "transaction_amount": "10.00", "interval_type": "d" }),
    );
    let iid = i["id"].as_str().unwrap();
    assert_eq!(i["installment_amount_total"], json!("30.00"));
    advance_to(&t, start, 12);
    assert_eq!(runs(&t, iid).len(), 1);
    let more = t
        .put(
            &format!("/v2/recurrings/{iid}"),
            json!({ "recurring": { "transaction_amount": "20.00" } }),
        )
        .expect(200)
        .body["recurring"]
        .clone();
    assert_eq!(more["installment_amount_total"], json!("50.00"), "{more}");
    advance_to(&t, plus_days(start, 3), 12);
    let charged: Vec<Value> = runs(&t, iid)
        .iter()
        .map(|r| r["transaction_amount"].clone())
        .collect();
    assert_eq!(charged, [json!("10.00"), json!("20.00"), json!("20.00")]);
    assert_eq!(get(&t, iid)["status"], json!("ended"));

    // An ongoing schedule starting next month cannot end before then.
    let later = plus_days(today(&t), 40);
    let o = create(&t, &vault, json!({ "start_date": text(later) }));
    let oid = o["id"].as_str().unwrap();
    let r = t
        .put(
            &format!("/v2/recurrings/{oid}"),
            json!({ "recurring": { "end_date": text(plus_days(today(&t), 20)) } }),
        )
        .expect(422);
    assert_eq!(r.errors("end_date"), ["End Date cannot be before start_date."]);
    assert_eq!(get(&t, oid)["status"], json!("active"));
}

/// While a run holds its schedule (its lease, from the claim to the
/// record of its charge), a change, an action or a delete is a 409: the
/// run charges the copy it began with, so a new amount, a hold or a
/// deletion would be charged past. Once the run is recorded they go
/// through. (The lease is set by hand: a charge in flight, held still.)
fn no_change_while_a_run_is_under_way(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let r = create(&t, &vault, json!({}));
    let id = r["id"].as_str().unwrap().to_string();
    let path = format!("/v2/recurrings/{id}");
    let mut db = crate::support::db::db(app);
    db.exec(
        "UPDATE recurrings SET lease_owner = 'another-node', lease_until_ms = 9999999999999 WHERE id = ?",
        &[&id],
    );
    let amount = json!({ "recurring": { "transaction_amount": "20.00" } });
    let refused = t.put(&path, amount.clone()).expect(409);
    assert!(dump(&refused.body).contains("running"), "{:?}", refused.body);
    t.post(&format!("{path}/placeOnHold"), json!({})).expect(409);
    t.post(&format!("{path}/skipPayment?skip_count=1"), json!({}))
        .expect(409);
    t.delete(&path).expect(409);
    let kept = get(&t, &id);
    assert_eq!(kept["transaction_amount"], "9.00");
    assert_eq!(kept["status"], "active");
    db.exec(
        "UPDATE recurrings SET lease_owner = NULL, lease_until_ms = NULL WHERE id = ?",
        &[&id],
    );
    assert_eq!(
        t.put(&path, amount).expect(200).body["recurring"]["transaction_amount"],
        "20.00"
    );
    t.delete(&path).expect(204);
}

/// Today's run done, moving the next run back onto today would charge
/// today twice: the next run must come after the last one.
fn the_last_run_day_is_not_charged_again(app: &TestApp) {
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let r = create(&t, &vault, json!({ "start_date": text(today(&t)) }));
    let id = r["id"].as_str().unwrap().to_string();
    advance(&t, 0);
    assert_eq!(runs(&t, &id).len(), 1, "today's run");
    let ran = get(&t, &id);
    assert_eq!(ran["last_run_date"], json!(text(today(&t))), "{}", dump(&ran));
    let refused = t
        .put(
            &format!("/v2/recurrings/{id}"),
            json!({ "recurring": { "next_run_date": text(today(&t)) } }),
        )
        .expect(422);
    assert!(
        refused.errors("next_run_date")[0].contains("after the last run"),
        "{:?}",
        refused.body
    );
    advance(&t, 0);
    assert_eq!(runs(&t, &id).len(), 1, "charged once");
    t.put(
        &format!("/v2/recurrings/{id}"),
        json!({ "recurring": { "next_run_date": text(plus_days(today(&t), 1)) } }),
    )
    .expect(200);
}

/// A contact an active recurring bills cannot be deleted (as its vault
/// could not); once the recurring is held, the contact can go and the
/// recurring ends with it, so nothing resumes billing the vault.
fn a_contact_billed_by_a_recurring(app: &TestApp) {
    let t = app.bootstrap();
    let (contact, vault) = customer(&t, false);
    let r = create(&t, &vault, json!({}));
    let id = r["id"].as_str().unwrap().to_string();
    let refused = t.delete(&format!("/v2/contacts/{contact}")).expect(422);
    assert!(dump(&refused.body).contains("recurring"), "{:?}", refused.body);
    t.get(&format!("/v2/contacts/{contact}")).expect(200);
    t.post(&format!("/v2/recurrings/{id}/placeOnHold"), json!({}))
        .expect(200);
    t.delete(&format!("/v2/contacts/{contact}")).expect(204);
    let ended = get(&t, &id);
    assert_eq!(ended["status"], json!("ended"));
    assert_eq!(ended["ended_reason"], json!("contact_deleted"));
    t.post(&format!("/v2/recurrings/{id}/activate"), json!({}))
        .expect(422);
    assert!(!has_recurring(&t, &vault));
}

/// PostgreSQL: a run whose attempt another node is charging (its lease
/// was released or ran out meanwhile; here a transaction of the run key,
/// inserted by the test and not committed yet) is not a declined run:
/// the scheduler's payment waits on that row's run key, then finds it
/// taken. The run is looked at again later and records that
/// transaction; before, it was recorded as declined and its retry
/// charged the period a second time.
fn a_run_being_charged_elsewhere_is_not_declined(app: &TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let (_, vault) = customer(&t, false);
    let start = plus_days(today(&t), 1);
    let r = create(&t, &vault, json!({ "start_date": text(start) }));
    let id = r["id"].as_str().unwrap().to_string();
    let mut sql = db(app);
    let run_key = format!(
        "{id}:{}",
        sql.count("SELECT run_seq FROM recurrings WHERE id = ?", &[&id])
    );
    // The other node's charge: an approved sale carrying the run key.
    let sale = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc",
                "account_vault_id": vault, "transaction_amount": "9.00" } }),
        )
        .expect(201);
    let source = sale.body["transaction"]["id"].as_str().unwrap().to_string();
    let elsewhere = "0000000000000000000000000e15e7e7";
    let mut other_node = db(app);
    other_node.exec("BEGIN", &[]);
    other_node.exec(
        "CREATE TEMP TABLE run_copy ON COMMIT DROP AS SELECT * FROM transactions WHERE id = ?",
        &[&source],
    );
    other_node.exec(
        "UPDATE run_copy SET id = ?, recurring_run = ?, recurring_id = ?, is_recurring = 1",
        &[elsewhere, &run_key, &id],
    );
    other_node.exec("INSERT INTO transactions SELECT * FROM run_copy", &[]);

    let due = {
        let t = t.clone();
        std::thread::spawn(move || advance_to(&t, start, 6))
    };
    wait_for_lock_wait(
        app,
        &due,
        "the run's payment never met the run key the test holds",
    );
    other_node.exec("COMMIT", &[]);
    due.join().unwrap();
    let waiting = get(&t, &id);
    assert_eq!(waiting["retry_count"], json!(0), "not a decline: {waiting}");
    assert_eq!(waiting["payment_count"], json!(0), "{waiting}");
    assert!(waiting["last_run_status"].is_null(), "{waiting}");
    assert_eq!(waiting["next_run_date"], json!(text(start)), "{waiting}");
    let txs = runs(&t, &id);
    assert_eq!(txs.len(), 1, "charged once: {txs:?}");

    // The scheduler looks again (its lease, kept meanwhile, runs out) and
    // records the run's transaction instead of charging.
    sql.exec("UPDATE recurrings SET lease_until_ms = 0 WHERE id = ?", &[&id]);
    advance(&t, 0);
    let paid = get(&t, &id);
    assert_eq!(paid["last_run_status"], json!("approved"), "{paid}");
    assert_eq!(paid["payment_count"], json!(1), "{paid}");
    assert_eq!(paid["last_transaction_id"], json!(elsewhere), "{paid}");
    assert_eq!(
        paid["next_run_date"],
        json!(text(start.checked_add_months(Months::new(1)).unwrap()))
    );
    assert_eq!(runs(&t, &id).len(), 1, "still charged once");
}

/// PostgreSQL: a recurring set up on a vault while another node deletes
/// the vault, or the vault's contact, waits for that delete and is then
/// refused, not saved billing a vault or customer that is gone. (The
/// schedule read the vault unlocked and was saved after the delete.) On
/// SQLite the writer runs one job at a time: nothing can come in between.
fn a_recurring_set_up_while_its_vault_or_contact_goes_is_refused(app: &TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    // The contact: its vaults are detached, then it goes.
    let (contact, vault) = customer_with(&t, false, "first");
    let mut deleting = db(app);
    deleting.exec("BEGIN", &[]);
    deleting.exec(
        "UPDATE account_vaults SET contact_id = NULL WHERE contact_id = ?",
        &[&contact],
    );
    deleting.exec("DELETE FROM contacts WHERE id = ?", &[&contact]);
    let creating = {
        let (t, vault) = (t.clone(), vault.clone());
        std::thread::spawn(move || t.post("/v2/recurrings", plan(&t, &vault, json!({}))))
    };
    wait_for_lock_wait(
        app,
        &creating,
        "the recurring did not wait for the contact's delete",
    );
    deleting.exec("COMMIT", &[]);
    let r = creating.join().unwrap();
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("account_vault_id").is_empty(), "{}", r.text);
    assert_eq!(count(&t), 0);

    // The vault.
    let (_, vault) = customer_with(&t, false, "second");
    deleting.exec("BEGIN", &[]);
    deleting.exec("DELETE FROM account_vaults WHERE id = ?", &[&vault]);
    let creating = {
        let (t, vault) = (t.clone(), vault.clone());
        std::thread::spawn(move || t.post("/v2/recurrings", plan(&t, &vault, json!({}))))
    };
    wait_for_lock_wait(
        app,
        &creating,
        "the recurring did not wait for the vault's delete",
    );
    deleting.exec("COMMIT", &[]);
    let r = creating.join().unwrap();
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("account_vault_id").is_empty(), "{}", r.text);
    assert_eq!(count(&t), 0);
}

/// PostgreSQL: a contact or a vault deleted while another node moves an
/// active recurring onto it (holding the vault and contact as a schedule
/// being set up does) waits for that job, then sees the recurring and
/// refuses; the recurring never bills what is gone. (The delete checked
/// before the schedule committed, and went on.)
fn a_delete_waits_for_a_recurring_being_set_up(app: &TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let (_, first) = customer_with(&t, false, "first");
    let id = str_of(&create(&t, &first, json!({}))["id"]);
    let moving_onto = |conn: &mut crate::support::db::Db, contact: &str, vault: &str| {
        conn.exec("BEGIN", &[]);
        conn.exec(
            "SELECT 1 FROM account_vaults WHERE id = ? FOR KEY SHARE",
            &[vault],
        );
        conn.exec("SELECT 1 FROM contacts WHERE id = ? FOR KEY SHARE", &[contact]);
        conn.exec(
            "UPDATE recurrings SET account_vault_id = ?, contact_id = ? WHERE id = ?",
            &[vault, contact, &id],
        );
    };
    let mut moving = db(app);

    let (contact, vault) = customer_with(&t, false, "second");
    moving_onto(&mut moving, &contact, &vault);
    let deleting = {
        let (t, contact) = (t.clone(), contact.clone());
        std::thread::spawn(move || t.delete(&format!("/v2/contacts/{contact}")))
    };
    wait_for_lock_wait(
        app,
        &deleting,
        "the contact's delete did not wait for the recurring",
    );
    moving.exec("COMMIT", &[]);
    let r = deleting.join().unwrap();
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(dump(&r.body).contains("recurring"), "{}", r.text);
    t.get(&format!("/v2/contacts/{contact}")).expect(200);

    let (contact, vault) = customer_with(&t, false, "third");
    moving_onto(&mut moving, &contact, &vault);
    let deleting = {
        let (t, vault) = (t.clone(), vault.clone());
        std::thread::spawn(move || t.delete(&format!("/v2/accountvaults/{vault}")))
    };
    wait_for_lock_wait(
        app,
        &deleting,
        "the vault's delete did not wait for the recurring",
    );
    moving.exec("COMMIT", &[]);
    let r = deleting.join().unwrap();
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(dump(&r.body).contains("recurring"), "{}", r.text);
    t.get(&format!("/v2/accountvaults/{vault}")).expect(200);
    assert_eq!(get(&t, &id)["status"], json!("active"));
}
