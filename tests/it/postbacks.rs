//! Postbacks end to end: configs over the API, events written with the
//! change, delivery to a real HTTP receiver on loopback (payloads, Basic
//! auth, retries, failure, order, signatures), restarts and slow receivers.

use crate::engine_tests;
use crate::support::receiver::{config, deliveries, wait_log, Receiver, Reply};
use crate::support::wait::wait_until;
use crate::support::{str_of, Tenant, TestApp};
use base64::Engine as _;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::Duration;

/// A contact as embeds and postbacks show it: `header_message_type_id`.
fn as_embedded(mut contact: Value) -> Value {
    let map = contact.as_object_mut().expect("a contact");
    let v = map.remove("header_message_type").expect("header_message_type");
    map.insert("header_message_type_id".into(), v);
    contact
}

fn without_links(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("_links");
    }
    v
}

fn sale(t: &Tenant, amount: &str) -> Value {
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc",
            "account_number": "4111111111111111", "exp_date": "1239",
            "transaction_amount": amount, "product_transaction_id": t.cred("cc_product_transaction_id") } }),
    )
    .expect(201)
    .body["transaction"]
        .clone()
}

const WAIT: Duration = Duration::from_secs(10);

engine_tests!(
    configs_are_validated_and_keep_credentials_sealed,
    contact_events_carry_the_record_expands_and_auth,
    vault_transaction_and_batch_events,
    retries_are_counted_and_the_last_failure_is_final,
    events_of_a_record_arrive_in_order,
    signed_deliveries_verify_with_standard_webhooks,
    private_targets_are_refused_unless_allowed,
    a_hanging_receiver_does_not_stall_others,
    undelivered_events_survive_sigkill,
    payloads_hide_what_the_location_s_readers_may_not_see,
    payloads_of_a_child_show_only_what_the_child_sees,
    a_clock_move_makes_every_retry_on_its_way,
    a_clock_move_keeps_to_its_location_and_the_in_flight_limit,
);

fn configs_are_validated_and_keep_credentials_sealed(app: &mut TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let url = "http://127.0.0.1:9/hook";
    // Defaults, and flags in any of their forms.
    let c = config(
        &t,
        json!({ "resource": "contact", "url": url, "on_create": true, "on_update": "1", "on_delete": 0,
            "basic_auth_username": "hook-user", "basic_auth_password": "S3cret-pass" }),
    );
    assert_eq!(c["format"], "api-default");
    assert_eq!(c["number_of_attempts"], 1);
    assert_eq!(c["attempt_interval"], 300);
    assert_eq!(c["expands"], "");
    // Answered 1/0, as the spec gives them, whatever form was sent.
    assert_eq!(c["is_active"], json!(1));
    assert_eq!(
        (
            c["on_create"].clone(),
            c["on_update"].clone(),
            c["on_delete"].clone()
        ),
        (json!(1), json!(1), json!(0))
    );
    assert_eq!(c["has_basic_auth"], true);
    assert_eq!(c["has_signing_secret"], false);
    let id = str_of(&c["id"]);
    let read = t
        .get(&format!(
            "/v2/postbackconfigs/{id}?expand=basic_auth_username,basic_auth_password"
        ))
        .expect(200);
    assert_eq!(read.body["postbackconfig"]["basic_auth_password"], "********");
    assert_eq!(read.body["postbackconfig"]["basic_auth_username"], "********");
    for r in [&read, &t.get("/v2/postbackconfigs").expect(200)] {
        assert!(
            !r.text.contains("S3cret-pass") && !r.text.contains("hook-user"),
            "{}",
            r.text
        );
    }
    assert_eq!(
        t.get("/v2/postbackconfigs").body["meta"]["pagination"]["totalCount"],
        1
    );

    // Each bad field is a 422 naming it; nothing is stored.
    let bad = |fields: Value, field: &str| {
        let mut c = json!({ "location_id": t.location_id(), "resource": "contact", "url": url });
        for (k, v) in fields.as_object().unwrap() {
            c[k] = v.clone();
        }
        let r = t
            .post("/v2/postbackconfigs", json!({ "postbackconfig": c }))
            .expect(422);
        assert!(!r.errors(field).is_empty(), "{field}: {}", r.text);
    };
    bad(json!({ "resource": "invoice" }), "resource");
    bad(json!({ "resource": "transaction" }), "product_transaction_id");
    bad(
        json!({ "resource": "transactionbatch" }),
        "product_transaction_id",
    );
    bad(json!({ "url": "ftp://example.com/x" }), "url");
    bad(json!({ "url": "/relative/path" }), "url");
    bad(json!({ "url": "http://" }), "url");
    bad(json!({ "number_of_attempts": 0 }), "number_of_attempts");
    bad(json!({ "number_of_attempts": 11 }), "number_of_attempts");
    bad(json!({ "attempt_interval": 0 }), "attempt_interval");
    bad(json!({ "on_create": "yes" }), "on_create");
    bad(json!({ "is_active": 2 }), "is_active");
    bad(json!({ "format": "xml" }), "format");
    bad(json!({ "expands": "changelogs,nonsense" }), "expands");
    bad(
        json!({ "basic_auth_username": "only-user" }),
        "basic_auth_password",
    );
    bad(json!({ "signing_secret": "not-a-secret" }), "signing_secret");
    bad(
        json!({ "resource": "transaction", "product_transaction_id": other.cred("cc_product_transaction_id") }),
        "product_transaction_id",
    );
    bad(json!({ "location_id": other.location_id() }), "location_id");
    assert_eq!(
        t.get("/v2/postbackconfigs").body["meta"]["pagination"]["totalCount"],
        1
    );

    // A transaction config names its product transaction.
    let tx = config(
        &t,
        json!({ "resource": "transaction", "url": url, "product_transaction_id": t.cred("cc_product_transaction_id"),
            "expands": "changelogs, status,changelogs", "number_of_attempts": "3", "attempt_interval": 60 }),
    );
    assert_eq!(tx["expands"], "changelogs,status");
    assert_eq!(tx["number_of_attempts"], 3);

    // PUT changes what it carries; credentials can be removed.
    let r = t
        .put(
            &format!("/v2/postbackconfigs/{id}"),
            json!({ "postbackconfig": { "url": "https://hooks.example.com/in", "is_active": "0",
                "basic_auth_username": "", "basic_auth_password": "" } }),
        )
        .expect(200);
    assert_eq!(r.body["postbackconfig"]["url"], "https://hooks.example.com/in");
    assert_eq!(r.body["postbackconfig"]["is_active"], json!(0));
    assert_eq!(r.body["postbackconfig"]["has_basic_auth"], false);
    let r = t
        .put(
            &format!("/v2/postbackconfigs/{id}"),
            json!({ "postbackconfig": { "url": "mailto:x@example.com" } }),
        )
        .expect(422);
    assert!(!r.errors("url").is_empty());
    // Another tenant cannot see or touch it.
    other.get(&format!("/v2/postbackconfigs/{id}")).expect(404);
    other.delete(&format!("/v2/postbackconfigs/{id}")).expect(404);
    t.delete(&format!("/v2/postbackconfigs/{id}")).expect(204);
    t.get(&format!("/v2/postbackconfigs/{id}")).expect(404);
    t.get(&format!("/v2/postbackconfigs/{id}/deliveries")).expect(404);
}

fn contact_events_carry_the_record_expands_and_auth(app: &mut TestApp) {
    let t = app.bootstrap();
    let with_auth = Receiver::start("/with-auth?x=1");
    let plain = Receiver::start("/plain");
    let creates_only = Receiver::start("/creates");
    config(
        &t,
        json!({ "resource": "contact", "url": with_auth.url, "expands": "changelogs",
            "basic_auth_username": "hook-user", "basic_auth_password": "S3cret:pass" }),
    );
    config(&t, json!({ "resource": "contact", "url": plain.url }));
    let creates_only_config = config(
        &t,
        json!({ "resource": "contact", "url": creates_only.url, "on_update": 0, "on_delete": "false" }),
    );
    let contact = t.contact(json!({ "first_name": "Ada" }));
    let id = str_of(&contact["id"]);
    t.put(
        &format!("/v2/contacts/{id}"),
        json!({ "contact": { "first_name": "Grace" } }),
    )
    .expect(200);
    let after_update = t.get(&format!("/v2/contacts/{id}")).expect(200).body["contact"].clone();
    t.delete(&format!("/v2/contacts/{id}")).expect(204);

    let got = with_auth.wait_for(3, WAIT);
    let expected_auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("hook-user:S3cret:pass")
    );
    for (r, kind) in got.iter().zip(["CREATE", "UPDATE", "DELETE"]) {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/with-auth?x=1");
        assert_eq!(
            r.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(r.header("authorization"), Some(expected_auth.as_str()));
        let names: Vec<&str> = r.form.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["type", "resource", "number_of_attempts", "data"]);
        assert_eq!(r.field("type"), kind);
        assert_eq!(r.field("resource"), "contact");
        assert_eq!(r.field("number_of_attempts"), "1");
        assert!(r.header("webhook-signature").is_none(), "no secret, no signature");
    }
    // data is the record as the API returns it, with the expands.
    let create = got[0].data();
    let mut plain_create = create.clone();
    plain_create.as_object_mut().unwrap().remove("changelogs");
    // Postbacks name a contact's header_message_type as embeds do.
    assert_eq!(plain_create, as_embedded(without_links(contact.clone())));
    let logs = create["changelogs"].as_array().expect("changelogs");
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0]["action"], "CREATE");
    assert_eq!(logs[0]["model"], "Contact");
    assert_eq!(logs[0]["model_id"], id.as_str());
    assert_eq!(logs[0]["user_id"], t.user_id().as_str());
    for key in ["id", "created_ts", "changelog_details", "user"] {
        assert!(logs[0].get(key).is_some(), "changelog {key}");
    }
    let update = got[1].data();
    assert_eq!(update["first_name"], "Grace");
    let mut plain_update = update.clone();
    plain_update.as_object_mut().unwrap().remove("changelogs");
    assert_eq!(plain_update, as_embedded(without_links(after_update.clone())));
    // Newest first.
    let last = update["changelogs"][0].clone();
    assert_eq!(last["action"], "UPDATE");
    let detail = last["changelog_details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["field"] == "first_name")
        .expect("first_name detail")
        .clone();
    assert_eq!(detail["old_value"], "Ada");
    for key in ["id", "changelog_id", "field", "old_value"] {
        assert!(detail.get(key).is_some(), "detail {key}");
    }
    let delete = got[2].data();
    assert_eq!(delete["id"], id.as_str());
    assert_eq!(delete["first_name"], "Grace");

    // No credentials configured: no Authorization header, no expands.
    let got = plain.wait_for(3, WAIT);
    assert!(got.iter().all(|r| r.header("authorization").is_none()));
    assert_eq!(got[0].data(), as_embedded(without_links(contact)));
    // on_update / on_delete off: only the CREATE.
    let got = creates_only.wait_for(1, WAIT);
    // No event was even written for the update and the delete.
    assert_eq!(deliveries(&t, &str_of(&creates_only_config["id"])).len(), 1);
    assert_eq!(creates_only.received().len(), 1);
    assert_eq!(got[0].field("type"), "CREATE");
}

fn vault_transaction_and_batch_events(app: &mut TestApp) {
    let t = app.bootstrap();
    let pt = t.cred("cc_product_transaction_id");
    let vaults = Receiver::start("/vaults");
    let transactions = Receiver::start("/transactions");
    let batches = Receiver::start("/batches");
    let elsewhere = Receiver::start("/ach-only");
    config(
        &t,
        json!({ "resource": "accountvault", "url": vaults.url, "expands": "contact" }),
    );
    config(
        &t,
        json!({ "resource": "transaction", "url": transactions.url, "product_transaction_id": pt,
            "expands": "status,is_voidable" }),
    );
    config(
        &t,
        json!({ "resource": "transactionbatch", "url": batches.url, "product_transaction_id": pt,
            "expands": "changelogs" }),
    );
    // A config of the other product transaction hears nothing of these.
    let elsewhere_config = config(
        &t,
        json!({ "resource": "transaction", "url": elsewhere.url, "product_transaction_id": t.cred("ach_product_transaction_id") }),
    );

    let contact = t.contact(json!({}));
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239", "contact_id": contact["id"] } }),
        )
        .expect(201)
        .body["accountvault"]
        .clone();
    let got = vaults.wait_for(1, WAIT);
    assert_eq!(got[0].field("type"), "CREATE");
    assert_eq!(got[0].field("resource"), "accountvault");
    let data = got[0].data();
    assert_eq!(data["account_number"], "XXXXXXXXXXXX1111");
    assert_eq!(data["contact"]["id"], contact["id"]);
    assert!(data["contact"].get("header_message_type").is_none(), "{data}");
    assert!(data["contact"].get("header_message_type_id").is_some(), "{data}");
    assert!(!got[0].body.contains("4111111111111111"), "no clear card number");

    let tx = sale(&t, "12.34");
    let got = transactions.wait_for(1, WAIT);
    assert_eq!(got[0].field("type"), "CREATE");
    assert_eq!(got[0].field("resource"), "transaction");
    let data = got[0].data();
    assert_eq!(data["id"], tx["id"]);
    assert_eq!(data["transaction_amount"], "12.34");
    assert_eq!(data["status_id"], 101);
    assert_eq!(data["is_voidable"], true);
    assert!(
        data["status"].is_object() || data["status"].is_string(),
        "status expand: {data}"
    );
    let mut plain = data.clone();
    for k in ["status", "is_voidable"] {
        plain.as_object_mut().unwrap().remove(k);
    }
    assert_eq!(plain, without_links(tx.clone()));

    // The sale opened the batch: CREATE; settling it: UPDATE.
    let got = batches.wait_for(1, WAIT);
    assert_eq!(got[0].field("type"), "CREATE");
    assert_eq!(got[0].field("resource"), "transactionbatch");
    let batch = got[0].data();
    assert_eq!(batch["is_open"], 1);
    assert_eq!(batch["processing_status_id"], 1);
    let batch_id = str_of(&batch["id"]);
    let settled = t
        .post(&format!("/v2/transactionbatches/{batch_id}/settle"), json!({}))
        .expect(200)
        .body["transactionbatch"]
        .clone();
    let got = batches.wait_for(2, WAIT);
    assert_eq!(got[1].field("type"), "UPDATE");
    let data = got[1].data();
    assert_eq!(data["is_open"], 0);
    assert_eq!(data["processing_status_id"], 2);
    assert_eq!(data["settlement_file_name"], settled["settlement_file_name"]);
    // Newest first, as the reference's settle postback shows them.
    let logs = data["changelogs"].as_array().unwrap();
    assert_eq!(logs.last().unwrap()["action"], "CREATE", "{data}");
    let log = logs[0].clone();
    assert_eq!(log["action"], "UPDATE");
    assert_eq!(log["model"], "TransactionBatch");
    // Only fields the record shows: never a hidden one (settle_attempts).
    for detail in log["changelog_details"].as_array().unwrap() {
        let field = str_of(&detail["field"]);
        assert!(
            data.get(&field).is_some(),
            "{field} is not a field of the batch: {log}"
        );
    }
    let details: BTreeMap<String, Value> = log["changelog_details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (str_of(&d["field"]), d["old_value"].clone()))
        .collect();
    assert_eq!(details.get("is_open"), Some(&json!("1")));
    assert_eq!(details.get("processing_status_id"), Some(&json!("1")));
    assert_eq!(details.get("batch_close_ts"), Some(&Value::Null));

    // A refund of the settled sale is another CREATE.
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "refund", "payment_method": "cc", "previous_transaction_id": tx["id"], "transaction_amount": "2.00" } }),
    )
    .expect(201);
    let got = transactions.wait_for(2, WAIT);
    assert_eq!(got[1].field("type"), "CREATE");
    assert_eq!(got[1].data()["type_id"], 30);
    // A void of a new sale: the sale's CREATE, then its UPDATE.
    let second = sale(&t, "3.21");
    let voided = t
        .put(
            &format!("/v2/transactions/{}", str_of(&second["id"])),
            json!({ "transaction": { "action": "void" } }),
        )
        .expect(200)
        .body["transaction"]
        .clone();
    let got = transactions.wait_for(4, WAIT);
    assert_eq!((got[2].field("type"), got[3].field("type")), ("CREATE", "UPDATE"));
    let data = got[3].data();
    assert_eq!(data["id"], second["id"]);
    assert_eq!(data["status_id"], voided["status_id"]);
    assert_eq!(data["is_voidable"], false);
    // Updating the vault: UPDATE; deleting it: DELETE.
    let vault_path = format!("/v2/accountvaults/{}", str_of(&vault["id"]));
    t.put(&vault_path, json!({ "accountvault": { "title": "Renamed" } }))
        .expect(200);
    t.delete(&vault_path).expect(204);
    let got = vaults.wait_for(3, WAIT);
    assert_eq!(got[1].field("type"), "UPDATE");
    assert_eq!(got[1].data()["title"], "Renamed");
    assert_eq!(got[2].field("type"), "DELETE");
    assert_eq!(got[2].data()["id"], vault["id"]);
    assert!(deliveries(&t, &str_of(&elsewhere_config["id"])).is_empty());
    assert!(elsewhere.received().is_empty());
}

/// Moves the tenant's test clock `seconds` ahead; the answer comes once
/// the postbacks that came due are delivered (or failed). Returns the
/// number of attempts that made.
pub fn advance(t: &Tenant, seconds: i64) -> i64 {
    let r = t
        .post(
            "/v2/developer/testclock/advance",
            json!({ "testclock": { "seconds": seconds } }),
        )
        .expect(200);
    r.body["testclock"]["ran"]["postback_attempts"]
        .as_i64()
        .expect("attempts")
}

/// Waits until the worker has made and recorded the first attempt of
/// every event of the tenant (so what is still pending waits for the
/// clock, and no attempt is in flight when the clock moves).
fn first_attempts_recorded(t: &Tenant) {
    wait_until("every first attempt to be recorded", WAIT, || {
        let r = t
            .get("/v2/postbackdeliveries?status=pending&page_size=100")
            .expect(200);
        let pending = r.body["postbackdeliveries"].as_array()?.clone();
        pending
            .iter()
            .all(|d| d["number_of_attempts"].as_i64().unwrap_or(0) >= 1)
            .then_some(())
    });
}

fn retries_are_counted_and_the_last_failure_is_final(app: &mut TestApp) {
    let t = app.bootstrap();
    let rx = Receiver::start("/flaky");
    rx.answer(|_| Reply::Status(500));
    // Retries an hour apart: the test clock makes the hours pass.
    let c = config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "number_of_attempts": 3, "attempt_interval": 3600 }),
    );
    let config_id = str_of(&c["id"]);
    t.contact(json!({}));
    rx.wait_for(1, WAIT);
    first_attempts_recorded(&t);
    assert_eq!(advance(&t, 1800), 0, "not due before the hour is up");
    assert_eq!(rx.received().len(), 1);
    assert_eq!(
        advance(&t, 1800),
        1,
        "the second attempt, an hour after the first"
    );
    assert_eq!(rx.received().len(), 2);
    assert_eq!(advance(&t, 3600), 1, "the third and last");
    let got = rx.received();
    let counts: Vec<&str> = got.iter().map(|r| r.field("number_of_attempts")).collect();
    assert_eq!(counts, ["1", "2", "3"]);
    let log = deliveries(&t, &config_id);
    assert_eq!(log.len(), 1);
    let d = &log[0];
    assert_eq!(d["status"], "failed");
    assert_eq!(d["number_of_attempts"], 3);
    assert_eq!(d["last_response_code"], 500);
    assert_eq!(d["last_response"], "answer 500");
    assert_eq!(d["type"], "CREATE");
    assert_eq!(d["resource"], "contact");
    assert!(d["last_attempt_ts"].as_i64().is_some());
    assert!(d["delivered_ts"].is_null());
    // The failure is final: no fourth attempt, however long we wait.
    assert_eq!(advance(&t, 30 * 86_400), 0);
    assert_eq!(rx.received().len(), 3);

    // Redelivered, it starts again from attempt 1.
    let delivery_id = str_of(&d["id"]);
    rx.answer(|_| Reply::Status(204));
    let r = t
        .post(
            &format!("/v2/postbackdeliveries/{delivery_id}/redeliver"),
            json!({}),
        )
        .expect(200);
    assert_eq!(r.body["postbackdelivery"]["status"], "pending");
    let got = rx.wait_for(4, WAIT);
    assert_eq!(got[3].field("number_of_attempts"), "1");
    let log = wait_log(&t, &config_id, WAIT, |l| l[0]["status"] == "delivered");
    assert_eq!(log[0]["number_of_attempts"], 1);
    assert_eq!(log[0]["last_response_code"], 204);
    assert!(log[0]["delivered_ts"].as_i64().is_some());
    let r = t
        .post(
            &format!("/v2/postbackdeliveries/{delivery_id}/redeliver"),
            json!({}),
        )
        .expect(422);
    assert!(!r.errors("status").is_empty());
    // The same delivery, by its own path, with the data sent.
    let one = t
        .get(&format!("/v2/postbackdeliveries/{delivery_id}?expand=data"))
        .expect(200)
        .body["postbackdelivery"]
        .clone();
    assert_eq!(one["data"]["id"], got[0].data()["id"]);

    // A receiver that recovers: failed twice, then acknowledged.
    let rx2 = Receiver::start("/recovers");
    let mut n = 0;
    rx2.answer(move |_| {
        n += 1;
        Reply::Status(if n <= 2 { 503 } else { 200 })
    });
    let c2 = config(
        &t,
        json!({ "resource": "contact", "url": rx2.url, "number_of_attempts": 5, "attempt_interval": 60 }),
    );
    t.contact(json!({}));
    rx2.wait_for(1, WAIT);
    first_attempts_recorded(&t);
    assert_eq!(advance(&t, 60), 1);
    assert_eq!(advance(&t, 60), 1);
    let log = deliveries(&t, &str_of(&c2["id"]));
    assert_eq!(log[0]["status"], "delivered");
    assert_eq!(log[0]["number_of_attempts"], 3);
    assert_eq!(advance(&t, 86_400), 0);
    assert_eq!(rx2.received().len(), 3, "nothing after the acknowledgement");
    // A refused connection counts as a failed attempt too.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}/gone", closed.local_addr().unwrap());
    drop(closed);
    let c3 = config(
        &t,
        json!({ "resource": "contact", "url": closed_url, "number_of_attempts": 2, "attempt_interval": 60 }),
    );
    t.contact(json!({}));
    first_attempts_recorded(&t);
    // The retry falls due with this move of the clock. The background
    // worker may be the one to make it, at the same moment, so the
    // advance's own count is not asserted here; the log is.
    advance(&t, 60);
    let log = wait_log(&t, &str_of(&c3["id"]), WAIT, |l| l[0]["status"] == "failed");
    assert_eq!(log[0]["number_of_attempts"], 2);
    assert!(log[0]["last_response_code"].is_null());
    assert!(!str_of(&log[0]["last_error"]).is_empty());
}

/// The location's "now" by its test clock.
fn clock_now(t: &Tenant) -> i64 {
    t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .expect("now")
}

/// A test clock's move makes every retry that falls due on its way, each
/// at its own moment, and the delivery log's times are on the location's
/// clock, as its `created_ts` is.
fn a_clock_move_makes_every_retry_on_its_way(app: &mut TestApp) {
    let t = app.bootstrap();
    let rx = Receiver::start("/down");
    rx.answer(|_| Reply::Status(500));
    let every_minute = config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "number_of_attempts": 5, "attempt_interval": 60 }),
    );
    let hourly = config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "number_of_attempts": 3, "attempt_interval": 3600 }),
    );
    t.contact(json!({}));
    rx.wait_for(2, WAIT);
    first_attempts_recorded(&t);
    assert_eq!(advance(&t, 600), 4, "attempts 2 to 5, a minute apart");
    assert_eq!(rx.received().len(), 6);
    let now = clock_now(&t);
    let failed = deliveries(&t, &str_of(&every_minute["id"])).remove(0);
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["number_of_attempts"], 5);
    let (created, last) = (
        failed["created_ts"].as_i64().unwrap(),
        failed["last_attempt_ts"].as_i64().unwrap(),
    );
    assert!(
        last >= created + 4 * 60 && last <= now,
        "the last attempt four minutes after the first, by the location's clock: {failed}"
    );
    // The hourly one is not due yet: its next attempt is an hour after
    // its first, by the location's clock, which the move did not change.
    let waiting = deliveries(&t, &str_of(&hourly["id"])).remove(0);
    assert_eq!(waiting["status"], "pending");
    assert_eq!(waiting["number_of_attempts"], 1);
    let first = waiting["last_attempt_ts"].as_i64().unwrap();
    assert!(first >= created && first < created + 60, "{waiting}");
    assert_eq!(waiting["next_attempt_ts"].as_i64().unwrap(), first + 3600);
    assert_eq!(advance(&t, 3600), 1);
    let delivered_later = deliveries(&t, &str_of(&hourly["id"])).remove(0);
    assert_eq!(delivered_later["number_of_attempts"], 2);
    assert!(delivered_later["last_attempt_ts"].as_i64().unwrap() >= first + 3600);
}

/// A test clock's move delivers only its own location's events (another
/// tenant's slow receiver does not hold it up), and a config never has
/// more than 64 deliveries in flight in a process, the move's included.
fn a_clock_move_keeps_to_its_location_and_the_in_flight_limit(app: &mut TestApp) {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    let t = app.bootstrap();
    let other = app.bootstrap();
    let hanging = Receiver::start("/hangs");
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = arrivals.clone();
    hanging.answer(move |_| {
        seen.lock().unwrap().push(Instant::now());
        Reply::Hang
    });
    config(&other, json!({ "resource": "contact", "url": hanging.url }));
    for _ in 0..70 {
        other.contact(json!({}));
    }
    hanging.wait_for(64, WAIT);
    let started = Instant::now();
    assert_eq!(advance(&t, 0), 0);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "another tenant's receiver held the move up for {:?}",
        started.elapsed()
    );
    assert_eq!(
        arrivals.lock().unwrap().len(),
        64,
        "64 in flight, none taken by another tenant's move"
    );
    // The tenant's own move waits for a slot of its config: the 65th
    // delivery starts only once one of the first 64 has timed out (10 s).
    advance(&other, 0);
    let arrivals = arrivals.lock().unwrap().clone();
    assert!(arrivals.len() > 64, "{}", arrivals.len());
    let waited = arrivals[64].duration_since(arrivals[0]);
    assert!(
        waited >= Duration::from_secs(9),
        "the 65th delivery started {waited:?} after the first"
    );
}

fn events_of_a_record_arrive_in_order(app: &mut TestApp) {
    let t = app.bootstrap();
    let rx = Receiver::start("/ordered");
    // The first delivery is refused once: the record's later events wait.
    let mut first = true;
    rx.answer(move |_| {
        if std::mem::take(&mut first) {
            Reply::Status(500)
        } else {
            Reply::Status(200)
        }
    });
    config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "number_of_attempts": 3, "attempt_interval": 1, "on_delete": 0 }),
    );
    let contact = t.contact(json!({ "first_name": "v0" }));
    let id = str_of(&contact["id"]);
    for i in 1..=5 {
        t.put(
            &format!("/v2/contacts/{id}"),
            json!({ "contact": { "first_name": format!("v{i}") } }),
        )
        .expect(200);
    }
    let got = rx.wait_for(7, Duration::from_secs(15));
    let seen: Vec<(String, String)> = got
        .iter()
        .map(|r| (r.field("type").to_string(), str_of(&r.data()["first_name"])))
        .collect();
    let mut expected = vec![("CREATE".to_string(), "v0".to_string())];
    expected.push(expected[0].clone());
    for i in 1..=5 {
        expected.push(("UPDATE".into(), format!("v{i}")));
    }
    assert_eq!(seen, expected, "the refused CREATE is retried before any UPDATE");
    assert_eq!(got[1].field("number_of_attempts"), "2");
}

fn signed_deliveries_verify_with_standard_webhooks(app: &mut TestApp) {
    use hmac::{Hmac, Mac};
    let t = app.bootstrap();
    let rx = Receiver::start("/signed");
    let key: [u8; 32] = rand::random();
    let secret = format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(key));
    let c = config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "signing_secret": secret }),
    );
    assert_eq!(c["has_signing_secret"], true);
    let read = t
        .get(&format!("/v2/postbackconfigs/{}", str_of(&c["id"])))
        .expect(200);
    assert!(!read.text.contains(&secret[6..]), "the secret is never returned");
    let contact = t.contact(json!({}));
    let got = rx.wait_for(1, WAIT);
    let r = &got[0];
    let msg_id = r.header("webhook-id").expect("webhook-id");
    let ts: i64 = r.header("webhook-timestamp").expect("timestamp").parse().unwrap();
    let now = chrono::Utc::now().timestamp();
    assert!((now - ts).abs() < 60);
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{msg_id}.{ts}.{}", r.body).as_bytes());
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    let header = r.header("webhook-signature").expect("signature");
    assert!(
        header.split(' ').any(|s| s == expected),
        "{header} should hold {expected}"
    );
    // A signature over another body does not match.
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{msg_id}.{ts}.{}x", r.body).as_bytes());
    let forged = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    assert!(!header.split(' ').any(|s| s == forged));
    // webhook-id is the delivery's id in the log.
    let log = deliveries(&t, &str_of(&c["id"]));
    assert_eq!(log[0]["id"], msg_id);
    assert_eq!(log[0]["record_id"], contact["id"]);
}

fn private_targets_are_refused_unless_allowed(app: &mut TestApp) {
    app.kill();
    app.extra_env
        .push(("FERROGATE_POSTBACK_ALLOW_PRIVATE".into(), "0".into()));
    app.spawn();
    let t = app.bootstrap();
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9000/hook",
    ] {
        let r = t
            .post(
                "/v2/postbackconfigs",
                json!({ "postbackconfig": { "location_id": t.location_id(), "resource": "contact", "url": url } }),
            )
            .expect(422);
        let message = r.errors("url").join(" ");
        assert!(message.contains("public"), "{url}: {message}");
    }
    config(
        &t,
        json!({ "resource": "contact", "url": "https://hooks.example.com/in" }),
    );
}

fn a_hanging_receiver_does_not_stall_others(app: &mut TestApp) {
    let t = app.bootstrap();
    let hanging = Receiver::start("/hangs");
    hanging.answer(|_| Reply::Hang);
    let healthy = Receiver::start("/healthy");
    config(&t, json!({ "resource": "contact", "url": hanging.url }));
    config(&t, json!({ "resource": "contact", "url": healthy.url }));
    for _ in 0..20 {
        t.contact(json!({}));
    }
    healthy.wait_for(20, Duration::from_secs(5));
    assert!(!hanging.received().is_empty());
}

fn undelivered_events_survive_sigkill(app: &mut TestApp) {
    let t = app.bootstrap();
    let rx = Receiver::start("/after-restart");
    // The first delivery hangs (in flight at the kill); the rest are refused.
    let mut first = true;
    rx.answer(move |_| {
        if std::mem::take(&mut first) {
            Reply::Hang
        } else {
            Reply::Status(503)
        }
    });
    let c = config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "number_of_attempts": 10, "attempt_interval": 1, "on_update": 0, "on_delete": 0 }),
    );
    let ids: Vec<String> = (0..3).map(|_| str_of(&t.contact(json!({}))["id"])).collect();
    rx.wait_for(2, WAIT);
    app.kill();
    rx.answer(|_| Reply::Status(200));
    app.spawn();
    let t = Tenant {
        base: app.base.clone(),
        ..t
    };
    let log = wait_log(&t, &str_of(&c["id"]), Duration::from_secs(20), |l| {
        l.len() == 3 && l.iter().all(|d| d["status"] == "delivered")
    });
    let mut delivered: Vec<String> = log.iter().map(|d| str_of(&d["record_id"])).collect();
    delivered.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(delivered, expected);
    // Each contact's CREATE was acknowledged by the receiver.
    let acked: std::collections::BTreeSet<String> =
        rx.received().iter().map(|r| str_of(&r.data()["id"])).collect();
    assert!(ids.iter().all(|id| acked.contains(id)));
}

/// A payload is rendered as the config's location's read-only users see
/// the record, whoever made the change: an admin's sale does not put the
/// location's keys (shown only to those who may update locations) in the
/// payload, where any reader of deliveries would see them.
fn payloads_hide_what_the_location_s_readers_may_not_see(app: &mut TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let hook = Receiver::start("/keys");
    let cfg = config(
        &t,
        json!({ "resource": "transaction", "url": hook.url, "product_transaction_id": t.cred("cc_product_transaction_id"),
            "expands": "location,created_user,changelogs" }),
    );
    let admin_view = t.get(&format!("/v2/locations/{loc}")).expect(200).body["location"].clone();
    assert!(
        admin_view["location_api_key"].is_string(),
        "the admin sees the keys"
    );
    sale(&t, "5.00");
    let sent = hook.wait_for(1, WAIT)[0].data();
    let (reader, key) = t.user(&loc, Some("2"));
    let reader = t.as_user(&reader, &key);
    let stored = reader
        .get(&format!(
            "/v2/postbackconfigs/{}/deliveries?expand=data",
            str_of(&cfg["id"])
        ))
        .expect(200)
        .body["postbackdeliveries"][0]["data"]
        .clone();
    let reader_view = reader.get(&format!("/v2/locations/{loc}")).expect(200).body["location"].clone();
    for key in ["location_api_key", "ticket_hash_key"] {
        assert_eq!(reader_view[key], Value::Null, "{key}: the reader's own read");
        assert_eq!(sent["location"][key], Value::Null, "{key} sent: {sent}");
        assert_eq!(stored["location"][key], Value::Null, "{key} stored: {stored}");
    }
    assert_eq!(
        sent["location"]["id"],
        loc.as_str(),
        "the location is still embedded"
    );
    // The admin is the location's own user: readers see who made it.
    assert_eq!(sent["created_user"]["id"], t.user_id().as_str());
    assert_eq!(sent["changelogs"][0]["user"]["id"], t.user_id().as_str());
    assert_eq!(stored, sent);
}

/// A parent's admin acting at a child: the child's payloads embed only
/// records in the child's scope, as the child's own users read them (the
/// parent's admin and the parent's contact are null there too).
fn payloads_of_a_child_show_only_what_the_child_sees(app: &mut TestApp) {
    let t = app.bootstrap();
    let child = t.location(&t.location_id(), "Branch");
    let contacts = Receiver::start("/child-contacts");
    let vaults = Receiver::start("/child-vaults");
    config(
        &t,
        json!({ "location_id": child, "resource": "contact", "url": contacts.url,
            "expands": "changelogs,created_user,location" }),
    );
    config(
        &t,
        json!({ "location_id": child, "resource": "accountvault", "url": vaults.url,
            "expands": "contact,created_user" }),
    );
    let (child_user, key) = t.user(&child, Some("2"));
    let child_reader = t.as_user(&child_user, &key);

    let contact = t.contact(json!({ "location_id": child, "first_name": "Ada" }));
    let id = str_of(&contact["id"]);
    t.put(
        &format!("/v2/contacts/{id}"),
        json!({ "contact": { "first_name": "Grace" } }),
    )
    .expect(200);
    let got = contacts.wait_for(2, WAIT);
    let own = child_reader
        .get(&format!("/v2/contacts/{id}?expand=changelogs,created_user"))
        .expect(200)
        .body["contact"]
        .clone();
    assert_eq!(own["created_user"], Value::Null, "{own}");
    assert_eq!(own["changelogs"][0]["user"], Value::Null, "{own}");
    for r in &got {
        let data = r.data();
        assert_eq!(data["created_user"], Value::Null, "{data}");
        let logs = data["changelogs"].as_array().expect("changelogs");
        assert!(!logs.is_empty());
        for log in logs {
            assert_eq!(log["user_id"], t.user_id().as_str(), "ids are the record's own");
            assert_eq!(log["user"], Value::Null, "{data}");
        }
        assert_eq!(data["location"]["id"], child.as_str());
        assert_eq!(data["location"]["location_api_key"], Value::Null, "{data}");
    }

    // A vault at the child cannot name the parent's contact (references
    // stay at their location); one the parent's admin makes there for
    // the child's contact shows the contact, not the parent's admin.
    let parents = t.contact(json!({ "first_name": "Parent" }));
    let r = t.post(
        "/v2/accountvaults",
        json!({ "accountvault": { "location_id": child, "payment_method": "cc",
            "account_number": "4111111111111111", "exp_date": "1239", "contact_id": parents["id"] } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": child, "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239", "contact_id": id } }),
        )
        .expect(201)
        .body["accountvault"]
        .clone();
    let data = vaults.wait_for(1, WAIT)[0].data();
    assert_eq!(data["id"], vault["id"]);
    assert_eq!(data["contact"]["id"], id.as_str(), "{data}");
    assert_eq!(data["created_user"], Value::Null, "{data}");
}
