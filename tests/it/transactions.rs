//! Transactions on the sandbox processor over HTTP: every POST and PUT
//! action and its refusals, the sandbox's test tables, the ACH status
//! simulator, batches and settlement, list filters, api ids and Level 3.

use crate::engine_tests;
use crate::support::db::db;
use crate::support::{error_fields, fields, str_of, Resp, Tenant, TestApp};
use ferrogate::processor::sandbox::{DECLINE_TRIGGERS, TEST_CARDS};
use ferrogate::processor::settlement::SETTLEMENT_ERRORS;
use ferrogate::processor::ReasonCode;
use serde_json::{json, Value};

engine_tests!(
    sale_sources,
    save_account_and_vault_from_transaction,
    authonly_avsonly_force,
    card_refunds,
    ach_actions,
    authcomplete_and_authincrement,
    void_rules,
    partialreversal_and_tipadjust,
    edit_action,
    is_expands_agree_with_actions,
    request_refusals,
    sandbox_decline_triggers,
    sandbox_partial_authorization,
    sandbox_avs_values,
    sandbox_cvv_values,
    sandbox_test_cards_approve,
    sandbox_delayed_sale,
    ach_simulator,
    batch_membership,
    batch_lists_and_filters,
    settle_success_and_permissions,
    settlement_error_table,
    settlement_reads_the_last_transaction,
    concurrent_sales_and_settles_count_each_sale_once,
    rejected_batch_rule,
    transaction_list_filters,
    transaction_api_ids,
    level3_lifecycle,
    level3_first_posts_at_once,
    level3_validation,
    level3_eligibility,
    follow_up_fields_of_the_matrix,
);

const VISA: &str = "4111111111111111";
const MC: &str = "5454545454545454";
const AMEX: &str = "371449635398431";
const TRACK: &str = "%B4111111111111111^TEST CARD/VI^21121015432112345678?";
const BANK_NUMBER: &str = "123456789012";
const POSITIVE: &str = "Transaction amount must be greater than zero for the following actions: \
     [sale, authonly, authcomplete, authincrement, debit, credit, refund, tipadjust]";

/// A future MMYY.
fn exp() -> String {
    let now = chrono::Utc::now();
    format!("12{:02}", (chrono::Datelike::year(&now) + 2) % 100)
}

/// Today's date in UTC (the bootstrap location's time zone).
fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

/// Cents as the API writes them: 123 -> "1.23".
fn money(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// `base` with the keys of `extra` set; a null in `extra` removes the key.
fn with(mut base: Value, extra: Value) -> Value {
    let obj = base.as_object_mut().expect("object");
    for (k, v) in extra.as_object().expect("object") {
        if v.is_null() {
            obj.remove(k);
        } else {
            obj.insert(k.clone(), v.clone());
        }
    }
    base
}

fn card(action: &str, amount: &str, extra: Value) -> Value {
    with(
        json!({ "action": action, "payment_method": "cc", "account_number": VISA,
            "exp_date": exp(), "transaction_amount": amount }),
        extra,
    )
}

fn bank(t: &Tenant, action: &str, amount: &str, extra: Value) -> Value {
    with(
        json!({ "action": action, "payment_method": "ach",
            "product_transaction_id": t.cred("ach_product_transaction_id"),
            "account_number": BANK_NUMBER, "routing": "072000326", "account_type": "checking",
            "account_holder_name": "Jane Doe", "ach_sec_code": "WEB", "transaction_amount": amount }),
        extra,
    )
}

fn post_tx(t: &Tenant, body: Value) -> Resp {
    t.post("/v2/transactions", json!({ "transaction": body }))
}

fn put_tx(t: &Tenant, id: &str, body: Value) -> Resp {
    t.put(&format!("/v2/transactions/{id}"), json!({ "transaction": body }))
}

/// POSTs a transaction that must be created; returns the record.
#[track_caller]
fn create(t: &Tenant, body: Value) -> Value {
    post_tx(t, body).expect(201).body["transaction"].clone()
}

/// A PUT action that must succeed; returns the record.
#[track_caller]
fn act(t: &Tenant, id: &str, body: Value) -> Value {
    put_tx(t, id, body).expect(200).body["transaction"].clone()
}

#[track_caller]
fn sale(t: &Tenant, amount: &str) -> Value {
    create(t, card("sale", amount, json!({})))
}

#[track_caller]
fn authonly(t: &Tenant, amount: &str) -> Value {
    create(t, card("authonly", amount, json!({})))
}

/// A force puts an exact amount into the batch (no sandbox amount rules).
#[track_caller]
fn force(t: &Tenant, amount: &str) -> Value {
    create(t, card("force", amount, json!({ "auth_code": "abc123" })))
}

#[track_caller]
fn debit(t: &Tenant, amount: &str) -> Value {
    create(t, bank(t, "debit", amount, json!({})))
}

fn id(v: &Value) -> String {
    str_of(&v["id"])
}

#[track_caller]
fn get_tx(t: &Tenant, id: &str, expand: &str) -> Value {
    let path = if expand.is_empty() {
        format!("/v2/transactions/{id}")
    } else {
        format!("/v2/transactions/{id}?expand={expand}")
    };
    t.get(&path).expect(200).body["transaction"].clone()
}

#[track_caller]
fn get_batch(t: &Tenant, id: &str) -> Value {
    t.get(&format!("/v2/transactionbatches/{id}")).expect(200).body["transactionbatch"].clone()
}

fn settle(t: &Tenant, batch_id: &str) -> Resp {
    t.post(&format!("/v2/transactionbatches/{batch_id}/settle"), json!({}))
}

/// Settles a batch that must settle; returns the batch.
#[track_caller]
fn settled(t: &Tenant, batch_id: &str) -> Value {
    let b = settle(t, batch_id).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 2, "{b}");
    b
}

/// The ACH status simulator.
fn simulate(t: &Tenant, id: &str, status: Value) -> Resp {
    t.put(
        &format!("/v2/developer/transactions/{id}"),
        json!({ "transaction": { "status_id": status } }),
    )
}

/// Asserts a 422 whose only error is `field` with exactly `message`.
#[track_caller]
fn refused(r: Resp, field: &str, message: &str) {
    let r = r.expect(422);
    assert_eq!(error_fields(&r), fields(&[field]), "{}", r.text);
    assert_eq!(r.errors(field), vec![message.to_string()], "{}", r.text);
}

fn is_hex6(code: &Value) -> bool {
    code.as_str().is_some_and(|c| {
        c.len() == 6
            && c.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The common fields of an approved card sale.
#[track_caller]
fn assert_approved_sale(s: &Value, amount: &str, entry_mode: &str, account_type: &str, number: &str) {
    assert_eq!(s["status_id"], 101, "{s}");
    assert_eq!(s["type_id"], 20);
    assert_eq!(s["reason_code_id"], 1000);
    assert!(is_hex6(&s["auth_code"]), "{}", s["auth_code"]);
    assert_eq!(s["payment_method"], "cc");
    assert_eq!(s["first_six"], &number[..6]);
    assert_eq!(s["last_four"], &number[number.len() - 4..]);
    assert_eq!(s["account_type"], account_type);
    assert_eq!(s["entry_mode_id"], entry_mode);
    assert_eq!(s["trx_source_id"], 12);
    assert_eq!(s["batch"], "1");
    assert!(s["transaction_batch_id"].is_string());
    assert_eq!(s["transaction_amount"], amount);
    assert_eq!(s["auth_amount"], amount);
    assert_eq!(s["level3_indicator"], true);
    for hidden in [
        "account_number",
        "exp_date",
        "cvv",
        "track_data",
        "state",
        "processor_reference",
    ] {
        assert!(s.get(hidden).is_none(), "{hidden} is shown: {s}");
    }
}

fn sale_sources(app: &TestApp) {
    let t = app.bootstrap();
    // A card number.
    let r = post_tx(
        &t,
        card("sale", "10.00", json!({ "account_holder_name": "Jane Doe" })),
    )
    .expect(201);
    assert!(!r.text.contains(VISA), "{}", r.text);
    let by_number = r.body["transaction"].clone();
    assert_approved_sale(&by_number, "10.00", "K", "visa", VISA);
    assert_eq!(by_number["account_holder_name"], "Jane Doe");
    assert_eq!(by_number["is_accountvault"], false);
    assert_eq!(by_number["account_vault_id"], Value::Null);
    assert_eq!(
        by_number["product_transaction_id"],
        t.cred("cc_product_transaction_id")
    );
    assert_eq!(by_number["location_id"], t.location_id());

    // An account vault, by id and by api id.
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "account_number": MC, "exp_date": exp(), "account_holder_name": "Vault Holder",
                "account_vault_api_id": "vault1" } }),
        )
        .expect(201)
        .body["accountvault"]
        .clone();
    let vault_id = id(&vault);
    for source in [
        json!({ "account_vault_id": vault_id }),
        json!({ "account_vault_api_id": "vault1" }),
    ] {
        let body = with(
            card(
                "sale",
                "11.00",
                json!({ "account_number": null, "exp_date": null }),
            ),
            source,
        );
        let r = post_tx(&t, body).expect(201);
        assert!(!r.text.contains(MC), "{}", r.text);
        let s = &r.body["transaction"];
        assert_approved_sale(s, "11.00", "K", "mc", MC);
        assert_eq!(s["account_vault_id"], vault_id.as_str());
        assert_eq!(s["is_accountvault"], true);
        assert_eq!(s["account_holder_name"], "Vault Holder");
    }

    // An earlier transaction as the token.
    let r = post_tx(
        &t,
        json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "12.00",
            "previous_transaction_id": id(&by_number) }),
    )
    .expect(201);
    assert!(!r.text.contains(VISA));
    let s = &r.body["transaction"];
    assert_approved_sale(s, "12.00", "K", "visa", VISA);
    assert_eq!(s["previous_transaction_id"], id(&by_number).as_str());
    assert_eq!(s["account_holder_name"], "Jane Doe");

    // A swiped track.
    let r = post_tx(
        &t,
        json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "13.00",
            "track_data": TRACK }),
    )
    .expect(201);
    assert!(!r.text.contains(VISA) && !r.text.contains("21121015432112345678"));
    let s = &r.body["transaction"];
    assert_approved_sale(s, "13.00", "S", "visa", VISA);
    assert_eq!(s["account_holder_name"], "TEST CARD/VI");

    // Amex: 15 digits.
    let s = create(&t, card("sale", "14.00", json!({ "account_number": AMEX })));
    assert_approved_sale(&s, "14.00", "K", "amex", AMEX);

    // Numbers: plain JSON numbers are amounts too.
    let s = create(&t, card("sale", "x", json!({ "transaction_amount": 15 })));
    assert_eq!(s["transaction_amount"], "15.00");

    // Nothing of a full number in the lists either.
    let list = t.get("/v2/transactions?page_size=100").expect(200);
    assert_eq!(list.body["meta"]["pagination"]["totalCount"], 7);
    for number in [VISA, MC, AMEX] {
        assert!(!list.text.contains(number));
    }
    // All of them are in batch 1.
    let batches = t.get("/v2/transactionbatches").expect(200);
    assert_eq!(batches.body["meta"]["pagination"]["totalCount"], 1);
    let b = &batches.body["transactionbatches"][0];
    assert_eq!(b["transaction_count"], 7);
    assert_eq!(b["total_amount"], "86.00");
}

fn save_account_and_vault_from_transaction(app: &TestApp) {
    let t = app.bootstrap();
    let contact = t.contact(json!({ "contact_api_id": "saver" }));
    let contact_id = id(&contact);
    let s = create(
        &t,
        card(
            "sale",
            "10.00",
            json!({ "save_account": 1, "contact_id": contact_id, "account_holder_name": "Jo Saver",
                "billing_zip": "32606" }),
        ),
    );
    assert_eq!(s["status_id"], 101);
    assert_eq!(s["contact_id"], contact_id.as_str());
    let vault_id = str_of(&s["account_vault_id"]);
    let v = t.get(&format!("/v2/accountvaults/{vault_id}")).expect(200).body["accountvault"].clone();
    assert_eq!(v["contact_id"], contact_id.as_str());
    assert_eq!(v["payment_method"], "cc");
    assert_eq!(v["first_six"], "411111");
    assert_eq!(v["last_four"], "1111");
    assert_eq!(v["account_type"], "visa");
    assert_eq!(v["account_holder_name"], "Jo Saver");
    assert_eq!(v["billing_zip"], "32606");
    // The saved vault pays.
    let again = create(
        &t,
        json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "3.00",
            "account_vault_id": vault_id }),
    );
    assert_eq!(again["status_id"], 101);
    assert_eq!(again["contact_id"], contact_id.as_str(), "the vault's contact");

    // Without a contact nothing is charged.
    refused(
        post_tx(&t, card("sale", "10.00", json!({ "save_account": 1 }))),
        "contact_id",
        "Contact Id cannot be blank. (save_account stores the account on a contact.)",
    );
    // A declined sale saves nothing.
    let declined = create(
        &t,
        card(
            "sale",
            "5.00",
            json!({ "save_account": 1, "contact_id": contact_id }),
        ),
    );
    assert_eq!(declined["status_id"], 301);
    assert_eq!(declined["account_vault_id"], Value::Null);
    // A bank account too.
    let d = create(
        &t,
        bank(
            &t,
            "debit",
            "7.00",
            json!({ "save_account": 1, "contact_id": contact_id }),
        ),
    );
    let bank_vault = t
        .get(&format!("/v2/accountvaults/{}", str_of(&d["account_vault_id"])))
        .expect(200)
        .body["accountvault"]
        .clone();
    assert_eq!(bank_vault["payment_method"], "ach");
    assert_eq!(bank_vault["last_four"], "9012");
    assert_eq!(bank_vault["routing"], "072000326");
    let vaults = t.get("/v2/accountvaults").expect(200);
    assert_eq!(vaults.body["meta"]["pagination"]["totalCount"], 2);

    // avsonly with save_account checks and stores the card.
    let v = create(
        &t,
        json!({ "action": "avsonly", "payment_method": "cc", "account_number": AMEX,
            "exp_date": exp(), "billing_zip": "32606", "save_account": 1,
            "contact_api_id": "saver" }),
    );
    assert_eq!(
        (v["status_id"].clone(), v["avs"].clone()),
        (json!(121), json!("STREET"))
    );
    let avs_vault = t
        .get(&format!("/v2/accountvaults/{}", str_of(&v["account_vault_id"])))
        .expect(200)
        .body["accountvault"]
        .clone();
    assert_eq!(avs_vault["contact_id"], contact_id.as_str());
    assert_eq!(avs_vault["account_type"], "amex");
    assert_eq!(
        t.get("/v2/accountvaults").expect(200).body["meta"]["pagination"]["totalCount"],
        3
    );

    // POST /v2/accountvaults with previous_transaction_id.
    let plain = create(&t, card("sale", "4.00", json!({ "account_number": MC })));
    let r = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "previous_transaction_id": id(&plain) } }),
        )
        .expect(201);
    assert!(!r.text.contains(MC));
    let v = &r.body["accountvault"];
    assert_eq!(v["payment_method"], "cc");
    assert_eq!(v["first_six"], "545454");
    assert_eq!(v["last_four"], "5454");
    assert_eq!(v["account_type"], "mc");
    let s = create(
        &t,
        json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "2.50",
            "account_vault_id": id(v) }),
    );
    assert_eq!(
        (s["status_id"].clone(), s["last_four"].clone()),
        (json!(101), json!("5454"))
    );
    refused(
        t.post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "previous_transaction_id": "01a1fe751c63719db8b8f59b25161469" } }),
        ),
        "previous_transaction_id",
        "previous_transaction_id provided is not valid",
    );
}

fn authonly_avsonly_force(app: &TestApp) {
    let t = app.bootstrap();
    let a = authonly(&t, "10.00");
    assert_eq!(a["status_id"], 102);
    assert_eq!(a["type_id"], 20);
    assert_eq!(a["reason_code_id"], 1000);
    assert!(is_hex6(&a["auth_code"]));
    assert_eq!(a["transaction_amount"], "10.00");
    assert_eq!(a["auth_amount"], "10.00");
    assert_eq!(a["batch"], Value::Null);
    assert_eq!(a["transaction_batch_id"], Value::Null);
    assert_eq!(a["level3_indicator"], true);

    let v = create(
        &t,
        json!({ "action": "avsonly", "payment_method": "cc", "account_number": VISA,
            "exp_date": exp(), "billing_street": "5800 NW 39th AVE", "billing_zip": "32606" }),
    );
    assert_eq!(v["status_id"], 121);
    assert_eq!(v["type_id"], 21);
    assert_eq!(v["reason_code_id"], 1000);
    assert_eq!(v["transaction_amount"], "0.00");
    assert_eq!(v["auth_amount"], "0.00");
    assert_eq!(v["avs"], "GOOD");
    assert_eq!(v["avs_enhanced"], "Y");
    assert_eq!(v["batch"], Value::Null);
    assert_eq!(v["level3_indicator"], false);
    // The deny address is reported, not declined, on avsonly.
    let v = create(
        &t,
        json!({ "action": "avsonly", "payment_method": "cc", "account_number": VISA,
            "exp_date": exp(), "billing_street": "2831 NW 41st St STE J", "billing_zip": "32615",
            "transaction_amount": "0.00" }),
    );
    assert_eq!(
        (
            v["status_id"].clone(),
            v["avs"].clone(),
            v["avs_enhanced"].clone()
        ),
        (json!(121), json!("BAD"), json!("N"))
    );
    refused(
        post_tx(&t, card("avsonly", "1.00", json!({}))),
        "transaction_amount",
        "An avsonly request carries no amount (send 0 or leave it out).",
    );

    let f = force(&t, "12.34");
    assert_eq!(f["status_id"], 101);
    assert_eq!(f["type_id"], 20);
    assert_eq!(f["reason_code_id"], 1002);
    assert_eq!(f["auth_code"], "abc123");
    assert_eq!(f["transaction_amount"], "12.34");
    assert_eq!(f["batch"], "1");
    for code in ["abc12", "abc1234", "a"] {
        refused(
            post_tx(&t, card("force", "1.00", json!({ "auth_code": code }))),
            "auth_code",
            "Auth Code must be exactly 6 characters.",
        );
    }
    refused(
        post_tx(&t, card("force", "1.00", json!({}))),
        "auth_code",
        "Auth Code cannot be blank.",
    );
    refused(
        post_tx(&t, card("sale", "1.00", json!({ "auth_code": "abc123" }))),
        "auth_code",
        "Auth Code is not accepted for the sale action.",
    );
    // Only the force is in the batch.
    let b = t.get("/v2/transactionbatches").expect(200);
    assert_eq!(b.body["meta"]["pagination"]["totalCount"], 1);
    assert_eq!(b.body["transactionbatches"][0]["transaction_count"], 1);
    assert_eq!(b.body["transactionbatches"][0]["total_amount"], "12.34");
}

fn card_refunds(app: &TestApp) {
    let t = app.bootstrap();
    let orig = sale(&t, "10.00");
    let orig_id = id(&orig);
    let refund = |amount: &str| {
        post_tx(
            &t,
            json!({ "action": "refund", "payment_method": "cc", "transaction_amount": amount,
                "previous_transaction_id": orig_id }),
        )
    };
    refused(
        refund("1.00"),
        "previous_transaction_id",
        "The transaction is not settled yet; void it instead.",
    );
    settled(&t, &str_of(&orig["transaction_batch_id"]));

    let r1 = refund("4.00").expect(201).body["transaction"].clone();
    assert_eq!(r1["status_id"], 111);
    assert_eq!(r1["type_id"], 30);
    assert_eq!(r1["reason_code_id"], 1000);
    assert_eq!(r1["transaction_amount"], "4.00");
    assert_eq!(r1["previous_transaction_id"], orig_id.as_str());
    assert_eq!(r1["first_six"], "411111");
    assert_eq!(r1["last_four"], "1111");
    assert_eq!(r1["batch"], "2", "a new batch after the settlement");
    refused(
        refund("7.00"),
        "transaction_amount",
        "Transaction Amount cannot exceed the amount left to refund (6.00).",
    );
    let r2 = refund("6.00").expect(201).body["transaction"].clone();
    assert_eq!(r2["status_id"], 111);
    refused(
        refund("0.01"),
        "previous_transaction_id",
        "The transaction has been refunded in full.",
    );
    assert_eq!(get_tx(&t, &orig_id, "is_refundable")["is_refundable"], false);
    refused(refund("0.00"), "transaction_amount", POSITIVE);

    // A void of a refund gives its amount back to the original.
    let voided = act(&t, &id(&r1), json!({ "action": "void" }));
    assert_eq!(voided["status_id"], 201);
    assert_eq!(get_tx(&t, &orig_id, "is_refundable")["is_refundable"], true);
    refused(
        refund("4.01"),
        "transaction_amount",
        "Transaction Amount cannot exceed the amount left to refund (4.00).",
    );
    let r3 = refund("4.00").expect(201).body["transaction"].clone();

    // A refund is not refundable itself.
    refused(
        post_tx(
            &t,
            json!({ "action": "refund", "payment_method": "cc", "transaction_amount": "1.00",
                "previous_transaction_id": id(&r2) }),
        ),
        "previous_transaction_id",
        "Only approved card sales can be refunded; this one is Refunded (111).",
    );

    // An unreferenced refund to a card.
    let u = create(&t, card("refund", "5.00", json!({})));
    assert_eq!(u["status_id"], 111);
    assert_eq!(u["type_id"], 30);
    assert_eq!(u["previous_transaction_id"], Value::Null);
    assert_eq!(u["transaction_amount"], "5.00");
    assert_eq!(u["batch"], "2");

    // Batch 2: refunds count against the total; the voided one left it.
    let b = get_batch(&t, &str_of(&r3["transaction_batch_id"]));
    assert_eq!(b["batch_num"], 2);
    assert_eq!(b["transaction_count"], 3);
    assert_eq!(b["total_amount"], "-15.00");
}

fn ach_actions(app: &TestApp) {
    let t = app.bootstrap();
    let d = debit(&t, "15.00");
    assert_eq!(d["status_id"], 131);
    assert_eq!(d["type_id"], 50);
    assert_eq!(d["reason_code_id"], 1000);
    assert_eq!(d["payment_method"], "ach");
    assert_eq!(d["transaction_amount"], "15.00");
    assert!(
        str_of(&d["auth_code"]).starts_with("AUTH NUM "),
        "{}",
        d["auth_code"]
    );
    assert_eq!(d["batch"], Value::Null);
    assert_eq!(d["transaction_batch_id"], Value::Null);
    assert_eq!(d["effective_date"], today());
    assert_eq!(d["ach_sec_code"], "WEB");
    assert_eq!(d["account_type"], "checking");
    assert_eq!(d["routing"], "072000326");
    assert_eq!(d["last_four"], "9012");
    assert_eq!(d["first_six"], Value::Null);
    assert_eq!(d["level3_indicator"], false);
    assert!(d.get("account_number").is_none());

    refused(
        post_tx(
            &t,
            bank(&t, "debit", "1.00", json!({ "product_transaction_id": null })),
        ),
        "product_transaction_id",
        "Product Transaction Id cannot be blank.",
    );
    refused(
        post_tx(&t, bank(&t, "debit", "1.00", json!({ "payment_method": "cc" }))),
        "payment_method",
        "Payment Method must be ach for the debit action.",
    );

    // credit: ACH only, SEC code CCD only.
    let c = create(&t, bank(&t, "credit", "20.00", json!({ "ach_sec_code": "CCD" })));
    assert_eq!(c["status_id"], 131);
    assert_eq!(c["type_id"], 40);
    assert_eq!(c["ach_sec_code"], "CCD");
    refused(
        post_tx(&t, bank(&t, "credit", "20.00", json!({}))),
        "ach_sec_code",
        "Merchant-initiated credits use SEC code CCD.",
    );
    refused(
        post_tx(&t, card("credit", "20.00", json!({ "exp_date": null }))),
        "payment_method",
        "Payment Method must be ach for the credit action.",
    );

    // An ACH refund: of a settled (134) debit, in full, once.
    let refund = |orig: &str, amount: &str| {
        post_tx(
            &t,
            json!({ "action": "refund", "payment_method": "ach", "transaction_amount": amount,
                "product_transaction_id": t.cred("ach_product_transaction_id"),
                "previous_transaction_id": orig }),
        )
    };
    let d_id = id(&d);
    refused(
        refund(&d_id, "15.00"),
        "previous_transaction_id",
        "Only settled ACH debits (134) can be refunded; this one is Pending Origination (131).",
    );
    simulate(&t, &d_id, json!(133)).expect(200);
    simulate(&t, &d_id, json!(134)).expect(200);
    refused(
        refund(&d_id, "10.00"),
        "transaction_amount",
        "ACH debits are refunded in full only; send a credit for a partial amount.",
    );
    let r = refund(&d_id, "15.00").expect(201).body["transaction"].clone();
    assert_eq!(r["status_id"], 131);
    assert_eq!(r["type_id"], 30);
    assert_eq!(r["transaction_amount"], "15.00");
    assert_eq!(r["previous_transaction_id"], d_id.as_str());
    assert_eq!(r["last_four"], "9012");
    assert_eq!(r["batch"], Value::Null);
    refused(
        refund(&d_id, "15.00"),
        "previous_transaction_id",
        "The debit has already been refunded.",
    );
    refused(
        refund(&id(&c), "20.00"),
        "previous_transaction_id",
        "Only ACH debits can be refunded; send a credit instead.",
    );
    // A refund the bank voids (the simulator's 201) gives its amount back,
    // once: the debit can be refunded again.
    let voided = simulate(&t, &id(&r), json!(201)).expect(200);
    assert_eq!(voided.body["transaction"]["transaction_amount"], "0.00");
    let again = refund(&d_id, "15.00").expect(201).body["transaction"].clone();
    refused(
        refund(&d_id, "15.00"),
        "previous_transaction_id",
        "The debit has already been refunded.",
    );
    assert_ne!(again["id"], r["id"]);

    // A bank vault and an earlier transaction are sources too.
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "ach",
                "account_number": "987654321", "routing": "021000021", "account_type": "savings",
                "is_company": 0, "account_holder_name": "Sam Saver" } }),
        )
        .expect(201)
        .body["accountvault"]
        .clone();
    let by_vault = create(
        &t,
        json!({ "action": "debit", "payment_method": "ach", "transaction_amount": "6.00",
            "product_transaction_id": t.cred("ach_product_transaction_id"),
            "account_vault_id": id(&vault) }),
    );
    assert_eq!(by_vault["status_id"], 131);
    assert_eq!(by_vault["account_type"], "savings");
    assert_eq!(by_vault["routing"], "021000021");
    assert_eq!(by_vault["ach_sec_code"], "WEB", "the vault's");
    assert_eq!(by_vault["last_four"], "4321");
    assert_eq!(by_vault["account_holder_name"], "Sam Saver");
    assert_eq!(by_vault["is_accountvault"], true);
    let back = create(
        &t,
        json!({ "action": "credit", "payment_method": "ach", "transaction_amount": "2.00",
            "product_transaction_id": t.cred("ach_product_transaction_id"),
            "previous_transaction_id": id(&by_vault), "ach_sec_code": "CCD" }),
    );
    assert_eq!(
        (back["status_id"].clone(), back["type_id"].clone()),
        (json!(131), json!(40))
    );
    assert_eq!(back["last_four"], "4321");
    assert_eq!(back["previous_transaction_id"], id(&by_vault).as_str());

    // A debit pending origination can be voided.
    let d2 = debit(&t, "9.00");
    let v = act(&t, &id(&d2), json!({ "action": "void" }));
    assert_eq!(v["status_id"], 201);
    assert_eq!(v["reason_code_id"], 1200);
    assert_eq!(v["transaction_amount"], "0.00");
    refused(
        put_tx(&t, &d_id, json!({ "action": "void" })),
        "action",
        "Only ACH transactions pending origination (131) can be voided; this one is Settled (134).",
    );
    // No ACH transaction is ever batched.
    assert_eq!(
        t.get("/v2/transactionbatches").expect(200).body["meta"]["pagination"]["totalCount"],
        0
    );
}

fn authcomplete_and_authincrement(app: &TestApp) {
    let t = app.bootstrap();
    let a = authonly(&t, "10.00");
    let a_id = id(&a);
    let inc = act(
        &t,
        &a_id,
        json!({ "action": "authincrement", "transaction_amount": "15.00" }),
    );
    assert_eq!(inc["status_id"], 102);
    assert_eq!(inc["transaction_amount"], "15.00");
    assert_eq!(inc["auth_amount"], "15.00");
    assert_eq!(inc["auth_code"], a["auth_code"]);
    assert_eq!(inc["batch"], Value::Null);
    refused(
        put_tx(
            &t,
            &a_id,
            json!({ "action": "authincrement", "transaction_amount": "12.00" }),
        ),
        "transaction_amount",
        "Transaction Amount is the new authorized total and must be above the current 15.00.",
    );
    refused(
        put_tx(&t, &a_id, json!({ "action": "authincrement" })),
        "transaction_amount",
        "Transaction Amount cannot be blank.",
    );
    refused(
        put_tx(
            &t,
            &a_id,
            json!({ "action": "authcomplete", "transaction_amount": "15.01" }),
        ),
        "transaction_amount",
        "Transaction Amount cannot exceed the authorized amount (15.00).",
    );
    let done = act(
        &t,
        &a_id,
        json!({ "action": "authcomplete", "transaction_amount": "12.00" }),
    );
    assert_eq!(done["status_id"], 101);
    assert_eq!(done["reason_code_id"], 1001);
    assert_eq!(done["type_id"], 20);
    assert_eq!(done["transaction_amount"], "12.00");
    assert_eq!(done["auth_code"], a["auth_code"]);
    assert_eq!(done["batch"], "1");
    assert!(done["transaction_batch_id"].is_string());
    let not_open = "Only open card authorizations (authonly, 102) can be completed or incremented; \
                    this one is Approved (101).";
    refused(
        put_tx(&t, &a_id, json!({ "action": "authcomplete" })),
        "action",
        not_open,
    );
    let declined = sale(&t, "5.00");
    assert_eq!(declined["status_id"], 301, "5.00 is a decline trigger");
    refused(
        put_tx(&t, &id(&declined), json!({ "action": "authcomplete" })),
        "action",
        "Only open card authorizations (authonly, 102) can be completed or incremented; \
         this one is Declined (301).",
    );
    let s = sale(&t, "7.00");
    refused(
        put_tx(&t, &id(&s), json!({ "action": "authcomplete" })),
        "action",
        not_open,
    );
    refused(
        put_tx(
            &t,
            &id(&s),
            json!({ "action": "authincrement", "transaction_amount": "9.00" }),
        ),
        "action",
        not_open,
    );
    // A declined increment leaves the authorization as it was (1661).
    let small = authonly(&t, "5.50");
    let r = act(
        &t,
        &id(&small),
        json!({ "action": "authincrement", "transaction_amount": "6.05" }),
    );
    assert_eq!(r["status_id"], 102);
    assert_eq!(r["reason_code_id"], 1661);
    assert_eq!(r["response_message"], "Declined AuthIncrement");
    assert_eq!(
        (r["transaction_amount"].clone(), r["auth_amount"].clone()),
        (json!("5.50"), json!("5.50"))
    );
    act(&t, &id(&small), json!({ "action": "void" }));
    // A partial approval completes for at most what was approved.
    let partial = create(
        &t,
        card(
            "authonly",
            "2.01",
            json!({ "allow_partial_authorization_override": 1 }),
        ),
    );
    refused(
        put_tx(
            &t,
            &id(&partial),
            json!({ "action": "authcomplete", "transaction_amount": "2.01" }),
        ),
        "transaction_amount",
        "Transaction Amount cannot exceed the authorized amount (1.00).",
    );
    act(&t, &id(&partial), json!({ "action": "void" }));
    // Without an amount the whole authorization completes.
    let b = authonly(&t, "9.00");
    let done_b = act(&t, &id(&b), json!({ "action": "authcomplete" }));
    assert_eq!(done_b["transaction_amount"], "9.00");
    assert_eq!(done_b["reason_code_id"], 1001);
    let batch = get_batch(&t, &str_of(&done_b["transaction_batch_id"]));
    assert_eq!(batch["transaction_count"], 3);
    assert_eq!(batch["total_amount"], "28.00");
    put_tx(
        &t,
        "01a1fe751c63719db8b8f59b25161469",
        json!({ "action": "authcomplete" }),
    )
    .expect(404);
}

fn void_rules(app: &TestApp) {
    let t = app.bootstrap();
    let a = sale(&t, "10.00");
    let b = sale(&t, "5.01");
    let batch_id = str_of(&a["transaction_batch_id"]);
    let batch = get_batch(&t, &batch_id);
    assert_eq!(
        (batch["transaction_count"].clone(), batch["total_amount"].clone()),
        (json!(2), json!("15.01"))
    );

    refused(
        put_tx(
            &t,
            &id(&a),
            json!({ "action": "void", "transaction_amount": "4.00" }),
        ),
        "transaction_amount",
        "A void cancels the whole amount; use partialreversal to lower it.",
    );
    let v = act(&t, &id(&a), json!({ "action": "void" }));
    assert_eq!(v["status_id"], 201);
    assert_eq!(v["reason_code_id"], 1200);
    assert_eq!(v["type_id"], 20);
    assert_eq!(v["transaction_amount"], "0.00");
    let void_date = str_of(&v["void_date"]);
    assert!(
        chrono::NaiveDateTime::parse_from_str(&void_date, "%Y-%m-%d %H:%M:%S").is_ok()
            && void_date.starts_with(&today()),
        "{void_date}"
    );
    assert_eq!(v["level3_indicator"], false);
    // The void left the batch.
    let batch = get_batch(&t, &batch_id);
    assert_eq!(
        (batch["transaction_count"].clone(), batch["total_amount"].clone()),
        (json!(1), json!("5.01"))
    );
    refused(
        put_tx(&t, &id(&a), json!({ "action": "void" })),
        "action",
        "Only approved, authorized or refunded card transactions can be voided; this one is Voided (201).",
    );
    // A void with the full amount named is fine; an authorization has no batch.
    let auth = authonly(&t, "7.50");
    let v = act(
        &t,
        &id(&auth),
        json!({ "action": "void", "transaction_amount": "7.50" }),
    );
    assert_eq!(
        (
            v["status_id"].clone(),
            v["transaction_amount"].clone(),
            v["batch"].clone()
        ),
        (json!(201), json!("0.00"), Value::Null)
    );
    let declined = sale(&t, "6.01");
    refused(
        put_tx(&t, &id(&declined), json!({ "action": "void" })),
        "action",
        "Only approved, authorized or refunded card transactions can be voided; this one is Declined (301).",
    );
    let avs = create(&t, card("avsonly", "0", json!({})));
    refused(
        put_tx(&t, &id(&avs), json!({ "action": "void" })),
        "action",
        "Only approved, authorized or refunded card transactions can be voided; this one is AvsOnly (121).",
    );
    // Once settled: refund instead.
    let s = settled(&t, &batch_id);
    assert_eq!(s["transaction_count"], 1);
    assert_eq!(s["total_amount"], "5.01");
    refused(
        put_tx(&t, &id(&b), json!({ "action": "void" })),
        "action",
        "The transaction is settled; refund it instead.",
    );
    assert_eq!(get_tx(&t, &id(&b), "")["status_id"], 101);
}

fn partialreversal_and_tipadjust(app: &TestApp) {
    let t = app.bootstrap();
    let s = sale(&t, "10.00");
    let s_id = id(&s);
    let batch_id = str_of(&s["transaction_batch_id"]);
    let r = act(
        &t,
        &s_id,
        json!({ "action": "partialreversal", "transaction_amount": "7.00" }),
    );
    assert_eq!(r["status_id"], 101);
    assert_eq!(r["transaction_amount"], "7.00");
    assert_eq!(r["auth_amount"], "7.00");
    assert_eq!(get_batch(&t, &batch_id)["total_amount"], "7.00");
    refused(
        put_tx(
            &t,
            &s_id,
            json!({ "action": "partialreversal", "transaction_amount": "7.00" }),
        ),
        "transaction_amount",
        "Transaction Amount is the reduced final amount and must be below 7.00.",
    );
    refused(
        put_tx(&t, &s_id, json!({ "action": "partialreversal" })),
        "transaction_amount",
        "Transaction Amount cannot be blank.",
    );
    let a = authonly(&t, "10.00");
    let r = act(
        &t,
        &id(&a),
        json!({ "action": "partialreversal", "transaction_amount": "6.00" }),
    );
    assert_eq!(
        (
            r["status_id"].clone(),
            r["transaction_amount"].clone(),
            r["batch"].clone()
        ),
        (json!(102), json!("6.00"), Value::Null)
    );

    // tipadjust: the new total with the tip.
    let tip = sale(&t, "10.00");
    let tip_id = id(&tip);
    let r = act(
        &t,
        &tip_id,
        json!({ "action": "tipadjust", "transaction_amount": "12.00" }),
    );
    assert_eq!(r["transaction_amount"], "12.00");
    assert_eq!(r["tip_amount"], "2.00");
    assert_eq!(r["status_id"], 101);
    let r = act(
        &t,
        &tip_id,
        json!({ "action": "tipadjust", "transaction_amount": "11.00" }),
    );
    assert_eq!(
        (r["transaction_amount"].clone(), r["tip_amount"].clone()),
        (json!("11.00"), json!("1.00"))
    );
    assert_eq!(get_batch(&t, &batch_id)["total_amount"], "18.00");
    refused(
        put_tx(
            &t,
            &tip_id,
            json!({ "action": "tipadjust", "transaction_amount": "9.99" }),
        ),
        "transaction_amount",
        "Transaction Amount is the new total with the tip and cannot be below 10.00.",
    );
    refused(
        put_tx(
            &t,
            &tip_id,
            json!({ "action": "tipadjust", "transaction_amount": "0.00" }),
        ),
        "transaction_amount",
        POSITIVE,
    );
    refused(
        put_tx(
            &t,
            &tip_id,
            json!({ "action": "tipadjust", "transaction_amount": "13.00", "description": "x" }),
        ),
        "description",
        "Description is not accepted for the tipadjust action.",
    );
    refused(
        put_tx(
            &t,
            &id(&a),
            json!({ "action": "tipadjust", "transaction_amount": "13.00" }),
        ),
        "action",
        "Only approved card sales can take a tip adjustment; this one is AuthOnly (102).",
    );
    // Settled: neither changes any more.
    settled(&t, &batch_id);
    refused(
        put_tx(
            &t,
            &tip_id,
            json!({ "action": "tipadjust", "transaction_amount": "15.00" }),
        ),
        "action",
        "The transaction is settled; its tip can no longer change.",
    );
    refused(
        put_tx(
            &t,
            &tip_id,
            json!({ "action": "partialreversal", "transaction_amount": "5.00" }),
        ),
        "action",
        "The transaction is settled; refund it instead.",
    );
    let back = get_tx(&t, &tip_id, "");
    assert_eq!(
        (back["transaction_amount"].clone(), back["tip_amount"].clone()),
        (json!("11.00"), json!("1.00"))
    );
    // A tip is part of the amount: never more than it, and a partial
    // reversal below the tip lowers the tip with it.
    refused(
        post_tx(&t, card("sale", "10.00", json!({ "tip_amount": "10.01" }))),
        "tip_amount",
        "Tip Amount is part of Transaction Amount and, with the tax, cannot exceed it.",
    );
    refused(
        post_tx(&t, card("sale", "10.00", json!({ "tax": "11.00" }))),
        "tax",
        "Tax is part of Transaction Amount and cannot exceed it.",
    );
    let tipped = create(&t, card("sale", "30.00", json!({ "tip_amount": "10.00" })));
    let r = act(
        &t,
        &id(&tipped),
        json!({ "action": "partialreversal", "transaction_amount": "5.00" }),
    );
    assert_eq!(
        (r["transaction_amount"].clone(), r["tip_amount"].clone()),
        (json!("5.00"), json!("5.00"))
    );
    // The tax likewise; and one sent with the action must fit its amount.
    let taxed = create(&t, card("sale", "30.00", json!({ "tax": "10.00" })));
    refused(
        put_tx(
            &t,
            &id(&taxed),
            json!({ "action": "partialreversal", "transaction_amount": "5.00", "tax": "9.00" }),
        ),
        "tax",
        "Tax is part of Transaction Amount and cannot exceed it.",
    );
    let r = act(
        &t,
        &id(&taxed),
        json!({ "action": "partialreversal", "transaction_amount": "5.00" }),
    );
    assert_eq!(
        (r["transaction_amount"].clone(), r["tax"].clone()),
        (json!("5.00"), json!("5.00"))
    );
    // Tax and tip together: a smaller amount keeps the tax first and the
    // tip gets what is left, on a capture as on a partial reversal.
    let both = json!({ "tax": "4.00", "tip_amount": "3.00" });
    let s = create(&t, card("sale", "10.00", both.clone()));
    let r = act(
        &t,
        &id(&s),
        json!({ "action": "partialreversal", "transaction_amount": "5.00" }),
    );
    assert_eq!(
        (r["tax"].clone(), r["tip_amount"].clone()),
        (json!("4.00"), json!("1.00"))
    );
    let a = create(&t, card("authonly", "10.00", both.clone()));
    let r = act(
        &t,
        &id(&a),
        json!({ "action": "authcomplete", "transaction_amount": "2.00" }),
    );
    assert_eq!(
        (
            r["transaction_amount"].clone(),
            r["tax"].clone(),
            r["tip_amount"].clone()
        ),
        (json!("2.00"), json!("2.00"), json!("0.00"))
    );
    let a = create(&t, card("authonly", "10.00", json!({})));
    refused(
        put_tx(
            &t,
            &id(&a),
            json!({ "action": "authcomplete", "transaction_amount": "10.00", "tax": "8.00", "tip_amount": "8.00" }),
        ),
        "tip_amount",
        "Tip Amount is part of Transaction Amount and, with the tax, cannot exceed it.",
    );
    // A tip sent alone fits beside the stored tax.
    let a = create(&t, card("authonly", "10.00", json!({ "tax": "6.00" })));
    refused(
        put_tx(
            &t,
            &id(&a),
            json!({ "action": "authcomplete", "transaction_amount": "10.00", "tip_amount": "5.00" }),
        ),
        "tip_amount",
        "Tip Amount is part of Transaction Amount and, with the tax, cannot exceed it.",
    );
    let r = act(
        &t,
        &id(&a),
        json!({ "action": "authcomplete", "transaction_amount": "10.00", "tip_amount": "4.00" }),
    );
    assert_eq!(
        (r["tax"].clone(), r["tip_amount"].clone()),
        (json!("6.00"), json!("4.00"))
    );
}

fn edit_action(app: &TestApp) {
    let t = app.bootstrap();
    let contact = id(&t.contact(json!({ "contact_api_id": "c-1" })));
    let other = id(&t.contact(json!({})));
    let s = sale(&t, "10.00");
    let s_id = id(&s);
    let e = act(
        &t,
        &s_id,
        json!({ "action": "edit", "contact_id": contact, "description": "Table 4" }),
    );
    assert_eq!(e["contact_id"], contact.as_str());
    assert_eq!(e["description"], "Table 4");
    assert_eq!(e["status_id"], 101);
    assert_eq!(e["transaction_amount"], "10.00");
    let e = act(&t, &s_id, json!({ "action": "edit", "contact_id": "" }));
    assert_eq!(e["contact_id"], Value::Null);
    assert_eq!(e["description"], "Table 4", "untouched");
    let e = act(&t, &s_id, json!({ "action": "edit", "contact_api_id": "c-1" }));
    assert_eq!(e["contact_id"], contact.as_str());
    let e = get_tx(&t, &s_id, "contact");
    assert_eq!(e["contact"]["id"], contact.as_str());
    refused(
        put_tx(
            &t,
            &s_id,
            json!({ "action": "edit", "contact_id": "01a1fe751c63719db8b8f59b25161469" }),
        ),
        "contact_id",
        "contact_id provided is not valid",
    );
    refused(
        put_tx(&t, &s_id, json!({ "action": "edit", "contact_api_id": "nope" })),
        "contact_api_id",
        "contact_api_id provided is not valid",
    );
    refused(
        put_tx(
            &t,
            &s_id,
            json!({ "action": "edit", "transaction_amount": "1.00" }),
        ),
        "transaction_amount",
        "Transaction Amount is not accepted for the edit action.",
    );
    refused(
        put_tx(&t, &s_id, json!({ "action": "edit", "move_account_vault": 1 })),
        "move_account_vault",
        "The transaction was not paid with an account vault.",
    );
    // move_account_vault: the vault follows the transaction's contact.
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "account_number": VISA, "exp_date": exp(), "contact_id": other } }),
        )
        .expect(201)
        .body["accountvault"]
        .clone();
    let paid = create(
        &t,
        json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "3.00",
            "account_vault_id": id(&vault) }),
    );
    assert_eq!(paid["contact_id"], other.as_str());
    let e = act(
        &t,
        &id(&paid),
        json!({ "action": "edit", "contact_id": contact, "move_account_vault": 1 }),
    );
    assert_eq!(e["contact_id"], contact.as_str());
    let v = t
        .get(&format!("/v2/accountvaults/{}", id(&vault)))
        .expect(200)
        .body["accountvault"]
        .clone();
    assert_eq!(v["contact_id"], contact.as_str());
    // A voided transaction can still be edited.
    act(&t, &s_id, json!({ "action": "void" }));
    let e = act(&t, &s_id, json!({ "action": "edit", "description": "Voided" }));
    assert_eq!(
        (e["status_id"].clone(), e["description"].clone()),
        (json!(201), json!("Voided"))
    );
}

const FLAGS: &str = "is_voidable,is_refundable,is_completable,is_reversible,is_settled";

/// (voidable, refundable, completable, reversible, settled) of a transaction.
#[track_caller]
fn flags(t: &Tenant, id: &str) -> [bool; 5] {
    let v = get_tx(t, id, FLAGS);
    let f = |k: &str| v[k].as_bool().unwrap_or_else(|| panic!("{k}: {v}"));
    [
        f("is_voidable"),
        f("is_refundable"),
        f("is_completable"),
        f("is_reversible"),
        f("is_settled"),
    ]
}

fn is_expands_agree_with_actions(app: &TestApp) {
    let t = app.bootstrap();
    // A settled sale, one refunded in full, and their batch.
    let settled_sale = sale(&t, "10.00");
    let refunded = sale(&t, "3.00");
    settled(&t, &str_of(&settled_sale["transaction_batch_id"]));
    let card_refund = create(
        &t,
        json!({ "action": "refund", "payment_method": "cc", "transaction_amount": "3.00",
            "previous_transaction_id": id(&refunded) }),
    );
    let open_sale = sale(&t, "10.00");
    let auth = authonly(&t, "10.00");
    let declined = sale(&t, "5.10");
    let voided = sale(&t, "4.00");
    act(&t, &id(&voided), json!({ "action": "void" }));
    let avs = create(&t, card("avsonly", "0", json!({})));
    let pending_debit = debit(&t, "15.00");
    let settled_debit = debit(&t, "16.00");
    simulate(&t, &id(&settled_debit), json!(133)).expect(200);
    simulate(&t, &id(&settled_debit), json!(134)).expect(200);
    let credit = create(&t, bank(&t, "credit", "5.00", json!({ "ach_sec_code": "CCD" })));

    // (name, transaction, [voidable, refundable, completable, reversible, settled])
    let rows: Vec<(&str, &Value, [bool; 5])> = vec![
        ("open sale", &open_sale, [true, false, false, true, false]),
        ("authonly", &auth, [true, false, true, true, false]),
        ("settled sale", &settled_sale, [false, true, false, false, true]),
        ("refunded in full", &refunded, [false, false, false, false, true]),
        ("card refund", &card_refund, [true, false, false, false, false]),
        ("declined", &declined, [false, false, false, false, false]),
        ("voided", &voided, [false, false, false, false, false]),
        ("avsonly", &avs, [false, false, false, false, false]),
        ("ach 131", &pending_debit, [true, false, false, false, false]),
        ("ach 134", &settled_debit, [false, true, false, false, true]),
        ("ach credit", &credit, [true, false, false, false, false]),
    ];
    for (name, tx, expected) in &rows {
        assert_eq!(flags(&t, &id(tx)), *expected, "{name}");
    }
    // Every false flag is a refusal of its action; the PUT ones under
    // `action`, a refund under `previous_transaction_id`.
    for (name, tx, expected) in &rows {
        let tx_id = id(tx);
        let method = str_of(&tx["payment_method"]);
        let attempts = [
            json!({ "action": "void" }),
            Value::Null,
            json!({ "action": "authcomplete" }),
            json!({ "action": "partialreversal", "transaction_amount": "0.01" }),
        ];
        for (i, body) in attempts.iter().enumerate() {
            if expected[i] {
                continue;
            }
            let r = if body.is_null() {
                let mut refund = json!({ "action": "refund", "payment_method": method,
                    "transaction_amount": "0.01", "previous_transaction_id": tx_id });
                if method == "ach" {
                    refund["product_transaction_id"] = json!(t.cred("ach_product_transaction_id"));
                }
                post_tx(&t, refund)
            } else {
                put_tx(&t, &tx_id, body.clone())
            };
            let r = r.expect(422);
            let field = if body.is_null() {
                "previous_transaction_id"
            } else {
                "action"
            };
            assert_eq!(error_fields(&r), fields(&[field]), "{name} #{i}: {}", r.text);
        }
    }
    // And every true flag is an action that runs, in an order that keeps
    // the next one possible.
    let r = act(
        &t,
        &id(&auth),
        json!({ "action": "partialreversal", "transaction_amount": "8.00" }),
    );
    assert_eq!(r["status_id"], 102);
    assert_eq!(flags(&t, &id(&auth)), [true, false, true, true, false]);
    assert_eq!(
        act(&t, &id(&auth), json!({ "action": "authcomplete" }))["status_id"],
        101
    );
    assert_eq!(flags(&t, &id(&auth)), [true, false, false, true, false]);
    assert_eq!(act(&t, &id(&auth), json!({ "action": "void" }))["status_id"], 201);
    let r = act(
        &t,
        &id(&open_sale),
        json!({ "action": "partialreversal", "transaction_amount": "9.00" }),
    );
    assert_eq!(r["transaction_amount"], "9.00");
    assert_eq!(
        act(&t, &id(&open_sale), json!({ "action": "void" }))["status_id"],
        201
    );
    assert_eq!(
        act(&t, &id(&card_refund), json!({ "action": "void" }))["status_id"],
        201
    );
    assert_eq!(
        act(&t, &id(&pending_debit), json!({ "action": "void" }))["status_id"],
        201
    );
    assert_eq!(
        act(&t, &id(&credit), json!({ "action": "void" }))["status_id"],
        201
    );
    let r = create(
        &t,
        json!({ "action": "refund", "payment_method": "cc", "transaction_amount": "10.00",
            "previous_transaction_id": id(&settled_sale) }),
    );
    assert_eq!(r["status_id"], 111);
    let r = create(
        &t,
        json!({ "action": "refund", "payment_method": "ach", "transaction_amount": "16.00",
            "product_transaction_id": t.cred("ach_product_transaction_id"),
            "previous_transaction_id": id(&settled_debit) }),
    );
    assert_eq!(r["status_id"], 131);
    // After their actions, every flag is false but is_settled.
    assert_eq!(flags(&t, &id(&settled_sale)), [false, false, false, false, true]);
    assert_eq!(flags(&t, &id(&settled_debit)), [false, false, false, false, true]);
    assert_eq!(flags(&t, &id(&auth)), [false; 5]);
}

fn request_refusals(app: &TestApp) {
    let t = app.bootstrap();
    let s = sale(&t, "10.00");
    let s_id = id(&s);
    // Fields an action does not take.
    refused(
        post_tx(&t, bank(&t, "debit", "5.00", json!({ "cvv": "123" }))),
        "cvv",
        "Cvv is not accepted for the debit action.",
    );
    refused(
        post_tx(&t, card("sale", "5.00", json!({ "routing": "072000326" }))),
        "routing",
        "Routing is not accepted for the sale action.",
    );
    refused(
        post_tx(&t, card("authonly", "5.00", json!({ "ach_sec_code": "WEB" }))),
        "ach_sec_code",
        "Ach Sec Code is not accepted for the authonly action.",
    );
    refused(
        post_tx(
            &t,
            bank(
                &t,
                "credit",
                "5.00",
                json!({ "ach_sec_code": "CCD", "tip_amount": "1.00" }),
            ),
        ),
        "tip_amount",
        "Tip Amount is not accepted for the credit action.",
    );
    refused(
        put_tx(
            &t,
            &s_id,
            json!({ "action": "authcomplete", "contact_id": id(&t.contact(json!({}))) }),
        ),
        "contact_id",
        "Contact Id is not accepted for the authcomplete action.",
    );
    refused(
        put_tx(&t, &s_id, json!({ "action": "void", "tip_amount": "1.00" })),
        "tip_amount",
        "Tip Amount is not accepted for the void action.",
    );
    refused(
        put_tx(
            &t,
            &s_id,
            json!({ "action": "authincrement", "transaction_amount": "20.00", "cvv": "999" }),
        ),
        "cvv",
        "Cvv is not accepted for the authincrement action.",
    );
    // Amounts above zero, in the reference's words.
    for body in [
        card("sale", "0.00", json!({})),
        card("authonly", "0", json!({})),
        card("force", "0.00", json!({ "auth_code": "abc123" })),
        card("refund", "0.00", json!({})),
        bank(&t, "debit", "0.00", json!({})),
        bank(&t, "credit", "0.00", json!({ "ach_sec_code": "CCD" })),
    ] {
        refused(post_tx(&t, body), "transaction_amount", POSITIVE);
    }
    for action in ["authincrement", "partialreversal", "tipadjust"] {
        refused(
            put_tx(
                &t,
                &s_id,
                json!({ "action": action, "transaction_amount": "0.00" }),
            ),
            "transaction_amount",
            POSITIVE,
        );
    }
    let auth = authonly(&t, "10.00");
    refused(
        put_tx(
            &t,
            &id(&auth),
            json!({ "action": "authcomplete", "transaction_amount": "0.00" }),
        ),
        "transaction_amount",
        POSITIVE,
    );
    refused(
        post_tx(&t, card("sale", "", json!({ "transaction_amount": null }))),
        "transaction_amount",
        "Transaction Amount cannot be blank.",
    );
    // payment_method against the action.
    refused(
        post_tx(&t, card("sale", "1.00", json!({ "payment_method": "ach" }))),
        "payment_method",
        "Payment Method must be cc for the sale action.",
    );
    refused(
        post_tx(&t, card("avsonly", "0", json!({ "payment_method": "ach" }))),
        "payment_method",
        "Payment Method must be cc for the avsonly action.",
    );
    refused(
        post_tx(&t, card("sale", "1.00", json!({ "payment_method": null }))),
        "payment_method",
        "Payment Method cannot be blank.",
    );
    // Unknown actions and the wrong verb.
    refused(
        post_tx(&t, card("bogus", "1.00", json!({}))),
        "action",
        "Action must be one of: sale, authonly, avsonly, force, refund, debit, credit.",
    );
    refused(
        put_tx(&t, &s_id, json!({ "action": "bogus" })),
        "action",
        "Action must be one of: authcomplete, authincrement, void, partialreversal, tipadjust, edit.",
    );
    for action in ["void", "authcomplete", "edit", "tipadjust"] {
        refused(
            post_tx(&t, card(action, "1.00", json!({}))),
            "action",
            &format!("The {action} action runs with PUT /v2/transactions/{{id}}."),
        );
    }
    for action in ["sale", "refund", "debit", "avsonly"] {
        refused(
            put_tx(&t, &s_id, json!({ "action": action })),
            "action",
            &format!("The {action} action runs with POST /v2/transactions."),
        );
    }
    // One account source.
    refused(
        post_tx(&t, card("sale", "1.00", json!({ "track_data": TRACK }))),
        "track_data",
        "Send one account source only (sent: account_number, track_data).",
    );
    refused(
        post_tx(
            &t,
            card(
                "sale",
                "1.00",
                json!({ "account_number": null, "exp_date": null }),
            ),
        ),
        "account_number",
        "Account Number cannot be blank.",
    );
    refused(
        post_tx(
            &t,
            card(
                "sale",
                "1.00",
                json!({ "account_number": null, "track_data": "garbage" }),
            ),
        ),
        "track_data",
        "Track Data is not readable track 1 or track 2 data.",
    );
    refused(
        post_tx(
            &t,
            card("sale", "1.00", json!({ "account_number": "4111111111111112" })),
        ),
        "account_number",
        "Account Number is not a valid card number (check digit).",
    );
    refused(
        post_tx(&t, card("sale", "1.00", json!({ "exp_date": "0120" }))),
        "exp_date",
        "Exp Date is in the past.",
    );
    refused(
        post_tx(
            &t,
            json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "1.00",
                "previous_transaction_id": id(&debit(&t, "2.00")) }),
        ),
        "previous_transaction_id",
        "The previous transaction is not a cc transaction.",
    );
    // Nothing refused was stored.
    let list = t.get("/v2/transactions").expect(200);
    assert_eq!(list.body["meta"]["pagination"]["totalCount"], 3);
    put_tx(
        &t,
        "01a1fe751c63719db8b8f59b25161469",
        json!({ "action": "void" }),
    )
    .expect(404);
}

fn sandbox_decline_triggers(app: &TestApp) {
    let t = app.bootstrap();
    assert_eq!(DECLINE_TRIGGERS.len(), 36);
    for &(cents, name) in DECLINE_TRIGGERS {
        let amount = money(cents);
        let s = create(&t, card("sale", &amount, json!({})));
        let reason = 1000 + cents;
        assert_eq!(s["status_id"], 301, "{amount}");
        assert_eq!(s["type_id"], 20, "{amount}");
        assert_eq!(s["reason_code_id"], reason, "{amount}");
        assert_eq!(s["verbiage"], name, "{amount}");
        assert_eq!(
            s["response_message"],
            ReasonCode(reason as u16).label(),
            "{amount}"
        );
        assert_eq!(s["auth_code"], Value::Null, "{amount}");
        assert_eq!(s["transaction_amount"], amount.as_str());
        assert_eq!(s["batch"], Value::Null, "{amount}");
        assert_eq!(s["transaction_batch_id"], Value::Null, "{amount}");
        assert_eq!(s["level3_indicator"], false, "{amount}");
    }
    // The same on authonly; neighbours approve.
    let a = create(&t, card("authonly", "6.15", json!({})));
    assert_eq!(
        (a["status_id"].clone(), a["reason_code_id"].clone()),
        (json!(301), json!(1615))
    );
    for amount in ["4.99", "5.01", "5.50", "6.00", "6.32"] {
        let s = sale(&t, amount);
        assert_eq!(s["status_id"], 101, "{amount}");
        assert_eq!(s["reason_code_id"], 1000, "{amount}");
    }
    let batches = t.get("/v2/transactionbatches").expect(200);
    assert_eq!(batches.body["transactionbatches"][0]["transaction_count"], 5);
    let declined = t.get("/v2/transactions?status_id=301").expect(200);
    assert_eq!(declined.body["meta"]["pagination"]["totalCount"], 37);
}

fn sandbox_partial_authorization(app: &TestApp) {
    let t = app.bootstrap();
    let allow = json!({ "allow_partial_authorization_override": 1 });
    let s = create(&t, card("sale", "2.01", allow.clone()));
    assert_eq!(s["status_id"], 101);
    assert_eq!(s["reason_code_id"], 1201);
    assert_eq!(s["transaction_amount"], "1.00");
    assert_eq!(s["auth_amount"], "1.00");
    assert_eq!(s["batch"], "1");
    assert!(is_hex6(&s["auth_code"]));
    let a = create(&t, card("authonly", "2.01", allow));
    assert_eq!(
        (
            a["status_id"].clone(),
            a["reason_code_id"].clone(),
            a["transaction_amount"].clone()
        ),
        (json!(102), json!(1201), json!("1.00"))
    );
    for extra in [json!({}), json!({ "allow_partial_authorization_override": 0 })] {
        let s = create(&t, card("sale", "2.01", extra));
        assert_eq!(s["status_id"], 301);
        assert_eq!(s["reason_code_id"], 1657);
        assert_eq!(s["response_message"], "Decline (Partial Auth Auto Reversal)");
        assert_eq!(s["batch"], Value::Null);
    }
    let b = get_batch(&t, &str_of(&s["transaction_batch_id"]));
    assert_eq!(
        (b["transaction_count"].clone(), b["total_amount"].clone()),
        (json!(1), json!("1.00"))
    );
}

fn sandbox_avs_values(app: &TestApp) {
    let t = app.bootstrap();
    // (street, zip, status, reason, avs, avs_enhanced); "-" = not sent (avs: none).
    let rows: &[(&str, &str, u16, u16, &str, &str)] = &[
        ("5800 NW 39th AVE", "32606", 101, 1000, "GOOD", "Y"),
        ("5800 nw 39th  ave", "32606", 101, 1000, "GOOD", "Y"),
        ("5800 NW 39th AVE", "32606-1234", 101, 1000, "GOOD", "X"),
        ("2831 NW 41st St STE J", "32615", 301, 1655, "BAD", "N"),
        ("5800 NW 39th AVE", "99999", 101, 1000, "ZIP", "A"),
        ("5800 NW 39th AVE", "-", 101, 1000, "ZIP", "A"),
        ("1 Main St", "32606", 101, 1000, "STREET", "Z"),
        ("-", "32606", 101, 1000, "STREET", "Z"),
        ("1 Main St", "326061234", 101, 1000, "STREET", "W"),
        ("1 Main St", "10001", 101, 1000, "BAD", "N"),
        ("-", "-", 101, 1000, "-", "V"),
    ];
    for &(street, zip, status, reason, avs, enhanced) in rows {
        let mut extra = json!({});
        if street != "-" {
            extra["billing_street"] = json!(street);
        }
        if zip != "-" {
            extra["billing_zip"] = json!(zip);
        }
        let s = create(&t, card("sale", "10.00", extra));
        let what = format!("{street:?} {zip:?}");
        assert_eq!(s["status_id"], status, "{what}");
        assert_eq!(s["reason_code_id"], reason, "{what}");
        let avs = (avs != "-").then_some(avs);
        assert_eq!(s["avs"], json!(avs), "{what}");
        assert_eq!(s["avs_enhanced"], enhanced, "{what}");
        if street != "-" {
            assert_eq!(s["billing_street"], street, "{what}");
        }
    }
    // The auto-decline overrides turn a failed part into a decline.
    let s = create(
        &t,
        card(
            "sale",
            "10.00",
            json!({ "billing_street": "1 Main St", "billing_zip": "32606",
                "auto_decline_street_override": 1 }),
        ),
    );
    assert_eq!(
        (
            s["status_id"].clone(),
            s["reason_code_id"].clone(),
            s["avs"].clone()
        ),
        (json!(301), json!(1655), json!("STREET"))
    );
    let s = create(
        &t,
        card(
            "sale",
            "10.00",
            json!({ "billing_street": "5800 NW 39th AVE", "billing_zip": "10001",
                "auto_decline_zip_override": 1 }),
        ),
    );
    assert_eq!(
        (s["status_id"].clone(), s["reason_code_id"].clone()),
        (json!(301), json!(1655))
    );
    let s = create(
        &t,
        card(
            "sale",
            "10.00",
            json!({ "billing_street": "5800 NW 39th AVE", "billing_zip": "32606",
                "auto_decline_street_override": 1, "auto_decline_zip_override": 1 }),
        ),
    );
    assert_eq!(s["status_id"], 101);
}

fn sandbox_cvv_values(app: &TestApp) {
    let t = app.bootstrap();
    // (card, cvv, cvv_response, declines with auto_decline_cvv_override)
    let rows: &[(&str, &str, &str, bool)] = &[
        (VISA, "999", "M", false),
        (VISA, "123", "N", false),
        (VISA, "124", "P", true),
        (VISA, "125", "S", true),
        (VISA, "126", "U", true),
        (VISA, "127", "X", true),
        (VISA, "555", "N", false),
        (MC, "999", "M", false),
        (MC, "127", "X", true),
        (AMEX, "1234", "M", false),
        (AMEX, "9999", "N", false),
        (AMEX, "9998", "P", true),
        (AMEX, "9997", "S", true),
        (AMEX, "9996", "U", true),
        (AMEX, "9995", "X", true),
        (AMEX, "999", "N", false),
    ];
    for &(number, cvv, response, declines) in rows {
        let s = create(
            &t,
            card("sale", "10.00", json!({ "account_number": number, "cvv": cvv })),
        );
        assert_eq!(s["cvv_response"], response, "{number} {cvv}");
        assert_eq!(s["status_id"], 101, "{number} {cvv}: only with the override");
        let s = create(
            &t,
            card(
                "sale",
                "10.00",
                json!({ "account_number": number, "cvv": cvv, "auto_decline_cvv_override": 1 }),
            ),
        );
        assert_eq!(s["cvv_response"], response, "{number} {cvv} override");
        let expected = if declines { (301, 1656) } else { (101, 1000) };
        assert_eq!(
            (s["status_id"].clone(), s["reason_code_id"].clone()),
            (json!(expected.0), json!(expected.1)),
            "{number} {cvv} override"
        );
        assert!(
            !s.to_string().contains(&format!("\"{cvv}\"")),
            "the cvv is never shown"
        );
    }
    let s = sale(&t, "10.00");
    assert_eq!(s["cvv_response"], Value::Null);
    let s = create(
        &t,
        card("sale", "10.00", json!({ "auto_decline_cvv_override": 1 })),
    );
    assert_eq!(
        (s["status_id"].clone(), s["cvv_response"].clone()),
        (json!(101), Value::Null)
    );
}

fn sandbox_test_cards_approve(app: &TestApp) {
    let t = app.bootstrap();
    for (number, brand) in TEST_CARDS {
        let r = post_tx(&t, card("sale", "12.34", json!({ "account_number": number }))).expect(201);
        assert!(!r.text.contains(number));
        let s = &r.body["transaction"];
        assert_approved_sale(s, "12.34", "K", brand.account_type(), number);
    }
    let b = t.get("/v2/transactionbatches").expect(200);
    assert_eq!(
        b.body["transactionbatches"][0]["transaction_count"],
        TEST_CARDS.len()
    );
    assert_eq!(
        b.body["transactionbatches"][0]["total_amount"],
        money(1234 * TEST_CARDS.len() as i64)
    );
}

/// Polls the list until the transaction with this api id shows up.
fn wait_for_api_id(t: &Tenant, api_id: &str) -> Value {
    crate::support::wait::wait_until(
        &format!("{api_id} to appear"),
        std::time::Duration::from_secs(20),
        || {
            let r = t
                .get(&format!("/v2/transactions?transaction_api_id={api_id}"))
                .expect(200);
            r.body["transactions"].get(0).cloned()
        },
    )
}

fn sandbox_delayed_sale(app: &TestApp) {
    let t = app.bootstrap();
    // $8.07 answers after 7 s (below the 10 s time-out): meanwhile the
    // transaction exists, pending. The checks below must fit in those
    // seconds, on a loaded machine too.
    let bg = t.clone();
    let slow = std::thread::spawn(move || {
        post_tx(
            &bg,
            card("sale", "8.07", json!({ "transaction_api_id": "slow1" })),
        )
    });
    let pending = wait_for_api_id(&t, "slow1");
    assert_eq!(pending["verbiage"], "Processing", "{pending}");
    assert_eq!(pending["status_id"], Value::Null);
    let pending_id = id(&pending);
    refused(
        put_tx(&t, &pending_id, json!({ "action": "void" })),
        "action",
        "The transaction is still being processed; retry shortly.",
    );
    refused(
        post_tx(&t, card("sale", "1.00", json!({ "transaction_api_id": "slow1" }))),
        "transaction_api_id",
        "Transaction Api Id has already been taken at this location.",
    );
    let r = slow.join().unwrap().expect(201);
    let s = &r.body["transaction"];
    assert_eq!(s["id"], pending_id.as_str());
    assert_eq!(s["status_id"], 301);
    assert_eq!(s["reason_code_id"], 1500);
    assert_eq!(s["verbiage"], "DELAYED");
    assert_eq!(s["batch"], Value::Null);
    let back = get_tx(&t, &pending_id, "");
    assert_eq!(
        (back["status_id"].clone(), back["verbiage"].clone()),
        (json!(301), json!("DELAYED"))
    );

    // A follow-up in flight holds the transaction for itself.
    let auth = authonly(&t, "5.50");
    let auth_id = id(&auth);
    let bg = t.clone();
    let bg_id = auth_id.clone();
    let slow = std::thread::spawn(move || {
        put_tx(
            &bg,
            &bg_id,
            json!({ "action": "authincrement", "transaction_amount": "8.07" }),
        )
    });
    // The expands say so while it runs (and never let a void in first).
    crate::support::wait::wait_until(
        "the increment to show as in progress",
        std::time::Duration::from_secs(20),
        || (get_tx(&t, &auth_id, "is_voidable")["is_voidable"] == false).then_some(()),
    );
    assert_eq!(flags(&t, &auth_id), [false; 5]);
    refused(
        put_tx(&t, &auth_id, json!({ "action": "void" })),
        "action",
        "The authincrement of this transaction is still in progress; retry shortly.",
    );
    let r = slow.join().unwrap().expect(200);
    assert_eq!(r.body["transaction"]["reason_code_id"], 1661);
    assert_eq!(r.body["transaction"]["transaction_amount"], "5.50");
    assert_eq!(act(&t, &auth_id, json!({ "action": "void" }))["status_id"], 201);
}

fn ach_simulator(app: &TestApp) {
    let t = app.bootstrap();
    let final_text = |from: u16, to: u16| {
        format!(
            "Status {from} cannot change to {to} (allowed: 131/132 -> 133 -> 134; any of these -> 201, 301 or 331; 201, 301 and 331 are final)."
        )
    };
    // 131 -> 133 -> 134, nothing skipped, nothing backwards.
    let d = debit(&t, "15.00");
    let d_id = id(&d);
    refused(
        simulate(&t, &d_id, json!(134)),
        "status_id",
        &final_text(131, 134),
    );
    let r = simulate(&t, &d_id, json!(133)).expect(200);
    assert_eq!(r.body["transaction"]["status_id"], 133);
    refused(
        simulate(&t, &d_id, json!(133)),
        "status_id",
        &final_text(133, 133),
    );
    let r = simulate(&t, &d_id, json!("134")).expect(200);
    let s = &r.body["transaction"];
    assert_eq!(s["status_id"], 134);
    assert_eq!(s["settle_date"], today());
    refused(
        simulate(&t, &d_id, json!(133)),
        "status_id",
        &final_text(134, 133),
    );
    let h = get_tx(&t, &d_id, "transaction_histories,is_settled");
    assert_eq!(h["is_settled"], true);
    let entries = h["transaction_histories"].as_array().expect("histories");
    let moves: Vec<(Value, Value)> = entries
        .iter()
        .map(|e| (e["previous_status_id"].clone(), e["status_id"].clone()))
        .collect();
    assert_eq!(moves, vec![(json!(131), json!(133)), (json!(133), json!(134))]);
    for e in entries {
        assert_eq!(e["transaction_id"], d_id.as_str());
        assert_eq!(e["user_id"], t.user_id());
        assert!(e["created_ts"].is_i64());
    }
    // A settled debit can still be charged back; 331 is final. The cents
    // are the return number: 10.22 -> R22 (2122).
    let c = debit(&t, "10.22");
    let r = simulate(&t, &id(&c), json!(331)).expect(200);
    let s = &r.body["transaction"];
    assert_eq!(s["status_id"], 331);
    assert_eq!(s["reason_code_id"], 2122);
    assert_eq!(s["charge_back_date"], today());
    assert_eq!(s["return_date"], today());
    // The processor's last word is the return, not the first approval.
    assert_eq!(s["verbiage"], "Rejected-R22");
    assert_ne!(s["response_message"], "Approved and complete", "{s}");
    assert!(s["response_message"].is_string(), "{s}");
    for to in [201, 301, 133, 134] {
        refused(
            simulate(&t, &id(&c), json!(to)),
            "status_id",
            &final_text(331, to),
        );
    }
    let r = simulate(&t, &d_id, json!(331)).expect(200);
    assert_eq!(
        r.body["transaction"]["reason_code_id"], 2101,
        "15.00: cents 00 -> R01"
    );
    // 201 and 301 are final too.
    let v = debit(&t, "3.00");
    let r = simulate(&t, &id(&v), json!(201)).expect(200);
    assert_eq!(
        (
            r.body["transaction"]["status_id"].clone(),
            r.body["transaction"]["reason_code_id"].clone()
        ),
        (json!(201), json!(1200))
    );
    // As the void action: nothing is left to move.
    let voided = &r.body["transaction"];
    assert_eq!(voided["transaction_amount"], "0.00", "{voided}");
    assert!(voided["void_date"].is_string(), "{voided}");
    assert_eq!(voided["verbiage"], "Voided");
    refused(
        simulate(&t, &id(&v), json!(301)),
        "status_id",
        &final_text(201, 301),
    );
    let x = create(&t, bank(&t, "credit", "4.00", json!({ "ach_sec_code": "CCD" })));
    let r = simulate(&t, &id(&x), json!(301)).expect(200);
    assert_eq!(r.body["transaction"]["status_id"], 301);
    refused(
        simulate(&t, &id(&x), json!(133)),
        "status_id",
        &final_text(301, 133),
    );
    // Only status_id, only known statuses, only ACH.
    refused(
        t.put(
            &format!("/v2/developer/transactions/{}", id(&debit(&t, "1.00"))),
            json!({ "transaction": { "transaction_amount": "2.00" } }),
        ),
        "transaction_amount",
        "Only status_id can change here, not transaction_amount.",
    );
    refused(
        simulate(&t, &d_id, json!(999)),
        "status_id",
        "Status Id must be one of 133, 134, 201, 301, 331.",
    );
    let s = sale(&t, "10.00");
    refused(
        simulate(&t, &id(&s), json!(201)),
        "status_id",
        "Only ACH transactions change status here.",
    );
    assert_eq!(get_tx(&t, &id(&s), "")["status_id"], 101);
    simulate(&t, "01a1fe751c63719db8b8f59b25161469", json!(133)).expect(404);
}

fn batch_membership(app: &TestApp) {
    let t = app.bootstrap();
    let first = sale(&t, "10.00");
    assert_eq!(first["batch"], "1");
    let first_batch = str_of(&first["transaction_batch_id"]);
    settled(&t, &first_batch);
    // Approved sale, force, completion and refund enter batch 2.
    let s = sale(&t, "20.00");
    let f = force(&t, "3.00");
    let a = authonly(&t, "7.00");
    let c = act(&t, &id(&a), json!({ "action": "authcomplete" }));
    let r = create(
        &t,
        json!({ "action": "refund", "payment_method": "cc", "transaction_amount": "4.00",
            "previous_transaction_id": id(&first) }),
    );
    let batch_id = str_of(&s["transaction_batch_id"]);
    assert_ne!(batch_id, first_batch);
    for tx in [&s, &f, &c, &r] {
        assert_eq!(tx["batch"], "2", "{tx}");
        assert_eq!(tx["transaction_batch_id"], batch_id.as_str(), "{tx}");
    }
    // Open authorizations, declines, avsonly and ACH stay out.
    let open_auth = authonly(&t, "9.00");
    let declined = sale(&t, "5.20");
    let avs = create(&t, card("avsonly", "0", json!({})));
    let d = debit(&t, "50.00");
    for tx in [&open_auth, &declined, &avs, &d] {
        assert_eq!(tx["batch"], Value::Null, "{tx}");
        assert_eq!(tx["transaction_batch_id"], Value::Null, "{tx}");
    }
    let b = get_batch(&t, &batch_id);
    assert_eq!(b["batch_num"], 2);
    assert_eq!(b["is_open"], 1);
    assert_eq!(b["processing_status_id"], 1);
    assert_eq!(b["transaction_count"], 4);
    assert_eq!(b["total_amount"], "26.00", "20 + 3 + 7 - 4");
    assert_eq!(b["product_transaction_id"], t.cred("cc_product_transaction_id"));
    assert_eq!(b["location_id"], t.location_id());
    let first = get_batch(&t, &first_batch);
    assert_eq!(
        (first["transaction_count"].clone(), first["total_amount"].clone()),
        (json!(1), json!("10.00")),
        "a settled batch takes nothing more"
    );
    // The expand shows the same batch.
    let e = get_tx(&t, &id(&f), "transaction_batch");
    assert_eq!(e["transaction_batch"]["id"], batch_id.as_str());
    assert_eq!(e["transaction_batch"]["batch_num"], 2);
    // Batch 3 after settling 2.
    settled(&t, &batch_id);
    assert_eq!(sale(&t, "1.00")["batch"], "3");
}

fn batch_lists_and_filters(app: &TestApp) {
    let t = app.bootstrap();
    let count = |query: &str| -> u64 {
        let r = t.get(&format!("/v2/transactionbatches{query}")).expect(200);
        r.body["meta"]["pagination"]["totalCount"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}", r.text))
    };
    // 16 settled batches, one failed, one open.
    for i in 0..16 {
        let f = force(&t, &format!("{}.00", i + 1));
        settled(&t, &str_of(&f["transaction_batch_id"]));
    }
    let failing = force(&t, "90200.11");
    let failed_id = str_of(&failing["transaction_batch_id"]);
    assert_eq!(
        settle(&t, &failed_id).expect(200).body["transactionbatch"]["processing_status_id"],
        3
    );
    let open = force(&t, "1.00");
    let open_id = str_of(&open["transaction_batch_id"]);

    let page = t.get("/v2/transactionbatches").expect(200);
    let list = page.body["transactionbatches"].as_array().unwrap();
    assert_eq!(list.len(), 15);
    let meta = &page.body["meta"];
    assert_eq!(meta["pagination"]["perPage"], 15);
    assert_eq!(meta["pagination"]["totalCount"], 18);
    assert_eq!(meta["pagination"]["pageCount"], 2);
    assert_eq!(meta["sort"]["attributes"]["created_ts"], "desc");
    let created: Vec<i64> = list.iter().map(|b| b["created_ts"].as_i64().unwrap()).collect();
    assert!(created.windows(2).all(|w| w[0] >= w[1]), "{created:?}");
    let second = t.get("/v2/transactionbatches?page=2").expect(200);
    assert_eq!(second.body["transactionbatches"].as_array().unwrap().len(), 3);
    let nums = |r: &Resp| -> Vec<i64> {
        r.body["transactionbatches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["batch_num"].as_i64().unwrap())
            .collect()
    };
    let mut all = nums(&page);
    all.extend(nums(&second));
    all.sort();
    assert_eq!(all, (1..=18).collect::<Vec<i64>>());

    assert_eq!(count("?is_open=1"), 1);
    assert_eq!(count("?is_open=0"), 17);
    assert_eq!(count("?processing_status_id=2"), 16);
    assert_eq!(count("?processing_status_id=3"), 1);
    assert_eq!(count("?processing_status_id=1"), 1);
    assert_eq!(count("?processing_status_id=1,3"), 2);
    assert_eq!(
        count(&format!(
            "?product_transaction_id={}",
            t.cred("cc_product_transaction_id")
        )),
        18
    );
    assert_eq!(
        count(&format!(
            "?product_transaction_id={}",
            t.cred("ach_product_transaction_id")
        )),
        0
    );
    assert_eq!(count("?created_ts=today"), 18);
    assert_eq!(count("?created_ts=yesterday"), 0);
    assert_eq!(count("?created_ts=this%20month"), 18);
    assert_eq!(count("?created_ts=last%20month"), 0);
    assert_eq!(count("?is_open=1&processing_status_id=2"), 0);
    let r = t.get("/v2/transactionbatches?is_open=1").expect(200);
    assert_eq!(r.body["transactionbatches"][0]["id"], open_id.as_str());
    let r = t.get("/v2/transactionbatches?processing_status_id=3").expect(200);
    assert_eq!(
        r.body["transactionbatches"][0]["status_message"],
        "Blocked Terminal Error"
    );
    let r = t.get("/v2/transactionbatches?sort=batch_num").expect(200);
    assert_eq!(nums(&r), (1..=15).collect::<Vec<i64>>());

    // One by id.
    let b = get_batch(&t, &open_id);
    assert_eq!(b["id"], open_id.as_str());
    assert_eq!(b["batch_num"], 18);
    assert_eq!(b["is_open"], 1);
    assert_eq!(b["total_amount"], "1.00");
    assert_eq!(b["transaction_count"], 1);
    t.get("/v2/transactionbatches/01a1fe751c63719db8b8f59b25161469")
        .expect(404);
    // Another tenant sees none of them.
    let other = app.bootstrap();
    assert_eq!(
        other.get("/v2/transactionbatches").expect(200).body["meta"]["pagination"]["totalCount"],
        0
    );
    other
        .get(&format!("/v2/transactionbatches/{open_id}"))
        .expect(404);
    settle(&other, &open_id).expect(404);
}

fn settle_success_and_permissions(app: &TestApp) {
    let t = app.bootstrap();
    let s = sale(&t, "10.00");
    let f = force(&t, "5.00");
    let v = sale(&t, "3.00");
    act(&t, &id(&v), json!({ "action": "void" }));
    let batch_id = str_of(&s["transaction_batch_id"]);
    assert_eq!(v["transaction_batch_id"], batch_id.as_str());
    // Read-only (2) and Clerk (3) users may not settle.
    for role in ["2", "3"] {
        let (uid, key) = t.user(&t.location_id(), Some(role));
        let u = t.as_user(&uid, &key);
        let r = settle(&u, &batch_id);
        assert_eq!(r.status, 403, "role {role}: {}", r.text);
    }
    let b = get_batch(&t, &batch_id);
    assert_eq!(
        (b["is_open"].clone(), b["processing_status_id"].clone()),
        (json!(1), json!(1))
    );

    let b = settled(&t, &batch_id);
    assert_eq!(b["id"], batch_id.as_str());
    assert_eq!(b["is_open"], 0);
    assert_eq!(b["processing_status_id"], 2);
    assert_eq!(b["status_message"], Value::Null);
    assert_eq!(b["settlement_file_name"], format!("sandbox-{batch_id}-1.csv"));
    assert!(b["batch_close_ts"].as_i64().unwrap() >= b["created_ts"].as_i64().unwrap());
    assert_eq!(b["transaction_count"], 2);
    assert_eq!(b["total_amount"], "15.00");
    assert_eq!(get_batch(&t, &batch_id), b);
    for tx in [&s, &f] {
        let back = get_tx(&t, &id(tx), "is_settled");
        assert_eq!(back["settle_date"], today());
        assert_eq!(back["transaction_batch_id"], batch_id.as_str());
        assert_eq!(back["is_settled"], true);
    }
    // A voided sale moved no money: nothing of it settled.
    assert_eq!(get_tx(&t, &id(&v), "")["settle_date"], Value::Null);
    refused(settle(&t, &batch_id), "id", "The batch is already settled.");
    settle(&t, "01a1fe751c63719db8b8f59b25161469").expect(404);

    // An admin user of the location (role 1) may.
    let next = sale(&t, "2.00");
    let (uid, key) = t.user(&t.location_id(), Some("1"));
    let admin = t.as_user(&uid, &key);
    let b = settled(&admin, &str_of(&next["transaction_batch_id"]));
    assert_eq!(b["batch_num"], 2);
    // A batch whose every transaction was voided has nothing to settle.
    let lone = sale(&t, "3.00");
    act(&t, &id(&lone), json!({ "action": "void" }));
    let empty_id = str_of(&lone["transaction_batch_id"]);
    assert_eq!(get_batch(&t, &empty_id)["transaction_count"], 0);
    let b = settle(&t, &empty_id).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 3);
    assert_eq!(b["status_message"], ReasonCode(1804).label());
    assert_eq!(b["settlement_file_name"], Value::Null);
}

/// A force of `cents` as the last transaction of a new batch after a
/// $10.00 one; settles it and returns the batch.
fn settle_with_last(t: &Tenant, cents: i64) -> (String, Value) {
    let before = force(t, "10.00");
    let last = force(t, &money(cents));
    let batch_id = str_of(&last["transaction_batch_id"]);
    assert_eq!(before["transaction_batch_id"], batch_id.as_str());
    let b = settle(t, &batch_id).expect(200).body["transactionbatch"].clone();
    (batch_id, b)
}

fn settlement_error_table(app: &TestApp) {
    let t = app.bootstrap();
    let n = SETTLEMENT_ERRORS.len();
    let mut picks = vec![0, 1, 2, n / 4, n / 2, 3 * n / 4, n - 2, n - 1];
    picks.dedup();
    for i in picks {
        let row = &SETTLEMENT_ERRORS[i];
        let (lo, hi) = row.cents().unwrap_or_else(|| panic!("row {i}: {}", row.amount));
        let mut amounts = vec![lo];
        if hi != lo {
            amounts.push(hi);
        }
        for cents in amounts {
            assert!(row.covers(cents));
            let (batch_id, b) = settle_with_last(&t, cents);
            let what = format!("row {i} ({}) at {}", row.amount, money(cents));
            assert_eq!(b["processing_status_id"], 3, "{what}");
            assert_eq!(b["status_message"], row.message, "{what}");
            assert_eq!(b["is_open"], 0, "{what}");
            assert_eq!(b["settlement_file_name"], Value::Null, "{what}");
            // Retrying fails the same way: the amount is still last.
            let again = settle(&t, &batch_id).expect(200).body["transactionbatch"].clone();
            assert_eq!(again["processing_status_id"], 3, "{what}");
            assert_eq!(again["status_message"], row.message, "{what}");
            // Its transactions are not settled.
            let list = t
                .get(&format!(
                    "/v2/transactions?transaction_batch_id={batch_id}&expand=is_settled"
                ))
                .expect(200);
            for tx in list.body["transactions"].as_array().unwrap() {
                assert_eq!(tx["settle_date"], Value::Null, "{what}");
                assert_eq!(tx["is_settled"], false, "{what}");
            }
        }
    }
    // The same amount anywhere but last does not matter.
    let first = force(&t, "90200.11");
    force(&t, "10.00");
    settled(&t, &str_of(&first["transaction_batch_id"]));
    // Neighbours of table amounts settle.
    for cents in [9_020_010, 9_020_012] {
        let (_, b) = settle_with_last(&t, cents);
        assert_eq!(b["processing_status_id"], 2, "{}", money(cents));
    }
}

fn settlement_reads_the_last_transaction(app: &TestApp) {
    let t = app.bootstrap();
    // The last transaction to enter the batch decides, also after a void
    // took an earlier one out and after the earlier ones changed.
    let a = sale(&t, "10.00");
    let error = force(&t, "90200.11");
    act(&t, &id(&a), json!({ "action": "void" }));
    let last = force(&t, "11.00");
    act(
        &t,
        &id(&error),
        json!({ "action": "edit", "description": "changed later" }),
    );
    let batch_id = str_of(&last["transaction_batch_id"]);
    assert_eq!(error["transaction_batch_id"], batch_id.as_str());
    // Each transaction has its own place in the batch's order.
    let mut db = db(app);
    let places = db.count(
        "SELECT COUNT(DISTINCT batch_seq) FROM transactions WHERE transaction_batch_id = ?",
        &[&batch_id],
    );
    assert_eq!(places, 3, "the voided one keeps its place");
    let b = settle(&t, &batch_id).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 2, "{b}");
    assert_eq!(b["transaction_count"], 2);
    assert_eq!(b["total_amount"], "90211.11");

    // And the other way round.
    let a = sale(&t, "10.00");
    let fine = force(&t, "11.00");
    act(&t, &id(&a), json!({ "action": "void" }));
    let last = force(&t, "90200.11");
    act(
        &t,
        &id(&fine),
        json!({ "action": "edit", "description": "changed later" }),
    );
    let batch_id = str_of(&last["transaction_batch_id"]);
    let b = settle(&t, &batch_id).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 3, "{b}");
    assert_eq!(b["status_message"], "Blocked Terminal Error");
}

/// Sales from several clients at once, while their batches are settled
/// under them: each sale is in exactly one batch, once, and every batch's
/// count, total and places match the sales in it.
fn concurrent_sales_and_settles_count_each_sale_once(app: &TestApp) {
    let t = app.bootstrap();
    let first = sale(&t, "10.00");
    let clients = 4;
    let each = 12;
    let made: Vec<Value> = std::thread::scope(|s| {
        let sellers: Vec<_> = (0..clients)
            .map(|_| s.spawn(|| (0..each).map(|_| sale(&t, "10.00")).collect::<Vec<_>>()))
            .collect();
        // Meanwhile, settle whatever batch is open, twice.
        let mut batch = str_of(&first["transaction_batch_id"]);
        for _ in 0..2 {
            settled(&t, &batch);
            batch = str_of(&sale(&t, "10.00")["transaction_batch_id"]);
        }
        sellers.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(made.len(), clients * each);
    for tx in &made {
        assert_eq!(tx["status_id"], 101, "{tx}");
        assert!(tx["transaction_batch_id"].is_string(), "{tx}");
    }
    let mut db = db(app);
    let location = t.location_id();
    let wrong = db.count(
        "SELECT COUNT(*) FROM transaction_batches_read b WHERE b.location_id = ? AND (\
         b.transaction_count <> (SELECT COUNT(*) FROM transactions x WHERE x.transaction_batch_id = b.id) \
         OR b.total_amount <> (SELECT COALESCE(SUM(x.transaction_amount), 0) FROM transactions x WHERE x.transaction_batch_id = b.id) \
         OR (SELECT COUNT(*) FROM transactions x WHERE x.transaction_batch_id = b.id) \
            <> (SELECT COUNT(DISTINCT x.batch_seq) FROM transactions x WHERE x.transaction_batch_id = b.id))",
        &[&location],
    );
    assert_eq!(
        wrong, 0,
        "batches whose count, total or places disagree with their sales"
    );
    let counted = db.count(
        "SELECT CAST(SUM(transaction_count) AS BIGINT) FROM transaction_batches_read WHERE location_id = ?",
        &[&location],
    );
    assert_eq!(counted as usize, clients * each + 3, "every sale counted once");
    // A settled batch holds only sales that were settled with it (this
    // test voids none).
    let unsettled = db.count(
        "SELECT COUNT(*) FROM transactions x JOIN transaction_batches b ON b.id = x.transaction_batch_id \
         WHERE b.location_id = ? AND b.processing_status_id = 2 AND x.settle_date IS NULL",
        &[&location],
    );
    assert_eq!(unsettled, 0);
}

fn rejected_batch_rule(app: &TestApp) {
    let t = app.bootstrap();
    // A $6.30 sale is a decline trigger; a force puts $6.30 in the batch.
    assert_eq!(sale(&t, "6.30")["status_id"], 301);
    let f = force(&t, "6.30");
    sale(&t, "10.00");
    let batch_id = str_of(&f["transaction_batch_id"]);
    let b = settle(&t, &batch_id).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 3);
    assert_eq!(b["status_message"], "Batch Rejected");
    assert_eq!(b["is_open"], 0);
    let listed = t.get("/v2/transactionbatches?processing_status_id=3").expect(200);
    assert_eq!(listed.body["meta"]["pagination"]["totalCount"], 1);
    // A new transaction goes to a new batch meanwhile.
    let other = sale(&t, "1.00");
    assert_eq!(other["batch"], "2");
    let b = settle(&t, &batch_id).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 2);
    assert_eq!(b["status_message"], Value::Null);
    assert_eq!(b["settlement_file_name"], format!("sandbox-{batch_id}-2.csv"));
    assert_eq!(b["transaction_count"], 2);
    assert_eq!(b["total_amount"], "16.30");
    assert_eq!(get_tx(&t, &id(&f), "")["settle_date"], today());

    // An authorization completed for $6.30 does the same.
    let a = authonly(&t, "7.00");
    let c = act(
        &t,
        &id(&a),
        json!({ "action": "authcomplete", "transaction_amount": "6.30" }),
    );
    assert_eq!(c["batch"], "2");
    let second = str_of(&c["transaction_batch_id"]);
    let b = settle(&t, &second).expect(200).body["transactionbatch"].clone();
    assert_eq!(
        (b["processing_status_id"].clone(), b["status_message"].clone()),
        (json!(3), json!("Batch Rejected"))
    );
    settled(&t, &second);
}

fn transaction_list_filters(app: &TestApp) {
    let t = app.bootstrap();
    let count = |query: &str| -> u64 {
        let r = t.get(&format!("/v2/transactions{query}")).expect(200);
        r.body["meta"]["pagination"]["totalCount"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}", r.text))
    };
    for (amount, holder) in [
        ("9.99", "Jane Doe"),
        ("10.00", "JANET Smith"),
        ("10.50", "Bob Jan"),
        ("10.99", "Alice"),
        ("11.00", "Carol"),
    ] {
        create(&t, card("sale", amount, json!({ "account_holder_name": holder })));
    }
    authonly(&t, "20.00");
    sale(&t, "5.00"); // declined
    create(
        &t,
        card("sale", "12.00", json!({ "transaction_api_id": "order-77" })),
    );
    assert_eq!(count(""), 8);
    assert_eq!(count("?page_size=1"), 8, "the kept total (ADR 0022)");
    db(app).assert_counts_kept();
    assert_eq!(count("?transaction_amount=10.00|10.99"), 3);
    assert_eq!(count("?transaction_amount=10.00"), 1);
    assert_eq!(count("?transaction_amount=10.01|10.98"), 1);
    assert_eq!(count("?transaction_amount=|10.00"), 3);
    assert_eq!(count("?transaction_amount=11.00|"), 3);
    assert_eq!(count("?status_id=101,102"), 7);
    assert_eq!(count("?status_id=102"), 1);
    assert_eq!(count("?status_id=301"), 1);
    assert_eq!(count("?status_id=101&transaction_amount=10.00|10.99"), 3);
    assert_eq!(count("?account_holder_name=jan"), 3, "Jane, JANET and Bob Jan");
    assert_eq!(count("?account_holder_name=JANE"), 2, "Jane and JANET");
    assert_eq!(count("?account_holder_name=jane%20d"), 1);
    assert_eq!(count("?account_holder_name=jan,alice"), 4);
    assert_eq!(count("?created_ts=today"), 8);
    assert_eq!(count("?created_ts=yesterday"), 0);
    assert_eq!(count("?transaction_api_id=order-77"), 1);
    assert_eq!(count("?transaction_api_id=order-7"), 0, "exact, not like");
    assert_eq!(count("?type_id=20&payment_method=cc"), 8);
    let r = t.get("/v2/transactions?transaction_api_id=order-77").expect(200);
    assert_eq!(r.body["transactions"][0]["transaction_amount"], "12.00");
    let r = t
        .get("/v2/transactions?transaction_amount=10.00|10.99&sort=transaction_amount")
        .expect(200);
    let amounts: Vec<&str> = r.body["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["transaction_amount"].as_str().unwrap())
        .collect();
    assert_eq!(amounts, ["10.00", "10.50", "10.99"]);
    let r = t.get("/v2/transactions?transaction_amount=ten").expect(422);
    assert_eq!(error_fields(&r), fields(&["transaction_amount"]));
    let r = t.get("/v2/transactions?account_number=4111").expect(422);
    assert_eq!(error_fields(&r), fields(&["account_number"]));
}

fn transaction_api_ids(app: &TestApp) {
    let t = app.bootstrap();
    let s = create(
        &t,
        card("sale", "10.00", json!({ "transaction_api_id": "inv-1001" })),
    );
    assert_eq!(s["transaction_api_id"], "inv-1001");
    refused(
        post_tx(
            &t,
            card("sale", "11.00", json!({ "transaction_api_id": "inv-1001" })),
        ),
        "transaction_api_id",
        "Transaction Api Id has already been taken at this location.",
    );
    // A declined one keeps its api id too.
    let d = create(
        &t,
        card("sale", "5.00", json!({ "transaction_api_id": "inv-1002" })),
    );
    assert_eq!(d["status_id"], 301);
    refused(
        post_tx(
            &t,
            bank(&t, "debit", "11.00", json!({ "transaction_api_id": "inv-1002" })),
        ),
        "transaction_api_id",
        "Transaction Api Id has already been taken at this location.",
    );
    let r = t.get("/v2/transactions?transaction_api_id=inv-1001").expect(200);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 1);
    assert_eq!(r.body["transactions"][0]["id"], id(&s).as_str());
    let r = t.get("/v2/transactions/inv-1001?api_id=1").expect(200);
    assert_eq!(r.body["transaction"]["id"], id(&s).as_str());
    let r = t
        .get("/v2/transactions/inv-1002?api_id=1&expand=status")
        .expect(200);
    assert_eq!(r.body["transaction"]["status"]["id"], 301);
    t.get("/v2/transactions/inv-9999?api_id=1").expect(404);
    t.get("/v2/transactions/inv-1001").expect(404);
    assert_eq!(
        t.get("/v2/transactions").expect(200).body["meta"]["pagination"]["totalCount"],
        2
    );
    // previous_transaction_api_id names one too.
    let again = create(
        &t,
        json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "3.00",
            "previous_transaction_api_id": "inv-1001" }),
    );
    assert_eq!(again["previous_transaction_id"], id(&s).as_str());
    assert_eq!(again["status_id"], 101);
    // Another location may use the same api id.
    let other = app.bootstrap();
    let o = create(
        &other,
        card("sale", "10.00", json!({ "transaction_api_id": "inv-1001" })),
    );
    assert_eq!(o["transaction_api_id"], "inv-1001");
    let r = other.get("/v2/transactions/inv-1001?api_id=1").expect(200);
    assert_eq!(r.body["transaction"]["id"], id(&o).as_str());
}

/// A valid line item; Visa's commodity_code included.
fn line_item(extra: Value) -> Value {
    with(
        json!({ "description": "Widget", "product_code": "W-1", "quantity": "2",
            "unit_code": "EA", "unit_cost": "3.50", "tax_amount": "0.35", "tax_rate": "5",
            "commodity_code": "C100" }),
        extra,
    )
}

fn level3_post(t: &Tenant, tx_id: &str, data: Value) -> Resp {
    t.post(
        "/v2/transactionlevel3s",
        json!({ "transactionlevel3": { "transaction_id": tx_id, "level3_data": data } }),
    )
}

fn level3_lifecycle(app: &TestApp) {
    let t = app.bootstrap();
    let s = sale(&t, "10.00");
    let s_id = id(&s);
    assert_eq!(s["level3_indicator"], true);
    let e = get_tx(&t, &s_id, "transaction_level3");
    assert_eq!(
        e["transaction_level3"],
        json!({ "id": null, "transaction_id": s_id, "level3_data": null })
    );
    let r = level3_post(
        &t,
        &s_id,
        json!({ "tax_rate": "5", "duty_amount": "1.5", "shipto_zip_code": "32606",
            "line_items": [line_item(json!({}))] }),
    )
    .expect(201);
    let l3 = r.body["transactionlevel3"].clone();
    let l3_id = id(&l3);
    assert_eq!(l3["transaction_id"], s_id.as_str());
    assert_eq!(
        l3["level3_data"],
        json!({ "duty_amount": "1.50", "shipto_zip_code": "32606", "tax_rate": "5.00",
            "line_items": [{ "description": "Widget", "product_code": "W-1", "quantity": "2",
                "unit_code": "EA", "unit_cost": "3.50", "tax_amount": "0.35", "tax_rate": "5.00",
                "commodity_code": "C100" }] })
    );
    let got = t.get(&format!("/v2/transactionlevel3s/{l3_id}")).expect(200).body["transactionlevel3"].clone();
    assert_eq!(got, l3);
    let e = get_tx(&t, &s_id, "transaction_level3");
    assert_eq!(e["transaction_level3"], l3);

    // A second POST replaces the whole record: what it leaves out is gone.
    let r = level3_post(
        &t,
        &s_id,
        json!({ "tax_rate": "6", "line_items": [line_item(json!({ "quantity": "1" })),
            line_item(json!({ "description": "Gadget" }))] }),
    )
    .expect(201);
    let replaced = &r.body["transactionlevel3"];
    assert_eq!(replaced["id"], l3_id.as_str(), "one record per transaction");
    let data = &replaced["level3_data"];
    assert_eq!(data["duty_amount"], Value::Null);
    assert!(data.get("duty_amount").is_none() && data.get("shipto_zip_code").is_none());
    assert_eq!(data["tax_rate"], "6.00");
    assert_eq!(data["line_items"].as_array().unwrap().len(), 2);
    assert_eq!(data["line_items"][1]["description"], "Gadget");
    let got = t.get(&format!("/v2/transactionlevel3s/{l3_id}")).expect(200);
    assert_eq!(&got.body["transactionlevel3"], replaced);

    t.delete(&format!("/v2/transactionlevel3s/{l3_id}")).expect(204);
    t.get(&format!("/v2/transactionlevel3s/{l3_id}")).expect(404);
    t.delete(&format!("/v2/transactionlevel3s/{l3_id}")).expect(404);
    let e = get_tx(&t, &s_id, "transaction_level3");
    assert_eq!(e["transaction_level3"]["id"], Value::Null);
    // Another tenant cannot see or delete one.
    let r = level3_post(
        &t,
        &s_id,
        json!({ "tax_rate": "5", "line_items": [line_item(json!({}))] }),
    )
    .expect(201);
    let l3_id = id(&r.body["transactionlevel3"]);
    let other = app.bootstrap();
    other.get(&format!("/v2/transactionlevel3s/{l3_id}")).expect(404);
    other
        .delete(&format!("/v2/transactionlevel3s/{l3_id}"))
        .expect(404);
    refused(
        level3_post(
            &other,
            &s_id,
            json!({ "tax_rate": "5", "line_items": [line_item(json!({}))] }),
        ),
        "transaction_id",
        "transaction_id provided is not valid",
    );
    // Settled: the data went out with the batch, and stays as it went:
    // neither deleted, nor replaced, nor added to a sale without any.
    let bare = id(&sale(&t, "11.00"));
    settled(&t, &str_of(&s["transaction_batch_id"]));
    let kept = t.get(&format!("/v2/transactionlevel3s/{l3_id}")).expect(200).body;
    let settled_message =
        "The transaction is settled: its Level 3 data went out with its batch and can no longer \
                           be added, replaced or deleted.";
    refused(
        t.delete(&format!("/v2/transactionlevel3s/{l3_id}")),
        "id",
        settled_message,
    );
    refused(
        level3_post(
            &t,
            &s_id,
            json!({ "tax_rate": "9", "line_items": [line_item(json!({ "unit_cost": "999.00" }))] }),
        ),
        "transaction_id",
        settled_message,
    );
    refused(
        level3_post(
            &t,
            &bare,
            json!({ "tax_rate": "5", "line_items": [line_item(json!({}))] }),
        ),
        "transaction_id",
        settled_message,
    );
    assert_eq!(
        t.get(&format!("/v2/transactionlevel3s/{l3_id}")).expect(200).body,
        kept
    );
    // An id is a string: a number says so.
    refused(
        t.post(
            "/v2/transactionlevel3s",
            json!({ "transactionlevel3": { "transaction_id": 123,
                "level3_data": { "line_items": [line_item(json!({}))] } } }),
        ),
        "transaction_id",
        "Transaction Id must be a string.",
    );
}

/// First Level 3 POSTs for one transaction sent at once all succeed (one
/// of them last, replacing the others' data whole), and leave one record:
/// on PostgreSQL two of them inserted at once and the second answered 500.
fn level3_first_posts_at_once(app: &TestApp) {
    let t = app.bootstrap();
    for round in 0..4 {
        let tx_id = id(&sale(&t, "10.00"));
        let answers: Vec<Resp> = std::thread::scope(|scope| {
            let posts: Vec<_> = (0..4)
                .map(|i| {
                    let (t, tx_id) = (&t, &tx_id);
                    scope.spawn(move || {
                        level3_post(
                            t,
                            tx_id,
                            json!({ "tax_rate": format!("{}", i + 1),
                                "line_items": [line_item(json!({}))] }),
                        )
                    })
                })
                .collect();
            posts.into_iter().map(|p| p.join().unwrap()).collect()
        });
        let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
        assert_eq!(statuses, vec![201; 4], "round {round}: {answers:?}");
        let ids: std::collections::BTreeSet<String> =
            answers.iter().map(|r| id(&r.body["transactionlevel3"])).collect();
        assert_eq!(ids.len(), 1, "round {round}: one record, {ids:?}");
        let kept = &get_tx(&t, &tx_id, "transaction_level3")["transaction_level3"];
        assert!(
            answers
                .iter()
                .any(|r| r.body["transactionlevel3"]["level3_data"] == kept["level3_data"]),
            "round {round}: the kept data is one POST's whole: {kept}"
        );
    }
}

fn level3_validation(app: &TestApp) {
    let t = app.bootstrap();
    let visa = id(&sale(&t, "10.00"));
    let mc = id(&create(
        &t,
        card("sale", "10.00", json!({ "account_number": MC })),
    ));
    let nested = |r: Resp| -> Value {
        let r = r.expect(422);
        assert_eq!(error_fields(&r), fields(&["level3_data"]), "{}", r.text);
        r.body["errors"]["level3_data"][0].clone()
    };
    // Blank fields, in the reference's words, on each level.
    let e = nested(level3_post(
        &t,
        &visa,
        json!({ "line_items": [line_item(json!({ "tax_rate": null, "commodity_code": "",
            "description": "  " }))] }),
    ));
    assert_eq!(e["tax_rate"], json!(["Tax Rate cannot be blank."]));
    assert_eq!(
        e["line_items"],
        json!([{ "description": ["Description cannot be blank."],
            "tax_rate": ["Tax Rate cannot be blank."],
            "commodity_code": ["Commodity Code cannot be blank."] }])
    );
    // The path of an error: errors.level3_data[0].line_items[i].tax_rate.
    let e = nested(level3_post(
        &t,
        &visa,
        json!({ "tax_rate": "5", "line_items": [line_item(json!({})),
            line_item(json!({ "tax_rate": "x" })), line_item(json!({}))] }),
    ));
    assert!(e.get("tax_rate").is_none());
    let items = e["line_items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0], json!({}));
    assert_eq!(items[1]["tax_rate"][0], "Tax Rate must be a number.");
    assert_eq!(items[2], json!({}));
    // Missing line items.
    for data in [
        json!({ "tax_rate": "5" }),
        json!({ "tax_rate": "5", "line_items": [] }),
        json!({ "tax_rate": "5", "line_items": null }),
    ] {
        let e = nested(level3_post(&t, &visa, data));
        assert_eq!(e, json!({ "line_items": ["Line item record details missing"] }));
    }
    let r = level3_post(&t, &visa, Value::Null).expect(422);
    assert_eq!(
        r.errors("level3_data"),
        vec!["Level3 Data cannot be blank.".to_string()]
    );
    // Every required line item field.
    let e = nested(level3_post(&t, &mc, json!({ "line_items": [{}] })));
    assert_eq!(
        e["line_items"][0],
        json!({ "description": ["Description cannot be blank."],
            "product_code": ["Product Code cannot be blank."],
            "quantity": ["Quantity cannot be blank."],
            "unit_code": ["Unit Code cannot be blank."],
            "unit_cost": ["Unit Cost cannot be blank."],
            "tax_amount": ["Tax Amount cannot be blank."],
            "tax_rate": ["Tax Rate cannot be blank."] })
    );
    // Mastercard needs neither tax_rate nor commodity_code.
    let r = level3_post(
        &t,
        &mc,
        json!({ "line_items": [line_item(json!({ "commodity_code": null }))] }),
    )
    .expect(201);
    let data = &r.body["transactionlevel3"]["level3_data"];
    assert!(data.get("tax_rate").is_none());
    assert!(data["line_items"][0].get("commodity_code").is_none());
    // Nothing was stored by the refusals.
    let e = get_tx(&t, &visa, "transaction_level3");
    assert_eq!(e["transaction_level3"]["id"], Value::Null);
    // The envelope's own fields.
    refused(
        t.post(
            "/v2/transactionlevel3s",
            json!({ "transactionlevel3": { "level3_data": { "line_items": [line_item(json!({}))] } } }),
        ),
        "transaction_id",
        "Transaction Id cannot be blank.",
    );
    refused(
        t.post(
            "/v2/transactionlevel3s",
            json!({ "transactionlevel3": { "transaction_id": visa, "color": "red",
                "level3_data": { "line_items": [line_item(json!({}))] } } }),
        ),
        "color",
        "Unknown field color for transactionlevel3.",
    );
}

fn level3_eligibility(app: &TestApp) {
    let t = app.bootstrap();
    let good = json!({ "tax_rate": "5", "line_items": [line_item(json!({}))] });
    let not_qualified = |tx_id: &str| {
        refused(
            level3_post(&t, tx_id, good.clone()),
            "transaction_id",
            "not qualified for level 3",
        )
    };
    let d = debit(&t, "10.00");
    assert_eq!(d["level3_indicator"], false);
    not_qualified(&id(&d));
    assert_eq!(
        get_tx(&t, &id(&d), "transaction_level3")["transaction_level3"],
        Value::Null
    );
    let declined = sale(&t, "5.00");
    assert_eq!(declined["level3_indicator"], false);
    not_qualified(&id(&declined));
    let voided = sale(&t, "10.00");
    assert_eq!(voided["level3_indicator"], true);
    let v = act(&t, &id(&voided), json!({ "action": "void" }));
    assert_eq!(v["level3_indicator"], false);
    not_qualified(&id(&voided));
    let avs = create(&t, card("avsonly", "0", json!({})));
    not_qualified(&id(&avs));
    let refund = create(&t, card("refund", "3.00", json!({})));
    assert_eq!(refund["level3_indicator"], false);
    not_qualified(&id(&refund));
    // Authorizations and forces qualify.
    let a = authonly(&t, "10.00");
    assert_eq!(a["level3_indicator"], true);
    level3_post(&t, &id(&a), good.clone()).expect(201);
    let f = force(&t, "10.00");
    assert_eq!(f["level3_indicator"], true);
    level3_post(&t, &id(&f), good.clone()).expect(201);
    // A listed cc sale and an ACH debit side by side.
    let r = t
        .get("/v2/transactions?expand=transaction_level3&page_size=100")
        .expect(200);
    for tx in r.body["transactions"].as_array().unwrap() {
        let eligible = tx["level3_indicator"].as_bool().unwrap();
        if eligible {
            assert!(tx["transaction_level3"].is_object(), "{tx}");
        } else {
            assert_eq!(tx["transaction_level3"], Value::Null, "{tx}");
        }
    }
    refused(
        level3_post(&t, "01a1fe751c63719db8b8f59b25161469", good.clone()),
        "transaction_id",
        "transaction_id provided is not valid",
    );
}

/// The matrix's optional fields of the follow-up actions: payment_method
/// must match the transaction, transaction_api_id can be set once; and
/// the N cells among shared lists (card_present on authonly,
/// advance_deposit on refund).
fn follow_up_fields_of_the_matrix(app: &TestApp) {
    let t = app.bootstrap();
    let a = authonly(&t, "20.00");
    refused(
        put_tx(
            &t,
            &id(&a),
            json!({ "action": "authcomplete", "payment_method": "ach" }),
        ),
        "payment_method",
        "Payment Method does not match the transaction (cc).",
    );
    let done = act(
        &t,
        &id(&a),
        json!({ "action": "authcomplete", "payment_method": "cc", "transaction_api_id": "late-id-1" }),
    );
    assert_eq!(done["transaction_api_id"], "late-id-1", "{done}");
    assert_eq!(done["status_id"], 101);
    // Once set, it cannot change; the same value is accepted.
    refused(
        put_tx(
            &t,
            &id(&a),
            json!({ "action": "void", "transaction_api_id": "late-id-2" }),
        ),
        "transaction_api_id",
        "Transaction Api Id is already set and cannot change.",
    );
    let voided = act(
        &t,
        &id(&a),
        json!({ "action": "void", "transaction_api_id": "late-id-1" }),
    );
    assert_eq!(voided["status_id"], 201);
    // Another transaction cannot take an api id already in use.
    let b = authonly(&t, "7.00");
    refused(
        put_tx(
            &t,
            &id(&b),
            json!({ "action": "authincrement", "transaction_amount": "9.00",
            "transaction_api_id": "late-id-1" }),
        ),
        "transaction_api_id",
        "Transaction Api Id has already been taken at this location.",
    );
    refused(
        post_tx(&t, card("authonly", "5.00", json!({ "card_present": 1 }))),
        "card_present",
        "Card Present is not accepted for the authonly action.",
    );
    refused(
        post_tx(&t, card("refund", "5.00", json!({ "advance_deposit": 1 }))),
        "advance_deposit",
        "Advance Deposit is not accepted for the refund action.",
    );
    // A sale still takes card_present.
    assert_eq!(
        create(&t, card("sale", "7.00", json!({ "card_present": 1 })))["status_id"],
        101
    );
}
