//! What real clients of this API send (the reference's samples, its
//! Postman collection, published client libraries), and partial updates
//! of every updatable resource.

use crate::engine_tests;
use crate::support::{Tenant, TestApp};
use serde_json::{json, Value};

engine_tests!(
    what_published_clients_send,
    a_put_carries_only_what_it_changes,
    a_put_may_resend_what_cannot_change,
    tags_classify_transactions_and_recurrings,
    the_tags_expand_shows_the_records_tags,
    every_key_of_the_samples,
    surcharges_on_credit_cards_only,
);

fn sale(t: &Tenant, extra: Value) -> crate::support::Resp {
    let mut tx = json!({ "action": "sale", "payment_method": "cc",
        "account_number": "4111111111111111", "exp_date": "1239", "transaction_amount": "12.00" });
    for (k, v) in extra.as_object().unwrap() {
        tx[k] = v.clone();
    }
    t.post("/v2/transactions", json!({ "transaction": tx }))
}

fn what_published_clients_send(app: &TestApp) {
    let t = app.bootstrap();
    // Every reference sample sends an order number with a space.
    let r = sale(&t, json!({ "order_num": "SDKTest 123" }));
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["transaction"]["order_num"], "SDKTest 123");
    for bad in ["order<script>", "a\tb", "x;DROP"] {
        let r = sale(&t, json!({ "order_num": bad }));
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
        assert!(r.body["errors"]["order_num"].is_array(), "{}", r.text);
    }
    // The collection sends account_type on card requests: a card's type
    // comes from its number, so the value sent is ignored.
    for action in ["sale", "authonly"] {
        let r = sale(&t, json!({ "action": action, "account_type": "mc" }));
        assert_eq!(r.status, 201, "{action}: {}", r.text);
        assert_eq!(
            r.body["transaction"]["account_type"], "visa",
            "{action}: derived, not sent"
        );
    }
    // POST to a transaction runs an update action, as PUT does.
    let auth = sale(&t, json!({ "action": "authonly" })).expect(201).body["transaction"].clone();
    let id = auth["id"].as_str().unwrap();
    let r = t.post(
        &format!("/v2/transactions/{id}"),
        json!({ "transaction": { "action": "authcomplete", "transaction_amount": "12.00" } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["transaction"]["status_id"], 101, "{}", r.text);
    let r = t.post(
        &format!("/v2/transactions/{id}"),
        json!({ "transaction": { "action": "void" } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["transaction"]["status_id"], 201, "{}", r.text);
    // A create action there is still refused, as on PUT.
    let r = t.post(
        &format!("/v2/transactions/{id}"),
        json!({ "transaction": { "action": "sale" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
}

/// Creates a record and returns its id.
fn made(t: &Tenant, path: &str, key: &str, body: Value) -> String {
    let r = t.post(path, json!({ key: body }));
    assert_eq!(r.status, 201, "{path}: {}", r.text);
    r.body[key]["id"].as_str().unwrap().to_string()
}

/// A PUT with one field changes that field and nothing else, for every
/// resource that takes updates.
fn a_put_carries_only_what_it_changes(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let contact = t.contact(json!({ "first_name": "Jo", "email": "jo@example.com" }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let card = made(
        &t,
        "/v2/accountvaults",
        "accountvault",
        json!({ "location_id": loc, "payment_method": "cc", "contact_id": contact,
            "account_number": "4111111111111111", "exp_date": "1239", "title": "Card" }),
    );
    let bank = made(
        &t,
        "/v2/accountvaults",
        "accountvault",
        json!({ "location_id": loc, "payment_method": "ach", "contact_id": contact,
            "account_number": "123456789", "routing": "021000021", "account_type": "checking",
            "account_holder_name": "Jo Doe", "is_company": 0, "title": "Bank" }),
    );
    let child = t.location(&loc, "Branch");
    let note = made(
        &t,
        "/v2/notes",
        "note",
        json!({ "resource": "Contact", "resource_id": contact, "note": "first" }),
    );
    let (user, _) = t.user(&loc, Some("2"));
    let hook = made(
        &t,
        "/v2/postbackconfigs",
        "postbackconfig",
        json!({ "location_id": loc, "resource": "contact", "url": "https://example.com/hook" }),
    );
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(2))
        .format("%Y-%m-%d")
        .to_string();
    let plan = made(
        &t,
        "/v2/recurrings",
        "recurring",
        json!({ "location_id": loc, "account_vault_id": card, "transaction_amount": "9.00",
            "interval": 1, "interval_type": "m", "start_date": tomorrow, "description": "Gym" }),
    );
    let files = made(
        &t,
        "/v2/productfiles",
        "productfile",
        json!({ "location_id": loc, "title": "Invoices", "product_file_credential_id": "cred-1" }),
    );
    let tag = made(
        &t,
        "/v2/tags",
        "tag",
        json!({ "location_id": loc, "title": "Gala" }),
    );
    let invoice = made(
        &t,
        "/v2/quickinvoices",
        "quickinvoice",
        json!({ "location_id": loc, "title": "Invoice", "due_date": "2030-01-15",
            "item_list": { "Bread": "4.00" }, "email": "jo@example.com", "note": "Thanks" }),
    );
    let hosted = made(
        &t,
        "/v2/hostedpaymentpages",
        "hostedpaymentpage",
        json!({ "location_id": loc, "product_transaction_id": t.cred("cc_product_transaction_id"),
            "title": "Donate", "redirect_url_on_approve": "https://shop.example/thanks" }),
    );
    let cases: Vec<(String, &str, Value, &str)> = vec![
        (
            format!("/v2/productfiles/{files}"),
            "productfile",
            json!({ "title": "Invoice files" }),
            "product_file_credential_id",
        ),
        (
            format!("/v2/tags/{tag}"),
            "tag",
            json!({ "title": "Gala 2027" }),
            "location_id",
        ),
        (
            format!("/v2/quickinvoices/{invoice}"),
            "quickinvoice",
            json!({ "note": "Thank you" }),
            "item_list",
        ),
        (
            format!("/v2/quickinvoices/{invoice}"),
            "quickinvoice",
            json!({ "due_date": "2030-02-01" }),
            "title",
        ),
        (
            format!("/v2/hostedpaymentpages/{hosted}"),
            "hostedpaymentpage",
            json!({ "redirect_url_delay": 5 }),
            "redirect_url_on_approve",
        ),
        (
            format!("/v2/hostedpaymentpages/{hosted}"),
            "hostedpaymentpage",
            json!({ "title": "Give" }),
            "product_transaction_id",
        ),
        (
            format!("/v2/contacts/{contact}"),
            "contact",
            json!({ "city": "Austin" }),
            "first_name",
        ),
        (
            format!("/v2/locations/{child}"),
            "location",
            json!({ "office_phone": "5125550100" }),
            "name",
        ),
        (
            format!("/v2/accountvaults/{card}"),
            "accountvault",
            json!({ "title": "Visa" }),
            "exp_date",
        ),
        (
            format!("/v2/accountvaults/{bank}"),
            "accountvault",
            json!({ "title": "Checking" }),
            "account_holder_name",
        ),
        (
            format!("/v2/notes/{note}"),
            "note",
            json!({ "note": "second" }),
            "resource_id",
        ),
        (
            format!("/v2/users/{user}"),
            "user",
            json!({ "last_name": "Smith" }),
            "username",
        ),
        (
            format!("/v2/postbackconfigs/{hook}"),
            "postbackconfig",
            json!({ "on_update": 1 }),
            "url",
        ),
        (
            format!("/v2/recurrings/{plan}"),
            "recurring",
            json!({ "description": "Pool" }),
            "transaction_amount",
        ),
    ];
    for (path, key, change, kept) in cases {
        let before = t.get(&path).expect(200).body[key].clone();
        let r = t.put(&path, json!({ key: change.clone() }));
        assert_eq!(r.status, 200, "PUT {path} {change}: {}", r.text);
        let after = t.get(&path).expect(200).body[key].clone();
        for (field, value) in change.as_object().unwrap() {
            let shown = &after[field];
            assert!(
                shown == value || shown.to_string().trim_matches('"') == value.to_string().trim_matches('"'),
                "{path}: {field} is {shown}, sent {value}"
            );
        }
        assert_eq!(after[kept], before[kept], "{path}: {kept} unchanged");
        // Nor anything else the PUT did not name.
        for (field, was) in before.as_object().unwrap() {
            if change.get(field).is_none() && !["modified_ts", "modified_user_id"].contains(&field.as_str()) {
                assert_eq!(&after[field], was, "{path}: {field} unchanged");
            }
        }
    }
}

/// A PUT that resends a field set on create with the value it holds is
/// accepted (the reference's tag update sends `location_id`); another
/// value is still refused, and so is any value of a masked field.
fn a_put_may_resend_what_cannot_change(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let branch = t.location(&loc, "Branch");
    // The reference's "Update Record" sample of tags.
    let tag = made(
        &t,
        "/v2/tags",
        "tag",
        json!({ "location_id": loc, "title": "Test Tag" }),
    );
    let r = t.put(
        &format!("/v2/tags/{tag}"),
        json!({ "tag": { "title": "Test Tag Alt", "location_id": loc } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["tag"]["title"], "Test Tag Alt");
    let r = t.put(
        &format!("/v2/tags/{tag}"),
        json!({ "tag": { "title": "Moved", "location_id": branch } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.body["errors"]["location_id"][0],
        "Location Id cannot be changed."
    );
    assert_eq!(
        t.get(&format!("/v2/tags/{tag}")).expect(200).body["tag"]["title"],
        "Test Tag Alt"
    );

    let contact = t.contact(json!({ "first_name": "Jo" }));
    let contact_id = contact["id"].as_str().unwrap();
    let r = t.put(
        &format!("/v2/contacts/{contact_id}"),
        json!({ "contact": { "location_id": loc, "city": "Austin" } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let r = t.put(
        &format!("/v2/contacts/{contact_id}"),
        json!({ "contact": { "location_id": branch } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);

    let card = made(
        &t,
        "/v2/accountvaults",
        "accountvault",
        json!({ "location_id": loc, "payment_method": "cc", "contact_id": contact_id,
            "account_number": "4111111111111111", "exp_date": "1239" }),
    );
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(2))
        .format("%Y-%m-%d")
        .to_string();
    let plan = made(
        &t,
        "/v2/recurrings",
        "recurring",
        json!({ "location_id": loc, "account_vault_id": card, "transaction_amount": "9.00",
            "interval": 1, "interval_type": "m", "start_date": tomorrow }),
    );
    // The value as the field's parser reads it: "1" is the stored 1.
    let r = t.put(
        &format!("/v2/recurrings/{plan}"),
        json!({ "recurring": { "location_id": loc, "interval": "1", "interval_type": "m",
            "description": "Pool" } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["recurring"]["description"], "Pool");
    for (field, value) in [
        ("interval", json!(2)),
        ("interval_type", json!("w")),
        ("location_id", json!(branch)),
    ] {
        let r = t.put(
            &format!("/v2/recurrings/{plan}"),
            json!({ "recurring": { field: value, "description": "Gym" } }),
        );
        assert_eq!(r.status, 422, "{field}: {}", r.text);
        assert!(r.body["errors"][field].is_array(), "{field}: {}", r.text);
    }
    assert_eq!(
        t.get(&format!("/v2/recurrings/{plan}")).expect(200).body["recurring"]["description"],
        "Pool"
    );
    // A masked number is never compared: the PUT would tell whether a
    // guess is the stored number.
    let r = t.put(
        &format!("/v2/accountvaults/{card}"),
        json!({ "accountvault": { "account_number": "4111111111111111" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["account_number"].is_array(), "{}", r.text);
}

/// Tags: the location's catalogue (CRUD), and tag titles on transactions
/// and recurrings, answered as `[{id, title}]`, filterable by whole title,
/// replaced by the edit action and carried by a recurring's runs.
fn tags_classify_transactions_and_recurrings(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let r = t.post(
        "/v2/tags",
        json!({ "tag": { "location_id": loc, "title": "Test Tag" } }),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let tag = r.body["tag"].clone();
    assert_eq!(tag["title"], "Test Tag");
    assert_eq!(tag["location_id"], loc.as_str());
    assert!(tag["created_ts"].is_i64() && tag["modified_ts"].is_i64());
    let id = tag["id"].as_str().unwrap();
    for (body, field) in [
        (json!({ "location_id": loc }), "title"),
        (json!({ "location_id": loc, "title": "  " }), "title"),
        (json!({ "location_id": loc, "title": "x".repeat(65) }), "title"),
        (json!({ "title": "No place" }), "location_id"),
    ] {
        let r = t.post("/v2/tags", json!({ "tag": body }));
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(r.body["errors"][field].is_array(), "{}", r.text);
    }
    let r = t.put(
        &format!("/v2/tags/{id}"),
        json!({ "tag": { "title": "Test Tag Alt" } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["tag"]["title"], "Test Tag Alt");
    let branch = t.location(&loc, "Branch");
    let r = t.put(
        &format!("/v2/tags/{id}"),
        json!({ "tag": { "location_id": branch } }),
    );
    assert_eq!(r.status, 422, "location_id is not updatable: {}", r.text);
    let list = t.get("/v2/tags?title=alt").expect(200).body;
    assert_eq!(list["meta"]["pagination"]["totalCount"], 1);
    assert_eq!(list["tags"][0]["id"], id);
    // A read-only user reads tags but cannot make them.
    let (reader, key) = t.user(&loc, Some("2"));
    let ro = t.as_user(&reader, &key);
    ro.get(&format!("/v2/tags/{id}")).expect(200);
    let r = ro.post(
        "/v2/tags",
        json!({ "tag": { "location_id": loc, "title": "Nope" } }),
    );
    assert_eq!(r.status, 403, "{}", r.text);
    // Another tenant does not see it.
    let other = app.bootstrap();
    other.get(&format!("/v2/tags/{id}")).expect(404);
    t.delete(&format!("/v2/tags/{id}")).expect(204);
    t.get(&format!("/v2/tags/{id}")).expect(404);

    // Titles on a sale, answered as the reference's samples show them.
    let tagged = sale(&t, json!({ "tags": ["Gala", "Raffle", "gala"] }))
        .expect(201)
        .body["transaction"]
        .clone();
    assert_eq!(
        tagged["tags"],
        json!([{ "id": "Gala", "title": "Gala" }, { "id": "Raffle", "title": "Raffle" }])
    );
    let plain = sale(&t, json!({})).expect(201).body["transaction"].clone();
    assert_eq!(plain["tags"], json!([]), "the key is always there");
    let r = sale(&t, json!({ "tags": [1, 2] }));
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["tags"].is_array(), "{}", r.text);
    let found = |q: &str| -> Vec<String> {
        t.get(&format!("/v2/transactions?tags={q}")).expect(200).body["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect()
    };
    let tagged_id = tagged["id"].as_str().unwrap().to_string();
    assert_eq!(found("raffle"), vec![tagged_id.clone()]);
    assert!(found("Raff").is_empty(), "a title matches whole");
    // The edit action replaces them.
    let r = t.put(
        &format!("/v2/transactions/{tagged_id}"),
        json!({ "transaction": { "action": "edit", "tags": "Auction" } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.body["transaction"]["tags"],
        json!([{ "id": "Auction", "title": "Auction" }])
    );
    assert!(found("raffle").is_empty());

    // A recurring's tags go on each of its runs.
    let contact = t.contact(json!({}))["id"].as_str().unwrap().to_string();
    let card = made(
        &t,
        "/v2/accountvaults",
        "accountvault",
        json!({ "location_id": loc, "payment_method": "cc", "contact_id": contact,
            "account_number": "4111111111111111", "exp_date": "1239" }),
    );
    let clock = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let tomorrow = chrono::DateTime::from_timestamp(clock + 86_400, 0)
        .unwrap()
        .format("%Y-%m-%d")
        .to_string();
    let plan = t
        .post(
            "/v2/recurrings",
            json!({ "recurring": { "location_id": loc, "account_vault_id": card, "transaction_amount": "3.00",
                "interval": 1, "interval_type": "m", "start_date": tomorrow, "tags": ["Membership"] } }),
        )
        .expect(201)
        .body["recurring"]
        .clone();
    assert_eq!(
        plan["tags"],
        json!([{ "id": "Membership", "title": "Membership" }])
    );
    let plan_id = plan["id"].as_str().unwrap();
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 2 * 86_400 } }),
    )
    .expect(200);
    let runs = t
        .get(&format!("/v2/transactions?recurring_id={plan_id}"))
        .expect(200)
        .body;
    assert_eq!(runs["meta"]["pagination"]["totalCount"], 1, "{runs}");
    assert_eq!(
        runs["transactions"][0]["tags"],
        json!([{ "id": "Membership", "title": "Membership" }])
    );
    let r = t.put(
        &format!("/v2/recurrings/{plan_id}"),
        json!({ "recurring": { "tags": [] } }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["recurring"]["tags"], json!([]));
}

/// `?expand=tags` answers the tags the record carries (it replaces the
/// `tags` key, so an expand that answered nothing hid them), on a
/// transaction and a recurring, read alone and in a list.
fn the_tags_expand_shows_the_records_tags(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let shown = json!([{ "id": "Gala", "title": "Gala" }, { "id": "Raffle", "title": "Raffle" }]);
    let tx = sale(&t, json!({ "tags": ["Gala", "Raffle"] })).expect(201).body["transaction"].clone();
    let tx_id = tx["id"].as_str().unwrap();
    let read = t
        .get(&format!("/v2/transactions/{tx_id}?expand=tags"))
        .expect(200)
        .body;
    assert_eq!(read["transaction"]["tags"], shown, "{read}");
    let listed = t
        .get(&format!("/v2/transactions?id={tx_id}&expand=tags"))
        .expect(200)
        .body;
    assert_eq!(listed["transactions"][0]["tags"], shown, "{listed}");
    let untagged = sale(&t, json!({})).expect(201).body["transaction"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let read = t
        .get(&format!("/v2/transactions/{untagged}?expand=tags"))
        .expect(200)
        .body;
    assert_eq!(read["transaction"]["tags"], json!([]));

    let contact = t.contact(json!({}))["id"].as_str().unwrap().to_string();
    let card = made(
        &t,
        "/v2/accountvaults",
        "accountvault",
        json!({ "location_id": loc, "payment_method": "cc", "contact_id": contact,
            "account_number": "4111111111111111", "exp_date": "1239" }),
    );
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(2))
        .format("%Y-%m-%d")
        .to_string();
    let plan = made(
        &t,
        "/v2/recurrings",
        "recurring",
        json!({ "location_id": loc, "account_vault_id": card, "transaction_amount": "3.00",
            "interval": 1, "interval_type": "m", "start_date": tomorrow, "tags": ["Gala", "Raffle"] }),
    );
    let read = t
        .get(&format!("/v2/recurrings/{plan}?expand=tags"))
        .expect(200)
        .body;
    assert_eq!(read["recurring"]["tags"], shown, "{read}");
    let listed = t
        .get(&format!("/v2/recurrings?id={plan}&expand=tags,contact"))
        .expect(200)
        .body;
    assert_eq!(listed["recurrings"][0]["tags"], shown, "{listed}");
    assert_eq!(listed["recurrings"][0]["contact"]["id"], contact.as_str());
}

/// Every key of the reference's transaction samples is in a transaction,
/// null where it does not apply; the service address and bill payment
/// flag are taken; a vault shows who made it.
fn every_key_of_the_samples(app: &TestApp) {
    let t = app.bootstrap();
    let r = sale(
        &t,
        json!({ "bill_payment": 1, "service_address": "1 Main St", "service_city": "Austin",
            "service_state": "TX", "service_zip": "78701", "service_country": "840" }),
    )
    .expect(201);
    let tx = &r.body["transaction"];
    for key in [
        "code",
        "tags",
        "bill_payment",
        "installment_number",
        "installment_total_count",
        "external_recurring_flag",
        "external_installment_number",
        "external_installment_total_count",
        "external_recurring_number",
        "is_surcharge",
        "subtotal_amount",
        "surcharge_amount",
        "service_address",
        "service_city",
        "service_state",
        "service_zip",
        "service_country",
        "recaptcha_score",
        "previous_transaction_id",
        "online_payment_cryptogram",
        "digital_payment_cryptogram",
        "ecommerce_indicator",
        "tlid",
        "recurring_flag",
        "auth_surcharge_rate",
        "auth_surcharge_fee",
    ] {
        assert!(tx.get(key).is_some(), "{key} missing: {tx}");
    }
    assert_eq!(tx["code"], "AUTH");
    assert_eq!(tx["bill_payment"], true);
    assert_eq!(tx["service_city"], "Austin");
    assert_eq!(tx["service_country"], "840");
    assert_eq!(tx["external_recurring_flag"], "no");
    assert!(tx["installment_number"].is_null() && tx["tlid"].is_null());
    let declined = sale(&t, json!({ "transaction_amount": "5.00" })).expect(201);
    assert!(
        declined.body["transaction"]["code"].is_null(),
        "no authorization, no code"
    );
    // ACH requests take no card service address.
    let r = t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "debit", "payment_method": "ach", "transaction_amount": "2.00",
            "product_transaction_id": t.cred("ach_product_transaction_id"), "ach_sec_code": "WEB",
            "routing": "072000326", "account_number": "123456789012", "account_type": "checking",
            "account_holder_name": "Pat Doe", "service_city": "Austin" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["service_city"].is_array(), "{}", r.text);
    let vault = t
        .post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239" } }),
        )
        .expect(201);
    assert_eq!(
        vault.body["accountvault"]["created_user_id"],
        t.user_id().as_str()
    );
}

fn ferrogate(app: &TestApp, args: &[&str]) -> std::process::Output {
    app.cli(args)
}

/// A card product transaction's surcharge (set by the operator, at most
/// 3%) is added to credit card sales and authorizations, shown as
/// subtotal and surcharge, and left off debit cards (the BIN lookup).
fn surcharges_on_credit_cards_only(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    for bad in ["3.01", "-1", "abc"] {
        let out = ferrogate(
            app,
            &["surcharge", "--product-transaction-id", &cc, "--percent", bad],
        );
        assert!(!out.status.success(), "{bad} accepted");
    }
    let ach = t.cred("ach_product_transaction_id");
    assert!(!ferrogate(
        app,
        &["surcharge", "--product-transaction-id", &ach, "--percent", "1"]
    )
    .status
    .success());
    let out = ferrogate(
        app,
        &["surcharge", "--product-transaction-id", &cc, "--percent", "3"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["surcharge"]["surcharge_rate"], "3.00");

    // A debit range (imported BIN data) that a test card falls in.
    let dir = std::env::temp_dir().join(format!("fg-surcharge-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("ranges.csv");
    std::fs::write(
        &csv,
        "iin_start,iin_end,number_length,number_luhn,scheme,brand,type,prepaid,country,bank_name,bank_logo,bank_url,bank_phone,bank_city\n\
         51051051,,,,mastercard,,debit,,US,DEBIT BANK,,,,\n",
    )
    .unwrap();
    let out = ferrogate(app, &["bins", "import", csv.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Credit: 3% of 10.00 added.
    let r = sale(&t, json!({ "transaction_amount": "10.00" })).expect(201);
    let tx = &r.body["transaction"];
    assert_eq!(tx["subtotal_amount"], "10.00");
    assert_eq!(tx["surcharge_amount"], "0.30");
    assert_eq!(tx["transaction_amount"], "10.30");
    assert_eq!(tx["is_surcharge"], true);
    let id = tx["id"].as_str().unwrap();
    let expanded = t
        .get(&format!("/v2/transactions/{id}?expand=surcharge"))
        .expect(200);
    assert_eq!(
        expanded.body["transaction"]["surcharge"]["surcharge_amount"],
        "0.30"
    );
    // Tax stays out of the subtotal.
    let r = sale(&t, json!({ "transaction_amount": "11.00", "tax": "1.00" })).expect(201);
    assert_eq!(r.body["transaction"]["subtotal_amount"], "10.00");
    assert_eq!(r.body["transaction"]["transaction_amount"], "11.30");
    // Sent in full, the parts must agree with the rate and the total.
    let r = sale(
        &t,
        json!({ "transaction_amount": "20.60", "subtotal_amount": "20.00", "surcharge_amount": "0.60" }),
    )
    .expect(201);
    assert_eq!(r.body["transaction"]["transaction_amount"], "20.60");
    let r = sale(
        &t,
        json!({ "transaction_amount": "20.50", "subtotal_amount": "20.00", "surcharge_amount": "0.50" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["surcharge_amount"].is_array(), "{}", r.text);
    let r = sale(
        &t,
        json!({ "transaction_amount": "21.00", "subtotal_amount": "20.00", "surcharge_amount": "0.60" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["transaction_amount"].is_array(), "{}", r.text);
    // Nothing to surcharge, no surcharge: a zero subtotal cannot carry
    // one, and no transaction's surcharge exceeds its amount.
    let r = sale(
        &t,
        json!({ "transaction_amount": "0.50", "subtotal_amount": "0.00", "surcharge_amount": "0.50" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["surcharge_amount"].is_array(), "{}", r.text);
    let r = sale(
        &t,
        json!({ "action": "force", "auth_code": "abc123", "transaction_amount": "5.00", "surcharge_amount": "9.00" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["surcharge_amount"].is_array(), "{}", r.text);
    // An authorization carries it too.
    let r = sale(&t, json!({ "action": "authonly", "transaction_amount": "10.00" })).expect(201);
    assert_eq!(r.body["transaction"]["transaction_amount"], "10.30");
    // Debit: nothing added, and a surcharge sent for it is refused.
    let debit = json!({ "account_number": "5105105105105100", "transaction_amount": "10.00" });
    let r = sale(&t, debit.clone()).expect(201);
    let tx = &r.body["transaction"];
    assert_eq!(tx["transaction_amount"], "10.00", "{tx}");
    assert_eq!(tx["surcharge_amount"], "0.00");
    assert!(tx["is_surcharge"].is_null());
    let mut with_surcharge = debit;
    with_surcharge["surcharge_amount"] = json!("0.30");
    let r = sale(&t, with_surcharge);
    assert_eq!(r.status, 422, "{}", r.text);
    // An action that changes a surcharged total sends its parts, which
    // must agree as on a sale: the record never shows a surcharge other
    // than the one charged.
    let put =
        |id: &str, body: Value| t.put(&format!("/v2/transactions/{id}"), json!({ "transaction": body }));
    let auth = sale(&t, json!({ "action": "authonly", "transaction_amount": "50.00" })).expect(201);
    let auth_id = auth.body["transaction"]["id"].as_str().unwrap().to_string();
    assert_eq!(auth.body["transaction"]["transaction_amount"], "51.50");
    let r = put(
        &auth_id,
        json!({ "action": "authcomplete", "transaction_amount": "40.00" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    for part in ["subtotal_amount", "surcharge_amount", "tax"] {
        assert!(r.body["errors"][part].is_array(), "{part}: {}", r.text);
    }
    let r = put(
        &auth_id,
        json!({ "action": "authcomplete", "transaction_amount": "41.20", "subtotal_amount": "30.00",
                "surcharge_amount": "1.20", "tax": "0.00" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["surcharge_amount"].is_array(), "{}", r.text);
    let r = put(
        &auth_id,
        json!({ "action": "authcomplete", "transaction_amount": "41.00", "subtotal_amount": "40.00",
                "surcharge_amount": "1.20", "tax": "0.00" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["transaction_amount"].is_array(), "{}", r.text);
    let unchanged = t.get(&format!("/v2/transactions/{auth_id}")).expect(200);
    assert_eq!(
        unchanged.body["transaction"]["status_id"], 102,
        "refusals changed nothing"
    );
    let done = put(
        &auth_id,
        json!({ "action": "authcomplete", "transaction_amount": "41.20", "subtotal_amount": "40.00",
                "surcharge_amount": "1.20", "tax": "0.00" }),
    )
    .expect(200);
    let tx = &done.body["transaction"];
    assert_eq!(
        (
            tx["status_id"].clone(),
            tx["transaction_amount"].clone(),
            tx["subtotal_amount"].clone(),
            tx["surcharge_amount"].clone()
        ),
        (json!(101), json!("41.20"), json!("40.00"), json!("1.20"))
    );
    // Completing for the authorized amount needs nothing more.
    let full = sale(&t, json!({ "action": "authonly", "transaction_amount": "10.00" })).expect(201);
    let full_id = full.body["transaction"]["id"].as_str().unwrap().to_string();
    let r = put(&full_id, json!({ "action": "authcomplete" })).expect(200);
    assert_eq!(r.body["transaction"]["surcharge_amount"], "0.30");
    // A partial reversal of a surcharged sale likewise.
    let big = sale(&t, json!({ "transaction_amount": "100.00" })).expect(201);
    let big_id = big.body["transaction"]["id"].as_str().unwrap().to_string();
    let r = put(
        &big_id,
        json!({ "action": "partialreversal", "transaction_amount": "51.50" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = put(
        &big_id,
        json!({ "action": "partialreversal", "transaction_amount": "51.50", "subtotal_amount": "50.00",
                "surcharge_amount": "1.50", "tax": "0" }),
    )
    .expect(200);
    let tx = &r.body["transaction"];
    assert_eq!(
        (
            tx["transaction_amount"].clone(),
            tx["subtotal_amount"].clone(),
            tx["surcharge_amount"].clone()
        ),
        (json!("51.50"), json!("50.00"), json!("1.50"))
    );
    // A transaction without a surcharge does not gain one.
    let debit_auth = sale(
        &t,
        json!({ "action": "authonly", "account_number": "5105105105105100", "transaction_amount": "10.00" }),
    )
    .expect(201);
    let debit_id = debit_auth.body["transaction"]["id"].as_str().unwrap().to_string();
    let r = put(
        &debit_id,
        json!({ "action": "authcomplete", "transaction_amount": "9.00", "surcharge_amount": "0.27" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["surcharge_amount"].is_array(), "{}", r.text);

    // A partial approval (the sandbox's 2.01) splits what was approved
    // at the rate again: the parts add up to what was charged.
    let r = sale(
        &t,
        json!({ "transaction_amount": "2.01", "subtotal_amount": "1.95", "surcharge_amount": "0.06",
                "allow_partial_authorization_override": 1 }),
    )
    .expect(201);
    let tx = &r.body["transaction"];
    assert_eq!(
        (
            tx["transaction_amount"].clone(),
            tx["subtotal_amount"].clone(),
            tx["surcharge_amount"].clone()
        ),
        (json!("1.00"), json!("0.97"), json!("0.03")),
        "{tx}"
    );
    // Off again: nothing added, and a surcharge claimed is refused.
    assert!(ferrogate(
        app,
        &["surcharge", "--product-transaction-id", &cc, "--percent", "0"]
    )
    .status
    .success());
    let r = sale(&t, json!({ "transaction_amount": "10.00" })).expect(201);
    assert_eq!(r.body["transaction"]["transaction_amount"], "10.00");
    let r = sale(
        &t,
        json!({ "transaction_amount": "10.00", "subtotal_amount": "3.00", "surcharge_amount": "7.00" }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["surcharge_amount"].is_array(), "{}", r.text);
    let _ = std::fs::remove_dir_all(dir);
}
