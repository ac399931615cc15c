//! Terminals, device terms and signatures (issue 14): the terminal's
//! fields, defaults and timeouts, its device secret shown once and stored
//! as a digest, the location infos' terminals, device terms refused on a
//! terminal without signature capture and retried after a decline on the
//! device, and signatures checked as images on records of the caller's
//! scope. The router itself: `router.rs`.

use crate::engine_tests;
use crate::support::db::db;
use crate::support::sim::Sim;
use crate::support::{Resp, Tenant, TestApp};
use base64::Engine as _;
use serde_json::{json, Value};

engine_tests!(
    terminal_defaults_secret_and_crud,
    bad_terminals_are_refused,
    location_infos_list_terminals,
    device_terms_capability_and_retry,
    signatures_are_images_on_records,
);

fn terminal(t: &Tenant, extra: Value) -> Resp {
    let mut body = json!({ "location_id": t.location_id(), "serial_number": "SN-0001" });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    t.post("/v2/terminals", json!({ "terminal": body }))
}

fn terminal_with_secret(t: &Tenant, extra: Value) -> (String, String) {
    let r = terminal(t, extra).expect(201);
    (
        id(&r, "terminal"),
        r.body["terminal"]["terminal_secret"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

fn id(r: &Resp, key: &str) -> String {
    r.body[key]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}.id in {}", r.text))
        .to_string()
}

fn ids(r: &Resp, key: &str) -> Vec<String> {
    r.ids(key)
}

fn png() -> String {
    let bytes = [b"\x89PNG\r\n\x1a\n".as_slice(), b"\0\0\0\rIHDR signature pad"].concat();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn terminal_defaults_secret_and_crud(app: &TestApp) {
    let t = app.bootstrap();
    let created = terminal(
        &t,
        json!({ "title": "Front desk", "terminal_manufacturer_id": "pax",
        "terminal_application_id": "app-1", "terminal_timeouts": { "overall_timeout": 120 } }),
    )
    .expect(201);
    let term = &created.body["terminal"];
    assert_eq!(term["active"], true);
    assert_eq!(term["port"], 10009);
    assert_eq!(term["sig_capture_enable"], true);
    assert_eq!(term["tip_enable"], false);
    assert_eq!(term["emv"], true);
    assert_eq!(term["is_provisioned"], false);
    assert_eq!(term["last_registration_ts"], Value::Null);
    assert_eq!(
        term["terminal_timeouts"],
        json!({ "card_entry_timeout": 120, "device_terms_prompt_timeout": 60, "overall_timeout": 120,
            "pin_entry_timeout": 30, "signature_input_timeout": 10, "signature_submit_timeout": 30,
            "status_display_time": 7, "tip_cashback_timeout": 30, "transaction_timeout": 10 })
    );
    assert!(term.get("secret_digest").is_none());
    // The device secret: in the create answer, once.
    let secret = term["terminal_secret"]
        .as_str()
        .expect("a terminal_secret")
        .to_string();
    assert_eq!(secret.len(), 48);
    let tid = id(&created, "terminal");
    let read = t
        .get(&format!("/v2/terminals/{tid}?expand=changelogs"))
        .expect(200);
    assert!(!read.text.contains(&secret));
    assert!(read.body["terminal"].get("terminal_secret").is_none());
    let list = t.get("/v2/terminals").expect(200);
    assert!(!list.text.contains(&secret));
    // At rest: its digest only.
    let mut d = db(app);
    assert!(d.columns_containing(&secret).is_empty(), "the secret is stored");
    let digest = d.text("SELECT secret_digest FROM terminals WHERE id = ?", &[&tid]);
    assert_eq!(digest, ferrogate::crypto::hash_api_key(&secret));
    assert!(ferrogate::terminals::verify_secret(&secret, &digest));

    // Updates: timeouts laid over what is there, blanks keep defaults.
    let updated = t
        .put(
            &format!("/v2/terminals/{tid}"),
            json!({ "terminal": { "terminal_timeouts": { "pin_entry_timeout": "45" }, "port": 10010,
                "tip_enable": 1, "terminal_cvm_id": 3, "local_ip_address": "192.168.1.20" } }),
        )
        .expect(200);
    let u = &updated.body["terminal"];
    assert_eq!(u["terminal_timeouts"]["pin_entry_timeout"], 45);
    assert_eq!(u["terminal_timeouts"]["overall_timeout"], 120);
    assert_eq!(u["port"], 10010);
    assert_eq!(u["active"], true);
    assert_eq!(u["local_ip_address"], "192.168.1.20");
    assert!(u.get("terminal_secret").is_none());
    let blank = t
        .put(
            &format!("/v2/terminals/{tid}"),
            json!({ "terminal": { "port": "", "title": "Lane 1" } }),
        )
        .expect(200);
    assert_eq!(blank.body["terminal"]["port"], 10010, "a blank keeps the port");

    // Filters, default sort id desc, expands.
    let second = id(
        &terminal(&t, json!({ "serial_number": "SN-0002" })).expect(201),
        "terminal",
    );
    assert_eq!(
        ids(&t.get("/v2/terminals").expect(200), "terminals"),
        [second.clone(), tid.clone()]
    );
    let sorted = t.get("/v2/terminals").expect(200);
    assert_eq!(sorted.body["meta"]["sort"]["attributes"]["id"], "desc");
    for (filter, expected) in [
        ("tip_enable=1", vec![tid.clone()]),
        ("tip_enable=0", vec![second.clone()]),
        ("terminal_cvm_id=3", vec![tid.clone()]),
        ("terminal_manufacturer_id=pax", vec![tid.clone()]),
        (&format!("id={second}") as &str, vec![second.clone()]),
        (
            &format!("location_id={}", t.location_id()),
            vec![second.clone(), tid.clone()],
        ),
    ] {
        assert_eq!(
            ids(
                &t.get(&format!("/v2/terminals?{filter}")).expect(200),
                "terminals"
            ),
            expected,
            "{filter}"
        );
    }
    let expanded = t
        .get(&format!(
            "/v2/terminals/{tid}?expand=terminal_application,location,created_user"
        ))
        .expect(200);
    let e = &expanded.body["terminal"];
    assert_eq!(e["terminal_application"]["id"], "app-1");
    assert_eq!(e["location"]["id"], json!(t.location_id()));
    assert_eq!(e["created_user"]["id"], json!(t.user_id()));
    assert_eq!(
        t.get(&format!("/v2/terminals/{second}?expand=terminal_application"))
            .expect(200)
            .body["terminal"]["terminal_application"],
        Value::Null
    );

    // Delete: 204, then gone.
    t.delete(&format!("/v2/terminals/{second}")).expect(204);
    t.get(&format!("/v2/terminals/{second}")).expect(404);
    t.delete(&format!("/v2/terminals/{second}")).expect(404);
}

fn bad_terminals_are_refused(app: &TestApp) {
    let t = app.bootstrap();
    for (extra, field) in [
        (
            json!({ "terminal_timeouts": { "overall_timeout": 301 } }),
            "terminal_timeouts",
        ),
        (
            json!({ "terminal_timeouts": { "status_display_time": 0 } }),
            "terminal_timeouts",
        ),
        (
            json!({ "terminal_timeouts": { "nap_timeout": 5 } }),
            "terminal_timeouts",
        ),
        (
            json!({ "terminal_timeouts": { "pin_entry_timeout": true } }),
            "terminal_timeouts",
        ),
        (json!({ "terminal_timeouts": [1, 2] }), "terminal_timeouts"),
        (json!({ "local_ip_address": "999.1.1.1" }), "local_ip_address"),
        (json!({ "local_ip_address": "10.0.0.1.5" }), "local_ip_address"),
        (json!({ "port": 0 }), "port"),
        (json!({ "port": 70000 }), "port"),
        (json!({ "serial_number": "" }), "serial_number"),
        (json!({ "title": "x".repeat(65) }), "title"),
        (json!({ "is_provisioned": 1 }), "is_provisioned"),
        (json!({ "secret_digest": "0".repeat(64) }), "secret_digest"),
        (json!({ "terminal_secret": "mine" }), "terminal_secret"),
        (json!({ "last_registration_ts": 1 }), "last_registration_ts"),
    ] {
        let r = terminal(&t, extra.clone()).expect(422);
        assert!(!r.errors(field).is_empty(), "{extra}: {}", r.text);
    }
    let r = terminal(&t, json!({ "terminal_timeouts": { "overall_timeout": 29 } })).expect(422);
    assert!(
        r.errors("terminal_timeouts")[0].contains("from 30 to 300"),
        "{}",
        r.text
    );
    let tid = id(&terminal(&t, json!({})).expect(201), "terminal");
    let elsewhere = t.location(&t.location_id(), "Elsewhere");
    for (body, field) in [
        (
            json!({ "terminal_application_id": "other" }),
            "terminal_application_id",
        ),
        (json!({ "location_id": elsewhere }), "location_id"),
        (
            json!({ "terminal_timeouts": { "transaction_timeout": 21 } }),
            "terminal_timeouts",
        ),
        (json!({ "local_ip_address": "fe80::1" }), "local_ip_address"),
    ] {
        let r = t
            .put(&format!("/v2/terminals/{tid}"), json!({ "terminal": body }))
            .expect(422);
        assert!(!r.errors(field).is_empty(), "{body}: {}", r.text);
    }
    // Nothing was changed by the refusals.
    let now = t.get(&format!("/v2/terminals/{tid}")).expect(200);
    assert_eq!(
        now.body["terminal"]["terminal_timeouts"]["transaction_timeout"],
        10
    );
    t.get("/v2/terminals?tip_enable=maybe").expect(422);
    t.get("/v2/terminals?expand=nothing").expect(422);
}

fn location_infos_list_terminals(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let empty = t.get(&format!("/v2/locationinfos/{loc}")).expect(200);
    assert_eq!(empty.body["locationinfo"]["terminals"], json!([]));
    let tid = id(
        &terminal(&t, json!({ "title": "Lane 1", "local_ip_address": "10.1.2.3" })).expect(201),
        "terminal",
    );
    let info = t
        .get(&format!("/v2/locationinfos/{loc}?expand=terminals"))
        .expect(200);
    let listed = &info.body["locationinfo"]["terminals"];
    assert_eq!(
        listed,
        &json!([{ "id": tid, "local_ip_address": "10.1.2.3", "port": 10009, "title": "Lane 1",
            "_links": { "self": { "href": format!("{}/v2/terminals/{tid}", app.base) } } }])
    );
    for p in info.body["locationinfo"]["product_transactions"]
        .as_array()
        .unwrap()
    {
        let expected = if p["payment_method"] == "cc" {
            listed.clone()
        } else {
            json!([])
        };
        assert_eq!(p["terminals"], expected, "{p}");
    }
    // Another location's terminals are its own.
    let child = t.location(&loc, "Branch");
    let info = t.get(&format!("/v2/locationinfos/{child}")).expect(200);
    assert_eq!(info.body["locationinfo"]["terminals"], json!([]));
}

fn device_terms_capability_and_retry(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    // Terms are shown on a connected device (`terminal-sim` plays the
    // cardholder): one whose cardholder declines, one who accepts, and a
    // terminal without a signature pad.
    let (declines, declines_secret) = terminal_with_secret(&t, json!({ "serial_number": "SN-NO" }));
    let (capable, capable_secret) = terminal_with_secret(&t, json!({ "serial_number": "SN-YES" }));
    let (no_pad, no_pad_secret) = terminal_with_secret(
        &t,
        json!({ "serial_number": "SN-NOPAD", "sig_capture_enable": 0 }),
    );
    let _no = Sim::start(&app.base, &declines, &declines_secret, &["--terms", "decline"]);
    let _yes = Sim::start(&app.base, &capable, &capable_secret, &["--terms", "accept"]);
    let _pad_less = Sim::start(&app.base, &no_pad, &no_pad_secret, &["--terms", "accept"]);
    let term = |terminal_id: &str, require: Value, api_id: Value| {
        t.post(
            "/v2/deviceterms",
            json!({ "deviceterm": { "location_id": loc, "terminal_id": terminal_id, "require_signature": require,
                "terms_conditions": "I agree to pay the above amount.", "device_terms_api_id": api_id } }),
        )
    };
    // The cardholder declines on the device.
    let first = term(&declines, json!(true), json!("terms-1")).expect(201);
    let d = &first.body["deviceterm"];
    assert_eq!(d["require_signature"], true);
    assert_eq!(d["reason_code_id"], 1601);
    assert_eq!(d["device_terms_api_id"], "terms-1");
    assert_eq!(d["device_term_api_id"], "terms-1");
    let first_id = id(&first, "deviceterm");

    // A terminal without signature capture: the reference's 422.
    let r = term(&no_pad, json!(1), json!("terms-2")).expect(422);
    assert_eq!(r.errors("require_signature"), ["Device is not signature capable"]);
    // Without a signature it may show terms.
    let unsigned_r = term(&no_pad, json!(0), json!(null)).expect(201);
    assert_eq!(unsigned_r.body["deviceterm"]["reason_code_id"], 1000);
    let unsigned = id(&unsigned_r, "deviceterm");
    // A terminal of another location, an inactive terminal, missing fields.
    let child = t.location(&loc, "Branch");
    let elsewhere = id(
        &t.post(
            "/v2/terminals",
            json!({ "terminal": { "location_id": child, "serial_number": "SN-B" } }),
        )
        .expect(201),
        "terminal",
    );
    assert!(!term(&elsewhere, json!(1), json!(null))
        .expect(422)
        .errors("terminal_id")
        .is_empty());
    t.put(
        &format!("/v2/terminals/{no_pad}"),
        json!({ "terminal": { "active": 0 } }),
    )
    .expect(200);
    assert!(!term(&no_pad, json!(0), json!(null))
        .expect(422)
        .errors("terminal_id")
        .is_empty());
    let r = t
        .post("/v2/deviceterms", json!({ "deviceterm": { "location_id": loc } }))
        .expect(422);
    for field in ["terminal_id", "require_signature", "terms_conditions"] {
        assert!(!r.errors(field).is_empty(), "{field}: {}", r.text);
    }
    let r = term(&capable, json!(1), json!("x".repeat(37))).expect(422);
    assert!(!r.errors("device_terms_api_id").is_empty());

    // A declined term is tried again by its api id (here on the terminal
    // whose cardholder accepts): the same record, now accepted and signed.
    let declined = t
        .get(&format!("/v2/deviceterms/{first_id}?expand=reason_code"))
        .expect(200);
    assert_eq!(declined.body["deviceterm"]["reason_code"]["id"], 1601);
    let retried = t
        .post(
            "/v2/deviceterms",
            json!({ "deviceterm": { "location_id": loc, "terminal_id": capable, "require_signature": 1,
                "terms_conditions": "Second try.", "device_terms_api_id": "terms-1" } }),
        )
        .expect(200);
    assert_eq!(id(&retried, "deviceterm"), first_id);
    assert_eq!(retried.body["deviceterm"]["reason_code_id"], 1000);
    assert_eq!(retried.body["deviceterm"]["terms_conditions"], "Second try.");
    // An accepted term is final.
    assert!(!term(&capable, json!(1), json!("terms-1"))
        .expect(422)
        .errors("device_terms_api_id")
        .is_empty());

    // Reads: default sort created desc, filters, expands; no PUT or DELETE.
    let list = t.get("/v2/deviceterms").expect(200);
    assert_eq!(list.body["meta"]["sort"]["attributes"]["created_ts"], "desc");
    assert_eq!(ids(&list, "deviceterms").len(), 2);
    let both = {
        let mut v = vec![unsigned.clone(), first_id.clone()];
        v.sort_by_key(|x| std::cmp::Reverse(x.clone()));
        v
    };
    for (filter, expected) in [
        (format!("terminal_id={no_pad}"), vec![unsigned.clone()]),
        (format!("terminal_id={capable}"), vec![first_id.clone()]),
        ("device_terms_api_id=terms-1".to_string(), vec![first_id.clone()]),
        ("reason_code_id=1000".to_string(), both.clone()),
        ("reason_code_id=1601".to_string(), vec![]),
        (format!("created_user_id={}", t.user_id()), both.clone()),
        ("created_ts=today".to_string(), both.clone()),
    ] {
        let mut got = ids(
            &t.get(&format!("/v2/deviceterms?{filter}")).expect(200),
            "deviceterms",
        );
        got.sort_by_key(|x| std::cmp::Reverse(x.clone()));
        assert_eq!(got, expected, "{filter}");
    }
    let e = t
        .get(&format!(
            "/v2/deviceterms/{first_id}?expand=created_user,location,terminal,reason_code,signature"
        ))
        .expect(200);
    let e = &e.body["deviceterm"];
    assert_eq!(e["terminal"]["id"], json!(capable));
    assert!(e["terminal"].get("terminal_secret").is_none());
    assert_eq!(e["location"]["id"], json!(loc));
    assert_eq!(e["created_user"]["id"], json!(t.user_id()));
    assert_eq!(
        e["reason_code"],
        json!({ "id": 1000, "title": "Approved and complete" })
    );
    assert_eq!(e["signature"]["resource"], "DeviceTerm");
    assert_eq!(e["signature"]["resource_id"], json!(first_id));
    let unsigned_e = t
        .get(&format!("/v2/deviceterms/{unsigned}?expand=signature"))
        .expect(200);
    assert_eq!(unsigned_e.body["deviceterm"]["signature"], Value::Null);
    t.put(
        &format!("/v2/deviceterms/{first_id}"),
        json!({ "deviceterm": {} }),
    )
    .expect(405);
    t.delete(&format!("/v2/deviceterms/{first_id}")).expect(405);
    // A terminal with device terms stays (their record).
    let r = t.delete(&format!("/v2/terminals/{capable}")).expect(409);
    assert!(!r.errors("id").is_empty());
}

fn signatures_are_images_on_records(app: &TestApp) {
    let t = app.bootstrap();
    let contact = t.contact(json!({ "first_name": "Sig" }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let vault = id(
        &t.post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc", "contact_id": contact,
                "account_number": "4111111111111111", "exp_date": "1240" } }),
        )
        .expect(201),
        "accountvault",
    );
    let sale = id(
        &t.post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "5.00",
                "account_vault_id": vault } }),
        )
        .expect(201),
        "transaction",
    );
    let sign = |resource: &str, resource_id: &str, image: &str| {
        t.post(
            "/v2/signatures",
            json!({ "signature": { "resource": resource, "resource_id": resource_id, "signature": image } }),
        )
    };
    let on_vault = sign("AccountVault", &vault, &png()).expect(201);
    let s = &on_vault.body["signature"];
    assert_eq!(s["resource"], "AccountVault");
    assert_eq!(s["resource_id"], json!(vault));
    assert_eq!(s["signature"], json!(png()));
    assert!(s["created_ts"].is_i64() && s["modified_ts"].is_i64());
    assert!(s.get("location_id").is_none());
    let vault_sig = id(&on_vault, "signature");
    // A data URL is taken, stored as its base64.
    let on_sale = sign("Transaction", &sale, &format!("data:image/png;base64,{}", png())).expect(201);
    assert_eq!(on_sale.body["signature"]["signature"], json!(png()));
    let sale_sig = id(&on_sale, "signature");

    // The records show their signature.
    let v = t
        .get(&format!("/v2/accountvaults/{vault}?expand=signature"))
        .expect(200);
    assert_eq!(v.body["accountvault"]["signature"]["id"], json!(vault_sig));
    let x = t
        .get(&format!("/v2/transactions/{sale}?expand=signature"))
        .expect(200);
    assert_eq!(x.body["transaction"]["signature"]["id"], json!(sale_sig));

    // Refusals: not an image, too large, not base64, a record not there
    // or of another kind, a kind not signable.
    let jpeg_header = base64::engine::general_purpose::STANDARD.encode([0xFF, 0xD8, 0xFF, 0xE0]);
    sign("Transaction", &sale, &jpeg_header).expect(201);
    for (resource, rid, image, field) in [
        (
            "AccountVault",
            vault.as_str(),
            base64::engine::general_purpose::STANDARD.encode(b"%PDF-1.4"),
            "signature",
        ),
        (
            "AccountVault",
            vault.as_str(),
            "bm90IGFuIGltYWdl".to_string(),
            "signature",
        ),
        ("AccountVault", vault.as_str(), "***".to_string(), "signature"),
        (
            "AccountVault",
            vault.as_str(),
            {
                let mut big = b"\x89PNG\r\n\x1a\n".to_vec();
                big.resize(256 * 1024 + 1, 7);
                base64::engine::general_purpose::STANDARD.encode(big)
            },
            "signature",
        ),
        ("AccountVault", sale.as_str(), png(), "resource_id"),
        ("Recurring", vault.as_str(), png(), "resource_id"),
        (
            "Transaction",
            "0123456789abcdef0123456789abcdef",
            png(),
            "resource_id",
        ),
        ("Contact", contact.as_str(), png(), "resource"),
        ("DeviceTerm", vault.as_str(), png(), "resource"),
    ] {
        let r = sign(resource, rid, &image).expect(422);
        assert!(!r.errors(field).is_empty(), "{resource} {field}: {}", r.text);
    }
    let r = t.post("/v2/signatures", json!({ "signature": {} })).expect(422);
    for field in ["resource", "resource_id", "signature"] {
        assert!(!r.errors(field).is_empty(), "{field}");
    }

    // Reads: id desc, filters; no PUT or DELETE.
    let list = t.get("/v2/signatures").expect(200);
    assert_eq!(list.body["meta"]["sort"]["attributes"]["id"], "desc");
    assert_eq!(ids(&list, "signatures").len(), 3);
    assert_eq!(
        ids(
            &t.get(&format!("/v2/signatures?resource_id={vault}")).expect(200),
            "signatures"
        ),
        vec![vault_sig.clone()]
    );
    assert_eq!(
        ids(
            &t.get("/v2/signatures?resource=AccountVault").expect(200),
            "signatures"
        ),
        vec![vault_sig.clone()]
    );
    t.get(&format!("/v2/signatures/{sale_sig}")).expect(200);
    t.put(
        &format!("/v2/signatures/{sale_sig}"),
        json!({ "signature": { "resource": "Transaction" } }),
    )
    .expect(405);
    t.delete(&format!("/v2/signatures/{sale_sig}")).expect(405);
    t.get("/v2/signatures?expand=location").expect(422);
    // Another tenant sees none of it.
    let other = app.bootstrap();
    other.get(&format!("/v2/signatures/{vault_sig}")).expect(404);
    assert!(ids(&other.get("/v2/signatures").expect(200), "signatures").is_empty());
}
