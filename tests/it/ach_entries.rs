//! The ACH terminal profiles beyond WEB and CCD (TEL, POP, C21), payroll
//! checks, the manager override of a 1663 hold and the same-day ACH
//! update of a POP or C21 debit (reference 1.6, 3.4; ADR 0014).

use crate::engine_tests;
use crate::support::{str_of, Client, Resp, Tenant, TestApp};
use serde_json::{json, Value};

engine_tests!(
    ach_profiles_by_sec_code,
    payroll_checks_by_sec_code,
    check21_images,
    override_approves_a_manager_hold,
    override_refusals_change_nothing,
    ach_update_voids_and_debits_again,
    ach_update_refusals_change_nothing,
    ach_update_refused_on_another_day,
);

const MICR: &str = "T072000326T 123456789012O 1001";
/// The reference's Check 21 sample image ("SomeStringObviouslyNotBase64Encoded").
const IMAGE: &str = "U29tZVN0cmluZ09idmlvdXNseU5vdEJhc2U2NEVuY29kZWQ=";

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

/// A debit with `sec` and the fields its profile needs: keyed bank data
/// (WEB, CCD, TEL with a check number) or a check's MICR line (POP, C21
/// with images).
fn debit_body(t: &Tenant, sec: &str, amount: &str, extra: Value) -> Value {
    let base = json!({ "action": "debit", "payment_method": "ach", "ach_sec_code": sec,
        "product_transaction_id": t.cred("ach_product_transaction_id"), "transaction_amount": amount,
        "account_type": "checking" });
    let entry = match sec {
        "POP" => json!({ "track_data": MICR }),
        "C21" => json!({ "track_data": MICR, "image_front": IMAGE, "image_back": IMAGE }),
        _ => json!({ "account_number": "123456789012", "routing": "072000326",
            "account_holder_name": "Jane Doe", "check_number": if sec == "TEL" { json!("2001") } else { Value::Null } }),
    };
    with(with(base, entry), extra)
}

fn post_debit(t: &Tenant, sec: &str, amount: &str, extra: Value) -> Resp {
    t.post(
        "/v2/transactions",
        json!({ "transaction": debit_body(t, sec, amount, extra) }),
    )
}

#[track_caller]
fn debit(t: &Tenant, sec: &str, amount: &str) -> Value {
    post_debit(t, sec, amount, json!({})).expect(201).body["transaction"].clone()
}

#[track_caller]
fn read(t: &Tenant, id: &Value) -> Value {
    t.get(&format!("/v2/transactions/{}", str_of(id)))
        .expect(200)
        .body["transaction"]
        .clone()
}

fn count(t: &Tenant) -> i64 {
    t.get("/v2/transactions").expect(200).body["meta"]["pagination"]["totalCount"]
        .as_i64()
        .expect("totalCount")
}

fn override_hold(t: &Tenant, id: &Value) -> Resp {
    t.send("POST", &format!("/v2/transactions/{}/override", str_of(id)), None)
}

fn ach_update(t: &Tenant, id: &Value, body: Value) -> Resp {
    t.post(
        &format!("/v2/transactions/{}/achupdate", str_of(id)),
        json!({ "transaction": body }),
    )
}

/// A 422 naming `field`, whose message contains `part`.
#[track_caller]
fn refused(r: Resp, field: &str, part: &str) {
    let r = r.expect(422);
    let messages = r.errors(field);
    assert!(
        messages.iter().any(|m| m.contains(part)),
        "{field}: expected {part:?} in {}",
        r.text
    );
}

fn ach_profiles_by_sec_code(app: &TestApp) {
    let t = app.bootstrap();
    // The sandbox ACH account carries one profile per SEC code.
    let pt = t
        .get(&format!(
            "/v2/producttransactions/{}",
            t.cred("ach_product_transaction_id")
        ))
        .expect(200)
        .body["producttransaction"]
        .clone();
    let terminals = pt["processor_data"]["terminals"]
        .as_array()
        .expect("terminals")
        .clone();
    let profile = |sec: &str| {
        terminals
            .iter()
            .find(|p| p["sec_code"] == sec)
            .unwrap_or_else(|| panic!("no {sec} profile: {pt}"))
            .clone()
    };
    assert_eq!(terminals.len(), 5, "{pt}");
    assert_eq!(profile("TEL")["terminal_id"], "2210");
    assert!(profile("TEL")["required"]
        .as_array()
        .unwrap()
        .contains(&json!("check_number")));
    assert_eq!(profile("POP")["required"], json!(["account_type", "track_data"]));
    assert_eq!(
        profile("C21")["required"],
        json!(["account_type", "track_data", "image_front", "image_back"])
    );
    assert!(profile("POP")["actions"]
        .as_array()
        .unwrap()
        .contains(&json!("avsonly")));

    let before = count(&t);
    // TEL needs a check number.
    refused(
        post_debit(&t, "TEL", "3.00", json!({ "check_number": null })),
        "check_number",
        "cannot be blank",
    );
    let tel = debit(&t, "TEL", "3.00");
    assert_eq!(
        (tel["status_id"].clone(), tel["ach_sec_code"].clone()),
        (json!(131), json!("TEL"))
    );
    assert_eq!(tel["check_number"], "2001");

    // POP: the account comes from the check's MICR line; no holder needed.
    let pop = debit(&t, "POP", "4.00");
    assert_eq!(pop["status_id"], 131, "{pop}");
    assert_eq!(pop["routing"], "072000326");
    assert_eq!(pop["last_four"], "9012");
    assert_eq!(pop["check_number"], "1001");
    assert_eq!(pop["account_type"], "checking");
    assert_eq!(pop["account_holder_name"], Value::Null);
    assert!(
        pop.get("track_data").is_none() && pop.get("account_number").is_none(),
        "{pop}"
    );
    refused(
        post_debit(&t, "POP", "4.00", json!({ "track_data": null })),
        "account_number",
        "cannot be blank",
    );
    refused(
        post_debit(
            &t,
            "POP",
            "4.00",
            json!({ "track_data": null, "account_number": "123456789012",
            "routing": "072000326" }),
        ),
        "track_data",
        "cannot be blank",
    );
    refused(
        post_debit(&t, "POP", "4.00", json!({ "track_data": "T07200032T 1234O 1" })),
        "track_data",
        "not a readable MICR line",
    );
    refused(
        post_debit(&t, "POP", "4.00", json!({ "account_type": null })),
        "account_type",
        "cannot be blank",
    );
    // A MICR line means nothing to a WEB debit.
    refused(
        post_debit(&t, "WEB", "4.00", json!({ "track_data": MICR })),
        "track_data",
        "is not taken with SEC code WEB",
    );
    // Keyed profiles still need the holder; a TEL without one is refused.
    refused(
        post_debit(&t, "TEL", "4.00", json!({ "account_holder_name": null })),
        "account_holder_name",
        "cannot be blank",
    );
    assert_eq!(count(&t), before + 2, "refusals store nothing");
}

fn payroll_checks_by_sec_code(app: &TestApp) {
    let t = app.bootstrap();
    let before = count(&t);
    for sec in ["WEB", "CCD", "TEL"] {
        refused(
            post_debit(&t, sec, "5.00", json!({ "ach_identifier": "P" })),
            "ach_identifier",
            &format!("Payroll (ach_identifier P) is for SEC codes POP and C21 only; this one is {sec}."),
        );
    }
    refused(
        post_debit(&t, "POP", "5.00", json!({ "ach_identifier": "X" })),
        "ach_identifier",
        "must be one of P",
    );
    assert_eq!(count(&t), before, "refusals store nothing");
    for sec in ["POP", "C21"] {
        let p = post_debit(&t, sec, "5.00", json!({ "ach_identifier": "P" }))
            .expect(201)
            .body["transaction"]
            .clone();
        assert_eq!(
            (p["ach_identifier"].clone(), p["status_id"].clone()),
            (json!("P"), json!(131))
        );
    }
    // The reference's payroll sample: keyed account and MICR line both sent
    // (the keyed account is the account), with identity fields.
    let sample = json!({ "transaction": {
        "action": "debit", "payment_method": "ach", "ach_identifier": "P", "transaction_amount": "777.07",
        "product_transaction_id": t.cred("ach_product_transaction_id"), "ach_sec_code": "C21",
        "account_holder_name": "trx+C21@1612 (1616/)-trx", "check_number": "8520748520963",
        "account_type": "checking", "account_number": "24345", "routing": "051904524",
        "image_front": IMAGE, "image_back": IMAGE, "billing_zip": "58469", "billing_street": "1612-1616*street",
        "billing_city": "1612-34645656city", "billing_state": "VI", "billing_phone": "7894561230",
        "track_data": "T051904524T 741025349520O 8520748520963", "dob_year": "2000", "ssn4": "8527" } });
    let p = t.post("/v2/transactions", sample).expect(201).body["transaction"].clone();
    assert_eq!(p["ach_identifier"], "P");
    assert_eq!(p["routing"], "051904524");
    assert_eq!(p["check_number"], "8520748520963");
    assert_eq!(p["account_holder_name"], "trx+C21@1612 (1616/)-trx");
}

fn check21_images(app: &TestApp) {
    let t = app.bootstrap();
    let before = count(&t);
    refused(
        post_debit(&t, "C21", "6.00", json!({ "image_front": null })),
        "image_front",
        "cannot be blank",
    );
    refused(
        post_debit(&t, "C21", "6.00", json!({ "image_back": null })),
        "image_back",
        "cannot be blank",
    );
    // Not base64: refused without the value in the answer.
    let not_base64 = "this is not base64!!";
    let r = post_debit(&t, "C21", "6.00", json!({ "image_front": not_base64 })).expect(422);
    assert_eq!(
        r.errors("image_front"),
        vec!["Image Front must be base64 (A-Z, a-z, 0-9, + and /, padded with =).".to_string()]
    );
    assert!(!r.text.contains(not_base64), "{}", r.text);
    refused(
        post_debit(&t, "C21", "6.00", json!({ "image_back": "QUJD" .repeat(16_384) })),
        "image_back",
        "at most 65535 characters",
    );
    // Images belong to Check 21 only.
    refused(
        post_debit(&t, "POP", "6.00", json!({ "image_front": IMAGE })),
        "image_front",
        "is not taken with SEC code POP",
    );
    assert_eq!(count(&t), before, "refusals store nothing");
    // The largest image taken; the answer never shows images.
    let large = "QUJD".repeat(16_382) + "QQ==";
    assert_eq!(large.len(), 65_532);
    let c21 = post_debit(&t, "C21", "6.00", json!({ "image_front": large })).expect(201);
    let tx = &c21.body["transaction"];
    assert_eq!(tx["ach_sec_code"], "C21");
    assert!(
        tx.get("image_front").is_none() && tx.get("image_back").is_none(),
        "{tx}"
    );
    assert!(!c21.text.contains(IMAGE));
    assert!(!read(&t, &tx["id"]).to_string().contains(IMAGE));

    // At rest and in the log: neither image, base64 or decoded, is kept
    // anywhere, for a debit, the one its ACH update makes, or one held
    // for a manager.
    use base64::Engine as _;
    let secret = |side: &str| {
        let text = format!("CHECK-IMAGE-{side}-{}", uuid::Uuid::new_v4().simple());
        (base64::engine::general_purpose::STANDARD.encode(&text), text)
    };
    let (front, front_text) = secret("front");
    let (back, back_text) = secret("back");
    let images = json!({ "image_front": front, "image_back": back });
    let debit = post_debit(&t, "C21", "6.00", images.clone()).expect(201).body["transaction"].clone();
    let id = str_of(&debit["id"]);
    ach_update(
        &t,
        &debit["id"],
        json!({ "track_data": "T021000021T 987654321O 1002", "transaction_amount": "7.00" }),
    )
    .expect(201);
    post_debit(&t, "C21", "6.63", images).expect(201);
    let mut conn = crate::support::db::db(app);
    for needle in [&front, &back, &front_text, &back_text] {
        let found = conn.columns_containing(needle);
        assert!(found.is_empty(), "a check image is stored in {found:?}");
        assert!(
            !app.log().contains(needle.as_str()),
            "a check image is in the server log"
        );
    }
    assert!(
        !conn.columns_containing(&id).is_empty(),
        "the scan reads the tables"
    );
}

fn override_approves_a_manager_hold(app: &TestApp) {
    let t = app.bootstrap();
    for sec in ["TEL", "POP", "C21"] {
        // $6.63 is the sandbox's Manager Needed trigger.
        let held = debit(&t, sec, "6.63");
        assert_eq!(
            (held["status_id"].clone(), held["reason_code_id"].clone()),
            (json!(301), json!(1663)),
            "{held}"
        );
        assert_eq!(held["verbiage"], "MANAGER_NEEDED");
        let r = override_hold(&t, &held["id"]).expect(200);
        let tx = &r.body["transaction"];
        assert_eq!(tx["id"], held["id"]);
        assert_eq!(
            (tx["status_id"].clone(), tx["reason_code_id"].clone()),
            (json!(131), json!(1000))
        );
        assert_eq!(tx["transaction_amount"], "6.63");
        assert_eq!(tx["type_id"], 50);
        assert!(str_of(&tx["auth_code"]).starts_with("AUTH NUM "), "{tx}");
        assert_eq!(read(&t, &held["id"])["status_id"], 131);
        // The approved debit goes on like any other: it can be voided.
        let v = t
            .put(
                &format!("/v2/transactions/{}", str_of(&held["id"])),
                json!({ "transaction": { "action": "void" } }),
            )
            .expect(200);
        assert_eq!(v.body["transaction"]["status_id"], 201);
    }
    // `{}` and `{"transaction": {}}` are empty bodies too.
    for body in [json!({}), json!({ "transaction": {} })] {
        let held = debit(&t, "TEL", "6.63");
        let r = t
            .post(
                &format!("/v2/transactions/{}/override", str_of(&held["id"])),
                body,
            )
            .expect(200);
        assert_eq!(r.body["transaction"]["status_id"], 131);
    }
}

fn override_refusals_change_nothing(app: &TestApp) {
    let t = app.bootstrap();
    let web = debit(&t, "WEB", "6.63");
    assert_eq!(
        (web["status_id"].clone(), web["reason_code_id"].clone()),
        (json!(131), json!(1000))
    );
    let approved_tel = debit(&t, "TEL", "6.00");
    let card = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "6.63",
                "account_number": "4111111111111111", "exp_date": "1240" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    let overridden = debit(&t, "POP", "6.63");
    override_hold(&t, &overridden["id"]).expect(200);
    let held = debit(&t, "C21", "6.63");
    let records = [&web, &approved_tel, &card, &overridden, &held];
    let before: Vec<Value> = records.iter().map(|r| read(&t, &r["id"])).collect();
    let total = count(&t);

    refused(
        override_hold(&t, &web["id"]),
        "action",
        "Only ACH transactions with SEC codes TEL, POP, C21 can be overridden; this one is WEB.",
    );
    refused(override_hold(&t, &approved_tel["id"]), "action", "reason 1663");
    refused(override_hold(&t, &card["id"]), "action", "Only ACH transactions");
    // Already overridden: no longer held.
    refused(
        override_hold(&t, &overridden["id"]),
        "action",
        "this one is Pending Origination (131) with reason 1000",
    );
    // The body takes no fields.
    refused(
        t.post(
            &format!("/v2/transactions/{}/override", str_of(&held["id"])),
            json!({ "transaction": { "description": "manager" } }),
        ),
        "description",
        "not accepted for the override action",
    );
    t.post("/v2/transactions/not-a-transaction/override", json!({}))
        .expect(404);
    for verb in ["GET", "PUT", "DELETE"] {
        let r = t.send(
            verb,
            &format!("/v2/transactions/{}/override", str_of(&held["id"])),
            None,
        );
        assert_eq!(r.status, 405, "{verb}: {}", r.text);
    }

    let after: Vec<Value> = records.iter().map(|r| read(&t, &r["id"])).collect();
    assert_eq!(after, before, "refused overrides change nothing");
    assert_eq!(count(&t), total);
    // The held one is still overridable.
    override_hold(&t, &held["id"]).expect(200);
}

fn ach_update_voids_and_debits_again(app: &TestApp) {
    let t = app.bootstrap();
    let original = post_debit(
        &t,
        "POP",
        "10.00",
        json!({ "ach_identifier": "P", "description": "groceries" }),
    )
    .expect(201)
    .body["transaction"]
        .clone();
    let total = count(&t);
    let corrected = "T021000021T 987654321O 1002";
    let r = ach_update(
        &t,
        &original["id"],
        json!({ "track_data": corrected, "transaction_amount": "12.34" }),
    )
    .expect(201);
    let new = r.body["transaction"].clone();
    assert_ne!(new["id"], original["id"]);
    assert_eq!(new["transaction_amount"], "12.34");
    assert_eq!(
        (new["status_id"].clone(), new["type_id"].clone()),
        (json!(131), json!(50))
    );
    assert_eq!(new["previous_transaction_id"], original["id"]);
    assert_eq!(new["routing"], "021000021");
    assert_eq!(new["last_four"], "4321");
    assert_eq!(new["check_number"], "1002");
    // The rest is the original's.
    for key in [
        "ach_sec_code",
        "ach_identifier",
        "account_type",
        "description",
        "product_transaction_id",
    ] {
        assert_eq!(new[key], original[key], "{key}");
    }
    let voided = read(&t, &original["id"]);
    assert_eq!(voided["status_id"], 201, "{voided}");
    assert_eq!(voided["reason_code_id"], 1200);
    assert!(voided["void_date"].is_string(), "{voided}");
    assert_eq!(count(&t), total + 1);
    // The voided original cannot be updated again; the new one can.
    refused(
        ach_update(
            &t,
            &original["id"],
            json!({ "track_data": MICR, "transaction_amount": "1.00" }),
        ),
        "action",
        "this one is Voided (201)",
    );
    ach_update(
        &t,
        &new["id"],
        json!({ "track_data": MICR, "transaction_amount": "11.00" }),
    )
    .expect(201);

    // Check 21: the images stay the original's, none are sent again.
    let c21 = debit(&t, "C21", "20.00");
    let r = ach_update(
        &t,
        &c21["id"],
        json!({ "track_data": MICR, "transaction_amount": "21.00" }),
    )
    .expect(201);
    assert_eq!(r.body["transaction"]["ach_sec_code"], "C21");
    assert_eq!(read(&t, &c21["id"])["status_id"], 201);

    // An Idempotency-Key replays the first answer and updates once.
    let pop = debit(&t, "POP", "30.00");
    let total = count(&t);
    let client = Client { base: t.base.clone() };
    let (dev, user, key) = (t.cred("developer_id"), t.user_id(), t.cred("user_api_key"));
    let headers = [
        ("developer-id", dev.as_str()),
        ("user-id", user.as_str()),
        ("user-api-key", key.as_str()),
        ("idempotency-key", "achupdate-once"),
    ];
    let body = json!({ "transaction": { "track_data": MICR, "transaction_amount": "31.00" } }).to_string();
    let path = format!("/v2/transactions/{}/achupdate", str_of(&pop["id"]));
    let first = client.send("POST", &path, &headers, Some(&body)).expect(201);
    let again = client.send("POST", &path, &headers, Some(&body)).expect(201);
    assert_eq!(again.body["transaction"]["id"], first.body["transaction"]["id"]);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(count(&t), total + 1);
}

fn ach_update_refusals_change_nothing(app: &TestApp) {
    let t = app.bootstrap();
    let web = debit(&t, "WEB", "10.00");
    let tel = debit(&t, "TEL", "10.00");
    let pop = debit(&t, "POP", "10.00");
    let originated = debit(&t, "POP", "10.00");
    t.put(
        &format!("/v2/developer/transactions/{}", str_of(&originated["id"])),
        json!({ "transaction": { "status_id": 133 } }),
    )
    .expect(200);
    let records = [&web, &tel, &pop, &originated];
    let before: Vec<Value> = records.iter().map(|r| read(&t, &r["id"])).collect();
    let total = count(&t);
    let good = json!({ "track_data": MICR, "transaction_amount": "11.00" });

    refused(
        ach_update(&t, &web["id"], good.clone()),
        "action",
        "Only ACH debits with SEC codes POP and C21 can be updated; this one is WEB.",
    );
    refused(
        ach_update(&t, &tel["id"], good.clone()),
        "action",
        "this one is TEL",
    );
    refused(
        ach_update(&t, &originated["id"], good.clone()),
        "action",
        "Only ACH transactions pending origination (131) can be voided",
    );
    refused(
        ach_update(
            &t,
            &pop["id"],
            json!({ "track_data": "garbage", "transaction_amount": "11.00" }),
        ),
        "track_data",
        "not a readable MICR line",
    );
    refused(
        ach_update(&t, &pop["id"], json!({ "transaction_amount": "11.00" })),
        "track_data",
        "cannot be blank",
    );
    refused(
        ach_update(&t, &pop["id"], json!({ "track_data": MICR })),
        "transaction_amount",
        "cannot be blank",
    );
    refused(
        ach_update(
            &t,
            &pop["id"],
            json!({ "track_data": MICR, "transaction_amount": "0" }),
        ),
        "transaction_amount",
        "must be greater than zero",
    );
    refused(
        ach_update(
            &t,
            &pop["id"],
            json!({ "track_data": MICR, "transaction_amount": "1.00", "routing": "072000326" }),
        ),
        "routing",
        "not accepted for the achupdate action",
    );
    t.post(
        "/v2/transactions/not-a-transaction/achupdate",
        json!({ "transaction": good.clone() }),
    )
    .expect(404);
    let card = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "6.00",
                "account_number": "4111111111111111", "exp_date": "1240" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    refused(
        ach_update(&t, &card["id"], good),
        "action",
        "this is a card transaction",
    );

    let after: Vec<Value> = records.iter().map(|r| read(&t, &r["id"])).collect();
    assert_eq!(after, before, "refused updates change nothing");
    assert_eq!(count(&t), total + 1, "only the card sale was added");
}

fn ach_update_refused_on_another_day(app: &TestApp) {
    let t = app.bootstrap();
    let pop = debit(&t, "POP", "10.00");
    let before = read(&t, &pop["id"]);
    let total = count(&t);
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 86_400 } }),
    )
    .expect(200);
    refused(
        ach_update(
            &t,
            &pop["id"],
            json!({ "track_data": MICR, "transaction_amount": "11.00" }),
        ),
        "action",
        "on the day of the debit only",
    );
    assert_eq!(read(&t, &pop["id"]), before, "nothing changed");
    assert_eq!(count(&t), total);
}
