//! Quick invoices: the resource and its defaults, payments counted by
//! addTransaction and the pay page alike, the pay page's rules, the mail
//! (read back from a real SMTP sink) and reminders driven by the test
//! clock.

use crate::engine_tests;
use crate::support::smtp::SmtpSink;
use crate::support::{Client, Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

engine_tests!(
    create_with_defaults_and_sums,
    largest_payment_follows_overpayment,
    bad_invoices_are_refused,
    add_and_remove_transactions,
    product_transactions_fixed_once_paid,
    pay_page_pays_within_the_rules,
    reminders_follow_the_test_clock,
    invoice_mail_by_smtp,
    files_need_storage_and_are_checked,
    multipart_create_with_files,
    tags_on_quick_invoices,
    a_double_submit_is_one_payment,
    files_up_to_five_mebibytes,
    the_pay_page_cannot_be_framed,
    an_expired_invoice_stops_taking_payments,
    concurrent_full_payments_approve_once,
    a_surcharge_does_not_pay_the_invoice,
    the_surcharge_is_shown_before_paying,
    a_changed_resubmission_is_refused_in_plain_words,
    status_closes_and_reopens,
    the_mailbox_needs_quick_invoice_reads,
    a_pay_link_pays_only_while_its_user_may,
    a_sender_name_with_a_line_break_cannot_break_mail,
    mail_retries_follow_the_test_clock,
    linking_a_payment_is_an_update_of_it,
    a_pay_link_of_a_gone_user_is_not_mailed_again,
);

const PDF: &str = "%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n";

/// A multipart/form-data body: its content type and text.
fn multipart(fields: &[(&str, &str)], files: &[(&str, &str, &str)]) -> (String, String) {
    let boundary = "----ferrogate-test-boundary";
    let mut body = String::new();
    for (name, value) in fields {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    for (name, file_name, content) in files {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n{content}\r\n"
        ));
    }
    body.push_str(&format!("--{boundary}--\r\n"));
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn send_multipart(
    app: &TestApp,
    t: &Tenant,
    path: &str,
    fields: &[(&str, &str)],
    files: &[(&str, &str, &str)],
) -> Resp {
    let (content_type, body) = multipart(fields, files);
    let mut headers: Vec<(&str, String)> = vec![("content-type", content_type)];
    for key in ["developer_id", "user_id", "user_api_key"] {
        headers.push((
            match key {
                "developer_id" => "developer-id",
                "user_id" => "user-id",
                _ => "user-api-key",
            },
            t.cred(key),
        ));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Client {
        base: app.base.clone(),
    }
    .send("POST", path, &headers, Some(&body))
}

fn invoice(t: &Tenant, extra: Value) -> Resp {
    let mut body = json!({ "title": "Invoice with min fields", "due_date": "2030-01-15",
        "item_list": { "item1xx": 10, "item2yy": "11" }, "location_id": t.location_id() });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    t.post("/v2/quickinvoices", json!({ "quickinvoice": body }))
}

fn sale(t: &Tenant, amount: &str) -> String {
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": amount,
            "account_number": "4111111111111111", "exp_date": "1239" } }),
    )
    .expect(201)
    .body["transaction"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn create_with_defaults_and_sums(app: &TestApp) {
    let t = app.bootstrap();
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    assert_eq!(q["amount_due"], "21.00");
    assert_eq!(q["remaining_balance"], "21.00");
    assert_eq!(
        (q["status_id"].as_i64(), q["payment_status_id"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(q["single_payment_min_amount"], "0.00");
    // Without overpayment the largest payment is the invoice's amount.
    assert_eq!(q["single_payment_max_amount"], "21.00");
    assert_eq!(q["notification_days_before_due_date"], 3);
    assert_eq!(q["notification_days_after_due_date"], 7);
    assert_eq!(
        q["cc_product_transaction_id"],
        t.cred("cc_product_transaction_id").as_str()
    );
    assert_eq!(
        q["ach_product_transaction_id"],
        t.cred("ach_product_transaction_id").as_str()
    );
    // The spec's 0/1 flags are answered 1 or 0.
    for flag in ["allow_partial_pay", "allow_overpayment", "attach_files_to_email"] {
        assert_eq!(q[flag], json!(0), "{flag}");
    }
    assert_eq!(q["notification_on_due_date"], json!(1));
    assert_eq!(q["is_active"], json!(1));
    assert_eq!(q["active"], q["is_active"]);
    let pay = q["_links"]["pay"]["href"].as_str().unwrap();
    assert!(
        pay.contains("/quickinvoice/pay/") && !pay.contains(q["id"].as_str().unwrap()),
        "{pay}"
    );
    assert!(!q.as_object().unwrap().contains_key("pay_token"));
    let id = q["id"].as_str().unwrap();
    assert_eq!(
        t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"]["amount_due"],
        "21.00"
    );

    // A contact by api id gives its email; PUT changes only what it sends.
    let contact = t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": t.location_id(), "last_name": "Payer",
            "email": "pat@example.com", "contact_api_id": "cust-9" } }),
        )
        .expect(201)
        .body["contact"]["id"]
        .clone();
    let q2 = invoice(
        &t,
        json!({ "contact_api_id": "cust-9", "title": "Second", "item_list": { "a": "1.50" } }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    assert_eq!(
        (q2["contact_id"].clone(), q2["email"].as_str()),
        (contact, Some("pat@example.com"))
    );
    let id2 = q2["id"].as_str().unwrap();
    let put = t
        .put(
            &format!("/v2/quickinvoices/{id2}"),
            json!({ "quickinvoice": { "item_list": { "a": "2", "b": "3.25" } } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (put["amount_due"].as_str(), put["remaining_balance"].as_str()),
        (Some("5.25"), Some("5.25"))
    );
    assert_eq!(put["title"], "Second");

    // The list: newest first, filters.
    let list = t.get("/v2/quickinvoices").expect(200).body.clone();
    let created: Vec<i64> = list["quickinvoices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["created_ts"].as_i64().unwrap())
        .collect();
    assert!(
        created.windows(2).all(|w| w[0] >= w[1]) && created.len() == 2,
        "{created:?}"
    );
    assert_eq!(list["meta"]["sort"]["attributes"]["created_ts"], "desc");
    let filtered = t.get("/v2/quickinvoices?title=Second").expect(200).body["quickinvoices"].clone();
    assert_eq!(filtered.as_array().unwrap().len(), 1);
    t.send("DELETE", &format!("/v2/quickinvoices/{id2}"), None)
        .expect(204);
    t.send("DELETE", &format!("/v2/quickinvoices/{id2}"), None)
        .expect(404);
}

fn bad_invoices_are_refused(app: &TestApp) {
    let t = app.bootstrap();
    let r = t
        .post(
            "/v2/quickinvoices",
            json!({ "quickinvoice": { "location_id": t.location_id() } }),
        )
        .expect(422);
    for f in ["title", "due_date", "item_list"] {
        assert!(!r.errors(f).is_empty(), "{f}: {}", r.text);
    }
    for bad in [
        json!({}),
        json!({ "a": "ten" }),
        json!({ "a": -1 }),
        json!({ "free": "0.00" }),
        json!(["a", 1]),
    ] {
        invoice(&t, json!({ "item_list": bad })).expect(422);
    }
    let r = invoice(
        &t,
        json!({ "single_payment_min_amount": "10.00", "single_payment_max_amount": "5.00" }),
    )
    .expect(422);
    assert!(!r.errors("single_payment_min_amount").is_empty());
    invoice(&t, json!({ "contact_api_id": "nobody" })).expect(422);
    invoice(&t, json!({ "status_id": 2 })).expect(422);
    let r = invoice(&t, json!({ "send_email": 1 })).expect(422);
    assert!(!r.errors("email").is_empty(), "send_email needs an address");
    let other = app.bootstrap();
    invoice(
        &t,
        json!({ "cc_product_transaction_id": other.cred("cc_product_transaction_id") }),
    )
    .expect(422);
    invoice(
        &t,
        json!({ "cc_product_transaction_id": t.cred("ach_product_transaction_id") }),
    )
    .expect(422);
    assert_eq!(
        t.get("/v2/quickinvoices").expect(200).body["quickinvoices"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

fn add_and_remove_transactions(app: &TestApp) {
    let t = app.bootstrap();
    let id = invoice(&t, json!({ "allow_partial_pay": 1 })).expect(201).body["quickinvoice"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = |action: &str| format!("/v2/quickinvoices/{id}/{action}");
    let first = sale(&t, "10.00");
    let q = t
        .put(
            &path("addTransaction"),
            json!({ "quickinvoice": { "transaction_id": first } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (q["payment_status_id"].as_i64(), q["remaining_balance"].as_str()),
        (Some(3), Some("11.00"))
    );
    assert_eq!(q["transactions"][0]["id"], first.as_str());
    let tx = t.get(&format!("/v2/transactions/{first}")).expect(200).body["transaction"].clone();
    assert_eq!(tx["quick_invoice_id"], id.as_str());
    // Not twice, not a declined sale, not an unknown one.
    t.put(
        &path("addTransaction"),
        json!({ "quickinvoice": { "transaction_id": first } }),
    )
    .expect(422);
    let declined = sale(&t, "5.00");
    t.put(
        &path("addTransaction"),
        json!({ "quickinvoice": { "transaction_id": declined } }),
    )
    .expect(422);
    t.put(
        &path("addTransaction"),
        json!({ "quickinvoice": { "transaction_id": "0123456789abcdef0123456789abcdef" } }),
    )
    .expect(422);
    t.put(&path("addTransaction"), json!({ "quickinvoice": {} }))
        .expect(422);
    let second = sale(&t, "11.00");
    let paid = t
        .put(
            &path("addTransaction"),
            json!({ "quickinvoice": { "transaction_id": second } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (
            paid["status_id"].as_i64(),
            paid["payment_status_id"].as_i64(),
            paid["remaining_balance"].as_str()
        ),
        (Some(0), Some(2), Some("0.00"))
    );
    // A void takes the payment back off the invoice.
    t.put(
        &format!("/v2/transactions/{second}"),
        json!({ "transaction": { "action": "void" } }),
    )
    .expect(200);
    let after_void = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (
            after_void["status_id"].as_i64(),
            after_void["remaining_balance"].as_str()
        ),
        (Some(1), Some("11.00"))
    );
    let removed = t
        .put(
            &path("removeTransaction"),
            json!({ "quickinvoice": { "transaction_id": first } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (
            removed["payment_status_id"].as_i64(),
            removed["remaining_balance"].as_str()
        ),
        (Some(1), Some("21.00"))
    );
    t.put(
        &path("removeTransaction"),
        json!({ "quickinvoice": { "transaction_id": first } }),
    )
    .expect(422);
    let expanded = t
        .get(&format!("/v2/quickinvoices/{id}?expand=transactions"))
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        expanded["transactions"].as_array().unwrap().len(),
        1,
        "the voided payment still names it"
    );
    // Another tenant sees none of it.
    let other = app.bootstrap();
    other
        .put(
            &path("addTransaction"),
            json!({ "quickinvoice": { "transaction_id": first } }),
        )
        .expect(404);
    other.send("POST", &path("resend"), None).expect(404);
}

fn product_transactions_fixed_once_paid(app: &TestApp) {
    let t = app.bootstrap();
    let id = invoice(&t, json!({ "allow_partial_pay": 1 })).expect(201).body["quickinvoice"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("/v2/quickinvoices/{id}"),
        json!({ "quickinvoice": { "ach_product_transaction_id": null } }),
    )
    .expect(200);
    let tx = sale(&t, "1.00");
    t.put(
        &format!("/v2/quickinvoices/{id}/addTransaction"),
        json!({ "quickinvoice": { "transaction_id": tx } }),
    )
    .expect(200);
    let r = t
        .put(
            &format!("/v2/quickinvoices/{id}"),
            json!({ "quickinvoice": { "ach_product_transaction_id": t.cred("ach_product_transaction_id") } }),
        )
        .expect(422);
    assert!(!r.errors("cc_product_transaction_id").is_empty(), "{}", r.text);
    t.put(
        &format!("/v2/quickinvoices/{id}"),
        json!({ "quickinvoice": { "note": "Thanks!" } }),
    )
    .expect(200);
}

/// The pay link of an invoice, as a path.
fn pay_path(q: &Value) -> String {
    let href = q["_links"]["pay"]["href"].as_str().unwrap();
    href[href.find("/quickinvoice/pay/").unwrap()..].to_string()
}

fn page(app: &TestApp, path: &str, form: Option<&[(&str, &str)]>) -> Resp {
    let client = Client {
        base: app.base.clone(),
    };
    match form {
        None => client.send("GET", path, &[("accept", "text/html")], None),
        Some(fields) => {
            let body: String = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(fields.iter())
                .finish();
            client.send(
                "POST",
                path,
                &[
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("accept", "text/html"),
                ],
                Some(&body),
            )
        }
    }
}

const CARD: [(&str, &str); 2] = [("account_number", "4111111111111111"), ("exp_date", "1239")];

fn with_amount(amount: &str) -> Vec<(&str, &str)> {
    let mut v = vec![("transaction_amount", amount)];
    v.extend(CARD);
    v
}

fn pay_page_pays_within_the_rules(app: &TestApp) {
    let t = app.bootstrap();
    // In full: the amount is the balance and cannot be changed.
    let q = invoice(
        &t,
        json!({ "item_header": "Bakery order", "invoice_number": "INV-7" }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    let link = pay_path(&q);
    let shown = page(app, &link, None).expect(200);
    assert!(
        shown.text.contains("item1xx") && shown.text.contains("Bakery order") && shown.text.contains("INV-7")
    );
    assert!(shown.text.contains("readonly"), "the amount is the balance");
    // Only the balance the page showed is charged: another amount posted
    // (a tampered form, or a page opened before the invoice changed) is
    // refused with the balance as it is now, and nothing is charged.
    let tampered = page(app, &link, Some(&with_amount("1.00"))).expect(422);
    assert!(
        tampered.text.contains("The balance of this invoice is now 21.00"),
        "{}",
        tampered.text
    );
    let qid = q["id"].as_str().unwrap();
    let changed = t
        .put(
            &format!("/v2/quickinvoices/{qid}"),
            json!({ "quickinvoice": { "item_list": { "item1xx": 10, "item2yy": "12" } } }),
        )
        .expect(200);
    assert_eq!(changed.body["quickinvoice"]["remaining_balance"], "22.00");
    let stale = page(app, &link, Some(&with_amount("21.00"))).expect(422);
    assert!(stale.text.contains("is now 22.00"), "{}", stale.text);
    t.put(
        &format!("/v2/quickinvoices/{qid}"),
        json!({ "quickinvoice": { "item_list": { "item1xx": 10, "item2yy": "11" } } }),
    )
    .expect(200);
    let untouched = t.get(&format!("/v2/quickinvoices/{qid}")).expect(200);
    assert_eq!(
        untouched.body["quickinvoice"]["payment_status_id"], 1,
        "nothing was charged"
    );
    let paid = page(app, &link, Some(&with_amount("21.00"))).expect(200);
    assert!(paid.text.contains("Payment approved"), "{}", paid.text);
    let q_after = t
        .get(&format!(
            "/v2/quickinvoices/{}?expand=transactions",
            q["id"].as_str().unwrap()
        ))
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (
            q_after["status_id"].as_i64(),
            q_after["payment_status_id"].as_i64()
        ),
        (Some(0), Some(2))
    );
    let tx = &q_after["transactions"][0];
    assert_eq!(
        (tx["trx_source_id"].as_i64(), tx["transaction_amount"].as_str()),
        (Some(8), Some("21.00"))
    );
    assert!(page(app, &link, None).expect(200).text.contains("paid in full"));
    let again = page(app, &link, Some(&with_amount("21.00"))).expect(422);
    assert!(again.text.contains("paid in full"), "{}", again.text);

    // In parts, within the minimum and the balance.
    let q = invoice(
        &t,
        json!({ "allow_partial_pay": 1, "single_payment_min_amount": "2.00" }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    let link = pay_path(&q);
    assert!(page(app, &link, Some(&with_amount("1.00")))
        .expect(422)
        .text
        .contains("at least 2.00"));
    assert!(page(app, &link, Some(&with_amount("30.00")))
        .expect(422)
        .text
        .contains("remaining balance"));
    page(app, &link, Some(&with_amount("4.00"))).expect(200);
    let part = t
        .get(&format!("/v2/quickinvoices/{}", q["id"].as_str().unwrap()))
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (
            part["payment_status_id"].as_i64(),
            part["remaining_balance"].as_str()
        ),
        (Some(3), Some("17.00"))
    );
    // A decline changes nothing.
    let declined = page(app, &link, Some(&with_amount("5.00"))).expect(200);
    assert!(declined.text.contains("Payment declined"));
    let still = t
        .get(&format!("/v2/quickinvoices/{}", q["id"].as_str().unwrap()))
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(still["remaining_balance"], "17.00");
    // By bank account.
    let ach = page(app, &format!("{link}?method=ach"), None).expect(200);
    assert!(ach.text.contains("fg-routing"));
    let mut bank = vec![
        ("transaction_amount", "3.00"),
        ("account_holder_name", "Pat Payer"),
        ("routing", "072000326"),
        ("account_number", "123456789"),
        ("account_type", "checking"),
    ];
    page(app, &format!("{link}?method=ach"), Some(&bank)).expect(200);
    bank[0] = ("transaction_amount", "abc");
    page(app, &format!("{link}?method=ach"), Some(&bank)).expect(422);
    page(app, &format!("{link}?method=paypal"), None).expect(400);
    // Over the balance only where the invoice allows it, and never over
    // its maximum.
    let q3 = invoice(
        &t,
        json!({ "allow_overpayment": 1, "single_payment_max_amount": "25.00" }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    let link3 = pay_path(&q3);
    assert!(page(app, &link3, Some(&with_amount("30.00")))
        .expect(422)
        .text
        .contains("at most 25.00"));
    page(app, &link3, Some(&with_amount("23.00"))).expect(200);
    let over = t
        .get(&format!("/v2/quickinvoices/{}", q3["id"].as_str().unwrap()))
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(
        (
            over["payment_status_id"].as_i64(),
            over["remaining_balance"].as_str()
        ),
        (Some(2), Some("0.00")),
        "an overpaid invoice is paid"
    );
    // An expired invoice's link no longer works.
    let past = invoice(
        &t,
        json!({ "due_date": "2020-01-01", "expire_date": "2020-02-01" }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    assert_eq!(past["status_id"], 0, "closed");
    assert!(page(app, &pay_path(&past), None)
        .expect(404)
        .text
        .contains("expired"));
    // Inactive, expired and unknown links.
    t.put(
        &format!("/v2/quickinvoices/{}", q["id"].as_str().unwrap()),
        json!({ "quickinvoice": { "is_active": 0 } }),
    )
    .expect(200);
    assert!(page(app, &link, Some(&with_amount("3.00")))
        .expect(422)
        .text
        .contains("no longer be paid"));
    page(
        app,
        "/quickinvoice/pay/0000000000000000000000000000000000000000",
        None,
    )
    .expect(404);
    page(app, "/quickinvoice/pay/short", None).expect(404);
    assert!(!app.log().contains("4111111111111111"));
    let token = link.rsplit('/').next().unwrap();
    assert!(!app.log().contains(token), "pay tokens stay out of the log");
}

fn mails(t: &Tenant) -> Vec<Value> {
    t.get("/dev/mail?format=json").expect(200).body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn reminders_follow_the_test_clock(app: &TestApp) {
    let t = app.bootstrap();
    let mut today = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    // Reminders go out at 09:00 of the location's day (UTC here): start
    // the test at noon so that whole days of advance land after them
    // whatever the hour the test runs at.
    let to_noon = (12 * 3600 - today.rem_euclid(86_400)).rem_euclid(86_400);
    if to_noon > 0 {
        t.post(
            "/v2/developer/testclock/advance",
            json!({ "testclock": { "seconds": to_noon } }),
        )
        .expect(200);
        today += to_noon;
    }
    let due = chrono::DateTime::from_timestamp(today + 5 * 86_400, 0)
        .unwrap()
        .date_naive()
        .to_string();
    let q = invoice(
        &t,
        json!({ "due_date": due, "email": "pat@example.com", "send_email": true,
        "notification_days_before_due_date": 3, "notification_days_after_due_date": 2 }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    let subjects = |t: &Tenant| -> Vec<String> {
        mails(t)
            .iter()
            .filter_map(|m| m["subject"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(subjects(&t).len(), 1, "the invoice itself");
    assert!(mails(&t)[0]["text"]
        .as_str()
        .unwrap()
        .contains("/quickinvoice/pay/"));
    let advance = |days: i64| {
        t.post(
            "/v2/developer/testclock/advance",
            json!({ "testclock": { "seconds": days * 86_400 } }),
        )
        .expect(200)
        .body["testclock"]["ran"]["notices"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(advance(1), 0);
    assert_eq!(advance(2), 1, "three days before the due date");
    assert!(
        subjects(&t)[0].contains(&format!("is due on {due}")),
        "{:?}",
        subjects(&t)
    );
    assert_eq!(advance(2), 1, "on the due date");
    assert!(subjects(&t)[0].contains("due today"));
    assert_eq!(advance(1), 0);
    // An unpaid twin gets its reminder after the due date.
    let unpaid = invoice(
        &t,
        json!({ "due_date": due, "email": "sam@example.com", "notification_days_before_due_date": 0,
        "notification_on_due_date": 0, "notification_days_after_due_date": 2 }),
    )
    .expect(201);
    assert_eq!(unpaid.body["quickinvoice"]["status_id"], 1);
    // Paid before the reminder after the due date: no reminder.
    let tx = sale(&t, "21.00");
    t.put(
        &format!("/v2/quickinvoices/{}/addTransaction", q["id"].as_str().unwrap()),
        json!({ "quickinvoice": { "transaction_id": tx } }),
    )
    .expect(200);
    assert_eq!(advance(5), 1, "only the unpaid invoice is reminded");
    let overdue: Vec<Value> = mails(&t)
        .into_iter()
        .filter(|m| m["subject"].as_str().unwrap().contains("past due"))
        .collect();
    assert_eq!(overdue.len(), 1);
    assert_eq!(overdue[0]["recipient"], "sam@example.com");
}

fn invoice_mail_by_smtp(app: &mut TestApp) {
    let sink = SmtpSink::start();
    app.extra_env.push(("FERROGATE_SMTP_URL".into(), sink.url()));
    app.kill();
    app.spawn();
    let t = app.bootstrap();
    let q = invoice(
        &t,
        json!({ "email": "pat@example.com", "send_email": 1, "note": "Thank you for your order" }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    let mail = sink.wait_for(1, Duration::from_secs(20)).remove(0);
    assert!(
        !mail.decoded().contains("Content-Disposition: attachment"),
        "no files, nothing attached"
    );
    assert_eq!(mail.to, ["pat@example.com"]);
    let body = mail.decoded();
    assert!(body.contains("item1xx") && body.contains("21.00") && body.contains("Thank you for your order"));
    let link = pay_path(&q);
    assert!(body.contains(&link), "the mail holds the pay link");
    // Paying from the mailed link: a thank-you follows.
    page(app, &link, Some(&with_amount("21.00"))).expect(200);
    let mails = sink.wait_for(2, Duration::from_secs(20));
    let thanks = mails
        .iter()
        .find(|m| m.header("Subject").is_some_and(|s| s.contains("thank you")))
        .expect("a thank-you");
    assert!(thanks.decoded().contains("21.00"));
    // With attach_files_to_email, the files go along.
    t.post(
        "/v2/productfiles",
        json!({ "productfile": { "location_id": t.location_id(), "title": "Invoices" } }),
    )
    .expect(201);
    let id = q["id"].as_str().unwrap();
    send_multipart(
        app,
        &t,
        &format!("/v2/quickinvoices/{id}/files"),
        &[],
        &[("file[file]", "terms.pdf", PDF)],
    )
    .expect(200);
    // Without attach_files_to_email (the default), a resend carries no
    // file, though the invoice has one.
    t.send("POST", &format!("/v2/quickinvoices/{id}/resend"), None)
        .expect(204);
    let plain = sink.wait_for(3, Duration::from_secs(20)).remove(2).decoded();
    assert!(plain.contains("item1xx"), "the invoice again");
    assert!(
        !plain.contains("Content-Disposition: attachment") && !plain.contains("terms.pdf"),
        "no attachment without attach_files_to_email"
    );
    t.put(
        &format!("/v2/quickinvoices/{id}"),
        json!({ "quickinvoice": { "attach_files_to_email": 1 } }),
    )
    .expect(200);
    // Resend: the invoice again.
    t.send(
        "POST",
        &format!("/v2/quickinvoices/{}/resend", q["id"].as_str().unwrap()),
        None,
    )
    .expect(204);
    let resent = sink.wait_for(4, Duration::from_secs(20)).remove(3).decoded();
    assert!(
        resent.contains("application/pdf") && resent.contains("terms.pdf"),
        "the file attached"
    );
    assert!(!sink
        .mails()
        .iter()
        .any(|m| m.decoded().contains("4111111111111111")));
}

/// A location name is the sender name of its mail: a line break in it is
/// refused, and one stored before that check (written here straight to
/// the database) is sent as one line, while the mail round goes on.
fn a_sender_name_with_a_line_break_cannot_break_mail(app: &mut TestApp) {
    let sink = SmtpSink::start();
    app.extra_env.push(("FERROGATE_SMTP_URL".into(), sink.url()));
    app.kill();
    app.spawn();
    let t = app.bootstrap();
    let evil = "Evil\r\nBcc: evil@evil.com";
    let path = format!("/v2/locations/{}", t.location_id());
    let r = t.put(&path, json!({ "location": { "name": evil } })).expect(422);
    assert!(r.errors("name")[0].contains("one line"), "{}", r.text);
    for name in ["Tab\tbed", "Bell\u{7}"] {
        t.put(&path, json!({ "location": { "name": name } })).expect(422);
    }
    crate::support::db::db(app).exec(
        "UPDATE locations SET name = ? WHERE id = ?",
        &[evil, &t.location_id()],
    );
    for email in ["pat@example.com", "sam@example.com"] {
        invoice(&t, json!({ "email": email, "send_email": 1 })).expect(201);
    }
    let got = sink.wait_for(2, Duration::from_secs(20));
    for mail in &got {
        let from = mail.header("From").expect("a From header");
        // The name as one encoded word: `=?utf-8?b?...?= <address>`.
        let name = from
            .strip_prefix("=?utf-8?b?")
            .and_then(|rest| rest.split_once("?="))
            .map(|(encoded, _)| {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
                String::from_utf8(bytes).unwrap()
            })
            .unwrap_or_else(|| from.clone());
        assert_eq!(name, "Evil Bcc: evil@evil.com", "{from}");
        assert!(
            mail.header("Bcc").is_none(),
            "no header smuggled in: {}",
            mail.data
        );
        assert!(!mail.to.iter().any(|to| to.contains("evil")), "{:?}", mail.to);
    }
    let sent = wait_for_outbox(&t, |m| m.iter().all(|m| m["status"] == "sent"));
    assert_eq!(sent.len(), 2);
    assert_eq!(sink.mails().len(), 2, "each sent once");
}

/// A move of the test clock makes every mail retry that falls due on its
/// way (30 s, then doubling: seven retries in 3810 s), and a message's
/// `sent_ts` is on the location's clock, as its `created_ts` is.
fn mail_retries_follow_the_test_clock(app: &mut TestApp) {
    let sink = SmtpSink::start();
    app.extra_env.push(("FERROGATE_SMTP_URL".into(), sink.url()));
    app.kill();
    app.spawn();
    let t = app.bootstrap();
    sink.answer_rcpt(Some("451 4.3.0 try again later"));
    let q = invoice(&t, json!({ "email": "pat@example.com", "send_email": 1 }))
        .expect(201)
        .body["quickinvoice"]
        .clone();
    wait_for_outbox(&t, |m| m.len() == 1 && m[0]["last_error"].is_string());
    let moved = t
        .post(
            "/v2/developer/testclock/advance",
            json!({ "testclock": { "seconds": 3900 } }),
        )
        .expect(200)
        .body["testclock"]
        .clone();
    assert_eq!(moved["ran"]["mail_attempts"], 7, "{moved}");
    let failed = mails(&t).remove(0);
    assert_eq!(failed["status"], "failed");
    assert!(failed["last_error"].as_str().unwrap().contains("451"));
    // Sent now, it shows the location's time.
    sink.answer_rcpt(None);
    let id = q["id"].as_str().unwrap();
    t.send("POST", &format!("/v2/quickinvoices/{id}/resend"), None)
        .expect(204);
    let sent = wait_for_outbox(&t, |m| m.iter().any(|m| m["status"] == "sent"));
    let sent = sent.iter().find(|m| m["status"] == "sent").unwrap();
    let now = moved["now"].as_i64().unwrap();
    let (created, sent_ts) = (
        sent["created_ts"].as_i64().unwrap(),
        sent["sent_ts"].as_i64().unwrap(),
    );
    assert!(
        created >= now && sent_ts >= created && sent_ts < created + 60,
        "{sent}"
    );
}

/// addTransaction, removeTransaction and deleting the invoice change a
/// payment's `quick_invoice_id` as any update does: `modified_ts`, a
/// change log entry and an UPDATE postback each.
fn linking_a_payment_is_an_update_of_it(app: &TestApp) {
    let t = app.bootstrap();
    let rx = crate::support::receiver::Receiver::start("/tx");
    let config = crate::support::receiver::config(
        &t,
        json!({ "resource": "transaction", "url": rx.url, "expands": "quick_invoice",
            "product_transaction_id": t.cred("cc_product_transaction_id") }),
    );
    let id = invoice(&t, json!({ "allow_partial_pay": 1 })).expect(201).body["quickinvoice"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let tx = sale(&t, "10.00");
    let read = |tx: &str| {
        t.get(&format!("/v2/transactions/{tx}?expand=changelogs"))
            .expect(200)
            .body["transaction"]
            .clone()
    };
    let created = read(&tx);
    let link = json!({ "quickinvoice": { "transaction_id": tx } });
    t.put(&format!("/v2/quickinvoices/{id}/addTransaction"), link.clone())
        .expect(200);
    // The payment's quick_invoice expand: the invoice as its own GET shows
    // it, and null for a reader who may not read invoices (a Clerk).
    let expanded = t
        .get(&format!("/v2/transactions/{tx}?expand=quick_invoice"))
        .expect(200)
        .body["transaction"]["quick_invoice"]
        .clone();
    let own = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(expanded, own);
    assert!(own["_links"]["pay"]["href"].is_string());
    let (clerk_id, clerk_key) = t.user(&t.location_id(), Some("3"));
    let clerk = t.as_user(&clerk_id, &clerk_key);
    let hidden = clerk
        .get(&format!("/v2/transactions/{tx}?expand=quick_invoice"))
        .expect(200);
    assert!(
        hidden.body["transaction"]["quick_invoice"].is_null(),
        "{}",
        hidden.text
    );
    t.put(&format!("/v2/quickinvoices/{id}/removeTransaction"), link.clone())
        .expect(200);
    t.put(&format!("/v2/quickinvoices/{id}/addTransaction"), link)
        .expect(200);
    t.delete(&format!("/v2/quickinvoices/{id}")).expect(204);
    let after = read(&tx);
    assert!(after["quick_invoice_id"].is_null());
    assert!(after["modified_ts"].as_i64() >= created["modified_ts"].as_i64());
    let changes: Vec<(String, Value)> = after["changelogs"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter(|c| c["action"] == "UPDATE")
        .flat_map(|c| c["changelog_details"].as_array().unwrap().clone())
        .filter(|d| d["field"] == "quick_invoice_id")
        .map(|d| (d["field"].as_str().unwrap().to_string(), d["old_value"].clone()))
        .collect();
    let old: Vec<Value> = changes.into_iter().map(|(_, old)| old).collect();
    assert_eq!(old, [Value::Null, json!(id), Value::Null, json!(id)], "{after}");
    let log = t
        .get(&format!(
            "/v2/postbackconfigs/{}/deliveries?record_id={tx}&sort=id&page_size=20",
            config["id"].as_str().unwrap()
        ))
        .expect(200)
        .body["postbackdeliveries"]
        .clone();
    let types: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["CREATE", "UPDATE", "UPDATE", "UPDATE", "UPDATE"]);
    // What the receiver got says which invoice the payment pays.
    let got = rx.wait_for(5, Duration::from_secs(20));
    let linked: Vec<Value> = got.iter().map(|r| r.data()["quick_invoice_id"].clone()).collect();
    assert_eq!(
        linked,
        [Value::Null, json!(id), Value::Null, json!(id), Value::Null]
    );
    let embedded: Vec<Value> = got
        .iter()
        .map(|r| r.data()["quick_invoice"]["id"].clone())
        .collect();
    assert_eq!(
        embedded,
        [Value::Null, json!(id), Value::Null, json!(id), Value::Null]
    );
}

/// The tenant's outbox once `done` holds for it.
fn wait_for_outbox(t: &Tenant, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    crate::support::wait::wait_until("the outbox", Duration::from_secs(20), || {
        let m = mails(t);
        done(&m).then_some(m)
    })
}

fn files_need_storage_and_are_checked(app: &TestApp) {
    let t = app.bootstrap();
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    let id = q["id"].as_str().unwrap();
    let path = format!("/v2/quickinvoices/{id}/files");
    let refused = send_multipart(app, &t, &path, &[], &[("file[file]", "terms.pdf", PDF)]).expect(422);
    assert!(refused.text.contains("productfiles"), "{}", refused.text);
    t.post(
        "/v2/productfiles",
        json!({ "productfile": { "location_id": t.location_id(), "title": "Invoices" } }),
    )
    .expect(201);
    let added = send_multipart(app, &t, &path, &[], &[("file[file]", "../terms.pdf", PDF)])
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(added["files"][0]["name"], "terms.pdf");
    assert_eq!(added["files"][0]["content_type"], "application/pdf");
    // The type comes from the content: an executable named .pdf is refused.
    let r = send_multipart(
        app,
        &t,
        &path,
        &[],
        &[("file[file]", "virus.pdf", "\u{7f}ELF\u{2}\u{1}\u{1}")],
    )
    .expect(422);
    assert!(r.text.contains("judged by its content"), "{}", r.text);
    // A JSON body is not a file.
    t.post(&path, json!({ "file": "x" })).expect(400);
    for n in 2..=4 {
        send_multipart(
            app,
            &t,
            &path,
            &[],
            &[("file[file]", &format!("note{n}.txt"), "Bread 4.00\n")],
        )
        .expect(200);
    }
    let fifth = send_multipart(app, &t, &path, &[], &[("file[file]", "five.txt", "x\n")]).expect(422);
    assert!(fifth.text.contains("at most 4"), "{}", fifth.text);
    // The pay page lists them; the customer downloads them.
    let page_text = page(app, &pay_path(&q), None).expect(200).text;
    let at = page_text.find("/files/").expect("a file link");
    let start = page_text[..at].rfind('"').unwrap() + 1;
    let end = at + page_text[at..].find('"').unwrap();
    let download = Client {
        base: app.base.clone(),
    }
    .send("GET", &page_text[start..end], &[], None)
    .expect(200);
    assert_eq!(download.header("content-type"), Some("application/pdf"));
    assert!(download
        .header("content-disposition")
        .unwrap()
        .contains("terms.pdf"));
    assert_eq!(download.text, PDF);
    // Removed once.
    let file_id = added["files"][0]["id"].as_str().unwrap();
    t.send("DELETE", &format!("{path}/{file_id}"), None).expect(204);
    t.send("DELETE", &format!("{path}/{file_id}"), None).expect(404);
    Client {
        base: app.base.clone(),
    }
    .send(
        "GET",
        &page_text[start..end],
        &[("accept", "application/json")],
        None,
    )
    .expect(404);
    let other = app.bootstrap();
    send_multipart(app, &other, &path, &[], &[("file[file]", "x.txt", "x\n")]).expect(404);
}

fn multipart_create_with_files(app: &TestApp) {
    let t = app.bootstrap();
    t.post(
        "/v2/productfiles",
        json!({ "productfile": { "location_id": t.location_id(), "title": "Invoices" } }),
    )
    .expect(201);
    let loc = t.location_id();
    let fields = [
        ("quickinvoice[title]", " quickinvoice_123"),
        ("quickinvoice[due_date]", "2030-02-01"),
        ("quickinvoice[location_id]", loc.as_str()),
        ("quickinvoice[attach_files_to_email]", "1"),
        ("quickinvoice[item_list][item1]", "1"),
        ("quickinvoice[item_list][item2]", "1.50"),
        ("quickinvoice[email]", "test@example.com"),
        ("quickinvoice[send_email]", "1"),
        ("quickinvoice[tags][0]", "Test tag1"),
        ("quickinvoice[tags][1]", "Test tag2"),
    ];
    let files = [
        ("quickinvoice[files][0]", "a.pdf", PDF),
        ("quickinvoice[files][1]", "b.txt", "hello\n"),
    ];
    let q = send_multipart(app, &t, "/v2/quickinvoices", &fields, &files)
        .expect(201)
        .body["quickinvoice"]
        .clone();
    assert_eq!(q["amount_due"], "2.50");
    assert_eq!(q["files"].as_array().unwrap().len(), 2);
    assert_eq!(q["tags"].as_array().map(Vec::len), Some(2), "{}", q["tags"]);
    let mail = &mails(&t)[0];
    assert!(
        mail["text"].as_str().unwrap().contains("Attached: a.pdf, b.txt"),
        "{mail}"
    );
    // A refused file creates nothing.
    let bad = [("quickinvoice[files][0]", "x.exe", "\u{7f}ELF\u{2}")];
    send_multipart(app, &t, "/v2/quickinvoices", &fields, &bad).expect(422);
    send_multipart(app, &t, "/v2/quickinvoices", &[("title", "x")], &[]).expect(422);
    assert_eq!(
        t.get("/v2/quickinvoices").expect(200).body["quickinvoices"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Tags on quick invoices (reference-facts 5): taken by a JSON and a
/// multipart create, answered as on transactions, filterable by whole
/// title, and shown by `?expand=tags` (with `files`, the reference's other
/// expand of the invoice's own parts).
fn tags_on_quick_invoices(app: &TestApp) {
    let t = app.bootstrap();
    let shown = json!([{ "id": "Rent", "title": "Rent" }, { "id": "Deposit", "title": "Deposit" }]);
    let q = invoice(&t, json!({ "tags": ["Rent", "Deposit", "rent"] }))
        .expect(201)
        .body["quickinvoice"]
        .clone();
    assert_eq!(q["tags"], shown);
    let json_id = q["id"].as_str().unwrap().to_string();
    let plain = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    assert_eq!(plain["tags"], json!([]), "the key is always there");
    let plain_id = plain["id"].as_str().unwrap().to_string();
    let r = invoice(&t, json!({ "tags": [1] }));
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["tags"].is_array(), "{}", r.text);

    t.post(
        "/v2/productfiles",
        json!({ "productfile": { "location_id": t.location_id(), "title": "Invoices" } }),
    )
    .expect(201);
    let loc = t.location_id();
    let fields = [
        ("quickinvoice[title]", "Multipart"),
        ("quickinvoice[due_date]", "2030-02-01"),
        ("quickinvoice[location_id]", loc.as_str()),
        ("quickinvoice[item_list][item1]", "3"),
        ("quickinvoice[tags][0]", "Test tag1"),
        ("quickinvoice[tags][1]", "Test tag2"),
    ];
    let files = [("quickinvoice[files][0]", "a.pdf", PDF)];
    let m = send_multipart(app, &t, "/v2/quickinvoices", &fields, &files)
        .expect(201)
        .body["quickinvoice"]
        .clone();
    let multipart_id = m["id"].as_str().unwrap().to_string();
    let multipart_tags =
        json!([{ "id": "Test tag1", "title": "Test tag1" }, { "id": "Test tag2", "title": "Test tag2" }]);
    assert_eq!(m["tags"], multipart_tags);

    // The expand shows what each carries, alone and in a list.
    for (id, tags) in [
        (&json_id, &shown),
        (&multipart_id, &multipart_tags),
        (&plain_id, &json!([])),
    ] {
        let read = t
            .get(&format!("/v2/quickinvoices/{id}?expand=tags"))
            .expect(200)
            .body;
        assert_eq!(&read["quickinvoice"]["tags"], tags, "{read}");
    }
    let listed = t
        .get(&format!("/v2/quickinvoices?id={multipart_id}&expand=tags,files"))
        .expect(200)
        .body;
    assert_eq!(listed["quickinvoices"][0]["tags"], multipart_tags, "{listed}");
    assert_eq!(
        listed["quickinvoices"][0]["files"][0]["name"], "a.pdf",
        "{listed}"
    );
    let read = t
        .get(&format!("/v2/quickinvoices/{json_id}?expand=files"))
        .expect(200)
        .body;
    assert_eq!(read["quickinvoice"]["files"], json!([]));

    // The filter matches a whole title, in any case.
    let found = |q: &str| -> Vec<String> {
        let mut ids: Vec<String> = t.get(&format!("/v2/quickinvoices?tags={q}")).expect(200).body
            ["quickinvoices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(found("rent"), vec![json_id.clone()]);
    assert_eq!(found("test%20tag2"), vec![multipart_id.clone()]);
    let mut both = vec![json_id.clone(), multipart_id.clone()];
    both.sort();
    assert_eq!(found("Deposit,Test%20tag1"), both);
    assert!(found("Ren").is_empty(), "a title matches whole");
}

/// The hidden nonce of a pay page.
fn nonce_of(page: &Resp) -> String {
    let at = page.text.find("name=\"nonce\" value=\"").expect("a nonce") + "name=\"nonce\" value=\"".len();
    let end = page.text[at..].find('"').unwrap();
    page.text[at..at + end].to_string()
}

fn invoice_transactions(t: &Tenant, id: &str) -> Vec<Value> {
    t.get(&format!("/v2/transactions?quick_invoice_id={id}&page_size=100"))
        .expect(200)
        .body["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The same form sent twice (a double click, a reload), one after the
/// other and at once: one payment, the same answer.
fn a_double_submit_is_one_payment(app: &TestApp) {
    let t = app.bootstrap();
    let q = invoice(&t, json!({ "allow_partial_pay": 1 })).expect(201).body["quickinvoice"].clone();
    let id = q["id"].as_str().unwrap().to_string();
    let link = pay_path(&q);
    let nonce = nonce_of(&page(app, &link, None).expect(200));
    let mut fields = with_amount("5.50");
    fields.push(("nonce", &nonce));
    let first = page(app, &link, Some(&fields)).expect(200);
    let second = page(app, &link, Some(&fields)).expect(200);
    assert!(first.text.contains("Payment approved") && second.text.contains("Payment approved"));
    let txs = invoice_transactions(&t, &id);
    assert_eq!(txs.len(), 1, "{txs:#?}");
    assert!(
        second.text.contains(txs[0]["id"].as_str().unwrap()),
        "the first one's answer"
    );
    // At once, from two connections.
    let nonce = nonce_of(&page(app, &link, None).expect(200));
    let mut fields = with_amount("2.50");
    fields.push(("nonce", &nonce));
    let answers: Vec<Resp> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| page(app, &link, Some(&fields))))
            .collect();
        runs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // The second, while the first still runs, is told so; or, after it,
    // shown its answer.
    for r in &answers {
        assert!(
            (r.status == 200 && r.text.contains("Payment approved"))
                || (r.status == 409 && r.text.contains("already being processed")),
            "{}: {}",
            r.status,
            r.text
        );
    }
    let txs = invoice_transactions(&t, &id);
    assert_eq!(txs.len(), 2, "one more payment: {txs:#?}");
    let after = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(after["remaining_balance"], "13.00");
    // A new nonce is a new payment.
    let nonce = nonce_of(&page(app, &link, None).expect(200));
    let mut fields = with_amount("1.00");
    fields.push(("nonce", &nonce));
    page(app, &link, Some(&fields)).expect(200);
    assert_eq!(invoice_transactions(&t, &id).len(), 3);
}

/// A file of exactly 5 MiB is taken; one byte more is refused and stores
/// nothing.
fn files_up_to_five_mebibytes(app: &TestApp) {
    const MIB5: usize = 5 * 1024 * 1024;
    let t = app.bootstrap();
    t.post(
        "/v2/productfiles",
        json!({ "productfile": { "location_id": t.location_id(), "title": "Invoices" } }),
    )
    .expect(201);
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    let id = q["id"].as_str().unwrap();
    let path = format!("/v2/quickinvoices/{id}/files");
    let over = format!("{}\n", "a".repeat(MIB5));
    assert_eq!(over.len(), MIB5 + 1);
    let r = send_multipart(app, &t, &path, &[], &[("file[file]", "big.txt", &over)]);
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("larger than 5 MB"), "{}", r.text);
    let files = |t: &Tenant| {
        t.get(&format!("/v2/quickinvoices/{id}?expand=files"))
            .expect(200)
            .body["quickinvoice"]["files"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(files(&t), 0, "nothing stored");
    let stored = std::fs::read_dir(app.dir.join("files"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(stored, 0, "no bytes kept");
    // The same at creation.
    let loc = t.location_id();
    let create = [
        ("quickinvoice[title]", "Big"),
        ("quickinvoice[due_date]", "2030-02-01"),
        ("quickinvoice[location_id]", loc.as_str()),
        ("quickinvoice[item_list][item1]", "3"),
    ];
    let r = send_multipart(
        app,
        &t,
        "/v2/quickinvoices",
        &create,
        &[("quickinvoice[files][0]", "big.txt", &over)],
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        t.get("/v2/quickinvoices").expect(200).body["meta"]["pagination"]["totalCount"],
        1,
        "no invoice made"
    );
    // Exactly 5 MiB.
    let exact = format!("{}\n", "a".repeat(MIB5 - 1));
    assert_eq!(exact.len(), MIB5);
    let added = send_multipart(app, &t, &path, &[], &[("file[file]", "exact.txt", &exact)])
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(added["files"][0]["size"], MIB5);
    assert_eq!(files(&t), 1);
}

/// The pay page is not framed by other sites (clickjacking): its CSP
/// says frame-ancestors 'none', with the header browsers older than CSP
/// read.
fn the_pay_page_cannot_be_framed(app: &TestApp) {
    let t = app.bootstrap();
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    let form = page(app, &pay_path(&q), None).expect(200);
    let refused = page(app, &pay_path(&q), Some(&[("exp_date", "1239")])).expect(422);
    // Its result, and the refusal of a deleted invoice, are its pages too.
    let paid = page(app, &pay_path(&q), Some(&with_amount("21.00"))).expect(200);
    assert!(paid.text.contains("Payment approved"), "{}", paid.text);
    assert!(
        !paid.text.contains("data-fg-close"),
        "no Close button on a page opened from a mail: {}",
        paid.text
    );
    let other = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    t.delete(&format!("/v2/quickinvoices/{}", other["id"].as_str().unwrap()))
        .expect(204);
    let deleted = page(app, &pay_path(&other), None).expect(404);
    for shown in [form, refused, paid, deleted] {
        let csp = shown
            .header("content-security-policy")
            .expect("a CSP")
            .to_string();
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("frame-ancestors *"), "{csp}");
        assert_eq!(
            shown
                .header("x-frame-options")
                .map(str::to_ascii_uppercase)
                .as_deref(),
            Some("DENY")
        );
    }
}

/// Past its expire_date on the location's clock an invoice reads status 3
/// and its link no longer opens or pays.
fn an_expired_invoice_stops_taking_payments(app: &TestApp) {
    let t = app.bootstrap();
    let today = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let day = |d: i64| {
        chrono::DateTime::from_timestamp(today + d * 86_400, 0)
            .unwrap()
            .date_naive()
            .to_string()
    };
    let q = invoice(
        &t,
        json!({ "due_date": day(1), "expire_date": day(2), "allow_partial_pay": 1 }),
    )
    .expect(201)
    .body["quickinvoice"]
        .clone();
    let id = q["id"].as_str().unwrap().to_string();
    let link = pay_path(&q);
    page(app, &link, Some(&with_amount("1.00"))).expect(200);
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 4 * 86_400 } }),
    )
    .expect(200);
    let after = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(after["status_id"], 0, "{after}");
    assert_eq!(after["remaining_balance"], "20.00");
    let listed = t.get("/v2/quickinvoices?status_id=0").expect(200).body;
    assert_eq!(listed["meta"]["pagination"]["totalCount"], 1, "{listed}");
    let shown = page(app, &link, None);
    assert_eq!(shown.status, 404, "{}", shown.text);
    assert!(shown.text.contains("expired"), "{}", shown.text);
    let paid = page(app, &link, Some(&with_amount("20.00")));
    assert_eq!(paid.status, 404, "{}", paid.text);
    assert_eq!(invoice_transactions(&t, &id).len(), 1, "nothing more taken");
}

/// Two payers paying the whole balance at the same moment: exactly one
/// is charged, the other told the invoice is paid.
fn concurrent_full_payments_approve_once(app: &TestApp) {
    let t = app.bootstrap();
    for round in 0..3 {
        let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
        let id = q["id"].as_str().unwrap().to_string();
        let link = pay_path(&q);
        let pages: Vec<String> = (0..2)
            .map(|_| nonce_of(&page(app, &link, None).expect(200)))
            .collect();
        let barrier = std::sync::Barrier::new(2);
        let answers: Vec<Resp> = std::thread::scope(|s| {
            let runs: Vec<_> = pages
                .iter()
                .map(|nonce| {
                    let (link, barrier) = (&link, &barrier);
                    s.spawn(move || {
                        let mut fields = with_amount("21.00");
                        fields.push(("nonce", nonce));
                        barrier.wait();
                        page(app, link, Some(&fields))
                    })
                })
                .collect();
            runs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let approved = answers
            .iter()
            .filter(|r| r.text.contains("Payment approved"))
            .count();
        assert_eq!(
            approved,
            1,
            "round {round}: {:?}",
            answers.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        let refused = answers
            .iter()
            .find(|r| !r.text.contains("Payment approved"))
            .unwrap();
        assert_eq!(refused.status, 422, "round {round}: {}", refused.text);
        let txs = invoice_transactions(&t, &id);
        let charged: Vec<&Value> = txs.iter().filter(|tx| tx["status_id"] == 101).collect();
        assert_eq!(charged.len(), 1, "round {round}: {txs:#?}");
        let after = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
        assert_eq!(
            (
                after["payment_status_id"].as_i64(),
                after["remaining_balance"].as_str()
            ),
            (Some(2), Some("0.00")),
            "round {round}"
        );
    }
}

/// `single_payment_max_amount` unset: the invoice's amount, or with
/// overpayment allowed the largest amount; a default follows changes.
fn largest_payment_follows_overpayment(app: &TestApp) {
    let t = app.bootstrap();
    // Allowing overpayment lifts it; a new item list moves a maximum that
    // was the default; one set by hand stays.
    let over = invoice(&t, json!({ "allow_overpayment": 1 })).expect(201).body["quickinvoice"].clone();
    assert_eq!(over["single_payment_max_amount"], "9999999.99");
    let other = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    let qid = other["id"].as_str().unwrap();
    let moved = t
        .put(
            &format!("/v2/quickinvoices/{qid}"),
            json!({ "quickinvoice": { "item_list": { "item1xx": 30 } } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(moved["single_payment_max_amount"], "30.00", "{moved}");
    let opened = t
        .put(
            &format!("/v2/quickinvoices/{qid}"),
            json!({ "quickinvoice": { "allow_overpayment": true } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(opened["single_payment_max_amount"], "9999999.99", "{opened}");
    assert_eq!(opened["allow_overpayment"], json!(1));
    let set = invoice(&t, json!({ "single_payment_max_amount": "15.00" }))
        .expect(201)
        .body["quickinvoice"]
        .clone();
    let sid = set["id"].as_str().unwrap();
    let kept = t
        .put(
            &format!("/v2/quickinvoices/{sid}"),
            json!({ "quickinvoice": { "item_list": { "item1xx": 30 } } }),
        )
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(kept["single_payment_max_amount"], "15.00");
}

/// A quick invoice is paid by its goods: on a card account with a
/// surcharge, paying the balance charges the balance plus the surcharge
/// and leaves nothing owed (the surcharge once counted as payment, so
/// the balance could not be paid without overpaying).
fn a_surcharge_does_not_pay_the_invoice(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let out = app.cli(&["surcharge", "--product-transaction-id", &cc, "--percent", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    assert_eq!(q["remaining_balance"], "21.00");
    page(app, &pay_path(&q), Some(&with_amount("21.00"))).expect(200);
    let qid = q["id"].as_str().unwrap();
    let paid = t.get(&format!("/v2/quickinvoices/{qid}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (
            paid["remaining_balance"].clone(),
            paid["payment_status_id"].clone()
        ),
        (json!("0.00"), json!(2)),
        "{paid}"
    );
    let txs = invoice_transactions(&t, qid);
    assert_eq!(txs.len(), 1);
    assert_eq!(
        (
            txs[0]["transaction_amount"].clone(),
            txs[0]["surcharge_amount"].clone()
        ),
        (json!("21.63"), json!("0.63"))
    );
}

/// The card surcharge is said before the customer pays: exactly on a
/// balance paid in full, by its rate (with the balance as an example) on
/// an amount the customer chooses; the result shows the total charged
/// with its surcharge.
fn the_surcharge_is_shown_before_paying(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let out = app.cli(&["surcharge", "--product-transaction-id", &cc, "--percent", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    let shown = page(app, &pay_path(&q), None).expect(200);
    assert!(
        shown.text.contains(
            "Credit cards: a 3.00% surcharge of $0.63 applies, total $21.63. Debit cards: $21.00, no surcharge."
        ),
        "{}",
        shown.text
    );
    assert!(shown.text.contains("aria-describedby=\"fg-surcharge\""));
    let paid = page(app, &pay_path(&q), Some(&with_amount("21.00"))).expect(200);
    for line in [
        "Subtotal",
        "$21.00",
        "Card surcharge",
        "$0.63",
        "Total charged",
        "$21.63",
    ] {
        assert!(paid.text.contains(line), "{line}: {}", paid.text);
    }
    let partial = invoice(&t, json!({ "allow_partial_pay": 1 })).expect(201).body["quickinvoice"].clone();
    let shown = page(app, &pay_path(&partial), None).expect(200);
    assert!(
        shown
            .text
            .contains("Credit cards: a 3.00% surcharge is added to the amount you pay (on $21.00: $0.63, total $21.63)."),
        "{}",
        shown.text
    );
    // A bank account is never surcharged.
    let by_bank = page(app, &format!("{}?method=ach", pay_path(&partial)), None).expect(200);
    assert!(!by_bank.text.contains("surcharge"), "{}", by_bank.text);
}

/// The same form sent again with a field changed (a double submit after
/// an edit, without script) is refused in the customer's words, never the
/// API's.
fn a_changed_resubmission_is_refused_in_plain_words(app: &TestApp) {
    let t = app.bootstrap();
    let q = invoice(&t, json!({ "allow_partial_pay": 1 })).expect(201).body["quickinvoice"].clone();
    let link = pay_path(&q);
    let nonce = nonce_of(&page(app, &link, None).expect(200));
    let mut fields = with_amount("5.00");
    fields.push(("nonce", &nonce));
    page(app, &link, Some(&fields)).expect(200);
    let mut changed = with_amount("6.00");
    changed.push(("nonce", &nonce));
    let r = page(app, &link, Some(&changed)).expect(409);
    assert!(r.text.contains("This form was already submitted"), "{}", r.text);
    assert!(!r.text.contains("Idempotency"), "{}", r.text);
    assert_eq!(invoice_transactions(&t, q["id"].as_str().unwrap()).len(), 1);
}

/// `status_id` takes the reference's values (1 open, 0 closed) and a PUT
/// may set it: 0 closes the invoice to payments, 1 opens it again.
fn status_closes_and_reopens(app: &TestApp) {
    let t = app.bootstrap();
    let q = invoice(&t, json!({})).expect(201).body["quickinvoice"].clone();
    let id = q["id"].as_str().unwrap().to_string();
    assert_eq!(q["status_id"], 1);
    let put = |status: i64| {
        t.put(
            &format!("/v2/quickinvoices/{id}"),
            json!({ "quickinvoice": { "status_id": status } }),
        )
    };
    let closed = put(0).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (closed["status_id"].clone(), closed["is_active"].clone()),
        (json!(0), json!(0))
    );
    let refused = page(app, &pay_path(&q), Some(&with_amount("21.00")));
    assert_ne!(
        refused.status, 200,
        "a closed invoice takes no payment: {}",
        refused.text
    );
    let closed_list = t.get("/v2/quickinvoices?status_id=0").expect(200).body;
    assert_eq!(
        closed_list["meta"]["pagination"]["totalCount"], 1,
        "{closed_list}"
    );
    let open = put(1).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (open["status_id"].clone(), open["is_active"].clone()),
        (json!(1), json!(1))
    );
    page(app, &pay_path(&q), Some(&with_amount("21.00"))).expect(200);
    let paid = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (paid["status_id"].clone(), paid["payment_status_id"].clone()),
        (json!(0), json!(2))
    );
    // Reopening a paid invoice leaves it closed: nothing is owed.
    assert_eq!(put(1).expect(200).body["quickinvoice"]["status_id"], 0);
    put(2).expect(422);
    // Closing one that is closed already (paid) still closes it for
    // good: a void of its payment does not reopen it.
    let closed = put(0).expect(200).body["quickinvoice"].clone();
    assert_eq!(closed["is_active"], 0);
    let payment = invoice_transactions(&t, &id)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("/v2/transactions/{payment}"),
        json!({ "transaction": { "action": "void" } }),
    )
    .expect(200);
    let after = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (after["status_id"].clone(), after["remaining_balance"].clone()),
        (json!(0), json!("21.00")),
        "{after}"
    );
    let r = t.put(
        &format!("/v2/quickinvoices/{id}"),
        json!({ "quickinvoice": { "status_id": 1, "is_active": 0 } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(put(1).expect(200).body["quickinvoice"]["status_id"], 1);
}

/// The sandbox mailbox holds customers' addresses and pay links: a user
/// who may not read quick invoices (a Clerk, or a user with no role) is
/// refused; a Read-only user may look.
fn the_mailbox_needs_quick_invoice_reads(app: &TestApp) {
    let t = app.bootstrap();
    invoice(&t, json!({ "email": "payer@example.com", "send_email": 1 })).expect(201);
    let loc = t.location_id();
    for (role, status) in [(Some("3"), 403), (None, 403), (Some("2"), 200)] {
        let (id, key) = t.user(&loc, role);
        let who = t.as_user(&id, &key);
        let r = who.get("/dev/mail?format=json");
        assert_eq!(r.status, status, "role {role:?}: {}", r.text);
        if status == 403 {
            assert!(!r.text.contains("payer@example.com") && !r.text.contains("/quickinvoice/pay/"));
        } else {
            assert!(r.text.contains("payer@example.com"), "{}", r.text);
        }
    }
}

/// The pay page charges as the invoice's user: once that user may no
/// longer take payments (its role was taken away), the link takes none.
fn a_pay_link_pays_only_while_its_user_may(app: &TestApp) {
    let t = app.bootstrap();
    let (id, key) = t.user(&t.location_id(), Some("132"));
    let integrator = t.as_user(&id, &key);
    let q = invoice(&integrator, json!({})).expect(201).body["quickinvoice"].clone();
    let roles = t.get(&format!("/v2/authroleusers?user_id={id}")).expect(200);
    let role = roles.body["authroleusers"][0]["id"].as_str().unwrap().to_string();
    t.delete(&format!("/v2/authroleusers/{role}")).expect(204);
    let r = page(app, &pay_path(&q), Some(&with_amount("21.00")));
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.text.contains("can no longer be paid online"), "{}", r.text);
    assert!(invoice_transactions(&t, q["id"].as_str().unwrap()).is_empty());
}

/// A pay link whose user was disabled or deleted tells the customer, in
/// their words, that it can no longer be paid online (403, nothing about
/// users); no reminder mails that link again, and a resend is refused.
fn a_pay_link_of_a_gone_user_is_not_mailed_again(app: &TestApp) {
    let t = app.bootstrap();
    let today = t.get("/v2/developer/testclock").expect(200).body["testclock"]["now"]
        .as_i64()
        .unwrap();
    let due = chrono::DateTime::from_timestamp(today + 3 * 86_400, 0)
        .unwrap()
        .date_naive()
        .to_string();
    let mut invoices = Vec::new();
    for gone in ["disabled", "deleted"] {
        let (id, key) = t.user(&t.location_id(), Some("132"));
        let integrator = t.as_user(&id, &key);
        let q = invoice(
            &integrator,
            json!({ "due_date": due, "email": format!("{gone}@example.com"), "send_email": 1 }),
        )
        .expect(201)
        .body["quickinvoice"]
            .clone();
        page(app, &pay_path(&q), None).expect(200);
        if gone == "disabled" {
            t.put(&format!("/v2/users/{id}"), json!({ "user": { "status": 0 } }))
                .expect(200);
        } else {
            t.delete(&format!("/v2/users/{id}")).expect(204);
        }
        invoices.push(q);
    }
    let before = mails(&t).len();
    for q in &invoices {
        for r in [
            page(app, &pay_path(q), None),
            page(app, &pay_path(q), Some(&with_amount("21.00"))),
        ] {
            assert_eq!(r.status, 403, "{}", r.text);
            assert!(r.text.contains("can no longer be paid online"), "{}", r.text);
            assert!(!r.text.contains("user"), "{}", r.text);
        }
        let id = q["id"].as_str().unwrap();
        let r = t.send("POST", &format!("/v2/quickinvoices/{id}/resend"), None);
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(!r.errors("created_user_id").is_empty(), "{}", r.text);
        assert!(invoice_transactions(&t, id).is_empty());
    }
    // Past the due date and the reminder after it: nothing is mailed.
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 12 * 86_400 } }),
    )
    .expect(200);
    assert_eq!(mails(&t).len(), before, "{:#?}", mails(&t));
}
