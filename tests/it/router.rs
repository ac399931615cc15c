//! The router (issue 14, ADR 0020) with real `ferrogate terminal-sim`
//! processes: router transactions approved and declined with their
//! card-present data, the mock device's failures and time-outs (none
//! leaves a transaction), the overall time-out driven by the test clock,
//! a clerk's cancel, a busy and an offline device, a client that hangs
//! up, signatures, router account vaults, device terms answered on the
//! device, and, on PostgreSQL, a device connected to another node.

use crate::engine_tests;
use crate::nodes::Node;
use crate::support::sim::{terminal, Sim};
use crate::support::wait::wait_until;
use crate::support::{Client, Engine, Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

engine_tests!(
    router_sales_carry_the_card_present_data,
    the_mock_device_failures_charge_nothing,
    overall_timeout_cancel_busy_and_offline,
    a_client_that_hangs_up_still_gets_its_sale_recorded,
    a_payment_under_way_outlives_the_deadline,
    a_device_that_reconnects_takes_over,
    signatures_are_captured_after_approval,
    router_account_vaults_store_the_card_read,
    device_terms_are_answered_on_the_device,
    bad_router_requests_prompt_nobody,
    the_reference_router_samples_run,
    a_terminal_charges_the_amount_it_showed,
    terminal_timeouts_reach_the_device_and_the_gateway_applies_them,
    a_device_term_api_id_is_claimed_before_the_prompt,
    a_card_refusal_is_not_kept_under_the_idempotency_key,
    an_avs_only_approval_is_shown_as_approved,
    a_device_term_claim_holds_past_a_hang_up_until_the_prompt_ends,
);

fn sale(t: &Tenant, terminal_id: &str, amount: &str, api_id: &str, extra: Value) -> Value {
    let mut body = json!({ "payment_method": "cc", "action": "sale", "location_id": t.location_id(),
        "terminal_id": terminal_id, "transaction_amount": amount, "transaction_api_id": api_id });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    json!({ "routertransaction": body })
}

fn count(t: &Tenant, api_id: &str) -> usize {
    t.get(&format!("/v2/transactions?transaction_api_id={api_id}"))
        .expect(200)
        .body["transactions"]
        .as_array()
        .map_or(0, Vec::len)
}

/// A router transaction sent with an `Idempotency-Key`.
fn post_keyed(t: &Tenant, key: &str, body: &Value) -> Resp {
    let creds = ["developer_id", "user_id", "user_api_key"].map(|k| t.cred(k));
    let headers = [
        ("developer-id", creds[0].as_str()),
        ("user-id", creds[1].as_str()),
        ("user-api-key", creds[2].as_str()),
        ("idempotency-key", key),
    ];
    Client { base: t.base.clone() }.send(
        "POST",
        "/v2/routertransactions",
        &headers,
        Some(&body.to_string()),
    )
}

/// A POST on a thread of its own (the router holds it open).
fn post_later(t: &Tenant, path: &str, body: Value) -> std::thread::JoinHandle<Resp> {
    let (t, path) = (t.clone(), path.to_string());
    std::thread::spawn(move || t.post(&path, body))
}

fn advance(t: &Tenant, seconds: i64) {
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": seconds } }),
    )
    .expect(200);
}

fn router_sales_carry_the_card_present_data(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({ "serial_number": "SN-ROUTER-1" }));
    // Not yet connected: never registered, and the online check is 503.
    let before = t.get(&format!("/v2/terminals/{tid}")).expect(200);
    assert_eq!(before.body["terminal"]["last_registration_ts"], Value::Null);
    assert_eq!(before.body["terminal"]["is_provisioned"], false);
    let r = t.get(&format!("/v2/terminals/{tid}/isonline")).expect(503);
    assert_eq!(r.body["terminal_result"], "terminal_offline");
    let sim = Sim::start(&app.base, &tid, &secret, &["--local-ip", "10.1.2.3"]);
    let online = t.get(&format!("/v2/terminals/{tid}/isonline")).expect(200);
    assert_eq!(online.body["terminal"]["is_online"], true);
    let registered = t.get(&format!("/v2/terminals/{tid}")).expect(200);
    let reg = &registered.body["terminal"];
    assert!(reg["last_registration_ts"].as_i64().unwrap() > 0, "{reg}");
    assert_eq!(reg["is_provisioned"], true);
    assert_eq!(reg["local_ip_address"], "10.1.2.3");

    // 7.16: EMV contact credit with a PIN.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.16", "r-emv", json!({ "billing_zip": "12345" })),
        )
        .expect(201);
    let tx = &r.body["routertransaction"];
    assert_eq!(tx["status_id"], 101, "{}", r.text);
    assert_eq!(tx["entry_mode_id"], "C");
    // The card was in the reader.
    assert_eq!(tx["card_present"], true, "{}", r.text);
    assert_eq!(tx["terminal_id"], json!(tid));
    assert_eq!(tx["terminal_serial_number"], "SN-ROUTER-1");
    assert_eq!(tx["trx_source_id"], 12);
    assert_eq!(tx["transaction_amount"], "7.16");
    assert_eq!(tx["billing_zip"], "12345");
    let emv = &tx["emv_receipt_data"];
    assert!(emv["AID"].is_string() && emv["TC"].is_string(), "{emv}");
    assert_eq!(emv["CVM"], "PIN VERIFIED");
    let id = tx["id"].as_str().unwrap().to_string();
    assert!(
        tx["_links"]["self"]["href"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/v2/transactions/{id}")),
        "{}",
        r.text
    );
    assert!(tx.get("exp_date").is_none(), "exp_date only with save_account");
    // The same transaction through the transactions endpoint.
    let read = t.get(&format!("/v2/transactions/{id}")).expect(200);
    assert_eq!(read.body["transaction"]["entry_mode_id"], "C");
    assert_eq!(read.body["transaction"]["terminal_id"], json!(tid));
    let last4 = read.body["transaction"]["last_four"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(tx["last_four"], json!(last4));

    // 7.54: swiped Visa; 7.11: a swiped debit card with a PIN.
    let swiped = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.54", "r-swipe", json!({})),
        )
        .expect(201);
    assert_eq!(swiped.body["routertransaction"]["entry_mode_id"], "S");
    assert_eq!(swiped.body["routertransaction"]["card_present"], true);
    assert_eq!(swiped.body["routertransaction"]["account_type"], "visa");
    assert_eq!(swiped.body["routertransaction"]["emv_receipt_data"], Value::Null);
    let keyed_amex = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.52", "r-amex", json!({})),
        )
        .expect(201);
    assert_eq!(keyed_amex.body["routertransaction"]["entry_mode_id"], "K");
    // Keyed on the terminal: not a card read.
    assert_eq!(keyed_amex.body["routertransaction"]["card_present"], false);
    assert_eq!(keyed_amex.body["routertransaction"]["account_type"], "amex");

    // A router transaction's street takes 64 characters (32 elsewhere).
    let street = "1234 A Rather Long Boulevard Name, Building 7, Suite 12";
    assert!(street.len() > 32 && street.len() <= 64);
    let long = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.14", "r-street", json!({ "billing_street": street })),
        )
        .expect(201);
    assert_eq!(long.body["routertransaction"]["billing_street"], street);

    // The sandbox processor still decides: $5.00 is declined.
    let d = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "5.00", "r-deny", json!({})),
        )
        .expect(201);
    assert_eq!(d.body["routertransaction"]["status_id"], 301, "{}", d.text);
    assert_eq!(d.body["routertransaction"]["reason_code_id"], 1500);

    // authonly, then captured through the transactions endpoint.
    let a = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "12.00", "r-auth", json!({ "action": "authonly" })),
        )
        .expect(201);
    let a_id = a.body["routertransaction"]["id"].as_str().unwrap().to_string();
    assert_eq!(a.body["routertransaction"]["status_id"], 102);
    let done = t
        .put(
            &format!("/v2/transactions/{a_id}"),
            json!({ "transaction": { "action": "authcomplete" } }),
        )
        .expect(200);
    assert_eq!(done.body["transaction"]["status_id"], 101);

    // save_account stores the card on the contact, and the answer carries
    // its expiry.
    let contact = t.contact(json!({ "last_name": "Holder" }));
    let cid = contact["id"].as_str().unwrap();
    let s = t
        .post(
            "/v2/routertransactions",
            sale(
                &t,
                &tid,
                "3.00",
                "r-save",
                json!({ "save_account": 1, "contact_id": cid }),
            ),
        )
        .expect(201);
    let stx = &s.body["routertransaction"];
    assert!(
        stx["exp_date"].as_str().is_some_and(|e| e.len() == 4),
        "{}",
        s.text
    );
    let vault_id = stx["account_vault_id"].as_str().expect("vault id").to_string();
    let v = t.get(&format!("/v2/accountvaults/{vault_id}")).expect(200);
    assert_eq!(v.body["accountvault"]["contact_id"], json!(cid));
    assert_eq!(v.body["accountvault"]["last_four"], "1111");

    // An Idempotency-Key replays the first answer without the terminal.
    let requests_before = sim.events("request").len();
    let body = sale(&t, &tid, "4.00", "r-idem", json!({}));
    let first = post_keyed(&t, "router-key-1", &body).expect(201);
    let again = post_keyed(&t, "router-key-1", &body).expect(201);
    assert_eq!(
        first.body["routertransaction"]["id"],
        again.body["routertransaction"]["id"]
    );
    assert_eq!(sim.events("request").len(), requests_before + 1);
    assert_eq!(count(&t, "r-idem"), 1);

    // Router transactions settle with the rest of the batch.
    let batch = read.body["transaction"]["transaction_batch_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);

    // No card number in the log.
    for number in [
        "4111111111111111",
        "5454545454545454",
        "371449635398431",
        "6011000995500000",
    ] {
        assert!(!app.log().contains(number), "card number in the server log");
    }
}

fn the_mock_device_failures_charge_nothing(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let sim = Sim::start(&app.base, &tid, &secret, &[]);
    for (amount, code) in [
        ("5.01", "connect_error"),
        ("5.31", "timeout"),
        ("5.99", "aborted"),
        ("7.70", "transaction_timeout"),
        ("7.72", "card_entry_timeout"),
        ("7.73", "pin_entry_timeout"),
    ] {
        let api_id = format!("fail-{code}");
        let r = t
            .post(
                "/v2/routertransactions",
                sale(&t, &tid, amount, &api_id, json!({})),
            )
            .expect(422);
        assert_eq!(r.body["terminal_result"], code, "{}", r.text);
        assert!(!r.errors("terminal_id").is_empty(), "{}", r.text);
        assert_eq!(count(&t, &api_id), 0, "{code} left a transaction");
    }
    // The same api id may be used again once nothing was made of it.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.10", "fail-timeout", json!({})),
        )
        .expect(201);
    assert_eq!(r.body["routertransaction"]["status_id"], 101);
    assert_eq!(sim.events("request").len(), 7);
}

fn overall_timeout_cancel_busy_and_offline(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 30 } }));
    let mut sim = Sim::start(&app.base, &tid, &secret, &[]);

    // 7.71: the device never answers; 30 s of the location's time later
    // the request is cancelled on the device and nothing is charged.
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "7.71", "hang-1", json!({})),
    );
    sim.wait_events("request", 1);
    // Busy meanwhile.
    let busy = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "1.00", "busy-1", json!({})),
        )
        .expect(409);
    assert_eq!(busy.body["terminal_result"], "terminal_busy");
    advance(&t, 31);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "overall_timeout", "{}", r.text);
    sim.wait_events("cancelled", 1);
    assert_eq!(count(&t, "hang-1") + count(&t, "busy-1"), 0);

    // A clerk's cancel.
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "7.71", "hang-2", json!({})),
    );
    sim.wait_events("request", 2);
    let c = t
        .post(&format!("/v2/terminals/{tid}/cancel"), json!({}))
        .expect(202);
    assert_eq!(c.body["terminal"]["cancel_requested"], true);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "cancelled", "{}", r.text);
    assert_eq!(count(&t, "hang-2"), 0);

    // The device goes away in the middle of a request.
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "7.71", "hang-3", json!({})),
    );
    sim.wait_events("request", 3);
    sim.kill();
    let r = waiting.join().unwrap().expect(503);
    assert_eq!(r.body["terminal_result"], "terminal_offline", "{}", r.text);
    // Offline: refused at once, nothing made.
    wait_until("the terminal offline", Duration::from_secs(10), || {
        (t.get(&format!("/v2/terminals/{tid}/isonline")).status == 503).then_some(())
    });
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "1.00", "off-1", json!({})),
        )
        .expect(503);
    assert_eq!(r.body["terminal_result"], "terminal_offline");
    t.post(&format!("/v2/terminals/{tid}/cancel"), json!({}))
        .expect(503);
    assert_eq!(count(&t, "hang-3") + count(&t, "off-1"), 0);

    // Back online: a reconnected device works again.
    let _again = Sim::start(&app.base, &tid, &secret, &[]);
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "back-1", json!({})),
    )
    .expect(201);
}

fn a_client_that_hangs_up_still_gets_its_sale_recorded(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    // The cardholder takes a moment: the client is gone by then.
    let sim = Sim::start(&app.base, &tid, &secret, &["--think-ms", "300"]);
    let body = sale(&t, &tid, "9.00", "gone-1", json!({}));
    post_and_hang_up(app, &t, "/v2/routertransactions", &body, &sim);
    let tx = wait_until(
        "the sale of a client that hung up",
        Duration::from_secs(20),
        || {
            let r = t.get("/v2/transactions?transaction_api_id=gone-1").expect(200);
            let tx = r.body["transactions"].as_array()?.first()?.clone();
            (!tx["status_id"].is_null()).then_some(tx)
        },
    );
    assert_eq!(tx["status_id"], 101);
    assert_eq!(tx["terminal_id"], json!(tid));
    // The device was told the outcome.
    assert_eq!(sim.wait_events("result", 1)[0]["approved"], true);
}

/// The deadline arrives while the processor is still answering (8.01: a
/// delayed answer): the payment is finished and answered, not cancelled.
fn a_payment_under_way_outlives_the_deadline(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 30 } }));
    let sim = Sim::start(&app.base, &tid, &secret, &[]);
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "8.01", "late-1", json!({})),
    );
    sim.wait_events("request", 1);
    // The device reports the request before it sends the card: the
    // payment is under way once its pending row is written.
    wait_until("late-1 to be under way", Duration::from_secs(20), || {
        let r = t.get("/v2/transactions?transaction_api_id=late-1").expect(200);
        r.body["transactions"].as_array()?.first().map(|_| ())
    });
    advance(&t, 31);
    let r = waiting.join().unwrap().expect(201);
    assert_eq!(
        r.body["routertransaction"]["transaction_api_id"], "late-1",
        "{}",
        r.text
    );
    assert!(!r.body["routertransaction"]["status_id"].is_null());
    assert_eq!(count(&t, "late-1"), 1);
    assert!(sim.events("cancelled").is_empty(), "{:?}", sim.lines());

    // A card the cardholder is slow to present meets the deadline first:
    // cancelled on the device, nothing made.
    let (slow, slow_secret) = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 30 } }));
    let hesitant = Sim::start(&app.base, &slow, &slow_secret, &["--think-ms", "60000"]);
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &slow, "1.00", "late-2", json!({})),
    );
    hesitant.wait_events("request", 1);
    advance(&t, 31);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "overall_timeout");
    hesitant.wait_events("cancelled", 1);
    assert_eq!(count(&t, "late-2"), 0);
    // A router vault cancelled or offline leaves no vault either.
    let contact = t.contact(json!({ "last_name": "NoVault" }));
    let cid = contact["id"].as_str().unwrap().to_string();
    let store = |terminal: &str| {
        json!({ "routeraccountvault": { "payment_method": "cc", "action": "store", "location_id": t.location_id(),
            "contact_id": cid, "terminal_id": terminal } })
    };
    let waiting = post_later(&t, "/v2/routeraccountvaults", store(&slow));
    hesitant.wait_events("request", 2);
    t.post(&format!("/v2/terminals/{slow}/cancel"), json!({}))
        .expect(202);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "cancelled");
    let (unplugged, _) = terminal(&t, json!({}));
    t.post("/v2/routeraccountvaults", store(&unplugged)).expect(503);
    let vaults = t.get(&format!("/v2/accountvaults?contact_id={cid}")).expect(200);
    assert_eq!(vaults.body["accountvaults"].as_array().unwrap().len(), 0);
}

/// A device that connects again (a new connection of the same terminal)
/// takes over from the old one, which is closed; requests reach the new.
fn a_device_that_reconnects_takes_over(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let mut first = Sim::start(&app.base, &tid, &secret, &["--no-reconnect"]);
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "re-1", json!({})),
    )
    .expect(201);
    let second = Sim::start(&app.base, &tid, &secret, &[]);
    // The first connection was closed by the gateway.
    first.wait_exit(Duration::from_secs(20));
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "re-2", json!({})),
    )
    .expect(201);
    assert_eq!(first.events("request").len(), 1);
    assert_eq!(second.events("request").len(), 1);
    t.get(&format!("/v2/terminals/{tid}/isonline")).expect(200);
}

fn signatures_are_captured_after_approval(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let sim = Sim::start(&app.base, &tid, &secret, &[]);
    // 7.15: EMV contact credit verified by signature.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.15", "sig-1", json!({})),
        )
        .expect(201);
    let id = r.body["routertransaction"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["routertransaction"]["status_id"], 101);
    let read = t
        .get(&format!("/v2/transactions/{id}?expand=signature"))
        .expect(200);
    let sig = &read.body["transaction"]["signature"];
    assert_eq!(sig["resource"], "Transaction", "{}", read.text);
    assert_eq!(sig["resource_id"], json!(id));
    assert!(sig["signature"].as_str().unwrap().starts_with("iVBOR"));
    let results = sim.wait_events("result", 1);
    assert_eq!(results[0]["capture_signature"], true);

    // 7.75: the cardholder never touches the pad. The sale stands (the
    // money moved), without a signature.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.75", "sig-2", json!({})),
        )
        .expect(201);
    let id = r.body["routertransaction"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["routertransaction"]["status_id"], 101);
    let read = t
        .get(&format!("/v2/transactions/{id}?expand=signature"))
        .expect(200);
    assert_eq!(read.body["transaction"]["signature"], Value::Null);

    // 7.76: the signature is never submitted; the same.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.76", "sig-5", json!({})),
        )
        .expect(201);
    let id = r.body["routertransaction"]["id"].as_str().unwrap().to_string();
    let read = t
        .get(&format!("/v2/transactions/{id}?expand=signature"))
        .expect(200);
    assert_eq!(read.body["transaction"]["signature"], Value::Null);

    // A PIN-verified card is not asked to sign; a terminal without a pad
    // never asks.
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "7.16", "sig-3", json!({})),
    )
    .expect(201);
    let results = sim.wait_events("result", 4);
    assert_eq!(results[1]["capture_signature"], true);
    assert_eq!(results[3]["capture_signature"], false);
    let (no_pad, no_pad_secret) = terminal(&t, json!({ "sig_capture_enable": 0 }));
    let pad_less = Sim::start(&app.base, &no_pad, &no_pad_secret, &[]);
    t.post(
        "/v2/routertransactions",
        sale(&t, &no_pad, "7.15", "sig-4", json!({})),
    )
    .expect(201);
    assert_eq!(pad_less.wait_events("result", 1)[0]["capture_signature"], false);
}

fn router_account_vaults_store_the_card_read(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let _sim = Sim::start(
        &app.base,
        &tid,
        &secret,
        &[
            "--card",
            "5454545454545454",
            "--exp",
            "1130",
            "--name",
            "PAT TESTER",
        ],
    );
    let contact = t.contact(json!({ "last_name": "Vaulted" }));
    let cid = contact["id"].as_str().unwrap();
    let body = |extra: Value| {
        let mut b = json!({ "payment_method": "cc", "action": "store", "location_id": t.location_id(),
            "contact_id": cid, "terminal_id": tid });
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        json!({ "routeraccountvault": b })
    };
    let r = t.post("/v2/routeraccountvaults", body(json!({}))).expect(201);
    let v = &r.body["accountvault"];
    assert_eq!(v["first_six"], "545454", "{}", r.text);
    assert_eq!(v["last_four"], "5454");
    assert_eq!(v["account_type"], "mc");
    assert_eq!(v["exp_date"], "1130");
    assert_eq!(v["account_holder_name"], "PAT TESTER");
    assert_eq!(v["contact_id"], json!(cid));
    assert!(!r.text.contains("5454545454545454"));
    // The vault pays like any other.
    let vid = v["id"].as_str().unwrap();
    let pay = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "account_vault_id": vid,
                "transaction_amount": "2.00" } }),
        )
        .expect(201);
    assert_eq!(pay.body["transaction"]["status_id"], 101);
    // Refusals: the fields of the spec, all required.
    for (extra, field) in [
        (json!({ "action": "sale" }), "action"),
        (json!({ "payment_method": "ach" }), "payment_method"),
        (json!({ "contact_id": null }), "contact_id"),
        (json!({ "account_number": "4111111111111111" }), "account_number"),
        (
            json!({ "terminal_id": "no-such-terminal-0000000000" }),
            "terminal_id",
        ),
    ] {
        let r = t.post("/v2/routeraccountvaults", body(extra)).expect(422);
        assert!(!r.errors(field).is_empty(), "{field}: {}", r.text);
    }
}

fn device_terms_are_answered_on_the_device(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (agree, agree_secret) = terminal(&t, json!({}));
    let (refuse, refuse_secret) = terminal(&t, json!({}));
    let (lapse, lapse_secret) = terminal(&t, json!({}));
    let _a = Sim::start(&app.base, &agree, &agree_secret, &["--terms", "accept"]);
    let _r = Sim::start(&app.base, &refuse, &refuse_secret, &["--terms", "decline"]);
    let _l = Sim::start(&app.base, &lapse, &lapse_secret, &["--terms", "timeout"]);
    let term = |terminal_id: &str, api_id: &str| {
        t.post(
            "/v2/deviceterms",
            json!({ "deviceterm": { "location_id": loc, "terminal_id": terminal_id, "require_signature": 1,
                "terms_conditions": "I agree to pay.", "device_terms_api_id": api_id } }),
        )
    };
    // Accepted and signed on the device: the answer shows the signature,
    // as the spec's field table lists it, and so does a read.
    let r = term(&agree, "dt-1").expect(201);
    let id = r.body["deviceterm"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1000, "{}", r.text);
    let signed = &r.body["deviceterm"]["signature"];
    assert_eq!(signed["resource"], "DeviceTerm", "{}", r.text);
    assert_eq!(signed["resource_id"], json!(id));
    assert!(signed["signature"].as_str().unwrap().starts_with("iVBOR"));
    let read = t.get(&format!("/v2/deviceterms/{id}")).expect(200);
    assert_eq!(read.body["deviceterm"]["signature"]["id"], signed["id"]);
    let listed = t.get(&format!("/v2/deviceterms?id={id}")).expect(200);
    assert_eq!(listed.body["deviceterms"][0]["signature"]["id"], signed["id"]);
    let e = t
        .get(&format!("/v2/deviceterms/{id}?expand=signature,reason_code"))
        .expect(200);
    assert_eq!(e.body["deviceterm"]["signature"]["resource"], "DeviceTerm");
    assert_eq!(e.body["deviceterm"]["reason_code"]["id"], 1000);
    // Declined on the device; then tried again by its api id on a
    // terminal whose cardholder accepts.
    let r = term(&refuse, "dt-2").expect(201);
    let declined = r.body["deviceterm"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1601);
    let r = term(&agree, "dt-2").expect(200);
    assert_eq!(r.body["deviceterm"]["id"], json!(declined));
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1000);
    assert_eq!(r.body["deviceterm"]["terminal_id"], json!(agree));
    // A prompt that times out is a decline, with no signature.
    let r = term(&lapse, "dt-3").expect(201);
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1601);
    assert_eq!(r.body["deviceterm"]["signature"], Value::Null, "{}", r.text);
    // Taken api ids and an offline terminal: refused, nothing recorded.
    term(&agree, "dt-1").expect(422);
    let (offline, _) = terminal(&t, json!({}));
    let r = term(&offline, "dt-4").expect(503);
    assert_eq!(r.body["terminal_result"], "terminal_offline");
    let list = t.get("/v2/deviceterms").expect(200);
    assert_eq!(list.body["deviceterms"].as_array().unwrap().len(), 3);
}

fn bad_router_requests_prompt_nobody(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let sim = Sim::start(&app.base, &tid, &secret, &[]);
    let child = t.location(&t.location_id(), "Branch");
    let (elsewhere, _) = {
        let r = t
            .post(
                "/v2/terminals",
                json!({ "terminal": { "location_id": child, "serial_number": "SN-B" } }),
            )
            .expect(201);
        (r.body["terminal"]["id"].as_str().unwrap().to_string(), ())
    };
    let other = app.bootstrap();
    for (extra, field) in [
        (json!({ "account_number": "4111111111111111" }), "account_number"),
        (
            json!({ "track_data": "%B4111111111111111^X/Y^2512?" }),
            "track_data",
        ),
        (json!({ "payment_method": "ach" }), "payment_method"),
        (json!({ "action": "void" }), "action"),
        (json!({ "action": "debit" }), "payment_method"),
        (json!({ "transaction_amount": "-1.00" }), "transaction_amount"),
        (json!({ "billing_street": "x".repeat(65) }), "billing_street"),
        (json!({ "transaction_amount": null }), "transaction_amount"),
        (json!({ "terminal_id": null }), "terminal_id"),
        (json!({ "terminal_id": elsewhere }), "terminal_id"),
        (
            json!({ "product_transaction_id": t.cred("ach_product_transaction_id") }),
            "product_transaction_id",
        ),
        (
            json!({ "contact_id": "no-such-contact-00000000000" }),
            "contact_id",
        ),
        // Tax is part of the amount: refused before the device is asked.
        (json!({ "tax": "9.00" }), "tax"),
        // The spec's router billing_zip is 10 characters (12 elsewhere).
        (json!({ "billing_zip": "12345-67890" }), "billing_zip"),
        // The lodging dates' window depends on the request alone.
        (
            json!({ "checkin_date": "2026-01-01", "checkout_date": "2026-12-31" }),
            "checkout_date",
        ),
        (
            json!({ "checkin_date": "2026-05-10", "checkout_date": "2026-05-01" }),
            "checkout_date",
        ),
        (json!({ "terminal_id": 12345 }), "terminal_id"),
        (json!({ "terminal_id": [1] }), "terminal_id"),
    ] {
        let r = t
            .post(
                "/v2/routertransactions",
                sale(&t, &tid, "1.00", "bad-1", extra.clone()),
            )
            .expect(422);
        assert!(!r.errors(field).is_empty(), "{extra}: {}", r.text);
    }
    // A terminal id that is not a string is said to be one, not blank.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "1.00", "bad-3", json!({ "terminal_id": 12345 })),
        )
        .expect(422);
    assert_eq!(
        r.errors("terminal_id"),
        ["Terminal Id must be a string."],
        "{}",
        r.text
    );
    let contact = t.contact(json!({ "last_name": "Typed" }));
    let r = t
        .post(
            "/v2/routeraccountvaults",
            json!({ "routeraccountvault": { "payment_method": "cc", "action": "store",
                "location_id": t.location_id(), "contact_id": contact["id"], "terminal_id": [1] } }),
        )
        .expect(422);
    assert_eq!(
        r.errors("terminal_id"),
        ["Terminal Id must be a string."],
        "{}",
        r.text
    );
    // Another tenant cannot reach the terminal.
    let r = other
        .post(
            "/v2/routertransactions",
            sale(&other, &tid, "1.00", "bad-2", json!({})),
        )
        .expect(422);
    assert!(!r.errors("terminal_id").is_empty(), "{}", r.text);
    other.get(&format!("/v2/terminals/{tid}/isonline")).expect(404);
    other
        .post(&format!("/v2/terminals/{tid}/cancel"), json!({}))
        .expect(404);
    // An api id already taken.
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "taken-1", json!({})),
    )
    .expect(201);
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "1.00", "taken-1", json!({})),
        )
        .expect(422);
    assert!(!r.errors("transaction_api_id").is_empty());
    // Bodies that are not requests.
    let r = t
        .post("/v2/routertransactions", json!({ "transaction": {} }))
        .expect(422);
    assert!(!r.errors("routertransaction").is_empty());
    t.send("POST", "/v2/routertransactions", Some("[1,2")).expect(400);
    // Only the one good sale reached the device.
    assert_eq!(sim.events("request").len(), 1);

    // The device's own door: a wrong secret is refused, and the path wants
    // a WebSocket.
    let mut wrong = Sim::spawn(&app.base, &tid, "not-the-secret", &["--no-reconnect"]);
    assert!(!wrong.wait_exit(Duration::from_secs(20)).success());
    assert!(
        wrong.lines().iter().any(|l| l.contains("401")),
        "{:?}",
        wrong.lines()
    );
    let plain = Client {
        base: app.base.clone(),
    }
    .send(
        "GET",
        "/router/v1/connect",
        &[("terminal-id", &tid), ("terminal-secret", &secret)],
        None,
    );
    assert_eq!(plain.status, 400, "{}", plain.text);
    let none = Client {
        base: app.base.clone(),
    }
    .send("GET", "/router/v1/connect", &[], None);
    assert_eq!(none.status, 401);
}

/// PostgreSQL: the device is connected to node B; requests to node A
/// reach it, and its end (node B killed) is seen by node A.
#[test]
fn a_device_on_another_node() {
    let Some(app) = TestApp::start(Engine::Postgres) else {
        crate::support::no_postgres();
        return;
    };
    let t = app.bootstrap();
    let node_b = Node::start(&app);
    let b = node_b.tenant(&t);
    let (tid, secret) = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 30 } }));
    let mut sim = Sim::start(&b.base, &tid, &secret, &["--no-reconnect"]);
    // A sale on node A, the device on node B.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.16", "two-1", json!({})),
        )
        .expect(201);
    assert_eq!(r.body["routertransaction"]["status_id"], 101, "{}", r.text);
    assert_eq!(r.body["routertransaction"]["entry_mode_id"], "C");
    t.get(&format!("/v2/terminals/{tid}/isonline")).expect(200);
    // A device failure, a signature and terms cross the nodes too.
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.72", "two-2", json!({})),
        )
        .expect(422);
    assert_eq!(r.body["terminal_result"], "card_entry_timeout");
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "7.19", "two-3", json!({})),
        )
        .expect(201);
    let id = r.body["routertransaction"]["id"].as_str().unwrap();
    let read = t
        .get(&format!("/v2/transactions/{id}?expand=signature"))
        .expect(200);
    assert_eq!(read.body["transaction"]["signature"]["resource"], "Transaction");
    let term = t
        .post(
            "/v2/deviceterms",
            json!({ "deviceterm": { "location_id": t.location_id(), "terminal_id": tid,
                "require_signature": 1, "terms_conditions": "Across nodes." } }),
        )
        .expect(201);
    assert_eq!(term.body["deviceterm"]["reason_code_id"], 1000);
    // Terms too long for one notification (non-ASCII, 4,000 characters)
    // cross the nodes too.
    let long = "é".repeat(4000);
    let term = t
        .post(
            "/v2/deviceterms",
            json!({ "deviceterm": { "location_id": t.location_id(), "terminal_id": tid,
                "require_signature": 0, "terms_conditions": long } }),
        )
        .expect(201);
    assert_eq!(
        term.body["deviceterm"]["terms_conditions"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        4000
    );
    let shown = sim.wait_events("request", 5);
    assert_eq!(shown[4]["job"]["terms"].as_str().unwrap().chars().count(), 4000);
    // The overall time-out on node A, the device on node B; then a
    // clerk's cancel sent to node A.
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "7.71", "two-4", json!({})),
    );
    sim.wait_events("request", 6);
    advance(&t, 31);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "overall_timeout");
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "7.71", "two-5", json!({})),
    );
    sim.wait_events("request", 7);
    t.post(&format!("/v2/terminals/{tid}/cancel"), json!({}))
        .expect(202);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "cancelled");
    assert_eq!(count(&t, "two-4") + count(&t, "two-5"), 0);
    // The device moves to node A: node B lets go of it, and node B's
    // requests reach it through node A.
    let moved = Sim::start(&app.base, &tid, &secret, &[]);
    sim.wait_exit(Duration::from_secs(20));
    b.post(
        "/v2/routertransactions",
        sale(&b, &tid, "7.16", "two-7", json!({})),
    )
    .expect(201);
    assert_eq!(moved.events("request").len(), 1);
    // The device goes back to node B, which then dies: node A sees the
    // device offline.
    drop(moved);
    let sim = Sim::start(&b.base, &tid, &secret, &["--no-reconnect"]);
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "two-8", json!({})),
    )
    .expect(201);
    drop(node_b);
    wait_until("node A to see the device gone", Duration::from_secs(20), || {
        (t.get(&format!("/v2/terminals/{tid}/isonline")).status == 503).then_some(())
    });
    t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "two-6", json!({})),
    )
    .expect(503);
    drop(sim);
}

fn vault_count(t: &Tenant) -> i64 {
    t.get("/v2/accountvaults").expect(200).body["meta"]["pagination"]["totalCount"]
        .as_i64()
        .unwrap()
}

/// The reference's router samples as they are: cSharp/sale.json sends
/// `save_account` without a contact (the spec stores the card only with
/// one, so it is ignored), and Python/main.py also sends `account_type`
/// (a read-only field of the answer: the type comes from the card read).
fn the_reference_router_samples_run(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({ "serial_number": "SN-SAMPLES" }));
    let _sim = Sim::start(&app.base, &tid, &secret, &[]);
    let loc = t.location_id();
    let csharp = json!({ "routertransaction": { "action": "sale", "payment_method": "cc",
        "location_id": loc, "terminal_id": tid, "transaction_amount": "1.00", "tax": "0.01",
        "order_num": "Invoice 1700000000", "description": "SDK Test Mock Terminal CC Sale",
        "save_account": 1, "billing_street": "123 Main St", "billing_zip": "31405" } });
    let python = json!({ "routertransaction": { "action": "sale", "account_type": "mc",
        "payment_method": "cc", "location_id": loc, "terminal_id": tid,
        "transaction_amount": "1.00", "order_num": "Invoice 1700000001",
        "description": "SDK Test CC Terminal Sale", "save_account": 1,
        "billing_street": "123 Main St", "billing_zip": "31405" } });
    let vaults = vault_count(&t);
    for (sample, body) in [("cSharp/sale.json", csharp), ("Python/main.py", python)] {
        let r = t.post("/v2/routertransactions", body);
        assert_eq!(r.status, 201, "{sample}: {}", r.text);
        let tx = &r.body["routertransaction"];
        assert_eq!(tx["status_id"], 101, "{sample}: {}", r.text);
        assert_eq!(tx["account_vault_id"], Value::Null, "{sample}: nothing saved");
        assert!(tx.get("exp_date").is_none(), "{sample}: {}", r.text);
        assert_eq!(
            tx["account_type"], "visa",
            "{sample}: the card's type, not the one sent"
        );
    }
    assert_eq!(vault_count(&t), vaults, "no vault without a contact");
    // A contact that does not exist is still refused before the device.
    let r = t.post(
        "/v2/routertransactions",
        sale(
            &t,
            &tid,
            "1.00",
            "r-ghost",
            json!({ "save_account": 1,
            "contact_id": "no-such-contact-00000000000" }),
        ),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("contact_id").is_empty(), "{}", r.text);
    // Other fields outside the router's list are still refused.
    let r = t.post(
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "r-cvv", json!({ "cvv": "123" })),
    );
    assert_eq!(r.status, 422, "{}", r.text);
}

/// Posts `body` as `t` on a connection of its own, and resets that
/// connection (SO_LINGER 0) once `sim`'s terminal has the request: the
/// server's connection ends with an error, and only work that runs on its
/// own still finishes.
fn post_and_hang_up(app: &TestApp, t: &Tenant, path: &str, body: &Value, sim: &Sim) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let body = body.to_string();
    let addr = app.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for k in ["developer_id", "user_id", "user_api_key"] {
        head.push_str(&format!("{}: {}\r\n", k.replace('_', "-"), t.cred(k)));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let asked = sim.events("request").len();
    sim.wait_events("request", asked + 1);
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let set = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "SO_LINGER");
    drop(stream);
}

/// A device term whose client hangs up while the cardholder reads it
/// goes on (a request's work is its own task): its api id stays claimed
/// while the terms are on the device, and is given back when the prompt
/// ends, here unanswered and recorded declined, so a retry may show it.
fn a_device_term_claim_holds_past_a_hang_up_until_the_prompt_ends(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (slow, slow_secret) = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 30 } }));
    let (quick, quick_secret) = terminal(&t, json!({}));
    let hesitant = Sim::start(&app.base, &slow, &slow_secret, &["--think-ms", "60000"]);
    let ready = Sim::start(&app.base, &quick, &quick_secret, &[]);
    let term = |terminal_id: &str| {
        json!({ "deviceterm": { "location_id": loc, "terminal_id": terminal_id,
            "require_signature": 0, "terms_conditions": "I agree.", "device_terms_api_id": "hang-1" } })
    };
    post_and_hang_up(app, &t, "/v2/deviceterms", &term(&slow), &hesitant);
    let r = t.post("/v2/deviceterms", term(&quick)).expect(422);
    assert!(!r.errors("device_terms_api_id").is_empty(), "{}", r.text);
    assert!(ready.events("request").is_empty());
    advance(&t, 31);
    wait_until("the hung-up term recorded", Duration::from_secs(20), || {
        let r = t.get("/v2/deviceterms?device_terms_api_id=hang-1").expect(200);
        let term = r.body["deviceterms"].as_array()?.first()?.clone();
        (term["reason_code_id"] == 1601).then_some(())
    });
    let accepted = wait_until("the api id given back", Duration::from_secs(20), || {
        let r = t.post("/v2/deviceterms", term(&quick));
        (r.status != 422).then_some(r)
    });
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    assert_eq!(
        accepted.body["deviceterm"]["reason_code_id"], 1000,
        "{}",
        accepted.text
    );
    assert_eq!(ready.events("request").len(), 1);
}

/// The cardholder approves the amount the device shows: an account's
/// surcharge is not added to a terminal payment (the reference lists no
/// consumer fees on terminals), while the same account's API sale takes it.
fn a_terminal_charges_the_amount_it_showed(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let out = app.cli(&["surcharge", "--product-transaction-id", &cc, "--percent", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (tid, secret) = terminal(&t, json!({}));
    let _sim = Sim::start(&app.base, &tid, &secret, &[]);
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "10.00", "r-fee", json!({})),
        )
        .expect(201);
    let tx = &r.body["routertransaction"];
    assert_eq!(tx["status_id"], 101, "{}", r.text);
    assert_eq!(tx["transaction_amount"], "10.00", "{}", r.text);
    assert!(
        tx["surcharge_amount"].is_null() || tx["surcharge_amount"] == "0.00",
        "{}",
        r.text
    );
    let api = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1230",
                "transaction_amount": "10.00", "location_id": t.location_id() } }),
        )
        .expect(201);
    assert_eq!(
        api.body["transaction"]["transaction_amount"], "10.30",
        "{}",
        api.text
    );
}

/// A change of `terminal_timeouts` reaches a connected device with its
/// next request, and the gateway applies the prompt's time-outs itself to
/// a device that never reports (the cardholder here takes a minute; the
/// test clock ends the prompt first).
fn terminal_timeouts_reach_the_device_and_the_gateway_applies_them(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let sim = Sim::start(&app.base, &tid, &secret, &["--think-ms", "60000"]);
    t.put(
        &format!("/v2/terminals/{tid}"),
        json!({ "terminal": { "terminal_timeouts": { "card_entry_timeout": 20,
            "pin_entry_timeout": 20, "tip_cashback_timeout": 20, "device_terms_prompt_timeout": 5 } } }),
    )
    .expect(200);
    let waiting = post_later(
        &t,
        "/v2/routertransactions",
        sale(&t, &tid, "1.00", "slow-card", json!({})),
    );
    let shown = sim.wait_events("request", 1);
    let timeouts = &shown[0]["timeouts"];
    assert_eq!(timeouts["card_entry_timeout"], 20, "{}", shown[0]);
    assert_eq!(timeouts["pin_entry_timeout"], 20);
    assert_eq!(timeouts["device_terms_prompt_timeout"], 5);
    assert_eq!(timeouts["overall_timeout"], 300);
    assert_eq!(timeouts["status_display_time"], 7);
    // No card within card entry, PIN entry and the tip screen (and 5 s
    // for the device's own report): stopped long before the overall 300 s.
    advance(&t, 66);
    let r = waiting.join().unwrap().expect(422);
    assert_eq!(r.body["terminal_result"], "card_entry_timeout", "{}", r.text);
    sim.wait_events("cancelled", 1);
    assert_eq!(count(&t, "slow-card"), 0);

    // Terms unanswered past device_terms_prompt_timeout: declined.
    let waiting = post_later(
        &t,
        "/v2/deviceterms",
        json!({ "deviceterm": { "location_id": t.location_id(), "terminal_id": tid,
            "require_signature": 0, "terms_conditions": "Take your time.",
            "device_terms_api_id": "slow-terms" } }),
    );
    let shown = sim.wait_events("request", 2);
    assert_eq!(shown[1]["job"]["kind"], "terms", "{}", shown[1]);
    advance(&t, 11);
    let r = waiting.join().unwrap().expect(201);
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1601, "{}", r.text);
    sim.wait_events("cancelled", 2);
}

/// Two requests naming the same new `device_terms_api_id`: the second is
/// refused before its cardholder is asked, and may retry once the first
/// is recorded declined.
fn a_device_term_api_id_is_claimed_before_the_prompt(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (slow, slow_secret) = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 30 } }));
    let (quick, quick_secret) = terminal(&t, json!({}));
    let hesitant = Sim::start(&app.base, &slow, &slow_secret, &["--think-ms", "60000"]);
    let ready = Sim::start(&app.base, &quick, &quick_secret, &[]);
    let term = |terminal_id: &str| {
        json!({ "deviceterm": { "location_id": loc, "terminal_id": terminal_id,
            "require_signature": 1, "terms_conditions": "I agree.", "device_terms_api_id": "race-1" } })
    };
    let waiting = post_later(&t, "/v2/deviceterms", term(&slow));
    hesitant.wait_events("request", 1);
    let r = t.post("/v2/deviceterms", term(&quick)).expect(422);
    assert!(!r.errors("device_terms_api_id").is_empty(), "{}", r.text);
    assert!(ready.events("request").is_empty(), "{:?}", ready.lines());
    // The first ends unanswered: declined, and its api id may be retried.
    advance(&t, 31);
    let r = waiting.join().unwrap().expect(201);
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1601, "{}", r.text);
    let r = t.post("/v2/deviceterms", term(&quick)).expect(200);
    assert_eq!(r.body["deviceterm"]["reason_code_id"], 1000, "{}", r.text);
    assert_eq!(ready.events("request").len(), 1);
    // Accepted: taken for good, and nobody is asked again.
    t.post("/v2/deviceterms", term(&slow)).expect(422);
    assert_eq!(hesitant.events("request").len(), 1);
    let list = t.get("/v2/deviceterms?device_terms_api_id=race-1").expect(200);
    assert_eq!(list.body["deviceterms"].as_array().unwrap().len(), 1);
}

/// A refusal caused by the card the terminal read (here an expired one)
/// is not kept under the `Idempotency-Key`: the repeat asks the terminal
/// again, where the cardholder presents another card; the payment it
/// makes is then what the key replays.
fn a_card_refusal_is_not_kept_under_the_idempotency_key(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let mut expired = Sim::start(&app.base, &tid, &secret, &["--exp", "0120"]);
    let body = sale(&t, &tid, "4.00", "r-card-key", json!({}));
    let r = post_keyed(&t, "router-card-key", &body).expect(422);
    assert!(r.text.contains("Exp Date is in the past"), "{}", r.text);
    expired.kill();
    let valid = Sim::start(&app.base, &tid, &secret, &[]);
    let r = post_keyed(&t, "router-card-key", &body).expect(201);
    assert_eq!(r.body["routertransaction"]["status_id"], 101, "{}", r.text);
    let again = post_keyed(&t, "router-card-key", &body).expect(201);
    assert_eq!(
        again.body["routertransaction"]["id"],
        r.body["routertransaction"]["id"]
    );
    assert_eq!(valid.events("request").len(), 1);
    assert_eq!(count(&t, "r-card-key"), 1);
}

/// An AVS-only check's approval (status 121) is shown on the device as
/// approved, as status_id says; it moves no money, so nobody signs.
fn an_avs_only_approval_is_shown_as_approved(app: &TestApp) {
    let t = app.bootstrap();
    let (tid, secret) = terminal(&t, json!({}));
    let sim = Sim::start(&app.base, &tid, &secret, &["--cvm", "signature"]);
    let r = t
        .post(
            "/v2/routertransactions",
            sale(&t, &tid, "0", "r-avs", json!({ "action": "avsonly" })),
        )
        .expect(201);
    assert_eq!(r.body["routertransaction"]["status_id"], 121, "{}", r.text);
    let shown = sim.wait_events("result", 1);
    assert_eq!(shown[0]["approved"], true, "{}", shown[0]);
    assert_eq!(shown[0]["capture_signature"], false);
}
