//! The Authorize.Net emulator (ADR 0016): Authorize.Net's official Node.js
//! SDK (tests/anet, unmodified, from npm) pointed at Ferrogate by its
//! endpoint setting; the XML and JSON API by hand, its refusals in their
//! shape; AIM 3.0/3.1 over plain HTTP with each delimiter option. Every
//! emulated payment is ours: trx_source_id 11, in a batch, heard by
//! postbacks. Bodies of the wrong types are their errors, never a 5xx; no
//! card number reaches the server log.

use crate::engine_tests;
use crate::support::{Client, Tenant, TestApp};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

engine_tests!(
    official_client_library,
    xml_and_json_answer_in_their_format,
    refusals_are_theirs_never_a_server_error,
    aim_with_each_delimiter_option,
    python_sdk_with_short_credentials,
    an_emulated_payment_reaches_a_postback,
    capture_only_is_a_force_and_needs_its_code,
    aim_capture_only_and_credit,
    type_confused_json_answers_their_error,
    test_mode_duplicates_and_their_codes,
    a_surcharge_is_not_added_to_the_carts_amount,
    partial_authorization_per_request,
    repeated_follow_ups_and_unknown_types,
    refunds_need_the_referenced_card,
    duplicates_by_type_with_or_without_invoice,
    transaction_details_keep_what_was_sent,
    subscriptions_as_authorize_net_keeps_them,
    duplicate_subscriptions_are_refused,
    repeated_refunds_are_duplicates,
    permanent_refusals_are_not_try_again,
    a_duplicate_names_its_original,
    pay_numbers_count_billing_periods,
    aim_void_answers_the_voided_amount,
    transaction_reporting_on_our_batches,
    methods_not_emulated_answer_as_without_the_feature,
);

/// The full card numbers these tests (and the SDK scripts) send: none may
/// reach the server log.
const CARDS: &[&str] = &["4111111111111111", "5454545454545454", "4111111111111112"];

#[track_caller]
fn no_card_in_log(app: &TestApp) {
    let log = app.log();
    assert!(!log.is_empty(), "the server wrote its log");
    for card in CARDS {
        assert!(!log.contains(card), "card number {card} in the server log");
    }
}

fn json_path(t: &Tenant) -> String {
    format!("/xml/v1/request.api?developer={}", t.cred("developer_id"))
}

/// Posts a JSON body to the API endpoint; the answer parsed.
fn post_json(app: &TestApp, t: &Tenant, body: &Value) -> Value {
    let (status, content, text) = post_raw(app, &json_path(t), "application/json", &body.to_string());
    assert_eq!(status, 200, "{text}");
    assert!(content.starts_with("application/json"), "{content}");
    serde_json::from_str(text.trim_start_matches('\u{feff}')).unwrap_or_else(|_| panic!("JSON: {text}"))
}

fn authentication(t: &Tenant) -> Value {
    json!({ "name": t.user_id(), "transactionKey": t.cred("user_api_key") })
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/anet")
}

/// Whether the official SDK is installed (`npm ci --prefix tests/anet`);
/// under CI it must be.
fn sdk_ready() -> bool {
    let sdk = scripts().join("node_modules/authorizenet").exists();
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if sdk && node {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the Authorize.Net SDK test cannot run (node: {node}, tests/anet/node_modules: {sdk})"
    );
    eprintln!("skipped: run `npm ci --prefix tests/anet` to drive the emulator with the official SDK");
    false
}

fn sdk(app: &TestApp, t: &Tenant, phase: &str, extra: &[(&str, String)]) -> Value {
    let endpoint = format!(
        "{}/xml/v1/request.api?developer={}",
        app.base,
        t.cred("developer_id")
    );
    let out = Command::new("node")
        .arg(scripts().join("official_client.js"))
        .current_dir(scripts())
        .env("ENDPOINT", endpoint)
        .env("LOGIN", t.user_id())
        .env("KEY", t.cred("user_api_key"))
        .env("PHASE", phase)
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "official_client.js ({phase}) failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script's JSON")
}

fn emulated(t: &Tenant) -> Vec<Value> {
    t.get("/v2/transactions?trx_source_id=11&page_size=100")
        .expect(200)
        .body["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn official_client_library(app: &TestApp) {
    if !sdk_ready() {
        return;
    }
    let t = app.bootstrap();
    let seen = sdk(app, &t, "charge", &[]);
    assert_eq!(seen["trial_error"], json!("E00013"));
    // Every emulated payment is ours, from source 11, visible in /v2.
    let list = emulated(&t);
    let amounts: Vec<&str> = list
        .iter()
        .filter_map(|tx| tx["transaction_amount"].as_str())
        .collect();
    for amount in ["12.34", "20.00", "5.00"] {
        assert!(amounts.contains(&amount), "{amount} in {amounts:?}");
    }
    assert!(list.iter().any(|tx| tx["status_id"] == json!(201)), "the void");
    assert!(list.iter().all(|tx| tx["trx_source_id"] == json!(11)));
    assert!(list
        .iter()
        .any(|tx| tx["transaction_amount"] == json!("5.00") && tx["reason_code_id"] == json!(1500)));
    // The sale entered a batch; settled, it can be refunded.
    let sale = list
        .iter()
        .find(|tx| tx["transaction_amount"] == json!("12.34"))
        .expect("the sale");
    assert_eq!(sale["order_num"], json!("INV-1"));
    assert_eq!(sale["last_four"], json!("1111"));
    let batch = sale["transaction_batch_id"]
        .as_str()
        .expect("a batch")
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    let closed = t.get(&format!("/v2/transactionbatches/{batch}")).expect(200).body["transactionbatch"]
        ["batch_close_ts"]
        .as_i64()
        .unwrap();
    let refunded = sdk(
        app,
        &t,
        "refund",
        &[
            ("SALE", seen["sale"].as_str().unwrap().to_string()),
            ("FIRST", date_time_of(closed - 86_400)),
            ("LAST", date_time_of(closed)),
        ],
    );
    assert!(refunded["refund"].as_str().is_some());
    // The reporting API listed the batch: the sale, the capture and the
    // void (the decline and the refused ACH never entered it).
    let listed: Vec<&str> = refunded["batch_transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for id in [&seen["sale"], &seen["auth"], &seen["voided"]] {
        assert!(listed.contains(&id.as_str().unwrap()), "{id} in {refunded}");
    }
    assert_eq!(refunded["batch_total"], json!(listed.len().to_string()));
    let refund = emulated(&t)
        .into_iter()
        .find(|tx| tx["type_id"] == json!(30))
        .expect("the refund");
    assert_eq!(refund["transaction_amount"], json!("2.34"));
    assert_eq!(refund["previous_transaction_id"], sale["id"]);
    // The canceled subscription is our recurring, ended.
    let recurrings = t.get("/v2/recurrings").expect(200).body["recurrings"].clone();
    assert_eq!(recurrings[0]["status"], json!("ended"));
    assert_eq!(recurrings[0]["ended_reason"], json!("canceled"));
    assert_eq!(recurrings[0]["transaction_amount"], json!("15.00"));
    no_card_in_log(app);
}

fn post_raw(app: &TestApp, path: &str, content_type: &str, body: &str) -> (u16, String, String) {
    let r = Client {
        base: app.base.clone(),
    }
    .send("POST", path, &[("content-type", content_type)], Some(body));
    let content = r.header("content-type").unwrap_or_default().to_string();
    (r.status, content, r.text)
}

fn xml_sale(t: &Tenant, amount: &str, card: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<createTransactionRequest xmlns="AnetApi/xml/v1/schema/AnetApiSchema.xsd">
  <merchantAuthentication><name>{}</name><transactionKey>{}</transactionKey></merchantAuthentication>
  <refId>order-77</refId>
  <transactionRequest>
    <transactionType>authCaptureTransaction</transactionType>
    <amount>{amount}</amount>
    <payment><creditCard><cardNumber>{card}</cardNumber><expirationDate>2035-12</expirationDate><cardCode>999</cardCode></creditCard></payment>
  </transactionRequest>
</createTransactionRequest>"#,
        t.user_id(),
        t.cred("user_api_key")
    )
}

/// The text of the first `<name>` element.
fn element<'a>(xml: &'a str, name: &str) -> &'a str {
    let open = format!("<{name}>");
    let start = xml.find(&open).map(|i| i + open.len()).unwrap_or(0);
    let end = xml[start..].find('<').map(|i| start + i).unwrap_or(start);
    &xml[start..end]
}

fn xml_and_json_answer_in_their_format(app: &TestApp) {
    let t = app.bootstrap();
    let path = format!("/xml/v1/request.api?developer={}", t.cred("developer_id"));
    // userFields come back after the messages, as the schema orders them.
    let with_user_fields = xml_sale(&t, "10.01", "4111111111111111").replace(
        "</transactionRequest>",
        "<userFields><userField><name>cart</name><value>42</value></userField>\
         <userField><name>note</name><value>gift &amp; wrap</value></userField></userFields></transactionRequest>",
    );
    let (status, content, text) = post_raw(app, &path, "text/xml", &with_user_fields);
    assert!(
        text.contains(
            "</messages><userFields><userField><name>cart</name><value>42</value></userField>\
             <userField><name>note</name><value>gift &amp; wrap</value></userField></userFields></transactionResponse>"
        ),
        "{text}"
    );
    assert_eq!(status, 200);
    assert!(content.starts_with("application/xml"), "{content}");
    assert!(text.starts_with('\u{feff}'), "a byte order mark first");
    assert!(text.contains("<createTransactionResponse "), "{text}");
    assert!(text.contains("xmlns=\"AnetApi/xml/v1/schema/AnetApiSchema.xsd\""));
    assert_eq!(element(&text, "refId"), "order-77");
    assert_eq!(element(&text, "resultCode"), "Ok");
    assert_eq!(element(&text, "responseCode"), "1");
    assert_eq!(element(&text, "accountNumber"), "XXXX1111");
    assert!(
        !text.contains("4111111111111111"),
        "the card number is never answered"
    );
    let trans_id = element(&text, "transId").to_string();
    assert!(
        trans_id.len() == 11 && trans_id.bytes().all(|b| b.is_ascii_digit()),
        "{trans_id}"
    );

    // JSON, at the other path, answered in JSON: the same transaction's
    // details by its number.
    let json_path = format!("/gateway/request.api?developer={}", t.cred("developer_id"));
    let body = json!({ "getTransactionDetailsRequest": {
        "merchantAuthentication": { "name": t.user_id(), "transactionKey": t.cred("user_api_key") },
        "transId": trans_id } });
    let (status, content, text) = post_raw(app, &json_path, "application/json", &body.to_string());
    assert_eq!(status, 200);
    assert!(content.starts_with("application/json"), "{content}");
    let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).expect("JSON");
    assert_eq!(v["messages"]["resultCode"], json!("Ok"));
    assert_eq!(v["messages"]["message"][0]["code"], json!("I00001"));
    assert_eq!(v["transaction"]["transId"], json!(trans_id));
    assert_eq!(v["transaction"]["settleAmount"], json!("10.01"));
    assert_eq!(
        v["transaction"]["transactionStatus"],
        json!("capturedPendingSettlement")
    );

    // A JSON sale that declines (sandbox 5.00) answers their error shape.
    let decline = json!({ "createTransactionRequest": {
        "merchantAuthentication": { "name": t.user_id(), "transactionKey": t.cred("user_api_key") },
        "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": 5,
            "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "1235" } },
            "userFields": { "userField": { "name": "cart", "value": "43" } } } } });
    let (_, _, text) = post_raw(app, &json_path, "application/json", &decline.to_string());
    let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).expect("JSON");
    assert_eq!(v["messages"]["resultCode"], json!("Error"));
    assert_eq!(v["messages"]["message"][0]["code"], json!("E00027"));
    assert_eq!(v["transactionResponse"]["responseCode"], json!("2"));
    assert_eq!(
        v["transactionResponse"]["userFields"],
        json!([{ "name": "cart", "value": "43" }]),
        "{v}"
    );
    assert_eq!(v["transactionResponse"]["errors"][0]["errorCode"], json!("2"));
    assert_eq!(
        v["transactionResponse"]["errors"][0]["errorText"],
        json!("This transaction has been declined.")
    );
    let list = emulated(&t);
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|tx| tx["trx_source_id"] == json!(11)));
    no_card_in_log(app);
}

fn refusals_are_theirs_never_a_server_error(app: &TestApp) {
    let t = app.bootstrap();
    let dev = t.cred("developer_id");
    let path = format!("/xml/v1/request.api?developer={dev}");
    let code = |text: &str| element(text, "code").to_string();
    for bad in [
        "",
        "<",
        "not xml at all",
        "<a><b></a>",
        "<!DOCTYPE x [<!ENTITY e \"e\">]><x>&e;</x>",
        "<createTransactionRequest><merchantAuthentication>",
    ] {
        let (status, _, text) = post_raw(app, &path, "text/xml", bad);
        assert_eq!(status, 200, "{bad}");
        assert!(text.contains("<ErrorResponse "), "{text}");
        assert_eq!(code(&text), "E00003", "{bad}: {text}");
    }
    let (status, content, text) = post_raw(app, &path, "application/json", "{\"x\": [1,");
    assert_eq!(status, 200);
    assert!(content.starts_with("application/json"));
    assert!(text.contains("\"E00003\""), "{text}");
    // An unknown method; wrong credentials; no developer id.
    let (_, _, text) = post_raw(app, &path, "text/xml", "<isDeadRequest/>");
    assert_eq!(code(&text), "E00004");
    // A parse error never repeats the request: it may hold a card number.
    let (_, _, text) = post_raw(
        app,
        &path,
        "text/xml",
        "<createTransactionRequest><x>&4111111111111111;</x></createTransactionRequest>",
    );
    assert_eq!(code(&text), "E00003", "{text}");
    assert!(!text.contains("4111"), "{text}");
    let wrong = xml_sale(&t, "1.00", "4111111111111111").replace(&t.cred("user_api_key"), "nope");
    let (_, _, text) = post_raw(app, &path, "text/xml", &wrong);
    assert_eq!(code(&text), "E00007");
    let (_, _, text) = post_raw(
        app,
        "/xml/v1/request.api",
        "text/xml",
        &xml_sale(&t, "1.00", "4111111111111111"),
    );
    assert_eq!(code(&text), "E00007", "the developer id is required");
    // A user whose roles do not allow payments: their reason 123, in a
    // transaction response.
    let (reader, reader_key) = t.user(&t.location_id(), Some("2"));
    let as_reader = xml_sale(&t.as_user(&reader, &reader_key), "1.00", "4111111111111111");
    let (status, _, text) = post_raw(app, &path, "text/xml", &as_reader);
    assert_eq!(status, 200);
    assert_eq!(code(&text), "E00027", "{text}");
    assert_eq!(element(&text, "responseCode"), "3", "{text}");
    assert_eq!(element(&text, "errorCode"), "123", "{text}");
    assert!(text.contains("has not been given the permission"), "{text}");
    // Field errors answer their reason codes, in a transaction response.
    for (amount, card, reason) in [
        ("abc", "4111111111111111", "5"),
        ("1.00", "4111111111111112", "6"),
        ("1.00", "41111", "6"),
    ] {
        let (status, _, text) = post_raw(app, &path, "text/xml", &xml_sale(&t, amount, card));
        assert_eq!(status, 200);
        assert_eq!(element(&text, "responseCode"), "3", "{text}");
        assert_eq!(element(&text, "errorCode"), reason, "{text}");
    }
    // Unknown references, wrong types, bad subscriptions.
    let auth = format!(
        "<merchantAuthentication><name>{}</name><transactionKey>{}</transactionKey></merchantAuthentication>",
        t.user_id(),
        t.cred("user_api_key")
    );
    let void = format!(
        "<createTransactionRequest>{auth}<transactionRequest><transactionType>voidTransaction</transactionType>\
         <refTransId>12345678901</refTransId></transactionRequest></createTransactionRequest>"
    );
    let (_, _, text) = post_raw(app, &path, "text/xml", &void);
    assert_eq!(element(&text, "errorCode"), "16");
    let details = |trans_id: &str| {
        let xml = format!("<getTransactionDetailsRequest>{auth}{trans_id}</getTransactionDetailsRequest>");
        post_raw(app, &path, "text/xml", &xml).2
    };
    assert_eq!(code(&details("<transId>12345678901</transId>")), "E00040");
    // Their schema's numericString, required: E00003, as ErrorResponse.
    for bad in ["<transId>abc</transId>", "<transId></transId>", ""] {
        let text = details(bad);
        assert_eq!(code(&text), "E00003", "{bad}: {text}");
        assert!(text.contains("<ErrorResponse "), "{text}");
    }
    let get = format!(
        "<ARBGetSubscriptionRequest>{auth}<subscriptionId>1</subscriptionId></ARBGetSubscriptionRequest>"
    );
    let (_, _, text) = post_raw(app, &path, "text/xml", &get);
    assert_eq!(code(&text), "E00035");
    let create = format!(
        "<ARBCreateSubscriptionRequest>{auth}<subscription><amount>-1</amount></subscription></ARBCreateSubscriptionRequest>"
    );
    let (status, _, text) = post_raw(app, &path, "text/xml", &create);
    assert_eq!(status, 200);
    assert_eq!(element(&text, "resultCode"), "Error");
    // Nothing here made a payment.
    assert!(emulated(&t).is_empty());
    no_card_in_log(app);
}

/// Posts AIM pairs: the tenant's credentials, version 3.1 and delimited
/// data, with `extra` added or replacing those.
fn aim(app: &TestApp, t: &Tenant, extra: &[(&str, &str)]) -> String {
    let (dev, login, key) = (t.cred("developer_id"), t.user_id(), t.cred("user_api_key"));
    let mut pairs: Vec<(&str, &str)> = vec![
        ("x_login", &login),
        ("x_tran_key", &key),
        ("x_version", "3.1"),
        ("x_delim_data", "TRUE"),
        ("x_relay_response", "FALSE"),
    ];
    pairs.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
    pairs.extend_from_slice(extra);
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let (status, content, text) = post_raw(
        app,
        &format!("/gateway/transact.dll?developer={dev}"),
        "application/x-www-form-urlencoded",
        &body,
    );
    assert_eq!(status, 200);
    assert!(content.starts_with("text/plain"), "{content}");
    text
}

fn aim_with_each_delimiter_option(app: &TestApp) {
    let t = app.bootstrap();
    let send = |extra: &[(&str, &str)]| aim(app, &t, extra);
    // Default delimiter (comma), no encapsulation.
    let line = send(&[
        ("x_type", "AUTH_CAPTURE"),
        ("x_amount", "4.25"),
        ("x_card_num", "4111111111111111"),
        ("x_exp_date", "12/35"),
        ("x_invoice_num", "A-1"),
        ("x_first_name", "Pat"),
    ]);
    let f: Vec<&str> = line.split(',').collect();
    assert_eq!(f.len(), 55, "{line}");
    assert_eq!((f[0], f[2]), ("1", "1"), "{line}");
    assert_eq!(f[3], "This transaction has been approved.");
    assert!(!f[4].is_empty(), "an auth code");
    assert_eq!((f[7], f[9], f[10], f[11]), ("A-1", "4.25", "CC", "auth_capture"));
    assert_eq!(f[13], "Pat");
    assert_eq!((f[50], f[51]), ("XXXX1111", "Visa"));
    let sale_id = f[6].to_string();
    assert!(!line.contains("4111111111111111"));

    // Pipe, encapsulated in quotes: the sale voided.
    let line = send(&[
        ("x_type", "VOID"),
        ("x_trans_id", &sale_id),
        ("x_delim_char", "|"),
        ("x_encap_char", "\""),
    ]);
    let f: Vec<&str> = line.split('|').collect();
    assert_eq!(f.len(), 55, "{line}");
    assert_eq!(
        (f[0], f[6], f[11]),
        ("\"1\"", &*format!("\"{sale_id}\""), "\"void\"")
    );

    // Another delimiter and encapsulation, version 3.0 (38 fields): an
    // authorization, then its capture.
    let line = send(&[
        ("x_version", "3.0"),
        ("x_type", "AUTH_ONLY"),
        ("x_amount", "9.00"),
        ("x_card_num", "5454545454545454"),
        ("x_exp_date", "1235"),
        ("x_delim_char", ";"),
        ("x_encap_char", "'"),
    ]);
    let f: Vec<&str> = line.split(';').collect();
    assert_eq!(f.len(), 38, "{line}");
    assert_eq!(f[0], "'1'");
    let auth_id = f[6].trim_matches('\'').to_string();
    let line = send(&[
        ("x_type", "PRIOR_AUTH_CAPTURE"),
        ("x_trans_id", &auth_id),
        ("x_delim_char", "\t"),
    ]);
    let f: Vec<&str> = line.split('\t').collect();
    assert_eq!(f.len(), 55, "{line}");
    assert_eq!((f[0], f[11]), ("1", "prior_auth_capture"), "{line}");

    // A decline, a bad login, ACH and relay response: their codes.
    let line = send(&[
        ("x_amount", "5.00"),
        ("x_card_num", "4111111111111111"),
        ("x_exp_date", "1235"),
    ]);
    assert!(
        line.starts_with("2,1,2,This transaction has been declined."),
        "{line}"
    );
    assert!(send(&[("x_amount", "1.00"), ("x_tran_key", "nope")]).starts_with("3,1,13,"));
    assert!(send(&[("x_amount", "1.00"), ("x_method", "ECHECK")]).starts_with("3,1,18,"));
    let relay = send(&[("x_amount", "1.00"), ("x_relay_response", "TRUE")]);
    assert!(
        relay.starts_with("3,1,19,Relay Response is not supported"),
        "{relay}"
    );

    // A delimiter of several characters is echoed whole: Magento's
    // module sends `(~)` and splits on all three.
    let line = send(&[
        ("x_amount", "4.30"),
        ("x_card_num", "4111111111111111"),
        ("x_exp_date", "1235"),
        ("x_delim_char", "(~)"),
        ("x_encap_char", "||"),
    ]);
    let f: Vec<&str> = line.split("(~)").collect();
    assert_eq!(f.len(), 55, "{line}");
    assert_eq!((f[0], f[2], f[9]), ("||1||", "||1||", "||4.30||"), "{line}");

    let list = emulated(&t);
    assert_eq!(list.len(), 4, "sales, authorization and decline");
    assert!(list.iter().any(|tx| tx["status_id"] == json!(201)), "the void");
    no_card_in_log(app);
}

/// The Python of the virtual environment `.ci/run` makes for the official
/// Python SDK (`authorizenet` from PyPI), if there is one; under CI there
/// must be.
fn python_sdk() -> Option<PathBuf> {
    let python = std::env::var_os("ANET_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var("HOME").unwrap_or_default())
                .join(".cache/ferrogate/anet-venv/bin/python")
        });
    let ready = Command::new(&python)
        .args(["-c", "import authorizenet"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ready {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the Python SDK is not installed at {}",
        python.display()
    );
    eprintln!("skipped: .ci/run installs the Python SDK into ~/.cache/ferrogate/anet-venv");
    None
}

/// Their schema caps a login at 25 characters and a key at 16: a user's
/// short pair works where the user id and API key do not fit, with the
/// official Python SDK, which checks those lengths before sending.
fn python_sdk_with_short_credentials(app: &TestApp) {
    let t = app.bootstrap();
    let pair = t
        .post(
            &format!("/v2/users/{}/generateemulatorkey", t.user_id()),
            json!({}),
        )
        .expect(200)
        .body["user"]
        .clone();
    let (login, key) = (
        pair["emulator_login"].as_str().unwrap().to_string(),
        pair["emulator_transaction_key"].as_str().unwrap().to_string(),
    );
    assert_eq!((login.len(), key.len()), (20, 16));
    let path = format!("/gateway/request.api?developer={}", t.cred("developer_id"));
    let test = |login: &str, key: &str| {
        let body = json!({ "authenticateTestRequest": {
            "merchantAuthentication": { "name": login, "transactionKey": key } } });
        let (status, _, text) = post_raw(app, &path, "application/json", &body.to_string());
        assert_eq!(status, 200);
        text
    };
    assert!(test(&login, &key).contains("\"resultCode\":\"Ok\""));
    assert!(test(&login, "0000000000000000").contains("E00007"));
    // Without a developer id, nothing.
    let bare = json!({ "authenticateTestRequest": {
        "merchantAuthentication": { "name": login, "transactionKey": key } } });
    let (_, _, text) = post_raw(app, "/gateway/request.api", "application/json", &bare.to_string());
    assert!(text.contains("E00007"), "{text}");
    if let Some(python) = python_sdk() {
        // A settled batch for the script's reporting calls.
        let settled = settled_sale(app, &t, "2.50", "PY-B");
        let out = Command::new(python)
            .arg(scripts().join("official_client.py"))
            .env(
                "ENDPOINT",
                format!(
                    "{}/xml/v1/request.api?developer={}",
                    app.base,
                    t.cred("developer_id")
                ),
            )
            .env("LOGIN", &login)
            .env("KEY", &key)
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "official_client.py failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let seen: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
        assert_eq!(seen["account"], "XXXX1111");
        assert_eq!(seen["details_amount"], "7.77");
        assert_eq!(seen["declined_code"], "2");
        // The reporting lists, each answer valid in their schema.
        let unsettled = seen["unsettled"].as_array().unwrap();
        assert_eq!(unsettled.len(), 2, "the sale and the decline: {seen}");
        assert!(unsettled.contains(&seen["trans_id"]), "{seen}");
        assert_eq!(seen["batch_transactions"], json!([settled]), "{seen}");
        assert_eq!(seen["batch_total"], 1);
        assert_eq!(
            seen["batch_charges"].as_str().unwrap().parse::<f64>().ok(),
            Some(2.5)
        );
        let sale = emulated(&t)
            .into_iter()
            .find(|tx| tx["transaction_amount"] == json!("7.77"))
            .expect("the Python SDK's sale");
        assert_eq!(sale["trx_source_id"], 11);
    }
    // A new pair replaces the old one.
    t.post(
        &format!("/v2/users/{}/generateemulatorkey", t.user_id()),
        json!({}),
    )
    .expect(200);
    assert!(test(&login, &key).contains("E00007"));
    no_card_in_log(app);
}

/// The second way a result reaches an integrator: an emulated payment is
/// a transaction like any other, so a transaction postback hears of it,
/// once, with trx_source_id 11.
fn an_emulated_payment_reaches_a_postback(app: &TestApp) {
    use crate::support::receiver::{config, deliveries, wait_log, Receiver};
    let t = app.bootstrap();
    let receiver = Receiver::start("/emulator-results");
    let hook = config(
        &t,
        json!({ "resource": "transaction", "url": receiver.url,
            "product_transaction_id": t.cred("cc_product_transaction_id") }),
    );
    let hook = hook["id"].as_str().unwrap().to_string();
    let answer = post_json(
        app,
        &t,
        &json!({ "createTransactionRequest": { "merchantAuthentication": authentication(&t),
            "refId": "pb-1",
            "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": "3.21",
                "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12" } },
                "order": { "invoiceNumber": "PB-1" } } } }),
    );
    assert_eq!(answer["transactionResponse"]["responseCode"], "1", "{answer}");
    let got = receiver.wait_for(1, std::time::Duration::from_secs(10));
    let log = wait_log(&t, &hook, std::time::Duration::from_secs(10), |log| {
        !log.is_empty() && log.iter().all(|d| d["status"] == "delivered")
    });
    assert_eq!(log.len(), 1, "one delivery: {log:#?}");
    assert_eq!(deliveries(&t, &hook).len(), 1);
    assert_eq!(receiver.received().len(), 1);
    assert_eq!(got[0].field("type"), "CREATE");
    assert_eq!(got[0].field("resource"), "transaction");
    let data = got[0].data();
    assert_eq!(data["trx_source_id"], 11, "{data}");
    assert_eq!(data["transaction_amount"], "3.21");
    assert_eq!(data["order_num"], "PB-1");
    assert_eq!(data["status_id"], 101);
    assert_eq!(data["id"], emulated(&t)[0]["id"]);
    assert!(!got[0].body.contains("4111111111111111"));
    no_card_in_log(app);
}

/// `captureOnlyTransaction` with an `authCode` is our force (a sale
/// authorized by phone); without the code it is Authorize.Net's reason
/// 12, and nothing is charged.
fn capture_only_is_a_force_and_needs_its_code(app: &TestApp) {
    let t = app.bootstrap();
    let capture = |extra: Value| {
        let mut request = json!({ "transactionType": "captureOnlyTransaction", "amount": "6.50",
            "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12" } } });
        for (k, v) in extra.as_object().unwrap() {
            request[k] = v.clone();
        }
        post_json(
            app,
            &t,
            &json!({ "createTransactionRequest": { "merchantAuthentication": authentication(&t),
                "transactionRequest": request } }),
        )
    };
    for (extra, why) in [
        (json!({}), "no authCode"),
        (json!({ "authCode": "" }), "a blank authCode"),
        (json!({ "authCode": "ABC1234" }), "seven characters"),
    ] {
        let v = capture(extra);
        assert_eq!(v["messages"]["resultCode"], "Error", "{why}: {v}");
        assert_eq!(v["transactionResponse"]["responseCode"], "3", "{why}: {v}");
        assert_eq!(
            v["transactionResponse"]["errors"][0]["errorCode"], "12",
            "{why}: {v}"
        );
    }
    let v = capture(json!({}));
    assert_eq!(
        v["transactionResponse"]["errors"][0]["errorText"],
        "An authorization code is required but not present."
    );
    assert!(emulated(&t).is_empty(), "a refusal charges nothing");

    let v = capture(json!({ "authCode": "ABC123" }));
    assert_eq!(v["messages"]["resultCode"], "Ok", "{v}");
    assert_eq!(v["transactionResponse"]["responseCode"], "1", "{v}");
    assert_eq!(v["transactionResponse"]["authCode"], "ABC123", "{v}");
    let list = emulated(&t);
    assert_eq!(list.len(), 1);
    let force = &list[0];
    assert_eq!(force["auth_code"], "ABC123");
    assert_eq!(force["transaction_amount"], "6.50");
    assert_eq!(force["status_id"], 101);
    assert_eq!(force["type_id"], 20);
    assert!(
        force["transaction_batch_id"].is_string(),
        "a force enters the batch"
    );
    no_card_in_log(app);
}

/// AIM's CAPTURE_ONLY (a force with `x_auth_code`) and CREDIT (a refund
/// of a settled sale by `x_trans_id`).
fn aim_capture_only_and_credit(app: &TestApp) {
    let t = app.bootstrap();
    let send = |extra: &[(&str, &str)]| -> Vec<String> {
        aim(app, &t, extra).split(',').map(str::to_string).collect()
    };
    let card = [("x_card_num", "4111111111111111"), ("x_exp_date", "12/35")];
    let mut no_code = vec![("x_type", "CAPTURE_ONLY"), ("x_amount", "7.00")];
    no_code.extend_from_slice(&card);
    let f = send(&no_code);
    assert_eq!((f[0].as_str(), f[2].as_str()), ("3", "12"), "{f:?}");
    assert_eq!(f[3], "An authorization code is required but not present.");
    let mut forced = no_code.clone();
    forced.push(("x_auth_code", "XYZ789"));
    let f = send(&forced);
    assert_eq!((f[0].as_str(), f[2].as_str()), ("1", "1"), "{f:?}");
    assert_eq!(f[4], "XYZ789", "the code sent is the authorization");
    assert_eq!(f[11], "capture_only");
    let force_id = f[6].clone();

    // A sale, settled, then credited in part, twice, and not beyond.
    let mut sale = vec![("x_type", "AUTH_CAPTURE"), ("x_amount", "10.00")];
    sale.extend_from_slice(&card);
    let sale_id = send(&sale)[6].clone();
    let f = send(&[
        ("x_type", "CREDIT"),
        ("x_amount", "1.00"),
        ("x_trans_id", &sale_id),
        ("x_card_num", "1111"),
    ]);
    assert_eq!(
        (f[0].as_str(), f[2].as_str()),
        ("3", "54"),
        "an unsettled sale: {f:?}"
    );
    let f = send(&[("x_type", "CREDIT"), ("x_amount", "1.00"), ("x_card_num", "1111")]);
    assert_eq!(
        (f[0].as_str(), f[2].as_str()),
        ("3", "15"),
        "no x_trans_id: {f:?}"
    );
    let batch = emulated(&t)
        .into_iter()
        .find(|tx| tx["transaction_amount"] == "10.00")
        .expect("the sale")["transaction_batch_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    // The credit's card must be the sale's: none, or another, is their 54.
    for (card, why) in [
        (None, "no card"),
        (Some("5454"), "another card's last four"),
        (Some("4111111111111112"), "another number"),
    ] {
        let mut credit = vec![
            ("x_type", "CREDIT"),
            ("x_amount", "4.00"),
            ("x_trans_id", sale_id.as_str()),
        ];
        credit.extend(card.map(|c| ("x_card_num", c)));
        let f = send(&credit);
        assert_eq!((f[0].as_str(), f[2].as_str()), ("3", "54"), "{why}: {f:?}");
        assert!(
            f[3].starts_with("The referenced transaction does not meet the criteria for issuing a credit."),
            "{why}: {f:?}"
        );
    }
    let f = send(&[
        ("x_type", "CREDIT"),
        ("x_amount", "4.00"),
        ("x_trans_id", &sale_id),
        ("x_card_num", "XXXX1111"),
    ]);
    assert_eq!((f[0].as_str(), f[2].as_str()), ("1", "1"), "{f:?}");
    assert_eq!((f[9].as_str(), f[11].as_str()), ("4.00", "credit"), "{f:?}");
    let f = send(&[
        ("x_type", "CREDIT"),
        ("x_amount", "7.00"),
        ("x_trans_id", &sale_id),
        ("x_card_num", "1111"),
    ]);
    assert_eq!(
        (f[0].as_str(), f[2].as_str()),
        ("3", "55"),
        "beyond the sale: {f:?}"
    );
    let f = send(&[
        ("x_type", "CREDIT"),
        ("x_amount", "6.00"),
        ("x_trans_id", &sale_id),
        ("x_card_num", "4111111111111111"),
    ]);
    assert_eq!(f[0], "1", "the rest: {f:?}");

    let list = emulated(&t);
    let refunds: Vec<&Value> = list.iter().filter(|tx| tx["type_id"] == 30).collect();
    assert_eq!(refunds.len(), 2, "{list:#?}");
    assert!(refunds.iter().all(|r| r["trx_source_id"] == 11));
    assert!(list
        .iter()
        .any(|tx| tx["auth_code"] == "XYZ789" && tx["transaction_amount"] == "7.00"));
    assert!(!force_id.is_empty());
    no_card_in_log(app);
}

/// JSON whose members have the wrong types, or that nests too deep, is
/// answered like Authorize.Net answers what it cannot use: HTTP 200 and
/// an error in their shape, never a 5xx, never a payment.
fn type_confused_json_answers_their_error(app: &TestApp) {
    let t = app.bootstrap();
    let auth = authentication(&t);
    let card = json!({ "cardNumber": "4111111111111111", "expirationDate": "2035-12" });
    let sale = |request: Value| json!({ "createTransactionRequest": { "merchantAuthentication": auth.clone(), "transactionRequest": request } });
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_request = format!(
        "{{\"createTransactionRequest\": {{\"merchantAuthentication\": {auth}, \"transactionRequest\": {deep}}}}}"
    );
    let deep_member = format!(
        "{{\"createTransactionRequest\": {{\"merchantAuthentication\": {auth}, \"transactionRequest\": \
         {{\"transactionType\": \"authCaptureTransaction\", \"amount\": {}1{}}}}}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    let cases: Vec<(&str, String)> = vec![
        ("transactionRequest: []", sale(json!([])).to_string()),
        ("transactionRequest: \"x\"", sale(json!("x")).to_string()),
        ("transactionRequest: null", sale(Value::Null).to_string()),
        (
            "amount: {}",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": {},
                "payment": { "creditCard": card } }))
            .to_string(),
        ),
        (
            "amount: [5]",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": [5],
                "payment": { "creditCard": card } }))
            .to_string(),
        ),
        (
            "amount: true",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": true,
                "payment": { "creditCard": card } }))
            .to_string(),
        ),
        (
            "cardNumber: [1]",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": "1.00",
                "payment": { "creditCard": { "cardNumber": [1], "expirationDate": "2035-12" } } }))
            .to_string(),
        ),
        (
            "cardNumber: {}",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": "1.00",
                "payment": { "creditCard": { "cardNumber": {}, "expirationDate": "2035-12" } } }))
            .to_string(),
        ),
        (
            "expirationDate: 1235.5",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": "1.00",
                "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": 1235.5 } } }))
            .to_string(),
        ),
        (
            "creditCard: []",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": "1.00",
                "payment": { "creditCard": [] } }))
            .to_string(),
        ),
        (
            "payment: \"cash\"",
            sale(json!({ "transactionType": "authCaptureTransaction", "amount": "1.00", "payment": "cash" }))
                .to_string(),
        ),
        (
            "transactionType: 1",
            sale(json!({ "transactionType": 1, "amount": "1.00", "payment": { "creditCard": card } })).to_string(),
        ),
        (
            "transactionType: {}",
            sale(json!({ "transactionType": {}, "amount": "1.00", "payment": { "creditCard": card } }))
                .to_string(),
        ),
        (
            "refTransId: {}",
            sale(json!({ "transactionType": "voidTransaction", "refTransId": {} })).to_string(),
        ),
        (
            "refTransId: [12345678901]",
            sale(json!({ "transactionType": "priorAuthCaptureTransaction", "refTransId": [12345678901u64] }))
                .to_string(),
        ),
        (
            "merchantAuthentication: \"x\"",
            json!({ "createTransactionRequest": { "merchantAuthentication": "x",
                "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": "1.00",
                    "payment": { "creditCard": card } } } })
            .to_string(),
        ),
        (
            "merchantAuthentication: []",
            json!({ "createTransactionRequest": { "merchantAuthentication": [],
                "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": "1.00" } } })
            .to_string(),
        ),
        (
            "name: {}",
            json!({ "createTransactionRequest": {
                "merchantAuthentication": { "name": {}, "transactionKey": t.cred("user_api_key") },
                "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": "1.00" } } })
            .to_string(),
        ),
        (
            "transactionKey: [..]",
            json!({ "createTransactionRequest": {
                "merchantAuthentication": { "name": t.user_id(), "transactionKey": [t.cred("user_api_key")] },
                "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": "1.00" } } })
            .to_string(),
        ),
        ("createTransactionRequest: []", json!({ "createTransactionRequest": [] }).to_string()),
        ("createTransactionRequest: 5", json!({ "createTransactionRequest": 5 }).to_string()),
        ("a bare array", json!([{ "createTransactionRequest": {} }]).to_string()),
        ("a bare string", json!("createTransactionRequest").to_string()),
        ("two methods", json!({ "createTransactionRequest": {}, "authenticateTestRequest": {} }).to_string()),
        ("an empty object", "{}".to_string()),
        ("deeply nested arrays", deep),
        ("a request nested deep", deep_request),
        ("an amount nested deep", deep_member),
        (
            "ARB amount: {}",
            json!({ "ARBCreateSubscriptionRequest": { "merchantAuthentication": auth.clone(),
                "subscription": { "amount": {}, "paymentSchedule": [] } } })
            .to_string(),
        ),
        (
            "details transId: {}",
            json!({ "getTransactionDetailsRequest": { "merchantAuthentication": auth.clone(), "transId": {} } })
                .to_string(),
        ),
    ];
    for (what, body) in &cases {
        let (status, content, text) = post_raw(app, &json_path(&t), "application/json", body);
        assert_eq!(status, 200, "{what}: {text}");
        assert!(content.starts_with("application/json"), "{what}: {content}");
        let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
            .unwrap_or_else(|_| panic!("{what}: not JSON: {text}"));
        assert_eq!(v["messages"]["resultCode"], "Error", "{what}: {v}");
        let code = v["messages"]["message"][0]["code"].as_str().unwrap_or_default();
        assert!(code.starts_with('E'), "{what}: {v}");
    }
    assert!(emulated(&t).is_empty(), "nothing was charged");
    // The server is still well.
    let v = post_json(
        app,
        &t,
        &json!({ "authenticateTestRequest": { "merchantAuthentication": authentication(&t) } }),
    );
    assert_eq!(v["messages"]["resultCode"], "Ok", "{v}");
    no_card_in_log(app);
}

/// A JSON `createTransactionRequest` sale of `amount` on `card`, with
/// `settings` (`[name, value]` pairs) and an invoice number.
fn json_sale(
    t: &Tenant,
    amount: &str,
    card: &str,
    expiry: &str,
    invoice: &str,
    settings: &[(&str, &str)],
) -> Value {
    let setting: Vec<Value> = settings
        .iter()
        .map(|(n, v)| json!({ "settingName": n, "settingValue": v }))
        .collect();
    json!({ "createTransactionRequest": { "merchantAuthentication": authentication(t),
        "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": amount,
            "payment": { "creditCard": { "cardNumber": card, "expirationDate": expiry, "cardCode": "999" } },
            "order": { "invoiceNumber": invoice },
            "transactionSettings": { "setting": setting } } } })
}

/// Test mode charges nothing; a repeat within the duplicate window is
/// their reason 11; an expired card is reason 8; codes are theirs.
fn test_mode_duplicates_and_their_codes(app: &TestApp) {
    let t = app.bootstrap();
    const VISA: &str = "4111111111111111";
    const LATER: &str = "2035-12";
    let sale = |amount: &str, card: &str, expiry: &str, invoice: &str, settings: &[(&str, &str)]| {
        post_json(app, &t, &json_sale(&t, amount, card, expiry, invoice, settings))
    };
    let response = |v: &Value| v["transactionResponse"].clone();
    // Test mode: approved, transaction id 0, nothing stored.
    let test = sale("12.21", VISA, LATER, "T-1", &[("testRequest", "true")]);
    let r = response(&test);
    assert_eq!(
        (r["responseCode"].clone(), r["transId"].clone()),
        (json!("1"), json!("0")),
        "{test}"
    );
    assert_eq!(r["testRequest"], "1");
    assert!(
        r["messages"][0]["description"]
            .as_str()
            .unwrap()
            .contains("TESTMODE"),
        "{test}"
    );
    assert!(emulated(&t).is_empty(), "test mode charges nothing");
    // Still checked: a bad card is refused in test mode too.
    let bad = sale(
        "12.21",
        "4111111111111112",
        LATER,
        "T-1",
        &[("testRequest", "true")],
    );
    assert_eq!(response(&bad)["errors"][0]["errorCode"], "6", "{bad}");

    // A repeat of the same card, amount and invoice: their reason 11.
    let first = sale("12.21", VISA, LATER, "D-1", &[]);
    let r = response(&first);
    assert_eq!(r["responseCode"], "1", "{first}");
    let code = r["authCode"].as_str().unwrap();
    assert!(
        code.len() == 6 && !code.chars().any(|c| c.is_ascii_lowercase()),
        "{code}"
    );
    let again = sale("12.21", VISA, LATER, "D-1", &[]);
    let r = response(&again);
    assert_eq!(
        (r["responseCode"].clone(), r["errors"][0]["errorCode"].clone()),
        (json!("3"), json!("11")),
        "{again}"
    );
    assert_eq!(emulated(&t).len(), 1, "the repeat charged nothing");
    // Another invoice, or the window turned off, is not a duplicate.
    let other = sale("12.21", VISA, LATER, "D-2", &[]);
    assert_eq!(response(&other)["responseCode"], "1", "{other}");
    let off = sale("12.21", VISA, LATER, "D-1", &[("duplicateWindow", "0")]);
    assert_eq!(response(&off)["responseCode"], "1", "{off}");
    assert_eq!(emulated(&t).len(), 3);
    // AIM's x_test_request means the same.
    let aim_test = aim(
        app,
        &t,
        &[
            ("x_amount", "3.33"),
            ("x_card_num", "4111111111111111"),
            ("x_exp_date", "12/35"),
            ("x_test_request", "TRUE"),
        ],
    );
    assert_eq!(aim_test.split(',').nth(6), Some("0"), "{aim_test}");
    assert_eq!(emulated(&t).len(), 3);

    // An expired card: their reason 8.
    let expired = sale("4.44", VISA, "2020-01", "E-1", &[]);
    assert_eq!(response(&expired)["errors"][0]["errorCode"], "8", "{expired}");

    // ARB: a start before today is E00017; a card that ends first, E00018.
    let arb = |start: &str, expiry: &str| {
        post_json(
            app,
            &t,
            &json!({ "ARBCreateSubscriptionRequest": { "merchantAuthentication": authentication(&t),
                "subscription": { "name": "Gym", "paymentSchedule": { "interval": { "length": 1, "unit": "months" },
                    "startDate": start, "totalOccurrences": 12 }, "amount": "10.00",
                    "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": expiry } },
                    "billTo": { "firstName": "Ann", "lastName": "Lee" } } } }),
        )
    };
    let past = arb("2020-01-15", "2035-12");
    assert_eq!(past["messages"]["message"][0]["code"], "E00017", "{past}");
    let ends_first = arb("2034-01-15", "2033-12");
    assert_eq!(
        ends_first["messages"]["message"][0]["code"], "E00018",
        "{ends_first}"
    );
    // An interval outside 7-365 days or 1-12 months: their E00022.
    for (length, unit) in [(6, "days"), (366, "days"), (13, "months")] {
        let v = post_json(
            app,
            &t,
            &json!({ "ARBCreateSubscriptionRequest": { "merchantAuthentication": authentication(&t),
                "subscription": { "name": "Gym", "paymentSchedule": { "interval": { "length": length, "unit": unit },
                    "startDate": "2034-01-15", "totalOccurrences": 12 }, "amount": "10.00",
                    "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12" } },
                    "billTo": { "firstName": "Ann", "lastName": "Lee" } } } }),
        );
        assert_eq!(
            v["messages"]["message"][0]["code"], "E00022",
            "{length} {unit}: {v}"
        );
    }
    assert!(t.get("/v2/recurrings").expect(200).body["recurrings"]
        .as_array()
        .unwrap()
        .is_empty());
    no_card_in_log(app);
}

/// Authorize.Net's `amount` is the total to charge: an account's
/// surcharge is not added to the emulator's payments (the reference lets
/// consumer fees through its own channels only), so a sale charges what
/// the cart sent, and an authorization captured for less charges that.
fn a_surcharge_is_not_added_to_the_carts_amount(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let out = app.cli(&["surcharge", "--product-transaction-id", &cc, "--percent", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sold = post_json(
        app,
        &t,
        &json_sale(&t, "100.00", "4111111111111111", "2035-12", "S-0", &[]),
    );
    assert_eq!(sold["transactionResponse"]["responseCode"], "1", "{sold}");
    let mut auth = json_sale(&t, "10.00", "4111111111111111", "2035-12", "S-1", &[]);
    auth["createTransactionRequest"]["transactionRequest"]["transactionType"] = json!("authOnlyTransaction");
    let authorized = post_json(app, &t, &auth);
    let trans_id = authorized["transactionResponse"]["transId"]
        .as_str()
        .unwrap()
        .to_string();
    let capture = |amount: &str| {
        post_json(
            app,
            &t,
            &json!({ "createTransactionRequest": { "merchantAuthentication": authentication(&t),
                "transactionRequest": { "transactionType": "priorAuthCaptureTransaction",
                    "amount": amount, "refTransId": trans_id } } }),
        )
    };
    let captured = capture("8.24");
    assert_eq!(captured["transactionResponse"]["responseCode"], "1", "{captured}");
    let mut charged: Vec<(Value, Value, Value)> = emulated(&t)
        .iter()
        .map(|tx| {
            let surcharge = tx["surcharge_amount"].clone();
            let no_surcharge = surcharge.is_null() || surcharge == json!("0.00");
            (
                tx["status_id"].clone(),
                tx["transaction_amount"].clone(),
                json!(no_surcharge),
            )
        })
        .collect();
    charged.sort_by_key(|c| c.1.to_string());
    assert_eq!(
        charged,
        vec![
            (json!(101), json!("100.00"), json!(true)),
            (json!(101), json!("8.24"), json!(true)),
        ]
    );
}

/// A sale without `order`: no invoice number sent.
fn json_sale_without_invoice(t: &Tenant, kind: &str, amount: &str, settings: &[(&str, &str)]) -> Value {
    let mut v = json_sale(t, amount, "4111111111111111", "2035-12", "", settings);
    let request = v["createTransactionRequest"]["transactionRequest"]
        .as_object_mut()
        .unwrap();
    request.remove("order");
    request.insert("transactionType".into(), json!(kind));
    v
}

const PARTIAL_TEXT: &str =
    "The amount of this request was only partially approved on the given prepaid card. \
                            An additional payment is required to fulfill the balance of this transaction.";

/// $2.01 is the sandbox's partial approval ($1.00 approved) where partial
/// authorization is allowed: `allowPartialAuth` (AIM
/// `x_allow_partial_auth`) allows it for the one request, answered as
/// their 4 / 295 with the split tender and the prepaid card's amounts in
/// the schema's order. Without it the sandbox declines, as before.
fn partial_authorization_per_request(app: &TestApp) {
    let t = app.bootstrap();
    const VISA: &str = "4111111111111111";
    let allowed = post_json(
        app,
        &t,
        &json_sale(
            &t,
            "2.01",
            VISA,
            "2035-12",
            "P-1",
            &[("allowPartialAuth", "true")],
        ),
    );
    let r = &allowed["transactionResponse"];
    assert_eq!(allowed["messages"]["resultCode"], "Ok", "{allowed}");
    assert_eq!(r["responseCode"], "4", "{allowed}");
    assert_eq!(r["messages"][0]["code"], "295", "{allowed}");
    assert_eq!(r["messages"][0]["description"], PARTIAL_TEXT);
    assert_eq!(r["authCode"].as_str().unwrap().len(), 6, "{allowed}");
    let split = r["splitTenderId"].as_str().unwrap();
    assert!(
        split.len() == 11 && split.bytes().all(|b| b.is_ascii_digit()),
        "{allowed}"
    );
    assert_eq!(
        r["prePaidCard"],
        json!({ "requestedAmount": "2.01", "approvedAmount": "1.00", "balanceOnCard": "0.00" }),
        "{allowed}"
    );
    let stored = emulated(&t);
    assert_eq!(
        (
            stored[0]["transaction_amount"].clone(),
            stored[0]["reason_code_id"].clone()
        ),
        (json!("1.00"), json!(1201))
    );
    // Its details name the same split tender.
    let d = api(
        app,
        &t,
        "getTransactionDetailsRequest",
        json!({ "transId": r["transId"] }),
    )["transaction"]
        .clone();
    assert_eq!(d["splitTenderId"], split, "{d}");
    // Not sent, or sent false: the product transaction's setting (off),
    // and the sandbox declines.
    for (invoice, settings) in [("P-2", vec![]), ("P-3", vec![("allowPartialAuth", "false")])] {
        let v = post_json(
            app,
            &t,
            &json_sale(&t, "2.01", VISA, "2035-12", invoice, &settings),
        );
        let r = &v["transactionResponse"];
        assert_eq!(r["responseCode"], "2", "{invoice}: {v}");
        assert!(
            r.get("splitTenderId").is_none() && r.get("prePaidCard").is_none(),
            "{v}"
        );
    }

    // XML, in the schema's order: accountType, splitTenderId,
    // prePaidCard (requested, approved, balance), then messages.
    let path = format!("/xml/v1/request.api?developer={}", t.cred("developer_id"));
    let request = xml_sale(&t, "2.01", VISA).replace(
        "</payment>",
        "</payment><order><invoiceNumber>P-4</invoiceNumber></order><transactionSettings><setting>\
         <settingName>allowPartialAuth</settingName><settingValue>true</settingValue></setting></transactionSettings>",
    );
    let (_, _, text) = post_raw(app, &path, "text/xml", &request);
    let response = &text[text
        .find("<transactionResponse>")
        .expect("a transaction response")..];
    let at = |tag: &str| {
        response
            .find(tag)
            .unwrap_or_else(|| panic!("{tag} in {response}"))
    };
    assert!(
        at("<accountType>") < at("<splitTenderId>")
            && at("<splitTenderId>") < at("<prePaidCard>")
            && at("<prePaidCard>") < at("<messages>"),
        "{response}"
    );
    assert!(
        response.contains(
            "<prePaidCard><requestedAmount>2.01</requestedAmount><approvedAmount>1.00</approvedAmount>\
             <balanceOnCard>0.00</balanceOnCard></prePaidCard>"
        ),
        "{response}"
    );

    // AIM: field 10 the approved amount; 53-55 split tender, requested
    // amount, balance on card.
    let line = aim(
        app,
        &t,
        &[
            ("x_amount", "2.01"),
            ("x_card_num", VISA),
            ("x_exp_date", "12/35"),
            ("x_invoice_num", "P-5"),
            ("x_allow_partial_auth", "TRUE"),
        ],
    );
    let f: Vec<&str> = line.split(',').collect();
    assert_eq!(
        (f[0], f[2], f[3], f[9]),
        ("4", "295", PARTIAL_TEXT, "1.00"),
        "{line}"
    );
    assert!(
        f[52].len() == 11 && f[52].bytes().all(|b| b.is_ascii_digit()),
        "{line}"
    );
    assert_eq!((f[53], f[54]), ("2.01", "0.00"), "{line}");
    let line = aim(
        app,
        &t,
        &[
            ("x_amount", "2.01"),
            ("x_card_num", VISA),
            ("x_exp_date", "12/35"),
            ("x_invoice_num", "P-6"),
        ],
    );
    assert!(line.starts_with("2,1,2,"), "{line}");
    no_card_in_log(app);
}

/// A second void of a voided transaction, or a second capture of a
/// captured one, is Authorize.Net's success with reason 310 or 311 (the
/// transaction it was about, nothing new done); a transaction type they
/// do not have is their reason 69.
fn repeated_follow_ups_and_unknown_types(app: &TestApp) {
    let t = app.bootstrap();
    let transact = |request: Value| {
        post_json(
            app,
            &t,
            &json!({ "createTransactionRequest": { "merchantAuthentication": authentication(&t),
                "transactionRequest": request } }),
        )
    };
    let sale = transact(
        json_sale_without_invoice(&t, "authCaptureTransaction", "6.60", &[])["createTransactionRequest"]
            ["transactionRequest"]
            .clone(),
    );
    let sale_id = sale["transactionResponse"]["transId"]
        .as_str()
        .unwrap()
        .to_string();
    let void = || transact(json!({ "transactionType": "voidTransaction", "refTransId": sale_id }));
    assert_eq!(void()["transactionResponse"]["responseCode"], "1");
    let again = void();
    let r = &again["transactionResponse"];
    assert_eq!(again["messages"]["resultCode"], "Ok", "{again}");
    assert_eq!(
        (r["responseCode"].clone(), r["messages"][0]["code"].clone()),
        (json!("1"), json!("310")),
        "{again}"
    );
    assert_eq!(
        r["messages"][0]["description"],
        "This transaction has already been voided."
    );
    assert_eq!(
        (r["transId"].as_str(), r["refTransID"].as_str()),
        (Some(&*sale_id), Some(&*sale_id))
    );

    let auth = transact(
        json_sale_without_invoice(&t, "authOnlyTransaction", "7.70", &[])["createTransactionRequest"]
            ["transactionRequest"]
            .clone(),
    );
    let auth_id = auth["transactionResponse"]["transId"]
        .as_str()
        .unwrap()
        .to_string();
    let capture =
        || transact(json!({ "transactionType": "priorAuthCaptureTransaction", "refTransId": auth_id }));
    assert_eq!(capture()["transactionResponse"]["responseCode"], "1");
    let again = capture();
    let r = &again["transactionResponse"];
    assert_eq!(
        (r["responseCode"].clone(), r["messages"][0]["code"].clone()),
        (json!("1"), json!("311")),
        "{again}"
    );
    assert_eq!(
        r["messages"][0]["description"],
        "This transaction has already been captured."
    );

    // AIM answers the same.
    let line = aim(app, &t, &[("x_type", "VOID"), ("x_trans_id", &sale_id)]);
    assert!(
        line.starts_with(&format!(
            "1,1,310,This transaction has already been voided.,,P,{sale_id},"
        )),
        "{line}"
    );

    // An unknown type: their 69, over either interface.
    let bogus = transact(json!({ "transactionType": "authCaptureContinueTransaction", "amount": "1.00" }));
    let r = &bogus["transactionResponse"];
    assert_eq!(
        (r["responseCode"].clone(), r["errors"][0]["errorCode"].clone()),
        (json!("3"), json!("69")),
        "{bogus}"
    );
    assert!(
        r["errors"][0]["errorText"]
            .as_str()
            .unwrap()
            .starts_with("The transaction type is invalid."),
        "{bogus}"
    );
    let line = aim(app, &t, &[("x_type", "AUTH_FOREVER"), ("x_amount", "1.00")]);
    assert!(
        line.starts_with("3,1,69,The transaction type is invalid."),
        "{line}"
    );
    assert_eq!(emulated(&t).len(), 2, "the sale and the authorization");
}

/// A Visa sale of `amount` (invoice `invoice`) through the emulator, its
/// batch settled so that it can be refunded: its `transId`.
fn settled_sale(app: &TestApp, t: &Tenant, amount: &str, invoice: &str) -> String {
    let sale = post_json(
        app,
        t,
        &json_sale(t, amount, "4111111111111111", "2035-12", invoice, &[]),
    );
    let batch = emulated(t)[0]["transaction_batch_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    sale["transactionResponse"]["transId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `refundTransaction` needs the referenced transaction's card: its last
/// four, the full number or the masked number we answered; another card,
/// or none, is their reason 54 and nothing is refunded.
fn refunds_need_the_referenced_card(app: &TestApp) {
    let t = app.bootstrap();
    let sale_id = settled_sale(app, &t, "9.00", "R-1");
    let refund = |card: Option<&str>, amount: &str| {
        let mut request =
            json!({ "transactionType": "refundTransaction", "amount": amount, "refTransId": sale_id });
        if let Some(number) = card {
            request["payment"] = json!({ "creditCard": { "cardNumber": number, "expirationDate": "XXXX" } });
        }
        post_json(
            app,
            &t,
            &json!({ "createTransactionRequest": { "merchantAuthentication": authentication(&t),
                "transactionRequest": request } }),
        )["transactionResponse"]
            .clone()
    };
    for (card, why) in [
        (None, "no card"),
        (Some("5454"), "another last four"),
        (Some("XXXX5454"), "another masked number"),
        (Some("5454545454545454"), "another full number"),
        (Some("11"), "too few digits"),
    ] {
        let r = refund(card, "1.00");
        assert_eq!(
            (r["responseCode"].clone(), r["errors"][0]["errorCode"].clone()),
            (json!("3"), json!("54")),
            "{why}: {r}"
        );
    }
    // Other amounts: the same refund again would be a duplicate.
    for (card, amount) in [
        ("1111", "1.00"),
        ("XXXX1111", "1.01"),
        ("4111111111111111", "1.02"),
    ] {
        let r = refund(Some(card), amount);
        assert_eq!(r["responseCode"], "1", "{card}: {r}");
    }
    let refunds = emulated(&t).into_iter().filter(|tx| tx["type_id"] == 30).count();
    assert_eq!(refunds, 3);
    no_card_in_log(app);
}

/// Reason 11: a repeat of the same transaction type, card and amount
/// within the window, with the same invoice number or with none (the
/// payments core numbers orders sent without one, which must not make
/// them differ); another type is not a repeat. The check is taken with
/// the payment's own write, so identical requests sent at once charge
/// once.
fn duplicates_by_type_with_or_without_invoice(app: &TestApp) {
    let t = app.bootstrap();
    let send = |kind: &str, amount: &str, settings: &[(&str, &str)]| {
        post_json(app, &t, &json_sale_without_invoice(&t, kind, amount, settings))["transactionResponse"]
            .clone()
    };
    let code = |r: &Value| {
        (
            r["responseCode"].as_str().unwrap_or_default().to_string(),
            r["errors"][0]["errorCode"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    let approved = (String::from("1"), String::new());
    let duplicate = (String::from("3"), String::from("11"));
    assert_eq!(code(&send("authCaptureTransaction", "3.30", &[])), approved);
    assert_eq!(
        code(&send("authCaptureTransaction", "3.30", &[])),
        duplicate,
        "no invoice either time"
    );
    // The same card and amount as an authorization: another type.
    assert_eq!(code(&send("authOnlyTransaction", "3.30", &[])), approved);
    assert_eq!(code(&send("authOnlyTransaction", "3.30", &[])), duplicate);
    // With an invoice number it is another request.
    let invoiced = post_json(
        app,
        &t,
        &json_sale(&t, "3.30", "4111111111111111", "2035-12", "N-1", &[]),
    );
    assert_eq!(code(&invoiced["transactionResponse"]), approved, "{invoiced}");
    assert_eq!(
        code(&send(
            "authCaptureTransaction",
            "3.30",
            &[("duplicateWindow", "0")]
        )),
        approved
    );
    assert_eq!(emulated(&t).len(), 4);

    // Eight identical sales at once: one is charged.
    let body = json_sale(&t, "4.40", "4111111111111111", "2035-12", "C-1", &[]).to_string();
    let path = json_path(&t);
    let start = std::sync::Barrier::new(8);
    let answers: Vec<Value> = std::thread::scope(|s| {
        let sends: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let client = Client {
                        base: app.base.clone(),
                    };
                    start.wait();
                    let r = client.send(
                        "POST",
                        &path,
                        &[("content-type", "application/json")],
                        Some(&body),
                    );
                    assert_eq!(r.status, 200, "{}", r.text);
                    serde_json::from_str::<Value>(r.text.trim_start_matches('\u{feff}')).expect("JSON")
                })
            })
            .collect();
        sends.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let codes: Vec<_> = answers.iter().map(|v| code(&v["transactionResponse"])).collect();
    assert_eq!(codes.iter().filter(|c| **c == approved).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == duplicate).count(), 7, "{codes:?}");
    let charged = emulated(&t)
        .into_iter()
        .filter(|tx| tx["transaction_amount"] == "4.40")
        .count();
    assert_eq!(charged, 1);
    no_card_in_log(app);
}

/// Asserts that the named elements appear in `xml` in this order (the
/// schema's sequence); each name's first occurrence counts.
#[track_caller]
fn in_schema_order(xml: &str, names: &[&str]) {
    let mut last = 0;
    for name in names {
        let at = xml
            .find(&format!("<{name}>"))
            .unwrap_or_else(|| panic!("<{name}> missing: {xml}"));
        assert!(at >= last, "<{name}> out of the schema's order: {xml}");
        last = at;
    }
}

/// A JSON request of `method` with the tenant's credentials and `fields`.
fn api(app: &TestApp, t: &Tenant, method: &str, fields: Value) -> Value {
    let mut body = fields;
    body["merchantAuthentication"] = authentication(t);
    post_json(app, t, &json!({ method: body }))
}

/// getTransactionDetails answers the transaction type the client sent (an
/// authorization stays one when voided, declined or captured), an
/// invoice number only when one was sent, and the order's, tax, Level 3,
/// customer and batch details we keep, in the schema's order.
fn transaction_details_keep_what_was_sent(app: &TestApp) {
    let t = app.bootstrap();
    let transact = |request: Value| {
        api(
            app,
            &t,
            "createTransactionRequest",
            json!({ "transactionRequest": request }),
        )
    };
    let request_of = |v: Value| v["createTransactionRequest"]["transactionRequest"].clone();
    let trans_id = |v: &Value| v["transactionResponse"]["transId"].as_str().unwrap().to_string();
    let details = |id: &str| {
        api(app, &t, "getTransactionDetailsRequest", json!({ "transId": id }))["transaction"].clone()
    };

    // Authorizations, without an invoice number: voided, declined (the
    // sandbox's 5.00) and captured.
    let authorized = transact(request_of(json_sale_without_invoice(
        &t,
        "authOnlyTransaction",
        "6.40",
        &[],
    )));
    assert_eq!(
        authorized["transactionResponse"]["responseCode"], "1",
        "{authorized}"
    );
    let voided = trans_id(&authorized);
    let void = transact(json!({ "transactionType": "voidTransaction", "refTransId": voided }));
    assert_eq!(void["transactionResponse"]["responseCode"], "1", "{void}");
    let declined = trans_id(&transact(request_of(json_sale_without_invoice(
        &t,
        "authOnlyTransaction",
        "5.00",
        &[],
    ))));
    let captured = trans_id(&transact(request_of(json_sale_without_invoice(
        &t,
        "authOnlyTransaction",
        "7.20",
        &[],
    ))));
    let capture =
        transact(json!({ "transactionType": "priorAuthCaptureTransaction", "refTransId": captured }));
    assert_eq!(capture["transactionResponse"]["responseCode"], "1", "{capture}");
    for (id, status) in [
        (&voided, "voided"),
        (&declined, "declined"),
        (&captured, "capturedPendingSettlement"),
    ] {
        let d = details(id);
        assert_eq!(
            (d["transactionType"].as_str(), d["transactionStatus"].as_str()),
            (Some("authOnlyTransaction"), Some(status)),
            "{d}"
        );
        assert!(
            d["order"]["invoiceNumber"].is_null(),
            "no invoice number was sent: {d}"
        );
    }

    // A sale with an invoice, a purchase order, tax, a customer and Level
    // 3 data, then settled.
    let sale = transact(
        json!({ "transactionType": "authCaptureTransaction", "amount": "12.80",
        "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12", "cardCode": "999" } },
        "order": { "invoiceNumber": "INV-9", "description": "Tea" },
        "tax": { "amount": "0.80", "name": "state" },
        "poNumber": "PO-7",
        "customer": { "id": "C-42", "email": "ellen@example.com" },
        "billTo": { "firstName": "Ellen", "lastName": "Van Dyke", "zip": "32606" } }),
    );
    assert_eq!(sale["transactionResponse"]["responseCode"], "1", "{sale}");
    let sale_id = trans_id(&sale);
    let ours = emulated(&t)
        .into_iter()
        .find(|tx| tx["transaction_amount"] == "12.80")
        .expect("the sale");
    assert_eq!(ours["tax"], "0.80");
    assert_eq!(
        ours["notification_email_address"], "ellen@example.com",
        "the customer's email is where the receipt goes"
    );
    t.post(
        "/v2/transactionlevel3s",
        json!({ "transactionlevel3": { "transaction_id": ours["id"], "level3_data": {
            "tax_rate": "8.00", "freight_amount": "1.50", "duty_amount": "0.25", "shipto_zip_code": "10001",
            "line_items": [{ "description": "Widget", "product_code": "WID-1", "quantity": "2", "unit_code": "EA",
                "unit_cost": "6.00", "tax_amount": "0.80", "tax_rate": "8", "commodity_code": "4410" }] } } }),
    )
    .expect(201);
    let batch = ours["transaction_batch_id"]
        .as_str()
        .expect("a batch")
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    let d = details(&sale_id);
    assert_eq!(d["transactionType"], "authCaptureTransaction", "{d}");
    assert_eq!(d["transactionStatus"], "settledSuccessfully", "{d}");
    assert_eq!(
        d["order"],
        json!({ "invoiceNumber": "INV-9", "description": "Tea", "purchaseOrderNumber": "PO-7" })
    );
    assert_eq!(d["tax"], json!({ "amount": "0.80" }));
    assert_eq!(d["shipping"], json!({ "amount": "1.50" }));
    assert_eq!(d["duty"], json!({ "amount": "0.25" }));
    assert_eq!(d["lineItems"][0]["itemId"], "WID-1", "{d}");
    assert_eq!(d["lineItems"][0]["unitPrice"], "6.00", "{d}");
    assert_eq!(
        d["customer"],
        json!({ "id": "C-42", "email": "ellen@example.com" })
    );
    assert_eq!(
        d["billTo"],
        json!({ "firstName": "Ellen", "lastName": "Van Dyke", "zip": "32606" }),
        "the names as sent, never split at a space"
    );
    assert_eq!(d["shipTo"], json!({ "zip": "10001" }));
    assert_eq!(d["batch"]["settlementState"], "settledSuccessfully", "{d}");
    let batch_id = d["batch"]["batchId"].as_str().unwrap();
    assert!(
        batch_id.len() == 11 && batch_id.bytes().all(|b| b.is_ascii_digit()),
        "{batch_id}"
    );
    assert!(
        d["batch"]["settlementTimeUTC"].as_str().unwrap().ends_with('Z'),
        "{d}"
    );

    // In XML, in transactionDetailsType's order.
    let xml = format!(
        "<getTransactionDetailsRequest xmlns=\"AnetApi/xml/v1/schema/AnetApiSchema.xsd\"><merchantAuthentication>\
         <name>{}</name><transactionKey>{}</transactionKey></merchantAuthentication><transId>{sale_id}</transId>\
         </getTransactionDetailsRequest>",
        t.user_id(),
        t.cred("user_api_key")
    );
    let (_, _, text) = post_raw(app, &json_path(&t), "text/xml", &xml);
    in_schema_order(
        &text,
        &[
            "transId",
            "submitTimeUTC",
            "submitTimeLocal",
            "transactionType",
            "transactionStatus",
            "responseCode",
            "responseReasonCode",
            "responseReasonDescription",
            "authCode",
            "AVSResponse",
            "cardCodeResponse",
            "batch",
            "order",
            "authAmount",
            "settleAmount",
            "tax",
            "shipping",
            "duty",
            "lineItems",
            "payment",
            "customer",
            "billTo",
            "shipTo",
            "recurringBilling",
        ],
    );
    in_schema_order(
        &text,
        &[
            "batchId",
            "settlementTimeUTC",
            "settlementTimeLocal",
            "settlementState",
            "order",
        ],
    );
    in_schema_order(
        &text,
        &[
            "invoiceNumber",
            "description",
            "purchaseOrderNumber",
            "authAmount",
        ],
    );
    assert!(!text.contains("4111111111111111"));
    no_card_in_log(app);
}

/// ARB as Authorize.Net answers it: create names the customer profile and
/// payment profile, a billTo update changes the name and address shown,
/// the interval cannot change (E00034), the payments are listed with
/// includeTransactions and name their subscription in their details, and
/// canceling twice is E00038.
fn subscriptions_as_authorize_net_keeps_them(app: &TestApp) {
    let t = app.bootstrap();
    let now = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let start = chrono::DateTime::from_timestamp(now + 86_400, 0)
        .unwrap()
        .date_naive()
        .to_string();
    let code = |v: &Value| {
        v["messages"]["message"][0]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    // As the official Node.js sample sends it: no trial occurrences, a
    // trial amount anyway (which then means nothing).
    let subscription = |trial_occurrences: i64| {
        json!({ "subscription": { "name": "Tea club", "paymentSchedule": { "interval": { "length": 1, "unit": "months" },
            "startDate": start, "totalOccurrences": 12, "trialOccurrences": trial_occurrences }, "amount": "10.00",
            "trialAmount": "4.27",
            "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12" } },
            "billTo": { "firstName": "Ann", "lastName": "Lee" } } })
    };
    let trial = api(app, &t, "ARBCreateSubscriptionRequest", subscription(1));
    assert_eq!(code(&trial), "E00013", "a real trial: {trial}");
    let created = api(app, &t, "ARBCreateSubscriptionRequest", subscription(0));
    assert_eq!(code(&created), "I00001", "{created}");
    let id = created["subscriptionId"].as_str().unwrap().to_string();
    let profile = created["profile"].clone();
    // Their schema's xs:int (subscription ids in a payment's details and
    // in lists), and 7 to 9 digits as theirs are.
    let fits_xs_int = |n: &str| {
        (7..=9).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()) && n.parse::<i32>().is_ok()
    };
    assert!(fits_xs_int(&id), "{created}");
    for key in ["customerProfileId", "customerPaymentProfileId"] {
        let n = profile[key].as_str().unwrap_or_default();
        assert!(fits_xs_int(n), "{key}: {created}");
    }
    let update = |subscription: Value| {
        api(
            app,
            &t,
            "ARBUpdateSubscriptionRequest",
            json!({ "subscriptionId": id, "subscription": subscription }),
        )
    };
    let interval = update(json!({ "paymentSchedule": { "interval": { "length": 2, "unit": "months" } } }));
    assert_eq!(code(&interval), "E00034", "{interval}");
    let moved = update(
        json!({ "billTo": { "firstName": "Ann", "lastName": "Kim", "company": "Tea Co",
        "address": "1 Main St", "city": "Gainesville", "state": "FL", "zip": "32606", "country": "US" } }),
    );
    assert_eq!(code(&moved), "I00001", "{moved}");
    assert_eq!(moved["profile"], profile, "the same profiles");
    let get = |include: bool| {
        api(
            app,
            &t,
            "ARBGetSubscriptionRequest",
            json!({ "subscriptionId": id, "includeTransactions": include }),
        )["subscription"]
            .clone()
    };
    let shown = get(false);
    assert_eq!(
        shown["profile"]["paymentProfile"]["billTo"],
        json!({ "firstName": "Ann", "lastName": "Kim", "company": "Tea Co", "address": "1 Main St",
            "city": "Gainesville", "state": "FL", "zip": "32606" })
    );
    assert_eq!(
        shown["profile"]["customerProfileId"],
        profile["customerProfileId"]
    );
    assert_eq!(
        shown["profile"]["paymentProfile"]["customerPaymentProfileId"],
        profile["customerPaymentProfileId"]
    );
    assert!(shown.get("arbTransactions").is_none(), "only when asked for");

    // Two days on, the first payment has run.
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 2 * 86_400 } }),
    )
    .expect(200);
    let listed = get(true);
    let payments = listed["arbTransactions"].as_array().expect("arbTransactions");
    assert_eq!(payments.len(), 1, "{listed}");
    assert_eq!(payments[0]["payNum"], "1");
    assert_eq!(payments[0]["attemptNum"], "1");
    assert_eq!(payments[0]["response"], "This transaction has been approved.");
    let paid = payments[0]["transId"].as_str().unwrap().to_string();
    let d = api(
        app,
        &t,
        "getTransactionDetailsRequest",
        json!({ "transId": paid }),
    )["transaction"]
        .clone();
    assert_eq!(d["subscription"], json!({ "id": id, "payNum": "1" }), "{d}");
    assert_eq!(d["recurringBilling"], "true");
    assert!(d["order"]["invoiceNumber"].is_null(), "{d}");
    // In XML, in ARBSubscriptionMaskedType's and arbTransaction's order.
    let xml = format!(
        "<ARBGetSubscriptionRequest xmlns=\"AnetApi/xml/v1/schema/AnetApiSchema.xsd\"><merchantAuthentication>\
         <name>{}</name><transactionKey>{}</transactionKey></merchantAuthentication><subscriptionId>{id}</subscriptionId>\
         <includeTransactions>true</includeTransactions></ARBGetSubscriptionRequest>",
        t.user_id(),
        t.cred("user_api_key")
    );
    let (_, _, text) = post_raw(app, &json_path(&t), "text/xml", &xml);
    in_schema_order(
        &text,
        &[
            "name",
            "paymentSchedule",
            "amount",
            "trialAmount",
            "status",
            "profile",
            "customerProfileId",
            "paymentProfile",
            "arbTransactions",
            "arbTransaction",
            "transId",
            "response",
            "submitTimeUTC",
            "payNum",
            "attemptNum",
        ],
    );
    in_schema_order(
        &text,
        &[
            "firstName",
            "lastName",
            "company",
            "address",
            "city",
            "state",
            "zip",
            "customerPaymentProfileId",
        ],
    );

    let cancel = || {
        api(
            app,
            &t,
            "ARBCancelSubscriptionRequest",
            json!({ "subscriptionId": id }),
        )
    };
    assert_eq!(code(&cancel()), "I00001");
    let again = cancel();
    assert_eq!(
        (again["messages"]["resultCode"].as_str(), code(&again)),
        (Some("Error"), "E00038".to_string()),
        "{again}"
    );
    no_card_in_log(app);
}

/// The date `days` from the test clock's now, as their `startDate`.
fn day_from_now(t: &Tenant, days: i64) -> String {
    let now = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    chrono::DateTime::from_timestamp(now + days * 86_400, 0)
        .unwrap()
        .date_naive()
        .to_string()
}

/// An `ARBCreateSubscriptionRequest`'s `subscription`: monthly, 12
/// payments, on the test card.
fn arb_subscription(start: &str, amount: &str, invoice: &str) -> Value {
    json!({ "name": "Tea club", "paymentSchedule": { "interval": { "length": 1, "unit": "months" },
        "startDate": start, "totalOccurrences": 12, "trialOccurrences": 0 }, "amount": amount,
        "order": { "invoiceNumber": invoice },
        "payment": { "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12" } },
        "billTo": { "firstName": "Dup", "lastName": "Customer", "address": "1 Main St", "zip": "32606" } })
}

fn message_code(v: &Value) -> String {
    v["messages"]["message"][0]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A second identical `ARBCreateSubscriptionRequest` (same card, bill-to,
/// amount, invoice and schedule; another name or refId does not matter)
/// is their E00012 and creates nothing, also when the identical requests
/// are sent at once; another amount or invoice is another subscription,
/// and once the first is canceled the same one may be created again.
fn duplicate_subscriptions_are_refused(app: &TestApp) {
    let t = app.bootstrap();
    let start = day_from_now(&t, 10);
    let create = |subscription: Value| {
        api(
            app,
            &t,
            "ARBCreateSubscriptionRequest",
            json!({ "subscription": subscription }),
        )
    };
    let recurrings = || {
        t.get("/v2/recurrings?page_size=100").expect(200).body["recurrings"]
            .as_array()
            .unwrap()
            .len()
    };
    let contacts = || {
        t.get("/v2/contacts?page_size=100").expect(200).body["contacts"]
            .as_array()
            .unwrap()
            .len()
    };
    let contacts_before = contacts();
    let first = create(arb_subscription(&start, "19.95", "S-1"));
    assert_eq!(message_code(&first), "I00001", "{first}");
    let mut renamed = arb_subscription(&start, "19.95", "S-1");
    renamed["name"] = json!("Another name");
    for again in [arb_subscription(&start, "19.95", "S-1"), renamed] {
        let v = create(again);
        assert_eq!(
            (v["messages"]["resultCode"].as_str(), message_code(&v)),
            (Some("Error"), "E00012".to_string()),
            "{v}"
        );
        assert_eq!(
            v["messages"]["message"][0]["text"],
            "A duplicate subscription already exists."
        );
        assert!(v.get("subscriptionId").is_none(), "{v}");
    }
    assert_eq!(recurrings(), 1, "the refused ones made nothing");
    assert_eq!(contacts(), contacts_before + 1, "nor a contact");
    for other in [
        arb_subscription(&start, "19.96", "S-1"),
        arb_subscription(&start, "19.95", "S-2"),
        arb_subscription(&day_from_now(&t, 11), "19.95", "S-1"),
    ] {
        let v = create(other);
        assert_eq!(message_code(&v), "I00001", "{v}");
    }
    // Canceled: no longer a running duplicate.
    let id = first["subscriptionId"].as_str().unwrap();
    let canceled = api(
        app,
        &t,
        "ARBCancelSubscriptionRequest",
        json!({ "subscriptionId": id }),
    );
    assert_eq!(message_code(&canceled), "I00001", "{canceled}");
    let again = create(arb_subscription(&start, "19.95", "S-1"));
    assert_eq!(message_code(&again), "I00001", "{again}");
    assert_eq!(recurrings(), 5);

    // Six identical creates at once: one subscription.
    let body = json!({ "ARBCreateSubscriptionRequest": { "merchantAuthentication": authentication(&t),
        "subscription": arb_subscription(&start, "7.77", "C-1") } })
    .to_string();
    let path = json_path(&t);
    let start_line = std::sync::Barrier::new(6);
    let codes: Vec<String> = std::thread::scope(|s| {
        let sends: Vec<_> = (0..6)
            .map(|_| {
                s.spawn(|| {
                    let client = Client {
                        base: app.base.clone(),
                    };
                    start_line.wait();
                    let r = client.send(
                        "POST",
                        &path,
                        &[("content-type", "application/json")],
                        Some(&body),
                    );
                    assert_eq!(r.status, 200, "{}", r.text);
                    let v: Value = serde_json::from_str(r.text.trim_start_matches('\u{feff}')).expect("JSON");
                    message_code(&v)
                })
            })
            .collect();
        sends.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|c| *c == "I00001").count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| *c == "E00012").count(), 5, "{codes:?}");
    assert_eq!(recurrings(), 6);
    no_card_in_log(app);
}

/// A settled sale's refund repeated within the duplicate window (a retry
/// or a double click) is their 3 / 11 and refunds nothing more, over the
/// API and AIM's CREDIT alike; another amount, or the window turned off,
/// is another refund.
fn repeated_refunds_are_duplicates(app: &TestApp) {
    let t = app.bootstrap();
    let sale_id = settled_sale(app, &t, "40.00", "R-40");
    let refund = |amount: &str, settings: &[(&str, &str)]| {
        let setting: Vec<Value> = settings
            .iter()
            .map(|(n, v)| json!({ "settingName": n, "settingValue": v }))
            .collect();
        let request = json!({ "transactionType": "refundTransaction", "amount": amount, "refTransId": sale_id,
            "payment": { "creditCard": { "cardNumber": "1111", "expirationDate": "XXXX" } },
            "transactionSettings": { "setting": setting } });
        api(
            app,
            &t,
            "createTransactionRequest",
            json!({ "transactionRequest": request }),
        )["transactionResponse"]
            .clone()
    };
    let code = |r: &Value| {
        (
            r["responseCode"].as_str().unwrap_or_default().to_string(),
            r["errors"][0]["errorCode"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    let approved = (String::from("1"), String::new());
    let duplicate = (String::from("3"), String::from("11"));
    assert_eq!(code(&refund("10.00", &[])), approved);
    assert_eq!(code(&refund("10.00", &[])), duplicate, "the same refund again");
    let credit = |amount: &str| {
        aim(
            app,
            &t,
            &[
                ("x_type", "CREDIT"),
                ("x_trans_id", &sale_id),
                ("x_amount", amount),
                ("x_card_num", "1111"),
            ],
        )
    };
    let line = credit("10.00");
    assert!(line.starts_with("3,1,11,"), "AIM's CREDIT too: {line}");
    assert_eq!(code(&refund("5.00", &[])), approved, "another amount");
    let line = credit("6.00");
    assert!(line.starts_with("1,1,1,"), "{line}");
    assert!(credit("6.00").starts_with("3,1,11,"));
    assert_eq!(
        code(&refund("10.00", &[("duplicateWindow", "0")])),
        approved,
        "no window"
    );
    let refunds: Vec<Value> = emulated(&t)
        .into_iter()
        .filter(|tx| tx["type_id"] == 30)
        .collect();
    assert_eq!(refunds.len(), 4, "10, 5, 6 and 10 refunded once each");
    no_card_in_log(app);
}

/// A void or capture the referenced transaction's state refuses (a
/// settled sale, a voided authorization, a declined one) is their 3 / 16,
/// which no retry changes, in their words only; a processor's "try
/// again" (3 / 19, the sandbox's 6.03) may be retried at once, not
/// refused as a duplicate.
fn permanent_refusals_are_not_try_again(app: &TestApp) {
    let t = app.bootstrap();
    let transact = |request: Value| {
        api(
            app,
            &t,
            "createTransactionRequest",
            json!({ "transactionRequest": request }),
        )["transactionResponse"]
            .clone()
    };
    let request_of = |v: Value| v["createTransactionRequest"]["transactionRequest"].clone();
    let trans_id = |r: &Value| r["transId"].as_str().unwrap().to_string();
    let not_found = |r: &Value, why: &str| {
        assert_eq!(
            (r["responseCode"].as_str(), r["errors"][0]["errorCode"].as_str()),
            (Some("3"), Some("16")),
            "{why}: {r}"
        );
        assert_eq!(
            r["errors"][0]["errorText"], "The transaction cannot be found.",
            "{why}: {r}"
        );
    };

    // A settled sale cannot be voided.
    let sale = transact(request_of(json_sale_without_invoice(
        &t,
        "authCaptureTransaction",
        "9.25",
        &[],
    )));
    assert_eq!(sale["responseCode"], "1", "{sale}");
    let sale_id = trans_id(&sale);
    let stored = emulated(&t);
    let batch = stored[0]["transaction_batch_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{stored:?}"))
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    not_found(
        &transact(json!({ "transactionType": "voidTransaction", "refTransId": sale_id })),
        "void of a settled sale",
    );
    let line = aim(app, &t, &[("x_type", "VOID"), ("x_trans_id", &sale_id)]);
    assert!(
        line.starts_with("3,1,16,The transaction cannot be found.,"),
        "{line}"
    );

    // A voided authorization and a declined one cannot be captured.
    let voided = trans_id(&transact(request_of(json_sale_without_invoice(
        &t,
        "authOnlyTransaction",
        "6.60",
        &[],
    ))));
    let void = transact(json!({ "transactionType": "voidTransaction", "refTransId": voided }));
    assert_eq!(void["responseCode"], "1", "{void}");
    let declined = transact(request_of(json_sale_without_invoice(
        &t,
        "authOnlyTransaction",
        "5.00",
        &[],
    )));
    assert_eq!(declined["responseCode"], "2", "{declined}");
    for (id, why) in [
        (voided, "a voided authorization"),
        (trans_id(&declined), "a declined one"),
    ] {
        not_found(
            &transact(json!({ "transactionType": "priorAuthCaptureTransaction", "refTransId": id })),
            why,
        );
    }

    // Their try-again: the retry it asks for goes through to the
    // processor (which answers the same here), twice.
    let no_reply = || {
        post_json(
            app,
            &t,
            &json_sale(&t, "6.03", "4111111111111111", "2035-12", "T-603", &[]),
        )["transactionResponse"]
            .clone()
    };
    for attempt in 1..=3 {
        let r = no_reply();
        assert_eq!(
            (r["responseCode"].as_str(), r["errors"][0]["errorCode"].as_str()),
            (Some("3"), Some("19")),
            "attempt {attempt}: {r}"
        );
    }
    let tried = emulated(&t)
        .into_iter()
        .filter(|tx| tx["transaction_amount"] == "6.03")
        .count();
    assert_eq!(tried, 3, "each retry reached the processor");
    // A decline still holds its key: the same request is a duplicate.
    let again = transact(request_of(json_sale_without_invoice(
        &t,
        "authOnlyTransaction",
        "5.00",
        &[],
    )));
    assert_eq!(again["errors"][0]["errorCode"], "11", "{again}");
    no_card_in_log(app);
}

/// A duplicate (3 / 11) of a request sent with `duplicateWindow` names
/// the original: its transId, authorization code and AVS and card code
/// results, as Authorize.Net answers, so a cart can recover an order
/// whose first answer it lost; without the setting, nothing of it.
fn a_duplicate_names_its_original(app: &TestApp) {
    let t = app.bootstrap();
    let sale = |invoice: &str, settings: &[(&str, &str)]| {
        post_json(
            app,
            &t,
            &json_sale(&t, "42.42", "4111111111111111", "2035-12", invoice, settings),
        )["transactionResponse"]
            .clone()
    };
    let window = [("duplicateWindow", "600")];
    let first = sale("DW-1", &window);
    assert_eq!(first["responseCode"], "1", "{first}");
    let again = sale("DW-1", &window);
    assert_eq!(again["errors"][0]["errorCode"], "11", "{again}");
    for field in ["transId", "authCode", "avsResultCode", "cvvResultCode"] {
        assert_eq!(again[field], first[field], "{field}: {again}");
    }
    assert!(!first["authCode"].as_str().unwrap().is_empty());
    // Without duplicateWindow: none of the original's details.
    let plain = sale("DW-2", &[]);
    let repeat = sale("DW-2", &[]);
    assert_eq!(repeat["errors"][0]["errorCode"], "11", "{repeat}");
    assert_eq!(
        (repeat["transId"].as_str(), repeat["authCode"].as_str()),
        (Some("0"), Some("")),
        "{repeat}"
    );
    assert_ne!(plain["transId"], "0");
    // AIM: field 5 the authorization code, 7 the transaction id.
    let send = || {
        aim(
            app,
            &t,
            &[
                ("x_amount", "43.43"),
                ("x_card_num", "4111111111111111"),
                ("x_exp_date", "12/35"),
                ("x_invoice_num", "DW-3"),
                ("x_duplicate_window", "300"),
            ],
        )
    };
    let first: Vec<String> = send().split(',').map(str::to_string).collect();
    let again: Vec<String> = send().split(',').map(str::to_string).collect();
    assert_eq!((first[0].as_str(), again[2].as_str()), ("1", "11"), "{again:?}");
    assert_eq!((&again[4], &again[6]), (&first[4], &first[6]), "{again:?}");
    no_card_in_log(app);
}

/// `payNum` is the scheduled payment a run is for: after a first payment
/// declined on every try, the next month's is payment 2 (attempt 1), in
/// `arbTransactions` and in `getTransactionDetails`.
fn pay_numbers_count_billing_periods(app: &TestApp) {
    let t = app.bootstrap();
    let today = day_from_now(&t, 0);
    let created = api(
        app,
        &t,
        "ARBCreateSubscriptionRequest",
        json!({ "subscription": arb_subscription(&today, "5.00", "PN-1") }),
    );
    assert_eq!(message_code(&created), "I00001", "{created}");
    let id = created["subscriptionId"].as_str().unwrap().to_string();
    // To the second period's date: its first try has run, not its retry
    // (the day after).
    let start: chrono::NaiveDate = today.parse().unwrap();
    let second = start + chrono::Months::new(1);
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": (second - start).num_days() * 86_400 } }),
    )
    .expect(200);
    let listed = api(
        app,
        &t,
        "ARBGetSubscriptionRequest",
        json!({ "subscriptionId": id, "includeTransactions": true }),
    );
    let payments = listed["subscription"]["arbTransactions"]
        .as_array()
        .expect("arbTransactions")
        .clone();
    let numbers: Vec<(String, String)> = payments
        .iter()
        .map(|p| {
            (
                p["payNum"].as_str().unwrap().to_string(),
                p["attemptNum"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [("1", "1"), ("1", "2"), ("1", "3"), ("1", "4"), ("2", "1")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(numbers, want, "{listed}");
    let last = payments[4]["transId"].as_str().unwrap();
    let d = api(
        app,
        &t,
        "getTransactionDetailsRequest",
        json!({ "transId": last }),
    )["transaction"]
        .clone();
    assert_eq!(d["subscription"], json!({ "id": id, "payNum": "2" }), "{d}");
    // A declined payment's authAmount is the amount asked for.
    assert_eq!(
        (d["authAmount"].as_str(), d["settleAmount"].as_str()),
        (Some("5.00"), Some("0.00")),
        "{d}"
    );
}

/// AIM's VOID answers the amount it voided in field 10.
fn aim_void_answers_the_voided_amount(app: &TestApp) {
    let t = app.bootstrap();
    let sale = aim(
        app,
        &t,
        &[
            ("x_amount", "12.34"),
            ("x_card_num", "4111111111111111"),
            ("x_exp_date", "12/35"),
        ],
    );
    let fields: Vec<&str> = sale.split(',').collect();
    assert_eq!(fields[0], "1", "{sale}");
    let void = aim(app, &t, &[("x_type", "VOID"), ("x_trans_id", fields[6])]);
    let voided: Vec<&str> = void.split(',').collect();
    assert_eq!(
        (voided[0], voided[6], voided[9], voided[11]),
        ("1", fields[6], "12.34", "void"),
        "{void}"
    );
}

/// Whether an XML answer is valid in their schema, as the bindings of
/// the official Python SDK (generated from it) read it: `None` without
/// the SDK (outside CI).
fn in_their_schema(xml: &str) -> Option<Result<(), String>> {
    use std::io::Write;
    let python = python_sdk()?;
    let mut child = Command::new(python)
        .args([
            "-c",
            "import sys\nfrom authorizenet import apicontractsv1\napicontractsv1.CreateFromDocument(sys.stdin.read())",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.trim_start_matches('\u{feff}').as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some(if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

#[track_caller]
fn valid_in_their_schema(xml: &str) {
    if let Some(Err(e)) = in_their_schema(xml) {
        panic!("not valid in their schema: {e}\n{xml}");
    }
}

/// An XML request of `method` with the tenant's credentials and `inner`.
fn xml_api(app: &TestApp, t: &Tenant, method: &str, inner: &str) -> String {
    let xml = format!(
        "<{method} xmlns=\"AnetApi/xml/v1/schema/AnetApiSchema.xsd\"><merchantAuthentication>\
         <name>{}</name><transactionKey>{}</transactionKey></merchantAuthentication>{inner}</{method}>",
        t.user_id(),
        t.cred("user_api_key")
    );
    let (status, _, text) = post_raw(app, &json_path(t), "text/xml", &xml);
    assert_eq!(status, 200, "{text}");
    text
}

fn now_of(t: &Tenant) -> i64 {
    t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap()
}

fn date_time_of(ts: i64) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The Transaction Reporting API on our batches and transactions: the
/// unsettled list, then the batch they settle in with its statistics and
/// transactions, each list sorted and paged as asked, empty lists Ok with
/// I00004, in their schema's order (XML valid in their schema); only card
/// transactions of the caller's scope, as getTransactionDetails shows
/// them, and their E00003, E00011, E00013, E00014 and E00040 refusals.
fn transaction_reporting_on_our_batches(app: &TestApp) {
    let t = app.bootstrap();
    let code = |v: &Value| message_code(v);
    // Nothing yet: Ok, no records.
    let none = api(app, &t, "getSettledBatchListRequest", json!({}));
    assert_eq!(
        (none["messages"]["resultCode"].as_str(), code(&none).as_str()),
        (Some("Ok"), "I00004"),
        "{none}"
    );
    assert!(none.get("batchList").is_none(), "{none}");
    let none = api(app, &t, "getUnsettledTransactionListRequest", json!({}));
    assert_eq!(code(&none), "I00004", "{none}");
    assert_eq!(none["messages"]["message"][0]["text"], "No records found.");
    assert_eq!(none["totalNumInResultSet"], "0", "{none}");

    // A sale with names of more than one word, a voided sale, an
    // authorization and a decline through the emulator; a card sale and
    // an ACH debit made elsewhere.
    let transact = |request: Value| {
        api(
            app,
            &t,
            "createTransactionRequest",
            json!({ "transactionRequest": request }),
        )
    };
    let trans_id = |v: &Value| v["transactionResponse"]["transId"].as_str().unwrap().to_string();
    let card = json!({ "creditCard": { "cardNumber": "4111111111111111", "expirationDate": "2035-12" } });
    let sale = trans_id(&transact(
        json!({ "transactionType": "authCaptureTransaction", "amount": "3.00",
        "payment": card, "order": { "invoiceNumber": "INV-A" },
        "billTo": { "firstName": "Ellen", "lastName": "Van Dyke" } }),
    ));
    let voided = trans_id(&transact(
        json!({ "transactionType": "authCaptureTransaction", "amount": "4.00", "payment": card }),
    ));
    let void = transact(json!({ "transactionType": "voidTransaction", "refTransId": voided }));
    assert_eq!(void["transactionResponse"]["responseCode"], "1", "{void}");
    let authorized = trans_id(&transact(
        json!({ "transactionType": "authOnlyTransaction", "amount": "5.50", "payment": card }),
    ));
    let declined = trans_id(&transact(
        json!({ "transactionType": "authCaptureTransaction", "amount": "5.00", "payment": card }),
    ));
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "6.00",
            "account_number": "5454545454545454", "exp_date": "1235", "account_holder_name": "Mary Ann Lee" } }),
    )
    .expect(201);
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "debit", "payment_method": "ach", "ach_sec_code": "WEB",
            "product_transaction_id": t.cred("ach_product_transaction_id"), "transaction_amount": "7.00",
            "account_type": "checking", "account_number": "123456789012", "routing": "072000326",
            "account_holder_name": "Jane Doe" } }),
    )
    .expect(201);

    // Unsettled: the five card transactions, by submit time; no ACH.
    let unsettled = api(app, &t, "getUnsettledTransactionListRequest", json!({}));
    assert_eq!(code(&unsettled), "I00001", "{unsettled}");
    assert_eq!(unsettled["totalNumInResultSet"], "5", "{unsettled}");
    let list = unsettled["transactions"].as_array().unwrap().clone();
    let statuses: Vec<&str> = list
        .iter()
        .map(|tx| tx["transactionStatus"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "capturedPendingSettlement",
            "voided",
            "authorizedPendingCapture",
            "declined",
            "capturedPendingSettlement"
        ],
        "{unsettled}"
    );
    let ids: Vec<String> = list
        .iter()
        .map(|tx| tx["transId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids[..4],
        [sale.clone(), voided.clone(), authorized.clone(), declined.clone()]
    );
    assert_eq!(
        list[0],
        json!({ "transId": sale, "submitTimeUTC": list[0]["submitTimeUTC"], "submitTimeLocal": list[0]["submitTimeLocal"],
            "transactionStatus": "capturedPendingSettlement", "invoiceNumber": "INV-A", "firstName": "Ellen",
            "lastName": "Van Dyke", "accountType": "Visa", "accountNumber": "XXXX1111", "settleAmount": "3.00" })
    );
    assert_eq!(list[1]["settleAmount"], "0.00", "a void settles nothing");
    // Names not known apart are shown whole, never split.
    assert_eq!(list[4]["lastName"], "Mary Ann Lee", "{}", list[4]);
    assert!(list[4].get("firstName").is_none(), "{}", list[4]);
    assert_eq!(list[4]["accountType"], "MasterCard");
    // Each as getTransactionDetails shows it.
    for tx in &list {
        let d = api(
            app,
            &t,
            "getTransactionDetailsRequest",
            json!({ "transId": tx["transId"] }),
        );
        assert_eq!(
            d["transaction"]["transactionStatus"], tx["transactionStatus"],
            "{d}"
        );
        assert_eq!(d["transaction"]["settleAmount"], tx["settleAmount"], "{d}");
    }
    // Paged (their offset counts pages) and sorted by their number.
    let page = api(
        app,
        &t,
        "getUnsettledTransactionListRequest",
        json!({ "sorting": { "orderBy": "submitTimeUTC", "orderDescending": true },
            "paging": { "limit": 2, "offset": 2 } }),
    );
    let page_ids: Vec<&str> = page["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tx| tx["transId"].as_str().unwrap())
        .collect();
    assert_eq!(page_ids, [authorized.as_str(), voided.as_str()], "{page}");
    assert_eq!(page["totalNumInResultSet"], "5");
    let by_id = api(
        app,
        &t,
        "getUnsettledTransactionListRequest",
        json!({ "sorting": { "orderBy": "id", "orderDescending": false } }),
    );
    let numbers: Vec<i64> = by_id["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tx| tx["transId"].as_str().unwrap().parse().unwrap())
        .collect();
    let mut sorted = numbers.clone();
    sorted.sort();
    assert_eq!((numbers.len(), &numbers), (5, &sorted));
    let past_the_end = api(
        app,
        &t,
        "getUnsettledTransactionListRequest",
        json!({ "paging": { "limit": 10, "offset": 2 } }),
    );
    assert_eq!(code(&past_the_end), "I00004", "{past_the_end}");
    let held = api(
        app,
        &t,
        "getUnsettledTransactionListRequest",
        json!({ "status": "pendingApproval" }),
    );
    assert_eq!(
        code(&held),
        "I00004",
        "no card payment of ours is held for review: {held}"
    );

    // Settle the batch: the two sales of the emulator, the void and the
    // other card sale; the authorization and the decline stay unsettled.
    let batch = emulated(&t)
        .into_iter()
        .find(|tx| tx["transaction_amount"] == "3.00")
        .unwrap()["transaction_batch_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    let now = now_of(&t);
    let closed = t.get(&format!("/v2/transactionbatches/{batch}")).expect(200).body["transactionbatch"]
        ["batch_close_ts"]
        .as_i64()
        .expect("closed");
    let settled = api(
        app,
        &t,
        "getSettledBatchListRequest",
        json!({ "includeStatistics": true }),
    );
    assert_eq!(code(&settled), "I00001", "{settled}");
    let batches = settled["batchList"].as_array().unwrap();
    assert_eq!(batches.len(), 1, "{settled}");
    let batch_id = batches[0]["batchId"].as_str().unwrap().to_string();
    assert_eq!(batches[0]["settlementState"], "settledSuccessfully");
    assert_eq!(batches[0]["paymentMethod"], "creditCard");
    assert_eq!(batches[0]["settlementTimeUTC"], date_time_of(closed), "{settled}");
    assert_eq!(
        batches[0]["statistics"],
        json!([
            { "accountType": "MasterCard", "chargeAmount": "6.00", "chargeCount": "1", "refundAmount": "0.00",
              "refundCount": "0", "voidCount": "0", "declineCount": "0", "errorCount": "0" },
            { "accountType": "Visa", "chargeAmount": "3.00", "chargeCount": "1", "refundAmount": "0.00",
              "refundCount": "0", "voidCount": "1", "declineCount": "0", "errorCount": "0" }
        ]),
        "{settled}"
    );
    // The batch is the one getTransactionDetails names.
    let d = api(
        app,
        &t,
        "getTransactionDetailsRequest",
        json!({ "transId": sale }),
    );
    assert_eq!(d["transaction"]["batch"]["batchId"], batch_id.as_str(), "{d}");
    let without = api(app, &t, "getSettledBatchListRequest", json!({}));
    assert!(without["batchList"][0].get("statistics").is_none(), "{without}");
    // Explicit windows: one holding the settlement, one before it.
    let around = api(
        app,
        &t,
        "getSettledBatchListRequest",
        json!({ "firstSettlementDate": date_time_of(closed - 3600), "lastSettlementDate": date_time_of(closed) }),
    );
    assert_eq!(around["batchList"][0]["batchId"], batch_id.as_str(), "{around}");
    let before = api(
        app,
        &t,
        "getSettledBatchListRequest",
        json!({ "firstSettlementDate": date_time_of(closed - 7200), "lastSettlementDate": date_time_of(closed - 1) }),
    );
    assert_eq!(code(&before), "I00004", "{before}");

    let in_batch = api(
        app,
        &t,
        "getTransactionListRequest",
        json!({ "batchId": batch_id }),
    );
    assert_eq!(in_batch["totalNumInResultSet"], "3", "{in_batch}");
    let statuses: Vec<(&str, &str)> = in_batch["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tx| {
            (
                tx["transId"].as_str().unwrap(),
                tx["transactionStatus"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses[..2],
        [
            (sale.as_str(), "settledSuccessfully"),
            (voided.as_str(), "voided")
        ]
    );
    assert_eq!(statuses[2].1, "settledSuccessfully");
    let stats = api(
        app,
        &t,
        "getBatchStatisticsRequest",
        json!({ "batchId": batch_id }),
    );
    assert_eq!(stats["batch"]["statistics"], batches[0]["statistics"], "{stats}");
    let unsettled = api(app, &t, "getUnsettledTransactionListRequest", json!({}));
    let left: Vec<&str> = unsettled["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tx| tx["transId"].as_str().unwrap())
        .collect();
    assert_eq!(left, [authorized.as_str(), declined.as_str()], "{unsettled}");

    // XML: in their schema's order, valid in their schema.
    let xml = xml_api(
        app,
        &t,
        "getSettledBatchListRequest",
        "<includeStatistics>true</includeStatistics>",
    );
    assert!(xml.contains("<getSettledBatchListResponse "), "{xml}");
    in_schema_order(
        &xml,
        &[
            "messages",
            "batchList",
            "batch",
            "batchId",
            "settlementTimeUTC",
            "settlementTimeLocal",
            "settlementState",
            "paymentMethod",
            "statistics",
            "statistic",
            "accountType",
            "chargeAmount",
            "chargeCount",
            "refundAmount",
            "refundCount",
            "voidCount",
            "declineCount",
            "errorCount",
        ],
    );
    valid_in_their_schema(&xml);
    let xml = xml_api(
        app,
        &t,
        "getTransactionListRequest",
        &format!(
            "<batchId>{batch_id}</batchId><sorting><orderBy>submitTimeUTC</orderBy><orderDescending>false\
             </orderDescending></sorting><paging><limit>10</limit><offset>1</offset></paging>"
        ),
    );
    in_schema_order(
        &xml,
        &[
            "messages",
            "transactions",
            "transaction",
            "transId",
            "submitTimeUTC",
            "submitTimeLocal",
            "transactionStatus",
            "invoiceNumber",
            "firstName",
            "lastName",
            "accountType",
            "accountNumber",
            "settleAmount",
            "totalNumInResultSet",
        ],
    );
    valid_in_their_schema(&xml);
    for (method, inner) in [
        ("getUnsettledTransactionListRequest", ""),
        ("getBatchStatisticsRequest", &format!("<batchId>{batch_id}</batchId>")[..]),
        ("getSettledBatchListRequest", "<firstSettlementDate>2001-01-01T00:00:00</firstSettlementDate><lastSettlementDate>2001-01-02T00:00:00</lastSettlementDate>"),
    ] {
        valid_in_their_schema(&xml_api(app, &t, method, inner));
    }

    // Refusals. Their schema's (E00003) answer as ErrorResponse; their
    // rules' and a missing record under the method's element.
    for (method, inner) in [
        ("getSettledBatchListRequest", "<firstSettlementDate>yesterday</firstSettlementDate><lastSettlementDate>2030-01-01T00:00:00Z</lastSettlementDate>"),
        ("getSettledBatchListRequest", "<includeStatistics>yes</includeStatistics>"),
        ("getTransactionListRequest", "<batchId>12a</batchId>"),
        ("getTransactionListRequest", "<batchId>1</batchId><paging><limit>1001</limit><offset>1</offset></paging>"),
        ("getUnsettledTransactionListRequest", "<paging><limit>10</limit><offset>0</offset></paging>"),
        ("getUnsettledTransactionListRequest", "<sorting><orderBy>amount</orderBy><orderDescending>true</orderDescending></sorting>"),
        ("getUnsettledTransactionListRequest", "<status>held</status>"),
        ("getBatchStatisticsRequest", ""),
        ("getTransactionDetailsRequest", ""),
        ("getTransactionDetailsRequest", "<transId>abc</transId>"),
    ] {
        let xml = xml_api(app, &t, method, inner);
        assert!(xml.contains("<ErrorResponse "), "{method} {inner}: {xml}");
        assert_eq!(element(&xml, "code"), "E00003", "{method} {inner}: {xml}");
    }
    for (method, inner, expected) in [
        (
            "getSettledBatchListRequest",
            format!("<firstSettlementDate>{}</firstSettlementDate>", date_time_of(now)),
            "E00013",
        ),
        (
            "getSettledBatchListRequest",
            format!(
                "<firstSettlementDate>{}</firstSettlementDate><lastSettlementDate>{}</lastSettlementDate>",
                date_time_of(now - 32 * 86_400),
                date_time_of(now)
            ),
            "E00013",
        ),
        ("getTransactionListRequest", String::new(), "E00014"),
        (
            "getBatchStatisticsRequest",
            "<batchId>1</batchId>".to_string(),
            "E00040",
        ),
        (
            "getTransactionListRequest",
            "<batchId>1</batchId>".to_string(),
            "I00004",
        ),
    ] {
        let xml = xml_api(app, &t, method, &inner);
        let root = format!("<{}Response ", method.trim_end_matches("Request"));
        assert!(xml.contains(&root), "{method} {inner}: {xml}");
        assert_eq!(element(&xml, "code"), expected, "{method} {inner}: {xml}");
    }

    // Another tenant sees none of it; a user who may not read
    // transactions gets their E00011 for the Transaction Details API.
    let other = app.bootstrap();
    let theirs = api(app, &other, "getSettledBatchListRequest", json!({}));
    assert_eq!(code(&theirs), "I00004", "{theirs}");
    let theirs = api(
        app,
        &other,
        "getTransactionListRequest",
        json!({ "batchId": batch_id }),
    );
    assert_eq!(code(&theirs), "I00004", "{theirs}");
    assert_eq!(theirs["totalNumInResultSet"], "0");
    let theirs = api(
        app,
        &other,
        "getTransactionDetailsRequest",
        json!({ "transId": sale }),
    );
    assert_eq!(code(&theirs), "E00040", "{theirs}");
    let (nobody, key) = t.user(&t.location_id(), None);
    let nobody = t.as_user(&nobody, &key);
    for method in [
        "getSettledBatchListRequest",
        "getTransactionListRequest",
        "getUnsettledTransactionListRequest",
        "getBatchStatisticsRequest",
        "getTransactionDetailsRequest",
    ] {
        let xml = xml_api(app, &nobody, method, "");
        let root = format!("<{}Response ", method.trim_end_matches("Request"));
        assert!(xml.contains(&root), "{method}: {xml}");
        assert_eq!(element(&xml, "code"), "E00011", "{method}: {xml}");
        assert_eq!(
            element(&xml, "text"),
            "Access denied. You do not have permissions to call the Transaction Details API."
        );
    }
    no_card_in_log(app);
}

/// Methods the emulator does not emulate answer, after authentication,
/// as Authorize.Net answers an account without the feature: customer
/// profiles E00044 under the method's own element (with what their
/// schema requires of it, so validating clients read it), the others
/// E00011; E00004 only for what is no method. A payment or subscription
/// by customer profile is E00044 and charges nothing; a profile asked of
/// a card payment is not made, and `profileResponse` says so beside the
/// payment.
fn methods_not_emulated_answer_as_without_the_feature(app: &TestApp) {
    let t = app.bootstrap();
    let dev = t.cred("developer_id");
    let path = format!("/xml/v1/request.api?developer={dev}");
    for (method, root) in [
        ("createCustomerProfileRequest", "createCustomerProfileResponse"),
        ("getCustomerProfileRequest", "getCustomerProfileResponse"),
        (
            "getCustomerPaymentProfileRequest",
            "getCustomerPaymentProfileResponse",
        ),
        (
            "deleteCustomerShippingAddressRequest",
            "deleteCustomerShippingAddressResponse",
        ),
        ("getCustomerProfileIdsRequest", "getCustomerProfileIdsResponse"),
        ("getHostedProfilePageRequest", "getHostedProfilePageResponse"),
        (
            "validateCustomerPaymentProfileRequest",
            "validateCustomerPaymentProfileResponse",
        ),
        (
            "getCustomerPaymentProfileListRequest",
            "getCustomerPaymentProfileListResponse",
        ),
        (
            "createCustomerProfileFromTransactionRequest",
            "createCustomerProfileResponse",
        ),
        (
            "getTransactionListForCustomerRequest",
            "getTransactionListResponse",
        ),
    ] {
        let xml = xml_api(app, &t, method, "<refId>r-1</refId>");
        assert!(xml.contains(&format!("<{root} ")), "{method}: {xml}");
        assert_eq!(element(&xml, "code"), "E00044", "{method}: {xml}");
        assert_eq!(
            element(&xml, "text"),
            "Customer Information Manager is not enabled."
        );
        assert_eq!(element(&xml, "refId"), "r-1");
        valid_in_their_schema(&xml);
        let v = api(app, &t, method, json!({}));
        assert_eq!(message_code(&v), "E00044", "{method}: {v}");
        // A wrong key is their E00007 first.
        let bad = api(app, &t.as_user(&t.user_id(), "wrong-key"), method, json!({}));
        assert_eq!(message_code(&bad), "E00007", "{method}: {bad}");
    }
    for method in [
        "getMerchantDetailsRequest",
        "getHostedPaymentPageRequest",
        "decryptPaymentDataRequest",
        "sendCustomerTransactionReceiptRequest",
        "updateSplitTenderGroupRequest",
        "ARBGetSubscriptionListRequest",
    ] {
        let xml = xml_api(app, &t, method, "");
        let root = format!("<{}Response ", method.trim_end_matches("Request"));
        assert!(xml.contains(&root), "{method}: {xml}");
        assert_eq!(element(&xml, "code"), "E00011", "{method}: {xml}");
        assert_eq!(
            element(&xml, "text"),
            "Access denied. You do not have the appropriate permissions."
        );
    }
    // Their ping needs no credentials; what is no method is E00004.
    let (_, _, text) = post_raw(
        app,
        &path,
        "text/xml",
        "<isAliveRequest><refId>p</refId></isAliveRequest>",
    );
    assert!(text.contains("<isAliveResponse "), "{text}");
    assert_eq!(
        (element(&text, "resultCode"), element(&text, "code")),
        ("Ok", "I00001"),
        "{text}"
    );
    valid_in_their_schema(&text);
    let (_, _, text) = post_raw(app, &path, "text/xml", "<getCustomerWishesRequest/>");
    assert!(text.contains("<ErrorResponse "), "{text}");
    assert_eq!(element(&text, "code"), "E00004");

    // Charging a customer profile (the ids a subscription answers):
    // E00044, nothing charged.
    let start = day_from_now(&t, 5);
    let sub = api(
        app,
        &t,
        "ARBCreateSubscriptionRequest",
        json!({ "subscription": arb_subscription(&start, "8.00", "S-1") }),
    );
    assert_eq!(message_code(&sub), "I00001", "{sub}");
    let profile = sub["profile"].clone();
    let charge = api(
        app,
        &t,
        "createTransactionRequest",
        json!({ "transactionRequest": { "transactionType": "authCaptureTransaction", "amount": "9.00",
            "profile": { "customerProfileId": profile["customerProfileId"],
                "paymentProfile": { "paymentProfileId": profile["customerPaymentProfileId"] } } } }),
    );
    assert_eq!(
        (
            charge["messages"]["resultCode"].as_str(),
            message_code(&charge).as_str()
        ),
        (Some("Error"), "E00044"),
        "{charge}"
    );
    assert!(emulated(&t).is_empty(), "nothing charged");
    // A subscription of a customer profile: E00044, nothing created.
    let recurrings = || {
        t.get("/v2/recurrings").expect(200).body["recurrings"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = recurrings();
    let from_profile = api(
        app,
        &t,
        "ARBCreateSubscriptionRequest",
        json!({ "subscription": { "name": "From profile",
            "paymentSchedule": { "interval": { "length": 1, "unit": "months" }, "startDate": start, "totalOccurrences": 12 },
            "amount": "8.00",
            "profile": { "customerProfileId": profile["customerProfileId"],
                "customerPaymentProfileId": profile["customerPaymentProfileId"] } } }),
    );
    assert_eq!(message_code(&from_profile), "E00044", "{from_profile}");
    assert_eq!(recurrings(), before);

    // A profile asked of a card sale: the sale is made, the profile is
    // not, and profileResponse says so.
    let xml = xml_api(
        app,
        &t,
        "createTransactionRequest",
        "<transactionRequest><transactionType>authCaptureTransaction</transactionType><amount>9.50</amount>\
         <payment><creditCard><cardNumber>4111111111111111</cardNumber><expirationDate>2035-12</expirationDate>\
         </creditCard></payment><profile><createProfile>true</createProfile></profile>\
         <customer><id>C-1</id></customer><billTo><firstName>Pat</firstName><lastName>Doe</lastName></billTo>\
         </transactionRequest>",
    );
    assert_eq!(element(&xml, "resultCode"), "Ok", "{xml}");
    assert_eq!(element(&xml, "responseCode"), "1", "{xml}");
    let profile_response = &xml[xml.find("<profileResponse>").expect("profileResponse")..];
    assert_eq!(element(profile_response, "resultCode"), "Error", "{xml}");
    assert_eq!(element(profile_response, "code"), "E00044", "{xml}");
    in_schema_order(&xml, &["transactionResponse", "profileResponse"]);
    valid_in_their_schema(&xml);
    assert_eq!(emulated(&t).len(), 1, "the sale was made");
    no_card_in_log(app);
}
