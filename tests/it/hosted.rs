//! Hosted pages over HTTP, as a browser without script uses them: the
//! PayForm and AccountForm opened with a hash-key, submitted as an HTML
//! form; the hosted payment page opened with a link encrypted by OpenSSL;
//! tickets redeemed by a vault. (The same pages in a real browser:
//! `browser.rs`.)

use crate::engine_tests;
use crate::support::{Client, Resp, Tenant, TestApp};
use ferrogate::hosted::hash_key;
use serde_json::{json, Value};

engine_tests!(
    payform_sale_is_found_by_its_api_id,
    payform_refusals_are_pages_or_json,
    two_links_of_one_second_never_share_a_form,
    a_mistyped_card_can_be_corrected_on_the_same_form,
    a_declined_payform_and_an_ach_debit,
    accountform_stores_a_vault,
    tickets_fill_a_vault_once,
    hosted_payment_page_links,
    hosted_payment_page_resource_is_checked,
    a_payform_payment_reaches_a_postback,
    a_form_submits_within_fifteen_minutes,
    authonly_and_avsonly_save_the_account,
    a_partial_approval_is_shown_approved,
    results_go_to_the_parent_origin_only,
    flags_change_the_form,
    a_form_pays_only_while_its_user_may,
    a_payform_never_pays_money_out,
    integrator_mistakes_are_refused_when_the_link_opens,
    the_surcharge_is_shown_before_the_payer_pays,
    a_payment_page_link_expires_fifteen_minutes_after_it_is_made,
    a_submitted_form_survives_a_reload,
    the_error_summary_follows_the_page,
    a_hash_key_is_set_and_replaced_by_put,
);

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A timestamp no other link of this test signs with: a hash-key (user
/// and timestamp) opens one form, and `now() - 1` taken a second after
/// `now()` is the same second. Now, or a second before the last one this
/// test's thread handed out. Kept per thread (libtest runs each test on
/// its own): one counter for the whole run drifted minutes behind the
/// clock over hundreds of links and pushed later tests' links out of the
/// five-minute window. A test's user is its own, so a per-test count is
/// enough to keep its hash-keys apart.
pub fn fresh_ts() -> i64 {
    thread_local! {
        static LAST: std::cell::Cell<i64> = const { std::cell::Cell::new(i64::MAX) };
    }
    LAST.with(|last| {
        let ts = now().min(last.get() - 1);
        last.set(ts);
        ts
    })
}

/// A signed form link: `path?developer-id&user-id&timestamp&hash-key&data`.
pub fn form_link(t: &Tenant, path: &str, timestamp: i64, data: &Value) -> String {
    let ts = timestamp.to_string();
    let hash = hash_key::compute(&t.cred("user_hash_key"), &t.user_id(), &ts).expect("a hash-key");
    format!(
        "{path}?developer-id={}&user-id={}&timestamp={ts}&hash-key={hash}&data={}",
        t.cred("developer_id"),
        t.user_id(),
        hex::encode(data.to_string())
    )
}

fn client(app: &TestApp) -> Client {
    Client {
        base: app.base.clone(),
    }
}

fn get_page(app: &TestApp, path: &str) -> Resp {
    client(app).send("GET", path, &[("accept", "text/html")], None)
}

/// The form's action (`/hosted/<session>`) in a page.
fn form_action(page: &Resp) -> String {
    let at = page.text.find("action=\"/hosted/").expect("a form in the page") + "action=\"".len();
    let end = page.text[at..].find('"').unwrap();
    page.text[at..at + end].to_string()
}

fn submit(app: &TestApp, action: &str, fields: &[(&str, &str)]) -> Resp {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields.iter())
        .finish();
    client(app).send(
        "POST",
        action,
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("accept", "text/html"),
        ],
        Some(&body),
    )
}

fn by_api_id(t: &Tenant, api_id: &str) -> Vec<Value> {
    t.get(&format!("/v2/transactions?transaction_api_id={api_id}"))
        .expect(200)
        .body["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// What a payer types into the sale form of [`sale_data`].
const PAYFORM_CARD: &[(&str, &str)] = &[
    ("account_holder_name", "Pat Payer"),
    ("account_number", "4111 1111 1111 1111"),
    ("exp_date", "12/39"),
    ("cvv", "999"),
    ("billing_street", "1 Main St"),
    ("billing_zip", "12345"),
];

fn sale_data(api_id: &str) -> Value {
    json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "13.00",
        "transaction_api_id": api_id, "parent_send_message": 1, "show_street": true,
        "redirect_url_on_approval": "https://shop.example/thanks" } })
}

fn payform_sale_is_found_by_its_api_id(app: &TestApp) {
    let t = app.bootstrap();
    // A minute old: inside the window.
    let link = form_link(&t, "/v2/payform", fresh_ts() - 60, &sale_data("order-1001"));
    let form = get_page(app, &link).expect(200);
    let csp = form.header("content-security-policy").expect("a CSP").to_string();
    assert!(
        csp.contains("frame-ancestors *") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert!(
        form.text.contains("<label for=\"fg-account_number\">Card number"),
        "{}",
        form.text
    );
    assert!(form.text.contains("Pay $13.00"));
    assert!(
        form.text.contains("fg-billing_street"),
        "show_street adds the street"
    );
    let action = form_action(&form);

    let done = submit(app, &action, PAYFORM_CARD).expect(200);
    assert!(done.text.contains("Payment approved"), "{}", done.text);
    assert!(
        !done.text.contains("4111111111111111"),
        "the number is never shown"
    );
    assert_eq!(done.header("refresh"), Some("0;url=https://shop.example/thanks"));
    let found = by_api_id(&t, "order-1001");
    assert_eq!(found.len(), 1);
    let tx = &found[0];
    assert_eq!(tx["trx_source_id"], 9, "a PayForm payment");
    assert_eq!(tx["transaction_amount"], "13.00");
    assert_eq!(tx["billing_street"], "1 Main St");
    assert_eq!(tx["last_four"], "1111");
    // The result the page posts to its parent is the API's answer.
    assert!(done
        .text
        .contains(&format!("\"id\":\"{}\"", tx["id"].as_str().unwrap())));

    // Sent again (a double click, a reload): the same result, no second charge.
    let again = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert!(again.text.contains("Payment approved"));
    assert_eq!(by_api_id(&t, "order-1001").len(), 1);
    // The hash-key has submitted its form: it opens nothing again.
    let reused = get_page(app, &link).expect(403);
    assert!(
        reused.text.contains("Hash key has already been used"),
        "{}",
        reused.text
    );
    assert!(
        !app.log().contains("4111111111111111"),
        "no card number in the log"
    );
}

fn payform_refusals_are_pages_or_json(app: &TestApp) {
    let t = app.bootstrap();
    let good = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("order-2"));
    // A wrong hash-key: the reference's words, as a page and as JSON.
    let wrong = good.replace("hash-key=", "hash-key=0");
    let page = get_page(app, &wrong).expect(401);
    assert!(page.text.contains("Hash key is invalid"));
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    let json = client(app)
        .send("GET", &wrong, &[("accept", "application/json")], None)
        .expect(401);
    assert_eq!(json.body["message"], "Hash key is invalid");
    // Another user's key does not sign for this user.
    let other = app.bootstrap();
    let mut forged = t.clone();
    forged.creds["user_hash_key"] = other.creds["user_hash_key"].clone();
    get_page(
        app,
        &form_link(&forged, "/v2/payform", fresh_ts(), &sale_data("x")),
    )
    .expect(401);
    // A link of this tenant naming the other's product transaction.
    let foreign = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "1.00",
        "transaction_api_id": "o8", "product_transaction_id": other.cred("cc_product_transaction_id") } });
    let r = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &foreign)).expect(422);
    assert!(
        r.text.contains("product_transaction_id provided is not valid"),
        "{}",
        r.text
    );
    // Timestamps more than five minutes away, either side.
    let old = get_page(app, &form_link(&t, "/v2/payform", now() - 600, &sale_data("o3"))).expect(401);
    assert!(old.text.contains("timestamp has expired"), "{}", old.text);
    get_page(app, &form_link(&t, "/v2/payform", now() + 600, &sale_data("o4"))).expect(401);
    // Credentials in headers work like query parameters.
    let ts = fresh_ts().to_string();
    let hash = hash_key::compute(&t.cred("user_hash_key"), &t.user_id(), &ts).expect("a hash-key");
    let data = hex::encode(sale_data("o5").to_string());
    client(app)
        .send(
            "GET",
            &format!("/v2/payform?data={data}"),
            &[
                ("developer-id", &t.cred("developer_id")),
                ("user-id", &t.user_id()),
                ("timestamp", &ts),
                ("hash-key", &hash),
            ],
            None,
        )
        .expect(200);
    // Bad data, each a clear 4xx that opens nothing.
    let signed = |data: &str| {
        // A new timestamp each: a hash-key opens one form.
        let ts = fresh_ts().to_string();
        let hash = hash_key::compute(&t.cred("user_hash_key"), &t.user_id(), &ts).expect("a hash-key");
        format!(
            "/v2/payform?developer-id={}&user-id={}&timestamp={ts}&hash-key={hash}&data={data}",
            t.cred("developer_id"),
            t.user_id()
        )
    };
    assert!(get_page(app, &signed("zz")).expect(400).text.contains("hex"));
    get_page(app, &signed(&hex::encode("[1]"))).expect(400);
    let with_card = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "1.00",
        "transaction_api_id": "o6", "account_number": "4111111111111111" } });
    let refused = get_page(app, &signed(&hex::encode(with_card.to_string()))).expect(422);
    assert!(
        refused.text.contains("account_number cannot be sent"),
        "{}",
        refused.text
    );
    assert!(!refused.text.contains("4111111111111111"));
    let no_api_id =
        json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "1.00" } });
    get_page(app, &signed(&hex::encode(no_api_id.to_string()))).expect(422);
    let bad_flag = json!({ "transaction": { "payment_method": "cc", "action": "force", "transaction_amount": "1.00",
        "transaction_api_id": "o7", "parent_close": "sometimes" } });
    let r = client(app).send(
        "GET",
        &signed(&hex::encode(bad_flag.to_string())),
        &[("accept", "application/json")],
        None,
    );
    r.clone().expect(422);
    assert!(
        !r.errors("action").is_empty() && !r.errors("parent_close").is_empty(),
        "{}",
        r.text
    );
    get_page(app, "/v2/payform").expect(400);
    assert!(submit(app, "/hosted/0123456789abcdef0123456789abcdef", &[]).status == 404);
    assert!(by_api_id(&t, "o5").is_empty(), "opening a form charges nothing");
}

fn a_mistyped_card_can_be_corrected_on_the_same_form(app: &TestApp) {
    let t = app.bootstrap();
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("order-3"));
    let action = form_action(&get_page(app, &link).expect(200));
    let typo = submit(
        app,
        &action,
        &[("account_number", "4111111111111112"), ("exp_date", "1239")],
    )
    .expect(422);
    assert!(
        typo.text.contains("role=\"alert\""),
        "an error summary screen readers announce"
    );
    assert!(typo.text.contains("aria-invalid=\"true\""));
    assert!(
        !typo.text.contains("4111111111111112"),
        "the typed number is not written back"
    );
    // Every mistake at once, each named by its label: the payer types the
    // card again once.
    let all = submit(
        app,
        &action,
        &[
            ("account_number", "4111111111111112"),
            ("exp_date", "13/39"),
            ("cvv", "12a"),
        ],
    )
    .expect(422);
    for expected in [
        "is not a valid card number",
        "must be a month and a year, as MM/YY.",
        "must be 3 or 4 digits.",
    ] {
        assert!(all.text.contains(expected), "{expected}: {}", all.text);
    }
    let missing = submit(app, &action, &[("exp_date", "1239")]).expect(422);
    assert!(
        missing.text.contains("Card number is required."),
        "{}",
        missing.text
    );
    assert!(by_api_id(&t, "order-3").is_empty());
    submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert_eq!(by_api_id(&t, "order-3").len(), 1);
}

fn a_declined_payform_and_an_ach_debit(app: &TestApp) {
    // Each link at its own timestamp: one hash-key opens one form.
    let t = app.bootstrap();
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "5.00",
        "transaction_api_id": "decline-1", "redirect_url_on_decline": "https://shop.example/sorry",
        "redirect_url_delay": 3 } });
    let action = form_action(&get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200));
    let done = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert!(done.text.contains("Payment declined"), "{}", done.text);
    assert_eq!(done.header("refresh"), Some("3;url=https://shop.example/sorry"));
    let tx = &by_api_id(&t, "decline-1")[0];
    assert_eq!(tx["reason_code_id"], 1500);
    // A decline spends the form like an approval.
    let again = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert!(again.text.contains("Payment declined"));
    assert_eq!(by_api_id(&t, "decline-1").len(), 1);

    let ach = json!({ "transaction": { "payment_method": "ach", "action": "debit", "transaction_amount": "20.00",
        "ach_sec_code": "WEB", "transaction_api_id": "ach-1", "show_second_account_number": true,
        "product_transaction_id": t.cred("ach_product_transaction_id") } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &ach)).expect(200);
    assert!(form.text.contains("fg-confirm_account_number") && form.text.contains("fg-routing"));
    let ach_action = form_action(&form);
    let fields = [
        ("account_holder_name", "Pat Payer"),
        ("routing", "072000326"),
        ("account_number", "123456789"),
        ("account_type", "checking"),
    ];
    let mismatch = submit(
        app,
        &ach_action,
        &[fields.as_slice(), &[("confirm_account_number", "123456780")]].concat(),
    )
    .expect(422);
    assert!(mismatch.text.contains("do not match"));
    submit(
        app,
        &ach_action,
        &[fields.as_slice(), &[("confirm_account_number", "123456789")]].concat(),
    )
    .expect(200);
    let tx = &by_api_id(&t, "ach-1")[0];
    assert_eq!(
        (tx["payment_method"].as_str(), tx["trx_source_id"].as_i64()),
        (Some("ach"), Some(9))
    );
}

fn accountform_stores_a_vault(app: &TestApp) {
    let t = app.bootstrap();
    let data = json!({ "accountvault": { "payment_method": "cc", "location_id": t.location_id(),
        "account_vault_api_id": "vault77", "show_title": false, "parent_send_message": true } });
    let form = get_page(app, &form_link(&t, "/v2/accountform", fresh_ts(), &data)).expect(200);
    assert!(
        !form.text.contains("id=\"fg-title\""),
        "show_title false hides the title"
    );
    assert!(!form.text.contains("fg-cvv"), "an account form asks no CVV");
    let done = submit(
        app,
        &form_action(&form),
        &[
            ("account_holder_name", "Pat Payer"),
            ("account_number", "5454545454545454"),
            ("exp_date", "0131"),
        ],
    )
    .expect(200);
    assert!(done.text.contains("Card saved"), "{}", done.text);
    let vault = t.get("/v2/accountvaults/vault77?api_id=1").expect(200).body["accountvault"].clone();
    assert_eq!(vault["last_four"], "5454");
    assert_eq!(vault["account_holder_name"], "Pat Payer");
    assert!(!done.text.contains("5454545454545454"));
    // A user without the vault permission (no role yet) cannot open one.
    let reader = t
        .post(
            "/v2/users",
            json!({ "user": { "username": format!("reader{}", now()), "email": "r@example.com",
            "primary_location_id": t.location_id(), "user_hash_key": "a-reader-hash-key-0123456789" } }),
        )
        .expect(201)
        .body["user"]
        .clone();
    let mut as_reader = t.clone();
    as_reader.creds["user_id"] = reader["id"].clone();
    as_reader.creds["user_hash_key"] = json!("a-reader-hash-key-0123456789");
    let data = json!({ "accountvault": { "payment_method": "cc", "account_vault_api_id": "vault78" } });
    get_page(app, &form_link(&as_reader, "/v2/accountform", fresh_ts(), &data)).expect(403);
}

/// Each call signs with its own timestamp: a hash-key is spent once.
pub fn ticket(app: &TestApp, t: &Tenant, body: Value) -> Resp {
    let ts = fresh_ts().to_string();
    let hash = hash_key::compute(&t.cred("user_hash_key"), &t.user_id(), &ts).expect("a hash-key");
    client(app).send(
        "POST",
        "/v2/tickets",
        &[
            ("developer-id", &t.cred("developer_id")),
            ("user-id", &t.user_id()),
            ("timestamp", &ts),
            ("hash-key", &hash),
            ("origin", "https://shop.example"),
        ],
        Some(&body.to_string()),
    )
}

fn tickets_fill_a_vault_once(app: &TestApp) {
    let t = app.bootstrap();
    let made = ticket(
        app,
        &t,
        json!({ "ticket": { "payment_method": "cc", "account_number": "4111111111111111",
        "exp_date": "1239", "account_holder_name": "Pat Payer" } }),
    )
    .expect(201);
    assert_eq!(made.header("access-control-allow-origin"), Some("*"));
    let id = made.body["ticket"]["id"].as_str().unwrap().to_string();
    assert_eq!(made.body["ticket"]["last_four"], "1111");
    assert!(!made.text.contains("4111111111111111"));
    let bad = ticket(
        app,
        &t,
        json!({ "ticket": { "payment_method": "cc", "account_number": "4111111111111112",
        "exp_date": "1239" } }),
    )
    .expect(422);
    assert!(!bad.errors("account_number").is_empty());

    // Another tenant cannot redeem it.
    let other = app.bootstrap();
    other
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "payment_method": "cc", "ticket": id,
            "location_id": other.location_id() } }),
        )
        .expect(422);
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "payment_method": "cc", "ticket": id,
            "location_id": t.location_id(), "title": "From a ticket" } }),
        )
        .expect(201)
        .body["accountvault"]
        .clone();
    assert_eq!(
        (vault["last_four"].as_str(), vault["account_holder_name"].as_str()),
        (Some("1111"), Some("Pat Payer"))
    );
    // The vault charges like any other.
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc",
        "account_vault_id": vault["id"], "transaction_amount": "2.00" } }),
    )
    .expect(201);
    // Once only.
    let again = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "payment_method": "cc", "ticket": id,
            "location_id": t.location_id() } }),
        )
        .expect(422);
    assert_eq!(again.errors("ticket"), ["ticket provided is not valid"]);
    // A ticket expires after 15 minutes (the test clock moves the location).
    let late = ticket(
        app,
        &t,
        json!({ "ticket": { "payment_method": "cc", "account_number": "5454545454545454",
        "exp_date": "1239" } }),
    )
    .expect(201)
    .body["ticket"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 16 * 60 } }),
    )
    .expect(200);
    t.post(
        "/v2/accountvaults",
        json!({ "accountvault": { "payment_method": "cc", "ticket": late,
        "location_id": t.location_id() } }),
    )
    .expect(422);
    // Preflight from a merchant's page.
    let pre = client(app).send(
        "OPTIONS",
        "/v2/tickets",
        &[
            ("origin", "https://shop.example"),
            ("access-control-request-method", "POST"),
        ],
        None,
    );
    assert_eq!(pre.status, 204);
    assert!(pre
        .header("access-control-allow-headers")
        .unwrap()
        .contains("hash-key"));
}

/// A payment page link encrypted by OpenSSL itself, as the reference's
/// clients make them.
fn sealed_link(key: &str, data: &Value) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("openssl")
        .args([
            "enc",
            "-aes-256-cbc",
            "-md",
            "md5",
            "-a",
            "-A",
            "-pass",
            &format!("pass:{key}"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(data.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    form_urlencoded::byte_serialize(String::from_utf8(out.stdout).unwrap().trim().as_bytes()).collect()
}

fn new_page(t: &Tenant, extra: Value) -> Value {
    let pt = t
        .get("/v2/producttransactions?payment_method=cc")
        .expect(200)
        .body["producttransactions"][0]["id"]
        .clone();
    let mut body =
        json!({ "location_id": t.location_id(), "product_transaction_id": pt, "title": "Donations" });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    t.post("/v2/hostedpaymentpages", json!({ "hostedpaymentpage": body }))
        .expect(201)
        .body["hostedpaymentpage"]
        .clone()
}

fn hosted_payment_page_links(app: &TestApp) {
    let t = app.bootstrap();
    let page = new_page(
        &t,
        json!({ "min_payment_amount": "1.00", "redirect_url_on_approve": "https://shop.example/ok" }),
    );
    let (id, key) = (
        page["id"].as_str().unwrap(),
        page["encryption_key"].as_str().unwrap(),
    );
    assert_eq!(key.len(), 36);

    // The base link: the payer types the amount, within the page's bounds.
    let open = get_page(
        app,
        &format!(
            "/hostedpaymentpage?id={id}&data={}",
            sealed_link(key, &json!({ "id": id }))
        ),
    )
    .expect(200);
    assert!(open.text.contains("Donations") && open.text.contains("fg-transaction_amount"));
    let action_url = form_action(&open);
    let low = submit(
        app,
        &action_url,
        &[
            ("transaction_amount", "0.50"),
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
        ],
    )
    .expect(422);
    assert!(low.text.contains("at least 1.00"), "{}", low.text);
    let ok = submit(
        app,
        &action_url,
        &[
            ("transaction_amount", "25.00"),
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
        ],
    )
    .expect(200);
    assert_eq!(ok.header("refresh"), Some("0;url=https://shop.example/ok"));
    let list = t.get("/v2/transactions?trx_source_id=10").expect(200).body["transactions"].clone();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["transaction_amount"], "25.00");
    // The page that took it is on the transaction, and finds it.
    assert_eq!(list[0]["hosted_payment_page_id"], id);
    let by_page = t
        .get(&format!("/v2/transactions?hosted_payment_page_id={id}"))
        .expect(200);
    assert_eq!(by_page.body["meta"]["pagination"]["totalCount"], 1);

    // A fixed amount the payer cannot change, a hidden description.
    let fixed = json!({ "id": id, "timestamp": now(), "field_configuration": { "body": { "fields": [
        { "id": "transaction_amount", "value": "7.00", "label": "Amount due", "readonly": true, "visible": true },
        { "id": "description", "value": "Invoice 42", "visible": false } ] } } });
    let open = get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &fixed)),
    )
    .expect(200);
    assert!(open.text.contains("Amount due") && open.text.contains("readonly"));
    submit(
        app,
        &form_action(&open),
        &[
            ("transaction_amount", "0.01"),
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
        ],
    )
    .expect(200);
    let tx = t
        .get("/v2/transactions?trx_source_id=10&transaction_amount=7.00")
        .expect(200)
        .body["transactions"][0]
        .clone();
    assert_eq!(tx["description"], "Invoice 42");

    // Refusals: another key, an old link, card data preset, another page's id.
    get_page(
        app,
        &format!(
            "/hostedpaymentpage?id={id}&data={}",
            sealed_link("not-the-key", &json!({ "id": id }))
        ),
    )
    .expect(401);
    let old = json!({ "id": id, "timestamp": now() - 16 * 60 });
    assert!(get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &old))
    )
    .expect(401)
    .text
    .contains("expired"));
    // A fixed amount the page could never take opens nothing.
    for value in ["0.50", "ten"] {
        let below = json!({ "id": id, "field_configuration": { "body": { "fields": [
            { "id": "transaction_amount", "value": value, "readonly": true } ] } } });
        let r = get_page(
            app,
            &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &below)),
        )
        .expect(422);
        assert!(r.text.contains("amount"), "{}", r.text);
    }
    let preset = json!({ "id": id, "field_configuration": { "body": { "fields": [
        { "id": "account_number", "value": "4111111111111111" } ] } } });
    get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &preset)),
    )
    .expect(422);
    let other = new_page(&t, json!({}));
    let cross = sealed_link(
        other["encryption_key"].as_str().unwrap(),
        &json!({ "id": other["id"] }),
    );
    get_page(app, &format!("/hostedpaymentpage?id={id}&data={cross}")).expect(401);
    get_page(app, "/hostedpaymentpage?id=0123456789abcdef0123456789abcdef").expect(404);
    // Without its sealed link a page does not open: the link's fixed
    // amount, hidden fields and expiry cannot be dropped.
    let bare = get_page(app, &format!("/hostedpaymentpage?id={id}")).expect(400);
    assert!(bare.text.contains("data is required"), "{}", bare.text);
    // An inactive page opens nothing.
    t.put(
        &format!("/v2/hostedpaymentpages/{id}"),
        json!({ "hostedpaymentpage": { "active": false } }),
    )
    .expect(200);
    get_page(app, &format!("/hostedpaymentpage?id={id}")).expect(404);
}

fn hosted_payment_page_resource_is_checked(app: &TestApp) {
    let t = app.bootstrap();
    let pt = t
        .get("/v2/producttransactions?payment_method=cc")
        .expect(200)
        .body["producttransactions"][0]["id"]
        .clone();
    let bad = t
        .post(
            "/v2/hostedpaymentpages",
            json!({ "hostedpaymentpage": { "location_id": t.location_id(),
            "product_transaction_id": pt, "title": "X", "redirect_url_on_approve": "javascript:alert(1)",
            "min_payment_amount": "10.00", "max_payment_amount": "5.00" } }),
        )
        .expect(422);
    assert!(
        !bad.errors("redirect_url_on_approve").is_empty() && !bad.errors("min_payment_amount").is_empty(),
        "{}",
        bad.text
    );
    let other = app.bootstrap();
    let foreign_pt = other
        .get("/v2/producttransactions?payment_method=cc")
        .expect(200)
        .body["producttransactions"][0]["id"]
        .clone();
    t.post(
        "/v2/hostedpaymentpages",
        json!({ "hostedpaymentpage": { "location_id": t.location_id(),
        "product_transaction_id": foreign_pt, "title": "X" } }),
    )
    .expect(422);
    let page = new_page(&t, json!({}));
    let id = page["id"].as_str().unwrap();
    // A partial update keeps the rest; the key never changes by PUT.
    let updated = t
        .put(
            &format!("/v2/hostedpaymentpages/{id}"),
            json!({ "hostedpaymentpage": { "title": "Renamed" } }),
        )
        .expect(200)
        .body["hostedpaymentpage"]
        .clone();
    assert_eq!(
        (updated["title"].as_str(), updated["encryption_key"].clone()),
        (Some("Renamed"), page["encryption_key"].clone())
    );
    other.get(&format!("/v2/hostedpaymentpages/{id}")).expect(404);
    t.send("DELETE", &format!("/v2/hostedpaymentpages/{id}"), None)
        .expect(204);
}

/// The second way a result reaches the integrator: a PayForm payment is a
/// transaction like any other, so a transaction postback hears of it.
fn a_payform_payment_reaches_a_postback(app: &TestApp) {
    use crate::support::receiver::{config, Receiver};
    let t = app.bootstrap();
    let receiver = Receiver::start("/payform-results");
    config(
        &t,
        json!({ "resource": "transaction", "url": receiver.url, "product_transaction_id": t.cred("cc_product_transaction_id") }),
    );
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("order-pb"));
    let action = form_action(&get_page(app, &link).expect(200));
    submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    let got = receiver.wait_for(1, std::time::Duration::from_secs(10));
    assert_eq!(got[0].field("type"), "CREATE");
    let data = got[0].data();
    assert_eq!(data["transaction_api_id"], "order-pb");
    assert_eq!(data["trx_source_id"], 9);
    assert!(!got[0].body.contains("4111111111111111"));
}

/// Opens a link with the given extra request headers.
fn open_with(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Resp {
    let mut all = vec![("accept", "text/html")];
    all.extend_from_slice(headers);
    client(app).send("GET", path, &all, None)
}

/// A form opened now submits for 15 minutes from its timestamp (the
/// hash's lifetime); past that, on the location's clock, the submission
/// is refused and charges nothing.
fn a_form_submits_within_fifteen_minutes(app: &TestApp) {
    let t = app.bootstrap();
    let action = form_action(
        &get_page(
            app,
            &form_link(&t, "/v2/payform", fresh_ts(), &sale_data("late-1")),
        )
        .expect(200),
    );
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 16 * 60 } }),
    )
    .expect(200);
    let late = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    );
    assert!(
        (400..500).contains(&late.status),
        "{}: {}",
        late.status,
        late.text
    );
    assert!(late.text.to_lowercase().contains("expired"), "{}", late.text);
    assert!(by_api_id(&t, "late-1").is_empty(), "no transaction");
    // A form opened on the moved clock still works within its window.
    let clock = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let action =
        form_action(&get_page(app, &form_link(&t, "/v2/payform", clock, &sale_data("late-2"))).expect(200));
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 14 * 60 } }),
    )
    .expect(200);
    submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert_eq!(by_api_id(&t, "late-2").len(), 1);
}

/// PayForm authonly and avsonly with `save_account` and a `contact_id`
/// store the entered card as a vault of that contact.
fn authonly_and_avsonly_save_the_account(app: &TestApp) {
    let t = app.bootstrap();
    for (action, amount, status) in [("authonly", "12.00", 102), ("avsonly", "0.00", 121)] {
        let contact = t.contact(json!({ "first_name": action }))["id"]
            .as_str()
            .unwrap()
            .to_string();
        let api_id = format!("save-{action}");
        let data = json!({ "transaction": { "payment_method": "cc", "action": action, "transaction_amount": amount,
            "transaction_api_id": api_id, "save_account": 1, "save_account_title": "Saved card",
            "contact_id": contact, "show_zip": true } });
        let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200);
        let done = submit(
            app,
            &form_action(&form),
            &[
                ("account_holder_name", "Pat Payer"),
                ("account_number", "4111111111111111"),
                ("exp_date", "1239"),
                ("billing_zip", "12345"),
            ],
        )
        .expect(200);
        // Each result in words that fit what was done: a verified card
        // was not a payment, and nothing was charged.
        let heading = if action == "avsonly" {
            "Card verified and saved"
        } else {
            "Payment approved"
        };
        assert!(done.text.contains(heading), "{action}: {}", done.text);
        if action == "avsonly" {
            assert!(
                !done.text.contains("Payment approved") && !done.text.contains("$0.00"),
                "{}",
                done.text
            );
        }
        let tx = &by_api_id(&t, &api_id)[0];
        assert_eq!(tx["status_id"], status, "{action}: {tx}");
        assert_eq!(tx["contact_id"], contact.as_str(), "{action}");
        let vault_id = tx["account_vault_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{action}: the account is saved: {tx}"));
        let vault = t.get(&format!("/v2/accountvaults/{vault_id}")).expect(200).body["accountvault"].clone();
        assert_eq!(vault["contact_id"], contact.as_str(), "{action}");
        assert_eq!(vault["last_four"], "1111");
        assert_eq!(vault["title"], "Saved card");
        let of_contact = t
            .get(&format!("/v2/accountvaults?contact_id={contact}"))
            .expect(200)
            .body;
        assert_eq!(of_contact["meta"]["pagination"]["totalCount"], 1, "{action}");
    }
    assert!(!app.log().contains("4111111111111111"));
}

/// Approval is judged by status_id: a partial approval (reason 1201, the
/// sandbox's $2.01) is an approval, shown as one.
fn a_partial_approval_is_shown_approved(app: &TestApp) {
    let t = app.bootstrap();
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "2.01",
        "transaction_api_id": "partial-1", "allow_partial_authorization_override": 1,
        "redirect_url_on_approval": "https://shop.example/thanks",
        "redirect_url_on_decline": "https://shop.example/sorry" } });
    let action = form_action(&get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200));
    let done = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    let tx = &by_api_id(&t, "partial-1")[0];
    assert_eq!(
        (tx["status_id"].as_i64(), tx["reason_code_id"].as_i64()),
        (Some(101), Some(1201)),
        "{tx}"
    );
    assert!(done.text.contains("Payment approved"), "{}", done.text);
    assert!(!done.text.contains("Payment declined"));
    assert_eq!(done.header("refresh"), Some("0;url=https://shop.example/thanks"));
    // And a decline is still one.
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "2.01",
        "transaction_api_id": "partial-2" } });
    let action = form_action(&get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200));
    let done = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert_eq!(by_api_id(&t, "partial-2")[0]["status_id"], 301);
    assert!(done.text.contains("Payment declined"), "{}", done.text);
}

/// The config attribute the page's script posts results to.
fn posted_origin(page: &Resp) -> String {
    let at = page
        .text
        .find("data-parent-origin=\"")
        .expect("the config element")
        + "data-parent-origin=\"".len();
    let end = page.text[at..].find('"').unwrap();
    page.text[at..at + end].to_string()
}

/// Results are posted to the page that embedded the form: the origin of
/// the Referer that opened it, on the form and on the result page; never
/// a wildcard.
fn results_go_to_the_parent_origin_only(app: &TestApp) {
    let t = app.bootstrap();
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("parent-1"));
    let form = open_with(
        app,
        &link,
        &[("referer", "https://shop.example:8443/checkout?step=2#pay")],
    )
    .expect(200);
    assert_eq!(posted_origin(&form), "https://shop.example:8443");
    let done = submit(
        app,
        &form_action(&form),
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert_eq!(posted_origin(&done), "https://shop.example:8443");
    assert!(done.text.contains("data-send-message=\"true\""), "{}", done.text);
    assert!(!done.text.contains("postMessage(message, \"*\")") && !done.text.contains("'*'"));
    // Without a Referer there is no origin to post to (the script then
    // asks the browser for the embedding page's own origin).
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("parent-2"));
    let form = open_with(app, &link, &[]).expect(200);
    assert_eq!(posted_origin(&form), "");
    // A Referer that is no http(s) URL is not taken.
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("parent-3"));
    let form = open_with(app, &link, &[("referer", "javascript:alert(1)")]).expect(200);
    assert_eq!(posted_origin(&form), "");
}

/// UI flags act on the form: `require_zip` refuses a submission without
/// a ZIP (nothing charged); `display_close_button: false` removes the
/// close button, which is there by default.
fn flags_change_the_form(app: &TestApp) {
    let t = app.bootstrap();
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "3.00",
        "transaction_api_id": "zip-1", "show_zip": true, "require_zip": true } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200);
    assert!(form.text.contains("fg-billing_zip"), "the ZIP is asked");
    assert!(form.text.contains("data-fg-close"), "a close button by default");
    let action = form_action(&form);
    let refused = submit(
        app,
        &action,
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(422);
    assert!(refused.text.contains("role=\"alert\""), "{}", refused.text);
    assert!(refused.text.contains("fg-billing_zip"), "{}", refused.text);
    assert!(by_api_id(&t, "zip-1").is_empty(), "nothing charged");
    submit(
        app,
        &action,
        &[
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
            ("billing_zip", "12345"),
        ],
    )
    .expect(200);
    assert_eq!(by_api_id(&t, "zip-1")[0]["billing_zip"], "12345");

    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "3.00",
        "transaction_api_id": "close-1", "display_close_button": false } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200);
    assert!(!form.text.contains("data-fg-close"), "no close button");
    let done = submit(
        app,
        &form_action(&form),
        &[("account_number", "4111111111111111"), ("exp_date", "1239")],
    )
    .expect(200);
    assert!(!done.text.contains("data-fg-close"), "nor on the result");

    // The service address fields are the transaction's own.
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "3.00",
        "transaction_api_id": "service-1", "show_service_address_fields": true } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200);
    assert!(form.text.contains("fg-service_city"), "{}", form.text);
    submit(
        app,
        &form_action(&form),
        &[
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
            ("service_address", "9 Depot Rd"),
            ("service_city", "Austin"),
            ("service_state", "TX"),
            ("service_zip", "78701"),
        ],
    )
    .expect(200);
    let tx = &by_api_id(&t, "service-1")[0];
    assert_eq!(
        (
            tx["service_address"].clone(),
            tx["service_city"].clone(),
            tx["service_zip"].clone()
        ),
        (json!("9 Depot Rd"), json!("Austin"), json!("78701"))
    );
}

/// Two PayForm links made in the same second share their hash-key (it
/// signs the user and the timestamp, not the data). The second never
/// shows, or pays into, the first one's form: it is refused, and the
/// first pays its own amount once.
fn two_links_of_one_second_never_share_a_form(app: &TestApp) {
    let t = app.bootstrap();
    let ts = fresh_ts();
    let mut big = sale_data("order-a");
    big["transaction"]["transaction_amount"] = json!("250.00");
    let first = form_link(&t, "/v2/payform", ts, &big);
    let second = form_link(&t, "/v2/payform", ts, &sale_data("order-b"));
    let form = get_page(app, &first).expect(200);
    assert!(form.text.contains("Pay $250.00"));
    let refused = get_page(app, &second).expect(403);
    assert!(
        refused.text.contains("Hash key has already opened another form"),
        "{}",
        refused.text
    );
    assert!(
        !refused.text.contains("250.00"),
        "nothing of the first form shows"
    );
    // A reload of the first still shows its form, and it pays once.
    let again = get_page(app, &first).expect(200);
    assert_eq!(form_action(&again), form_action(&form));
    submit(
        app,
        &form_action(&form),
        &[
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
            ("billing_street", "1 Main St"),
        ],
    )
    .expect(200);
    assert_eq!(by_api_id(&t, "order-a").len(), 1);
    assert!(by_api_id(&t, "order-b").is_empty());
    get_page(app, &second).expect(403);
}

/// A form charges as the user whose link opened it: if that user may no
/// longer take payments when the payer submits (its role was taken away
/// meanwhile), nothing is charged.
fn a_form_pays_only_while_its_user_may(app: &TestApp) {
    let t = app.bootstrap();
    let link = form_link(&t, "/v2/payform", fresh_ts() - 60, &sale_data("revoked-1"));
    let form = get_page(app, &link).expect(200);
    let action = form_action(&form);
    // Another administrator takes the first one's role away.
    let (admin, key) = t.user(&t.location_id(), Some("1"));
    let other = t.as_user(&admin, &key);
    let roles = other
        .get(&format!("/v2/authroleusers?user_id={}", t.user_id()))
        .expect(200);
    let role = roles.body["authroleusers"][0]["id"].as_str().unwrap().to_string();
    other.delete(&format!("/v2/authroleusers/{role}")).expect(204);
    let r = submit(app, &action, PAYFORM_CARD);
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(by_api_id(&other, "revoked-1").is_empty(), "nothing charged");
}

/// The spec's PayForm actions are sale, authonly, avsonly and (ACH)
/// debit. A refund or a credit would pay money out to whoever types a
/// card, and a link's data is not signed: refused when the link opens,
/// so nothing can be paid out.
fn a_payform_never_pays_money_out(app: &TestApp) {
    let t = app.bootstrap();
    let ach_pt = t.cred("ach_product_transaction_id");
    for (method, action, api_id) in [
        ("cc", "refund", "out-1"),
        ("cc", "credit", "out-2"),
        ("ach", "refund", "out-3"),
        ("ach", "credit", "out-4"),
    ] {
        let data = json!({ "transaction": { "payment_method": method, "action": action,
            "transaction_amount": "900.00", "transaction_api_id": api_id, "ach_sec_code": "WEB",
            "product_transaction_id": if method == "ach" { json!(ach_pt) } else { Value::Null } } });
        let link = form_link(&t, "/v2/payform", fresh_ts(), &data);
        let refused = get_page(app, &link).expect(422);
        assert!(
            refused.text.contains("never pays money out"),
            "{method} {action}: {}",
            refused.text
        );
        assert!(!refused.text.contains("action=\"/hosted/"), "no form");
        assert!(by_api_id(&t, api_id).is_empty());
    }
    // As JSON, for the integrator: the action is named.
    let data = json!({ "transaction": { "payment_method": "cc", "action": "refund",
        "transaction_amount": "900.00", "transaction_api_id": "out-5" } });
    let r = client(app).send(
        "GET",
        &form_link(&t, "/v2/payform", fresh_ts(), &data),
        &[("accept", "application/json")],
        None,
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("action").is_empty(), "{}", r.text);
    // An AccountForm stores a vault and pays nothing: an action is refused.
    let vault = json!({ "accountvault": { "payment_method": "cc", "account_vault_api_id": "out-vault",
        "action": "refund" } });
    let r = get_page(app, &form_link(&t, "/v2/accountform", fresh_ts(), &vault));
    assert_eq!(r.status, 422, "{}", r.text);
}

/// What only the integrator can fix is refused when the link opens (a
/// 422 page, or JSON naming the field), before any payer types a card:
/// the payments core's own checks run on the form's data.
fn integrator_mistakes_are_refused_when_the_link_opens(app: &TestApp) {
    let t = app.bootstrap();
    let ach_pt = t.cred("ach_product_transaction_id");
    let sale = |api_id: &str, extra: Value| {
        let mut tx = json!({ "payment_method": "cc", "action": "sale", "transaction_amount": "13.00",
            "transaction_api_id": api_id });
        tx.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "transaction": tx })
    };
    let ach = |api_id: &str, extra: Value| {
        let mut tx = json!({ "payment_method": "ach", "action": "debit", "transaction_amount": "13.00",
            "ach_sec_code": "WEB", "product_transaction_id": ach_pt, "transaction_api_id": api_id });
        tx.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "transaction": tx })
    };
    let cases = [
        (
            "save_account alone",
            sale("im-1", json!({ "save_account": 1 })),
            "contact_id",
        ),
        (
            "a contact that does not exist",
            sale(
                "im-2",
                json!({ "contact_id": "0123456789abcdef0123456789abcdef" }),
            ),
            "contact_id",
        ),
        (
            "tip and tax above the amount",
            sale("im-3", json!({ "tip_amount": "12", "tax": "3" })),
            "tip_amount",
        ),
        (
            "a surcharge on an account without one",
            sale("im-4", json!({ "surcharge_amount": "0.01" })),
            "surcharge_amount",
        ),
        (
            "a stored account",
            sale(
                "im-5",
                json!({ "account_vault_id": "0123456789abcdef0123456789abcdef" }),
            ),
            "account_vault_id",
        ),
        (
            "an ACH holder the form does not ask",
            ach("im-6", json!({ "show_account_holder_name": false })),
            "account_holder_name",
        ),
        (
            "an ACH SEC code needing a check number",
            ach("im-7", json!({ "ach_sec_code": "TEL" })),
            "check_number",
        ),
    ];
    for (what, data, field) in cases {
        let link = form_link(&t, "/v2/payform", fresh_ts(), &data);
        let r = client(app).send("GET", &link, &[("accept", "application/json")], None);
        assert_eq!(r.status, 422, "{what}: {}", r.text);
        assert!(!r.errors(field).is_empty(), "{what}: {}", r.text);
        // The same link as a payer's browser would open it: a page, no form.
        let link = form_link(&t, "/v2/payform", fresh_ts(), &data);
        let page = get_page(app, &link).expect(422);
        assert!(
            page.text.contains("This payment link is not valid") && !page.text.contains("action=\"/hosted/"),
            "{what}: {}",
            page.text
        );
    }
    // The same fields, right, open the form.
    let contact = t.contact(json!({ "first_name": "Pat" }))["id"].clone();
    let good = sale(
        "im-8",
        json!({ "save_account": 1, "contact_id": contact, "tip_amount": "2", "tax": "1" }),
    );
    get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &good)).expect(200);
    // A payment page link whose bounds no amount fits.
    let page = new_page(&t, json!({}));
    let (id, key) = (
        page["id"].as_str().unwrap(),
        page["encryption_key"].as_str().unwrap(),
    );
    let crossed = json!({ "id": id, "min_payment_amount": "20.00", "max_payment_amount": "10.00" });
    let r = get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &crossed)),
    )
    .expect(422);
    assert!(r.text.contains("min_payment_amount"), "{}", r.text);
    // Its hidden fields are checked like a PayForm's data.
    let hidden = json!({ "id": id, "field_configuration": { "body": { "fields": [
        { "id": "save_account", "value": 1, "visible": false } ] } } });
    let r = get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &hidden)),
    )
    .expect(422);
    assert!(r.text.contains("contact_id"), "{}", r.text);
    for api_id in ["im-1", "im-2", "im-3", "im-4", "im-5", "im-6", "im-7"] {
        assert!(by_api_id(&t, api_id).is_empty());
    }
}

/// On an account with a card surcharge, every page says what a credit
/// card pays, and that a debit card pays no surcharge, before the payer
/// submits; the result shows the total charged and its surcharge.
fn the_surcharge_is_shown_before_the_payer_pays(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let out = app.cli(&["surcharge", "--product-transaction-id", &cc, "--percent", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let note =
        "Credit cards: a 3.00% surcharge of $0.30 applies, total $10.30. Debit cards: $10.00, no surcharge.";
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "10.00",
        "transaction_api_id": "sur-1" } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200);
    assert!(form.text.contains(note), "{}", form.text);
    assert!(
        !form.text.contains("Pay $10.00"),
        "the button does not promise one total: {}",
        form.text
    );
    assert!(form.text.contains("aria-describedby=\"fg-surcharge\""));
    let done = submit(app, &form_action(&form), PAYFORM_CARD).expect(200);
    for line in [
        "Subtotal",
        "$10.00",
        "Card surcharge",
        "$0.30",
        "Total charged",
        "$10.30",
    ] {
        assert!(done.text.contains(line), "{line}: {}", done.text);
    }
    assert_eq!(by_api_id(&t, "sur-1")[0]["transaction_amount"], "10.30");
    // Tax is not surcharged.
    let taxed = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "11.00",
        "tax": "1.00", "transaction_api_id": "sur-2" } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &taxed)).expect(200);
    assert!(
        form.text
            .contains("surcharge of $0.30 applies, total $11.30. Debit cards: $11.00"),
        "{}",
        form.text
    );
    // A form may not fix the surcharge: it depends on the card.
    let fixed = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "10.30",
        "surcharge_amount": "0.30", "transaction_api_id": "sur-3" } });
    get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &fixed)).expect(422);
    // A card check charges nothing, so no surcharge is mentioned.
    let avs = json!({ "transaction": { "payment_method": "cc", "action": "avsonly", "transaction_api_id": "sur-4" } });
    let form = get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &avs)).expect(200);
    assert!(!form.text.contains("surcharge"), "{}", form.text);
    // The payment page: a fixed amount exactly, a typed one by its rate.
    let page = new_page(&t, json!({}));
    let (id, key) = (
        page["id"].as_str().unwrap(),
        page["encryption_key"].as_str().unwrap(),
    );
    let fixed = json!({ "id": id, "field_configuration": { "body": { "fields": [
        { "id": "transaction_amount", "value": "10.00", "readonly": true } ] } } });
    let shown = get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &fixed)),
    )
    .expect(200);
    assert!(shown.text.contains(note), "{}", shown.text);
    // Tax the page sends hidden is not surcharged, on the page as in the
    // charge.
    let taxed = json!({ "id": id, "field_configuration": { "body": { "fields": [
        { "id": "transaction_amount", "value": "11.00", "readonly": true },
        { "id": "tax", "value": "1.00", "visible": false } ] } } });
    let shown = get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &taxed)),
    )
    .expect(200);
    assert!(
        shown
            .text
            .contains("a 3.00% surcharge of $0.30 applies, total $11.30"),
        "{}",
        shown.text
    );
    let typed = get_page(
        app,
        &format!(
            "/hostedpaymentpage?id={id}&data={}",
            sealed_link(key, &json!({ "id": id }))
        ),
    )
    .expect(200);
    assert!(
        typed.text.contains(
            "Credit cards: a 3.00% surcharge is added to the amount you pay. Debit cards: no surcharge."
        ),
        "{}",
        typed.text
    );
}

/// A payment page link with a timestamp works for 15 minutes from when it
/// was made, however late in that time it was opened.
fn a_payment_page_link_expires_fifteen_minutes_after_it_is_made(app: &TestApp) {
    let t = app.bootstrap();
    let page = new_page(&t, json!({}));
    let (id, key) = (
        page["id"].as_str().unwrap(),
        page["encryption_key"].as_str().unwrap(),
    );
    let clock = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let link = json!({ "id": id, "timestamp": clock - 14 * 60 });
    let open = get_page(
        app,
        &format!("/hostedpaymentpage?id={id}&data={}", sealed_link(key, &link)),
    )
    .expect(200);
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 2 * 60 } }),
    )
    .expect(200);
    let late = submit(
        app,
        &form_action(&open),
        &[
            ("transaction_amount", "5.00"),
            ("account_number", "4111111111111111"),
            ("exp_date", "1239"),
        ],
    );
    assert!(
        (400..500).contains(&late.status),
        "{}: {}",
        late.status,
        late.text
    );
    assert!(late.text.contains("expired"), "{}", late.text);
    let list = t.get("/v2/transactions?trx_source_id=10").expect(200).body["transactions"].clone();
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");
}

/// The address a submitted form leaves in the browser answers a GET (a
/// reload, the tab restored): the form while it is open, its result once
/// it has one, and a page, never JSON, when there is none.
fn a_submitted_form_survives_a_reload(app: &TestApp) {
    let t = app.bootstrap();
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("reload-1"));
    let action = form_action(&get_page(app, &link).expect(200));
    let before = get_page(app, &action).expect(200);
    assert!(before.text.contains("Pay $13.00"), "{}", before.text);
    submit(app, &action, PAYFORM_CARD).expect(200);
    let after = get_page(app, &action).expect(200);
    assert!(after.header("content-type").unwrap().starts_with("text/html"));
    assert!(after.text.contains("Payment approved"), "{}", after.text);
    assert_eq!(by_api_id(&t, "reload-1").len(), 1, "a reload charges nothing");
    let gone = get_page(app, "/hosted/0123456789abcdef0123456789abcdef").expect(404);
    assert!(gone.header("content-type").unwrap().starts_with("text/html"));
    assert!(
        gone.text.contains("has expired or does not exist"),
        "{}",
        gone.text
    );
    // Past its 15 minutes an unsubmitted form says so.
    let link = form_link(&t, "/v2/payform", fresh_ts(), &sale_data("reload-2"));
    let action = form_action(&get_page(app, &link).expect(200));
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 16 * 60 } }),
    )
    .expect(200);
    let late = get_page(app, &action).expect(401);
    assert!(late.text.contains("expired"), "{}", late.text);
}

/// The error summary lists the problems in the order of the fields on the
/// page, as a screen reader user meets them.
fn the_error_summary_follows_the_page(app: &TestApp) {
    let t = app.bootstrap();
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale", "transaction_amount": "13.00",
        "transaction_api_id": "order-errors", "show_zip": true, "require_zip": true } });
    let action = form_action(&get_page(app, &form_link(&t, "/v2/payform", fresh_ts(), &data)).expect(200));
    let r = submit(app, &action, &[]).expect(422);
    let summary = &r.text[r.text.find("id=\"fg-errors\"").expect("a summary")..];
    let summary = &summary[..summary.find("</ul>").unwrap()];
    let at = |words: &str| {
        summary
            .find(words)
            .unwrap_or_else(|| panic!("{words}: {summary}"))
    };
    assert!(
        at("Card number is required") < at("Expiry (MM/YY) is required")
            && at("Expiry (MM/YY) is required") < at("ZIP code is required"),
        "{summary}"
    );
}
/// A user's hash key can be given later and replaced (a leaked key is
/// revoked by replacing it): the old one stops signing at once; the key
/// never reads back, and the change log shows only that it changed.
fn a_hash_key_is_set_and_replaced_by_put(app: &TestApp) {
    let t = app.bootstrap();
    let card = json!({ "ticket": { "payment_method": "cc", "account_number": "4111111111111111",
        "exp_date": "1239" } });
    ticket(app, &t, card.clone()).expect(201);
    // A form the old key opened and nobody submitted yet.
    let opened = get_page(
        app,
        &form_link(&t, "/v2/payform", fresh_ts(), &sale_data("before-rotation")),
    )
    .expect(200);
    let own = format!("/v2/users/{}", t.user_id());
    let new_key = format!("replaced-hash-key-{}", now());
    let r = t.put(&own, json!({ "user": { "user_hash_key": new_key } }));
    assert_eq!(r.status, 200, "{}", r.text);
    // It ends with its key.
    let late = submit(app, &form_action(&opened), PAYFORM_CARD);
    assert!(late.status >= 400, "{} {}", late.status, late.text);
    assert!(by_api_id(&t, "before-rotation").is_empty());
    assert_eq!(r.body["user"]["user_hash_key"], Value::Null);
    assert!(!r.text.contains(&new_key));
    assert_eq!(
        ticket(app, &t, card.clone()).status,
        401,
        "the old key is refused"
    );
    let mut rotated = t.clone();
    rotated.creds["user_hash_key"] = json!(new_key);
    ticket(app, &rotated, card.clone()).expect(201);
    let logs = t.get(&format!("{own}?expand=changelogs")).expect(200);
    assert!(!logs.text.contains(&new_key));
    let details: Vec<Value> = logs.body["user"]["changelogs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["changelog_details"].as_array().cloned().unwrap_or_default())
        .collect();
    let change = details
        .iter()
        .find(|d| d["field"] == "user_hash_key")
        .unwrap_or_else(|| panic!("{details:?}"));
    assert_eq!(change["old_value"], "********", "{change}");
    assert!(
        details.iter().all(|d| d["field"] != "hash_key_enc"),
        "{details:?}"
    );
    // A user created without one is given one; someone without
    // users.update cannot; and bad keys are refused.
    let (bare, _) = t.user(&t.location_id(), Some("132"));
    let given = format!("a-later-hash-key-{}", now());
    t.put(
        &format!("/v2/users/{bare}"),
        json!({ "user": { "user_hash_key": given } }),
    )
    .expect(200);
    let (reader, reader_key) = t.user(&t.location_id(), Some("2"));
    let r = t.as_user(&reader, &reader_key).put(
        &format!("/v2/users/{reader}"),
        json!({ "user": { "user_hash_key": given } }),
    );
    assert_eq!(r.status, 403, "{}", r.text);
    let r = t.put(&own, json!({ "user": { "user_hash_key": "short" } }));
    assert_eq!(r.status, 422, "{}", r.text);
    // Never in the database or the log in clear.
    for secret in [&new_key, &given] {
        assert!(crate::support::db::db(app).columns_containing(secret).is_empty());
        assert!(!app.log().contains(secret.as_str()));
    }
}
